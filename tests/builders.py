"""One builder set for every test and bench: Kubernetes and Kueue objects as the API server returns them.

In the spirit of Kueue's ``pkg/util/testing/v1beta2/wrappers.go``::

    ClusterQueue("team-a-cq").cohort("research").resource_group(
        FlavorQuotas("on-demand").resource("cpu", "64", borrowing_limit="32")).obj()

Every builder has two outputs:

* ``.obj()``: the object as a client reads it back (``kubectl get -o json``, managedFields hidden) for
  Kueue v0.19 (``kueue.x-k8s.io/v1beta2``) on Kubernetes 1.36: uid, creationTimestamp, generation, the
  defaults the API server, its admission plugins and Kueue's webhooks fill in, and status. Unit tests and
  the benches use it.
* ``.manifest()``: what a user sends to create it (no server-set field, no status). E2E tests POST it.

Both are fresh dicts on every call. Field names, types and defaults follow the objects recorded from the
real control plane in ``tests/e2e/fixtures/`` (``tests/unit/test_builders.py`` compares them).
Timestamps are RFC 3339 strings (``eventTime`` with microseconds); quantities are strings.

Builders build only. Every message text (Kueue's, kube-scheduler's, the kubelet's) is written out
verbatim by the test or bench that uses it. The one exception is the condition a controller keeps on a
healthy, reconciled object (ClusterQueue and LocalQueue ``Active=True``, Node ``Ready=True``), which
every test would otherwise repeat; those texts are the ``*_READY`` constants below, and ``.active(...)``
or ``.ready(...)`` replace them.

UIDs are deterministic (``uid_for``: a UUID from kind, namespace and name), so a test can name the UID
of an object it has not built (an Event about Pod ``train-0``) and two runs build identical objects.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

Obj = dict[str, Any]
Time = str | datetime

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API = f"{KUEUE_GROUP}/v1beta2"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
IMAGE = "registry.k8s.io/pause:3.10"
KUBELET_VERSION = "v1.36.3"

# Default times: queues exist first, then the Job and its Workload, then Pods, then Events; NOW is later.
QUEUES_CREATED = "2026-11-30T08:00:00Z"
CREATED = "2026-11-30T09:00:00Z"
POD_CREATED = "2026-11-30T09:00:06Z"
EVENT_AT = "2026-11-30T09:30:00Z"
NOW = "2026-11-30T10:00:00Z"

# What the controllers keep on a healthy object (pkg/cache/scheduler/clusterqueue.go,
# pkg/controller/core/localqueue_controller.go, the kubelet's node status setter).
CLUSTER_QUEUE_READY = ("True", "Ready", "Can admit new workloads")
LOCAL_QUEUE_READY = ("True", "Ready", "Can submit new workloads to localQueue")
NODE_READY = ("True", "KubeletReady", "kubelet is posting ready status")

_UID_NAMESPACE = uuid.UUID("6f1c9a52-6b0e-4c57-9d1e-4b7c1f0e2a61")
_event_seq = itertools.count(1)


# ---------------------------------------------------------------------------------------------- values


@functools.lru_cache(maxsize=1 << 16)
def _uuid(text: str) -> uuid.UUID:
    return uuid.uuid5(_UID_NAMESPACE, text)


def uid_for(kind: str, name: str, namespace: str | None = None) -> str:
    """The UID every builder gives an object of this kind, namespace and name unless told otherwise."""
    return str(_uuid(f"{kind}/{namespace or ''}/{name}"))


def _fresh(o: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), several times faster than copy.deepcopy."""
    t = type(o)
    if t is dict:
        return {k: v if type(v) not in (dict, list) else _fresh(v) for k, v in o.items()}
    if t is list:
        return [v if type(v) not in (dict, list) else _fresh(v) for v in o]
    if isinstance(o, Mapping):
        return {k: _fresh(v) for k, v in o.items()}
    return o


def rfc3339(t: Time) -> str:
    """``2026-11-30T09:00:00Z`` (metav1.Time); strings pass through unchanged."""
    if isinstance(t, str):
        return t.split(".")[0] + "Z" if "." in t else t
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: Time) -> str:
    """``2026-11-30T09:00:00.000000Z`` (metav1.MicroTime, Events' eventTime and series)."""
    if isinstance(t, str):
        if "." in t:
            return t
        t = datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def condition(ctype: str, status: str, reason: str, message: str = "", at: Time = CREATED,
              observed_generation: int | None = 1) -> Obj:
    """A metav1.Condition (Kueue objects, ClusterQueue/LocalQueue/AdmissionCheck status)."""
    out: Obj = {"type": ctype, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": rfc3339(at)}
    if observed_generation is not None:
        out["observedGeneration"] = observed_generation
    return out


def pod_condition(ctype: str, status: str, at: Time = POD_CREATED, reason: str | None = None,
                  message: str | None = None, observed_generation: int | None = 1) -> Obj:
    """A PodCondition as Kubernetes 1.36 writes it (observedGeneration, lastProbeTime null)."""
    out: Obj = {"type": ctype}
    if observed_generation is not None:
        out["observedGeneration"] = observed_generation
    out.update(status=status, lastProbeTime=None, lastTransitionTime=rfc3339(at))
    if reason is not None:
        out["reason"] = reason
    if message is not None:
        out["message"] = message
    return out


def toleration(key: str, operator: str = "Equal", value: str | None = None, effect: str | None = None,
               seconds: int | None = None) -> Obj:
    out: Obj = {"key": key, "operator": operator}
    if value is not None:
        out["value"] = value
    if effect is not None:
        out["effect"] = effect
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> Obj:
    out: Obj = {"key": key}
    if value is not None:
        out["value"] = value
    out["effect"] = effect
    return out


def throttle(name: str, service_account: str, namespace: str, shares: int = 1) -> tuple[Obj, Obj]:
    """API Priority and Fairness holding one ServiceAccount to `shares` nominal concurrency shares, rejecting
    (429 + Retry-After) what does not fit: the PriorityLevelConfiguration and the FlowSchema, both named `name`."""
    group = "flowcontrol.apiserver.k8s.io/v1"
    level = {"apiVersion": group, "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
             "spec": {"type": "Limited", "limited": {
                 "nominalConcurrencyShares": shares, "lendablePercent": 0, "borrowingLimitPercent": 0,
                 "limitResponse": {"type": "Reject"}}}}
    schema = {"apiVersion": group, "kind": "FlowSchema", "metadata": {"name": name},
              "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 100,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "ServiceAccount",
                                                "serviceAccount": {"name": service_account, "namespace": namespace}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "clusterScope": True, "namespaces": ["*"]}],
                                  "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
    return level, schema


def ref(kind: str, name: str, namespace: str | None = None, uid: str | None = None,
        api_version: str = "v1") -> Obj:
    """An object reference (Event involvedObject/regarding) by name; the UID defaults to ``uid_for``."""
    out: Obj = {"kind": kind, "name": name}
    if namespace is not None:
        out["namespace"] = namespace
    out["uid"] = uid or uid_for(kind, name, namespace)
    out["apiVersion"] = api_version
    return out


