"""Synthetic campaigns in the documented on-disk layout.

Writes ``<root>/<campaign>/campaign.json``, ``jobs/<run-id>.sh``, ``runs/<run-id>/{run.json,
logs/rank-<k>.jsonl, slurm-<jobid>.out, slurm-<jobid>.err}`` exactly as the planner,
renderer and workloads do (``docs/run-config.md``, ``docs/log-format.md``), with a
simple but realistic timing model. Used by the tests and by
``benchmarks/collect_report.py``; it never touches a deep-learning framework.

Two levels:

- :func:`write_campaign` takes a list of :class:`SynthRun` (every knob explicit, used by
  the hand-computed test fixtures: ``step_times`` fixes each rank's step durations);
- :func:`demo_campaign` and :func:`benchmark_campaign` build whole realistic campaigns.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

T0 = 1_790_000_000.0  # start of the synthetic clock (Unix seconds)

WORKLOAD_OF = {
    "pytorch": "pytorch",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "horovod": "horovod_torch",
    "mxnet": "mxnet",
}
BACKEND_OF = {
    "pytorch": "nccl",
    "tensorflow": "ring",
    "keras": "ring",
    "horovod": "nccl",
    "mxnet": "dist_sync",
}
FRAMEWORK_VERSION = {
    "pytorch": "2.3.1+cu121",
    "tensorflow": "2.16.1",
    "keras": "3.3.3",
    "horovod": "0.28.1",
    "mxnet": "1.9.1",
}
# per-framework communication overhead per doubling of devices (fraction of compute time)
COMM_OVERHEAD = {
    "pytorch": 0.035,
    "tensorflow": 0.06,
    "keras": 0.07,
    "horovod": 0.03,
    "mxnet": 0.09,
}
# samples/s of one device at fp32 for a few models
DEVICE_RATE = {"resnet50": 380.0, "vgg16": 230.0, "vgg19": 200.0, "lenet": 25000.0}


@dataclass
class SynthRun:
    """One planned run and how its ranks behave."""

    framework: str = "pytorch"
    model: str = "resnet50"
    mode: str = "throughput"  # throughput | convergence | allreduce
    nodes: int = 1
    tasks_per_node: int = 1
    batch_size: int = 32  # per device
    repeat: int = 0
    precision: str = "fp32"
    scaling: str = "weak"
    device: str = "gpu"
    lr: float = 0.1
    warmup_epochs: float = 0.0
    lr_scaling: str = "linear"
    tag: str = ""  # extra run-id component, e.g. "-wu" for the warmup arm of a study
    workload: Optional[str] = None
    data_kind: str = "synthetic"
    # timing
    warmup_steps: int = 2
    measure_steps: int = 10
    step_time: Optional[float] = None  # mean measured step duration (s); None: model
    step_times: Optional[Dict[int, Sequence[float]]] = None  # rank -> exact durations
    gap: float = 0.0  # idle time between a step's end and the next step's start (s)
    noise: float = 0.02  # log-normal sigma of step durations
    compute_fraction: Optional[float] = None  # log compute_s = this x step, comm_s the rest
    repeat_noise: float = 0.005  # log-normal sigma of the whole run's speed
    stragglers: Dict[int, float] = field(default_factory=dict)  # rank -> slowdown factor
    rank_offsets: Dict[int, float] = field(default_factory=dict)  # rank -> start offset (s)
    start: Optional[float] = None  # Unix time of the first step; None: derived
    # convergence
    epochs: int = 0
    target_accuracy: Optional[float] = None
    # allreduce
    allreduce_sizes: Sequence[int] = ()
    # faults
    missing_ranks: Tuple[int, ...] = ()  # no log file at all
    killed_ranks: Tuple[int, ...] = ()  # killed mid-run: no summary, truncated last line
    failed_ranks: Tuple[int, ...] = ()  # Python exception: error record, no summary
    not_run: bool = False  # job never started: run dir without logs
    slurm_state: Optional[str] = None  # None: COMPLETED, or FAILED when a rank failed
    job_id: Optional[int] = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.world_size

    @property
    def group(self) -> str:
        return (
            f"{self.framework}-{self.model}-n{self.nodes}x{self.tasks_per_node}"
            f"-b{self.batch_size}{self.tag}"
        )

    @property
    def run_id(self) -> str:
        return f"{self.group}-r{self.repeat}"

    @property
    def peak_lr(self) -> float:
        if self.lr_scaling == "linear":
            return self.lr * self.global_batch_size / 256
        if self.lr_scaling == "sqrt":
            return self.lr * math.sqrt(self.global_batch_size / 256)
        return self.lr


def manifest_entry(run: SynthRun) -> dict:
    """The run's entry in campaign.json."""
    return {
        "run_id": run.run_id,
        "framework": run.framework,
        "workload": run.workload or WORKLOAD_OF.get(run.framework, run.framework),
        "model": run.model,
        "mode": run.mode,
        "nodes": run.nodes,
        "tasks_per_node": run.tasks_per_node,
        "gpus_per_node": run.tasks_per_node if run.device == "gpu" else 0,
        "world_size": run.world_size,
        "batch_size": run.batch_size,
        "global_batch_size": run.global_batch_size,
        "lr": run.peak_lr,
        "repeat": run.repeat,
        "precision": run.precision,
        "data": {"kind": run.data_kind, "path": None, "samples": 50000},
        "scaling": run.scaling,
        "group": run.group,
        "run_dir": f"runs/{run.run_id}",
        "script": f"jobs/{run.run_id}.sh",
    }


