"""Every column of the collected tables, defined once: name, type, source and meaning.

The collector types its tables from here, and ``docs/columns.md`` is generated from here::

    python -m ddlbench.collect.columns --markdown > docs/columns.md

(a test checks that the committed page equals the generated one).

Kinds and their Arrow types:

- ``text``: ``string`` (missing: null)
- ``int``: ``int64``, nullable (pandas ``Int64``)
- ``count``: ``int64``, never null
- ``float``: ``float64`` (missing: NaN)
- ``bool``: ``bool``, never null
- ``flag``: ``bool``, nullable (pandas ``boolean``)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from .data_files import RUNS_CSV, STEPS_FILE, table_file

ARROW_TYPES = {
    "text": "string",
    "int": "int64",
    "count": "int64",
    "float": "float64",
    "bool": "bool",
    "flag": "bool",
}

#: where a column's values come from
SOURCES = {
    "plan": "the run's entry in the campaign manifest (what was planned), then its run config "
    "(the run config alone for run folders that the manifest does not list)",
    "meta": "the rank's meta record (what ran)",
    "summary": "the rank's summary record, as written",
    "steps": "computed from the rank's measured step records",
    "log files": "the rank log files found (how they were read)",
    "store": "the campaign store: the run's newest attempt",
    "collector": "derived by the collector from the above",
    "run metric": "per-run figure over the run's ranks (ddlbench/analyse/run_metrics.py)",
    "loss": "every step record's loss (warmup and measured), the mean over the run's ranks "
    "step by step, judged by ddlbench/analyse/training_health.py",
    "telemetry": "the run's per-node GPU telemetry logs (`telemetry/<node>.jsonl`)",
    "preflight": "the run's per-node pre-flight reports (`provenance/preflight/<node>.json`)",
    "placement": "the ranks' placement records (`logs/attempt-<k>/placement/rank-<r>.json`) "
    "and one rank's NCCL debug log (`logs/attempt-<k>/nccl/`)",
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    source: str
    meaning: str

    @property
    def arrow_type(self) -> str:
        return ARROW_TYPES[self.kind]


def _table(rows: Sequence[Tuple[str, str, str, str]]) -> Tuple[Column, ...]:
    cols = tuple(Column(*r) for r in rows)
    for c in cols:
        assert c.kind in ARROW_TYPES and c.source in SOURCES, c
    return cols


# ------------------------------------------------------------------ runs.parquet / runs.csv

_PLAN_RUN = [
    ("run_id", "text", "plan", "run id: `<group>-r<repeat>`"),
    (
        "framework",
        "text",
        "plan",
        "framework launcher (pytorch, tensorflow, keras, horovod, mxnet)",
    ),
    ("workload", "text", "plan", "workload module that ran the ranks"),
    ("model", "text", "plan", "model name"),
    ("mode", "text", "plan", "throughput, convergence or allreduce"),
    ("nodes", "int", "plan", "nodes"),
    ("tasks_per_node", "int", "plan", "ranks per node"),
    ("gpus_per_node", "int", "plan", "GPUs per node (0 on CPU)"),
    ("world_size", "int", "plan", "devices planned (ranks x devices_per_worker)"),
    ("batch_size", "int", "plan", "per-device batch"),
    ("global_batch_size", "int", "plan", "per-device batch x world size"),
    ("lr", "float", "plan", "peak learning rate after LR scaling"),
    ("repeat", "int", "plan", "repeat number"),
    (
        "transport",
        "text",
        "plan",
        "`network.transport` asked for between nodes: `rdma` or `tcp` (empty: the framework's "
        "choice); what NCCL used is `nccl_net`",
    ),
    (
        "precision",
        "text",
        "collector",
        "precision that ran, after any fallback (rank meta records; ranks that differ: "
        "comma-separated), else planned",
    ),
    ("scaling", "text", "plan", "weak or strong"),
    (
        "label",
        "text",
        "plan",
        "the framework entry's label (its name unless the spec gives one; run ids start with it)",
    ),
    ("variant", "text", "plan", "the spec variant's label (empty: the spec has no variants)"),
    ("group", "text", "plan", "configuration: the run id without `-r<repeat>`"),
    ("run_dir", "text", "plan", "run folder, relative to the campaign"),
    ("data_kind", "text", "plan", "data set kind (synthetic, digits, mnist, imagefolder)"),
    ("data", "text", "plan", "data settings as JSON"),
    ("in_manifest", "bool", "collector", "in the manifest (false: a stray run folder)"),
    (
        "device",
        "text",
        "collector",
        "device that ran (gpu or cpu; rank meta records), else planned",
    ),
    ("base_lr", "float", "plan", "learning rate before LR scaling"),
    ("lr_scaling", "text", "plan", "LR scaling rule (none, linear, sqrt)"),
    ("warmup_epochs", "float", "plan", "gradual LR warmup epochs"),
    ("epochs", "int", "plan", "epochs (convergence runs)"),
    ("target_accuracy", "float", "plan", "target accuracy (convergence runs)"),
    ("planned_warmup_steps", "int", "plan", "warmup steps planned"),
    ("planned_measure_steps", "int", "plan", "measured steps planned"),
    ("framework_options", "text", "plan", "framework options as JSON"),
    (
        "precision_requested",
        "text",
        "plan",
        "precision planned (a rank may fall back, e.g. amp on CPU)",
    ),
    ("backend_requested", "text", "plan", "communication backend planned"),
    ("device_requested", "text", "plan", "device planned"),
    (
        "mismatches",
        "text",
        "collector",
        "planned settings that did not run: `field: planned X, ran Y`; null when none",
    ),
]
_COMPLETENESS = [
    ("rank_files", "int", "log files", "rank log files found"),
    ("ranks_present", "int", "log files", "ranks with a readable log"),
    ("ranks_with_summary", "int", "log files", "ranks that wrote their summary"),
    ("ranks_with_error", "int", "log files", "ranks that wrote an error record"),
    ("missing_ranks", "text", "log files", "ranks without any log"),
    ("ranks_without_summary", "text", "log files", "ranks with a log but no summary and no error"),
    ("error_ranks", "text", "log files", "ranks with an error record"),
    ("complete", "bool", "collector", "every rank wrote its summary and none an error"),
]
_STORE = [
    ("slurm_state", "text", "store", "state of the newest attempt (`unknown` without a store)"),
    ("attempts", "int", "store", "attempts made"),
    ("exit_code", "int", "store", "exit code of the newest attempt"),
    ("job_start", "text", "store", "job start (ISO-8601 UTC)"),
    ("job_end", "text", "store", "job end (ISO-8601 UTC)"),
    ("nodelist", "text", "store", "nodes of the job (else from the rank meta records)"),
    ("slurm_reason", "text", "store", "how the job ended, or why it waits (the words of status)"),
    ("job_id", "text", "store", "job id (else from the rank meta records)"),
    (
        "status",
        "text",
        "collector",
        "ok, failed, hung, cancelled, incomplete, running, pending or not_run",
    ),
    (
        "error_message",
        "text",
        "meta",
        "error message of the lowest failed rank (a cancelled run: how it was cancelled)",
    ),
]
_PROVENANCE = [
    ("framework_version", "text", "meta", "framework versions of the ranks"),
    ("backend", "text", "meta", "communication backend that ran (rank meta records), else planned"),
    ("device_name", "text", "meta", "device names of the ranks"),
    ("ddlbench_version", "text", "meta", "ddlbench versions that wrote the logs"),
    ("hosts", "text", "meta", "hosts of the ranks"),
    ("n_hosts", "int", "meta", "number of distinct hosts"),
    ("start_time", "float", "meta", "earliest rank start (Unix s)"),
]
_RUN_METRICS = [
    ("samples_measured", "float", "run metric", "sum over ranks of the measured samples"),
    ("window_start", "float", "run metric", "earliest measured step start over ranks (Unix s)"),
    ("window_end", "float", "run metric", "latest measured step end over ranks (Unix s)"),
    ("measure_time_s", "float", "run metric", "`window_end - window_start`"),
    ("throughput", "float", "run metric", "global throughput: samples_measured / measure_time_s"),
    ("throughput_per_device", "float", "run metric", "throughput / world_size"),
    (
        "applied_samples_per_s",
        "float",
        "run metric",
        "samples whose gradient was applied per second: the ranks' applied samples / "
        "measure_time_s with backup workers (logs without applied samples: from each rank's "
        "dropped steps), else throughput; a backup run's scaling series is of this",
    ),
    (
        "dropped_samples",
        "float",
        "run metric",
        "measured samples whose gradient was dropped (backup workers; 0 otherwise)",
    ),
    (
        "throughput_rank0_x_n",
        "float",
        "run metric",
        "rank 0's throughput x world_size (for comparison only)",
    ),
    (
        "step_time_median_s",
        "float",
        "run metric",
        "median over ranks of the per-rank median step time",
    ),
    ("step_time_jitter_s", "float", "run metric", "median over ranks of the per-rank jitter"),
    (
        "straggler_index",
        "float",
        "run metric",
        "the straggler index flagged: compute_straggler_index where the workload logs "
        "compute_s, else step_straggler_index",
    ),
    (
        "straggler_metric",
        "text",
        "run metric",
        "which index straggler_index is: `compute` or `step`",
    ),
    (
        "step_straggler_index",
        "float",
        "run metric",
        "max over ranks / median over ranks of the per-rank median step time",
    ),
    (
        "compute_straggler_index",
        "float",
        "run metric",
        "the same ratio over the per-rank median compute_s",
    ),
    (
        "slowest_rank",
        "int",
        "run metric",
        "the rank with the highest value of the straggler metric; null when tied",
    ),
    ("slowest_host", "text", "run metric", "that rank's host"),
    (
        "slowest_ranks",
        "text",
        "run metric",
        "up to three ranks slower than the median rank, slowest first: `rank@host value`",
    ),
    ("params_consistent", "flag", "run metric", "all ranks report the same param_sha256"),
    ("final_accuracy", "float", "run metric", "final accuracy (lowest rank whose summary has it)"),
    ("best_accuracy", "float", "run metric", "best accuracy (lowest rank whose summary has it)"),
    ("time_to_accuracy_s", "float", "run metric", "time to target accuracy (lowest rank with it)"),
    ("final_loss", "float", "run metric", "final loss (lowest rank whose summary has it)"),
]
#: whether the training diverged (ddlbench/analyse/training_health.py; docs/metrics.md#training)
_TRAINING = [
    (
        "training",
        "text",
        "loss",
        "`ok`, `diverged` (the loss ended non-finite, or rose back to where it started after "
        "falling to half of it or blowing up to twice it) or `no loss` (no step has one)",
    ),
    ("loss_first", "float", "loss", "starting loss: median of the first steps (at most 10)"),
    ("loss_best", "float", "loss", "lowest median of a window of 5 % of the steps"),
    ("loss_last", "float", "loss", "median of the last 5 % of the steps (null: not finite)"),
]
_RUN_TAIL = [
    ("problems", "text", "collector", "everything suspicious about the run, in words"),
    ("stderr_tail", "text", "log files", "last lines of the newest stderr file (runs not ok)"),
]
#: what the performance knobs, the FLOP count, the GPU sampler and the pre-flight add
#: (ddlbench/collect/gpu_columns.py; docs/mfu.md, docs/telemetry.md)
_GPU = [
    ("layout", "text", "meta", "the activation layout that ran: NCHW or NHWC"),
    (
        "compile",
        "text",
        "meta",
        "what compiled the step, e.g. `torch.compile(mode=default)`, `xla`; `off` if nothing",
    ),
    ("fallbacks", "text", "meta", "every knob fallback any rank logged, once each"),
    ("compile_s", "float", "summary", "compile time outside the measured window (largest rank)"),
    ("flops_per_sample", "float", "meta", "training FLOPs per sample (forward x 3, analytic)"),
    (
        "tflops_per_device",
        "float",
        "collector",
        "achieved TFLOP/s per device: throughput_per_device x flops_per_sample / 1e12; a "
        "transformer's: tokens_per_s_per_device x flops_per_token_palm / 1e12",
    ),
    ("peak_tflops", "float", "collector", "the device's peak TFLOP/s for the precision that ran"),
    (
        "mfu",
        "float",
        "collector",
        "model FLOP utilisation: tflops_per_device / peak_tflops (a transformer's: mfu_palm)",
    ),
    ("telemetry", "text", "telemetry", "what the GPU sampler said (null: no sampler ran)"),
    ("gpu_power_w", "float", "telemetry", "mean GPU power in the measured window, W"),
    ("energy_j", "float", "telemetry", "GPU energy in the measured window, J"),
    ("joules_per_sample", "float", "telemetry", "energy_j / samples_measured"),
    ("gpu_util_pct", "float", "telemetry", "mean GPU utilisation in the measured window, %"),
    ("gpu_throttled", "flag", "telemetry", "clocks were throttled in the measured window"),
    ("throttle_reasons", "text", "telemetry", "NVML's throttle reasons seen in the window"),
    ("preflight_busy", "flag", "preflight", "a node's GPUs were busy at the pre-flight"),
    ("node_shared", "flag", "preflight", "a node was shared with other jobs at the pre-flight"),
    ("interference", "text", "preflight", "what the pre-flight found, in words"),
]
#: the transformer language models' figures (ddlbench/collect/lm_columns.py; null for CNNs;
#: docs/workloads.md#transformers, docs/mfu.md#language-models)
_LM = [
    ("seq_len", "int", "meta", "tokens per sequence"),
    ("parallel", "text", "meta", "data parallelism: ddp, fsdp, fsdp-grad-op, hsdp, zero1"),
    ("activation_checkpointing", "text", "meta", "none, selective or full"),
    ("grad_accum", "int", "meta", "micro-batches per optimizer step"),
    ("tokens_per_s", "float", "collector", "global tokens/s: throughput x seq_len"),
    ("tokens_per_s_per_device", "float", "collector", "tokens_per_s / world_size"),
    ("flops_per_token_palm", "float", "meta", "training FLOPs per token, 6N + 12 L d S (PaLM)"),
    ("flops_per_token_megatron", "float", "meta", "6N + 6 L d S: causal attention halved"),
    ("flops_per_token_hfu", "float", "meta", "PaLM's count plus the checkpointing recompute"),
    ("mfu_palm", "float", "collector", "MFU, PaLM convention (null when above 100 %)"),
    ("mfu_megatron", "float", "collector", "MFU, causal attention halved (null above 100 %)"),
    ("hfu", "float", "collector", "hardware FLOP utilisation (null when above 100 %)"),
    ("mfu_flag", "text", "collector", "a convention above 100 %: the convention or peak is wrong"),
    ("peak_rss_model_bytes", "float", "summary", "CPU: peak RSS above the pre-model RSS, max rank"),
    ("peak_allocated_bytes", "float", "summary", "GPU: peak allocated by torch, max rank"),
    ("peak_reserved_bytes", "float", "summary", "GPU: peak reserved by the allocator, max rank"),
    ("startup_import_s", "float", "meta", "process start to workload start (imports), max rank"),
    ("startup_process_group_s", "float", "meta", "process-group start, max rank"),
    ("startup_build_shard_s", "float", "meta", "model build, sharding, optimizer, max rank"),
]
#: where the ranks ran (ddlbench/collect/placement.py; docs/launching.md)
_PLACEMENT = [
    (
        "shared_device",
        "text",
        "placement",
        "ranks of one node that drove one device (fails the run)",
    ),
    ("cpu_binding", "text", "placement", "the CPU binding policy, and ranks bound otherwise"),
    ("nccl_net", "text", "placement", "the network NCCL chose: `IB`, `Socket` or a plugin's"),
    ("nccl_transports", "text", "placement", "NCCL's channel transports, e.g. `NET/IB,P2P/IPC`"),
    (
        "nccl_channel_nics",
        "text",
        "placement",
        "the NIC of each network channel of the first node's ranks, e.g. "
        "`rank 0: mlx5_0:1 (0,2), mlx5_1:1 (1,3)`",
    ),
]
RUNS = _table(
    _PLAN_RUN
    + _COMPLETENESS
    + _STORE
    + _PROVENANCE
    + _RUN_METRICS
    + _TRAINING
    + _RUN_TAIL
    + _GPU
    + _LM
    + _PLACEMENT
)
RUN_METRICS = _table(_RUN_METRICS)

# ------------------------------------------------------------------ ranks.parquet

_META = [
    ("host", "text", "meta", "host name"),
    ("local_rank", "int", "meta", "rank on its node"),
    ("node_rank", "int", "meta", "node index"),
    ("world_size", "int", "meta", "ranks of the job as the rank saw it"),
    ("devices_per_worker", "int", "meta", "devices one rank drives (MXNet per-node; else 1)"),
    ("pid", "int", "meta", "process id"),
    ("device", "text", "meta", "gpu or cpu"),
    ("device_name", "text", "meta", "device model"),
    ("framework", "text", "meta", "framework"),
    ("workload", "text", "meta", "workload module"),
    ("framework_version", "text", "meta", "framework version"),
    ("backend", "text", "meta", "communication backend"),
    ("model", "text", "meta", "model"),
    ("param_count", "int", "meta", "model parameters"),
    ("batch_size", "int", "meta", "per-device batch (x devices_per_worker: the rank's batch)"),
    ("global_batch_size", "int", "meta", "global batch"),
    ("precision", "text", "meta", "precision that ran"),
    (
        "precision_fallback_from",
        "text",
        "meta",
        "precision the rank was asked for and could not use (the log's `precision_requested`); "
        "null: it ran what was asked",
    ),
    ("repeat", "int", "meta", "repeat number"),
    ("mode", "text", "meta", "mode"),
    ("slurm_job_id", "text", "meta", "Slurm job id"),
    ("slurm_nodelist", "text", "meta", "Slurm node list"),
    ("ddlbench_version", "text", "meta", "ddlbench version of the workload"),
    ("python_version", "text", "meta", "Python version"),
    ("format_version", "int", "meta", "log format version"),
]
_RANK_FILE = [
    ("start_time", "float", "meta", "the meta record's `time` (Unix s)"),
    ("meta_run_id", "text", "meta", "run id the meta record names"),
    ("file", "text", "log files", "the log file used, relative to the campaign"),
    ("duplicates", "count", "log files", "other files for the same run and rank (ignored)"),
    ("truncated_lines", "count", "log files", "truncated last lines skipped"),
    ("bad_lines", "count", "log files", "unreadable lines skipped"),
    ("restarts", "count", "log files", "meta records after the first (a restarted rank)"),
    ("has_summary", "bool", "log files", "the rank wrote its summary"),
]
_SUMMARY = [
    ("status", "text", "summary status (ok, target_not_reached)"),
    ("steps_measured", "float", "measured steps"),
    ("samples_measured", "float", "measured samples"),
    ("measure_time_s", "float", "measured window (s)"),
    ("throughput", "float", "the rank's own samples/s"),
    ("final_loss", "float", "final loss"),
    ("final_accuracy", "float", "final accuracy"),
    ("best_accuracy", "float", "best accuracy"),
    ("time_to_accuracy_s", "float", "time to target accuracy"),
    ("param_sum", "float", "sum of the final parameters"),
    ("param_sha256", "text", "digest of the final parameters"),
    ("injected_steps", "float", "measured steps slowed on purpose (straggler injection)"),
    ("injected_s", "float", "their total injected delay (s)"),
    ("cpu_share_by", "text", "cpu-share straggler: cgroup-v1, cgroup-v2 or competitors"),
    ("backup_workers", "float", "backup workers of the run (null: plain DDP)"),
    ("dropped_steps", "float", "measured steps whose gradient of this rank was dropped"),
    ("applied_samples", "float", "measured samples of this rank whose gradient was applied"),
    ("dropped_samples", "float", "measured samples of this rank whose gradient was dropped"),
    ("rejected_reports", "float", "own program: step reports it could not use (skipped)"),
]
_RANK_REST = [
    ("has_error", "bool", "log files", "the rank wrote an error record"),
    ("error_message", "text", "log files", "its first error message"),
    ("evals", "count", "log files", "eval records"),
    ("allreduce_records", "count", "log files", "allreduce records"),
]
_RANK_STATS = [
    ("steps", "count", "steps", "step records (warmup included)"),
    ("steps_measured", "count", "steps", "measured step records"),
    ("samples_measured", "count", "steps", "sum of samples over the measured steps"),
    ("t_first", "float", "steps", "first measured t_start (Unix s)"),
    ("t_last", "float", "steps", "last measured t_end (Unix s)"),
    ("measure_time_s", "float", "steps", "`t_last - t_first`"),
    ("throughput", "float", "steps", "samples_measured / measure_time_s"),
    ("step_time_mean_s", "float", "steps", "mean step time"),
    ("step_time_p5_s", "float", "steps", "5th percentile of the step times"),
    ("step_time_p25_s", "float", "steps", "25th percentile"),
    ("step_time_median_s", "float", "steps", "median step time"),
    ("step_time_p75_s", "float", "steps", "75th percentile"),
    ("step_time_p95_s", "float", "steps", "95th percentile"),
    ("step_time_mad_s", "float", "steps", "median absolute deviation of the step times"),
    ("step_time_jitter_s", "float", "steps", "1.4826 x MAD"),
    ("compute_median_s", "float", "steps", "median compute_s (when logged)"),
    ("comm_median_s", "float", "steps", "median comm_s (when logged)"),
]
META = _table(_META)
SUMMARY = _table([(f"summary_{n}", k, "summary", m) for n, k, m in _SUMMARY])
RANK_STATS = _table(_RANK_STATS)
RANKS = _table(
    [("run_id", "text", "plan", "run id"), ("rank", "count", "meta", "global rank")]
    + _META
    + _RANK_FILE
    + [(c.name, c.kind, c.source, c.meaning) for c in SUMMARY]
    + _RANK_REST
    + _RANK_STATS
)

# ------------------------------------------------------------------ records and files

EVALS = _table(
    [
        ("run_id", "text", "plan", "run id"),
        ("rank", "count", "meta", "rank"),
        ("epoch", "float", "log files", "epoch"),
        ("t", "float", "log files", "time of the eval (Unix s)"),
        ("elapsed_s", "float", "log files", "seconds since the run started"),
        ("accuracy", "float", "log files", "top-1 accuracy"),
        ("loss", "float", "log files", "loss"),
        ("samples", "float", "log files", "samples evaluated"),
    ]
)
ALLREDUCE = _table(
    [
        ("run_id", "text", "plan", "run id"),
        ("rank", "count", "meta", "rank"),
        ("bytes", "int", "log files", "message size"),
        ("dtype", "text", "log files", "element type"),
        ("iters", "float", "log files", "timed iterations"),
        ("time_s", "float", "log files", "the rank's median time of one allreduce"),
        ("algbw_gbps", "float", "log files", "the rank's algorithm bandwidth (GB/s)"),
        ("busbw_gbps", "float", "log files", "the rank's bus bandwidth (GB/s)"),
    ]
)
FILES = _table(
    [
        ("file", "text", "log files", "log file, relative to the campaign"),
        ("run_id", "text", "log files", "run the file belongs to"),
        ("rank", "int", "log files", "rank its meta record names"),
        ("size", "count", "log files", "bytes"),
        ("status", "text", "log files", "used, duplicate or no_meta"),
        ("format_version", "int", "log files", "log format version"),
        ("steps", "count", "log files", "step records"),
        ("truncated_lines", "count", "log files", "truncated last lines skipped"),
        ("bad_lines", "count", "log files", "unreadable lines skipped"),
        ("restarts", "count", "log files", "meta records after the first"),
        ("line_by_line", "bool", "log files", "read line by line (the fast path refused it)"),
    ]
)

TABLES: Dict[str, Tuple[Column, ...]] = {
    f"{table_file('runs')}, {RUNS_CSV}": RUNS,
    table_file("ranks"): RANKS,
    table_file("evals"): EVALS,
    table_file("allreduce"): ALLREDUCE,
    table_file("files"): FILES,
}


def names(cols: Sequence[Column]) -> List[str]:
    return [c.name for c in cols]


def of_kind(cols: Sequence[Column], *kinds: str) -> List[str]:
    return [c.name for c in cols if c.kind in kinds]


# ------------------------------------------------------------------ the column reference


def markdown() -> str:
    """``docs/columns.md``."""
    out = [
        "# Columns of the collected data",
        "",
        "<!-- generated by `python -m ddlbench.collect.columns --markdown`: do not edit -->",
        "",
        "`ddlbench collect` writes these tables to `results/<campaign>/data/`; formulas are in",
        "[metrics](metrics.md). Types are Arrow types; `int64?` and `bool?` may be null.",
        "",
        "Sources:",
        "",
    ]
    out += [f"- **{name}**: {what}" for name, what in SOURCES.items()]
    for title, cols in TABLES.items():
        out += [
            "",
            f"## `{title}`",
            "",
            "| column | type | source | meaning |",
            "|---|---|---|---|",
        ]
        for c in cols:
            nullable = "?" if c.kind in ("int", "flag") else ""
            meaning = c.meaning.replace("|", "\\|")
            out.append(f"| `{c.name}` | {c.arrow_type}{nullable} | {c.source} | {meaning} |")
    out += [
        "",
        f"`{STEPS_FILE}` has one row per rank per step: `run_id` (dictionary), `rank`, then the",
        "step record's fields as in the [log format](log-format.md).",
        "",
    ]
    return "\n".join(out)


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["--markdown"]:
        sys.stderr.write("usage: python -m ddlbench.collect.columns --markdown\n")
        return 2
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
