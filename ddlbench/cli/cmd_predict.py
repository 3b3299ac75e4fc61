"""ddlbench predict: what-if scaling predictions, no cluster needed (docs/scaling-model.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import click

from ddlbench.cli.common import campaign_dir, results_option
from ddlbench.errors import InputError

DEFAULT_NODES = "1,2,4,8,16,32,64"


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
  ddlbench predict --list-presets

Presets (ddlbench/analyse/reference/interconnects.yaml, each with its source): intra-node
nvlink-p100, nvlink-v100, nvlink-a100, nvlink-h100, pcie3, pcie4; inter-node (per NIC)
edr, hdr, ndr, 10gbe, 25gbe, 100gbe. Or a bus bandwidth in GB/s.

Exit codes: 0 success, 2 bad input.
""",
)
@click.option("--model", help="Model whose layer sizes set the gradient buckets.")
@click.option("--batch", type=int, help="Per-device batch size.")
@click.option(
    "--precision",
    default=None,
    help="fp32, tf32, amp or bf16 (the measured throughput's precision; gradients stay fp32).",
)
@click.option(
    "--single-device-throughput",
    "single",
    type=float,
    help="Measured samples/s of one device at this batch and precision.",
)
@click.option("--from", "source", help="A campaign: its measured base, sweep and overlap.")
@click.option("--calibration", help="With --from: another campaign's allreduce sweep.")
@results_option
@click.option("--gpus-per-node", type=int, help="Devices per node [8, or the campaign's].")
@click.option("--nodes", default=DEFAULT_NODES, show_default=True, help="Comma list.")
@click.option("--intra-busbw", help="Intra-node preset or bus bandwidth in GB/s.")
@click.option("--inter-busbw", help="Inter-node preset or bus bandwidth per NIC in GB/s.")
@click.option("--nics-per-node", type=int, default=1, show_default=True)
@click.option("--bucket-mb", type=float, help="Gradient bucket [25, DDP; 64 for Horovod].")
@click.option("--overlap", type=float, help="A measured overlapped fraction (0-1): wins.")
@click.option("--plot", "plot", type=click.Path(path_type=Path), default=Path("predict.png"),
              show_default=True, help="Where to draw the curve (PNG).")  # fmt: skip
@click.option("--no-plot", is_flag=True, help="Do not draw the curve.")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON.")
@click.option("--list-presets", is_flag=True, help="List the interconnect presets and exit.")
def command(**kw) -> None:
    """Predict step time, throughput and scaling efficiency of data-parallel training on
    GPUS_PER_NODE x NODES devices from one device's measured throughput and the cluster's
    links: a hierarchical allreduce (ring or tree, as NCCL picks) and the overlap of the
    gradient buckets with the backward pass (`ddlbench docs scaling-model`)."""
    if kw["list_presets"]:
        _list_presets(kw["as_json"])
        return
    case, topo_args, note = _inputs(kw)
    from ddlbench.analyse import whatif

    rows = whatif.curve(case, *topo_args)
    meta = {**_meta(case, topo_args, note), "precision": kw["precision"]}
    if kw["as_json"]:
        click.echo(json.dumps({**meta, "points": rows}, indent=2, default=float))
    else:
        _print_table(meta, rows)
    if not kw["no_plot"]:
        _plot(rows, meta, kw["plot"])
        click.echo(f"curve: {kw['plot']}", err=True)


def _inputs(kw):
    """(Case, (gpus_per_node, nodes, intra, inter, nics), note) from the options."""
    from ddlbench.analyse import overlap, whatif

    nodes = _nodes(kw["nodes"])
    if kw["nics_per_node"] < 1:
        raise InputError(f"--nics-per-node must be at least 1, not {kw['nics_per_node']}")
    camp = _from_campaign(kw) if kw["source"] else None
    model = kw["model"] or (camp.model if camp else None)
    if not model:
        raise InputError("--model is required (or --from CAMPAIGN)")
    if model not in overlap.MODEL_INPUT:
        from ddlbench.errors import did_you_mean

        known = ", ".join(overlap.MODEL_INPUT)
        if camp and not kw["model"]:  # a spec's own program (docs/your-own-workload.md)
            raise InputError(
                f"campaign {kw['source']} ran its own program '{model}', whose layer sizes "
                f"ddlbench does not know; give --model with one of {known} as a stand-in "
                "of similar gradient size"
            )
        raise InputError(
            f"--model: unknown model {model!r}{did_you_mean(model, overlap.MODEL_INPUT)} "
            f"(known: {known})"
        )
    batch = kw["batch"] or (camp.batch if camp else None)
    single = kw["single"] or (camp.single_throughput if camp else None)
    _positive("--batch", batch)
    _positive("--single-device-throughput", single)
    _precision(kw["precision"])
    intra = _link(kw["intra_busbw"], "intra", camp.intra if camp else None)
    inter = _link(kw["inter_busbw"], "inter", camp.inter if camp else None)
    gpn = kw["gpus_per_node"] or (camp.gpus_per_node if camp else 8)
    _positive("--gpus-per-node", gpn)
    horovod = bool(camp and "horovod" in camp.framework)
    bucket = kw["bucket_mb"] if kw["bucket_mb"] is not None else (64.0 if horovod else 25.0)
    if bucket < 0:
        raise InputError(f"--bucket-mb must not be negative, not {bucket:g}")
    f = _overlap_fraction(kw["overlap"], camp)
    case = whatif.Case(model, int(batch), float(single), bucket_mb=bucket,
                       first_bucket_bytes=0 if horovod else overlap.DDP_FIRST_BUCKET_BYTES,
                       overlap_fraction=f)  # fmt: skip
    note = f"from campaign {kw['source']} ({camp.label})" if camp else "given"
    return case, (int(gpn), nodes, intra, inter, kw["nics_per_node"]), note


