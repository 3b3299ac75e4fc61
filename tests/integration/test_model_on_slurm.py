"""The report's scaling model from a campaign measured through the real Slurm cluster.

An allreduce sweep at two emulated nodes and LeNet at 1 and 2 nodes, both through the project's
loopback Slurm cluster; `report --calibration` fits the links from the sweep and writes the
model section, and `predict --from` reads the same campaigns.
"""

from __future__ import annotations

import json

import pytest

from tests.support.cli import ddlbench, diagnose
from tests.support.envs import require_envs

SWEEP = """\
name: sweep
mode: allreduce
frameworks:
  - {name: pytorch, backend: gloo}
allreduce: {min_bytes: 1024, max_bytes: 16777216, iters: 5, warmup: 2}
scale: {points: [2x1]}
slurm: {time: "00:05:00"}
"""

TRAIN = """\
name: train
model: lenet
data: digits
frameworks:
  - {name: pytorch, backend: gloo}
batch_size: 32
steps: {warmup: 3, measure: 15, measure_seconds: 0}
optimizer: {lr: 0.05, momentum: 0.9, weight_decay: 0.0}
lr_scaling: {rule: none}
scale: {points: [1x1, 2x1]}
slurm: {time: "00:05:00"}
"""


def _submit_and_wait(spec_text: str, campaign: str, tmp_path, results) -> None:
    spec = tmp_path / f"{campaign}.yaml"
    spec.write_text(spec_text)
    sub = ddlbench(
        "submit", str(spec), "--cluster", "localslurm", "--campaign", campaign, results=results
    )
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", campaign, "--timeout", "600", results=results)
    assert waited.returncode == 0, diagnose(results / campaign, waited.stdout)


@pytest.mark.frameworks
@pytest.mark.slurm
@pytest.mark.slow
def test_report_model_section_from_a_slurm_sweep(tmp_path, slurm_cluster):
    require_envs("pytorch")
    results = tmp_path / "results"
    _submit_and_wait(SWEEP, "sweep", tmp_path, results)
    _submit_and_wait(TRAIN, "train", tmp_path, results)

    rep = ddlbench("report", "train", "--calibration", "sweep", results=results)
    assert rep.returncode == 0, rep.stderr
    md = (results / "train" / "report" / "report.md").read_text()
    assert "## Scaling model" in md
    assert "No scaling model" not in md, rep.stderr  # a sweep to 16 MiB shows the bandwidth
    section = md.split("## Scaling model", 1)[1].split("\n## ", 1)[0]
    # the fitted link and whether the overlap was measured or estimated are said
    assert "busbw" in section or "GB/s" in section, section
    assert "overlap" in section, section
    # every prediction with its interval, its synchronisation from the measured step times
    assert "interval" in section and "sync ms" in section, section
    assert "synchronisation = the expected maximum of N" in section, section

    pred = ddlbench(
        "predict", "--from", "train", "--calibration", "sweep", "--nodes", "1,2,4",
        "--json", "--no-plot", results=results,
    )  # fmt: skip
    assert pred.returncode == 0, pred.stderr
    out = json.loads(pred.stdout)
    assert [p["devices"] for p in out["points"]] == [1, 2, 4]
    assert all(p["throughput"] > 0 for p in out["points"])
    efficiencies = [p["efficiency"] for p in out["points"]]
    assert efficiencies[0] == pytest.approx(1.0)
    assert all(0 < e <= 1.0 for e in efficiencies)
    for p in out["points"]:
        assert p["efficiency_low"] <= p["efficiency"] <= p["efficiency_high"]
    # the measured points beside their predictions; one outside its interval says why
    assert [m["devices"] for m in out["measured"]] == [1, 2]
    for m in out["measured"]:
        assert m["inside"] == (m["explanation"] == "")
    assert out["synchronisation"].startswith("measured: ")
