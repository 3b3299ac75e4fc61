"""ddlbench predict: what-if scaling predictions, no cluster needed (docs/scaling-model.md)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import List, Optional, Tuple

import click

from ddlbench.cli.common import campaign_dir, results_option
from ddlbench.cli.predict_checks import (
    batch_of,
    check_base,
    from_alone,
    grad_accum_of,
    whole_nodes,
)
from ddlbench.errors import InputError

DEFAULT_NODES = "1,2,4,8,16,32,64"
#: The links assumed when neither an option nor a campaign gives them (said in the output).
DEFAULT_LINKS = {"intra": "nvlink-h100", "inter": "ndr"}


@click.command(
    "predict",
    epilog="""\b
Examples:
  ddlbench predict --model resnet50 --batch 256 --precision amp \\
      --single-device-throughput 1200 --gpus-per-node 8 --nodes 1,2,4,8 \\
      --intra-busbw nvlink-v100 --inter-busbw edr
  ddlbench predict --model vgg16 --batch 64 --single-device-throughput 154 \\
      --gpus-per-node 4 --intra-busbw pcie4 --inter-busbw 25gbe --nics-per-node 2 --json
  ddlbench predict --from resnet50-scaling --nodes 1,2,4,8,16 --plot curve.png
  ddlbench predict --model mpt-13b --seq 2048 --batch 2 --precision bf16 --parallel fsdp \\
      --base-throughput 30000 --base-devices 8 --gpus-per-node 8 --nodes 1,2,4,8 \\
      --intra-busbw nvlink-h100 --inter-busbw ndr --nics-per-node 8 --json
  ddlbench predict --list-presets

Presets (ddlbench/analyse/reference/interconnects.yaml, each with its source and range):
intra-node nvlink-p100, nvlink-v100, nvlink-a100, nvlink-h100, pcie3, pcie4 (peer to peer),
pcie3-host, pcie4-host (through the root complex); inter-node (per NIC) edr, hdr, ndr (IB),
10gbe, 25gbe, 40gbe, 100gbe (TCP sockets), 25gbe-roce, 40gbe-roce, 100gbe-roce,
200gbe-roce, 400gbe-roce (RDMA). Or a bus bandwidth in GB/s.

