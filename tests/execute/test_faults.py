"""Faults with a clear answer: a damaged store, a bad manifest, a full disk, an unreachable
controller, a killed rank, and infrastructure failures that are resubmitted (docs/failures.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddlbench.campaign.manifest import load_campaign
from ddlbench.cli import main
from ddlbench.execute.store import CampaignStore
from tests.support.campaigns import make_campaign


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _finished_campaign(tmp_path: Path) -> Path:
    cdir = make_campaign(tmp_path, "dmg", [{"run_id": "a", "body": ["true"]}])
    with CampaignStore.open(cdir) as store:
        store.sync_runs(load_campaign(cdir).runs)
        store.new_attempt("a", "local", "COMPLETED", exit_code=0)
    return cdir


@pytest.mark.parametrize("damage", ["garbage", "half"])
def test_damaged_store_exits_2_naming_the_file(tmp_path, damage):
    cdir = _finished_campaign(tmp_path)
    store = cdir / "state.sqlite"
    for side in ("state.sqlite-wal", "state.sqlite-shm"):
        (cdir / side).unlink(missing_ok=True)
    data = store.read_bytes()
    if damage == "garbage":
        store.write_bytes(b"\x00garbage, not a database\n" * 200)
    else:
        store.write_bytes(data[: len(data) // 2])
    before = store.read_bytes()
    for cmd in ("status", "wait"):
        res = _cli(cmd, "dmg", "--results", tmp_path)
        assert res.exit_code == 2, res.output
        assert f"{store}: the campaign store is damaged" in res.output
        assert "internal error" not in res.output and "Traceback" not in res.output
        assert "ddlbench recover dmg" in res.output
    assert store.read_bytes() == before  # neither repaired nor replaced behind the user's back


def test_store_from_older_ddlbench_gains_new_columns(tmp_path):
    import sqlite3

    path = tmp_path / "state.sqlite"
    with CampaignStore(path) as store:
        store.conn.execute("ALTER TABLE attempts DROP COLUMN cause")
    with CampaignStore(path) as store:
        store.conn.execute("INSERT INTO runs VALUES('x', 0, 'x.sh', 'runs/x', 1, 1, 0)")
        a = store.new_attempt("x", "slurm", "FAILED", cause="task 1 on n2: Killed")
        assert store.get_attempt(a.id).cause == "task 1 on n2: Killed"
    cols = {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(attempts)")}
    assert {"cause", "failed_task", "failed_signal", "source", "slurm_state"} <= cols


def test_manifest_entry_without_run_id_exits_2_naming_the_file(tmp_path):
    cdir = _finished_campaign(tmp_path)
    manifest = json.loads((cdir / "campaign.json").read_text())
    del manifest["runs"][0]["run_id"]
    (cdir / "campaign.json").write_text(json.dumps(manifest))
    res = _cli("status", "dmg", "--results", tmp_path)
    assert res.exit_code == 2, res.output
    assert f"{cdir / 'campaign.json'}: runs[0] has no 'run_id'" in res.output
    assert "internal error" not in res.output


# -- the infrastructure-failure retry policy ------------------------------------------------


def _store_with(tmp_path, ended):
    from ddlbench.execute.store import CampaignStore

    cdir = make_campaign(tmp_path, "infra", [{"run_id": r, "body": ["true"]} for r in ended])
    store = CampaignStore.open(cdir)
    store.sync_runs(load_campaign(cdir).runs)
    for run_id, history in ended.items():
        for state, word in history:
            store.new_attempt(run_id, "slurm", state, slurm_state=word, job_id="1")
    return store


def test_infra_policy_resubmits_only_infrastructure_failures(tmp_path):
    from ddlbench.execute.infra_retry import due, is_infra_failure

    ended = {
        "node": [("NODE_FAIL", "NODE_FAIL")],
        "boot": [("NODE_FAIL", "BOOT_FAIL")],
        "preempted": [("CANCELLED", "PREEMPTED")],
        "user_cancel": [("CANCELLED", "CANCELLED")],
        "failed": [("FAILED", "FAILED")],
        "timeout": [("TIMEOUT", "TIMEOUT")],
        "oom": [("OUT_OF_MEMORY", "OUT_OF_MEMORY")],
        "ok_after_node_fail": [("NODE_FAIL", "NODE_FAIL"), ("COMPLETED", "COMPLETED")],
        "twice": [("NODE_FAIL", "NODE_FAIL"), ("NODE_FAIL", "NODE_FAIL")],
        "thrice": [("NODE_FAIL", "NODE_FAIL")] * 3,
        "running": [("RUNNING", "RUNNING")],
    }
    with _store_with(tmp_path, ended) as store:
        latest = store.latest()
        infra = {r for r, a in latest.items() if is_infra_failure(a)}
        assert infra == {"node", "boot", "preempted", "twice", "thrice"}
        assert {a.run_id for a in due(store, 2)} == {"node", "boot", "preempted", "twice"}
        assert {a.run_id for a in due(store, 1)} == {"node", "boot", "preempted"}
        assert due(store, 0) == []


def test_infra_claim_is_taken_once(tmp_path):
    from ddlbench.execute.infra_retry import claim as _claim

    with _store_with(tmp_path, {"node": [("NODE_FAIL", "NODE_FAIL")]}) as store:
        failed = store.latest()["node"]
        first = _claim(store, failed, 2)
        assert first is not None and first.number == 2 and first.state == "SUBMITTING"
        assert "ended NODE_FAIL" in first.message and "1 of at most 2" in first.message
        assert _claim(store, failed, 2) is None  # a second poll finds it taken
        assert [a.number for a in store.attempts("node")] == [1, 2]


def test_infra_retries_profile_setting_is_validated():
    from pydantic import ValidationError

    from ddlbench.spec.cluster import SlurmSettings

    assert SlurmSettings().infra_retries == 2
    assert SlurmSettings(infra_retries=0).infra_retries == 0
    with pytest.raises(ValidationError):
        SlurmSettings(infra_retries=-1)


# -- on a private real Slurm cluster (its controller is paused and its nodes set DOWN) -------


@pytest.fixture(scope="module")
def own_slurm():
    """A cluster of scripts/local-slurm.sh of these tests' own: faults never reach others'."""
    import shutil
    import subprocess
    import tempfile

    from tests.support.repo import ROOT

    if shutil.which("slurmctld") is None and not os.environ.get("CI"):
        pytest.skip("Slurm is not installed (scripts/local-slurm.sh up installs it)")
    script = str(ROOT / "scripts" / "local-slurm.sh")
    scratch = tempfile.mkdtemp(prefix="ddlbench-faults-", dir="/tmp")
    os.chmod(scratch, 0o755)  # munged wants its socket folder reachable by all
    env = dict(os.environ, DDLBENCH_SLURM_DIR=f"{scratch}/slurm", DDLBENCH_SLURM_ACCOUNTING="0")
    up = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=600)
    if up.returncode != 0:
        pytest.fail(f"local-slurm.sh up failed:\n{up.stdout}\n{up.stderr}")
    exports = subprocess.run([script, "env"], env=env, capture_output=True, text=True).stdout
    cluster = dict(
        line[len("export ") :].split("=", 1) for line in exports.splitlines() if "=" in line
    )
    saved = {k: os.environ.get(k) for k in cluster}
    os.environ.update(cluster)
    yield cluster
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    subprocess.run([script, "down", "--purge"], env=env, capture_output=True, timeout=300)
    shutil.rmtree(scratch, ignore_errors=True)


def _quiet(_msg: str) -> None:
    pass


def _scontrol(*args: str) -> None:
    import subprocess

    subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)


@pytest.mark.slurm
def test_node_down_mid_run_is_resubmitted_as_a_new_attempt(own_slurm, tmp_path):
    from ddlbench.execute import campaign_status, submit_campaign

    body = ["if [ ! -e ../first-went ]; then touch ../first-went; sleep 120; fi", "echo done"]
    cdir = make_campaign(
        tmp_path,
        "nodedown",
        [{"run_id": "victim", "body": body, "extra": ["--no-requeue"]}],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "no", "infra_retries": 1},
    )
    submit_campaign(cdir, echo=_quiet)

    said = _node_down_under_first_run(cdir, wait_timeout=120)
    with CampaignStore.open(cdir) as store:
        attempts = store.attempts("victim")
    assert [(a.state, a.slurm_state) for a in attempts] == [
        ("NODE_FAIL", "NODE_FAIL"),
        ("COMPLETED", "COMPLETED"),
    ]
    assert attempts[0].job_id != attempts[1].job_id
    assert "ended NODE_FAIL" in attempts[1].message
    # the first attempt's cause says the node went down, and which: the job's only node (this
    # cluster's ReturnToService=2 has it idle again by the poll, so sinfo cannot tell)
    assert attempts[0].cause == "node n1 went down (Slurm ended the job NODE_FAIL)"
    assert attempts[0].cause_source == "slurm"
    assert any("resubmitted as job" in line for line in said)
    row = campaign_status(cdir, echo=_quiet)["runs"][0]
    assert row["attempts"] == 2 and row["state"] == "COMPLETED"


def test_node_failure_cause_says_the_node_went_down():
    """A NODE_FAIL whose srun line names a rank that exited 1: the node's end comes first."""
    from ddlbench.execute.task_failure import bad_nodes, node_failure_cause, parse_srun_failures

    srun = parse_srun_failures("srun: error: n2: task 1: Exited with exit code 1\n")[0]
    down = bad_nodes("n1 idle\nn1 idle\nn2 down*\nn3 drained\nn4 mixed\n")
    assert down == ["n2", "n3"]
    assert node_failure_cause("NODE_FAIL", srun, "n[1-2]", ["n2"]) == (
        "node n2 went down (Slurm ended the job NODE_FAIL); then task 1 on n2: "
        "Exited with exit code 1"
    )
    assert node_failure_cause("BOOT_FAIL", None, "n[1-2]") == (
        "a node of n[1-2] failed to boot (Slurm ended the job BOOT_FAIL)"
    )
    assert node_failure_cause("NODE_FAIL", None, "n7").startswith("node n7 went down")
    assert node_failure_cause("FAILED", srun, "n[1-2]", ["n2"]) is None


