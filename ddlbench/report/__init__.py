"""Reports of a collected campaign: figures, ``report.html`` and ``report.md``.

Public API::

    build_report(campaign_dir, *, out_dir=None, formats=("html", "md"), settings=None,
                 run_states=None, progress=None, data=None, force_collect=False) -> ReportResult
"""

from __future__ import annotations

__all__ = ["ReportResult", "build_report"]


def __getattr__(name):
    if name in __all__:
        from . import render

        return getattr(render, name)
    raise AttributeError(name)
