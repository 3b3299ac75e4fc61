"""The watchdog's limit, who never arrived, and the spec keys reaching run.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from ddlbench.campaign import states as S
from ddlbench.campaign.hangs import describe, not_arrived
from ddlbench.workloads.common import diagnose
from ddlbench.workloads.common.watchdog import EXIT_HUNG, Watchdog


def test_limit_follows_the_median_step():
    wd = Watchdog("/nonexistent", 0, "n1", print, {"floor_s": 2, "factor": 10, "first_s": 50})
    assert wd.limit_s() == 50  # no step yet
    wd.progress(0)
    wd.durations.extend([0.5, 0.6, 0.4])
    assert wd.limit_s() == 10 * 0.5
    wd.durations.clear()
    wd.durations.extend([0.01] * 3)
    assert wd.limit_s() == 2  # the floor
    wd.phase = "eval"  # an evaluation has no steps: the start-up limit again
    assert wd.limit_s() == 50


def test_exit_code_is_shared_with_the_login_side():
    assert EXIT_HUNG == S.HUNG_EXIT_CODE and S.HUNG in S.FINAL and S.HUNG in S.UNSUCCESSFUL


def test_the_rank_behind_is_named():
    hangs = [
        {"rank": 0, "host": "n1", "phase": "backward", "last_step": 7},
        {"rank": 1, "host": "n2", "phase": "step", "last_step": 7},
        {"rank": 2, "host": "n2", "phase": "backward", "last_step": 7},
    ]
    assert [h["rank"] for h in not_arrived(hangs)] == [1]
    same = [dict(h, phase="collective") for h in hangs]
    assert len(not_arrived(same)) == 3
    summary = {"not_arrived": not_arrived(same), "ranks": same}
    assert "all stopped at the same point" in describe(summary)


def test_fired_watchdog_dumps_and_exits(tmp_path):
    code = textwrap.dedent(
        f"""
        import json, threading
        from ddlbench.workloads.common import watchdog
        log = open({str(tmp_path / "log.jsonl")!r}, "a")
        def write(rec):
            log.write(json.dumps(rec) + "\\n"); log.flush()
        watchdog.arm({{"watchdog": {{"first_s": 1, "floor_s": 0.5, "grace_s": 0}}}},
                     {str(tmp_path)!r}, 3, "nX", write)
        watchdog.mark("collective")
        threading.Event().wait(30)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert proc.returncode == EXIT_HUNG
    rec = json.loads((tmp_path / "log.jsonl").read_text())
    assert rec["type"] == "hang" and rec["phase"] == "collective" and rec["last_step"] is None
    assert "threading.py" in (tmp_path / "stacks-rank-3.txt").read_text()


