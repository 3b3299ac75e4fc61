"""The rendered job script's ERR trap reports a failure once, also one inside ``$(...)``."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.render import GOLDEN, render


@pytest.fixture(scope="module")
def traps(tmp_path_factory):
    """The rendered script's traps and their functions, from ``set -Eeuo pipefail`` on."""
    out = tmp_path_factory.mktemp("render")
    rendered = render(GOLDEN / "spec.yaml", "iris", out)
    text = next(rendered.root.glob("jobs/pytorch-*.sh")).read_text()
    start = text.index("DDLBENCH_BG_PIDS=()")
    end = text.index("trap ddlbench_cleanup EXIT\n") + len("trap ddlbench_cleanup EXIT\n")
    return "set -Eeuo pipefail\n" + text[start:end]


def _run(tmp_path, traps: str, body: str):
    script = tmp_path / "job.sh"
    script.write_text(
        f"export DDLBENCH_RUN_ID=r DDLBENCH_RUN_DIR={tmp_path}\n{traps}"
        'ddlbench_cleanup() { echo "${BASH_SUBSHELL}" >> "${DDLBENCH_RUN_DIR}/cleanups"; }\n'
        f"{body}\necho reached-the-end\n"
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("ddlbench: run r failed")]
    cleanups = tmp_path / "cleanups"  # the shell level of each cleanup
    return proc, said, cleanups.read_text().split() if cleanups.exists() else []


@pytest.mark.parametrize(
    "body,rc",
    [
        ('x=$(echo a; false; echo b)\necho "$x"', 1),
        ("x=$(exit 4)", 4),
        ("(echo a; exit 5)", 5),
        ("( false; echo b )", 1),
        ("echo a | (cat; exit 6) | cat", 6),
        ("false", 1),
    ],
)
def test_a_failure_is_reported_once_by_the_main_shell(tmp_path, traps, body, rc):
    proc, said, cleanups = _run(tmp_path, traps, body)
    assert proc.returncode == rc, proc.stderr
    assert len(said) == 1 and said[0].endswith(f"exited with {rc}"), proc.stderr
    assert (tmp_path / "exit_code").read_text() == f"{rc}\n"
    assert cleanups == ["0", "0"]  # the ERR trap's and the EXIT trap's, none in a subshell
    assert "reached-the-end" not in proc.stdout


def test_a_subshell_failure_the_script_tolerates_is_not_a_job_failure(tmp_path, traps):
    proc, said, cleanups = _run(tmp_path, traps, 'x=$(false) || true\necho "$(false; echo b)"')
    assert proc.returncode == 0 and said == [] and cleanups == ["0"], proc.stderr
    assert not (tmp_path / "exit_code").exists()
    assert "reached-the-end" in proc.stdout
