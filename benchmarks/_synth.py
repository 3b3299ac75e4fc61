"""Synthetic campaigns with known truth, written by ddlbench's own writers.

The campaign folder comes from the real renderer (:func:`ddlbench.render.campaign.render_campaign`
over real :class:`ddlbench.plan.Run` objects): ``campaign.json``, ``spec.yaml``, ``cluster.yaml``
and ``jobs/<run-id>.sh``. A run that "ran" gets the ``run.json`` its job script carries (what the
job writes when it starts) and rank logs written through the workloads' own
:class:`ddlbench.workloads.common.logger.RankLogger` and ``build_meta``, with the time stamps and
values injected from a simple, realistic timing model (or given exactly). Nothing here spells a
file format by hand, so the synthetic campaigns cannot drift from what ddlbench writes. Used by
``benchmarks/collect_report.py`` and, through ``tests/support/synth.py``, by the tests; it never
touches a deep-learning framework. Needs the checkout on ``sys.path`` (for ``ddlbench``).

Two levels:

- :func:`write_campaign` takes a list of :class:`SynthRun` (every knob explicit, used by
  the hand-computed test fixtures: ``step_times`` fixes each rank's step durations);
- :func:`benchmark_campaign` (and ``tests/support/synth.py``'s ``demo_campaign``) build whole
  realistic campaigns.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ddlbench.campaign import states
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.frameworks import get_launcher
from ddlbench.plan import Plan, Run
from ddlbench.plan.planner import scaled_lr
from ddlbench.render.campaign import read_run_config, render_campaign
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.experiment import ExperimentSpec
from ddlbench.workloads.common.env import RankInfo
from ddlbench.workloads.common.logger import RankLogger, build_meta

T0 = 1_790_000_000.0  # start of the synthetic clock (Unix seconds)

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
#: the model a spec names for an allreduce sweep (its runs are labelled "allreduce")
ALLREDUCE_SPEC_MODEL = "resnet50"


@dataclass
class SynthRun:
    """One planned run and how its ranks behave."""

    framework: str = "pytorch"
    model: str = "resnet50"
    mode: str = "throughput"  # throughput | convergence | allreduce
    nodes: int = 1
    tasks_per_node: int = 1
    batch_size: int = 32  # per device (strong scaling: global batch / devices)
    repeat: int = 0
    precision: str = "fp32"
    scaling: str = "weak"
    device: str = "gpu"
    lr: float = 0.1
    warmup_epochs: float = 0.0
    lr_scaling: str = "linear"
    tag: str = ""  # variant label as a run-id suffix, e.g. "-wu" for the warmup arm of a study
    workload: Optional[str] = None  # checked against the launcher's choice when given
    data_kind: str = "synthetic"
    transport: Optional[str] = None  # network.transport: rdma | tcp
    # timing
    warmup_steps: int = 2
    measure_steps: int = 10
    step_time: Optional[float] = None  # mean measured step duration (s); None: model
    step_times: Optional[Dict[int, Sequence[float]]] = None  # rank -> exact durations
    gap: float = 0.0  # idle time between a step's end and the next step's start (s)
    noise: float = 0.02  # log-normal sigma of step durations
    compute_fraction: Optional[float] = None  # log compute_s = this x step, comm_s the rest
    compute_stragglers: Dict[int, float] = field(default_factory=dict)  # rank -> compute x
    repeat_noise: float = 0.005  # log-normal sigma of the whole run's speed
    stragglers: Dict[int, float] = field(default_factory=dict)  # rank -> slowdown factor
    rank_offsets: Dict[int, float] = field(default_factory=dict)  # rank -> start offset (s)
    start: Optional[float] = None  # Unix time of the first step; None: derived
    # what ran when it differs from the plan (the rank meta records say so)
    ran: Dict[str, Any] = field(default_factory=dict)  # e.g. {"precision": "fp32"}
    # convergence
    epochs: int = 0
    target_accuracy: Optional[float] = None
    # allreduce
    allreduce_sizes: Sequence[int] = ()
    # faults
    missing_ranks: Tuple[int, ...] = ()  # no log file at all
    killed_ranks: Tuple[int, ...] = ()  # killed mid-run: no summary, truncated last line
    failed_ranks: Tuple[int, ...] = ()  # Python exception: error record, no summary
    not_run: bool = False  # job never started: no run folder
    slurm_state: Optional[str] = None  # None: COMPLETED, or FAILED when a rank failed
    job_id: Optional[int] = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.tasks_per_node

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.world_size

    @property
    def variant(self) -> Optional[str]:
        return self.tag.lstrip("-") or None

    @property
    def group(self) -> str:
        """The planner's group name (``ddlbench.plan.planner``)."""
        if self.mode == "allreduce":
            words = [self.framework, "allreduce", f"n{self.nodes}x{self.tasks_per_node}"]
        elif self.scaling == "strong":
            words = [self.framework, self.model, f"n{self.nodes}x{self.tasks_per_node}"]
            words.append(f"g{self.global_batch_size}")
        else:
            words = [self.framework, self.model, f"n{self.nodes}x{self.tasks_per_node}"]
            words.append(f"b{self.batch_size}")
        if self.variant:
            words.append(self.variant)
        return "-".join(words)

    @property
    def run_id(self) -> str:
        return f"{self.group}-r{self.repeat}"

    @property
    def peak_lr(self) -> float:
        return scaled_lr(self.lr, self.global_batch_size, self.lr_scaling, 256)

    @property
    def spec_model(self) -> str:
        return ALLREDUCE_SPEC_MODEL if self.mode == "allreduce" else self.model


