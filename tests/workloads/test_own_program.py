"""The wrapper that runs a spec's own program on a rank (ddlbench.workloads.own.own_program) and
the marks module (ddlbench.workloads.steps), on small standard-library programs: no framework,
no scheduler. docs/your-own-workload.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[2]

#: prints "step <i> time <s> s loss <x>" for 6 steps of 20 ms (its own timing), then exits 0
OUTPUT_PROGRAM = """
import sys, time
for i in range(6):
    t0 = time.time(); time.sleep(0.02); t1 = time.time()
    print(f"step {i} time {t1 - t0:.6f} s loss {1.0 / (i + 1):.4f}", flush=True)
"""
MARKS_PROGRAM = """
import time
from ddlbench.workloads.steps import step, step_done, comm
for i in range(4):
    with step(samples=8) as s:
        time.sleep(0.01)
        with comm():
            time.sleep(0.005)
        s.loss = 0.5
step_done(samples=8, loss=0.25)
"""


def _run(
    tmp: Path, program: Dict[str, Any], rank: int = 0, watchdog: Any = False
) -> Tuple[int, List[dict], str]:
    """Run the wrapper as rank ``rank`` of 2; returns (exit code, rank-log records, output)."""
    cfg = {
        "format": "ddlbench-run/1",
        "run_id": "own-r0",
        "campaign": "t",
        "framework": "pytorch",
        "workload": "own_program",
        "mode": "throughput",
        "model": "program",
        "log_dir": str(tmp / "logs"),
        "batch_size": 4,
        "world_size": 2,
        "tasks_per_node": 2,
        "steps": {"warmup": 2, "measure": 3},
        "watchdog": watchdog,
        "program": {"cwd": str(tmp), "measure": "marks", **program},
    }
    (tmp / "run.json").write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=str(REPO), DDLBENCH_LOG_DIR=str(tmp / "logs"))
    env.update(SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NTASKS="2")
    env.update(DDLBENCH_RUN_DIR=str(tmp), DDLBENCH_FIRST_ADDR="127.0.0.1", DDLBENCH_PORT="1")
    out = subprocess.run(
        [sys.executable, "-m", "ddlbench.workloads.own.own_program", str(tmp / "run.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp,
    )
    log = tmp / "logs" / f"rank-{rank}.jsonl"
    records = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    return out.returncode, records, out.stdout + out.stderr


def _of(records: List[dict], kind: str) -> List[dict]:
    return [r for r in records if r["type"] == kind]


def test_output_patterns_become_steps_with_the_programs_own_times(tmp_path):
    (tmp_path / "prog.py").write_text(OUTPUT_PROGRAM)
    measure = {"step": r"time (?P<value>[0-9.]+) s", "unit": "s", "loss": r"loss ([0-9.]+)"}
    rc, records, out = _run(
        tmp_path, {"argv": [sys.executable, "prog.py"], "measure": {**measure, "samples": 4}}
    )
    assert rc == 0, out
    assert "step 5 time" in out  # the program's output is passed through
    steps = _of(records, "step")
    assert [s["phase"] for s in steps] == ["warmup"] * 2 + ["measure"] * 4
    assert all(abs((s["t_end"] - s["t_start"]) - 0.02) < 0.015 for s in steps)
    assert steps[3]["loss"] == 0.25 and all(s["samples"] == 4 for s in steps)
    (summary,) = _of(records, "summary")
    assert summary["steps_measured"] == 4 and summary["samples_measured"] == 16
    assert summary["final_loss"] == 0.1667
    assert records[0]["workload"] == "own_program" and records[0]["measured_by"] == "output"


def test_samples_per_second_and_milliseconds(tmp_path):
    (tmp_path / "p.py").write_text("print('rate 400 samples/s 3 ms')\n" * 4)
    rc, records, out = _run(
        tmp_path,
        {
            "argv": [sys.executable, "p.py"],
            "measure": {"step": r"rate (\d+) samples/s", "unit": "samples/s", "samples": 4},
        },
    )
    assert rc == 0, out
    assert all(abs(s["t_end"] - s["t_start"] - 0.01) < 1e-5 for s in _of(records, "step"))
    (tmp_path / "ms").mkdir()
    measure = {"step": r"(\d+) ms", "unit": "ms", "samples": 4}
    rc, records, out = _run(
        tmp_path / "ms", {"argv": [sys.executable, str(tmp_path / "p.py")], "measure": measure}
    )
    assert rc == 0, out
    assert all(abs(s["t_end"] - s["t_start"] - 0.003) < 1e-5 for s in _of(records, "step"))


def test_marks_become_steps_with_the_communication_split(tmp_path):
    (tmp_path / "prog.py").write_text(MARKS_PROGRAM)
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "prog.py"]})
    assert rc == 0, out
    steps = _of(records, "step")
    assert len(steps) == 5 and steps[-1]["loss"] == 0.25 and steps[0]["loss"] == 0.5
    assert all(s["comm_s"] >= 0.004 and s["compute_s"] >= 0.009 for s in steps[:4])
    assert steps[4]["comm_s"] is None  # step_done without comm(): no split
    assert _of(records, "summary")[0]["steps_measured"] == 3
    assert records[0]["measured_by"] == "marks"


def test_marks_do_nothing_outside_ddlbench(tmp_path):
    (tmp_path / "prog.py").write_text(MARKS_PROGRAM + "print('alone ok')\n")
    env = {k: v for k, v in os.environ.items() if k != "DDLBENCH_MARK_FD"}
    out = subprocess.run(
        [sys.executable, "prog.py"],
        cwd=tmp_path,
        env=dict(env, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and out.stdout == "alone ok\n", out.stderr


def _error(records: List[dict]) -> str:
    (err,) = _of(records, "error")
    assert records[0]["type"] == "meta" and not _of(records, "summary")
    return err["message"]


def test_a_program_that_exits_non_zero_fails_with_its_last_lines(tmp_path):
    (tmp_path / "p.py").write_text(
        "import sys\nfor i in range(30): print('line', i)\nsys.exit('boom on purpose')\n"
    )
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]}, rank=1)
    assert rc == 1, out
    msg = _error(records)
    assert msg.startswith("the program ") and "exited with code 1 on rank 1" in msg
    assert "| boom on purpose" in msg and "| line 29" in msg and "| line 9\n" not in msg
    # an explained failure: its message alone, no wrapper traceback, no class name
    assert "traceback" not in _of(records, "error")[0]
    assert "Traceback" not in out and "ProgramFailed" not in out
    assert "ddlbench: rank 1: the program " in out


def test_a_pattern_that_never_matches(tmp_path):
    (tmp_path / "p.py").write_text("print('epoch 1 done')\n")
    measure = {"step": r"step time (\d+)", "unit": "s", "samples": 4}
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"], "measure": measure})
    assert rc == 1, out
    msg = _error(records)
    assert "never matched the program's output (1 lines)" in msg and "| epoch 1 done" in msg


def test_a_program_that_never_marks_a_step(tmp_path):
    (tmp_path / "p.py").write_text("print('training without marks')\n")
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]})
    assert rc == 1, out
    assert "never marked a step" in _error(records)


def test_only_warmup_steps_is_a_failure(tmp_path):
    (tmp_path / "p.py").write_text(MARKS_PROGRAM.replace("range(4)", "range(1)"))
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]})
    assert rc == 1 and "all of them warmup" in _error(records)


def test_a_command_that_does_not_exist(tmp_path):
    rc, records, out = _run(tmp_path, {"argv": ["no-such-trainer", "--x"]})
    assert rc == 1, out
    msg = _error(records)
    assert "cannot start the program 'no-such-trainer'" in msg and "PATH" in msg


def test_hostile_values_reach_the_program_as_they_are(tmp_path):
    """argv is never read by a shell: quotes, $(...), ; and newlines arrive literally."""
    (tmp_path / "p.py").write_text(
        "import json, sys\nprint(json.dumps(sys.argv[1:]))\nprint('step time 0.001')\n"
    )
    hostile = ["$(touch pwned)", "`touch pwned`", "a; touch pwned", 'it\'s "q"', "x\ny", "*"]
    measure = {"step": r"step time ([0-9.]+)", "unit": "s", "samples": 1}
    (tmp_path / "warm").write_text("")
    rc, records, out = _run(
        tmp_path, {"argv": [sys.executable, "p.py", *hostile], "measure": measure}
    )
    assert json.dumps(hostile) in out
    assert not (tmp_path / "pwned").exists()
    assert rc == 1 and "all of them warmup" in _error(records)  # one step, warmup 2


def test_the_framework_environment(tmp_path):
    (tmp_path / "p.py").write_text(
        "import os\nfor k in ('RANK','WORLD_SIZE','LOCAL_RANK','LOCAL_WORLD_SIZE','NODE_RANK',"
        "'MASTER_ADDR','MASTER_PORT'): print(k, os.environ.get(k))\n"
    )
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]}, rank=1)
    for line in ("RANK 1", "WORLD_SIZE 2", "LOCAL_RANK 1", "LOCAL_WORLD_SIZE 2", "NODE_RANK 0"):
        assert line in out
    assert "MASTER_ADDR 127.0.0.1" in out and "MASTER_PORT 1" in out


def test_a_program_that_stops_stepping_is_reported_hung_and_killed(tmp_path):
    """The marks feed the rank's watchdog: the hang record, exit 86, and the program ended."""
    (tmp_path / "p.py").write_text(
        "import os, time\nfrom ddlbench.workloads.steps import step_done\n"
        "open('pid', 'w').write(str(os.getpid()))\n"
        "for i in range(3):\n    time.sleep(0.05); step_done(samples=4)\ntime.sleep(600)\n"
    )
    limits = {"first_s": 20, "floor_s": 1.0, "factor": 2, "grace_s": 0}
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]}, watchdog=limits)
    assert rc == 86, out
    (hang,) = _of(records, "hang")
    assert hang["last_step"] == 2 and hang["limit_s"] == 1.0
    pid = int((tmp_path / "pid").read_text())
    for _ in range(50):  # killed with its parent (PR_SET_PDEATHSIG)
        if not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text():
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the program outlived its rank")


