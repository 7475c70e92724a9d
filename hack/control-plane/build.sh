#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kueue) from the Go module proxy with the local Go toolchain, into a cache directory
# OUTSIDE the work tree:
#
#   ${KUEUE_DOCTOR_CP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/control-plane}/bin-<key>
#
# <key> = sha256 of the pins in versions.env + `go env GOVERSION` (first 12 hex digits).
# Idempotent (exits at once when <bin>/.complete exists), serialised with flock, atomic (built in
# a stage dir, moved into place, then .complete is touched). The last line on stdout is the bin dir;
# progress and per-step timings go to stderr.
#
# Usage:
#   bash hack/control-plane/build.sh                         build if needed, print the bin dir
#   bash hack/control-plane/build.sh --print-bin-dir-if-built print the bin dir and exit 0 if it is
#                                                             complete, else exit 3 (no build)
#   bash hack/control-plane/build.sh --print-bin-dir          print the bin dir (built or not)
#
# KUEUE_DOCTOR_CP_BIN=<dir> points at an existing directory with the binaries (envtest-style):
# nothing is built, the directory is checked and printed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

MODE=build
case "${1:-}" in
  "") ;;
  --print-bin-dir-if-built) MODE=if-built ;;
  --print-bin-dir) MODE=print ;;
  -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
  *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

REQUIRED_BINS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kueue)

