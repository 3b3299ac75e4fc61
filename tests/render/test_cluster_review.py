"""Job-script lines from the second 64-node review (issue 28): ports, per-scale MXNet servers,
watched background steps, the job's clean environment, Pyxis container removal, the network."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ddlbench.render.shell import to_shell
from tests.support.render import render
from tests.support.repo import ROOT, require_tool

PYXIS = ROOT / "configs" / "clusters" / "v100-pyxis.yaml"

MXNET_SPEC = """\
name: order
model: resnet50
frameworks:
  - {{name: mxnet, kvstore: dist_sync, servers: 2}}
  - {{name: tensorflow}}
  - {{name: pytorch}}
batch_size: 32
scale:
  nodes: {nodes}
  gpus_per_node: 4
"""


@pytest.fixture
def home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")


def _scripts(tmp_path: Path, nodes: str, profile: str = str(PYXIS)) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / f"order-{nodes.strip('[]').replace(', ', '')}.yaml"
    spec.write_text(MXNET_SPEC.format(nodes=nodes))
    rendered = render(spec, profile, tmp_path / spec.stem)
    return {p.name: p.read_text() for p in rendered.root.glob("jobs/*.sh")}


def _joined(text: str) -> str:
    return text.replace("\\\n", " ")


def _server_line(text: str) -> str:
    return next(ln for ln in _joined(text).splitlines() if ln.startswith("DMLC_ROLE=server"))


@pytest.mark.parametrize("order", ["[4, 2, 1]", "[1, 2, 4]"])
def test_mxnet_server_options_follow_each_scale_point_in_either_order(tmp_path, home, order):
    """Two servers: on 2 and 4 nodes one per node holds its node's CPUs; on 1 node both share
    it, each with the workers' cores (--cpus-per-task=10), never 2 x SLURM_CPUS_ON_NODE."""
    scripts = _scripts(tmp_path, order)
    seen = set()
    for name, text in scripts.items():
        if not name.startswith("mxnet-"):
            continue
        nodes = int(re.search(r"#SBATCH --nodes=(\d+)", text).group(1))
        line = _server_line(text)
        assert f"--nodes={min(2, nodes)} --ntasks=2 " in line
        if nodes == 1:
            assert "--cpus-per-task=10" in line and "SLURM_CPUS_ON_NODE" not in line, line
        else:
            assert '--cpus-per-task="${SLURM_CPUS_ON_NODE}"' in line, line
        seen.add(nodes)
    assert seen == {1, 2, 4}


