"""DDP vs FSDP vs ZeRO-1 on a transformer, on this machine: tokens/s and peak memory per rank,
measured against ``analyse.lm_memory.predict_memory``.

Submits ``configs/gpt-mini.yaml`` (gpt-tiny on Shakespeare, 2 CPU ranks, 6 configurations) to
the local executor (``--repeats`` campaigns), collects, and prints per configuration the median
tokens/s and the busiest rank's measured peak memory (the resident set of live tensors, CPU) and
the prediction, with their ratio. The memory target: within 15 % (docs/memory.md).

    python benchmarks/lm_modes.py --repeats 1 [--results /tmp/lm-modes]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "configs" / "gpt-mini.yaml"


def _ddlbench(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "ddlbench", *args], check=True, cwd=ROOT)


def _campaign(results: Path, name: str) -> Path:
    _ddlbench(
        "submit", str(SPEC), "--cluster", "local", "--campaign", name, "--results", str(results)
    )
    _ddlbench("wait", name, "--results", str(results))
    _ddlbench("collect", name, "--results", str(results))
    return results / name / "data" / "runs.parquet"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    import pandas as pd

    from ddlbench.analyse.lm_memory import predict_memory

    results = args.results or Path(tempfile.mkdtemp(prefix="lm-modes-"))
    frames = [pd.read_parquet(_campaign(results, f"lm-modes-{i}")) for i in range(args.repeats)]
    runs = pd.concat(frames)
    print(
        f"{'configuration':<42} {'tokens/s':>9} {'measured MiB':>13} "
        f"{'predicted MiB':>14} {'ratio':>6}"
    )
    for group, rows in runs.groupby("group"):
        first = rows.iloc[0]
        predicted = predict_memory(
            str(first["model"]), int(first["seq_len"]), int(first["batch_size"]), "fp32",
            str(first["parallel"]), str(first["activation_checkpointing"]),
            int(first["world_size"]), int(first["tasks_per_node"]),
        )["total"]  # fmt: skip
        measured = float(rows["peak_rss_model_bytes"].max())
        tokens = statistics.median(rows["tokens_per_s"].dropna())
        print(
            f"{group:<42} {tokens:>9.0f} {measured / 2**20:>13.0f} {predicted / 2**20:>14.0f} "
            f"{measured / predicted:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
