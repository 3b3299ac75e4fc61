"""The srun options of every step, the clean job environment and the Pyxis container."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.render import GOLDEN, render
from tests.support.repo import ROOT, require_tool

PYXIS = ROOT / "configs" / "clusters" / "v100-pyxis.yaml"


@pytest.fixture
def pyxis_scripts(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    rendered = render(GOLDEN / "spec.yaml", str(PYXIS), tmp_path)
    return {p.name.split("-resnet50")[0]: p.read_text() for p in rendered.root.glob("jobs/*.sh")}


def _sruns(text: str, *, removal: bool = False):
    """Each srun command, continuation lines joined; without ``removal``, not the EXIT trap's
    removal of the Pyxis container (which runs outside it)."""
    joined = text.replace("\\\n", " ")
    found = [ln for ln in joined.splitlines() if re.search(r"(^|[ =(])srun --(?!version)", ln)]
    return [ln for ln in found if removal or "enroot remove" not in ln]


def _exported(text: str):
    names = set(re.findall(r"^\s*export ([A-Z_][A-Z0-9_]*)=", text, re.M))
    names |= set(re.findall(r"^([A-Z_][A-Z0-9_]*)=\S+ srun ", text, re.M))
    for line in re.findall(r"^export ([A-Z_ ]+)$", text, re.M):
        names |= set(line.split())
    return names


def test_pyxis_gets_every_exported_name_and_one_named_container(pyxis_scripts):
    assert set(pyxis_scripts) == {"pytorch", "tensorflow", "keras", "horovod-torch",
                                  "horovod-tf", "mxnet"}  # fmt: skip
    for label, text in pyxis_scripts.items():
        exported = _exported(text)
        assert {"PYTHONPATH", "NCCL_SOCKET_IFNAME", "DDLBENCH_LOG_DIR"} <= exported
        for cmd in _sruns(text):
            given = re.search(r"--container-env=(\S+)", cmd)
            assert given, (label, cmd)
            missing = exported - set(given.group(1).split(","))
            assert not missing, (label, missing)
            assert '--container-name="ddlbench-${SLURM_JOB_ID}"' in cmd
            assert "--no-container-mount-home" in cmd  # the profile's container.options
        # the host's PYTHONPATH and ~/.local stay out of the container
        assert "export PYTHONPATH=" in text and "${PYTHONPATH:+" not in text
        assert "export PYTHONNOUSERSITE=1" in text


def test_helper_steps_hold_no_gpu_and_one_cpu(pyxis_scripts):
    for text in pyxis_scripts.values():
        for cmd in _sruns(text):
            if "ddlbench.workloads.node.rank_start" in cmd:  # the workers
                assert "--cpus-per-task=10 --distribution=block:cyclic --cpu-bind=none" in cmd
                assert "--gres=none" not in cmd
            elif "DMLC_ROLE=server" in cmd or "DMLC_ROLE=scheduler" in cmd:
                # the whole node's CPUs (--overlap), bound in the step to the spare cores
                assert "--mpi=none" in cmd and "--cpu-bind=none" in cmd and "--gres=none" in cmd
                assert '--cpus-per-task="${SLURM_CPUS_ON_NODE}"' in cmd
            elif "workloads.node.preflight" in cmd:  # before the workers; reads the GPUs
                assert "--cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none" in cmd
            else:  # port probe, rendezvous server: beside the workers
                assert "--cpus-per-task=1 --mem=1G --mpi=none --cpu-bind=none --gres=none" in cmd
        assert "gpu_sampler" not in text  # local rank 0 starts it inside the workers' step
        assert 'export DDLBENCH_TELEMETRY_DIR="${DDLBENCH_RUN_DIR}/telemetry"' in text


def test_pyxis_scripts_pass_shellcheck(pyxis_scripts, tmp_path):
    shellcheck = require_tool("shellcheck")
    paths = []
    for label, text in pyxis_scripts.items():
        path = tmp_path / f"{label}.sh"
        path.write_text(text)
        paths.append(str(path))
    proc = subprocess.run(
        [shellcheck, "--severity=info", "--exclude=SC2016", *paths], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


def _profile(tmp_path: Path, **slurm) -> str:
    text = PYXIS.read_text()
    extra = "".join(f"  {k}: {v}\n" for k, v in slurm.items())
    path = tmp_path / "site.yaml"
    path.write_text(text.replace("slurm:\n", "slurm:\n" + extra, 1).replace(
        "  threads_per_core: 1 ", "  # threads_per_core ").replace(
        "  cpu_bind: gpu-socket", "  # cpu_bind"))  # fmt: skip
    return str(path)


def test_hyperthreads_site_options_and_binding_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    profile = _profile(
        tmp_path, threads_per_core=2, cpu_bind="slurm", srun_options="[--network=sn_single]"
    )
    rendered = render(GOLDEN / "spec.yaml", profile, tmp_path / "out")
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    # cpus_per_task counts cores; Slurm counts hardware threads
    assert "#SBATCH --cpus-per-task=20\n" in text
    assert "export DDLBENCH_CORES_PER_TASK=10\n" in text
    assert "export DDLBENCH_CPU_BIND=slurm\n" in text
    sruns = _sruns(text)
    assert all("--network=sn_single" in cmd for cmd in sruns)
    worker = [c for c in sruns if "rank_start" in c][0]
    assert "--cpus-per-task=20 --distribution=block:cyclic --cpu-bind=cores" in worker


def test_modules_are_made_available_in_a_non_login_shell(tmp_path, monkeypatch):
    """The iris profile loads modules: the script sources the site's init when needed."""
    monkeypatch.setenv("HOME", "/home/user")
    rendered = render(GOLDEN / "spec.yaml", "iris", tmp_path)
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    init = text.index("if ! type module >/dev/null 2>&1; then")
    assert init < text.index("module purge")
    script = tmp_path / "module.sh"
    fake_init = tmp_path / "lmod.sh"
    fake_init.write_text('module() { echo "module $*" >> "$MODLOG"; }\n')
    block = text[init : text.index("module purge")]
    block = block.replace("/etc/profile.d/lmod.sh", str(fake_init))
    script.write_text(block + "module purge\n")
    log = tmp_path / "mod.log"
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", str(script)],
        env={"PATH": "/usr/bin:/bin", "MODLOG": str(log)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert log.read_text() == "module purge\n"


def test_job_environment_drops_inherited_placement_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    rendered = render(GOLDEN / "spec.yaml", "iris", tmp_path)
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    start = text.index("ddlbench_unset=()")
    block = text[start : text.index("export DDLBENCH_CAMPAIGN")]
    script = tmp_path / "clean.sh"
    script.write_text(
        "set -Eeuo pipefail\n" + block.replace("srun --version", "echo slurm 22.05.8")
        + 'echo "${ddlbench_unset[*]}"; env | grep -E "^(SLURM|SRUN)_" | sort\n'
    )  # fmt: skip
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_MEM_PER_CPU": "2000",
        "SLURM_DISTRIBUTION": "cyclic",
        "SLURM_CPU_BIND": "verbose,map_cpu:1",
        "SLURM_HINT": "nomultithread",
        "SRUN_CPUS_PER_TASK": "3",
        "SLURM_JOB_ID": "42",
    }
    proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert set(lines[0].split()) == {
        "SLURM_MEM_PER_CPU", "SLURM_DISTRIBUTION", "SLURM_CPU_BIND", "SLURM_HINT",
        "SRUN_CPUS_PER_TASK",
    }  # fmt: skip
    assert lines[1:] == ["SLURM_JOB_ID=42"]


