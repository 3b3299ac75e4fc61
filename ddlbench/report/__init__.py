"""Reports of a collected campaign: figures, ``report.html`` and ``report.md``.

Public API::

    build_report(campaign_dir, *, out_dir=None, formats=FORMATS, settings=None,
                 run_states=None, progress=None, data=None, force_collect=False,
                 calibration=None) -> ReportResult

Modules: ``render`` builds and writes the report; ``sections`` describes its tables
(``table`` fills them), ``narrative`` writes its sentences, ``captions`` its formula
captions, ``format`` every value; ``model`` is the scaling-model section, ``plots`` and
``worker`` draw the figures.
"""

from __future__ import annotations

__all__ = ["ReportResult", "build_report"]


def __getattr__(name):
    if name in __all__:
        from . import render

        return getattr(render, name)
    raise AttributeError(name)