def ref_of(target: Mapping[str, Any] | _Object) -> Obj:
    """The reference to a built object (a builder, an ``obj()``, or a ``ref(...)`` itself)."""
    if isinstance(target, _Object):
        return target.ref()
    if "metadata" not in target:
        return {k: v for k, v in target.items()}
    md = target.get("metadata") or {}
    return ref(str(target.get("kind")), str(md.get("name")), md.get("namespace"), md.get("uid"),
               str(target.get("apiVersion")))


# --- container statuses (Pod.container_status / init_container_status)


def container_waiting(reason: str, message: str | None = None, *, name: str = "main", image: str = IMAGE,
                      restarts: int = 0, last_terminated: Mapping[str, Any] | None = None) -> Obj:
    waiting: Obj = {"reason": reason}
    if message:
        waiting["message"] = message
    return {"name": name, "state": {"waiting": waiting},
            "lastState": {"terminated": dict(last_terminated)} if last_terminated else {},
            "ready": False, "restartCount": restarts, "image": image, "imageID": "", "started": False}


def container_running(started_at: Time, *, ready: bool = True, name: str = "main", image: str = IMAGE,
                      restarts: int = 0, container_id: str | None = None) -> Obj:
    return {"name": name, "state": {"running": {"startedAt": rfc3339(started_at)}}, "lastState": {},
            "ready": ready, "restartCount": restarts, "image": image,
            "imageID": f"{image.split(':')[0]}@sha256:{_uuid(image).hex * 2}",
            "containerID": container_id or
            f"containerd://{_uuid(f'{name}/{started_at}').hex * 2}",
            "started": True}


def terminated(exit_code: int, reason: str, *, finished_at: Time, started_at: Time | None = None,
               message: str | None = None, container_id: str | None = None) -> Obj:
    """A ContainerStateTerminated (state.terminated or lastState.terminated)."""
    out: Obj = {"exitCode": exit_code, "reason": reason}
    if message is not None:
        out["message"] = message
    if started_at is not None:
        out["startedAt"] = rfc3339(started_at)
    out["finishedAt"] = rfc3339(finished_at)
    if container_id is not None:
        out["containerID"] = container_id
    return out


def container_terminated(exit_code: int, reason: str, *, finished_at: Time, started_at: Time | None = None,
                         name: str = "main", image: str = IMAGE, message: str | None = None) -> Obj:
    return {"name": name, "state": {"terminated": terminated(exit_code, reason, finished_at=finished_at,
                                                             started_at=started_at, message=message)},
            "lastState": {}, "ready": False, "restartCount": 0, "image": image, "imageID": "", "started": False}


# ---------------------------------------------------------------------------------------------- base


class _Object:
    """Metadata shared by every kind; subclasses add spec/status in ``_manifest_body``/``_served``."""

    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]
    DEFAULT_CREATED: ClassVar[str] = CREATED
    HAS_GENERATION: ClassVar[bool] = True  # Namespaces, Nodes and Events carry no metadata.generation

    def __init__(self, name: str, namespace: str | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self._uid: str | None = None
        self._created: str = self.DEFAULT_CREATED
        self._labels: dict[str, str] = {}
        self._annotations: dict[str, str] = {}
        self._owners: list[Obj] = []
        self._finalizers: list[str] | None = None
        self._generation = 1
        self._resource_version: str | None = None
        self._deleted: tuple[str, int] | None = None

    # --- metadata
    def uid(self, value: str) -> Self:
        self._uid = value
        return self

    def created(self, at: Time) -> Self:
        self._created = rfc3339(at)
        return self

    def label(self, key: str, value: str) -> Self:
        self._labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._labels.update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._annotations[key] = value
        return self

    def finalizers(self, *names: str) -> Self:
        self._finalizers = list(names)
        return self

    def generation(self, n: int) -> Self:
        self._generation = n
        return self

    def resource_version(self, rv: str) -> Self:
        self._resource_version = rv
        return self

    def deleted(self, at: Time, grace_seconds: int = 30) -> Self:
        """metadata.deletionTimestamp: the object is terminating (finalizers keep it)."""
        self._deleted = (rfc3339(at), grace_seconds)
        return self

    def owner(self, owner: Mapping[str, Any] | _Object, *, controller: bool = True) -> Self:
        """An ownerReference to a built object (controller and blockOwnerDeletion, as controllers set it)."""
        r = ref_of(owner)
        entry: Obj = {"apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"], "uid": r["uid"]}
        if controller:
            entry.update(controller=True, blockOwnerDeletion=True)
        self._owners.append(entry)
        return self

    @property
    def api_version(self) -> str:
        return self.API_VERSION

    def get_uid(self) -> str:
        return self._uid or uid_for(self.KIND, self.name, self.namespace)

    def ref(self) -> Obj:
        return ref(self.KIND, self.name, self.namespace, self.get_uid(), self.api_version)

    # --- outputs
    def _default_finalizers(self) -> list[str]:
        return []

    def _metadata(self, served: bool) -> Obj:
        md: Obj = {"name": self.name}
        generate_name = self._generate_name()
        if generate_name and served:
            md["generateName"] = generate_name
        if self.namespace is not None:
            md["namespace"] = self.namespace
        if served:
            md["uid"] = self.get_uid()
            md["resourceVersion"] = self._resource_version or "1"
            if self.HAS_GENERATION:
                md["generation"] = self._generation
            md["creationTimestamp"] = self._created
            if self._deleted:
                md["deletionTimestamp"], md["deletionGracePeriodSeconds"] = self._deleted
        labels = {**self._served_labels(), **self._labels} if served else dict(self._labels)
        if labels:
            md["labels"] = labels
        if self._annotations:
            md["annotations"] = dict(self._annotations)
        if served and self._owners:
            md["ownerReferences"] = [_fresh(o) for o in self._owners]
        finalizers = self._finalizers if self._finalizers is not None else (
            self._default_finalizers() if served else [])
        if finalizers:
            md["finalizers"] = list(finalizers)
        return md

    def _served_labels(self) -> dict[str, str]:
        return {}

    def _generate_name(self) -> str | None:
        return None

    def _manifest_body(self) -> Obj:
        return {}

    def _served(self) -> Obj:
        """spec (with defaults) and status as served; defaults to the manifest's body.

        ``_manifest_body`` and ``_served`` build new containers on every call (``_fresh`` copies what a
        caller handed in), so ``obj()``/``manifest()`` need no deep copy.
        """
        return self._manifest_body()

    def manifest(self) -> Obj:
        """The body a user sends to create the object."""
        return {"apiVersion": self.api_version, "kind": self.KIND, "metadata": self._metadata(served=False),
                **self._manifest_body()}

    def obj(self) -> Obj:
        """The object as the API server returns it."""
        return {"apiVersion": self.api_version, "kind": self.KIND, "metadata": self._metadata(served=True),
                **self._served()}


def _quantities(values: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in values.items()}


# ---------------------------------------------------------------------------------------------- core


