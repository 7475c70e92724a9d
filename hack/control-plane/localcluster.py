"""A real local Kubernetes control plane with the real Kueue controller.

etcd + kube-apiserver + kube-controller-manager + kube-scheduler + the Kueue manager, all as
child processes on 127.0.0.1 with free ports, plus a small fake kubelet (a thread) that plays the
kubelet for fake Nodes. Binaries come from ``hack/control-plane/build.sh`` (a cache outside the
work tree). Used by ``tests/e2e/conftest.py`` and by ``hack/local-cluster``.

Only the standard library, ``cryptography``, ``kubernetes`` (the official client) and ``PyYAML``.

Typical use::

    with LocalCluster("/tmp/cp") as cluster:
        cluster.create_node("node-a", labels={"pool": "a"}, cpu="4")
        api = cluster.api_client()
        ...
        cluster.writes_by_user("some-user")

Processes are started in their own process group with ``PR_SET_PDEATHSIG=SIGKILL``: if the
Python process (more exactly: the thread that called ``start()``) dies, the kernel kills them.
``stop()`` is also registered with ``atexit``. Call ``start()`` from a long-lived thread (the main
thread): PR_SET_PDEATHSIG fires when the *thread* that forked the child exits.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import datetime as dt
import ipaddress
import json
import os
import random
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
VERSIONS_FILE = HERE / "versions.env"
BUILD_SCRIPT = HERE / "build.sh"
BUILD_COMMAND = "bash hack/control-plane/build.sh"

REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kueue")

#: Label and annotation put on every Node made by :meth:`LocalCluster.create_node`; the fake
#: kubelet only acts on pods bound to Nodes that carry the label.
FAKE_NODE_LABEL = "kueue-doctor.local/fake-node"
#: Pod annotation: the fake kubelet ends the pod this many seconds after it started it.
FAKE_RUN_SECONDS_ANNOTATION = "kueue-doctor.local/fake-run-seconds"
#: Pod annotation: exit code used when the pod ends (0 -> Succeeded, else Failed). Default 0.
FAKE_EXIT_CODE_ANNOTATION = "kueue-doctor.local/fake-exit-code"
#: Pod annotation "true": the fake kubelet leaves the pod Pending (bound but never started).
FAKE_HOLD_ANNOTATION = "kueue-doctor.local/fake-hold"
#: Images on a registry host ending in this suffix (RFC 6761: ``.invalid`` never resolves) cannot be pulled:
#: the fake kubelet leaves the pod Pending with ErrImagePull, then ImagePullBackOff, and posts the kubelet's Events.
FAKE_UNPULLABLE_REGISTRY_SUFFIX = ".invalid"

#: Kueue v0.17-v0.19 read the metrics serving cert from this fixed path whenever internal cert
#: management is off, even with metrics disabled (cmd/kueue/main.go). Needs root to write.
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: Kueue v0.19 reads its visibility server's cert from this fixed path when internal cert management is off
#: (pkg/visibility/server.go). Needs root to write. The aggregator does not verify it (insecureSkipTLSVerify): two
#: local clusters on one machine share the path, and Kueue reloads the file when it changes.
KUEUE_VISIBILITY_CERT_DIR = Path("/visibility")
#: How the kube-apiserver's aggregator reaches the local Kueue's visibility server (KueueSettings.visibility): an
#: APIService backed by a Service of type ExternalName ``localhost`` (kube-aggregator resolves it to
#: ``https://localhost:<APIService port>``, no ClusterIP routing needed).
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
VISIBILITY_APISERVICE = f"v1beta2.{VISIBILITY_GROUP}"
VISIBILITY_SERVICE = "kueue-visibility-server"
#: The front-proxy client the aggregator authenticates as (the name --requestheader-allowed-names allows).
FRONT_PROXY_CLIENT = "front-proxy-client"
KUEUE_NAMESPACE = "kueue-system"
#: Where a real install keeps Kueue's Configuration (config/components/manager of the release):
#: ConfigMap ``kueue-manager-config`` in Kueue's namespace, key ``controller_manager_config.yaml``.
#: The local Kueue reads a file; the harness publishes the same text there too.
KUEUE_CONFIG_MAP = "kueue-manager-config"
KUEUE_CONFIG_MAP_KEY = "controller_manager_config.yaml"
#: Namespaces with this label are outside Kueue's managedJobsNamespaceSelector (KueueSettings).
UNMANAGED_NAMESPACE_LABEL = "kueue-doctor.test/unmanaged"
#: The JobSet CRD is installed (no JobSet controller, no Kueue integration for it) so that tests
#: can create JobSets Kueue does not manage. It comes from the jobset module in the Go module cache
#: (Kueue's go.mod requires this version, so building Kueue downloaded it), else `go mod download`.
JOBSET_MODULE = "sigs.k8s.io/jobset"
JOBSET_CRD_PATH = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"

#: What each Kueue integration's webhooks act on (config/components/webhook/manifests.yaml): registered when the
#: framework is in KueueSettings.frameworks.
FRAMEWORK_WEBHOOK_RESOURCES: dict[str, set[tuple[str, str]]] = {
    "batch/job": {("batch", "jobs")},
    "jobset.x-k8s.io/jobset": {("jobset.x-k8s.io", "jobsets")},
    "ray.io/rayjob": {("ray.io", "rayjobs")},
    "ray.io/raycluster": {("ray.io", "rayclusters")},
    "ray.io/rayservice": {("ray.io", "rayservices")},
    "trainer.kubeflow.org/trainjob": {("trainer.kubeflow.org", "trainjobs")},
    "workload.codeflare.dev/appwrapper": {("workload.codeflare.dev", "appwrappers")},
    "pod": {("", "pods")},
    "deployment": {("apps", "deployments")},
    "statefulset": {("apps", "statefulsets")},
    "leaderworkerset.x-k8s.io/leaderworkerset": {("leaderworkerset.x-k8s.io", "leaderworkersets")},
}
POD_BASED_RESOURCES = FRAMEWORK_WEBHOOK_RESOURCES["pod"] | FRAMEWORK_WEBHOOK_RESOURCES["deployment"] | \
    FRAMEWORK_WEBHOOK_RESOURCES["statefulset"]
#: Namespace label: Kueue's pod-based webhooks (pod, deployment, statefulset) act only in namespaces carrying it.
POD_INTEGRATION_LABEL = "kueue-doctor.test/pod-integration"

#: Users (client-certificate CNs) of each component, as they appear in the audit log.
ADMIN_USER = "kueue-doctor-admin"
KCM_USER = "system:kube-controller-manager"
SCHEDULER_USER = "system:kube-scheduler"
KUEUE_USER = "kueue-controller-manager"
FAKE_KUBELET_USER = "kueue-doctor-fake-kubelet"

#: CRDs whose conversion webhook the release manifests enable
#: (config/components/crd/kustomization.yaml of Kueue v0.19.2).
KUEUE_CONVERSION_CRDS = (
    "localqueues.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "cohorts.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
    "multikueueclusters.kueue.x-k8s.io",
)

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
"""

LOG_TAIL_LINES = 80

_NO_PROXY = "127.0.0.1,localhost"


# --------------------------------------------------------------------------------------------
# errors


class ControlPlaneError(RuntimeError):
    """Something is wrong with the local control plane."""


class BinariesNotBuilt(ControlPlaneError):
    """The control-plane binaries are not in the cache; the message says how to build them."""


class ClusterStartError(ControlPlaneError):
    """A component failed to start or to become ready; the message has its last log lines."""


# --------------------------------------------------------------------------------------------
# versions and binaries


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse versions.env (KEY=VALUE lines, '#' comments)."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ControlPlaneError(f"{path}: cannot parse line {raw!r} (expected KEY=VALUE)")
        out[key.strip()] = value.strip()
    return out


def find_bin_dir() -> Path:
    """Return the directory with the built binaries or raise :class:`BinariesNotBuilt`.

    Honours ``KUEUE_DOCTOR_CP_BIN`` (an existing directory with the binaries) and
    ``KUEUE_DOCTOR_CP_CACHE`` (the cache root); never builds anything.
    """
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-bin-dir-if-built"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        return Path(lines[-1])
    reason = proc.stderr.strip() or f"build.sh exited {proc.returncode}"
    raise BinariesNotBuilt(
        f"{reason}\nBuild them first (30-55 min cold on 2 cores, seconds when cached):\n"
        f"    cd {REPO_ROOT} && {BUILD_COMMAND}\n"
        "or point KUEUE_DOCTOR_CP_BIN at a directory holding etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler, kueue, kueue-crds/ and kueue-webhook/."
    )


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "GOWORK": "off", "GOFLAGS": ""})
    return env


