"""The ``mnist`` and ``imagefolder`` data kinds on real files (tests/support/datagen.py),
read through each framework's own loader.

- Training runs, 2 real ranks on the CPU: PyTorch on mnist and on an image folder, TensorFlow
  and MXNet on an image folder (convergence mode, so the validation split is evaluated).
- Loader probes: each framework's ``make_data`` for ranks 0 and 1 of 2, in one process, on a
  folder of flat images whose gray value names the file (and on mnist, whose images are known):
  which samples each rank's batches hold, epoch by epoch, and its validation batches.
- A missing or empty ``data.path``: the rank logs an ``error`` record that names the path.
- The index and error messages of ``ddlbench.workloads.common`` (numpy only, no framework).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

from ddlbench.workloads.common import (
    RankInfo,
    image_mean_std,
    imagefolder_split,
    load_rank_data,
    normalize_run_config,
)
from tests.support.envs import require_env
from tests.support.ranks import describe_ps, launch_ps
from tests.support.repo import ROOT

frameworks = pytest.mark.frameworks


def losses(result, rank: int) -> List[float]:
    return [s["loss"] for s in result.records(rank, "step")]


def check_training(result, steps: int, batch: int, epochs: int, val_size: int) -> None:
    """Per rank: ``steps`` steps of ``batch`` samples in every epoch, one global evaluation
    of the whole validation split per epoch (the same on both ranks), loss going down."""
    for rank in range(2):
        records = result.records(rank, "step")
        assert [s["epoch"] for s in records] == [e for e in range(epochs) for _ in range(steps)]
        assert all(s["samples"] == batch and s["phase"] == "measure" for s in records)
        evals = result.records(rank, "eval")
        assert [e["epoch"] for e in evals] == list(range(epochs))
        assert all(e["samples"] == val_size for e in evals), evals
        summary = result.summary(rank)
        assert summary["steps_measured"] == steps * epochs
        assert summary["samples_measured"] == steps * epochs * batch
        values = losses(result, rank)
        assert sum(values[-steps:]) / steps < sum(values[:4]) / 4 - 0.5, values
    assert [e["accuracy"] for e in result.records(0, "eval")] == [
        e["accuracy"] for e in result.records(1, "eval")
    ]
    # the ranks trained on different shards: different losses, identical parameters
    assert losses(result, 0) != losses(result, 1)


def require_pillow(python: str) -> None:
    """PyTorch's imagefolder loader decodes with Pillow, which the torch environment needs.
    Missing, it is a skip, or a failure under CI once scripts/envs/torch.txt pins Pillow."""
    if subprocess.run([python, "-c", "import PIL"], capture_output=True).returncode == 0:
        return
    pins = (ROOT / "scripts" / "envs" / "torch.txt").read_text().lower()
    if os.environ.get("CI") and "\npillow" in pins:
        pytest.fail(f"Pillow is not installed in {python}'s environment (CI builds it)")
    pytest.skip(f"Pillow is not installed in {python}'s environment (scripts/envs/torch.txt)")


# -- training runs ------------------------------------------------------------------------------
@frameworks
def test_pytorch_mnist_two_ranks(launch_ranks, run_config, check_data_parallel, mnist_data):
    cfg = run_config(
        "pytorch",
        mode="convergence",
        epochs=2,
        data={"kind": "mnist", "path": str(mnist_data.path)},
        batch_size=16,
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=120)
    check_data_parallel(result)
    check_training(result, steps=640 // 2 // 16, batch=16, epochs=2, val_size=100)
    assert result.summary(0)["best_accuracy"] >= 0.8, result.records(0, "eval")  # chance: 0.1


@frameworks
def test_pytorch_imagefolder_two_ranks(launch_ranks, run_config, check_data_parallel, image_folder):
    require_pillow(require_env("torch"))
    cfg = run_config(
        "pytorch",
        mode="convergence",
        epochs=4,
        data={"kind": "imagefolder", "path": str(image_folder.path)},
        framework_options={"data_workers": 1},
        batch_size=8,
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=120)
    check_data_parallel(result)
    check_training(result, steps=144 // 2 // 8, batch=8, epochs=4, val_size=36)
    assert result.summary(0)["best_accuracy"] >= 0.6, result.records(0, "eval")  # chance: 1/3


@frameworks
def test_tensorflow_imagefolder_two_ranks(
    launch_ranks, run_config, check_data_parallel, image_folder
):
    cfg = run_config(
        "tensorflow",
        mode="convergence",
        epochs=4,
        data={"kind": "imagefolder", "path": str(image_folder.path)},
        framework_options={"communication": "ring"},
        batch_size=8,
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    result = launch_ranks("tensorflow", cfg, world_size=2, env="tensorflow", timeout=240)
    check_data_parallel(result)
    check_training(result, steps=144 // 2 // 8, batch=8, epochs=4, val_size=36)
    assert result.summary(0)["best_accuracy"] >= 0.6, result.records(0, "eval")


@frameworks
def test_mxnet_imagefolder_two_workers(tmp_path, run_config, check_data_parallel, image_folder):
    cfg = run_config(
        "mxnet",
        mode="convergence",
        epochs=4,
        data={"kind": "imagefolder", "path": str(image_folder.path)},
        framework_options={"kvstore": "dist_sync", "data_workers": 1},
        batch_size=8,
        optimizer={"lr": 0.02, "base_lr": 0.02},
    )
    run = launch_ps(tmp_path, cfg)
    assert all(code == 0 for code in run["codes"].values()), describe_ps(run)
    result = run["result"]
    check_data_parallel(result)
    check_training(result, steps=144 // 2 // 8, batch=8, epochs=4, val_size=36)
    assert result.summary(0)["best_accuracy"] >= 0.6, result.records(0, "eval")


# -- which samples each rank's loader yields ---------------------------------------------------
PROBE = r"""
import hashlib, json, sys
import numpy as np
from ddlbench.workloads.common import RankInfo, normalize_run_config