Exit codes: 0 success, 2 bad input.
""",
)
@click.option("--model", help="A CNN (resnet50, vgg16, vgg19, lenet; resnet101 and resnet152, "
              "which the workloads do not train) or a transformer (gpt2-124m ... llama3-70b): "
              "its layer sizes.")  # fmt: skip
@click.option(
    "--transformer", help="Another transformer: LAYERS,D_MODEL,HEADS,VOCAB[,KV_HEADS,FFN]."
)
@click.option("--seq", type=int, help="Tokens per sample (transformers) [the shape's context].")
@click.option(
    "--parallel",
    default=None,
    help="ddp, fsdp, hsdp, zero1 or zero2 (sharded: transformers and CNNs alike) "
    "[ddp, or the campaign's].",
)
@click.option(
    "--activation-checkpointing",
    "checkpointing",
    default=None,
    help="none, selective or full: recomputation (the base is measured with it) "
    "[none, or the campaign's].",
)
@click.option("--batch", type=int, help="Per-device batch size (a language model's micro-batch).")
@click.option(
    "--grad-accum",
    "grad_accum",
    type=int,
    default=None,
    help="Micro-batches per step (gradient accumulation): a step takes batch x grad-accum "
    "samples per device; FSDP, HSDP and ZeRO-2 reduce every micro-batch, DDP and ZeRO-1 once "
    "per step [1, or the campaign's].",
)
@click.option(
    "--precision",
    default=None,
    help="fp32, tf32, amp or bf16 (the measured throughput's precision; FSDP, HSDP and "
    "ZeRO-2 gather bf16 parameters under bf16) [fp32, or the campaign's].",
)
@click.option(
    "--reduce-dtype",
    default=None,
    help="fp32 or bf16: the gradient reduction's dtype [fp32: what ddlbench's workload "
    "reduces in under every mode; bf16 for a framework that reduces in bf16].",
)
@click.option(
    "--single-device-throughput",
    "single",
    type=float,
    help="Measured samples/s of one device at this batch and precision.",
)
@click.option("--base-throughput", "base_rate", type=float,
              help="Measured throughput of --base-devices devices together: samples/s "
              "(tokens/s for a transformer).")  # fmt: skip
@click.option("--base-devices", type=int, default=None,
              help="The devices --base-throughput was measured on [1]; more than one node: "
              "a whole number of nodes.")  # fmt: skip
@click.option("--from", "source", help="A campaign: its measured base, sweep and overlap.")
@click.option("--series", help="With --from: the campaign's series (its label or spec variant) "
              "to predict; required when the campaign has several.")  # fmt: skip
@click.option("--calibration", help="With --from: another campaign's allreduce sweep.")
@results_option
@click.option("--gpus-per-node", type=int, help="Devices per node [8, or the campaign's].")
@click.option("--nodes", default=None, help=f"Comma list [{DEFAULT_NODES}: those from the "
              "base's devices up].")  # fmt: skip
@click.option(
    "--intra-busbw",
    help="Intra-node preset or bus bandwidth in GB/s "
    "[the campaign's fit, else nvlink-h100, said as assumed].",
)
@click.option(
    "--inter-busbw",
    help="Inter-node preset or bus bandwidth per NIC in GB/s "
    "[the campaign's fit, else ndr, said as assumed].",
)
@click.option("--nics-per-node", type=int, default=1, show_default=True)
@click.option("--bucket-mb", type=float, help="Gradient bucket [25, DDP; 64 for Horovod].")
@click.option("--fusion-cycle-ms", type=float,
              help="Horovod's HOROVOD_CYCLE_TIME: fuse by cycle [1 for a Horovod campaign, "
              "else 0: DDP's buckets].")  # fmt: skip
@click.option("--nccl-algo", help="ring or tree: the allreduce algorithm NCCL is held to "
              "across nodes (NCCL_ALGO; ring for NCCL before 2.4) [auto: the faster, as NCCL's "
              "tuner picks].")  # fmt: skip
@click.option("--overlap-slowdown", help="MID[,LOW,HIGH]: compute slowed by this share of the "
              "communication it overlaps, at the middle and the two ends of the interval; 0 "
              "leaves it out [0.189,0,0.4: Lee et al. 2025's average and range].")  # fmt: skip
@click.option("--overlap", type=float, help="A measured overlapped fraction (0-1): wins.")
@click.option(
    "--plot",
    "plot",
    type=click.Path(path_type=Path),
    default=None,
    help="Draw the curve and its interval band to this file, .png or .svg, in a folder that "
    "exists (none unless asked).",
)
@click.option("--no-plot", is_flag=True, help="Draw no curve (the default; kept for scripts).")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON.")
@click.option("--list-presets", is_flag=True, help="List the interconnect presets and exit.")
def command(**kw) -> None:
    """Predict step time, throughput and scaling efficiency of data-parallel training
    (DDP, FSDP, HSDP, ZeRO-1/2) on GPUS_PER_NODE x NODES devices, each with its interval,
    from a measured throughput (one device, or --base-devices together) and the cluster's
    links: a hierarchical allreduce (ring or tree, as NCCL picks), the overlap of the
    communication with compute, the wait for the slowest rank and the per-message latency
    (`ddlbench docs scaling-model`). With --from, the campaign's measured points beside
    their predictions."""
    from ddlbench.cli.predict_output import (
        add_memory,
        against,
        campaign_scope,
        list_presets,
        meta_of,
        plot,
        plot_target,
        print_measured,
        print_table,
        validation_scope,
    )

    if kw["list_presets"]:
        list_presets(kw["as_json"])
        return
    if kw["plot"] and kw["no_plot"]:
        raise InputError("--plot and --no-plot contradict each other: give one of them")
    if kw["plot"]:
        plot_target(kw["plot"])  # not .png nor .svg, or not writable: exit 2 before any work
    case, topo_args, note, camp = _inputs(kw)
    from ddlbench.analyse import whatif

    check_base(kw, case, topo_args, camp)
    rows = whatif.curve(case, *topo_args)
    add_memory(rows, case, topo_args[0])
    meta = {**meta_of(case, topo_args, note), "series": camp.label if camp else None,
            "campaign_scope": campaign_scope(camp),
            "validation_scope": validation_scope(case, rows)}  # fmt: skip
    measured = against(case, topo_args, camp) if camp else []
    if kw["as_json"]:
        out = {**meta, "points": rows, **({"measured": measured} if camp else {})}
        click.echo(json.dumps(out, indent=2, default=float))
    else:
        print_table(meta, rows)
        print_measured(measured)
    if kw["plot"]:
        try:
            plot(rows, meta, kw["plot"], measured)
        except OSError as exc:  # written to after the check (removed, filled, permissions)
            raise InputError(f"--plot {str(kw['plot'])!r}: cannot write it ({exc})") from None
        click.echo(f"curve: {kw['plot']}", err=True)


def _inputs(kw):
    """(Case, (gpus_per_node, nodes, intra, inter, nics), note, campaign) from the options."""
    from ddlbench.analyse import whatif

    if kw["nics_per_node"] < 1:
        raise InputError(f"--nics-per-node must be at least 1, not {kw['nics_per_node']}")
    for option, key in (("--series", "series"), ("--calibration", "calibration")):
        if kw[key] and not kw["source"]:
            raise InputError(f"{option} applies to --from CAMPAIGN; give --from too")
    from_alone(kw)
    camp = _from_campaign(kw) if kw["source"] else None
    model, shape = _model(kw, camp)
    seq = _seq(kw, model, shape, camp)
    batch = batch_of(kw, camp, _positive)
    accum = grad_accum_of(kw, camp, _positive)
    rate, base_devices = _rate(kw, camp, seq)
    parallel, ckpt, precision = _config(kw, camp)
    intra = _link(kw["intra_busbw"], "intra", camp.intra if camp else None)
    inter = _link(kw["inter_busbw"], "inter", camp.inter if camp else None)
    algo = _nccl_algo(kw["nccl_algo"], intra, inter)
    gpn = _given(kw["gpus_per_node"], camp.gpus_per_node if camp else 8)
    _positive("--gpus-per-node", gpn)
    whole_nodes(kw, base_devices, int(gpn), camp)
    nodes = _nodes(kw["nodes"], base_devices, int(gpn))
    case = whatif.Case(
        model, int(batch), float(rate) / base_devices, base_devices=base_devices,
        overlap_fraction=_overlap_fraction(kw["overlap"], camp), parallel=parallel,
        seq=seq, precision=precision, checkpointing=ckpt, shape=shape,
        jitter_samples=camp.jitter_samples if camp else (),
        base_uncertainty=(camp.base_uncertainty if camp and camp.base_uncertainty else
                          whatif.costs.BASE_UNCERTAINTY),
        reduce_dtype=kw["reduce_dtype"], grad_accum=accum, nccl_algo=algo,
        overlap_slowdown=_overlap_slowdown(kw["overlap_slowdown"]),
        **_fusion(kw, bool(camp and "horovod" in camp.framework)),
    )  # fmt: skip
    note = f"from campaign {kw['source']} ({camp.label})" if camp else "given"
    return case, (int(gpn), nodes, intra, inter, kw["nics_per_node"]), note, camp


def _nccl_algo(value: Optional[str], intra, inter) -> str:
    """``--nccl-algo`` in NCCL's spelling or ours (Ring, ring): one of the model's algorithms.
    The tree with a link fitted from a campaign's sweep is bad input: the sweep measured what
    NCCL chose, and the model reads it as a ring."""
    from ddlbench.analyse import hierarchy

    if value is None:
        return "auto"
    _choice("--nccl-algo", value.lower(), hierarchy.ALGORITHMS)
    fitted = [lk.name for lk in (intra, inter) if lk.basis == "fitted"]
    if value.lower() == "tree" and fitted:
        raise InputError(
            f"--nccl-algo tree: the link {fitted[0]!r} was fitted from the campaign's allreduce "
            "sweep, which measured whatever algorithm NCCL chose, so the model reads it as a "
            "ring; give --intra-busbw and --inter-busbw presets or bandwidths to hold it to "
            "the tree"
        )
    return value.lower()


def _overlap_slowdown(value: Optional[str]) -> Tuple[float, float, float]:
    """``--overlap-slowdown MID[,LOW,HIGH]``: (mid, optimistic, pessimistic) shares, each in
    [0, 1], LOW <= MID <= HIGH; one figure serves at all three; none given: the model's."""
    from ddlbench.analyse import costs

    if value is None:
        return costs.OVERLAP_SLOWDOWN
    try:
        v = [float(x) for x in value.split(",")]
    except ValueError:
        v = []
    v = v * 3 if len(v) == 1 else v
    if len(v) != 3 or not all(0 <= x <= 1 for x in v) or not v[1] <= v[0] <= v[2]:
        raise InputError(
            f"--overlap-slowdown: expected MID or MID,LOW,HIGH, shares from 0 to 1 with LOW <= "
            f"MID <= HIGH (0.189,0,0.4: Lee et al. 2025), got {value!r}"
        )
    return (v[0], v[1], v[2])


