"""What every framework's model definitions share: their canonical
trainable-parameter counts and the VGG layer configurations (docs/workloads.md#models).

The builders live with their framework (``models_torch``, ``models_tf``, ``models_mxnet``);
this module is pure Python, Python 3.8 syntax.
"""

from __future__ import annotations

from typing import Dict, List, Union

# Canonical trainable-parameter counts (1000 classes, 224x224x3; lenet: 10 classes, 28x28x1).
EXPECTED_PARAMS: Dict[str, int] = {
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "lenet": 61_706,
}

# VGG configurations D (vgg16) and E (vgg19): output channels of each 3x3 convolution, "M"
# for a 2x2 max pool
VGG_CONFIGS: Dict[str, List[Union[int, str]]] = {
    "vgg16": [
        64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
        512, 512, 512, "M", 512, 512, 512, "M",
    ],
    "vgg19": [
        64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
        512, 512, 512, 512, "M", 512, 512, 512, 512, "M",
    ],
}  # fmt: skip
