"""The environment ``ddlbench retry`` gives the new attempts: nodes to avoid, debug output.

Both go through the environment of the submitting process: ``DDLBENCH_EXCLUDE_NODES`` (the
Slurm executor's ``sbatch --exclude``; nodes already in it are kept; the local executor has no
nodes to avoid) and ``DDLBENCH_COMM_DEBUG=1`` with
``TORCH_CPP_LOG_LEVEL=INFO`` (sbatch exports the submitter's environment to the job; the local
executor's jobs inherit it too). The workload turns ``DDLBENCH_COMM_DEBUG`` into the libraries'
variables (``ddlbench.workloads.common.diagnose``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List


def retry_environment(
    root: Path, exclude_bad_nodes: bool, comm_debug: bool, echo: Callable[[str], None]
) -> List[str]:
    """Set the variables for ``--exclude-bad-nodes``/``--comm-debug``; returns the nodes
    excluded."""
    nodes: List[str] = []
    if exclude_bad_nodes:
        from ddlbench.campaign.evidence import bad_nodes

        nodes = bad_nodes(root)
        if nodes:
            have = [n for n in os.environ.get("DDLBENCH_EXCLUDE_NODES", "").split(",") if n]
            os.environ["DDLBENCH_EXCLUDE_NODES"] = ",".join(dict.fromkeys(have + nodes))
            echo(f"excluding node(s) that failed the pre-flight health check: {', '.join(nodes)}")
        else:
            echo("no node failed the pre-flight health check: nothing to exclude")
    if comm_debug:
        os.environ["DDLBENCH_COMM_DEBUG"] = "1"
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "INFO")
    return nodes
