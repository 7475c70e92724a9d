#!/usr/bin/env bash
# The one test command (README, CI): installs the package, builds the local control plane (cached
# outside the work tree, minutes when warm), runs ruff, mypy --strict, lint-imports and pytest. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "install kueue-doctor with its test extra"
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

if [[ -x hack/control-plane/build.sh && "${KUEUE_DOCTOR_SKIP_E2E:-0}" != 1 ]]; then
  step "build the local control plane (etcd, kube-apiserver, controller-manager, scheduler, Kueue)"
  bash hack/control-plane/build.sh >/dev/null
  step "build the owner controllers (JobSet, KubeRay, Trainer, AppWrapper, LWS) for tests/e2e/test_family_*.py"; bash hack/control-plane/controllers.sh >/dev/null
  step "build helm for the chart tests (hack/helm/version.env)"
  bash hack/helm/build.sh >/dev/null
  step "build krew and its manifest validator for the kubectl plugin tests (hack/krew/version.env)"
  bash hack/krew/build.sh >/dev/null
  step "build the operator image (hack/image/build.sh: Debian rootfs, requirements.lock, OCI archive)"
  bash hack/image/build.sh >/dev/null
  step "build the engine compiled by mypyc (hack/compiled.sh; the image ships it, tests/compiled/ checks it)"
  bash hack/compiled.sh >/dev/null
fi

step "promtool and prometheus (Debian package prometheus, unpacked, no service)"
bash hack/prometheus.sh >/dev/null

step "ruff"
python3 -m ruff check
step "mypy --strict"
python3 -m mypy
step "lint-imports (the layers in pyproject.toml)"
lint-imports
step "pytest"
python3 -m pytest "$@"