def _given(value, default):
    """An option's value when given (0 included: bad input, said as such), else ``default``."""
    return value if value is not None else default


def _config(kw, camp):
    """(parallel, checkpointing, precision): the options', else the campaign series' (its
    measured base is of that configuration: an option that differs is bad input)."""
    from ddlbench.analyse import sharded, whatif

    _choice("--parallel", kw["parallel"], sharded.STRATEGIES)
    _choice("--activation-checkpointing", kw["checkpointing"], tuple(whatif.TRAINING_FACTOR))
    _precision(kw["precision"])
    _choice("--reduce-dtype", kw["reduce_dtype"], tuple(sharded.REDUCE_BYTES))
    out = []
    for option, key, ran, default in (
        ("--parallel", "parallel", camp.parallel if camp else "", "ddp"),
        ("--activation-checkpointing", "checkpointing", camp.checkpointing if camp else "",
         "none"),
        ("--precision", "precision", camp.precision if camp else "", "fp32"),
    ):  # fmt: skip
        given = kw[key]
        if given is not None and ran and given != ran:
            raise InputError(_differs(kw, camp, option, given, ran))
        out.append(given or ran or default)
    return tuple(out)


def _differs(kw, camp, option: str, given, ran) -> str:
    return (
        f"{option} {given}: series '{camp.label}' of campaign {kw['source']} ran {ran}, and "
        "its measured base is of that configuration (choose the series that ran "
        f"{given} with --series, or give its base with --base-throughput and no --from)"
    )


