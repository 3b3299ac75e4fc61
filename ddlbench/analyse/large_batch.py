"""The large-batch study's verdict: does gradual warmup keep the accuracy of large global
batches within a margin of the small-batch baseline? (``docs/metrics.md``, Convergence)

Configurations are compared within one **study**: those that differ only in scale, batch,
learning rate and warmup. A study fixes the framework entry (its label and options: sync and
backup1 are two studies), the model, precision, data, device, backend and LR rule, and the
spec variant unless the variant only names the warmup arm (:func:`study_keys`).

Per study, the **baseline** is the configuration with the smallest global batch, taken from
the no-warmup arm when there is one (at the smallest batch warmup makes no difference by
design of the linear rule). For every other configuration of each arm, with
``margin`` in accuracy points (default 0.01 = 1 point) and one-sided Welch tests at
``alpha`` over the repeats' final accuracies:

- ``within``: ``H0: acc <= baseline - margin`` is rejected;
- ``outside``: ``H0: acc >= baseline - margin`` is rejected;
- ``undetermined`` otherwise (or fewer than 2 repeats on either side: ``tested`` False; the
  summary then says that no test was possible, not that one was inconclusive).
"""

from __future__ import annotations

import math
from typing import Dict, List, NamedTuple, Sequence

import numpy as np
import pandas as pd

from ..values import missing
from .series import entry_word
from .verdicts import welch_margin

WITHIN, OUTSIDE, UNDETERMINED = "within", "outside", "undetermined"
NO_WARMUP = "no warmup"

#: the fields of a convergence configuration that the large-batch study keeps fixed within
#: one comparison (with the variant: :func:`study_keys`)
STUDY_FIELDS = (
    "framework",
    "label",
    "framework_options",
    "workload",
    "model",
    "precision",
    "data_kind",
    "device",
    "backend",
    "lr_scaling",
)


def _words(r: pd.Series, fields: Sequence[str]) -> str:
    return "|".join("" if missing(r.get(f)) else str(r.get(f)) for f in fields)


def _variant_is_arm(g: pd.DataFrame) -> bool:
    """Whether the variants of one study only name its warmup arms: each variant has one
    warmup, each warmup one variant (``warmup`` / ``nowarmup`` of configs/large-batch.yaml)."""
    v = g["variant"].map(lambda x: "" if missing(x) else str(x))
    pairs = pd.DataFrame({"v": v, "w": g["warmup"]}).drop_duplicates()
    return not pairs["v"].duplicated().any() and not pairs["w"].duplicated().any()


def study_keys(conv: pd.DataFrame) -> pd.DataFrame:
    """``conv`` with ``study`` (the key of the configurations compared with one another)
    and ``study_label`` (it in words: ``backup1 (pytorch) lenet``, plus the variant when
    the variant is part of the key)."""
    if not len(conv):
        return conv
    c = conv.copy()
    if "variant" not in c:
        c["variant"] = None
    fields = [f for f in STUDY_FIELDS if f in c]
    c["study"] = [_words(r, fields) for _, r in c.iterrows()]
    c["study_label"] = [f"{entry_word(r)} {r['model']}" for _, r in c.iterrows()]
    for key, g in c.groupby("study", sort=True):
        if _variant_is_arm(g):
            continue
        v = g["variant"].map(lambda x: "" if missing(x) else str(x))
        c.loc[g.index, "study"] = key + "|" + v
        c.loc[g.index, "study_label"] = (g["study_label"] + " " + v).str.strip()
    return c


def margin_table(conv: pd.DataFrame, margin: float, alpha: float) -> pd.DataFrame:
    """One row per convergence configuration that is not a baseline: its class against the
    baseline of its study (:func:`study_keys`; columns: study, study_label, framework,
    model, warmup, global_batch_size, applied_batch_size, baseline_group,
    baseline_accuracy, difference, p_within, p_outside, verdict)."""
    need = {"final_accuracy_mean", "final_accuracy_std", "repeats"}
    if not len(conv) or not need <= set(conv.columns):
        return pd.DataFrame()
    if "study" not in conv:
        conv = study_keys(conv)
    rows: List[Dict[str, object]] = []
    for study, g in conv.groupby("study", sort=True):
        base = _baseline(g)
        if base is None:
            continue
        others = g[(g["group"] != base["group"]) & g["final_accuracy_mean"].notna()]
        if not len(others):
            continue
        ma, sa, na = (
            float(base[k]) for k in ("final_accuracy_mean", "final_accuracy_std", "repeats")
        )
        mb = others["final_accuracy_mean"].to_numpy(dtype=float)
        sb = others["final_accuracy_std"].to_numpy(dtype=float)
        nb = others["repeats"].to_numpy(dtype=float)
        p_in, _, _ = welch_margin(ma - margin, sa, na, mb, sb, nb)
        p_out, _, _ = welch_margin(mb, sb, nb, np.full_like(mb, ma - margin), sa, na)
        for i, (_, r) in enumerate(others.iterrows()):
            rows.append(
                {
                    "study": study,
                    "study_label": r["study_label"],
                    "framework": r["framework"],
                    "model": r["model"],
                    "warmup": r["warmup"],
                    "arms": g["warmup"].nunique(),
                    "global_batch_size": r["global_batch_size"],
                    "applied_batch_size": r.get("applied_batch_size"),
                    "baseline_warmup": base["warmup"],
                    "group": r["group"],
                    "baseline_group": base["group"],
                    "baseline_batch": base["global_batch_size"],
                    "baseline_applied": base.get("applied_batch_size"),
                    "baseline_accuracy": ma,
                    "accuracy": mb[i],
                    "difference": mb[i] - ma,
                    "p_within": p_in[i],
                    "p_outside": p_out[i],
                    "verdict": _class(p_in[i], p_out[i], alpha),
                    # a test needs 2 repeats on both sides (else undetermined, untested)
                    "tested": bool(na >= 2 and nb[i] >= 2),
                }
            )
    return pd.DataFrame(rows)


