"""Broken inputs: truncated lines, missing ranks, failed runs, mixed versions, duplicates."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign, load_data
from ddlbench.collect.errors import CollectError, LogFormatError
from ddlbench.collect.paths import is_stale
from tests.support.sweeps import exact_run
from tests.support.synth import SynthRun, run_states, write_campaign


def _run(d, run_id):
    return d.runs.set_index("run_id").loc[run_id]


def test_truncated_last_line_is_skipped_and_counted(results):
    runs = [SynthRun(nodes=1, tasks_per_node=4, measure_steps=6, killed_ranks=(2,))]
    camp = write_campaign(results, "c", runs)
    log = camp / "runs" / runs[0].run_id / "logs" / "rank-2.jsonl"
    assert not log.read_bytes().endswith(b"\n")
    d = collect_campaign(camp)
    r = _run(d, runs[0].run_id)
    assert r["status"] == "incomplete" and not r["complete"]
    assert r["ranks_without_summary"] == "2" and r["missing_ranks"] == ""
    assert pd.isna(r["throughput"])  # never averaged over the ranks that finished
    f = d.files.set_index("file")
    assert f.loc[log.relative_to(camp).as_posix(), "truncated_lines"] == 1
    assert d.info["counts"]["truncated_lines"] == 1
    rel = log.relative_to(camp).as_posix()
    assert f"1 truncated last line(s) skipped (killed ranks), in {rel}" in d.info["warnings"]
    # the readable prefix of the killed rank is kept: 8 steps minus the cut one
    steps = d.steps()
    assert (steps["rank"] == 2).sum() == 7
    assert (steps["rank"] == 0).sum() == 8


def test_the_truncated_line_warning_names_a_few_files_and_counts_the_rest(results):
    runs = [SynthRun(nodes=1, tasks_per_node=5, measure_steps=3, killed_ranks=(0, 1, 2, 3, 4))]
    camp = write_campaign(results, "c", runs)
    d = collect_campaign(camp, write=False)
    said = [w for w in d.info["warnings"] if "truncated last line(s)" in w]
    logs = [f"runs/{runs[0].run_id}/logs/rank-{r}.jsonl" for r in range(3)]
    assert said == [
        f"5 truncated last line(s) skipped (killed ranks), in {', '.join(logs)} and 2 more file(s)"
    ]


def test_missing_rank_marks_run_incomplete_and_out_of_statistics(results):
    runs = [
        SynthRun(nodes=2, tasks_per_node=2, repeat=0),
        SynthRun(nodes=2, tasks_per_node=2, repeat=1, missing_ranks=(3,)),
    ]
    d = collect_campaign(write_campaign(results, "c", runs))
    r = _run(d, runs[1].run_id)
    assert r["status"] == "incomplete" and r["missing_ranks"] == "3"
    assert r["ranks_present"] == 3 and pd.isna(r["throughput"])
    a = analyse(d)
    c = a.configs.iloc[0]
    assert c["runs"] == 2 and c["repeats"] == 1
    assert c["throughput_median"] == _run(d, runs[0].run_id)["throughput"]
    assert runs[1].run_id in set(a.problem_runs["run_id"])


def test_failed_run_has_state_error_and_stderr_tail(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2, failed_ranks=(1,))]
    camp = write_campaign(results, "c", runs)
    d = collect_campaign(camp, run_states=run_states(runs))
    r = _run(d, runs[0].run_id)
    assert r["status"] == "failed" and r["slurm_state"] == "FAILED"
    assert r["exit_code"] == 1 and r["attempts"] == 1
    assert r["error_ranks"] == "1" and "NCCL error" in r["error_message"]
    assert "slurm-1000.err" in r["stderr_tail"] and "NCCL error" in r["stderr_tail"]
    # the same run without a campaign store: state unknown, still failed from the logs
    d2 = collect_campaign(camp)
    assert _run(d2, runs[0].run_id)["slurm_state"] == "unknown"
    assert _run(d2, runs[0].run_id)["status"] == "failed"


def test_run_states_callable_and_complete_logs_with_failed_job(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2)]
    camp = write_campaign(results, "c", runs)
    states = pd.DataFrame(
        [
            {"run_id": runs[0].run_id, "attempt": 1, "state": "NODE_FAIL", "job_id": "7"},
            {
                "run_id": runs[0].run_id,
                "attempt": 2,
                "state": "FAILED",
                "job_id": "8",
                "exit_code": 1,
            },
        ]
    )
    d = collect_campaign(camp, run_states=lambda _dir: states)
    r = _run(d, runs[0].run_id)
    # every rank wrote its summary: the numbers are usable, and the job's end is noted
    assert r["status"] == "ok" and r["complete"] and r["attempts"] == 2
    assert r["slurm_state"] == "FAILED" and r["job_id"] == "8"
    assert "job ended FAILED" in r["problems"]


def test_not_run_and_unplanned_run_folders(results):
    runs = [SynthRun(repeat=0), SynthRun(repeat=1, not_run=True)]
    camp = write_campaign(results, "c", runs)
    shutil.copytree(camp / "runs" / runs[0].run_id, camp / "runs" / "extra-run")
    d = collect_campaign(camp)
    assert _run(d, runs[1].run_id)["status"] == "not_run"
    extra = d.runs[d.runs["run_dir"] == "runs/extra-run"].iloc[0]
    assert not extra["in_manifest"] and extra["status"] == "ok"
    assert "logs name another run" in extra["problems"]


def test_mixed_versions_are_refused_with_file_and_version(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2)]
    camp = write_campaign(results, "c", runs)
    log = camp / "runs" / runs[0].run_id / "logs" / "rank-1.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    meta = json.loads(lines[0])
    meta["format_version"] = 2
    log.write_text(json.dumps(meta) + "\n" + "".join(lines[1:]))
    with pytest.raises(LogFormatError) as e:
        collect_campaign(camp)
    msg = str(e.value)
    assert "mixed log format versions" in msg
    assert f"runs/{runs[0].run_id}/logs/rank-1.jsonl" in msg and "version 2" in msg
    assert e.value.exit_code == 2 and "\n" not in msg
    # every file at an unknown version: refused as well
    log0 = camp / "runs" / runs[0].run_id / "logs" / "rank-0.jsonl"
    lines = log0.read_text().splitlines(keepends=True)
    log0.write_text(
        json.dumps(dict(json.loads(lines[0]), format_version=2)) + "\n" + "".join(lines[1:])
    )
    with pytest.raises(LogFormatError, match="reads version 1"):
        collect_campaign(camp)


def test_duplicate_file_counts_once(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2, repeat=r) for r in range(2)]
    camp = write_campaign(results, "c", runs)
    before = collect_campaign(camp, write=False)
    logs = camp / "runs" / runs[0].run_id / "logs"
    shutil.copy(logs / "rank-1.jsonl", logs / "rank-1 (copy).jsonl")
    (logs / "old").mkdir()
    shutil.copy(logs / "rank-0.jsonl", logs / "old" / "rank-0.jsonl")
    after = collect_campaign(camp, write=False)
    # rank_files counts every file found; nothing else may change
    assert list(after.runs["rank_files"]) == [4, 2]
    pd.testing.assert_frame_equal(
        before.runs.drop(columns=["rank_files"]), after.runs.drop(columns=["rank_files"])
    )
    assert before.steps_table().equals(after.steps_table())
    assert (after.files["status"] == "duplicate").sum() == 2
    assert after.ranks["duplicates"].sum() == 2


def test_unusual_lines_do_not_break_the_file(results):
    runs = [
        SynthRun(nodes=1, tasks_per_node=4, measure_steps=5, warmup_steps=1, repeat=r)
        for r in range(2)
    ]
    camp = write_campaign(results, "c", runs)
    good = collect_campaign(camp, write=False)
    logs = camp / "runs" / runs[0].run_id / "logs"
    # rank 0: a corrupt line and a blank line in the middle
    lines = (logs / "rank-0.jsonl").read_text().splitlines(keepends=True)
    (logs / "rank-0.jsonl").write_text("".join(lines[:3] + ["{not json\n", "\n"] + lines[3:]))
    # rank 1: last record complete but without its newline
    (logs / "rank-1.jsonl").write_text((logs / "rank-1.jsonl").read_text().rstrip("\n"))
    # rank 2: an earlier attempt appended before the real one (a requeued job)
    text = (logs / "rank-2.jsonl").read_text()
    first = text.splitlines(keepends=True)
    (logs / "rank-2.jsonl").write_text("".join(first[:4]) + text)
    # rank 3: a step record with a field of the wrong type
    lines = (logs / "rank-3.jsonl").read_text().splitlines(keepends=True)
    bad = json.loads(lines[2])
    bad["t_start"] = "yesterday"
    (logs / "rank-3.jsonl").write_text("".join(lines[:2] + [json.dumps(bad) + "\n"] + lines[2:]))
    d = collect_campaign(camp, write=False)
    f = d.files.set_index("file")
    rel = f"runs/{runs[0].run_id}/logs/"
    assert f.loc[rel + "rank-0.jsonl", "bad_lines"] == 1
    assert f.loc[rel + "rank-2.jsonl", "restarts"] == 1
    assert f.loc[rel + "rank-3.jsonl", "bad_lines"] == 1
    assert f.loc[rel + "rank-1.jsonl", "truncated_lines"] == 0
    # nothing else changed: same steps, same numbers as before the damage
    pd.testing.assert_frame_equal(
        good.runs.drop(columns=["problems"]), d.runs.drop(columns=["problems"])
    )
    assert good.steps_table().equals(d.steps_table())
    # the other run was read by the fast path
    assert not f.loc[f"runs/{runs[1].run_id}/logs/rank-0.jsonl", "line_by_line"]


def test_a_damaged_measured_step_makes_the_run_incomplete_naming_the_file(results):
    """A measured step's line damaged in the middle of a log: its samples would be missing
    from a window that still spans its time, so the run is not complete, and both the run's
    problems and collect's warning name the file."""
    runs = [SynthRun(nodes=1, tasks_per_node=2, measure_steps=5, warmup_steps=1)]
    camp = write_campaign(results, "c", runs)
    log = camp / "runs" / runs[0].run_id / "logs" / "rank-1.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    middle = [i for i, ln in enumerate(lines) if '"phase": "measure"' in ln][2]
    lines[middle] = lines[middle][:20] + "\x00garbage\n"
    log.write_text("".join(lines))
    d = collect_campaign(camp, write=False)
    r = _run(d, runs[0].run_id)
    assert not r["complete"] and r["status"] == "incomplete"
    rel = f"runs/{runs[0].run_id}/logs/rank-1.jsonl"
    assert (
        f"rank 1: 4 of the 5 measured steps its summary counts are in {rel}; 1 unreadable line(s)"
    ) in r["problems"]
    assert f"1 unreadable line(s) skipped, in {rel}" in d.info["warnings"]