@pytest.mark.slurm
def test_resubmitted_serial_run_waits_for_the_newest_live_job(own_slurm, tmp_path):
    """--serial holds across an infrastructure resubmission: the new attempt is chained
    (afterany) after the campaign's newest live job, so no two runs ever overlap."""
    from ddlbench.execute import campaign_status, submit_campaign

    body = ["if [ ! -e ../first-went ]; then touch ../first-went; sleep 120; fi", "echo done"]
    cdir = make_campaign(
        tmp_path,
        "serialdown",
        [
            {"run_id": "victim", "body": body, "extra": ["--no-requeue"]},
            {"run_id": "next", "body": ["sleep 15"]},
        ],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "no", "infra_retries": 1},
    )
    submit_campaign(cdir, serial=True, echo=_quiet)

    said = _node_down_under_first_run(cdir, wait_timeout=180)
    with CampaignStore.open(cdir) as store:
        first, again = store.attempts("victim")
        (nxt,) = store.attempts("next")
    assert (first.state, first.serial, first.depends_on) == ("NODE_FAIL", 1, None)
    assert nxt.depends_on == first.job_id and nxt.serial == 1
    assert again.state == "COMPLETED" and again.serial == 1
    assert again.depends_on == nxt.job_id  # the newest live job when it was resubmitted
    assert again.start_time >= nxt.end_time  # Slurm kept them apart
    assert any(f"(after job {nxt.job_id})" in line for line in said)
    # every attempt's facts where the user looks: status --json and the report's summary
    row = campaign_status(cdir, echo=_quiet)["runs"][0]
    assert [(h["number"], h["job_id"], h["state"]) for h in row["history"]] == [
        (1, first.job_id, "NODE_FAIL"),
        (2, again.job_id, "COMPLETED"),
    ]
    assert row["history"][1]["exit_code"] == 0 and row["history"][1]["depends_on"] == nxt.job_id
    from ddlbench.campaign.restarts import attempts_sentence

    # the first attempt's cause says which node went down (docs/failures.md)
    assert (
        f"victim (attempt 1: job {first.job_id} NODE_FAIL, node n1 went down (Slurm ended the "
        f"job NODE_FAIL); attempt 2: job {again.job_id} COMPLETED, exit 0)"
    ) in attempts_sentence(cdir)


