"""Every framework builds the same networks: trainable-parameter counts and the LeNet layer list.

Each framework is checked in its own environment (a subprocess of that environment's python),
against the canonical counts of docs/workloads.md and against each other. A framework whose
environment is absent is skipped with the reason (failed under CI, which builds them all).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict

import pytest

from tests.support.envs import env_python, envs_root
from tests.support.repo import ROOT

pytestmark = pytest.mark.frameworks


CANONICAL = {
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "lenet": 61_706,
}
# docs/workloads.md, LeNet: parameters of conv1, conv2, fc 400->120, fc 120->84, fc 84->10
LENET_LAYER_PARAMS = [156, 2_416, 48_120, 10_164, 850]

TF_PROBE = r"""
import json, os
os.environ["CUDA_VISIBLE_DEVICES"] = ""
import keras
from ddlbench.workloads.tf import models_tf as m
out = {"counts": {}}
for name in m.MODELS:
    side, classes = (28, 10) if name == "lenet" else (224, 1000)
    model = m.build_model(keras, name, side, classes)
    out["counts"][name] = m.count_params(model.trainable_variables)
    if name == "lenet":
        out["lenet_layers"] = [
            [layer.__class__.__name__, list(layer.output.shape[1:]),
             m.count_params(layer.trainable_variables)]
            for layer in model.layers[1:]
        ]
        out["lenet_logits"] = list(model(keras.ops.zeros((2, 28, 28, 1))).shape)
    del model
    keras.backend.clear_session()
small = m.build_model(keras, "resnet50", 64, 1000)  # global pooling: any input size
out["resnet50_small"] = m.count_params(small.trainable_variables)
out["resnet50_logits"] = list(small(keras.ops.zeros((1, 64, 64, 3))).shape)
print("RESULT " + json.dumps(out))
"""

MX_PROBE = r"""
import json
import mxnet as mx
from ddlbench.workloads.mx import models_mxnet as m
out = {"counts": {}}
for name in m.MODELS:
    side, classes = (28, 10) if name == "lenet" else (224, 1000)
    net = m.build_model(name, classes, side)
    m.initialize(net, mx.cpu(), side, m.default_channels(name), 0)
    out["counts"][name] = m.count_params(net)
    if name == "lenet":
        x = mx.nd.zeros((2, 1, 28, 28))
        layers = []
        for child in [net.conv1, net.pool1, net.conv2, net.pool2, net.fc1, net.fc2, net.fc3]:
            x = child(x)
            params = sum(p.data().size for p in child.collect_params().values())
            layers.append([child.__class__.__name__, list(x.shape[1:]), int(params)])
        out["lenet_layers"] = layers
        out["lenet_logits"] = list(net(mx.nd.zeros((2, 1, 28, 28))).shape)
    if name == "resnet50":
        out["resnet50_logits"] = list(net(mx.nd.zeros((1, 3, 64, 64))).shape)
print("RESULT " + json.dumps(out))
"""


def probe(env: str, code: str) -> Dict[str, Any]:
    python = env_python(env)
    if python is None:
        where = envs_root() / env
        if os.environ.get("CI"):
            pytest.fail(f"framework environment {env!r} missing at {where} (CI builds it)")
        pytest.skip(f"framework environment {env!r} not built at {where}")
    penv = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [python, "-c", code], env=penv, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def tf_probe() -> Dict[str, Any]:
    return probe("tensorflow", TF_PROBE)


@pytest.fixture(scope="module")
def mx_probe() -> Dict[str, Any]:
    return probe("mxnet", MX_PROBE)


def test_tensorflow_keras_models_have_canonical_counts(tf_probe):
    assert tf_probe["counts"] == CANONICAL
    assert tf_probe["lenet_logits"] == [2, 10]
    assert tf_probe["resnet50_logits"] == [1, 1000]
    assert tf_probe["resnet50_small"] == CANONICAL["resnet50"]


def test_tensorflow_lenet_layer_list(tf_probe):
    # NHWC output shapes; the layer list of docs/workloads.md
    assert tf_probe["lenet_layers"] == [
        ["Conv2D", [28, 28, 6], 156],
        ["MaxPooling2D", [14, 14, 6], 0],
        ["Conv2D", [10, 10, 16], 2_416],
        ["MaxPooling2D", [5, 5, 16], 0],
        ["Flatten", [400], 0],
        ["Dense", [120], 48_120],
        ["Dense", [84], 10_164],
        ["Dense", [10], 850],
    ]


def test_mxnet_models_have_canonical_counts(mx_probe):
    assert mx_probe["counts"] == CANONICAL
    assert mx_probe["lenet_logits"] == [2, 10]
    assert mx_probe["resnet50_logits"] == [1, 1000]


def test_mxnet_lenet_layer_list(mx_probe):
    # NCHW output shapes; Gluon's Dense flattens its input itself
    assert mx_probe["lenet_layers"] == [
        ["Conv2D", [6, 28, 28], 156],
        ["MaxPool2D", [6, 14, 14], 0],
        ["Conv2D", [16, 10, 10], 2_416],
        ["MaxPool2D", [16, 5, 5], 0],
        ["Dense", [120], 48_120],
        ["Dense", [84], 10_164],
        ["Dense", [10], 850],
    ]


def test_frameworks_agree(tf_probe, mx_probe):
    assert tf_probe["counts"] == mx_probe["counts"]
    tf_layers = [p for _, _, p in tf_probe["lenet_layers"] if p]
    mx_layers = [p for _, _, p in mx_probe["lenet_layers"] if p]
    assert tf_layers == mx_layers == LENET_LAYER_PARAMS


def test_torch_agrees_when_built():
    """The PyTorch definitions (tested in test_pytorch.py) give the same counts."""
    code = (
        "import json, torch\n"
        "from ddlbench.workloads.pytorch.models_torch import MODELS, build_model, param_count\n"
        "out = {}\n"
        "for n in MODELS:\n"
        "    side, classes = (28, 10) if n == 'lenet' else (224, 1000)\n"
        "    with torch.device('meta'):\n"
        "        out[n] = param_count(build_model(n, classes, side))\n"
        "print('RESULT ' + json.dumps({'counts': out}))\n"
    )
    counts = probe("torch", code)["counts"]
    assert {k: counts[k] for k in CANONICAL} == CANONICAL
