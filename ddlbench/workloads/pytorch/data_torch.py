"""PyTorch training data for a rank: the common kinds as tensors on the rank's device, and
image folders decoded with Pillow in ``DataLoader`` workers (docs/workloads.md#data).

Used by the ``pytorch`` and ``horovod_torch`` workloads (through ``pytorch.make_data``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import torch

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

Batch = Tuple[torch.Tensor, torch.Tensor]


def _to_device(x: np.ndarray, y: np.ndarray, device: torch.device) -> Batch:
    nb = device.type == "cuda"
    return (
        torch.from_numpy(np.ascontiguousarray(x)).to(device, non_blocking=nb),
        torch.from_numpy(np.ascontiguousarray(y)).to(device, non_blocking=nb),
    )


def make_data(cfg: Dict[str, Any], info: RankInfo, device: torch.device) -> TrainData:
    """Training (and validation) data for this rank (see common/data.py for the kinds)."""

    def to_device(x: np.ndarray, y: np.ndarray) -> Batch:
        return _to_device(x, y, device)

    def imagefolder(seed: int) -> TrainData:
        return _imagefolder_data(cfg, info, device, seed)

    return rank_train_data(cfg, info, "NCHW", to_device, to_device, imagefolder)


def _pillow_image() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("data kind imagefolder needs Pillow in the torch environment") from exc
    return Image


class _DecodeImage:
    """One image file to a normalised CHW tensor with Pillow: shorter side resized to
    ``size * 256 / 224``, random crop and flip for training, centre crop otherwise."""

    def __init__(self, image_module: Any, size: int, channels: int) -> None:
        self.image, self.size, self.channels = image_module, size, channels
        self.mode = "L" if channels == 1 else "RGB"
        self.mean, self.std = (
            torch.tensor(v).view(channels, 1, 1) for v in image_mean_std(channels)
        )
        self.flip = getattr(image_module, "Transpose", image_module).FLIP_LEFT_RIGHT

    def __call__(self, path: str, train: bool) -> torch.Tensor:
        size = self.size
        with self.image.open(path) as f:
            img = f.convert(self.mode)
        scale = size * 256 / 224 / min(img.size)
        img = img.resize(
            (max(size, round(img.size[0] * scale)), max(size, round(img.size[1] * scale)))
        )
        w, h = img.size
        if train:
            left, top = np.random.randint(0, w - size + 1), np.random.randint(0, h - size + 1)
        else:
            left, top = (w - size) // 2, (h - size) // 2
        img = img.crop((left, top, left + size, top + size))
        if train and np.random.rand() < 0.5:
            img = img.transpose(self.flip)
        arr = np.asarray(img, dtype=np.float32).reshape(size, size, self.channels) / 255.0
        arr = torch.from_numpy(arr).permute(2, 0, 1)
        return (arr - self.mean) / self.std


class _ImageFolder(torch.utils.data.Dataset):
    def __init__(
        self, decode: _DecodeImage, paths: List[str], labels: np.ndarray, train: bool
    ) -> None:
        self.decode, self.paths, self.labels, self.train = decode, paths, labels, train

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> Batch:
        return self.decode(self.paths[i], self.train), torch.tensor(int(self.labels[i]))


class _ShardOrder(torch.utils.data.Sampler):
    """This rank's shard, reshuffled every epoch (training: ``count`` samples)."""

    def __init__(self, n: int, shuffle: bool, count: int, seed: int) -> None:
        self.n, self.shuffle, self.count, self.seed, self.epoch = n, shuffle, count, seed, 0

    def __iter__(self) -> Iterator[int]:
        if not self.shuffle:
            return iter(range(self.n))
        rng = np.random.RandomState((self.seed + 104729 * self.epoch) % (2**31 - 1))
        return iter(rng.permutation(self.n)[: self.count].tolist())

    def __len__(self) -> int:
        return self.count


@dataclass
class _FolderLoaders:
    """DataLoaders over this rank's shards of an image folder's splits."""

    decode: _DecodeImage
    info: RankInfo
    batch: int
    workers: int
    seed: int
    device: torch.device

    def make(
        self, paths: List[str], labels: np.ndarray, train: bool, count: int
    ) -> Tuple[Any, _ShardOrder]:
        idx = shard_indices(len(paths), self.info.rank, self.info.world_size)
        ds = _ImageFolder(self.decode, [paths[i] for i in idx], labels[idx], train)
        order = _ShardOrder(len(idx), train, count if train else len(idx), self.seed)
        seed = self.seed
        loader = torch.utils.data.DataLoader(
            ds,
            batch_size=self.batch,
            sampler=order,
            num_workers=self.workers,
            persistent_workers=self.workers > 0,  # no worker start-up cost every epoch
            pin_memory=self.device.type == "cuda",
            worker_init_fn=lambda w: np.random.seed((seed + 7919 * w) % (2**31 - 1)),
        )
        return loader, order

    def on_device(self, loader: Any) -> Iterator[Batch]:
        device = self.device
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def _imagefolder_data(
    cfg: Dict[str, Any], info: RankInfo, device: torch.device, seed: int
) -> TrainData:
    """Image folders decoded with Pillow in DataLoader workers (gray for 1-channel models)."""
    (train_paths, train_labels, _classes), val_index = imagefolder_split(
        cfg["data"].get("path"), cfg["num_classes"]
    )
    decode = _DecodeImage(_pillow_image(), int(cfg["image_size"]), input_channels(cfg["model"]))
    batch = int(cfg["batch_size"])
    loaders = _FolderLoaders(decode, info, batch, data_workers(cfg), seed, device)
    spe = steps_per_epoch(len(train_paths), info.world_size, batch)
    train_loader, train_order = loaders.make(train_paths, train_labels, True, spe * batch)

    def batches(epoch: int) -> Iterator[Batch]:
        train_order.epoch = epoch
        return loaders.on_device(train_loader)

    val = None
    if val_index is not None:
        val_loader, _ = loaders.make(val_index[0], val_index[1], False, 0)

        def val() -> Iterator[Batch]:
            return loaders.on_device(val_loader)

    return TrainData(spe, batches=batches, val=val)
