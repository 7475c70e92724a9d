#!/usr/bin/env bash
# Locates promtool and prometheus for the alert, dashboard and Prometheus end-to-end tests; installs them
# when missing. Prints the directory that holds both binaries on its last line.
#
# Source: Debian's package `prometheus` (2.42 on bookworm), fetched with `apt-get download` and unpacked
# with `dpkg-deb -x` into a cache directory. Nothing of the package's maintainer scripts runs: no
# `prometheus` user, no systemd unit or init script, no server left listening on :9090, no /etc change.
#
# Usage: hack/prometheus.sh [ensure|print|check]
#   ensure (default)  find the binaries, or download and unpack them (idempotent; seconds when cached)
#   print             print the cache directory the binaries are (or would be) unpacked to
#   check             find them, exit 1 when they are missing (never downloads)
#
# Where it looks, in order:
#   KUEUE_DOCTOR_PROM_BIN=<dir>   a directory with promtool and prometheus (any Prometheus 2.x or 3.x)
#   PATH                          promtool and prometheus both on PATH (e.g. `apt-get install prometheus`)
#   ${KUEUE_DOCTOR_PROM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/prometheus}/usr/bin
# tests/prom.py looks in the same places.
set -euo pipefail

MODE="${1:-ensure}"
CACHE="${KUEUE_DOCTOR_PROM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/prometheus}"
log() { echo "prometheus.sh: $*" >&2; }

usable() {  # $1 = dir
  [[ -x "$1/promtool" && -x "$1/prometheus" ]] && "$1/promtool" --version >/dev/null 2>&1 \
    && "$1/prometheus" --version >/dev/null 2>&1
}

find_bins() {
  if [[ -n "${KUEUE_DOCTOR_PROM_BIN:-}" ]]; then
    if usable "$KUEUE_DOCTOR_PROM_BIN"; then echo "$KUEUE_DOCTOR_PROM_BIN"; return 0; fi
    log "KUEUE_DOCTOR_PROM_BIN=$KUEUE_DOCTOR_PROM_BIN lacks a working promtool and prometheus"
    return 2
  fi
  local p
  if p="$(command -v promtool 2>/dev/null)" && usable "$(dirname "$p")"; then dirname "$p"; return 0; fi
  if usable "$CACHE/usr/bin"; then echo "$CACHE/usr/bin"; return 0; fi
  return 1
}

case "$MODE" in
  print) echo "$CACHE/usr/bin"; exit 0 ;;
  check)
    if dir="$(find_bins)"; then echo "$dir"; exit 0; fi
    log "promtool/prometheus not found; run: bash hack/prometheus.sh"
    exit 1 ;;
  ensure) ;;
  *) log "unknown mode $MODE (ensure|print|check)"; exit 2 ;;
esac

rc=0
dir="$(find_bins)" || rc=$?
if [[ $rc == 0 ]]; then echo "$dir"; exit 0; fi
if [[ $rc == 2 ]]; then exit 1; fi

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
  log "needs apt-get and dpkg-deb (Debian), or set KUEUE_DOCTOR_PROM_BIN to a directory with both binaries"
  exit 1
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
download() { (cd "$work" && apt-get download -q prometheus >"$work/apt.log" 2>&1); }
if ! download; then
  log "apt-get download failed, refreshing the package lists once"
  apt-get update -q >"$work/update.log" 2>&1 || { cat "$work/update.log" >&2; exit 1; }
  download || { cat "$work/apt.log" >&2; exit 1; }
fi
deb="$(ls "$work"/prometheus_*.deb)"
log "unpacking $(basename "$deb") into $CACHE"
mkdir -p "$(dirname "$CACHE")"
rm -rf "$CACHE.tmp"
dpkg-deb -x "$deb" "$CACHE.tmp"
usable "$CACHE.tmp/usr/bin" || { log "the unpacked package has no working promtool/prometheus"; exit 1; }
rm -rf "$CACHE"
mv "$CACHE.tmp" "$CACHE"
echo "$CACHE/usr/bin"