def test_old_slurm_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    rendered = render(GOLDEN / "spec.yaml", "iris", tmp_path)
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    start = text.index("DDLBENCH_SLURM_VERSION=$(")
    block = text[start : text.index("export DDLBENCH_CAMPAIGN")]
    for version, ok in (("21.08.8", False), ("22.05.0", True), ("23.11.4", True), ("", True)):
        script = tmp_path / "v.sh"
        script.write_text(
            "set -Eeuo pipefail\n" + block.replace("srun --version", f"echo slurm {version}")
        )
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
        assert (proc.returncode == 0) == ok, (version, proc.stderr)
        if not ok:
            assert "older than 22.05" in proc.stderr


def test_image_folder_is_staged_to_node_local_storage(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    data = tmp_path / "imgs $(x)"
    (data / "train" / "a").mkdir(parents=True)
    (data / "train" / "a" / "1.png").write_bytes(b"png")
    spec = tmp_path / "spec.yaml"
    golden = (GOLDEN / "spec.yaml").read_text()
    data_line = f"batch_size: 64\ndata: {{kind: imagefolder, path: '{data}'}}"
    spec.write_text(golden.replace("batch_size: 64", data_line))
    stage = tmp_path / "local"
    profile = tmp_path / "site.yaml"
    profile.write_text(PYXIS.read_text() + f"stage_dir: {stage}\n")
    rendered = render(spec, str(profile), tmp_path / "out")
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    begin = text.index("export DDLBENCH_STAGED_DATA=")
    block = text[begin : text.index("# --- launch")]
    assert block.count("srun --overlap") == 1 and "--gres=none" in block
    assert f"--container-mounts={stage}:{stage}," in block  # the stage folder is mounted
    # run the copy with a srun that runs its command here (the options are Slurm's business)
    script = tmp_path / "stage.sh"
    script.write_text(
        'srun() { while [[ "$1" == -* || "$1" == *--container* ]]; do shift; done; "$@"; }\n'
        "set -Eeuo pipefail\nSLURM_JOB_ID=7\n" + block + 'ls -R "${DDLBENCH_STAGED_DATA}"\n'
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (stage / "ddlbench-7" / "train" / "a" / "1.png").read_bytes() == b"png"
    assert 'rm -rf "${DDLBENCH_STAGED_DATA}"' in text[text.index("# --- launch") :]


def test_apptainer_gets_a_clean_python_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    text = PYXIS.read_text().replace("runtime: pyxis", "runtime: apptainer")
    profile = tmp_path / "site.yaml"
    profile.write_text(text.replace("[--no-container-mount-home]", "[--contain]"))
    rendered = render(GOLDEN / "spec.yaml", str(profile), tmp_path / "out")
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    pkg = rendered.root / "pkg"
    worker = [c for c in _sruns(text) if "rank_start" in c][0]
    assert f"apptainer exec --nv --bind {tmp_path / 'out'} --bind {pkg} " in worker
    assert f"--env PYTHONPATH={pkg},PYTHONNOUSERSITE=1 --contain " in worker
    assert "--container-" not in text
    assert f"export PYTHONPATH={pkg}\n" in text and "export PYTHONNOUSERSITE=1\n" in text


def test_slurm_version_judgement():
    from ddlbench.render.launch import slurm_too_old

    assert slurm_too_old("slurm 21.08.8-2\n") == (
        "Slurm 21.08.8 is older than 22.05, which the job scripts need"
    )
    assert slurm_too_old("slurm-wlm 22.05.8\n") is None
    assert slurm_too_old("slurm 23.11.4") is None and slurm_too_old("") is None


def test_mxnet_scheduler_and_servers_are_placed_on_spare_cores(pyxis_scripts, tmp_path):
    text = pyxis_scripts["mxnet"]
    # the workers' share of a node, which the scheduler and servers leave alone
    assert "export DDLBENCH_MXNET_WORKER_TASKS=4\n" in text
    assert "export DDLBENCH_MXNET_WORKER_CPUS=10\n" in text
    assert "Recorded in provenance/mxnet-ps/" in text
    # two servers per node cannot each hold the node: they keep the workers' CPU count
    spec = (GOLDEN / "spec.yaml").read_text().replace("servers: 2", "servers: 4")
    assert spec != (GOLDEN / "spec.yaml").read_text()
    (tmp_path / "s4").mkdir()
    (tmp_path / "s4" / "spec.yaml").write_text(spec)
    rendered = render(tmp_path / "s4" / "spec.yaml", str(PYXIS), tmp_path / "out")
    (script,) = [p.read_text() for p in rendered.root.glob("jobs/mxnet-*.sh")]
    (server,) = [c for c in _sruns(script) if "DMLC_ROLE=server" in c]
    assert "--ntasks=4 --cpus-per-task=10 --gres=none" in server
    assert "SLURM_CPUS_ON_NODE" not in server


def test_mxnet_per_node_workers_run_one_task_per_node_over_its_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    golden = (GOLDEN / "spec.yaml").read_text()
    spec = golden.replace("servers: 2", "servers: 2\n    workers: per-node")
    assert spec != golden
    (tmp_path / "pn").mkdir()
    (tmp_path / "pn" / "spec.yaml").write_text(spec)
    rendered = render(tmp_path / "pn" / "spec.yaml", str(PYXIS), tmp_path / "out")
    (script,) = [p.read_text() for p in rendered.root.glob("jobs/mxnet-*.sh")]
    (worker,) = [c for c in _sruns(script) if "DMLC_ROLE=worker" in c]
    # 2 nodes x 4 GPUs: one worker per node holding the cores of its 4 GPUs (4 x 10)
    assert "--nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1" in worker
    assert "--cpus-per-task=40 " in worker and "--cpus-per-task=10" not in worker
    assert "export DMLC_NUM_WORKER=2\n" in script
    assert "export DDLBENCH_MXNET_WORKER_TASKS=1\n" in script
    assert "export DDLBENCH_MXNET_WORKER_CPUS=40\n" in script
    assert "export DDLBENCH_CPU_BIND=none\n" in script
    # the run still has 8 devices: the embedded run.json keeps world_size, and names the mode
    run_json = script.split("<<'DDLBENCH_RUN_JSON'\n")[1].split("\nDDLBENCH_RUN_JSON")[0]
    cfg = json.loads(run_json)
    assert cfg["world_size"] == 8 and cfg["framework_options"]["workers"] == "per-node"
