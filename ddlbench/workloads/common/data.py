"""Data for the workloads, as numpy arrays (frameworks convert them once).

Kinds (``data.kind`` in run.json):

- ``synthetic``: one random batch of the model's input shape, generated once per
  rank (seed derived from the run seed and the rank) and reused every step, so
  the benchmark measures training, not input pipelines.
- ``digits``: scikit-learn's bundled ``load_digits`` (1,797 8x8 images, no network
  needed), upsampled bilinearly to the model's image size, with a fixed
  deterministic train/validation split; each rank reads its own shard of it.
- ``mnist``: the four IDX files (optionally gzipped) in ``data.path``; train
  files for training, ``t10k`` files for validation.
- ``imagefolder``: ``data.path`` holds ``train/<class>/<image>`` and optionally
  ``val/<class>/<image>``; this module only indexes it, decoding is the
  framework loader's business.
"""

from __future__ import annotations

import gzip
import os
import struct
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from .config import framework_options, input_channels
from .env import RankInfo

DIGITS_SPLIT_SEED = 2017
DIGITS_VAL_FRACTION = 0.2
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
# ImageNet's per-channel mean and std (of pixels scaled to [0, 1]); gray images (1-channel
# models) use the mean of the three
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GRAY_MEAN, GRAY_STD = 0.449, 0.226


def data_seed(seed: int, rank: int) -> int:
    """Per-rank seed for data (synthetic inputs, shuffling): differs across ranks."""
    return (int(seed) * 1_000_003 + 7919 * int(rank) + 17) % (2**31 - 1)


def synthetic_batch(
    batch_size: int,
    image_size: int,
    num_classes: int,
    channels: int = 3,
    layout: str = "NCHW",
    seed: int = 0,
) -> Tuple[np.ndarray, np.ndarray]:
    """Random float32 images (standard normal) and int64 labels in ``[0, num_classes)``."""
    rng = np.random.RandomState(seed)
    if layout == "NCHW":
        shape = (batch_size, channels, image_size, image_size)
    elif layout == "NHWC":
        shape = (batch_size, image_size, image_size, channels)
    else:
        raise ValueError(f"unknown layout {layout!r}")
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.randint(0, num_classes, size=(batch_size,)).astype(np.int64)
    return x, y


def _interp_matrix(src: int, dst: int) -> np.ndarray:
    """(dst, src) matrix of bilinear weights (half-pixel centres, edges clamped)."""
    m = np.zeros((dst, src), dtype=np.float64)
    for i in range(dst):
        pos = (i + 0.5) * src / dst - 0.5
        pos = min(max(pos, 0.0), src - 1.0)
        lo = int(np.floor(pos))
        hi = min(lo + 1, src - 1)
        frac = pos - lo
        m[i, lo] += 1.0 - frac
        m[i, hi] += frac
    return m


def upsample_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Resize ``(N, h, w)`` images to ``(N, size, size)`` bilinearly."""
    n, h, w = images.shape
    if (h, w) == (size, size):
        return images.astype(np.float32)
    rows, cols = _interp_matrix(h, size), _interp_matrix(w, size)
    out = np.einsum("ij,njk,lk->nil", rows, images.astype(np.float64), cols)
    return out.astype(np.float32)


@dataclass
class ArraySplit:
    """A whole data set: float32 images ``(N, 1, H, W)`` and int64 labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray


def load_digits_split(
    image_size: int = 28, val_fraction: float = DIGITS_VAL_FRACTION
) -> ArraySplit:
    """scikit-learn's digits, upsampled, split by a fixed permutation (seed 2017).

    The first ``1 - val_fraction`` of the permutation is the train split. Pixels
    are scaled to [0, 1] and standardised with the train split's mean and std.
    """
    from sklearn.datasets import load_digits  # bundled with scikit-learn, no download

    digits = load_digits()
    images = upsample_bilinear(digits.images.astype(np.float32) / 16.0, image_size)
    labels = digits.target.astype(np.int64)
    order = np.random.RandomState(DIGITS_SPLIT_SEED).permutation(len(labels))
    n_val = int(round(len(labels) * val_fraction))
    train, val = order[: len(labels) - n_val], order[len(labels) - n_val :]
    mean, std = float(images[train].mean()), float(images[train].std())
    images = ((images - mean) / std).astype(np.float32)[:, None, :, :]
    return ArraySplit(images[train], labels[train], images[val], labels[val])


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (MNIST's format), gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise ValueError(f"{path}: not an IDX file")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if dtype_code not in dtypes:
        raise ValueError(f"{path}: unknown IDX type 0x{dtype_code:02x}")
    shape = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=dtypes[dtype_code], offset=4 + 4 * ndim)
    return arr.reshape(shape).astype(arr.dtype.newbyteorder("="))


