"""The synthetic campaigns follow the log format exactly (every record validates)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.synth import SynthRun, write_campaign

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = Path(__file__).resolve().parents[2] / "ddlbench" / "schemas" / "rank-log-v1.schema.json"


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
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
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
