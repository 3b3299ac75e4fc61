"""``status`` and ``wait`` show a failed run's own message: the ``error`` record of its rank
log, read once when the job's end is recorded (docs/your-own-workload.md#when-the-program-fails)."""

from __future__ import annotations

import json

from ddlbench.campaign.rank_errors import CAUSE_SOURCE, error_values, one_line, rank_errors
from ddlbench.execute import campaign_status, submit_campaign, wait_campaign
from tests.support.campaigns import make_campaign
from tests.support.cli import invoke


def _quiet(_msg: str) -> None:
    pass


def _log(folder, rank, *records, node="n1"):
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"type": "meta", "rank": rank, "host": "h", "slurm_nodelist": node, "node_rank": 0}
    lines = [json.dumps(r) for r in (meta, *records)]
    (folder / f"rank-{rank}.jsonl").write_text("\n".join(lines) + "\n")


def test_the_failing_rank_is_chosen_over_one_srun_stopped(tmp_path):
    logs = tmp_path / "logs" / "attempt-2"
    _log(tmp_path / "logs" / "attempt-1", 0, {"type": "error", "t": 1, "message": "old attempt"})
    _log(logs, 0, {"type": "error", "t": 5, "message": "Terminated: received signal 15"})
    _log(logs, 1, {"type": "error", "t": 6, "message": "ValueError: bad\nmore\nlines"})
    _log(logs, 2, {"type": "step", "step": 0})
    assert [e[0] for e in rank_errors(tmp_path)] == [1, 0]
    values = error_values(tmp_path)
    assert values["message"] == "rank 1 on n1: ValueError: bad\nmore\nlines"
    assert values["cause"] == "rank 1 on n1: ValueError: bad [...]"
    assert values["cause_source"] == CAUSE_SOURCE


def test_a_job_that_failed_before_its_attempt_folder_has_no_earlier_attempts_error(tmp_path):
    """Attempt 1 (job 11) failed with its rank's error; its retry (job 12) failed before it
    made its attempt folder (a missing venv): job 12 gets no rank error, not job 11's."""
    first = tmp_path / "logs" / "attempt-1"
    _log(first, 0, {"type": "error", "t": 1, "message": "RuntimeError: CUDA out of memory"})
    (first / "job.txt").write_text("job_id=11 restarts=0 start=2026-11-26T10:00:00Z\n")
    assert "out of memory" in error_values(tmp_path, job_ids=["11"])["message"]
    assert error_values(tmp_path, job_ids=["12"]) == {}
    second = tmp_path / "logs" / "attempt-2"
    _log(second, 1, {"type": "error", "t": 2, "message": "ValueError: its own"})
    (second / "job.txt").write_text("job_id=12 restarts=0 start=2026-11-26T11:00:00Z\n")
    assert "its own" in error_values(tmp_path, job_ids=["12"])["message"]


def test_srun_keeps_the_cause_of_a_task_killed_by_a_signal_or_of_stopped_ranks(tmp_path):
    logs = tmp_path / "logs" / "attempt-1"
    _log(logs, 0, {"type": "error", "t": 5, "message": "Terminated: received signal 15"})
    assert "cause" not in error_values(tmp_path)
    _log(logs, 1, {"type": "error", "t": 5, "message": "RuntimeError: x"})
    assert "cause" not in error_values(tmp_path, failure_signal=9)
    assert error_values(tmp_path / "nothing") == {}


def test_a_message_that_names_its_rank_is_not_prefixed_twice():
    said = "the program 'python' exited with code 3 on rank 1 (vm); its last lines:\n  | x"
    assert one_line(1, "node1", said) == (
        "the program 'python' exited with code 3 on rank 1 (vm); its last lines [...]"
    )


def test_status_and_wait_show_the_ranks_error_message(tmp_path):
    body = [
        'mkdir -p "$DDLBENCH_RUN_DIR/logs/attempt-1"',
        'printf \'%s\\n\' \'{"type": "meta", "rank": 0, "host": "h", '
        '"slurm_nodelist": "node1", "node_rank": 0}\' '
        '\'{"type": "error", "t": 1.0, "message": "the program exited with code 3"}\' '
        '> "$DDLBENCH_RUN_DIR/logs/attempt-1/rank-0.jsonl"',
        "srun --nodes=1 --ntasks=1 bash -c 'exit 1'",
    ]
    cdir = make_campaign(tmp_path, "c", [{"run_id": "bad", "body": body}])
    submit_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    (run,) = campaign_status(cdir, echo=_quiet)["runs"]
    assert run["state"] == "FAILED"
    assert run["reason"] == "rank 0 on node1: the program exited with code 3", run
    assert run["cause_source"] == CAUSE_SOURCE and run["failed_task"] == 0
    assert run["message"] == "rank 0 on node1: the program exited with code 3"
    assert run["history"][0]["message"] == run["message"]
    for command in ("status", "wait"):
        res = invoke([command, cdir])
        assert "rank 0 on node1: the program exited with code 3" in res.stdout, res.output
