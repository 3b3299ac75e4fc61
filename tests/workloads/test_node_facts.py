"""Per-node provenance: what each node's local rank 0 records at the end of a run (NCCL
loaded, GPU links, RDMA adapters and interfaces, CPU and NUMA), and how the report sums it up.
The sysfs and procfs readers are checked on small recorded trees; a real 2-rank PyTorch run
writes the file on this machine."""

from __future__ import annotations

import json
from pathlib import Path

from ddlbench.campaign.node_facts import read_node_facts, summarise
from ddlbench.workloads.common.provenance import (
    cpu_and_numa,
    gpu_links,
    infiniband,
    interfaces,
    nccl_loaded,
)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_infiniband_ports_and_interfaces_in_use(tmp_path, monkeypatch):
    ib = tmp_path / "infiniband"
    for dev, rate in (("mlx5_0", "200 Gb/sec (2X NDR)"), ("mlx5_1", "100 Gb/sec (4X EDR)")):
        write(ib / dev / "ports" / "1" / "state", "4: ACTIVE\n")
        write(ib / dev / "ports" / "1" / "rate", rate + "\n")
        write(ib / dev / "ports" / "1" / "link_layer", "InfiniBand\n")
    adapters = infiniband(str(ib))
    assert [a["device"] for a in adapters] == ["mlx5_0", "mlx5_1"]
    assert adapters[0]["ports"] == [
        {"port": 1, "state": "4: ACTIVE", "rate": "200 Gb/sec (2X NDR)", "link_layer": "InfiniBand"}
    ]
    assert "absent" in infiniband(str(tmp_path / "none"))
    net = tmp_path / "net"
    for name, state, speed in (("lo", "unknown", ""), ("eno1", "up", "25000"), ("ib0", "up", "-1")):
        write(net / name / "operstate", state)
        write(net / name / "speed", speed)
        write(net / name / "mtu", "1500")
    write(net / "eno2" / "operstate", "down")
    route = tmp_path / "route"
    route.write_text(
        "Iface\tDestination\tGateway\tFlags\nib0\t0000A8C0\t00000000\t0001\n"
        "eno1\t00000000\t0101A8C0\t0003\n"
    )
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "^ib")
    used = {n["name"]: n for n in interfaces(str(net), str(route))}
    assert set(used) == {"eno1", "ib0"}  # up, not loopback
    assert used["eno1"]["speed_mbps"] == 25000 and used["eno1"]["default_route"]
    assert used["ib0"]["speed_mbps"] is None and used["ib0"]["nccl_socket_ifname"]


def test_cpu_model_and_numa_layout(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "".join(
            f"processor\t: {i}\nmodel name\t: AMD EPYC 7763 64-Core Processor\n\n" for i in range(4)
        )
    )
    nodes = tmp_path / "node"
    write(nodes / "node0" / "cpulist", "0-1\n")
    write(nodes / "node0" / "meminfo", "Node 0 MemTotal:       263874568 kB\n")
    write(nodes / "node1" / "cpulist", "2,3\n")
    write(nodes / "node1" / "meminfo", "Node 1 MemTotal:       264238080 kB\n")
    cpu = cpu_and_numa(str(cpuinfo), str(nodes))
    assert cpu["model"] == "AMD EPYC 7763 64-Core Processor" and cpu["logical_cpus"] == 4
    assert [(n["node"], n["cpus"], n["n_cpus"]) for n in cpu["numa"]] == [
        (0, "0-1", 2),
        (1, "2,3", 2),
    ]
    assert cpu["numa"][0]["mem_gib"] == 251.7  # 263874568 kB
    assert "absent" in cpu_and_numa(str(cpuinfo), str(tmp_path / "nonuma"))["numa"]


def test_absent_items_say_why(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert "no NCCL library loaded" in nccl_loaded(str(maps))["absent"]
    assert "cannot be read" in nccl_loaded(str(tmp_path / "none"))["absent"]
    assert "absent" in gpu_links()  # no GPU driver on this machine


def test_gpu_links_say_no_gpu_rather_than_a_missing_module_on_a_cpu_node(tmp_path, monkeypatch):
    import builtins

    from ddlbench.workloads.common import provenance

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    dev = tmp_path / "dev"
    for name in ("null", "nvidiactl", "nvidia-uvm"):  # a driver's nodes, but no GPU's
        write(dev / name, "")
    present = provenance._nvidia_gpu_present
    assert present(str(tmp_path / "no-driver"), str(dev)) is False
    write(dev / "nvidia0", "")
    assert present(str(tmp_path / "no-driver"), str(dev))
    write(tmp_path / "driver" / "0000:3b:00.0" / "information", "Model: A100\n")
    assert present(str(tmp_path / "driver"), str(tmp_path / "none"))
    monkeypatch.setattr(provenance, "_nvidia_gpu_present", lambda: False)
    assert "no NVIDIA GPU on this node" in gpu_links()["absent"]
    monkeypatch.setattr(provenance, "_nvidia_gpu_present", lambda: True)
    assert "pynvml) is not installed" in gpu_links()["absent"]


def test_report_summary_groups_equal_nodes(tmp_path):
    base = {
        "nccl": {"library": "/usr/lib/libnccl.so.2", "version": "2.20.5"},
        "gpu_links": {"gpus": 2, "matrix": [["X", "NV12"], ["NV12", "X"]]},
        "infiniband": [{"device": "mlx5_0", "ports": [{"port": 1, "state": "4: ACTIVE",
                       "rate": "200 Gb/sec", "link_layer": "InfiniBand"}]}],
        "interfaces": [{"name": "eno1", "speed_mbps": 25000, "default_route": True}],
        "cpu": {"model": "EPYC", "logical_cpus": 128,
                "numa": [{"node": 0, "n_cpus": 128, "mem_gib": 503.7}]},
    }  # fmt: skip
    for i, host in enumerate(("g1", "g2")):
        facts = dict(base, host=host)
        if host == "g2":
            facts["nccl"] = {"absent": "no NCCL library loaded by the run"}
        write(tmp_path / "runs" / f"r{i}" / "provenance" / f"node-{host}.json", json.dumps(facts))
    text = summarise(read_node_facts(tmp_path))
    assert text["gpu_links"] == "2 GPUs; pairs: NV12 x2"
    assert text["nccl"] == (
        "g1: NCCL 2.20.5 (/usr/lib/libnccl.so.2); g2: absent (no NCCL library loaded by the run)"
    )
    assert text["network"].startswith("mlx5_0/1 InfiniBand 200 Gb/sec 4: ACTIVE; interfaces eno1")
    assert text["cpu"] == "EPYC x 128 logical CPUs; NUMA node 0: 128 CPUs, 503.7 GiB"
    assert summarise({}) == {k: "-" for k in ("cpu", "nccl", "gpu_links", "network")}


def test_a_real_run_records_its_node(launch_ranks, run_config):
    cfg = run_config(
        "pytorch", framework_options={"backend": "gloo"}, steps={"warmup": 1, "measure": 3}
    )
    result = launch_ranks("pytorch", cfg, world_size=2)
    assert result.returncodes == [0, 0], result.describe()
    (path,) = (result.run_dir / "provenance").glob("node-*.json")  # one node: local rank 0 only
    facts = json.loads(path.read_text())
    assert facts["cpu"]["logical_cpus"] >= 1 and facts["cpu"]["model"]
    assert "absent" in facts["nccl"]  # gloo on CPU loads no NCCL
    assert all(n["name"] != "lo" for n in facts["interfaces"])  # this machine has eth0 up
