"""What ``ddlbench predict`` refuses beyond one option's value: options that contradict each
other or the campaign, and a base its own links cannot reproduce (docs/scaling-model.md)."""

from __future__ import annotations

from typing import Callable

from ddlbench.errors import InputError


def from_alone(kw: dict) -> None:
    """--from gives the base: a base on the command line beside it is bad input (the
    campaign's measured points would be compared with another base's prediction)."""
    if not kw["source"]:
        if kw["base_devices"] is not None and kw["base_rate"] is None:
            raise InputError("--base-devices goes with --base-throughput: give both")
        return
    for option, key in (
        ("--single-device-throughput", "single"),
        ("--base-throughput", "base_rate"),
        ("--base-devices", "base_devices"),
    ):
        if kw[key] is not None:
            raise InputError(
                f"{option} with --from {kw['source']}: the campaign's measured base is the "
                f"base, and its points are compared with predictions from it; give {option} "
                "without --from, or --from without it"
            )


def batch_of(kw: dict, camp, positive: Callable[[str, object], None]) -> int:
    """--batch, else the campaign's; with --from, one other than the campaign's is bad input
    (its throughput was measured at its batch)."""
    batch = kw["batch"] if kw["batch"] is not None else (camp.batch if camp else None)
    positive("--batch", batch)
    if camp and int(batch) != int(camp.batch):
        raise InputError(
            f"--batch {batch}: series '{camp.label}' of campaign {kw['source']} measured its "
            f"throughput at batch {camp.batch}/device; a prediction at another batch needs a "
            "base measured at it (--base-throughput and no --from), or leave --batch out"
        )
    return int(batch)


def grad_accum_of(kw: dict, camp, positive: Callable[[str, object], None]) -> int:
    """--grad-accum, else the campaign's (1 without one); with --from, another count than the
    campaign's is bad input (its step time was measured with its micro-batches)."""
    accum = kw["grad_accum"] if kw["grad_accum"] is not None else (camp.grad_accum if camp else 1)
    positive("--grad-accum", accum)
    if camp and int(accum) != int(camp.grad_accum):
        raise InputError(
            f"--grad-accum {accum}: series '{camp.label}' of campaign {kw['source']} took "
            f"{camp.grad_accum} micro-batch(es) per step; a prediction with another count needs "
            "a base measured with it (--base-throughput and no --from), or leave --grad-accum out"
        )
    return int(accum)


def whole_nodes(kw: dict, base_devices: int, gpn: int, camp) -> None:
    """A base beyond one node must be a whole number of nodes: the model lays it out on
    ``ceil(base / gpn)`` full nodes, which a base of 12 devices on nodes of 8 never ran."""
    if base_devices <= gpn or base_devices % gpn == 0:
        return
    what = f"--base-devices {base_devices}"
    if camp:
        what = f"{_base_name(kw, camp)} ({base_devices} devices)"
    k = base_devices // gpn
    raise InputError(
        f"{what}: more than one node of --gpus-per-node {gpn} and not a whole number of "
        f"nodes ({base_devices / gpn:.3g}): the model lays a base beyond one node out on whole "
        f"nodes and has no layout for it; give a base of {k * gpn} or {(k + 1) * gpn} devices "
        f"(whole nodes), of at most {gpn} (one node), or the cluster's --gpus-per-node"
    )


def check_base(kw: dict, case, topo_args: tuple, camp) -> None:
    """Refuse a base faster than the links allow: its measured step shorter than the
    communication and synchronisation the links given need at the base (no compute time
    reproduces it; docs/scaling-model.md#step-time-throughput-efficiency)."""
    from ddlbench.analyse import hierarchy, whatif
    from ddlbench.cli.predict_output import rate_text

    gpn, _nodes_, intra, inter, nics = topo_args
    one = hierarchy.Topology(1, 1, intra, inter, nics, hierarchy.base_latency_s())
    base = whatif.base_layout(case, gpn, one)
    measured, floor = whatif.base_floor(case, base)
    if floor < measured * (1 - whatif.SOLVED):
        return
    unit = "tokens/s" if case.seq else "samples/s"
    rate = case.single_throughput * case.base_devices * (case.seq or 1)
    links = f"intra {intra.name}, inter {inter.name} x {nics} NIC(s)"
    raise InputError(
        f"{_base_name(kw, camp)}: {rate_text(rate)} {unit} on {case.base_devices} device(s) "
        f"at --batch {case.batch}{_accum_words(case)} is a step of {1e3 * measured:.4g} ms, "
        f"but the links given need {1e3 * floor:.4g} ms for its communication and "
        f"synchronisation alone ({links}; "
        f"{base.ranks} devices on {base.nodes} node(s)): the base is faster than those links "
        "allow; check --intra-busbw, --inter-busbw and --nics-per-node (the cluster's own "
        "links), the base's throughput and devices, and --batch"
    )


def _base_name(kw: dict, camp) -> str:
    """The base as the user gave it: the campaign's or the option's."""
    if camp:
        return f"the base of campaign {kw['source']}"
    return "--base-throughput" if kw["base_rate"] is not None else "--single-device-throughput"


def _accum_words(case) -> str:
    return f" x {case.grad_accum} micro-batches" if case.grad_accum > 1 else ""
