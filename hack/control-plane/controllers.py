"""Owner controllers next to the local Kueue (issue 9): the JobSet controller, KubeRay's ray-operator, Kubeflow
Trainer v2's controller manager (TrainJob, which runs through a JobSet: it needs the JobSet controller too),
CodeFlare's AppWrapper controller and the LeaderWorkerSet controller manager (sigs.k8s.io/lws).

Both run out of cluster as children of a :class:`localcluster.LocalCluster` (``start_component``: they die with
it, ``check_alive`` watches them), against its apiserver with the admin kubeconfig, with the CRDs of the very same
module versions (``controllers.sh`` copies them next to the binaries). Webhooks:

* JobSet: its own webhooks are **registered** by URL on 127.0.0.1 (mutating + validating for JobSets; the Pod ones
  with the release's objectSelector ``jobset.sigs.k8s.io/jobset-name`` Exists), serving certificate from the
  cluster's CA; internal cert management off.
* KubeRay: **no webhook**, as KubeRay's default install (its RayCluster webhook only runs with ENABLE_WEBHOOKS=true).
* Trainer: its webhooks (TrainJob defaulter and validator, TrainingRuntime and ClusterTrainingRuntime validators) are
  **registered** by URL on 127.0.0.1. The manager always serves them (no switch turns them off); its cert management
  is off, and as it has no certDir setting, it finds the serving certificate where controller-runtime looks by
  default, ``$TMPDIR/k8s-webhook-server/serving-certs`` (its own TMPDIR).
* AppWrapper: **no webhook**, as its own dev mode (``webhooksEnabled: false`` in the ConfigMap it reads its
  configuration from): they only add user labels and validate; Kueue's appwrapper webhook suspends and queues it.
  Its other settings are the release defaults (fault tolerance, Autopilot node monitor). Its /readyz is never asked:
  that check starts controller-runtime's webhook server on the fixed port 9443; /healthz and the log line of its
  AppWrapper controller's workers say it is up.
* LeaderWorkerSet: its webhooks (LeaderWorkerSet defaulter and validator, the Pod defaulter and validator, the
  DisaggregatedSet validator) are **registered** by URL on 127.0.0.1, the Pod ones with the release's objectSelector
  ``leaderworkerset.sigs.k8s.io/name`` Exists (config/webhook/*-patch.yaml), serving certificate from the cluster's
  CA; internal cert management off (``internalCertManagement.enable: false`` in its Configuration). Its Pod
  defaulter matters: it labels the leader and worker Pods with the group index (and the leader's worker
  StatefulSet template) that its Pod controller needs to create each group's worker StatefulSet, and by which
  Kueue's LeaderWorkerSet integration names each group's Workload. Its /readyz is a plain ping, so the webhook
  port (its server starts once its controllers are set up) is waited for too. DisaggregatedSet's CRD is installed
  as well: the manager always runs that controller.

Kueue's own webhooks for these kinds are registered by ``LocalCluster._register_webhooks`` when the frameworks are
in ``KueueSettings.frameworks`` (see ``FAMILY_FRAMEWORKS``). Used by ``tests/e2e/families.py``.
"""

from __future__ import annotations

import base64
import contextlib
import socket
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
FAMILY_FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster",
                     "ray.io/rayservice", "trainer.kubeflow.org/trainjob", "workload.codeflare.dev/appwrapper", "pod",
                     "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset"]
#: RayService's too (tests/e2e/test_family_ray.py runs one), created together and waited for together.
RAY_CRDS = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml")
JOBSET_CRD = "jobset.x-k8s.io_jobsets.yaml"
TRAINER_CRDS = ("trainer.kubeflow.org_trainjobs.yaml", "trainer.kubeflow.org_trainingruntimes.yaml",
                "trainer.kubeflow.org_clustertrainingruntimes.yaml")
