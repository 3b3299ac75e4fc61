"""``ddlbench report``: collected data -> ``report.html`` (self-contained), ``report.md``.

Building the report: collect if needed, analyse, draw the figures (in a worker process) while
the tables (:mod:`.sections`), sentences (:mod:`.narrative`) and the scaling model
(:mod:`.model`) are made, then render the templates. Values are formatted by :mod:`.format`;
captions that restate a formula come from :mod:`.captions`.

The HTML embeds its figures as base64 PNG and its style sheet inline: it fetches nothing
(no CDN, no web fonts, no scripts). SVG versions of the figures sit next to it in
``plots/`` for print, and a copy of the data files in ``data/``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Union

from .. import __version__
from ..analyse.analysis import Analysis, Settings, analyse
from ..campaign.paths import REPORT_FORMATS, CampaignPaths
from ..collect.collector import CampaignData, RunStates, ensure_collected, finish_write
from ..collect.data_files import DATA_FILES
from ..diskfull import atomic_path
from . import narrative
from .captions import APPLIED_CAPTION, FIGURE_TEXT, FORMULAS
from .format import fpct, md_cell
from .limits import figure_notes
from .lm import write_comparisons
from .missing import check_data
from .model import (
    campaign_transports,
    model_figure,
    model_notes,
    model_tables,
    scaling_model,
    transport_table,
)
from .sections import report_tables, stderr_tails
from .suspects import suspect_tables
from .worker import FigureInput, FigureWorker
from .worker import start as start_worker

TEMPLATES = Path(__file__).parent / "templates"
FORMATS = REPORT_FORMATS
#: the report folder's copy of the collected data files
REPORT_DATA_DIR = "data"


@dataclass
class ReportResult:
    out_dir: Path
    files: Dict[str, Path] = field(default_factory=dict)  # "html", "md" -> path
    figures: Dict[str, Dict[str, Path]] = field(default_factory=dict)
    analysis: Optional[Analysis] = None
    #: no run is complete: what is missing and what to run (the report shows failures only)
    missing: Optional[str] = None
    #: why a campaign with an allreduce sweep (or a calibration) has no scaling model
    model_gap: Optional[str] = None


# ------------------------------------------------------------------ output


def _link_or_copy(src: Path, dst: Path) -> None:
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        with atomic_path(dst) as tmp:
            shutil.copy2(src, tmp)


def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _figure_entries(
    figures: Dict[str, Dict[str, Path]],
    out_dir: Path,
    formats: Sequence[str],
    applied: bool,
    notes: Optional[Dict[str, str]] = None,
) -> Dict[str, Dict[str, str]]:
    """The report's figures by key, in report order, with titles, captions and paths (the
    PNG inlined for HTML). ``applied``: a series is of the applied rate (backup workers);
    ``notes``: what a caption adds by key (an interval cut at an axis, :mod:`.limits`)."""
    figs = []
    for key in ("throughput", "efficiency", "model", "ranks", "accuracy", "curves", "busbw"):
        if key not in figures:
            continue
        title, caption = FIGURE_TEXT[key]
        caption += APPLIED_CAPTION if applied and key == "throughput" else ""
        caption += (notes or {}).get(key, "")
        png = figures[key]["png"]
        figs.append(
            {
                "key": key,
                "title": title,
                "caption": caption,
                "png_rel": png.relative_to(out_dir).as_posix(),
                "svg_rel": figures[key]["svg"].relative_to(out_dir).as_posix(),
                "png_b64": base64.b64encode(png.read_bytes()).decode("ascii")
                if "html" in formats
                else "",
            }
        )
    return {f["key"]: f for f in figs}


def report_context(
    a: Analysis, data: CampaignData, out_dir: Path, model=None, model_gap: Optional[str] = None
) -> Dict[str, Any]:
    """Everything the report templates show but the figures: built while the figure worker
    draws. ``model_gap``: why a campaign with an allreduce sweep has no scaling model."""
    tables = report_tables(a)
    from .backups import backup_sentences, backup_tables  # stragglers on purpose, backups

    extra = backup_tables(a, data)
    if extra:
        tables["stragglers"] = tables.get("stragglers", []) + extra
    if model is not None:
        tables["model"] = model_tables(model)
    transports = campaign_transports(a, data)
    if transports is not None:
        tables["model"] = tables.get("model", []) + [transport_table(transports)]
    tables.update(suspect_tables(a, data))  # "suspects" and "seen" (on one node)
    return {
        "title": f"ddlbench report: {data.name}",
        "campaign": data.name,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "summary": narrative.summary(a, data) + backup_sentences(a, data),
        "tables": tables,
        "settings": a.settings,
        "base_note": narrative.base_note(a),
        "largest_run": a.largest_run,
        "provenance": narrative.provenance(a),
        "model_notes": model_notes(model) + (transports.notes if transports else []),
        "model_gap": model_gap,
        "applied_series": "rate" in a.series and bool((a.series["rate"] == "applied").any()),
        "figure_notes": figure_notes(a.points, a.series),
        "stderr_tails": stderr_tails(a),
        "data_files": [f for f in DATA_FILES if (out_dir / REPORT_DATA_DIR / f).exists()],
        "md_cell": md_cell,
        "fpct": fpct,
        "formula": FORMULAS,
    }


def load_templates(formats: Sequence[str]) -> Dict[str, Any]:
    """The compiled template of each format (compiled while the figure worker draws)."""
    env = _env()
    return {fmt: env.get_template(f"report.{fmt}.j2") for fmt in formats}


def write_reports(
    ctx: Dict[str, Any],
    figures: Dict[str, Dict[str, Path]],
    out_dir: Path,
    formats: Sequence[str],
    templates: Optional[Dict[str, Any]] = None,
) -> Dict[str, Path]:
    """Render each format's template with ``ctx`` and the figures, each file written whole."""
    templates = templates or load_templates(formats)
    applied = bool(ctx.get("applied_series"))
    notes = ctx.get("figure_notes")
    ctx = dict(ctx, figs=_figure_entries(figures, out_dir, formats, applied, notes))
    out: Dict[str, Path] = {}
    for fmt in formats:
        path = out_dir / f"report.{fmt}"
        with atomic_path(path) as tmp:
            tmp.write_text(templates[fmt].render(**ctx), encoding="utf-8")
        out[fmt] = path
    return out


