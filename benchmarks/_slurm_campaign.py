"""Shared set-up of the Slurm benchmarks: a campaign of N trivial held runs on the local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LOCAL_SLURM = ROOT / "scripts" / "local-slurm.sh"


def ensure_cluster() -> bool:
    """Use the local Slurm cluster (scripts/local-slurm.sh), starting it if it is down.

    Returns whether it was started here (then :func:`release_cluster` stops it again).
    """
    started = False
    if subprocess.run([str(LOCAL_SLURM), "status"], capture_output=True).returncode != 0:
        subprocess.run([str(LOCAL_SLURM), "up"], check=True)
        started = True
    env = subprocess.run([str(LOCAL_SLURM), "env"], capture_output=True, text=True, check=True)
    for line in env.stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        os.environ[key] = value
    return started


def release_cluster(started: bool) -> None:
    if started:
        subprocess.run([str(LOCAL_SLURM), "down"], capture_output=True)


def make_campaign(root: Path, name: str, n: int, *, hold: bool = True) -> Path:
    """``n`` runs whose job script is ``true``; held (never started) unless ``hold`` is False."""
    cdir = (root / name).resolve()
    (cdir / "jobs").mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(n):
        rid = f"r{i:04d}"
        rdir = cdir / "runs" / rid  # created at submission, as for a rendered campaign
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name={name}.{rid}",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --time=00:05:00",
            f"#SBATCH --output={rdir}/slurm-%j.out",
            "#SBATCH --partition=debug",
        ]
        if hold:
            lines.append("#SBATCH --hold")
        (cdir / "jobs" / f"{rid}.sh").write_text("\n".join(lines + ["true"]) + "\n")
        runs.append(
            {
                "run_id": rid,
                "nodes": 1,
                "tasks_per_node": 1,
                "world_size": 1,
                "time_limit_min": 5,
                "script": f"jobs/{rid}.sh",
                "run_dir": f"runs/{rid}",
            }
        )
    manifest = {
        "format": "ddlbench-campaign/1",
        "campaign": name,
        "created": "2026-01-01T00:00:00+00:00",
        "ddlbench_version": "bench",
        "spec_path": "bench",
        "cluster": {"name": "localslurm", "scheduler": "slurm", "slurm": {"sacct": "no"}},
        "runs": runs,
    }
    (cdir / "campaign.json").write_text(json.dumps(manifest))
    return cdir
