"""A rank stops cleanly on SIGUSR1 (Slurm's --signal warning), and the GPU sampler is not
started on local rank 0's cores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ddlbench.campaign import states as S
from ddlbench.campaign.stops import stopped_values
from ddlbench.workloads.common import normalize_run_config
from ddlbench.workloads.common.runner import EXIT_STOPPED, STOPPED_MESSAGE
from ddlbench.workloads.node.rank_start import nccl_debug, place, sampler_cpus
from tests.support.repo import ROOT

#: a workload whose rank logs a step and then blocks where Python cannot run a handler soon:
#: in a lock, as a rank in a collective waits for a peer
BLOCKED = """
import sys, threading, time
from ddlbench.workloads.common import workload_main

def body(ctx):
    ctx.write_meta("stub", "cpu", None, "none")
    ctx.logger.step(0, 0, "measure", time.time(), time.time(), 4, 1.0, 0.1)
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # never returns

sys.exit(workload_main(body, [sys.argv[1]]))
"""


def _log(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sigusr1_ends_a_blocked_rank_with_a_record_and_the_stop_code(
    tmp_path, run_config, validate_log
):
    cfg = run_config("pytorch")
    cfg["log_dir"] = str(tmp_path / "logs")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(normalize_run_config(cfg)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", BLOCKED, str(path)], env=env, stderr=subprocess.PIPE, text=True
    )
    log = tmp_path / "logs" / "rank-0.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (log.exists() and '"step"' in log.read_text()):
        time.sleep(0.1)
    time.sleep(0.5)
    sent = time.time()
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == EXIT_STOPPED == S.STOPPED_EXIT_CODE, err
    assert time.time() - sent < 5
    records = _log(log)
    validate_log(records, complete=False)
    assert [r["type"] for r in records] == ["meta", "step", "error"]
    assert records[-1]["message"] == STOPPED_MESSAGE
    assert f"rank 0: {STOPPED_MESSAGE}" in err
    # the login node: a job that ended with this code is TIMEOUT, not FAILED
    assert stopped_values(EXIT_STOPPED)["state"] == S.TIMEOUT
    assert stopped_values(1) == {}


def test_sampler_gets_cores_no_rank_is_bound_to():
    assert sampler_cpus([0, 1, 2, 3, 4, 5], [0, 1, 2, 3]) == ([4, 5], "cores no rank is bound to")
    cpus, why = sampler_cpus([0, 1, 2, 3], [0, 1, 2, 3])
    assert cpus == [0, 1, 2, 3] and why.startswith("no core free of ranks")
    cpus, why = sampler_cpus([0, 1], None)  # not bound by ddlbench: anywhere in the step
    assert cpus == [0, 1] and "not bound" in why


def test_local_rank_0_plans_the_sampler_off_its_own_binding(tmp_path):
    base = {
        "DDLBENCH_DEVICE": "cpu",
        "DDLBENCH_CPU_BIND": "slurm",
        "DDLBENCH_LOG_DIR": str(tmp_path),
        "DDLBENCH_TELEMETRY_DIR": str(tmp_path / "telemetry"),
        "SLURM_NTASKS_PER_NODE": "2",
    }
    step = sorted(os.sched_getaffinity(0))
    rec = place({**base, "SLURM_PROCID": "0", "SLURM_LOCALID": "0"})
    assert rec["sampler"]["cpus"] == rec["binding"]["cpus_from_slurm"]
    assert "_step_cpus" not in rec["binding"] and len(step) >= 1
    saved = json.loads((tmp_path / "placement" / "rank-0.json").read_text())
    assert saved["sampler"] == rec["sampler"]
    assert place({**base, "SLURM_PROCID": "1", "SLURM_LOCALID": "1"})["sampler"] is None


def test_the_first_nodes_ranks_log_nccls_lines(tmp_path, monkeypatch):
    """``DDLBENCH_NCCL_INFO_RANK=0-3``: ranks 0-3 (the first node of 4 GPUs) log NCCL's INIT and
    NET lines, each into its own file; rank 4 keeps the profile's NCCL_DEBUG; "0", as older job
    scripts export it, is rank 0 alone."""
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"):
        monkeypatch.delenv(name, raising=False)
    env = {"DDLBENCH_NCCL_INFO_RANK": "0-3", "DDLBENCH_NCCL_NICS": "mlx5_0:1"}
    got = nccl_debug(env, 3, str(tmp_path))
    assert got == str(tmp_path / "nccl" / "rank-3.%h.%p.log") == os.environ["NCCL_DEBUG_FILE"]
    assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert nccl_debug(env, 4, str(tmp_path)) is None
    assert nccl_debug({"DDLBENCH_NCCL_INFO_RANK": "0"}, 1, str(tmp_path)) is None
    assert nccl_debug({"DDLBENCH_NCCL_INFO_RANK": "x"}, 0, str(tmp_path)) is None
