"""Where MXNet's scheduler and servers run: the spare cores of a node.

The two-socket, hyperthreaded node (40 cores, 80 CPUs, 4 GPUs) is absent here: the core map
comes from its recorded /sys tree under tests/fixtures/placement/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ddlbench.workloads.common import placement as P
from ddlbench.workloads.common.ps_cpus import spare_cpus
from tests.support.repo import ROOT

SYS = str(ROOT / "tests" / "fixtures" / "placement" / "sysfs-2s-4gpu")
NODE = list(range(80))
CORES = P.core_of(NODE, SYS)


def test_spare_cores_come_from_the_top_of_each_socket_and_miss_the_gpu_socket_ranks():
    # 4 ranks x 9 cores (18 CPUs with hyperthreads) of 40 cores: 4 cores left, 2 per socket
    cpus, why = spare_cpus(NODE, CORES, 80, 4, 18)
    assert P.format_cpulist(cpus) == "18-19,38-39,58-59,78-79"
    assert why.startswith("4 spare core(s)")
    near = [P.gpu_local_cpus(f"0000:{b}:00.0", SYS) for b in ("1a", "1c", "88", "8a")]
    ranks = [P.split_cores(k, near, NODE, 9, CORES)[0] for k in range(4)]
    assert all(not set(r) & set(cpus) for r in ranks), ranks
    assert len({c for r in ranks for c in r} | set(cpus)) == 80  # together: the whole node


def test_spare_cores_miss_a_block_cyclic_slurm_step():
    # Slurm gave the workers' step 7 cores per rank from both sockets (block:cyclic)
    cpus, _ = spare_cpus(NODE, CORES, 80, 4, 14)
    step = list(range(0, 14)) + list(range(20, 34))
    step += [c + 40 for c in step]
    assert not set(step) & set(cpus)
    assert P.format_cpulist(cpus) == "14-19,34-39,54-59,74-79"


def test_no_spare_cores_is_said():
    cpus, why = spare_cpus(NODE, CORES, 80, 4, 20)
    assert cpus == [] and why.startswith("no spare cores: the node's 80 CPU(s) are the workers")
    # one spare CPU is half a hyperthreaded core: not a core
    cpus, why = spare_cpus(NODE, CORES, 80, 79, 1)
    assert cpus == [] and "less than one core of 2" in why
    # a job allocated fewer CPUs than the machine has (no cgroup): the allocation counts
    assert spare_cpus(NODE, CORES, 2, 2, 1)[0] == []


def test_unknown_topology_counts_every_cpu_as_a_core():
    cores = P.core_of([0, 1, 2, 3], "/nonexistent")
    assert spare_cpus([0, 1, 2, 3], cores, 4, 2, 1) == (
        [2, 3],
        "2 spare core(s): the node's 4 CPU(s) less the workers' 2 x 1",
    )


def test_a_ps_process_binds_itself_and_records_it(tmp_path):
    here = sorted(os.sched_getaffinity(0))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SLURMD_NODENAME": "n9",
        "DDLBENCH_RUN_DIR": str(tmp_path),
        "SLURM_CPUS_ON_NODE": str(len(here)),
        "DDLBENCH_MXNET_WORKER_TASKS": "1",
        "DDLBENCH_MXNET_WORKER_CPUS": str(len(here) - 1),
        "DDLBENCH_CPU_BIND": "gpu-socket",
        "DDLBENCH_DEVICE": "gpu",
    }
    code = (
        "import os, sys; from ddlbench.workloads.common.ps_cpus import bind_ps_role;"
        "r = bind_ps_role(dict(os.environ), 'server');"
        "print(sorted(os.sched_getaffinity(0)))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (path,) = (tmp_path / "provenance" / "mxnet-ps").glob("server-n9-*.json")
    rec = json.loads(path.read_text())
    if len(here) > 1:  # a machine of one CPU has none to spare
        assert out.stdout.strip() == str(here[-1:]) and rec["spare"] is True
        assert rec["cpus"] == str(here[-1])
    assert rec["cpus_before"] == P.format_cpulist(here)
    assert f"ddlbench: mxnet server on n9: cpus {rec['cpus']} (" in out.stderr
    # none spare: nothing bound, and the job output says so
    env["DDLBENCH_MXNET_WORKER_CPUS"] = str(len(here))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == str(here)
    assert "no spare cores" in out.stderr and "share the workers' cores" in out.stderr
    # spare cores, but workers that ddlbench did not bind: nothing bound, and it says why
    env.update(DDLBENCH_MXNET_WORKER_CPUS=str(len(here) - 1), DDLBENCH_CPU_BIND="slurm")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == str(here)
    assert "not placed there: the workers are not bound by ddlbench" in out.stderr
