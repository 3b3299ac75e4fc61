#!/usr/bin/env bash
# make-envs.sh: build (or check) ddlbench's per-framework Python environments.
#
# Usage: scripts/make-envs.sh [--check] [ENV...]
#   ENV       one or more of: torch tensorflow horovod mxnet (default: all four)
#   --check   build nothing; import each env's framework(s), print versions,
#             exit 0 only if every asked-for env is usable and up to date.
#   --hash    build nothing; print "<env> <hash>" per env: the stamp an up-to-date env
#             has (`ddlbench doctor` compares it with the envs' stamps)
#
# Each env is a virtualenv under ${DDLBENCH_ENVS:-$HOME/.cache/ddlbench/envs}/<env>,
# pinned by scripts/envs/<env>.txt (pip requirement files; "# @python X.Y" picks
# the interpreter, "# @sdist NAME==VER" is built from source by this script).
# An env whose stamp (hash of its pins and build recipe) matches is skipped; any
# other env is rebuilt from scratch in <env>.tmp and moved into place when done.
#
# Environment:
#   DDLBENCH_ENVS          where the envs, their logs and built wheels live
#   DDLBENCH_FIND_LINKS    extra local wheel directory for pip (default /opt/wheels,
#                          where the CPU build of torch is served)
#   DDLBENCH_PYTHON_<ENV>  interpreter to use for ENV (e.g. DDLBENCH_PYTHON_MXNET)
#   DDLBENCH_BUILD_JOBS    parallel compile jobs for Horovod (default: nproc)
#   HOROVOD_BUILD_ARCH_FLAGS  compiler arch flags for Horovod (default below)
#
# See docs/environments.md.
set -euo pipefail
set -o errtrace  # ERR trap (below) in functions and subshells too

# Bump when the install logic changes in a way that should rebuild every env.
readonly RECIPE_VERSION=1

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly REQ_DIR="${SCRIPT_DIR}/envs"
readonly ALL_ENVS=(torch tensorflow mxnet horovod)
ENVS_ROOT="${DDLBENCH_ENVS:-${HOME}/.cache/ddlbench/envs}"
readonly FIND_LINKS="${DDLBENCH_FIND_LINKS:-/opt/wheels}"
readonly STAMP_NAME=".ddlbench-stamp"
# how messages name this script: `ddlbench envs build` runs the copy shipped in the package
readonly SELF="${DDLBENCH_ENVS_COMMAND:-scripts/make-envs.sh}"

# Horovod build recipe. Each patch is "FILE|SED-EXPR|GREP-PATTERN-THAT-MUST-MATCH".
# 0.28.1 hard-codes C++14, but torch >= 2.1 and TF >= 2.10 headers need C++17;
# xla_mpi_ops.cc (XLA custom-call ops, used only by GPU builds) includes
# tensorflow/compiler/xla/client/xla_builder.h, which TF 2.21 no longer ships;
# build type Release drops the debug info of RelWithDebInfo (faster, smaller).
readonly HOROVOD_PATCHES=(
  "CMakeLists.txt|s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/|set(CMAKE_CXX_STANDARD 14)"
  "horovod/torch/CMakeLists.txt|s/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/|set(CMAKE_CXX_STANDARD 14)"
  "horovod/tensorflow/CMakeLists.txt|/xla_mpi_ops\.cc/d|xla_mpi_ops\.cc"
  "setup.py|s/else 'RelWithDebInfo'/else 'Release'/|else 'RelWithDebInfo'"
)
readonly HOROVOD_BUILD_ENV=(
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
  HOROVOD_CPU_OPERATIONS=gloo
  "HOROVOD_BUILD_ARCH_FLAGS=${HOROVOD_BUILD_ARCH_FLAGS:--mf16c -mavx -mfma}"
)

PIP_OPTS=(--no-input --disable-pip-version-check --progress-bar off)
if [[ -d "${FIND_LINKS}" ]]; then
  PIP_OPTS+=(--find-links "${FIND_LINKS}")
