#!/usr/bin/env bash
# quickstart.sh: set up ddlbench on this machine and run its main job, with no cluster:
# PyTorch DDP training LeNet on the bundled digits data at 1 and 2 ranks (configs/quickstart.yaml)
# on the local executor, then the report. Prints where the report is.
#
# Usage: scripts/quickstart.sh [--cluster localslurm]   (extra options go to `ddlbench submit`)
#
# Re-running it reuses the environments and never submits a run twice: a finished campaign is
# just reported again. Use `--campaign NAME` for a fresh one.
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
t0=${SECONDS}

scripts/setup.sh
scripts/make-envs.sh torch
# shellcheck source=/dev/null
source .venv/bin/activate

campaign=quickstart
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [[ "${args[i]}" == "--campaign" ]] && campaign="${args[i + 1]:-}"
  [[ "${args[i]}" == --campaign=* ]] && campaign="${args[i]#--campaign=}"
done

ddlbench submit configs/quickstart.yaml --campaign "${campaign}" "$@"
ddlbench wait "${campaign}"
ddlbench report "${campaign}"
echo "[quickstart] done in $((SECONDS - t0)) s"
