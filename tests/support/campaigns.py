"""Hand-written campaign folders (campaign.json + job.sh per run) for the executor tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from tests.support.repo import ROOT

ENV_DUMP = (
    'env | grep -E "^(SLURM|DDLBENCH_)" | sort > "$DDLBENCH_RUN_DIR/env.$SLURM_PROCID" || true'
)


def make_campaign(
    root: Path,
    name: str,
    runs: List[Dict],
    *,
    scheduler: str = "local",
    slurm: Optional[Dict] = None,
    local: Optional[Dict] = None,
) -> Path:
    """Write ``root/name`` with one job script per run (``jobs/<run-id>.sh``).

    Each run dict: ``run_id``, ``body`` (shell lines after the #SBATCH block), and optionally
    ``nodes``, ``tasks_per_node``, ``time`` (sbatch --time), ``partition``, ``extra`` (more
    #SBATCH options).
    """
    cdir = (root / name).resolve()
    (cdir / "jobs").mkdir(parents=True, exist_ok=True)
    manifest_runs = []
    for r in runs:
        rid = r["run_id"]
        rdir = cdir / "runs" / rid  # created at submission, as for a rendered campaign
        nodes = r.get("nodes", 1)
        tpn = r.get("tasks_per_node", 1)
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name={name}.{rid}",
            f"#SBATCH --nodes={nodes}",
            f"#SBATCH --ntasks-per-node={tpn}",
            f"#SBATCH --time={r.get('time', '00:10:00')}",
            f"#SBATCH --output={rdir}/slurm-%j.out",
            f"#SBATCH --error={rdir}/slurm-%j.err",
        ]
        part = r.get("partition", (slurm or {}).get("partition"))
        if part and scheduler == "slurm":
            lines.append(f"#SBATCH --partition={part}")
        for extra in r.get("extra", []):
            lines.append(f"#SBATCH {extra}")
        lines += [
            "set -euo pipefail",
            f"export DDLBENCH_RUN_DIR={rdir}",
            'cd "$DDLBENCH_RUN_DIR"',
        ]
        lines += r["body"] if isinstance(r["body"], list) else [r["body"]]
        (cdir / "jobs" / f"{rid}.sh").write_text("\n".join(lines) + "\n")
        manifest_runs.append(
            {
                "run_id": rid,
                "framework": "none",
                "workload": "none",
                "nodes": nodes,
                "tasks_per_node": tpn,
                "gpus_per_node": 0,
                "world_size": nodes * tpn,
                "time_limit_min": 10,
                "script": f"jobs/{rid}.sh",
                "run_dir": f"runs/{rid}",
            }
        )
    cluster = {
        "name": "test-" + scheduler,
        "scheduler": scheduler,
        "slurm": dict(slurm or {}),
        "local": dict(local or {"max_parallel": 1}),
    }
    manifest = {
        "format": "ddlbench-campaign/1",
        "campaign": name,
        "created": "2026-01-01T00:00:00+00:00",
        "ddlbench_version": "test",
        "spec_path": "test.yaml",
        "cluster": cluster,
        "runs": manifest_runs,
    }
    (cdir / "campaign.json").write_text(json.dumps(manifest, indent=1))
    return cdir


# The quickstart spec, and profiles like configs/clusters/local.yaml and localslurm.yaml with
# a workload "interpreter" that does nothing, so the rendered job scripts run end to end
# without the framework environments.
QUICKSTART = str(ROOT / "configs" / "quickstart.yaml")
TRIVIAL_LOCAL = """\
name: triv-local
scheduler: local
device: cpu
gpus_per_node: 2
slurm: {time_limit: "00:05:00", mpi: none}
local: {max_parallel: 2}
environments:
  default: {python: "true"}
"""
TRIVIAL_SLURM = """\
name: triv-slurm
scheduler: slurm
device: cpu
gpus_per_node: 1
max_nodes: 2
slurm: {time_limit: "00:05:00", mpi: none, partition: debug, gpu_request: none, sacct: "no"}
environments:
  default: {python: "true"}
"""
