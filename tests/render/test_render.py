"""Rendered scripts: golden files, shell validity, quoting, layout and the run config."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ddlbench.errors import InputError
from ddlbench.plan import plan_runs
from ddlbench.render import render_campaign
from ddlbench.render.campaign import read_run_config
from ddlbench.spec.load import load_profile, load_spec_text
from tests.support.render import GOLDEN, render
from tests.support.repo import ROOT, require_tool

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def _pairs():
    """Each shipped config with its own cluster, with 'local', and with 'localslurm' if it fits."""
    import yaml

    out = []
    for config in CONFIGS:
        own = yaml.safe_load(config.read_text()).get("cluster") or "local"
        for profile in dict.fromkeys([own, "local"]):
            if profile == "local" and "backend: nccl" in config.read_text():
                continue  # NCCL needs GPUs: the CPU profile refuses it (test_plan)
            out.append((config, profile))
        if config.stem in ("quickstart", "lenet-mnist"):
            out.append((config, "localslurm"))
    return out


@pytest.fixture
def fixed_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/user")
    monkeypatch.delenv("DDLBENCH_ENVS", raising=False)


def normalise(text: str, out: Path) -> str:
    return text.replace(str(out.resolve()), "<RESULTS>")


def test_golden_scripts(tmp_path, fixed_home):
    """The review artifact: one rendered job script per framework launch style.

    Regenerate with DDLBENCH_UPDATE_GOLDEN=1 and read the diff.
    """
    rendered = render(GOLDEN / "spec.yaml", "iris", tmp_path)
    scripts = sorted((rendered.root / "jobs").iterdir())
    assert len(scripts) == 6
    update = os.environ.get("DDLBENCH_UPDATE_GOLDEN")
    mismatched = []
    for script in scripts:
        label = script.name.split("-resnet50-")[0]
        got = normalise(script.read_text(), tmp_path)
        golden = GOLDEN / f"{label}.sh"
        if update:
            golden.write_text(got)
        elif golden.read_text() != got:
            mismatched.append(label)
    assert not mismatched, f"rendered scripts differ from golden files: {mismatched}"


@pytest.mark.parametrize(
    "config,profile", _pairs(), ids=lambda v: v.stem if isinstance(v, Path) else v
)
def test_every_shipped_config_renders_valid_shell(config, profile, tmp_path, fixed_home):
    shellcheck = require_tool("shellcheck")
    rendered = render(config, profile, tmp_path)
    scripts = sorted(rendered.root.glob("jobs/*.sh"))
    assert scripts
    # one script per distinct template path is enough for shellcheck; bash -n checks all
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True)
    by_framework = {}
    for script in scripts:
        by_framework.setdefault(script.name.split("-")[0], script)
    proc = subprocess.run(
        [shellcheck, "--severity=info", *map(str, by_framework.values())],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout


def test_hostile_values_are_quoted(tmp_path, fixed_home):
    nasty = "a'b\"c $(touch PWNED) `id` ; rm -rf / && echo ${HOME}\nnext line"
    text = f"""
name: q
model: lenet
frameworks: [pytorch]
scale: {{points: [1x1]}}
env:
  NASTY: {json.dumps(nasty)}
