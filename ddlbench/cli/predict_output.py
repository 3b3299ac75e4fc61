"""What ``ddlbench predict`` prints and draws: the table with its intervals, the measured points
of a campaign beside their predictions, the curve with its band, the presets."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import click


def meta_of(case, topo_args, note) -> dict:
    from ddlbench.analyse import costs

    gpn, _nodes_, intra, inter, nics = topo_args
    lm = bool(case.seq)
    return {
        "model": case.model,
        "batch_per_device": case.batch,
        "grad_accum": case.grad_accum,
        "seq": case.seq or None,
        "unit": "tokens/s" if lm else "samples/s",
        "parallel": case.parallel,
        "activation_checkpointing": case.checkpointing,
        "precision": case.precision,
        "reduce_dtype": case.reduce_dtype or "fp32",
        "base_devices": case.base_devices,
        "base_throughput": case.single_throughput * case.base_devices * (case.seq or 1),
        "single_device_throughput": case.single_throughput * (case.seq or 1),
        "base_uncertainty": case.base_uncertainty,
        "base_scope": base_scope(case.base_devices, gpn),
        "inputs": note,
        "gpus_per_node": gpn,
        "nics_per_node": nics,
        "intra": _link_meta(intra),
        "inter": _link_meta(inter),
        "bucket_mb": case.bucket_mb,
        "fusion_cycle_ms": case.fusion_cycle_ms,
        "nccl_algo": case.nccl_algo,
        "overlap_slowdown": dict(zip(("mid", "low", "high"), case.overlap_slowdown)),
        "overlap": "measured" if case.overlap_fraction is not None else "estimated",
        "synchronisation": (
            f"measured: {len(case.jitter_samples)} per-rank step times of the campaign's base"
            if case.jitter_samples else costs.JITTER_SOURCE
        ),
    }  # fmt: skip


#: what a campaign of CPU ranks measured that the model has no term for
CPU_CAMPAIGN = (
    "campaign: its ranks ran on CPUs, which share the machine's cores, caches and memory "
    "bandwidth; the model has no cost for that, and its links are the GPU interconnects "
    "given or assumed: the figures describe such a GPU cluster, not the campaign's machine"
)


def campaign_scope(camp) -> Optional[str]:
    """What ``--from`` a campaign leaves out of the model (None: nothing the model knows of):
    a campaign of CPU ranks measured their contention for one machine."""
    if camp is None or getattr(camp, "device", "") != "cpu":
        return None
    return CPU_CAMPAIGN


def base_scope(base_devices: int, gpus_per_node: int) -> Optional[str]:
    """What a base smaller than one node leaves out of every prediction (None: a node or more).

    The model adds what the links cost; a node's other losses against one device (the input
    pipeline and the host its devices share, power and clocks, the framework) are measured
    only by a base that already has them (docs/scaling-model.md#the-base-one-device-or-one-node).
    """
    if base_devices >= gpus_per_node or gpus_per_node <= 1:
        return None
    return (
        f"base: {base_devices} of the node's {gpus_per_node} devices: what a full node loses "
        "beside its links (input pipeline, shared host, power, framework) is not in the "
        "prediction; one node's throughput as the base (--base-throughput, --base-devices "
        f"{gpus_per_node}) carries it"
    )


#: below this many parameters, a transformer's published series lost more at many GPUs than
#: the model predicts (docs/scaling-model.md#out-of-sample-the-rest-of-the-llm-foundry-tables)
SMALL_LM_PARAMS = 1e9
SMALL_LM_DEVICES = 32
#: from this many devices across nodes, the eight published CNN points the model had not seen
#: are quoted (docs/scaling-model.md#overlap-slowdown)
CNN_NODES_DEVICES = 32


def validation_scope(case, rows: List[dict]) -> Optional[str]:
    """Where published points the model was not built on say how far to trust this kind of
    prediction (None: nowhere known): a transformer under 1 B parameters on more than 32
    devices; a CNN on 32 devices or more across nodes. The figures are the model's default
    reading; another ``--overlap-slowdown`` is told so."""
    line = _scope_line(case, rows)
    from ddlbench.analyse import costs

    if line and tuple(case.overlap_slowdown) != costs.OVERLAP_SLOWDOWN:
        without = (
            "up to 4.8 % above what those series delivered, two of six points below their "
            "interval" if case.seq else "seven of the eight CNN points 3-23 % above what they "
            "delivered, three below their interval"
        )  # fmt: skip
        line += (
            "; these figures are the model's with its default overlap slowdown, not with the "
            f"--overlap-slowdown given (without any slowdown, it predicted {without})"
        )
    return line


def _scope_line(case, rows: List[dict]) -> Optional[str]:
    if not case.seq:
        return _cnn_scope(rows, case.base_devices)
    if max((r["devices"] for r in rows), default=0) <= SMALL_LM_DEVICES:
        return None
    from ddlbench.analyse import whatif

    params = sum(layer.params for layer in whatif.layers_of(case))
    if params >= SMALL_LM_PARAMS:
        return None
    return (
        f"validation: {params / 1e6:,.0f} M parameters on more than {SMALL_LM_DEVICES} devices; "
        "published series of such models measured up to 3.8 % less than this model predicts "
        "(mpt-125m to mpt-760m under FSDP on 64-128 A100s, LLM Foundry; all six points inside "
        "their interval): read the lower half (`ddlbench docs "
        "scaling-model#out-of-sample-the-rest-of-the-llm-foundry-tables`)"
    )


def _cnn_scope(rows: List[dict], base_devices: int = 1) -> Optional[str]:
    """The CNN line of :func:`validation_scope`: rows with several nodes and 32+ devices; what
    the points read out of sample say depends on whether the base is a node or one device."""
    far = [r for r in rows if r["nodes"] > 1 and r["devices"] >= CNN_NODES_DEVICES]
    if not far:
        return None
    if base_devices > 1 and base_devices >= max(r["gpus_per_node"] for r in far):
        return (
            f"validation: {CNN_NODES_DEVICES} devices or more across nodes, from one node's "
            "throughput as here; the two published ResNet-50 points this model was not built "
            "on that could be read so (32 V100s over EDR, fp32 and amp) came out 2.0 % above "
            "and 4.1 % below what they delivered, the second above its interval; read from one "
            f"device, {CNN_ONE_DEVICE} (`ddlbench docs "
            "scaling-model#a-second-reading-the-publishers-one-node-throughput-as-the-base`)"
        )
    return (
        f"validation: {CNN_NODES_DEVICES} devices or more across nodes; {CNN_ONE_DEVICE}: the "
        "interval, not the middle, is the prediction (`ddlbench docs "
        "scaling-model#overlap-slowdown`)"
    )


#: What the eight published CNN points read out of sample say of a prediction from one device
#: (docs/scaling-model.md#overlap-slowdown; the study's figures, checked by a test)
CNN_ONE_DEVICE = (
    "the eight published CNN points this model was not built on (ResNet-50 on 32 V100s over "
    "EDR and on 256 P100s over 50 GbE; ResNet-101 and VGG-16 on 128 and 512 P100s over 25 GbE "
    "RoCE; VGG-16 on 64 GPUs over 40 GbE TCP) were predicted from 9.2 % below to 11.9 % above "
    "what they delivered, all inside their intervals (21.9 points wide on average); seven of "
    "them +2.4 % on average, the eighth +0.7 or +3.6 % by its reading of the network"
)


def _link_meta(link) -> dict:
    lo, hi = link.busbw_low_high
    return {"name": link.name, "busbw_gbps": link.busbw_gbps, "busbw_range_gbps": [lo, hi],
            "alpha_s": link.alpha_s, "transport": link.transport, "basis": link.basis,
            "source": link.source, "message_s": list(link.message_s)}  # fmt: skip


def _slowdown_source(slow: dict) -> str:
    from ddlbench.analyse import costs

    if tuple(slow[k] for k in ("mid", "low", "high")) == costs.OVERLAP_SLOWDOWN:
        return (
            "Lee et al. 2025's average and range, the default; --overlap-slowdown 0 leaves it out"
        )
    return "as given"


def _socket_line(meta: dict) -> str:
    """The header line of a TCP-socket network's per-message cost ('' for another network)."""
    fixed, step = meta["inter"].get("message_s") or (0.0, 0.0)
    if not (fixed or step):
        return ""
    from ddlbench.analyse import hierarchy

    sm = hierarchy.socket_message()
    return (f"tcp messages: each collective between nodes pays at least {1e6 * fixed:.0f} us + "
            f"{1e6 * step:.1f} us per ring step (interval {sm['low']:g}-{sm['high']:g} x), "
            "measured through Horovod and NCCL's socket transport elsewhere, not on this "
            "cluster")  # fmt: skip


def print_table(meta: dict, rows: List[dict]) -> None:
    unit = meta["unit"]
    click.echo(
        f"{meta['model']} ({meta['parallel']}), batch {meta['batch_per_device']}/device"
        + (f" x {meta['seq']} tokens" if meta["seq"] else "")
        + (f", {meta['grad_accum']} micro-batches per step" if meta["grad_accum"] > 1 else "")
        + f", {meta['base_devices']} device(s) {rate_text(meta['base_throughput'])} {unit} "
        f"({meta['inputs']}); intra {meta['intra']['name']} ({meta['intra']['busbw_gbps']:.3g} "
        f"GB/s), inter {meta['inter']['name']} ({meta['inter']['busbw_gbps']:.3g} GB/s) x "
        f"{meta['nics_per_node']} NIC(s)"
        + (f", allreduce {meta['nccl_algo']} only" if meta["nccl_algo"] != "auto" else "")
        + f"; overlap {meta['overlap']}"
    )
    click.echo(f"synchronisation: {meta['synchronisation']}")
    slow = meta["overlap_slowdown"]
    if slow["high"] > 0:
        click.echo(
            f"overlap slowdown: compute slowed by {100 * slow['mid']:.1f} % (interval "
            f"{100 * slow['low']:.1f}-{100 * slow['high']:.1f} %) of the communication it "
            f"overlaps, {_slowdown_source(slow)} (`ddlbench docs scaling-model#overlap-slowdown`)"
        )
    if _socket_line(meta):
        click.echo(_socket_line(meta))
    for scope in ("campaign_scope", "base_scope", "validation_scope"):
        if meta.get(scope):
            click.echo(meta[scope])
    from ddlbench.analyse import costs

    if meta["base_uncertainty"] > costs.NOISY_BASE:
        click.echo(
            f"base: its 95 % interval is {costs.factor_words(meta['base_uncertainty'])} of the "
            "throughput, too noisy for a useful prediction (more repeats, a quieter machine)"
        )
    for level in ("intra", "inter"):
        if meta[level]["basis"].startswith("assumed"):
            click.echo(f"links: {meta[level]['basis']} (give the cluster's own)")
    head = ("devices", "nodes", "step ms", unit, "efficiency", "interval", "sync ms",
            "comm ms", "exposed ms", "slowed ms", "dominant")  # fmt: skip
    if rows and "memory_gib" in rows[0]:
        head += ("GiB/rank",)
    click.echo("  ".join(f"{h:>10}" for h in head))
    from ddlbench.report.format import fnum_in, fpct_in, frange_in

    for r in rows:  # each figure to the digits its interval supports (docs/reports.md#digits)
        lo, hi = r["efficiency_low"], r["efficiency_high"]
        interval = f"{frange_in(100 * lo, 100 * hi, sep='-')} %"
        rate = fnum_in(r["throughput"], r["throughput_low"], r["throughput_high"], 0)
        vals = (r["devices"], r["nodes"], f"{1e3 * r['step_s']:.1f}",
                rate, fpct_in(r["efficiency"], lo, hi), interval,
                f"{1e3 * r['sync_s']:.2f}", f"{1e3 * r['comm_s']:.2f}",
                f"{1e3 * r['exposed_comm_s']:.2f}", f"{1e3 * r['overlap_slowdown_s']:.2f}",
                r["dominant"])  # fmt: skip
        if "memory_gib" in r:
            vals += (f"{r['memory_gib']:.1f}",)
        click.echo("  ".join(f"{v!s:>10}" for v in vals))


def rate_text(value: float) -> str:
    """A throughput as printed: an integer with separators (1,183 tokens/s), three
    significant digits below 100 (9.25 samples/s)."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def add_memory(rows: List[dict], case, gpus_per_node: int) -> None:
    """``memory_gib`` per point for a transformer: the predicted peak memory per rank
    (``analyse.lm_memory``, docs/memory.md) at that point's world size, sharding mode,
    checkpointing, precision and per-device micro-batch; CNNs get none."""
    from ddlbench.analyse.lm_memory import predict_memory
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES

    shape = case.shape or TRANSFORMER_SHAPES.get(case.model)
    if shape is None or not case.seq:
        return
    for r in rows:
        mem = predict_memory(
            shape, case.seq, case.batch, case.precision, case.parallel, case.checkpointing,
            int(r["devices"]), min(gpus_per_node, int(r["devices"])),
            grad_accum=case.grad_accum,
        )  # fmt: skip
        r["memory_gib"] = mem["total_gib"]


def against(case, topo_args, camp) -> List[dict]:
    """Each point the campaign measured beside the model's prediction at its device count
    (its throughput in the table's unit: tokens/s for a language model), flagged when outside
    the interval, with the term that would explain it; ``inside`` None and no cause when the
    prediction is of another configuration than the campaign measured."""
    from ddlbench.analyse import hierarchy, sharded, whatif

    gpn, _nodes, intra, inter, nics = topo_args
    one = hierarchy.Topology(1, 1, intra, inter, nics, hierarchy.base_latency_s())
    bd = case.base_devices
    base = replace(one, gpus_per_node=min(bd, gpn), nodes=sharded.ceil_nodes(bd, gpn))
    other = _other_configuration(case, camp)
    out = []
    for n, eff, thr in camp.measured:
        k = sharded.ceil_nodes(n, gpn)
        topo = replace(one, gpus_per_node=math.ceil(n / k), nodes=k)
        p = whatif.point(case, topo, base)
        lo, hi = float(p["efficiency_low"]), float(p["efficiency_high"])
        inside = None if other else lo <= eff <= hi
        why = other or ("" if inside else _explain(eff, p, camp))
        thr *= case.seq or 1
        out.append({"devices": n, "measured_efficiency": eff, "measured_throughput": thr,
                    "efficiency": p["efficiency"], "efficiency_low": lo, "efficiency_high": hi,
                    "inside": inside, "explanation": why})  # fmt: skip
    return out


def _other_configuration(case, camp) -> str:
    """Why the campaign's points are not compared with the prediction ('' when they are):
    a batch or a model other than the series measured."""
    from ddlbench.analyse import overlap
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES

    diff = []
    if case.batch != camp.batch:
        diff.append(f"batch {camp.batch}/device, the prediction {case.batch}")
    if case.grad_accum != camp.grad_accum:
        diff.append(f"{camp.grad_accum} micro-batch(es) per step, the prediction {case.grad_accum}")
    known = camp.model in overlap.MODEL_INPUT or camp.model in TRANSFORMER_SHAPES
    if known and case.model != camp.model:  # an own program's stand-in is compared
        diff.append(f"{camp.model}, the prediction {case.model}")
    if not diff:
        return ""
    return "not compared: the campaign measured " + "; ".join(diff)


def _explain(eff: float, p: dict, camp) -> str:
    """The term that would explain a measured point outside the interval, as far as the
    campaign's data say."""
    if eff > float(p["efficiency_high"]):
        return ("faster than the model allows: the links or the base are better than given "
                "(a sweep with --calibration measures the links)")  # fmt: skip
    missing = float(p["step_s"]) * (float(p["efficiency"]) / eff - 1)
    if getattr(camp, "device", "") == "cpu":
        return (f"{1e3 * missing:.2f} ms per step more than predicted: CPU ranks share the "
                "machine's cores and memory bandwidth, a cost outside the model")  # fmt: skip
    if "ranks wait for each other" in (camp.overlap_source or ""):
        return (f"{1e3 * missing:.2f} ms per step more than predicted; the logged exposed "
                "communication exceeds the allreduce model: ranks wait for each other "
                "(contention for shared cores or links, imbalance): synchronisation beyond "
                "the measured jitter")  # fmt: skip
    return (f"{1e3 * missing:.2f} ms per step more than predicted, in no term the campaign "
            "logs: a per-step cost outside the model (input pipeline, framework overhead, "
            "shared devices)")  # fmt: skip


def print_measured(measured: List[dict]) -> None:
    if not measured:
        return
    click.echo("measured (the campaign) beside predicted:")
    for m in measured:
        flag = {True: "inside", False: "OUTSIDE the interval", None: "-"}[m["inside"]]
        click.echo(
            f"  {m['devices']:>6} devices: measured {100 * m['measured_efficiency']:.1f} %, "
            f"predicted {100 * m['efficiency']:.1f} % ({100 * m['efficiency_low']:.1f}-"
            f"{100 * m['efficiency_high']:.1f} %): {flag}"
            + (f": {m['explanation']}" if m["explanation"] else "")
        )


def efficiency_axis_top(rows: List[dict], measured: List[dict]) -> float:
    """The efficiency axis's top (%): 110, or above every interval and measured point, which
    may reach above 100 % (what a campaign measures can; docs/scaling-model.md)."""
    top = max([100 * r["efficiency_high"] for r in rows]
              + [100 * m["measured_efficiency"] for m in measured], default=0.0)  # fmt: skip
    return 1.05 * top if top > 110 else 110.0


def plot(rows: List[dict], meta: dict, path: Path, measured: List[dict]) -> None:
    from ddlbench.report.plots import new_figure, save

    fig, (ax, ax2) = new_figure(9.6, 4.4, ncols=2, wspace=0.28, left=0.09)
    n = [r["devices"] for r in rows]
    ax.fill_between(n, [r["throughput_low"] for r in rows], [r["throughput_high"] for r in rows],
                    alpha=0.25, label="interval")  # fmt: skip
    ax.plot(n, [r["throughput"] for r in rows], marker="o", label="predicted")
    per = rows[0]["throughput"] / rows[0]["devices"]
    ax.plot(n, [d * per for d in n], linestyle=":", color="grey", label="linear")
    ax2.fill_between(n, [100 * r["efficiency_low"] for r in rows],
                     [100 * r["efficiency_high"] for r in rows], alpha=0.25)  # fmt: skip
    ax2.plot(n, [100 * r["efficiency"] for r in rows], marker="o")
    measured = [m for m in measured if m["inside"] is not None]  # the same configuration
    if measured:
        ax.plot([m["devices"] for m in measured], [m["measured_throughput"] for m in measured],
                "k^", label="measured")  # fmt: skip
        ax2.plot([m["devices"] for m in measured],
                 [100 * m["measured_efficiency"] for m in measured], "k^")  # fmt: skip
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel("devices")
    ax.set_yscale("log")
    ax.set_ylabel(meta["unit"])
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.axhline(100, linestyle=":", color="grey", linewidth=1)
    ax2.set_ylim(0, efficiency_axis_top(rows, measured))
    ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(
        f"{meta['model']} ({meta['parallel']}): {meta['intra']['name']} in a node, "
        f"{meta['inter']['name']} x {meta['nics_per_node']} between nodes",
        fontsize=10,
    )
    fmt = plot_format(path)
    out = save(fig, path.parent if str(path.parent) else Path("."), path.stem, [fmt])
    if out[fmt] != path:  # the suffix in capitals: the file under the name asked for
        out[fmt].replace(path)


def plot_format(path: Path) -> str:
    """The format ``--plot PATH`` asks for by its suffix: png or svg (else bad input)."""
    from ddlbench.errors import InputError
    from ddlbench.report.plots import FORMATS

    fmt = path.suffix[1:].lower()
    if fmt not in FORMATS:
        raise InputError(
            f"--plot {str(path)!r}: the curve is drawn as {' or '.join(FORMATS)}; "
            f"name a file ending in {' or '.join('.' + f for f in FORMATS)}"
        )
    return fmt


def plot_target(path: Path) -> str:
    """The format of ``--plot PATH`` once it is known to be writable: a .png or .svg name in a
    folder that exists (a missing one is not created: a misspelt path would be) and takes a
    new file; else bad input, before any work is done or printed."""
    import tempfile

    from ddlbench.errors import InputError

    fmt = plot_format(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(
            f"--plot {str(path)!r}: no folder {str(folder)!r}; create it first, or name a "
            "file in a folder that exists"
        )
    if path.is_dir():
        raise InputError(f"--plot {str(path)!r}: a folder; name the file to draw to")
    try:  # the curve is written to a temporary file next to it, then renamed
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as exc:
        raise InputError(
            f"--plot {str(path)!r}: cannot write in {str(folder)!r} ({exc.strerror or exc})"
        ) from None
    return fmt


def list_presets(as_json: bool) -> None:
    from ddlbench.analyse import hierarchy

    rows = []
    for n, p in hierarchy.presets().items():
        lo, hi = p.busbw_low_high
        rows.append({"name": n, "level": hierarchy.preset_level(n), "busbw_gbps": p.busbw_gbps,
                     "busbw_range_gbps": [lo, hi], "alpha_us": 1e6 * p.alpha_s,
                     "transport": p.transport, "basis": p.basis, "source": p.source,
                     "message_us": [1e6 * p.message_s[0], 1e6 * p.message_s[1]]})  # fmt: skip
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        lo, hi = r["busbw_range_gbps"]
        click.echo(f"{r['name']:<12} {r['level']:<6} {r['busbw_gbps']:>7g} GB/s "
                   f"({lo:g}-{hi:g})  {r['alpha_us']:.1f} us  {r['transport']:<9} "
                   f"{r['basis']:<9} {r['source']}")  # fmt: skip