def run_config(run: SynthRun, campaign: str, run_dir: Path) -> dict:
    """The run's run.json (format ddlbench-run/1)."""
    e = manifest_entry(run)
    return {
        "format": "ddlbench-run/1",
        "run_id": run.run_id,
        "campaign": campaign,
        "framework": run.framework,
        "workload": e["workload"],
        "framework_options": {"backend": BACKEND_OF.get(run.framework, "auto")},
        "mode": run.mode,
        "model": run.model,
        "data": e["data"],
        "image_size": 28 if run.model == "lenet" else 224,
        "num_classes": 10 if run.model == "lenet" else 1000,
        "device": run.device,
        "precision": run.precision,
        "nodes": run.nodes,
        "tasks_per_node": run.tasks_per_node,
        "world_size": run.world_size,
        "batch_size": run.batch_size,
        "global_batch_size": run.global_batch_size,
        "steps": {"warmup": run.warmup_steps, "measure": run.measure_steps},
        "epochs": run.epochs or None,
        "target_accuracy": run.target_accuracy,
        "optimizer": {
            "name": "sgd",
            "lr": run.peak_lr,
            "base_lr": run.lr,
            "momentum": 0.9,
            "weight_decay": 5e-5,
            "nesterov": False,
        },
        "lr_schedule": {
            "scaling": run.lr_scaling,
            "base_batch_size": 256,
            "warmup_epochs": run.warmup_epochs,
            "decay_epochs": [],
            "decay_factor": 0.1,
        },
        "seed": 1234,
        "repeat": run.repeat,
        "allreduce": {"min_bytes": 1024, "max_bytes": 1 << 28, "iters": 20, "warmup": 5},
        "log_dir": str((run_dir / "logs").resolve()),
        "mllog": False,
    }


def _modelled_step_time(run: SynthRun) -> float:
    rate = DEVICE_RATE.get(run.model, 300.0) * (2.0 if run.precision == "amp" else 1.0)
    if run.device == "cpu":
        rate /= 20.0
    compute = run.batch_size / rate
    n = run.world_size
    comm = 0.0
    if n > 1:
        # intra-node doublings are cheaper than inter-node ones
        intra = math.log2(max(run.tasks_per_node, 1))
        inter = math.log2(max(run.nodes, 1))
        base = COMM_OVERHEAD.get(run.framework, 0.05)
        comm = base * (0.5 * intra + 1.5 * inter) + 0.0015 * n
    return compute * (1.0 + comm)


def _hosts(run: SynthRun) -> List[str]:
    return [f"gpu{node + 1:03d}" for node in range(run.nodes)]


