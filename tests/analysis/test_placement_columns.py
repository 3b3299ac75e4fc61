"""NCCL's transport and shared devices, read from recorded output (tests/fixtures/placement/)."""

from __future__ import annotations

import json

import pandas as pd

from ddlbench.collect.placement import (
    add_placement_columns,
    format_channel_nics,
    parse_nccl_log,
    placement_fields,
    shared_devices,
)
from tests.support.repo import ROOT

FIX = ROOT / "tests" / "fixtures" / "placement"


def test_nccl_on_infiniband():
    got = parse_nccl_log((FIX / "nccl-ib.log").read_text())
    assert got == {
        "version": "2.18.5+cuda12.2",
        "net": "IB",
        "devices": "[0]mlx5_0:1/IB",
        "transports": ["NET/IB", "P2P/IPC"],
        "channel_nics": {"mlx5_0:1": [0]},
    }


def test_nccl_fallen_back_to_sockets():
    got = parse_nccl_log((FIX / "nccl-socket.log").read_text())
    assert got["net"] == "Socket" and got["transports"] == ["NET/Socket", "P2P/IPC"]
    empty = {"version": None, "net": None, "devices": None, "transports": [], "channel_nics": {}}
    assert parse_nccl_log("") == empty


def test_each_network_channel_names_its_nic():
    """An 8-GPU node with four InfiniBand rails (NCCL 2.18's INIT/NET lines, in the format of
    the logs above; the adapter names are those of a DGX-class node): rank 0's channels 0 and 2
    ran over mlx5_0, 1 and 3 over mlx5_1, and the other two rails carried none of them."""
    got = parse_nccl_log((FIX / "nccl-4nic.log").read_text())
    assert got["net"] == "IB"
    assert got["channel_nics"] == {"mlx5_0:1": [0, 2], "mlx5_1:1": [1, 3]}
    assert format_channel_nics(got["channel_nics"]) == "mlx5_0:1 (0,2), mlx5_1:1 (1,3)"
    assert format_channel_nics({}) is None
    # older NCCL ("Channel 01 :") and a device missing from the list
    old = "h:1:2 [0] NCCL INFO Channel 01 : 1[3b000] -> 0[3b000] [receive] via NET/IB/3\n"
    assert parse_nccl_log(old)["channel_nics"] == {"NET device 3": [1]}


def _run(tmp_path, name, records, nccl=None):
    attempt = tmp_path / "runs" / name / "logs" / "attempt-1"
    (attempt / "placement").mkdir(parents=True)
    for rec in records:
        (attempt / "placement" / f"rank-{rec['rank']}.json").write_text(json.dumps(rec))
    if nccl:
        (attempt / "nccl").mkdir()
        (attempt / "nccl" / "rank-0.n1.123.log").write_text((FIX / nccl).read_text())
    return f"runs/{name}"


def _rec(rank, host, uuid, how="gpu-socket"):
    return {
        "rank": rank,
        "host": host,
        "device": {"kind": "gpu", "uuid": uuid},
        "binding": {"policy": "gpu-socket", "how": how},
        "nccl_expected": "IB",
    }


def test_two_ranks_of_a_node_on_one_gpu_fail_the_run(tmp_path):
    recs = [_rec(0, "n1", "GPU-a"), _rec(1, "n1", "GPU-a"), _rec(2, "n2", "GPU-a")]
    assert shared_devices(recs) == ["ranks 0, 1 on n1 shared device GPU-a"]
    ok = [_rec(0, "n1", "GPU-a"), _rec(1, "n1", "GPU-b", how="block (GPU's CPUs unknown)")]
    ok[0]["binding"].update(cores=5, cores_per_task=10)  # hyperthreads counted as cores
    runs = pd.DataFrame(
        {
            "run_dir": [_run(tmp_path, "bad", recs, "nccl-ib.log"), _run(tmp_path, "ok", ok)],
            "nodes": [2, 1],
            "status": ["ok", "ok"],
            "complete": [True, True],
            "error_message": [None, None],
            "problems": [None, None],
        }
    )
    out = add_placement_columns(runs, tmp_path)
    bad, good = out.to_dict("records")
    assert bad["status"] == "failed" and bad["complete"] is False
    assert bad["error_message"] == "ranks shared a device: ranks 0, 1 on n1 shared device GPU-a"
    assert bad["nccl_net"] == "IB" and bad["nccl_transports"] == "NET/IB,P2P/IPC"
    assert bad["nccl_channel_nics"] == "rank 0: mlx5_0:1 (0)"
    assert good["status"] == "ok" and pd.isna(good["shared_device"])
    assert good["cpu_binding"] == (
        "gpu-socket; rank 0: 5 of 10 cores; rank 1: block (GPU's CPUs unknown)"
    )


def test_multi_node_run_off_the_expected_network_is_flagged(tmp_path):
    recs = [_rec(0, "n1", "GPU-a"), _rec(1, "n2", "GPU-a")]
    rd = _run(tmp_path, "sock", recs, "nccl-socket.log")
    got = placement_fields(tmp_path / rd, 2)
    assert got["_note"] == "NCCL used network Socket, not IB" and got["_failure"] is None
    # one node: NCCL's network is not used between nodes, nothing to flag
    assert placement_fields(tmp_path / rd, 1)["_note"] is None


def test_every_rail_of_the_first_node_is_checked_against_the_profile(tmp_path):
    """network.ib_hca lists four rails; rank 0's channels use two of them (its nearest), rank
    1's the other two: together every rail carried traffic. Without rank 1's log, the run is
    flagged with the two rails no channel used."""
    recs = [_rec(0, "n1", "GPU-a"), _rec(1, "n1", "GPU-b"), _rec(2, "n2", "GPU-a")]
    for rec in recs:
        rec["nccl_expected_nics"] = "mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"
    rd = tmp_path / _run(tmp_path, "rails", recs, "nccl-4nic.log")
    folder = rd / "logs" / "attempt-1" / "nccl"
    half = placement_fields(rd, 2)
    assert half["_note"] == (
        "NCCL's channels on the first node used mlx5_0:1, mlx5_1:1, not mlx5_2:1, mlx5_3:1 "
        "(network.ib_hca)"
    )
    rank1 = (FIX / "nccl-4nic.log").read_text().replace("NET/IB/0/", "NET/IB/2/")
    (folder / "rank-1.n1.124.log").write_text(rank1.replace("NET/IB/1/", "NET/IB/3/"))
    whole = placement_fields(rd, 2)
    assert whole["_note"] is None
    assert whole["nccl_channel_nics"] == (
        "rank 0: mlx5_0:1 (0,2), mlx5_1:1 (1,3); rank 1: mlx5_2:1 (0,2), mlx5_3:1 (1,3)"
    )
    assert placement_fields(rd, 1)["_note"] is None  # one node: no network traffic to judge