def go_module_dir(module: str, version: str, *, workdir: Path | None = None) -> Path:
    """The directory of ``module@version`` in the Go module cache, downloading it if absent.

    Looks in ``$(go env GOMODCACHE)`` first (no network); else ``go mod download -json`` (through
    the machine's GOPROXY), run outside any module. Raises :class:`ControlPlaneError` on failure.
    """
    go = shutil.which("go")
    if go is None:
        raise ControlPlaneError(f"'go' is not on PATH: cannot locate the Go module {module}@{version}")
    env = _go_env()
    modcache = subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=False, env=env
    ).stdout.strip()
    # module paths are case-encoded in the cache: an upper-case letter becomes '!' + lower case
    escaped = "".join("!" + ch.lower() if ch.isupper() else ch for ch in module)
    if modcache and (Path(modcache) / f"{escaped}@{version}").is_dir():
        return Path(modcache) / f"{escaped}@{version}"
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        proc = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True, text=True, check=False, env=env, cwd=tmp, timeout=600,
        )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        raise ControlPlaneError(
            f"go mod download {module}@{version} failed (exit {proc.returncode}): "
            f"{info.get('Error') or proc.stderr.strip() or proc.stdout.strip()}"
        )
    return Path(info["Dir"])


def jobset_crd_path(workdir: Path | None = None) -> Path:
    """The JobSet CRD YAML (``KUEUE_DOCTOR_JOBSET_CRD`` overrides; else from the jobset module)."""
    override = os.environ.get("KUEUE_DOCTOR_JOBSET_CRD")
    if override:
        return Path(override)
    version = read_versions().get("JOBSET_VERSION")
    if not version:
        raise ControlPlaneError(f"JOBSET_VERSION missing in {VERSIONS_FILE}")
    path = go_module_dir(JOBSET_MODULE, version, workdir=workdir) / JOBSET_CRD_PATH
    if not path.is_file():
        raise ControlPlaneError(f"{path} does not exist (module {JOBSET_MODULE}@{version})")
    return path


def module_files(version_key: str, module: str, *relpaths: str, workdir: Path | None = None) -> list[Path]:
    """Files of the Go module pinned by ``version_key`` in versions.env (CRDs the tests install), from
    the module cache or ``go mod download``; :class:`ControlPlaneError` if the pin or a file is missing."""
    version = read_versions().get(version_key)
    if not version:
        raise ControlPlaneError(f"{version_key} missing in {VERSIONS_FILE}")
    root = go_module_dir(module, version, workdir=workdir)
    paths = [root / rel for rel in relpaths]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise ControlPlaneError(f"not in module {module}@{version}: {', '.join(missing)}")
    return paths


# --------------------------------------------------------------------------------------------
# certificates


@dataclass(frozen=True)
class CertPair:
    cert: Path
    key: Path


class PKI:
    """A throw-away CA and the certificates the control plane needs (ECDSA P-256, SHA-256)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC)
        self._not_before = now - dt.timedelta(hours=1)
        self._not_after = now + dt.timedelta(days=30)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-doctor-local-ca")])
        ski = x509.SubjectKeyIdentifier.from_public_key(self._ca_key.public_key())
        self._ca_cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ski, critical=False)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self._write("ca", self._ca_cert, self._ca_key)

    @property
    def ca_pem(self) -> bytes:
        return self._ca_cert.public_bytes(serialization.Encoding.PEM)

    def _write(self, stem: str, cert: x509.Certificate, key: Any) -> CertPair:
        cert_path = self.dir / f"{stem}.crt"
        key_path = self.dir / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)
        return CertPair(cert_path, key_path)

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
        dns_names: Iterable[str] = (),
        ips: Iterable[str] = (),
    ) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before)
            .not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._ca_key.public_key()),
                critical=False,
            )
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return self._write(stem, cert, key)

    def service_account_key(self) -> Path:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path = self.dir / "sa.key"
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        return path


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, client: CertPair, user: str) -> Path:
    """Write a kubeconfig with embedded CA, client certificate and key (no file references)."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kueue-doctor-local",
                "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(client.cert.read_bytes()),
                    "client-key-data": b64(client.key.read_bytes()),
                },
            }
        ],
        "contexts": [
            {"name": "kueue-doctor-local", "context": {"cluster": "kueue-doctor-local", "user": user}}
        ],
        "current-context": "kueue-doctor-local",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------------------------
# processes


_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not Linux/glibc
    _LIBC = None


def _child_preexec(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        # Runs in the child between fork and exec: die with the parent (thread) that started us.
        if _LIBC is not None:
            _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent already died before prctl took effect
            os._exit(1)

    return preexec


def tail_file(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log file)"
    return "\n".join(data.splitlines()[-lines:])


@dataclass
class Component:
    """One child process of the control plane."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0

    def start(self) -> None:
        env = dict(os.environ)
        env.update({"NO_PROXY": _NO_PROXY, "no_proxy": _NO_PROXY})
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"# started {time.strftime('%H:%M:%S')}: {shlex.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_child_preexec(os.getpid()),
                close_fds=True,
            )
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return tail_file(self.log_path, lines)

    def describe_failure(self, what: str) -> str:
        code = self.exit_code()
        state = "is still running" if code is None else f"exited with code {code}"
        return (
            f"{what}\n{self.name} {state}; last {LOG_TAIL_LINES} lines of {self.log_path}:\n"
            f"{'-' * 78}\n{self.tail()}\n{'-' * 78}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)  # own session: pgid == pid
                try:
                    self.proc.wait(timeout=timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        # Anything the component itself forked stays in its process group: make sure it is gone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------
# small helpers


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports, chosen below the kernel's ephemeral range.

    A port the kernel hands out for bind(0) comes from the same range as the local ports of outgoing
    connections: between our probe and the server's bind, any client (Kueue's, the operator's own) can take
    it, and the server dies with EADDRINUSE (seen in CI). Ports below the range are never picked for those.
    The probe binds 0.0.0.0 (what the operator binds) and holds the sockets together so they never repeat.
    """
    low = _ephemeral_low()
    rng = random.Random()
    socks: list[socket.socket] = []
    try:
        for _ in range(count * 50):
            if len(socks) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("0.0.0.0", rng.randrange(10000, low) if low > 11000 else 0))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < count:
            raise RuntimeError(f"found only {len(socks)} of {count} free TCP ports below {low}")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def http_get(url: str, context: ssl.SSLContext | None = None, timeout: float = 3.0) -> tuple[int, str] | None:
    """GET without any proxy; returns (status, body) or None when the server is not reachable."""
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return None


def _insecure_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def new_api_client(kubeconfig: Path | str) -> Any:
    """A ``kubernetes.client.ApiClient`` for a kubeconfig file, never going through a proxy."""
    from kubernetes import client, config

    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg, persist_config=False
    )
    cfg.proxy = None
    if hasattr(cfg, "no_proxy"):
        cfg.no_proxy = _NO_PROXY
    return client.ApiClient(configuration=cfg)


