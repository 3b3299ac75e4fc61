"""MLPerf ``:::MLLOG`` lines: their keys, ``run_stop`` at the target, and the official
compliance checker (``mlperf-logging`` from PyPI) on a real 2-rank convergence run's log."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from ddlbench.workloads.common import MLLog, normalize_run_config
from ddlbench.workloads.common.logger import RankLogger
from ddlbench.workloads.common.loop import Measurement, run_training
from ddlbench.workloads.common.schedule import LRSchedule


@pytest.fixture
def make_cfg(tmp_path, run_config):
    def _make(**overrides: Any) -> Dict[str, Any]:
        cfg = run_config("pytorch", **overrides)
        cfg["log_dir"] = str(tmp_path / "logs")
        return normalize_run_config(cfg)

    return _make


def _records(text: str) -> List[Dict[str, Any]]:
    return [
        json.loads(line[len(":::MLLOG ") :])
        for line in text.splitlines()
        if line.startswith(":::MLLOG ")
    ]


def _newest_ruleset(benchmark: str) -> Optional[str]:
    """The newest training ruleset of the installed checker with rules for ``benchmark``."""
    checker = pytest.importorskip("mlperf_logging.compliance_checker")
    root = Path(checker.__file__).parent
    found = [p.parent.name for p in root.glob(f"training_*/open_{benchmark}.yaml")]
    versions = sorted(
        (tuple(int(x) for x in name[len("training_") :].split(".")), name)
        for name in found
        if name[len("training_") :].replace(".", "").isdigit()
    )
    return ".".join(str(x) for x in versions[-1][0]) if versions else None


def _check(log: Path, ruleset: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            ruleset,
            "--log_output",
            str(log.with_suffix(".checker")),
            str(log),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_submission_keys_and_benchmark_name(make_cfg):
    buf = io.StringIO()
    cfg = make_cfg(
        model="resnet50",
        mllog={"org": "Uni Lab", "platform": "iris-gpu", "division": "closed", "status": "onprem"},
    )
    cfg["optimizer"].update(lr=0.01, weight_decay=0.0001, momentum=0.9)
    cfg["lr_schedule"].update(decay_epochs=[1, 2], decay_factor=0.1)
    MLLog(True, buf).run_config(cfg)
    values = {r["key"]: r["value"] for r in _records(buf.getvalue())}
    assert values["submission_benchmark"] == "resnet"
    assert values["submission_org"] == "Uni Lab" and values["submission_platform"] == "iris-gpu"
    assert values["submission_division"] == "closed" and values["submission_status"] == "onprem"
    assert values["cache_clear"] is False and values["gradient_accumulation_steps"] == 1
    assert values["sgd_opt_base_learning_rate"] == 0.01
    assert values["sgd_opt_end_learning_rate"] == pytest.approx(0.0001)
    assert values["sgd_opt_weight_decay"] == 0.0001 and values["sgd_opt_momentum"] == 0.9
    assert values["sgd_opt_learning_rate_decay_poly_power"] is None
    # a plain `mllog: true` is a research run in the open division
    buf = io.StringIO()
    MLLog(True, buf).run_config(make_cfg(model="lenet", mllog=True))
    values = {r["key"]: r["value"] for r in _records(buf.getvalue())}
    assert values["submission_division"] == "open" and values["submission_status"] == "research"
    assert values["submission_benchmark"] == "lenet" and "submission_org" in values


def test_run_stop_at_the_target_while_training_goes_on(tmp_path, make_cfg):
    cfg = make_cfg(mode="convergence", epochs=4, target_accuracy=0.5, mllog=True)
    accuracies = iter([0.3, 0.6, 0.7, 0.8])
    buf = io.StringIO()
    with RankLogger(str(tmp_path / "logs"), 0) as logger:
        measurement = Measurement(logger, "convergence", 0.5, MLLog(True, buf))
        run_training(
            cfg,
            measurement,
            lambda batch, lr: 1.0,
            LRSchedule.from_config(cfg, 2),
            batches=lambda epoch: [None, None],
            evaluate=lambda epoch: (next(accuracies), 1.0, 50),
        )
    recs = _records(buf.getvalue())
    keys = [r["key"] for r in recs]
    assert keys.count("run_stop") == 1 and keys[-1] == "run_stop"
    stop = recs[-1]
    assert stop["metadata"]["status"] == "success" and stop["metadata"]["epoch_num"] == 2
    assert [r["value"] for r in recs if r["key"] == "eval_accuracy"] == [0.3, 0.6]
    assert measurement.final_accuracy == 0.8  # training went on to the planned epochs
    samples = {r["key"]: r["value"] for r in recs if r["key"].endswith("_samples")}
    assert samples == {"train_samples": 2 * cfg["global_batch_size"], "eval_samples": 50}


def test_run_stop_aborted_when_the_target_is_missed(tmp_path, make_cfg):
    cfg = make_cfg(mode="convergence", epochs=2, target_accuracy=0.9, mllog=True)
    buf = io.StringIO()
    with RankLogger(str(tmp_path / "logs"), 0) as logger:
        measurement = Measurement(logger, "convergence", 0.9, MLLog(True, buf))
        run_training(
            cfg,
            measurement,
            lambda batch, lr: 1.0,
            LRSchedule.from_config(cfg, 1),
            batches=lambda epoch: [None],
            evaluate=lambda epoch: (0.2, 1.0, 10),
        )
    stops = [r for r in _records(buf.getvalue()) if r["key"] == "run_stop"]
    assert [s["metadata"]["status"] for s in stops] == ["aborted"]


@pytest.mark.frameworks
@pytest.mark.slow
def test_convergence_log_passes_the_mlperf_checker(launch_ranks, run_config, tmp_path):
    """ResNet-50 with SGD on the digits at 32 px, 2 ranks: the log passes the official checker
    in the open division, and in the closed division (the hyper-parameters are chosen to fit
    the closed ResNet rules, and the digits reach the rules' 75.9 % accuracy)."""
    ruleset = _newest_ruleset("resnet")
    assert ruleset is not None, "the installed mlperf-logging has no training ResNet rules"
    cfg = run_config(
        "pytorch",
        model="resnet50",
        image_size=32,
        mode="convergence",
        epochs=5,
        target_accuracy=0.76,
        batch_size=32,
        optimizer={"lr": 0.01, "base_lr": 0.001, "weight_decay": 0.0001, "momentum": 0.9},
        lr_schedule={"warmup_epochs": 1, "decay_epochs": [4], "decay_factor": 0.01},
        mllog={"org": "ddlbench tests", "platform": "cpu-2rank", "division": "closed"},
    )
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=500)
    assert result.returncodes == [0, 0], result.describe()
    lines = [ln for ln in result.stdout[0].splitlines() if ln.startswith(":::MLLOG")]
    accuracy = [json.loads(ln[9:])["value"] for ln in lines if '"eval_accuracy"' in ln]
    assert max(accuracy) >= 0.759, accuracy
    closed = tmp_path / "closed.log"
    closed.write_text("\n".join(lines) + "\n")
    proc = _check(closed, ruleset)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )
    open_log = tmp_path / "open.log"
    open_log.write_text(closed.read_text().replace('"value": "closed"', '"value": "open"'))
    proc = _check(open_log, ruleset)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )


