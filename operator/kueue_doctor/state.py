"""ClusterState: the objects the engine needs, indexed for the questions it asks.

Built at once from a file or a LIST (`ClusterState.from_objects`), or kept current by watch events
(`upsert` / `remove`). Knows which Workloads a change can affect (`affected_workloads`).
"""

from __future__ import annotations

import contextlib
import marshal
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from .kube import kueue_config
from .kube.allocation import cycle_collection_paused
from .kube.kueue_names import POD_GROUP_KEY, expected_workload_name, identifier
from .kube.objects import (
    KUEUE_GROUP,
    controller_ref,
    effective_priority,
    group_of,
    labels,
    lst,
    m,
    meta,
    name,
    namespace,
    ns_name,
    owner_refs,
    parse_time,
    s,
    spec,
    status,
    uid,
    workload_owner_ref,
)
from .kube.packed import PackedObjects
from .kube.slim import PREEMPTING_MARKERS

KUEUE = KUEUE_GROUP
# Kueue's visibility API: its PendingWorkloadsSummary (the pending Workloads of a ClusterQueue in Kueue's order)
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
PENDING_SUMMARY = "PendingWorkloadsSummary"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
POD_GROUP_LABEL = POD_GROUP_KEY  # a label or, first, an annotation (kueue_names.identifier)
GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"  # Workloads made for a group of Pods
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
# Pod labels naming the owner at the top of the chain, for owners whose children the operator may not list (an
# AppWrapper's wrapped Job has no queue-name label, so no watch sees it): label -> the owner's kind
# A SparkApplication's executors are owned by its driver Pod (spark-operator); all its Pods carry its name, which is
# how Kueue finds them too (sparkapplication_controller.go PodLabelSelector)
POD_OWNER_LABELS = {"workload.codeflare.dev/appwrapper": "AppWrapper",
                    "sparkoperator.k8s.io/app-name": "SparkApplication"}
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"

# (group, kind) -> the state collection it goes to. Other kinds are ignored.
KUEUE_KINDS = {"Workload", "LocalQueue", "ClusterQueue", "ResourceFlavor", "Cohort", "AdmissionCheck",
               "Topology", "WorkloadPriorityClass", "MultiKueueCluster", "MultiKueueConfig",
               "ProvisioningRequestConfig"}
# Owners whose suspension and Pods we read (group, kind): every kind Kueue v0.19 integrates (pkg/controller/jobs), so
# a child of one (a RayService's RayCluster, an AppWrapper's Job) is managed through that ancestor's Workload.
OWNER_KINDS = {("batch", "Job"), ("jobset.x-k8s.io", "JobSet"), ("ray.io", "RayJob"), ("ray.io", "RayCluster"),
               ("ray.io", "RayService"), ("kubeflow.org", "MPIJob"), ("kubeflow.org", "PyTorchJob"),
               ("kubeflow.org", "TFJob"), ("kubeflow.org", "XGBoostJob"), ("kubeflow.org", "PaddleJob"),
               ("kubeflow.org", "JAXJob"), ("kubeflow.org", "TrainJob"), ("trainer.kubeflow.org", "TrainJob"),
               ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"), ("apps", "StatefulSet"), ("apps", "Deployment"),
               ("workload.codeflare.dev", "AppWrapper"), ("sparkoperator.k8s.io", "SparkApplication")}
_OWNER_KIND_NAMES = {kind for _group, kind in OWNER_KINDS}

_TOP_OWNER_KINDS = frozenset(POD_OWNER_LABELS.values())

Key = tuple[str, str]  # (namespace, name)
# Warning Events kept per object (Pod, Job, Workload), newest first: a flood about one object (a crash-looping
# controller, thousands of distinct events) costs at most this many; the rules read only the recent ones.
MAX_EVENTS_PER_OBJECT = 20
MAX_SHAPES = 20_000  # distinct Pod request shapes shared by a packed state (a Job's Pods share one)
_NO_KEYS: frozenset[Any] = frozenset()  # the default of the index look-ups (no new empty set per miss)
T = TypeVar("T")


class Derived(Generic[T]):
    """A fact computed from the whole state, kept until the Workload/queue index is rebuilt.

    The engine declares its cross-Workload facts (victims by preemptor, StrictFIFO heads, quota tables)
    as module-level Derived values; the object itself is the cache key, so there are no string keys and
    the value's type is checked. The state never imports the engine: it only stores what `build` returns.
    """

    __slots__ = ("build", "name", "numbers")  # compared by identity (no __eq__): the object itself is the key

    def __init__(self, name: str, build: Callable[[ClusterState], T], *, numbers: bool = False) -> None:
        self.name = name
        self.build = build
        # computed from a ClusterQueue's status numbers (reservations, usage, fair-sharing shares): every read of
        # it counts as a read of those numbers (`ClusterState.numbers_read`), hit or miss
        self.numbers = numbers
_PREEMPTOR_UID = re.compile(r"^Preempted to accommodate a workload \(UID: ([^,)]+)")


def _evicted_message(obj: Mapping[str, Any]) -> str:
    for cond in lst(m(obj.get("status")).get("conditions")):
        if m(cond).get("type") == "Evicted":
            return s(m(cond).get("message")) or ""
    return ""


def _event_order(ev: Mapping[str, Any]) -> str:
    """When an Event last happened, as an RFC 3339 string (they sort by time), for keeping the newest."""
    return (s(m(ev.get("series")).get("lastObservedTime")) or s(ev.get("lastTimestamp")) or s(ev.get("eventTime"))
            or s(ev.get("firstTimestamp")) or s(m(ev.get("metadata")).get("creationTimestamp")) or "")


