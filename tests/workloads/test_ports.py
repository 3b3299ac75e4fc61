"""Ports chosen free at job start (ddlbench.workloads.node.ports), as the job scripts use them."""

from __future__ import annotations

import socket
import subprocess
import sys

from ddlbench.workloads.common.env import job_ports, port_base
from ddlbench.workloads.node.ports import EXIT_BUSY, busy_port, pick_ports
from ddlbench.workloads.tf.tfconfig import worker_addresses


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
            [sys.executable, "-m", "ddlbench.workloads.node.ports", "--verify", f"{free},{taken}"],
            capture_output=True,
            text=True,
        )
    assert proc.returncode == EXIT_BUSY
    assert f"port {taken} is in use" in proc.stderr


def test_the_command_prints_a_comma_list_and_the_workloads_read_it():
    out = subprocess.run(
        [sys.executable, "-m", "ddlbench.workloads.node.ports", "--count", "3"],
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


def test_ports_are_drawn_below_the_ephemeral_range(tmp_path):
    from ddlbench.workloads.node.ports import candidate_range, ephemeral_range

    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    assert ephemeral_range(str(range_file)) == (32768, 60999)
    assert ephemeral_range(str(tmp_path / "absent")) == (32768, 60999)
    assert candidate_range(256, (32768, 60999)) == range(10000, 32768)
    # a range that starts low leaves 1024 up; one that starts at 1024, above it
    assert candidate_range(256, (11000, 60999)) == range(1024, 11000)
    assert candidate_range(4, (1024, 50000)) == range(50001, 65536)
    low, _ = ephemeral_range()
    ports = pick_ports(64)
    assert len(set(ports)) == 64 and all(p < low for p in ports)


def test_each_node_checks_only_the_ports_its_workers_bind():
    from ddlbench.workloads.node.ports import node_ports

    ports = list(range(20000, 20008))
    assert node_ports(ports, 4, 0) == ports[:4]
    assert node_ports(ports, 4, 1) == ports[4:]
    assert node_ports(ports, None, 1) == ports
    with socket.socket() as s:  # node 0's port 20000 is busy; node 1 does not care
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        free = pick_ports(3)
        listed = ",".join(str(p) for p in [taken, free[0], free[1], free[2]])
        for node, code in (("0", EXIT_BUSY), ("1", 0)):
            proc = subprocess.run(
                [sys.executable, "-m", "ddlbench.workloads.node.ports", "--verify", listed,
                 "--per-node", "2"],
                env={"SLURM_NODEID": node, "PYTHONPATH": ":".join(sys.path)},
                capture_output=True,
                text=True,
            )  # fmt: skip
            assert proc.returncode == code, (node, proc.stderr)
