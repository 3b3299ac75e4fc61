"""Straggler injection and backup workers in the PyTorch workload: real ranks on the CPU (gloo)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.frameworks


def _steps(result, rank):
    return result.records(rank, "step")


def _losses(result, rank):
    return [s["loss"] for s in _steps(result, rank)]


def test_fixed_injection_is_logged(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "pytorch",
        framework_options={"backend": "gloo", "threads": 1},
        steps={"warmup": 2, "measure": 12},
        inject={"straggler": {"ranks": [1], "slowdown": 10.0}},
    )
    result = launch_ranks("pytorch", cfg, world_size=2)
    check_data_parallel(result)
    slow, fast = _steps(result, 1), _steps(result, 0)
    assert all(s["slowdown"] == 10.0 and s["injected_s"] > 0 for s in slow)
    assert all(s["slowdown"] == 1.0 and s["injected_s"] == 0 for s in fast)
    measured = [s for s in slow if s["phase"] == "measure"]
    # the delay is compute of the slow rank: its compute time exceeds the fast rank's
    med = sorted(s["compute_s"] for s in measured)[len(measured) // 2]
    med_fast = sorted(s["compute_s"] for s in fast if s["phase"] == "measure")[len(measured) // 2]
    assert med > med_fast
    summary = result.summary(1)
    assert summary["injected_steps"] == 12 and summary["injected_s"] > 0
    assert result.summary(0)["injected_steps"] == 0


@pytest.mark.slow
def test_b0_gives_the_losses_of_plain_ddp(launch_ranks, run_config, check_data_parallel):
    common = dict(steps={"warmup": 2, "measure": 10}, seed=7)
    ddp = launch_ranks(
        "pytorch", run_config("pytorch", framework_options={"backend": "gloo"}, **common)
    )
    check_data_parallel(ddp)
    cfg = run_config(
        "pytorch", framework_options={"backend": "gloo", "backup_workers": 0}, **common
    )
    cfg["run_id"] = "test-pytorch-b0"
    b0 = launch_ranks("pytorch", cfg)
    check_data_parallel(b0)
    for rank in range(2):
        assert _losses(b0, rank) == pytest.approx(_losses(ddp, rank), rel=1e-6, abs=1e-7)
        assert all(s["dropped"] == [] for s in _steps(b0, rank))
    assert b0.logs[0][0]["backup_workers"] == 0 and b0.logs[0][0]["ddp"] is False
    assert b0.summary(0)["param_sum"] == pytest.approx(ddp.summary(0)["param_sum"], rel=1e-6)


@pytest.mark.slow
def test_b1_drops_the_injected_straggler(launch_ranks, run_config, check_data_parallel):
    """3 ranks, 1 backup; rank 2 is 20x slower every step: it is dropped in every step, the
    two others are kept, and all three end with the same parameters."""
    cfg = run_config(
        "pytorch",
        framework_options={"backend": "gloo", "backup_workers": 1, "threads": 1},
        steps={"warmup": 2, "measure": 10},
        tasks_per_node=3,
        world_size=3,
        global_batch_size=96,
        inject={"straggler": {"ranks": [2], "slowdown": 20.0}},
    )
    result = launch_ranks("pytorch", cfg, world_size=3, extra_env={"DDLBENCH_STATE_DIGEST": "1"})
    check_data_parallel(result)  # every rank wrote the same param_sha256
    digests = [[s["state_sha256"] for s in _steps(result, r)] for r in range(3)]
    assert digests[0] == digests[1] == digests[2]  # ... and held the same state every step
    for rank in range(3):
        measured = [s for s in _steps(result, rank) if s["phase"] == "measure"]
        assert [s["dropped"] for s in measured] == [[2]] * 10
        assert result.summary(rank)["dropped_steps"] == (10 if rank == 2 else 0)
    # the straggler stopped waiting once two ranks were ready: its steps end with theirs
    slow = [s for s in _steps(result, 2) if s["phase"] == "measure"]
    assert all(s["arrival"] in (3, None) for s in slow)  # None: dropped before it finished
    slow = [s["injected_s"] for s in slow]
    assert max(slow) < 0.5


def test_b1_random_stragglers_keep_parameters_equal(launch_ranks, run_config, check_data_parallel):
    cfg = run_config(
        "pytorch",
        framework_options={"backend": "gloo", "backup_workers": 1, "threads": 1},
        steps={"warmup": 2, "measure": 16},
        inject={"straggler": {"probability": 0.3, "min_slowdown": 2.0, "seed": 3}},
    )
    result = launch_ranks("pytorch", cfg, world_size=2)
    check_data_parallel(result)
    for rank in range(2):
        for s in _steps(result, rank):
            assert len(s["dropped"]) == 1  # exactly N = 1 gradient kept every step
    assert sum(result.summary(r)["dropped_steps"] for r in range(2)) == 16
