"""The packages a rank's interpreter sees, written by rank 0 as ``provenance/packages.txt``.

The workload records them itself, rather than the batch script running ``pip freeze``, so the
list is that of the environment the ranks really run in: a venv, an Apptainer image or a Pyxis
container alike (a Pyxis container exists only inside srun steps).
"""

from __future__ import annotations

import os
import platform
import sys
from typing import List


def installed_packages() -> List[str]:
    """``name==version`` of every installed distribution, sorted by name (as ``pip freeze``)."""
    from importlib import metadata

    found = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name:  # a broken installation without metadata
            continue
        found.setdefault(name.lower().replace("_", "-"), f"{name}=={dist.version}")
    return [found[key] for key in sorted(found)]


def write_packages(run_dir: str) -> str:
    """Write ``run_dir/provenance/packages.txt`` atomically; returns its path."""
    folder = os.path.join(run_dir, "provenance")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "packages.txt")
    lines = [
        f"# python {platform.python_version()} ({sys.executable})",
        *installed_packages(),
    ]
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path
