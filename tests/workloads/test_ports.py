"""Ports chosen free at job start (ddlbench.workloads.ports), as the job scripts use them."""

from __future__ import annotations

import socket
import subprocess
import sys

from ddlbench.workloads.common.env import job_ports, port_base
from ddlbench.workloads.ports import EXIT_BUSY, busy_port, pick_ports
from ddlbench.workloads.tfconfig import worker_addresses


def test_picked_ports_are_distinct_and_free():
    ports = pick_ports(16)
    assert len(set(ports)) == 16
    assert busy_port(ports) == 0
    for p in ports:  # free: each can be listened on at once
        with socket.socket() as s:
            s.bind(("", p))
            s.listen()


def test_verify_names_a_port_someone_listens_on():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        free = pick_ports(1)[0]
        assert busy_port([free, taken]) == taken
        proc = subprocess.run(
            [sys.executable, "-m", "ddlbench.workloads.ports", "--verify", f"{free},{taken}"],
            capture_output=True,
            text=True,
        )
    assert proc.returncode == EXIT_BUSY
    assert f"port {taken} is in use" in proc.stderr


def test_the_command_prints_a_comma_list_and_the_workloads_read_it():
    out = subprocess.run(
        [sys.executable, "-m", "ddlbench.workloads.ports", "--count", "3"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {"DDLBENCH_PORTS": out, "DDLBENCH_PORT": out.split(",")[0]}
    ports = [int(p) for p in out.split(",")]
    assert job_ports(env) == ports and port_base(env) == ports[0]
    # TensorFlow: worker i listens on DDLBENCH_PORTS[i], whatever node it is on
    env.update(
        DDLBENCH_ADDRS="10.0.0.1,10.0.0.2",
        SLURM_NTASKS="3",
        SLURM_NNODES="2",
        SLURM_TASKS_PER_NODE="2,1",
    )
    assert worker_addresses(env) == [
        f"10.0.0.1:{ports[0]}",
        f"10.0.0.1:{ports[1]}",
        f"10.0.0.2:{ports[2]}",
    ]
