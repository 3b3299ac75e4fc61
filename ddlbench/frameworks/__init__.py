"""Registry of framework launchers, discovered from the modules of this package."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Dict

from ddlbench.frameworks.base import FrameworkOptions, Launcher

__all__ = ["FrameworkOptions", "Launcher", "launchers", "get_launcher"]


@lru_cache(maxsize=1)
def launchers() -> Dict[str, Launcher]:
    """All launchers, by name, in a stable order."""
    found: Dict[str, Launcher] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        launcher = getattr(module, "LAUNCHER", None)
        if isinstance(launcher, Launcher):
            found[launcher.name] = launcher
    return found


def get_launcher(name: str) -> Launcher:
    return launchers()[name]
