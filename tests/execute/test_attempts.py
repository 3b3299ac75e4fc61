"""Attempt folders of a run (RunPaths), the restarts they show, and the store's history."""

from __future__ import annotations

import json
import time

import pytest

from ddlbench.campaign.paths import CampaignPaths, RunPaths
from ddlbench.campaign.restarts import restarted_runs, restarts_sentence, run_starts
from ddlbench.execute.store import CampaignStore
from ddlbench.execute.store_guard import StoreLostError


def _start(run: RunPaths, k: int, job: str, restarts: int, ranks: int = 2) -> None:
    folder = run.attempt(k)
    folder.mkdir(parents=True)
    (folder / "job.txt").write_text(
        f"job_id={job} restarts={restarts} start=2026-01-01T00:00:0{k}Z\n"
    )
    for r in range(ranks):
        (folder / f"rank-{r}.jsonl").write_text(json.dumps({"type": "meta", "k": k}) + "\n")


def test_the_newest_attempt_is_read_and_the_others_kept(tmp_path):
    run = RunPaths(tmp_path / "runs" / "r")
    _start(run, 1, "7", 0)
    _start(run, 2, "7", 1)  # a requeue: same job id
    run.attempt(3).mkdir()  # a start that has written no rank log yet
    assert run.attempts() == [1, 2, 3]
    assert run.log_dir() == run.attempt(2)
    assert [p.parent.name for p in run.rank_logs()] == ["attempt-2", "attempt-2"]
    assert len(list(run.all_rank_logs())) == 4
    assert run.has_output()
    starts = run_starts(run)
    # a start whose job.txt is not there (yet) is counted, under job "?"
    assert starts.jobs == {"7": [1, 2], "?": [3]} and starts.restarts == 1 and starts.starts == 3


def test_run_folders_of_earlier_versions_are_read_as_before(tmp_path):
    run = RunPaths(tmp_path / "runs" / "old")
    run.logs.mkdir(parents=True)
    (run.logs / "rank-0.jsonl").write_text("{}\n")
    assert run.attempts() == [] and run.log_dir() == run.logs
    assert [p.name for p in run.rank_logs()] == ["rank-0.jsonl"]


def test_the_report_sentence_names_restarted_and_retried_runs(tmp_path):
    paths = CampaignPaths(tmp_path)
    _start(paths.run("requeued"), 1, "10", 0)
    _start(paths.run("requeued"), 2, "10", 1)
    _start(paths.run("retried"), 1, "11", 0)
    _start(paths.run("retried"), 2, "12", 0)  # ddlbench retry: a new job
    _start(paths.run("once"), 1, "13", 0)
    assert [r.run_id for r in restarted_runs(tmp_path)] == ["requeued", "retried"]
    text = restarts_sentence(tmp_path)
    assert text.startswith("2 run(s) started more than once (1 requeued or restarted")
    assert (
        "requeued (2 starts: job 10 x2)" in text
        and "retried (2 starts: job 11 x1, job 12 x1)" in text
    )
    assert "logs/attempt-<k>/" in text
    assert restarts_sentence(tmp_path / "nothing") == ""


def _one_run(store: CampaignStore) -> None:
    from types import SimpleNamespace

    run = SimpleNamespace(run_id="r", seq=0, script="jobs/r.sh", run_dir="runs/r", nodes=1)
    run.tasks_per_node = 1
    store.sync_runs([run])


def test_a_store_keeps_the_state_history_and_restarts(tmp_path):
    with CampaignStore.open(tmp_path) as store:
        _one_run(store)
        a = store.new_attempt("r", "local", "PENDING", job_id="1")
        store.update_attempt(a.id, state="RUNNING")
        store.update_attempt(a.id, reason="same state, no new event")
        assert store.record_restart(a.id, 1, "requeued", when=time.time())
        assert not store.record_restart(a.id, 1, "seen again")  # never counted twice
        time.sleep(0.01)
        store.update_attempt(a.id, state="COMPLETED")
        history = [e["state"] for e in store.history(a.id)]
        assert history == ["PENDING", "RUNNING", "RESTARTED", "COMPLETED"]
        assert store.get_attempt(a.id).restarts == 1


