"""Transformer language models in the spec: names, the seq_len axis, parallel and
checkpointing keys in variants, and the file:line refusals of what cannot run."""

from __future__ import annotations

import textwrap

import pytest

from ddlbench.errors import InputError
from ddlbench.plan import plan_runs
from ddlbench.render.campaign import run_config
from ddlbench.spec.cluster import ClusterProfile
from ddlbench.spec.load import load_spec_text

GPU8 = ClusterProfile(name="gpu8", scheduler="slurm", gpus_per_node=8)

SPEC = """\
name: lm
model: gpt-tiny
data: text
frameworks: [pytorch]
batch_size: [2, 4]
seq_len: [64, 128]
optimizer: {name: adamw, lr: 0.001}
scale: {nodes: [1, 2]}
variants:
  - {label: ddp, parallel: ddp}
  - {label: fsdp-sel, parallel: fsdp, activation_checkpointing: selective}
  - {label: zero1-acc, parallel: zero1, grad_accum: 2}
"""


def load(text: str):
    return load_spec_text(textwrap.dedent(text), "lm.yaml")


def plan(text: str):
    loaded = load(text)
    return plan_runs(loaded.value, GPU8, loaded.source)


def refusal(text: str) -> str:
    with pytest.raises(InputError) as info:
        plan(text)
    (problem,) = info.value.problems
    return str(problem)


def test_seq_len_and_batch_are_swept_and_reach_run_json():
    p = plan(SPEC)
    assert len(p.runs) == 2 * 2 * 2 * 3  # nodes x batch x seq_len x variants
    run = next(r for r in p.runs if r.variant == "fsdp-sel" and r.nodes == 2)
    assert run.lm == {
        "seq_len": run.lm["seq_len"],
        "parallel": "fsdp",
        "activation_checkpointing": "selective",
        "grad_accum": 1,
    }
    assert f"-s{run.lm['seq_len']}-" in run.run_id
    cfg = run_config(run, p, "c", "/x")
    assert cfg["lm"] == run.lm and cfg["optimizer"]["name"] == "adamw"
    acc = next(r for r in p.runs if r.variant == "zero1-acc" and r.nodes == 1 and r.batch_size == 4)
    assert acc.global_batch_size == 4 * 8 * 2  # micro-batch x devices x accumulation
    assert {r.lm["seq_len"] for r in p.runs} == {64, 128}


def test_default_seq_len_is_bounded_by_the_position_table():
    text = SPEC.replace("seq_len: [64, 128]\n", "")
    assert {r.lm["seq_len"] for r in plan(text).runs} == {256}  # gpt-tiny's 256 positions


def test_cnn_runs_carry_no_lm_and_run_json_is_unchanged():
    text = "name: c\nmodel: lenet\nframeworks: [pytorch]\nscale: {nodes: [1]}\n"
    p = plan(text)
    assert p.runs[0].lm is None and "lm" not in run_config(p.runs[0], p, "c", "/x")


def test_seq_len_beyond_the_positions_points_at_the_value():
    message = refusal(SPEC.replace("[64, 128]", "[64, 512]"))
    assert message.startswith("lm.yaml:6:") and "256 positions" in message


def test_parallel_with_a_cnn_is_refused_where_written():
    text = SPEC.replace("model: gpt-tiny", "model: resnet50").replace(
        "data: text", "data: synthetic"
    )
    text = text.replace("seq_len: [64, 128]\n", "").replace(
        "optimizer: {name: adamw, ", "optimizer: {"
    )
    with pytest.raises(InputError) as info:
        plan(text)
    messages = [str(p) for p in info.value.problems]
    assert any(m.startswith("lm.yaml:9:") and "'parallel'" in m for m in messages), messages
    assert all("transformer models" in m for m in messages)


def test_mxnet_refuses_a_transformer_with_the_reason():
    message = refusal(SPEC.replace("frameworks: [pytorch]", "frameworks: [pytorch, mxnet]"))
    assert message.startswith("lm.yaml:4:") and "mxnet cannot train gpt-tiny" in message
    assert "sharded data parallelism" in message


def test_a_cnn_key_and_data_kind_are_refused_for_a_transformer():
    assert "CNN key" in refusal(SPEC + "layout: channels_last\n")
    message = refusal(SPEC.replace("data: text", "data: digits"))
    assert message.startswith("lm.yaml:3:") and "synthetic or text" in message


def test_text_data_is_refused_for_a_cnn():
    text = "name: c\nmodel: lenet\ndata: text\nframeworks: [pytorch]\nscale: {nodes: [1]}\n"
    message = refusal(text)
    assert message.startswith("lm.yaml:3:") and "transformer models" in message


def test_unknown_parallel_mode_suggests_the_near_one():
    with pytest.raises(InputError) as info:
        load(SPEC.replace("parallel: fsdp,", "parallel: fdsp,"))
    message = str(info.value.problems[0])
    assert message.startswith("lm.yaml:11:") and "fsdp" in message


def test_unknown_model_lists_the_transformers():
    with pytest.raises(InputError) as info:
        load(SPEC.replace("gpt-tiny", "gpt-tinny"))
    assert "did you mean 'gpt-tiny'" in str(info.value.problems[0])


