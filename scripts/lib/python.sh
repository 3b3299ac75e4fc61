# shellcheck shell=bash
# python.sh: shell functions shared by ddlbench's scripts (sourced, not run).

# find_python X.Y [PREFERRED]: print the sys.executable of a Python X.Y interpreter.
# Tried in order: PREFERRED (an interpreter a variable named), python3, pythonX.Y, then
# pyenv's X.Y.* versions, newest patch release first. Returns 1 when none is X.Y.
find_python() {
  local want=$1 preferred=${2:-} cand root exe
  local -a cands=()
  [[ -n "${preferred}" ]] && cands+=("${preferred}")
  cands+=(python3 "python${want}")
  if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root 2>/dev/null || true)
  fi
  root=${root:-${PYENV_ROOT:-${HOME}/.pyenv}}
  if [[ -d "${root}/versions" ]]; then
    while IFS= read -r cand; do
      cands+=("${cand}")
    done < <(find "${root}/versions" -maxdepth 3 -path "*/versions/${want}.*/bin/python${want}" \
               2>/dev/null | sort -t/ -V -r)
  fi
  for cand in "${cands[@]}"; do
    command -v "${cand}" >/dev/null 2>&1 || continue
    exe=$("${cand}" -c "import sys
if '%d.%d' % sys.version_info[:2] == '${want}': print(sys.executable)" 2>/dev/null) || continue
    if [[ -n "${exe}" ]]; then
      printf '%s\n' "${exe}"
      return 0
    fi
  done
  return 1
}

# pytest_status RC TAG: pytest's exit code, except that 5 (no test collected) is a failure.
pytest_status() {
  if [[ $1 -eq 5 ]]; then
    echo "[$2] pytest collected no tests: that is a failure" >&2
    echo 1
  else
    echo "$1"
  fi
}
