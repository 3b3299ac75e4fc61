"""Horovod workloads: the Slurm -> Horovod mapping (no Horovod needed) and 2 real ranks
with the Gloo controller and ddlbench's rendezvous server (the horovod environment)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ddlbench.workloads.hvd.horovod_rendezvous import (
    horovod_env_from_slurm,
    iface_for_address,
    wait_for_server,
)

SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "7",
    "SLURM_NODEID": "2",
    "SLURM_NNODES": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS_PER_NODE": "3,2(x2)",
    "DDLBENCH_ADDRS": "127.0.0.1,127.0.0.1,127.0.0.1",
    "DDLBENCH_PORT_BASE": "20128",
}


def assert_loss_goes_down(losses):
    """Loss of the last 10 steps well below the first 4 (robust to a single spike)."""
    start = sum(losses[:4]) / 4
    assert min(losses[-10:]) < start - 0.5 and sum(losses[-10:]) / 10 < start - 0.2, losses


def test_slurm_to_horovod_mapping():
    env = horovod_env_from_slurm(SLURM)
    assert env["HOROVOD_CONTROLLER"] == "gloo" and env["HOROVOD_CPU_OPERATIONS"] == "gloo"
    assert (env["HOROVOD_RANK"], env["HOROVOD_SIZE"]) == ("5", "7")
    assert (env["HOROVOD_LOCAL_RANK"], env["HOROVOD_LOCAL_SIZE"]) == ("1", "2")
    # local rank 1 exists on all three nodes; this is the third of them
    assert (env["HOROVOD_CROSS_RANK"], env["HOROVOD_CROSS_SIZE"]) == ("2", "3")
    assert env["HOROVOD_HOSTNAME"] == "node2"
    assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
    assert env["HOROVOD_GLOO_RENDEZVOUS_PORT"] == "20128"
    if sys.platform.startswith("linux"):
        assert env["HOROVOD_GLOO_IFACE"] == "lo"


def test_cross_rank_with_uneven_nodes():
    # local rank 2 exists only on node 0 (3 tasks there, 2 on the others)
    env = horovod_env_from_slurm(dict(SLURM, SLURM_PROCID="2", SLURM_NODEID="0", SLURM_LOCALID="2"))
    assert (env["HOROVOD_CROSS_RANK"], env["HOROVOD_CROSS_SIZE"]) == ("0", "1")
    assert env["HOROVOD_LOCAL_SIZE"] == "3"


def test_existing_horovod_variables_win_and_mpi_sets_only_the_controller():
    env = horovod_env_from_slurm(dict(SLURM, HOROVOD_GLOO_IFACE="eth7", HOROVOD_RANK="0"))
    assert "HOROVOD_GLOO_IFACE" not in env and "HOROVOD_RANK" not in env
    assert horovod_env_from_slurm(SLURM, controller="mpi") == {"HOROVOD_CONTROLLER": "mpi"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux ioctl")
def test_iface_for_address():
    assert iface_for_address("127.0.0.1") == "lo"
    assert iface_for_address("192.0.2.77") is None  # TEST-NET address held by no interface


def test_wait_for_server():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        wait_for_server("127.0.0.1", srv.getsockname()[1], 2)
        port = srv.getsockname()[1]
    with pytest.raises(RuntimeError, match="no Horovod rendezvous server"):
        wait_for_server("127.0.0.1", port, 0.5)


# -- real ranks ---------------------------------------------------------------------------------
RENDEZVOUS = ["ddlbench.workloads.hvd.horovod_rendezvous", "--tasks-per-node", "2"]


def _launch(launch_ranks, cfg, nodes=1, **kwargs):
    # as job.sh: --hosts defaults to DDLBENCH_ADDRS, one address per (emulated) node
    server = ["ddlbench.workloads.hvd.horovod_rendezvous", "--tasks-per-node", str(2 // nodes)]
    return launch_ranks(
        cfg["workload"], cfg, env="horovod", background=server, timeout=180, nodes=nodes, **kwargs
    )


@pytest.mark.frameworks
def test_horovod_torch_lenet_digits(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "horovod_torch",
        framework="horovod",
        framework_options={"wraps": "pytorch", "controller": "gloo"},
        steps={"warmup": 3, "measure": 40},
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    result = _launch(launch_ranks, cfg)
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["backend"] == "gloo" and meta["controller"] == "gloo"
        assert meta["framework_version"].startswith("horovod 0.")
        steps = result.records(rank, "step")
        measured = [s for s in steps if s["phase"] == "measure"]
        assert len(measured) == 40 and all(s["comm_s"] is not None for s in measured)
        losses = [s["loss"] for s in steps]
        assert_loss_goes_down(losses)
        assert result.summary(rank)["throughput"] > 0


@pytest.mark.frameworks
def test_horovod_tf_lenet_digits(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "horovod_tf",
        framework="horovod",
        framework_options={"wraps": "tensorflow", "controller": "gloo"},
        steps={"warmup": 3, "measure": 40},
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    result = _launch(launch_ranks, cfg, extra_env={"TF_CPP_MIN_LOG_LEVEL": "2"})
    check_data_parallel(result)
    for rank in range(2):
        meta = result.logs[rank][0]
        assert meta["param_count"] == 61_706 and "tensorflow" in meta["framework_version"]
        losses = [s["loss"] for s in result.records(rank, "step")]
        assert_loss_goes_down(losses)


@pytest.mark.frameworks
def test_allreduce_horovod(launch_ranks, run_config, validate_log):
    cfg = run_config(
        "allreduce_horovod",
        framework="horovod",
        mode="allreduce",
        framework_options={"controller": "gloo"},
        allreduce={"min_bytes": 1024, "max_bytes": 1 << 18, "iters": 5, "warmup": 2},
    )
    result = _launch(launch_ranks, cfg, nodes=2)  # two emulated nodes sharing 127.0.0.1
    result.check_ok()
    for rank in range(2):
        validate_log(result.logs[rank])
        assert result.logs[rank][0]["node_rank"] == rank
        sizes = [r["bytes"] for r in result.records(rank, "allreduce")]
        assert sizes == [1024 << i for i in range(9)]
        assert all(r["time_s"] > 0 for r in result.records(rank, "allreduce"))


@pytest.mark.frameworks
def test_rendezvous_server_serves_on_the_given_port(framework_python, tmp_path):
    python = framework_python("horovod")
    if python is None:
        pytest.skip("horovod environment not built")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cmd = [python, "-m", *RENDEZVOUS, "--port", str(port), "--nodes", "1", "--timeout", "60"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert f"port {port}" in line
        req = urllib.request.Request(f"http://127.0.0.1:{port}/scope/key", data=b"v", method="PUT")
        urllib.request.urlopen(req, timeout=5)
        got = urllib.request.urlopen(f"http://127.0.0.1:{port}/scope/key", timeout=5).read()
        assert got == b"v"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