def test_plan_predicts_memory_and_warns_about_what_will_not_fit():
    from ddlbench.plan.memory import memory_gib, memory_warnings
    from ddlbench.spec.load import load_spec

    h100 = ClusterProfile(name="h100", scheduler="slurm", gpus_per_node=8, device_memory_gib=80)
    loaded = load_spec("configs/llama3-8b.yaml")
    p = plan_runs(loaded.value, h100, loaded.source)
    gib = memory_gib(p)
    by_id = {r.run_id: gib[r.run_id] for r in p.runs}
    ddp = by_id["pytorch-llama3-8b-n1x8-b1-s2048-ddp-r0"]
    fsdp = by_id["pytorch-llama3-8b-n1x8-b1-s2048-fsdp-full-r0"]
    assert ddp > 16 * 8.03e9 / 2**30 > 80 > fsdp  # DDP holds 16 bytes per parameter
    warned = memory_warnings(p)
    assert any(w.startswith("pytorch-llama3-8b-n1x8-b1-s2048-ddp:") for w in warned)
    assert not any("fsdp-full" in w and "n1x8-b1-s2048" in w for w in warned)
    assert all("80 GiB of profile 'h100'" in w for w in warned)


def test_plan_command_shows_memory_per_rank(tmp_path):
    from click.testing import CliRunner

    from ddlbench.cli import main

    profile = tmp_path / "h100.yaml"
    profile.write_text(
        "name: h100\nscheduler: slurm\ndevice: gpu\ngpus_per_node: 8\ndevice_memory_gib: 80\n"
    )
    result = CliRunner().invoke(main, ["plan", "configs/llama3-8b.yaml", "--cluster", str(profile)])
    assert result.exit_code == 0, result.output
    assert (
        "GiB/rank" in result.output
        and "warning: pytorch-llama3-8b-n1x8-b1-s2048-ddp" in result.output
    )


def test_plan_shows_memory_per_rank_to_three_significant_figures():
    """Small models differ in the second and third figure (0.399, 0.384), which one decimal
    hid (0.4 for all); the formatter is the report's, and the plan still loads no pandas."""
    import json
    import re
    import subprocess
    import sys

    probe = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from ddlbench.cli import main\n"
        "r = CliRunner().invoke(main, ['plan', 'configs/gpt-mini.yaml', '--cluster', 'local'])\n"
        "print(json.dumps([r.exit_code, r.output, 'pandas' in sys.modules]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    code, output, pandas = json.loads(proc.stdout)
    assert code == 0 and not pandas, output
    cells = [line.split()[-1] for line in output.splitlines() if line.startswith("pytorch-")]
    assert cells and all(re.fullmatch(r"0\.\d{3}", c) for c in cells), cells
    assert len(set(cells)) > 1, cells


def test_llama3_8b_renders_dry_run(tmp_path):
    from tests.support.cli import ddlbench

    profile = tmp_path / "h100.yaml"
    profile.write_text(
        "name: h100\nscheduler: slurm\ndevice: gpu\ngpus_per_node: 8\ndevice_memory_gib: 80\n"
    )
    results = tmp_path / "results"
    got = ddlbench(
        "submit", "configs/llama3-8b.yaml", "--dry-run", "--cluster", str(profile), results=results
    )
    assert got.returncode == 0, got.stderr
    assert "warning" in got.stderr and "predicted peak" in got.stderr
    scripts = sorted((results / "llama3-8b" / "jobs").glob("*.sh"))
    assert len(scripts) == 90
    assert '"parallel": "hsdp"' in next(p for p in scripts if "-hsdp-" in p.name).read_text()


def test_horovod_wrapping_pytorch_is_data_parallel_only():
    text = SPEC.replace("frameworks: [pytorch]", "frameworks: [{name: horovod, wraps: pytorch}]")
    with pytest.raises(InputError) as info:
        plan(text)
    messages = [str(p) for p in info.value.problems]
    assert len(messages) == 2 and all("data-parallel only" in m for m in messages)
    assert messages[0].startswith("lm.yaml:11:")  # the fsdp variant's parallel
    ddp_only = text.split("  - {label: fsdp-sel")[0] + "  - {label: acc, grad_accum: 2}\n"
    runs = plan(ddp_only).runs
    assert {r.workload for r in runs} == {"horovod_torch"} and len(runs) == 16
    tf = SPEC.replace("frameworks: [pytorch]", "frameworks: [{name: horovod, wraps: tensorflow}]")
    assert "wrapping pytorch only" in refusal(tf)


@pytest.mark.parametrize("name", ["tensorflow", "keras"])
def test_tensorflow_and_keras_are_data_parallel_without_checkpointing(name):
    text = SPEC.replace("frameworks: [pytorch]", f"frameworks: [{name}]")
    with pytest.raises(InputError) as info:
        plan(text)
    messages = sorted(str(p) for p in info.value.problems)
    # the fsdp variant (line 11: parallel and checkpointing), the zero1 variant (line 12)
    assert len(messages) == 3, messages
    assert [m.split(":")[1] for m in messages] == ["11", "11", "12"]
    assert sum("data-parallel only: parallel ddp" in m for m in messages) == 2
    assert sum("activation checkpointing is not built" in m for m in messages) == 1
    amp = text.replace("batch_size: [2, 4]", "precision: amp\nbatch_size: [2, 4]")
    assert any("amp's loss scaling" in str(p) for p in _problems(amp))
    ddp_only = text.split("  - {label: fsdp-sel")[0] + "  - {label: acc, grad_accum: 2}\n"
    runs = plan(ddp_only).runs
    assert {r.workload for r in runs} == {name} and len(runs) == 16
    assert {r.lm["parallel"] for r in runs} == {"ddp"}


def _problems(text: str):
    with pytest.raises(InputError) as info:
        plan(text)
    return info.value.problems
