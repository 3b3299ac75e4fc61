"""The report's language-model comparisons on a synthetic campaign: every sharding mode against
DDP and every activation-checkpointing mode against none, at the same scale, sequence length
and micro-batch, with the report's one statistic (the change of the geometric means of tokens/s
with the Welch t interval of the logs) and its verdicts.

The campaign (gpt-tiny, 2 ranks, seq 64, micro-batch 4, 3 repeats unless said): DDP at 0.100 s
per step; FSDP 20 % slower per step (0.120 s); ZeRO-1 as fast as DDP; DDP with full
checkpointing at 0.130 s; FSDP with full checkpointing planned 3 times, 1 repeat ran. Interval
and p-value are checked against scipy's Welch test on the logs of the runs' tokens/s.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ddlbench.analyse.analysis import CONFIG_FIELDS, Settings, analyse, config_stats
from ddlbench.analyse.lm_verdicts import COLUMNS, lm_comparisons
from ddlbench.collect.collector import ensure_collected
from ddlbench.report.lm import LM_COMPARISONS, comparison_sentence
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign

SEQ = 64
STEP = {"ddp": 0.100, "fsdp": 0.120, "zero1": 0.100, "ddp-ckpt": 0.130, "fsdp-ckpt": 0.150}


def _run(label: str, repeat: int, not_run: bool = False) -> SynthRun:
    parallel, _, ckpt = label.partition("-")
    lm = {"seq_len": SEQ, "parallel": parallel, "grad_accum": 1,
          "activation_checkpointing": "full" if ckpt else "none"}  # fmt: skip
    return SynthRun(model="gpt-tiny", device="cpu", nodes=1, tasks_per_node=2, batch_size=4,
                    repeat=repeat, tag=f"-{label}", step_time=STEP[label],
                    ran={"lm": lm, "tokens_per_sample": SEQ}, not_run=not_run)  # fmt: skip


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    runs = [_run(label, rep) for rep in range(3) for label in STEP if label != "fsdp-ckpt"]
    runs += [_run("fsdp-ckpt", 0), _run("fsdp-ckpt", 1, True), _run("fsdp-ckpt", 2, True)]
    return write_campaign(tmp_path_factory.mktemp("lm"), "lm-compare", runs)


@pytest.fixture(scope="module")
def analysis(campaign):
    return analyse(ensure_collected(campaign))


def _row(a, key: str, variant: str, other: str) -> pd.Series:
    c = a.lm_comparisons
    other_key = "activation_checkpointing" if key == "parallel" else "parallel"
    got = c[(c["key"] == key) & (c["variant"] == variant) & (c[other_key] == other)]
    assert len(got) == 1, c[["key", "variant", "parallel", "activation_checkpointing"]]
    return got.iloc[0]


def _logs(a, label: str) -> np.ndarray:
    runs = a.runs[(a.runs["group"].str.endswith(f"-{label}")) & a.runs["complete"]]
    return np.log(runs["tokens_per_s"].to_numpy(dtype=float))


def test_each_pair_is_compared_with_its_reference(analysis):
    c = analysis.lm_comparisons
    pairs = sorted(zip(c["key"], c["variant"], c["reference"], c["parallel"],
                       c["activation_checkpointing"]))  # fmt: skip
    assert pairs == [
        ("activation_checkpointing", "full", "none", "ddp", "full"),
        ("activation_checkpointing", "full", "none", "fsdp", "full"),
        ("parallel", "fsdp", "ddp", "fsdp", "full"),
        ("parallel", "fsdp", "ddp", "fsdp", "none"),
        ("parallel", "zero1", "ddp", "zero1", "none"),
    ]  # zero1 has no checkpointed run: nothing to compare it with there
    assert set(c["world_size"]) == {2} and set(c["seq_len"]) == {SEQ}
    assert set(c["batch_size"]) == {4}


def test_change_interval_and_p_value_are_welchs_on_the_logs(analysis):
    r = _row(analysis, "parallel", "fsdp", "none")
    lv, lr = _logs(analysis, "fsdp"), _logs(analysis, "ddp")
    assert len(lv) == len(lr) == 3
    # the change of the geometric means of tokens/s
    assert r["change"] == pytest.approx(math.exp(lv.mean() - lr.mean()) - 1, rel=1e-9)
    assert r["change"] == pytest.approx(STEP["ddp"] / STEP["fsdp"] - 1, abs=0.02)
    assert r["variant_tokens_per_s"] == pytest.approx(math.exp(lv.mean()), rel=1e-9)
    assert r["verdict"] == "slower" and r["variant_repeats"] == r["reference_repeats"] == 3
    # the interval and p-value against an independent Welch test (scipy is not a dependency
    # of ddlbench: the minimum-versions environment has none)
    stats = pytest.importorskip("scipy.stats")
    test = stats.ttest_ind(lv, lr, equal_var=False, alternative="less")  # H0: not slower
    ci = stats.ttest_ind(lv, lr, equal_var=False).confidence_interval(0.95)
    assert r["change_ci95_low"] == pytest.approx(math.exp(ci.low) - 1, rel=1e-6)
    assert r["change_ci95_high"] == pytest.approx(math.exp(ci.high) - 1, rel=1e-6)
    assert r["p_value"] == pytest.approx(test.pvalue, rel=1e-4)
    assert r["verdict"] == "slower" and r["p_value"] < 0.05
    assert r["variant_repeats"] == r["reference_repeats"] == 3


def test_verdicts_faster_slower_same_and_too_few_repeats(analysis):
    assert _row(analysis, "parallel", "zero1", "none")["verdict"] == "same"
    ckpt = _row(analysis, "activation_checkpointing", "full", "ddp")
    assert ckpt["verdict"] == "slower"
    assert ckpt["change"] == pytest.approx(STEP["ddp"] / STEP["ddp-ckpt"] - 1, abs=0.02)
    for few in (
        _row(analysis, "parallel", "fsdp", "full"),
        _row(analysis, "activation_checkpointing", "full", "fsdp"),
    ):
        assert few["verdict"] == "inconclusive"
        assert "fewer than 2 complete repeats" in few["reason"]
        assert math.isnan(few["change_ci95_low"]) and math.isnan(few["p_value"])
        assert {few["variant_repeats"], few["reference_repeats"]} == {1, 3}


def test_table_and_sentence(analysis):
    table = LM_COMPARISONS.table(analysis.lm_comparisons, analysis.settings)
    assert table is not None and len(table.rows) == 5
    cells = [dict(zip(table.columns, row)) for row in table.rows]
    fsdp = next(c for c in cells if c["comparison"] == "fsdp vs ddp" and "none" in c["at"])
    assert fsdp["at"] == (
        "pytorch gpt-tiny fp32, 2 ranks (1x2), seq 64, micro-batch 4, checkpointing none"
    )
    assert fsdp["verdict"] == "slower" and fsdp["repeats"] == "3 / 3"
    assert fsdp["change"].startswith("-1") and " to " in fsdp["90 % CI"]
    assert fsdp["p"].startswith("p ")
    assert "alpha 0.05" in table.note and "5 %" in table.note
    r = _row(analysis, "parallel", "fsdp", "none")
    s = comparison_sentence(r)
    assert s.startswith("fsdp vs ddp at pytorch gpt-tiny fp32, 2 ranks (1x2), seq 64,")
    assert f"tokens/s {100 * r['change']:+.1f} % (90 % CI " in s and ", verdict slower" in s
    # the interval shown is the one the one-sided tests read: it excludes 0 beside "slower"
    assert r["test_ci_level"] == pytest.approx(0.9) and r["change_test_ci_high"] < 0
    assert r["change_ci95_low"] < r["change_test_ci_low"]
    few = comparison_sentence(_row(analysis, "parallel", "fsdp", "full"))
    assert "(no interval)" in few and "verdict inconclusive" in few and "p =" not in few


def test_report_md_and_html(campaign):
    res = build_report(campaign, formats=("md", "html"))
    md, html = (res.files[f].read_text() for f in ("md", "html"))
    title = "Language models: sharding and checkpointing against DDP and none (tokens/s)"
    assert title in md and title in html
    assert md.count("fsdp vs ddp at pytorch gpt-tiny fp32, 2 ranks (1x2), seq 64") >= 2
    assert "checkpointing full vs none at pytorch gpt-tiny fp32" in html
    assert "verdict same" in md  # zero1 against ddp, in the summary
    table = pd.read_csv(res.out_dir / "lm_comparisons.csv")
    assert list(table.columns) == COLUMNS and len(table) == 5
    assert sorted(table["verdict"]) == ["inconclusive", "inconclusive", "same", "slower", "slower"]


def test_no_comparison_without_a_reference_or_a_transformer(analysis):
    runs = analysis.runs[analysis.runs["parallel"] != "ddp"]
    c = lm_comparisons(runs, config_stats(runs, Settings()), CONFIG_FIELDS)
    assert list(zip(c["key"], c["parallel"])) == [("activation_checkpointing", "fsdp")]
    cnn = runs.assign(parallel=None)
    none = lm_comparisons(cnn, config_stats(cnn, Settings()), CONFIG_FIELDS)
    assert none.empty and LM_COMPARISONS.table(none) is None


def test_no_mode_comparison_at_one_rank_where_no_mode_wraps_the_model(analysis):
    """At one rank the workload wraps no mode (docs/workloads.md#parallelism): FSDP against DDP
    there compares a program with itself, so there is no such row; checkpointing against none
    is still a comparison, and so is a mode that ``ddp_single_rank`` wrapped."""
    one = analysis.runs.assign(world_size=1, tasks_per_node=1)
    c = lm_comparisons(one, config_stats(one, Settings()), CONFIG_FIELDS)
    assert len(c) and set(c["key"]) == {"activation_checkpointing"}
    wrapped = one.assign(framework_options='{"ddp_single_rank": true}')
    c = lm_comparisons(wrapped, config_stats(wrapped, Settings()), CONFIG_FIELDS)
    assert "parallel" in set(c["key"])
