#!/usr/bin/env bash
# make-image.sh: build the minimal Charliecloud image the container tests run in.
#
# Usage: scripts/make-image.sh [--check]
#   --check   build nothing; exit 0 only if the image is built and up to date.
#
# The image is Debian bookworm's minbase plus python3 (3.11, the same minor version as the
# torch environment of scripts/make-envs.sh), made with debootstrap from Debian packages only
# and converted to a ch-run directory image with ch-convert. It holds no framework: a
# container profile bind-mounts the torch environment at /mnt/0, whose site-packages a .pth
# file puts on the image's Python path (docs/cluster-profiles.md, Containers). The downloaded packages and the image are
# cached; an image whose stamp matches this recipe is not rebuilt.
#
# Environment:
#   DDLBENCH_IMAGES          where the image and the package cache live
#                            (default ~/.cache/ddlbench/images)
#   DDLBENCH_DEBIAN_MIRROR   the Debian mirror (default: the one this machine's apt uses for
#                            the suite, read from /etc/apt/sources.list{,.d/})
set -euo pipefail

readonly IMAGES=${DDLBENCH_IMAGES:-${HOME}/.cache/ddlbench/images}
readonly NAME=debian-python3
readonly SUITE=bookworm
MIRROR=${DDLBENCH_DEBIAN_MIRROR:-}
readonly RECIPE="recipe=2 suite=${SUITE} variant=minbase include=python3 pth=/mnt/0"
readonly STAMP_NAME=".ddlbench-stamp"
readonly TOOLS=(debootstrap ch-run ch-convert)
readonly PACKAGES=(debootstrap charliecloud-runtime charliecloud-builders)

TMP_DIR=""

say() { printf '[make-image] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# The mirror apt uses for SUITE on this machine: deb822 .sources files first, then one-line
# sources; the first URI listed for the suite itself (not -security or -updates).
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r "${f}" ]] || continue
    awk -v suite="${SUITE}" '
      BEGIN { RS = ""; FS = "\n" }
      {
        uri = ""; ok = 0; deb = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Types:/ && $i ~ /[ \t]deb([ \t]|$)/) deb = 1
          if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uri = u[2] }
          if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) ok = 1 }
        }
        if (deb && ok && uri != "") { print uri; exit }
      }' "${f}"
  done | head -n 1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r "${f}" ]] || continue
    awk -v suite="${SUITE}" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) while ($i !~ /\]$/) i++; if ($2 ~ /^\[/) i++; if ($(i + 1) == suite) { print $i; exit } }' "${f}"
  done | head -n 1
}

stamp() { printf '%s\n' "${RECIPE}" | sha256sum | cut -c1-16; }

install_tools() {
  local tool missing=0
  for tool in "${TOOLS[@]}"; do
    command -v "${tool}" >/dev/null 2>&1 || PATH="${PATH}:/usr/sbin:/sbin" command -v "${tool}" \
      >/dev/null 2>&1 || missing=1
  done
  [[ ${missing} -eq 0 ]] && return 0
  [[ ${EUID} -eq 0 ]] || die "needs ${PACKAGES[*]} (apt-get install them as root)"
  say "installing ${PACKAGES[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${PACKAGES[@]}" >&2
}

build() {
  local want=$1 tmp cache="${IMAGES}/debs"
  mkdir -p -- "${IMAGES}" "${cache}"
  tmp=$(mktemp -d "${IMAGES}/.${NAME}.XXXXXX")
  TMP_DIR=${tmp}
  trap 'rm -rf -- "${TMP_DIR}"' EXIT
  [[ -n "${MIRROR}" ]] || MIRROR=$(apt_mirror | head -n 1)
  [[ -n "${MIRROR}" ]] || die "no apt source for ${SUITE} on this machine: set DDLBENCH_DEBIAN_MIRROR"
  say "debootstrap ${SUITE} (minbase + python3) from ${MIRROR}"
  PATH="${PATH}:/usr/sbin:/sbin" debootstrap --variant=minbase --include=python3 \
    --cache-dir="${cache}" "${SUITE}" "${tmp}/rootfs" "${MIRROR}" >"${tmp}/debootstrap.log" 2>&1 \
    || { tail -20 "${tmp}/debootstrap.log" >&2; die "debootstrap failed"; }
  # a framework environment bound at /mnt/0 is on the image's Python path
  printf '/mnt/0/lib/python3.11/site-packages\n' \
    >"${tmp}/rootfs/usr/lib/python3/dist-packages/ddlbench-mnt0.pth"
  say "ch-convert into a directory image"
  ch-convert -i dir -o tar "${tmp}/rootfs" "${tmp}/image.tar.gz" >&2
  ch-convert -i tar -o dir "${tmp}/image.tar.gz" "${tmp}/image" >&2
  printf '%s\n' "${want}" >"${tmp}/image/${STAMP_NAME}"
  rm -rf -- "${IMAGES:?}/${NAME}"
  mv -- "${tmp}/image" "${IMAGES}/${NAME}"
  say "built ${IMAGES}/${NAME} ($(du -sh -- "${IMAGES}/${NAME}" | cut -f1))"
}

main() {
  local check=0 want have
  case ${1:-} in
    --check) check=1 ;;
    "") ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
  want=$(stamp)
  have=$(cat -- "${IMAGES}/${NAME}/${STAMP_NAME}" 2>/dev/null || true)
  if [[ "${have}" == "${want}" ]]; then
    say "${IMAGES}/${NAME}: up to date (${want})"
    exit 0
  fi
  [[ ${check} -eq 0 ]] || { say "${IMAGES}/${NAME}: missing or stale"; exit 1; }
  install_tools
  build "${want}"
}

main "$@"
