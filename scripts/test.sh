#!/usr/bin/env bash
# test.sh: run ddlbench's whole test suite on this machine. It first installs everything the
# tests need (the login venv, shellcheck and chromium, the framework environments, a real Slurm
# cluster on 127.0.0.1), so a fresh machine needs nothing else. Extra arguments go to pytest.
#
# Usage: scripts/test.sh [PYTEST-ARGS...]      e.g. scripts/test.sh -m "not slow" -x
# With no arguments it then also runs scripts/test-min-deps.sh (the oldest supported
# dependency versions, docs/environments.md).
#
# Environment: DDLBENCH_ENVS (framework environments, cached between runs),
#              DDLBENCH_SLURM_DIR (scratch dir of the test cluster)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
# shellcheck source=scripts/lib/python.sh
source scripts/lib/python.sh
t0=${SECONDS}
stage() { echo "[test] $* ($((SECONDS - t0)) s)"; }

stage "login environment and test tools"
scripts/setup.sh --dev

stage "framework environments"
scripts/make-envs.sh

stage "Charliecloud test image"
scripts/make-image.sh

stage "local Slurm cluster"
export DDLBENCH_SLURM_DIR="${DDLBENCH_SLURM_DIR:-/tmp/ddlbench-slurm-test}"
slurm_was_up=0
scripts/local-slurm.sh status >/dev/null 2>&1 && slurm_was_up=1
scripts/local-slurm.sh up
eval "$(scripts/local-slurm.sh env)"
if [[ ${slurm_was_up} -eq 0 ]]; then
  trap 'scripts/local-slurm.sh down >/dev/null 2>&1 || true' EXIT
fi

stage "pytest"
set +e
.venv/bin/python -m pytest -p no:cacheprovider "$@"
rc=$(pytest_status $? test)
set -e
stage "pytest exited with ${rc}"

if [[ $# -eq 0 ]]; then
  # the whole suite was asked for: the Slurm executor's tests once more, on a second cluster
  # with accounting (slurmdbd + MariaDB), so that ended jobs are read through sacct as on a
  # production cluster; the run above used the jobcomp fallback (docs/local-slurm.md)
  stage "Slurm tests through sacct (a cluster with accounting)"
  acct_rc=0
  acct_dir="${DDLBENCH_SLURM_ACCT_DIR:-/tmp/ddlbench-slurm-acct-test}"
  (
    export DDLBENCH_SLURM_DIR="${acct_dir}" DDLBENCH_SLURM_ACCOUNTING=1 DDLBENCH_SLURM_SACCT=yes
    trap 'scripts/local-slurm.sh down >/dev/null 2>&1 || true' EXIT
    scripts/local-slurm.sh up --accounting
    eval "$(scripts/local-slurm.sh env)"
    .venv/bin/python -m pytest -p no:cacheprovider -m "slurm and not slow" tests/execute/test_slurm.py
  ) || acct_rc=$?
  acct_rc=$(pytest_status "${acct_rc}" "test (sacct)")
  stage "Slurm tests through sacct exited with ${acct_rc}"
  if [[ ${rc} -eq 0 ]]; then
    rc=${acct_rc}
  fi

  # the whole suite was asked for: also the declared minimum dependency versions
  stage "minimum dependency versions"
  min_rc=0
  scripts/test-min-deps.sh || min_rc=$?
  stage "minimum-versions tests exited with ${min_rc}"
  if [[ ${rc} -eq 0 ]]; then
    rc=${min_rc}
  fi
fi
exit "${rc}"