def request_json(
    api_client: Any,
    method: str,
    path: str,
    body: Any = None,
    *,
    query: Mapping[str, Any] | None = None,
    content_type: str | None = None,
    timeout: float = 30.0,
) -> Any:
    """One raw API request; returns the decoded JSON body (raises ``ApiException`` on errors).

    Works with the kubernetes client before and after its move to openapi-generator 7 (v35+).
    """
    from kubernetes.client.exceptions import ApiException

    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type or "application/json"
    query_params = list((query or {}).items())
    if hasattr(api_client, "param_serialize"):  # kubernetes >= 35
        m, url, hdrs, req_body, post = api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query_params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = api_client.call_api(
            m, url, header_params=hdrs, body=req_body, post_params=post, _request_timeout=timeout
        )
        data = resp.read()
        if not 200 <= resp.status <= 299:
            text = data.decode("utf-8", "replace") if data else None
            raise ApiException.from_response(http_resp=resp, body=text, data=None)
    else:  # older clients
        resp = api_client.call_api(
            path,
            method,
            query_params=query_params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        data = resp.data
    return json.loads(data) if data else None


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(value: str) -> float:
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


# --------------------------------------------------------------------------------------------
# fake kubelet


class FakeKubelet(threading.Thread):
    """Plays the kubelet for Nodes labelled ``kueue-doctor.local/fake-node=true``.

    * a bound Pending pod becomes Running with all containers running and Ready=True
      (unless it carries ``kueue-doctor.local/fake-hold: "true"``);
    * a Running pod with ``kueue-doctor.local/fake-run-seconds: N`` ends after N seconds with
      ``kueue-doctor.local/fake-exit-code`` (default 0 -> Succeeded, else Failed);
    * a terminating pod (deletionTimestamp set) gets a terminal phase and is then deleted with
      grace period 0, as the kubelet does after it killed the containers;
    * a bound Pending pod with an image on a ``*.invalid`` registry host stays Pending: ErrImagePull, then
      ImagePullBackOff, with the kubelet's Warning Events (``_pull_failure``).

    Polls every ``interval`` seconds (a list of the fake Nodes and of the bound pods).
    """

    def __init__(self, kubeconfig: Path, log_path: Path, interval: float = 0.5) -> None:
        super().__init__(name="fake-kubelet", daemon=True)
        self.kubeconfig = kubeconfig
        self.interval = interval
        self.log_path = log_path
        self._stop_event = threading.Event()
        self.errors = 0
        self.last_error: str | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def _log(self, msg: str) -> None:
        with self.log_path.open("a") as fh:
            fh.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

    def run(self) -> None:
        api = new_api_client(self.kubeconfig)
        self._log("fake kubelet started")
        try:
            while not self._stop_event.is_set():
                try:
                    self.sync_once(api)
                except Exception as exc:  # keep going; the apiserver may be restarting
                    self.errors += 1
                    self.last_error = repr(exc)
                    self._log(f"sync error: {exc!r}")
                self._stop_event.wait(self.interval)
        finally:
            api.close()

    def sync_once(self, api: Any) -> None:
        nodes = request_json(api, "GET", "/api/v1/nodes", query={"labelSelector": f"{FAKE_NODE_LABEL}=true"})
        names = {n["metadata"]["name"] for n in nodes.get("items", [])}
        if not names:
            return
        pods = request_json(api, "GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="})
        now = time.time()
        for pod in pods.get("items", []):
            if pod.get("spec", {}).get("nodeName") not in names:
                continue
            try:
                self._sync_pod(api, pod, now)
            except Exception as exc:
                status = getattr(exc, "status", None)
                if status in (404, 409):  # gone or changed meanwhile: next round
                    continue
                raise

    def _sync_pod(self, api: Any, pod: dict[str, Any], now: float) -> None:
        meta = pod["metadata"]
        ann = meta.get("annotations") or {}
        phase = pod.get("status", {}).get("phase", "Pending")
        base = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        if meta.get("deletionTimestamp"):
            if phase not in ("Succeeded", "Failed"):
                self._finish(api, base, pod, exit_code=137, reason="Error")
            request_json(
                api,
                "DELETE",
                base,
                {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}},
            )
            self._log(f"deleted {meta['namespace']}/{meta['name']}")
            return
        if phase == "Pending" and _unpullable_images(pod):
            self._pull_failure(api, base, pod, now)
        elif phase == "Pending" and ann.get(FAKE_HOLD_ANNOTATION) != "true":
            self._start(api, base, pod)
            self._log(f"started {meta['namespace']}/{meta['name']} on {pod['spec']['nodeName']}")
        elif phase == "Running" and FAKE_RUN_SECONDS_ANNOTATION in ann:
            started = pod.get("status", {}).get("startTime")
            if started and now - _parse_time(started) >= float(ann[FAKE_RUN_SECONDS_ANNOTATION]):
                code = int(ann.get(FAKE_EXIT_CODE_ANNOTATION, "0"))
                self._finish(api, base, pod, exit_code=code, reason="Completed" if code == 0 else "Error")
                self._log(f"finished {meta['namespace']}/{meta['name']} exit {code}")

    @staticmethod
    def _conditions(ready: bool, now: str, reason: str | None = None) -> list[dict[str, Any]]:
        out = []
        for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            status = "True" if ready or ctype in ("Initialized", "PodScheduled") else "False"
            cond: dict[str, Any] = {"type": ctype, "status": status, "lastTransitionTime": now}
            if status == "False" and reason:
                cond["reason"] = reason
            out.append(cond)
        return out

    def _start(self, api: Any, base: str, pod: dict[str, Any]) -> None:
        now = _now_rfc3339()
        spec = pod["spec"]
        uid = pod["metadata"]["uid"]
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": self._conditions(True, now),
            "initContainerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"fake://{uid}/{c['name']}",
                    "ready": True,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
                for c in spec.get("initContainers") or []
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"fake://{uid}/{c['name']}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
                for c in spec.get("containers", [])
            ],
        }
        request_json(
            api,
            "PATCH",
            base + "/status",
            {"metadata": {"resourceVersion": pod["metadata"]["resourceVersion"]}, "status": status},
            content_type="application/merge-patch+json",
        )

    def _pull_failure(self, api: Any, base: str, pod: dict[str, Any], now: float) -> None:
        """The kubelet's image pull failure: ErrImagePull first, ImagePullBackOff 2 s later (once each), with the
        Warning Events ``Failed``/``BackOff`` a real kubelet posts; the pod stays Pending."""
        bad = _unpullable_images(pod)
        waiting = {c.get("name"): (c.get("state") or {}).get("waiting", {}).get("reason")
                   for c in pod.get("status", {}).get("containerStatuses") or []}
        ready = next((c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"), {})
        if not any(waiting.get(n) for n in bad):
            reason = "ErrImagePull"
        elif all(waiting.get(n) == "ErrImagePull" for n in bad) and ready.get("lastTransitionTime") and \
                now - _parse_time(ready["lastTransitionTime"]) >= 2:
            reason = "ImagePullBackOff"
        else:
            return
        stamp = _now_rfc3339()
        statuses = []
        for c in pod["spec"].get("containers", []):
            image = c.get("image", "")
            if c["name"] in bad:
                msg = (f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
                       f'failed to resolve reference "{image}": {image}: not found' if reason == "ErrImagePull"
                       else f'Back-off pulling image "{image}"')
                state: dict[str, Any] = {"waiting": {"reason": reason, "message": msg}}
            else:
                state = {"waiting": {"reason": "PodInitializing"}}
            statuses.append({"name": c["name"], "image": image, "imageID": "", "ready": False, "started": False,
                             "restartCount": 0, "state": state})
        conds = [{"type": t, "status": "True" if t in ("PodReadyToStartContainers", "Initialized", "PodScheduled")
                  else "False", "lastTransitionTime": ready.get("lastTransitionTime") or stamp}
                 for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
        for cond in conds:
            if cond["status"] == "False":
                cond.update(reason="ContainersNotReady", message=f"containers with unready status: [{' '.join(bad)}]")
        request_json(api, "PATCH", base + "/status",
                     {"status": {"phase": "Pending", "conditions": conds, "containerStatuses": statuses}},
                     content_type="application/merge-patch+json")
        for name, image in bad.items():
            if reason == "ErrImagePull":
                said = next(st["state"]["waiting"]["message"] for st in statuses if st["name"] == name)
                texts = [("Failed", f'Failed to pull image "{image}": {said}'),
                         ("Failed", "Error: ErrImagePull")]
            else:
                texts = [("BackOff", f'Back-off pulling image "{image}"'), ("Failed", "Error: ImagePullBackOff")]
            for ev_reason, message in texts:
                self._event(api, pod, name, ev_reason, message, stamp)
        self._log(f"image pull failure {reason} for {pod['metadata']['namespace']}/{pod['metadata']['name']}")

    @staticmethod
    def _event(api: Any, pod: dict[str, Any], container: str, reason: str, message: str, stamp: str) -> None:
        meta = pod["metadata"]
        request_json(api, "POST", f"/api/v1/namespaces/{meta['namespace']}/events", {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{os.urandom(8).hex()}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": meta["namespace"], "name": meta["name"],
                               "uid": meta["uid"], "fieldPath": f"spec.containers{{{container}}}"},
            "reason": reason, "message": message, "type": "Warning", "count": 1,
            "source": {"component": "kubelet", "host": pod["spec"].get("nodeName", "")},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "reportingComponent": "kubelet",
            "reportingInstance": pod["spec"].get("nodeName", "")})

    def _finish(self, api: Any, base: str, pod: dict[str, Any], exit_code: int, reason: str) -> None:
        now = _now_rfc3339()
        uid = pod["metadata"]["uid"]
        started = pod.get("status", {}).get("startTime") or now
        status = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "startTime": started,
            # the kubelet keeps conditions it does not own (DisruptionTarget, set by an eviction or preemption)
            "conditions": self._conditions(False, now, reason="PodCompleted") + [
                c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") == "DisruptionTarget"],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "containerID": f"fake://{uid}/{c['name']}",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": reason,
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for c in pod["spec"].get("containers", [])
            ],
        }
        request_json(
            api, "PATCH", base + "/status", {"status": status}, content_type="application/merge-patch+json"
        )


def _unpullable_images(pod: Mapping[str, Any]) -> dict[str, str]:
    """Container name -> image, for the containers whose image the fake kubelet cannot pull."""
    out = {}
    for c in pod.get("spec", {}).get("containers", []):
        image = str(c.get("image", ""))
        host = image.split("/", 1)[0] if "/" in image else ""
        if host.split(":", 1)[0].endswith(FAKE_UNPULLABLE_REGISTRY_SUFFIX):
            out[str(c["name"])] = image
    return out


# --------------------------------------------------------------------------------------------
# the cluster


@dataclass
class KueueSettings:
    """What the local Kueue manager is configured with (see docs/local-cluster.md)."""

    #: waitForPodsReady timeout. Kueue 0.19 enables waitForPodsReady by default (30m); we keep
    #: it on (pods do become Ready through the fake kubelet) but shorten it to 5m so an
    #: admitted-but-unschedulable workload is evicted with PodsReadyTimeout within a session.
    wait_for_pods_ready_timeout: str = "5m"
    #: Kueue feature gates. VisibilityOnDemand is set from ``visibility``, not here.
    feature_gates: dict[str, bool] = field(default_factory=lambda: {"VisibilityOnDemand": False})
    #: Serve Kueue's visibility API (``visibility.kueue.x-k8s.io``, feature gate VisibilityOnDemand) through the
    #: kube-apiserver's aggregator: Kueue's visibility server on 127.0.0.1:<free port> with the cert in
    #: KUEUE_VISIBILITY_CERT_DIR, an APIService + ExternalName Service registered once it is up. Off by default
    #: (it adds start-up time, see docs/local-cluster.md); on in the tests that read the API.
    visibility: bool = False
    frameworks: list[str] = field(default_factory=lambda: ["batch/job"])
    #: waitForPodsReady.requeuingStrategy (None: Kueue's default, timestamp Eviction, base 60s, max 1h).
    pods_ready_requeuing_strategy: dict[str, Any] | None = None
    #: managedJobsNamespaceSelector: the release default excludes kube-system and Kueue's namespace;
    #: namespaces labelled ``kueue-doctor.test/unmanaged`` are excluded too, so a test can make a
    #: namespace Kueue does not manage (no other namespace carries the label).
    managed_jobs_namespace_selector: dict[str, Any] | None = field(
        default_factory=lambda: {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", KUEUE_NAMESPACE]},
                {"key": UNMANAGED_NAMESPACE_LABEL, "operator": "DoesNotExist"},
            ]
        }
    )
    #: --zap-log-level of the manager (2 = what the release manifests use).
    log_level: str = "2"
    #: extra top-level keys merged into the Configuration (advanced).
    extra_config: dict[str, Any] = field(default_factory=dict)

    def configuration(self, *, health_port: int, webhook_port: int, cert_dir: Path,
                      visibility_port: int | None = None) -> dict[str, Any]:
        """The Kueue ``Configuration`` (config.kueue.x-k8s.io/v1beta2) these settings give."""
        wfpr: dict[str, Any] = {"timeout": self.wait_for_pods_ready_timeout, "blockAdmission": False}
        if self.pods_ready_requeuing_strategy is not None:
            wfpr["requeuingStrategy"] = dict(self.pods_ready_requeuing_strategy)
        cfg: dict[str, Any] = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "manageJobsWithoutQueueName": False,
            "leaderElection": {"leaderElect": False},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": list(self.frameworks)},
            "featureGates": {**self.feature_gates, "VisibilityOnDemand": self.visibility},
            "waitForPodsReady": wfpr,
        }
        if self.visibility:
            if visibility_port is None:
                raise ValueError("KueueSettings.visibility needs a port for the visibility server")
            cfg["visibilityServer"] = {"bindAddress": "127.0.0.1", "bindPort": visibility_port}
        if self.managed_jobs_namespace_selector is not None:
            cfg["managedJobsNamespaceSelector"] = self.managed_jobs_namespace_selector
        cfg.update(self.extra_config)
        return cfg


