"""``network.transport`` in the spec and its variants: refusals at file:line with the reason,
a did-you-mean for a misspelt transport, an env that contradicts the transport."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ddlbench.errors import InputError
from ddlbench.plan import plan_runs
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.load import load_spec_text

GPU = ClusterProfile(name="gpu4", scheduler="slurm", gpus_per_node=4)
CPU = ClusterProfile(name="cpu", scheduler="slurm", device="cpu", gpus_per_node=2)

SPEC = """\
name: tr
model: resnet50
frameworks: [FRAMEWORK]
batch_size: 32
scale: {nodes: [1, 2], gpus_per_node: 2}
variants:
  - label: rdma
    network: {transport: rdma}
  - label: tcp
    network: {transport: tcp}
"""


def plan(framework: str, profile: ClusterProfile, text: str = SPEC):
    loaded = load_spec_text(textwrap.dedent(text.replace("FRAMEWORK", framework)), "t.yaml")
    return plan_runs(loaded.value, profile, loaded.source)


@pytest.mark.parametrize(
    "framework,profile,why",
    [
        ("mxnet", GPU, "ps-lite's ZMQ van"),
        ("pytorch", CPU, "Gloo has only a TCP transport"),
        ("{name: horovod, controller: gloo}", CPU, "Gloo has only a TCP transport"),
        ("{name: tensorflow, communication: ring}", GPU, "gRPC (TCP)"),
        ("{name: keras, communication: auto}", GPU, "leaves the choice between NCCL and gRPC"),
    ],
)
def test_rdma_refused_where_it_cannot_be_done(framework, profile, why):
    with pytest.raises(InputError) as err:
        plan(framework, profile)
    text = str(err.value)
    # the variant's key, with its line
    assert text.startswith("t.yaml:8:") and "variants[0].network.transport" in text, text
    assert "rdma: " in text and why in text
    # tcp alone plans
    assert {r.transport for r in plan(framework, profile, SPEC.replace("rdma}", "tcp}")).runs} == {
        "tcp"
    }


def test_runs_carry_their_transport_and_env():
    runs = plan("pytorch", GPU).runs
    by = {(r.variant, r.nodes): r for r in runs}
    assert by[("rdma", 2)].transport == "rdma" and by[("rdma", 2)].env["NCCL_NET"] == "IB"
    assert by[("tcp", 2)].env == {"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}
    # the same nodes and job otherwise: only the variant word and the transport differ
    assert by[("rdma", 1)].group.replace("rdma", "tcp") == by[("tcp", 1)].group


def test_spec_level_transport_and_a_variant_override():
    text = SPEC.replace("variants:", "network: {transport: tcp}\nvariants:").replace(
        "  - label: tcp\n    network: {transport: tcp}\n", "  - label: plain\n"
    )
    runs = plan("pytorch", GPU, text).runs
    assert {r.variant: r.transport for r in runs} == {"rdma": "rdma", "plain": "tcp"}


def test_a_contradicting_env_is_refused():
    text = SPEC + "    env: {NCCL_IB_DISABLE: '0'}\n"
    with pytest.raises(InputError) as err:
        plan("pytorch", GPU, text)
    assert "t.yaml:10:" in str(err.value) and "contradicts transport tcp" in str(err.value)
    assert "NCCL_IB_DISABLE=0" in str(err.value)


def test_cli_misspelt_transport_exit_2_did_you_mean(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("FRAMEWORK", "pytorch").replace("transport: tcp", "transport: tpc"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", str(bad), "--cluster", "local"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{bad}:10:"), proc.stderr
    assert "did you mean 'tcp'" in proc.stderr


def test_cli_rdma_on_a_cpu_profile_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.replace("FRAMEWORK", "pytorch"))
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "validate", str(bad), "--cluster", "local"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{bad}:8:") and "Gloo has only a TCP transport" in proc.stderr


def test_profile_network_presets_checked_at_their_line(tmp_path):
    from ddlbench.spec.load import load_profile

    path = tmp_path / "site.yaml"
    base = "name: site\nscheduler: slurm\nnetwork:\n  presets: {intra: nvlink-a100, rdma: hdr, "
    path.write_text(base + "tcp: 100gb}\n")
    with pytest.raises(InputError) as err:
        load_profile(str(path))
    assert str(err.value).startswith(f"{path}:4:")
    assert "network.presets.tcp" in str(err.value) and "did you mean '100gbe'" in str(err.value)
    path.write_text(base + "tcp: edr}\n")
    with pytest.raises(InputError) as err:
        load_profile(str(path))
    assert "'edr' is a rdma preset; network.presets.tcp needs a tcp one" in str(err.value)
    path.write_text(base + "tcp: 100gbe}\n")
    presets = load_profile(str(path)).value.network.presets
    assert (presets.intra, presets.rdma, presets.tcp) == ("nvlink-a100", "hdr", "100gbe")
