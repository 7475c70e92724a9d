"""Owner controllers next to the local Kueue (issue 9): the JobSet controller and KubeRay's ray-operator.

Both run out of cluster as children of a :class:`localcluster.LocalCluster` (``start_component``: they die with
it, ``check_alive`` watches them), against its apiserver with the admin kubeconfig, with the CRDs of the very same
module versions (``controllers.sh`` copies them next to the binaries). Webhooks:

* JobSet: its own webhooks are **registered** by URL on 127.0.0.1 (mutating + validating for JobSets; the Pod ones
  with the release's objectSelector ``jobset.sigs.k8s.io/jobset-name`` Exists), serving certificate from the
  cluster's CA; internal cert management off.
* KubeRay: **no webhook**, as KubeRay's default install (its RayCluster webhook only runs with ENABLE_WEBHOOKS=true).

Kueue's own webhooks for these kinds are registered by ``LocalCluster._register_webhooks`` when the frameworks are
in ``KueueSettings.frameworks`` (see ``FAMILY_FRAMEWORKS``). Used by ``tests/e2e/families.py``.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import localcluster as lc
import yaml

HERE = Path(__file__).resolve().parent
CONTROLLERS_SCRIPT = HERE / "controllers.sh"
CONTROLLERS_BUILD_COMMAND = "bash hack/control-plane/controllers.sh"

#: The Kueue integrations the family tests run with (all that v0.19.2 has for these kinds; deployment and
#: statefulset need pod). Kueue is restarted on them, with their CRDs already installed.
FAMILY_FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster", "pod",
                     "deployment", "statefulset"]
#: Not RayService's (in the bin dir too): KubeRay's RayService controller then logs "no matches for kind RayService"
#: every 10 s, while its RayCluster and RayJob controllers start at once; installing the 1 MB CRD costs ~12 s more.
RAY_CRDS = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml")
JOBSET_CRD = "jobset.x-k8s.io_jobsets.yaml"
JOBSET_USER = "jobset-controller"
KUBERAY_USER = "kuberay-operator"


def find_controllers_bin_dir() -> Path:
    """The built controllers' directory, or :class:`localcluster.BinariesNotBuilt` saying how to build it."""
    proc = subprocess.run(["bash", str(CONTROLLERS_SCRIPT), "--print-bin-dir-if-built"],
                          capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode == 0 and lines:
        return Path(lines[-1])
    raise lc.BinariesNotBuilt(
        f"{proc.stderr.strip() or f'controllers.sh exited {proc.returncode}'}\n"
        f"Build them first (a few minutes cold, seconds when cached): cd {lc.REPO_ROOT} && {CONTROLLERS_BUILD_COMMAND}")


class OwnerControllers:
    """Starts/stops the JobSet controller and KubeRay's operator on a started LocalCluster."""

    def __init__(self, cluster: lc.LocalCluster, bin_dir: Path) -> None:
        self.cluster = cluster
        self.bin_dir = bin_dir
        self.workdir = cluster.workdir / "owner-controllers"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._webhooks: list[tuple[str, str]] = []
        self.timings: dict[str, float] = {}

    # ---- CRDs ----------------------------------------------------------------------------------
    def install_crds(self, files: tuple[str, ...]) -> None:
        """Create the CRDs (skipped when they exist) and wait until each is Established."""
        from kubernetes.client import ApiException

        api = self.cluster.api
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        names = []
        for fname in files:
            with (self.bin_dir / "crds" / fname).open() as fh:
                crd = yaml.load(fh, Loader=loader)
            names.append(crd["metadata"]["name"])
            try:
                lc.request_json(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            except ApiException as exc:
                if exc.status != 409:
                    raise

        def established() -> bool:
            for name in names:
                crd = lc.request_json(api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                if not any(c["type"] == "Established" and c["status"] == "True"
                           for c in crd.get("status", {}).get("conditions", [])):
                    return False
            return True

        self._wait(f"CRDs {names} Established", established, 60, [])

    # ---- JobSet --------------------------------------------------------------------------------
    def start_jobset(self) -> None:
        t = time.monotonic()
        self.install_crds((JOBSET_CRD,))
        self.timings["jobset-crds"] = round(time.monotonic() - t, 2)
        pki = self.cluster.pki
        assert pki is not None, "the cluster is started"
        port, health = lc.free_ports(2)
        cert_dir = self.workdir / "jobset-certs"
        cert_dir.mkdir(exist_ok=True)
        pair = pki.issue("jobset-serving", "jobset-webhook", server=True, dns_names=["localhost"], ips=["127.0.0.1"])
        (cert_dir / "tls.crt").write_bytes(pair.cert.read_bytes())
        (cert_dir / "tls.key").write_bytes(pair.key.read_bytes())
        cfg = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        }
        cfg_path = self.workdir / "jobset-config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        kubeconfig = self.cluster.make_user_kubeconfig(JOBSET_USER, ("system:masters",))
        comp = self.cluster.start_component("jobset-controller", [str(self.bin_dir / "jobset"), f"--config={cfg_path}",
                                                                  "--zap-log-level=2"],
                                            env={"KUBECONFIG": str(kubeconfig)})
        self._wait("the JobSet controller /readyz", lambda: _ok(f"http://127.0.0.1:{health}/readyz"), 60, [comp])
        self._register_jobset_webhooks(f"https://127.0.0.1:{port}", pki.ca_pem)
        self.timings["jobset"] = round(time.monotonic() - t, 2)

    def _register_jobset_webhooks(self, base_url: str, ca_pem: bytes) -> None:
        ca = base64.b64encode(ca_pem).decode()
        with (self.bin_dir / "jobset-webhook" / "manifests.yaml").open() as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        for doc in docs:
            for wh in doc["webhooks"]:
                wh["clientConfig"] = {"url": base_url + wh["clientConfig"]["service"]["path"], "caBundle": ca}
                if any("pods" in r.get("resources", []) for r in wh.get("rules", [])):
                    # as the release's kustomize patch: only Pods of JobSets
                    wh["objectSelector"] = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name",
                                                                  "operator": "Exists"}]}
            plural = ("mutatingwebhookconfigurations" if doc["kind"].startswith("Mutating")
                      else "validatingwebhookconfigurations")
            name = "jobset-" + doc["metadata"]["name"]
            body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": doc["kind"], "metadata": {"name": name},
                    "webhooks": doc["webhooks"]}
            lc.request_json(self.cluster.api, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", body)
            self._webhooks.append((plural, name))

    # ---- KubeRay -------------------------------------------------------------------------------
    def start_kuberay(self) -> None:
        t = time.monotonic()
        self.install_crds(RAY_CRDS)
        self.timings["kuberay-crds"] = round(time.monotonic() - t, 2)
        (health,) = lc.free_ports(1)
        kubeconfig = self.cluster.make_user_kubeconfig(KUBERAY_USER, ("system:masters",))
        comp = self.cluster.start_component(
            "kuberay-operator",
            [str(self.bin_dir / "ray-operator"), "--metrics-addr=0", f"--health-probe-bind-address=127.0.0.1:{health}",
             "--enable-leader-election=false", "--log-stdout-encoder=console"],
            env={"KUBECONFIG": str(kubeconfig)})
        self._wait("KubeRay's operator /readyz", lambda: _ok(f"http://127.0.0.1:{health}/readyz"), 60, [comp])
        self.timings["kuberay"] = round(time.monotonic() - t, 2)

    # ---- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Delete the JobSet webhook configurations (failurePolicy Fail), then stop both controllers."""
        from kubernetes.client import ApiException

        for plural, name in self._webhooks:
            with contextlib.suppress(ApiException):
                lc.request_json(self.cluster.api, "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
        self._webhooks.clear()
        for name in ("jobset-controller", "kuberay-operator"):
            self.cluster.stop_component(name)

    @staticmethod
    def _wait(what: str, check: Callable[[], bool], timeout: float, watch: list[lc.Component]) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for comp in watch:
                if not comp.alive():
                    raise lc.ClusterStartError(comp.describe_failure(f"while waiting for {what}: {comp.name} died"))
            with contextlib.suppress(Exception):
                if check():
                    return
            if time.monotonic() > deadline:
                raise lc.ClusterStartError("\n".join([f"timed out after {timeout:.0f}s waiting for {what}",
                                                      *(c.describe_failure(f"--- {c.name}") for c in watch)]))
            time.sleep(0.25)


def _ok(url: str) -> bool:
    res = lc.http_get(url)
    return res is not None and res[0] == 200
