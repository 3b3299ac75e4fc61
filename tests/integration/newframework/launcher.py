"""A framework ddlbench does not ship: plain numpy, softmax regression, no communication.

Copied to ``ddlbench/frameworks/numpyref.py`` by tests/integration/test_new_framework.py.
"""

from __future__ import annotations

from ddlbench.frameworks.base import FrameworkOptions, Launcher


class NumpyRefOptions(FrameworkOptions):
    pass


LAUNCHER = Launcher(
    name="numpyref",
    options=NumpyRefOptions,
    workload=lambda mode, opts: "numpyref",
    modes=("throughput",),
    summary="numpy softmax regression, ranks independent (a test framework)",
    backend=lambda opts, device: "none",
    imports=lambda opts: ("numpy",),
)
