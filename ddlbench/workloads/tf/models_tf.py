"""Keras-style models shared by the TensorFlow, Keras and Horovod-TF workloads.

Every builder takes the Keras module to build with (``tf.keras`` or Keras 3's ``keras``; in
TensorFlow >= 2.16 they are the same object), so the same definitions serve every TF-based
workload. Models are channels-last (NHWC) and return logits (no softmax): the workloads apply
the softmax cross-entropy themselves.

The architectures follow the canonical definitions (torchvision's), so that every framework
trains the same network with the same number of trainable parameters:

* ``resnet50``: ResNet-50 v1.5 (stride 2 in the 3x3 convolution of a bottleneck, as torchvision
  and MLPerf), convolutions without bias, batch norm after every convolution: 25,557,032
  trainable parameters for 1000 classes. ``keras.applications.ResNet50`` is *not* used: it is
  ResNet v1 (stride in the first 1x1 convolution) with biased convolutions (25,583,592 trainable
  parameters), i.e. a different network.
* ``vgg16`` / ``vgg19``: configurations D and E without batch norm, 138,357,544 and 143,667,240
  parameters for 1000 classes at 224x224 (identical to ``keras.applications.VGG16/19``).
* ``lenet``: the LeNet-5 variant of ``docs/workloads.md`` (61,706 parameters for 28x28x1 input
  and 10 classes).

Initialisation follows torchvision/PyTorch too (convolutions of ResNet and VGG: Kaiming normal,
fan-out; VGG classifier: normal(0, 0.01); LeNet layers and the ResNet head: PyTorch's default
uniform +-1/sqrt(fan_in) for weights and biases; batch norm: ones and zeros), so that
convergence runs of different frameworks start from the same distribution.

Pure Python at import time: the framework is only touched inside the builders.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

from ..common.architectures import EXPECTED_PARAMS as EXPECTED_PARAMS  # re-exported
from ..common.architectures import VGG_CONFIGS as _VGG_CFG
from ..vocabulary import MODELS, model_channels


def default_channels(model: str) -> int:
    """Input channels a model is defined for: 1 for lenet (grey digits), 3 otherwise."""
    return model_channels(model)


def _he_normal(keras: Any) -> Any:
    # torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu"): untruncated normal,
    # std sqrt(2 / fan_out), for the convolutions of ResNet and VGG.
    return keras.initializers.VarianceScaling(
        scale=2.0, mode="fan_out", distribution="untruncated_normal"
    )


def _torch_default(keras: Any, fan_in: int) -> Dict[str, Any]:
    """PyTorch's default initialisation of ``nn.Conv2d``/``nn.Linear``: weights and biases
    uniform in +-1/sqrt(fan_in) (kaiming_uniform with a=sqrt(5))."""
    bound = 1.0 / fan_in**0.5
    return {
        "kernel_initializer": keras.initializers.VarianceScaling(
            scale=1.0 / 3.0, mode="fan_in", distribution="uniform"
        ),
        "bias_initializer": keras.initializers.RandomUniform(-bound, bound),
    }


def build_lenet(
    keras: Any, image_size: int = 28, channels: int = 1, num_classes: int = 10, seed: int = 0
) -> Any:
    """LeNet-5 as listed in docs/workloads.md.

    conv 5x5 6 (pad 2) -> relu -> maxpool 2 -> conv 5x5 16 -> relu -> maxpool 2 -> flatten ->
    dense 120 -> relu -> dense 84 -> relu -> dense num_classes. PyTorch's default init.
    """
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, channels), name="input")
    init = _torch_default
    x = layers.Conv2D(
        6, 5, padding="same", activation="relu", name="conv1", **init(keras, 25 * channels)
    )(inputs)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Conv2D(
        16, 5, padding="valid", activation="relu", name="conv2", **init(keras, 25 * 6)
    )(x)
    x = layers.MaxPooling2D(2, name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    flat = int(x.shape[-1])
    x = layers.Dense(120, activation="relu", name="fc1", **init(keras, flat))(x)
    x = layers.Dense(84, activation="relu", name="fc2", **init(keras, 120))(x)
    outputs = layers.Dense(num_classes, name="fc3", dtype="float32", **init(keras, 84))(x)
    return keras.Model(inputs, outputs, name="lenet")


def build_vgg(
    keras: Any,
    name: str,
    image_size: int = 224,
    channels: int = 3,
    num_classes: int = 1000,
    seed: int = 0,
) -> Any:
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, channels), name="input")
    x = inputs
    block, conv = 1, 1
    for v in _VGG_CFG[name]:
        if v == "M":
            x = layers.MaxPooling2D(2, strides=2, name=f"block{block}_pool")(x)
            block, conv = block + 1, 1
        else:
            x = layers.Conv2D(
                v,
                3,
                padding="same",
                activation="relu",
                kernel_initializer=_he_normal(keras),
                name=f"block{block}_conv{conv}",
            )(x)
            conv += 1
    # torchvision pools adaptively to 7x7; at 224x224 input the feature map already is 7x7.
    x = layers.Flatten(name="flatten")(x)
    # torchvision: classifier weights normal(0, 0.01), zero biases
    dense_init = keras.initializers.RandomNormal(0.0, 0.01)
    x = layers.Dense(4096, activation="relu", kernel_initializer=dense_init, name="fc1")(x)
    x = layers.Dropout(0.5, name="drop1")(x)
    x = layers.Dense(4096, activation="relu", kernel_initializer=dense_init, name="fc2")(x)
    x = layers.Dropout(0.5, name="drop2")(x)
    outputs = layers.Dense(
        num_classes, kernel_initializer=dense_init, name="predictions", dtype="float32"
    )(x)
    return keras.Model(inputs, outputs, name=name)


def _bn(keras: Any, name: str) -> Any:
    # PyTorch's BatchNorm2d defaults: eps 1e-5, running-average momentum 0.1 (Keras: 0.9).
    return keras.layers.BatchNormalization(
        axis=-1,
        epsilon=1e-5,
        momentum=0.9,
        name=name,
    )


def _bottleneck(keras: Any, x: Any, planes: int, stride: int, downsample: bool, name: str) -> Any:
    layers = keras.layers
    init = _he_normal(keras)
    identity = x
    out = layers.Conv2D(planes, 1, use_bias=False, kernel_initializer=init, name=name + "_conv1")(x)
    out = _bn(keras, name + "_bn1")(out)
    out = layers.ReLU(name=name + "_relu1")(out)
    if stride != 1:
        # torchvision pads 1 on each side for a 3x3/2 convolution; "same" would pad asymmetrically.
        out = layers.ZeroPadding2D(1, name=name + "_pad2")(out)
        out = layers.Conv2D(
            planes, 3, strides=stride, use_bias=False, kernel_initializer=init, name=name + "_conv2"
        )(out)
    else:
        out = layers.Conv2D(
            planes, 3, padding="same", use_bias=False, kernel_initializer=init, name=name + "_conv2"
        )(out)
    out = _bn(keras, name + "_bn2")(out)
    out = layers.ReLU(name=name + "_relu2")(out)
    out = layers.Conv2D(
        planes * 4, 1, use_bias=False, kernel_initializer=init, name=name + "_conv3"
    )(out)
    out = _bn(keras, name + "_bn3")(out)
    if downsample:
        identity = layers.Conv2D(
            planes * 4,
            1,
            strides=stride,
            use_bias=False,
            kernel_initializer=init,
            name=name + "_down_conv",
        )(x)
        identity = _bn(keras, name + "_down_bn")(identity)
    out = layers.Add(name=name + "_add")([out, identity])
    return layers.ReLU(name=name + "_out")(out)


def build_resnet50(
    keras: Any, image_size: int = 224, channels: int = 3, num_classes: int = 1000, seed: int = 0
) -> Any:
    """ResNet-50 v1.5, layer for layer as torchvision's ``resnet50``."""
    layers = keras.layers
    inputs = keras.Input(shape=(image_size, image_size, channels), name="input")
    x = layers.ZeroPadding2D(3, name="stem_pad")(inputs)
    x = layers.Conv2D(
        64, 7, strides=2, use_bias=False, kernel_initializer=_he_normal(keras), name="stem_conv"
    )(x)
    x = _bn(keras, "stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    x = layers.ZeroPadding2D(1, name="stem_pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="stem_pool")(x)
    for stage, (planes, blocks, stride) in enumerate(
        [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1
    ):
        for b in range(blocks):
            x = _bottleneck(
                keras,
                x,
                planes,
                stride if b == 0 else 1,
                downsample=(b == 0),
                name=f"layer{stage}_{b}",
            )
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    outputs = layers.Dense(num_classes, name="fc", dtype="float32", **_torch_default(keras, 2048))(
        x
    )
    return keras.Model(inputs, outputs, name="resnet50")


_BUILDERS: Dict[str, Callable[..., Any]] = {
    "lenet": build_lenet,
    "resnet50": build_resnet50,
}


def build_model(
    keras: Any,
    name: str,
    image_size: int,
    num_classes: int,
    channels: int = 0,
    seed: int = 0,
) -> Any:
    """Build ``name`` with the given Keras module. ``channels=0`` means the model's default.

    Seeds Keras' global generators with ``seed`` first, so every rank starts from the same
    weights even before the strategy broadcasts them.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    if hasattr(keras, "utils") and hasattr(keras.utils, "set_random_seed"):
        keras.utils.set_random_seed(seed)
    channels = channels or default_channels(name)
    if name in _VGG_CFG:
        return build_vgg(keras, name, image_size, channels, num_classes, seed)
    return _BUILDERS[name](keras, image_size, channels, num_classes, seed)


def count_params(variables: Sequence[Any]) -> int:
    """Number of scalars in a list of variables (use ``model.trainable_variables``)."""
    total = 0
    for v in variables:
        n = 1
        for d in v.shape:
            n *= int(d)
        total += n
    return total


def trainable_numpy(model: Any) -> List[Any]:
    """The trainable parameters as numpy arrays, in the model's fixed (creation) order."""
    return [v.numpy() for v in model.trainable_variables]
