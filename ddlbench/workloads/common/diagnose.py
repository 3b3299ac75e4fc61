"""Communication debug output, and the test hooks that make a rank hang or a node slow.

Debug output (run config ``comm_debug: true``, or ``DDLBENCH_COMM_DEBUG=1`` in the job's
environment, which ``ddlbench retry --comm-debug`` sets) turns on, before the process group
starts: ``NCCL_DEBUG=INFO`` written to ``<log_dir>/nccl-<host>-<pid>.log`` (``NCCL_DEBUG_FILE``),
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` and ``TORCH_CPP_LOG_LEVEL=INFO`` (c10d's and Gloo's own lines,
on the rank's stderr: the job's error file) and ``HOROVOD_LOG_LEVEL=debug``. A variable the
user set already is kept.

Test hooks (read only here, by the workloads; docs/bad-nodes.md#test-hooks):

* ``DDLBENCH_TEST_HANG_RANK=<rank>``: that rank blocks forever before its first collective;
* ``DDLBENCH_TEST_SLOW_NODE=<node>`` and ``DDLBENCH_TEST_SLOW_S=<seconds>``: every collective
  of a rank on that node (Slurm node name) waits that long first (default 0.002 s);
* ``DDLBENCH_TEST_BAD_NODE=<node>``: the pre-flight health check of that node fails (a
  recorded failing answer replaces the node's own).

Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Dict, Mapping, Optional

TRUE = ("1", "true", "yes", "on")


def comm_debug_wanted(cfg: Mapping[str, object], env: Optional[Mapping[str, str]] = None) -> bool:
    env = os.environ if env is None else env
    return bool(cfg.get("comm_debug")) or env.get("DDLBENCH_COMM_DEBUG", "").lower() in TRUE


def comm_debug_env(log_dir: str) -> Dict[str, str]:
    """The variables that switch the communication libraries' debug output on."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_FILE": os.path.join(log_dir, "nccl-%h-%p.log"),
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
        "TORCH_CPP_LOG_LEVEL": "INFO",
        "HOROVOD_LOG_LEVEL": "debug",
    }


def enable_comm_debug(cfg: Mapping[str, object], log_dir: str) -> bool:
    """Set :func:`comm_debug_env` in this process (before any process group) when wanted."""
    if not comm_debug_wanted(cfg):
        return False
    for key, value in comm_debug_env(log_dir).items():
        os.environ.setdefault(key, value)
    return True


def node_name() -> str:
    import socket

    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def before_collective(rank: Optional[int]) -> None:
    """Test hooks run before a collective: block forever, or wait (see the module)."""
    hang = os.environ.get("DDLBENCH_TEST_HANG_RANK", "").strip()
    if hang and rank is not None and hang == str(rank):
        threading.Event().wait()  # never set: this rank never arrives
    delay = slow_delay()
    if delay > 0:
        time.sleep(delay)


def slow_delay(env: Optional[Mapping[str, str]] = None, node: Optional[str] = None) -> float:
    """The injected delay of this node's collectives (0 when this node is not the slow one)."""
    env = os.environ if env is None else env
    slow = env.get("DDLBENCH_TEST_SLOW_NODE", "").strip()
    if not slow or slow != (node or node_name()):
        return 0.0
    return float(env.get("DDLBENCH_TEST_SLOW_S") or 0.002)


def bad_node(env: Optional[Mapping[str, str]] = None, node: Optional[str] = None) -> bool:
    """Whether the health test hook marks this node bad."""
    env = os.environ if env is None else env
    bad = env.get("DDLBENCH_TEST_BAD_NODE", "").strip()
    return bool(bad) and bad == (node or node_name())
