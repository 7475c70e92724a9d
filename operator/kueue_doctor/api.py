"""The AdmissionDiagnosis API: pydantic models that are the single source of the CRD schema.

`crd()` turns the models into the CustomResourceDefinition committed in `crds/`; a test fails when
the two differ. The engine builds plain dicts for speed; tests validate them against these models.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .vocabulary import ACTIONS, CAUSES, REASONS, STAGES

GROUP = "kueue-doctor.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AdmissionDiagnosis"
PLURAL = "admissiondiagnoses"
SINGULAR = "admissiondiagnosis"
SHORT_NAMES = ["adiag"]

SCHEMA_ANNOTATION = f"{GROUP}/schema-hash"  # lets the operator tell an outdated installed CRD
LABEL_STAGE = f"{GROUP}/stage"
LABEL_REASON = f"{GROUP}/reason"
LABEL_CLUSTER_QUEUE = f"{GROUP}/cluster-queue"
LABEL_OWNER_KIND = f"{GROUP}/owner-kind"  # the Workload's owner, so `kubectl get adiag -l ...owner-name=trainer` works
LABEL_OWNER_NAME = f"{GROUP}/owner-name"

MAX_EVIDENCE = 12
MAX_HINTS = 6
MAX_TEXT = 1024


def _vocab(table: Mapping[Any, str]) -> str:
    return "\n".join(f"- {key}: {value}" for key, value in table.items())


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class WorkloadRef(_Model):
    apiVersion: str = Field(description="API version of the Workload, e.g. kueue.x-k8s.io/v1beta2.")
    kind: str = Field(default="Workload", description="Always Workload.")
    name: str = Field(description="Name of the Workload, the same as this object's name.")
    uid: str = Field(description="UID of the Workload; a diagnosis with another UID is stale.")


class OwnerRef(_Model):
    apiVersion: str = Field(description="API version of the owner, e.g. batch/v1.")
    kind: str = Field(description="Kind of the owner: Job, JobSet, RayJob, Pod, ...")
    name: str = Field(description="Name of the owner in the Workload's namespace.")
    uid: str | None = Field(default=None, description="UID of the owner.")


class Spec(_Model):
    """Which Workload this diagnosis explains, and who owns that Workload."""

    workloadRef: WorkloadRef | None = Field(
        default=None,
        description="The Workload this diagnosis explains; absent while Kueue has made no Workload for the owner "
        "(reason NoWorkload): this object is then named as Kueue will name the Workload, and continues once it exists.",
    )
    ownerRef: OwnerRef | None = Field(
        default=None, description="The object that owns the Workload (the controller ownerReference)."
    )


class QuotaLine(_Model):
    flavor: str = Field(description="ResourceFlavor name.")
    resource: str = Field(description="Resource name, e.g. cpu, memory, nvidia.com/gpu, pods.")
    requested: str | None = Field(
        default=None, description="What the Workload needs of this resource in this flavor (Kubernetes quantity)."
    )
    nominal: str | None = Field(default=None, description="The ClusterQueue's nominalQuota for it.")
    borrowingLimit: str | None = Field(
        default=None, description="The ClusterQueue's borrowingLimit; absent means unlimited within the cohort."
    )
    lendingLimit: str | None = Field(default=None, description="The ClusterQueue's lendingLimit, if set.")
    used: str | None = Field(
        default=None,
        description="Quota of this ClusterQueue reserved by Workloads now (status.flavorsReservation).",
    )
    borrowable: str | None = Field(
        default=None,
        description="Estimate of what the cohort could lend now (unused quota of the other members, within "
        "their lendingLimits and this queue's borrowingLimit). An estimate, flat cohorts only.",
    )
    maximum: str | None = Field(
        default=None, description="Maximum this ClusterQueue could ever give, as Kueue stated it ('<unlimited>')."
    )
    missing: str | None = Field(default=None, description="How much more is needed, as Kueue stated it.")
    source: str = Field(
        default="Kueue",
        description="Where the amounts come from: Kueue (its message), Objects (queue specs and status), "
        "or Estimate (computed by kueue-doctor).",
    )
    podSet: str | None = Field(default=None, description="The pod set this line is about, when Kueue named one "
                               "(Workloads with several pod sets: a master and workers, a head and worker groups).")


class AdmissionCheckState(_Model):
    name: str = Field(description="AdmissionCheck name.")
    state: str = Field(description="Pending, Ready, Retry or Rejected, as Kueue writes it.")
    message: str | None = Field(default=None, description="The check controller's message.")
    lastTransitionTime: str | None = Field(default=None, description="When the state last changed.")
    controllerName: str | None = Field(default=None, description="The AdmissionCheck's controller.")
    active: bool | None = Field(default=None, description="Whether the AdmissionCheck object is Active.")


class PodGroup(_Model):
    category: str = Field(
        description="Failing, Unschedulable, ContainersNotStarting, NotReady, SchedulingGated, Pending (no "
        "scheduler has looked at them) or Terminating."
    )
    reason: str = Field(description="Short reason: a gate, a node-fit reason, a container waiting reason.")
    count: int = Field(description="How many Pods are blocked this way.")
    message: str | None = Field(default=None, description="The exact upstream text of one of these Pods.")
    pod: str | None = Field(default=None, description="One of these Pods, to kubectl describe.")


class Pods(_Model):
    expected: int = Field(description="Pods the admitted PodSets ask for.")
    created: int = Field(description="Pods that exist.")
    scheduled: int = Field(description="Pods bound to a node.")
    running: int = Field(description="Pods in phase Running.")
    ready: int = Field(default=0, description="Pods whose Ready condition is True.")
    succeeded: int = Field(default=0, description="Pods that completed successfully.")
    failed: int = Field(default=0, description="Pods that failed.")
    summary: str = Field(description="One line, e.g. '7/8 Unschedulable: Insufficient nvidia.com/gpu; 1 "
                         "ImagePullBackOff'.")
    waiting: list[PodGroup] = Field(default_factory=list, description="Groups of blocked Pods, largest first.")
    history: list[PodGroup] = Field(default_factory=list, description="Pods that failed and were replaced (evicted"
                                    " by a drain: DisruptionTarget, or a newer Pod took their place): kept as "
                                    "history, never the verdict.")


class BlockedBy(_Model):
    role: str = Field(description="QueueHead (ahead in a StrictFIFO queue), Victim (being preempted for this "
                      "Workload) or Preemptor (preempted this Workload).")
    namespace: str | None = Field(default=None, description="Namespace of the other Workload.")
    name: str | None = Field(default=None, description="Name of the other Workload, when known.")
    uid: str | None = Field(default=None, description="UID of the other Workload.")


class Eviction(_Model):
    reason: str = Field(description="Kueue's Evicted reason: Preempted, PodsReadyTimeout, AdmissionCheck, ...")
    underlyingCause: str | None = Field(
        default=None, description="Preemption kind (InClusterQueue, ...) or Kueue's underlying cause."
    )
    by: str | None = Field(default=None, description="Who caused it: the preemptor Workload or a component.")
    message: str | None = Field(default=None, description="Kueue's eviction message.")
    time: str | None = Field(default=None, description="When Kueue evicted it.")
    count: int | None = Field(default=None, description="Evictions so far (status.schedulingStats).")


class Remedy(_Model):
    """One change that would let the Workload in: who, which object and field, the value now and the value enough."""

    actionBy: str = Field(description="Who can make this change (QueueAdmin, ClusterAdmin, WorkloadOwner).")
    kind: str = Field(description="Kind of the object to change.")
    name: str = Field(description="Its name.")
    namespace: str | None = Field(default=None, description="Its namespace, if namespaced.")
    field: str = Field(description="The field to change, as a path (e.g. spec.parallelism).")
    now: str = Field(description="Its value now.")
    enough: str = Field(description="The value that would be enough.")
    exact: bool = Field(description="True when Kueue's own numbers give the value (enough for its resource; the "
                        "message says when other listed changes are needed with it); False for an estimate.")
    message: str = Field(description="The change in one sentence.")


class Blocker(_Model):
    """The one thing that blocks the Workload now, structured for scripts, the CLI and alerts."""

    kind: str = Field(description="What blocks, one of: Resource (nodes lack free capacity), PodTooLarge (a Pod "
                      "is larger than any usable node's allocatable), NodeSelector (node selector or required "
                      "affinity matches no node), Taint (untolerated taint), Volume (claim missing or unbound), "
                      "VolumeNodeAffinity (volume bound where no usable node is), Preemption (kube-scheduler "
                      "waits for preempted Pods), Scheduler (another kube-scheduler reason), Quota (flavor quota), "
                      "Flavor (no flavor matches the Pods), Topology (TAS placement or a delayed topology request), "
                      "AdmissionCheck (a check, e.g. a ProvisioningRequest, not Ready for the flavor held), "
                      "QueueHead (StrictFIFO).")
    name: str | None = Field(default=None, description="The blocking resource (nvidia.com/gpu), selector "
                             "(pool=spot), taint (key=value:Effect), claim, queue head (namespace/name) or reason.")
    flavor: str | None = Field(default=None, description="The ResourceFlavor involved (assigned, or the one "
                               "that fails).")
    podSet: str | None = Field(default=None, description="The pod set blocked.")
    requested: str | None = Field(default=None, description="What is asked: per Pod for node resources, per pod "
                                  "set for quota.")
    available: str | None = Field(default=None, description="The most a usable node offers (allocatable for "
                                  "PodTooLarge, free otherwise), or the quota Kueue states.")
    nodes: int | None = Field(default=None, description="Nodes rejected for this reason, by kube-scheduler's "
                              "count.")
    totalNodes: int | None = Field(default=None, description="Nodes kube-scheduler considered.")
    source: str = Field(default="Scheduler", description="Where the numbers come from: Scheduler or Kueue (their "
                        "messages), Nodes (the Node objects, exact), Estimate (free capacity from the Pods "
                        "kueue-doctor sees).")


class NodeMatch(_Model):
    """One step of the node funnel: how many nodes pass each constraint of the Pods, in turn."""

    constraint: str = Field(description="Nodes (all), NodeSelector, Taints, Schedulable (Ready, not cordoned), "
                            "Allocatable (<resource>), Free (<resource>).")
    value: str | None = Field(default=None, description="The constraint itself: the selector, the taints not "
                              "tolerated, the per-Pod request.")
    nodes: int = Field(description="Nodes that pass this step and every step before it.")
    exact: bool = Field(description="True when computed from the Node objects alone; False for free capacity "
                        "(Pods kueue-doctor does not see also use the nodes).")


class PendingLimit(_Model):
    """How long is too long, as declared by the owner, the LocalQueue or the ClusterQueue (the nearest wins)."""

    limit: str = Field(description="The value of the annotation kueue-doctor.dev/max-pending as written, e.g. 2h.")
    seconds: int | None = Field(default=None, description="The limit in seconds; absent when the value cannot be "
                                "read (see problem).")
    sourceKind: str = Field(description="Where the limit is declared: the owner's kind (Job, ...), LocalQueue or "
                            "ClusterQueue.")
    sourceName: str = Field(description="The name of that object.")
    sourceNamespace: str | None = Field(default=None, description="Its namespace (none for a ClusterQueue).")
    waitingSince: str | None = Field(default=None, description="When this wait began: the Workload's (or owner's) "
                                     "creation, or its latest eviction.")
    exceeded: bool = Field(default=False, description="True once the wait is longer than the limit.")
    exceededSince: str | None = Field(default=None, description="When the limit was passed (waitingSince + limit).")
    problem: str | None = Field(default=None, description="Why the declared value cannot be used, e.g. not a "
                                "duration like 90m or 2h30m.")


class HistoryEntry(_Model):
    """One verdict the Workload went through."""

    stage: str = Field(description="The stage then (Admission, Scheduling, Running, Finished; Unknown when Kueue's "
                       "timestamps do not tell it).")
    reason: str | None = Field(default=None, description="The reason then; absent for a rebuilt wait whose reason "
                               "Kueue's timestamps do not tell.")
    cause: str | None = Field(default=None, description="The cause then (the latest one, if it changed within the "
                              "reason).")
    since: str | None = Field(default=None, description="When it began (RFC 3339).")
    until: str | None = Field(default=None, description="When it ended; absent for the current verdict.")
    rebuilt: bool = Field(default=False, description="True when rebuilt from Kueue's condition timestamps (offline, or "
                          "before the operator saw the Workload), not observed.")


class HistoryTotal(_Model):
    """Older history entries of one reason, folded into a total to keep the object small."""

    stage: str = Field(description="Their stage.")
    reason: str | None = Field(default=None, description="Their reason.")
    entries: int = Field(description="How many entries were folded.")
    seconds: int = Field(description="The time they took together, in seconds.")


class QueuePosition(_Model):
    """Where a pending Workload stands in its ClusterQueue, in Kueue's order."""

    position: int = Field(description="1 for the next Workload Kueue considers in this ClusterQueue.")
    pending: int = Field(description="Pending Workloads in the ClusterQueue.")
    higherPriority: int = Field(description="Pending Workloads ahead of it by priority.")
    samePriorityEarlier: int = Field(description="Pending Workloads of the same priority queued earlier.")
    source: str = Field(description="How position was found: Computed (from the Workloads, by priority then "
                        "queue time); Visibility is reserved for a position taken from Kueue's visibility API.")
    visibility: int | None = Field(default=None, description="The position Kueue's own visibility API gives (1 is "
                                   "next, like position), when it was read (`explain` where the API is served and "
                                   "readable, or a PendingWorkloadsSummary in the input); the message says why "
                                   "when it differs.")