def _nodes(text: str) -> List[int]:
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not parts:
        raise InputError("--nodes: give at least one node count, e.g. --nodes 1,2,4,8")
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
    if not math.isfinite(float(value)) or float(value) <= 0:
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
        known = ", ".join(n for n in hierarchy.presets() if hierarchy.preset_level(n) == level)
        raise InputError(f"{option} is required: a preset ({known}) or a bus bandwidth in GB/s")
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
    from ddlbench.analyse.scaling_model import campaign_inputs
    from ddlbench.collect.collector import ensure_collected
    from ddlbench.collect.states import store_states

    data = ensure_collected(campaign_dir(kw["results"], kw["source"]), run_states=store_states)
    cal = None
    if kw["calibration"]:
        cal_dir = campaign_dir(kw["results"], kw["calibration"])
        cal = ensure_collected(cal_dir, run_states=store_states)
    camp = campaign_inputs(analyse(data), data, cal)
    if camp is None:
        raise InputError(
            f"--from {kw['source']}: no weak-scaling throughput series with a measured point"
        )
    return camp


def _meta(case, topo_args, note) -> dict:
    gpn, _nodes_, intra, inter, nics = topo_args
    return {
        "model": case.model,
        "batch_per_device": case.batch,
        "single_device_throughput": case.single_throughput,
        "inputs": note,
        "gpus_per_node": gpn,
        "nics_per_node": nics,
        "intra": {"name": intra.name, "busbw_gbps": intra.busbw_gbps, "alpha_s": intra.alpha_s,
                  "basis": intra.basis, "source": intra.source},
        "inter": {"name": inter.name, "busbw_gbps": inter.busbw_gbps, "alpha_s": inter.alpha_s,
                  "basis": inter.basis, "source": inter.source},
        "bucket_mb": case.bucket_mb,
        "overlap": "measured" if case.overlap_fraction is not None else "estimated",
    }  # fmt: skip


def _print_table(meta: dict, rows: List[dict]) -> None:
    click.echo(
        f"{meta['model']}, batch {meta['batch_per_device']}/device, one device "
        f"{meta['single_device_throughput']:g} samples/s ({meta['inputs']}); intra "
        f"{meta['intra']['name']} ({meta['intra']['busbw_gbps']:g} GB/s), inter "
        f"{meta['inter']['name']} ({meta['inter']['busbw_gbps']:g} GB/s) x "
        f"{meta['nics_per_node']} NIC(s); overlap {meta['overlap']}"
    )
    head = ("devices", "nodes", "step ms", "samples/s", "efficiency", "comm ms", "exposed ms",
            "algorithm", "dominant")  # fmt: skip
    click.echo("  ".join(f"{h:>10}" for h in head))
    for r in rows:
        vals = (r["devices"], r["nodes"], f"{1e3 * r['step_s']:.1f}",
                f"{r['throughput']:,.0f}", f"{100 * r['efficiency']:.1f} %",
                f"{1e3 * r['comm_s']:.2f}", f"{1e3 * r['exposed_comm_s']:.2f}",
                r["algorithm"], r["dominant"])  # fmt: skip
        click.echo("  ".join(f"{v!s:>10}" for v in vals))


def _plot(rows: List[dict], meta: dict, path: Path) -> None:
    from ddlbench.report.plots import new_figure, save

    fig, (ax, ax2) = new_figure(9.6, 4.4, ncols=2, wspace=0.28, left=0.09)
    n = [r["devices"] for r in rows]
    ax.plot(n, [r["throughput"] for r in rows], marker="o", label="predicted")
    ax.plot(n, [r["devices"] * rows[0]["throughput"] for r in rows], linestyle=":",
            color="grey", label="linear")  # fmt: skip
    ax2.plot(n, [100 * r["efficiency"] for r in rows], marker="o")
    for a in (ax, ax2):
        a.set_xscale("log", base=2)
        a.set_xlabel("devices")
    ax.set_yscale("log")
    ax.set_ylabel("samples/s")
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.set_ylim(0, 105)
    ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(
        f"{meta['model']}: {meta['intra']['name']} in a node, {meta['inter']['name']} x "
        f"{meta['nics_per_node']} between nodes",
        fontsize=10,
    )
    out = save(fig, path.parent if str(path.parent) else Path("."), path.stem, ["png"])
    if out["png"] != path and path.suffix != ".png":
        out["png"].replace(path)


def _list_presets(as_json: bool) -> None:
    from ddlbench.analyse import hierarchy

    rows = [
        {"name": n, "level": hierarchy.preset_level(n), "busbw_gbps": p.busbw_gbps,
         "alpha_us": 1e6 * p.alpha_s, "basis": p.basis, "source": p.source}
        for n, p in hierarchy.presets().items()
    ]  # fmt: skip
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['name']:<12} {r['level']:<6} {r['busbw_gbps']:>7g} GB/s  "
                   f"{r['alpha_us']:.1f} us  {r['basis']:<9} {r['source']}")  # fmt: skip
