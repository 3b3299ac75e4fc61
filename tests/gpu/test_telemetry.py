"""GPU telemetry and pre-flight without a GPU: the "no GPU" path, the CPU-load part, the
energy arithmetic on synthetic samples, and the readers the collector uses."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ddlbench.analyse.energy import NodeSeries, joules_per_sample, window_energy
from ddlbench.collect.gpu_columns import preflight_fields, telemetry_fields
from ddlbench.collect.telemetry import read_preflight, read_run_telemetry
from ddlbench.workloads.node import preflight


def run_module(module, *args, env=None):
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60, env=env
    )


def test_sampler_without_gpu_says_so_once_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURMD_NODENAME", "n7")
    proc = run_module(
        "ddlbench.workloads.node.gpu_sampler", "--out", str(tmp_path), "--duration", "5"
    )
    assert proc.returncode == 0
    assert proc.stderr.count("no GPU telemetry on n7") == 1 and "the run goes on" in proc.stderr
    (rec,) = [json.loads(x) for x in (tmp_path / "n7.jsonl").read_text().splitlines()]
    assert rec["type"] == "unavailable" and rec["reason"]


def test_sampler_and_preflight_with_nvml_installed_but_no_driver(tmp_path, monkeypatch):
    """The real ``nvidia-ml-py`` (a dev dependency) on a machine without the NVIDIA driver:
    NVML itself refuses to start, and both tools name NVML's own error and go on."""
    import pynvml

    with pytest.raises(pynvml.NVMLError):
        pynvml.nvmlInit()  # this test means something only where NVML cannot start
    monkeypatch.setenv("SLURMD_NODENAME", "n8")
    proc = run_module(
        "ddlbench.workloads.node.gpu_sampler", "--out", str(tmp_path), "--duration", "5"
    )
    assert proc.returncode == 0, proc.stderr
    (rec,) = [json.loads(x) for x in (tmp_path / "n8.jsonl").read_text().splitlines()]
    assert rec["type"] == "unavailable" and rec["reason"].startswith("NVML is not usable: ")
    assert proc.stderr.count("no GPU telemetry on n8") == 1
    out = tmp_path / "preflight"
    proc = run_module("ddlbench.workloads.node.preflight", "--policy", "warn", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    gpu = json.loads((out / "n8.json").read_text())["gpu"]
    assert gpu["available"] is False and gpu["reason"].startswith("NVML is not usable: ")


def test_run_without_gpu_gets_a_status_and_no_numbers(tmp_path):
    (tmp_path / "telemetry").mkdir()
    (tmp_path / "telemetry" / "n1.jsonl").write_text(
        json.dumps({"type": "unavailable", "node": "n1", "t": 1.0, "reason": "no GPU on this node"})
        + "\n"
    )
    tel = read_run_telemetry(tmp_path)
    assert tel.series == [] and tel.status == "unavailable: no GPU on this node"
    row = {"window_start": 0.0, "window_end": 10.0, "samples_measured": 100}
    out = telemetry_fields(tmp_path, row)
    assert out["telemetry"].startswith("unavailable") and out["joules_per_sample"] is None


def series(t, power, energy=None, util=None, throttle=None, node="n1"):
    t = np.asarray(t, float)
    col = lambda v: np.asarray(v, float).reshape(len(t), -1)  # noqa: E731
    p = col(power)
    return NodeSeries(
        node,
        t,
        p,
        col(energy) if energy is not None else np.full_like(p, np.nan),
        col(util) if util is not None else np.full_like(p, np.nan),
        np.asarray(throttle if throttle is not None else np.zeros_like(p), dtype=np.int64).reshape(
            p.shape
        ),
    )


def test_energy_from_constant_power_by_integration():
    # 2 GPUs at 300 W and 100 W, sampled at 10 Hz over 0..20 s; window 5..15 s
    t = np.arange(0, 20.01, 0.1)
    s = series(t, np.column_stack([np.full_like(t, 300.0), np.full_like(t, 100.0)]))
    w = window_energy([s], 5.0, 15.0)
    assert w.energy_j == pytest.approx(4000.0)  # (300 + 100) W x 10 s
    assert w.mean_power_w == pytest.approx(400.0)
    assert joules_per_sample(w.energy_j, 1000) == pytest.approx(4.0)


def test_energy_counter_is_preferred_and_interpolated():
    # counter at 250 J/s, sampled every second; power readings deliberately wrong (0 W)
    t = np.arange(0, 11.0)
    s = series(t, np.zeros_like(t), energy=250.0 * t + 1e6)
    w = window_energy([s], 2.5, 7.5)
    assert w.energy_j == pytest.approx(1250.0)  # 250 W x 5 s, between samples on both ends


def test_power_ramp_two_nodes_util_and_throttle():
    t = np.arange(0, 10.01, 0.5)
    a = series(t, 100.0 + 10.0 * t, util=np.full_like(t, 90.0), node="a")
    thr = np.zeros_like(t, dtype=np.int64)
    thr[t == 6.0] = 0x4 | 0x1  # SW power cap (and GPU idle, which does not count)
    b = series(t, np.full_like(t, 200.0), util=np.full_like(t, 50.0), throttle=thr, node="b")
    w = window_energy([a, b], 2.0, 8.0)
    # node a: integral of 100 + 10 t over 2..8 = 600 + 5 * (64 - 4) = 900; node b: 1200
    assert w.energy_j == pytest.approx(2100.0)
    assert w.mean_util_pct == pytest.approx(70.0) and w.gpus == 2
    assert w.throttled is True and w.throttle_reasons == ["sw_power_cap"]
    assert window_energy([a, b], 1.0, 5.0).throttled is False
    # clocks held at the application clocks: listed, not counted as throttling
    thr[t == 3.0] = 0x2
    app = window_energy([series(t, np.full_like(t, 200.0), throttle=thr, node="b")], 2.0, 4.0)
    assert app.throttled is False and app.throttle_reasons == ["applications_clocks"]


def test_window_not_covered_gives_no_energy():
    t = np.arange(0, 5.0, 0.1)
    w = window_energy([series(t, np.full_like(t, 100.0))], 3.0, 8.0)
    assert w.energy_j is None and w.mean_power_w is None


def test_telemetry_fields_from_a_sampler_log(tmp_path):
    d = tmp_path / "telemetry"
    d.mkdir()
    lines = [{"type": "meta", "node": "n1", "t": 0.0, "hz": 10, "gpus": [{"name": "NVIDIA H100"}]}]
    for i in range(101):  # 0..10 s at 10 Hz, 500 W, counter consistent with it
        t = i / 10
        lines.append(
            {"type": "sample", "t": t, "power_w": [500.0], "energy_j": [500.0 * t],
             "util_pct": [100], "mem_used_mib": [1.0], "sm_clock_mhz": [1980], "throttle": [0]}
        )  # fmt: skip
    (d / "n1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{trunc")
    out = telemetry_fields(tmp_path, {"window_start": 2, "window_end": 6, "samples_measured": 400})
    assert out["telemetry"] == "ok" and out["energy_j"] == pytest.approx(2000.0)
    assert out["joules_per_sample"] == pytest.approx(5.0) and out["gpu_power_w"] == 500.0
    assert out["gpu_util_pct"] == 100 and out["gpu_throttled"] is False


def test_preflight_cpu_part_and_no_gpu(tmp_path):
    env = {"SLURMD_NODENAME": "n3", "DDLBENCH_PREFLIGHT_LOAD_FRACTION": "1000", "PATH": "/usr/bin"}
    out = tmp_path / "provenance" / "preflight"
    proc = run_module(
        "ddlbench.workloads.node.preflight", "--policy", "fail", "--out", str(out), env=env
    )
    assert proc.returncode == 0, proc.stderr  # quiet: no load reaches 1000 x the CPUs
    rep = json.loads((out / "n3.json").read_text())
    assert rep["cpu"]["node_cpus"] >= 1 and rep["cpu"]["load1"] is not None
    assert rep["busy"] is False and rep["gpu"]["available"] is False
    assert proc.stderr.count("no GPU check") == 1
    assert read_preflight(tmp_path).busy is False
    # below zero: busy whatever the window measured (an idle machine can measure 0 CPUs busy)
    busy = dict(env, DDLBENCH_PREFLIGHT_LOAD_FRACTION="-1")
    proc = run_module(
        "ddlbench.workloads.node.preflight", "--policy", "fail", "--out", str(out), env=busy
    )
    assert proc.returncode == preflight.EXIT_BUSY and "refusing to measure" in proc.stderr
    fields = preflight_fields(tmp_path)
    assert fields["preflight_busy"] is True and "other processes kept" in fields["interference"]


def test_busy_reasons_for_gpus_and_shared_nodes():
    report = {
        "cpu": {"cpu_busy": False, "load1": 0.1, "node_cpus": 64, "load_fraction": 0.25},
        "node_shared": True,
        "other_jobs": ["4242"],
        "gpu": {
            "gpus": [
                {"index": 0, "processes": [], "util_pct": 0, "mem_used_mib": 400,
                 "mem_total_mib": 81559},
                {"index": 1, "processes": [77], "util_pct": 97, "mem_used_mib": 30000,
                 "mem_total_mib": 81559},
            ]
        },
    }  # fmt: skip
    reasons = preflight.busy_reasons(report)
    assert reasons == [
        "node shared with job(s) 4242",
        "GPU 1 runs process(es) 77",
        "GPU 1 is 97 % busy",
        "GPU 1 has 30000 MiB in use",
    ]
    assert preflight.node_shared({"job_cpus": 8, "node_cpus": 64}, None) is True
    assert preflight.node_shared({"job_cpus": None, "node_cpus": 64}, None) is None


def test_throttled_and_busy_runs_are_never_clean(tmp_path):
    import pandas as pd

    from ddlbench.collect.gpu_columns import add_gpu_columns

    run_dir = tmp_path / "runs" / "r0"
    tel = run_dir / "telemetry"
    tel.mkdir(parents=True)
    lines = [{"type": "meta", "node": "n1", "t": 0.0, "hz": 10, "gpus": [{"name": "NVIDIA A100"}]}]
    for i in range(21):
        lines.append(
            {"type": "sample", "t": i / 2, "power_w": [400.0], "energy_j": [None],
             "util_pct": [99], "throttle": [0x40 if i == 10 else 0]}
        )  # fmt: skip
    (tel / "n1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    runs = pd.DataFrame(
        [{"run_id": "r0", "run_dir": "runs/r0", "problems": None, "window_start": 1.0,
          "window_end": 9.0, "samples_measured": 800, "throughput_per_device": 100.0}]
    )  # fmt: skip
    out = add_gpu_columns(runs, [], tmp_path).iloc[0]
    assert out["gpu_throttled"] == True and out["throttle_reasons"] == "hw_thermal"  # noqa: E712
    assert out["energy_j"] == pytest.approx(3200.0) and out["joules_per_sample"] == 4.0
    assert out["problems"] == "GPU clocks throttled in the measured window (hw_thermal)"


def test_telemetry_and_preflight_files_make_collected_data_stale(tmp_path):
    from ddlbench.collect.paths import fingerprint

    run_dir = tmp_path / "runs" / "r0"
    (run_dir / "logs").mkdir(parents=True)
    before = fingerprint(tmp_path)
    (run_dir / "telemetry").mkdir()
    (run_dir / "telemetry" / "n1.jsonl").write_text('{"type": "unavailable"}\n')
    middle = fingerprint(tmp_path)
    (run_dir / "provenance" / "preflight").mkdir(parents=True)
    (run_dir / "provenance" / "preflight" / "n1.json").write_text("{}")
    assert len({before, middle, fingerprint(tmp_path)}) == 3
