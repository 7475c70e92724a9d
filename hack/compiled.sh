#!/usr/bin/env bash
# Build kueue-doctor compiled by mypyc (setup.py, KUEUE_DOCTOR_COMPILE=1) from a copy of this checkout, cached
# OUTSIDE the work tree by a key of its source, and unpack the wheel next to it:
#
#   ${KUEUE_DOCTOR_COMPILED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}/compiled-<key>/
#       kueue_doctor-*.whl   the wheel the image installs (hack/image/build.sh)
#       site/                the wheel unpacked: put it first on sys.path to run the compiled package
#
# <key> = sha256 of setup.py, pyproject.toml and operator/ (first 12 hex digits). Needs mypy (the `test`
# extra) and a C compiler; about 3 minutes on 2 cores, then instant. Serialised with flock, atomic.
#
# Usage:
#   bash hack/compiled.sh                  build if needed, print the site/ directory
#   bash hack/compiled.sh --wheel          the same, print the wheel's path
#   bash hack/compiled.sh --print-if-built print the site/ directory if built for this source, else exit 3
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHAT=site
case "${1:-}" in
  "") ;;
  --wheel) WHAT=wheel ;;
  --print-if-built) WHAT=if-built ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  *) echo "hack/compiled.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
log() { printf '[compiled.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

source_files() {
  (cd "$ROOT" && { echo setup.py; echo pyproject.toml; echo README.md;
                   find operator -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*'; } \
                 | LC_ALL=C sort)
}
KEY="$( (cd "$ROOT" && source_files | xargs -d '\n' sha256sum) | sha256sum | cut -c1-12)"
CACHE="${KUEUE_DOCTOR_COMPILED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}"
DIR="$CACHE/compiled-$KEY"

answer() {
  if [[ "$WHAT" == wheel ]]; then ls "$DIR"/kueue_doctor-*.whl; else echo "$DIR/site"; fi
}
if [[ -f "$DIR/.complete" ]]; then answer; exit 0; fi
if [[ "$WHAT" == if-built ]]; then
  echo "hack/compiled.sh: not built for this source (expected $DIR/.complete); run: bash hack/compiled.sh" >&2
  exit 3
fi

python3 -c 'import mypyc' 2>/dev/null || {
  echo "hack/compiled.sh: mypyc is missing; it comes with mypy: python3 -m pip install -e '.[test]'" >&2; exit 2; }
command -v "${CC:-cc}" >/dev/null || {
  echo "hack/compiled.sh: no C compiler (${CC:-cc}); install one: apt-get install -y gcc" >&2; exit 2; }

mkdir -p "$CACHE"
exec 9>"$CACHE/.compiled.lock"
flock 9
if [[ -f "$DIR/.complete" ]]; then answer; exit 0; fi   # built by the run we waited for
STAGE="$(mktemp -d "$CACHE/compiled-stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/src" "$STAGE/out"
(cd "$ROOT" && source_files | xargs -d '\n' cp --parents -t "$STAGE/src")
T0=$SECONDS
log "compiling with mypyc (key $KEY); about 3 minutes"
(cd "$STAGE/src" && KUEUE_DOCTOR_COMPILE=1 python3 -m pip wheel --quiet --disable-pip-version-check \
   --no-build-isolation --no-deps --wheel-dir "$STAGE/out" . >&2)
python3 -m zipfile -e "$STAGE"/out/kueue_doctor-*.whl "$STAGE/out/site"
rm -rf "$STAGE/src"
# keep the two newest builds of other sources (a branch switch back is instant), drop the rest
{ ls -dt "$CACHE"/compiled-*/ 2>/dev/null | grep -v compiled-stage || true; } | tail -n +3 | xargs -r rm -rf
mv "$STAGE/out" "$DIR"
touch "$DIR/.complete"
log "built in $((SECONDS - T0))s: $DIR"
answer
