"""Unit tests of ddlbench.workloads.common (numpy only; no framework needed)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ddlbench.workloads.common import (
    LRSchedule,
    Measurement,
    MLLog,
    RankInfo,
    RankLogger,
    RunConfigError,
    bandwidths,
    build_meta,
    load_rank_data,
    message_sizes,
    normalize_run_config,
    param_checksum,
    parse_tasks_per_node,
    rank_info,
    read_idx,
    run_allreduce_sweep,
    shard_indices,
    steps_per_epoch,
    synthetic_batch,
    upsample_bilinear,
    workload_main,
)
from tests.support.repo import ROOT


def _read(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _info(rank: int = 0, world: int = 1) -> RankInfo:
    return RankInfo(rank, rank, 0, world, world, 1, "host", None, None)


@pytest.fixture
def make_cfg(tmp_path, run_config):
    def _make(**overrides):
        cfg = run_config("pytorch", **overrides)
        cfg["log_dir"] = str(tmp_path / "logs")
        return normalize_run_config(cfg)

    return _make


# -- learning-rate schedule --------------------------------------------------------------------
def test_lr_warmup_is_linear_per_step_from_base_to_peak():
    # 10 steps per epoch, 2 warmup epochs = 20 warmup steps, 0.1 -> 0.8
    s = LRSchedule(0.1, 0.8, steps_per_epoch=10, warmup_epochs=2)
    assert s(0) == pytest.approx(0.1)
    assert s(1) == pytest.approx(0.1 + 0.7 / 20)  # 0.135
    assert s(10) == pytest.approx(0.45)
    assert s(19) == pytest.approx(0.1 + 0.7 * 19 / 20)  # 0.765
    assert s(20) == pytest.approx(0.8)
    assert s(1000) == pytest.approx(0.8)


def test_lr_step_decay_at_epoch_boundaries():
    s = LRSchedule(0.4, 0.4, steps_per_epoch=5, decay_epochs=[3, 6], decay_factor=0.1)
    assert [round(s(i), 6) for i in (0, 14, 15, 29, 30, 100)] == [
        0.4,
        0.4,
        0.04,
        0.04,
        0.004,
        0.004,
    ]


def test_lr_warmup_then_decay_fractional_epochs():
    # Goyal et al.: 5 warmup epochs, decay by 10 at 30, 60, 80; here 4 steps/epoch
    s = LRSchedule(0.1, 3.2, steps_per_epoch=4, warmup_epochs=5, decay_epochs=[30, 60, 80])
    assert s(10) == pytest.approx(0.1 + 3.1 * 10 / 20)
    assert s(119) == pytest.approx(3.2)
    assert s(120) == pytest.approx(0.32)
    assert s(240) == pytest.approx(0.032)
    assert s(320) == pytest.approx(0.0032)
    half = LRSchedule(0.1, 0.2, steps_per_epoch=3, warmup_epochs=0.5)  # 1.5 warmup steps
    assert half(1) == pytest.approx(0.1 + 0.1 / 1.5)
    assert half(2) == pytest.approx(0.2)


def test_lr_schedule_from_config(tmp_path, make_cfg):
    cfg = make_cfg(
        optimizer={"lr": 0.4, "base_lr": 0.1},
        lr_schedule={"warmup_epochs": 1, "decay_epochs": [2], "decay_factor": 0.5},
    )
    s = LRSchedule.from_config(cfg, steps_per_epoch=4)
    assert [s(i) for i in (0, 2, 4, 7, 8)] == pytest.approx([0.1, 0.25, 0.4, 0.4, 0.2])
    assert s.epoch_of(7) == 1 and s.epoch_of(8) == 2


# -- checksum ------------------------------------------------------------------------------------
def test_checksum_sum_and_sha_over_bytes_in_order():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([0.5, -1.25], dtype=np.float32)
    total, sha = param_checksum([a, b])
    assert total == pytest.approx(15.0 - 0.75)
    assert sha == hashlib.sha256(a.tobytes() + b.tobytes()).hexdigest()
    assert param_checksum([b, a])[1] != sha  # order matters
    assert param_checksum([a.T.copy().T, b])[1] == sha  # memory layout does not
    big_endian = a.astype(">f4")
    assert param_checksum([big_endian, b])[1] == sha
    assert param_checksum([a.reshape(3, 2), b])[1] == sha  # shapes are not hashed


# -- data ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,world", [(10, 3), (1438, 2), (7, 7), (5, 8)])
def test_shards_are_disjoint_and_cover(n, world):
    shards = [shard_indices(n, r, world) for r in range(world)]
    joined = np.concatenate(shards)
    assert sorted(joined.tolist()) == list(range(n))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_steps_per_epoch_same_on_all_ranks():
    assert steps_per_epoch(1438, 2, 32) == 22
    assert steps_per_epoch(1438, 3, 32) == 14
    with pytest.raises(ValueError):
        steps_per_epoch(10, 2, 32)


def test_synthetic_batch_shapes_and_per_rank_seed():
    x, y = synthetic_batch(4, 28, 10, 1, "NCHW", seed=1)
    assert x.shape == (4, 1, 28, 28) and x.dtype == np.float32
    assert y.dtype == np.int64 and y.min() >= 0 and y.max() < 10
    x2, _ = synthetic_batch(4, 28, 10, 1, "NHWC", seed=2)
    assert x2.shape == (4, 28, 28, 1) and not np.allclose(x[..., 0, 0], x2[..., 0, 0, 0])


def test_upsample_bilinear_keeps_constant_and_range():
    img = np.full((1, 8, 8), 3.0)
    assert np.allclose(upsample_bilinear(img, 28), 3.0)
    ramp = np.tile(np.arange(8.0), (8, 1))[None]
    up = upsample_bilinear(ramp, 28)
    assert up.shape == (1, 28, 28) and up.min() == 0.0 and up.max() == 7.0
    assert np.all(np.diff(up[0, 0]) >= 0)


def _write_idx(path, arr):
    codes = {np.dtype("uint8"): 0x08, np.dtype(">i4"): 0x0C}
    header = struct.pack(">HBB", 0, codes[arr.dtype], arr.ndim) + struct.pack(
        ">" + "I" * arr.ndim, *arr.shape
    )
    data = header + arr.tobytes()
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)


def test_idx_reader_and_mnist_sharding(tmp_path, make_cfg):
    rng = np.random.RandomState(0)
    for prefix, n in (("train", 50), ("t10k", 11)):
        _write_idx(
            tmp_path / f"{prefix}-images-idx3-ubyte.gz",
            rng.randint(0, 256, (n, 28, 28)).astype(np.uint8),
        )
        _write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte", (np.arange(n) % 10).astype(np.uint8))
    assert read_idx(str(tmp_path / "t10k-labels-idx1-ubyte")).tolist() == [
        i % 10 for i in range(11)
    ]
    cfg = make_cfg(data={"kind": "mnist", "path": str(tmp_path)}, batch_size=8)
    parts = [load_rank_data(cfg, _info(r, 3)) for r in range(3)]
    assert parts[0].steps_per_epoch == 2  # 50 // 3 = 16 samples, 2 batches of 8
    labels = np.concatenate([p.train.y for p in parts])
    assert len(labels) == 50 and sorted(labels.tolist()) == sorted((np.arange(50) % 10).tolist())
    assert sum(len(p.val) for p in parts) == 11
    assert parts[1].train.x.shape[1:] == (1, 28, 28)
    batches = list(parts[0].epoch_batches(0, 8, seed=5))
    assert len(batches) == 2 and all(b[0].shape == (8, 1, 28, 28) for b in batches)
    again = list(parts[0].epoch_batches(0, 8, seed=5))
    other = list(parts[0].epoch_batches(1, 8, seed=5))
    assert np.array_equal(batches[0][1], again[0][1])  # deterministic
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(batches, other))  # reshuffled


DIGITS_CHECK = r"""
import json, sys
import numpy as np
from ddlbench.workloads.common import (
    RankInfo, load_digits_split, load_rank_data, normalize_run_config)
