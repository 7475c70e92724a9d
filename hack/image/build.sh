#!/usr/bin/env bash
# Build the operator's OCI image without a registry base image and without a container engine:
# a Debian rootfs made by mmdebstrap (Debian's python3), the project (its engine compiled by mypyc:
# hack/compiled.sh, which needs mypy and a C compiler on the host) installed into /opt/kueue-doctor
# from requirements.lock with `pip install --require-hashes` (wheels fetched on the host, installed
# offline in the rootfs), a non-root user, one layer added by umoci, written as an OCI archive into a
# cache directory OUTSIDE the work tree:
#
#   ${KUEUE_DOCTOR_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}/image-<key>/kueue-doctor.oci.tar
#
# <key> = sha256 of requirements.lock, the project source (pyproject.toml, setup.py, README.md, operator/) and
# recipe.env (first 12 hex digits). Idempotent (exits at once when image-<key>/.complete exists),
# serialised with flock, atomic (built in a stage dir, moved into place, then .complete is touched).
# The last line on stdout is the archive's path; progress and timings go to stderr. Installs its own
# tools from Debian's packages when missing (mmdebstrap, umoci; podman, crun, skopeo to run and push).
#
# Usage:
#   bash hack/image/build.sh                  build if needed, print the archive path
#   bash hack/image/build.sh --print-if-built print the archive path and exit 0 if built, else exit 3
#   bash hack/image/build.sh --print-path     print the archive path (built or not)
#   bash hack/image/build.sh --print-ref      print the image reference (repository:version)
#
# Push it:  skopeo copy oci-archive:"$(bash hack/image/build.sh)" docker://registry.example.com/kueue-doctor:0.1.0
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=recipe.env
source "$HERE/recipe.env"

MODE=build
case "${1:-}" in
  "") ;;
  --print-if-built) MODE=if-built ;;
  --print-path) MODE=print ;;
  --print-ref) MODE=ref ;;
  -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
  *) echo "hack/image/build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

# The machine's pip settings must not leak into the build (a find-links dir, say); certificates stay.
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_NO_INDEX

