"""``ddlbench predict``: inputs that contradict each other (a base faster than its links, a
base beside ``--from``, a base of part of a node beyond one node, options that cancel) are
refused with exit 2 and one line, and every row's step adds up (docs/scaling-model.md)."""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from ddlbench.analyse import hierarchy, whatif
from tests.support.cli import invoke

RESNET = ["predict", "--model", "resnet50", "--batch", "64", "--single-device-throughput", "200"]


def _refused(args, *says: str) -> str:
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("ddlbench: ") and len(res.stderr.strip().splitlines()) == 1
    assert all(s in res.stderr for s in says), res.stderr
    assert "Traceback" not in res.output and res.stdout == ""
    return res.stderr


@pytest.mark.parametrize(
    "args, step, floor",
    [
        (["--model", "llama3-8b", "--batch", "2", "--precision", "bf16", "--parallel", "zero2",
          "--base-throughput", "30000", "--base-devices", "8", "--nodes", "1,2",
          "--intra-busbw", "pcie3-host", "--inter-busbw", "10gbe"], "1092 ms", "8433 ms"),
        (["--model", "resnet50", "--batch", "2", "--base-throughput", "3000", "--base-devices",
          "8", "--intra-busbw", "pcie4", "--inter-busbw", "100gbe", "--nics-per-node", "4"],
         "5.333 ms", "6.12 ms"),
    ],
)  # fmt: skip
def test_a_base_faster_than_its_links_allow_is_refused(args, step, floor):
    _refused(["predict", *args], "--base-throughput: ", f"a step of {step}", f"need {floor}",
             "faster than those links allow", "--intra-busbw", "--batch")  # fmt: skip


def _cases():
    for model, batch, rate, devices, parallel, intra, inter, nics in itertools.product(
        ("resnet50", "vgg16", "gpt2-124m"), (2, 32), (50.0, 400.0, 3000.0), (1, 8, 16),
        ("ddp", "fsdp", "zero2"), ("pcie3-host", "nvlink-v100"), ("100gbe", "edr"), (1, 4),
    ):  # fmt: skip
        seq = 1024 if model.startswith("gpt") else 0
        case = whatif.Case(model, batch, rate / devices, base_devices=devices, parallel=parallel,
                           seq=seq)  # fmt: skip
        yield case, hierarchy.preset(intra), hierarchy.preset(inter), nics


def test_every_row_s_step_is_its_compute_synchronisation_and_exposed_communication():
    """... and the overlap slowdown it adds (the default), or none with ``--overlap-slowdown 0``
    (every other case)."""
    checked = slowed = 0
    for i, (case, intra, inter, nics) in enumerate(_cases()):
        if not i % 2:
            case = replace(case, overlap_slowdown=(0.0, 0.0, 0.0))
        one = hierarchy.Topology(1, 1, intra, inter, nics, hierarchy.base_latency_s())
        measured, floor = whatif.base_floor(case, whatif.base_layout(case, 8, one))
        if floor >= measured:  # refused by predict (above)
            continue
        for r in whatif.curve(case, 8, [1, 2, 4], intra, inter, nics):
            parts = r["compute_s"] + r["sync_s"] + r["exposed_comm_s"] + r["overlap_slowdown_s"]
            assert parts == pytest.approx(r["step_s"], rel=1e-5), (case, r["devices"])
            assert (r["overlap_slowdown_s"] > 0) <= bool(i % 2)
            checked += 1
            slowed += r["overlap_slowdown_s"] > 0
    assert checked > 500 and slowed > 100


