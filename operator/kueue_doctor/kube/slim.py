"""Drop what diagnosis never reads, so the operator keeps 10,000s of objects in little memory.

`slim(obj)` keeps every field the engine reads (a test checks that verdicts on slimmed objects
equal verdicts on full ones) and drops managedFields, last-applied annotations, container specs
the engine does not need, and the like.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from .objects import lst, m

_KEEP_META = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "labels", "ownerReferences",
              "resourceVersion")
# (an AppWrapper's own fault-tolerance settings, workload.codeflare.dev.appwrapper/retryLimit and its grace periods:
# its verdicts give the reset times and the resets left from them)
_KEEP_ANNOTATION_PREFIXES = ("kueue.x-k8s.io/", "provreq.kueue.x-k8s.io/", "kueue-doctor.dev/",
                             "alpha.jobset.sigs.k8s.io/exclusive-topology", "workload.codeflare.dev.appwrapper/",
                             "ray.io/kuberay-version",  # the KubeRay that made a RayCluster (kuberay#4686)
                             "autoscaling.x-k8s.io/consume-provisioning-request")  # a Pod's provisioned capacity
# Where owners keep suspend (spec.suspend; Kubeflow's spec.runPolicy.suspend): the engine reads who wrote it last.
_SUSPEND_FIELDS = (("f:spec", "f:suspend"), ("f:spec", "f:runPolicy", "f:suspend"),
                   ("f:spec", "f:rayClusterConfig", "f:suspend"))  # a RayService's


def _suspend_writers(entries: Any) -> list[dict[str, Any]]:
    """The managedFields entries that own a suspend field, cut down to that field."""
    out = []
    for entry in lst(entries):
        entry = m(entry)
        for path in _SUSPEND_FIELDS:
            node: Any = entry.get("fieldsV1")
            for part in path:
                node = m(node).get(part) if node is not None else None
            if node is None:
                continue
            cut: dict[str, Any] = {}
            for part in reversed(path):
                cut = {part: cut}
            out.append({k: entry[k] for k in ("manager", "operation", "time", "subresource") if k in entry}
                       | {"fieldsV1": cut})
            break
    return out


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    md = m(obj.get("metadata"))
    out = {k: md[k] for k in _KEEP_META if k in md}
    out.update(_deletion(md))
    ann = {k: v for k, v in m(md.get("annotations")).items() if k.startswith(_KEEP_ANNOTATION_PREFIXES)}
    if ann:
        out["annotations"] = ann
    writers = _suspend_writers(md.get("managedFields"))
    if writers:
        out["managedFields"] = writers
    return out


def _deletion(md: Mapping[str, Any]) -> dict[str, Any]:
    """Of an object being deleted, its grace period and what holds it (a terminating Pod outside Kueue's TAS is
    named with them); nothing of the others, whose finalizers are Kueue's and the Job controller's."""
    if "deletionTimestamp" not in md:
        return {}
    return {k: md[k] for k in ("deletionTimestamp", "deletionGracePeriodSeconds", "finalizers") if k in md}


def _container(c: Any) -> dict[str, Any]:
    c = m(c)
    out = {k: c[k] for k in ("name", "resources", "restartPolicy") if k in c}
    host_ports = [p for p in lst(c.get("ports")) if m(p).get("hostPort")]  # what kube-scheduler's NodePorts reads
    if host_ports:
        out["ports"] = host_ports
    return out


_REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def _placement(spec: Mapping[str, Any]) -> dict[str, Any]:
    """What kube-scheduler matches against nodes (the node funnel reads it): required node affinity, required pod
    affinity and anti-affinity (named when they reject the nodes), and the Pod's claims (their names only)."""
    out: dict[str, Any] = {}
    affinity = m(spec.get("affinity"))
    kept = {}
    for kind in ("nodeAffinity", "podAffinity", "podAntiAffinity"):
        required = m(affinity.get(kind)).get(_REQUIRED_AFFINITY)
        if required:
            kept[kind] = {_REQUIRED_AFFINITY: required}
    if kept:
        out["affinity"] = kept
    claims = [{k: v for k, v in m(vol).items() if k in ("name", "persistentVolumeClaim")}
              | ({"ephemeral": {}} if "ephemeral" in m(vol) else {})
              for vol in lst(spec.get("volumes")) if "persistentVolumeClaim" in m(vol) or "ephemeral" in m(vol)]
    if claims:
        out["volumes"] = claims
    return out