def test_comm_debug_switches(tmp_path):
    assert diagnose.comm_debug_wanted({"comm_debug": True}, {})
    assert diagnose.comm_debug_wanted({}, {"DDLBENCH_COMM_DEBUG": "1"})
    assert not diagnose.comm_debug_wanted({}, {})
    env = diagnose.comm_debug_env(str(tmp_path))
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_FILE"].startswith(str(tmp_path))
    assert env["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"


def test_slow_and_bad_node_hooks():
    env = {"DDLBENCH_TEST_SLOW_NODE": "n2", "DDLBENCH_TEST_SLOW_S": "0.5"}
    assert diagnose.slow_delay(env, "n2") == 0.5 and diagnose.slow_delay(env, "n1") == 0
    assert diagnose.bad_node({"DDLBENCH_TEST_BAD_NODE": "n1"}, "n1")
    assert not diagnose.bad_node({}, "n1")


def test_new_records_follow_the_schema(tmp_path):
    import jsonschema

    from tests.support.repo import ROOT

    schema = json.loads((ROOT / "ddlbench/schemas/rank-log-v1.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    records = []
    wd = Watchdog(str(tmp_path), 1, "n2", records.append, {"grace_s": 0})
    wd.phase = "backward"
    wd.progress(4)
    import unittest.mock  # os._exit would end pytest: the record is what is checked here

    with unittest.mock.patch("os._exit"):
        wd.fire(12.5, 10.0)
    comm = {"type": "node_comm", "t": 1.0, "test": "pair", "round": 0, "nodes": ["a", "b"]}
    comm.update(ranks=[0, 1], bytes=4096, time_s=0.01, algbw_gbps=0.4, busbw_gbps=0.4)
    for rec in records + [comm]:
        validator.validate(rec)
    assert records[0]["last_step"] == 4 and records[0]["phase"] == "backward"


def test_the_start_up_limit_is_a_share_of_the_time_limit():
    from ddlbench.workloads.common.watchdog import first_limit

    assert first_limit(None) == 1200  # no time limit known
    assert first_limit(30 * 60) == 300  # at least 5 minutes
    assert first_limit(3600) == 360 and first_limit(2 * 3600) == 720
    assert first_limit(24 * 3600) == 1200  # at most 20 minutes
    wd = Watchdog("/nonexistent", 0, "n1", print, None, time_limit_s=3600)
    assert wd.limit_s() == 360
    wd = Watchdog("/nonexistent", 0, "n1", print, {"first_s": 50, "floor_s": 5}, 3600)
    assert wd.limit_s() == 50  # the spec's first_s wins


def test_the_request_appears_whole_and_the_first_rank_keeps_it(tmp_path, monkeypatch):
    """The request is linked into place already written (a rank that sees it reads the rank
    that asked, never an empty file); a later rank's request changes nothing and leaves no
    file behind; where hard links are refused it is created in place."""
    first = Watchdog(str(tmp_path), 0, "n1", print, None)
    second = Watchdog(str(tmp_path), 1, "n2", print, None)
    seen = []
    real_link = os.link

    def link(src, dst):  # what a reader polling the folder finds at the moment of the link
        seen.append(second.requested_by())
        real_link(src, dst)
        seen.append(second.requested_by())

    monkeypatch.setattr(os, "link", link)
    first._ask_the_others()
    second._ask_the_others()
    assert seen[:2] == [None, 0] and second.requested_by() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hang-dump-request.json"]

    def refused(src, dst):
        raise PermissionError("no hard links here")

    monkeypatch.setattr(os, "link", refused)
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    Watchdog(str(elsewhere), 3, "n4", print, None)._ask_the_others()
    assert json.loads((elsewhere / "hang-dump-request.json").read_text())["rank"] == 3
    assert sorted(p.name for p in elsewhere.iterdir()) == ["hang-dump-request.json"]


def test_the_first_watchdog_to_fire_asks_the_others_to_dump(tmp_path):
    """Two ranks in one attempt folder: rank 0 fires at 1 s; rank 1 (limit 60 s) sees the
    request, dumps its stacks and writes its record naming the rank that asked."""
    code = textwrap.dedent(
        """
        import json, sys, threading
        from ddlbench.workloads.common import watchdog
        rank, first = int(sys.argv[1]), float(sys.argv[2])
        log = open(sys.argv[3] + f"/rank-{rank}.jsonl", "a")
        def write(rec):
            log.write(json.dumps(rec) + "\\n"); log.flush()
        watchdog.arm({"watchdog": {"first_s": first, "floor_s": 0.5, "grace_s": 3}},
                     sys.argv[3], rank, f"n{rank + 1}", write)
        watchdog.mark("collective")
        threading.Event().wait(20)
        """
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    late = subprocess.Popen([sys.executable, "-c", code, "1", "60", str(tmp_path)], env=env)
    try:
        first = subprocess.run(
            [sys.executable, "-c", code, "0", "1", str(tmp_path)], env=env, timeout=60
        )
        assert first.returncode == EXIT_HUNG
    finally:
        late.kill()
        late.wait()
    asked = json.loads((tmp_path / "hang-dump-request.json").read_text())
    assert asked["rank"] == 0 and asked["host"] == "n1"
    rec = json.loads((tmp_path / "rank-1.jsonl").read_text())
    assert rec["type"] == "hang" and rec["requested_by"] == 0 and rec["waited_s"] < 60
    assert "threading.py" in (tmp_path / "stacks-rank-1.txt").read_text()
    assert json.loads((tmp_path / "rank-0.jsonl").read_text())["requested_by"] is None


def test_a_frozen_rank_is_named_by_its_late_record_or_its_silence():
    """SIGSTOP on rank 1: rank 0 fires on time and waits in the collective; Slurm resumes
    rank 1 when it kills the job, and it writes a record 3 s past its limit, at the same point
    as rank 0: only rank 1 is named. Killed before it could write, it is named as silent."""
    healthy = {"rank": 0, "host": "n1", "phase": "collective", "last_step": 5}
    healthy.update(waited_s=10.1, limit_s=10.0)
    frozen = dict(healthy, rank=1, host="n2", waited_s=13.2)
    named = not_arrived([healthy, frozen])
    assert [(h["rank"], h["host"], h["why"]) for h in named] == [(1, "n2", "late")]
    text = describe({"not_arrived": named, "ranks": [healthy, frozen]})
    assert text == (
        "hung: rank 1 on n2 (in collective, after step 5; not running: its watchdog fired "
        "3.2 s late) never arrived"
    )
    silent = [{"rank": 1, "host": "n2", "last_step": 4}]
    named = not_arrived([healthy], silent)
    assert [(h["rank"], h["host"], h["why"]) for h in named] == [(1, "n2", "silent")]
    assert "rank 1 on n2 (after step 4; wrote no hang record" in describe(
        {"not_arrived": named, "ranks": [healthy]}
    )
    # a rank that answered the request on time is never late, even far before its limit
    asked = dict(healthy, rank=2, waited_s=3.0, limit_s=300.0, requested_by=0)
    assert [h["rank"] for h in not_arrived([healthy, asked, frozen])] == [1]


def test_a_silent_rank_is_named_by_its_slurm_node():
    from ddlbench.campaign.hangs import slurm_node

    meta = {"host": "login-like-host", "node_rank": 1, "slurm_nodelist": "n[1-2]"}
    assert slurm_node(meta) == "n2"
    assert slurm_node({"host": "h", "node_rank": 0, "slurm_nodelist": None}) == "h"
