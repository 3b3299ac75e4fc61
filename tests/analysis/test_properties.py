"""Property tests: file names, order and duplicate copies never change the numbers."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddlbench.collect.collector import collect_campaign
from tests.support.sweeps import small_sweep
from tests.support.synth import SynthRun, write_campaign

RUNS = small_sweep(repeats=1) + [
    SynthRun(
        "pytorch",
        nodes=2,
        tasks_per_node=2,
        repeat=1,
        killed_ranks=(1,),
        measure_steps=8,
        warmup_steps=2,
    )
]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    root = tmp_path_factory.mktemp("prop")
    camp = write_campaign(root, "base", RUNS)
    return camp, collect_campaign(camp, write=False)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(
        a.runs.drop(columns=["rank_files"]), b.runs.drop(columns=["rank_files"])
    )
    pd.testing.assert_frame_equal(
        a.ranks.drop(columns=["file", "duplicates"]), b.ranks.drop(columns=["file", "duplicates"])
    )
    assert a.steps_table().equals(b.steps_table())
    pd.testing.assert_frame_equal(a.evals, b.evals)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_permuting_rank_files_changes_nothing(baseline, data):
    camp, expected = baseline
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "base"
        shutil.copytree(camp, copy)
        for run_dir in sorted((copy / "runs").iterdir()):
            logs = run_dir / "logs"
            files = sorted(logs.glob("rank-*.jsonl"))
            contents = [f.read_bytes() for f in files]
            for f in files:
                f.unlink()
            order = data.draw(st.permutations(range(len(files))))
            nest = data.draw(st.lists(st.booleans(), min_size=len(files), max_size=len(files)))
            # rank k's log lands in a file named after another rank, maybe in a subfolder
            for i, (j, sub) in enumerate(zip(order, nest)):
                target = (logs / "x" if sub else logs) / f"rank-{j}.jsonl"
                target.parent.mkdir(exist_ok=True)
                target.write_bytes(contents[i])
        got = collect_campaign(copy, write=False)
    _same(expected, got)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_duplicate_copies_are_not_double_counted(baseline, data):
    camp, expected = baseline
    all_logs = sorted(p.relative_to(camp) for p in (camp / "runs").glob("*/logs/rank-*.jsonl"))
    picks = data.draw(st.lists(st.sampled_from(all_logs), min_size=1, max_size=6, unique=True))
    names = data.draw(
        st.lists(st.sampled_from(["copy", "bak", "old/"]), min_size=len(picks), max_size=len(picks))
    )
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "base"
        shutil.copytree(camp, copy)
        for rel, how in zip(picks, names):
            src = copy / rel
            if how == "old/":
                dst = src.parent / "old" / src.name
                dst.parent.mkdir(exist_ok=True)
            else:
                dst = src.with_name(f"{src.stem}-{how}.jsonl")
            shutil.copy(src, dst)
        got = collect_campaign(copy, write=False)
    _same(expected, got)
    assert (got.files["status"] == "duplicate").sum() == len(picks)
    assert int(got.ranks["duplicates"].sum()) == len(picks)