class Evidence(_Model):
    kind: str = Field(description="Kind of the object the fact comes from.")
    name: str = Field(description="Its name.")
    namespace: str | None = Field(default=None, description="Its namespace, if namespaced.")
    field: str | None = Field(default=None, description="Which field or condition, e.g. condition/QuotaReserved.")
    reason: str | None = Field(default=None, description="Reason written there.")
    message: str | None = Field(default=None, description="Message written there (bounded in length).")
    time: str | None = Field(default=None, description="Its timestamp.")


class Status(_Model):
    """The verdict: where the Workload is stuck, why, with the numbers, and who has to act."""

    stage: str = Field(description="Where the Workload is. One of:\n" + _vocab(STAGES))
    reason: str = Field(
        description="Why, in one word; each reason belongs to one stage. New reasons may appear before the "
        "CRD is upgraded (no server-side enum). One of:\n"
        + _vocab({f"{r} ({info.stage})": info.meaning for r, info in REASONS.items()})
    )
    cause: str | None = Field(default=None, description="Finer detail of the reason. Known values:\n"
                              + _vocab({c: info.meaning for c, info in CAUSES.items()}))
    actionBy: str = Field(description="Who has to act. One of:\n" + _vocab(ACTIONS))
    message: str = Field(description="One sentence for an SRE: what is wrong, the numbers, what to do.")
    since: str | None = Field(
        default=None,
        description="When the Workload entered this reason (RFC 3339): Kueue's own timestamps where they "
        "tell it; the operator keeps it across restarts.",
    )
    clusterQueue: str | None = Field(default=None, description="The ClusterQueue (admission or LocalQueue's).")
    localQueue: str | None = Field(default=None, description="The LocalQueue (spec.queueName).")
    cohort: str | None = Field(default=None, description="The ClusterQueue's cohort, if any.")
    flavors: list[str] = Field(default_factory=list, description="Flavors assigned, or those that failed.")
    quota: list[QuotaLine] = Field(default_factory=list, description="The numbers per flavor and resource that "
                                   "matter to this verdict.")
    admissionChecks: list[AdmissionCheckState] = Field(default_factory=list,
                                                       description="Admission checks and their states.")
    pods: Pods | None = Field(default=None, description="Pod counts after admission.")
    blockedBy: list[BlockedBy] = Field(default_factory=list,
                                       description="Other Workloads this one waits for or was preempted by.")
    lastEviction: Eviction | None = Field(default=None, description="The latest eviction, kept after Kueue "
                                          "retries.")
    blocker: Blocker | None = Field(default=None, description="The blocking resource or constraint, "
                                    "structured (kind, name, flavor, numbers).")
    nodeMatches: list[NodeMatch] = Field(default_factory=list, description="Pods kube-scheduler cannot place: "
                                         "how many nodes pass each of their constraints, in turn (only when "
                                         "Nodes are in the input).")
    remedies: list[Remedy] = Field(default_factory=list, description="The smallest changes that would let the "
                                   "Workload in, each with who can make it; exact when Kueue's numbers say so.")
    pendingLimit: PendingLimit | None = Field(default=None, description="The declared pending limit "
                                              "(kueue-doctor.dev/max-pending) and whether this wait passed it; "
                                              "absent when none is declared or the Workload runs or finished.")
    queuePosition: QueuePosition | None = Field(default=None, description="Its place among the pending Workloads "
                                                "of its ClusterQueue; only while it waits for quota.")
    history: list[HistoryEntry] = Field(default_factory=list, description="The verdicts it went through, oldest "
                                        "first (at most 20 entries and 4 KiB; older ones fold into historyFolded).")
    historyFolded: list[HistoryTotal] = Field(default_factory=list, description="Older history, a total per "
                                              "reason.")
    postMortem: str | None = Field(default=None, description="For a Finished Workload: where the time went, from "
                                   "its history (also at the end of message).")
    evidence: list[Evidence] = Field(default_factory=list, description=f"Facts the verdict rests on (at most "
                                     f"{MAX_EVIDENCE}, messages cut at {MAX_TEXT} characters).")
    hints: list[str] = Field(default_factory=list, description="What to look at or change next.")


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    namespace: str