def plan_run(run: SynthRun) -> Run:
    """The planner's :class:`Run` for a synthetic run (same fields, same formulas)."""
    launcher = get_launcher(run.framework)
    options = launcher.options()
    workload = launcher.workload(run.mode, options)
    if run.workload is not None and run.workload != workload:
        raise ValueError(f"{run.run_id}: ddlbench runs workload {workload}, not {run.workload}")
    return Run(
        run_id=run.run_id,
        group=run.group,
        framework=run.framework,
        label=run.framework,
        workload=workload,
        backend=launcher.backend(options, run.device),
        framework_options=options.model_dump(exclude_none=True),
        mode=run.mode,
        model=run.spec_model,
        nodes=run.nodes,
        tasks_per_node=run.tasks_per_node,
        world_size=run.world_size,
        device=run.device,
        batch_size=run.batch_size,
        global_batch_size=run.global_batch_size,
        lr=run.peak_lr,
        optimizer={
            "name": "sgd",
            "lr": run.lr,
            "momentum": 0.9,
            "weight_decay": 5e-5,
            "nesterov": False,
        },
        lr_scaling={
            "rule": run.lr_scaling,
            "base_batch_size": 256,
            "warmup_epochs": run.warmup_epochs,
            "decay_epochs": [],
            "decay_factor": 0.1,
        },
        precision=run.precision,
        scaling=run.scaling,
        variant=run.variant,
        repeat=run.repeat,
        time_limit="01:00:00",
        time_limit_min=60.0,
        transport=run.transport,
    )


def _spec_key(run: SynthRun) -> Tuple[Any, ...]:
    """What one spec fixes for all its runs (runs that differ here need their own spec)."""
    strong = run.global_batch_size if run.scaling == "strong" else None
    return (
        run.spec_model,
        run.mode,
        run.scaling,
        strong,
        run.data_kind,
        run.warmup_steps,
        run.measure_steps,
        run.epochs or None,
        run.target_accuracy,
    )


def spec_for(name: str, runs: Sequence[SynthRun]) -> ExperimentSpec:
    """An experiment spec whose spec-wide settings are those of ``runs`` (one spec key)."""
    first = runs[0]
    frameworks = list(dict.fromkeys(r.framework for r in runs))
    points = list(dict.fromkeys((r.nodes, r.tasks_per_node) for r in runs))
    raw: Dict[str, Any] = {
        "name": name,
        "mode": first.mode,
        "model": first.spec_model,
        "data": {"kind": first.data_kind, "samples": 50000},
        "frameworks": [{"name": f} for f in frameworks],
        "scaling": first.scaling,
        "steps": {"warmup": first.warmup_steps, "measure": first.measure_steps},
        "epochs": first.epochs or None,
        "target_accuracy": first.target_accuracy,
        "scale": {"points": [{"nodes": n, "gpus_per_node": g} for n, g in points]},
        "repeats": max(r.repeat for r in runs) + 1,
    }
    if first.scaling == "strong" and first.mode != "allreduce":
        raw["global_batch_size"] = first.global_batch_size
    elif first.mode != "allreduce":
        raw["batch_size"] = sorted({r.batch_size for r in runs})
    if first.mode != "convergence":
        raw.pop("target_accuracy")
    return ExperimentSpec.model_validate(raw)