cfg = normalize_run_config({"run_id": "x", "workload": "pytorch", "mode": "throughput",
    "log_dir": "/tmp", "data": {"kind": "digits"}, "model": "lenet", "batch_size": 16})
split = load_digits_split(28)
out = {"n_train": len(split.y_train), "n_val": len(split.y_val), "shape": list(split.x_train.shape),
       "train_head": split.y_train[:20].tolist()}
for world in (1, 2, 3):
    infos = [RankInfo(r, r, 0, world, world, 1, "h", None, None) for r in range(world)]
    parts = [load_rank_data(cfg, info) for info in infos]
    keys = lambda xs: sorted(x.tobytes() for x in xs)
    tr = [a for p in parts for a in p.train.x]
    va = [a for p in parts for a in p.val.x]
    out[str(world)] = {
        "train_covering": keys(tr) == keys(split.x_train),
        "val_covering": keys(va) == keys(split.x_val),
        "train_disjoint": len({a.tobytes() for a in tr}) == len(tr),
        "steps": [p.steps_per_epoch for p in parts],
    }
json.dump(out, sys.stdout)
"""


def test_digits_split_is_fixed_and_shards_are_disjoint_and_covering(framework_python):
    try:
        import sklearn  # noqa: F401

        python = sys.executable
    except ImportError:
        python = framework_python("torch")
        if python is None:
            pytest.skip("scikit-learn is neither here nor in the torch environment")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [python, "-c", DIGITS_CHECK], env=env, check=True, capture_output=True, text=True
    )
    out = json.loads(proc.stdout)
    # the split is fixed (seed 2017), whatever the run seed or the machine
    assert out["train_head"] == [8, 1, 3, 8, 5, 8, 1, 4, 9, 7, 5, 2, 1, 4, 3, 2, 4, 9, 5, 4]
    assert out["n_train"] == 1438 and out["n_val"] == 359
    assert out["shape"] == [1438, 1, 28, 28]
    for world in ("1", "2", "3"):
        assert out[world]["train_covering"] and out[world]["val_covering"], out[world]
        assert out[world]["train_disjoint"]
        assert len(set(out[world]["steps"])) == 1
    assert out["2"]["steps"] == [719 // 16] * 2


# -- rank info -----------------------------------------------------------------------------------
def test_rank_info_from_slurm_and_defaults():
    env = {
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "2",
        "SLURM_NTASKS": "8",
        "SLURM_NNODES": "3",
        "SLURM_NTASKS_PER_NODE": "3(x2),2",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "n[1-3]",
    }
    info = rank_info(env)
    assert (info.rank, info.local_rank, info.node_rank, info.world_size) == (5, 1, 2, 8)
    assert info.local_size == 2 and info.num_nodes == 3
    assert info.job_id == "77" and info.nodelist == "n[1-3]"
    solo = rank_info({})
    assert (solo.rank, solo.world_size, solo.local_rank, solo.job_id) == (0, 1, 0, None)
    assert rank_info({"RANK": "1", "WORLD_SIZE": "2"}).rank == 1
    assert parse_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError):
        rank_info({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"})


def test_run_config_defaults_and_errors(tmp_path):
    cfg = normalize_run_config(
        {"run_id": "r", "workload": "pytorch", "mode": "throughput", "log_dir": "/x"}
    )
    assert (
        cfg["framework"] == "pytorch"
        and cfg["image_size"] == 28
        and cfg["optimizer"]["base_lr"] == 0.01
    )
    with pytest.raises(RunConfigError):
        normalize_run_config(
            {
                "format": "ddlbench-run/9",
                "run_id": "r",
                "workload": "w",
                "mode": "throughput",
                "log_dir": "/x",
            }
        )
    with pytest.raises(RunConfigError):
        normalize_run_config(
            {"run_id": "r", "workload": "w", "mode": "convergence", "log_dir": "/x"}
        )


# -- rank log ------------------------------------------------------------------------------------
def test_rank_log_records_validate_against_schema(tmp_path, make_cfg, validate_log):
    cfg = make_cfg()
    with RankLogger(cfg["log_dir"], 1) as log:
        log.meta(build_meta(cfg, _info(1, 2), "2.13.0", "cpu", 61706, "gloo", extra_field=1))
        log.step(0, 0, "warmup", 1.0, 1.5, 32, np.float32(2.3), 0.1)
        log.step(1, 0, "measure", 1.5, 2.0, 32, float("nan"), 0.1, compute_s=0.4, comm_s=0.1)
        log.eval(0, 3.0, 2.0, 0.5, 1.1, samples=359)
        log.allreduce(1024, "float32", 5, 1e-5, 0.1024, 0.1024)
        log.summary(
            {
                "status": "ok",
                "steps_measured": 1,
                "samples_measured": 32,
                "measure_time_s": 0.5,
                "throughput": 64.0,
                "final_loss": None,
                "param_sum": 1.0,
                "param_sha256": "ab",
            }
        )
    records = _read(tmp_path / "logs" / "rank-1.jsonl")
    validate_log(records)
    assert records[0]["extra_field"] == 1 and records[0]["rank"] == 1
    assert records[1]["loss"] == pytest.approx(2.3) and records[2]["loss"] is None
    assert records[2]["compute_s"] == 0.4 and records[1]["comm_s"] is None
    # a rank log is never overwritten: reopening it is refused and the file is kept whole
    with pytest.raises(FileExistsError, match="never overwrites a rank log"):
        RankLogger(cfg["log_dir"], 1)
    assert _read(tmp_path / "logs" / "rank-1.jsonl") == records


def test_every_record_is_one_line_and_steps_wait_at_most_the_flush_interval(tmp_path, monkeypatch):
    from ddlbench.workloads.common import logger as logger_mod

    writes = []
    real_write = os.write

    def counting_write(fd, data):
        writes.append(data)
        return real_write(fd, data)

    monkeypatch.setattr(logger_mod, "STEP_FLUSH_S", 3600.0)  # steps stay kept
    log = RankLogger(str(tmp_path), 0)
    path = tmp_path / "rank-0.jsonl"
    monkeypatch.setattr(os, "write", counting_write)
    log.step(0, None, "warmup", 1.0, 2.0, 8, 1.0, 0.1)
    log.step(1, None, "measure", 2.0, 3.0, 8, 0.9, 0.1, compute_s=0.5, comm_s=0.5)
    assert writes == [] and path.read_text() == ""  # kept, not lost: see below
    # any other record writes the kept steps first, in order, with one write()
    log.eval(0, 3.5, 1.5, 0.5, 0.7)
    assert len(writes) == 1
    assert [json.loads(x)["type"] for x in path.read_text().splitlines()] == ["step"] * 2 + ["eval"]
    # once the interval has passed, a step is written at its end together with the kept ones
    log.step(2, None, "measure", 3.0, 4.0, 8, 0.8, 0.1)
    monkeypatch.setattr(logger_mod, "STEP_FLUSH_S", 0.0)
    log.step(3, None, "measure", 4.0, 5.0, 8, 0.7, 0.1)
    assert len(writes) == 2 and writes[1].count(b"\n") == 2
    log.step(4, None, "measure", 5.0, 6.0, 8, 0.6, 0.1)  # a step slower than the interval
    assert len(writes) == 3 and writes[2].count(b"\n") == 1
    monkeypatch.setattr(logger_mod, "STEP_FLUSH_S", 3600.0)
    log.step(5, None, "measure", 6.0, 7.0, 8, 0.5, 0.1)
    log.close()  # close writes what is kept
    steps = [json.loads(x) for x in path.read_text().splitlines() if '"step"' in x]
    assert [r["step"] for r in steps] == [0, 1, 2, 3, 4, 5]
    assert all(w.endswith(b"\n") for w in writes)


@pytest.mark.parametrize(
    "values",
    [
        (0, 0, "warmup", 1.0, 1.5, 32, 2.3, 0.1, None, None),
        (7, None, "measure", 1732000000.123456, 1732000000.25, 8, float("nan"), 0.4, 0.01, 0.0),
        (9, 3, "step", 1e-9, float("inf"), 1, np.float32(2.3), np.float64(0.05), 1e300, -0.0),
        (10**12, 2, "eval-like", -1.5, 2.0, np.int64(4), None, None, np.float32("nan"), 3),
        (1, 0, 'caf\u00e9 "q"', 0.1 + 0.2, 1 / 3, 2, 5, 1, float("-inf"), 1e-310),
    ],
)
def test_the_step_line_is_the_generic_encoders(values):
    from ddlbench.workloads.common.logger import _opt_float, encode_record, encode_step

    step, epoch, phase, t0, t1, samples, loss, lr, comp, comm = values
    generic = {
        "type": "step",
        "step": int(step),
        "epoch": None if epoch is None else int(epoch),
        "phase": phase,
        "t_start": float(t0),
        "t_end": float(t1),
        "samples": int(samples),
        "loss": _opt_float(loss),
        "lr": _opt_float(lr),
        "compute_s": _opt_float(comp),
        "comm_s": _opt_float(comm),
    }
    assert encode_step(*values).encode("utf-8") == encode_record(generic)


def test_records_from_other_threads_come_after_the_steps_before_them(tmp_path):
    import threading

    log = RankLogger(str(tmp_path), 0)
    done = threading.Event()

    def other() -> None:  # as the watchdog and the own-program readers write
        for i in range(200):
            log.eval(i, float(i), 0.0, 0.5, None)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    for i in range(2000):
        log.step(i, 0, "measure", float(i), float(i) + 0.5, 8, 0.5, 0.1)
    thread.join()
    log.close()
    records = [json.loads(x) for x in (tmp_path / "rank-0.jsonl").read_text().splitlines()]
    assert done.is_set() and len(records) == 2200
    assert [r["step"] for r in records if r["type"] == "step"] == list(range(2000))


def test_killed_writer_leaves_readable_prefix(tmp_path):
    # steps kept for at most STEP_FLUSH_S: a SIGKILL loses at most those; the eval record
    # wrote the 50 steps before it
    code = (
        "import os, signal\n"
        "from ddlbench.workloads.common import RankLogger\n"
        f"log = RankLogger({str(tmp_path)!r}, 3)\n"
        "for i in range(50):\n"
        "    log.step(i, 0, 'measure', 1.0, 2.0, 8, 0.5, 0.1)\n"
        "log.eval(0, 2.0, 1.0, 0.5, 0.7)\n"
        "for i in range(50, 60):\n"
        "    log.step(i, 0, 'measure', 1.0, 2.0, 8, 0.5, 0.1)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == -9
    records = [json.loads(x) for x in (tmp_path / "rank-3.jsonl").read_text().splitlines()]
    assert len(records) >= 51 and records[50]["type"] == "eval"
    assert [r["step"] for r in records if r["type"] == "step"] == list(range(len(records) - 1))


# -- measurement ---------------------------------------------------------------------------------
def test_measurement_window_and_time_to_accuracy(tmp_path):
    with RankLogger(str(tmp_path), 0) as log:
        m = Measurement(log, mode="convergence", target_accuracy=0.9)
        m.record_step(0, 0, "warmup", 10.0, 11.0, 8, 2.0, 0.1)
        m.record_step(1, 0, "measure", 11.0, 12.0, 8, 1.5, 0.1)
        m.record_step(2, 0, "measure", 12.5, 13.0, 8, 1.0, 0.1, 0.4, 0.1)
        assert not m.record_eval(0, 0.8, 0.9)
        assert m.record_eval(1, 0.95, 0.5)
        assert m.record_eval(2, 0.93, 0.6)
        s = m.summary_fields()
    assert s["steps_measured"] == 2 and s["samples_measured"] == 16
    assert s["measure_time_s"] == pytest.approx(2.0) and s["throughput"] == pytest.approx(8.0)
    assert s["final_loss"] == 1.0 and s["best_accuracy"] == 0.95 and s["final_accuracy"] == 0.93
    assert s["status"] == "ok" and s["time_to_accuracy_s"] is not None
    assert s["compute_time_median_s"] == 0.4


def test_mllog_lines(tmp_path, make_cfg):
    buf = io.StringIO()
    ml = MLLog(True, buf)
    ml.run_config(make_cfg())
    ml.event("eval_accuracy", 0.9, {"epoch_num": 1})
    lines = buf.getvalue().splitlines()
    assert all(line.startswith(":::MLLOG {") for line in lines)
    recs = [json.loads(line[len(":::MLLOG ") :]) for line in lines]
    keys = [r["key"] for r in recs]
    for key in (
        "global_batch_size",
        "opt_base_learning_rate",
        "opt_learning_rate_warmup_epochs",
        "eval_accuracy",
    ):
        assert key in keys
    assert recs[-1]["metadata"]["epoch_num"] == 1 and recs[-1]["event_type"] == "POINT_IN_TIME"
    quiet = io.StringIO()
    MLLog(False, quiet).event("run_start")
    assert quiet.getvalue() == ""


# -- allreduce helpers ---------------------------------------------------------------------------
def test_message_sizes_and_bandwidths():
    assert message_sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert (
        message_sizes(1024, 256 << 20)[-1] == 256 << 20
        and len(message_sizes(1024, 256 << 20)) == 19
    )
    alg, bus = bandwidths(1_000_000, 0.001, 4)
    assert alg == pytest.approx(1.0) and bus == pytest.approx(1.5)
    assert bandwidths(1000, 1.0, 1)[1] == 0.0


def test_allreduce_sweep_records(tmp_path, make_cfg, validate_log):
    cfg = make_cfg(
        mode="allreduce",
        allreduce={"min_bytes": 1024, "max_bytes": 4096, "iters": 3, "warmup": 1},
    )
    calls = []
    with RankLogger(cfg["log_dir"], 0) as log:
        log.meta(build_meta(cfg, _info(), "none", "cpu", None, "loopback"))
        fields = run_allreduce_sweep(log, cfg, 2, lambda n: lambda: calls.append(n))
        log.summary(fields)
    records = _read(tmp_path / "logs" / "rank-0.jsonl")
    validate_log(records)
    ar = [r for r in records if r["type"] == "allreduce"]
    assert [r["bytes"] for r in ar] == [1024, 2048, 4096] and len(calls) == 12
    assert all(math.isclose(r["busbw_gbps"], r["algbw_gbps"]) for r in ar)  # n = 2


# -- entry-point wrapper -------------------------------------------------------------------------
def test_workload_main_logs_error_after_fallback_meta(tmp_path, make_cfg, validate_log, capsys):
    cfg = make_cfg()
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg))

    def failing(ctx):
        raise RuntimeError("no such model")

    assert workload_main(failing, [str(path)]) == 1
    records = _read(tmp_path / "logs" / "rank-0.jsonl")
    validate_log(records, complete=False)
    assert [r["type"] for r in records] == ["meta", "error"]
    assert "no such model" in records[1]["message"] and "Traceback" in records[1]["traceback"]
    assert workload_main(failing, []) == 2


def _failed_with(exc: Exception, tmp_path, make_cfg, validate_log) -> list:
    """A rank whose body raises ``exc``: exit 1, and its log (checked against the schema)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(make_cfg()))

    def failing(ctx):
        raise exc

    assert workload_main(failing, [str(path)]) == 1
    records = _read(tmp_path / "logs" / "rank-0.jsonl")
    validate_log(records, complete=False)
    return records


