#!/usr/bin/env bash
# Refresh requirements.lock: the runtime dependencies of pyproject.toml, pinned with their sha256 hashes
# (pip-tools from PyPI). The image (hack/image/build.sh, Dockerfile) installs from it with
# `pip install --require-hashes`; tests/unit/test_lock.py checks it against pyproject's ranges.
# Run after changing [project] dependencies, or to take newer releases: bash hack/lock.sh [--upgrade]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m piptools --version >/dev/null 2>&1 || python3 -m pip install --quiet 'pip-tools>=7.4'
# Python 3.11: the image's python3 (Debian bookworm) and CI's.
PIP_FIND_LINKS= CUSTOM_COMPILE_COMMAND="bash hack/lock.sh" python3 -m piptools compile --quiet --generate-hashes --strip-extras --allow-unsafe \
  --no-emit-index-url --no-emit-find-links --output-file requirements.lock "$@" pyproject.toml