def _fusion(kw, horovod: bool) -> dict:
    """DDP's buckets (25 MB, a first one of 1 MiB) or Horovod's fusion (64 MB, by cycle)."""
    from ddlbench.analyse import overlap

    bucket = kw["bucket_mb"] if kw["bucket_mb"] is not None else (64.0 if horovod else 25.0)
    if bucket < 0:
        raise InputError(f"--bucket-mb must not be negative, not {bucket:g}")
    cycle = kw["fusion_cycle_ms"]
    cycle = cycle if cycle is not None else (1.0 if horovod else 0.0)
    if cycle < 0:
        raise InputError(f"--fusion-cycle-ms must not be negative, not {cycle:g}")
    first = 0 if horovod else overlap.DDP_FIRST_BUCKET_BYTES
    return {"bucket_mb": bucket, "fusion_cycle_ms": cycle, "first_bucket_bytes": first}


def _model(kw, camp):
    """(model name, transformer shape or None) from --model, --transformer or the campaign."""
    from ddlbench.analyse import overlap
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES, TransformerShape

    if kw["transformer"]:
        try:
            v = [int(x) for x in kw["transformer"].split(",")]
            if len(v) not in (4, 6) or min(v) < 1 or v[1] % v[2]:
                raise ValueError
            if len(v) == 6 and v[2] % v[4]:  # grouped-query attention: groups of heads
                raise ValueError
        except ValueError:
            raise InputError(
                f"--transformer: expected LAYERS,D_MODEL,HEADS,VOCAB[,KV_HEADS,FFN] (positive "
                f"integers, D_MODEL a multiple of HEADS, KV_HEADS a divisor of HEADS), got "
                f"{kw['transformer']!r}"
            ) from None
        if kw["model"]:
            raise InputError(
                f"--transformer with --model {kw['model']}: give one of them (--model names a "
                "known shape, --transformer describes another)"
            )
        kv, ffn = (v[4], v[5]) if len(v) == 6 else (v[2], 4 * v[1])
        shape = TransformerShape("gpt2", v[0], v[1], v[2], kv, ffn, v[3], 0, "command line")
        return f"transformer-{kw['transformer']}", shape
    model = kw["model"] or (camp.model if camp else None)
    if not model:
        raise InputError("--model is required (or --transformer, or --from CAMPAIGN)")
    known = list(overlap.MODEL_INPUT) + list(TRANSFORMER_SHAPES)
    if model not in known and camp and not kw["model"]:  # docs/your-own-workload.md
        raise InputError(
            f"campaign {kw['source']} ran its own program '{model}', whose layer sizes "
            f"ddlbench does not know; give --model with one of {', '.join(known)} as a "
            "stand-in of similar gradient size"
        )
    if model not in known:
        raise InputError(
            f"--model: unknown model {model!r}{_suggest(model, known)} (known: {', '.join(known)})"
        )
    return model, None


