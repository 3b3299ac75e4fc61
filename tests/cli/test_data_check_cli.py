"""A spec whose data set cannot give every rank one batch, or a convergence run on an image
folder without ``val/``: ``validate``, ``plan`` and ``submit`` warn before anything waits in
the queue (each such run would fail at its start)."""

from __future__ import annotations

from ddlbench.plan import data_check
from tests.support.cli import invoke

DIGITS = """\
name: big-batch
model: lenet
data: digits
frameworks: [pytorch]
batch_size: [64, 512]
steps: {warmup: 1, measure: 5, measure_seconds: 5}
scale: {points: [1x1, 1x4]}
repeats: 3
"""

FOLDER = """\
name: folder
model: lenet
mode: convergence
epochs: 1
data: {{kind: imagefolder, path: {path}}}
frameworks: [pytorch]
batch_size: 2
scale: {{points: [1x1, 1x2]}}
repeats: 3
"""


def test_the_constants_follow_the_workloads_loader():
    from ddlbench.workloads.common.data import DIGITS_VAL_FRACTION, IMAGE_EXTENSIONS

    assert 1797 - round(1797 * DIGITS_VAL_FRACTION) == data_check.DIGITS_TRAIN
    assert data_check.IMAGE_SUFFIXES == IMAGE_EXTENSIONS


def test_runs_with_less_than_a_batch_per_rank_are_warned_about(tmp_path):
    spec = tmp_path / "big.yaml"
    spec.write_text(DIGITS)
    for args in (["validate", spec], ["plan", spec, "--json"]):
        res = invoke([*args, "--cluster", "local"])
        assert res.exit_code == 0, res.output  # a warning, never a refusal
        [line] = res.stderr.splitlines()
        assert line.startswith(f"{spec}:3: warning: data.kind: digits' training split has fewer")
        assert "for the runs at 4 x 512 (ranks x batch per rank)" in line  # 1,438 // 4 = 359
        assert "1 x 512" not in line and "4 x 64" not in line
    res = invoke(["submit", spec, "--cluster", "local", "--dry-run", "-q",
                  "--results", tmp_path / "results"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "for the runs at 4 x 512" in res.stderr  # -q keeps warnings


def test_an_image_folder_is_checked_where_this_host_sees_it(tmp_path):
    root = tmp_path / "imgs"
    for cls in ("a", "b"):
        (root / "train" / cls).mkdir(parents=True)
        (root / "train" / cls / "x.png").write_bytes(b"")
    spec = tmp_path / "folder.yaml"
    spec.write_text(FOLDER.format(path=root))
    res = invoke(["validate", spec, "--cluster", "local"])
    assert res.exit_code == 0, res.output
    val, small = res.stderr.splitlines()
    assert val.startswith(f"{spec}:5: warning: data.path: {root} has no val/ folder")
    assert (
        f"{root}/train (2 images) has fewer than one batch per rank for the runs at 2 x 2" in small
    )
    (root / "val" / "a").mkdir(parents=True)
    (root / "train" / "a" / "y.jpg").write_bytes(b"")
    (root / "train" / "b" / "y.jpg").write_bytes(b"")
    assert invoke(["validate", spec, "--cluster", "local"]).stderr == ""
    spec.write_text(FOLDER.format(path=tmp_path / "elsewhere"))
    res = invoke(["validate", spec, "--cluster", "local"])
    assert "elsewhere: no such folder on this host, so it was not checked" in res.stderr