def _baseline(g: pd.DataFrame):
    ok = g[g["final_accuracy_mean"].notna()]
    if not len(ok):
        return None
    small = ok[ok["global_batch_size"] == ok["global_batch_size"].min()]
    plain = small[small["warmup"] == NO_WARMUP]
    return (plain if len(plain) else small).iloc[0]


def _class(p_in: float, p_out: float, alpha: float) -> str:
    if not math.isnan(p_in) and p_in < alpha:
        return WITHIN
    if not math.isnan(p_out) and p_out < alpha:
        return OUTSIDE
    return UNDETERMINED


def sentences(table: pd.DataFrame, margin: float, confidence: float) -> List[str]:
    """One sentence per study: how far each warmup arm keeps within the margin."""
    out = []
    if not len(table):
        return out
    pts = f"{100 * margin:g} point" + ("" if margin == 0.01 else "s")
    for _, g in table.groupby("study", sort=True):
        first = g.iloc[0]
        arms = sorted(g["warmup"].unique())
        parts = [_arm_text(a, g[g["warmup"] == a]) for a in arms]
        single = ""
        if int(first.get("arms", len(arms))) == 1:
            single = f"; only the {arms[0]} arm ran: warmup is not compared"
        tested = g["tested"].astype(bool) if "tested" in g else pd.Series(True, index=g.index)
        if not tested.any():
            out.append(_untested_sentence(first, pts, g, single))
            continue
        how = f"one-sided Welch tests, {100 * confidence:g} % confidence"
        if not tested.all():
            how += "; untested: fewer than 2 repeats on either side"
        out.append(
            f"{first['study_label']}, within {pts} of the small-batch baseline "
            f"({_baseline_words(first)}; {how}{single}): " + "; ".join(parts) + "."
        )
    return out


def _baseline_words(first: pd.Series) -> str:
    return (
        f"mean {100 * first['baseline_accuracy']:.2f} % at global batch "
        f"{_batch_word(_Batch(first['baseline_batch'], first.get('baseline_applied')))}, "
        f"{first.get('baseline_warmup', NO_WARMUP)}"
    )


def _untested_sentence(first: pd.Series, pts: str, g: pd.DataFrame, single: str) -> str:
    """A study none of whose comparisons has 2 repeats on both sides: no test is possible,
    only the single differences, said as such."""
    diffs = "; ".join(
        f"{r.warmup} at {_batch_word(r)}: {100 * r.difference:+.2f} points"
        for r in g.sort_values(["warmup", "global_batch_size"]).itertuples(index=False)
    )
    return (
        f"{first['study_label']}, against the small-batch baseline ({_baseline_words(first)}"
        f"{single}): no test of the {pts} margin is possible with fewer than 2 repeats per "
        f"configuration; the differences, from single runs, are {diffs}."
    )


class _Batch(NamedTuple):
    global_batch_size: object
    applied_batch_size: object


def _batch_word(r: object) -> str:
    """A configuration's global batch; with backup workers also the batch applied per step."""
    g = int(r.global_batch_size)
    applied = getattr(r, "applied_batch_size", None)
    if missing(applied) or int(applied) == g:
        return str(g)
    return f"{g} (applied {int(applied)})"


def _arm_text(arm: str, g: pd.DataFrame) -> str:
    rows = list(g.sort_values("global_batch_size").itertuples(index=False))
    prefix = []
    for r in rows:
        if r.verdict != WITHIN:
            break
        prefix.append(r)
    rest = rows[len(prefix) :]
    if not rest:
        return f"{arm}: within at every global batch up to {_batch_word(prefix[-1])}"
    head = f"{arm}: within up to global batch {_batch_word(prefix[-1])}; " if prefix else f"{arm}: "
    return head + ", ".join(
        f"{_batch_word(r)} {r.verdict if getattr(r, 'tested', True) else 'untested'} "
        f"({100 * r.difference:+.2f} points)"
        for r in rest
    )