def _slurmctld_pid(cluster) -> int:
    return int(Path(cluster["DDLBENCH_SLURM_DIR"], "run", "slurmctld.pid").read_text().strip())


def _ddlbench(*args, env=None, **kw):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "ddlbench", *[str(a) for a in args]]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, **kw)


@pytest.mark.slurm
@pytest.mark.slow
def test_wait_through_a_controller_outage(own_slurm, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from ddlbench.execute import campaign_status, submit_campaign
    from tests.support.repo import wait_for

    results = tmp_path / "results"
    cdir = make_campaign(
        results,
        "outage",
        [{"run_id": "a", "body": ["sleep 8"]}],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "no"},
    )
    submit_campaign(cdir, echo=_quiet)
    wait_for(lambda: campaign_status(cdir, echo=_quiet)["runs"][0]["state"] == "RUNNING", 60, 0.3)
    # the clients give up on a silent controller after 2 s instead of 10
    conf = (
        Path(own_slurm["SLURM_CONF"]).read_text().replace("MessageTimeout=10", "MessageTimeout=2")
    )
    (tmp_path / "slurm.conf").write_text(conf)
    env = dict(os.environ, SLURM_CONF=str(tmp_path / "slurm.conf"))
    pid = _slurmctld_pid(own_slurm)
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        res = _ddlbench("wait", "outage", "--results", results, "--patience", "3", env=env)
        assert res.returncode == 75, res.stderr
        assert "scheduler unreachable" in res.stderr and "--patience 3" in res.stderr
        assert time.monotonic() - t0 < 60
        status = _ddlbench("status", "outage", "--results", results, env=env)
        assert status.returncode == 75 and "did not answer" in status.stderr
        # an outage shorter than the patience: wait rides it out and reports the end
        cmd = [sys.executable, "-m", "ddlbench", "wait", "outage", "--results", str(results)]
        proc = subprocess.Popen(
            [*cmd, "--patience", "120"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(12)  # python start-up, then polls that time out after 2 s
    finally:
        os.kill(pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "scheduler unreachable" in err and "answers again" in err
    assert "1 COMPLETED" in out


@pytest.mark.slurm
def test_killed_rank_is_named_with_its_signal(own_slurm, tmp_path):
    import json as _json

    from ddlbench.execute import submit_campaign, wait_campaign

    results = tmp_path / "results"
    kill_rank_1 = (
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "
        "'if [ \"$SLURM_PROCID\" = 1 ]; then sleep 1; kill -9 $$; fi; sleep 60'"
    )
    cdir = make_campaign(
        results,
        "killed",
        [{"run_id": "two", "nodes": 2, "body": [kill_rank_1]}],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "no"},
    )
    submit_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    with CampaignStore.open(cdir) as store:
        a = store.attempts("two")[0]
    assert a.state == "FAILED"
    assert (a.failed_task, a.failed_signal) == (1, 9)
    assert a.cause == "task 1 on n2: Killed (SIGKILL)"
    res = _ddlbench("status", "killed", "--results", results, "--json")
    row = _json.loads(res.stdout)["runs"][0]
    assert row["cause"] == a.cause and row["failed_task"] == 1 and row["failed_signal"] == 9
    res = _ddlbench("wait", "killed", "--results", results)
    assert res.returncode == 1 and "two: FAILED (task 1 on n2: Killed (SIGKILL))" in res.stdout


# -- a full disk: a small tmpfs ----------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size)``: a small tmpfs at ``tmp_path/disk`` (root only), unmounted afterwards."""
    import subprocess

    disk = tmp_path / "disk"
    mounted = []

    def mount(size: str = "3m") -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a small tmpfs needs root")
        disk.mkdir()
        res = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
            capture_output=True,
        )
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
        mounted.append(disk)
        return disk

    yield mount
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.fixture
def small_disk(tmpfs):
    """A 3 MB tmpfs."""
    return tmpfs("3m")


def _fill(disk: Path, leave: int = 0) -> Path:
    """Fill the disk, then give back ``leave`` bytes."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:  # unbuffered: closing has nothing to flush
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass
    size = filler.stat().st_size
    os.truncate(filler, max(0, size - leave))
    return filler


def _assert_disk_full_said_once(res, folder_under: Path) -> None:
    err = res.output if hasattr(res, "output") else res.stderr
    lines = [ln for ln in err.splitlines() if "no space left" in ln]
    assert len(lines) == 1, err
    assert f"no space left on the disk that holds {folder_under}" in lines[0]
    assert "internal error" not in err and "Traceback" not in err
    assert len(err) < 1000


def test_disk_full_at_submit(small_disk):
    from tests.support.repo import ROOT

    _fill(small_disk, leave=96 * 1024)
    results = small_disk / "results"
    res = _cli(
        "submit",
        ROOT / "configs" / "quickstart.yaml",
        "--cluster",
        "local",
        "--results",
        results,
        "--campaign",
        "q",
        "--dry-run",
    )
    assert res.exit_code == 1, res.output
    _assert_disk_full_said_once(res, results)
    assert not list(small_disk.rglob("*.tmp")), list(small_disk.rglob("*"))


def test_disk_full_mid_run_fails_the_run_naming_the_folder(small_disk):
    import threading
    import time

    from ddlbench.execute import campaign_status, submit_campaign, wait_campaign

    results = small_disk / "results"
    fill = "head -c 8000000 /dev/zero > ../fill"
    cdir = make_campaign(results, "full", [{"run_id": "writer", "body": [fill]}])
    submit_campaign(cdir, echo=_quiet)
    # a user frees the space a few seconds later: how the run ended is recorded then at the latest
    fill_file = cdir / "runs" / "fill"
    threading.Timer(6.0, lambda: fill_file.unlink(missing_ok=True)).start()
    assert wait_campaign(cdir, timeout=120, echo=_quiet) == 1
    row = campaign_status(cdir, echo=_quiet)["runs"][0]
    assert row["state"] == "FAILED", row
    assert row["reason"] == (
        f"no space left on the disk that holds {cdir / 'runs' / 'writer'} while the job ran"
    )
    time.sleep(0.1)


def _synth_campaign(root: Path) -> Path:
    try:
        from tests.support.synth import demo_campaign
    except ImportError:  # moved to the tests' support package
        from tests.support.synth import demo_campaign  # type: ignore[no-redef]
    return demo_campaign(root, "demo")


@pytest.mark.parametrize("command", ["collect", "report"])
def test_disk_full_in_collect_and_report_leaves_no_partial_file(tmpfs, command):
    small_disk = tmpfs("64m")
    camp = _synth_campaign(small_disk)
    _fill(small_disk, leave=8 * 1024)
    res = _cli(command, "demo", "--results", small_disk)
    assert res.exit_code == 1, res.output
    _assert_disk_full_said_once(res, camp)
    data = camp / "data"
    left = sorted(p.name for p in data.iterdir()) if data.exists() else []
    assert "steps.parquet" not in left and not [n for n in left if n.endswith(".tmp")], left


# -- the first failing task ------------------------------------------------------------------


def test_srun_failure_lines_name_the_first_real_failure():
    from ddlbench.execute.task_failure import first_failure, parse_srun_failures

    text = "\n".join(
        [
            "ddlbench: some output",
            "srun: error: n1: task 0: Terminated",
            "srun: error: n2: task 1: Segmentation fault (core dumped)",
            "srun: Force Terminated StepId=7.0",
            "srun: error: n1: tasks 2-3: Exited with exit code 3",
            "srun: error: n1: task 4: Killed by signal 6",
            "srun: error: n1: task 5: Unable to start",
        ]
    )
    found = parse_srun_failures(text)
    assert [(f.task, f.signal, f.exit_code) for f in found] == [
        (0, 15, None),
        (1, 11, None),
        (2, None, 3),
        (4, 6, None),
    ]
    first = first_failure(found)
    assert first.describe() == "task 1 on n2: Segmentation fault (core dumped) (SIGSEGV)"
    only_term = parse_srun_failures("srun: error: n1: task 0: Terminated")
    assert first_failure(only_term).describe() == "task 0 on n1: Terminated (SIGTERM)"
    assert first_failure([]) is None


def test_killed_rank_on_the_local_executor(tmp_path):
    from ddlbench.execute import campaign_status, submit_campaign, wait_campaign

    kill_rank_1 = (
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c "
        "'if [ \"$SLURM_PROCID\" = 1 ]; then kill -9 $$; fi; sleep 30'"
    )
    cdir = make_campaign(tmp_path, "lk", [{"run_id": "two", "nodes": 2, "body": [kill_rank_1]}])
    submit_campaign(cdir, echo=_quiet)
    assert wait_campaign(cdir, timeout=60, echo=_quiet) == 1
    row = campaign_status(cdir, echo=_quiet)["runs"][0]
    assert row["state"] == "FAILED"
    assert (row["failed_task"], row["failed_signal"]) == (1, 9)
    assert row["reason"] == "task 1 on node2: Killed by signal 9 (SIGKILL)"


def test_report_data_names_the_killed_task(tmp_path):
    from ddlbench.collect import collect_campaign
    from ddlbench.collect.states import store_states

    camp = _synth_campaign(tmp_path)
    ids = [r["run_id"] for r in json.loads((camp / "campaign.json").read_text())["runs"]]
    run_id = next(i for i in ids if len(list((camp / "runs" / i).rglob("rank-*.jsonl"))) > 1)
    for log in sorted((camp / "runs" / run_id).rglob("rank-*.jsonl"))[1:]:
        log.unlink()  # the other ranks were killed before they wrote anything
    # the synthetic campaign has run folders but no store: build one on purpose
    with CampaignStore.open(camp, rebuild=True) as store:
        store.conn.execute("INSERT INTO runs VALUES(?, 0, 'x.sh', 'x', 1, 1, 0)", (run_id,))
        cause = "task 1 on n2: Killed (SIGKILL)"
        store.new_attempt(run_id, "slurm", "FAILED", job_id="5", exit_code=143, cause=cause)
    runs = collect_campaign(camp, write=False, run_states=store_states).runs.set_index("run_id")
    row = runs.loc[run_id]
    assert (row["status"], row["slurm_state"], row["exit_code"]) == ("failed", "FAILED", 143)
    assert row["error_message"] == cause


def _node_down_under_first_run(cdir, wait_timeout: float) -> list:
    """Set the node of the campaign's first run DOWN once its body has started (it touches
    ``runs/first-went``), wait for the campaign (exit 0 asserted) and resume the node;
    returns the lines ``wait`` said."""
    from ddlbench.execute import campaign_status, wait_campaign
    from tests.support.repo import wait_for

    def running():
        row = campaign_status(cdir, echo=_quiet)["runs"][0]
        return row["nodelist"] if row["state"] == "RUNNING" else None

    node = wait_for(running, timeout=60, interval=0.5)
    wait_for(lambda: (cdir / "runs" / "first-went").exists(), timeout=30)
    _scontrol("update", f"nodename={node}", "state=down", "reason=ddlbench-test")
    try:
        said: list = []
        assert wait_campaign(cdir, timeout=wait_timeout, echo=said.append) == 0
    finally:
        _scontrol("update", f"nodename={node}", "state=resume")
    return said


def test_store_on_a_full_disk_says_so_and_loses_nothing(tmpfs):
    """SQLite reports a full tmpfs as "disk I/O error" (creating the -shm index, growing the
    log) as often as "database or disk is full": both are a full disk, named with its folder
    and what to do, exit 1. Once space is freed, ``submit --resume`` submits every run."""
    from ddlbench.execute.store import CampaignStore

    disk = tmpfs("400k")
    cdir = make_campaign(disk, "full", [{"run_id": f"r{i}", "body": ["true"]} for i in range(2)])
    filler = _fill(disk, leave=8 * 1024)
    for args in (("submit", "--resume", "full"), ("wait", "full", "--timeout", "30")):
        res = _cli(*args, "--results", disk)
        assert res.exit_code == 1, res.output
        _assert_disk_full_said_once(res, cdir)
        assert "campaign store state.sqlite" in res.output, res.output
        assert "`ddlbench submit --resume full`" in res.output, res.output
    filler.unlink()
    res = _cli("submit", "--resume", "full", "--results", disk)
    assert res.exit_code == 0, res.output
    assert _cli("wait", "full", "--results", disk, "--timeout", "60").exit_code == 0
    with CampaignStore.open(cdir) as store:
        assert {a.state for a in store.latest().values()} == {"COMPLETED"}


def test_store_api_on_a_full_disk_raises_disk_full_and_stays_whole(tmpfs):
    """A write on a full disk raises DiskFull naming the folder; what was committed before is
    still there once space is freed. (A disk of its own: no local runner of another campaign
    writes to it meanwhile.)"""
    from ddlbench.diskfull import DiskFull
    from ddlbench.execute.store import CampaignStore

    disk = tmpfs("400k")
    cdir = make_campaign(disk, "api", [{"run_id": "r0", "body": ["true"]}])
    with CampaignStore.open(cdir) as store:
        store.set_meta("before", "kept")
        filler = _fill(disk)
        with pytest.raises(DiskFull, match=f"no space left on the disk that holds {cdir} "):
            for i in range(200):
                store.set_meta(f"k{i}", "x" * 4096)
    filler.unlink()
    with CampaignStore.open(cdir) as store:
        assert store.get_meta("before") == "kept"


def test_full_disk_at_the_submit_lock_names_the_campaign_folder(tmpfs):
    """The lock's pid is written through a bare file descriptor, whose error names no file:
    the message names the campaign folder, not the current directory, and the lock is free."""
    from ddlbench.campaign.paths import CampaignPaths
    from ddlbench.execute.base import FileLock

    disk = tmpfs("400k")
    cdir = make_campaign(disk, "lock", [{"run_id": "r0", "body": ["true"]}])
    lock_path = CampaignPaths(cdir).submit_lock
    lock_path.unlink(missing_ok=True)
    filler = _fill(disk)
    lock = FileLock(lock_path)
    with pytest.raises(OSError) as info:
        lock.acquire()
    assert info.value.filename == str(lock_path) and lock.fd is None
    res = _cli("submit", "--resume", "lock", "--results", disk)
    assert res.exit_code == 1, res.output
    _assert_disk_full_said_once(res, cdir)
    filler.unlink()
    assert lock.acquire() and lock.holder() == os.getpid()
    lock.release()


def test_wait_patience_bounds_a_poll_whose_commands_hang(tmp_path):
    """A controller that accepts connections and never answers: every Slurm command hangs
    until its own timeout. ``wait --patience 4`` gives up after about 4 s, not after the
    commands' timeouts and retries, and the outage it reports counts from the first poll."""
    import subprocess
    import sys
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 4242\n")
    hang = (
        f"#!/bin/sh\n[ -e {tmp_path}/down ] || exit 0\nsleep 60 &\nwait $!\n"
        'echo "$0: error: Unable to contact slurm controller (connect failure)" >&2\nexit 1\n'
    )
    for tool in ("squeue", "sacct", "scontrol", "sinfo"):
        (bin_dir / tool).write_text(hang)
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    results = tmp_path / "results"
    cdir = make_campaign(
        results,
        "hung",
        [{"run_id": "a", "body": ["true"]}],
        scheduler="slurm",
        slurm={"partition": "debug", "sacct": "no"},
    )
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DDLBENCH_SLURM_BACKOFF="0.2")
    sub = _ddlbench("submit", "--resume", "hung", "--results", results, env=env)
    assert sub.returncode == 0, sub.stderr
    (tmp_path / "down").touch()
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "ddlbench", "wait", "hung", "--results", str(results)]
    res = subprocess.run(
        [*cmd, "--patience", "4"], env=env, capture_output=True, text=True, timeout=120
    )
    took = time.monotonic() - t0
    assert res.returncode == 75, res.stderr
    assert took < 4 + 8, (took, res.stderr)  # python start-up and the last kill, not 120 s
    said = [ln for ln in res.stderr.splitlines() if "unreachable for" in ln]
    assert len(said) == 1 and "--patience 4" in said[0], res.stderr
    reported = float(said[0].split("unreachable for ")[1].split(" s")[0])
    assert 4 <= reported <= took, (reported, took)
    assert (cdir / "campaign.json").is_file()