framework, configs = sys.argv[1], json.loads(sys.argv[2])
if framework == "torch":
    import torch
    from ddlbench.workloads.pytorch.torch_main import make_data
    load = lambda cfg, info: make_data(cfg, info, torch.device("cpu"))
    arrays = lambda b: (b[0].numpy(), b[1].numpy())
elif framework == "tensorflow":
    import tensorflow as tf
    from ddlbench.workloads.tf.tf_main import make_data
    load = lambda cfg, info: make_data(tf, cfg, info, "/CPU:0")
    arrays = lambda b: (b[0].numpy(), b[1].numpy())
else:
    import mxnet as mx
    from ddlbench.workloads.mx.mxnet_main import make_data
    load = lambda cfg, info: make_data(mx, cfg, info, mx.cpu())
    arrays = lambda b: (b[0].asnumpy(), b[1].asnumpy())

def samples(batches, mean, std):
    # each sample as [sha1 of its 28x28 uint8 pixels before normalisation, label]
    out, sizes = [], []
    for batch in batches:
        x, y = arrays(batch)
        pixels = np.round((x.reshape(len(x), 28, 28) * std + mean) * 255).astype(np.uint8)
        out += [[hashlib.sha1(p.tobytes()).hexdigest(), int(v)] for p, v in zip(pixels, y)]
        sizes.append(len(y))
    return out, sizes

result = []
for raw, (mean, std) in configs:
    cfg = normalize_run_config(raw)
    ranks = []
    for rank in range(2):
        data = load(cfg, RankInfo(rank, rank, 0, 2, 2, 1, "host", None, None))
        epochs = [samples(data.batches(e), mean, std) for e in range(2)]
        ranks.append({"steps_per_epoch": data.steps_per_epoch,
                      "epochs": [e[0] for e in epochs], "sizes": [e[1] for e in epochs],
                      "val": samples(data.val(), mean, std)[0]})
    result.append(ranks)
