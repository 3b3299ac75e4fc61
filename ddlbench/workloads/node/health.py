"""Node health for the pre-flight, through NVML (docs/bad-nodes.md#health).

Each check answers ``ok``, ``warn``, ``fail`` or ``skipped`` (with its reason):

* ``gpu_count``: the GPUs the node shows against the profile's GPUs per node (fewer: fail);
* ``ecc``: uncorrected ECC errors, volatile (since the driver loaded: fail) and aggregate
  (over the GPU's life: warn);
* ``retired_pages``: a page retirement pending, or a row-remapping failure or pending remap
  (fail);
* ``clocks``: throttle reasons at idle (hardware slowdown, thermal, power brake: fail; a software
  power cap or thermal slowdown at idle: warn), with the SM clock and its maximum;
* ``temperature``: above :data:`TEMP_FAIL_C` at idle fails, above :data:`TEMP_WARN_C` warns;
* ``nvlink``: NVLink CRC/replay/recovery error counters where readable (non-zero: warn).

A CPU profile skips every check with that reason; so does a GPU profile where NVML is not
usable (except that NVML reporting no GPU at all fails ``gpu_count``). The test hook
``DDLBENCH_TEST_BAD_NODE=<node>`` answers with :data:`RECORDED_BAD` on that node.
Standard library only; Python 3.8 syntax.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

TEMP_WARN_C = 70
TEMP_FAIL_C = 85
#: NVML throttle reason bits (nvml.h ``nvmlClocksThrottleReason*``)
HW_SLOWDOWN, SW_POWER_CAP, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x4, 0x20, 0x40, 0x80
FAIL_REASONS = {HW_SLOWDOWN: "hw_slowdown", HW_THERMAL: "hw_thermal", HW_POWER_BRAKE: "power_brake"}
WARN_REASONS = {SW_POWER_CAP: "sw_power_cap", SW_THERMAL: "sw_thermal"}
NVLINK_LINKS = 18
#: nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
CHECKS = ("gpu_count", "ecc", "retired_pages", "clocks", "temperature", "nvlink")


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NVML_ERROR_NOT_SUPPORTED and friends: not readable here
        return None


def _check(name: str, status: str, detail: str, **extra: Any) -> Dict[str, Any]:
    out = {"check": name, "status": status, "detail": detail}
    out.update(extra)
    return out


def skipped_all(reason: str) -> List[Dict[str, Any]]:
    return [_check(name, "skipped", reason) for name in CHECKS]


def check_count(seen: int, expected: Optional[int]) -> Dict[str, Any]:
    if expected is None:
        return _check("gpu_count", "skipped", f"{seen} GPU(s); the profile's count is unknown")
    status = "fail" if seen < expected else "ok"
    return _check("gpu_count", status, f"{seen} GPU(s), the profile expects {expected}")


def check_ecc(nvml: Any, h: Any, i: int) -> Dict[str, Any]:
    unc = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    vol = _call(nvml.nvmlDeviceGetTotalEccErrors, h, unc, getattr(nvml, "NVML_VOLATILE_ECC", 0))
    agg = _call(nvml.nvmlDeviceGetTotalEccErrors, h, unc, getattr(nvml, "NVML_AGGREGATE_ECC", 1))
    if vol is None and agg is None:
        return _check("ecc", "skipped", "ECC counters not readable (ECC off?)", gpu=i)
    status = "fail" if vol else ("warn" if agg else "ok")
    detail = f"uncorrected ECC errors: volatile {vol}, aggregate {agg}"
    return _check("ecc", status, detail, gpu=i)


def check_pages(nvml: Any, h: Any, i: int) -> Dict[str, Any]:
    pending = _call(nvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
    remap = _call(nvml.nvmlDeviceGetRemappedRows, h)  # (corr, unc, pending, failure)
    if pending is None and remap is None:
        return _check("retired_pages", "skipped", "page retirement not readable", gpu=i)
    bad = []
    if pending:
        bad.append("a page retirement is pending (reset the GPU)")
    if remap is not None and (remap[2] or remap[3]):
        bad.append("row remapping " + ("failed" if remap[3] else "pending"))
    detail = "; ".join(bad) or (
        f"remapped rows: {remap[0]} correctable, {remap[1]} uncorrectable" if remap else "none"
    )
    return _check("retired_pages", "fail" if bad else "ok", detail, gpu=i)


def check_clocks(nvml: Any, h: Any, i: int) -> Dict[str, Any]:
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    reasons = _call(fn or nvml.nvmlDeviceGetCurrentClocksThrottleReasons, h)
    if reasons is None:
        return _check("clocks", "skipped", "throttle reasons not readable", gpu=i)
    sm_type = getattr(nvml, "NVML_CLOCK_SM", 1)
    sm = _call(nvml.nvmlDeviceGetClockInfo, h, sm_type)
    sm_max = _call(nvml.nvmlDeviceGetMaxClockInfo, h, sm_type)
    fail = [name for bit, name in FAIL_REASONS.items() if reasons & bit]
    warn = [name for bit, name in WARN_REASONS.items() if reasons & bit]
    status = "fail" if fail else ("warn" if warn else "ok")
    detail = f"throttle reasons at idle: {', '.join(fail + warn) or 'none'}; SM {sm}/{sm_max} MHz"
    return _check("clocks", status, detail, gpu=i, reasons=int(reasons))


def check_temperature(nvml: Any, h: Any, i: int) -> Dict[str, Any]:
    temp = _call(nvml.nvmlDeviceGetTemperature, h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
    if temp is None:
        return _check("temperature", "skipped", "temperature not readable", gpu=i)
    status = "fail" if temp > TEMP_FAIL_C else ("warn" if temp > TEMP_WARN_C else "ok")
    return _check("temperature", status, f"{temp} C at idle", gpu=i)


def check_nvlink(nvml: Any, h: Any, i: int) -> Dict[str, Any]:
    errors: Dict[str, int] = {}
    readable = 0
    for link in range(NVLINK_LINKS):
        if _call(nvml.nvmlDeviceGetNvLinkState, h, link) is None:
            continue
        readable += 1
        for name, counter in NVLINK_COUNTERS.items():
            n = _call(nvml.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
            if n:
                errors[f"link{link}.{name}"] = int(n)
    if not readable:
        return _check("nvlink", "skipped", "no NVLink readable", gpu=i)
    detail = ", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "no errors"
    return _check("nvlink", "warn" if errors else "ok", f"{readable} links; {detail}", gpu=i)


def gpu_checks(nvml: Any, indices: List[int], expected: Optional[int]) -> List[Dict[str, Any]]:
    """Every check of every GPU in ``indices`` (NVML initialised by the caller)."""
    out = [check_count(len(indices), expected)]
    for i in indices:
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        for fn in (check_ecc, check_pages, check_clocks, check_temperature, check_nvlink):
            out.append(fn(nvml, h, i))
    return out


def summary(checks: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``{status, checks, failed}``: fail if any check failed, else warn, ok or skipped."""
    words = [c["status"] for c in checks]
    for word in ("fail", "warn", "ok"):
        if word in words:
            status = word
            break
    else:
        status = "skipped"
    failed = [f"{c['check']}: {c['detail']}" for c in checks if c["status"] == "fail"]
    return {"status": status, "checks": checks, "failed": failed}