def test_a_local_run_waiting_for_disk_space_says_why(tmpfs):
    """The runner cannot record the next run's start on a full disk: the run stays PENDING,
    and status says it waits for space, naming the folder; once space is freed it runs."""
    from ddlbench.execute import campaign_status, cancel_campaign, submit_campaign
    from tests.support.repo import wait_for

    disk = tmpfs("2m")
    cdir = make_campaign(
        disk,
        "space",
        [{"run_id": "first", "body": ["sleep 4"]}, {"run_id": "second", "body": ["true"]}],
    )
    submit_campaign(cdir, echo=_quiet)
    states = lambda: {r["run_id"]: r for r in campaign_status(cdir, echo=_quiet)["runs"]}  # noqa: E731
    wait_for(lambda: states()["first"]["state"] == "RUNNING", 60, 0.2)
    filler = _fill(disk)
    try:
        second = states()["second"]
        assert second["state"] == "PENDING"
        assert second["reason"] == (
            f"waiting for disk space: no space left on the disk that holds {cdir}; "
            "the runner starts it once space is freed"
        )
        res = _cli("status", "space", "--results", disk)
        assert "waiting for disk space" in res.output, res.output
    finally:
        filler.unlink()
    wait_for(lambda: states()["second"]["state"] == "COMPLETED", 90, 0.5)
    cancel_campaign(cdir, echo=_quiet)