def test_a_new_store_over_output_is_refused_and_nothing_is_created(tmp_path):
    run = CampaignPaths(tmp_path).run("r")
    run.dir.mkdir(parents=True)
    (run.dir / "slurm-5.out").write_text("ran\n")
    with pytest.raises(StoreLostError) as exc:
        CampaignStore.open(tmp_path)
    assert exc.value.exit_code == 2
    assert f"{tmp_path / 'runs'}/" in str(exc.value) and f"ddlbench recover {tmp_path.name}" in str(
        exc.value
    )
    assert not (tmp_path / "state.sqlite").exists()
    with CampaignStore.open(tmp_path, rebuild=True):
        pass  # what recover does
    assert (tmp_path / "state.sqlite").stat().st_size > 0


def test_a_schema_1_store_gains_restarts_and_events(tmp_path):
    import sqlite3

    with CampaignStore.open(tmp_path) as store:
        _one_run(store)
        store.new_attempt("r", "local", "PENDING", job_id="1")
    con = sqlite3.connect(tmp_path / "state.sqlite")
    con.execute("DROP TABLE events")
    con.execute("ALTER TABLE attempts DROP COLUMN restarts")
    con.execute("UPDATE meta SET value='1' WHERE key='schema'")
    con.commit()
    con.close()
    with CampaignStore.open(tmp_path) as store:
        a = store.attempts()[0]
        assert a.restarts == 0
        store.update_attempt(a.id, state="RUNNING")
        assert [e["state"] for e in store.history(a.id)] == ["RUNNING"]
        assert store.get_meta("schema") == 2


def test_recover_says_what_it_could_not_establish(tmp_path):
    from ddlbench.execute.recover import recover_campaign
    from tests.support.campaigns import make_campaign

    cdir = make_campaign(tmp_path, "lost", [{"run_id": r, "body": ["true"]} for r in "abc"])
    paths = CampaignPaths(cdir)
    done = paths.run("a")
    _start(done, 1, "5", 0, ranks=0)
    for r in range(2):
        lines = [{"type": "meta", "time": 1000.0 + r}, {"type": "summary", "status": "ok"}]
        (done.attempt(1) / f"rank-{r}.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in lines)
        )
    (done.dir / "slurm-5.out").write_text("ddlbench: a finished\n")
    unknown = paths.run("b")
    unknown.dir.mkdir(parents=True)
    (unknown.dir / "slurm-6.err").write_text("something\n")
    out = recover_campaign(cdir, echo=lambda m: None)
    states = {a["run_id"]: (a["state"], a["job_id"]) for a in out.attempts}
    assert states == {"a": ("COMPLETED", "5"), "b": ("LOST", "6")}  # c: never submitted
    assert out.unknown == ["b: could not establish how local job 6 ended"]
    by_run = {a["run_id"]: a for a in out.attempts}
    # the elapsed time survives: the first rank's start, the last write of a rank log
    assert by_run["a"]["start_time"] == 1000.0 and by_run["a"]["end_time"] > 1000.0
    assert by_run["b"]["message"] == (
        "recovered from the run folder (it does not say how local job 6 ended)"
    )
    assert out.moved_aside == []  # there was no store file to keep


def test_the_report_names_every_attempt_of_a_run_submitted_twice(tmp_path):
    from ddlbench.campaign.restarts import attempts_sentence

    store = CampaignStore.open(tmp_path)
    _one_run(store)
    store.new_attempt("r", "slurm", "FAILED", job_id="7", exit_code=1, cause="task 1 on n2: x")
    assert attempts_sentence(tmp_path) == ""  # one attempt: nothing to add
    store.new_attempt("r", "slurm", "COMPLETED", job_id="9", exit_code=0)
    store.close()
    assert attempts_sentence(tmp_path) == (
        "1 run(s) were submitted more than once: r (attempt 1: job 7 FAILED, exit 1, task 1 on "
        "n2: x; attempt 2: job 9 COMPLETED, exit 0) (every attempt: `ddlbench status --json`, "
        "`history`)."
    )