def cluster_profile(runs: Sequence[SynthRun]) -> ClusterProfile:
    device = runs[0].device if runs else "gpu"
    gpn = max([r.tasks_per_node for r in runs] + [4])
    return ClusterProfile.model_validate(
        {
            "name": "synthcluster",
            "description": "synthetic cluster of the tests",
            "scheduler": "slurm",
            "device": device,
            "gpus_per_node": gpn,
            "slurm": {"partition": "gpu", "mpi": "none"},
        }
    )


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


def _accuracy_curve(run: SynthRun, epochs: int) -> List[float]:
    """Top-1 accuracy per epoch: large global batches lose accuracy unless warmed up."""
    gbs = run.global_batch_size
    penalty = 0.0
    if gbs > 1024:
        penalty = 0.04 * math.log2(gbs / 1024) * (0.25 if run.warmup_epochs > 0 else 1.0)
    top = max(0.05, 0.76 - penalty)
    tau = 2.0 + 0.5 * math.log2(max(gbs / 256, 1.0))
    return [round(top * (1.0 - math.exp(-(e + 1) / tau)), 6) for e in range(epochs)]


class _LogBuffer(RankLogger):
    """A :class:`RankLogger` whose records (serialised by the logger itself) are written in one
    go at :meth:`close`: a million step records then cost no million system calls."""

    def __init__(self, log_dir: str, rank: int) -> None:
        super().__init__(log_dir, rank)
        self._lines: List[bytes] = []

    def emit(self, data: bytes) -> None:
        self._lines.extend(data.splitlines(keepends=True))

    def close(self, truncate: bool = False) -> None:
        """Write the records; ``truncate`` cuts the last line in half (a killed rank)."""
        if self._fd is None:
            return
        self.flush()  # the step records the logger still keeps
        data = b"".join(self._lines)
        if truncate and self._lines:
            last = self._lines[-1]
            data = data[: len(data) - len(last)] + last[: max(1, (len(last) - 1) // 2)]
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        super().close()


def _rank_info(run: SynthRun, rank: int, job_id: int) -> RankInfo:
    hosts = _hosts(run)
    node = rank // run.tasks_per_node
    return RankInfo(
        rank=rank,
        local_rank=rank % run.tasks_per_node,
        node_rank=node,
        world_size=run.world_size,
        local_size=run.tasks_per_node,
        num_nodes=run.nodes,
        host=hosts[node],
        job_id=str(job_id),
        nodelist=_nodelist(hosts),
    )


def _nodelist(hosts: List[str]) -> str:
    return hosts[0] if len(hosts) == 1 else f"gpu[{hosts[0][3:]}-{hosts[-1][3:]}]"


@dataclass
class _Timeline:
    """Every rank's step start and end times (and compute times) of one run."""

    t_start: Dict[int, np.ndarray]
    t_end: Dict[int, np.ndarray]
    compute: Dict[int, Optional[np.ndarray]]


def _timeline(run: SynthRun, start: float, n_steps: int, rng) -> _Timeline:
    """Synchronous data parallelism: every step ends when the slowest rank ends it."""
    speed = float(rng.lognormal(0.0, run.repeat_noise)) if run.repeat_noise else 1.0
    mean_step = (run.step_time or _modelled_step_time(run)) * speed
    n = run.world_size
    t_start: Dict[int, np.ndarray] = {}
    t_end: Dict[int, np.ndarray] = {}
    compute: Dict[int, Optional[np.ndarray]] = {}
    if run.step_times is not None:
        for rank, durations in run.step_times.items():
            durs = np.asarray(durations, dtype=float)
            t = start + run.rank_offsets.get(rank, 0.0)
            starts = np.empty(len(durs))
            for i, dur in enumerate(durs):
                starts[i] = t
                t = t + dur + run.gap
            t_start[rank], t_end[rank] = starts, starts + durs
            compute[rank] = _compute(run, rank, durs)
        return _Timeline(t_start, t_end, compute)
    base = mean_step * rng.lognormal(0.0, run.noise, size=(n_steps, n))
    for r, f in run.stragglers.items():
        base[:, r] *= f
    work = base.copy()
    for r, f in run.compute_stragglers.items():
        work[:, r] *= f
    wall = base.max(axis=1) + run.gap
    if run.compute_stragglers:  # the allreduce waits for the slow computer: step times even out
        wall = work.max(axis=1) + run.gap
    starts = start + np.concatenate(([0.0], np.cumsum(wall)[:-1]))
    for rank in range(n):
        t_start[rank] = starts + run.rank_offsets.get(rank, 0.0)
        durs = (wall - run.gap) if run.compute_stragglers else base[:, rank]
        t_end[rank] = t_start[rank] + durs
        compute[rank] = None
        if run.compute_fraction is not None:
            own = work[:, rank] if run.compute_stragglers else durs
            compute[rank] = own * run.compute_fraction
    return _Timeline(t_start, t_end, compute)


def _compute(run: SynthRun, rank: int, durs: np.ndarray) -> Optional[np.ndarray]:
    if run.compute_fraction is None:
        return None
    return durs * run.compute_fraction * run.compute_stragglers.get(rank, 1.0)


def _write_steps(log: RankLogger, run: SynthRun, tl: _Timeline, rank: int, start: float) -> dict:
    """The rank's step (and, in convergence mode, eval) records; returns what the summary needs."""
    t_start, t_end, compute = tl.t_start[rank], tl.t_end[rank], tl.compute[rank]
    n_rank = len(t_start)
    steps = np.arange(n_rank)
    convergence = run.mode == "convergence"
    if convergence:
        per_epoch = max(1, run.measure_steps // max(run.epochs, 1))
        epochs = np.maximum(steps - run.warmup_steps, 0) // per_epoch
    else:
        epochs = np.zeros(n_rank, dtype=int)
    loss = np.round(6.9 * np.exp(-steps / max(n_rank, 1) * 1.5) + 0.1, 4)
    acc = _accuracy_curve(run, run.epochs) if convergence else []
    eval_elapsed: List[float] = []
    ts_l, te_l, loss_l = t_start.tolist(), t_end.tolist(), loss.tolist()
    comp_l = compute.tolist() if compute is not None else None
    last_epoch = run.epochs - 1
    for i in range(n_rank):
        phase = "warmup" if i < run.warmup_steps else "measure"
        c = comm = None
        if comp_l is not None:
            c = comp_l[i]
            comm = (te_l[i] - ts_l[i]) - c
        ep = int(epochs[i])
        log.step(i, ep, phase, ts_l[i], te_l[i], run.batch_size, loss_l[i], run.peak_lr, c, comm)
        if convergence and ep < last_epoch and (i + 1 == n_rank or epochs[i + 1] != ep):
            eval_elapsed.append(_eval(log, run, acc, ep, te_l[i], start))
    if convergence:  # the last epoch (with the steps past it) evaluates at its last step's end
        for ep in range(len(eval_elapsed), run.epochs):
            has_steps = ep == last_epoch and n_rank and int(epochs[-1]) >= ep
            eval_elapsed.append(_eval(log, run, acc, ep, te_l[-1] if has_steps else start, start))
    meas = steps >= run.warmup_steps
    return {
        "measured": int(meas.sum()),
        "t_first": float(t_start[meas][0]) if meas.any() else None,
        "t_end_last": float(t_end[-1]) if n_rank else start,
        "final_loss": float(loss[-1]) if n_rank else None,
        "acc": acc,
        "eval_elapsed": eval_elapsed,
    }


def _eval(log: RankLogger, run: SynthRun, acc: List[float], ep: int, te: float, start: float):
    log.eval(ep, te + 1.0, te - start, acc[ep], round(2.5 * (1 - acc[ep]), 4), 10000)
    return te - start


def _write_allreduce(log: RankLogger, run: SynthRun, start: float, rng) -> float:
    n = run.world_size
    t = start
    for size in run.allreduce_sizes:
        lat = 20e-6 * (1 + math.log2(n)) if n > 1 else 2e-6
        bw = 90e9 if run.nodes == 1 else 22e9
        factor = 2 * (n - 1) / n if n > 1 else 1.0
        time_s = (lat + size * factor / bw) * float(rng.lognormal(0.0, 0.01))
        algbw = size / time_s / 1e9
        log.allreduce(int(size), "float32", 20, time_s, algbw, algbw * (2 * (n - 1) / n))
        t += time_s * 25
    return t


ERROR = "RuntimeError: NCCL error: unhandled system error"


def _summary(run: SynthRun, done: dict, campaign: str) -> Dict[str, Any]:
    measured, t_first, t_end_last = done["measured"], done["t_first"], done["t_end_last"]
    acc = done["acc"]
    samples_measured = measured * run.batch_size
    mtime = (t_end_last - t_first) if t_first is not None else 0.0
    summary: Dict[str, Any] = {
        "t": t_end_last + 0.1,
        "status": "ok",
        "steps_measured": measured,
        "samples_measured": samples_measured,
        "measure_time_s": mtime,
        "throughput": samples_measured / mtime if mtime > 0 else None,
        "final_loss": done["final_loss"],
        "final_accuracy": acc[-1] if acc else None,
        "best_accuracy": max(acc) if acc else None,
        "time_to_accuracy_s": None,
        "param_sum": 1234.5,
        "param_sha256": hashlib.sha256(f"{campaign}/{run.run_id}".encode()).hexdigest(),
    }
    if run.mode == "convergence" and run.target_accuracy is not None:
        hit = [i for i, a in enumerate(acc) if a >= run.target_accuracy]
        if hit:
            summary["time_to_accuracy_s"] = done["eval_elapsed"][hit[0]]
        else:
            summary["status"] = "target_not_reached"
    return summary


def _job_id(run: SynthRun, index: int) -> int:
    return run.job_id if run.job_id is not None else 1000 + index


def write_run(paths: CampaignPaths, run: SynthRun, index: int, rng) -> None:
    """A started run's folder as its job leaves it: run.json, rank logs, Slurm output."""
    if run.not_run:  # rendered, never started: no run folder yet
        return
    rp = paths.run(run.run_id)
    cfg = read_run_config(rp.dir, paths.job_script(run.run_id))  # what the job script carries
    rp.logs.mkdir(parents=True, exist_ok=True)
    rp.config.write_text(json.dumps(cfg, indent=1, sort_keys=True))
    job_id = _job_id(run, index)
    start = run.start if run.start is not None else T0 + 3600.0 * index
    n_steps = 0 if run.mode == "allreduce" else run.warmup_steps + run.measure_steps
    tl = _timeline(run, start, n_steps, rng) if n_steps else None
    stderr: List[str] = []
    for rank in range(run.world_size):
        if rank in run.missing_ranks:
            continue
        stderr += _write_rank(cfg, run, rank, job_id, start, tl, rng)
    hosts = _hosts(run)
    rp.slurm_output(job_id, "out").write_text(f"ddlbench: run {run.run_id} on {_nodelist(hosts)}\n")
    rp.slurm_output(job_id, "err").write_text("".join(line + "\n" for line in stderr))


def _write_rank(cfg, run: SynthRun, rank: int, job_id: int, start: float, tl, rng) -> List[str]:
    """One rank's log through the workloads' logger; returns its lines of Slurm stderr."""
    info = _rank_info(run, rank, job_id)
    log = _LogBuffer(cfg["log_dir"], rank)
    ran = dict(run.ran)
    backend = ran.pop("backend", cfg["backend"])
    if "precision" in ran and ran["precision"] != cfg["precision"]:
        ran["precision_requested"] = cfg["precision"]
    device_name = "NVIDIA A100-SXM4-40GB" if run.device == "gpu" else "AMD EPYC 7742"
    meta = build_meta(
        cfg,
        info,
        FRAMEWORK_VERSION.get(run.framework, "1.0"),
        device_name,
        25557032 if run.model == "resnet50" else 61706,
        backend,
        start_time=start - 5.0,
        pid=4000 + rank,
        **ran,
    )
    log.meta(meta)
    done = {
        "measured": 0,
        "t_first": None,
        "t_end_last": start,
        "final_loss": None,
        "acc": [],
        "eval_elapsed": [],
    }
    if tl is not None and rank in tl.t_start:
        done = _write_steps(log, run, tl, rank, start)
    if run.mode == "allreduce":
        done["t_end_last"] = _write_allreduce(log, run, start, rng)
    if rank in run.failed_ranks:
        tb = f'Traceback (most recent call last):\n  File "x.py"\n{ERROR}\n'
        log.error(ERROR, tb, t=done["t_end_last"] + 0.5)
        log.close()
        return [f"[rank {rank}] {ERROR}"]
    if rank in run.killed_ranks:
        log.close(truncate=True)
        return [f"slurmstepd: error: *** STEP {job_id}.0 ON {info.host} CANCELLED"]
    log.summary(_summary(run, done, cfg["campaign"]))
    log.close()
    return []


def slurm_state(run: SynthRun) -> str:
    if run.slurm_state:
        return run.slurm_state
    if run.not_run:
        return states.PENDING
    if run.failed_ranks:
        return states.FAILED
    if run.killed_ranks:
        return states.TIMEOUT
    return states.COMPLETED


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
                "exit_code": {states.COMPLETED: 0, states.PENDING: None}.get(state, 1),
                "start": None if run.not_run else start - 10,
                "end": None if run.not_run else start + 600,
                "nodelist": ",".join(_hosts(run)),
            }
        )
    return pd.DataFrame(rows)


def render(root: Path, name: str, runs: Sequence[SynthRun]) -> CampaignPaths:
    """The campaign folder as ``ddlbench submit`` renders it: manifest, spec, profile, scripts.

    A spec fixes the model, mode, steps and data for all its runs (a real campaign has one).
    Runs that differ there get their job scripts rendered from a spec of their own, in the
    same folder; the campaign's manifest, spec and profile stay those of the whole plan."""
    groups: Dict[Tuple[Any, ...], List[SynthRun]] = {}
    for run in runs:
        groups.setdefault(_spec_key(run), []).append(run)
    profile = cluster_profile(runs)
    first, *others = list(groups.values()) or [[SynthRun()]]
    plan = Plan([plan_run(r) for r in runs], spec_for(name, first), profile)
    paths = CampaignPaths.of(_render(plan, name, Path(root)))
    if not others:
        return paths
    with tempfile.TemporaryDirectory(prefix="synth-") as tmp:
        kept = [paths.manifest, paths.spec, paths.cluster]
        for path in kept:
            shutil.copy2(path, Path(tmp) / path.name)
        for group in others:
            paths.manifest.unlink()  # the group's spec is another one: render it on its own
            plan = Plan([plan_run(r) for r in group], spec_for(name, group), profile)
            _render(plan, name, Path(root))
        for path in kept:
            shutil.copy2(Path(tmp) / path.name, path)
    return paths


def _render(plan: Plan, name: str, root: Path) -> Path:
    spec_text = json.dumps(plan.spec.model_dump(mode="json"), indent=1)
    profile_text = json.dumps(plan.profile.model_dump(mode="json"), indent=1)
    done = render_campaign(plan, name, root, spec_text, "spec.yaml", profile_text, "cluster.yaml")
    return done.root


def write_campaign(root: Path, name: str, runs: Sequence[SynthRun], *, seed: int = 0) -> Path:
    """Write a whole campaign folder under ``root`` and return its path."""
    paths = render(Path(root), name, runs)
    rng = np.random.default_rng(seed)
    for i, run in enumerate(runs):
        write_run(paths, run, i, rng)
    return paths.root


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
