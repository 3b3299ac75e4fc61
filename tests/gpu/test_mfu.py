"""MFU arithmetic: analytic FLOP counts against published figures, device peaks, achieved."""

from __future__ import annotations

import pytest

from ddlbench.analyse import device_peaks as dp
from ddlbench.analyse import flops


@pytest.mark.parametrize(
    "model,side,classes,gmacs",
    [
        # torchvision's model tables (GFLOPS there are multiply-accumulates)
        ("resnet50", 224, 1000, 4.09),
        ("vgg16", 224, 1000, 15.47),
        ("vgg19", 224, 1000, 19.63),
    ],
)
def test_forward_macs_match_published_figures(model, side, classes, gmacs):
    assert flops.forward_macs(model, side, classes) / 1e9 == pytest.approx(gmacs, abs=0.005)


def test_resnet50_mac_flop_and_training_factors():
    s = flops.summary("resnet50", 224, 1000)
    assert s["forward_macs"] == 4_089_184_256  # 4.09 G multiply-accumulates ("4.1 GFLOPs")
    assert s["forward_flops"] == 2 * s["forward_macs"]  # 8.18 GFLOP forward
    assert s["training_flops"] == 3 * s["forward_flops"]  # 24.5 GFLOP per training sample
    assert flops.training_flops_per_sample("resnet50", 224, 1000) == s["training_flops"]


def test_lenet_by_hand():
    # conv1 28x28x6x(1x5x5), conv2 10x10x16x(6x5x5), fc 400x120, 120x84, 84x10
    layers = dict(flops.per_layer("lenet", 28, 10))
    assert layers == {
        "conv1": 28 * 28 * 6 * 25,
        "conv2": 10 * 10 * 16 * 150,
        "fc1": 400 * 120,
        "fc2": 120 * 84,
        "fc3": 84 * 10,
    }
    assert flops.training_flops_per_sample("lenet", 28, 10) == 3 * 2 * 416_520


def test_resnet50_layer_list_and_downsampling():
    names = [n for n, _ in flops.per_layer("resnet50", 224, 1000)]
    assert len(names) == 1 + 16 * 3 + 4 + 1  # stem, 16 bottlenecks, 4 projections, fc
    layers = dict(flops.per_layer("resnet50", 224, 1000))
    # v1.5: the stride is on the 3x3 conv, so layer2.0.conv1 still sees 56x56
    assert layers["layer2.0.conv1"] == 56 * 56 * 128 * 256
    assert layers["layer2.0.conv2"] == 28 * 28 * 128 * 128 * 9
    assert layers["fc"] == 2048 * 1000


def test_unknown_model_has_no_counter():
    with pytest.raises(ValueError, match="no FLOP counter"):
        flops.training_flops_per_sample("gpt2", 224, 1000)


@pytest.mark.parametrize(
    "name,key",
    [
        ("Tesla V100-SXM2-16GB", "V100-SXM"),
        ("Tesla V100-PCIE-32GB", "V100-PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200-SXM"),
        ("NVIDIA H200 NVL", "H200-NVL"),
    ],
)
def test_device_names_match(name, key):
    assert dp.match(name).key == key


def test_peaks_per_precision_and_unknowns():
    assert dp.peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(989.4)
    assert dp.peak_tflops("NVIDIA H100 80GB HBM3", "fp32") == pytest.approx(66.9)
    assert dp.peak_tflops("NVIDIA A100-SXM4-40GB", "tf32") == pytest.approx(156.0)
    assert dp.peak_tflops("Tesla V100-SXM2-16GB", "bf16") is None  # V100 has no bf16
    assert dp.peak_tflops("AMD EPYC 7742 64-Core Processor", "fp32") is None
    assert dp.peak_tflops(None, "fp32") is None


def test_achieved_and_mfu():
    # the H100 figure: 5,121 img/s of ResNet-50 with bf16 on one GPU
    per_sample = flops.training_flops_per_sample("resnet50", 224, 1000)
    achieved = dp.achieved_tflops(5121.0, per_sample)
    assert achieved == pytest.approx(5121 * 24.535105536e9 / 1e12)  # ~125.6 TFLOP/s
    assert dp.mfu(achieved, dp.peak_tflops("NVIDIA H100 80GB HBM3", "bf16")) == pytest.approx(
        achieved / 989.4
    )
    assert dp.achieved_tflops(None, per_sample) is None and dp.mfu(1.0, None) is None
