"""The synthetic campaigns follow the log format exactly (every record validates)."""

from __future__ import annotations

import json

import pytest

from tests.support.repo import RANK_LOG_SCHEMA
from tests.support.synth import SynthRun, write_campaign

jsonschema = pytest.importorskip("jsonschema")


def test_every_synthetic_record_validates(tmp_path):
    runs = [
        SynthRun(nodes=1, tasks_per_node=2, measure_steps=4, compute_fraction=0.7),
        SynthRun(nodes=2, tasks_per_node=2, repeat=1, failed_ranks=(1,), killed_ranks=(2,)),
        SynthRun(
            model="lenet",
            mode="convergence",
            epochs=3,
            measure_steps=6,
            warmup_steps=0,
            target_accuracy=0.5,
            tasks_per_node=2,
        ),
        SynthRun(
            model="allreduce",
            mode="allreduce",
            tasks_per_node=2,
            batch_size=1,
            allreduce_sizes=[1024, 4096],
            workload="allreduce_torch",
        ),
    ]
    camp = write_campaign(tmp_path, "schema", runs)
    validator = jsonschema.Draft202012Validator(json.loads(RANK_LOG_SCHEMA.read_text()))
    kinds = set()
    for log in sorted(camp.glob("runs/*/logs/rank-*.jsonl")):
        lines = log.read_bytes().split(b"\n")
        complete, last = lines[:-1], lines[-1]
        assert json.loads(complete[0])["type"] == "meta"
        for line in complete:
            rec = json.loads(line)
            validator.validate(rec)
            kinds.add(rec["type"])
        if last:  # only a killed rank leaves an unterminated, unparseable last line
            with pytest.raises(ValueError):
                json.loads(last)
    assert kinds == {"meta", "step", "eval", "allreduce", "summary", "error"}
    manifest = json.loads((camp / "campaign.json").read_text())
    for run in manifest["runs"]:
        assert run["group"] == run["run_id"].rsplit("-r", 1)[0]
        assert (camp / run["run_dir"] / "run.json").is_file()


def test_synthetic_campaigns_come_from_the_real_writers(tmp_path):
    from ddlbench.campaign.manifest import load_campaign
    from ddlbench.render.campaign import read_run_config

    runs = [SynthRun(nodes=1, tasks_per_node=2, repeat=r, not_run=(r == 0)) for r in range(2)] + [
        SynthRun(model="lenet", mode="convergence", epochs=2, measure_steps=4, warmup_steps=0)
    ]
    camp = load_campaign(write_campaign(tmp_path, "real", runs))
    assert [r.run_id for r in camp.runs] == [r.run_id for r in runs]
    for info, run in zip(camp.runs, runs):
        assert info.script.is_file()
        assert info.run_dir.is_dir() != run.not_run
        if not run.not_run:  # the run.json a started job wrote is the one its script carries
            started = json.loads((info.run_dir / "run.json").read_text())
            info.run_dir.joinpath("run.json").unlink()
            assert started == read_run_config(info.run_dir, info.script)
            assert started["model"] == run.spec_model and started["mode"] == run.mode
