"""Warnings about a spec's data set that the login node can check before a job waits in the
queue (docs/spec.md#data): a run whose ranks get less than one batch each from the training
split, and for an image folder visible here, a convergence run without the ``val/`` folder
it evaluates on. Each such run would fail seconds after it starts. They never stop a spec
(an image folder may look different on the compute nodes, or be staged there)."""

from __future__ import annotations

import os
from typing import List, Optional, Sequence

from ddlbench.plan.advice import warning_line
from ddlbench.plan.planner import Plan, Run
from ddlbench.spec.yamlsource import YamlSource

#: scikit-learn's digits (1,797 images), less the workload's validation fifth
#: (``DIGITS_VAL_FRACTION`` in ``workloads/common/data.py``; a test keeps the two equal)
DIGITS_TRAIN = 1797 - round(1797 * 0.2)
#: MNIST's training split
MNIST_TRAIN = 60_000
#: the image suffixes the workloads' image-folder loader reads (``IMAGE_EXTENSIONS`` there)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def data_warnings(plan: Plan, source: Optional[YamlSource]) -> List[str]:
    """One ``file:line: warning: data...: what`` line per problem of the spec's data set."""
    spec = plan.spec
    if spec.workload is not None or spec.mode == "allreduce":
        return []
    data = spec.data
    if data.kind == "digits":
        return _too_small(plan.runs, DIGITS_TRAIN, "digits' training split", source, "kind")
    if data.kind == "mnist":
        return _too_small(plan.runs, MNIST_TRAIN, "MNIST's training split", source, "kind")
    if data.kind == "imagefolder" and data.path:
        return _image_folder(plan, data.path, source)
    return []


def _image_folder(plan: Plan, path: str, source: Optional[YamlSource]) -> List[str]:
    if not os.path.isdir(path):
        return [
            warning_line(source, ("data", "path"),
                     f"{path}: no such folder on this host, so it was not checked (ignore this "
                     "if it exists only on the compute nodes)")
        ]  # fmt: skip
    out = []
    val = os.path.join(path, "val")
    if plan.spec.mode == "convergence" and not os.path.isdir(val):
        out.append(
            warning_line(source, ("data", "path"),
                     f"{path} has no val/ folder: a convergence run evaluates on "
                     f"{path}/val/<class>/<image> after each epoch, and every run would fail "
                     "at its start ('convergence mode needs a validation split')")
        )  # fmt: skip
    train = os.path.join(path, "train")
    root = train if os.path.isdir(train) else path
    need = max((r.world_size * r.batch_size for r in plan.runs), default=0)
    found = count_images(root, need)
    return out + _too_small(plan.runs, found, f"{root} ({found} images)", source, "path")


def count_images(root: str, stop: int) -> int:
    """Images under ``root/<class>/``, counted up to ``stop`` (a large folder is not walked
    whole: only whether it holds enough matters)."""
    n = 0
    for cls in sorted(os.listdir(root)):
        for _path, _dirs, files in os.walk(os.path.join(root, cls), followlinks=True):
            n += sum(1 for f in files if f.lower().endswith(IMAGE_SUFFIXES))
            if n >= stop:
                return n
    return n


def _too_small(
    runs: Sequence[Run], samples: int, what: str, source: Optional[YamlSource], key: str
) -> List[str]:
    short = sorted({(r.world_size, r.batch_size) for r in runs if samples // r.world_size
                    < r.batch_size})  # fmt: skip
    if not short:
        return []
    listed = ", ".join(f"{w} x {b}" for w, b in short)
    return [
        warning_line(source, ("data", key),
                 f"{what} has fewer than one batch per rank for the runs at {listed} "
                 "(ranks x batch per rank): each would fail at its start; use smaller batches, "
                 "fewer ranks or a larger data set")
    ]  # fmt: skip