"""
    spec = load_spec_text(text, "q.yaml")
    profile = load_profile("local")
    plan = plan_runs(spec.value, profile.value, spec.source)
    rendered = render_campaign(
        plan, "q", tmp_path, text, "q.yaml", profile.source.text, profile.path
    )
    script = (rendered.root / "jobs" / "pytorch-lenet-n1x1-b32-r0.sh").read_text()
    start = script.index("export NASTY=")
    end = script.index("\nexport", start + 1)
    export_line = script[start:end]
    proc = subprocess.run(
        ["bash", "-c", export_line + '\nprintf %s "$NASTY"'],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout == nasty
    assert not (tmp_path / "PWNED").exists()


def test_layout_manifest_and_run_config(tmp_path, fixed_home):
    rendered = render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path)
    root = rendered.root
    manifest = json.loads((root / "campaign.json").read_text())
    assert manifest["format"] == "ddlbench-campaign/1"
    assert manifest["campaign"] == "quickstart"
    assert len(manifest["runs"]) == 6
    assert (root / "spec.yaml").read_text() == (ROOT / "configs" / "quickstart.yaml").read_text()
    assert (root / "pkg" / "ddlbench" / "__init__.py").is_file()
    entry = manifest["runs"][1]
    run_dir = root / entry["run_dir"]
    script = root / entry["script"]
    assert entry["run_dir"] == f"runs/{entry['run_id']}"
    assert entry["script"] == f"jobs/{entry['run_id']}.sh"
    assert os.access(script, os.X_OK)
    assert not run_dir.exists()  # created at submission; the job writes run.json into it
    config = read_run_config(run_dir, script)
    assert config["format"] == "ddlbench-run/1"
    assert config["world_size"] == 2 and config["global_batch_size"] == 64
    # the quickstart's 0.02 at batch 32, doubled for 2 ranks (docs/spec.md: at 0.05 it diverged)
    assert config["optimizer"]["lr"] == pytest.approx(0.04)
    assert config["optimizer"]["base_lr"] == pytest.approx(0.02)
    assert config["image_size"] == 28 and config["num_classes"] == 10
    assert config["log_dir"] == str(run_dir / "logs")
    assert config["data"]["kind"] == "digits"


def test_rerender_is_stable_and_different_spec_is_refused(tmp_path, fixed_home):
    first = render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path)
    scripts = {p: p.read_text() for p in first.root.glob("jobs/*.sh")}
    assert len(scripts) == 6
    again = render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path)
    assert {p: p.read_text() for p in again.root.glob("jobs/*.sh")} == scripts
    with pytest.raises(InputError, match="rendered from a different spec"):
        render(ROOT / "configs" / "lenet-mnist.yaml", "local", tmp_path, campaign="quickstart")


def test_bad_campaign_name(tmp_path):
    with pytest.raises(InputError, match="campaign name"):
        render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path, campaign="../x")


def test_gpu_request_styles(tmp_path, fixed_home, monkeypatch):
    rendered = render(GOLDEN / "spec.yaml", "iris", tmp_path)
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    assert "#SBATCH --gres=gpu:v100:4\n" in text
    assert "#SBATCH --exclusive\n" in text
    local = render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path / "l")
    text = next(local.root.glob("jobs/*.sh")).read_text()
    assert "--gres" not in text and "--gpus-per-node" not in text
    assert 'export CUDA_VISIBLE_DEVICES=""' in text


def test_job_writes_its_run_config(tmp_path, fixed_home):
    """The heredoc in the job script reproduces the run config exactly when executed."""
    rendered = render(ROOT / "configs" / "quickstart.yaml", "local", tmp_path)
    path = next(rendered.root.glob("jobs/*.sh"))
    run_dir = rendered.root / "runs" / path.stem
    run_dir.mkdir()
    script = path.read_text()
    start = script.index("cat > run.json")
    end = script.index("\nDDLBENCH_RUN_JSON\n", start) + len("\nDDLBENCH_RUN_JSON\n")
    subprocess.run(["bash", "-c", script[start:end]], cwd=run_dir, check=True)
    written = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").unlink()
    assert written == read_run_config(run_dir, path)
    assert written["run_id"] == path.stem


def test_parallel_rendering_writes_the_same_files(tmp_path, fixed_home, monkeypatch):
    """Large sweeps render in forked workers; the files are the same as rendered inline."""
    import ddlbench.render.campaign as campaign

    monkeypatch.setattr(campaign, "PARALLEL_MIN_RUNS", 2)
    monkeypatch.setattr(campaign.os, "cpu_count", lambda: 3)
    parallel = render(ROOT / "configs" / "resnet50.yaml", "iris", tmp_path / "p")
    monkeypatch.setenv("DDLBENCH_RENDER_WORKERS", "1")
    inline = render(ROOT / "configs" / "resnet50.yaml", "iris", tmp_path / "i")
    files_p = sorted(p.relative_to(parallel.root) for p in parallel.root.glob("jobs/*.sh"))
    files_i = sorted(p.relative_to(inline.root) for p in inline.root.glob("jobs/*.sh"))
    assert len(files_p) == 60 and files_p == files_i
    for rel in files_p:
        got = (parallel.root / rel).read_text().replace(str(tmp_path / "p"), "<R>")
        assert got == (inline.root / rel).read_text().replace(str(tmp_path / "i"), "<R>")
    assert (
        parallel.manifest["runs"]
        == json.loads((parallel.root / "campaign.json").read_text())["runs"]
    )


def test_one_gpu_benchmark_campaign_renders(tmp_path, fixed_home, monkeypatch):
    """benchmarks/gpu/: the one-GPU profile and spec render valid shell with the sampler,
    the pre-flight and the given virtualenv (they run only on a GPU machine)."""
    shellcheck = require_tool("shellcheck")
    monkeypatch.setenv("DDLBENCH_TORCH_VENV", "/opt/cuda torch/venv")
    gpu = ROOT / "benchmarks" / "gpu"
    rendered = render(gpu / "resnet50-one-gpu.yaml", str(gpu / "one-gpu.yaml"), tmp_path)
    scripts = sorted(rendered.root.glob("jobs/*.sh"))
    assert [s.name.split("-b256-")[1] for s in scripts] == [
        "bf16-cl-compile-r0.sh", "bf16-cl-compile-r1.sh", "fp32-r0.sh", "fp32-r1.sh",
        "shipped-r0.sh", "shipped-r1.sh",
    ]  # fmt: skip
    text = scripts[0].read_text()
    assert "source '/opt/cuda torch/venv/bin/activate'" in text
    assert 'export DDLBENCH_TELEMETRY_DIR="${DDLBENCH_RUN_DIR}/telemetry"' in text
    assert "-m ddlbench.workloads.node.preflight --policy warn" in text
    proc = subprocess.run([shellcheck, "--severity=info", str(scripts[0])], capture_output=True)
    assert proc.returncode == 0, proc.stdout
    shipped = read_run_config(rendered.root / "runs" / scripts[-1].stem, scripts[-1])
    assert (shipped["precision"], shipped["layout"], shipped["compile"]) == (
        "amp", "channels_last", True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "spec, labels",
    [
        ("gpt2-one-gpu.yaml", ["ddp", "ddp-ckpt", "ddp-selective", "ddp-compile", "fsdp", "zero1"]),
        ("mpt1b-one-gpu.yaml", ["none", "selective", "full", "none-compile"]),
    ],
)
def test_one_gpu_transformer_specs_plan(spec, labels, monkeypatch):
    """benchmarks/gpu/'s transformer specs are valid against the one-GPU profile, one run per
    variant (session.sh submits them as they are)."""
    from tests.support.cli import invoke

    monkeypatch.setenv("DDLBENCH_TORCH_VENV", "/opt/torch")
    gpu = ROOT / "benchmarks" / "gpu"
    result = invoke(["plan", str(gpu / spec), "--cluster", str(gpu / "one-gpu.yaml"), "--json"])
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [r["variant"] for r in runs] == labels
