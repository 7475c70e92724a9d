#!/usr/bin/env python3
"""Build the krew archive of `kubectl kueue-doctor` byte for byte the same everywhere, and keep the manifest's
sha256 equal to it.

    python hack/plugin/archive.py OUT.zip            write the archive, print its sha256
    python hack/plugin/archive.py --update-manifest  write plugins/kueue-doctor.yaml's sha256 (and print it)
    python hack/plugin/archive.py --check            exit 1 if the manifest's sha256 or version is stale

The archive holds the launcher (plugins/krew/kubectl-kueue_doctor, which installs the Python package on its
first run) and LICENSE. A zip with stored (uncompressed) members, fixed times and modes: no compressor version
can change its bytes. Publish it as the release asset the manifest's `uri` names.
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "plugins" / "kueue-doctor.yaml"
MEMBERS = ((ROOT / "plugins" / "krew" / "kubectl-kueue_doctor", 0o755), (ROOT / "LICENSE", 0o644))
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold


def archive_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for path, mode in MEMBERS:
            info = zipfile.ZipInfo(path.name, date_time=EPOCH)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with its Unix mode, kept by krew
            info.create_system = 3  # Unix, so the mode is read
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def sha256() -> str:
    return hashlib.sha256(archive_bytes()).hexdigest()


def version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def problems() -> list[str]:
    """What is stale: the manifest's sha256 and version, the launcher's version."""
    text = MANIFEST.read_text()
    found = []
    if f"sha256: {sha256()}" not in text:
        found.append(f"{MANIFEST.relative_to(ROOT)}: sha256 is not the archive's ({sha256()})")
    if not re.search(rf'^  version: "?v{re.escape(version())}"?$', text, re.M):
        found.append(f"{MANIFEST.relative_to(ROOT)}: spec.version is not v{version()} (pyproject.toml)")
    if f"version={version()}\n" not in MEMBERS[0][0].read_text():
        found.append(f"{MEMBERS[0][0].relative_to(ROOT)}: version= is not {version()} (pyproject.toml)")
    return found


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        stale = problems()
        for p in stale:
            print(f"stale: {p}; run python hack/plugin/archive.py --update-manifest", file=sys.stderr)
        return 1 if stale else 0
    if argv == ["--update-manifest"]:
        text = re.sub(r"sha256: [0-9a-f]{64}", f"sha256: {sha256()}", MANIFEST.read_text())
        MANIFEST.write_text(text)
        print(sha256())
        return 0
    if len(argv) == 1 and not argv[0].startswith("-"):
        Path(argv[0]).write_bytes(archive_bytes())
        print(sha256())
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