APPWRAPPER_CRDS = ("workload.codeflare.dev_appwrappers.yaml",)
LWS_CRDS = ("leaderworkerset.x-k8s.io_leaderworkersets.yaml", "disaggregatedset.x-k8s.io_disaggregatedsets.yaml")
#: the namespace the AppWrapper controller reads its ConfigMap from (NAMESPACE), as its release's
APPWRAPPER_NAMESPACE = "appwrapper-system"
APPWRAPPER_CONFIG_MAP = "appwrapper-operator-config"
JOBSET_USER = "jobset-controller"
KUBERAY_USER = "kuberay-operator"
TRAINER_USER = "trainer-controller-manager"
APPWRAPPER_USER = "appwrapper-controller"
LWS_USER = "lws-controller-manager"
#: the label the release's kustomize patches select the Pod webhooks of each controller on
POD_WEBHOOK_SELECTOR = {"jobset": "jobset.sigs.k8s.io/jobset-name", "lws": "leaderworkerset.sigs.k8s.io/name"}


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
        self._start_webhook_manager("jobset", "jobset", "jobset-controller", "config.jobset.x-k8s.io/v1alpha1",
                                    JOBSET_USER, (JOBSET_CRD,), "the JobSet controller")

    def _start_webhook_manager(self, name: str, binary: str, component: str, config_api: str, user: str,
                               crds: tuple[str, ...], what: str) -> None:
        """A kubebuilder manager (JobSet's, LWS's: the same Configuration fields) on its CRDs: leader election,
        internal cert management and metrics off, webhooks on 127.0.0.1 with a serving cert from the cluster CA,
        registered by URL once its /readyz answers and its webhook port listens (its webhook manifest:
        ``<bin>/<name>-webhook/manifests.yaml``)."""
        t = time.monotonic()
        self.install_crds(crds)
        self.timings[f"{name}-crds"] = round(time.monotonic() - t, 2)
        port, health = lc.free_ports(2)
        cert_dir = self._serving_cert(name, self.workdir / f"{name}-certs")
        cfg = {
            "apiVersion": config_api, "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port, "certDir": str(cert_dir)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        }
        cfg_path = self.workdir / f"{name}-config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        kubeconfig = self.cluster.make_user_kubeconfig(user, ("system:masters",))
        comp = self.cluster.start_component(component, [str(self.bin_dir / binary), f"--config={cfg_path}",
                                                         "--zap-log-level=2"],
                                            env={"KUBECONFIG": str(kubeconfig)})
        self._wait(f"{what} /readyz and its webhook port",
                   lambda: _ok(f"http://127.0.0.1:{health}/readyz") and _listening(port), 60, [comp])
        self._register_webhooks(name, f"https://127.0.0.1:{port}")
        self.timings[name] = round(time.monotonic() - t, 2)

    def _serving_cert(self, name: str, cert_dir: Path) -> Path:
        """``cert_dir`` with tls.crt/tls.key for 127.0.0.1, from the cluster's CA (the webhooks' caBundle)."""
        pki = self.cluster.pki
        assert pki is not None, "the cluster is started"
        cert_dir.mkdir(parents=True, exist_ok=True)
        pair = pki.issue(f"{name}-serving", f"{name}-webhook", server=True, dns_names=["localhost"], ips=["127.0.0.1"])
        (cert_dir / "tls.crt").write_bytes(pair.cert.read_bytes())
        (cert_dir / "tls.key").write_bytes(pair.key.read_bytes())
        return cert_dir

    def _register_webhooks(self, name: str, base_url: str) -> None:
        """Register ``<bin>/<name>-webhook/manifests.yaml`` by URL at ``base_url``, the cluster CA as caBundle."""
        pki = self.cluster.pki
        assert pki is not None, "the cluster is started"
        ca = base64.b64encode(pki.ca_pem).decode()
        with (self.bin_dir / f"{name}-webhook" / "manifests.yaml").open() as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        for doc in docs:
            for wh in doc["webhooks"]:
                wh["clientConfig"] = {"url": base_url + wh["clientConfig"]["service"]["path"], "caBundle": ca}
                if any("pods" in r.get("resources", []) for r in wh.get("rules", [])):
                    # as the release's kustomize patch (JobSet's, LWS's): only Pods of their own objects
                    wh["objectSelector"] = {"matchExpressions": [{"key": POD_WEBHOOK_SELECTOR[name],
                                                                  "operator": "Exists"}]}
            plural = ("mutatingwebhookconfigurations" if doc["kind"].startswith("Mutating")
                      else "validatingwebhookconfigurations")
            config = f"{name}-" + doc["metadata"]["name"]
            body = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": doc["kind"],
                    "metadata": {"name": config}, "webhooks": doc["webhooks"]}
            lc.request_json(self.cluster.api, "POST", f"/apis/admissionregistration.k8s.io/v1/{plural}", body)
            self._webhooks.append((plural, config))

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

    # ---- Kubeflow Trainer v2 -------------------------------------------------------------------
    def start_trainer(self) -> None:
        """Trainer's manager on its CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime); JobSet's must exist."""
        t = time.monotonic()
        self.install_crds(TRAINER_CRDS)
        self.timings["trainer-crds"] = round(time.monotonic() - t, 2)
        port, health = lc.free_ports(2)
        tmp = self.workdir / "trainer-tmp"
        self._serving_cert("trainer", tmp / "k8s-webhook-server" / "serving-certs")
        cfg = {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": port},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        }
        cfg_path = self.workdir / "trainer-config.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        kubeconfig = self.cluster.make_user_kubeconfig(TRAINER_USER, ("system:masters",))
        comp = self.cluster.start_component(
            "trainer-controller-manager",
            [str(self.bin_dir / "trainer-controller-manager"), f"--config={cfg_path}", "--zap-log-level=2"],
            env={"KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp)})
        self._wait("Trainer's controller manager /readyz", lambda: _ok(f"http://127.0.0.1:{health}/readyz"), 60,
                   [comp])
        self._register_webhooks("trainer", f"https://127.0.0.1:{port}")
        self.timings["trainer"] = round(time.monotonic() - t, 2)

    # ---- CodeFlare AppWrapper -----------------------------------------------------------------
    def start_appwrapper(self) -> None:
        """The AppWrapper controller on its CRD, webhooks off, configured by its ConfigMap (cmd/main.go reads
        ``$NAMESPACE/<--config>``, key config.yaml, over its defaults)."""
        from kubernetes.client import ApiException

        t = time.monotonic()
        self.install_crds(APPWRAPPER_CRDS)
        self.timings["appwrapper-crds"] = round(time.monotonic() - t, 2)
        (health,) = lc.free_ports(1)
        api = self.cluster.api
        config = {"controllerManager": {"health": {"bindAddress": f"127.0.0.1:{health}"},
                                        "metrics": {"bindAddress": "0"}, "leaderElection": False},
                  "webhooksEnabled": False}
        cm = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": APPWRAPPER_CONFIG_MAP, "namespace": APPWRAPPER_NAMESPACE},
              "data": {"config.yaml": yaml.safe_dump(config, sort_keys=False)}}
        with contextlib.suppress(ApiException):  # 409: kept from an earlier start
            lc.request_json(api, "POST", "/api/v1/namespaces",
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPWRAPPER_NAMESPACE}})
        cm_path = f"/api/v1/namespaces/{APPWRAPPER_NAMESPACE}/configmaps"
        with contextlib.suppress(ApiException):
            lc.request_json(api, "DELETE", f"{cm_path}/{APPWRAPPER_CONFIG_MAP}")
        lc.request_json(api, "POST", cm_path, cm)
        kubeconfig = self.cluster.make_user_kubeconfig(APPWRAPPER_USER, ("system:masters",))
        comp = self.cluster.start_component(
            "appwrapper-controller",
            [str(self.bin_dir / "appwrapper-controller"), f"--config={APPWRAPPER_CONFIG_MAP}", "--zap-log-level=info"],
            env={"KUBECONFIG": str(kubeconfig), "NAMESPACE": APPWRAPPER_NAMESPACE})

        def up() -> bool:
            log = comp.tail(400)
            return _ok(f"http://127.0.0.1:{health}/healthz") and "Starting workers" in log and "AppWrapper" in log

        self._wait("the AppWrapper controller's workers", up, 60, [comp])
        self.timings["appwrapper"] = round(time.monotonic() - t, 2)

    # ---- LeaderWorkerSet ----------------------------------------------------------------------
    def start_lws(self) -> None:
        """The LWS controller manager (binary ``lws-manager``) on its CRDs, its webhooks registered; its
        Configuration (config.lws.x-k8s.io/v1alpha1) has JobSet's fields."""
        self._start_webhook_manager("lws", "lws-manager", "lws-manager", "config.lws.x-k8s.io/v1alpha1", LWS_USER,
                                    LWS_CRDS, "the LWS controller manager")

    # ---- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Delete the webhook configurations (failurePolicy Fail), then stop the controllers."""
        from kubernetes.client import ApiException

        for plural, name in self._webhooks:
            with contextlib.suppress(ApiException):
                lc.request_json(self.cluster.api, "DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}/{name}")
        self._webhooks.clear()
        for name in ("jobset-controller", "kuberay-operator", "trainer-controller-manager", "appwrapper-controller",
                     "lws-manager"):
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


def _listening(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _ok(url: str) -> bool:
    res = lc.http_get(url)
    return res is not None and res[0] == 200
