"""The report (HTML, Markdown, figures) and the collect/report/compare commands."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from ddlbench.cli import main
from ddlbench.report.render import build_report
from tests.support.cli import invoke
from tests.support.sweeps import exact_run, small_sweep
from tests.support.synth import demo_campaign, write_campaign


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    camp = demo_campaign(root, "demo")
    res = build_report(camp)
    return camp, res


def test_report_files_and_sections(demo_report):
    camp, res = demo_report
    assert res.out_dir == camp / "report"
    html = res.files["html"].read_text()
    md = res.files["md"].read_text()
    for section in (
        "Summary",
        "Throughput and scaling",
        "Statistics and noisy runs",
        "Stragglers",
        "Convergence",
        "Allreduce",
        "Provenance",
        "Failed and incomplete runs",
    ):
        assert f">{section}</h2>" in html
        assert f"## {section}" in md
    # the demo campaign has its own allreduce sweep: the scaling model is the 7th figure
    for key in ("throughput", "efficiency", "ranks", "accuracy", "curves", "busbw", "model"):
        assert res.figures[key]["png"].stat().st_size > 10_000
        assert res.figures[key]["svg"].read_text().lstrip().startswith("<?xml")
    assert html.count('src="data:image/png;base64,') == 7
    assert ">Scaling model</h2>" in html
    # the base, the failed run with its stderr, the straggler and noisy configurations
    assert "Efficiency base per series" in html
    assert "pytorch-resnet50-n4x4-b64-r3" in html and "NCCL error" in html
    assert "rank 13 on gpu004" in html
    assert "NOISY" in html
    # markdown images point at files that exist
    for rel in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert (res.out_dir / rel).is_file()
    assert (res.out_dir / "data" / "runs.csv").is_file()


def test_html_is_self_contained(demo_report):
    _, res = demo_report
    html = res.files["html"].read_text()
    assert "<script" not in html.lower()
    assert "<link" not in html.lower()
    assert "@import" not in html and "url(" not in html
    # every src is embedded; hrefs are in-page anchors or relative files
    for attr in re.findall(r'\b(?:src|href)="([^"]*)"', html):
        assert not re.match(r"^(https?:)?//", attr), attr
        assert attr.startswith(("data:", "#", "plots/", "data/")), attr


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_html_renders_in_headless_chromium(demo_report, tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it")
    _, res = demo_report
    shot = tmp_path / "report.png"
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        "--window-size=1280,2000",
        res.files["html"].resolve().as_uri(),
    ]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    from PIL import Image

    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert img.shape[:2] == (2000, 1280)
    # not blank, and the figures are drawn: the throughput plot's lines use the Okabe-Ito
    # palette's blue (0, 114, 178) and vermillion (213, 94, 0)
    assert (img.sum(axis=2) < 600).mean() > 0.01
    for colour in ((0, 114, 178), (213, 94, 0)):
        near = (np.abs(img - np.array(colour)).sum(axis=2) < 40).sum()
        assert near > 200, colour
    shutil.copy(shot, res.out_dir / "screenshot.png")  # kept for a human look


def test_figures_in_process_and_in_the_worker_are_identical(results, monkeypatch):
    camp = write_campaign(results, "figs", small_sweep(repeats=2))
    a = build_report(camp, out_dir=results / "w", formats=("md",))
    monkeypatch.setenv("DDLBENCH_REPORT_WORKER", "0")
    b = build_report(camp, out_dir=results / "p", formats=("md",))
    assert sorted(a.figures) == sorted(b.figures) == ["efficiency", "ranks", "throughput"]
    for key in a.figures:
        assert a.figures[key]["svg"].read_bytes() == b.figures[key]["svg"].read_bytes()
    # a figure an earlier report drew and this one does not is removed, the others kept
    stale = results / "p" / "plots" / "accuracy_vs_batch.png"
    stale.write_bytes(b"old")
    (results / "p" / "plots" / "notes.txt").write_text("mine")
    again = build_report(camp, out_dir=results / "p", formats=("md",))
    assert not stale.exists() and (results / "p" / "plots" / "notes.txt").exists()
    assert all(p.exists() for f in again.figures.values() for p in f.values())


def test_cli_collect_report_and_paths(results):
    write_campaign(results, "older", small_sweep(repeats=1))
    write_campaign(results, "newer", small_sweep(repeats=1))
    r = invoke(["collect", "--results", str(results), "older", "-q"])
    assert r.exit_code == 0, r.output
    assert "older: 6 runs (6 ok)" in r.output
    r = invoke(["collect", "--results", str(results), "older", "--json"])
    assert json.loads(r.output)["counts"]["runs"] == 6
    # no campaign named: the most recent one
    r = invoke(["report", "--results", str(results), "--format", "md", "-q"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"report: {results / 'newer' / 'report' / 'report.md'}"
    out = results.parent / "elsewhere"
    r = invoke(["report", "--results", str(results), "older", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert (out / "report.html").is_file() and (out / "data" / "steps.parquet").is_file()
    assert "--out is deprecated; use --report-dir DIR" in r.stderr  # old spelling, still works
    out = results.parent / "figures"
    args = ["report", "--results", str(results), "older", "--report-dir", str(out), "-q"]
    r = invoke(args)
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and (out / "report.md").is_file()


def test_cli_bad_input_is_one_line_exit_2(results):
    write_campaign(results, "one", small_sweep(repeats=1))
    runner = CliRunner()
    for args in (
        ["report", "--results", str(results), "nope"],
        ["collect", "--results", str(results), "nope"],
        ["compare", "--results", str(results), "one", "nope"],
        ["compare", "--results", str(results), "one", "one", "--threshold", "abc"],
        ["report", "--results", str(results), "one", "--format", "pdf"],
    ):
        r = runner.invoke(main, args)
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1, r.output


def test_cli_mixed_versions_exit_2(results):
    camp = write_campaign(results, "mixed", small_sweep(repeats=1))
    log = next(camp.glob("runs/*/logs/rank-0.jsonl"))
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(
        json.dumps(dict(json.loads(lines[0]), format_version=3)) + "\n" + "".join(lines[1:])
    )
    r = CliRunner().invoke(main, ["collect", "--results", str(results), "mixed", "-q"])
    assert r.exit_code == 2 and "version 3" in r.output and "rank-0.jsonl" in r.output


def _bench(results, name, slow_group=None, factor=1.0):
    runs = []
    for nn, tp in ((1, 1), (1, 2)):
        for rep in range(3):
            run = exact_run(
                nodes=nn,
                tasks_per_node=tp,
                batch_size=8,
                repeat=rep,
                warmup_steps=1,
                measure_steps=4,
                step_time=0.125,
            )
            if run.group == slow_group:
                run.step_time = 0.125 * factor
            run.noise = 0.01
            runs.append(run)
    return write_campaign(results, name, runs)


def test_cli_compare_exit_codes_and_json(results):
    _bench(results, "base")
    _bench(results, "same")
    _bench(results, "slower", slow_group="pytorch-resnet50-n1x2-b8", factor=1.25)
    runner = CliRunner()
    r = runner.invoke(main, ["compare", "--results", str(results), "base", "same", "-q"])
    assert r.exit_code == 0, r.output
    assert "0 regressed" in r.output
    r = runner.invoke(main, ["compare", "--results", str(results), "base", "slower", "--json"])
    assert r.exit_code == 1, r.output
    out = json.loads(r.output)
    assert out["regressed"] == 1 and out["compared"] == 2 and out["threshold"] == 0.05
    assert out["threshold_percent"] == 5  # the unit of the option and of the text's title
    needed = [c["repeats_needed"] for c in out["configurations"]]
    assert all(n is None or type(n) is int for n in needed), needed  # 315, not 315.0
    rows = {c["group"]: c for c in out["configurations"]}
    reg = rows["pytorch-resnet50-n1x2-b8"]
    # 25 % longer steps -> throughput x 1/1.25 = -20 %
    assert reg["verdict"] == "regressed" and reg["change"] == pytest.approx(-0.2, abs=0.03)
    assert reg["ci_overlap"] is False
    # the interval shown beside the verdict is the one its one-sided tests read (90 %)
    assert reg["test_ci_level"] == pytest.approx(0.9)
    assert reg["change_ci95_low"] < reg["change_test_ci_low"] < reg["change"]
    assert reg["change_test_ci_high"] < 0
    r = runner.invoke(main, ["compare", "--results", str(results), "base", "slower"])
    assert "90 % CI" in r.output and "95 % CI" not in r.output
    # a threshold above the drop: no regression
    r = runner.invoke(
        main, ["compare", "--results", str(results), "base", "slower", "--threshold", "30%", "-q"]
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        main, ["compare", "--results", str(results), "base", "slower", "--threshold", "0.5%"]
    )
    assert "(threshold 0.5 %)" in r.output and "-0.5 % or more" in r.output


@pytest.mark.parametrize(
    "threshold, says",
    [
        ("0.05", "'0.05' is 0.05 % (a bare number is a percentage): write 0.05% for that, or 5%"),
        ("0%", "must be above 0 %, got '0%'"),
        ("-1", "must be above 0 %, got '-1'"),
        ("100%", "must be below 100 %, got '100%': throughput cannot drop by 100 % or more"),
        ("150%", "must be below 100 %, got '150%'"),
        ("nan", "expected a percentage such as 5%, got 'nan'"),
    ],
)
def test_compare_refuses_thresholds_it_cannot_use(threshold, says):
    from tests.support.cli import invoke

    res = invoke(["compare", "a", "b", "--threshold", threshold])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == f"ddlbench: --threshold: {says}" or says in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.output


def test_markdown_marks_only_flagged_rows(demo_report):
    _, res = demo_report
    md = res.files["md"].read_text()
    section = md.split("### Straggler index per run")[1].split("\n\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    bold = [line for line in rows if line.startswith("| **")]
    # only the demo's one straggler run (index 1.34) is above 1.10
    assert len(bold) == 1 and "pytorch-resnet50-n8x4-b64-r0" in bold[0]


def test_split_drawing_writes_the_same_files(demo_report, tmp_path):
    """The figure worker draws half of the figures in a forked child and the other half itself
    (the last of an odd count split by format); the files are the same bytes as drawing
    everything in one process."""
    import threading

    from ddlbench.analyse.analysis import analyse
    from ddlbench.collect.collector import ensure_collected
    from ddlbench.report import figures
    from ddlbench.report.worker import FigureInput, _draw_split

    if threading.active_count() != 1:
        pytest.skip("threads are running: the worker would not fork here")
    camp, _res = demo_report
    fig_input = FigureInput.of(analyse(ensure_collected(camp)))
    split = _draw_split(figures, fig_input, tmp_path / "split")
    whole = figures.make_figures(fig_input, tmp_path / "whole")
    assert split is not None and set(split) == set(whole) and len(whole) == 6
    for key, paths in whole.items():
        assert set(split[key]) == {"png", "svg"}
        for ext, path in paths.items():
            assert split[key][ext].read_bytes() == path.read_bytes(), (key, ext)
    # each process draws its share: both formats of every other figure, the last one halved
    parts = [figures.make_figures(fig_input, tmp_path / f"part{i}", part=i) for i in (0, 1)]
    drawn = sorted((k, e) for part in parts for k, v in part.items() for e in v)
    assert drawn == sorted((k, e) for k, v in whole.items() for e in v)
    assert {k: set(v) for k, v in parts[0].items()} == {
        "throughput": {"png", "svg"},
        "ranks": {"png", "svg"},
        "curves": {"png", "svg"},
    }


def test_forked_worker_draws_the_same_files_and_says_why_it_failed(demo_report, tmp_path):
    """The figure worker forked from this process (pandas already imported) draws the same
    bytes as the report did; a failure in it comes back as an error with its reason, and an
    unused worker is stopped."""
    from ddlbench.analyse.analysis import analyse
    from ddlbench.collect.collector import ensure_collected
    from ddlbench.report.worker import FigureInput, FigureWorker, can_fork

    if not can_fork():
        pytest.skip("threads are running: the worker would not fork here")
    camp, res = demo_report
    fig_input = FigureInput.of(analyse(ensure_collected(camp)))
    worker = FigureWorker(fork=True)
    worker.submit(fig_input, tmp_path / "forked")
    got = worker.result()
    assert set(got) == set(res.figures) - {"model"}  # the model figure is drawn by the caller
    for key, paths in got.items():
        for ext, path in paths.items():
            assert path.read_bytes() == res.figures[key][ext].read_bytes(), (key, ext)
    (tmp_path / "file").write_text("a file where the plots folder should be")
    broken = FigureWorker(fork=True)
    broken.submit(fig_input, tmp_path / "file" / "plots")
    with pytest.raises(RuntimeError, match="figure worker exited 1: .*Error"):
        broken.result()
    unused = FigureWorker(fork=True)
    unused.close()
    assert unused.proc is None
