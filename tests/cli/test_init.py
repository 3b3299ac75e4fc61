"""ddlbench init: example specs and a cluster profile, filled from Slurm where there is one."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest

from ddlbench.site_init import init_folder, parse_gres, parse_nodes, parse_sinfo, profile_text
from ddlbench.spec.load import load_profile
from tests.support.cli import invoke

# recorded from a GPU cluster's login node (two partitions, the default marked *)
SINFO = "gpu*|12|2-00:00:00\nbigmem|2|7-00:00:00\ngpu*|4|2-00:00:00\n"
NODES = (
    "NodeName=g001 Arch=x86_64 CoresPerSocket=32 CPUAlloc=0 CPUTot=64 CPULoad=0.10 "
    "AvailableFeatures=a100 Gres=gpu:a100:4(S:0-1) NodeAddr=g001 RealMemory=515000 "
    "Partitions=gpu State=IDLE\n"
    "NodeName=g002 Arch=x86_64 CPUTot=64 Gres=gpu:a100:4(S:0-1),gpu:a100:0 "
    "RealMemory=515000 Partitions=gpu,bigmem State=MIXED\n"
    "NodeName=m001 CPUTot=128 Gres=(null) RealMemory=2060000 Partitions=bigmem State=IDLE\n"
)


def test_gres_values():
    assert parse_gres("gpu:a100:4(S:0-1)") == ("a100", 4)
    assert parse_gres("gpu:2") == (None, 2)
    assert parse_gres("(null)") == (None, 0)
    assert parse_gres("gpu:h100:4(S:0-1),gpu:h100:4(S:2-3)") == ("h100", 8)
    assert parse_gres("craynetwork:4,gpu:v100:2") == ("v100", 2)


def test_profile_from_recorded_slurm(tmp_path):
    parts = parse_sinfo(SINFO)
    parse_nodes(NODES, parts)
    assert list(parts) == ["gpu", "bigmem"] and parts["gpu"].default
    # sinfo lists gpu twice (16 nodes); scontrol's node lines are what is counted when present
    assert parts["gpu"].nodes == 16 and parts["gpu"].node_count == 2
    assert parts["gpu"].gpus_per_node == 4
    assert parts["bigmem"].gpus_per_node == 0  # m001 has none
    text = profile_text("hpc1", parts, datetime(2026, 1, 2, tzinfo=timezone.utc))
    path = tmp_path / "hpc1.yaml"
    path.write_text(text)
    profile = load_profile(str(path)).value
    assert profile.name == "hpc1" and profile.device == "gpu" and profile.gpus_per_node == 4
    assert profile.slurm.partition == "gpu" and profile.slurm.gpu_type == "a100"
    assert profile.slurm.cpus_per_task == 16 and profile.max_nodes == 2
    assert "bigmem: 2 nodes, no GPUs, 64 CPUs, memory 502G, limit 7-00:00:00" in text
    assert "#  mem: 502G" in text and "2026-01-02" in text


def test_init_writes_specs_and_profile_and_never_overwrites(tmp_path):
    first = init_folder(tmp_path, slurm=(None, {}))
    assert first.profile == tmp_path / "configs" / "clusters" / "mycluster.yaml"
    assert (tmp_path / "configs" / "quickstart.yaml").is_file() and not first.kept
    assert load_profile(str(first.profile)).value.scheduler == "slurm"  # the skeleton is valid
    first.profile.write_text("# mine\n")
    second = init_folder(tmp_path, slurm=(None, {}))
    assert not second.written and first.profile in second.kept
    assert first.profile.read_text() == "# mine\n"


def test_init_command_finds_its_profile(tmp_path, monkeypatch):
    res = invoke(["init", str(tmp_path / "w")])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.stdout and "quickstart.yaml" in res.stdout
    monkeypatch.chdir(tmp_path / "w")
    name = next((tmp_path / "w" / "configs" / "clusters").glob("*.yaml")).stem
    res = invoke(["validate", "configs/lenet-mnist.yaml", "--cluster", name])
    # found through ./configs/clusters/: the spec is checked against it (a skeleton without
    # Slurm has 1 GPU per node where the spec asks for 2; a profile from Slurm may fit)
    assert f"'{name}'" in res.output and "no cluster profile" not in res.output
    again = invoke(["init", str(tmp_path / "w")])
    assert again.exit_code == 0 and "wrote" not in again.stdout and "kept" in again.stdout


def test_next_step_on_a_one_gpu_profile_is_one_error_saying_what_to_change(tmp_path, monkeypatch):
    """The step ``init`` prints, on its 1-GPU skeleton: one problem, at the spec's
    ``gpus_per_node``, naming both fixes; the first of them validates."""
    init_folder(tmp_path, slurm=(None, {}))
    monkeypatch.chdir(tmp_path)
    res = invoke(["validate", "configs/resnet50.yaml", "--cluster", "mycluster"])
    assert res.exit_code == 2 and "internal error" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    spec = tmp_path / "configs" / "resnet50.yaml"
    line = spec.read_text().splitlines().index("  gpus_per_node: 4") + 1
    want = f"configs/resnet50.yaml:{line}:3: scale.gpus_per_node: 4 GPUs per node asked"
    assert lines[0].startswith(want), lines[0]
    assert "write gpus_per_node: 1 here" in lines[0]
    assert "set gpus_per_node: 4 in profile 'mycluster'" in lines[0]
    spec.write_text(spec.read_text().replace("  gpus_per_node: 4\n", "  gpus_per_node: 1\n"))
    res = invoke(["validate", "configs/resnet50.yaml", "--cluster", "mycluster"])
    assert res.exit_code == 0 and "ok (" in res.stdout, res.output


def test_a_failing_sinfo_is_said_not_called_no_slurm(tmp_path, monkeypatch):
    """sinfo on PATH but no controller to answer it: the skeleton and init's output quote
    sinfo's error instead of saying that there is no Slurm."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text(
        "#!/bin/sh\necho 'sinfo: error: resolve_ctls_from_dns_srv' >&2\n"
        "echo 'sinfo: fatal: Could not establish a configuration source' >&2\nexit 1\n"
    )
    (bin_dir / "sinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    res = invoke(["init", "."])
    assert res.exit_code == 0, res.output
    said = "sinfo: fatal: Could not establish a configuration source"
    assert f"is a skeleton: sinfo is here but failed ({said})" in res.stdout, res.stdout
    assert "no Slurm here" not in res.stdout
    assert "\n  ddlbench validate configs/quickstart.yaml --cluster mycluster\n" in res.stdout
    text = (tmp_path / "configs" / "clusters" / "mycluster.yaml").read_text()
    assert f"sinfo is here\n# but failed ({said})," in text and "no Slurm was" not in text
    assert load_profile(str(tmp_path / "configs/clusters/mycluster.yaml")).value.name


@pytest.mark.slurm
def test_init_on_the_slurm_test_cluster(slurm_cluster, tmp_path):
    """On the loopback cluster: its partition, CPU nodes, and a profile that validates."""
    proc = subprocess.run(
        [sys.executable, "-m", "ddlbench", "init", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "filled from this node's Slurm" in proc.stdout, proc.stdout
    sinfo = subprocess.run(
        ["sinfo", "--noheader", "--format=%R|%D|%c"], capture_output=True, text=True
    ).stdout.split()[0]
    partition, nodes, cpus = sinfo.split("|")
    [path] = (tmp_path / "configs" / "clusters").glob("*.yaml")
    profile = load_profile(str(path)).value
    assert profile.slurm.partition == partition and profile.max_nodes == int(nodes)
    assert profile.device == "cpu" and profile.slurm.gpu_request == "none"
    assert profile.slurm.cpus_per_task == int(cpus)
    # the follow-up init prints validates on the CPU profile it has just filled
    hint = next(line for line in proc.stdout.splitlines() if "ddlbench validate" in line)
    args = hint.split("&&")[-1].split()[1:]
    check = subprocess.run(
        [sys.executable, "-m", "ddlbench", *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert check.returncode == 0, (hint, check.stderr)