def _publish_cert(cert_dir: Path, fixed: Path, what: str) -> None:
    """Copy tls.crt/tls.key from `cert_dir` to a fixed path Kueue reads (atomically: another cluster may read it)."""
    try:
        fixed.mkdir(parents=True, exist_ok=True)
        for fname in ("tls.crt", "tls.key"):
            tmp = fixed / f".{fname}.{os.getpid()}"
            shutil.copyfile(cert_dir / fname, tmp)
            os.replace(tmp, fixed / fname)
    except PermissionError as exc:
        raise ClusterStartError(
            f"cannot write {fixed} ({exc}). Kueue {read_versions().get('KUEUE_VERSION')} reads {what} certificate "
            "from that fixed path whenever internal cert management is off; run as root or create the directory "
            "writable for this user."
        ) from exc


def _create_flavor_and_cluster_queue(api: Any, name: str, nominal_cpu: str,
                                     namespace_selector: dict[str, Any] | None = None) -> None:
    """A ResourceFlavor and a ClusterQueue of that name with `nominal_cpu` cpu (through Kueue's webhooks)."""
    k = "/apis/kueue.x-k8s.io/v1beta2"
    kv = {"apiVersion": "kueue.x-k8s.io/v1beta2"}
    request_json(api, "POST", f"{k}/resourceflavors", {**kv, "kind": "ResourceFlavor", "metadata": {"name": name}})
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": name, "resources": [{"name": "cpu", "nominalQuota": nominal_cpu}]}]}]}
    if namespace_selector is not None:
        spec = {"namespaceSelector": namespace_selector, **spec}
    request_json(api, "POST", f"{k}/clusterqueues", {**kv, "kind": "ClusterQueue", "metadata": {"name": name},
                                                      "spec": spec})


def _cluster_queue_active(api: Any, name: str) -> bool:
    cq = request_json(api, "GET", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}")
    return any(c["type"] == "Active" and c["status"] == "True" for c in cq.get("status", {}).get("conditions", []))


