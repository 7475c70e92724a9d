#!/usr/bin/env bash
# Build krew (pin in version.env) from the Go module proxy with the local Go toolchain: krew itself (installed as
# the kubectl plugin `kubectl-krew`) and krew's manifest validator `validate-krew-manifest`, into a cache directory
# OUTSIDE the work tree:
#
#   ${KUEUE_DOCTOR_KREW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}/krew-<key>/{kubectl-krew,validate-krew-manifest}
#
# <key> = sha256 of the lines of version.env + `go env GOVERSION` (first 12 hex digits). Idempotent (exits at
# once when krew-<key>/.complete exists), serialised with flock, atomic (built in a stage dir, moved into place,
# then .complete is touched). The last line on stdout is the directory; progress goes to stderr. About 2 minutes
# on 2 cores with a cold module cache.
#
# Usage:
#   bash hack/krew/build.sh                  build if needed, print the directory
#   bash hack/krew/build.sh --print-if-built print the directory and exit 0 if it is built, else exit 3
set -euo pipefail
[[ $# == 0 || "$1" == --print-if-built ]] || { sed -n '2,15p' "$0" >&2; exit 2; }
# shellcheck source=version.env
source "$(dirname "${BASH_SOURCE[0]}")/version.env"

log() { printf '[krew/build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
built() { [[ -f "$DIR/.complete" && -x "$DIR/kubectl-krew" && -x "$DIR/validate-krew-manifest" ]]; }

CACHE="${KUEUE_DOCTOR_KREW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}"
if ! command -v go >/dev/null 2>&1; then
  echo "hack/krew/build.sh: 'go' not found on PATH; install Go (the krew pin builds with any Go >= 1.16)" >&2
  exit 2
fi
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath -buildvcs=false"
GOVERSION="$(go env GOVERSION)"
KEY="$(printf '%s\n' "$KREW_VERSION" "$KREW_RECIPE_REV" "$GOVERSION" | sha256sum | cut -c1-12)"
DIR="$CACHE/krew-$KEY"

if built; then echo "$DIR"; exit 0; fi
if [[ $# == 1 ]]; then  # --print-if-built
  echo "hack/krew/build.sh: krew not built yet (expected $DIR/.complete); run: bash hack/krew/build.sh" >&2
  exit 3
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.krew.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.krew.lock; waiting for it"
  flock 9
fi
if built; then echo "$DIR"; exit 0; fi   # built by the run we waited for

rm -rf "$CACHE"/krew-stage.*   # we hold the lock: a stage dir left here is from an interrupted build
STAGE="$(mktemp -d "$CACHE/krew-stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
trap 'exit 130' INT TERM HUP
OUT="$STAGE/out"
mkdir -p "$OUT"
log "building krew $KREW_VERSION and validate-krew-manifest into $STAGE (key $KEY, $GOVERSION)"
T0=$SECONDS
# from the stage dir, so no go.mod of a parent directory is picked up
(cd "$STAGE" && GOBIN="$OUT" go install "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" \
  "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION")
mv "$OUT/krew" "$OUT/kubectl-krew"   # kubectl finds it as `kubectl krew`
KREW_ROOT="$STAGE/root" "$OUT/kubectl-krew" version >/dev/null 2>&1 || { echo "hack/krew/build.sh: the built krew does not run" >&2; exit 1; }
printf 'key=%s\ngo=%s\nkrew=%s\nbuild_seconds=%s\n' "$KEY" "$GOVERSION" "$KREW_VERSION" $((SECONDS - T0)) \
  >"$OUT/VERSIONS"
rm -rf "$DIR"   # a leftover without .complete is garbage from an interrupted move
mv "$OUT" "$DIR"
touch "$DIR/.complete"
log "done in $((SECONDS - T0))s: $DIR"
echo "$DIR"
