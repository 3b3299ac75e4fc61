"""`ddlbench plan` shows what a backup-worker run applies: b and the applied global batch,
(ranks - b) x the per-rank batch, beside the global batch, in the table and in --json."""

from __future__ import annotations

import json

from tests.support.cli import invoke

SPEC = """\
name: bw
cluster: local
model: lenet
data: digits
frameworks:
  - {name: pytorch, label: sync, backend: gloo}
  - {name: pytorch, label: backup1, backend: gloo, backup_workers: 1}
batch_size: 32
repeats: 3
scale:
  points: [1x2, 1x3]
inject:
  straggler: {probability: 0.2, seed: 1}
"""


def _spec(tmp_path, text: str = SPEC):
    path = tmp_path / "bw.yaml"
    path.write_text(text)
    return path


def test_plan_json_has_backup_workers_and_the_applied_batch(tmp_path):
    res = invoke(["plan", _spec(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    runs = {r["run_id"]: r for r in json.loads(res.stdout)["runs"]}
    b1 = runs["backup1-lenet-n1x3-b32-r0"]
    assert (b1["global_batch_size"], b1["backup_workers"]) == (96, 1)
    assert b1["applied_global_batch_size"] == 64  # (3 - 1) x 32
    assert runs["backup1-lenet-n1x2-b32-r0"]["applied_global_batch_size"] == 32
    sync = runs["sync-lenet-n1x3-b32-r0"]
    assert sync["backup_workers"] is None and sync["applied_global_batch_size"] == 96
    assert sync["inject"]["straggler"]["probability"] == 0.2


def test_plan_table_labels_the_applied_batch(tmp_path):
    res = invoke(["plan", _spec(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    header = next(line for line in lines if line.startswith("run id"))
    assert "global batch  b  applied batch" in header
    row = next(line for line in lines if line.startswith("backup1-lenet-n1x3-b32-r0"))
    assert row.split()[6:9] == ["96", "1", "64"]
    row = next(line for line in lines if line.startswith("sync-lenet-n1x3-b32-r0"))
    assert row.split()[6:9] == ["96", "-", "96"]
    assert any(line.startswith("b: backup workers") for line in lines)


def test_plan_table_without_backups_keeps_its_columns(tmp_path):
    text = SPEC.replace(
        "  - {name: pytorch, label: backup1, backend: gloo, backup_workers: 1}\n", ""
    )
    res = invoke(["plan", _spec(tmp_path, text)])
    assert res.exit_code == 0, res.output
    assert "applied batch" not in res.stdout