def test_empty_log_counts_as_started_but_unreadable(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2)]
    camp = write_campaign(results, "c", runs)
    (camp / "runs" / runs[0].run_id / "logs" / "rank-1.jsonl").write_bytes(b"")
    d = collect_campaign(camp)
    r = _run(d, runs[0].run_id)
    assert r["status"] == "incomplete" and r["missing_ranks"] == ""
    assert "unreadable logs" in r["problems"]


def test_collect_twice_is_identical_and_staleness(sweep_campaign):
    collect_campaign(sweep_campaign)
    data = sweep_campaign / "data"
    first = {p.name: p.read_bytes() for p in data.iterdir()}
    assert not is_stale(sweep_campaign)
    collect_campaign(sweep_campaign)
    second = {p.name: p.read_bytes() for p in data.iterdir()}
    assert first == second
    d = load_data(sweep_campaign)
    assert len(d.runs) == 12 and (d.runs["status"] == "ok").all()
    # a log that changes makes the data stale
    log = next((sweep_campaign / "runs").glob("*/logs/rank-0.jsonl"))
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert is_stale(sweep_campaign)


def test_campaign_without_manifest_is_bad_input(results):
    (results / "broken").mkdir()
    with pytest.raises(CollectError, match="campaign.json"):
        collect_campaign(results / "broken")


