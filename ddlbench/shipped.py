"""Where ddlbench's shipped files are: job-script templates, cluster profiles, example specs.

The source tree's top-level ``slurm_templates/`` and ``configs/`` are what users read and edit,
and the only copy in the repository. Building a wheel copies them into the package as
``ddlbench/_data/`` (``setup.py``); an installed ddlbench reads them there through
:mod:`importlib.resources`. A source checkout (``python -m ddlbench`` in it, or an editable
install) has no ``_data/`` and reads the top-level folders in place.

Site overrides come first: ``DDLBENCH_TEMPLATES`` replaces the shipped template folder, and
cluster profiles are searched on a path that ends with the shipped ones
(:func:`ddlbench.spec.load.profile_search_path`). Standard library only: login-node code.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import List, Optional

from ddlbench.errors import DDLBenchError

#: the package folder a wheel carries the shipped files in (same layout as the source tree)
DATA_DIR = "_data"
TEMPLATES = "slurm_templates"
EXAMPLES = "configs"
PROFILES = "configs/clusters"
DOCS = "docs"
#: the builder of the pinned framework environments (``ddlbench envs build``), with its pins
MAKE_ENVS = "scripts/make-envs.sh"
TEMPLATES_ENV = "DDLBENCH_TEMPLATES"


def _installed_root() -> Optional[Path]:
    data = resources.files("ddlbench").joinpath(DATA_DIR)
    # an installed package is a folder on disk (ddlbench does not run from a zip file)
    return Path(str(data)) if data.is_dir() else None


def _checkout_root() -> Optional[Path]:
    root = Path(__file__).resolve().parents[1]
    return root if (root / TEMPLATES).is_dir() and (root / "pyproject.toml").is_file() else None


def shipped_root() -> Path:
    """The folder holding ``slurm_templates/`` and ``configs/``: in the package, or the checkout."""
    root = _installed_root() or _checkout_root()
    if root is None:
        raise DDLBenchError(
            f"ddlbench's shipped templates are missing (no {DATA_DIR}/ in "
            f"{Path(__file__).resolve().parent}, and not a source checkout): reinstall ddlbench "
            f"from a wheel or an sdist, or set {TEMPLATES_ENV}"
        )
    return root


def shipped_templates() -> Path:
    return shipped_root() / TEMPLATES


def template_dir() -> Path:
    """The job-script template folder: ``$DDLBENCH_TEMPLATES`` or the shipped one."""
    override = os.environ.get(TEMPLATES_ENV)
    if override:
        return Path(os.path.expanduser(override))
    return shipped_templates()


def template_source() -> str:
    """Why :func:`template_dir` is what it is, for ``ddlbench doctor``."""
    if os.environ.get(TEMPLATES_ENV):
        return f"${TEMPLATES_ENV}"
    return "installed package" if _installed_root() else "source checkout"


def shipped_profiles() -> Optional[Path]:
    """The folder of the shipped cluster profiles (None only when nothing is shipped)."""
    root = _installed_root() or _checkout_root()
    return root / PROFILES if root else None


def profile_names(folder: Optional[Path]) -> List[str]:
    """The profile names a folder holds (``iris`` for ``iris.yaml`` or ``iris.yml``), sorted:
    what :func:`ddlbench.spec.load.find_profile` finds there by name."""
    if folder is None or not folder.is_dir():
        return []
    return sorted({p.stem for p in folder.glob("*.y*ml") if p.suffix in (".yaml", ".yml")})


def shipped_examples() -> Optional[Path]:
    """The folder of the example specs (``quickstart.yaml``, ``resnet50.yaml``, ...)."""
    root = _installed_root() or _checkout_root()
    return root / EXAMPLES if root else None


def shipped_example(name: str) -> Optional[Path]:
    """The example spec a missing spec path names (``configs/quickstart.yaml``), if any."""
    folder = shipped_examples()
    if folder is None:
        return None
    candidate = folder / Path(name).name
    return candidate if candidate.suffix in (".yaml", ".yml") and candidate.is_file() else None


def shipped_docs() -> Optional[Path]:
    """The folder of the user documentation (``cli.md``, ``spec.md``, ...)."""
    root = _installed_root() or _checkout_root()
    return root / DOCS if root else None


def shipped_make_envs() -> Optional[Path]:
    """``scripts/make-envs.sh`` (with ``scripts/envs/*.txt``, its pins): in the package or the
    checkout; None when neither has it."""
    root = _installed_root() or _checkout_root()
    script = root / MAKE_ENVS if root else None
    return script if script is not None and script.is_file() else None