def test_background_steps_are_watched_and_a_failing_one_ends_the_job(tmp_path, home):
    """MXNet's workers start through ddlbench_workers; a server step that fails (here: exits 5
    at once, as a step Slurm cannot create does) stops the workers within seconds and the job
    exits with the server's code, instead of the workers waiting for it."""
    text = _scripts(tmp_path, "[2]")["mxnet-resnet50-n2x4-b32-r0.sh"]
    assert re.search(r"^DMLC_ROLE=worker ddlbench_workers srun ", text, re.M)
    start = text.index("ddlbench_workers() {")
    func = text[start : text.index("\ntrap ", start)]
    script = tmp_path / "watch.sh"
    script.write_text(
        "set -Eeuo pipefail\nDDLBENCH_RUN_ID=r\nDDLBENCH_BG_PIDS=()\n" + func + "\n"
        '(sleep 0.2; exit 5) &\nDDLBENCH_BG_PIDS+=("$!")\n'
        "SECONDS=0\nrc=0\nddlbench_workers sleep 60 || rc=$?\n"
        'echo "rc=${rc} after=${SECONDS}"\n'
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    rc, after = re.search(r"rc=(\d+) after=(\d+)", proc.stdout).groups()
    assert rc == "5" and int(after) <= 3, proc.stdout
    assert "exited with 5 while the workers ran" in proc.stderr
    # a background step that ends well, and workers that fail: the workers' code
    script.write_text(
        "set -Eeuo pipefail\nDDLBENCH_RUN_ID=r\nDDLBENCH_BG_PIDS=()\n" + func + "\n"
        '(exit 0) &\nDDLBENCH_BG_PIDS+=("$!")\n'
        "rc=0\nddlbench_workers bash -c 'sleep 1.5; exit 3' || rc=$?\necho \"rc=${rc}\"\n"
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "rc=3", proc.stdout + proc.stderr


def test_ports_drawn_once_and_checked_only_where_a_node_binds_them(tmp_path, home):
    scripts = _scripts(tmp_path, "[2]")
    tf = _joined(scripts["tensorflow-resnet50-n2x4-b32-r0.sh"])
    assert "python -m ddlbench.workloads.node.ports --count 8)" in tf
    assert '--verify "${DDLBENCH_PORTS}" --per-node 4;' in tf
    # one port, bound on the first node only: the first node's draw is the check
    for name in ("pytorch-resnet50-n2x4-b32-r0.sh", "mxnet-resnet50-n2x4-b32-r0.sh"):
        text = _joined(scripts[name])
        assert "--count 1)" in text and "--verify" not in text, name


def test_job_environment_drops_gpu_gres_tres_and_container_requests(tmp_path, home):
    """Each variable an salloc --gpus-per-node (or a user) leaves behind is removed."""
    text = _scripts(tmp_path, "[2]")["pytorch-resnet50-n2x4-b32-r0.sh"]
    block = text[text.index("ddlbench_unset=()") : text.index("# --- Slurm ")]
    script = tmp_path / "clean.sh"
    script.write_text("set -Eeuo pipefail\n" + block + 'env | grep -E "^(SLURM|SRUN)_" | sort\n')
    leaked = {
        "SLURM_GPUS": "4",
        "SLURM_GPUS_PER_NODE": "1",
        "SLURM_GPUS_PER_SOCKET": "1",
        "SLURM_GRES": "gpu:1",
        "SLURM_TRES_BIND": "gpu:closest",
        "SLURM_CONTAINER": "/images/x",
        "SLURM_GPUS_PER_TASK": "1",
    }
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "42", **leaked}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["SLURM_JOB_ID=42"]


def test_pyxis_container_is_removed_on_every_node_once(tmp_path, home):
    scripts = _scripts(tmp_path, "[2]")
    text = scripts["pytorch-resnet50-n2x4-b32-r0.sh"]
    start = text.index("ddlbench_cleanup() {")
    func = text[start : text.index("\n}\n", start) + 3]
    removal = _joined(func)
    assert "srun --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1" in removal
    assert "--gres=none" in removal and "--container" not in removal  # enroot is the host's
    # run the clean-up twice (ERR, then EXIT) with an srun that runs its command here
    log = tmp_path / "enroot.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "enroot").write_text(f'#!/bin/bash\necho "$*" >> {log}\n')
    # srun runs its command here (the options are Slurm's business)
    (bindir / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == -* ]]; do shift; done\n"$@"\n')
    for tool in ("enroot", "srun"):
        (bindir / tool).chmod(0o755)
    script = tmp_path / "cleanup.sh"
    script.write_text(
        "set -Eeuo pipefail\nSLURM_JOB_ID=7\nDDLBENCH_BG_PIDS=()\n"
        + func
        + "ddlbench_cleanup\nddlbench_cleanup\n"
    )
    env = {"PATH": f"{bindir}:/usr/bin:/bin"}
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == [
        "remove -f pyxis_ddlbench-7",  # container_scope global
        "remove -f pyxis_7_ddlbench-7",  # container_scope job
    ]
    # no container, no removal
    iris = _scripts(tmp_path / "iris", "[2]", "iris")
    assert not any("enroot" in t for t in iris.values())


def test_iris_puts_every_framework_on_infiniband_with_exact_adapters(tmp_path, home):
    scripts = _scripts(tmp_path, "[2]", "iris")
    for name, text in scripts.items():
        assert "python -m ddlbench.workloads.node.iface_addr ib0" in _joined(text), name
        for line in ("NCCL_SOCKET_IFNAME=ib0", "GLOO_SOCKET_IFNAME=ib0", "DMLC_INTERFACE=ib0"):
            assert f"export {line}\n" in text, (name, line)
        # "=": exactly these adapters, not every name mlx5 prefixes
        assert "export NCCL_IB_HCA='=mlx5_0:1'\n" in text, name
    # a value starting with "=" is quoted, so it never reads as "=="
    assert to_shell("=mlx5_0:1,mlx5_1:1") == "'=mlx5_0:1,mlx5_1:1'"
    assert to_shell("a=b") == "a=b"


def test_review_scripts_pass_shellcheck(tmp_path, home):
    shellcheck = require_tool("shellcheck")
    paths = []
    for profile in (str(PYXIS), "iris"):
        for order in ("[4, 2, 1]",):
            out = tmp_path / Path(profile).stem
            for name, text in _scripts(out, order, profile).items():
                path = out / f"check-{name}"
                path.write_text(text)
                paths.append(str(path))
    proc = subprocess.run(
        [shellcheck, "--severity=info", "--exclude=SC2016", *paths],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout
    assert len(paths) == 18
