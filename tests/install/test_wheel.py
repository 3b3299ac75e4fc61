"""ddlbench installed from a wheel, as a user installs it: nothing read from the source tree.

The sdist is built from a copy of the checkout, the wheel from the sdist (so MANIFEST.in and
setup.py's copy of slurm_templates/ and configs/ are both exercised), and the wheel is
installed into a fresh venv. From an empty folder the quickstart is then found, rendered and
run on the local executor with the real PyTorch environment.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

from tests.support.envs import envs_root
from tests.support.repo import ROOT

pytestmark = pytest.mark.slow

SKIP = shutil.ignore_patterns(
    ".git", ".venv", "results", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
)


def need(condition: bool, why: str) -> None:
    """A missing prerequisite is a failure in CI and a skip elsewhere."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def can_build_wheels_offline() -> bool:
    """setuptools builds wheels itself from 70.1; older ones need the ``wheel`` package."""
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) >= (70, 1):
        return True
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def run(cmd: List[str], cwd: Path, env: Dict[str, str], timeout: float = 300):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ok(cmd: List[str], cwd: Path, env: Dict[str, str], timeout: float = 300) -> str:
    proc = run(cmd, cwd, env, timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def build_wheel(tmp: Path) -> Path:
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=SKIP)
    dist = tmp / "dist"
    env = dict(os.environ)
    code = (
        "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    )
    ok([sys.executable, "-c", code, str(dist)], source, env)
    (sdist,) = dist.glob("ddlbench-*.tar.gz")
    pip_wheel = ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    ok([sys.executable, *pip_wheel, "-w", str(dist), str(sdist)], tmp, env)
    (wheel,) = dist.glob("ddlbench-*.whl")
    return wheel


def install(wheel: Path, venv: Path) -> Path:
    """A fresh venv with only the wheel; its dependencies come from this interpreter's."""
    ok([sys.executable, "-m", "venv", "--without-pip", str(venv)], venv.parent, dict(os.environ))
    python = venv / "bin" / "python"
    pip_args = ["-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    ok([sys.executable, *pip_args, str(wheel)], venv.parent, dict(os.environ))
    purelib = Path(
        ok(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            venv.parent,
            dict(os.environ),
        ).strip()
    )
    # a plain path line: the folder's own .pth files (an editable ddlbench) are not read
    (purelib / "login-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return purelib


def user_env(venv: Path) -> Dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DDLBENCH_TEMPLATES", "DDLBENCH_CLUSTERS", "DDLBENCH_RESULTS")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    return env


def torch_env() -> Path:
    return envs_root() / "torch"


def test_quickstart_from_an_installed_wheel(tmp_path):
    need(can_build_wheels_offline(), "building a wheel offline needs setuptools>=70.1 or wheel")
    need((torch_env() / "bin" / "python").exists(), "no torch env (ddlbench envs build pytorch)")
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    purelib = install(wheel, venv)
    installed = purelib / "ddlbench"
    here = tmp_path / "empty"
    here.mkdir()
    env = user_env(venv)
    ddlbench = str(venv / "bin" / "ddlbench")
    env["DDLBENCH_ENVS"] = str(build_torch_env(ddlbench, tmp_path / "envs", here, env))

    where = ok(
        [str(venv / "bin" / "python"), "-c", "import ddlbench; print(ddlbench.__file__)"], here, env
    ).strip()
    assert Path(where) == installed / "__init__.py"
    # the runner started by `submit` adds nothing to the jobs' PYTHONPATH
    child = (
        "from ddlbench.execute.local.executor import _child_env; "
        "print(_child_env().get('PYTHONPATH'))"
    )
    assert ok([str(venv / "bin" / "python"), "-c", child], here, env).strip() == "None"

    # a new user types the path from the docs; ddlbench says where the example is
    proc = run([ddlbench, "submit", "configs/quickstart.yaml", "--dry-run"], here, env)
    example = installed / "_data" / "configs" / "quickstart.yaml"
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ddlbench: no such file: configs/quickstart.yaml (ddlbench ships an example spec of "
        f"that name: 'ddlbench init' writes the examples to ./configs/, or cp {example} .)"
    )
    assert example.read_text() == (ROOT / "configs" / "quickstart.yaml").read_text()
    # `ddlbench init` gives the examples and a profile; the docs come with the wheel
    ok([ddlbench, "init"], here, env)
    assert (here / "configs" / "quickstart.yaml").read_text() == example.read_text()
    assert list((here / "configs" / "clusters").glob("*.yaml"))
    page = ok([ddlbench, "docs", "cluster-profiles"], here, env)
    assert page == (ROOT / "docs" / "cluster-profiles.md").read_text()
    shutil.copy(here / "configs" / "quickstart.yaml", here / "quickstart.yaml")

    out = ok([ddlbench, "submit", "quickstart.yaml", "--dry-run"], here, env)
    assert "6 runs on cluster profile 'local'" in out
    campaign = here / "results" / "quickstart"
    assert len(list((campaign / "jobs").glob("*.sh"))) == 6
    assert (campaign / "pkg" / "ddlbench" / "workloads" / "pytorch" / "torch_main.py").is_file()
    script = (campaign / "jobs" / "pytorch-lenet-n1x2-b32-r0.sh").read_text()
    assert "ddlbench.workloads.node.rank_start pytorch" in script and str(ROOT) not in script

    doctor = run([ddlbench, "doctor", "quickstart.yaml", "--json"], here, env)
    assert doctor.returncode == 0, doctor.stderr
    files = json.loads(doctor.stdout)["files"]
    assert files["profile"] == str(installed / "_data" / "configs" / "clusters" / "local.yaml")
    assert files["templates"] == [str(installed / "_data" / "slurm_templates")]
    assert files["templates_from"] == "installed package"
    assert files["profile_search_path"][-1] == str(installed / "_data" / "configs" / "clusters")

    # one repeat of each scale point (1 and 2 ranks) really runs: the full quickstart's
    # three repeats take minutes on a small machine and exercise nothing more
    shutil.rmtree(here / "results")
    spec = (here / "quickstart.yaml").read_text()
    assert "\nrepeats: 3\n" in spec
    (here / "quickstart.yaml").write_text(spec.replace("\nrepeats: 3\n", "\nrepeats: 1\n"))
    ok([ddlbench, "submit", "quickstart.yaml"], here, env)
    waited = ok([ddlbench, "wait", "quickstart"], here, env, timeout=600)
    assert "2 runs (all ended): 2 COMPLETED" in waited, waited
    ok([ddlbench, "report", "quickstart"], here, env, timeout=600)
    assert (campaign / "report" / "report.html").is_file()
    from ddlbench.campaign.paths import CampaignPaths

    runs = CampaignPaths.of(campaign).run_folders()
    logs = sorted(p.name for run in runs for p in run.rank_logs())
    assert logs == ["rank-0.jsonl", "rank-0.jsonl", "rank-1.jsonl"]


def build_torch_env(ddlbench: str, envs: Path, here: Path, env: Dict[str, str]) -> Path:
    """``ddlbench envs build pytorch`` of the installed wheel into a folder of its own (torch
    from the local wheel folder, the rest from pip's cache); then ``envs check`` and
    ``doctor`` on a profile that uses it pass."""
    built = dict(env, DDLBENCH_ENVS=str(envs))
    out = ok([ddlbench, "envs", "build", "pytorch"], here, built, timeout=900)
    assert "torch: done in" in out and "scripts/make-envs.sh" not in out, out
    assert (envs / "torch" / ".ddlbench-stamp").is_file()
    check = ok([ddlbench, "envs", "check", "pytorch"], here, built)
    assert "torch: ok (torch " in check, check
    (here / "built.yaml").write_text(
        f"name: built\nscheduler: local\ndevice: cpu\nenvironments:\n"
        f"  pytorch: {{venv: {envs / 'torch'}}}\n"
    )
    doctor = run([ddlbench, "doctor", "--cluster", "built.yaml", "--json"], here, built)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["pytorch"]["state"] == "ok", checks["pytorch"]
    assert checks["env torch"]["state"] == "ok", checks["env torch"]  # stamp == shipped pins
    (here / "built.yaml").unlink()
    return envs


def test_building_a_wheel_leaves_the_tree_clean(tmp_path):
    """``pip wheel .`` in a checkout: no build/ or ddlbench.egg-info/ left behind."""
    need(can_build_wheels_offline(), "building a wheel offline needs setuptools>=70.1 or wheel")
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=SKIP)
    before = sorted(p.name for p in source.iterdir())
    pip_wheel = ["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    ok([sys.executable, *pip_wheel, "-w", str(tmp_path / "dist"), "."], source, dict(os.environ))
    (wheel,) = (tmp_path / "dist").glob("ddlbench-*.whl")
    assert sorted(p.name for p in source.iterdir()) == before
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert "ddlbench/_data/docs/studies/large-batch.md" in names
    assert "ddlbench/_data/docs/cli.md" in names and "ddlbench/cli/cmd_init.py" in names
    # `ddlbench envs build`: the builder, its helper and its pins
    assert {
        "ddlbench/_data/scripts/make-envs.sh",
        "ddlbench/_data/scripts/lib/python.sh",
        "ddlbench/_data/scripts/envs/torch.txt",
        "ddlbench/_data/scripts/envs/horovod.txt",
    } <= names
