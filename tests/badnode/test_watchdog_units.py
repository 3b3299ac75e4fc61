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