class Namespace(_Object):
    API_VERSION, KIND = "v1", "Namespace"
    HAS_GENERATION = False
    DEFAULT_CREATED = QUEUES_CREATED

    def _served_labels(self) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": self.name}

    def _served(self) -> Obj:
        return {"spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


class Node(_Object):
    """A Node; ``.obj()`` carries the kubelet's status (capacity, allocatable, conditions, nodeInfo)."""

    API_VERSION, KIND = "v1", "Node"
    HAS_GENERATION = False
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._capacity: dict[str, str] = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        self._taints: list[Obj] = []
        self._unschedulable = False
        self._ready: tuple[str, str, str] = NODE_READY
        self._heartbeat = QUEUES_CREATED

    def capacity(self, resources: Mapping[str, Any] | None = None, **named: Any) -> Self:
        """``capacity(cpu="8", memory="32Gi")`` or ``capacity({"nvidia.com/gpu": "8"})``; allocatable follows."""
        self._capacity.update(_quantities({**(resources or {}), **named}))
        return self

    def taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> Self:
        self._taints.append(taint(key, value, effect))
        return self

    def unschedulable(self) -> Self:
        """Cordoned (``kubectl cordon``): spec.unschedulable and the node.kubernetes.io/unschedulable taint."""
        self._unschedulable = True
        return self

    def ready(self, status: str, reason: str, message: str) -> Self:
        self._ready = (status, reason, message)
        return self

    def heartbeat(self, at: Time) -> Self:
        self._heartbeat = rfc3339(at)
        return self

    def _served_labels(self) -> dict[str, str]:
        return {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux"}

    def _spec(self, served: bool) -> Obj:
        sp: Obj = {}
        taints = _fresh(self._taints)
        if self._unschedulable:
            sp["unschedulable"] = True
            if served:
                taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                               "timeAdded": self._heartbeat})
        if taints:
            sp["taints"] = taints
        return sp

    def _manifest_body(self) -> Obj:
        return {"spec": self._spec(served=False)}

    def _served(self) -> Obj:
        hb = self._heartbeat
        pressure = [("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available")]
        conds = [{"type": t, "status": "False", "lastHeartbeatTime": hb, "lastTransitionTime": QUEUES_CREATED,
                  "reason": r, "message": msg} for t, r, msg in pressure]
        status, reason, message = self._ready
        conds.append({"type": "Ready", "status": status, "lastHeartbeatTime": hb,
                      "lastTransitionTime": QUEUES_CREATED, "reason": reason, "message": message})
        return {"spec": self._spec(served=True), "status": {
            "capacity": dict(self._capacity), "allocatable": dict(self._capacity), "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": _ip("10.0", self.name)},
                          {"type": "Hostname", "address": self.name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": _uuid(self.name).hex, "systemUUID": self.get_uid(),
                         "bootID": uid_for("boot", self.name), "kernelVersion": "6.8.0-60-generic",
                         "osImage": "Ubuntu 24.04.2 LTS", "containerRuntimeVersion": "containerd://2.1.1",
                         "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"}}}


def _ip(prefix: str, name: str) -> str:
    h = _uuid(name).int
    return f"{prefix}.{h % 250 + 1}.{(h >> 8) % 250 + 2}"


class _Container:
    def __init__(self, name: str = "main", image: str = IMAGE) -> None:
        self.name, self.image = name, image
        self.requests: dict[str, str] = {}
        self.limits: dict[str, str] = {}

    def spec(self, served: bool) -> Obj:
        out: Obj = {"name": self.name, "image": self.image}
        resources: Obj = {}
        if self.limits:
            resources["limits"] = dict(self.limits)
        requests = {**self.limits, **self.requests} if served else dict(self.requests)
        if requests:
            resources["requests"] = requests
        out["resources"] = resources
        if served:
            out.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File",
                       imagePullPolicy="Always" if self.image.endswith(":latest") else "IfNotPresent")
        return out


class _PodTemplate:
    """The pod spec shared by Job templates, Workload pod sets and Pods."""

    def __init__(self, restart_policy: str) -> None:
        self.containers = [_Container()]
        self.restart_policy = restart_policy
        self.node_selector: dict[str, str] = {}
        self.tolerations: list[Obj] = []
        self.priority_class: str | None = None
        self.grace_period: int | None = None
        self.scheduler: str | None = None

    def spec(self, served: bool) -> Obj:
        sp: Obj = {"containers": [c.spec(served) for c in self.containers], "restartPolicy": self.restart_policy}
        if self.grace_period is not None or served:
            sp["terminationGracePeriodSeconds"] = 30 if self.grace_period is None else self.grace_period
        if served:
            sp["dnsPolicy"] = "ClusterFirst"
        if self.node_selector:
            sp["nodeSelector"] = dict(self.node_selector)
        if served:
            sp["securityContext"] = {}
        if self.scheduler is not None or served:
            sp["schedulerName"] = self.scheduler or "default-scheduler"
        if self.tolerations:
            sp["tolerations"] = [_fresh(t) for t in self.tolerations]
        if self.priority_class:
            sp["priorityClassName"] = self.priority_class
        return sp

    def qos_class(self) -> str:
        """BestEffort / Guaranteed / Burstable from cpu and memory requests and limits (as the API server)."""
        reqs = [{**c.limits, **c.requests} for c in self.containers]
        if not any(r.get(res) for r in reqs for res in ("cpu", "memory")) and not any(
                c.limits.get(res) for c in self.containers for res in ("cpu", "memory")):
            return "BestEffort"
        guaranteed = all(
            c.limits.get(res) and {**c.limits, **c.requests}.get(res) == c.limits.get(res)
            for c in self.containers for res in ("cpu", "memory"))
        return "Guaranteed" if guaranteed else "Burstable"


class _WithPodTemplate:
    """Methods for the pod template of Jobs, pod sets and Pods; they act on the first container."""

    _template: _PodTemplate

    def request(self, resource: str, quantity: Any) -> Self:
        self._template.containers[0].requests[resource] = str(quantity)
        return self

    def limit(self, resource: str, quantity: Any) -> Self:
        self._template.containers[0].limits[resource] = str(quantity)
        return self

    def requests(self, resources: Mapping[str, Any]) -> Self:
        for k, v in resources.items():
            self.request(k, v)
        return self

    def image(self, image: str) -> Self:
        self._template.containers[0].image = image
        return self

    def container_name(self, name: str) -> Self:
        self._template.containers[0].name = name
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        self._template.node_selector.update(selector)
        return self

    def toleration(self, t: Mapping[str, Any]) -> Self:
        self._template.tolerations.append(_fresh(t))
        return self

    def priority_class(self, name: str) -> Self:
        """spec.priorityClassName of the pods (a scheduling.k8s.io PriorityClass)."""
        self._template.priority_class = name
        return self

    def grace_period(self, seconds: int) -> Self:
        self._template.grace_period = seconds
        return self

    def restart_policy(self, policy: str) -> Self:
        self._template.restart_policy = policy
        return self

    def scheduler(self, name: str) -> Self:
        self._template.scheduler = name
        return self


# ---------------------------------------------------------------------------------------------- batch