def _find(folder: str, stem: str) -> str:
    for name in (
        stem,
        stem + ".gz",
        stem.replace("-idx", ".idx"),
        stem.replace("-idx", ".idx") + ".gz",
    ):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no {stem}[.gz] in {folder}")


def load_mnist_split(path: str, image_size: int = 28) -> ArraySplit:
    """MNIST from its four IDX files; ``t10k`` is the validation split."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"mnist data.path {path}: no such folder")
    parts = []
    for prefix in ("train", "t10k"):
        x = read_idx(_find(path, prefix + "-images-idx3-ubyte")).astype(np.float32) / 255.0
        y = read_idx(_find(path, prefix + "-labels-idx1-ubyte")).astype(np.int64)
        if x.ndim != 3 or y.shape != (len(x),):
            raise ValueError(
                f"{path}: {prefix} images {x.shape} and labels {y.shape} do not match "
                "(expected (N, H, W) and (N,))"
            )
        x = upsample_bilinear(x, image_size)
        parts.append((((x - MNIST_MEAN) / MNIST_STD).astype(np.float32)[:, None], y))
    return ArraySplit(parts[0][0], parts[0][1], parts[1][0], parts[1][1])


def shard_indices(n: int, rank: int, world_size: int) -> np.ndarray:
    """This rank's indices of ``range(n)``: ``rank, rank + world, ...``.

    The shards of all ranks are disjoint and together cover ``range(n)``; their
    sizes differ by at most one.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")
    return np.arange(rank, n, world_size, dtype=np.int64)


