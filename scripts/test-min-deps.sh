#!/usr/bin/env bash
# test-min-deps.sh: run ddlbench's fast tests against the oldest dependency versions it
# declares (Python 3.10, and every dependency pinned to pyproject.toml's lower bound, pins in
# scripts/envs/min-deps.txt). Needs no cluster, no frameworks and no root; PyPI access the first
# time. Extra arguments go to pytest.
#
# Usage: scripts/test-min-deps.sh [PYTEST-ARGS...]      e.g. scripts/test-min-deps.sh -x
#
# Environment: DDLBENCH_MINDEPS_VENV (the venv, kept between runs; default
#              ~/.cache/ddlbench/mindeps-venv), DDLBENCH_MINDEPS_PYTHON (the Python 3.10
#              interpreter; default: python3 or python3.10 if one is 3.10, else pyenv's newest
#              3.10.x)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
PINS="${ROOT}/scripts/envs/min-deps.txt"
VENV="${DDLBENCH_MINDEPS_VENV:-${HOME}/.cache/ddlbench/mindeps-venv}"
VENV="${VENV%/}"
[[ "${VENV}" == /* ]] || VENV="${PWD}/${VENV}"
LOG="${VENV}.log"
STAMP="${VENV}/.ddlbench-stamp"
cd "${ROOT}"
t0=${SECONDS}
stage() { echo "[min-deps] $* ($((SECONDS - t0)) s)"; }
die() { echo "test-min-deps.sh: $*" >&2; exit 1; }

case "${1:-}" in
  -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
esac

want=$(sed -n 's/^#[[:space:]]*@python[[:space:]]\{1,\}\([0-9.]*\).*/\1/p' "${PINS}" | head -n 1)
[[ -n "${want}" ]] || die "${PINS} has no '# @python X.Y' line"

# find_python X.Y [PREFERRED]: $DDLBENCH_MINDEPS_PYTHON, python3, pythonX.Y, then pyenv's X.Y.*
# shellcheck source=scripts/lib/python.sh
source "${ROOT}/scripts/lib/python.sh"

# The venv is reused while the pins and pyproject.toml (ddlbench's own requirements) are unchanged.
hash=$(cat "${PINS}" "${ROOT}/pyproject.toml" | sha256sum | cut -c1-16)
if [[ -x "${VENV}/bin/python" && "$(cat "${STAMP}" 2>/dev/null || true)" == "${hash}" ]]; then
  stage "reusing ${VENV} ($("${VENV}/bin/python" --version))"
else
  py=$(find_python "${want}" "${DDLBENCH_MINDEPS_PYTHON:-}") || die "no Python ${want} found \
(tried \$DDLBENCH_MINDEPS_PYTHON if set, python3, python${want} and pyenv's ${want}.*); \
install it, e.g. with pyenv"
  if [[ -e "${VENV}" && ! -f "${VENV}/pyvenv.cfg" ]]; then
    die "${VENV} exists and is not a venv; remove it or set DDLBENCH_MINDEPS_VENV"
  fi
  stage "creating ${VENV} with $("${py}" --version) (pip log: ${LOG})"
  rm -rf -- "${VENV}"
  mkdir -p -- "$(dirname -- "${VENV}")"
  "${py}" -m venv "${VENV}"
  {
    "${VENV}/bin/python" -m pip install -r "${PINS}" -e "${ROOT}" \
      && "${VENV}/bin/python" -m pip check
  } >"${LOG}" 2>&1 || {
    tail -20 "${LOG}" >&2
    die "installing the pinned versions failed (full log: ${LOG})"
  }
  "${VENV}/bin/python" -m pip freeze --all >"${VENV}/ddlbench-freeze.txt"
  echo "${hash}" >"${STAMP}"
fi

stage "pytest on $("${VENV}/bin/python" -c 'import sys, numpy, pandas
print("Python %d.%d.%d" % sys.version_info[:3], "pandas", pandas.__version__, "numpy", numpy.__version__)')"
set +e
"${VENV}/bin/python" -m pytest -q -m "not slurm and not frameworks and not slow" \
  -p no:cacheprovider "$@"
rc=$(pytest_status $? min-deps)
set -e
stage "pytest exited with ${rc}"
exit "${rc}"
