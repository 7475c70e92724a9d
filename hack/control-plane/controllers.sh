#!/usr/bin/env bash
# Build the owner controllers the e2e family tests run next to Kueue (issue 9): the JobSet
# controller (sigs.k8s.io/jobset), KubeRay's ray-operator (github.com/ray-project/kuberay/ray-operator),
# Kubeflow Trainer v2's manager (github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager), CodeFlare's
# AppWrapper controller (github.com/project-codeflare/appwrapper/cmd) and the LeaderWorkerSet controller manager
# (sigs.k8s.io/lws/cmd), each as the `tool` of a throwaway module
# (`go get -tool module@version`; their go.mod have no replace, so the build uses exactly their own requirements). `go install module@version` is refused here: it asks the
# proxy for the module's version list (deprecation check), which the machine's proxy does not serve for
# these modules. Plus their CRDs and (JobSet, Trainer, LWS) webhook manifests from the very same module directories
# (the AppWrapper controller runs with its webhooks off: Kueue's own appwrapper webhook suspends and queues).
# Cache OUTSIDE the work tree, separate from the control plane's (so build.sh's bin-<key> is never
# invalidated by these pins):
#
#   ${KUEUE_DOCTOR_CTRL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/controllers}/bin-<key>
#
# <key> = sha256 of JOBSET_VERSION, KUBERAY_VERSION, TRAINER_VERSION, APPWRAPPER_VERSION, LWS_VERSION, CTRL_RECIPE_REV
# (versions.env) and `go env GOVERSION`.
# Idempotent (exits at once when <bin>/.complete exists), serialised with flock, atomic (stage dir, mv,
# then .complete). The last line on stdout is the bin dir; progress and per-step timings go to stderr.
#
# Usage:
#   bash hack/control-plane/controllers.sh                          build if needed, print the bin dir
#   bash hack/control-plane/controllers.sh --print-bin-dir-if-built print it and exit 0 if complete, else exit 3
#   bash hack/control-plane/controllers.sh --print-bin-dir          print the bin dir (built or not)
#
# KUEUE_DOCTOR_CTRL_BIN=<dir> points at an existing directory with the binaries, CRDs and webhook manifest.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"

MODE=build
case "${1:-}" in
  "") ;;
  --print-bin-dir-if-built) MODE=if-built ;;
  --print-bin-dir) MODE=print ;;
  -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
  *) echo "controllers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

