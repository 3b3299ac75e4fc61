"""Keras' and MXNet's SGD keep the rate in the velocity (``v = m v - lr g; w += v``); the
workloads rescale it when the rate changes (``momentum_correction``), so that the update is
PyTorch's ``v = m v + g; w -= lr v`` step for step through warmup and decay, as the other
workloads apply it (docs/workloads.md#learning-rate-schedule). One parameter, gradient 1 +
weight decay 0 (the plain update), momentum 0.9, a rate that warms up, holds and decays."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.envs import require_env
from tests.support.repo import ROOT

pytestmark = pytest.mark.frameworks

RATES = [0.02, 0.04, 0.06, 0.08, 0.1] + [0.1] * 10 + [0.01] * 10 + [0.001] * 5


def _torch_form(rates):
    """The steps ``w -= lr v`` with ``v = m v + g`` (g = 1)."""
    v, steps = 0.0, []
    for lr in rates:
        v = 0.9 * v + 1.0
        steps.append(lr * v)
    return steps


KERAS = r"""
import json, os, sys
os.environ["CUDA_VISIBLE_DEVICES"] = ""
from ddlbench.workloads.tf.keras_main import import_keras, momentum_correction
tf, keras = import_keras()
rates = json.loads(sys.argv[1])
w = keras.Variable([0.0])
opt = keras.optimizers.SGD(learning_rate=rates[0], momentum=0.9)
correct = momentum_correction(tf, opt)
steps, old = [], None
for lr in rates:
    if old is not None and lr != old:
        opt.learning_rate.assign(lr)
        correct(lr / old)
    old = lr
    before = float(w.numpy()[0])
    opt.apply_gradients([(tf.ones(1), w)])
    steps.append(before - float(w.numpy()[0]))
print(json.dumps(steps))
"""

MXNET = r"""
import json, sys
import mxnet as mx
from mxnet import autograd, gluon
from ddlbench.workloads.mx.mxnet_main import momentum_correction
rates = json.loads(sys.argv[1])
p = gluon.Parameter("w", shape=(1,), init=mx.init.Zero())
p.initialize(ctx=mx.cpu())
trainer = gluon.Trainer([p], sys.argv[2], {"learning_rate": rates[0], "momentum": 0.9},
                        update_on_kvstore=False, kvstore=None)
steps, old = [], None
for lr in rates:
    if old is not None and lr != old:
        trainer.set_learning_rate(lr)
        momentum_correction(trainer, lr / old)
    old = lr
    before = float(p.data().asnumpy()[0])
    with autograd.record():
        loss = p.data().sum()  # gradient 1
    loss.backward()
    trainer.step(1)
    steps.append(before - float(p.data().asnumpy()[0]))
print(json.dumps(steps))
"""


def _steps(env: str, script: str, *args: str):
    python = require_env(env)
    proc = subprocess.run(
        [python, "-c", script, json.dumps(RATES), *args],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_keras_steps_equal_pytorchs_through_warmup_and_decay():
    assert _steps("tensorflow", KERAS) == pytest.approx(
        _torch_form(RATES), rel=1e-3
    )  # float32 weights


@pytest.mark.parametrize("optimizer", ["sgd", "nag"])
def test_mxnet_steps_equal_the_corrected_form(optimizer):
    got = _steps("mxnet", MXNET, optimizer)
    if optimizer == "sgd":
        assert got == pytest.approx(_torch_form(RATES), rel=1e-3)  # float32 weights
    else:  # Nesterov in PyTorch's form: w -= lr (g + m v)
        v, want = 0.0, []
        for lr in RATES:
            v = 0.9 * v + 1.0
            want.append(lr * (1.0 + 0.9 * v))
        assert got == pytest.approx(want, rel=1e-3)  # float32 weights
