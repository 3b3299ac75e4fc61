"""Where a rank runs: device identity, CPU binding and the refusal of shared GPUs.

The hardware (two sockets, four GPUs, hyperthreads) is absent here: the functions read the
recorded ``nvidia-smi`` output and the /sys tree of such a node under tests/fixtures/placement/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ddlbench.workloads.common import placement as P
from tests.support.repo import ROOT

FIX = ROOT / "tests" / "fixtures" / "placement"
SYS = str(FIX / "sysfs-2s-4gpu")


def test_cpulists_round_trip():
    assert P.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert P.format_cpulist([11, 10, 0, 1, 2, 3, 8]) == "0-3,8,10-11"
    assert P.parse_cpulist("") == []


def test_tasks_on_node_from_slurm():
    env = {"SLURM_TASKS_PER_NODE": "4(x2),3", "SLURM_NODEID": "2"}
    assert P.tasks_on_node(env) == 3
    assert P.tasks_on_node({**env, "SLURM_NODEID": "1"}) == 4
    assert P.tasks_on_node({"SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "8"}) == 2


def test_gpu_identity_from_recorded_nvidia_smi():
    rows = P.parse_gpu_query((FIX / "nvidia-smi-query.csv").read_text())
    assert [r["pci_bus_id"] for r in rows][:2] == ["00000000:1A:00.0", "00000000:1C:00.0"]
    assert P.sysfs_bus_id(rows[2]["pci_bus_id"]) == "0000:88:00.0"
    # CUDA_VISIBLE_DEVICES by index or UUID; unset: all
    assert [r["index"] for r in P.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, rows)] == ["2", "3"]
    uuid = rows[1]["uuid"]
    assert P.visible_gpus({"CUDA_VISIBLE_DEVICES": uuid}, rows) == [rows[1]]
    assert len(P.visible_gpus({}, rows)) == 4
    assert P.visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, rows) == []


def test_fewer_gpus_than_tasks_is_refused():
    P.check_device_count(4, 4)
    with pytest.raises(P.PlacementError, match="sees 1 GPU.* 4 tasks"):
        P.check_device_count(1, 4)


def test_gpu_socket_binding_on_a_two_socket_hyperthreaded_node():
    rows = P.parse_gpu_query((FIX / "nvidia-smi-query.csv").read_text())
    near = [P.gpu_local_cpus(r["pci_bus_id"], SYS) for r in rows]
    assert near[0] == list(range(0, 20)) + list(range(40, 60))
    allowed = list(range(80))
    cores = P.core_of(allowed, SYS)
    assert P.threads_per_core(allowed, cores) == 2
    got = [P.split_cores(k, near, allowed, 10, cores) for k in range(4)]
    assert all(how == "gpu-socket" for _, how in got)
    # GPUs 0 and 1 on socket 0, GPUs 2 and 3 on socket 1; whole cores, both threads
    assert P.format_cpulist(got[0][0]) == "0-9,40-49"
    assert P.format_cpulist(got[1][0]) == "10-19,50-59"
    assert P.format_cpulist(got[2][0]) == "20-29,60-69"
    assert P.format_cpulist(got[3][0]) == "30-39,70-79"
    # Slurm gave the step 7 cores per rank, alternate sockets (block:cyclic): 14 per socket
    step = list(range(0, 14)) + list(range(20, 34))
    got = [P.split_cores(k, near, step, 7, P.core_of(step, SYS)) for k in range(4)]
    assert [P.format_cpulist(c) for c, _ in got] == ["0-6", "7-13", "20-26", "27-33"]


def test_binding_falls_back_to_blocks_when_the_gpu_side_is_short():
    near = [[0, 1], [0, 1], [0, 1], [0, 1]]  # four ranks, one socket of two cores
    cpus, how = P.split_cores(3, near, list(range(8)), 2, P.core_of(range(8), "/nonexistent"))
    assert how == "block (too few cores near the GPU)" and cpus == [6, 7]
    cpus, how = P.split_cores(1, [None, None], list(range(8)), 4, {})
    assert how == "block (GPU's CPUs unknown)" and cpus == [4, 5, 6, 7]


def test_topology_matrix_gives_the_cpu_affinity():
    topo = P.parse_topo_affinity((FIX / "nvidia-smi-topo-m.txt").read_text())
    assert sorted(topo) == [0, 1, 2, 3]
    assert P.format_cpulist(topo[3]) == "20-39,60-79"


def _rank_start(tmp_path, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DDLBENCH_"))}
    base.update(SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURMD_NODENAME="n1")
    base.update(DDLBENCH_LOG_DIR=str(tmp_path), PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "ddlbench.workloads.node.rank_start", "node.ports", "--count", "1"],
        env=base,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_rank_start_refuses_a_gpu_task_that_would_share_a_gpu(tmp_path):
    """No GPU here: a GPU rank sees none, fewer than the 2 tasks on its node."""
    proc = _rank_start(
        tmp_path, DDLBENCH_DEVICE="gpu", SLURM_TASKS_PER_NODE="2", CUDA_VISIBLE_DEVICES="0"
    )
    assert proc.returncode == 2
    assert "sees 0 GPU(s) but 2 tasks run on its node" in proc.stderr
    assert not (tmp_path / "placement").exists()


def test_rank_start_records_the_binding_and_runs_the_workload(tmp_path):
    proc = _rank_start(tmp_path, DDLBENCH_DEVICE="cpu", DDLBENCH_CPU_BIND="slurm")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().isdigit()  # ddlbench.workloads.node.ports ran: a free port
    rec = json.loads((tmp_path / "placement" / "rank-0.json").read_text())
    assert rec["format"] == "ddlbench-placement/1" and rec["host"] == "n1"
    assert rec["device"] == {"kind": "cpu", "uuid": "cpu:n1:0"}
    assert P.parse_cpulist(rec["binding"]["cpus"]) == sorted(os.sched_getaffinity(0))
    assert rec["binding"]["policy"] == "slurm"
    assert rec["binding"]["cores"] >= 1 and rec["binding"]["cores_per_task"] == 0


def test_interface_address():
    from ddlbench.workloads.node.iface_addr import ipv4_of

    assert ipv4_of("lo") == "127.0.0.1"
    assert ipv4_of("no-such-if0") is None
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench.workloads.node.iface_addr", "no-such-if0"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "SLURMD_NODENAME": "n7"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "node n7 has no IPv4 address on no-such-if0" in proc.stderr


def test_mxnet_keeps_dmlc_interface_over_node_host():
    """ps-lite prefers DMLC_NODE_HOST to DMLC_INTERFACE: with an interface named, no host."""
    from ddlbench.workloads.mx.mxnet_main import prepare_ps_environment

    env = {"DMLC_ROLE": "worker", "DDLBENCH_HOSTS": "n1,n2", "SLURMD_NODENAME": "n2"}
    env["DDLBENCH_ADDRS"] = "10.0.0.1,10.0.0.2"
    without = dict(env)
    prepare_ps_environment(without)
    assert without["DMLC_NODE_HOST"] == "10.0.0.2"
    with_iface = dict(env, DMLC_INTERFACE="ib0")
    prepare_ps_environment(with_iface)
    assert "DMLC_NODE_HOST" not in with_iface