def steps_per_epoch(n_train: int, world_size: int, batch_size: int) -> int:
    """Steps every rank takes per epoch: the smallest shard's full batches.

    The same on all ranks (collectives must match); a shard's samples beyond it
    are still seen in later epochs because shards are reshuffled every epoch.
    """
    steps = (n_train // world_size) // batch_size
    if steps < 1:
        raise ValueError(
            f"{n_train} training samples over {world_size} ranks "
            f"do not fill one batch of {batch_size}"
        )
    return steps


class Shard:
    """One rank's part of a split, as arrays."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def batches(
        self, batch_size: int, steps: Optional[int] = None, seed: Optional[int] = None
    ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """``steps`` full batches (default: all full ones), shuffled with ``seed`` if given.

        Without ``steps`` and ``seed`` (evaluation) the last, partial batch is included.
        """
        n = len(self.y)
        if seed is None and steps is None:
            for start in range(0, n, batch_size):
                yield self.x[start : start + batch_size], self.y[start : start + batch_size]
            return
        order = np.arange(n) if seed is None else np.random.RandomState(seed).permutation(n)
        if steps is None:
            steps = n // batch_size
        if steps * batch_size > n:
            raise ValueError(f"{steps} batches of {batch_size} exceed the shard's {n} samples")
        for i in range(steps):
            idx = order[i * batch_size : (i + 1) * batch_size]
            yield self.x[idx], self.y[idx]


@dataclass
class RankData:
    """What one rank trains and validates on."""

    train: Shard
    val: Shard
    steps_per_epoch: int
    train_size: int  # global sizes
    val_size: int

    def epoch_batches(
        self, epoch: int, batch_size: int, seed: int
    ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """The epoch's training batches, reshuffled every epoch with ``seed + epoch``."""
        return self.train.batches(
            batch_size, self.steps_per_epoch, seed=(seed + 104729 * epoch) % (2**31 - 1)
        )


def _fit_channels(x: np.ndarray, channels: int, layout: str) -> np.ndarray:
    if channels != x.shape[1]:
        x = np.repeat(x, channels, axis=1)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return x


def load_array_split(cfg: Dict[str, Any]) -> ArraySplit:
    """The whole ``digits`` or ``mnist`` data set of a run config."""
    kind, size = cfg["data"]["kind"], int(cfg["image_size"])
    if kind == "digits":
        return load_digits_split(size)
    if kind == "mnist":
        path = cfg["data"].get("path")
        if not path:
            raise ValueError("data kind mnist needs data.path (a folder with the IDX files)")
        return load_mnist_split(path, size)
    raise ValueError(f"data kind {kind!r} is not an array data set")


def load_rank_data(cfg: Dict[str, Any], info: RankInfo, layout: str = "NCHW") -> RankData:
    """This rank's shards of the train and validation splits (``digits`` or ``mnist``).

    ``layout`` is ``NCHW`` (PyTorch, MXNet) or ``NHWC`` (TensorFlow); gray
    images are repeated to the model's channel count.
    """
    split = load_array_split(cfg)
    channels = input_channels(cfg["model"])
    tr = shard_indices(len(split.y_train), info.rank, info.world_size)
    va = shard_indices(len(split.y_val), info.rank, info.world_size)
    return RankData(
        train=Shard(_fit_channels(split.x_train[tr], channels, layout), split.y_train[tr]),
        val=Shard(_fit_channels(split.x_val[va], channels, layout), split.y_val[va]),
        steps_per_epoch=steps_per_epoch(
            len(split.y_train), info.world_size, int(cfg["batch_size"])
        ),
        train_size=len(split.y_train),
        val_size=len(split.y_val),
    )


def image_mean_std(channels: int) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Per-channel ``(mean, std)`` an image loader normalises with (pixels in [0, 1]):
    ImageNet's for 3 channels, their means for 1 (gray input, e.g. lenet)."""
    if channels == 1:
        return (GRAY_MEAN,), (GRAY_STD,)
    if channels == 3:
        return IMAGENET_MEAN, IMAGENET_STD
    raise ValueError(f"no image normalisation for {channels} channels")


def image_folder_index(
    root: str, classes: Optional[List[str]] = None
) -> Tuple[List[str], np.ndarray, List[str]]:
    """``(paths, labels, classes)`` of ``root/<class>/<image>``, classes and files sorted.

    With ``classes`` (the training split's), labels follow that list, so that a validation
    folder lacking a class still labels the others as training did; a class folder not in
    ``classes`` is an error.
    """
    found = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    if not found:
        raise ValueError(f"{root}: no class folders (expected {root}/<class>/<image>)")
    if classes is None:
        classes = found
    unknown = [c for c in found if c not in classes]
    if unknown:
        raise ValueError(f"{root}: class folders not in the training set: {', '.join(unknown)}")
    paths: List[str] = []
    labels: List[int] = []
    for cls in found:
        label = classes.index(cls)
        for dirpath, _dirs, files in sorted(os.walk(os.path.join(root, cls), followlinks=True)):
            for name in sorted(files):
                if name.lower().endswith(IMAGE_EXTENSIONS):
                    paths.append(os.path.join(dirpath, name))
                    labels.append(label)
    if not paths:
        raise ValueError(f"{root}: no images ({', '.join(IMAGE_EXTENSIONS)}) in the class folders")
    return paths, np.asarray(labels, dtype=np.int64), list(classes)


def imagefolder_split(
    path: Optional[str],
    num_classes: Optional[int] = None,
    decodable: Optional[Tuple[str, ...]] = None,
):
    """Index ``path/train`` and ``path/val`` (``val`` may be absent: then ``None``).

    Without a ``train`` folder, ``path`` itself is the training set. Validation labels use
    the training split's classes. With ``num_classes`` (the model's outputs), more classes
    than that is an error (labels would be out of range). With ``decodable`` (the extensions
    the framework's decoder reads), an image of another type is an error now rather than
    in the middle of training.
    """
    # the job script's staging step copied data.path to node-local storage (docs/launching.md)
    path = os.environ.get("DDLBENCH_STAGED_DATA") or path
    if not path:
        raise ValueError("data kind imagefolder needs data.path")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"imagefolder data.path {path}: no such folder")
    train_root = os.path.join(path, "train")
    if not os.path.isdir(train_root):
        train_root = path
    val_root = os.path.join(path, "val")
    train = image_folder_index(train_root)
    classes = train[2]
    if num_classes is not None and len(classes) > int(num_classes):
        raise ValueError(
            f"{train_root}: {len(classes)} classes, more than the model's num_classes {num_classes}"
        )
    val = image_folder_index(val_root, classes) if os.path.isdir(val_root) else None
    if decodable is not None:
        for paths in (train[0], val[0] if val else []):
            other = sorted({os.path.splitext(p)[1].lower() for p in paths} - set(decodable))
            if other:
                raise ValueError(
                    f"{path}: {', '.join(other)} images cannot be decoded by this "
                    f"framework's loader (it reads {', '.join(decodable)})"
                )
    return train, val


