"""The pre-flight health checks against recorded NVML answers (no GPU here)."""

from __future__ import annotations

import json

from ddlbench.workloads.node import health
from ddlbench.workloads.node.health import gpu_checks, recorded_nvml, summary

#: answers recorded from a healthy A100 node (idle, NVLink readable, no errors)
HEALTHY = {
    "ecc_volatile": 0,
    "ecc_aggregate": 0,
    "retired_pending": 0,
    "remapped": (0, 0, 0, 0),
    "reasons": 0x1,  # GPU idle
    "sm": 210,
    "sm_max": 1410,
    "temp": 34,
    "nvlink": {0: {}, 1: {}, 2: {}},
}


def _by(checks, name, gpu=None):
    return [c for c in checks if c["check"] == name and (gpu is None or c.get("gpu") == gpu)]


def test_healthy_node_passes():
    nvml = recorded_nvml([HEALTHY] * 4)
    out = summary(gpu_checks(nvml, [0, 1, 2, 3], 4))
    assert out["status"] == "ok" and out["failed"] == []
    assert _by(out["checks"], "gpu_count")[0]["detail"] == "4 GPU(s), the profile expects 4"


def test_fewer_gpus_than_the_profile_fails():
    nvml = recorded_nvml([HEALTHY] * 3)
    out = summary(gpu_checks(nvml, [0, 1, 2], 4))
    assert out["status"] == "fail"
    assert out["failed"] == ["gpu_count: 3 GPU(s), the profile expects 4"]


def test_each_bad_answer_is_caught():
    bad = [
        dict(HEALTHY, ecc_volatile=3),
        dict(HEALTHY, ecc_aggregate=5),
        dict(HEALTHY, retired_pending=1),
        dict(HEALTHY, remapped=(0, 2, 0, 1)),
        dict(HEALTHY, reasons=0x1 | health.HW_SLOWDOWN),
        dict(HEALTHY, reasons=health.SW_POWER_CAP),
        dict(HEALTHY, temp=90),
        dict(HEALTHY, temp=75),
        dict(HEALTHY, nvlink={0: {"replay": 4}, 1: {}}),
    ]
    checks = gpu_checks(recorded_nvml(bad), list(range(len(bad))), len(bad))
    status = {(c["check"], c.get("gpu")): c["status"] for c in checks}
    assert status[("ecc", 0)] == "fail" and status[("ecc", 1)] == "warn"
    assert status[("retired_pages", 2)] == "fail" and status[("retired_pages", 3)] == "fail"
    assert "failed" in _by(checks, "retired_pages", 3)[0]["detail"]
    assert status[("clocks", 4)] == "fail" and status[("clocks", 5)] == "warn"
    assert "hw_slowdown" in _by(checks, "clocks", 4)[0]["detail"]
    assert status[("temperature", 6)] == "fail" and status[("temperature", 7)] == "warn"
    assert (
        status[("nvlink", 8)] == "warn"
        and "link0.replay=4" in _by(checks, "nvlink", 8)[0]["detail"]
    )
    assert status[("ecc", 2)] == "ok"


def test_unreadable_answers_are_skipped_with_their_reason():
    out = gpu_checks(recorded_nvml([{}]), [0], 1)
    assert {c["check"]: c["status"] for c in out} == {
        "gpu_count": "ok",
        "ecc": "skipped",
        "retired_pages": "skipped",
        "clocks": "skipped",
        "temperature": "skipped",
        "nvlink": "skipped",
    }


def test_cpu_profile_skips_every_check(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"device": "cpu", "tasks_per_node": 2}))
    out = health.node_health("n1", {"DDLBENCH_RUN_DIR": str(tmp_path)})
    assert out["status"] == "skipped" and len(out["checks"]) == len(health.CHECKS)
    assert all(c["detail"] == "CPU profile: no GPU to check" for c in out["checks"])


def test_test_hook_answers_with_a_bad_node(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"device": "cpu", "tasks_per_node": 2}))
    env = {"DDLBENCH_RUN_DIR": str(tmp_path), "DDLBENCH_TEST_BAD_NODE": "n1"}
    out = health.node_health("n1", env)
    assert out["status"] == "fail" and out["test_hook"] == "DDLBENCH_TEST_BAD_NODE"
    assert out["failed"][0].startswith("gpu_count: 3 GPU(s)")
    assert health.node_health("n2", env)["status"] == "skipped"