log() { printf '[image/build.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

VERSION="$(python3 -c 'import tomllib,sys; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' \
  "$ROOT/pyproject.toml")"
REF="$IMAGE_REPOSITORY:$VERSION"
[[ "$MODE" == ref ]] && { echo "$REF"; exit 0; }

# The project source that goes into the image: what hack/compiled.sh builds its wheel from.
source_files() {
  (cd "$ROOT" && { echo pyproject.toml; echo README.md; echo requirements.lock; echo setup.py;
                   find operator -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*'; } \
                 | LC_ALL=C sort)
}
KEY="$( { (cd "$ROOT" && source_files | xargs -d '\n' sha256sum); sha256sum < "$HERE/recipe.env"; } \
        | sha256sum | cut -c1-12)"
CACHE="${KUEUE_DOCTOR_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueue-doctor}"
DIR="$CACHE/image-$KEY"
ARCHIVE="$DIR/kueue-doctor.oci.tar"

case "$MODE" in
  print) echo "$ARCHIVE"; exit 0 ;;
  if-built)
    if [[ -f "$DIR/.complete" && -f "$ARCHIVE" ]]; then echo "$ARCHIVE"; exit 0; fi
    echo "hack/image/build.sh: image not built for this source (expected $DIR/.complete); run: bash hack/image/build.sh" >&2
    exit 3 ;;
esac

if [[ -f "$DIR/.complete" && -f "$ARCHIVE" ]]; then
  log "already built: $ARCHIVE ($REF)"
  echo "$ARCHIVE"
  exit 0
fi

T0=$SECONDS
# ---- tools, from Debian's packages -------------------------------------------------------------
need=()
# podman/crun and runc run it in the tests (runc: where podman cannot set its rlimits), skopeo pushes it.
for pair in mmdebstrap:mmdebstrap umoci:umoci podman:podman crun:crun runc:runc skopeo:skopeo newuidmap:uidmap; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "hack/image/build.sh: missing ${need[*]}; install them: sudo apt-get install -y ${need[*]}" >&2
    exit 2
  fi
  log "installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
  log "tools installed in $((SECONDS - T0))s"
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.image.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/.image.lock; waiting for it"
  flock 9
fi
if [[ -f "$DIR/.complete" && -f "$ARCHIVE" ]]; then   # built by the run we waited for
  log "already built: $ARCHIVE"
  echo "$ARCHIVE"
  exit 0
fi
rm -rf "$CACHE"/image-stage.*
STAGE="$(mktemp -d "$CACHE/image-stage.XXXXXX")"
cleanup() { rm -rf "$STAGE"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
log "building $REF into $STAGE (key $KEY)"

# ---- wheels: the project (built from a copy of its source) and the lock's pins, with hashes ------
mkdir -p "$STAGE/src" "$STAGE/wheels"
(cd "$ROOT" && source_files | xargs -d '\n' cp --parents -t "$STAGE/src")
T1=$SECONDS
# the project's wheel with its engine compiled by mypyc (hack/compiled.sh: cached by the same source, built on this
# host, Debian bookworm's glibc and CPython 3.11 ABI as the image's)
cp "$(bash "$ROOT/hack/compiled.sh" --wheel)" "$STAGE/wheels/"
# Binary wheels for the image's interpreter (CPython 3.11, glibc of bookworm); hashes checked here and again inside.
python3 -m pip download --quiet --disable-pip-version-check --require-hashes --no-deps \
  --only-binary=:all: --implementation cp --python-version 3.11 --abi cp311 --abi abi3 --abi none \
  --platform manylinux_2_36_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  --dest "$STAGE/wheels" -r "$STAGE/src/requirements.lock" >&2
log "wheels in $((SECONDS - T1))s"

# ---- rootfs ---------------------------------------------------------------------------------------
T1=$SECONDS
SLIM=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*')
# The customize hooks run after the packages are in: a venv, the wheels installed offline with
# --require-hashes, pip removed from the venv, the non-root user, nothing left of the build.
mmdebstrap --quiet --variant=essential --include="$DEBIAN_PACKAGES" "${SLIM[@]}" \
  --customize-hook='mkdir -p "$1/tmp/wheels" "$1/tmp/src"' \
  --customize-hook="copy-in $STAGE/wheels/. /tmp/wheels" \
  --customize-hook="copy-in $STAGE/src/requirements.lock /tmp/src" \
  --customize-hook='chroot "$1" python3 -m venv /opt/kueue-doctor' \
  --customize-hook='chroot "$1" /opt/kueue-doctor/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-index --find-links /tmp/wheels --require-hashes -r /tmp/src/requirements.lock' \
  --customize-hook='chroot "$1" sh -c "/opt/kueue-doctor/bin/pip install --quiet --disable-pip-version-check --no-cache-dir --no-index --no-deps /tmp/wheels/kueue_doctor-*.whl"' \
  --customize-hook='chroot "$1" /opt/kueue-doctor/bin/pip uninstall --quiet --yes pip setuptools' \
  --customize-hook='chroot "$1" /opt/kueue-doctor/bin/kueue-doctor --help >/dev/null' \
  --customize-hook="echo 'nonroot:x:$IMAGE_UID:$IMAGE_UID:nonroot:/tmp:/usr/sbin/nologin' >> \"\$1/etc/passwd\"" \
  --customize-hook="echo 'nonroot:x:$IMAGE_UID:' >> \"\$1/etc/group\"" \
  --customize-hook='rm -rf "$1/tmp/wheels" "$1/tmp/src" "$1"/var/cache/* "$1"/var/log/* "$1"/var/lib/apt/lists/*' \
  "$DEBIAN_SUITE" "$STAGE/rootfs.tar" "$DEBIAN_MIRROR" >&2
log "rootfs in $((SECONDS - T1))s ($(du -m "$STAGE/rootfs.tar" | cut -f1) MiB uncompressed)"

# ---- OCI image ------------------------------------------------------------------------------------
T1=$SECONDS
OCI="$STAGE/oci"
umoci init --layout "$OCI"
umoci new --image "$OCI:$VERSION"
umoci raw add-layer --image "$OCI:$VERSION" --history.created_by "hack/image/build.sh (recipe $IMAGE_RECIPE_REV)" \
  "$STAGE/rootfs.tar"
umoci config --image "$OCI:$VERSION" --no-history \
  --config.user "$IMAGE_UID:$IMAGE_UID" --config.workingdir /tmp \
  --config.entrypoint kueue-doctor --config.cmd run \
  --config.env "PATH=/opt/kueue-doctor/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --config.env PYTHONUNBUFFERED=1 --config.env PYTHONDONTWRITEBYTECODE=1 --config.env HOME=/tmp \
  --config.exposedports 8080/tcp --config.exposedports 8081/tcp \
  --config.label org.opencontainers.image.title=kueue-doctor \
  --config.label org.opencontainers.image.version="$VERSION" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label org.opencontainers.image.source=https://github.com/kueue-doctor/kueue-doctor \
  --config.label org.opencontainers.image.base.name="debian:$DEBIAN_SUITE (mmdebstrap)" \
  --manifest.annotation org.opencontainers.image.ref.name="$REF"
umoci gc --layout "$OCI"
# An oci-archive (what `skopeo copy oci-archive:...` and `podman load` read) is the layout, tarred.
OUT="$STAGE/out"
mkdir -p "$OUT"
tar -C "$OCI" -cf "$OUT/kueue-doctor.oci.tar" .
log "OCI archive in $((SECONDS - T1))s"
SIZE_MB=$(( $(stat -c %s "$OUT/kueue-doctor.oci.tar") / 1048576 ))
cat >"$OUT/IMAGE" <<EOT
key=$KEY
ref=$REF
tag=$VERSION
suite=$DEBIAN_SUITE
recipe=$IMAGE_RECIPE_REV
archive_mib=$SIZE_MB
rootfs_mib=$(du -m "$STAGE/rootfs.tar" | cut -f1)
build_seconds=$((SECONDS - T0))
EOT
rm -rf "$DIR"
mv "$OUT" "$DIR"
touch "$DIR/.complete"
log "done in $((SECONDS - T0))s: $ARCHIVE ($REF, $SIZE_MB MiB compressed)"
echo "$ARCHIVE"