class TrainData:
    """A rank's data: a fixed (device-resident) synthetic batch, or per-epoch batch iterators
    (``batches(epoch)``) with an optional validation iterator (``val()``)."""

    def __init__(
        self,
        steps_per_epoch: float,
        fixed: Optional[Tuple[Any, Any]] = None,
        batches: Optional[Callable[[int], Iterator[Any]]] = None,
        val: Optional[Callable[[], Iterator[Any]]] = None,
    ) -> None:
        self.steps_per_epoch = steps_per_epoch
        self.fixed = fixed
        self.batches = batches
        self.val = val


def data_workers(cfg: Dict[str, Any]) -> int:
    """Image-folder loader workers: ``framework_options.data_workers``; by default the rank's
    cores but one (``DDLBENCH_CORES_PER_TASK`` - 1, the job script's ``cpus_per_task``), at
    least 1; 4 outside a job script."""
    got = framework_options(cfg).get("data_workers")
    if got is not None:
        return int(got)
    cores = os.environ.get("DDLBENCH_CORES_PER_TASK", "")
    return max(1, int(cores) - 1) if cores.isdigit() else 4


Convert = Callable[[np.ndarray, np.ndarray], Tuple[Any, Any]]


def rank_train_data(
    cfg: Dict[str, Any],
    info: RankInfo,
    layout: str,
    fixed: Convert,
    convert: Convert,
    imagefolder: Callable[[int], TrainData],
) -> TrainData:
    """This rank's :class:`TrainData` for ``data.kind`` with arrays in ``layout``.

    ``fixed(x, y)`` moves the synthetic batch to the device (once); ``convert(x, y)`` each
    digits/MNIST batch; ``imagefolder(seed)`` builds the framework's image-folder loader. The
    seed is :func:`data_seed` of the run seed and the rank."""
    kind = cfg["data"]["kind"]
    batch = int(cfg["batch_size"])
    seed = data_seed(cfg["seed"], info.rank)
    if kind == "synthetic":
        x, y = synthetic_batch(
            batch,
            int(cfg["image_size"]),
            int(cfg["num_classes"]),
            input_channels(cfg["model"]),
            layout,
            seed,
        )
        samples = int(cfg["data"].get("samples") or cfg["global_batch_size"])
        return TrainData(samples / cfg["global_batch_size"], fixed=fixed(x, y))
    if kind in ("digits", "mnist"):
        data = load_rank_data(cfg, info, layout)

        def batches(epoch: int) -> Iterator[Any]:
            for bx, by in data.epoch_batches(epoch, batch, seed):
                yield convert(bx, by)

        def val() -> Iterator[Any]:
            for bx, by in data.val.batches(max(batch, 256)):
                yield convert(bx, by)

        return TrainData(data.steps_per_epoch, batches=batches, val=val)
    if kind == "imagefolder":
        return imagefolder(seed)
    raise ValueError(f"unknown data kind {kind!r}")
