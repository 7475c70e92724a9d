#!/usr/bin/env bash
# Build Helm v3 (pin in version.env) from the Go module proxy with the local Go toolchain, into a
# cache directory OUTSIDE the work tree, separate from the control plane's:
#
#   ${KUEUE_DOCTOR_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}/helm-<key>/helm
#
# <key> = sha256 of the lines of version.env + `go env GOVERSION` (first 12 hex digits).
# Idempotent (exits at once when helm-<key>/.complete exists), serialised with flock, atomic (built
# in a stage dir, moved into place, then .complete is touched). The last line on stdout is the path
# of the helm binary; progress goes to stderr.
#
# A plain `go install` leaves Helm's built-in Kubernetes version at 1.20 (Helm's Makefile injects
# it); this script injects the control plane's version, so `helm template`/`helm lint` without a
# cluster see .Capabilities.KubeVersion v1.36.0.
#
# Usage:
#   bash hack/helm/build.sh                  build if needed, print the binary path
#   bash hack/helm/build.sh --print-if-built print the binary path and exit 0 if it is built,
#                                            else exit 3 (no build)
#   bash hack/helm/build.sh --print-path     print the binary path (built or not)
#
# KUEUE_DOCTOR_HELM=<path> points at an existing helm v3 binary: nothing is built, it is checked
# and printed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=version.env
source "$HERE/version.env"

MODE=build
case "${1:-}" in
  "") ;;
  --print-if-built) MODE=if-built ;;
  --print-path) MODE=print ;;
  -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
  *) echo "hack/helm/build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

log() { printf '[helm/build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [[ -n "${KUEUE_DOCTOR_HELM:-}" ]]; then
  if [[ ! -x "$KUEUE_DOCTOR_HELM" ]] || ! "$KUEUE_DOCTOR_HELM" version --short 2>/dev/null | grep -q '^v3\.'; then
    echo "hack/helm/build.sh: KUEUE_DOCTOR_HELM=$KUEUE_DOCTOR_HELM is not an executable helm v3" >&2
    exit 3
  fi
  echo "$KUEUE_DOCTOR_HELM"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "hack/helm/build.sh: 'go' not found on PATH; install Go >= 1.26 (the Helm pin needs it)" >&2
  exit 2
fi

export GOTOOLCHAIN=local            # never switch Go silently; fail loudly instead
export CGO_ENABLED=0                # static binary, like the upstream release builds
export GOWORK=off
export GOFLAGS="-trimpath -buildvcs=false"

GOVERSION="$(go env GOVERSION)"
CACHE="${KUEUE_DOCTOR_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}"
KEY="$(printf '%s\n' "$HELM_VERSION" "$HELM_K8S_MAJOR" "$HELM_K8S_MINOR" "$HELM_RECIPE_REV" \
        "$GOVERSION" | sha256sum | cut -c1-12)"
DIR="$CACHE/helm-$KEY"
HELM="$DIR/helm"

case "$MODE" in
  print) echo "$HELM"; exit 0 ;;
  if-built)
    if [[ -f "$DIR/.complete" && -x "$HELM" ]]; then echo "$HELM"; exit 0; fi
    echo "hack/helm/build.sh: helm not built yet (expected $DIR/.complete); run: bash hack/helm/build.sh" >&2
    exit 3 ;;
esac

if [[ -f "$DIR/.complete" && -x "$HELM" ]]; then
  log "already built: $HELM"
  echo "$HELM"
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.helm.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.helm.lock; waiting for it"
  flock 9
fi
if [[ -f "$DIR/.complete" && -x "$HELM" ]]; then   # built by the run we waited for
  log "already built: $HELM"
  echo "$HELM"
  exit 0
fi

# We hold the lock: any helm stage dir left here is from an interrupted build.
rm -rf "$CACHE"/helm-stage.*
STAGE="$(mktemp -d "$CACHE/helm-stage.XXXXXX")"
cleanup() { rm -rf "$STAGE"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
OUT="$STAGE/out"
mkdir -p "$OUT"
log "building helm $HELM_VERSION into $STAGE (key $KEY, $GOVERSION)"
T0=$SECONDS

LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
LDFLAGS="$LDFLAGS -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for p in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  LDFLAGS="$LDFLAGS -X $p.k8sVersionMajor=$HELM_K8S_MAJOR -X $p.k8sVersionMinor=$HELM_K8S_MINOR"
done
# Run from the stage dir so no go.mod (the repo has none, but a parent might) is picked up.
(cd "$STAGE" && GOBIN="$OUT" go install -ldflags "$LDFLAGS" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")

got="$("$OUT/helm" version --template '{{.Version}}')"
if [[ "$got" != "$HELM_VERSION" ]]; then
  echo "hack/helm/build.sh: built helm reports version '$got', expected '$HELM_VERSION'" >&2
  exit 1
fi
cat >"$OUT/VERSIONS" <<EOT
key=$KEY
go=$GOVERSION
helm=$HELM_VERSION
kubeVersion=v$HELM_K8S_MAJOR.$HELM_K8S_MINOR
recipe=$HELM_RECIPE_REV
build_seconds=$((SECONDS - T0))
EOT

rm -rf "$DIR"              # a leftover without .complete is garbage from an interrupted move
mv "$OUT" "$DIR"
touch "$DIR/.complete"
log "done in $((SECONDS - T0))s: $HELM"
echo "$HELM"