#: a step line whose number does not parse, then more output than a pipe holds, then steps
FLOOD_PROGRAM = """
for i in range(2):
    print(f"step {i} time 0.01 s", flush=True)
print("step 2 time . s", flush=True)
for i in range(3000):
    print("x" * 100)
for i in range(3, 7):
    print(f"step {i} time 0.01 s", flush=True)
print("the end", flush=True)
"""
#: a mark with a non-numeric loss, then more marks than the pipe holds
BAD_MARK_PROGRAM = """
import os, time
from ddlbench.workloads.steps import step_done
bad = b'{"t_start": 1, "t_end": 2, "samples": 4, "loss": "abc"}\\n'
os.write(int(os.environ["DDLBENCH_MARK_FD"]), bad)
for i in range(2000):
    time.sleep(0.0001)
    step_done(samples=4, loss=0.5)
print("all marked", flush=True)
"""


def test_a_step_line_without_a_number_is_skipped_and_the_output_still_read(tmp_path, validate_log):
    """The bad line is counted (stderr, summary), the later steps count, nothing blocks."""
    (tmp_path / "p.py").write_text(FLOOD_PROGRAM)
    measure = {"step": r"time ([0-9.]+) s", "unit": "s", "samples": 4}
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"], "measure": measure})
    assert rc == 0, out[-2000:]
    assert "the end" in out  # passed through to the end
    assert "ddlbench: rank 0: skipped a step line: could not convert string to float: '.'" in out
    validate_log(records)
    (summary,) = _of(records, "summary")
    assert summary["steps_measured"] == 4 and summary["rejected_reports"] == 1
    assert "1 of the program's reports were skipped" in out


def test_a_mark_with_a_non_numeric_loss_is_skipped_and_the_marks_still_read(tmp_path, validate_log):
    (tmp_path / "p.py").write_text(BAD_MARK_PROGRAM)
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "p.py"]})
    assert rc == 0, out[-2000:]
    assert "all marked" in out and "BrokenPipeError" not in out
    assert "skipped a mark: could not convert string to float: 'abc'" in out
    validate_log(records)
    (summary,) = _of(records, "summary")
    assert summary["steps_measured"] == 1998 and summary["rejected_reports"] == 1


def test_an_ok_run_without_rejected_reports_says_zero(tmp_path):
    (tmp_path / "prog.py").write_text(MARKS_PROGRAM)
    rc, records, out = _run(tmp_path, {"argv": [sys.executable, "prog.py"]})
    assert rc == 0 and _of(records, "summary")[0]["rejected_reports"] == 0, out
    assert "skipped" not in out