class LocalCluster:
    """A local control plane: etcd, kube-apiserver, KCM, kube-scheduler, Kueue, fake kubelet.

    Attributes after :meth:`start`: ``kubeconfig`` (admin), ``api_url``, ``ca_cert``,
    ``ca_key``, ``audit_log``, ``ports``, ``workdir``, ``components``.
    """

    def __init__(
        self,
        workdir: Path | str | None = None,
        *,
        bin_dir: Path | str | None = None,
        kueue: KueueSettings | None = None,
        fake_kubelet: bool = True,
        canary: bool = True,
        jobset_crd: bool = True,
        verbose: bool = False,
        apiserver_args: Iterable[str] = (),
    ) -> None:
        self._own_workdir = workdir is None
        self.apiserver_args = tuple(apiserver_args)  # appended last, so they win (a bench: "--profiling=true")
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="kueue-doctor-cp-"))
        self.bin_dir = Path(bin_dir) if bin_dir else None
        self.kueue = kueue or KueueSettings()
        self.want_fake_kubelet = fake_kubelet
        self.want_canary = canary
        self.want_jobset_crd = jobset_crd
        self._webhook_configs: list[tuple[str, str]] = []
        self._kueue_serving: CertPair | None = None
        self._kueue_kubeconfig: Path | None = None
        self._visibility_registered = False  # the APIService and Service of Kueue's visibility API exist
        self.verbose = verbose
        self.components: dict[str, Component] = {}
        self.ports: dict[str, int] = {}
        self.pki: PKI | None = None
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.audit_log = self.workdir / "audit.log"
        self.ca_cert = self.workdir / "pki" / "ca.crt"
        self.ca_key = self.workdir / "pki" / "ca.key"
        self.api_url = ""
        self.admin_user = ADMIN_USER
        self.timings: dict[str, float] = {}
        self.fake_kubelet: FakeKubelet | None = None
        self._api: Any = None
        self._started = False
        self._keep_workdir = False
        self._atexit_registered = False
        self._lock = threading.Lock()

    # ---- context manager -------------------------------------------------------------------
    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- public helpers --------------------------------------------------------------------
    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` authenticated as the admin (system:masters)."""
        return new_api_client(self.kubeconfig)

    @property
    def api(self) -> Any:
        """A shared admin ApiClient (created on first use)."""
        if self._api is None:
            self._api = self.api_client()
        return self._api

    def pids(self) -> dict[str, int]:
        return {name: c.pid for name, c in self.components.items() if c.pid is not None}

    def check_alive(self) -> None:
        """Raise :class:`ControlPlaneError` (with logs) if a component died."""
        for comp in self.components.values():
            if not comp.alive():
                raise ControlPlaneError(comp.describe_failure(f"control-plane component {comp.name} died"))
        if self.fake_kubelet is not None and not self.fake_kubelet.is_alive():
            raise ControlPlaneError(
                f"the fake kubelet thread stopped; see {self.workdir / 'fake-kubelet.log'}"
            )

    def start_component(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        """Start one more child process (a controller next to Kueue); ``check_alive`` watches it from now on."""
        return self._add(name, argv, env)

    def stop_component(self, name: str) -> None:
        """Stop a child started by :meth:`start_component` and forget it (no-op when unknown)."""
        comp = self.components.pop(name, None)
        if comp is not None:
            comp.stop()

    def logs(self, component: str, lines: int = LOG_TAIL_LINES) -> str:
        return self.components[component].tail(lines)

    def describe(self) -> dict[str, Any]:
        """What ``hack/local-cluster`` records in its state file."""
        return {
            "workdir": str(self.workdir),
            "kubeconfig": str(self.kubeconfig),
            "api_url": self.api_url,
            "audit_log": str(self.audit_log),
            "ca_cert": str(self.ca_cert),
            "ports": self.ports,
            "pids": self.pids(),
            "logs": {name: str(c.log_path) for name, c in self.components.items()},
            "bin_dir": str(self.bin_dir),
            "timings": self.timings,
        }

    def make_user_kubeconfig(self, user: str, groups: Iterable[str] = (), path: Path | None = None) -> Path:
        """A kubeconfig for ``user`` (client certificate signed by the cluster CA), no RBAC given."""
        if self.pki is None:
            raise ControlPlaneError("the cluster is not started")
        stem = "user-" + "".join(ch if ch.isalnum() else "-" for ch in user)
        pair = self.pki.issue(stem, user, organizations=groups, client=True)
        return write_kubeconfig(
            path or self.workdir / f"{stem}.kubeconfig", self.api_url, self.pki.ca_pem, pair, user
        )

    # ---- audit -----------------------------------------------------------------------------
    def audit_events(self) -> list[dict[str, Any]]:
        """All audit events so far (only writes are logged, stage ResponseComplete/Panic)."""
        events: list[dict[str, Any]] = []
        try:
            text = self.audit_log.read_text()
        except FileNotFoundError:
            return events
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:  # a line being written right now
                continue
        return events

    def writes_by_user(self, username: str) -> list[dict[str, Any]]:
        """Audit events of write requests (create/update/patch/delete/deletecollection) by a user."""
        return [e for e in self.audit_events() if e.get("user", {}).get("username") == username]

    # ---- nodes -----------------------------------------------------------------------------
    def create_node(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Mapping[str, str]] = (),
        cpu: str = "4",
        memory: str = "16Gi",
        pods: str = "110",
        extra_capacity: Mapping[str, str] | None = None,
        unschedulable: bool = False,
        api_client: Any = None,
    ) -> dict[str, Any]:
        """Create a fake Node (Ready, given capacity) that the fake kubelet serves.

        ``taints`` are dicts like ``{"key": "pool", "value": "gpu", "effect": "NoSchedule"}``.
        Works against any cluster reachable by ``api_client`` (default: this cluster's admin).
        """
        return create_fake_node(
            api_client or self.api,
            name,
            labels=labels,
            taints=taints,
            cpu=cpu,
            memory=memory,
            pods=pods,
            extra_capacity=extra_capacity,
            unschedulable=unschedulable,
        )

    def delete_node(self, name: str) -> None:
        from kubernetes.client import ApiException

        try:
            request_json(self.api, "DELETE", f"/api/v1/nodes/{name}")
        except ApiException as exc:
            if exc.status != 404:
                raise

    # ---- start / stop ------------------------------------------------------------------------
    def start(self, attempts: int = 3) -> None:
        """Start everything and wait until Kueue admits work. Raises :class:`ClusterStartError`."""
        with self._lock:
            if self._started:
                return
            if self.bin_dir is None:
                self.bin_dir = find_bin_dir()
            missing = [b for b in REQUIRED_BINARIES if not (self.bin_dir / b).is_file()]
            if missing:
                raise BinariesNotBuilt(f"{self.bin_dir} lacks {', '.join(missing)}; run {BUILD_COMMAND}")
            if not self._atexit_registered:
                atexit.register(self.stop)
                self._atexit_registered = True
            t0 = time.monotonic()
            self._keep_workdir = True  # a failed start keeps its logs for the post-mortem
            for attempt in range(1, attempts + 1):
                try:
                    self._start_once()
                    break
                except ClusterStartError as exc:
                    port_clash = any(
                        "address already in use" in c.tail(200) for c in self.components.values()
                    )
                    self._stop_processes()
                    if not port_clash or attempt == attempts:
                        raise
                    self._log(f"port clash on attempt {attempt} ({exc.args[0].splitlines()[0]}); retrying")
                    self._reset_workdir()
                except Exception as exc:  # an API call failed: say where, with the logs
                    tails = "\n".join(c.describe_failure(f"--- {c.name}") for c in self.components.values())
                    self._stop_processes()
                    raise ClusterStartError(
                        f"cluster start failed: {type(exc).__name__}: {exc}\n{tails}"
                    ) from exc
                except BaseException:
                    self._stop_processes()
                    raise
            self.timings["total"] = round(time.monotonic() - t0, 2)
            self._started = True
            self._keep_workdir = False
            self._log(f"cluster ready in {self.timings['total']}s: {self.api_url} (timings {self.timings})")

    def stop(self) -> None:
        """Stop every process this object started (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        with self._lock:
            self._stop_processes()
            self._started = False
            if self._own_workdir and not self._keep_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- internals ---------------------------------------------------------------------------
    def _log(self, msg: str) -> None:
        line = f"[localcluster {time.strftime('%H:%M:%S')}] {msg}"
        with contextlib.suppress(OSError), (self.workdir / "localcluster.log").open("a") as fh:
            fh.write(line + "\n")
        if self.verbose:
            print(line, flush=True)

    def _stop_processes(self) -> None:
        if self.fake_kubelet is not None:
            self.fake_kubelet.stop()
            self.fake_kubelet.join(timeout=5)
            self.fake_kubelet = None
        if self._api is not None:
            with contextlib.suppress(Exception):
                self._api.close()
            self._api = None
        for comp in reversed(list(self.components.values())):
            comp.stop()

    def _reset_workdir(self) -> None:
        for sub in ("etcd", "kcm", "scheduler", "kueue-certs"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        self.components.clear()
        self._webhook_configs.clear()
        self._visibility_registered = False

    def _timed(self, step: str, t0: float) -> None:
        self.timings[step] = round(time.monotonic() - t0, 2)

    def _wait(
        self,
        what: str,
        check: Callable[[], bool],
        timeout: float,
        watch: Iterable[Component],
        interval: float = 0.25,
    ) -> None:
        watch = list(watch)
        deadline = time.monotonic() + timeout
        last: str | None = None
        while True:
            for comp in watch:
                if not comp.alive():
                    raise ClusterStartError(
                        comp.describe_failure(f"while waiting for {what}: {comp.name} died")
                    )
            try:
                if check():
                    return
            except Exception as exc:  # keep polling; report the last error on timeout
                last = repr(exc)
            else:
                last = None
            if time.monotonic() > deadline:
                detail = f" (last error: {last})" if last else ""
                msgs = [f"timed out after {timeout:.0f}s waiting for {what}{detail}"]
                msgs += [c.describe_failure(f"--- {c.name}") for c in watch]
                raise ClusterStartError("\n".join(msgs))
            time.sleep(interval)

    def _add(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Component:
        comp = Component(name, argv, self.workdir / "logs" / f"{name}.log", env or {})
        self.components[name] = comp
        comp.start()
        self._log(f"started {name} pid {comp.pid}")
        return comp

    def _start_once(self) -> None:
        assert self.bin_dir is not None
        b = self.bin_dir
        d = self.workdir
        d.mkdir(parents=True, exist_ok=True)
        (d / "logs").mkdir(exist_ok=True)
        names = ["etcd", "etcd_peer", "apiserver", "kcm", "scheduler", "kueue_webhook", "kueue_health",
                 "kueue_visibility"]
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        p = self.ports
        self.api_url = f"https://127.0.0.1:{p['apiserver']}"

        # -- certificates and kubeconfigs
        t = time.monotonic()
        pki = self.pki = PKI(d / "pki")
        api_pair = pki.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
            ips=["127.0.0.1", "10.0.0.1"],
        )
        sa_key = pki.service_account_key()
        kubeconfigs: dict[str, Path] = {}
        for stem, user in (
            ("admin", ADMIN_USER),
            ("kcm", KCM_USER),
            ("scheduler", SCHEDULER_USER),
            ("kueue", KUEUE_USER),
            ("fake-kubelet", FAKE_KUBELET_USER),
        ):
            pair = pki.issue(f"{stem}-client", user, organizations=["system:masters"], client=True)
            kubeconfigs[stem] = write_kubeconfig(
                d / f"{stem}.kubeconfig", self.api_url, pki.ca_pem, pair, user
            )
        self.kubeconfig = kubeconfigs["admin"]
        kueue_pair = pki.issue(
            "kueue-serving", "kueue-webhook", server=True, dns_names=["localhost"], ips=["127.0.0.1"]
        )
        # the aggregator's client certificate towards Kueue's visibility server (requestheader authn)
        front_proxy = pki.issue("front-proxy-client", FRONT_PROXY_CLIENT, client=True)
        self._timed("certs", t)

        # -- etcd
        t = time.monotonic()
        etcd = self._add(
            "etcd",
            [
                str(b / "etcd"),
                "--name=default",
                f"--data-dir={d / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
                f"--listen-peer-urls=http://127.0.0.1:{p['etcd_peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd_peer']}",
                f"--initial-cluster=default=http://127.0.0.1:{p['etcd_peer']}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )

        def etcd_healthy() -> bool:
            res = http_get(f"http://127.0.0.1:{p['etcd']}/health")
            return res is not None and res[0] == 200 and '"health":"true"' in res[1].replace(" ", "")

        self._wait("etcd /health", etcd_healthy, 20, [etcd])
        self._timed("etcd", t)

        # -- kube-apiserver
        t = time.monotonic()
        (d / "audit-policy.yaml").write_text(AUDIT_POLICY)
        apiserver = self._add(
            "kube-apiserver",
            [
                str(b / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                f"--tls-cert-file={api_pair.cert}",
                f"--tls-private-key-file={api_pair.key}",
                f"--client-ca-file={pki.ca.cert}",
                # front-proxy settings as kubeadm sets them: the aggregator proxies to Kueue's
                # visibility server (KueueSettings.visibility) with this client certificate and
                # X-Remote-* headers; they also let KCM/scheduler delegated authn find a CA bundle
                f"--requestheader-client-ca-file={pki.ca.cert}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                f"--proxy-client-cert-file={front_proxy.cert}",
                f"--proxy-client-key-file={front_proxy.key}",
                "--enable-aggregator-routing=false",  # APIService -> Service resolution (ExternalName)
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--service-account-issuer={self.api_url}",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                # KEP-5866's sharded list and watch (alpha in v1.36, off by default): served here so that the
                # namespace shards' --shard-boundaries are tested as the apiserver narrows them; a request
                # without a shardSelector is served as before
                "--feature-gates=ShardedListAndWatch=true",
                f"--audit-policy-file={d / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxbackup=0",
                "--v=1",
                *self.apiserver_args,
            ],
        )
        api_ctx = ssl.create_default_context(cafile=str(pki.ca.cert))

        def api_ready() -> bool:
            res = http_get(f"{self.api_url}/readyz", api_ctx)
            return res is not None and res[0] == 200

        self._wait("kube-apiserver /readyz", api_ready, 120, [etcd, apiserver])
        self._timed("kube-apiserver", t)

        # -- kube-scheduler (it needs no CRD), meanwhile the namespace and the CRDs
        t = time.monotonic()
        sched_cfg = d / "scheduler.yaml"
        sched_cfg.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(kubeconfigs["scheduler"])},
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        scheduler = self._add(
            "kube-scheduler",
            [
                str(b / "kube-scheduler"),
                f"--config={sched_cfg}",
                f"--authentication-kubeconfig={kubeconfigs['scheduler']}",
                f"--authorization-kubeconfig={kubeconfigs['scheduler']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['scheduler']}",
                f"--cert-dir={d / 'scheduler'}",
                "--v=1",
            ],
        )
        # The CRDs before kube-controller-manager: its garbage collector builds its
        # monitors from discovery at start and only re-reads it every 30 s, so CRDs created after
        # it started are invisible to it for up to 30 s (a Job deleted with propagationPolicy
        # Orphan in that window leaves its Workload un-orphaned, then the GC deletes it). In a real
        # cluster the CRDs exist long before; so here too.
        api = self.api
        request_json(api, "POST", "/api/v1/namespaces", {"metadata": {"name": KUEUE_NAMESPACE}})
        crd_names = self._install_crds(api)
        jobset_crd = self._install_jobset_crd(api) if self.want_jobset_crd else None
        self._wait_crds(api, crd_names, [etcd, apiserver])
        if jobset_crd is not None:
            self._wait_jobset_crd(api, jobset_crd, [etcd, apiserver])
        self._timed("crds", t)

        # -- kube-controller-manager (the scheduler started above)
        t = time.monotonic()
        kcm = self._add(
            "kube-controller-manager",
            [
                str(b / "kube-controller-manager"),
                f"--kubeconfig={kubeconfigs['kcm']}",
                f"--authentication-kubeconfig={kubeconfigs['kcm']}",
                f"--authorization-kubeconfig={kubeconfigs['kcm']}",
                "--controllers=job-controller,garbage-collector-controller,namespace-controller,"
                "pod-garbage-collector-controller,ttl-after-finished-controller,"
                # for Kueue's deployment/statefulset integrations (tests/e2e/test_family_pods.py)
                "deployment-controller,replicaset-controller,statefulset-controller,"
                # its Warnings on a claim it cannot bind (tests/e2e/test_scheduling_causes.py)
                "persistentvolume-binder-controller",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={pki.ca.cert}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['kcm']}",
                f"--cert-dir={d / 'kcm'}",
                "--v=1",
            ],
        )
        insecure = _insecure_context()

        def kcm_ok() -> bool:
            res = http_get(f"https://127.0.0.1:{p['kcm']}/healthz", insecure)
            return res is not None and res[0] == 200

        def sched_ok() -> bool:
            res = http_get(f"https://127.0.0.1:{p['scheduler']}/readyz", insecure)
            return res is not None and res[0] == 200

        self._wait("kube-controller-manager /healthz", kcm_ok, 90, [etcd, apiserver, kcm])
        self._wait("kube-scheduler /readyz", sched_ok, 90, [etcd, apiserver, scheduler])
        self._timed("kcm+scheduler", t)

        # -- Kueue manager
        t = time.monotonic()
        self._kueue_serving, self._kueue_kubeconfig = kueue_pair, kubeconfigs["kueue"]
        kueue = self._start_kueue(kueue_pair, kubeconfigs["kueue"])
        core = [etcd, apiserver, kcm, scheduler]
        self._wait("kueue /readyz", self._kueue_ready, 120, [*core, kueue])
        self._register_webhooks(api, pki.ca_pem)
        self._timed("kueue", t)
        if self.kueue.visibility:
            t = time.monotonic()
            self._sync_visibility_api(api, [*core, kueue])
            self._timed("visibility", t)

        if self.want_fake_kubelet:
            self.fake_kubelet = FakeKubelet(kubeconfigs["fake-kubelet"], d / "logs" / "fake-kubelet.log")
            self.fake_kubelet.start()

        if self.want_canary:
            t = time.monotonic()
            self._canary(api, [*core, kueue])
            self._timed("canary", t)

    def _kueue_ready(self) -> bool:
        res = http_get(f"http://127.0.0.1:{self.ports['kueue_health']}/readyz")
        return res is not None and res[0] == 200

    # ---- Kueue restarts ------------------------------------------------------------------------
    def restart_kueue(self, kueue: KueueSettings | None = None, timeout: float = 120) -> None:
        """Restart the Kueue manager (with other settings, if given), as a redeploy would.

        The webhook configurations are deleted first (failurePolicy Fail: while Kueue is down
        they would reject every Job and Kueue-object write) and registered again once Kueue is
        ready; the ConfigMap ``kueue-manager-config`` gets the new Configuration. Returns once
        Kueue reconciles again (a ClusterQueue turns Active). The caller restores the settings.
        """
        with self._lock:
            if not self._started:
                raise ControlPlaneError("the cluster is not started")
            t = time.monotonic()
            api = self.api
            if kueue is not None:
                self.kueue = kueue
            self._unregister_webhooks(api)
            old = self.components.pop("kueue", None)
            if old is not None:
                old.stop()
            assert self._kueue_serving is not None and self._kueue_kubeconfig is not None
            comp = self._start_kueue(self._kueue_serving, self._kueue_kubeconfig)
            core = [c for n, c in self.components.items() if n != "kueue"]
            self._wait("kueue /readyz after restart", self._kueue_ready, timeout, [*core, comp])
            assert self.pki is not None
            self._register_webhooks(api, self.pki.ca_pem)
            self._wait_kueue_reconciles(api, [*core, comp], timeout)
            self._sync_visibility_api(api, [*core, comp], timeout)
            self.timings["last-kueue-restart"] = round(time.monotonic() - t, 2)
            self._log(f"kueue restarted in {self.timings['last-kueue-restart']}s")

    def _unregister_webhooks(self, api: Any) -> None:
        from kubernetes.client import ApiException

        for plural, name in self._webhook_configs:
            try:
                request_json(api, "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
            except ApiException as exc:
                if exc.status != 404:
                    raise
        self._webhook_configs.clear()

    def _wait_kueue_reconciles(self, api: Any, watch: list[Component], timeout: float) -> None:
        """A ResourceFlavor and a ClusterQueue (through the webhooks); wait for Active=True; delete."""
        k = "/apis/kueue.x-k8s.io/v1beta2"
        name = f"kueue-doctor-restart-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        _create_flavor_and_cluster_queue(api, name, nominal_cpu="0")
        self._wait("the restarted Kueue to activate a ClusterQueue", lambda: _cluster_queue_active(api, name),
                   timeout, watch)
        request_json(api, "DELETE", f"{k}/clusterqueues/{name}")
        request_json(api, "DELETE", f"{k}/resourceflavors/{name}")

    # ---- CRDs ----------------------------------------------------------------------------------
    def _install_jobset_crd(self, api: Any) -> str:
        path = jobset_crd_path(self.workdir)
        with path.open() as fh:
            crd = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        request_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        self._log(f"installed the JobSet CRD from {path}")
        return str(crd["metadata"]["name"])

    def _wait_jobset_crd(self, api: Any, name: str, watch: list[Component]) -> None:
        def served() -> bool:
            crd = request_json(api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
            if conds.get("Established") != "True":
                return False
            res = request_json(api, "GET", "/apis/jobset.x-k8s.io/v1alpha2")
            return any(r["name"] == "jobsets" for r in res.get("resources", []))

        self._wait("JobSet CRD Established and served", served, 60, watch)

    def _install_crds(self, api: Any) -> list[str]:
        assert self.bin_dir is not None
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        names = []
        files = sorted((self.bin_dir / "kueue-crds").glob("*.yaml"))
        if not files:
            raise BinariesNotBuilt(f"no Kueue CRDs in {self.bin_dir / 'kueue-crds'}; rerun {BUILD_COMMAND}")
        for path in files:
            with path.open() as fh:
                crd = yaml.load(fh, Loader=loader)
            request_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            names.append(crd["metadata"]["name"])
        return names

    def _wait_crds(self, api: Any, names: list[str], watch: list[Component]) -> None:
        def established() -> bool:
            for name in names:
                crd = request_json(
                    api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
                if conds.get("Established") != "True":
                    return False
            return True

        def discovered() -> bool:
            res = request_json(api, "GET", "/apis/kueue.x-k8s.io/v1beta2")
            served = {r["name"] for r in res.get("resources", []) if "/" not in r["name"]}
            return all(n.split(".", 1)[0] in served for n in names)

        self._wait("Kueue CRDs Established", established, 60, watch)
        self._wait("Kueue API discovery (kueue.x-k8s.io/v1beta2)", discovered, 60, watch)

    # ---- Kueue -------------------------------------------------------------------------------
    def _start_kueue(self, serving: CertPair, kubeconfig: Path) -> Component:
        assert self.bin_dir is not None
        d = self.workdir
        p = self.ports
        cert_dir = d / "kueue-certs"
        cert_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(serving.cert, cert_dir / "tls.crt")
        shutil.copyfile(serving.key, cert_dir / "tls.key")
        _publish_cert(cert_dir, KUEUE_METRICS_CERT_DIR, "its metrics")
        if self.kueue.visibility:
            _publish_cert(cert_dir, KUEUE_VISIBILITY_CERT_DIR, "the visibility server's")
        cfg = self.kueue.configuration(
            health_port=p["kueue_health"], webhook_port=p["kueue_webhook"], cert_dir=cert_dir,
            visibility_port=p["kueue_visibility"],
        )
        cfg_path = d / "kueue-config.yaml"
        cfg_text = yaml.safe_dump(cfg, sort_keys=False)
        cfg_path.write_text(cfg_text)
        self._publish_kueue_config(cfg_text)
        return self._add(
            "kueue",
            [
                str(self.bin_dir / "kueue"),
                f"--config={cfg_path}",
                # the flag, not only $KUBECONFIG: the visibility server delegates authn/authz through the
                # kubeconfig of this flag (pkg/visibility/server.go), else it wants in-cluster config
                f"--kubeconfig={kubeconfig}",
                f"--zap-log-level={self.kueue.log_level}",
                "--zap-encoder=console",
            ],
            env={"KUBECONFIG": str(kubeconfig)},
        )

    def _sync_visibility_api(self, api: Any, watch: list[Component], timeout: float = 60) -> None:
        """Register Kueue's visibility API with the aggregator when KueueSettings.visibility, and wait until the
        kube-apiserver serves it; remove the registration otherwise (a Kueue restarted without it)."""
        from kubernetes.client import ApiException

        apiservice = f"/apis/apiregistration.k8s.io/v1/apiservices/{VISIBILITY_APISERVICE}"
        service = f"/api/v1/namespaces/{KUEUE_NAMESPACE}/services"
        if not self.kueue.visibility:
            if not self._visibility_registered:
                return
            self._visibility_registered = False
            for path in (apiservice, f"{service}/{VISIBILITY_SERVICE}"):
                try:
                    request_json(api, "DELETE", path)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            return
        port = self.ports["kueue_visibility"]
        self._visibility_registered = True
        bodies = [
            (service, {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": VISIBILITY_SERVICE, "namespace": KUEUE_NAMESPACE},
                       "spec": {"type": "ExternalName", "externalName": "localhost"}}),
            ("/apis/apiregistration.k8s.io/v1/apiservices",
             {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
              "metadata": {"name": VISIBILITY_APISERVICE},
              "spec": {"group": VISIBILITY_GROUP, "version": "v1beta2", "groupPriorityMinimum": 100,
                       "versionPriority": 100, "insecureSkipTLSVerify": True,
                       "service": {"namespace": KUEUE_NAMESPACE, "name": VISIBILITY_SERVICE, "port": port}}}),
        ]
        for path, body in bodies:
            try:
                request_json(api, "POST", path, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                request_json(api, "PATCH", f"{path}/{body['metadata']['name']}", {"spec": body["spec"]},
                             content_type="application/merge-patch+json")

        def served() -> bool:
            svc = request_json(api, "GET", apiservice)
            conds = {c["type"]: c for c in svc.get("status", {}).get("conditions", [])}
            if conds.get("Available", {}).get("status") != "True":
                raise ControlPlaneError(f"APIService {VISIBILITY_APISERVICE} not Available: "
                                        f"{conds.get('Available', {}).get('message')}")
            res = request_json(api, "GET", f"/apis/{VISIBILITY_GROUP}/v1beta2")
            return any(r["name"] == "clusterqueues/pendingworkloads" for r in res.get("resources", []))

        self._wait(f"the aggregator to serve {VISIBILITY_GROUP}/v1beta2 (Kueue on 127.0.0.1:{port})", served,
                   timeout, watch, interval=0.1)
        self._log(f"{VISIBILITY_GROUP}/v1beta2 served through the aggregator (Kueue on 127.0.0.1:{port})")

    def _publish_kueue_config(self, text: str) -> None:
        """ConfigMap kueue-manager-config (as the release manifests have it) = the file Kueue reads."""
        from kubernetes.client import ApiException

        path = f"/api/v1/namespaces/{KUEUE_NAMESPACE}/configmaps"
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": KUEUE_CONFIG_MAP,
                "namespace": KUEUE_NAMESPACE,
                "labels": {"app.kubernetes.io/name": "kueue", "control-plane": "controller-manager"},
            },
            "data": {KUEUE_CONFIG_MAP_KEY: text},
        }
        try:
            request_json(self.api, "POST", path, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            request_json(self.api, "PUT", f"{path}/{KUEUE_CONFIG_MAP}", body)

    def _register_webhooks(self, api: Any, ca_pem: bytes) -> None:
        """Register Kueue's webhooks by URL (127.0.0.1) and the CRD conversion webhook."""
        assert self.bin_dir is not None
        ca_b64 = base64.b64encode(ca_pem).decode()
        base_url = f"https://127.0.0.1:{self.ports['kueue_webhook']}"
        manifest = self.bin_dir / "kueue-webhook" / "manifests.yaml"
        ns_selector = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", KUEUE_NAMESPACE],
                }
            ]
        }
        wanted_groups = {"kueue.x-k8s.io"}
        wanted_other = {pair for fw in self.kueue.frameworks for pair in FRAMEWORK_WEBHOOK_RESOURCES.get(fw, ())}
        # Pod-based integrations (pod, deployment, statefulset) gate every Pod of a namespace they select: only
        # namespaces labelled POD_INTEGRATION_LABEL, so no other test's Pods ever go through Kueue's pod webhook.
        pod_ns_selector = {"matchExpressions": [*ns_selector["matchExpressions"],
                                                {"key": POD_INTEGRATION_LABEL, "operator": "Exists"}]}
        with manifest.open() as fh:
            docs = [doc for doc in yaml.safe_load_all(fh) if doc]
        for doc in docs:
            kind = doc["kind"]
            webhooks = []
            for wh in doc.get("webhooks", []):
                rules = wh.get("rules", [])
                groups = {g for r in rules for g in r.get("apiGroups", [])}
                pairs = {
                    (g, res) for r in rules for g in r.get("apiGroups", []) for res in r.get("resources", [])
                }
                is_kueue = bool(groups & wanted_groups)
                if not is_kueue and not (pairs & wanted_other):
                    continue
                path = wh["clientConfig"]["service"]["path"]
                wh["clientConfig"] = {"url": base_url + path, "caBundle": ca_b64}
                if not is_kueue:
                    wh["namespaceSelector"] = pod_ns_selector if pairs & POD_BASED_RESOURCES else ns_selector
                webhooks.append(wh)
            plural = (
                "mutatingwebhookconfigurations"
                if kind.startswith("Mutating")
                else "validatingwebhookconfigurations"
            )
            body = {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": "kueue-" + doc["metadata"]["name"]},
                "webhooks": webhooks,
            }
            request_json(api, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", body)
            self._webhook_configs.append((plural, body["metadata"]["name"]))
            self._log(f"registered {kind} with {len(webhooks)} webhooks: {[w['name'] for w in webhooks]}")
        for name in KUEUE_CONVERSION_CRDS:
            patch = {
                "spec": {
                    "conversion": {
                        "strategy": "Webhook",
                        "webhook": {
                            "conversionReviewVersions": ["v1"],
                            "clientConfig": {"url": base_url + "/convert", "caBundle": ca_b64},
                        },
                    }
                }
            }
            request_json(
                api,
                "PATCH",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}",
                patch,
                content_type="application/merge-patch+json",
            )

    def _canary(self, api: Any, watch: list[Component]) -> None:
        """RF + CQ + LQ + a tiny Job: wait until Kueue admits it, then delete everything."""
        ns = "kueue-doctor-canary"
        name = "kueue-doctor-canary"
        k = "/apis/kueue.x-k8s.io/v1beta2"
        request_json(api, "POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
        kv = {"apiVersion": "kueue.x-k8s.io/v1beta2"}
        _create_flavor_and_cluster_queue(api, name, nominal_cpu="1",
                                         namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": ns}})
        request_json(
            api,
            "POST",
            f"{k}/namespaces/{ns}/localqueues",
            {**kv, "kind": "LocalQueue", "metadata": {"name": "canary"}, "spec": {"clusterQueue": name}},
        )

        self._wait("canary ClusterQueue Active=True", lambda: _cluster_queue_active(api, name), 60, watch)
        job = request_json(
            api,
            "POST",
            f"/apis/batch/v1/namespaces/{ns}/jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "canary", "labels": {"kueue.x-k8s.io/queue-name": "canary"}},
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            # never schedulable: the canary pod must not land on a fake node
                            "nodeSelector": {"kueue-doctor.local/canary": "never"},
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "10m"}},
                                }
                            ],
                        }
                    },
                },
            },
        )
        if not job["spec"].get("suspend"):
            raise ClusterStartError(
                "Kueue's mutating webhook did not suspend a Job with the kueue.x-k8s.io/queue-name label; "
                f"check the webhook registration and {self.components['kueue'].log_path}"
            )
        job_uid = job["metadata"]["uid"]

        def admitted() -> bool:
            wls = request_json(api, "GET", f"{k}/namespaces/{ns}/workloads")
            for wl in wls.get("items", []):
                owners = wl["metadata"].get("ownerReferences", [])
                if not any(o.get("uid") == job_uid for o in owners):
                    continue
                conds = {c["type"]: c["status"] for c in wl.get("status", {}).get("conditions", [])}
                if conds.get("Admitted") == "True":
                    return True
            return False

        self._wait("Kueue to admit the canary Job's Workload", admitted, 60, watch)
        request_json(
            api, "DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/canary", {"propagationPolicy": "Background"}
        )
        request_json(api, "DELETE", f"{k}/namespaces/{ns}/localqueues/canary")
        request_json(api, "DELETE", f"{k}/clusterqueues/{name}")
        request_json(api, "DELETE", f"{k}/resourceflavors/{name}")
        request_json(api, "DELETE", f"/api/v1/namespaces/{ns}")


def create_fake_node(
    api: Any,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    extra_capacity: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """Create a Ready fake Node through the API (a Node create keeps the status it is sent)."""
    now = _now_rfc3339()
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extra_capacity or {})}
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        FAKE_NODE_LABEL: "true",
        **(labels or {}),
    }
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHas{r}",
            "message": "fake",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for t, r in (
            ("MemoryPressure", "SufficientMemory"),
            ("DiskPressure", "NoDiskPressure"),
            ("PIDPressure", "SufficientPID"),
        )
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "fake kubelet is posting ready status",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
    )
    status = {
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": conditions,
        "addresses": [{"type": "Hostname", "address": name}],
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "kubeletVersion": read_versions().get("K8S_VERSION", "v0.0.0"),
            "containerRuntimeVersion": "fake://0",
            "kernelVersion": "",
            "osImage": "fake",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": {FAKE_NODE_LABEL: "true"}},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": status,
    }
    node: dict[str, Any] = request_json(api, "POST", "/api/v1/nodes", body)
    if not node.get("status", {}).get("conditions"):
        node = request_json(
            api,
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )
    return node


# --------------------------------------------------------------------------------------------
# CRDs of the modules Kueue depends on (ProvisioningRequest), installed on demand by tests

KUEUE_MODULE = "sigs.k8s.io/kueue"
PROVISIONING_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
PROVISIONING_CRD_PATH = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"


def kueue_requirement(module: str, workdir: Path | None = None) -> str:
    """The version of ``module`` that Kueue's go.mod (the pinned KUEUE_VERSION) requires."""
    kueue = read_versions().get("KUEUE_VERSION")
    if not kueue:
        raise ControlPlaneError(f"KUEUE_VERSION missing in {VERSIONS_FILE}")
    gomod = go_module_dir(KUEUE_MODULE, kueue, workdir=workdir) / "go.mod"
    for line in gomod.read_text().splitlines():
        parts = line.split()
        if parts[:1] == ["require"]:
            parts = parts[1:]
        if len(parts) >= 2 and parts[0] == module:
            return parts[1]
    raise ControlPlaneError(f"{gomod} does not require {module}")


def provisioning_request_crd_path(workdir: Path | None = None) -> Path:
    """The ProvisioningRequest CRD of the cluster-autoscaler apis module, at the version Kueue requires."""
    version = kueue_requirement(PROVISIONING_MODULE, workdir)
    path = go_module_dir(PROVISIONING_MODULE, version, workdir=workdir) / PROVISIONING_CRD_PATH
    if not path.is_file():
        raise ControlPlaneError(f"{path} does not exist (module {PROVISIONING_MODULE}@{version})")
    return path


def install_crd(api: Any, path: Path, timeout: float = 60) -> dict[str, Any]:
    """Create the CRD in ``path`` (kept if it already exists) and wait until it is Established and served."""
    from kubernetes.client import ApiException

    with path.open() as fh:
        crd = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    name = crd["metadata"]["name"]
    try:
        request_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    except ApiException as exc:
        if exc.status != 409:
            raise
    group = crd["spec"]["group"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    plural = crd["spec"]["names"]["plural"]
    deadline = time.monotonic() + timeout
    while True:
        got = request_json(api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conds = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            try:
                res = request_json(api, "GET", f"/apis/{group}/{version}")
                if any(r["name"] == plural for r in res.get("resources", [])):
                    return got
            except ApiException as exc:
                if exc.status != 404:
                    raise
        if time.monotonic() > deadline:
            raise ClusterStartError(f"CRD {name} not Established and served within {timeout}s: {conds}")
        time.sleep(0.2)
