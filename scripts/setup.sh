#!/usr/bin/env bash
# setup.sh: install ddlbench's login-node environment (.venv) and, with --dev, the system
# tools its tests use. Idempotent: a second run only checks.
#
# Usage: scripts/setup.sh [--dev]
#   --dev   also install Debian's shellcheck, chromium (report rendering test), and the
#           test dependencies (pytest, hypothesis, ruff, jsonschema)
#
# Environment: DDLBENCH_PYTHON (interpreter for .venv, default python3)
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROOT}/.venv"
PYTHON="${DDLBENCH_PYTHON:-python3}"
dev=0
for arg in "$@"; do
  case "${arg}" in
    --dev) dev=1 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "setup.sh: unknown argument: ${arg}" >&2; exit 2 ;;
  esac
done

say() { echo "[setup] $*"; }

apt_install() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "${pkg}" 2>/dev/null | grep -q "install ok installed" || missing+=("${pkg}")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: please install these Debian packages: ${missing[*]}" >&2
    return 1
  fi
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/ddlbench-apt.log 2>&1; then
    apt-get update -q >/tmp/ddlbench-apt.log 2>&1
    apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/ddlbench-apt.log 2>&1 || {
      tail -20 /tmp/ddlbench-apt.log >&2
      return 1
    }
  fi
}

if [[ ${dev} -eq 1 ]]; then
  apt_install shellcheck chromium
fi

extras=""
[[ ${dev} -eq 1 ]] && extras="[dev]"
stamp="${VENV}/.ddlbench-stamp"
want="$(sha256sum "${ROOT}/pyproject.toml" | cut -c1-16)${extras}"
if [[ -x "${VENV}/bin/python" && -f "${stamp}" && "$(cat "${stamp}")" == "${want}"* ]]; then
  say ".venv is up to date"
else
  say "creating .venv with $("${PYTHON}" --version)"
  [[ -x "${VENV}/bin/python" ]] || "${PYTHON}" -m venv "${VENV}"
  "${VENV}/bin/pip" install -q -e "${ROOT}${extras}" >/tmp/ddlbench-pip.log 2>&1 || {
    tail -20 /tmp/ddlbench-pip.log >&2
    exit 1
  }
  echo "${want}" > "${stamp}"
fi
say "ddlbench $("${VENV}/bin/ddlbench" --version | awk '{print $NF}') at ${VENV}/bin/ddlbench"
