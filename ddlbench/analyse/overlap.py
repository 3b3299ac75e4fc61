"""How much of the gradient allreduce hides behind the backward pass, estimated without a
measurement (docs/scaling-model.md#overlap).

Wait-free backpropagation (Zhang et al., "Poseidon: An Efficient Communication Architecture
for Distributed Deep Learning on GPU Clusters", USENIX ATC 2017; PyTorch DDP's buckets, Li et
al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020):
the backward pass produces gradients from the last layer to the first; they are packed into
buckets of ``bucket_bytes`` (DDP: 25 MB, the first bucket 1 MiB; Horovod: a 64 MB fusion
buffer), and a bucket's allreduce starts once its last gradient exists and the previous
bucket's allreduce has ended. The backward pass takes 2/3 of the step's compute (training
FLOPs = 3 x forward, docs/mfu.md), spread over the layers by their multiply-accumulates.
Whatever allreduce time is left when the backward pass ends is exposed.

The per-layer parameter counts are computed here from the same architecture walks as the FLOP
counter (``ddlbench.workloads.flops``), standard library only; their sums are the canonical
counts of ``ddlbench.workloads.common.architectures.EXPECTED_PARAMS`` (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Tuple

from ddlbench.workloads.flops import RESNET_BLOCKS, TRAINING_FACTOR, model_layers

DDP_BUCKET_MB = 25.0
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
MODEL_INPUT = {"resnet50": (224, 1000), "vgg16": (224, 1000), "vgg19": (224, 1000),
               "lenet": (28, 10), "resnet101": (224, 1000), "resnet152": (224, 1000)}  # fmt: skip
#: models ``predict`` knows the layers of that the workloads do not train, with their
#: canonical parameter counts (torchvision's ``resnet101`` and ``resnet152``)
PREDICT_ONLY_PARAMS = {"resnet101": 44_549_160, "resnet152": 60_192_808}
BACKWARD_SHARE = (TRAINING_FACTOR - 1) / TRAINING_FACTOR


@dataclass(frozen=True)
class LayerSize:
    name: str
    params: int
    macs: int
    #: the parameter tensors that make ``params`` (a convolution's weight and its batch norm's
    #: weight and bias), each a gradient of its own; empty: one tensor
    tensors: Tuple[int, ...] = ()


def _resnet_params(model: str, classes: int) -> List[Tuple[int, ...]]:
    """Per layer, its tensors: a convolution's weight, its batch norm's weight and bias."""
    out = [(64 * 3 * 49, 64, 64)]  # stem convolution and its batch norm
    inplanes = 64
    for planes, blocks in zip((64, 128, 256, 512), RESNET_BLOCKS[model]):
        for b in range(blocks):
            out += [(planes * inplanes, planes, planes), (planes * planes * 9, planes, planes),
                    (4 * planes * planes, 4 * planes, 4 * planes)]  # fmt: skip
            if b == 0:  # downsample and its norm
                out.append((4 * planes * inplanes, 4 * planes, 4 * planes))
            inplanes = 4 * planes
    return out + [(2048 * classes, classes)]


def _conv_linear_params(model: str, classes: int) -> List[Tuple[int, ...]]:
    """VGG (no batch norm) and LeNet: the weight and the bias of every counted layer."""
    if model == "lenet":
        shapes = [(6, 1 * 25), (16, 6 * 25), (120, 400), (84, 120), (classes, 84)]
    else:
        from ddlbench.workloads.common.architectures import VGG_CONFIGS

        shapes, c = [], 3
        for width in (w for w in VGG_CONFIGS[model] if isinstance(w, int)):
            shapes.append((width, c * 9))
            c = width
        shapes += [(4096, 512 * 49), (4096, 4096), (classes, 4096)]
    return [(out * fan_in, out) for out, fan_in in shapes]


def layer_sizes(model: str) -> List[LayerSize]:
    """Forward-order layers of ``model`` with their parameters and multiply-accumulates
    (``KeyError`` for a model without an architecture table)."""
    side, classes = MODEL_INPUT[model]
    layers = model_layers(model, side, classes)
    params = (_resnet_params(model, classes) if model.startswith("resnet") else
              _conv_linear_params(model, classes))  # fmt: skip
    assert len(params) == len(layers), model
    return [LayerSize(lay.name, sum(t), lay.macs, t) for lay, t in zip(layers, params)]


def param_count(model: str) -> int:
    return sum(layer.params for layer in layer_sizes(model))


def buckets(
    layers: List[LayerSize], bytes_per_param: float, bucket_bytes: float, first_bytes: float = 0
) -> List[Tuple[float, int]]:
    """(bytes, index of the layer that closes it) per bucket, in backward order. A bucket
    closes when it reaches its cap (``first_bytes`` for the first, when given); a cap of 0
    means one allreduce per gradient tensor (a layer without its tensors: one)."""
    out: List[Tuple[float, int]] = []
    size = 0.0
    if bucket_bytes <= 0:
        for i in range(len(layers) - 1, -1, -1):
            out += [(t * bytes_per_param, i) for t in layers[i].tensors or (layers[i].params,)]
        return out
    for i in range(len(layers) - 1, -1, -1):
        size += layers[i].params * bytes_per_param
        cap = first_bytes if (first_bytes and not out) else bucket_bytes
        if size >= cap or i == 0:
            out.append((size, i))
            size = 0.0
    return out


@dataclass(frozen=True)
class Overlap:
    comm_s: float  # sum of the buckets' allreduce times
    exposed_s: float  # what is left after the backward pass
    buckets: int
    last_s: float = 0.0  # the last bucket's allreduce: nothing overlaps it

    @property
    def fraction(self) -> float:
        return 1.0 - self.exposed_s / self.comm_s if self.comm_s > 0 else 1.0


def wait_free(
    layers: List[LayerSize],
    compute_s: float,
    allreduce_s: Callable[[float], float],
    bytes_per_param: float,
    bucket_bytes: float,
    first_bytes: float = 0,
    backward_share: float = BACKWARD_SHARE,
    cycle_s: float = 0.0,
) -> Overlap:
    """Simulate wait-free backpropagation over one step (see the module's docstring);
    ``backward_share``: the backward pass's part of the compute (more with recomputation);
    ``cycle_s`` > 0: Horovod's tensor fusion (:func:`fusion_cycles`) instead of buckets."""
    total_macs = sum(layer.macs for layer in layers) or 1
    backward = backward_share * compute_s
    done_at = []  # backward time at which each layer's gradient exists, forward order
    t = 0.0
    for layer in reversed(layers):
        t += backward * layer.macs / total_macs
        done_at.append(t)
    done_at.reverse()
    if cycle_s > 0:
        return fusion_cycles(layers, done_at, backward, allreduce_s, bytes_per_param,
                             bucket_bytes, cycle_s)  # fmt: skip
    comm = end = dt = 0.0
    packed = buckets(layers, bytes_per_param, bucket_bytes, first_bytes)
    for nbytes, last in packed:
        dt = allreduce_s(nbytes)
        comm += dt
        end = max(end, done_at[last]) + dt
    return Overlap(comm, max(0.0, end - backward), len(packed), dt)


def fusion_cycles(
    layers: List[LayerSize],
    done_at: List[float],
    backward: float,
    allreduce_s: Callable[[float], float],
    bytes_per_param: float,
    cap_bytes: float,
    cycle_s: float,
) -> Overlap:
    """Horovod's tensor fusion (docs/tensor-fusion.rst: every cycle, the tensors ready at that
    moment are fused into buffers of at most ``HOROVOD_FUSION_THRESHOLD`` bytes and reduced; the
    next cycle starts ``HOROVOD_CYCLE_TIME`` later, or when the reductions end): the number of
    messages follows the backward pass's length over the cycle, not the gradient bytes."""
    order = sorted(range(len(layers)), key=lambda i: done_at[i])
    t, k, comm, end, dt, count = cycle_s, 0, 0.0, 0.0, 0.0, 0
    while k < len(order):
        ready = []
        while k < len(order) and done_at[order[k]] <= t + 1e-15:
            ready.append(layers[order[k]].params * bytes_per_param)
            k += 1
        ops_end = t
        size = 0.0
        for i, nb in enumerate(ready):
            size += nb
            if size >= cap_bytes > 0 or i == len(ready) - 1:
                dt = allreduce_s(size)
                comm, ops_end, count, size = comm + dt, ops_end + dt, count + 1, 0.0
        end = max(end, ops_end)
        t = max(t + cycle_s, ops_end)
    return Overlap(comm, max(0.0, end - backward), count, dt)


def transformer_layers(name: str, seq: int) -> List[LayerSize]:
    """Forward-order layers of a transformer of the vocabulary (``TRANSFORMER_SHAPES``, or a
    shape): the embedding, each block, the untied output projection (llama style). Its
    multiply-accumulates per token: the block's weights plus attention's ``2 seq d`` (scores
    and values), the output projection's ``vocab x d`` (also when tied)."""
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, transformer_params

    shape = TRANSFORMER_SHAPES[name] if isinstance(name, str) else name
    p = transformer_params(shape)
    per_block = (p["blocks"] - (2 if shape.style == "gpt2" else 1) * shape.d_model) // shape.layers
    block_macs = per_block + 2 * seq * shape.d_model
    out = [LayerSize("embedding", p["embedding"], shape.vocab * shape.d_model
                     if not p["output"] else 0)]  # fmt: skip
    out += [LayerSize(f"block{i}", per_block, block_macs) for i in range(shape.layers)]
    if p["output"]:
        out.append(LayerSize("output", p["output"], shape.vocab * shape.d_model))
    return out
