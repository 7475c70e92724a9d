#!/usr/bin/env bash
# Build kube-state-metrics (k8s.io/kube-state-metrics/v2, pin in version.env) from the Go module proxy with the
# local Go toolchain, for bench/operator_scale.py --peer ksm only (CI does not build it: hack/test.sh has no step
# for it), into a cache directory OUTSIDE the work tree:
#
#   ${KUEUE_DOCTOR_KSM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}/ksm-<key>/kube-state-metrics
#
# <key> = sha256 of KSM_VERSION, KSM_RECIPE_REV and `go env GOVERSION` (first 12 hex digits). Built as the `tool`
# of a throwaway module (`go get -tool`; KSM's go.mod has no replace, so the build uses exactly its own
# requirements), like hack/control-plane/controllers.sh builds the owner controllers. Idempotent (exits at once
# when ksm-<key>/.complete exists), serialised with flock, atomic (stage dir, mv, then .complete). The last line
# on stdout is the directory; progress and the build time go to stderr (and to <dir>/build-times.txt).
#
# Usage:
#   bash hack/ksm/build.sh                  build if needed, print the directory
#   bash hack/ksm/build.sh --print-if-built print the directory and exit 0 if it is built, else exit 3
set -euo pipefail
[[ $# == 0 || "$1" == --print-if-built ]] || { sed -n '2,17p' "$0" >&2; exit 2; }
# shellcheck source=version.env
source "$(dirname "${BASH_SOURCE[0]}")/version.env"

log() { printf '[ksm/build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
built() { [[ -f "$DIR/.complete" && -x "$DIR/kube-state-metrics" ]]; }

if ! command -v go >/dev/null 2>&1; then
  echo "hack/ksm/build.sh: 'go' not found on PATH; install Go >= 1.26 (kube-state-metrics $KSM_VERSION needs it)" >&2
  exit 2
fi
export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS="-trimpath -buildvcs=false"
GOVERSION="$(go env GOVERSION)"
CACHE="${KUEUE_DOCTOR_KSM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}"
KEY="$(printf '%s\n' "$KSM_VERSION" "$KSM_RECIPE_REV" "$GOVERSION" | sha256sum | cut -c1-12)"
DIR="$CACHE/ksm-$KEY"

if built; then echo "$DIR"; exit 0; fi
if [[ $# == 1 ]]; then  # --print-if-built
  echo "hack/ksm/build.sh: kube-state-metrics not built yet (expected $DIR/.complete); run: bash hack/ksm/build.sh" >&2
  exit 3
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.ksm.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.ksm.lock; waiting for it"
  flock 9
fi
if built; then echo "$DIR"; exit 0; fi   # built by the run we waited for

rm -rf "$CACHE"/ksm-stage.*   # we hold the lock: a stage dir left here is from an interrupted build
STAGE="$(mktemp -d "$CACHE/ksm-stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
trap 'exit 130' INT TERM HUP
OUT="$STAGE/out"
mkdir -p "$OUT" "$STAGE/src"
log "building kube-state-metrics $KSM_VERSION into $STAGE (key $KEY, $GOVERSION)"
T0=$SECONDS
(
  cd "$STAGE/src"
  go mod init kueue-doctor.local/ksm >&2
  go get -tool "k8s.io/kube-state-metrics/v2@$KSM_VERSION" >&2
  # the same version stamps as upstream's Makefile (github.com/prometheus/common/version, app.ClientGoVersion)
  CLIENT_GO="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
  nice -n 10 go build -ldflags "-s -w -X github.com/prometheus/common/version.Version=${KSM_VERSION#v} \
    -X github.com/prometheus/common/version.Revision=module-$KSM_VERSION \
    -X k8s.io/kube-state-metrics/v2/pkg/app.ClientGoVersion=$CLIENT_GO" \
    -o "$OUT/kube-state-metrics" k8s.io/kube-state-metrics/v2
)
"$OUT/kube-state-metrics" version >&2 || { echo "hack/ksm/build.sh: the built kube-state-metrics does not run" >&2; exit 1; }
printf 'kube-state-metrics %ss\n' "$((SECONDS - T0))" >"$OUT/build-times.txt"
printf 'key=%s\ngo=%s\nkube-state-metrics=%s\nrecipe=%s\n' "$KEY" "$GOVERSION" "$KSM_VERSION" "$KSM_RECIPE_REV" \
  >"$OUT/VERSIONS"
rm -rf "$DIR"
mv "$OUT" "$DIR"
touch "$DIR/.complete"
log "built in $((SECONDS - T0))s: $DIR ($(du -sh "$DIR" | cut -f1))"
echo "$DIR"
