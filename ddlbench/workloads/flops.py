"""Analytic FLOP counts of the benchmark models (login-node safe, standard library only).

Counting rules (docs/mfu.md):

* Only convolutions and fully connected layers are counted. A convolution producing an
  ``H' x W' x C_out`` output from ``C_in`` channels with a ``k x k`` kernel does
  ``H' * W' * C_out * C_in * k * k`` multiply-accumulates (MACs); a linear layer ``in * out``.
  Biases, batch norm, activations, pooling, residual additions and the loss are left out
  (about 0.5 % of ResNet-50's forward pass).
* One MAC is two floating-point operations: forward FLOPs = 2 x MACs. The "4.1 GFLOPs" often
  quoted for ResNet-50 at 224x224 are MACs (4.09 G); in FLOPs the forward pass is 8.2 G.
* Training FLOPs per sample = 3 x forward: the backward pass computes the gradients with
  respect to the activations and to the weights, each about one forward pass.

The layer lists follow the models of ``ddlbench/workloads/models_*.py`` (the three frameworks
build the same networks): LeNet-5 variant, ResNet-50 v1.5, VGG-16/19 (configurations D, E).
Standard library only, Python 3.8 syntax: the workloads import it on the compute nodes;
``ddlbench.analyse.flops`` re-exports it for the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

#: backward pass = 2 x forward (activation and weight gradients)
TRAINING_FACTOR = 3
FLOPS_PER_MAC = 2


@dataclass(frozen=True)
class Layer:
    """One counted layer: its name and multiply-accumulates per sample."""

    name: str
    macs: int


class _Shape:
    """Walks a network's shapes layer by layer, collecting :class:`Layer` entries."""

    def __init__(self, channels: int, side: int) -> None:
        self.channels, self.side = channels, side
        self.layers: List[Layer] = []

    def conv(self, name: str, out: int, k: int, stride: int = 1, pad: int = 0) -> None:
        side = (self.side + 2 * pad - k) // stride + 1
        self.layers.append(Layer(name, side * side * out * self.channels * k * k))
        self.channels, self.side = out, side

    def pool(self, k: int, stride: int, pad: int = 0) -> None:
        self.side = (self.side + 2 * pad - k) // stride + 1

    def linear(self, name: str, inputs: int, out: int) -> None:
        self.layers.append(Layer(name, inputs * out))
        self.channels, self.side = out, 1


def lenet_layers(image_size: int = 28, num_classes: int = 10) -> List[Layer]:
    s = _Shape(1, image_size)
    s.conv("conv1", 6, 5, pad=2)
    s.pool(2, 2)
    s.conv("conv2", 16, 5)
    s.pool(2, 2)
    s.linear("fc1", 16 * s.side * s.side, 120)
    s.linear("fc2", 120, 84)
    s.linear("fc3", 84, num_classes)
    return s.layers


#: bottleneck blocks per stage of the ResNets counted here (He et al. 2016, Table 1)
RESNET_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}


def resnet_layers(model: str, image_size: int = 224, num_classes: int = 1000) -> List[Layer]:
    """ResNet-50/101/152 v1.5: the stride of a downsampling bottleneck sits on its 3x3
    convolution."""
    s = _Shape(3, image_size)
    s.conv("conv1", 64, 7, stride=2, pad=3)
    s.pool(3, 2, pad=1)
    stages = zip((64, 128, 256, 512), RESNET_BLOCKS[model])
    for stage, (planes, blocks) in enumerate(stages):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            name = f"layer{stage + 1}.{b}"
            inplanes, side = s.channels, s.side
            s.conv(f"{name}.conv1", planes, 1)
            s.conv(f"{name}.conv2", planes, 3, stride=stride, pad=1)
            s.conv(f"{name}.conv3", planes * 4, 1)
            if b == 0:
                out_side = (side - 1) // stride + 1
                macs = out_side * out_side * planes * 4 * inplanes
                s.layers.append(Layer(f"{name}.downsample", macs))
    s.linear("fc", s.channels, num_classes)
    return s.layers


_VGG = {
    "vgg16": [64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0],
    "vgg19": [64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0]
    + [512, 512, 512, 512, 0, 512, 512, 512, 512, 0],
}


def vgg_layers(model: str, image_size: int = 224, num_classes: int = 1000) -> List[Layer]:
    """VGG without batch norm; adaptive average pooling to 7x7 before the classifier."""
    s = _Shape(3, image_size)
    for i, width in enumerate(_VGG[model]):
        if width == 0:
            s.pool(2, 2)
        else:
            s.conv(f"features.{i}", width, 3, pad=1)
    s.linear("fc1", 512 * 7 * 7, 4096)
    s.linear("fc2", 4096, 4096)
    s.linear("fc3", 4096, num_classes)
    return s.layers


def model_layers(model: str, image_size: int, num_classes: int) -> List[Layer]:
    """The counted layers of ``model`` (``ValueError`` for a model without a counter)."""
    if model == "lenet":
        return lenet_layers(image_size, num_classes)
    if model in RESNET_BLOCKS:
        return resnet_layers(model, image_size, num_classes)
    if model in _VGG:
        return vgg_layers(model, image_size, num_classes)
    raise ValueError(f"no FLOP counter for model {model!r}")


def forward_macs(model: str, image_size: int, num_classes: int) -> int:
    return sum(layer.macs for layer in model_layers(model, image_size, num_classes))


def forward_flops(model: str, image_size: int, num_classes: int) -> int:
    return FLOPS_PER_MAC * forward_macs(model, image_size, num_classes)


def training_flops_per_sample(model: str, image_size: int, num_classes: int) -> int:
    """FLOPs of one training sample: 3 x forward (docs/mfu.md)."""
    return TRAINING_FACTOR * forward_flops(model, image_size, num_classes)


def summary(model: str, image_size: int, num_classes: int) -> Dict[str, int]:
    """MACs, forward FLOPs and training FLOPs per sample, for tables and provenance."""
    macs = forward_macs(model, image_size, num_classes)
    return {
        "forward_macs": macs,
        "forward_flops": FLOPS_PER_MAC * macs,
        "training_flops": TRAINING_FACTOR * FLOPS_PER_MAC * macs,
    }


def per_layer(model: str, image_size: int, num_classes: int) -> List[Tuple[str, int]]:
    return [(layer.name, layer.macs) for layer in model_layers(model, image_size, num_classes)]