class Job(_WithPodTemplate, _Object):
    """A batch/v1 Job; ``.queue(lq)`` puts it under Kueue (label kueue.x-k8s.io/queue-name)."""

    API_VERSION, KIND = "batch/v1", "Job"

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(name, namespace)
        self._template = _PodTemplate("Never")
        self._parallelism = 1
        self._completions: int | None = None
        self._suspend: bool | None = None
        self._backoff_limit: int | None = None
        self._pod_annotations: dict[str, str] = {}
        self._pod_labels: dict[str, str] = {}
        self._status: Obj = {}

    def queue(self, local_queue: str) -> Self:
        return self.label(QUEUE_NAME_LABEL, local_queue)

    def workload_priority_class(self, name: str) -> Self:
        return self.label(PRIORITY_CLASS_LABEL, name)

    def parallelism(self, n: int) -> Self:
        self._parallelism = n
        return self

    def completions(self, n: int) -> Self:
        self._completions = n
        return self

    def suspend(self, suspended: bool) -> Self:
        """spec.suspend; unset, ``.obj()`` shows what Kueue's webhook makes of it (True when queued)."""
        self._suspend = suspended
        return self

    def backoff_limit(self, n: int) -> Self:
        self._backoff_limit = n
        return self

    def pod_annotation(self, key: str, value: str) -> Self:
        self._pod_annotations[key] = value
        return self

    def pod_label(self, key: str, value: str) -> Self:
        self._pod_labels[key] = value
        return self

    def status(self, **fields: Any) -> Self:
        """Job status fields as the job controller writes them: ``status(active=2, ready=2, startTime=...)``."""
        self._status.update(fields)
        return self

    def _spec(self, served: bool) -> Obj:
        sp: Obj = {"parallelism": self._parallelism,
                   "completions": self._completions if self._completions is not None else self._parallelism}
        if self._backoff_limit is not None or served:
            sp["backoffLimit"] = 6 if self._backoff_limit is None else self._backoff_limit
        tmeta: Obj = {}
        uid = self.get_uid()
        pod_labels = ({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": self.name,
                       "controller-uid": uid, "job-name": self.name} if served else {})
        pod_labels.update(self._pod_labels)
        if pod_labels:
            tmeta["labels"] = pod_labels
        if self._pod_annotations:
            tmeta["annotations"] = dict(self._pod_annotations)
        if served:
            sp["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            sp["manualSelector"] = False
        sp["template"] = {"metadata": tmeta, "spec": self._template.spec(served)}
        if served:
            sp["completionMode"] = "NonIndexed"
            sp["suspend"] = self._suspend if self._suspend is not None else QUEUE_NAME_LABEL in self._labels
            sp["podReplacementPolicy"] = "TerminatingOrFailed"
        elif self._suspend is not None:
            sp["suspend"] = self._suspend
        return sp

    def _manifest_body(self) -> Obj:
        return {"spec": self._spec(served=False)}

    def _served(self) -> Obj:
        status: Obj = {"terminating": 0, "uncountedTerminatedPods": {}, "ready": 0, **_fresh(self._status)}
        return {"spec": self._spec(served=True), "status": status}


# ---------------------------------------------------------------------------------------------- pods


class Pod(_WithPodTemplate, _Object):
    """A Pod; ``.owner(job)`` adds what the Job controller sets, ``.workload(...)`` what Kueue injects."""

    API_VERSION, KIND = "v1", "Pod"
    DEFAULT_CREATED = POD_CREATED

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(name, namespace)
        self._template = _PodTemplate("Always")
        self._job: Obj | None = None
        self._node: str | None = None
        self._gates: list[str] = []
        self._phase = "Pending"
        self._conditions: list[Obj] = []
        self._container_statuses: list[Obj] | None = None
        self._init_statuses: list[Obj] | None = None
        self._reason: tuple[str | None, str | None] = (None, None)
        self._start_time: str | None = None
        self._running: tuple[str, bool] | None = None

    def owner(self, owner: Mapping[str, Any] | _Object, *, controller: bool = True) -> Self:
        """A Job owner also brings the Job controller's labels, generateName, finalizer and restartPolicy."""
        super().owner(owner, controller=controller)
        r = ref_of(owner)
        if r["kind"] == "Job":
            self._job = r
            self._template.restart_policy = "Never"
        return self

    def workload(self, name: str, podset: str = "main") -> Self:
        """What Kueue's job controller injects at start: annotation kueue.x-k8s.io/workload, label podset."""
        self.annotation(WORKLOAD_ANNOTATION, name)
        return self.label(PODSET_LABEL, podset)

    def queues(self, local_queue: str, cluster_queue: str | None = None) -> Self:
        """Labels kueue.x-k8s.io/local-queue-name and cluster-queue-name (gate AssignQueueLabelsForPods)."""
        self.label(LOCAL_QUEUE_LABEL, local_queue)
        return self.label(CLUSTER_QUEUE_LABEL, cluster_queue) if cluster_queue else self

    def node(self, name: str) -> Self:
        """spec.nodeName: bound (hostIP and startTime follow in ``.obj()``)."""
        self._node = name
        return self

    def gate(self, *names: str) -> Self:
        self._gates.extend(names)
        return self

    def phase(self, phase: str) -> Self:
        self._phase = phase
        return self

    def condition(self, cond: Mapping[str, Any]) -> Self:
        """Add or replace (by type) a PodCondition (see ``pod_condition``)."""
        self._conditions = [c for c in self._conditions if c.get("type") != cond.get("type")] + [dict(cond)]
        return self

    def conditions(self, *conds: Mapping[str, Any]) -> Self:
        self._conditions = [_fresh(c) for c in conds]
        return self

    def unschedulable(self, message: str | None, at: Time = POD_CREATED) -> Self:
        """PodScheduled=False/Unschedulable with kube-scheduler's text (verbatim, from the caller)."""
        return self.condition(pod_condition("PodScheduled", "False", at, "Unschedulable", message))

    def running(self, at: Time, *, ready: bool = True, unready_message: str | None = None) -> Self:
        """Bound and Running, every container running: the kubelet's five conditions and container statuses.

        ``ready=False`` leaves Ready/ContainersReady False with reason ContainersNotReady and
        ``unready_message`` (the kubelet's text, from the caller).
        """
        self._phase = "Running"
        self._start_time = rfc3339(at)
        flag = "True" if ready else "False"
        not_ready = None if ready else "ContainersNotReady"
        self.conditions(
            pod_condition("PodReadyToStartContainers", "True", at), pod_condition("Initialized", "True", at),
            pod_condition("Ready", flag, at, not_ready, unready_message),
            pod_condition("ContainersReady", flag, at, not_ready, unready_message),
            pod_condition("PodScheduled", "True", at))
        self._running = (rfc3339(at), ready)
        return self

    def container_status(self, *statuses: Mapping[str, Any]) -> Self:
        self._container_statuses = [*(self._container_statuses or []), *(_fresh(s) for s in statuses)]
        return self

    def init_container_status(self, *statuses: Mapping[str, Any]) -> Self:
        self._init_statuses = [*(self._init_statuses or []), *(_fresh(s) for s in statuses)]
        return self

    def status_reason(self, reason: str | None, message: str | None = None) -> Self:
        """status.reason/message (Evicted, DeadlineExceeded, OutOfnvidia.com/gpu ...)."""
        self._reason = (reason, message)
        return self

    def start_time(self, at: Time) -> Self:
        self._start_time = rfc3339(at)
        return self

    def _served_labels(self) -> dict[str, str]:
        if self._job is None:
            return {}
        return {"batch.kubernetes.io/controller-uid": self._job["uid"], "batch.kubernetes.io/job-name":
                self._job["name"], "controller-uid": self._job["uid"], "job-name": self._job["name"]}

    def _default_finalizers(self) -> list[str]:
        return ["batch.kubernetes.io/job-tracking"] if self._job is not None else []

    def _generate_name(self) -> str | None:
        return f"{self._job['name']}-" if self._job is not None else None

    def _spec(self, served: bool) -> Obj:
        sp = self._template.spec(served)
        if self._node:
            sp["nodeName"] = self._node
        if self._gates:
            sp["schedulingGates"] = [{"name": g} for g in self._gates]
        if served:
            # DefaultTolerationSeconds admission plugin, then the Priority plugin
            sp["tolerations"] = [*sp.get("tolerations", []), *(
                toleration(f"node.kubernetes.io/{t}", "Exists", effect="NoExecute", seconds=300)
                for t in ("not-ready", "unreachable"))]
            sp.update(priority=0, enableServiceLinks=True, preemptionPolicy="PreemptLowerPriority")
        return sp

    def _manifest_body(self) -> Obj:
        return {"spec": self._spec(served=False)}

    def _served(self) -> Obj:
        st: Obj = {"phase": self._phase}
        if self._conditions:
            st["conditions"] = [_fresh(c) for c in self._conditions]
        reason, message = self._reason
        if reason is not None:
            st["reason"] = reason
        if message is not None:
            st["message"] = message
        if self._node:
            host = _ip("10.0", self._node)
            st["hostIP"], st["hostIPs"] = host, [{"ip": host}]
            if self._phase == "Running":
                pod_ip = _ip("10.244", f"{self.namespace}/{self.name}")
                st["podIP"], st["podIPs"] = pod_ip, [{"ip": pod_ip}]
            st["startTime"] = self._start_time or self._created
        if self._init_statuses is not None:
            st["initContainerStatuses"] = [_fresh(s) for s in self._init_statuses]
        if self._container_statuses is not None:
            st["containerStatuses"] = [_fresh(s) for s in self._container_statuses]
        elif self._running is not None:
            at, ready = self._running
            st["containerStatuses"] = [container_running(at, ready=ready, name=c.name, image=c.image)
                                       for c in self._template.containers]
        st["qosClass"] = self._template.qos_class()
        return {"spec": self._spec(served=True), "status": st}


# ---------------------------------------------------------------------------------------------- events


class Event(_Object):
    """An Event about ``regarding`` (a builder, an ``obj()`` or a ``ref(...)``), in the view of one API.

    ``api="v1"`` gives the core/v1 view (involvedObject, message), ``api="events.k8s.io/v1"`` the new one
    (regarding, note, deprecated* fields). Who recorded it decides which fields are set:
    ``.source(component)`` is the legacy core/v1 recorder (kubelet, job-controller: firstTimestamp,
    lastTimestamp, count), ``.reporting(controller, instance, action)`` the events.k8s.io recorder
    (kube-scheduler, Kueue: eventTime, series). The default is the legacy recorder for ``api="v1"`` and
    kube-scheduler for ``api="events.k8s.io/v1"``.
    """

    KIND = "Event"
    HAS_GENERATION = False

    @property
    def api_version(self) -> str:
        return self._api

    def __init__(self, regarding: Mapping[str, Any] | _Object, reason: str, message: str, *,
                 type: str = "Warning", api: str = "v1", at: Time = EVENT_AT) -> None:
        target = ref_of(regarding)
        if isinstance(regarding, _Object) or "metadata" in regarding:
            md = regarding.get("metadata", {}) if isinstance(regarding, Mapping) else {}
            target["resourceVersion"] = str(md.get("resourceVersion") or "1")
        self._target = target
        self._at = at
        seq = next(_event_seq)
        stamp = int(datetime.strptime(micro_time(at), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
                    * 1e9) + seq
        super().__init__(f"{target['name']}.{stamp:x}", target.get("namespace") or "default")
        self.created(at)
        self._api = api
        self._reason, self._message, self._type = reason, message, type
        self._count = 1
        self._first: str = rfc3339(at)
        self._legacy: tuple[str, str | None] | None = ("job-controller", None) if api == "v1" else None
        self._reporting: tuple[str, str, str] = ("default-scheduler", "default-scheduler-cp-1", "Scheduling")
        self._series: tuple[int, str] | None = None

    def source(self, component: str, host: str | None = None) -> Self:
        self._legacy = (component, host)
        return self

    def reporting(self, controller: str, instance: str, action: str) -> Self:
        self._legacy = None
        self._reporting = (controller, instance, action)
        return self

    def count(self, n: int, first: Time | None = None) -> Self:
        """A legacy event seen ``n`` times, first at ``first``, last at the event's time."""
        self._count = n
        if first is not None:
            self._first = rfc3339(first)
        return self

    def series(self, count: int, last_observed: Time) -> Self:
        self._series = (count, micro_time(last_observed))
        return self

    def _manifest_body(self) -> Obj:
        return self._served()

    def _served(self) -> Obj:
        """Field order and nulls as the API server serves each view (tests/e2e/fixtures)."""
        series = {"count": self._series[0], "lastObservedTime": self._series[1]} if self._series else None
        target = _fresh(self._target)
        if self._legacy:
            comp, host = self._legacy
            source = {"component": comp, **({"host": host} if host else {})}
            if self._api == "v1":
                return {"involvedObject": target, "reason": self._reason, "message": self._message, "source": source,
                        "firstTimestamp": self._first, "lastTimestamp": rfc3339(self._at), "count": self._count,
                        "type": self._type, "eventTime": None, "reportingComponent": comp,
                        "reportingInstance": host or ""}
            return {"eventTime": None, "reportingController": comp, **({"reportingInstance": host} if host else {}),
                    "reason": self._reason, "regarding": target, "note": self._message, "type": self._type,
                    "deprecatedSource": source, "deprecatedFirstTimestamp": self._first,
                    "deprecatedLastTimestamp": rfc3339(self._at), "deprecatedCount": self._count}
        controller, instance, action = self._reporting
        if self._api == "v1":
            return {"involvedObject": target, "reason": self._reason, "message": self._message, "source": {},
                    "firstTimestamp": None, "lastTimestamp": None, "type": self._type,
                    "eventTime": micro_time(self._at), **({"series": series} if series else {}), "action": action,
                    "reportingComponent": controller, "reportingInstance": instance}
        return {"eventTime": micro_time(self._at), **({"series": series} if series else {}),
                "reportingController": controller, "reportingInstance": instance, "action": action,
                "reason": self._reason, "regarding": target, "note": self._message, "type": self._type,
                "deprecatedSource": {}, "deprecatedFirstTimestamp": None, "deprecatedLastTimestamp": None}


# ---------------------------------------------------------------------------------------------- Kueue


class ResourceFlavor(_Object):
    API_VERSION, KIND = KUEUE_API, "ResourceFlavor"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._node_labels: dict[str, str] = {}
        self._taints: list[Obj] = []
        self._tolerations: list[Obj] = []
        self._topology: str | None = None

    def node_labels(self, labels: Mapping[str, str]) -> Self:
        self._node_labels.update(labels)
        return self

    def node_taint(self, key: str, value: str | None = None, effect: str = "NoSchedule") -> Self:
        self._taints.append(taint(key, value, effect))
        return self

    def toleration(self, t: Mapping[str, Any]) -> Self:
        self._tolerations.append(_fresh(t))
        return self

    def topology(self, name: str) -> Self:
        self._topology = name
        return self

    def _default_finalizers(self) -> list[str]:
        return [RESOURCE_IN_USE]

    def _manifest_body(self) -> Obj:
        sp: Obj = {}
        if self._node_labels:
            sp["nodeLabels"] = dict(self._node_labels)
        if self._taints:
            sp["nodeTaints"] = [_fresh(t) for t in self._taints]
        if self._tolerations:
            sp["tolerations"] = [_fresh(t) for t in self._tolerations]
        if self._topology:
            sp["topologyName"] = self._topology
        return {"spec": sp}


class FlavorQuotas:
    """One flavor of a resource group: ``FlavorQuotas("on-demand").resource("cpu", "64", borrowing_limit="8")``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.resources: list[Obj] = []

    def resource(self, name: str, nominal: Any, *, borrowing_limit: Any = None, lending_limit: Any = None) -> Self:
        entry: Obj = {"name": name, "nominalQuota": str(nominal)}
        if borrowing_limit is not None:
            entry["borrowingLimit"] = str(borrowing_limit)
        if lending_limit is not None:
            entry["lendingLimit"] = str(lending_limit)
        self.resources.append(entry)
        return self

    def obj(self) -> Obj:
        return {"name": self.name, "resources": [_fresh(r) for r in self.resources]}


Quota = str | int | Mapping[str, Any]


def _resource_group(flavors: Iterable[FlavorQuotas], covered: Iterable[str] | None) -> Obj:
    flavors = list(flavors)
    resources: list[str] = list(covered) if covered is not None else []
    if covered is None:
        for f in flavors:
            for r in f.resources:
                if r["name"] not in resources:
                    resources.append(r["name"])
    return {"coveredResources": resources, "flavors": [f.obj() for f in flavors]}


class _WithResourceGroups(_Object):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._groups: list[Obj] = []

    def resource_group(self, *flavors: FlavorQuotas, covered: Iterable[str] | None = None) -> Self:
        """A resource group; coveredResources default to every resource its flavors name, in order."""
        self._groups.append(_resource_group(flavors, covered))
        return self

    def quotas(self, flavors: Mapping[str, Mapping[str, Quota]]) -> Self:
        """One resource group from ``{flavor: {resource: nominal | {"nominalQuota": .., "borrowingLimit": ..}}}``."""
        fqs = []
        for fname, resources in flavors.items():
            fq = FlavorQuotas(fname)
            for res, q in resources.items():
                if isinstance(q, Mapping):
                    fq.resource(res, q["nominalQuota"], borrowing_limit=q.get("borrowingLimit"),
                                lending_limit=q.get("lendingLimit"))
                else:
                    fq.resource(res, q)
            fqs.append(fq)
        return self.resource_group(*fqs)

    def _flavor_resources(self) -> list[tuple[str, list[str]]]:
        return [(f["name"], [r["name"] for r in f["resources"]]) for g in self._groups for f in g["flavors"]]


def _flavor_totals(layout: list[tuple[str, list[str]]], values: Mapping[tuple[str, str], tuple[str, str]],
                   borrowed: bool = True) -> list[Obj]:
    out = []
    for fname, resources in layout:
        entries = []
        for r in resources:
            total, borrow = values.get((fname, r), ("0", "0"))
            entries.append({"name": r, "total": total, **({"borrowed": borrow} if borrowed else {})})
        out.append({"name": fname, "resources": entries})
    return out


class ClusterQueue(_WithResourceGroups):
    """A ClusterQueue; status reports zero reservation/usage for every flavor and resource until told."""

    API_VERSION, KIND = KUEUE_API, "ClusterQueue"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._spec: Obj = {"namespaceSelector": {}}
        self._preemption: Obj = {}
        self._active: tuple[str, str, str] | None = CLUSTER_QUEUE_READY
        self._active_at = QUEUES_CREATED
        self._reservation: dict[tuple[str, str], tuple[str, str]] = {}
        self._usage: dict[tuple[str, str], tuple[str, str]] = {}
        self._counts = {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}
        self._status_extra: Obj = {}

    def cohort(self, name: str) -> Self:
        self._spec["cohortName"] = name
        return self

    def queueing_strategy(self, strategy: str) -> Self:
        self._spec["queueingStrategy"] = strategy
        return self

    def stop_policy(self, policy: str) -> Self:
        self._spec["stopPolicy"] = policy
        return self

    def namespace_selector(self, selector: Mapping[str, Any] | None) -> Self:
        """``{}`` (the default) admits every namespace; ``None`` is a null selector: no namespace."""
        self._spec["namespaceSelector"] = None if selector is None else dict(selector)
        return self

    def preemption(self, within_cluster_queue: str | None = None, reclaim_within_cohort: str | None = None,
                   borrow_within_cohort: Mapping[str, Any] | None = None) -> Self:
        if within_cluster_queue:
            self._preemption["withinClusterQueue"] = within_cluster_queue
        if reclaim_within_cohort:
            self._preemption["reclaimWithinCohort"] = reclaim_within_cohort
        if borrow_within_cohort is not None:
            self._preemption["borrowWithinCohort"] = dict(borrow_within_cohort)
        return self

    def admission_check(self, name: str, on_flavors: Iterable[str] = ()) -> Self:
        rules = self._spec.setdefault("admissionChecksStrategy", {"admissionChecks": []})["admissionChecks"]
        rules.append({"name": name, **({"onFlavors": list(on_flavors)} if on_flavors else {})})
        return self

    def flavor_fungibility(self, when_can_borrow: str, when_can_preempt: str) -> Self:
        self._spec["flavorFungibility"] = {"whenCanBorrow": when_can_borrow, "whenCanPreempt": when_can_preempt}
        return self

    def fair_sharing(self, weight: str) -> Self:
        self._spec["fairSharing"] = {"weight": weight}
        return self

    def spec_field(self, key: str, value: Any) -> Self:
        """Any other spec field, as the CRD names it."""
        self._spec[key] = _fresh(value)
        return self

    # --- status
    def active(self, status: str | None, reason: str = "", message: str = "", at: Time = QUEUES_CREATED) -> Self:
        """The Active condition (text from the caller); ``active(None)``: not reconciled yet, no status."""
        self._active = None if status is None else (status, reason, message)
        self._active_at = rfc3339(at)
        return self

    def reservation(self, flavor: str, resource: str, total: Any, borrowed: Any = "0") -> Self:
        """status.flavorsReservation: quota held by Workloads with QuotaReserved=True."""
        self._reservation[flavor, resource] = (str(total), str(borrowed))
        return self

    def usage(self, flavor: str, resource: str, total: Any, borrowed: Any = "0") -> Self:
        """status.flavorsUsage: quota of admitted Workloads."""
        self._usage[flavor, resource] = (str(total), str(borrowed))
        return self

    def workloads(self, *, pending: int | None = None, reserving: int | None = None,
                  admitted: int | None = None) -> Self:
        for key, value in (("pendingWorkloads", pending), ("reservingWorkloads", reserving),
                           ("admittedWorkloads", admitted)):
            if value is not None:
                self._counts[key] = value
        return self

    def status_field(self, key: str, value: Any) -> Self:
        self._status_extra[key] = _fresh(value)
        return self

    def _default_finalizers(self) -> list[str]:
        return [RESOURCE_IN_USE]

    def _manifest_body(self) -> Obj:
        sp = _fresh(self._spec)
        if self._preemption:
            sp["preemption"] = _fresh(self._preemption)
        sp["resourceGroups"] = _fresh(self._groups)
        return {"spec": sp}

    def _served(self) -> Obj:
        sp: Obj = {"flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
                   **self._manifest_body()["spec"]}
        sp["preemption"] = {"borrowWithinCohort": {"policy": "Never"}, "reclaimWithinCohort": "Never",
                            "withinClusterQueue": "Never", **_fresh(self._preemption)}
        sp.setdefault("queueingStrategy", "BestEffortFIFO")
        sp.setdefault("stopPolicy", "None")
        if self._active is None:
            return {"spec": sp}
        layout = self._flavor_resources()
        status: Obj = {"admittedWorkloads": self._counts["admittedWorkloads"],
                       "conditions": [condition("Active", *self._active, at=self._active_at)],
                       "flavorsReservation": _flavor_totals(layout, self._reservation),
                       "flavorsUsage": _flavor_totals(layout, self._usage),
                       "pendingWorkloads": self._counts["pendingWorkloads"],
                       "reservingWorkloads": self._counts["reservingWorkloads"], **_fresh(self._status_extra)}
        return {"spec": sp, "status": status}


class Cohort(_WithResourceGroups):
    API_VERSION, KIND = KUEUE_API, "Cohort"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._parent: str | None = None

    def parent(self, name: str) -> Self:
        self._parent = name
        return self

    def _manifest_body(self) -> Obj:
        sp: Obj = {}
        if self._parent:
            sp["parentName"] = self._parent
        if self._groups:
            sp["resourceGroups"] = _fresh(self._groups)
        return {"spec": sp}

    def _served(self) -> Obj:
        return {**self._manifest_body(), "status": {}}


class LocalQueue(_Object):
    API_VERSION, KIND = KUEUE_API, "LocalQueue"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str, namespace: str, cluster_queue: str) -> None:
        super().__init__(name, namespace)
        self.cluster_queue = cluster_queue
        self._stop_policy: str | None = None
        self._active: tuple[str, str, str] | None = LOCAL_QUEUE_READY
        self._reservation: dict[tuple[str, str], tuple[str, str]] = {}
        self._usage: dict[tuple[str, str], tuple[str, str]] = {}
        self._counts = {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}

    def stop_policy(self, policy: str) -> Self:
        self._stop_policy = policy
        return self

    def active(self, status: str | None, reason: str = "", message: str = "") -> Self:
        self._active = None if status is None else (status, reason, message)
        return self

    def reservation(self, flavor: str, resource: str, total: Any) -> Self:
        self._reservation[flavor, resource] = (str(total), "0")
        return self

    def usage(self, flavor: str, resource: str, total: Any) -> Self:
        self._usage[flavor, resource] = (str(total), "0")
        return self

    def workloads(self, *, pending: int | None = None, reserving: int | None = None,
                  admitted: int | None = None) -> Self:
        for key, value in (("pendingWorkloads", pending), ("reservingWorkloads", reserving),
                           ("admittedWorkloads", admitted)):
            if value is not None:
                self._counts[key] = value
        return self

    def _manifest_body(self) -> Obj:
        sp: Obj = {"clusterQueue": self.cluster_queue}
        if self._stop_policy:
            sp["stopPolicy"] = self._stop_policy
        return {"spec": sp}

    def _served(self) -> Obj:
        sp = {"clusterQueue": self.cluster_queue, "stopPolicy": self._stop_policy or "None"}
        if self._active is None:
            return {"spec": sp}

        def layout(values: Mapping[tuple[str, str], Any]) -> list[tuple[str, list[str]]]:
            flavors: dict[str, list[str]] = {}
            for f, r in values:
                flavors.setdefault(f, []).append(r)
            return list(flavors.items())

        status: Obj = {"admittedWorkloads": self._counts["admittedWorkloads"],
                       "conditions": [condition("Active", *self._active, at=QUEUES_CREATED)],
                       "flavorsReservation": _flavor_totals(layout(self._reservation), self._reservation, False),
                       "flavorsUsage": _flavor_totals(layout(self._usage), self._usage, False),
                       "pendingWorkloads": self._counts["pendingWorkloads"],
                       "reservingWorkloads": self._counts["reservingWorkloads"]}
        return {"spec": sp, "status": status}


class AdmissionCheck(_Object):
    API_VERSION, KIND = KUEUE_API, "AdmissionCheck"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str, controller: str = "kueue.x-k8s.io/provisioning-request") -> None:
        super().__init__(name)
        self._controller = controller
        self._parameters: Obj | None = None
        self._conditions: list[Obj] = []

    def parameters(self, api_group: str, kind: str, name: str) -> Self:
        self._parameters = {"apiGroup": api_group, "kind": kind, "name": name}
        return self

    def active(self, status: str, reason: str, message: str, at: Time = QUEUES_CREATED) -> Self:
        """The Active condition its controller writes (text from the caller)."""
        self._conditions = [condition("Active", status, reason, message, at)]
        return self

    def _manifest_body(self) -> Obj:
        sp: Obj = {"controllerName": self._controller}
        if self._parameters:
            sp["parameters"] = _fresh(self._parameters)
        return {"spec": sp}

    def _served(self) -> Obj:
        status: Obj = {"conditions": [_fresh(c) for c in self._conditions]} if self._conditions else {}
        return {**self._manifest_body(), "status": status}


class WorkloadPriorityClass(_Object):
    API_VERSION, KIND = KUEUE_API, "WorkloadPriorityClass"
    DEFAULT_CREATED = QUEUES_CREATED

    def __init__(self, name: str, value: int, description: str | None = None) -> None:
        super().__init__(name)
        self._value, self._description = value, description

    def _manifest_body(self) -> Obj:
        return {"value": self._value, **({"description": self._description} if self._description else {})}


class PodSet(_WithPodTemplate):
    """One pod set of a Workload (not an API object: ``Workload.pod_sets(PodSet("workers", 4)...)``)."""

    def __init__(self, name: str = "main", count: int = 1) -> None:
        self.name = name
        self._template = _PodTemplate("Never")
        self._count = count
        self._min_count: int | None = None
        self._template_labels: dict[str, str] = {}
        self._topology: Obj = {}

    def count(self, n: int) -> Self:
        self._count = n
        return self

    def min_count(self, n: int) -> Self:
        self._min_count = n
        return self

    def template_label(self, key: str, value: str) -> Self:
        self._template_labels[key] = value
        return self

    def topology_request(self, **fields: Any) -> Self:
        """topologyRequest fields as the CRD names them: ``topology_request(required="cloud.com/rack")``."""
        self._topology.update(fields)
        return self

    def spec(self, served: bool, job_name: str | None = None) -> Obj:
        ps: Obj = {"name": self.name, "count": self._count}
        if self._min_count is not None:
            ps["minCount"] = self._min_count
        labels = ({"batch.kubernetes.io/job-name": job_name} if job_name and served else {}) | self._template_labels
        ps["template"] = {"metadata": {"labels": labels} if labels else {}, "spec": self._template.spec(served)}
        topology = ({"podIndexLabel": JOB_COMPLETION_INDEX} if job_name and served else {}) | _fresh(self._topology)
        if topology:
            ps["topologyRequest"] = topology
        return ps


class Admission:
    """status.admission: ``Admission("cq").assignment("main", count=2, flavors={"cpu": "f"}, usage={"cpu": "2"})``."""

    def __init__(self, cluster_queue: str) -> None:
        self.cluster_queue = cluster_queue
        self.assignments: list[Obj] = []

    def assignment(self, podset: str = "main", *, count: int | None = 1, flavors: Mapping[str, str],
                   usage: Mapping[str, Any], **extra: Any) -> Self:
        """One podSetAssignment; ``usage`` is the total for the pod set (per pod x count), as Kueue stores it."""
        entry: Obj = {"name": podset, "flavors": dict(flavors), "resourceUsage": _quantities(usage)}
        if count is not None:
            entry["count"] = count
        entry.update(_fresh(extra))
        self.assignments.append(entry)
        return self

    def obj(self) -> Obj:
        return {"clusterQueue": self.cluster_queue, "podSetAssignments": _fresh(self.assignments)}


class Workload(_Object):
    """A Kueue Workload; one pod set ``main`` of one pod unless ``pod_sets(...)`` says otherwise.

    ``request``/``limit``/``count``/``image``/``node_selector`` act on the first pod set. ``.owner(job)``
    adds what Kueue's job reconciler sets: the controller ownerReference, label kueue.x-k8s.io/job-uid,
    and (for a batch Job) the job-name template label and the completion-index topology request.
    """

    API_VERSION, KIND = KUEUE_API, "Workload"

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(name, namespace)
        self._pod_sets: list[PodSet] = [PodSet()]
        self._queue: str | None = None
        self._priority: int | None = None
        self._priority_class: Obj | None = None
        self._active: bool | None = None
        self._spec_extra: Obj = {}
        self._job_name: str | None = None
        self._conditions: list[Obj] = []
        self._admission: Admission | Obj | None = None
        self._status: Obj = {}

    # --- spec
    def queue(self, local_queue: str) -> Self:
        self._queue = local_queue
        return self

    def priority(self, value: int) -> Self:
        self._priority = value
        return self

    def priority_class(self, name: str, kind: str = "WorkloadPriorityClass") -> Self:
        """spec.priorityClassRef (v1beta2): a WorkloadPriorityClass, or ``kind="PriorityClass"``."""
        group = KUEUE_GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
        self._priority_class = {"group": group, "kind": kind, "name": name}
        return self

    def active(self, active: bool) -> Self:
        self._active = active
        return self

    def spec_field(self, key: str, value: Any) -> Self:
        """Any other spec field (maximumExecutionTimeSeconds, preemptionGates ...)."""
        self._spec_extra[key] = _fresh(value)
        return self

    def pod_sets(self, *pod_sets: PodSet) -> Self:
        self._pod_sets = list(pod_sets)
        return self

    def count(self, n: int) -> Self:
        self._pod_sets[0].count(n)
        return self

    def request(self, resource: str, quantity: Any) -> Self:
        self._pod_sets[0].request(resource, quantity)
        return self

    def limit(self, resource: str, quantity: Any) -> Self:
        self._pod_sets[0].limit(resource, quantity)
        return self

    def image(self, image: str) -> Self:
        self._pod_sets[0].image(image)
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        self._pod_sets[0].node_selector(selector)
        return self

    def owner(self, owner: Mapping[str, Any] | _Object, *, controller: bool = True) -> Self:
        super().owner(owner, controller=controller)
        r = ref_of(owner)
        if controller:
            self.label(JOB_UID_LABEL, r["uid"])
        if r["kind"] == "Job":
            self._job_name = r["name"]
        return self

    # --- status
    def condition(self, cond: Mapping[str, Any]) -> Self:
        """Add or replace (by type, as Kueue's SetStatusCondition does) a condition (see ``condition``)."""
        self._conditions = [c for c in self._conditions if c.get("type") != cond.get("type")] + [dict(cond)]
        return self

    def conditions(self, *conds: Mapping[str, Any]) -> Self:
        self._conditions = []
        for c in conds:
            self.condition(c)
        return self

    def admission(self, admission: Admission | Mapping[str, Any] | None) -> Self:
        """status.admission (Kueue clears it to null when quota is released: ``admission(None)``)."""
        self._admission = admission if isinstance(admission, Admission) or admission is None else dict(admission)
        return self

    def admission_check(self, name: str, state: str, message: str = "", at: Time = CREATED, **extra: Any) -> Self:
        """One status.admissionChecks entry (retryCount, requeueAfterSeconds, podSetUpdates in ``extra``)."""
        checks = self._status.setdefault("admissionChecks", [])
        checks.append({"name": name, "state": state, "message": message, "lastTransitionTime": rfc3339(at),
                       **_fresh(extra)})
        return self

    def resource_requests(self, podset: str, resources: Mapping[str, Any]) -> Self:
        """status.resourceRequests for one pod set: the totals the scheduler counted."""
        self._status.setdefault("resourceRequests", []).append({"name": podset, "resources": _quantities(resources)})
        return self

    def requeue_state(self, count: int | None = None, requeue_at: Time | None = None) -> Self:
        rs: Obj = {}
        if count is not None:
            rs["count"] = count
        if requeue_at is not None:
            rs["requeueAt"] = rfc3339(requeue_at)
        self._status["requeueState"] = rs
        return self

    def eviction_stats(self, reason: str, underlying_cause: str = "", count: int = 1) -> Self:
        stats = self._status.setdefault("schedulingStats", {"evictions": []})["evictions"]
        stats.append({"reason": reason, "underlyingCause": underlying_cause, "count": count})
        return self

    def status_field(self, key: str, value: Any) -> Self:
        """Any other status field (clusterName, accumulatedPastExecutionTimeSeconds, unhealthyNodes ...)."""
        self._status[key] = _fresh(value)
        return self

    def _default_finalizers(self) -> list[str]:
        return [RESOURCE_IN_USE]

    def _spec(self, served: bool) -> Obj:
        sp: Obj = {}
        if self._active is not None or served:
            sp["active"] = True if self._active is None else self._active
        sp["podSets"] = [ps.spec(served, self._job_name) for ps in self._pod_sets]
        if self._priority_class:
            sp["priorityClassRef"] = _fresh(self._priority_class)
        if self._priority is not None or served:
            sp["priority"] = self._priority or 0
        if self._queue is not None:
            sp["queueName"] = self._queue
        sp.update(_fresh(self._spec_extra))
        return sp

    def _manifest_body(self) -> Obj:
        return {"spec": self._spec(served=False)}

    def _served(self) -> Obj:
        st: Obj = {}
        if isinstance(self._admission, Admission):
            st["admission"] = self._admission.obj()
        elif self._admission is not None:
            st["admission"] = _fresh(self._admission)
        st["conditions"] = [_fresh(c) for c in self._conditions]
        st.update(_fresh(self._status))
        return {"spec": self._spec(served=True), "status": st}