def kind_key(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    kind = s(obj.get("kind"))
    if not kind:
        return None
    return group_of(obj.get("apiVersion")), kind


OLD_VERSIONS = ("v1beta1", "v1alpha1")  # Kueue API versions whose field names `normalize` maps


def normalize(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """Present v1beta1 Kueue objects (and Kueue 0.9-0.12's v1alpha1 Cohorts) with v1beta2 field names (API-NOTES
    section 1.1)."""
    key = kind_key(obj)
    if key is None or key[0] != KUEUE or not str(obj.get("apiVersion", "")).endswith(OLD_VERSIONS):
        return obj
    kind = key[1]
    if kind == "Cohort":
        sp = dict(spec(obj))
        if "parent" in sp and "parentName" not in sp:
            sp["parentName"] = sp.pop("parent")
        return {**obj, "spec": sp}
    if kind == "ClusterQueue":
        sp = dict(spec(obj))
        if "cohort" in sp and "cohortName" not in sp:
            sp["cohortName"] = sp.pop("cohort")
        checks = sp.pop("admissionChecks", None)
        if isinstance(checks, list) and "admissionChecksStrategy" not in sp:
            sp["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks if isinstance(c, str)]}
        return {**obj, "spec": sp}
    if kind == "LocalQueue":
        st = dict(m(obj.get("status")))
        if "flavorUsage" in st and "flavorsUsage" not in st:
            st["flavorsUsage"] = st.pop("flavorUsage")
        return {**obj, "status": st}
    if kind == "MultiKueueCluster":
        sp = dict(spec(obj))
        source = {k: sp.pop(k) for k in ("kubeConfig", "clusterProfileRef") if k in sp}
        if source and "clusterSource" not in sp:
            sp["clusterSource"] = source
        return {**obj, "spec": sp}
    if kind == "Workload":
        st = dict(m(obj.get("status")))
        if "accumulatedPastExexcutionTimeSeconds" in st:
            st["accumulatedPastExecutionTimeSeconds"] = st.pop("accumulatedPastExexcutionTimeSeconds")
        return {**obj, "status": st}
    return obj


@dataclass
class ClusterState:
    # a plain dict, or PackedObjects in the operator (compressed; a namespace shard keeps the other shards' as
    # projections, kube/slim.foreign_workload)
    workloads: MutableMapping[Key, Mapping[str, Any]] = field(default_factory=dict)
    local_queues: dict[Key, Mapping[str, Any]] = field(default_factory=dict)
    cluster_queues: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    flavors: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    cohorts: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    admission_checks: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    topologies: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    # MultiKueue (on a manager cluster): the workers and the AdmissionChecks' parameters naming them
    multikueue_clusters: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    multikueue_configs: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    # the ProvisioningRequest checks' parameters: retryStrategy, provisioningClassName, managedResources
    provisioning_configs: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    nodes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    owners: dict[tuple[str, str, str], Mapping[str, Any]] = field(default_factory=dict)  # (ns, kind, name)
    owners_by_uid: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    # a plain dict, or PackedObjects in the operator (compressed; each read decodes): read a Pod by key, or the
    # Pods of a Workload (`pods_of`); what every pass needs of all Pods is kept beside it (`_bound`, `_groups`)
    pods: MutableMapping[Key, Mapping[str, Any]] = field(default_factory=dict)
    events: MutableMapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by uid or key; packed like pods
    priority_classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # WorkloadPriorityClasses
    # Kueue's Configuration: the manager's ConfigMap (by namespace), or Configuration documents of a dump
    config_maps: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    configurations: list[Mapping[str, Any]] = field(default_factory=list)
    # Kueue's visibility API answers (PendingWorkloadsSummary, one per ClusterQueue read), as Kueue returns them;
    # `explain` names each after its ClusterQueue (metadata.name), a `kubectl get --raw` dump has no name
    pending_summaries: list[Mapping[str, Any]] = field(default_factory=list)
    # kinds whose list is complete: absence of an object of that kind means it does not exist
    complete_kinds: set[str] = field(default_factory=set)
    # a dump's complete kinds are guessed from what it holds (`from_objects`); listed ones are known (the operator,
    # `explain` on a live cluster): a dump may have left objects of a kind out that other objects name
    dump: bool = False
    ignored: int = 0
    # reads of ClusterQueue status numbers (`read_numbers`): a Workload whose diagnosis left it unchanged cannot
    # get another diagnosis when only those numbers move (the operator's numbers rounds leave it alone)
    numbers_read: int = 0
    # counts Node upserts and removals: Nodes are not Kueue objects and do not rebuild the index, so a
    # Derived fact read from them keeps the count it was computed at
    nodes_version: int = 0
    # Pods and Events are the many: their indices are kept incrementally, keyed by what the objects
    # themselves say (annotations, labels, owner UIDs), so a Pod change never rebuilds anything.
    # ref -> its Pods; a dict as an ordered set: 224 bytes for 5 Pods where a set takes 728
    _pods_by_ref: dict[tuple[str, ...], dict[Key, None]] = field(default_factory=dict)
    _pod_refs: dict[Key, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    _ref_names: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    _bound: dict[Key, tuple[str, str, Mapping[str, Any]]] = field(default_factory=dict)  # see `bound_pods`
    _groups: dict[Key, set[Key]] = field(default_factory=dict)  # (namespace, pod group) -> its queued Pods
    _group_of: dict[Key, Key] = field(default_factory=dict)
    _shapes: dict[bytes, Mapping[str, Any]] = field(default_factory=dict)  # shared requests of packed Pods
    # (kind, namespace, name) -> its Events' keys in `events`, each with when it last happened (`_event_order`)
    _events_by_object: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)
    _event_refs: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    _owners_by_parent: dict[str, set[str]] = field(default_factory=dict)
    # the Workload name Kueue gives each owner -> the owner's key, to find an owner that has none yet
    _owner_by_workload_name: dict[Key, tuple[str, str, str]] = field(default_factory=dict)
    _kueue_config: kueue_config.KueueConfig | None = None
    _index: _Index | None = None

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]], complete_kinds: Iterable[str] | None = None,
                     *, packed: bool = False) -> ClusterState:
        state = cls.packed() if packed else cls()
        with cycle_collection_paused():
            for obj in objects:
                state.upsert(obj)
        if complete_kinds is None:
            state.dump = True
            # A dump is taken to list every object of each kind it contains at all.
            seen = {k for k, coll in state._collections().items() if coll}
            if seen & {"LocalQueue", "ClusterQueue"}:
                seen.add("Workload")  # a dump of Kueue's queues without Workloads: there are none
            state.complete_kinds = seen
        else:
            state.complete_kinds = set(complete_kinds)
        return state

    @classmethod
    def packed(cls) -> ClusterState:
        """A state that keeps its Workloads, Pods and Events compressed (kube/packed.py): the operator's, where
        they are the many. A pass decodes each Workload it reads once (`reading`)."""
        return cls(pods=PackedObjects(), events=PackedObjects(), workloads=PackedObjects())

    def _collections(self) -> dict[str, Mapping[Any, Any]]:
        return {"Workload": self.workloads, "LocalQueue": self.local_queues, "ClusterQueue": self.cluster_queues,
                "ResourceFlavor": self.flavors, "Cohort": self.cohorts, "AdmissionCheck": self.admission_checks,
                "Topology": self.topologies, "Namespace": self.namespaces, "Node": self.nodes,
                "MultiKueueCluster": self.multikueue_clusters, "MultiKueueConfig": self.multikueue_configs,
                "ProvisioningRequestConfig": self.provisioning_configs,
                "Pod": self.pods, "Event": self.events, "Job": self.owners,
                "WorkloadPriorityClass": self.priority_classes, "ConfigMap": self.config_maps}

    # ----- the key layout, for code that compares what it is told with what is kept (the operator) -----
    def collection(self, kind: str) -> Mapping[Any, Mapping[str, Any]] | None:
        """The dict `upsert` keeps objects of `kind` in, keyed by `key_of`; None for a kind not kept.

        Owners of every kind (Job, JobSet, ...) share one dict, keyed (namespace, kind, name).
        """
        if kind in _OWNER_KIND_NAMES:
            return self.owners
        return self._collections().get(kind)

    @staticmethod
    def key_of(kind: str, obj: Mapping[str, Any]) -> Any:
        """The key `upsert` stores `obj` (of `kind`) under in `collection(kind)`; metadata is enough."""
        ns, nm = ns_name(obj)
        if kind == "Event":
            return uid(obj) or f"{ns}/{nm}"
        if kind in _OWNER_KIND_NAMES:
            return ns, kind, nm
        if kind in ("Workload", "LocalQueue", "Pod"):
            return ns, nm
        if kind == "ConfigMap":  # only Kueue's own is kept, one per namespace
            return ns
        return nm

    def upsert(self, obj: Mapping[str, Any]) -> bool:
        """Store one object; False when its kind is not used (ignored, never an error)."""
        if type(obj) is not dict and not isinstance(obj, Mapping):  # the ABC check only for the rare non-dict
            self.ignored += 1
            return False
        key = kind_key(obj)
        if key is None:
            self.ignored += 1
            return False
        group, kind = key
        if group == KUEUE and str(obj.get("apiVersion", "")).endswith(OLD_VERSIONS):  # what `normalize` rewrites
            obj = normalize(obj)
        md = m(obj.get("metadata"))
        nm, ns = s(md.get("name")), s(md.get("namespace"))
        if group == KUEUE and kind in KUEUE_KINDS:
            if nm is None:
                self.ignored += 1
                return False
            idx = self._index
            if idx is not None:
                idx.derived.clear()  # the engine's facts are lazy per key: dropped, rebuilt for what is asked
            if kind == "Workload" or kind == "LocalQueue":
                if ns is None:
                    self.ignored += 1
                    return False
                if kind == "Workload":
                    wl_key = (ns, nm)  # one tuple for the store and the index
                    self.workloads[wl_key] = obj
                    if idx is not None:
                        idx.link_workload(self, wl_key, obj)
                else:
                    old_lq = self.local_queues.get((ns, nm)) or {}
                    self.local_queues[ns, nm] = obj
                    if idx is not None and s(spec(old_lq).get("clusterQueue")) != s(spec(obj).get("clusterQueue")):
                        idx.relink_local_queue(self, (ns, nm))
            elif kind == "ClusterQueue":
                old_cq = self.cluster_queues.get(nm)
                self.cluster_queues[nm] = obj
                if idx is not None and (old_cq is None or _queue_structure(old_cq) != _queue_structure(obj)):
                    idx.link_cluster_queues(self)
            elif kind == "ResourceFlavor":
                self.flavors[nm] = obj
            elif kind == "Cohort":
                self.cohorts[nm] = obj
            elif kind == "AdmissionCheck":
                self.admission_checks[nm] = obj
            elif kind == "Topology":
                self.topologies[nm] = obj
            elif kind == "WorkloadPriorityClass":
                self.priority_classes[nm] = obj
            elif kind == "MultiKueueCluster":
                self.multikueue_clusters[nm] = obj
            elif kind == "MultiKueueConfig":
                self.multikueue_configs[nm] = obj
            elif kind == "ProvisioningRequestConfig":
                self.provisioning_configs[nm] = obj
            return True
        if group == "" and kind == "Pod" and nm and ns:
            pod_key = (ns, nm)  # one tuple for the store and every link (56 bytes a Pod, 50,000 Pods)
            self._unlink_pod(pod_key)
            self.pods[pod_key] = obj
            self._link_pod(pod_key, obj)
            return True
        if kind == "Event" and group in ("", "events.k8s.io"):
            ev_key = uid(obj) or f"{ns}/{nm}"
            self._unlink_event(ev_key)
            self.events[ev_key] = obj
            ref = m(obj.get("involvedObject") or obj.get("regarding"))
            target = (s(ref.get("kind")) or "", s(ref.get("namespace")) or "", s(ref.get("name")) or "")
            kept = self._events_by_object.setdefault(target, {})
            kept[ev_key] = _event_order(obj)
            self._event_refs[ev_key] = target
            if len(kept) > MAX_EVENTS_PER_OBJECT:
                oldest = min(kept, key=kept.__getitem__)
                self.events.pop(oldest, None)
                self._unlink_event(oldest)
            return True
        if group == "" and kind == "Namespace" and nm:
            self.namespaces[nm] = obj
            return True
        if group == "" and kind == "Node" and nm:
            self.nodes[nm] = obj
            self.nodes_version += 1
            return True
        if group == "" and kind == "ConfigMap" and kueue_config.is_config_map(obj):
            self.config_maps[ns or ""] = obj
            self._forget_config()
            return True
        if group == VISIBILITY_GROUP and kind == PENDING_SUMMARY:
            self.pending_summaries.append(obj)
            return True
        if kueue_config.is_configuration(obj):
            self.configurations.append(obj)
            self._forget_config()
            return True
        if (group, kind) in OWNER_KINDS and nm and ns:
            self.owners[ns, kind, nm] = obj
            if kind == "Deployment" and nm == kueue_config.DEPLOYMENT:  # its --feature-gates flag
                self._forget_config()
            u = uid(obj)
            if u:
                self.owners_by_uid[u] = obj
                self._owner_by_workload_name[ns, expected_workload_name(obj)] = (ns, kind, nm)
                for ref in owner_refs(obj):  # Job -> JobSet: Pods are found through the chain
                    parent = s(ref.get("uid"))
                    if parent:
                        self._owners_by_parent.setdefault(parent, set()).add(u)
            return True
        self.ignored += 1
        return False

    def _link_pod(self, key: Key, pod: Mapping[str, Any]) -> None:
        ns = key[0]
        refs: list[tuple[str, ...]] = []
        pod_labels = labels(pod)  # read once: the group and the queue label both come from it
        annotated = s(m(meta(pod).get("annotations")).get(WORKLOAD_ANNOTATION))
        group = identifier(pod, POD_GROUP_LABEL)
        for wl_name in (annotated, group):
            if wl_name:
                refs.append(("wl", ns, wl_name))
        for label, kind in POD_OWNER_LABELS.items():
            top = s(pod_labels.get(label))
            if top:
                refs.append(("top", ns, kind, top))
        for r in owner_refs(pod):
            u = s(r.get("uid"))
            if u:
                refs.append(("uid", u))
        kept = []
        for ref in refs:
            ref = self._ref_names.setdefault(ref, ref)  # one tuple per Workload/owner, not one per Pod
            self._pods_by_ref.setdefault(ref, {})[key] = None
            kept.append(ref)
        if kept:  # most Pods another shard diagnoses have none: no entry for them
            self._pod_refs[key] = tuple(kept)
        pod_spec = spec(pod)
        node = s(pod_spec.get("nodeName"))
        if node:  # node and phase interned: a hundred Pods share a node's name, all share "Running"
            self._bound[key] = (sys.intern(node), sys.intern(s(m(pod.get("status")).get("phase")) or ""),
                                self._requests_shape(pod_spec))
        if group and s(pod_labels.get(QUEUE_LABEL)):
            self._groups.setdefault((ns, group), set()).add(key)
            self._group_of[key] = (ns, group)

    def _requests_shape(self, pod_spec: Mapping[str, Any]) -> Mapping[str, Any]:
        """What `quota.pod_requests` reads of a Pod's spec. A plain dict of Pods keeps the spec itself (no copy);
        packed Pods share one copy per distinct shape (every Pod of a Job has the same)."""
        if type(self.pods) is dict or not isinstance(self.pods, PackedObjects):  # a plain dict: no ABC check per Pod
            return pod_spec
        shape = {k: pod_spec[k] for k in ("containers", "initContainers", "overhead") if k in pod_spec}
        if len(self._shapes) >= MAX_SHAPES:  # every Pod its own requests: sharing would only add the keys
            return shape
        try:
            return self._shapes.setdefault(marshal.dumps(shape), shape)
        except ValueError:  # not plain JSON values: kept unshared
            return shape

    def _unlink_pod(self, key: Key) -> None:
        self._bound.pop(key, None)
        group = self._group_of.pop(key, None)
        if group is not None:
            members = self._groups[group]
            members.discard(key)
            if not members:
                del self._groups[group]
        for ref in self._pod_refs.pop(key, ()):
            keys = self._pods_by_ref.get(ref)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._pods_by_ref[ref]
                    self._ref_names.pop(ref, None)

    def _unlink_event(self, ev_key: str) -> None:
        target = self._event_refs.pop(ev_key, None)
        if target is not None:
            evs = self._events_by_object.get(target)
            if evs is not None:
                evs.pop(ev_key, None)
                if not evs:
                    del self._events_by_object[target]

    def remove(self, obj: Mapping[str, Any]) -> None:
        key = kind_key(obj)
        if key is None:
            return
        group, kind = key
        nm, ns = name(obj) or "", namespace(obj) or ""
        idx = self._index if group == KUEUE else None
        if idx is not None:
            idx.derived.clear()
        coll: MutableMapping[Any, Any] | None = {"Workload": self.workloads, "LocalQueue": self.local_queues}.get(kind)
        if coll is not None:
            gone = coll.pop((ns, nm), None)
            if idx is not None and gone is not None:
                if kind == "Workload":
                    idx.unlink_workload((ns, nm))
                else:
                    idx.relink_local_queue(self, (ns, nm))
        elif kind == "Pod":
            self.pods.pop((ns, nm), None)
            self._unlink_pod((ns, nm))
        elif kind == "Event":
            ev_key = uid(obj) or f"{ns}/{nm}"
            self.events.pop(ev_key, None)
            self._unlink_event(ev_key)
        elif kind == "ConfigMap":
            if self.config_maps.pop(ns, None) is not None:
                self._forget_config()
        elif (group, kind) in OWNER_KINDS:
            gone = self.owners.pop((ns, kind, nm), None)
            if kind == "Deployment" and nm == kueue_config.DEPLOYMENT:
                self._forget_config()
            if gone is not None and uid(gone):
                self.owners_by_uid.pop(uid(gone) or "", None)
                self._owner_by_workload_name.pop((ns, expected_workload_name(gone)), None)
                for ref in owner_refs(gone):
                    children = self._owners_by_parent.get(s(ref.get("uid")) or "")
                    if children is not None:
                        children.discard(uid(gone) or "")
        else:
            cluster = {"ClusterQueue": self.cluster_queues, "ResourceFlavor": self.flavors,
                       "Cohort": self.cohorts, "AdmissionCheck": self.admission_checks,
                       "WorkloadPriorityClass": self.priority_classes,
                       "Topology": self.topologies, "Namespace": self.namespaces, "Node": self.nodes,
                       "MultiKueueCluster": self.multikueue_clusters,
                       "MultiKueueConfig": self.multikueue_configs,
                       "ProvisioningRequestConfig": self.provisioning_configs}.get(kind)
            if cluster is not None:
                cluster.pop(nm, None)
                if kind == "Node":
                    self.nodes_version += 1
                elif kind == "ClusterQueue" and idx is not None:
                    idx.link_cluster_queues(self)

    # ----- derived indices, rebuilt lazily after a change -----
    @property
    def index(self) -> _Index:
        if self._index is None:
            self._index = _Index.build(self)
        return self._index

    def derived(self, fact: Derived[T]) -> T:
        """The fact for the current objects: built on first use, dropped when the index is rebuilt."""
        # asked several times per Workload: the built index read directly, one look-up when the fact is there
        cache = (self._index if self._index is not None else self.index).derived
        if fact.numbers:
            self.numbers_read += 1
        try:
            found: T = cache[fact]  # typed by assignment: typing.cast would be one more Python call
        except KeyError:
            found = cache[fact] = fact.build(self)
        return found

    def read_numbers(self, cq: Mapping[str, Any] | None) -> Mapping[str, Any]:
        """A ClusterQueue's status, read for what Kueue rewrites on every admission (reservations, usage, counts,
        fair-sharing shares), counted (`numbers_read`); conditions are read with `status` as any others."""
        self.numbers_read += 1
        return status(cq) if cq is not None else {}

    def reading(self) -> contextlib.AbstractContextManager[None]:
        """A pass: each packed Workload it reads is decoded once, and read again as that same copy (identity holds
        as with a plain dict) until the block ends (kube/packed.PackedObjects.remembering)."""
        workloads = self.workloads
        return workloads.remembering() if isinstance(workloads, PackedObjects) else contextlib.nullcontext()

    def _forget_config(self) -> None:
        """Kueue's Configuration (or its manager's flags) changed: read it again, and drop the engine's facts built
        with it (queue orders and holders use its feature gates)."""
        self._kueue_config = None
        if self._index is not None:
            self._index.derived.clear()

    def priority_of(self, workload: Mapping[str, Any]) -> int:
        """The priority Kueue orders and preempts by: spec.priority, plus the priority-boost annotation when the
        PriorityBoost feature gate is on (off by default in v0.19)."""
        return effective_priority(workload, self.kueue_config.gate("PriorityBoost"))

    def knows(self, kind: str) -> bool:
        return kind in self.complete_kinds

    @property
    def kueue_config(self) -> kueue_config.KueueConfig:
        """Kueue's Configuration as the input shows it (a dump's document first, then the manager's ConfigMap,
        the one in kueue-system before others); `known=False` with the reason when it is not there."""
        if self._kueue_config is None:
            self._kueue_config = _read_kueue_config(self)
        return self._kueue_config

    def owner_workload_names(self) -> list[Key]:
        """The names Kueue gives (or would give) the Workload of every owner kept, and of every Pod group."""
        return [*self._owner_by_workload_name, *self._groups]

    def diagnosable(self, key: Key) -> bool:
        """A Workload, or an owner (or a plain Pod group) whose Workload would have this name (it may have none
        yet)."""
        return key in self.workloads or key in self._owner_by_workload_name or key in self._groups

    def workload_of_pod(self, pod: Mapping[str, Any]) -> Key | None:
        """The Workload a Pod belongs to; for a Pod group's Pod without one (yet), the name Kueue will give it."""
        found = self.index.workload_of_pod(self, pod)
        if found is None:
            group = identifier(pod, POD_GROUP_LABEL)
            if group and s(labels(pod).get(QUEUE_LABEL)):
                return namespace(pod) or "", group
        return found

    def owner_for_workload_name(self, key: Key) -> Mapping[str, Any] | None:
        """The owner whose Workload Kueue would name `key`, if such an owner is kept."""
        okey = self._owner_by_workload_name.get(key)
        return self.owners.get(okey) if okey is not None else None

    def workloads_of_owner(self, owner: Mapping[str, Any]) -> list[Key]:
        """The Workloads that name `owner` in their ownerReferences or job-uid label."""
        idx = self.index
        owner_uid = uid(owner) or ""
        found = [k for k in idx.workloads_by_owner.get((namespace(owner) or "", s(owner.get("kind")) or "",
                                                        name(owner) or ""), ())
                 if not idx.claims_another(k, owner_uid)]  # a namesake's, made before the owner was recreated
        linked = idx.workloads_by_uid_link.get(uid(owner) or "")
        if linked is not None and linked not in found:
            found.append(linked)
        return found

    def owner_of(self, workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = workload_owner_ref(workload)
        if ref is None:
            return None
        ref_uid = s(ref.get("uid"))
        if ref_uid and ref_uid in self.owners_by_uid:
            return self.owners_by_uid[ref_uid]
        named = self.owners.get((namespace(workload) or "", s(ref.get("kind")) or "", s(ref.get("name")) or ""))
        if named is not None and ref_uid and uid(named) and uid(named) != ref_uid:
            return None  # a namesake: the owner was deleted (--cascade=orphan) and another made under its name
        return named

    def descendants(self, owner: Mapping[str, Any], depth: int = 2) -> list[Mapping[str, Any]]:
        """The owners in the input that `owner` made, down to `depth` levels (JobSet -> Job, RayJob ->
        RayCluster), by their controller's UID."""
        out: list[Mapping[str, Any]] = []
        frontier = {uid(owner) or ""} - {""}
        for _ in range(depth):
            nxt = {child for u in frontier for child in self._owners_by_parent.get(u, _NO_KEYS)}
            out.extend(self.owners_by_uid[u] for u in sorted(nxt) if u in self.owners_by_uid)
            frontier = nxt
        return out

    def pods_of(self, workload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """Its Pods: by Kueue's annotation or pod-group label, or through the owner chain (Pod -> Job -> ...)."""
        if not self.pods:  # no Pods in the input (a quota-only dump): nothing to walk
            return []
        ns, nm = ns_name(workload)
        keys = set(self._pods_by_ref.get(("wl", ns, nm), ()))
        for r in owner_refs(workload):  # labelled with their top owner (an AppWrapper's, its Job not in the input)
            if s(r.get("kind")) in _TOP_OWNER_KINDS:  # s(): a list there would be unhashable
                keys.update(self._pods_by_ref.get(("top", ns, s(r.get("kind")) or "", s(r.get("name")) or ""), ()))
        # plain Pods the Workload is owned by (Kueue's Pod integration): by name, the same UID checked below
        owning = {(ns, s(r.get("name")) or ""): s(r.get("uid")) for r in owner_refs(workload) if r.get("kind") == "Pod"}
        by_name = {k for k in owning if k in self.pods} - keys
        keys |= by_name
        if keys and m(meta(workload).get("annotations")).get(GROUP_WORKLOAD_ANNOTATION) == "true":
            # a group's Workload (a StatefulSet's, one LeaderWorkerSet group's): its members carry the group's
            # name; the owner chain would also bring the other groups' Pods (LWS: one leader StatefulSet for all)
            return self._known_pods(keys, by_name, owning, ns)
        frontier = {u for u in (s(r.get("uid")) for r in owner_refs(workload)) if u}
        job_uid = s(labels(workload).get(JOB_UID_LABEL))
        if job_uid:
            frontier.add(job_uid)
        seen: set[str] = set()
        for _ in range(4):  # bounded against cycles
            nxt: set[str] = set()
            for u in frontier - seen:
                keys.update(self._pods_by_ref.get(("uid", u), ()))
                nxt |= self._owners_by_parent.get(u, _NO_KEYS)
            seen |= frontier
            if not nxt:
                break
            frontier = nxt
        return self._known_pods(keys, by_name, owning, ns)

    def _known_pods(self, keys: set[Key], by_name: set[Key], owning: Mapping[Key, str | None],
                    ns: str) -> list[Mapping[str, Any]]:
        pods = [self.pods[k] for k in sorted(keys) if k in self.pods]
        if by_name:  # found by name only: a Pod of that name recreated since (another UID) is not this Workload's
            pods = [p for p in pods if (ns, name(p) or "") not in by_name or owning[ns, name(p) or ""] in ("", uid(p))]
        return pods

    def bound_pods(self) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
        """(node, phase, spec) of every Pod bound to a node; the spec has at least what `quota.pod_requests`
        reads. Kept at upsert: a pass that needs every node's usage decodes no Pod."""
        return iter(self._bound.values())

    def pod_groups(self) -> Iterator[tuple[Key, list[Mapping[str, Any]]]]:
        """((namespace, group), its Pods) for every Pod group with the queue label, in order."""
        for group in sorted(self._groups):
            yield group, self.pod_group(group)

    def pod_group_names(self) -> list[Key]:
        """(namespace, group) of every Pod group with the queue label; no Pod decoded."""
        return list(self._groups)

    def named_workloads(self) -> Iterator[tuple[str, str, str]]:
        """(namespace, Workload, a Pod naming it) for every Workload a Pod names by Kueue's annotation (a Pod
        group's name is not one: an incomplete group has no Workload yet)."""
        for ref, pod_keys in self._pods_by_ref.items():
            if ref[0] == "wl" and (ref[1], ref[2]) not in self._groups and pod_keys:
                yield ref[1], ref[2], next(iter(pod_keys))[1]

    def pod_group(self, group: Key) -> list[Mapping[str, Any]]:
        """The queued Pods of the Pod group (namespace, group name), in order."""
        return [self.pods[k] for k in sorted(self._groups.get(group, ())) if k in self.pods]

    def events_about(self, kind: str, ns: str | None, nm: str | None) -> list[Mapping[str, Any]]:
        found = self._events_by_object.get((kind, ns or "", nm or ""))
        return [self.events[k] for k in found if k in self.events] if found else []  # most objects have none

    def _workloads_above(self, ns: str, kind: str, nm: str, depth: int = 2) -> set[Key]:
        """The Workloads of an object or of the owners above it (an Event about a JobSet's child Job concerns
        the JobSet's Workload), up to `depth` controller levels."""
        for _ in range(depth + 1):
            found = self.index.workloads_by_owner.get((ns, kind, nm))
            if found:
                return set(found)
            obj = self.owners.get((ns, kind, nm))
            parent = controller_ref(obj) if obj is not None else None
            if parent is None:
                return set()
            kind, nm = s(parent.get("kind")) or "", s(parent.get("name")) or ""
        return set()

    def cluster_queue_of(self, workload: Mapping[str, Any]) -> str | None:
        admitted = s(m(m(workload.get("status")).get("admission")).get("clusterQueue"))
        if admitted:
            return admitted
        lq = self.local_queues.get((namespace(workload) or "", s(spec(workload).get("queueName")) or ""))
        return s(spec(lq).get("clusterQueue")) if lq else None

    def affected_workloads(self, obj: Mapping[str, Any], status_only: bool = False) -> set[Key]:
        """Workloads whose verdict a change of `obj` can alter (for the operator's dirty set).

        `status_only`: only the object's status changed (a ClusterQueue's usage after each admission):
        only Workloads still waiting for quota read it.
        """
        key = kind_key(obj)
        if key is None:
            return set()
        kind, nm, ns = key[1], name(obj) or "", namespace(obj) or ""
        idx = self.index
        if kind == "Workload":
            # itself; the Workloads queued behind it in a StrictFIFO queue (their head may change); the
            # preemptor named in its eviction (whose blockedBy lists its victims). Quota numbers of the
            # others change through the ClusterQueue's status, which has its own event.
            out = {(ns, nm)}
            cq = self.cluster_queue_of(obj)
            if cq and s(spec(self.cluster_queues.get(cq, {})).get("queueingStrategy")) == "StrictFIFO":
                out |= set(idx.workloads_by_cq.get(cq, ()))
            preemptor = _PREEMPTOR_UID.search(_evicted_message(obj))
            if preemptor:
                out |= {k for k in idx.workloads_by_uid(self).get(preemptor.group(1), ())}
            return out
        if kind == "LocalQueue":
            return set(idx.workloads_by_lq.get((ns, nm), ()))
        if kind == "ClusterQueue":
            return self.waiting_near([nm]) if status_only else idx.workloads_in_cohort_of(self, nm)
        if kind == "Cohort":
            return {wl for cq in idx.cqs_by_cohort.get(nm, ()) for wl in idx.workloads_by_cq.get(cq, ())}
        if kind in ("ResourceFlavor", "AdmissionCheck", "Topology"):
            return {wl for cq in idx.cqs_referencing.get((kind, nm), ()) for wl in idx.workloads_by_cq.get(cq, ())}
        if kind in ("MultiKueueCluster", "MultiKueueConfig", "ProvisioningRequestConfig"):
            # the Workloads of every queue with a check of that controller (MultiKueue's, or ProvisioningRequest's)
            controller = PROVISIONING_CONTROLLER if kind == "ProvisioningRequestConfig" else MULTIKUEUE_CONTROLLER
            checks = [ac for ac, ac_obj in self.admission_checks.items()
                      if s(spec(ac_obj).get("controllerName")) == controller]
            return {wl for ac in checks for cq in idx.cqs_referencing.get(("AdmissionCheck", ac), ())
                    for wl in idx.workloads_by_cq.get(cq, ())}
        if kind == "Namespace":
            return self._workloads_in(nm)
        if kind == "Pod":
            wl = self.workload_of_pod(obj)
            return {wl} if wl else set()
        if kind == "Event":
            ref = m(obj.get("involvedObject") or obj.get("regarding"))
            rkind, rns, rname = s(ref.get("kind")) or "", s(ref.get("namespace")) or "", s(ref.get("name")) or ""
            if rkind == "Workload":
                return {(rns, rname)}
            if rkind == "Pod":
                pod = self.pods.get((rns, rname))
                wl = self.workload_of_pod(pod) if pod else None
                return {wl} if wl else set()
            if rkind == "PersistentVolumeClaim":  # rare: the namespace's Workloads, not a walk of its Pods' volumes
                return self._workloads_in(rns)
            return self._workloads_above(rns, rkind, rname)
        if (key[0], kind) in OWNER_KINDS:
            found = set(idx.workloads_by_owner.get((ns, kind, nm), ()))
            if not found and uid(obj):  # no Workload yet: the owner's own diagnosis, named as Kueue would
                found.add((ns, expected_workload_name(obj)))
            return found
        return set()

    def waiting_near(self, cluster_queues: Iterable[str]) -> set[Key]:
        """The Workloads a numbers-only status change of these ClusterQueues can move the quoted numbers of: those
        waiting in each one's cohort (`affected_workloads(cq, status_only=True)`), each cohort once. Not the
        finished ones: Kueue keeps them (15,000 after its own perf scenario), and no number of a queue moves them."""
        idx = self.index
        out: set[Key] = set()
        cohorts: set[str] = set()
        for cq in cluster_queues:
            cohort = s(spec(self.cluster_queues.get(cq, {})).get("cohortName"))
            if cohort in cohorts:
                continue
            if cohort:
                cohorts.add(cohort)
            out |= {k for k in idx.workloads_in_cohort_of(self, cq) if idx.waits(k)}
        return out

    def _workloads_in(self, ns: str) -> set[Key]:
        return {wl for wl in self.workloads if wl[0] == ns}


def _read_kueue_config(state: ClusterState) -> kueue_config.KueueConfig:
    cfg = _read_configuration(state)
    return kueue_config.with_deployment_flags(cfg, state.owners.get((cfg.namespace, "Deployment",
                                                                     kueue_config.DEPLOYMENT)))


def _read_configuration(state: ClusterState) -> kueue_config.KueueConfig:
    for doc in state.configurations:
        return kueue_config.from_configuration(doc, f"Configuration document {name(doc) or '(unnamed)'}")
    cms = sorted(state.config_maps.items(), key=lambda kv: (kv[0] != kueue_config.DEFAULT_NAMESPACE, kv[0]))
    if cms:
        return kueue_config.from_config_map(cms[0][1])
    if "ConfigMap" in state.complete_kinds:
        return kueue_config.KueueConfig(
            known=False, source="not found",
            problem=f"ConfigMap {kueue_config.CONFIG_MAP} was looked for and not found")
    return kueue_config.UNREAD


def _queue_structure(cq: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of a ClusterQueue the index reads: its cohort, flavors and admission checks (not its status)."""
    sp = spec(cq)
    flavors = tuple(s(m(f).get("name")) for g in lst(sp.get("resourceGroups")) for f in lst(m(g).get("flavors")))
    checks = tuple(s(m(c).get("name")) for c in lst(m(sp.get("admissionChecksStrategy")).get("admissionChecks")))
    return s(sp.get("cohortName")), flavors, checks


class _Links:
    """What one Workload puts into the index, kept so that a change takes exactly that back out. Built for every
    Workload at each index build: a slotted class, which the compiled engine makes a native one (a NamedTuple's
    constructor stays interpreted Python there)."""

    __slots__ = ("changed", "cluster_queue", "finished", "holds_quota", "local_queue", "owners", "preempted",
                 "preempting", "uid", "uid_links")

    def __init__(self, uid_links: tuple[str, ...], owners: tuple[tuple[str, str, str], ...], local_queue: Key,
                 cluster_queue: str | None, uid: str | None, preempted: bool, holds_quota: bool,
                 changed: datetime | None = None, finished: bool = False, preempting: bool = False) -> None:
        self.uid_links = uid_links
        self.owners = owners
        self.local_queue = local_queue
        self.cluster_queue = cluster_queue
        self.uid = uid
        self.preempted = preempted
        self.holds_quota = holds_quota  # read at every ClusterQueue status change, for every Workload of its cohort
        self.changed = changed  # its newest condition change: when Kueue (or its Job) last moved it
        self.finished = finished
        self.preempting = preempting  # waits for its preemptions (PREEMPTING_MARKERS)

    def moves_nothing(self, other: _Links) -> bool:
        """The same index entries as `other` (whether it holds quota is read from the links, not an entry)."""
        return (self.local_queue == other.local_queue and self.cluster_queue == other.cluster_queue
                and self.uid == other.uid and self.preempted == other.preempted and self.owners == other.owners
                and self.uid_links == other.uid_links)


@dataclass
class _Index:
    """The Workload/queue index, kept up to date object by object: a Workload change costs its own links,
    a ClusterQueue status change nothing (only its cohort, flavors or checks relink the queues)."""

    workloads_by_uid_link: dict[str, Key] = field(default_factory=dict)
    workloads_by_owner: dict[tuple[str, str, str], list[Key]] = field(default_factory=dict)
    workloads_by_lq: dict[Key, list[Key]] = field(default_factory=dict)
    workloads_by_cq: dict[str, list[Key]] = field(default_factory=dict)
    cqs_by_cohort: dict[str, list[str]] = field(default_factory=dict)
    cqs_referencing: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # Workloads evicted by preemption now: the few the engine reads victims from
    preempted: set[Key] = field(default_factory=set)
    # Workloads waiting for the Workloads they preempted, and their ClusterQueue: Kueue's sticky heads of
    # BestEffortFIFO queues are among them (engine/queue_position.sticky_head)
    preempting: dict[Key, str] = field(default_factory=dict)
    # per ClusterQueue, the newest condition change of a Workload linked to it (deleted ones included: a deletion
    # frees quota too): whether its queue moved lately, without decoding one Workload (engine/admission/stalled)
    changed_by_cq: dict[str, datetime] = field(default_factory=dict)
    # the engine's Derived facts, dropped on every change of a Kueue object (they are lazy per key)
    derived: dict[Derived[Any], Any] = field(default_factory=dict)
    _links: dict[Key, _Links] = field(default_factory=dict)
    _uid_claims: dict[str, list[Key]] = field(default_factory=dict)  # every Workload linking a UID, first first
    _workloads_by_uid: dict[str, list[Key]] | None = None

    @classmethod
    def build(cls, state: ClusterState) -> _Index:
        idx = cls()
        for key, wl in state.workloads.items():
            idx.link_workload(state, key, wl)
        idx.link_cluster_queues(state)
        return idx

    @staticmethod
    def links_of(state: ClusterState, key: Key, wl: Mapping[str, Any]) -> _Links:
        ns = key[0]
        md = m(wl.get("metadata"))  # `owner_refs` and `labels`, from one metadata read
        uid_links: list[str] = []
        owners: list[tuple[str, str, str]] = []
        for ref in lst(md.get("ownerReferences")):
            if type(ref) is not dict and not isinstance(ref, Mapping):
                continue
            ref_uid = s(ref.get("uid"))
            if ref_uid:
                uid_links.append(ref_uid)
            owners.append((ns, s(ref.get("kind")) or "", s(ref.get("name")) or ""))
        job_uid = s(m(md.get("labels")).get(JOB_UID_LABEL))
        if job_uid:
            uid_links.append(job_uid)
        queue = s(spec(wl).get("queueName")) or ""
        status = m(wl.get("status"))
        wl_cq = s(m(status.get("admission")).get("clusterQueue"))  # `cluster_queue_of`, with the queue at hand
        if not wl_cq:
            lq = state.local_queues.get((ns, queue))
            wl_cq = s(spec(lq).get("clusterQueue")) if lq else None
        preempted = reserved = finished = preempting = False
        changed: datetime | None = None
        for cond in lst(status.get("conditions")):
            cond = m(cond)
            when = parse_time(cond.get("lastTransitionTime"))
            if when is not None and (changed is None or when > changed):
                changed = when
            ctype = cond.get("type")
            if ctype == "Evicted":
                preempted = cond.get("status") == "True" and cond.get("reason") == "Preempted"
            elif ctype == "QuotaReserved":
                reserved = cond.get("status") == "True"
                message = cond.get("message")
                preempting = not reserved and type(message) is str and any(
                    marker in message for marker in PREEMPTING_MARKERS)
            elif ctype == "Finished":
                finished = cond.get("status") == "True"
        # a finished Workload keeps QuotaReserved=True, but Kueue counts its quota free (kueue#9015's old slice)
        return _Links(tuple(uid_links), tuple(owners), (ns, queue), wl_cq or None, s(md.get("uid")), preempted,
                      reserved and not finished, changed, finished, preempting)

    def link_workload(self, state: ClusterState, key: Key, wl: Mapping[str, Any]) -> None:
        links = self.links_of(state, key, wl)
        if links.cluster_queue and links.changed is not None:
            newest = self.changed_by_cq.get(links.cluster_queue)
            if newest is None or links.changed > newest:
                self.changed_by_cq[links.cluster_queue] = links.changed
        old = self._links.get(key)
        if old is not None and old.moves_nothing(links):  # a status change (the common case)
            self._links[key] = links  # holds_quota may have changed: no list to move
            self._note_preempting(key, links)
            return
        self.unlink_workload(key)
        self._links[key] = links
        for u in links.uid_links:
            self.workloads_by_uid_link.setdefault(u, key)
            self._uid_claims.setdefault(u, []).append(key)
        for owner in links.owners:
            self.workloads_by_owner.setdefault(owner, []).append(key)
        self.workloads_by_lq.setdefault(links.local_queue, []).append(key)
        if links.cluster_queue:
            self.workloads_by_cq.setdefault(links.cluster_queue, []).append(key)
        if links.preempted:
            self.preempted.add(key)
        if self._workloads_by_uid is not None and links.uid:
            self._workloads_by_uid.setdefault(links.uid, []).append(key)
        self._note_preempting(key, links)

    def _note_preempting(self, key: Key, links: _Links) -> None:
        if links.preempting and links.cluster_queue and not links.finished:
            self.preempting[key] = links.cluster_queue
        else:
            self.preempting.pop(key, None)

    def claims_another(self, key: Key, owner_uid: str) -> bool:
        """Workload `key` names its owner by UID, and not by `owner_uid`: it belongs to an earlier owner of the
        same name (deleted with --cascade=orphan and recreated: kueue#1726)."""
        links = self._links.get(key)
        return bool(owner_uid and links is not None and links.uid_links and owner_uid not in links.uid_links)

    def unlink_workload(self, key: Key) -> None:
        links = self._links.pop(key, None)
        if links is None:
            return
        for u in links.uid_links:
            _discard(self._uid_claims, u, key)
            if self.workloads_by_uid_link.get(u) == key:  # two Workloads of one owner: the other one now
                others = self._uid_claims.get(u)
                if others:
                    self.workloads_by_uid_link[u] = others[0]
                else:
                    del self.workloads_by_uid_link[u]
        for owner in links.owners:
            _discard(self.workloads_by_owner, owner, key)
        _discard(self.workloads_by_lq, links.local_queue, key)
        if links.cluster_queue:
            _discard(self.workloads_by_cq, links.cluster_queue, key)
        self.preempted.discard(key)
        self.preempting.pop(key, None)
        if self._workloads_by_uid is not None and links.uid:
            _discard(self._workloads_by_uid, links.uid, key)

    def waits(self, key: Key) -> bool:
        """Neither holding quota nor finished: what a ClusterQueue's numbers can still matter to."""
        links = self._links.get(key)
        return links is not None and not links.holds_quota and not links.finished

    def holds_quota(self, key: Key) -> bool:
        """Its QuotaReserved condition is True and it has not finished (read from the links: no packed Workload is
        decoded)."""
        links = self._links.get(key)
        return links is not None and links.holds_quota

    def relink_local_queue(self, state: ClusterState, lq: Key) -> None:
        """The LocalQueue points at another ClusterQueue (or is gone): its waiting Workloads move."""
        for key in list(self.workloads_by_lq.get(lq, ())):
            wl = state.workloads.get(key)
            if wl is not None:
                self.link_workload(state, key, wl)

    def link_cluster_queues(self, state: ClusterState) -> None:
        """Cohort membership and the flavors/checks each ClusterQueue names (a few hundred queues at most)."""
        cqs_by_cohort: dict[str, list[str]] = defaultdict(list)
        refs: dict[tuple[str, str], list[str]] = defaultdict(list)
        for cq_name, cq in state.cluster_queues.items():
            cohort = s(spec(cq).get("cohortName"))
            if cohort:
                cqs_by_cohort[cohort].append(cq_name)
            for group in lst(spec(cq).get("resourceGroups")):
                for flavor in lst(m(group).get("flavors")):
                    fname = s(m(flavor).get("name"))
                    if fname:
                        refs["ResourceFlavor", fname].append(cq_name)
            for check in lst(m(spec(cq).get("admissionChecksStrategy")).get("admissionChecks")):
                cname = s(m(check).get("name"))
                if cname:
                    refs["AdmissionCheck", cname].append(cq_name)
        self.cqs_by_cohort, self.cqs_referencing = dict(cqs_by_cohort), dict(refs)

    def workload_of_pod(self, state: ClusterState, pod: Mapping[str, Any]) -> Key | None:
        ns = namespace(pod) or ""
        md = meta(pod)
        wl_name = s(m(md.get("annotations")).get(WORKLOAD_ANNOTATION)) or identifier(pod, POD_GROUP_LABEL)
        if wl_name and (ns, wl_name) in state.workloads:
            return ns, wl_name
        pod_uid = uid(pod)
        if pod_uid and pod_uid in self.workloads_by_uid_link:
            return self.workloads_by_uid_link[pod_uid]
        frontier = list(owner_refs(pod))
        for _ in range(4):  # Pod -> Job -> JobSet -> ... ; bounded against cycles
            nxt: list[Mapping[str, Any]] = []
            for ref in frontier:
                ref_uid = s(ref.get("uid"))
                if not ref_uid:
                    continue
                if ref_uid in self.workloads_by_uid_link:
                    return self.workloads_by_uid_link[ref_uid]
                owner = state.owners_by_uid.get(ref_uid)
                if owner is not None:
                    nxt.extend(owner_refs(owner))
            if not nxt:
                break
            frontier = nxt
        pod_labels = labels(pod)
        for label, kind in POD_OWNER_LABELS.items():  # labelled with its top owner (the chain not in the input)
            top = s(pod_labels.get(label))
            found = self.workloads_by_owner.get((ns, kind, top)) if top else None
            if found:
                return next(iter(found))
        return None

    def workloads_by_uid(self, state: ClusterState) -> dict[str, list[Key]]:
        """Workloads by their own UID; built on first use (only preemption asks), then kept up to date."""
        if self._workloads_by_uid is None:
            found: dict[str, list[Key]] = {}
            for key, wl in state.workloads.items():
                u = uid(wl)
                if u:
                    found.setdefault(u, []).append(key)
            self._workloads_by_uid = found
        return self._workloads_by_uid

    def workloads_in_cohort_of(self, state: ClusterState, cq_name: str) -> set[Key]:
        cohort = s(spec(state.cluster_queues.get(cq_name, {})).get("cohortName"))
        members = self.cqs_by_cohort.get(cohort, [cq_name]) if cohort else [cq_name]
        return {wl for cq in members for wl in self.workloads_by_cq.get(cq, ())}


def _discard(index: dict[Any, list[Key]], at: Any, key: Key) -> None:
    keys = index.get(at)
    if keys is not None:
        try:
            keys.remove(key)
        except ValueError:
            return
        if not keys:
            del index[at]
