"""Reading hang and node_comm records from rank logs: the same records as a line-by-line
scan, while logs without such a record are skipped without parsing a line."""

from __future__ import annotations

import json

from ddlbench.campaign.evidence import node_comm_records
from ddlbench.campaign.hangs import hang_records, hang_summary
from ddlbench.campaign.paths import RunPaths


def _log(run_dir, rank, host, extra=()):
    logs = RunPaths(run_dir).logs
    logs.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "meta", "rank": rank, "host": host}]
    lines += [{"type": "step", "rank": rank, "step": s, "duration_s": 0.1} for s in range(50)]
    lines += list(extra)
    (logs / f"rank-{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_hang_records_and_the_silent_ranks(tmp_path):
    run = tmp_path / "run"
    hang = {"type": "hang", "rank": 1, "host": "b", "phase": "collective", "last_step": 7}
    _log(run, 0, "a")
    _log(run, 1, "b", [hang])
    _log(run, 2, "c")
    hangs, silent = hang_records(run)
    assert [h["rank"] for h in hangs] == [1] and hangs[0]["phase"] == "collective"
    assert silent == [
        {"rank": 0, "host": "a", "last_step": 49},
        {"rank": 2, "host": "c", "last_step": 49},
    ]
    # ranks 0 and 2 wrote neither a hang record nor a summary while rank 1's watchdog fired:
    # they are the ones that never arrived (a frozen rank writes nothing)
    assert hang_summary(run)["hosts"] == ["a", "c"]


def test_no_hang_and_node_comm_records(tmp_path):
    run = tmp_path / "run"
    comm = {"type": "node_comm", "rank": 0, "round": 0, "pair": ["a", "b"], "busbw_gbps": 9.0}
    _log(run, 0, "a", [comm])
    _log(run, 1, "b")
    assert hang_records(run) == ([], []) and hang_summary(run) is None
    assert node_comm_records(run) == [comm]
    # a step record that mentions neither word is never parsed; a broken line is skipped
    with (RunPaths(run).logs / "rank-1.jsonl").open("a") as fh:
        fh.write('{"type": "node_comm", broken\n')
    assert node_comm_records(run) == [comm]
