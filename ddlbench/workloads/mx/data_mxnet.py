"""MXNet input pipelines: this rank's batches as NDArrays on its device, for every data kind of
``common/data.py``, and the image-folder reader (``mx.image`` decoding in a Gluon DataLoader).

Used by ``ddlbench.workloads.mx.mxnet_main``; see docs/workloads.md#data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np

from ..common import (
    RankInfo,
    TrainData,
    data_workers,
    image_mean_std,
    imagefolder_split,
    input_channels,
    rank_train_data,
    shard_indices,
    steps_per_epoch,
)

# (not PPM/PGM, not WebP)
DECODABLE = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff")


def make_data(
    mx: Any, cfg: Dict[str, Any], info: RankInfo, ctx: Any, layout: str = "NCHW"
) -> TrainData:
    """This rank's data in ``layout`` (NCHW or NHWC; common/data.py for the kinds)."""

    def to_nd(x: np.ndarray, y: np.ndarray) -> Tuple[Any, Any]:
        return mx.nd.array(x, ctx=ctx, dtype="float32"), mx.nd.array(y, ctx=ctx, dtype="float32")

    def fixed(x: np.ndarray, y: np.ndarray) -> Tuple[Any, Any]:
        batch = to_nd(x, y)
        mx.nd.waitall()
        return batch

    def imagefolder(seed: int) -> TrainData:
        folder = imagefolder_data(mx, cfg, info, ctx, seed)
        return folder if layout == "NCHW" else _to_nhwc(folder)

    return rank_train_data(cfg, info, layout, fixed, to_nd, imagefolder)


def _to_nhwc(data: TrainData) -> TrainData:
    """The image-folder batches (decoded NCHW) transposed to NHWC on the device."""

    def nhwc(it: Iterator[Any]) -> Iterator[Any]:
        for x, y in it:
            yield x.transpose((0, 2, 3, 1)), y

    batches, val = data.batches, data.val
    assert batches is not None
    return TrainData(
        data.steps_per_epoch,
        batches=lambda epoch: nhwc(iter(batches(epoch))),
        val=None if val is None else (lambda: nhwc(iter(val()))),
    )


class DecodeImage:
    """One image file to a normalised CHW array with ``mx.image``: shorter side resized to
    ``size * 256 / 224``, random crop and flip for training, centre crop otherwise."""

    def __init__(self, mx: Any, size: int, channels: int) -> None:
        self.mx, self.size, self.channels = mx, size, channels
        self.mean, self.std = (
            np.array(v, dtype=np.float32).reshape(channels, 1, 1) * 255.0
            for v in image_mean_std(channels)
        )
        self.short = int(round(size * 256 / 224))

    def __call__(self, path: str, train: bool) -> np.ndarray:
        mx, size = self.mx, self.size
        img = mx.image.imread(path, flag=1 if self.channels == 3 else 0)
        img = mx.image.resize_short(img, self.short)
        if train:
            img, _ = mx.image.random_crop(img, (size, size))
            if np.random.rand() < 0.5:
                img = mx.nd.flip(img, axis=1)
        else:
            img, _ = mx.image.center_crop(img, (size, size))
        arr = img.asnumpy().astype(np.float32).transpose(2, 0, 1)
        return (arr - self.mean) / self.std


def folder_dataset(decode: DecodeImage) -> Any:
    """A Gluon ``Dataset`` class over image paths and labels, decoded by ``decode``."""
    from mxnet import gluon

    class Folder(gluon.data.Dataset):
        def __init__(self, paths: List[str], labels: np.ndarray, train: bool) -> None:
            self.paths, self.labels, self.train = paths, labels, train

        def __len__(self) -> int:
            return len(self.paths)

        def __getitem__(self, i: int) -> Tuple[np.ndarray, np.float32]:
            return decode(self.paths[i], self.train), np.float32(self.labels[i])

    return Folder


@dataclass
class FolderLoader:
    """Batches of this rank's shard of an image-folder split, on the device."""

    dataset: Any
    info: RankInfo
    batch: int
    workers: int
    seed: int
    ctx: Any

    def __call__(
        self, paths: List[str], labels: np.ndarray, train: bool, epoch: int
    ) -> Iterator[Any]:
        from mxnet import gluon

        idx = shard_indices(len(paths), self.info.rank, self.info.world_size)
        if train:
            idx = idx[np.random.RandomState((self.seed + epoch) % (2**31)).permutation(len(idx))]
        ds = self.dataset([paths[i] for i in idx], labels[idx], train)
        # thread_pool: forked loader processes would inherit the rank's SIGTERM handler and
        # raise in the middle of the pool's shutdown, which can hang the rank at the end
        dl = gluon.data.DataLoader(
            ds, batch_size=self.batch, shuffle=False, last_batch="discard" if train else "keep",
            num_workers=self.workers, thread_pool=True,
        )  # fmt: skip
        for x, y in dl:
            yield x.as_in_context(self.ctx), y.as_in_context(self.ctx)


def imagefolder_data(
    mx: Any, cfg: Dict[str, Any], info: RankInfo, ctx: Any, seed: int
) -> TrainData:
    """``train/<class>/<image>`` folders decoded with ``mx.image`` in a Gluon DataLoader
    (:class:`DecodeImage`, gray for 1-channel models). Each rank reads its own shard of the
    file list."""
    (train_paths, train_labels, _classes), val_index = imagefolder_split(
        cfg["data"].get("path"), cfg["num_classes"], DECODABLE
    )
    batch = int(cfg["batch_size"])
    decode = DecodeImage(mx, int(cfg["image_size"]), input_channels(cfg["model"]))
    loader = FolderLoader(folder_dataset(decode), info, batch, data_workers(cfg), seed, ctx)
    spe = steps_per_epoch(len(train_paths), info.world_size, batch)

    def batches(epoch: int) -> Iterator[Any]:
        it = loader(train_paths, train_labels, True, epoch)
        return (b for _, b in zip(range(spe), it))

    val = None
    if val_index is not None:
        val_paths, val_labels, _ = val_index

        def val() -> Iterator[Any]:
            return loader(val_paths, val_labels, False, 0)

    return TrainData(spe, batches=batches, val=val)
