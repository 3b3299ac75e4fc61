"""Every ``--help`` example that can run offline (validate, plan, docs, predict from
numbers, init, submit --dry-run) runs and exits 0 on the shipped specs: an example is a
promise. Examples that need a campaign, a scheduler or a site's own profile are not run."""

from __future__ import annotations

import glob
import shlex
from typing import List, Tuple

import pytest

from ddlbench.cli import _commands, main
from tests.support.cli import invoke
from tests.support.repo import ROOT

OFFLINE = {"validate", "plan", "docs", "predict", "init", "submit"}
#: profile names an example uses as a stand-in for the reader's own
PLACEHOLDERS = ("mycluster", "h100x8")


def _examples() -> List[Tuple[str, str]]:
    out = []
    for name in sorted(_commands()):
        epilog = main.get_command(None, name).epilog or ""
        block = epilog.split("Examples:", 1)[1] if "Examples:" in epilog else ""
        line = ""
        for raw in block.splitlines()[1:]:
            if not raw.startswith("  "):
                break
            line += raw.strip()
            if line.endswith("\\"):
                line = line[:-1] + " "
                continue
            out.append((name, line))
            line = ""
    return out


def _runnable(line: str) -> bool:
    words = line.split("#")[0].split("|")[0].split()
    if not words or words[0] != "ddlbench" or "&&" in words or len(words) < 2:
        return False
    if words[1] not in OFFLINE or any(p in words for p in PLACEHOLDERS):
        return False
    if words[1] == "submit" and "--dry-run" not in words:
        return False
    return not (words[1] == "predict" and "--from" in words)


RUNNABLE = [e for e in _examples() if _runnable(e[1])]


def test_examples_are_found():
    assert len(RUNNABLE) >= 12 and any(c == "validate" for c, _ in RUNNABLE)


@pytest.mark.parametrize("command,line", RUNNABLE, ids=[e[1][:60] for e in RUNNABLE])
def test_help_example_runs(command, line, tmp_path, monkeypatch):
    monkeypatch.setenv("DDLBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.chdir(tmp_path if line.split()[1] == "init" else ROOT)
    words = shlex.split(line.split(" #")[0].split(" | ")[0])[1:]
    args = [m for w in words for m in (sorted(glob.glob(w)) if "*" in w else [w])]
    r = invoke(args)
    assert r.exit_code == 0, f"{command} --help example `{line}` failed:\n{r.output}"