def _step_lines(
    steps: np.ndarray,
    epochs: np.ndarray,
    warmup: int,
    t_start: np.ndarray,
    t_end: np.ndarray,
    samples: int,
    loss: np.ndarray,
    lr: float,
    compute: Optional[np.ndarray] = None,
) -> str:
    """Step records formatted like ``json.dumps`` would (fast: no dict per line).

    ``compute``: compute time per step (the rest of the step is logged as ``comm_s``)."""
    lr_s = repr(float(lr))
    parts = []
    if compute is None:
        split = ['null, "comm_s": null'] * len(steps)
    else:
        split = [
            f'{c!r}, "comm_s": {(te - ts) - c!r}'
            for c, ts, te in zip(compute.tolist(), t_start.tolist(), t_end.tolist())
        ]
    for s, e, ts, te, lo, cs in zip(
        steps.tolist(), epochs.tolist(), t_start.tolist(), t_end.tolist(), loss.tolist(), split
    ):
        phase = "warmup" if s < warmup else "measure"
        parts.append(
            f'{{"type": "step", "step": {s}, "epoch": {e}, "phase": "{phase}", '
            f'"t_start": {ts!r}, "t_end": {te!r}, "samples": {samples}, "loss": {lo!r}, '
            f'"lr": {lr_s}, "compute_s": {cs}}}\n'
        )
    return "".join(parts)


def _accuracy_curve(run: SynthRun, epochs: int) -> List[float]:
    """Top-1 accuracy per epoch: large global batches lose accuracy unless warmed up."""
    gbs = run.global_batch_size
    penalty = 0.0
    if gbs > 1024:
        penalty = 0.04 * math.log2(gbs / 1024) * (0.25 if run.warmup_epochs > 0 else 1.0)
    top = max(0.05, 0.76 - penalty)
    tau = 2.0 + 0.5 * math.log2(max(gbs / 256, 1.0))
    return [round(top * (1.0 - math.exp(-(e + 1) / tau)), 6) for e in range(epochs)]