def _seq(kw, model: str, shape, camp) -> int:
    """Tokens per sample: --seq, else the campaign series' seq_len, else the shape's
    position table (2048 without one); at most the position table (the spec's rule)."""
    from ddlbench.analyse import overlap
    from ddlbench.workloads.vocabulary import TRANSFORMER_SHAPES

    if model in overlap.MODEL_INPUT and shape is None:
        if kw["seq"]:
            raise InputError(f"--seq applies to transformers, not to {model}")
        return 0
    s = shape or TRANSFORMER_SHAPES[model]
    ran = camp.seq if camp else 0
    if kw["seq"] is not None:
        _positive("--seq", kw["seq"])
        if ran and kw["seq"] != ran:
            raise InputError(_differs(kw, camp, "--seq", kw["seq"], ran))
        seq = int(kw["seq"])
    else:
        seq = ran or int(s.positions or 2048)
    if s.positions and seq > s.positions:
        raise InputError(
            f"--seq {seq} exceeds {model}'s {s.positions} positions (its learned position "
            f"table; the spec refuses such a seq_len too): give at most {s.positions}"
        )
    return seq


def _rate(kw, camp, seq: int):
    """(throughput of the base in samples/s, base devices)."""
    if kw["base_rate"] is not None and kw["single"] is not None:
        raise InputError("give --base-throughput or --single-device-throughput, not both")
    if kw["base_rate"] is not None:
        devices = _given(kw["base_devices"], 1)
        _positive("--base-throughput", kw["base_rate"])
        _positive("--base-devices", devices)
        return float(kw["base_rate"]) / (seq or 1), int(devices)
    if kw["single"] is None and camp:
        return camp.single_throughput * camp.base_devices, camp.base_devices
    single = kw["single"]
    if single is None:
        raise InputError(
            "--base-throughput (with --base-devices) or --single-device-throughput is "
            "required (or --from CAMPAIGN)"
        )
    _positive("--single-device-throughput", single)
    return float(single), 1


def _choice(option: str, value: Optional[str], known) -> None:
    if value is not None and value not in known:
        raise InputError(
            f"{option}: unknown value {value!r}{_suggest(value, list(known))} "
            f"(known: {', '.join(known)})"
        )


def _suggest(word: str, known: List[str]) -> str:
    """`` (did you mean 'x'?)``: the shortest name that begins with ``word`` (mpt-13:
    mpt-13b), else the closest by spelling."""
    from ddlbench.errors import did_you_mean

    starts = [k for k in known if k.lower().startswith(word.lower()) and k != word]
    if starts:
        return f" (did you mean '{min(starts, key=len)}'?)"
    return did_you_mean(word, known)


def _nodes(text: Optional[str], base_devices: int, gpn: int) -> List[int]:
    """The node counts: --nodes (each at least the base's devices), else the default list
    from the base's devices up."""
    if text is None:
        return [k for k in _node_list(DEFAULT_NODES) if k * gpn >= base_devices]
    out = _node_list(text)
    below = [k for k in out if k * gpn < base_devices]
    if below:
        k = below[0]
        raise InputError(
            f"--nodes {k}: {k * gpn} devices, fewer than the base's {base_devices}: the model "
            "adds to a measured base what more devices cost, and does not predict below it "
            f"(a base of {k * gpn} devices, --base-throughput with --base-devices "
            f"{k * gpn}, predicts {k * gpn})"
        )
    return out