log() { printf '[build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

check_bin_dir() {  # $1 = dir; prints what is missing, returns 1 if anything is
  local d="$1" missing=()
  for b in "${REQUIRED_BINS[@]}"; do [[ -x "$d/$b" ]] || missing+=("$b"); done
  compgen -G "$d/kueue-crds/*.yaml" >/dev/null || missing+=("kueue-crds/*.yaml")
  [[ -f "$d/kueue-webhook/manifests.yaml" ]] || missing+=("kueue-webhook/manifests.yaml")
  if ((${#missing[@]})); then echo "missing in $d: ${missing[*]}" >&2; return 1; fi
}

if [[ -n "${KUEUE_DOCTOR_CP_BIN:-}" ]]; then
  if ! check_bin_dir "$KUEUE_DOCTOR_CP_BIN"; then
    echo "build.sh: KUEUE_DOCTOR_CP_BIN=$KUEUE_DOCTOR_CP_BIN does not hold a complete set of binaries" >&2
    exit 3
  fi
  echo "$KUEUE_DOCTOR_CP_BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "build.sh: 'go' not found on PATH; install Go >= 1.26 (the pins need it)" >&2
  exit 2
fi

export GOTOOLCHAIN=local            # never switch Go silently; fail loudly instead
export CGO_ENABLED=0                # static binaries, like the upstream release builds
export GOWORK=off
export GOFLAGS="-trimpath -buildvcs=false"
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"

GOVERSION="$(go env GOVERSION)"
CACHE="${KUEUE_DOCTOR_CP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/control-plane}"
KEY="$(printf '%s\n' "$K8S_VERSION" "$K8S_STAGING_VERSION" "$ETCD_VERSION" "$KUEUE_VERSION" \
        "$CP_RECIPE_REV" "$GOVERSION" | sha256sum | cut -c1-12)"
BIN="$CACHE/bin-$KEY"

case "$MODE" in
  print) echo "$BIN"; exit 0 ;;
  if-built)
    if [[ -f "$BIN/.complete" ]]; then echo "$BIN"; exit 0; fi
    echo "build.sh: control-plane binaries not built yet (expected $BIN/.complete)" >&2
    exit 3 ;;
esac

if [[ -f "$BIN/.complete" ]]; then
  log "already built: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.lock; waiting for it"
  flock 9
fi
if [[ -f "$BIN/.complete" ]]; then   # built by the run we waited for
  log "already built: $BIN"
  echo "$BIN"
  exit 0
fi

# We hold the lock: any stage dir left here is from an interrupted build.
rm -rf "$CACHE"/stage.*
STAGE="$(mktemp -d "$CACHE/stage.XXXXXX")"
cleanup() { rm -rf "$STAGE"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
OUT="$STAGE/out"
mkdir -p "$OUT" "$STAGE/src"
log "building into $STAGE (key $KEY: k8s $K8S_VERSION, etcd $ETCD_VERSION, kueue $KUEUE_VERSION, $GOVERSION)"
T_ALL=$SECONDS

step() {  # step <name> <function>
  local name="$1" t0=$SECONDS
  log "step $name: start"
  "$2"
  log "step $name: done in $((SECONDS - t0))s"
  printf '%s %ss\n' "$name" "$((SECONDS - t0))" >>"$OUT/build-times.txt"
}

# ---- etcd: a throwaway module that depends on go.etcd.io/etcd/server/v3 (its own go.mod has
# replace directives, so `go install ...@version` is refused).
build_etcd() {
  local w="$STAGE/src/etcd"
  mkdir -p "$w" && cd "$w"
  go mod init kueue-doctor.local/etcdbin >&2
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
}

# ---- Kubernetes: a throwaway module requiring k8s.io/kubernetes and replacing every staging
# module (placeholder v0.0.0 in k8s.io/kubernetes' go.mod) by its published version. The list is
# generated from the go.mod the proxy serves, so a new staging repo can never be missed.
K8S_MINOR="$(echo "$K8S_VERSION" | cut -d. -f2)"
K8S_LDFLAGS="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  K8S_LDFLAGS="$K8S_LDFLAGS -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$K8S_MINOR"
  K8S_LDFLAGS="$K8S_LDFLAGS -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

k8s_module() {
  local w="$STAGE/src/k8s"
  [[ -f "$w/go.mod" ]] && return 0
  mkdir -p "$w" && cd "$w"
  go mod init kueue-doctor.local/k8sbins >&2
  local kgomod
  kgomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  python3 - "$kgomod" "$K8S_STAGING_VERSION" >>go.mod <<'PY'
import re, sys
text = open(sys.argv[1]).read()
mods = sorted(set(re.findall(r'^\s*(k8s\.io/[A-Za-z0-9._-]+)\s*=>\s*\./staging/', text, re.M)))
if not mods:
    sys.exit("no staging replaces found in " + sys.argv[1])
print("replace (")
for m in mods:
    print(f"\t{m} => {m} {sys.argv[2]}")
print(")")
PY
  go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION"
}
build_k8s_modules() { k8s_module; cd "$STAGE/src/k8s" && go mod download; }
build_apiserver() {
  cd "$STAGE/src/k8s"
  go build -ldflags "$K8S_LDFLAGS" -o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
}
build_kcm() {
  cd "$STAGE/src/k8s"
  go build -ldflags "$K8S_LDFLAGS" -o "$OUT/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
}
build_scheduler() {
  cd "$STAGE/src/k8s"
  go build -ldflags "$K8S_LDFLAGS" -o "$OUT/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
}
build_kubectl() {
  cd "$STAGE/src/k8s"
  go build -ldflags "$K8S_LDFLAGS" -o "$OUT/kubectl" k8s.io/kubernetes/cmd/kubectl
}

# ---- Kueue: `go install` in module mode (its go.mod has no replace/exclude), plus its CRDs and
# webhook manifest from the very same module directory.
build_kueue() {
  cd "$STAGE/src"
  GOBIN="$OUT" go install -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION \
    -X sigs.k8s.io/kueue/pkg/version.GitCommit=none -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01" \
    "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
  local dir
  dir="$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" \
         | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$OUT/kueue-crds" "$OUT/kueue-webhook"
  cp "$dir"/config/components/crd/bases/*.yaml "$OUT/kueue-crds/"
  cp "$dir"/config/components/webhook/manifests.yaml "$OUT/kueue-webhook/manifests.yaml"
  chmod -R u+w "$OUT/kueue-crds" "$OUT/kueue-webhook"
}

step etcd build_etcd
step k8s-modules build_k8s_modules
step kube-apiserver build_apiserver
step kueue build_kueue
step kube-scheduler build_scheduler
step kube-controller-manager build_kcm
step kubectl build_kubectl

cat >"$OUT/VERSIONS" <<EOF
key=$KEY
go=$GOVERSION
k8s=$K8S_VERSION (staging $K8S_STAGING_VERSION)
etcd=$ETCD_VERSION
kueue=$KUEUE_VERSION
recipe=$CP_RECIPE_REV
EOF
check_bin_dir "$OUT"

rm -rf "$BIN"              # a leftover without .complete is garbage from an interrupted move
mv "$OUT" "$BIN"
touch "$BIN/.complete"
log "all done in $((SECONDS - T_ALL))s: $BIN ($(du -sh "$BIN" | cut -f1))"
echo "$BIN"