class AdmissionDiagnosis(_Model):
    """Why a Kueue Workload is or is not running: admission (Kueue) or scheduling (Pods)."""

    apiVersion: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta
    spec: Spec
    status: Status


PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Owner", "type": "string", "jsonPath": ".spec.ownerRef.name"},
    {"name": "Stage", "type": "string", "jsonPath": ".status.stage"},
    {"name": "Reason", "type": "string", "jsonPath": ".status.reason"},
    {"name": "ClusterQueue", "type": "string", "jsonPath": ".status.clusterQueue"},
    {"name": "Action", "type": "string", "jsonPath": ".status.actionBy"},
    {"name": "Since", "type": "date", "jsonPath": ".status.since"},
    {"name": "OwnerKind", "type": "string", "jsonPath": ".spec.ownerRef.kind", "priority": 1},
    {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _structural(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Turn pydantic JSON Schema into a Kubernetes structural OpenAPI v3 schema (no $ref, no null)."""
    if "$ref" in schema:
        target = defs[schema["$ref"].split("/")[-1]]
        merged = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return _structural(merged, defs)
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"]
        nullable = len(options) != len(schema["anyOf"])
        if len(options) != 1:
            raise ValueError(f"cannot express union in a structural schema: {schema}")
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        merged = _structural({**options[0], **rest}, defs)
        if nullable:
            merged["nullable"] = True
        return merged
    out: dict[str, Any] = {}
    if "description" in schema:
        out["description"] = schema["description"]
    kind = schema.get("type")
    if kind == "object":
        out["type"] = "object"
        props = schema.get("properties", {})
        if props:
            out["properties"] = {name: _structural(sub, defs) for name, sub in props.items()}
        required = [r for r in schema.get("required", []) if r in props]
        if required:
            out["required"] = required
    elif kind == "array":
        out["type"] = "array"
        out["items"] = _structural(schema["items"], defs)
    elif kind in ("string", "integer", "boolean", "number"):
        out["type"] = kind
    else:
        raise ValueError(f"unsupported schema: {schema}")
    return out


def openapi_schema() -> dict[str, Any]:
    full = AdmissionDiagnosis.model_json_schema()
    defs = full.get("$defs", {})
    # Atomic for server-side apply: one writer owns them whole, so the apiserver neither tracks nor stores
    # ownership per field (bench/write_cost.py: 0.83-0.88x its CPU per write, managedFields 863 -> 379 bytes).
    spec = {**_structural(full["properties"]["spec"], defs), "x-kubernetes-map-type": "atomic"}
    status = {**_structural(full["properties"]["status"], defs), "x-kubernetes-map-type": "atomic"}
    return {
        "type": "object",
        "description": AdmissionDiagnosis.__doc__,
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion of this object."},
            "kind": {"type": "string", "description": "Kind of this object."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec", "status"],
    }


@cache  # the operator compares it every recheck (30 s) and on every CRD event: pydantic's schema built once
def schema_hash() -> str:
    """A short hash of the CRD spec this operator writes against; stored as an annotation on the CRD."""
    import hashlib
    import json

    return hashlib.sha256(json.dumps(_crd_spec(), sort_keys=True).encode()).hexdigest()[:16]


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/name": "kueue-doctor"},
                     "annotations": {SCHEMA_ANNOTATION: schema_hash()}},
        "spec": _crd_spec(),
    }


def _crd_spec() -> dict[str, Any]:
    return {
        "group": GROUP,
        "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": SINGULAR,
                  "shortNames": SHORT_NAMES, "categories": ["kueue-doctor"]},
        "scope": "Namespaced",
        "versions": [{
            "name": VERSION,
            "served": True,
            "storage": True,
            "additionalPrinterColumns": PRINTER_COLUMNS,
            "schema": {"openAPIV3Schema": openapi_schema()},
        }],
    }


def crd_yaml() -> str:
    import yaml

    header = ("# Generated by `kueue-doctor crd` from operator/kueue_doctor/api.py. Do not edit by hand:\n"
              "# change the models and run `kueue-doctor crd > crds/admissiondiagnoses.kueue-doctor.dev.yaml`.\n")
    return header + yaml.safe_dump(crd(), sort_keys=False, width=110, allow_unicode=True)


EXPLAIN_SCHEMA_PATH = "docs/schema/explain.schema.json"


def explain_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of `kueue-doctor explain -o json`: an array of AdmissionDiagnosis objects, from
    the same models as the CRD, for agents and controllers that read the output. Committed as
    docs/schema/explain.schema.json (`kueue-doctor schema` prints it; a test fails when it is stale)."""
    item = AdmissionDiagnosis.model_json_schema(ref_template="#/$defs/{model}")
    defs = item.pop("$defs", {})
    defs[KIND] = item
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kueue-doctor explain -o json",
        "description": f"The output of `kueue-doctor explain -o json` (and `kubectl kueue-doctor explain -o json`): "
        f"one {KIND} ({API_VERSION}) per Workload, exactly what the operator writes. Stable within {API_VERSION}: "
        "fields are only added; reason and cause may gain values (docs/verdicts.md). `--by-queue` prints another "
        "shape (one object per ClusterQueue and verdict), not described here. Generated by "
        f"`kueue-doctor schema > {EXPLAIN_SCHEMA_PATH}`.",
        "type": "array",
        "items": {"$ref": f"#/$defs/{KIND}"},
        "$defs": dict(sorted(defs.items())),
    }


def explain_schema_json() -> str:
    import json

    return json.dumps(explain_schema(), indent=2, ensure_ascii=False) + "\n"