def _node_list(text: str) -> List[int]:
    parts = [p.strip() for p in (text or "").split(",")]
    if not any(parts):
        raise InputError("--nodes: give at least one node count, e.g. --nodes 1,2,4,8")
    if not all(parts):
        raise InputError(f"--nodes: an empty item in {text!r}: give node counts between the "
                         "commas, e.g. --nodes 1,2,4,8")  # fmt: skip
    try:
        out = [int(p) for p in parts]
    except ValueError:
        raise InputError(f"--nodes: expected a comma list of integers, got {text!r}") from None
    if min(out) < 1:
        raise InputError(f"--nodes: node counts must be at least 1, got {text!r}")
    return out


def _positive(name: str, value) -> None:
    if value is None:
        raise InputError(f"{name} is required (or --from CAMPAIGN)")
    if not math.isfinite(float(value)):
        raise InputError(f"{name} must be a finite positive number, not {value:g}")
    if float(value) <= 0:
        raise InputError(f"{name} must be positive, not {value:g}")


def _precision(value: Optional[str]) -> None:
    from ddlbench.spec.experiment import PRECISIONS

    if value is not None and value not in PRECISIONS:
        from ddlbench.errors import did_you_mean

        raise InputError(
            f"--precision: unknown precision {value!r}{did_you_mean(value, PRECISIONS)} "
            f"(known: {', '.join(PRECISIONS)})"
        )


def _link(value: Optional[str], level: str, fitted):
    from ddlbench.analyse import hierarchy

    option = f"--{level}-busbw"
    if value is None:
        if fitted is not None:
            return fitted
        name = DEFAULT_LINKS[level]
        p = hierarchy.preset(name, level)
        return replace(p, basis=f"assumed: {option} not given, preset {name}")
    try:
        return hierarchy.link(value, level)
    except ValueError as exc:
        raise InputError(f"{option}: {exc}") from None


def _overlap_fraction(value: Optional[float], camp) -> Optional[float]:
    if value is not None:
        if not 0 <= value <= 1:
            raise InputError(f"--overlap must lie in [0, 1], not {value:g}")
        return value
    return camp.overlap_fraction if camp else None


def _from_campaign(kw):
    from ddlbench.analyse.analysis import analyse
    from ddlbench.analyse.scaling_model import campaign_inputs, campaign_series
    from ddlbench.collect.collector import ensure_collected
    from ddlbench.collect.states import store_states

    data = ensure_collected(campaign_dir(kw["results"], kw["source"]), run_states=store_states)
    cal = None
    if kw["calibration"]:
        cal_dir = campaign_dir(kw["results"], kw["calibration"])
        cal = ensure_collected(cal_dir, run_states=store_states)
    analysis = analyse(data)
    choices = campaign_series(analysis)
    camp = campaign_inputs(analysis, data, cal, _pick_series(kw, choices)) if choices else None
    if camp is None:
        raise InputError(
            f"--from {kw['source']}: no weak-scaling throughput series with a measured point"
        )
    if cal is not None and camp.intra is None:
        why = "; ".join(camp.link_gaps) or "it has no complete allreduce run"
        click.echo(
            f"warning: --calibration {kw['calibration']}: no link could be fitted ({why}); "
            "the links are the options' or the defaults'",
            err=True,
        )
    return camp


def _pick_series(kw, choices) -> str:
    """The label of the series --series names (its label or its spec variant), or of the
    campaign's only series; several and none named: bad input that lists them."""
    want = kw["series"]
    if want is None and len(choices) == 1:
        return choices[0].label
    listed = "; ".join(f"'{c.label}'" + (f" (variant {c.variant})" if c.variant else "")
                       for c in choices)  # fmt: skip
    if want is None:
        raise InputError(
            f"--from {kw['source']}: the campaign holds {len(choices)} weak-scaling series "
            "(each of its own configuration: parallel mode, checkpointing, seq_len, framework, "
            f"...), each its own base; choose one with --series: {listed}"
        )
    by_label = [c.label for c in choices if c.label == want]
    by_variant = [c.label for c in choices if c.variant == want]
    if by_label or len(by_variant) == 1:
        return (by_label or by_variant)[0]
    names = [c.label for c in choices] + [c.variant for c in choices if c.variant]
    raise InputError(
        f"--series: campaign {kw['source']} has no series {want!r}"
        f"{_suggest(want, names)} (its series: {listed})"
    )
