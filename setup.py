"""Build hook: the wheel carries slurm_templates/, configs/, docs/*.md and the environment
builder (scripts/make-envs.sh with its pins) as package data.

The top-level ``slurm_templates/`` and ``configs/`` are the only copy in the repository (what
users read and edit). Building copies them into ``ddlbench/_data/`` of the build, where an
installed ddlbench finds them (``ddlbench/shipped.py``). Editable installs and source checkouts
read them in place, so nothing is copied in editable mode. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: (folder of the source tree, file pattern) -> ddlbench/_data/<folder>/
SHIPPED = [
    ("slurm_templates", "*.j2"),
    ("configs", "*.yaml"),
    ("configs/clusters", "*.yaml"),
    ("docs", "*.md"),  # `ddlbench docs TOPIC` prints them
    ("docs/studies", "*.md"),  # `ddlbench docs studies/NAME`
    # `ddlbench envs build` runs them: the pinned framework environments
    ("scripts", "make-envs.sh"),
    ("scripts/lib", "python.sh"),
    ("scripts/envs", "*.txt"),
]


class BuildWithShippedFiles(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for folder, pattern in SHIPPED:
            files = sorted((HERE / folder).glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: no {pattern} in {HERE / folder}")
            target = Path(self.build_lib) / "ddlbench" / "_data" / folder
            self.mkpath(str(target))
            for path in files:
                self.copy_file(str(path), str(target / path.name), preserve_mode=False)


def _scratch() -> str:
    """A temporary folder for setuptools' build/ and ddlbench.egg-info/: building a wheel
    (``pip wheel .``) leaves the source tree as it was. Removed when the build ends."""
    path = tempfile.mkdtemp(prefix="ddlbench-build-")
    atexit.register(shutil.rmtree, path, True)
    return path


_SCRATCH = _scratch()
setup(
    cmdclass={"build_py": BuildWithShippedFiles},
    options={"build": {"build_base": _SCRATCH}, "egg_info": {"egg_base": _SCRATCH}},
)
