"""Report tables and sentences of straggler injection and backup workers
(:mod:`ddlbench.analyse.backups`): shown in the Stragglers section, beside the index."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from ..analyse.backups import (
    PAIRING,
    backup_verdicts,
    injection_table,
    sentences,
    verdict_words,
)
from .format import fint, fms, fnum, fnum_in, fpct, frange_in, fsig, ftext
from .table import Table

FMT: Dict[str, Any] = {
    "fint": fint,
    "fsig": fsig,
    "fpct": fpct,
    "fms": fms,
    "ftext": ftext,
    "fnum": fnum,
}


def _table(title: str, spec: List[Any], df: Any, note: str = "", flag: Any = None) -> Table:
    """spec: list of (header, formatter(row) -> str, numeric)."""
    rows, flags = [], []
    for _, r in df.iterrows():
        rows.append([f(r) for _, f, _ in spec])
        flags.append(bool(flag(r)) if flag else False)
    return Table(title, [h for h, _, _ in spec], rows, [n for _, _, n in spec], note, flags)


def _verdicts(a: Any, data: Any):
    st = a.settings
    evals = getattr(data, "evals", None)
    return backup_verdicts(a.runs, data.ranks, st.verdicts(), st.accuracy_margin, evals)


def backup_sentences(a: Any, data: Any) -> List[str]:
    """The summary's answers: do backups train faster (applied samples per second, time to
    accuracy) than b = 0 and plain DDP, and at what accuracy cost."""
    st = a.settings
    return sentences(_verdicts(a, data), st.verdicts(), st.accuracy_margin)


def backup_tables(
    a: Any, data: Any, table: Callable[..., Any] = _table, f: Dict[str, Any] = FMT
) -> List[Any]:
    """The injection/drop-rate table per run and the verdict table per compared pair."""
    out = []
    inj = injection_table(a.runs, data.ranks)
    if len(inj):
        out.append(
            table(
                "Injected stragglers and dropped gradients per run",
                [
                    ("run", lambda r: r["run_id"], False),
                    ("N", lambda r: f["fint"](r["world_size"]), True),
                    (
                        "b",
                        lambda r: "-" if r["backup_workers"] < 0 else str(r["backup_workers"]),
                        True,
                    ),
                    ("injected (rank: steps, delay)", lambda r: f["ftext"](r["injected"]), False),
                    ("straggler index", lambda r: f["fsig"](r["straggler_index"], 4), True),
                    ("slowest rank", lambda r: f["fint"](r["slowest_rank"]), True),
                    ("found", lambda r: f["ftext"](_yes(r["found"])), False),
                    ("drop rate per rank", lambda r: f["ftext"](r["drop_rates"]), False),
                    ("median step ms", lambda r: f["fms"](r["step_time_median_s"]), True),
                ],
                inj,
                note="Injected: the ranks slowed on purpose, the share of their measured steps "
                "and the total delay they served (a rank the backup workers dropped stops "
                "before its delay runs: one dropped on every slowed step shows 0.00 s). Found "
                "(runs that slowed one rank, empty for the others): the slowest "
                "rank by "
                "the straggler index is the injected one. Drop rate: measured steps whose "
                "gradient of the rank was dropped (b: backup workers; -: plain DDP). "
                "docs/backup-workers.md.",
                flag=lambda r: _yes(r["found"]) == "no",
            )
        )
    ver = _verdicts(a, data)
    if len(ver):
        out.append(_verdict_table(ver, table, f))
    return out


def _yes(v: Any) -> Any:
    if v is None or v != v:  # missing or NaN
        return None
    return "yes" if bool(v) else "no"


def _signed(v: Any) -> str:
    """A change as a signed percentage (``+9.2 %``, ``-78.0 %``); ``-`` when missing."""
    return "-" if v is None or v != v else f"{100 * float(v):+.1f} %"


def _level(ver: Any) -> str:
    """The confidence of the change intervals (the tests' level: 90 % at alpha 0.05)."""
    levels = ver["applied_change_level"].dropna() if "applied_change_level" in ver else []
    return f"{100 * float(levels.iloc[0]) if len(levels) else 90:g} %"


def _said(measure: str, column: str) -> Callable[[Any], Any]:
    """A verdict cell in the summary's words, "(busy node)" where a side started on one."""

    def cell(r: Any) -> Any:
        words = verdict_words(measure, r[column])
        if words is not None and measure == "tta" and r["tta_method"] == "censored":
            words += " (censored)"
        busy = r.get("busy")
        return words if words is None or not busy or busy != busy else f"{words} (busy node)"

    return cell


def _applied_cell(r: Any) -> str:
    """The applied samples/s to the digits of its 95 % interval (docs/reports.md#digits)."""
    return fnum_in(r["applied_new"], r["applied_new_low"], r["applied_new_high"])


def _applied_ci_cell(r: Any) -> str:
    lo, hi = r["applied_new_low"], r["applied_new_high"]
    return "-" if lo is None or lo != lo or hi is None or hi != hi else frange_in(lo, hi)


def _verdict_table(ver: Any, table: Callable[..., Any], f: Dict[str, Any]) -> Any:
    level = _level(ver)
    return table(
        "Backup workers: paired comparisons",
        [
            ("configuration", lambda r: r["group"], False),
            ("against", lambda r: r["baseline"], False),
            ("comparison", lambda r: PAIRING[r["comparison"]], False),
            ("repeats", lambda r: f["fint"](r["repeats"]), True),
            ("applied samples/s (geo. mean)", _applied_cell, True),
            ("geo. mean 95 % CI", _applied_ci_cell, True),
            ("baseline applied samples/s", lambda r: f["fnum"](r["applied_base"]), True),
            ("applied change", lambda r: _signed(r["applied_change"]), True),
            (
                f"change {level} CI (the tests' level)",
                lambda r: _range(
                    _signed, r["applied_change_low"], r["applied_change_high"], " to "
                ),
                True,
            ),
            (
                "applied samples/s verdict",
                lambda r: f["ftext"](_said("applied", "applied_verdict")(r)),
                False,
            ),
            ("step time change", lambda r: _signed(r["step_change"]), True),
            ("step time verdict", lambda r: f["ftext"](_said("step", "step_verdict")(r)), False),
            ("reached target", _reached, False),
            ("time to accuracy change", lambda r: _signed(r["tta_change"]), True),
            ("time to target verdict", lambda r: f["ftext"](_said("tta", "tta_verdict")(r)), False),
            ("accuracy points", lambda r: _points(r["accuracy_difference"]), True),
            ("accuracy", lambda r: f["ftext"](r["accuracy_verdict"]), False),
        ],
        ver,
        note="Applied samples/s: samples whose gradient was applied per second (dropped "
        "gradients train nothing; a run's throughput counts them), geometric mean over the "
        "repeats with its 95 % t-interval on the logs, and the change against the baseline "
        f"with its {level} Welch interval, the one the one-sided tests read (alpha "
        f"{_alpha(level)}, 5 % threshold): more or fewer excludes 0. Verdicts, as the summary "
        "says them: more / fewer applied samples per second, shorter / longer steps (tested on "
        "steps per second), sooner / later to the target, unchanged (within 5 % with "
        "confidence), inconclusive. A shorter step is not faster training: read it with the "
        "applied rate and the accuracy. Reached target: runs that reached the target accuracy, "
        "configuration vs baseline; when every run reached it, time to accuracy compares "
        "geometric means; when some missed, Kaplan-Meier medians (the summary gives them) "
        "with the runs that missed censored at their last evaluation and a one-sided log-rank "
        "test (censored). Accuracy: within or outside the accuracy margin below the baseline. "
        "Busy node: a side has a complete run that started on a busy node; its speed verdicts "
        "are inconclusive whatever the test says. Bold: a shorter step without significantly "
        "more applied samples per second (docs/backup-workers.md).",
        flag=lambda r: r["step_verdict"] == "improved" and r["applied_verdict"] != "improved",
    )


def _alpha(level: str) -> str:
    return f"{(100 - float(level.split()[0])) / 200:g}"


def _points(v: Any) -> str:
    return "-" if v is None or v != v else f"{100 * float(v):+.2f}"


def _range(fmt: Callable[[Any], str], lo: Any, hi: Any, sep: str = " - ") -> str:
    return "-" if lo is None or lo != lo or hi is None or hi != hi else f"{fmt(lo)}{sep}{fmt(hi)}"


def _reached(r: Any) -> str:
    if r["tta_method"] is None and r["tta_reason"] == "no target accuracy":
        return "-"
    new, base = (f"{r[f'tta_reached_{s}']}/{r[f'tta_runs_{s}']}" for s in ("new", "base"))
    return f"{new} vs {base}"