def test_an_explained_failure_is_logged_as_its_message_alone(
    tmp_path, make_cfg, validate_log, capsys
):
    """An expected failure that says what happened (ExplainedFailure): no traceback and no
    class name, in the error record and on stderr; other exceptions keep theirs (above)."""
    from ddlbench.workloads.common.runner import ExplainedFailure

    exc = ExplainedFailure("the program 'x' exited with code 3 on rank 0 (h)")
    records = _failed_with(exc, tmp_path, make_cfg, validate_log)
    assert records[1] == dict(
        records[1], message="the program 'x' exited with code 3 on rank 0 (h)"
    )
    assert "traceback" not in records[1]
    err = capsys.readouterr().err
    assert err == "ddlbench: rank 0: the program 'x' exited with code 3 on rank 0 (h)\n"


def test_end_process_flushes_output_and_skips_the_teardown():
    """The torch workloads end with ``end_process``: buffered output is written and the exit
    code kept, while exit-time code (atexit handlers, libraries' destructors) never runs."""
    program = (
        "import atexit, sys\n"
        "from ddlbench.workloads.common import end_process\n"
        "atexit.register(lambda: print('TEARDOWN RAN'))\n"
        "print('summary', end='')\n"
        "sys.stderr.write('warning')\n"
        "end_process(3)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 3
    assert proc.stdout == "summary" and proc.stderr == "warning"


def test_workload_main_success(tmp_path, make_cfg, validate_log):
    cfg = make_cfg(mllog=True)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(cfg))

    def body(ctx):
        ctx.write_meta("0", "cpu", 0, "none")
        m = ctx.measurement()
        for i in range(3):
            loss = 1.0 / (i + 1)
            m.step(lambda batch, lr, v=loss: v, i, 0, "warmup" if i == 0 else "measure", 8, 0.1)
        ctx.finish(m.summary_fields(), *param_checksum([np.ones(3, np.float32)]))

    assert workload_main(body, [str(path)]) == 0
    records = _read(tmp_path / "logs" / "rank-0.jsonl")
    validate_log(records)
    assert records[-1]["param_sum"] == 3.0 and records[-1]["steps_measured"] == 2


def test_a_rank_stopped_by_a_signal_says_so_without_a_traceback(
    tmp_path, make_cfg, validate_log, capsys
):
    """srun ends the other ranks of a step whose rank failed (SIGTERM): such a rank logs
    "Terminated: received signal 15", the words status and report read as a stopped rank, and
    prints no traceback, which read as a second failure beside the first one's."""
    from ddlbench.workloads.common.runner import Terminated

    records = _failed_with(Terminated("received signal 15"), tmp_path, make_cfg, validate_log)
    assert records[1]["message"] == "Terminated: received signal 15"
    assert "traceback" not in records[1]
    assert capsys.readouterr().err == "ddlbench: rank 0: Terminated: received signal 15\n"
