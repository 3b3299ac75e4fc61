"""Verdicts end to end: synthetic campaigns written as rank logs, collected, analysed and
reported. Each campaign's truth is set by its step times (global throughput of a run is
``world_size x batch / step_time`` when steps follow each other without gaps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.analyse.alpha_beta import fit_alpha_beta
from ddlbench.analyse.analysis import Settings, analyse
from ddlbench.analyse.large_batch import margin_table
from ddlbench.analyse.scaling_model import build
from ddlbench.cli import main
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.render import build_report
from tests.support.sweeps import exact_run
from tests.support.synth import SynthRun, write_campaign


def _runs(layout_times, batch=32, **kw):
    """layout (nodes, tasks per node) -> one step time per repeat."""
    runs = []
    for (nn, tp), times in layout_times.items():
        for rep, st in enumerate(times):
            runs.append(
                exact_run(
                    nodes=nn,
                    tasks_per_node=tp,
                    batch_size=batch,
                    repeat=rep,
                    warmup_steps=1,
                    measure_steps=6,
                    step_time=st,
                    **kw,
                )
            )
    return runs


def _series(results, name, layout_times, settings=None):
    d = collect_campaign(write_campaign(results, name, _runs(layout_times)))
    return d, analyse(d, settings or Settings())


def test_gain_inside_the_noise_is_not_a_yes(results):
    # the quickstart's case: 1 -> 2 ranks, throughput 320 vs 2 x 32 / 0.1992 ~ 321.3 samples/s
    # per repeat; repeats differ by ~3 %: a +0.4 % mean gain, far inside the noise
    times = {(1, 1): [0.1, 0.097, 0.103], (1, 2): [0.2, 0.194, 0.2037]}
    d, a = _series(results, "qs", times)
    s = a.series.iloc[0]
    assert s["more_devices_help"] in ("inconclusive", "no")
    p = a.points.set_index("devices").loc[2]
    assert abs(p["gain"]) < 0.01 and p["gain_p"] > 0.2
    assert "more repeats would resolve a 5 % difference" in s["more_devices_reason"]
    res = build_report(d.campaign_dir, formats=["md"], data=d)
    md = res.files["md"].read_text()
    assert "more devices help? yes" not in md
    assert "still rises" not in md
    assert "more devices help? inconclusive" in md or "more devices help? no" in md


def test_clear_gain_is_a_yes_and_one_scale_gets_no_verdict(results):
    times = {(1, 1): [0.1, 0.101, 0.099], (1, 2): [0.11, 0.111, 0.109]}
    _, a = _series(results, "clear", times)
    s = a.series.iloc[0]
    # 1 -> 2 devices: 320 -> 581.8 samples/s, +82 %, 1 % noise
    assert s["more_devices_help"] == "yes" and s["helps_up_to"] == 2
    one = {(1, 1): [0.1, 0.101, 0.099]}
    d, a = _series(results, "single", one)
    s = a.series.iloc[0]
    assert s["more_devices_help"] is None and s["more_devices_reason"] == "one device count only"
    md = build_report(d.campaign_dir, formats=["md"], data=d).files["md"].read_text()
    assert "more devices help? yes" not in md and "one device count" in md


def test_knee_sentence_is_never_false(results):
    # per repeat throughput: N=1: 32 / 0.1 = 320 (+/- 0.5 %), N=2: 2 x 32 / 0.12658 = 505.6
    # -> E = 505.6 / 2 / 320 = 0.79, N=4: 4 x 32 / 0.12121 = 1056 -> E = 0.825. The old rule
    # said "at or above 80 % up to 4 devices" (largest N with E >= 0.8) although E(2) = 0.79.
    times = {
        (1, 1): [0.1, 0.1005, 0.0995],
        (1, 2): [0.12658, 0.12721, 0.12595],
        (1, 4): [0.12121, 0.12182, 0.1206],
    }
    d, a = _series(results, "knee", times)
    s = a.series.iloc[0]
    eff = a.points.set_index("devices")["efficiency"]
    assert eff[2] == pytest.approx(0.79, abs=0.005) and eff[4] == pytest.approx(0.825, abs=0.01)
    assert s["knee_devices"] == 1  # the point estimate: E(2) < 0.8 already
    assert s["knee_low"] == 1 and s["knee_high"] in (1, 4)
    pts = a.points.set_index("devices")
    assert pts.loc[2, "efficiency_ci95_low"] < 0.79 < pts.loc[2, "efficiency_ci95_high"]
    md = build_report(d.campaign_dir, formats=["md"], data=d).files["md"].read_text()
    assert "up to 4" not in md.split("## Summary")[1].split("##")[0]


def test_knee_is_a_range_when_the_data_cannot_tell(results):
    # E(2) ~ 0.9 with 1 % noise: above; E(4) ~ 0.8 with 4 % noise: cannot tell
    times = {
        (1, 1): [0.1, 0.101, 0.099],
        (1, 2): [0.1111, 0.1122, 0.11],
        (1, 4): [0.125, 0.13, 0.12],
    }
    _, a = _series(results, "range", times)
    s = a.series.iloc[0]
    assert (s["knee_low"], s["knee_high"]) == (2, 4)
    cls = a.points.set_index("devices")["efficiency_class"]
    assert cls[2] == "above" and cls[4] == "undetermined"


def test_compare_needs_significance_and_size(results):
    base = {(1, 1): [0.1, 0.1, 0.1], (1, 2): [0.1, 0.101, 0.099]}
    # N=1: -4 % exactly (no spread): significant but smaller than 5 % -> not regressed
    # N=2: -20 % with 1 % noise -> regressed
    new = {(1, 1): [0.1 / 0.96] * 3, (1, 2): [0.125, 0.12625, 0.12375]}
    write_campaign(results, "base", _runs(base))
    write_campaign(results, "new", _runs(new))
    r = CliRunner().invoke(main, ["compare", "--results", str(results), "base", "new", "--json"])
    assert r.exit_code == 1, r.output
    rows = {c["group"]: c for c in json.loads(r.output)["configurations"]}
    assert rows["pytorch-resnet50-n1x2-b32"]["verdict"] == "regressed"
    assert rows["pytorch-resnet50-n1x2-b32"]["p_value"] < 0.01
    one = rows["pytorch-resnet50-n1x1-b32"]
    assert one["verdict"] != "regressed" and one["change"] == pytest.approx(-0.04, abs=1e-6)
    assert "are the same campaign" not in r.output
    # a campaign against itself: every change is 0, and compare says why that means nothing
    from tests.support.cli import invoke

    same = invoke(["compare", "--results", str(results), "base", "base"])
    assert same.exit_code == 0, same.output
    assert "'base' and 'base' are the same campaign" in same.stderr
    table = same.stdout.splitlines()
    assert any(line.startswith("pytorch-resnet50-n1x2-b32") for line in table), same.stdout
    assert not [line for line in table if line.endswith(" ")]  # no padding left in a pipe


def test_scaling_model_recovers_the_sweep_and_predicts(results):
    # the synthetic sweep's truth: busbw 90 GB/s in a node, 22 GB/s across nodes
    sizes = [1 << k for k in range(10, 27, 2)]
    sweep = [
        SynthRun(
            "pytorch",
            model="allreduce",
            mode="allreduce",
            nodes=nn,
            tasks_per_node=tp,
            allreduce_sizes=sizes,
            workload="allreduce_torch",
        )
        for nn, tp in ((1, 2), (1, 4), (2, 4))
    ]
    cal = collect_campaign(write_campaign(results, "sweep", sweep))
    ca = analyse(cal)
    fits = {(f.world_size, f.nodes): f for f in fit_alpha_beta(ca.allreduce)}
    assert fits[(4, 1)].busbw_gbps == pytest.approx(90, rel=0.03)
    assert fits[(8, 2)].busbw_gbps == pytest.approx(22, rel=0.03)
    train = [
        SynthRun("pytorch", nodes=nn, tasks_per_node=tp, repeat=r, measure_steps=6)
        for nn, tp in ((1, 1), (1, 2), (1, 4), (2, 4))
        for r in range(2)
    ]
    d = collect_campaign(write_campaign(results, "train", train))
    a = analyse(d)
    model = build(a, d, cal)
    p = model.predictions.set_index("devices")
    assert list(p.index) == [1, 2, 4, 8, 16, 32]  # measured, then up to 4x the largest N
    assert p["measured"].tolist() == [True] * 4 + [False] * 2
    assert p.loc[1, "predicted_efficiency"] == 1.0
    assert (p["predicted_step_s"].diff().dropna() >= 0).all()
    assert p.loc[[1, 2, 4, 8], "throughput_error"].abs().max() < 0.5
    res = build_report(d.campaign_dir, formats=["md"], data=d, calibration=cal.campaign_dir)
    md = res.files["md"].read_text()
    assert "## Scaling model" in md and "Prediction error of the throughput" in md
    assert "model" in res.figures


def test_large_batch_pipeline_reports_cis_and_the_margin_sentence(results):
    runs = [
        SynthRun(
            "pytorch",
            model="resnet50",
            mode="convergence",
            nodes=nn,
            tasks_per_node=4,
            repeat=r,
            epochs=4,
            target_accuracy=0.5,
            warmup_epochs=w,
            tag="-wu" if w else "-nowu",
        )
        for nn in (1, 2, 4, 8)
        for w in (0.0, 2.0)
        for r in range(2)
    ]
    d = collect_campaign(write_campaign(results, "lb", runs))
    a = analyse(d)
    assert {"final_accuracy_ci95_low", "final_accuracy_ci95_high"} <= set(a.convergence)
    # accuracies are not ratios: the point is the mean, its bars the mean's t interval,
    # symmetric where [0, 1] does not clip it
    c = a.convergence[a.convergence["repeats"] >= 2]
    lo, m, hi = (c[f"final_accuracy_{k}"] for k in ("ci95_low", "mean", "ci95_high"))
    assert len(c) and ((lo <= m) & (m <= hi)).all()
    inside = (lo > 0) & (hi < 1)
    assert ((hi - m)[inside] - (m - lo)[inside]).abs().max() < 1e-12
    table = margin_table(a.convergence, 0.01, 0.05)
    assert len(table) == 7  # 8 configurations less the baseline
    assert set(table["verdict"]) <= {"within", "outside", "undetermined"}
    assert (table["baseline_batch"] == a.convergence["global_batch_size"].min()).all()
    md = build_report(d.campaign_dir, formats=["md"], data=d).files["md"].read_text()
    assert "within 1 point of the small-batch baseline" in md
    assert "final accuracy: mean of complete repeats" in md


def test_large_batch_mini_spec_plans_the_study():
    # the pipeline, not the research result: >= 4 global batches from ranks x per-rank
    # batch, the learning rate scaled linearly, both arms, repeats, on the local executor
    from pathlib import Path

    spec = Path(__file__).resolve().parents[2] / "configs" / "large-batch-mini.yaml"
    r = CliRunner().invoke(main, ["plan", str(spec), "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output)
    assert plan["scheduler"] == "local"
    runs = plan["runs"]
    gbs = sorted({x["global_batch_size"] for x in runs})
    assert len(gbs) >= 4
    assert all(x["global_batch_size"] == x["world_size"] * x["batch_size"] for x in runs)
    base = min(runs, key=lambda x: x["global_batch_size"])
    for x in runs:
        ratio = x["global_batch_size"] / base["global_batch_size"]
        assert x["lr"] == pytest.approx(base["lr"] * ratio)
    assert {x["variant"] for x in runs} == {"warmup", "nowarmup"}
    assert len({x["repeat"] for x in runs}) >= 3


def test_past_the_peak_is_a_no(results):
    # the strong-scaling sweep of the configuration-identity test: peak at N=4, 35 % efficient
    # at N=8, the lowest repeat at N=8 never ran; no noise, so the drop is certain
    from tests.support.sweeps import strong_sweep

    a = analyse(collect_campaign(write_campaign(results, "strong", strong_sweep())))
    s = a.series.iloc[0]
    assert s["max_devices"] == 8
    assert s["more_devices_help"] == "no" and "a loss" in s["more_devices_reason"]
    assert s["helps_up_to"] < 8


def test_the_report_process_imports_neither_the_spec_models_nor_matplotlib(results):
    # pydantic (the spec models) and matplotlib (the figure worker's) cost 0.2-0.3 s each of
    # every report's one-core path (docs/reports.md#performance): the main process imports
    # neither; the figures are drawn in the worker
    import subprocess
    import sys

    write_campaign(results, "light", _runs({(1, 1): [0.1, 0.1, 0.1], (1, 2): [0.11] * 3}))
    probe = (
        "import json, sys\n"
        "from ddlbench.cli import main\n"
        f"main(['report', '--results', {str(results)!r}, 'light', '-q'], standalone_mode=False)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert "pandas" in loaded  # the probe saw the report's own imports
    assert not loaded & {"pydantic", "matplotlib"}, sorted(loaded & {"pydantic", "matplotlib"})
    assert (results / "light" / "report" / "plots" / "throughput.png").is_file()


def test_compare_says_which_campaign_has_nothing_to_compare(results, tmp_path):
    import shutil

    from tests.support.cli import invoke

    write_campaign(results, "done", _runs({(1, 1): [0.1, 0.1, 0.1]}))
    spec = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
    res = invoke(["submit", spec, "--dry-run", "--campaign", "rendered", "--results", results,
                  "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    r = invoke(["compare", "--results", str(results), "done", "rendered"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "campaign 'rendered' has no complete run to compare (a dry run" in r.output
    shutil.copytree(results / "done", results / "lost")
    shutil.rmtree(results / "lost" / "runs")  # planned and submitted, no run left: no dry run
    r = invoke(["compare", "--results", str(results), "done", "lost"])
    assert r.exit_code == 2, r.output
    assert "campaign 'lost' has no complete run to compare (its runs have not ended" in r.output