def write_rank_log(path: Path, lines: str, truncate: bool = False) -> None:
    """Write one rank's log; ``truncate`` cuts the last line in half (a killed rank)."""
    if truncate:
        body = lines.rstrip("\n")
        cut = body.rfind("\n") + 1
        last = body[cut:]
        lines = body[:cut] + last[: max(1, len(last) // 2)]
    path.write_text(lines, encoding="utf-8")


def write_run(campaign_dir: Path, campaign: str, run: SynthRun, index: int, rng) -> None:
    """Write one run's job script and, if it ran, its folder (run.json, logs, Slurm output)."""
    run_dir = campaign_dir / "runs" / run.run_id
    (campaign_dir / "jobs").mkdir(exist_ok=True)
    (campaign_dir / "jobs" / f"{run.run_id}.sh").write_text(
        "#!/bin/bash\n"
        f"#SBATCH --job-name={run.run_id}\n#SBATCH --nodes={run.nodes}\n"
        f"#SBATCH --ntasks-per-node={run.tasks_per_node}\n"
        f"srun python -m ddlbench.workloads.{manifest_entry(run)['workload']} run.json\n"
    )
    job_id = run.job_id if run.job_id is not None else 1000 + index
    if run.not_run:  # rendered, never started: no run folder yet
        return
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(run_config(run, campaign, run_dir), indent=2))
    hosts = _hosts(run)
    nodelist = hosts[0] if len(hosts) == 1 else f"gpu[{hosts[0][3:]}-{hosts[-1][3:]}]"
    n = run.world_size
    workload = manifest_entry(run)["workload"]
    start = run.start if run.start is not None else T0 + 3600.0 * index
    speed = float(rng.lognormal(0.0, run.repeat_noise)) if run.repeat_noise else 1.0
    mean_step = (run.step_time or _modelled_step_time(run)) * speed
    convergence = run.mode == "convergence"
    allreduce = run.mode == "allreduce"
    n_steps = 0 if allreduce else run.warmup_steps + run.measure_steps
    steps_per_epoch = max(1, run.measure_steps // max(run.epochs, 1)) if convergence else 10**9
    # synchronous data parallelism: every step ends when the slowest rank ends it
    if run.step_times is None and n_steps:
        base = mean_step * rng.lognormal(0.0, run.noise, size=(n_steps, n))
        for r, f in run.stragglers.items():
            base[:, r] *= f
    acc = _accuracy_curve(run, run.epochs) if convergence else []
    param_hash = hashlib.sha256(f"{campaign}/{run.run_id}".encode()).hexdigest()
    stdout_lines = []
    stderr_lines = []
    for rank in range(n):
        if rank in run.missing_ranks:
            continue
        node = rank // run.tasks_per_node
        meta = {
            "type": "meta",
            "format_version": 1,
            "run_id": run.run_id,
            "campaign": campaign,
            "framework": run.framework,
            "workload": workload,
            "framework_version": FRAMEWORK_VERSION.get(run.framework, "1.0"),
            "mode": run.mode,
            "rank": rank,
            "local_rank": rank % run.tasks_per_node,
            "node_rank": node,
            "world_size": n,
            "host": hosts[node],
            "pid": 4000 + rank,
            "device": run.device,
            "device_name": "NVIDIA A100-SXM4-40GB" if run.device == "gpu" else "AMD EPYC 7742",
            "model": run.model,
            "param_count": 25557032 if run.model == "resnet50" else 61706,
            "batch_size": run.batch_size,
            "global_batch_size": run.global_batch_size,
            "precision": run.precision,
            "backend": BACKEND_OF.get(run.framework, "auto"),
            "repeat": run.repeat,
            "slurm_job_id": str(job_id),
            "slurm_nodelist": nodelist,
            "time": start - 5.0,
            "ddlbench_version": "0.1.0",
            "python_version": "3.11.7",
        }
        out = [json.dumps(meta) + "\n"]
        t_end_last = start
        measured = 0
        t_first = None
        if n_steps:
            if run.step_times is not None:
                durs = np.asarray(run.step_times[rank], dtype=float)
                n_rank = len(durs)
                t_start = np.empty(n_rank)
                t = start + run.rank_offsets.get(rank, 0.0)
                for i, d in enumerate(durs):
                    t_start[i] = t
                    t = t + d + run.gap
                t_end = t_start + durs
            else:
                n_rank = n_steps
                durs = base[:, rank]
                wall = base.max(axis=1) + run.gap
                starts = start + np.concatenate(([0.0], np.cumsum(wall)[:-1]))
                t_start = starts + run.rank_offsets.get(rank, 0.0)
                t_end = t_start + durs
            steps = np.arange(n_rank)
            if convergence:
                epochs = np.maximum(steps - run.warmup_steps, 0) // steps_per_epoch
            else:
                epochs = np.zeros(n_rank, dtype=int)
            loss = np.round(6.9 * np.exp(-steps / max(n_rank, 1) * 1.5) + 0.1, 4)
            if convergence:
                # evals interleave with the steps: write epoch by epoch
                buf = []
                eval_elapsed = []
                for ep in range(run.epochs):
                    sel = (epochs == ep) if ep < run.epochs - 1 else (epochs >= ep)
                    idx = np.nonzero(sel)[0]
                    if len(idx):
                        buf.append(
                            _step_lines(
                                steps[idx],
                                epochs[idx],
                                run.warmup_steps,
                                t_start[idx],
                                t_end[idx],
                                run.batch_size,
                                loss[idx],
                                run.peak_lr,
                            )
                        )
                        te = float(t_end[idx[-1]])
                    else:
                        te = float(t_end_last)
                    eval_elapsed.append(te - start)
                    buf.append(
                        json.dumps(
                            {
                                "type": "eval",
                                "epoch": ep,
                                "t": te + 1.0,
                                "elapsed_s": te - start,
                                "accuracy": acc[ep],
                                "loss": round(2.5 * (1 - acc[ep]), 4),
                                "samples": 10000,
                            }
                        )
                        + "\n"
                    )
                out.append("".join(buf))
            else:
                compute = None
                if run.compute_fraction is not None:
                    compute = (t_end - t_start) * run.compute_fraction
                out.append(
                    _step_lines(
                        steps,
                        epochs,
                        run.warmup_steps,
                        t_start,
                        t_end,
                        run.batch_size,
                        loss,
                        run.peak_lr,
                        compute,
                    )
                )
            meas = steps >= run.warmup_steps
            measured = int(meas.sum())
            t_end_last = float(t_end[-1])
            if measured:
                t_first = float(t_start[meas][0])
        if allreduce:
            t = start
            for size in run.allreduce_sizes:
                lat = 20e-6 * (1 + math.log2(n)) if n > 1 else 2e-6
                bw = 90e9 if run.nodes == 1 else 22e9
                factor = 2 * (n - 1) / n if n > 1 else 1.0
                time_s = lat + size * factor / bw
                time_s *= float(rng.lognormal(0.0, 0.01))
                algbw = size / time_s / 1e9
                out.append(
                    json.dumps(
                        {
                            "type": "allreduce",
                            "bytes": int(size),
                            "dtype": "float32",
                            "iters": 20,
                            "time_s": time_s,
                            "algbw_gbps": algbw,
                            "busbw_gbps": algbw * (2 * (n - 1) / n),
                        }
                    )
                    + "\n"
                )
                t += time_s * 25
            t_end_last = t
        if rank in run.failed_ranks:
            out.append(
                json.dumps(
                    {
                        "type": "error",
                        "t": t_end_last + 0.5,
                        "message": "RuntimeError: NCCL error: unhandled system error",
                        "traceback": 'Traceback (most recent call last):\n  File "x.py"\n'
                        "RuntimeError: NCCL error: unhandled system error\n",
                    }
                )
                + "\n"
            )
            stderr_lines.append(f"[rank {rank}] RuntimeError: NCCL error: unhandled system error")
            write_rank_log(run_dir / "logs" / f"rank-{rank}.jsonl", "".join(out))
            continue
        if rank in run.killed_ranks:
            stderr_lines.append(
                f"slurmstepd: error: *** STEP {job_id}.0 ON {hosts[node]} CANCELLED"
            )
            write_rank_log(run_dir / "logs" / f"rank-{rank}.jsonl", "".join(out), truncate=True)
            continue
        samples_measured = measured * run.batch_size
        mtime = (t_end_last - t_first) if t_first is not None else 0.0
        summary = {
            "type": "summary",
            "t": t_end_last + 0.1,
            "status": "ok",
            "steps_measured": measured,
            "samples_measured": samples_measured,
            "measure_time_s": mtime,
            "throughput": samples_measured / mtime if mtime > 0 else None,
            "final_loss": float(loss[-1]) if n_steps else None,
            "final_accuracy": acc[-1] if acc else None,
            "best_accuracy": max(acc) if acc else None,
            "time_to_accuracy_s": None,
            "param_sum": 1234.5,
            "param_sha256": param_hash,
        }
        if convergence and run.target_accuracy is not None:
            hit = [i for i, a in enumerate(acc) if a >= run.target_accuracy]
            if hit:
                summary["time_to_accuracy_s"] = eval_elapsed[hit[0]]
            else:
                summary["status"] = "target_not_reached"
        out.append(json.dumps(summary) + "\n")
        write_rank_log(run_dir / "logs" / f"rank-{rank}.jsonl", "".join(out))
    stdout_lines.append(f"ddlbench: run {run.run_id} on {nodelist}")
    (run_dir / f"slurm-{job_id}.out").write_text("\n".join(stdout_lines) + "\n")
    (run_dir / f"slurm-{job_id}.err").write_text("".join(line + "\n" for line in stderr_lines))


def slurm_state(run: SynthRun) -> str:
    if run.slurm_state:
        return run.slurm_state
    if run.not_run:
        return "PENDING"
    if run.failed_ranks:
        return "FAILED"
    if run.killed_ranks:
        return "TIMEOUT"
    return "COMPLETED"


def run_states(runs: Sequence[SynthRun]):
    """A run-state table as the campaign store will provide (see ``collect.states``)."""
    import pandas as pd

    rows = []
    for i, run in enumerate(runs):
        state = slurm_state(run)
        start = run.start if run.start is not None else T0 + 3600.0 * i
        rows.append(
            {
                "run_id": run.run_id,
                "attempt": 1,
                "job_id": str(run.job_id if run.job_id is not None else 1000 + i),
                "state": state,
                "exit_code": {"COMPLETED": 0, "PENDING": None}.get(state, 1),
                "start": None if run.not_run else start - 10,
                "end": None if run.not_run else start + 600,
                "nodelist": ",".join(_hosts(run)),
            }
        )
    return pd.DataFrame(rows)


def write_campaign(
    root: Path,
    name: str,
    runs: Sequence[SynthRun],
    *,
    seed: int = 0,
    created: str = "2026-09-21T10:00:00+00:00",
) -> Path:
    """Write a whole campaign folder under ``root`` and return its path."""
    campaign_dir = Path(root) / name
    campaign_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    manifest = {
        "campaign": name,
        "created": created,
        "ddlbench_version": "0.1.0",
        "spec": {"name": name, "synthetic": True},
        "cluster": {"name": "synthcluster", "partition": "gpu", "gpus_per_node": 4},
        "runs": [manifest_entry(r) for r in runs],
    }
    (campaign_dir / "campaign.json").write_text(json.dumps(manifest, indent=2))
    for i, run in enumerate(runs):
        write_run(campaign_dir, name, run, i, rng)
    return campaign_dir


def sweep(
    frameworks: Sequence[str] = ("pytorch", "horovod"),
    scales: Sequence[Tuple[int, int]] = ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4)),
    repeats: int = 3,
    **kw,
) -> List[SynthRun]:
    """Runs of a scaling sweep: every framework at every (nodes, tasks_per_node), repeated."""
    return [
        SynthRun(framework=fw, nodes=nn, tasks_per_node=tp, repeat=r, **kw)
        for fw in frameworks
        for nn, tp in scales
        for r in range(repeats)
    ]