def recorded_nvml(gpus: List[Dict[str, Any]]) -> Any:
    """An NVML-like object answering from recorded values, one dict per GPU (keys: ecc_volatile,
    ecc_aggregate, retired_pending, remapped (4-tuple), reasons, sm, sm_max, temp, nvlink
    ({link: {counter: n}})); a missing key raises, as NVML does for what it cannot read."""

    def get(h: int, key: str) -> Any:
        if key not in gpus[h]:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return gpus[h][key]

    def ecc(h: int, _type: int, counter: int) -> Any:
        return get(h, "ecc_volatile" if counter == 0 else "ecc_aggregate")

    def link_state(h: int, link: int) -> int:
        if link not in get(h, "nvlink"):
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        return 1

    names = {v: k for k, v in NVLINK_COUNTERS.items()}
    return SimpleNamespace(
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetTotalEccErrors=ecc,
        nvmlDeviceGetRetiredPagesPendingStatus=lambda h: get(h, "retired_pending"),
        nvmlDeviceGetRemappedRows=lambda h: get(h, "remapped"),
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: get(h, "reasons"),
        nvmlDeviceGetClockInfo=lambda h, _t: get(h, "sm"),
        nvmlDeviceGetMaxClockInfo=lambda h, _t: get(h, "sm_max"),
        nvmlDeviceGetTemperature=lambda h, _t: get(h, "temp"),
        nvmlDeviceGetNvLinkState=link_state,
        nvmlDeviceGetNvLinkErrorCounter=lambda h, link, c: get(h, "nvlink")[link].get(names[c], 0),
    )


#: the test hook's answer: a node that shows 3 of its 4 GPUs, one with volatile ECC errors
RECORDED_BAD = {
    "expected": 4,
    "gpus": [
        {"ecc_volatile": 0, "ecc_aggregate": 0, "retired_pending": 0, "remapped": (0, 0, 0, 0)},
        {"ecc_volatile": 2, "ecc_aggregate": 7, "retired_pending": 1, "remapped": (0, 1, 1, 0)},
        {"ecc_volatile": 0, "ecc_aggregate": 0, "temp": 41, "reasons": 0x1},
    ],
}


def expected_gpus(env: Dict[str, str]) -> Tuple[Optional[str], Optional[int]]:
    """``(device, GPUs per node)`` of the run (``run.json`` beside the job, else Slurm's)."""
    import json
    import os

    try:
        with open(os.path.join(env.get("DDLBENCH_RUN_DIR", "."), "run.json")) as fh:
            cfg = json.load(fh)
        device = cfg.get("device")
        return device, int(cfg["tasks_per_node"]) if device == "gpu" else 0
    except (OSError, ValueError, KeyError, TypeError):
        pass
    gpus = env.get("SLURM_GPUS_ON_NODE")
    return None, int(gpus) if gpus and gpus.isdigit() else None


def node_health(node: str, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The health :func:`summary` of this node (see the module for what is checked)."""
    import os

    from ..common.diagnose import bad_node
    from .gpu_sampler import open_nvml, visible_indices

    env = dict(os.environ) if env is None else env
    if bad_node(env, node):
        nvml = recorded_nvml(RECORDED_BAD["gpus"])
        out = summary(gpu_checks(nvml, [0, 1, 2], RECORDED_BAD["expected"]))
        out["test_hook"] = "DDLBENCH_TEST_BAD_NODE"
        return out
    device, expected = expected_gpus(env)
    if device == "cpu" or expected == 0:
        return summary(skipped_all("CPU profile: no GPU to check"))
    nvml, reason = open_nvml()
    if nvml is None:
        if reason == "no GPU on this node":
            return summary([check_count(0, expected)] + skipped_all(reason)[1:])
        return summary(skipped_all(reason))
    try:
        indices = visible_indices(nvml, nvml.nvmlDeviceGetCount(), env)
        return summary(gpu_checks(nvml, indices, expected))
    finally:
        _call(nvml.nvmlShutdown)
