"""Tiny deterministic data sets in the formats of the ``mnist`` and ``imagefolder`` data kinds.

Written with numpy and Pillow (a dependency of matplotlib, hence of ddlbench) in the test
process; the workloads then read them with their framework's own loaders.

- :func:`write_mnist`: the four IDX files of MNIST (the train pair gzipped), 28x28 gray
  images of 10 classes that LeNet separates within a few dozen steps: class ``c`` is a bright
  bar (horizontal for ``c < 5``, vertical otherwise) at a class-dependent position, jittered
  by a pixel or two, on a noisy background.
- :func:`write_image_folder`: ``train/<class>/`` and ``val/<class>/`` with 3 classes of
  stripe patterns (horizontal, vertical, checkerboard: a horizontal flip keeps the class),
  random period, phase, colour and noise, as RGB PNG, gray PNG and JPEG files of a
  non-square size (so that the loaders resize), plus a non-image file that must be ignored.
- :func:`write_id_folder`: flat gray images whose value identifies the file (``8 * i``), so
  that a loader's batches can be traced back to the files they came from.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

MNIST_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
STRIPE_CLASSES = ("checker", "horizontal", "vertical")


def write_idx(path: Path, arr: np.ndarray) -> None:
    """An IDX file of unsigned bytes (gzipped when ``path`` ends with ``.gz``)."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = struct.pack(">HBB", 0, 0x08, arr.ndim) + struct.pack(">" + "I" * arr.ndim, *arr.shape)
    data = header + arr.tobytes()
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)


def bar_images(labels: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """28x28 uint8 images: class ``c`` is a 3-pixel bar at position ``4 + 4 * (c % 5)``."""
    images = rng.randint(0, 60, size=(len(labels), 28, 28)).astype(np.int32)
    for img, c in zip(images, labels):
        pos = 4 + 4 * (int(c) % 5) + rng.randint(-1, 2)
        lo, hi = rng.randint(2, 6), rng.randint(22, 27)
        if c < 5:
            img[pos : pos + 3, lo:hi] += 180
        else:
            img[lo:hi, pos : pos + 3] += 180
    return np.clip(images, 0, 255).astype(np.uint8)


def write_mnist(
    folder: Path, n_train: int = 640, n_val: int = 100, seed: int = 0
) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
    """MNIST's four IDX files in ``folder`` (created); returns ``{prefix: (images, labels)}``
    as written (``train``, ``t10k``)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(seed)
    out = {}
    for prefix, n, gz in (("train", n_train, ".gz"), ("t10k", n_val, "")):
        labels = (np.arange(n) % 10)[rng.permutation(n)].astype(np.uint8)
        images = bar_images(labels, rng)
        write_idx(folder / f"{prefix}-images-idx3-ubyte{gz}", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte{gz}", labels)
        out[prefix] = (images, labels)
    return out


def stripe_image(cls: int, rng: np.random.RandomState, width: int, height: int) -> np.ndarray:
    """``(height, width, 3)`` uint8: stripes of class ``cls`` of :data:`STRIPE_CLASSES`."""
    period = rng.randint(6, 11)
    yy, xx = np.mgrid[0:height, 0:width]
    phase = rng.randint(0, period)
    name = STRIPE_CLASSES[cls]
    if name == "horizontal":
        on = ((yy + phase) // (period // 2)) % 2
    elif name == "vertical":
        on = ((xx + phase) // (period // 2)) % 2
    else:
        on = (((yy + phase) // (period // 2)) + ((xx + phase) // (period // 2))) % 2
    colour = rng.randint(150, 256, size=3)
    img = on[:, :, None] * colour[None, None, :] + rng.randint(0, 50, size=(height, width, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_image_folder(
    root: Path, train_per_class: int = 48, val_per_class: int = 12, seed: int = 0
) -> Dict[str, List[str]]:
    """``root/train/<class>/*`` and ``root/val/<class>/*`` of :data:`STRIPE_CLASSES`.

    Images are 40x34 (W x H); every third is saved as JPEG, every fifth as gray PNG, the rest
    as RGB PNG. Returns the relative paths of the images written, per split."""
    from PIL import Image

    rng = np.random.RandomState(seed)
    written: Dict[str, List[str]] = {"train": [], "val": []}
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for cls, name in enumerate(STRIPE_CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                img = Image.fromarray(stripe_image(cls, rng, 40, 34), "RGB")
                if i % 3 == 2:
                    file = f"{i:03d}.jpg"
                    img.save(folder / file, quality=95)
                else:
                    file = f"{i:03d}.png"
                    (img.convert("L") if i % 5 == 4 else img).save(folder / file)
                written[split].append(f"{split}/{name}/{file}")
        (root / split / STRIPE_CLASSES[0] / "notes.txt").write_text("not an image\n")
    return written


def write_id_folder(
    root: Path, train_per_class: int = 16, val_per_class: int = 5
) -> Dict[str, List[Tuple[int, int]]]:
    """Two classes ``c0``, ``c1`` of flat gray 24x20 PNGs; image ``i`` of a split (in the
    sorted order a loader indexes them) has the value ``8 * i`` and the class
    ``i // per_class``. Returns ``{split: [(value, label), ...]}`` in that order."""
    from PIL import Image

    out: Dict[str, List[Tuple[int, int]]] = {}
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        out[split] = []
        for i in range(2 * per_class):
            label = i // per_class
            folder = root / split / f"c{label}"
            folder.mkdir(parents=True, exist_ok=True)
            value = 8 * i
            Image.new("L", (24, 20), value).save(folder / f"{i:03d}.png")
            out[split].append((value, label))
    return out