def test_allreduce_and_convergence_runs(results):
    runs = [
        SynthRun(
            "pytorch",
            model="allreduce",
            mode="allreduce",
            nodes=1,
            tasks_per_node=4,
            batch_size=1,
            allreduce_sizes=[1 << 10, 1 << 20],
            workload="allreduce_torch",
        ),
        exact_run(
            model="lenet",
            mode="convergence",
            nodes=1,
            tasks_per_node=2,
            batch_size=64,
            epochs=3,
            measure_steps=30,
            warmup_steps=0,
            target_accuracy=0.5,
        ),
    ]
    d = collect_campaign(write_campaign(results, "c", runs))
    assert (d.runs["status"] == "ok").all()
    assert len(d.allreduce) == 8 and len(d.evals) == 6
    a = analyse(d)
    # busbw = (bytes / slowest rank's time / 1e9) * 2(n-1)/n with n = 4
    ar = a.allreduce.set_index("bytes")
    rows = d.allreduce[d.allreduce["bytes"] == 1 << 20]
    t = rows["time_s"].max()
    assert ar.loc[1 << 20, "busbw_gbps"] == pytest.approx((1 << 20) / t / 1e9 * 1.5)
    conv = a.convergence.iloc[0]
    assert conv["final_accuracy"] == pytest.approx(d.evals["accuracy"].iloc[-1])
    assert conv["reached"] == 1
    assert Path(a.largest_run or "").name  # a run with step data was chosen


def test_blank_lines_stay_on_the_fast_path(results):
    runs = [SynthRun(nodes=1, tasks_per_node=2, measure_steps=5, warmup_steps=1)]
    camp = write_campaign(results, "c", runs)
    good = collect_campaign(camp, write=False)
    log = camp / "runs" / runs[0].run_id / "logs" / "rank-1.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:3] + ["\n", "   \n"] + lines[3:]))
    d = collect_campaign(camp, write=False)
    assert not d.files["line_by_line"].any()
    assert good.steps_table().equals(d.steps_table())
    pd.testing.assert_frame_equal(good.runs, d.runs)


def test_blank_line_between_allreduce_records_keeps_every_record(results):
    runs = [
        SynthRun(
            "pytorch",
            model="allreduce",
            mode="allreduce",
            nodes=1,
            tasks_per_node=2,
            batch_size=1,
            allreduce_sizes=[1 << 10, 1 << 12, 1 << 14, 1 << 16],
            workload="allreduce_torch",
        )
    ]
    camp = write_campaign(results, "c", runs)
    good = collect_campaign(camp, write=False)
    log = camp / "runs" / runs[0].run_id / "logs" / "rank-0.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2] + ["\n"] + lines[2:]))
    d = collect_campaign(camp, write=False)
    pd.testing.assert_frame_equal(good.allreduce, d.allreduce)
    assert sorted(d.allreduce[d.allreduce["rank"] == 0]["bytes"]) == [1024, 4096, 16384, 65536]