def test_spec_mllog_reaches_run_json(tmp_path):
    """``mllog: true`` and the mapping form both validate; run.json carries the metadata with
    the profile's name as the default platform, and ``false`` stays ``false``."""
    from ddlbench.plan import plan_runs
    from ddlbench.render.campaign import run_config
    from ddlbench.spec.load import load_profile, load_spec_text

    profile = load_profile("local").value
    base = "name: m\nmodel: resnet50\nframeworks: [pytorch]\nscale: {points: [1x1]}\n"
    for extra, want in (
        ("mllog: false\n", False),
        ("mllog: true\n", {"org": "unspecified", "platform": "local", "division": "open",
                           "status": "research"}),
        ("mllog: {org: Lab, division: closed}\n", {"org": "Lab", "platform": "local",
                                                   "division": "closed", "status": "research"}),
    ):  # fmt: skip
        spec = load_spec_text(base + extra).value
        plan = plan_runs(spec, profile)
        assert run_config(plan.runs[0], plan, "m", tmp_path)["mllog"] == want
    from ddlbench.errors import InputError

    # an unknown division is an input error at its line, with the allowed values
    wanted = r"<spec>:5:\d+: mllog.division: 'semi' is not one of open"
    with pytest.raises(InputError, match=wanted):
        load_spec_text(base + "mllog: {division: semi}\n")
