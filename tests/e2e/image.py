"""Running the operator's OCI image (hack/image/build.sh) here, without a Docker engine.

`container_runtime()` probes what this machine allows, in order, and says why each one failed:
1. podman (crun), vfs storage in a private root, as a user would run it;
2. `umoci unpack` of the archive, then runc on the unpacked rootfs with the image's own config
   (entrypoint, user, env, working dir), read-only root, its own PID/IPC/UTS/mount namespaces and a
   network namespace unless the host network is asked for: the same OCI runtime spec podman writes,
   without podman's fixed rlimits (a sandbox without CAP_SYS_RESOURCE refuses podman's RLIMIT_NPROC).
None works: `Unavailable` with every reason, which the tests turn into a skip that says so.
"""

from __future__ import annotations

import contextlib
import json
import resource
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "image" / "build.sh"


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str


class Unavailable(RuntimeError):
    """No container runtime works on this machine; the message has each one's reason."""


def archive_path() -> Path | None:
    proc = subprocess.run(["bash", str(BUILD), "--print-if-built"], capture_output=True, text=True, check=False)
    out = proc.stdout.strip().splitlines()
    return Path(out[-1]) if proc.returncode == 0 and out else None


def read_archive(archive: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(manifest, image config, the layer digests' blob paths) of the one image in an OCI archive."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> bytes:
            algo, hexd = digest.split(":", 1)
            f = tar.extractfile(f"./blobs/{algo}/{hexd}")
            assert f is not None, digest
            return f.read()
        index = json.loads(tar.extractfile("./index.json").read())  # type: ignore[union-attr]
        (desc,) = index["manifests"]
        manifest = json.loads(blob(desc["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
    layers = [f"./blobs/{d['digest'].replace(':', '/')}" for d in manifest["layers"]]
    return manifest, config, layers


def layer_names(archive: Path, member: str, prefix: str) -> list[str]:
    """Names under `prefix` in one (gzip) layer of the archive."""
    with tarfile.open(archive) as outer:
        raw = outer.extractfile(member)
        assert raw is not None
        with tarfile.open(fileobj=raw, mode="r|*") as layer:
            return [m.name.removeprefix("./") for m in layer if m.name.removeprefix("./").startswith(prefix)]


@dataclass
class Runtime:
    """Runs the image's entrypoint with arguments; `kind` is what ran it, `notes` why others did not."""

    kind: str
    archive: Path
    work: Path
    notes: list[str] = field(default_factory=list)
    image_id: str = ""
    rootfs: Path | None = None
    spec: dict[str, Any] = field(default_factory=dict)

    def argv(self, args: Sequence[str], mounts: Sequence[Mount] = (), host_network: bool = False,
             name: str | None = None) -> list[str]:
        """The command that runs the image (read-only root, writable /tmp, non-root as the image says)."""
        name = name or f"kd-{uuid.uuid4().hex[:8]}"
        if self.kind == "podman":
            cmd = [*_podman(self.work), "run", "--rm", "--name", name, "--read-only", "--tmpfs", "/tmp",
                   f"--network={'host' if host_network else 'none'}", *_podman_ulimits()]
            for mnt in mounts:
                cmd += ["-v", f"{mnt.source}:{mnt.target}:ro"]
            return [*cmd, self.image_id, *args]
        bundle = self.work / "bundles" / name
        bundle.mkdir(parents=True)
        spec = json.loads(json.dumps(self.spec))
        spec["root"] = {"path": str(self.rootfs), "readonly": True}
        proc = spec["process"]
        proc["args"] = [*proc["args"][:1], *args]  # the image's entrypoint, our arguments
        proc["terminal"] = False
        proc.pop("rlimits", None)
        spec["linux"].pop("resources", None)
        if host_network:
            spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
        spec["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                               "options": ["nosuid", "nodev", "mode=1777"]})
        for mnt in mounts:
            spec["mounts"].append({"destination": mnt.target, "type": "bind", "source": str(mnt.source),
                                   "options": ["rbind", "ro"]})
        (bundle / "config.json").write_text(json.dumps(spec))
        return ["runc", "--root", str(self.work / "runc-state"), "run", "--bundle", str(bundle), name]

    def run(self, args: Sequence[str], mounts: Sequence[Mount] = (), timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args, mounts), capture_output=True, text=True, check=False, timeout=timeout)

    def kill(self, name: str) -> None:
        if self.kind == "podman":
            subprocess.run([*_podman(self.work), "kill", name], capture_output=True, check=False, timeout=30)
        else:
            subprocess.run(["runc", "--root", str(self.work / "runc-state"), "kill", name, "KILL"],
                           capture_output=True, check=False, timeout=30)


def _podman(work: Path) -> list[str]:
    return ["podman", "--root", str(work / "podman-root"), "--runroot", str(work / "podman-run"),
            "--storage-driver=vfs", "--runtime=crun", "--cgroup-manager=cgroupfs", "--events-backend=none"]


def _podman_ulimits() -> list[str]:
    """The caller's own limits (podman's defaults are higher than an unprivileged sandbox may set)."""
    out = []
    for flag, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            out += ["--ulimit", f"{flag}={soft}:{hard}"]
    return out


def _tail(proc: subprocess.CompletedProcess[str]) -> str:
    return " ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])[:400]


def _try_podman(rt: Runtime) -> bool:
    if shutil.which("podman") is None:
        rt.notes.append("podman: not installed (bash hack/image/build.sh installs it)")
        return False
    pull = subprocess.run([*_podman(rt.work), "pull", "-q", f"oci-archive:{rt.archive}"],
                          capture_output=True, text=True, check=False, timeout=300)
    if pull.returncode != 0:
        rt.notes.append(f"podman pull oci-archive: {_tail(pull)}")
        return False
    rt.kind, rt.image_id = "podman", pull.stdout.strip().splitlines()[-1]
    probe = rt.run(["--help"], timeout=120)
    if probe.returncode == 0:
        return True
    rt.notes.append(f"podman run: {_tail(probe)}")
    return False


def _try_runc(rt: Runtime) -> bool:
    for tool in ("umoci", "runc"):
        if shutil.which(tool) is None:
            rt.notes.append(f"{tool}: not installed (bash hack/image/build.sh installs it)")
            return False
    layout, bundle = rt.work / "layout", rt.work / "unpacked"
    layout.mkdir()
    with tarfile.open(rt.archive) as tar:
        tar.extractall(layout, filter="tar")
    index = json.loads((layout / "index.json").read_text())
    tag = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    unpack = subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)],
                            capture_output=True, text=True, check=False, timeout=300)
    if unpack.returncode != 0:
        rt.notes.append(f"umoci unpack: {_tail(unpack)}")
        return False
    shutil.rmtree(layout)
    rt.kind, rt.rootfs = "runc", bundle / "rootfs"
    rt.spec = json.loads((bundle / "config.json").read_text())
    probe = rt.run(["--help"], timeout=60)
    if probe.returncode == 0:
        return True
    rt.notes.append(f"runc run: {_tail(probe)}")
    return False


def container_runtime(archive: Path, work: Path) -> Runtime:
    rt = Runtime("none", archive, work)
    for attempt in (_try_podman, _try_runc):
        with contextlib.suppress(subprocess.TimeoutExpired):
            if attempt(rt):
                return rt
    raise Unavailable("containers cannot run on this machine: " + "; ".join(rt.notes))


@contextlib.contextmanager
def running(rt: Runtime, args: Sequence[str], mounts: Sequence[Mount], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The image's entrypoint in the background, on the host network; killed afterwards."""
    name = f"kd-{uuid.uuid4().hex[:8]}"
    with log.open("wb") as fh:
        proc = subprocess.Popen(rt.argv(args, mounts, host_network=True, name=name), stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        rt.kill(name)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
