"""The verdict rules that every comparison shares (docs/metrics.md#busy-nodes, #verdicts):

- a result resting on a complete run that the pre-flight found started on a busy node is
  ``inconclusive`` whatever the test says (the scaling series' "more devices help?", ``compare``
  and the backup-worker comparisons, as the language-model comparisons already were);
- a power calculation capped at ``MAX_REPEATS`` is never printed as a count ("997 more");
- ``compare``: the campaigns named as typed, backup workers on the applied rate, the footer's
  rule in words, ``repeats_needed`` only beside an inconclusive verdict;
- the backup-worker table: the tests' interval level in its header, signed changes, the
  summary's words, and a Kaplan-Meier median that is the ordinary median without censoring.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from ddlbench.analyse.analysis import Settings, analyse
from ddlbench.analyse.backups import backup_verdicts, km_median, sentences
from ddlbench.analyse.compare import compare
from ddlbench.analyse.verdicts import (
    MAX_REPEATS,
    VerdictSettings,
    annotate_series,
    change_verdicts,
    gain_verdicts,
)
from ddlbench.cli import main
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.backups import backup_tables
from tests.support.backup_frames import backup_campaign as _campaign
from tests.support.sweeps import exact_run
from tests.support.synth import write_campaign

ST = Settings()
VS = ST.verdicts()


def _scaling(results: Path, name: str, times: Dict[tuple, List[float]]) -> Path:
    runs = [
        exact_run(
            nodes=nn,
            tasks_per_node=tp,
            batch_size=32,
            repeat=rep,
            warmup_steps=1,
            measure_steps=6,
            step_time=st,
        )  # fmt: skip
        for (nn, tp), ts in times.items()
        for rep, st in enumerate(ts)
    ]
    return write_campaign(results, name, runs)


def _mark_busy(campaign: Path, run_ids: List[str]) -> None:
    """What the pre-flight writes on a busy node (docs/telemetry.md)."""
    for run_id in run_ids:
        folder = campaign / "runs" / run_id / "provenance" / "preflight"
        folder.mkdir(parents=True, exist_ok=True)
        report = {"node": "n0", "busy": True, "reasons": ["other processes kept 2 CPUs busy"]}
        (folder / "n0.json").write_text(json.dumps(report), encoding="utf-8")


def _ids(data, ranks: int) -> List[str]:
    return sorted(data.runs[data.runs["world_size"] == ranks]["run_id"])


# ------------------------------------------------------------------ busy nodes


def test_scaling_verdict_on_busy_runs_is_inconclusive(results):
    # 1 -> 2 ranks: 1.9x the throughput, repeats within 1 %: the test alone says yes
    times = {(1, 1): [0.100, 0.101, 0.099], (1, 2): [0.105, 0.106, 0.104]}
    camp = _scaling(results, "busy-scaling", times)
    quiet = analyse(collect_campaign(camp)).series.iloc[0]
    assert quiet["more_devices_help"] == "yes" and quiet["more_devices_busy"] is None
    _mark_busy(camp, [f"{r}" for r in _ids(collect_campaign(camp), 2)[:2]])
    a = analyse(collect_campaign(camp))
    s = a.series.iloc[0]
    assert s["more_devices_help"] == "inconclusive"
    assert s["more_devices_busy"] == "started on a busy node (2 devices: 2 of 3 complete run(s))"
    assert (
        "the change may be interference; the test alone says yes (p " in (s["more_devices_reason"])
    )
    assert s["helps_up_to"] == 1  # no step from a busy node counts as "helps"
    p = a.points.set_index("devices").loc[2]
    assert p["step_verdict"] == "inconclusive" and math.isnan(p["step_repeats_needed"])
    assert a.configs.set_index("group")["busy_runs"].to_dict() == {
        g: (2 if "n1x2" in g else 0) for g in a.configs["group"]
    }


def test_annotate_series_takes_the_counts_directly():
    pts = [
        {
            "devices": d,
            "group": f"g{d}",
            "throughput_log_mean": math.log(t),
            "throughput_log_sd": 0.01,
            "repeats": 3,
        }  # fmt: skip
        for d, t in ((1, 100.0), (2, 190.0))
    ]
    srow: dict = {}
    annotate_series(pts, srow, 0.8, VS, busy={"g1": 1})
    assert srow["more_devices_help"] == "inconclusive"
    assert srow["more_devices_busy"] == "started on a busy node (1 device: 1 of 3 complete run(s))"
    annotate_series(pts, srow, 0.8, VS)  # no counts: the test's verdict
    assert srow["more_devices_help"] == "yes" and srow["more_devices_busy"] is None


def test_compare_on_a_busy_base_is_inconclusive_and_names_folders(results):
    base = _scaling(results, "qa", {(1, 1): [0.100, 0.101, 0.099]})
    new = _scaling(results / "..", "qa-new", {(1, 1): [0.080, 0.081, 0.079]})
    shutil.copytree(new, results / "qa-w4")  # another folder, the manifest still says qa-new
    _mark_busy(base, _ids(collect_campaign(base), 1)[:1])
    args = ["compare", "qa", "qa-w4", "--results", str(results)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "throughput: base qa, new qa-w4 (campaign qa-new) (threshold 5 %)" in text
    assert "inconclusive (started on a busy node (base: 1 of 3 complete run(s))" in text
    assert "0 regressed (a drop significant at alpha 0.05 against no change, with a " in text
    assert "regressed significantly by" not in text
    got = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    row = got["configurations"][0]
    assert (row["verdict"], row["base_busy"], row["new_busy"]) == ("inconclusive", 1, 0)
    assert "the test alone says improved (p " in row["reason"]
    assert row["repeats_needed"] is None and row["rate"] == "throughput"
    assert (got["new"], got["new_campaign"], got["base"]) == ("qa-w4", "qa-new", "qa")


def test_backup_comparisons_on_busy_runs_are_inconclusive():
    b0 = [0.029, 0.030, 0.0295, 0.0300]
    b1 = [0.020, 0.0198, 0.0202, 0.0199]
    runs, ranks = _campaign([("backup0", 3, 0, b0, None), ("backup1", 3, 1, b1, None)])
    quiet = backup_verdicts(runs, ranks, VS, ST.accuracy_margin).iloc[0]
    assert quiet["step_verdict"] == "improved"
    runs["preflight_busy"] = runs["group"].str.startswith("backup1") & (
        runs["run_id"].str[-1] == "0"
    )
    v = backup_verdicts(runs, ranks, VS, ST.accuracy_margin)
    r = v.iloc[0]
    assert r["busy"] == "started on a busy node (configuration: 1 of 4 complete run(s))"
    assert r["step_verdict"] == "inconclusive"
    assert "the test alone says shorter" in r["step_reason"]
    assert r["accuracy_verdict"] == quiet["accuracy_verdict"]  # not a speed
    text = sentences(v, VS, ST.accuracy_margin)[0]
    assert "4 repeat(s), started on a busy node (configuration: 1 of 4" in text


# ------------------------------------------------------------------ capped repeats


def test_a_capped_power_calculation_is_never_a_count():
    # a 60 % spread of the logs asks for far more than 1000 repeats per configuration
    (g,) = gain_verdicts([0.0], [0.6], [3], [0.01], [0.6], [3], VS)
    assert g.verdict == "inconclusive" and g.repeats_capped and math.isnan(g.repeats_needed)
    assert f"more than {MAX_REPEATS} repeats per configuration" in g.reason
    assert "997 more" not in g.reason and "998" not in g.reason
    (c,) = change_verdicts([0.0], [0.6], [3], [0.01], [0.6], [3], VS)
    assert c.repeats_capped and math.isnan(c.repeats_needed)
    assert c.reason.startswith(f"more than {MAX_REPEATS} repeats per configuration")
    (few,) = gain_verdicts([0.0], [0.6], [1], [0.01], [0.6], [2], VS)
    assert f"; more than {MAX_REPEATS} repeats each" in few.reason


def test_repeats_needed_only_beside_an_inconclusive_verdict():
    (c,) = change_verdicts([0.0], [0.01], [5], [0.2], [0.01], [5], VerdictSettings())
    assert c.verdict == "improved" and math.isnan(c.repeats_needed) and not c.repeats_capped
    (i,) = change_verdicts([0.0], [0.05], [3], [0.03], [0.05], [3], VerdictSettings())
    assert i.verdict == "inconclusive" and i.repeats_needed >= 2


# ------------------------------------------------------------------ compare, backup rate


def _config_runs(scale: float) -> pd.DataFrame:
    runs, _ = _campaign([("backup1", 3, 1, [0.020, 0.0198, 0.0202], None)])
    opts = json.dumps({"backup_workers": 1})
    runs = runs.assign(repeat=range(len(runs)), framework_options=opts, step_time_jitter_s=0.0)
    runs["framework"] = "pytorch"
    runs["throughput"] = runs["throughput"] * scale
    return runs


def test_compare_reads_the_applied_rate_of_backup_workers():
    base, new = _config_runs(1.0), _config_runs(1.0)
    new["applied_samples_per_s"] = new["applied_samples_per_s"] * 0.8  # throughput the same
    df = compare(SimpleNamespace(runs=base), SimpleNamespace(runs=new), 0.05)
    r = df.iloc[0]
    assert r["rate"] == "applied" and r["verdict"] == "regressed"
    assert r["change"] == pytest.approx(-0.2)
    assert r["base_gmean"] == pytest.approx(math.exp(np.log(base["applied_samples_per_s"]).mean()))


# ------------------------------------------------------------------ backup table


def test_backup_table_says_its_level_signs_and_the_summarys_words():
    sync = [0.030, 0.031, 0.029, 0.0305]
    b0 = [0.029, 0.030, 0.0295, 0.0300]
    runs, ranks = _campaign([("sync", 3, None, sync, None), ("backup0", 3, 0, b0, None)])
    a = SimpleNamespace(runs=runs, settings=ST)
    table = backup_tables(a, SimpleNamespace(ranks=ranks, evals=None))[-1]
    row = dict(zip(table.columns, table.rows[0]))
    assert "change 90 % CI (the tests' level)" in table.columns
    assert "geo. mean 95 % CI" in table.columns
    change = row["applied change"]
    assert change[0] in "+-" and row["step time change"][0] in "+-"
    lo, hi = row["change 90 % CI (the tests' level)"].split(" to ")
    assert lo[0] in "+-" and hi[0] in "+-"
    words = {"more", "fewer", "unchanged", "inconclusive"}
    assert row["applied samples/s verdict"] in words
    assert row["step time verdict"] in {"shorter", "longer", "unchanged", "inconclusive"}
    text = sentences(backup_verdicts(runs, ranks, VS, ST.accuracy_margin), VS, 0.01)[0]
    assert f"; {row['step time verdict']};" in text or f"({row['step time verdict']};" in text


def test_km_median_without_censoring_is_the_median():
    t = np.array([0.8, 2.7])
    assert km_median(t, np.array([True, True])) == pytest.approx(float(np.median(t)))
    t3 = np.array([1.0, 4.0, 2.0])
    assert km_median(t3, np.ones(3, bool)) == 2.0
    # censored: the curve reaches 1/2 at 2.0 and stays there: that time
    assert km_median(np.array([1.0, 2.0, 5.0, 5.0]), np.array([1, 1, 0, 0], bool)) == 2.0


def test_language_model_rule_is_the_shared_one():
    from ddlbench.analyse.lm_verdicts import _busy

    row = {"key": "parallel", "variant": "fsdp", "reference": "ddp", "variant_repeats": 3,
           "reference_repeats": 1, "verdict": "faster", "reason": "significant"}  # fmt: skip
    _busy(row, pd.Series({"group": "v"}), pd.Series({"group": "r"}), {"r": 1})
    assert (row["verdict"], row["variant_busy"], row["reference_busy"]) == ("inconclusive", 0, 1)
    assert row["reason"] == (
        "started on a busy node (ddp: 1 of 1 complete run(s)): the change may be interference; "
        "the test alone says faster (significant)"
    )