def demo_campaign(root: Path, name: str = "demo", seed: int = 0) -> Path:
    """A realistic mixed campaign: scaling sweeps, a large-batch study, allreduce, faults."""
    runs = sweep(
        ("pytorch", "horovod", "tensorflow"),
        ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4), (8, 4)),
        repeats=3,
        batch_size=64,
        measure_steps=40,
        warmup_steps=5,
    )
    # one noisy configuration, one straggler
    for r in runs:
        if r.framework == "tensorflow" and r.nodes == 2:
            r.repeat_noise = 0.12
        if r.framework == "pytorch" and r.nodes == 8 and r.repeat == 0:
            r.stragglers = {13: 1.35}
    # a failed and an incomplete run (extra repeats, so the sweep stays usable)
    runs.append(
        SynthRun("pytorch", nodes=4, tasks_per_node=4, batch_size=64, repeat=3, failed_ranks=(5,))
    )
    runs.append(
        SynthRun(
            "horovod",
            nodes=4,
            tasks_per_node=4,
            batch_size=64,
            repeat=3,
            killed_ranks=(2,),
            missing_ranks=(15,),
        )
    )
    # large-batch study: lenet, growing global batch, with and without warmup
    for nn, tp in ((1, 1), (1, 4), (2, 4), (4, 4), (8, 4)):
        for wu in (0.0, 5.0):
            runs.append(
                SynthRun(
                    "pytorch",
                    model="lenet",
                    mode="convergence",
                    nodes=nn,
                    tasks_per_node=tp,
                    batch_size=256,
                    warmup_epochs=wu,
                    tag="-wu" if wu else "",
                    epochs=12,
                    measure_steps=120,
                    warmup_steps=0,
                    target_accuracy=0.7,
                )
            )
    sizes = [1 << k for k in range(10, 29, 2)]
    for nn, tp in ((1, 4), (2, 4), (4, 4)):
        for fw in ("pytorch", "horovod"):
            runs.append(
                SynthRun(
                    fw,
                    model="allreduce",
                    mode="allreduce",
                    nodes=nn,
                    tasks_per_node=tp,
                    batch_size=1,
                    allreduce_sizes=sizes,
                    workload="allreduce_torch" if fw == "pytorch" else "allreduce_horovod",
                )
            )
    return write_campaign(root, name, runs, seed=seed)


def benchmark_campaign(
    root: Path, name: str = "bench", ranks: int = 512, steps: int = 2000, seed: int = 0
) -> Path:
    """About ``ranks * steps`` step records: two frameworks' weak-scaling sweeps."""
    scales: List[Tuple[int, int]] = []
    total = 0
    nodes = 1
    # 4 tasks per node; sweeps of 1, 2, 4, ... nodes until the rank budget is used up
    while True:
        need = 2 * 4 * nodes
        if total + need > ranks:
            break
        scales.append((nodes, 4))
        total += need
        nodes *= 2
    runs = sweep(("pytorch", "horovod"), scales, repeats=1)
    left = ranks - total
    rep = 1
    while left > 0:  # the remainder: more repeats of the smallest configuration
        tp = min(left, 4)
        runs.append(SynthRun("pytorch", nodes=1, tasks_per_node=tp, repeat=rep))
        left -= tp
        rep += 1
    for r in runs:
        r.warmup_steps = 10
        r.measure_steps = steps - 10
    return write_campaign(root, name, runs, seed=seed)
