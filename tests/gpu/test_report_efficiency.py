"""The report's "Precision, MFU and energy" table: medians per configuration, flags."""

from __future__ import annotations

import pandas as pd

from ddlbench.report.efficiency import efficiency_tables


def run(run_id, group, **kw):
    base = {
        "run_id": run_id,
        "group": group,
        "mode": "throughput",
        "precision": "bf16",
        "layout": "NHWC",
        "compile": "torch.compile(mode=default)",
        "compile_s": 60.0,
        "tflops_per_device": 120.0,
        "peak_tflops": 989.4,
        "mfu": 120.0 / 989.4,
        "gpu_power_w": 600.0,
        "joules_per_sample": 0.12,
        "gpu_util_pct": 98.0,
        "gpu_throttled": False,
        "throttle_reasons": None,
        "fallbacks": None,
        "interference": None,
    }
    base.update(kw)
    return base


def test_medians_per_configuration_and_flags():
    runs = pd.DataFrame(
        [
            run("a-r0", "a", tflops_per_device=100.0, joules_per_sample=0.10),
            run("a-r1", "a", tflops_per_device=140.0, joules_per_sample=0.14,
                interference="started on a busy node: n1: GPU 0 runs process(es) 7"),
            run("b-r0", "b", precision="amp", fallbacks="precision bf16 is not supported "
                "by this GPU; running amp (fp16 + scaling)", gpu_throttled=True,
                throttle_reasons="sw_power_cap"),
            run("c-r0", "c", precision="fp32", gpu_throttled=None, mfu=None),
        ]
    )  # fmt: skip
    (table,) = efficiency_tables(runs)
    rows = {r[0]: dict(zip(table.columns, r)) for r in table.rows}
    a, b = rows["a"], rows["b"]
    assert a["runs"] == "2" and a["TFLOP/s per device"] == "120" and a["J/sample"] == "0.120"
    assert a["MFU"] == "12.1 %" and a["interference"].startswith("1 of 2 runs: started on a busy")
    assert b["precision"] == "amp" and b["throttled"] == "THROTTLED sw_power_cap"
    assert rows["c"]["throttled"] == "-" and rows["c"]["MFU"] == "-"
    assert table.flags == [True, True, False]  # busy node; fallback and throttling; clean


def test_no_table_for_old_data():
    assert efficiency_tables(pd.DataFrame([{"run_id": "x"}])) == []