def test_a_base_the_fixed_point_missed_is_solved_and_adds_up():
    # 8 devices at 400 samples/s over PCIe 3 through the host: the communication is 91 % of the
    # step; the fixed-point iteration alone left the base's step 4.7 % off the measured one
    args = ["predict", "--model", "resnet50", "--batch", "2", "--base-throughput", "400",
            "--base-devices", "8", "--intra-busbw", "pcie3-host", "--inter-busbw", "edr",
            "--nodes", "1,2", "--json"]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["points"]
    assert rows[0]["step_s"] == pytest.approx(2 / 50, rel=1e-5)
    for r in rows:
        parts = r["compute_s"] + r["sync_s"] + r["exposed_comm_s"] + r["overlap_slowdown_s"]
        assert parts == pytest.approx(r["step_s"])


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--single-device-throughput", "100"], "--single-device-throughput with --from lm"),
        (["--base-throughput", "800"], "--base-throughput with --from lm"),
        (["--base-devices", "2"], "--base-devices with --from lm"),
        (["--batch", "8"], "--batch 8: series 'pytorch fsdp ckpt none' of campaign lm "
                           "measured its throughput at batch 4/device"),
    ],
)  # fmt: skip
def test_a_base_or_a_batch_beside_from_is_refused(monkeypatch, extra, says):
    from ddlbench.cli import cmd_predict
    from tests.support.lm_inputs import lm_campaign as _lm_campaign

    monkeypatch.setattr(cmd_predict, "_from_campaign", lambda kw: _lm_campaign())
    _refused(["predict", "--from", "lm", "--nodes", "1,2", *extra], says)
    # its own batch, given, is no contradiction
    assert invoke(["predict", "--from", "lm", "--nodes", "1,2", "--batch", "4"]).exit_code == 0


@pytest.mark.parametrize("devices, gpn", [(12, 8), (6, 4), (20, 8)])
def test_a_base_beyond_one_node_must_be_whole_nodes(devices, gpn):
    args = ["predict", "--model", "resnet50", "--batch", "64", "--base-throughput", "1200",
            "--base-devices", devices, "--gpus-per-node", gpn]  # fmt: skip
    _refused(args, f"--base-devices {devices}: more than one node of --gpus-per-node {gpn}",
             "not a whole number of nodes")  # fmt: skip


@pytest.mark.parametrize("devices, first", [(4, 4), (8, 8), (16, 16)])
def test_a_base_within_one_node_or_of_whole_nodes_is_placed_where_it_ran(devices, first):
    args = ["predict", "--model", "resnet50", "--batch", "64", "--base-throughput", "1200",
            "--base-devices", devices, "--gpus-per-node", "8", "--nodes", "2,4",
            "--json"]  # fmt: skip
    res = invoke(args)
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["points"]
    assert [r["devices"] for r in rows] == sorted({first, 16, 32})
    assert rows[0]["efficiency"] == 1.0


@pytest.mark.parametrize(
    "args, says",
    [
        (["predict", "--transformer", "2,128,4,1000", "--model", "mpt-13b", "--batch", "2",
          "--single-device-throughput", "100"], "--transformer with --model mpt-13b"),
        (RESNET + ["--calibration", "qsweep"], "--calibration applies to --from CAMPAIGN"),
        (RESNET + ["--plot", "x.png", "--no-plot"], "--plot and --no-plot contradict"),
        (RESNET + ["--base-devices", "4"], "--base-devices goes with --base-throughput"),
        (RESNET[:-1] + ["inf"], "--single-device-throughput must be a finite positive number"),
        (RESNET + ["--nodes", "1,,2"], "--nodes: an empty item in '1,,2'"),
        (RESNET + ["--nodes", "1,2,"], "--nodes: an empty item"),
    ],
)  # fmt: skip
def test_options_that_would_be_ignored_are_refused(args, says):
    _refused(args, says)


def test_a_plot_path_that_cannot_be_written_is_refused_before_the_table(tmp_path):
    _refused(RESNET + ["--plot", tmp_path / "no" / "such" / "x.png"], "no folder")
    assert not (tmp_path / "no").exists()  # not created
    _refused(RESNET + ["--plot", tmp_path], "name a file ending in .png or .svg")
    (tmp_path / "d.png").mkdir()
    _refused(RESNET + ["--plot", tmp_path / "d.png"], "a folder")
    if Path("/proc/self").is_dir():
        _refused(RESNET + ["--plot", "/proc/x.png"], "cannot write in '/proc'")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        _refused(RESNET + ["--plot", ro / "x.png"], "cannot write in")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ro") == ["d.png"]
