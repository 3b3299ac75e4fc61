"""A rank frozen with SIGSTOP on the real Slurm cluster, at a chosen step: shared by
``benchmarks/frozen_rank.py`` (ten trials) and ``tests/badnode/test_hang_slurm.py`` (two).

Each trial is a campaign of one 2-node PyTorch (gloo) run on the ``localslurm`` profile. Once
rank 1's log holds the chosen number of step records, rank 1's process (the ``pid`` of its
``meta`` record) is stopped with SIGSTOP; the healthy rank 0 waits in its allreduce, its
watchdog fires after ``floor_s``, and srun ends the job. What ``status --json`` then names is
compared with the truth: the frozen rank and its Slurm node.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
name: {name}
model: lenet
data: synthetic
frameworks: [{{name: pytorch, backend: gloo}}]
batch_size: 8
steps: {{warmup: 2, measure: 20000}}
scale: {{points: [2x1]}}
watchdog: {{first_s: 300, floor_s: 5, grace_s: 2}}
slurm: {{time: "00:10:00"}}
"""

FROZEN_RANK = 1


def ddlbench(*args: str, results: Path) -> subprocess.CompletedProcess:
    """``python -m ddlbench ARGS`` from this checkout, with ``DDLBENCH_RESULTS=results``."""
    env = dict(os.environ, DDLBENCH_RESULTS=str(results))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "ddlbench", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


@dataclass
class Trial:
    """One trial: where the rank was stopped, what ddlbench named, how long it took."""

    stop_step: int
    frozen_node: Optional[str]
    state: str
    named: List[Dict[str, Any]]
    hosts: List[str]
    reason: str
    seconds_to_end: float
    #: every hang record's rank and how late past its limit it came (s)
    late: Dict[int, float]
    #: the campaign's suspected nodes (status --json)
    suspects: List[str]

    @property
    def right(self) -> bool:
        """The frozen rank and its node named, and no other rank or node."""
        ranks = [n.get("rank") for n in self.named]
        return (
            self.state == "HUNG"
            and ranks == [FROZEN_RANK]
            and self.hosts == [self.frozen_node]
            and f"rank {FROZEN_RANK} on {self.frozen_node}" in self.reason
        )


def _records(log: Path) -> List[Dict[str, Any]]:
    out = []
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _wait_for_steps(cdir: Path, steps: int, timeout: float) -> Dict[str, Any]:
    """Rank 1's meta record once its log holds ``steps`` step records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in cdir.glob(f"runs/*/logs/attempt-*/rank-{FROZEN_RANK}.jsonl"):
            recs = _records(log)
            if sum(r.get("type") == "step" for r in recs) >= steps:
                return next(r for r in recs if r.get("type") == "meta")
        time.sleep(0.05)
    raise TimeoutError(f"rank {FROZEN_RANK} did not reach step {steps} in {timeout:.0f} s")


def freeze_trial(results: Path, stop_step: int, name: str) -> Trial:
    """Submit, stop rank 1 after ``stop_step`` steps, wait for the end, read what is named."""
    from ddlbench.campaign.hangs import slurm_node

    results.mkdir(parents=True, exist_ok=True)
    spec = results / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name))
    sub = ddlbench(
        "submit", str(spec), "--cluster", "localslurm", "--campaign", name, results=results
    )
    if sub.returncode != 0:
        raise RuntimeError(sub.stderr)
    meta = _wait_for_steps(results / name, stop_step, timeout=300)
    os.kill(int(meta["pid"]), signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        ddlbench("wait", name, "--timeout", "240", results=results)
    finally:
        with contextlib.suppress(ProcessLookupError):  # never leave a stopped process behind
            os.kill(int(meta["pid"]), signal.SIGCONT)
    took = time.monotonic() - stopped
    status = json.loads(ddlbench("status", name, "--json", results=results).stdout)
    (row,) = status["runs"]
    hang = row.get("hang") or {}
    return Trial(
        stop_step=stop_step,
        frozen_node=slurm_node(meta),
        state=row["state"],
        named=hang.get("not_arrived") or [],
        hosts=hang.get("hosts") or [],
        reason=row.get("reason") or "",
        seconds_to_end=took,
        late={int(r["rank"]): float(r.get("late_s") or 0) for r in hang.get("ranks") or []},
        suspects=[str(x.get("node")) for x in status.get("suspects") or []],
    )