def _pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: spec[k] for k in ("nodeName", "schedulingGates", "nodeSelector", "overhead",
                                                "schedulerName", "priorityClassName", "tolerations",
                                                "topologySpreadConstraints", "resourceClaims") if k in spec}
    out.update(_placement(spec))
    out["containers"] = [_container(c) for c in lst(spec.get("containers"))]
    if "initContainers" in spec:
        out["initContainers"] = [_container(c) for c in lst(spec.get("initContainers"))]
    return out


def _container_status(cs: Any) -> dict[str, Any]:
    cs = m(cs)
    return {k: cs[k] for k in ("name", "ready", "started", "restartCount", "state", "lastState") if k in cs}


def compact(value: Any) -> Any:
    """The same JSON with every key and string shared (sys.intern) and lists exactly sized: 50,000 Pods repeat
    the same keys, condition types, reasons, node and label names, and kube-scheduler's texts."""
    t = type(value)
    if t is str:
        return sys.intern(value)
    if t is dict:
        return {sys.intern(k) if type(k) is str else k: compact(v) for k, v in value.items()}
    if t is list:
        return [compact(v) for v in value]
    return value


def slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the engine reads of `obj`, compacted."""
    out: dict[str, Any] = compact(_slim(obj))
    return out


# What another namespace shard's Workload is read for (kube/shards.py: a shard keeps every Workload, since a
# ClusterQueue's facts come from all of them, and diagnoses only its own): the queue order and position
# (engine/queue_position.py, engine/admission/order.py: priority, boost, creation, back-off, gates, the eviction
# that requeues at the back, the namespace-mismatch parking read from the start of the QuotaReserved message),
# "nothing moved" (engine/admission/stalled.py: every condition's time), the victims of a preemptor
# (engine/admission/eviction.py: the Evicted message, whole) and the index's queue links (state._Index). A rule
# that starts reading more of other Workloads adds it here; tests/unit/test_shards.py compares every verdict of a
# shard holding projections with the verdicts of a state holding the Workloads whole.
_FOREIGN_META = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "resourceVersion")
_FOREIGN_ANNOTATIONS = ("kueue.x-k8s.io/admission-gated-by", "kueue.x-k8s.io/priority-boost")
_FOREIGN_SPEC = ("active", "priority", "queueName")
_FOREIGN_CONDITION = ("type", "status", "reason", "lastTransitionTime")
_FOREIGN_MESSAGE = 64  # characters of a condition's message kept, the Evicted one's whole
_WHOLE_MESSAGE = frozenset({"Evicted"})
# a head waiting for unused quota ("N more needed") sets cohort quota aside for the other queues' verdicts
# (engine/admission/kueue_message.reserving_heads): its cut QuotaReserved message keeps that mark
MORE_NEEDED = "more needed"
# A QuotaReserved=False message saying the Workload waits for Workloads it preempted (pkg/scheduler/scheduler.go
# markPreemptionOutcome, the DeferredFit message, PendingMigration): Kueue requeued it with PendingPreemption (or
# PendingMigration), which in a BestEffortFIFO ClusterQueue pins it at the head (cluster_queue.go preemptorWorkload;
# state._Index.preempting). A cut message keeps the mark too.
PREEMPTING_MARKERS = (". Pending the preemption of ", "Pending the migration of ",
                      "but will fit after these preemptions complete")


def foreign_workload(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a shard keeps of a Workload another shard diagnoses: its pod sets, owners, labels and checks are
    never read for another Workload's verdict, and without owners it costs the index no owner links."""
    md, sp, st = m(obj.get("metadata")), m(obj.get("spec")), m(obj.get("status"))
    meta = {k: md[k] for k in _FOREIGN_META if k in md}
    ann = {k: v for k, v in m(md.get("annotations")).items() if k in _FOREIGN_ANNOTATIONS}
    if ann:
        meta["annotations"] = ann
    status: dict[str, Any] = {}
    admission = m(st.get("admission"))
    cluster_queue = admission.get("clusterQueue")
    if cluster_queue is not None:
        status["admission"] = {"clusterQueue": cluster_queue}
        # what it holds, per flavor: what lower-priority holders could give up (engine/admission/flavors.py)
        usage = [{k: m(p)[k] for k in ("flavors", "resourceUsage") if k in m(p)}
                 for p in lst(admission.get("podSetAssignments"))]
        if any(usage):
            status["admission"]["podSetAssignments"] = usage
    if "requeueState" in st:
        status["requeueState"] = st["requeueState"]
    conds = []
    for cond in lst(st.get("conditions")):
        cond = m(cond)
        kept = {k: cond[k] for k in _FOREIGN_CONDITION if k in cond}
        message = cond.get("message")
        if isinstance(message, str) and message:
            ctype = cond.get("type")
            if ctype in _WHOLE_MESSAGE or len(message) <= _FOREIGN_MESSAGE:
                kept["message"] = message
            else:
                marks = [mark for mark in (MORE_NEEDED, *PREEMPTING_MARKERS)
                         if ctype == "QuotaReserved" and mark in message]
                kept["message"] = message[:_FOREIGN_MESSAGE] + "".join(f"... {mark}" for mark in marks)
        conds.append(kept)
    if conds:
        status["conditions"] = conds
    out: dict[str, Any] = compact({"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta,
                                   "spec": {k: sp[k] for k in _FOREIGN_SPEC if k in sp}, "status": status})
    return out


