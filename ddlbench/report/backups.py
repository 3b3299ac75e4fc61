"""Report tables and sentences of straggler injection and backup workers
(:mod:`ddlbench.analyse.backups`): shown in the Stragglers section, beside the index."""

from __future__ import annotations

from typing import Any, Callable, Dict, List

from ..analyse.backups import backup_verdicts, injection_table, sentences
from .format import fint, fms, fpct, fsig, ftext
from .table import Table

FMT: Dict[str, Any] = {"fint": fint, "fsig": fsig, "fpct": fpct, "fms": fms, "ftext": ftext}


def _table(title: str, spec: List[Any], df: Any, note: str = "", flag: Any = None) -> Table:
    """spec: list of (header, formatter(row) -> str, numeric)."""
    rows, flags = [], []
    for _, r in df.iterrows():
        rows.append([f(r) for _, f, _ in spec])
        flags.append(bool(flag(r)) if flag else False)
    return Table(title, [h for h, _, _ in spec], rows, [n for _, _, n in spec], note, flags)


def _verdicts(a: Any, data: Any):
    st = a.settings
    return backup_verdicts(a.runs, data.ranks, st.verdicts(), st.accuracy_margin)


def backup_sentences(a: Any, data: Any) -> List[str]:
    """The summary's answers: do backups beat plain synchronous SGD, at what accuracy cost."""
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
                "and the total delay. Found (runs that slowed one rank): the slowest rank by "
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


def _verdict_table(ver: Any, table: Callable[..., Any], f: Dict[str, Any]) -> Any:
    return table(
        "Backup workers against plain synchronous SGD",
        [
            ("configuration", lambda r: r["group"], False),
            ("against", lambda r: r["baseline"], False),
            ("repeats", lambda r: f["fint"](r["repeats"]), True),
            ("median step ms", lambda r: f["fms"](r["step_new"]), True),
            ("plain ms", lambda r: f["fms"](r["step_base"]), True),
            ("step time change", lambda r: f["fpct"](r["step_change"]), True),
            ("step verdict", lambda r: f["ftext"](r["step_verdict"]), False),
            ("time to accuracy change", lambda r: f["fpct"](r["tta_change"]), True),
            ("time verdict", lambda r: f["ftext"](r["tta_verdict"]), False),
            ("accuracy points", lambda r: f["fsig"](100 * r["accuracy_difference"], 3), True),
            ("accuracy", lambda r: f["ftext"](r["accuracy_verdict"]), False),
        ],
        ver,
        note="Step time and time to accuracy: one-sided Welch tests over the repeats on their "
        "inverses (improved = shorter). Accuracy: within or outside the accuracy margin below "
        "the plain configuration (docs/backup-workers.md).",
    )
