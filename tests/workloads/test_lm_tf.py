"""The transformer language models of the TensorFlow and Keras workloads: 2 real ranks on the
CPU under MultiWorkerMirroredStrategy (ring all-reduce), in the ``tensorflow`` environment.

One campaign of three runs, shared by the tests: gpt-tiny on synthetic tokens with two
micro-batches per step under ``tensorflow`` (explicit all-reduce) and under ``keras`` (the
optimizer's all-reduce), which give the same losses step by step (the same seeded model and
tokens: the two frameworks differ only in who all-reduces); llama-tiny on Shakespeare under
``keras``, whose loss falls.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.frameworks

#: relative tolerance between the tensorflow and keras runs' step losses: the same model,
#: tokens and all-reduced gradients, but Keras' AdamW adds epsilon to sqrt(v) before the bias
#: correction (Kingma and Ba's epsilon-hat) and the tensorflow workload's, as PyTorch's, after
#: it; token-table rows whose gradients are near epsilon step differently (measured: 1.03e-4
#: relative at the fifth step)
LOSS_RTOL = 1e-3
SEQ = 32


def lm_config(framework: str, model: str = "gpt-tiny", kind: str = "synthetic", **lm):
    from tests.support.lm_runs import tiny_lm_settings
    from tests.support.ranks import base_run_config

    settings = tiny_lm_settings(SEQ, "ddp", lm)
    settings.update(
        framework_options={"communication": "ring"},
        model=model,
        data={"kind": kind, "path": None, "samples": 1024},
    )
    return base_run_config(framework, **settings)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs (2 ranks each), once for the module."""
    from tests.support.envs import require_env
    from tests.support.ranks import launch

    require_env("tensorflow")
    text = lm_config("keras", "llama-tiny", "text")
    text["steps"] = {"warmup": 1, "measure": 15}
    configs = {
        "tensorflow": lm_config("tensorflow", grad_accum=2),
        "keras": lm_config("keras", grad_accum=2),
        "text": text,
    }
    out = {}
    for name, cfg in configs.items():
        workload = cfg["workload"]
        result = launch(tmp_path_factory.mktemp(name), workload, cfg, env="tensorflow", timeout=300)
        result.check_ok()
        out[name] = result
    return out


def _losses(result, rank):
    return [s["loss"] for s in result.records(rank, "step")]


@pytest.mark.parametrize("name", ("tensorflow", "keras", "text"))
def test_trains_data_parallel_and_records_tokens(runs, name, validate_log):
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params

    result = runs[name]
    accum = 1 if name == "text" else 2
    for rank in range(2):
        validate_log(result.logs[rank])
        meta = result.logs[rank][0]
        model = meta["model"]
        # the Keras model has exactly the parameters the shape counts
        assert meta["param_count"] == transformer_params(TRANSFORMER_SHAPES[model])["total"]
        assert meta["strategy"] == "MultiWorkerMirroredStrategy"
        assert meta["lm"]["parallel"] == "ddp" and meta["lm"]["grad_accum"] == accum
        assert meta["tokens_per_step"] == accum * 4 * SEQ and meta["tokens_per_sample"] == SEQ
        assert set(meta["startup"]) == {"import_s", "process_group_s", "build_shard_s"}
        assert all(v > 0 for v in meta["startup"].values())
        assert meta["flops_per_token"]["palm"] > meta["flops_per_token"]["megatron"] > 0
        summary = result.summary(rank)
        steps = summary["steps_measured"]
        assert summary["status"] == "ok" and summary["tokens_measured"] == steps * accum * 4 * SEQ
        assert summary["tokens_per_s"] == pytest.approx(
            summary["tokens_measured"] / summary["measure_time_s"]
        )
        assert summary["peak_rss_model_bytes"] > 0 and summary["first_step_s"] > 0
        assert all(s["samples"] == accum * 4 for s in result.records(rank, "step"))
    # the mirrored variables are the same on both workers after training
    assert result.summary(0)["param_sha256"] == result.summary(1)["param_sha256"]


def test_frameworks_recorded(runs):
    tf_meta, keras_meta = runs["tensorflow"].logs[0][0], runs["keras"].logs[0][0]
    assert tf_meta["framework"] == "tensorflow" and tf_meta["framework_version"].startswith("2.")
    assert tf_meta["backend"] == "ring" and tf_meta["keras_version"].startswith("3.")
    assert keras_meta["framework"] == "keras" and keras_meta["framework_version"].startswith("3.")
    assert keras_meta["tensorflow_version"] == tf_meta["framework_version"]


def test_tensorflow_and_keras_agree_step_by_step(runs):
    """The explicit all-reduce (tensorflow) and the optimizer's (keras): the same losses."""
    for rank in range(2):
        reference = _losses(runs["tensorflow"], rank)
        assert len(reference) == 5 and reference[-1] < reference[0]
        assert _losses(runs["keras"], rank) == pytest.approx(reference, rel=LOSS_RTOL)
        # each worker logs the loss of its own tokens
    assert _losses(runs["tensorflow"], 0) != _losses(runs["tensorflow"], 1)


def test_loss_on_real_text_falls(runs):
    """Shakespeare tokenized with cl100k (offline), llama-tiny: from about ln(50257) = 10.8
    the loss falls by more than 1.5 nats in 16 steps."""
    result = runs["text"]
    for rank in range(2):
        losses = _losses(result, rank)
        assert losses[0] == pytest.approx(10.8, abs=0.3)
        assert sum(losses[-3:]) / 3 < losses[0] - 1.5, losses
    assert _losses(result, 0) != _losses(result, 1)


BF16 = r"""
import json, os
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np, tensorflow as tf, keras
keras.mixed_precision.set_global_policy("mixed_bfloat16")
from ddlbench.workloads.tf.models_lm_tf import build_lm, param_count
out = {}
ids = tf.constant(np.random.RandomState(0).randint(0, 50257, (2, 17)).astype("int32"))
for name in ("gpt-tiny", "llama-tiny"):
    model = build_lm(name, 16, seed=0)
    with tf.GradientTape() as tape:
        logits = model(ids[:, :-1])
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(ids[:, 1:], tf.cast(logits, tf.float32))
        loss = tf.reduce_mean(ce)
    grads = tape.gradient(loss, model.trainable_variables)
    out[name] = {
        "logits": [list(logits.shape), logits.dtype.name],
        "variables": sorted({v.dtype for v in model.trainable_variables}),
        "params": param_count(model),
        "loss": float(loss),
        "grads_finite": all(bool(tf.reduce_all(tf.math.is_finite(g))) for g in grads),
    }
print(json.dumps(out))
"""


def test_bf16_policy_builds_and_differentiates(framework_python):
    """Under ``mixed_bfloat16`` (what ``precision: bf16`` sets on a GPU) both styles compute in
    bfloat16 with float32 variables, and their gradients are finite (one process, the CPU)."""
    import json
    import os
    import subprocess

    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params
    from tests.support.repo import ROOT

    python = framework_python("tensorflow")
    if python is None:
        pytest.skip("tensorflow environment not built")
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([python, "-c", BF16], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, got in json.loads(proc.stdout.splitlines()[-1]).items():
        assert got["logits"] == [[2, 16, 50257], "bfloat16"] and got["variables"] == ["float32"]
        assert got["params"] == transformer_params(TRANSFORMER_SHAPES[name])["total"]
        assert got["loss"] == pytest.approx(10.8, abs=0.3) and got["grads_finite"], name
