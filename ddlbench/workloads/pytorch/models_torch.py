"""Model definitions in plain PyTorch (no torchvision), for the torch workloads.

Parameter counts (trainable, biases included) match the canonical ones:
resnet50 25,557,032; vgg16 138,357,544; vgg19 143,667,240; lenet 61,706 (the
layer lists are in docs/workloads.md, which the other frameworks follow).
``MODELS`` maps a model name to a constructor ``(num_classes, image_size) ->
nn.Module``; add new models (e.g. a small transformer) there.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Union

import torch
from torch import nn

from ..common.architectures import EXPECTED_PARAMS, VGG_CONFIGS


class LeNet(nn.Module):
    """LeNet-5 variant for 28x28x1 inputs (docs/workloads.md): 61,706 parameters."""

    def __init__(self, num_classes: int = 10, image_size: int = 28) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, kernel_size=5),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2, 2),
        )
        side = ((image_size // 2) - 4) // 2
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side * side, 120),
            nn.ReLU(inplace=True),
            nn.Linear(120, 84),
            nn.ReLU(inplace=True),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        width = planes
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: Optional[nn.Module] = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, layers: List[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = 64
        stages = []
        for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers)):
            stride = 1 if i == 0 else 2
            stage = []
            for b in range(blocks):
                stage.append(Bottleneck(inplanes, planes, stride if b == 0 else 1))
                inplanes = planes * Bottleneck.expansion
            stages.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class VGG(nn.Module):
    """VGG without batch norm (configurations D and E)."""

    def __init__(self, config: List[Union[int, str]], num_classes: int = 1000) -> None:
        super().__init__()
        layers: List[nn.Module] = []
        channels = 3
        for v in config:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(channels, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                channels = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)


def lenet(num_classes: int = 10, image_size: int = 28) -> nn.Module:
    return LeNet(num_classes, image_size)


def resnet50(num_classes: int = 1000, image_size: int = 224) -> nn.Module:
    return ResNet([3, 4, 6, 3], num_classes)


def vgg16(num_classes: int = 1000, image_size: int = 224) -> nn.Module:
    return VGG(VGG_CONFIGS["vgg16"], num_classes)


def vgg19(num_classes: int = 1000, image_size: int = 224) -> nn.Module:
    return VGG(VGG_CONFIGS["vgg19"], num_classes)


MODELS: Dict[str, Callable[..., nn.Module]] = {
    "lenet": lenet,
    "resnet50": resnet50,
    "vgg16": vgg16,
    "vgg19": vgg19,
}

PARAM_COUNTS = EXPECTED_PARAMS


def build_model(
    name: str, num_classes: int, image_size: int, seed: Optional[int] = None
) -> nn.Module:
    """Build a registered model; with ``seed`` the initialisation is the same on every rank."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} for PyTorch; known: {', '.join(sorted(MODELS))}")
    if seed is not None:
        torch.manual_seed(seed)
    return MODELS[name](num_classes=num_classes, image_size=image_size)


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