fi

LOG=""          # log file of the env being built
BUILT_WHEEL=""  # set by build_sdist_wheel
TMP_DIR=""      # <env>.tmp being built, removed on failure

say() { printf '[make-envs] %s\n' "$*"; }
die() { say "ERROR: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

# Last non-blank line of $1.
last_line() {
  local line last=""
  while IFS= read -r line; do
    if [[ -n "${line//[[:space:]]/}" ]]; then last=${line}; fi
  done <<<"$1"
  printf '%s' "${last}"
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

on_exit() {
  local rc=$?
  if [[ ${rc} -ne 0 && -n "${TMP_DIR}" && -d "${TMP_DIR}" ]]; then
    rm -rf -- "${TMP_DIR}"
  fi
}
trap on_exit EXIT
trap 'say "ERROR: \"${BASH_COMMAND}\" failed (line ${LINENO})${LOG:+; log: ${LOG}}" >&2' ERR

# Run a command with its output appended to $LOG; on failure show the log tail and exit.
run_logged() {
  printf '+ %s\n' "$*" >>"${LOG}"
  if ! "$@" >>"${LOG}" 2>&1; then
    say "FAILED: $*" >&2
    say "last 40 lines of ${LOG}:" >&2
    tail -n 40 "${LOG}" | sed 's/^/    /' >&2
    exit 1
  fi
}

is_known_env() {
  local e
  for e in "${ALL_ENVS[@]}"; do [[ "$1" == "${e}" ]] && return 0; done
  return 1
}

req_file() { printf '%s/%s.txt' "${REQ_DIR}" "$1"; }

# Print the meaningful lines (requirements, options, "# @" directives; no comments
# or blank lines, so editing a comment rebuilds nothing) of a requirement file,
# followed by those of every file it includes with -r, recursively.
req_closure() {
  local file=$1 dir line inc
  [[ -f "${file}" ]] || die "requirement file not found: ${file}"
  dir=$(dirname -- "${file}")
  printf '### %s\n' "$(basename -- "${file}")"
  while IFS= read -r line || [[ -n "${line}" ]]; do
    line=${line%%[[:space:]]#*}                    # pip's inline comments
    line=${line%"${line##*[![:space:]]}"}         # trailing blanks
    if [[ -z "${line//[[:space:]]/}" ]]; then continue; fi
    if [[ "${line}" =~ ^[[:space:]]*# && ! "${line}" =~ ^#[[:space:]]*@ ]]; then continue; fi
    printf '%s\n' "${line}"
    if [[ "${line}" =~ ^[[:space:]]*(-r|--requirement)[[:space:]=]+([^[:space:]]+) ]]; then
      inc=${BASH_REMATCH[2]}
      [[ "${inc}" == /* ]] || inc="${dir}/${inc}"
      req_closure "${inc}"
    fi
  done <"${file}"
}

# Value of a "# @KEY value" directive in an env's own requirement file.
directive() {
  local env=$1 key=$2
  sed -n "s/^#[[:space:]]*@${key}[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p" "$(req_file "${env}")" | head -n 1
}

env_hash() {
  local env=$1
  {
    printf 'recipe=%s env=%s\n' "${RECIPE_VERSION}" "${env}"
    req_closure "$(req_file "${env}")"
    if [[ -n "$(directive "${env}" sdist)" ]]; then
      printf '%s\n' "${HOROVOD_PATCHES[@]}" "${HOROVOD_BUILD_ENV[@]}"
    fi
  } | sha256sum | cut -c1-16
}

# find_python X.Y [PREFERRED] (scripts/lib/python.sh): $DDLBENCH_PYTHON_<ENV>, python3,
# pythonX.Y, then pyenv's versions (newest patch release first).
# shellcheck source=scripts/lib/python.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib/python.sh"
python_override() {
  local var
  var="DDLBENCH_PYTHON_$(printf '%s' "$1" | tr '[:lower:]' '[:upper:]')"
  printf '%s' "${!var:-}"
}

ensure_build_tools() {
  local -a missing=()
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  command -v make >/dev/null 2>&1 || missing+=(make)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  command -v apt-get >/dev/null 2>&1 || die "missing build tools: ${missing[*]} (and no apt-get)"
  [[ $(id -u) -eq 0 ]] || die "missing build tools: ${missing[*]} (install them, or run as root)"
  say "horovod: apt-get install ${missing[*]}"
  run_logged apt-get update
  run_logged env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Build (or reuse from the wheel cache) the wheel for an "@sdist" pin; sets BUILT_WHEEL.
build_sdist_wheel() {
  local env=$1 pin=$2 py=$3 hash=$4 name version wheel_dir wheel src work patch file expr pattern jobs start
  name=${pin%%==*}
  version=${pin#*==}
  [[ "${name}" == horovod ]] || die "${env}: only horovod can be built from an sdist (got ${pin})"
  wheel_dir="${ENVS_ROOT}/wheels/${name}-${version}-${hash}"
  wheel=""
  if [[ -d "${wheel_dir}" ]]; then
    wheel=$(find "${wheel_dir}" -maxdepth 1 -name "${name}-${version}-*.whl" | head -n 1)
  fi
  if [[ -n "${wheel}" ]]; then
    say "${env}: reusing cached wheel ${wheel}"
    BUILT_WHEEL=${wheel}
    return 0
  fi
  ensure_build_tools
  work="${TMP_DIR}/.sdist-build"
  mkdir -p "${work}"
  say "${env}: downloading ${pin} sdist"
  run_logged "${py}" -m pip download "${PIP_OPTS[@]}" --no-deps --no-binary :all: -d "${work}" "${pin}"
  run_logged tar -xzf "${work}/${name}-${version}.tar.gz" -C "${work}"
  src="${work}/${name}-${version}"
  for patch in "${HOROVOD_PATCHES[@]}"; do
    IFS='|' read -r file expr pattern <<<"${patch}"
    if ! grep -q -- "${pattern}" "${src}/${file}"; then
      die "${env}: patch no longer applies: '${pattern}' not found in ${file}"
    fi
    run_logged sed -i -e "${expr}" "${src}/${file}"
    if [[ "${expr}" == s/* ]] && grep -q -- "${pattern}" "${src}/${file}"; then
      die "${env}: patch '${expr}' left '${pattern}' in ${file}"
    fi
  done
  jobs=${DDLBENCH_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
  say "${env}: compiling ${pin} (Gloo, no MPI, ${jobs} jobs; takes a while)"
  mkdir -p "${wheel_dir}.tmp"
  start=${SECONDS}
  run_logged env "${HOROVOD_BUILD_ENV[@]}" MAKEFLAGS="-j${jobs}" \
    "${py}" -m pip wheel "${PIP_OPTS[@]}" --no-deps --no-build-isolation -v \
    -w "${wheel_dir}.tmp" "${src}"
  say "${env}: compiled in $(fmt_secs $((SECONDS - start)))"
  rm -rf -- "${wheel_dir}"
  mv -- "${wheel_dir}.tmp" "${wheel_dir}"
  rm -rf -- "${work}"
  wheel=$(find "${wheel_dir}" -maxdepth 1 -name "${name}-${version}-*.whl" | head -n 1)
  [[ -n "${wheel}" ]] || die "${env}: no wheel produced in ${wheel_dir}"
  BUILT_WHEEL=${wheel}
}

# After moving a venv, fix the absolute paths that venv/pip wrote into it.
relocate_venv() {
  local from=$1 to=$2 f
  while IFS= read -r f; do
    sed -i "s|${from//./\\.}|${to}|g" "${f}"
  done < <(grep -rlI -F -- "${from}" "${to}/bin" "${to}/pyvenv.cfg" 2>/dev/null || true)
}

build_env() {
  local env=$1 hash=$2 want py final sdist start size
  final="${ENVS_ROOT}/${env}"
  TMP_DIR="${final}.tmp"
  LOG="${ENVS_ROOT}/${env}.log"
  start=${SECONDS}
  : >"${LOG}"
  want=$(directive "${env}" python)
  [[ -n "${want}" ]] || die "${env}: no '# @python X.Y' line in $(req_file "${env}")"
  py=$(find_python "${want}" "$(python_override "${env}")") \
    || die "${env}: no Python ${want} found (tried \$DDLBENCH_PYTHON_${env^^}, python3, python${want}, pyenv)"
  say "${env}: building with Python ${want} (${py}) into ${final} (log: ${LOG})"
  rm -rf -- "${TMP_DIR}"
  run_logged "${py}" -m venv --prompt "${env}" "${TMP_DIR}"
  say "${env}: installing $(basename -- "$(req_file "${env}")") ..."
  run_logged "${TMP_DIR}/bin/python" -m pip install "${PIP_OPTS[@]}" -r "$(req_file "${env}")"
  sdist=$(directive "${env}" sdist)
  if [[ -n "${sdist}" ]]; then
    build_sdist_wheel "${env}" "${sdist}" "${TMP_DIR}/bin/python" "${hash}"
    say "${env}: installing $(basename -- "${BUILT_WHEEL}")"
    run_logged "${TMP_DIR}/bin/python" -m pip install "${PIP_OPTS[@]}" "${BUILT_WHEEL}"
  fi
  run_logged "${TMP_DIR}/bin/python" -m pip check
  "${TMP_DIR}/bin/python" -m pip freeze --all >"${TMP_DIR}/ddlbench-freeze.txt" 2>>"${LOG}"
  printf '%s\n' "${hash}" >"${TMP_DIR}/${STAMP_NAME}"
  if [[ -e "${final}" ]]; then
    mv -- "${final}" "${final}.old.$$"
  fi
  mv -- "${TMP_DIR}" "${final}"
  TMP_DIR=""
  relocate_venv "${final}.tmp" "${final}"
  rm -rf -- "${final}.old.$$"
  if ! check_imports "${env}" >>"${LOG}" 2>&1; then
    say "${env}: built, but the import check failed; last lines of ${LOG}:" >&2
    tail -n 20 "${LOG}" | sed 's/^/    /' >&2
    rm -f -- "${final}/${STAMP_NAME}"
    exit 1
  fi
  size=$(du -sh "${final}" 2>/dev/null | cut -f1 || true)
  say "${env}: done in $(fmt_secs $((SECONDS - start))) (${size})"
}

# Python that imports an env's frameworks and prints their versions.
import_snippet() {
  case $1 in
    torch) cat <<'EOF'
import numpy, sklearn, torch, torch.distributed as dist
assert dist.is_available() and dist.is_gloo_available(), "torch.distributed without gloo"
print(f"torch {torch.__version__}, numpy {numpy.__version__}, scikit-learn {sklearn.__version__}")
EOF
      ;;
    tensorflow) cat <<'EOF'
import numpy, sklearn, tensorflow as tf, keras
print(f"tensorflow {tf.__version__}, keras {keras.__version__}, numpy {numpy.__version__}, "
      f"scikit-learn {sklearn.__version__}")
EOF
      ;;
    horovod) cat <<'EOF'
import horovod, torch, tensorflow as tf
import horovod.torch as hvdt, horovod.tensorflow as hvdtf
for name, m in (("horovod.torch", hvdt), ("horovod.tensorflow", hvdtf)):
    assert m.gloo_built(), name + " built without Gloo"
print(f"horovod {horovod.__version__} (gloo, mpi={hvdt.mpi_built()}), torch {torch.__version__}, "
      f"tensorflow {tf.__version__}")
EOF
      ;;
    mxnet) cat <<'EOF'
import numpy, sklearn, mxnet as mx
assert mx.nd.ones((2, 2)).sum().asscalar() == 4.0
print(f"mxnet {mx.__version__}, numpy {numpy.__version__}, scikit-learn {sklearn.__version__}")
EOF
      ;;
  esac
}

check_imports() {
  local env=$1
  TF_CPP_MIN_LOG_LEVEL=2 PYTHONWARNINGS=ignore \
    "${ENVS_ROOT}/${env}/bin/python" -c "$(import_snippet "${env}")"
}

# --check for one env: prints one line, returns 0 if usable and up to date.
check_env() {
  local env=$1 dir stamp hash out
  dir="${ENVS_ROOT}/${env}"
  if [[ ! -x "${dir}/bin/python" ]]; then
    say "${env}: MISSING (${dir}; run ${SELF} ${env})"
    return 1
  fi
  hash=$(env_hash "${env}")
  stamp=$(cat -- "${dir}/${STAMP_NAME}" 2>/dev/null || true)
  if [[ -z "${stamp}" ]]; then
    say "${env}: INCOMPLETE (no stamp in ${dir}; run ${SELF} ${env})"
    return 1
  fi
  if [[ "${stamp}" != "${hash}" ]]; then
    say "${env}: STALE (stamp ${stamp} != pins ${hash}; run ${SELF} ${env})"
    return 1
  fi
  if ! out=$(check_imports "${env}" 2>&1); then
    say "${env}: IMPORT FAILS: $(last_line "${out}")"
    return 1
  fi
  say "${env}: ok ($(last_line "${out}"))"
}

main() {
  local check=0 hashes=0 arg env hash failed=0 total_start=${SECONDS}
  local -a envs=()
  for arg in "$@"; do
    case ${arg} in
      --check) check=1 ;;
      --hash) hashes=1 ;;
      -h | --help) usage; exit 0 ;;
      -*) usage >&2; die "unknown option: ${arg}" ;;
      *) is_known_env "${arg}" || die "unknown env '${arg}' (known: ${ALL_ENVS[*]})"
         envs+=("${arg}") ;;
    esac
  done
  [[ ${#envs[@]} -gt 0 ]] || envs=("${ALL_ENVS[@]}")

  if [[ ${hashes} -eq 1 ]]; then
    for env in "${envs[@]}"; do
      printf '%s %s\n' "${env}" "$(env_hash "${env}")"
    done
    exit 0
  fi
  if [[ ${check} -eq 1 ]]; then
    for env in "${envs[@]}"; do
      check_env "${env}" || failed=1
    done
    exit "${failed}"
  fi

  mkdir -p "${ENVS_ROOT}"
  ENVS_ROOT=$(cd -- "${ENVS_ROOT}" && pwd)
  for env in "${envs[@]}"; do
    # One make-envs.sh at a time per env; the stamp is checked once the lock is held.
    if command -v flock >/dev/null 2>&1; then
      exec 9>"${ENVS_ROOT}/.${env}.lock"
      flock -n 9 || { say "${env}: waiting for another build of it (${SELF}) ..."; flock 9; }
    fi
    hash=$(env_hash "${env}")
    if [[ -x "${ENVS_ROOT}/${env}/bin/python" ]] \
      && [[ "$(cat -- "${ENVS_ROOT}/${env}/${STAMP_NAME}" 2>/dev/null || true)" == "${hash}" ]] \
      && "${ENVS_ROOT}/${env}/bin/python" -c '' 2>/dev/null; then
      say "${env}: up to date (${hash}), skipping"
      exec 9>&-
      continue
    fi
    build_env "${env}" "${hash}"
    exec 9>&-
  done
  say "all done in $(fmt_secs $((SECONDS - total_start))): ${envs[*]} under ${ENVS_ROOT}"
}

main "$@"
