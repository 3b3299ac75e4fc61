"""Rank 0's record of the packages its interpreter sees (numpy only; no framework needed)."""

from __future__ import annotations

from importlib import metadata

from ddlbench.workloads.common.provenance import installed_packages, write_packages


def test_installed_packages_match_importlib_metadata():
    lines = installed_packages()
    names = [line.split("==")[0] for line in lines]
    assert names == sorted(names, key=lambda n: n.lower().replace("_", "-"))
    assert len(set(n.lower() for n in names)) == len(names)  # one line per distribution
    assert f"numpy=={metadata.version('numpy')}" in lines
    assert f"pytest=={metadata.version('pytest')}" in lines


def test_write_packages_creates_provenance_file(tmp_path):
    path = write_packages(str(tmp_path / "run"))
    text = (tmp_path / "run" / "provenance" / "packages.txt").read_text()
    assert path.endswith("provenance/packages.txt")
    first, *rest = text.splitlines()
    assert first.startswith("# python 3.")
    assert rest == installed_packages()
    assert not list((tmp_path / "run" / "provenance").glob("*.tmp"))
