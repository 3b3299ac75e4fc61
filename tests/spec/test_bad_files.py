"""Files that are not well-formed specs: duplicate keys and binary data, through the CLI.

Each must exit with code 2 and one ``file[:line:col]: what`` line, never a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from ddlbench.errors import InputError
from ddlbench.spec.yamlsource import parse_yaml
from tests.support.repo import ROOT

QUICKSTART = (ROOT / "configs" / "quickstart.yaml").read_text()
LOCAL_PROFILE = (ROOT / "configs" / "clusters" / "local.yaml").read_text()


def ddlbench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddlbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )


def line_of(text: str, prefix: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(prefix))


def assert_input_error(proc: subprocess.CompletedProcess, expected: List[str]) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == expected


@pytest.mark.parametrize("command", [["validate"], ["submit", "--dry-run"]])
def test_duplicate_key_in_spec_names_both_lines(tmp_path, command):
    first = line_of(QUICKSTART, "batch_size:")
    spec = tmp_path / "dup.yaml"
    spec.write_text(QUICKSTART + "batch_size: 64\n")
    last = len(spec.read_text().splitlines())
    proc = ddlbench(*command, str(spec), "--cluster", "local", cwd=tmp_path)
    assert_input_error(
        proc, [f"{spec}:{last}:1: duplicate key 'batch_size' (first at line {first})"]
    )


def test_duplicate_key_in_nested_mapping(tmp_path):
    spec = tmp_path / "dup.yaml"
    spec.write_text(QUICKSTART.replace("steps: {warmup: 5,", "steps: {warmup: 5, warmup: 6,"))
    line = line_of(QUICKSTART, "steps:")
    proc = ddlbench("validate", str(spec), "--cluster", "local", cwd=tmp_path)
    assert_input_error(proc, [f"{spec}:{line}:20: duplicate key 'warmup' (first at line {line})"])


def test_duplicate_key_in_profile(tmp_path):
    profile = tmp_path / "site.yaml"
    first = line_of(LOCAL_PROFILE, "device:")
    profile.write_text(LOCAL_PROFILE + "device: gpu\n")
    last = len(profile.read_text().splitlines())
    spec = tmp_path / "q.yaml"
    spec.write_text(QUICKSTART)
    proc = ddlbench("validate", str(spec), "--cluster", str(profile), cwd=tmp_path)
    assert_input_error(
        proc, [f"{profile}:{last}:1: duplicate key 'device' (first at line {first})"]
    )


def test_merge_key_may_be_overridden():
    text = "base: &b {lr: 1, momentum: 0.9}\nopt:\n  <<: *b\n  lr: 3\n"
    assert parse_yaml(text, "m.yaml").data["opt"] == {"lr": 3, "momentum": 0.9}
    with pytest.raises(InputError, match=r"m.yaml:5:3: duplicate key 'lr' \(first at line 4\)"):
        parse_yaml(text + "  lr: 4\n", "m.yaml")


@pytest.mark.parametrize(
    "content,why",
    [
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", "a NUL byte on line 1: binary data"),
        (b"name: x\nmodel: \xc3\x28\n", "byte 0xc3 on line 2 is not UTF-8"),
        (b"name: x\n\x7f\x01\x02\n", "character #x007f on line 2"),
    ],
    ids=["gzip", "latin", "control"],
)
@pytest.mark.parametrize("command", [["validate"], ["submit", "--dry-run"], ["plan"]])
def test_binary_spec_is_not_a_yaml_text_file(tmp_path, command, content, why):
    spec = tmp_path / "garbage.yaml"
    spec.write_bytes(content)
    proc = ddlbench(*command, str(spec), "--cluster", "local", cwd=tmp_path)
    assert_input_error(proc, [f"ddlbench: {spec}: not a YAML text file ({why})"])
    assert not (tmp_path / "results").exists()


def test_binary_profile_is_not_a_yaml_text_file(tmp_path):
    profile = tmp_path / "site.yaml"
    profile.write_bytes(bytes(range(256)))
    spec = tmp_path / "q.yaml"
    spec.write_text(QUICKSTART)
    proc = ddlbench("validate", str(spec), "--cluster", str(profile), cwd=tmp_path)
    assert_input_error(
        proc, [f"ddlbench: {profile}: not a YAML text file (a NUL byte on line 1: binary data)"]
    )


def test_byte_order_mark_is_text():
    from ddlbench.spec.yamlsource import decode_text

    assert parse_yaml(decode_text(b"\xef\xbb\xbfa: 1\n", "b.yaml"), "b.yaml").data == {"a": 1}