def _copy_data_files(data: CampaignData, out: Path, comparisons: Any) -> None:
    """The collected data files, linked (else copied) into the report's data folder, and
    the language models' comparisons as a CSV (:func:`.lm.write_comparisons`)."""
    write_comparisons(comparisons, out)
    (out / REPORT_DATA_DIR).mkdir(exist_ok=True)
    for name in DATA_FILES:
        src = data.data_dir / name
        if src.exists():
            _link_or_copy(src, out / REPORT_DATA_DIR / name)


def _figures(
    worker, fig_input, out: Path, say: Callable[[str], None], model=None
) -> Dict[str, Dict[str, Path]]:
    """The worker's figures (drawn here when there is no worker or it failed), and the
    scaling model's when there is one."""
    figures = None
    if worker is not None:
        try:
            figures = worker.result()
        except RuntimeError as exc:
            say(f"{exc}; drawing in this process")
    if figures is None:
        from .figures import make_figures

        figures = make_figures(fig_input, out / "plots")
    if model is not None:
        figures["model"] = model_figure(model, out)
    return figures


def _drop_stale_figures(plots: Path, figures: Dict[str, Dict[str, Path]]) -> None:
    """Remove the figure files an earlier report left in ``plots`` and this one did not draw
    (an accuracy figure of a campaign whose runs have since all failed, say), so that the
    folder holds what the report shows."""
    if not plots.is_dir():
        return
    drawn = {p.resolve() for f in figures.values() for p in f.values()}
    for path in plots.iterdir():
        if path.suffix in (".png", ".svg") and path.resolve() not in drawn:
            path.unlink(missing_ok=True)


def _check_formats(formats: Sequence[str]) -> None:
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        known = ", ".join(FORMATS)
        raise ValueError(f"unknown report format(s): {', '.join(bad)} (known: {known})")


def build_report(
    campaign_dir: Union[str, Path],
    *,
    out_dir: Union[str, Path, None] = None,
    formats: Sequence[str] = FORMATS,
    settings: Optional[Settings] = None,
    run_states: RunStates = None,
    progress: Optional[Callable[[str], None]] = None,
    data: Optional[CampaignData] = None,
    force_collect: bool = False,
    calibration: Union[str, Path, None] = None,
    figure_worker: Optional[FigureWorker] = None,
) -> ReportResult:
    """Collect if needed, analyse, plot and write the report; returns the paths.

    ``out_dir`` defaults to ``<campaign>/report``. ``formats``: any of :data:`FORMATS`.
    ``calibration``: another campaign whose allreduce sweep feeds the scaling model
    (default: this campaign's own allreduce runs, if any). Without a complete run:
    :func:`~ddlbench.report.missing.check_data` (``missing``, or nothing written).
    ``figure_worker``: one started earlier (:func:`.worker.early_worker`), else started now.
    """
    say = progress or (lambda _m: None)
    campaign_dir = Path(campaign_dir)
    _check_formats(formats)
    worker = figure_worker if figure_worker is not None else start_worker()
    try:
        if data is None:
            data = ensure_collected(
                campaign_dir,
                run_states=run_states,
                progress=say,
                force=force_collect,
                defer_write=True,
            )
        missing = check_data(data)
        out = Path(out_dir) if out_dir else CampaignPaths.of(campaign_dir).report
        out.mkdir(parents=True, exist_ok=True)
        say("analysing")
        a = analyse(data, settings)
        say("plotting")
        fig_input = FigureInput.of(a)
        if worker is not None:
            worker.submit(fig_input, out / "plots")
        # while the worker draws: the data files, the scaling model and the report's text
        finish_write(data)
        _copy_data_files(data, out, a.lm_comparisons)
        model, model_gap = scaling_model(a, data, calibration, run_states, say)
        ctx = report_context(a, data, out, model, model_gap)
        templates = load_templates(formats)
        figures = _figures(worker, fig_input, out, say, model)
        say("writing report")
        files = write_reports(ctx, figures, out, formats, templates)
        _drop_stale_figures(out / "plots", figures)
    finally:
        if worker is not None:
            worker.close()
        if data is not None:
            finish_write(data)  # also when the report failed: keep what was collected
    return ReportResult(out, files, figures, a, missing, model_gap)