print("PROBE " + json.dumps(result))
"""


def sha(pixels: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(pixels, dtype=np.uint8).tobytes()).hexdigest()


def check_shards(ranks: List[Dict[str, Any]], train: List, val: List, batch: int) -> None:
    """``train``/``val``: ``[hash, label]`` of every sample of the split in index order.
    Rank ``r`` of 2 must read exactly indices ``r, r + 2, ...`` (each once per epoch, in an
    order reshuffled every epoch, in full batches) and all of its validation shard, with the
    right labels. The sizes are chosen so that every training shard fills whole batches."""
    assert len({h for h, _ in train}) == len(train) and len({h for h, _ in val}) == len(val)
    for rank, got in enumerate(ranks):
        shard = sorted(train[rank::2])
        spe = len(shard) // batch
        assert spe * batch == len(shard) and got["steps_per_epoch"] == spe
        for epoch in range(2):
            assert got["sizes"][epoch] == [batch] * spe
            assert sorted(got["epochs"][epoch]) == shard, (rank, epoch)
        assert got["epochs"][0] != got["epochs"][1], "the shard was not reshuffled"
        assert sorted(got["val"]) == sorted(val[rank::2])
    seen = [{h for h, _ in got["epochs"][0]} for got in ranks]
    assert not seen[0] & seen[1], "the ranks' training shards overlap"


@frameworks
@pytest.mark.parametrize("env", ["torch", "tensorflow", "mxnet"])
def test_loader_shards(env, run_config, mnist_data, id_folder, tmp_path):
    python = require_env(env)
    workload = {"torch": "pytorch"}.get(env, env)
    (gray_mean,), (gray_std,) = image_mean_std(1)
    configs = [
        (
            run_config(
                workload,
                data={"kind": "mnist", "path": str(mnist_data.path)},
                batch_size=16,
                log_dir=str(tmp_path),
            ),
            (0.1307, 0.3081),
        )
    ]
    pillow = subprocess.run([python, "-c", "import PIL"], capture_output=True).returncode == 0
    if env != "torch" or pillow:
        configs.append(
            (
                run_config(
                    workload,
                    data={"kind": "imagefolder", "path": str(id_folder.path)},
                    framework_options={"data_workers": 2},
                    batch_size=8,
                    log_dir=str(tmp_path),
                ),
                (gray_mean, gray_std),
            )
        )
    env_vars = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    env_vars.pop("DMLC_ROLE", None)
    proc = subprocess.run(
        [python, "-c", PROBE, env, json.dumps(configs)],
        env=env_vars,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE "))
    results = json.loads(line[len("PROBE ") :])

    images = {p: mnist_data.items[p] for p in ("train", "t10k")}
    train = [[sha(x), int(y)] for x, y in zip(*images["train"])]
    val = [[sha(x), int(y)] for x, y in zip(*images["t10k"])]
    check_shards(results[0], train, val, batch=16)
    if len(results) == 1:
        require_pillow(python)  # skip (or fail under CI) after the mnist part passed
    flat = {
        split: [[sha(np.full((28, 28), v)), label] for v, label in id_folder.items[split]]
        for split in ("train", "val")
    }
    check_shards(results[1], flat["train"], flat["val"], batch=8)


# -- a missing or empty data.path --------------------------------------------------------------
@frameworks
@pytest.mark.parametrize(
    ("kind", "make", "message"),
    [
        ("mnist", None, "mnist data.path {path}: no such folder"),
        ("imagefolder", "mkdir", "{path}: no class folders"),
    ],
)
def test_missing_data_path_logs_a_clear_error(
    kind, make, message, launch_ranks, run_config, validate_log, tmp_path
):
    path = tmp_path / "data"
    if make:
        path.mkdir()
    cfg = run_config("pytorch", data={"kind": kind, "path": str(path)})
    result = launch_ranks("pytorch", cfg, world_size=2, timeout=120)
    assert result.returncodes == [1, 1], result.describe()
    for rank in range(2):
        records = result.logs[rank]
        validate_log(records, complete=False)
        assert records[0]["framework_version"] != "unknown"  # the real meta came first
        error = records[-1]
        assert error["type"] == "error", records
        assert message.format(path=path) in error["message"], error["message"]
        assert not result.records(rank, "step")


# -- the shared index (numpy only) -------------------------------------------------------------
def _info(rank: int, world: int) -> RankInfo:
    return RankInfo(rank, rank, 0, world, world, 1, "host", None, None)


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")


def test_imagefolder_index_and_errors(tmp_path, image_folder):
    (paths, labels, classes), (vpaths, vlabels, vclasses) = imagefolder_split(
        str(image_folder.path), num_classes=3
    )
    assert classes == vclasses == ["checker", "horizontal", "vertical"]
    assert [os.path.relpath(p, image_folder.path) for p in paths] == image_folder.items["train"]
    assert labels.tolist() == [0] * 48 + [1] * 48 + [2] * 48  # notes.txt is skipped
    assert len(vpaths) == 36 and vlabels.tolist() == [0] * 12 + [1] * 12 + [2] * 12
    with pytest.raises(ValueError, match="3 classes, more than the model's num_classes 2"):
        imagefolder_split(str(image_folder.path), num_classes=2)

    # a validation folder without a class keeps the training split's labels
    root = tmp_path / "partial"
    for split, cls in (("train", "a"), ("train", "b"), ("train", "c"), ("val", "c")):
        _touch(root / split / cls / "0.png")
    (_, labels, classes), (_, vlabels, vclasses) = imagefolder_split(str(root))
    assert classes == vclasses == ["a", "b", "c"] and vlabels.tolist() == [2]
    _touch(root / "val" / "d" / "0.png")
    with pytest.raises(ValueError, match="class folders not in the training set: d"):
        imagefolder_split(str(root))

    # no train/ folder: the path itself is the training set, without validation
    (paths, labels, classes), val = imagefolder_split(str(root / "train"))
    assert classes == ["a", "b", "c"] and len(paths) == 3 and val is None

    with pytest.raises(FileNotFoundError, match="no such folder"):
        imagefolder_split(str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="needs data.path"):
        imagefolder_split(None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class folders"):
        imagefolder_split(str(tmp_path / "empty"))
    (tmp_path / "noimages" / "train" / "a").mkdir(parents=True)
    _touch(tmp_path / "noimages" / "train" / "a" / "readme.txt")
    with pytest.raises(ValueError, match="no images"):
        imagefolder_split(str(tmp_path / "noimages"))

    # a type the framework's decoder does not read fails before training, naming the type
    _touch(root / "train" / "b" / "1.PPM")
    (paths, _, _), _ = imagefolder_split(str(root / "train"), decodable=(".png", ".ppm"))
    assert len(paths) == 4
    with pytest.raises(ValueError, match=r"\.ppm images cannot be decoded .* reads \.png, \.jpg"):
        imagefolder_split(str(root / "train"), decodable=(".png", ".jpg"))


def test_image_mean_std():
    assert image_mean_std(3) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert image_mean_std(1) == ((0.449,), (0.226,))
    with pytest.raises(ValueError):
        image_mean_std(4)


def test_mnist_files_found_and_errors(tmp_path, mnist_data, run_config):
    cfg = normalize_run_config(
        run_config(
            "pytorch",
            data={"kind": "mnist", "path": str(mnist_data.path)},
            batch_size=16,
            log_dir=str(tmp_path),
        )
    )
    parts = [load_rank_data(cfg, _info(r, 2)) for r in range(2)]
    assert [len(p.train) for p in parts] == [320, 320] and [len(p.val) for p in parts] == [50, 50]
    images, labels = mnist_data.items["train"]
    assert parts[1].train.y.tolist() == labels[1::2].tolist()
    assert np.allclose(parts[1].train.x[0, 0], (images[1] / 255.0 - 0.1307) / 0.3081, atol=1e-5)

    cfg["data"]["path"] = str(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_rank_data(cfg, _info(0, 2))
    from tests.support.datagen import write_idx

    broken = tmp_path / "broken"
    broken.mkdir()
    for name in os.listdir(mnist_data.path):
        (broken / name).write_bytes((mnist_data.path / name).read_bytes())
    write_idx(broken / "t10k-labels-idx1-ubyte", mnist_data.items["t10k"][1][:-1])
    cfg["data"]["path"] = str(broken)
    with pytest.raises(ValueError, match="t10k images .* and labels .* do not match"):
        load_rank_data(cfg, _info(0, 2))
    os.remove(broken / "train-labels-idx1-ubyte.gz")
    with pytest.raises(FileNotFoundError, match="no train-labels-idx1-ubyte"):
        load_rank_data(cfg, _info(0, 2))
