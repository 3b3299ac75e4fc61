"""The end-to-end tests' spec and campaign runner: submit, wait, and diagnose on failure."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import ddlbench, diagnose

#: LeNet on the digits data; fill in ``frameworks`` (YAML list lines) and ``point``
SPEC = """\
name: e2e
model: lenet
data: digits
frameworks:
{frameworks}
batch_size: 16
steps: {{warmup: 3, measure: 12, measure_seconds: 0}}
optimizer: {{lr: 0.05, momentum: 0.9, weight_decay: 0.0}}
lr_scaling: {{rule: none}}
scale: {{points: [{point}]}}
slurm: {{time: "00:05:00"}}
"""


def run_campaign(spec_text: str, cluster: str, campaign: str, tmp: Path) -> Path:
    spec = tmp / f"{campaign}.yaml"
    spec.write_text(spec_text)
    results = tmp / "results"
    sub = ddlbench(
        "submit", str(spec), "--cluster", cluster, "--campaign", campaign, results=results
    )
    assert sub.returncode == 0, sub.stderr
    waited = ddlbench("wait", campaign, "--timeout", "840", results=results)
    status = ddlbench("status", campaign, "--json", results=results)
    assert waited.returncode == 0, diagnose(results / campaign, waited.stdout + status.stdout)
    return results / campaign
