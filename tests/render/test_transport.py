"""``network.transport``: what each framework's job script sets for rdma and tcp, the
pre-flight that refuses a node without RDMA, and the NCCL network each run must use."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict

import pytest

from ddlbench.plan import plan_runs
from ddlbench.render import render_campaign
from ddlbench.spec.load import load_profile, load_spec_text
from tests.support.repo import require_tool

SPEC = """\
name: transports
model: resnet50
frameworks:
  - name: pytorch
    backend: nccl
  - name: tensorflow
    communication: nccl
  - name: keras
    communication: nccl
  - name: horovod
    wraps: pytorch
    controller: mpi
  - name: horovod
    wraps: tensorflow
    controller: gloo
batch_size: 32
scale:
  nodes: [2]
  gpus_per_node: 4
variants:
  - label: rdma
    network: {transport: rdma}
  - label: tcp
    network: {transport: tcp}
"""


@pytest.fixture
def fixed_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    monkeypatch.delenv("DDLBENCH_ENVS", raising=False)


def _render(tmp_path: Path, text: str, profile: str = "iris") -> Dict[str, str]:
    spec = load_spec_text(text, "spec.yaml")
    prof = load_profile(profile)
    plan = plan_runs(spec.value, prof.value, spec.source)
    out = render_campaign(plan, spec.value.name, tmp_path, text, "spec.yaml", prof.source.text,
                          prof.path)  # fmt: skip
    return {p.stem: p.read_text() for p in sorted(out.root.glob("jobs/*.sh"))}


def _exports(script: str) -> Dict[str, str]:
    return dict(re.findall(r"^export ([A-Za-z_]+)='?([^'\n]*)'?$", script, re.M))


def test_each_framework_sets_its_transport(tmp_path, fixed_home):
    scripts = _render(tmp_path, SPEC)
    assert len(scripts) == 10
    for run_id, script in scripts.items():
        env = _exports(script)
        transport = run_id.rsplit("-", 2)[-2]
        want = {"rdma": ("IB", "0"), "tcp": ("Socket", "1")}[transport]
        # every one of these GPU runs moves its gradients through NCCL
        assert (env["NCCL_NET"], env["NCCL_IB_DISABLE"]) == want, run_id
        assert env["DDLBENCH_NCCL_NET"] == want[0], run_id
        assert f"(network.transport {transport})" in script
        preflight = "has no active RDMA port" in script
        assert preflight == (transport == "rdma"), run_id
        mpi = "OMPI_MCA_pml" in env
        # MPI's own messages go over TCP too where the run asks for tcp and MPI carries them
        assert mpi == (transport == "tcp" and "horovod-torch" in run_id), run_id
        if mpi:
            assert env["OMPI_MCA_btl"] == "self,vader,tcp" and env["UCX_TLS"] == "tcp,sm,self"


def test_transport_scripts_are_shellcheck_clean(tmp_path, fixed_home):
    shellcheck = require_tool("shellcheck")
    scripts = _render(tmp_path, SPEC)
    paths = sorted((tmp_path / "transports" / "jobs").glob("*.sh"))
    assert len(paths) == len(scripts)
    proc = subprocess.run([shellcheck, "--severity=info", *map(str, paths)],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout


def test_mxnet_and_cpu_runs_over_tcp_set_no_nccl(tmp_path, fixed_home):
    text = SPEC.replace("  - label: rdma\n    network: {transport: rdma}\n", "")
    text = text.replace("  - name: pytorch\n    backend: nccl\n", "  - name: mxnet\n")
    scripts = _render(tmp_path, text)
    mxnet = next(s for k, s in scripts.items() if k.startswith("mxnet"))
    env = _exports(mxnet)
    assert "NCCL_NET" not in env and "DDLBENCH_NCCL_NET" not in env
    # the profile's own network.nccl is not asserted for a run whose transport says otherwise
    text = SPEC.replace("rdma}", "tcp}").replace("label: rdma", "label: t2")
    cpu_text = text.replace("backend: nccl", "backend: gloo").replace("communication: nccl", "")
    cpu = _render(tmp_path / "cpu", cpu_text, "local")  # NCCL is refused on a CPU profile
    gloo = next(s for k, s in cpu.items() if k.startswith("pytorch"))
    assert "NCCL_NET" not in _exports(gloo)


def test_without_a_transport_the_profile_decides(tmp_path, fixed_home):
    text = SPEC.split("variants:")[0]
    for script in _render(tmp_path, text).values():
        env = _exports(script)
        assert "NCCL_NET" not in env and "has no active RDMA port" not in script
        assert env["DDLBENCH_NCCL_NET"] == "IB"  # iris' network.nccl
        assert "(network.nccl)" in script


def test_rdma_preflight_fails_a_node_without_rdma(tmp_path):
    """The pre-flight line of an rdma run, run here: this machine has no active RDMA port."""
    if any(Path("/sys/class/infiniband").glob("*/ports/*/state")):
        pytest.skip("this machine has RDMA ports")
    script = _render(tmp_path, SPEC)["pytorch-resnet50-n2x4-b32-rdma-r0"]
    line = next(ln for ln in script.splitlines() if "has no active RDMA port" in ln)
    command = line.strip().split("bash -c ", 1)[1]
    proc = subprocess.run(f"bash -c {command}", shell=True, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "network.transport rdma" in proc.stderr and "no active RDMA port" in proc.stderr