log() { printf '[controllers.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

check_bin_dir() {  # $1 = dir
  local d="$1" missing=()
  for b in jobset ray-operator trainer-controller-manager appwrapper-controller lws-manager; do
    [[ -x "$d/$b" ]] || missing+=("$b")
  done
  for f in crds/jobset.x-k8s.io_jobsets.yaml crds/ray.io_rayclusters.yaml crds/ray.io_rayjobs.yaml \
           crds/ray.io_rayservices.yaml crds/trainer.kubeflow.org_trainjobs.yaml \
           crds/trainer.kubeflow.org_trainingruntimes.yaml crds/trainer.kubeflow.org_clustertrainingruntimes.yaml \
           crds/workload.codeflare.dev_appwrappers.yaml \
           crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml crds/disaggregatedset.x-k8s.io_disaggregatedsets.yaml \
           jobset-webhook/manifests.yaml trainer-webhook/manifests.yaml lws-webhook/manifests.yaml; do
    [[ -f "$d/$f" ]] || missing+=("$f")
  done
  if ((${#missing[@]})); then echo "missing in $d: ${missing[*]}" >&2; return 1; fi
}

if [[ -n "${KUEUE_DOCTOR_CTRL_BIN:-}" ]]; then  # an existing directory with the binaries: nothing is built
  check_bin_dir "$KUEUE_DOCTOR_CTRL_BIN" || { echo "controllers.sh: KUEUE_DOCTOR_CTRL_BIN is incomplete" >&2; exit 3; }
  echo "$KUEUE_DOCTOR_CTRL_BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "controllers.sh: 'go' not found on PATH; install Go >= 1.26 (the pins need it)" >&2
  exit 2
fi

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOWORK=off
export GOFLAGS="-trimpath -buildvcs=false"

GOVERSION="$(go env GOVERSION)"
CACHE="${KUEUE_DOCTOR_CTRL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor/controllers}"
KEY="$(printf '%s\n' "$JOBSET_VERSION" "$KUBERAY_VERSION" "$TRAINER_VERSION" "$APPWRAPPER_VERSION" "$LWS_VERSION" \
  "$CTRL_RECIPE_REV" "$GOVERSION" |
  sha256sum | cut -c1-12)"
BIN="$CACHE/bin-$KEY"

case "$MODE" in
  print) echo "$BIN"; exit 0 ;;
  if-built)
    if [[ -f "$BIN/.complete" ]]; then echo "$BIN"; exit 0; fi
    echo "controllers.sh: owner controllers not built yet (expected $BIN/.complete)" >&2
    exit 3 ;;
esac

if [[ -f "$BIN/.complete" ]]; then log "already built: $BIN"; echo "$BIN"; exit 0; fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.lock; waiting for it"
  flock 9
fi
if [[ -f "$BIN/.complete" ]]; then log "already built: $BIN"; echo "$BIN"; exit 0; fi

rm -rf "$CACHE"/stage.*
STAGE="$(mktemp -d "$CACHE/stage.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
trap 'exit 130' INT TERM HUP
OUT="$STAGE/out"
mkdir -p "$OUT/crds" "$OUT/jobset-webhook" "$OUT/trainer-webhook" "$OUT/lws-webhook" "$STAGE/src"
log "building into $STAGE (key $KEY: jobset $JOBSET_VERSION, kuberay $KUBERAY_VERSION, trainer $TRAINER_VERSION," \
  "appwrapper $APPWRAPPER_VERSION, lws $LWS_VERSION, $GOVERSION)"
T_ALL=$SECONDS

step() {  # step <name> <function>
  local name="$1" t0=$SECONDS
  log "step $name: start"
  "$2"
  log "step $name: done in $((SECONDS - t0))s"
  printf '%s %ss\n' "$name" "$((SECONDS - t0))" >>"$OUT/build-times.txt"
}

module_dir() {  # module_dir <module@version>: its directory in the module cache (downloads it if absent)
  (cd "$STAGE/src" && go mod download -json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
}

tool_build() {  # tool_build <dir name> <module> <version> <package> <binary> [ldflags]
  local w="$STAGE/src/$1"
  mkdir -p "$w" && cd "$w"
  go mod init "kueue-doctor.local/$1" >&2
  go get -tool "$2@$3"
  nice -n 10 go build -ldflags "-s -w ${6:-}" -o "$OUT/$5" "$4"
}

build_jobset() {
  tool_build jobset sigs.k8s.io/jobset "$JOBSET_VERSION" sigs.k8s.io/jobset jobset \
    "-X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION -X sigs.k8s.io/jobset/pkg/version.GitCommit=none"
  local dir
  dir="$(module_dir "sigs.k8s.io/jobset@$JOBSET_VERSION")"
  cp "$dir"/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml "$OUT/crds/"
  cp "$dir"/config/components/webhook/manifests.yaml "$OUT/jobset-webhook/manifests.yaml"
}

build_kuberay() {
  tool_build kuberay github.com/ray-project/kuberay/ray-operator "$KUBERAY_VERSION" \
    github.com/ray-project/kuberay/ray-operator ray-operator
  local dir
  dir="$(module_dir "github.com/ray-project/kuberay/ray-operator@$KUBERAY_VERSION")"
  # RayService's too, for whoever wants it: KubeRay always starts its RayService controller (which only logs
  # errors while that CRD is absent); controllers.py installs RayCluster's and RayJob's
  cp "$dir"/config/crd/bases/ray.io_{rayclusters,rayjobs,rayservices}.yaml "$OUT/crds/"
}

build_trainer() {
  local pkg=github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager dir
  tool_build trainer "$pkg" "$TRAINER_VERSION" "$pkg" trainer-controller-manager
  dir="$(module_dir "github.com/kubeflow/trainer/v2@$TRAINER_VERSION")"
  cp "$dir"/manifests/base/crds/trainer.kubeflow.org_{trainjobs,trainingruntimes,clustertrainingruntimes}.yaml \
    "$OUT/crds/"
  cp "$dir"/manifests/base/webhook/manifests.yaml "$OUT/trainer-webhook/manifests.yaml"
}

build_appwrapper() {
  local mod=github.com/project-codeflare/appwrapper dir
  tool_build appwrapper "$mod/cmd" "$APPWRAPPER_VERSION" "$mod/cmd" appwrapper-controller \
    "-X main.BuildVersion=$APPWRAPPER_VERSION -X main.BuildDate=none"
  dir="$(module_dir "$mod@$APPWRAPPER_VERSION")"
  cp "$dir"/config/crd/bases/workload.codeflare.dev_appwrappers.yaml "$OUT/crds/"
}

build_lws() {
  local mod=sigs.k8s.io/lws dir
  tool_build lws "$mod/cmd" "$LWS_VERSION" "$mod/cmd" lws-manager \
    "-X $mod/pkg/version.GitVersion=$LWS_VERSION -X $mod/pkg/version.GitCommit=none"
  dir="$(module_dir "$mod@$LWS_VERSION")"
  # DisaggregatedSet's too: the manager always starts its controller (it watches DisaggregatedSets and owns
  # LeaderWorkerSets), which would fail its cache sync without the CRD
  cp "$dir"/config/crd/bases/{leaderworkerset.x-k8s.io_leaderworkersets,disaggregatedset.x-k8s.io_disaggregatedsets}.yaml \
    "$OUT/crds/"
  cp "$dir"/config/webhook/manifests.yaml "$OUT/lws-webhook/manifests.yaml"
}

step jobset build_jobset
step kuberay build_kuberay
step trainer build_trainer
step appwrapper build_appwrapper
step lws build_lws
chmod -R u+w "$OUT"

cat >"$OUT/VERSIONS" <<EOF
key=$KEY
go=$GOVERSION
jobset=$JOBSET_VERSION
kuberay=$KUBERAY_VERSION
trainer=$TRAINER_VERSION
appwrapper=$APPWRAPPER_VERSION
lws=$LWS_VERSION
recipe=$CTRL_RECIPE_REV
EOF
check_bin_dir "$OUT"

rm -rf "$BIN"
mv "$OUT" "$BIN"
touch "$BIN/.complete"
log "all done in $((SECONDS - T_ALL))s: $BIN ($(du -sh "$BIN" | cut -f1))"
echo "$BIN"
