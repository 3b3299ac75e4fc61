"""Gluon models for the MXNet workload (MXNet 1.9, channels-first NCHW).

Same architectures and trainable-parameter counts as ``models_tf`` and torchvision:

* ``resnet50``: ResNet-50 v1.5 (stride 2 in the 3x3 convolution of a bottleneck, convolutions
  without bias): 25,557,032 trainable parameters. ``gluon.model_zoo.vision.resnet50_v1`` is *not*
  used: it is ResNet v1 (stride in the first 1x1 convolution) and has 25,575,912 trainable
  parameters, i.e. a different network.
* ``vgg16`` / ``vgg19``: configurations D and E without batch norm, 138,357,544 /
  143,667,240 (the same layers as ``gluon.model_zoo.vision.vgg16/vgg19``, written here to get
  torchvision's initialisation).
* ``lenet``: the LeNet-5 variant of ``docs/workloads.md`` (61,706 parameters).

Initialisation follows torchvision/PyTorch (see ``models_tf``): Kaiming normal (fan-out) for
the ResNet and VGG convolutions, normal(0, 0.01) for the VGG classifier, PyTorch's default
uniform +-1/sqrt(fan_in) for LeNet and the ResNet head, ones/zeros for batch norm.

Models return logits. Parameter counts exclude batch-norm running statistics (``grad_req`` is
``null`` for them), as the other frameworks count only trainable parameters.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ..common.architectures import EXPECTED_PARAMS as EXPECTED_PARAMS  # re-exported
from ..common.architectures import VGG_CONFIGS as _VGG_CFG
from ..vocabulary import MODELS, model_channels


def default_channels(model: str) -> int:
    return model_channels(model)


class _Layers:
    """Gluon layers with convolutions, pooling and batch norm in one ``layout`` (NCHW, or
    NHWC, which MXNet runs through cuDNN only), initialised as torchvision initialises them."""

    def __init__(self, layout: str) -> None:
        import mxnet as mx
        from mxnet import gluon
        from mxnet.gluon import nn

        self.mx, self.gluon, self.nn = mx, gluon, nn
        self.spatial = {"layout": layout}
        self.channel_axis = 3 if layout == "NHWC" else 1

    def torch_default(self, fan_in: int) -> Dict[str, Any]:
        # PyTorch's default for Conv2d/Linear: weights and biases uniform in +-1/sqrt(fan_in)
        bound = 1.0 / fan_in**0.5
        return {
            "weight_initializer": self.mx.init.Uniform(bound),
            "bias_initializer": self.mx.init.Uniform(bound),
        }

    def kaiming_out(self) -> Any:
        # kaiming_normal_(mode="fan_out", nonlinearity="relu"): normal, std sqrt(2 / fan_out)
        return self.mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)

    def conv(self, channels: int, kernel: int, strides: int = 1, padding: int = 0) -> Any:
        """A ResNet convolution: no bias, Kaiming-normal (fan-out) weights."""
        return self.nn.Conv2D(
            channels,
            kernel,
            strides=strides,
            padding=padding,
            use_bias=False,
            weight_initializer=self.kaiming_out(),
            **self.spatial,
        )

    def bn(self) -> Any:
        # PyTorch's BatchNorm2d defaults: eps 1e-5, running-average momentum 0.1 (Gluon: 0.9).
        return self.nn.BatchNorm(axis=self.channel_axis, epsilon=1e-5, momentum=0.9)


def _lenet_class(layers: _Layers) -> Any:
    nn, spatial, torch_default = layers.nn, layers.spatial, layers.torch_default

    class LeNet(layers.gluon.HybridBlock):
        """conv 5x5 6 (pad 2) -> relu -> maxpool 2 -> conv 5x5 16 -> relu -> maxpool 2 ->
        flatten -> dense 120 -> relu -> dense 84 -> relu -> dense classes."""

        def __init__(
            self, num_classes: int = 10, image_size: int = 28, channels: int = 1, **kwargs: Any
        ) -> None:
            super().__init__(**kwargs)
            flat = 16 * (((image_size // 2) - 4) // 2) ** 2
            with self.name_scope():
                self.conv1 = nn.Conv2D(
                    6, 5, padding=2, activation="relu", **spatial, **torch_default(25 * channels)
                )
                self.pool1 = nn.MaxPool2D(2, **spatial)
                self.conv2 = nn.Conv2D(16, 5, activation="relu", **spatial, **torch_default(25 * 6))
                self.pool2 = nn.MaxPool2D(2, **spatial)
                self.fc1 = nn.Dense(120, activation="relu", **torch_default(flat))
                self.fc2 = nn.Dense(84, activation="relu", **torch_default(120))
                self.fc3 = nn.Dense(num_classes, **torch_default(84))

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            x = self.pool1(self.conv1(x))
            x = self.pool2(self.conv2(x))
            # Dense flattens its input (flatten=True by default).
            return self.fc3(self.fc2(self.fc1(x)))

    return LeNet


def _bottleneck_class(layers: _Layers) -> Any:
    nn, conv, bn = layers.nn, layers.conv, layers.bn

    class Bottleneck(layers.gluon.HybridBlock):
        """torchvision's Bottleneck (v1.5): the stride sits on the 3x3 convolution."""

        def __init__(self, planes: int, stride: int, downsample: bool, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            with self.name_scope():
                self.body = nn.HybridSequential(prefix="")
                self.body.add(conv(planes, 1), bn(), nn.Activation("relu"))
                self.body.add(
                    conv(planes, 3, strides=stride, padding=1), bn(), nn.Activation("relu")
                )
                self.body.add(conv(planes * 4, 1), bn())
                if downsample:
                    self.downsample = nn.HybridSequential(prefix="")
                    self.downsample.add(conv(planes * 4, 1, strides=stride), bn())
                else:
                    self.downsample = None

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            identity = self.downsample(x) if self.downsample is not None else x
            return F.Activation(self.body(x) + identity, act_type="relu")

    return Bottleneck


def _resnet50_class(layers: _Layers) -> Any:
    nn, spatial = layers.nn, layers.spatial
    bottleneck = _bottleneck_class(layers)

    class ResNet50(layers.gluon.HybridBlock):
        def __init__(self, num_classes: int = 1000, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            with self.name_scope():
                self.features = nn.HybridSequential(prefix="")
                self.features.add(layers.conv(64, 7, strides=2, padding=3))
                self.features.add(
                    layers.bn(), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1, **spatial)
                )
                for planes, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
                    for b in range(blocks):
                        self.features.add(bottleneck(planes, stride if b == 0 else 1, b == 0))
                self.features.add(nn.GlobalAvgPool2D(**spatial))
                self.fc = nn.Dense(num_classes, **layers.torch_default(2048))

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            return self.fc(self.features(x))

    return ResNet50


def _vgg_class(layers: _Layers) -> Any:
    mx, nn, spatial = layers.mx, layers.nn, layers.spatial

    class VGG(layers.gluon.HybridBlock):
        def __init__(self, config: List[Any], num_classes: int = 1000, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            with self.name_scope():
                self.features = nn.HybridSequential(prefix="")
                for v in config:
                    if v == "M":
                        self.features.add(nn.MaxPool2D(2, 2, **spatial))
                    else:
                        self.features.add(
                            nn.Conv2D(
                                v,
                                3,
                                padding=1,
                                activation="relu",
                                weight_initializer=layers.kaiming_out(),
                                **spatial,
                                bias_initializer="zeros",
                            )
                        )
                dense = {"weight_initializer": mx.init.Normal(0.01), "bias_initializer": "zeros"}
                self.classifier = nn.HybridSequential(prefix="")
                self.classifier.add(nn.Dense(4096, activation="relu", **dense), nn.Dropout(0.5))
                self.classifier.add(nn.Dense(4096, activation="relu", **dense), nn.Dropout(0.5))
                self.classifier.add(nn.Dense(num_classes, **dense))

        def hybrid_forward(self, F: Any, x: Any) -> Any:
            return self.classifier(self.features(x))

    return VGG


def _blocks(layout: str = "NCHW") -> Any:
    """The block classes ``(LeNet, ResNet50, VGG)`` with layers in ``layout``."""
    layers = _Layers(layout)
    return _lenet_class(layers), _resnet50_class(layers), _vgg_class(layers)


def build_model(name: str, num_classes: int, image_size: int = 224, layout: str = "NCHW") -> Any:
    """An uninitialised Gluon block for ``name`` with activations in ``layout``.

    Initialise with :func:`initialize` so all ranks start from the same weights.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    lenet_cls, resnet_cls, vgg_cls = _blocks(layout)
    if name == "lenet":
        return lenet_cls(num_classes, image_size, default_channels(name), prefix="lenet_")
    if name == "resnet50":
        return resnet_cls(num_classes=num_classes, prefix="resnet50_")
    return vgg_cls(_VGG_CFG[name], num_classes=num_classes, prefix=name + "_")


def initialize(
    net: Any, ctx: Any, image_size: int, channels: int, seed: int, layout: str = "NCHW"
) -> None:
    """Seeded initialisation (each layer carries its initialiser; batch norm is ones/zeros),
    shapes resolved by a dry run."""
    import mxnet as mx

    mx.random.seed(seed)
    net.initialize(mx.init.Uniform(0.07), ctx=ctx)
    side = (image_size, image_size)
    shape = (1,) + side + (channels,) if layout == "NHWC" else (1, channels) + side
    # a worker driving several devices initialises on each; the dry run needs one
    net(mx.nd.zeros(shape, ctx=ctx[0] if isinstance(ctx, (list, tuple)) else ctx))


def trainable_params(net: Any) -> List[Any]:
    """Trainable Gluon parameters in a fixed order (registration order)."""
    return [p for p in net.collect_params().values() if p.grad_req != "null"]


def count_params(net: Any) -> int:
    return int(sum(p.data().size for p in trainable_params(net)))


def trainable_numpy(net: Any) -> List[Any]:
    return [p.data().asnumpy() for p in trainable_params(net)]