def _slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    kind = obj.get("kind")
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": kind, "metadata": _meta(obj)}
    spec, status = m(obj.get("spec")), m(obj.get("status"))
    if kind == "Pod":
        out["spec"] = _pod_spec(spec)
        st = {k: status[k] for k in ("phase", "conditions", "reason", "message", "startTime", "nominatedNodeName",
                                     "resourceClaimStatuses") if k in status}
        for key in ("containerStatuses", "initContainerStatuses"):
            if key in status:
                st[key] = [_container_status(c) for c in lst(status.get(key))]
        out["status"] = st
        return out
    if kind == "Workload":
        sp = dict(spec)
        sp["podSets"] = [
            {**{k: v for k, v in m(ps).items() if k != "template"},
             "template": {"spec": _pod_spec(m(m(m(ps).get("template")).get("spec")))}}
            for ps in lst(spec.get("podSets"))]
        out["spec"] = sp
        out["status"] = dict(status)
        return out
    if kind == "Job":
        sp = {k: spec[k] for k in ("suspend", "parallelism", "completions", "backoffLimit", "managedBy") if k in spec}
        template = {k: v for k, v in m(m(spec.get("template")).get("spec")).items()
                    if k in ("restartPolicy", "priorityClassName")}  # restarts counted; a missing class
        if template:
            sp["template"] = {"spec": template}
        out["spec"] = sp
        out["status"] = {k: status[k] for k in ("active", "ready", "succeeded", "failed", "conditions", "startTime")
                         if k in status}
        return out
    if kind == "Node":
        out["spec"] = {k: spec[k] for k in ("unschedulable", "taints") if k in spec}
        out["status"] = {k: status[k] for k in ("conditions", "allocatable", "capacity") if k in status}
        return out
    if kind == "ConfigMap":  # only Kueue's own (kueue-manager-config) is kept: its Configuration is the point
        out["data"] = dict(m(obj.get("data")))
        return out
    if kind == "Event":
        return {k: v for k, v in obj.items() if k not in ("metadata",)} | {"metadata": _meta(obj)}
    if kind == "LocalQueue":  # its spec and metadata: no rule reads its status, which Kueue rewrites on every
        # admission and finish in it (pending, reserving and admitted counts, usage)
        if "spec" in obj:
            out["spec"] = obj["spec"]
        return out
    if "spec" in obj:
        out["spec"] = obj["spec"]
    if "status" in obj:
        out["status"] = obj["status"]
    if "value" in obj:  # a (Workload)PriorityClass's priority
        out["value"] = obj["value"]
    return out
