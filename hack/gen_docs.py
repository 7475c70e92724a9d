#!/usr/bin/env python3
"""Generate docs/verdicts.md, docs/coverage.md (and docs/schema/explain.schema.json) from the vocabulary and the
verdict catalog.

    python hack/gen_docs.py            # rewrite both files
    python hack/gen_docs.py --check    # exit 1 if a committed file differs from what would be generated

Meanings come from operator/kueue_doctor/vocabulary.py (the single source `kubectl explain` also uses);
what to do and who acts come from GUIDE below; the coverage matrix comes from tests/cases/verdicts.yaml.
tests/unit/test_catalog.py imports this module and fails when a committed file is stale or when a
vocabulary value has no GUIDE entry.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from kueue_doctor.engine.messages import parse_workload_message  # noqa: E402
from kueue_doctor.engine.scheduling.owners import SUSPEND_PATHS  # noqa: E402
from kueue_doctor.kube.kueue_names import expected_workload_name  # noqa: E402
from kueue_doctor.vocabulary import ACTIONS, CAUSES, REASONS, STAGES  # noqa: E402

CATALOG_FILE = ROOT / "tests" / "cases" / "verdicts.yaml"
VERDICTS_MD = ROOT / "docs" / "verdicts.md"
COVERAGE_MD = ROOT / "docs" / "coverage.md"

POD_GROUP = "Pod group"
# Owner kinds the catalog covers: every kind whose suspension the engine reads, plus plain-Pod groups.
OWNERS: list[str] = [f"{g}/{k}" for g, k in SUSPEND_PATHS] + [POD_GROUP]

# QuotaReserved=False / Admitted=False reasons per vocabulary (API-NOTES 2.4, 2.5). Reasons in both sets
# (OnHold, AdmissionGated, ...) say nothing about the feature gate.
LEGACY_REASONS = {"Pending", "Inadmissible", "Waiting", "UnsatisfiedChecks", "NoReservationUnsatisfiedChecks"}
GRANULAR_REASONS = {"WaitingForQuota", "ExceedsMaxQuota", "NoMatchingFlavor", "TopologyPlacementFailed",
                    "WaitingForPreemptedWorkloads", "Misconfigured", "Suspended", "PendingEvaluation",
                    "WaitingForPodsReady", "Deactivated", "UnsatisfiedAdmissionChecks"}

# dimension -> what the values are; `uncovered` in the catalog has one map per dimension.
DIMENSIONS = ["stage", "reason", "cause", "actionBy", "vocabulary", "apiVersion", "owner"]
DIMENSION_TITLES = {
    "stage": "Stages", "reason": "Reasons", "cause": "Causes", "actionBy": "Who acts (actionBy)",
    "vocabulary": "Kueue reason vocabulary of QuotaReserved=False / Admitted=False",
    "apiVersion": "Workload API version", "owner": "Owner kinds", "template": "Kueue message templates",
}


def required_values(dimension: str) -> list[str]:
    return {
        "stage": [str(v) for v in STAGES], "reason": [str(v) for v in REASONS], "cause": [str(v) for v in CAUSES],
        "actionBy": [str(v) for v in ACTIONS], "vocabulary": ["legacy", "granular"],
        "apiVersion": ["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"], "owner": OWNERS,
    }[dimension]


# --------------------------------------------------------------------------------------------------
# catalog


def load_catalog(path: Path = CATALOG_FILE) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    data["uncovered"] = {dim: dict(values or {}) for dim, values in (data.get("uncovered") or {}).items()}
    return data


def parse_now(text: str) -> datetime:
    now = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if now.tzinfo is None:
        raise ValueError(f"`now` must carry a time zone: {text}")
    return now


def key_of(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


def _workload(scenario: Mapping[str, Any]) -> Mapping[str, Any]:
    want = scenario["expect"]["workload"]
    return next(o for o in scenario["objects"] if o.get("kind") == "Workload" and key_of(o) == want)


def _owner_without_workload(scenario: Mapping[str, Any]) -> Mapping[str, Any]:
    """A NoWorkload scenario's owner: its diagnosis is named as Kueue would name the owner's Workload."""
    want = scenario["expect"]["workload"]
    return next(o for o in scenario["objects"] if o.get("kind") != "Workload" and (o.get("metadata") or {}).get(
        "namespace") and f"{o['metadata']['namespace']}/{expected_workload_name(o)}" == want)


def _conditions(obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in conds if isinstance(c, Mapping) and isinstance(c.get("type"), str)}


def facts(scenario: Mapping[str, Any]) -> dict[str, list[str]]:
    """What a scenario covers, per dimension, derived from its objects and its expectation (never declared)."""
    exp = scenario["expect"]
    if exp["reason"] == "NoWorkload" or exp.get("cause") == "WorkloadNotInInput":  # named after the owner
        owner = _owner_without_workload(scenario)
        api = str(owner.get("apiVersion", ""))
        return {"stage": [exp["stage"]], "reason": [exp["reason"]], "cause": [exp["cause"]],
                "actionBy": [exp["actionBy"]], "apiVersion": [], "vocabulary": [], "template": [],
                "owner": [f"{api.rsplit('/', 1)[0] if '/' in api else ''}/{owner.get('kind')}"]}
    wl = _workload(scenario)
    out: dict[str, list[str]] = {"stage": [exp["stage"]], "reason": [exp["reason"]], "cause": [exp["cause"]],
                                 "actionBy": [exp["actionBy"]], "apiVersion": [str(wl.get("apiVersion"))],
                                 "vocabulary": [], "owner": [], "template": []}
    conds = _conditions(wl)
    for ctype in ("QuotaReserved", "Admitted"):
        cond = conds.get(ctype)
        if cond is None or cond.get("status") != "False":
            continue
        reason = cond.get("reason")
        if reason in LEGACY_REASONS:
            out["vocabulary"].append("legacy")
        elif reason in GRANULAR_REASONS:
            out["vocabulary"].append("granular")
        if ctype == "QuotaReserved":
            out["template"].append(str(parse_workload_message(str(cond.get("message") or "")).template))
    refs = (wl.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if ref.get("controller") is True:
            group = str(ref.get("apiVersion", "")).rsplit("/", 1)[0] if "/" in str(ref.get("apiVersion")) else ""
            out["owner"].append(f"{group}/{ref.get('kind')}")
    name = (wl.get("metadata") or {}).get("name")
    for obj in scenario["objects"]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if obj.get("kind") == "Pod" and labels.get("kueue.x-k8s.io/pod-group-name") == name:
            out["owner"].append(POD_GROUP)
            break
    return {k: sorted(set(v)) for k, v in out.items()}


def coverage(scenarios: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """dimension -> value -> names of the scenarios that cover it."""
    matrix: dict[str, dict[str, list[str]]] = {d: {} for d in [*DIMENSIONS, "template"]}
    for s in scenarios:
        for dim, values in facts(s).items():
            for v in values:
                matrix[dim].setdefault(v, []).append(s["name"])
    return matrix


# --------------------------------------------------------------------------------------------------
# what to do and who acts, per vocabulary value (meanings are in vocabulary.py)

WO, QA, CA, NB = "WorkloadOwner", "QueueAdmin", "ClusterAdmin", "Nobody"

GUIDE: dict[str, dict[str, dict[str, str]]] = {
    "stage": {
        "Admission": {"who": "see the reason", "do": "Do not look at Pods or nodes: there are none yet. Read the "
                      "reason; `kubectl describe workload <wl> -n <ns>` shows Kueue's own condition."},
        "Scheduling": {"who": "see the reason", "do": "Kueue is done; look at the owner and its Pods: "
                       "`kubectl get pods -n <ns> -l kueue.x-k8s.io/podset` and `kubectl describe pod <pod>`."},
        "Running": {"who": NB, "do": "Nothing. For MultiKueue, diagnose the Workload on the worker cluster."},
        "Finished": {"who": "see the cause", "do": "Nothing for Kueue; for a failure read the owner's status "
                     "(`kubectl describe job <job> -n <ns>`)."},
        "Unknown": {"who": NB, "do": "Read status.message and status.evidence; report the Workload's YAML if "
                    "kueue-doctor should know the situation."},
    },
    "action": {
        "Nobody": {"who": NB, "do": "Wait. If the state lasts far longer than the message says, check that the "
                   "Kueue controller (`kubectl -n kueue-system logs deploy/kueue-controller-manager`) and "
                   "kube-scheduler are healthy."},
        "WorkloadOwner": {"who": WO, "do": "Change the Job (queue label, requests, tolerations, node selector, "
                          "image, config) or reactivate the Workload."},
        "QueueAdmin": {"who": QA, "do": "Change the tenant's LocalQueue or its share of quota (ClusterQueue "
                       "nominalQuota if the tenant owns it)."},
        "ClusterAdmin": {"who": CA, "do": "Change the ClusterQueue, Cohort, ResourceFlavor, AdmissionCheck or "
                         "the nodes."},
    },
    "reason": {
        "NoWorkload": {"who": "see the cause", "do": "Kueue never looked at the queues: fix what the cause names, "
                       "then Kueue creates the Workload within a second and this diagnosis continues under the same "
                       "name. `kubectl describe <kind> <owner> -n <ns>` shows Kueue's events on the owner."},
        "NotYetEvaluated": {"who": NB, "do": "Wait; see the cause. Lasting minutes means the Kueue controller is "
                            "not scheduling: check its logs."},
        "QueueMisconfigured": {"who": "see the cause", "do": "Fix the object the cause names; the Workload is "
                               "retried by Kueue as soon as the queue setup changes."},
        "QueueStopped": {"who": "QueueAdmin (LocalQueue) / ClusterAdmin (ClusterQueue)", "do": "`kubectl patch "
                         "clusterqueue <cq> --type merge -p '{\"spec\":{\"stopPolicy\":\"None\"}}'` (or the "
                         "localqueue, with `-n <ns>`) when the hold is over."},
        "ExceedsMaxQuota": {"who": "QueueAdmin / ClusterAdmin, or the WorkloadOwner lowers the request",
                            "do": "Compare status.quota requested vs maximum; raise nominalQuota/borrowingLimit "
                            "(`kubectl edit clusterqueue <cq>`) or lower the Pod count x per-Pod requests."},
        "WaitingForQuota": {"who": NB, "do": "Wait for running Workloads to finish (`kubectl get workloads -A "
                            "--field-selector status.admission.clusterQueue=<cq>`); add quota to go faster."},
        "WaitingForPreemption": {"who": NB, "do": "Wait for the victims in status.blockedBy to stop; if they hang "
                                 "in Terminating, look at their Pods' finalizers."},
        "WaitingForAdmissionChecks": {"who": "see the cause", "do": "`kubectl get workload <wl> -n <ns> -o "
                                      "jsonpath='{.status.admissionChecks}'`; the check's controller decides."},
        "Preempted": {"who": NB, "do": "Nothing: it is queued again. To avoid it, raise its priority "
                      "(kueue.x-k8s.io/priority-class) or run it in a queue with unborrowed quota."},
        "Evicted": {"who": "see the cause", "do": "Read status.lastEviction; fix what made the Pods miss "
                    "readiness (image, capacity) before the back-off ends."},
        "Deactivated": {"who": WO, "do": "Fix the cause, then `kubectl patch workload <wl> -n <ns> --type merge "
                        "-p '{\"spec\":{\"active\":true}}'` or recreate the Job."},
        "JobSuspended": {"who": "see the cause", "do": "Kueue unsuspends it within seconds; if not, check the Kueue "
                         "controller logs for the owner and `kubectl get <kind> <name> -o yaml --show-managed-fields` "
                         "(who wrote spec.suspend)."},
        "PodsNotCreated": {"who": "see the cause", "do": "`kubectl describe job <job> -n <ns>`: the FailedCreate "
                           "event names the ResourceQuota, webhook or LimitRange that refuses the Pods; for a "
                           "GhostReservation or ExternallyManaged nothing will create them, see the cause."},
        "PodsUnschedulable": {"who": "see the cause", "do": "`kubectl describe pod <pod> -n <ns>`; compare the "
                              "flavor's nodeLabels/taints with `kubectl get nodes -L <label>`: Kueue quota is "
                              "not node capacity."},
        "ContainersNotStarting": {"who": "see the cause", "do": "`kubectl describe pod <pod> -n <ns>` and "
                                  "`kubectl logs <pod> -n <ns> --previous`."},
        "PodsNotReady": {"who": NB, "do": "Re-run with Pods in the input (`kubectl get pods -A -o yaml`) or "
                         "look at them: `kubectl get pods -n <ns> -l kueue.x-k8s.io/podset`."},
        "Running": {"who": NB, "do": "Nothing."},
        "Finished": {"who": "see the cause", "do": "Nothing for Kueue; the cause says whether it failed (then its "
                     "owner acts)."},
        "Unknown": {"who": NB, "do": "Read status.message (Kueue's text is quoted) and "
                    "`kubectl describe workload <wl> -n <ns>`."},
    },
    "cause": {
        "PendingEvaluation": {"who": NB, "do": "Wait (seconds). Minutes: `kubectl -n kueue-system logs "
                              "deploy/kueue-controller-manager | grep <wl>`."},
        "BlockedByQueueHead": {"who": NB, "do": "Diagnose the head in status.blockedBy (`kubectl get adiag <head> "
                               "-n <ns>`); fixing the head unblocks the queue. Consider BestEffortFIFO."},
        "AdmissionGated": {"who": NB, "do": "The controllers in annotation kueue.x-k8s.io/admission-gated-by "
                           "remove themselves; if one is gone, remove its entry from the annotation."},
        "WaitingForPodsReady": {"who": NB, "do": "Find the admitted Workload whose Pods are not ready "
                                "(`kubectl get workloads -A` and its PodsReady condition) and fix it."},
        "QuotaReservedAwaitingAdmission": {"who": NB, "do": "Seconds normally; longer means the Kueue controller "
                                           "is stuck: check its logs."},
        "OnHold": {"who": NB, "do": "Nothing while the hold is wanted: the owner holds it on purpose (for example a "
                   "StatefulSet scaled to zero). Scale the owner up again and Kueue queues it by itself."},
        "EquivalentWorkloadFailed": {"who": NB, "do": "Diagnose the other Workload of the same shape in this "
                                     "ClusterQueue; the same fix applies here."},
        "IntegrationNotEnabled": {"who": CA, "do": "Add the owner's framework (e.g. jobset.x-k8s.io/jobset) to "
                                  "integrations.frameworks in ConfigMap kueue-system/kueue-manager-config, restart "
                                  "`deploy/kueue-controller-manager`; meanwhile an unsuspended owner bypasses quota."},
        "NamespaceNotManaged": {"who": CA, "do": "`kubectl get ns <ns> --show-labels` against "
                                "managedJobsNamespaceSelector in kueue-manager-config: label the namespace, or run "
                                "the Job in a managed one."},
        "NotManagedByKueue": {"who": WO, "do": "Put the queue name in the label kueue.x-k8s.io/queue-name, not an "
                              "annotation; a RayJob on an existing RayCluster (spec.clusterSelector): create it "
                              "again without the queue-name label, the RayCluster's Workload holds its quota."},
        "WorkloadPriorityClassNotFound": {"who": WO, "do": "`kubectl get workloadpriorityclasses`; fix the label "
                                          "kueue.x-k8s.io/priority-class, or ask the cluster admin for the class."},
        "PrebuiltWorkloadNotFound": {"who": WO, "do": "Create the Workload named by kueue.x-k8s.io/prebuilt-"
                                     "workload-name in the owner's namespace, or remove the label."},
        "WorkloadRejected": {"who": WO, "do": "`kubectl describe <kind> <owner> -n <ns>`: fix what Kueue's Warning "
                             "Event names (pod template, labels, nesting)."},
        "PodGroupIncomplete": {"who": WO, "do": "`kubectl -n <ns> get pods -l kueue.x-k8s.io/pod-group-name=<group>`: "
                               "create the missing Pods of the group, or set kueue.x-k8s.io/pod-group-total-count "
                               "to the group's real size."},
        "KueueNotRunning": {"who": CA, "do": "`kubectl -n kueue-system get pods`, `kubectl -n kueue-system logs "
                            "deploy/kueue-controller-manager`: get Kueue's controller manager running again."},
        "WorkloadNotCreated": {"who": CA, "do": "Check that Kueue runs and search its logs for the owner's name; "
                               "grant kueue-doctor get on ConfigMap kueue-system/kueue-manager-config so it can "
                               "read the integrations and the namespace selector."},
        "LocalQueueNotFound": {"who": WO, "do": "`kubectl get localqueues -n <ns>`; fix the owner's label "
                               "kueue.x-k8s.io/queue-name, or ask the queue admin to create the LocalQueue."},
        "LocalQueueInactive": {"who": QA, "do": "`kubectl describe localqueue <lq> -n <ns>`: its ClusterQueue is "
                               "missing or inactive."},
        "ClusterQueueNotFound": {"who": CA, "do": "Create the ClusterQueue the LocalQueue names "
                                 "(`kubectl get localqueue <lq> -n <ns> -o jsonpath='{.spec.clusterQueue}'`), or "
                                 "recreate the LocalQueue (spec.clusterQueue is immutable)."},
        "ClusterQueueInactive": {"who": CA, "do": "`kubectl describe clusterqueue <cq>`: fix what its Active "
                                 "condition names."},
        "FlavorNotFound": {"who": CA, "do": "Create the ResourceFlavor (`kubectl get resourceflavors`) or remove it "
                           "from the ClusterQueue's resourceGroups."},
        "AdmissionCheckNotFound": {"who": CA, "do": "Create the AdmissionCheck or remove it from "
                                   "spec.admissionChecksStrategy of the ClusterQueue."},
        "AdmissionCheckInactive": {"who": CA, "do": "`kubectl describe admissioncheck <ac>`: fix its parameters "
                                   "(ProvisioningRequestConfig, MultiKueueConfig) or its controller."},
        "TopologyNotFound": {"who": CA, "do": "Create the Topology the flavor's spec.topologyName names "
                             "(`kubectl get topologies`)."},
        "CohortCycle": {"who": CA, "do": "`kubectl get cohorts -o custom-columns=NAME:.metadata.name,PARENT:"
                        ".spec.parentName` and break the cycle."},
        "NamespaceNotSelected": {"who": CA, "do": "`kubectl get namespace <ns> --show-labels`; label the "
                                 "namespace to match the ClusterQueue's namespaceSelector or widen it "
                                 "(null selects nothing, {} everything)."},
        "ResourceNotCovered": {"who": WO, "do": "Remove the request (often a stray GPU or ephemeral-storage "
                               "request) or ask the admin to add it to the ClusterQueue's coveredResources."},
        "NoMatchingFlavor": {"who": WO, "do": "Add the tolerations for the flavor's nodeTaints, or fix the Job's "
                             "nodeSelector/affinity to match the flavor's nodeLabels "
                             "(`kubectl get resourceflavor <rf> -o yaml`)."},
        "TopologyMismatch": {"who": WO, "do": "Align the kueue.x-k8s.io/podset-*-topology annotations with the "
                             "flavors: request TAS only on TAS flavors, and levels the Topology has."},
        "DynamicResourcesUnsupported": {"who": CA, "do": "Kueue cannot account for the Pods' DRA claims: enable "
                                        "the KueueDRAIntegration feature gate, map the DeviceClass in Kueue's DRA "
                                        "configuration, or have the owner use a ResourceClaimTemplate (not a "
                                        "ResourceClaim) or drop the claims."},
        "InvalidRequests": {"who": WO, "do": "Fix requests/limits in the pod template (requests <= limits, within "
                            "the namespace LimitRange: `kubectl get limitrange -n <ns> -o yaml`)."},
        "LocalQueueStopped": {"who": QA, "do": "`kubectl patch localqueue <lq> -n <ns> --type merge -p "
                              "'{\"spec\":{\"stopPolicy\":\"None\"}}'` when the hold is over."},
        "ClusterQueueStopped": {"who": CA, "do": "`kubectl patch clusterqueue <cq> --type merge -p "
                                "'{\"spec\":{\"stopPolicy\":\"None\"}}'` when the hold is over."},
        "ExceedsNominalQuota": {"who": QA, "do": "Raise nominalQuota, join a cohort, or lower the Pod count x "
                                "per-Pod requests; status.quota has requested vs nominal."},
        "ExceedsCohortQuota": {"who": CA, "do": "Add quota to the cohort (other ClusterQueues' lendingLimit, a "
                               "Cohort resourceGroup) or lower the request."},
        "ExceedsMaximumCapacity": {"who": CA, "do": "Re-run with the ClusterQueue in the input to learn whether "
                                   "nominal quota or borrowing is short; compare status.quota maximum."},
        "BorrowingLimitReached": {"who": CA, "do": "Raise the ClusterQueue's borrowingLimit or nominalQuota for "
                                  "the flavor in status.quota, or lower the request."},
        "TopologyPlacementFailed": {"who": WO, "do": "Lower the pod count or relax the topology request "
                                    "(preferred instead of required, a higher level)."},
        "InsufficientUnusedQuota": {"who": NB, "do": "Wait; to go faster add quota or preemption "
                                    "(spec.preemption.withinClusterQueue: LowerPriority) and a higher priority."},
        "PreemptionInProgress": {"who": NB, "do": "Wait for the victims in status.blockedBy to stop."},
        "PreemptionFailed": {"who": NB, "do": "Kueue retries; if it lasts, check the Kueue controller logs for "
                             "API errors."},
        "PreemptionGated": {"who": NB, "do": "The controller that owns the gate in spec.preemptionGates opens it "
                            "(MultiKueue, ConcurrentAdmission)."},
        "AdmissionCheckPending": {"who": NB, "do": "The check's controller decides (for ProvisioningRequest: "
                                  "`kubectl get provisioningrequests -n <ns>`). If the AdmissionCheck is not "
                                  "Active the ClusterAdmin must fix it."},
        "AdmissionCheckRetry": {"who": NB, "do": "Kueue releases the quota and retries after the check's back-off; "
                                "read the check's message for why capacity was refused."},
        "AdmissionCheckRejected": {"who": WO, "do": "Read the check's message; change the Job (or the check's "
                                   "config), then reactivate the Workload."},
        "DelayedTopologyRequest": {"who": NB, "do": "Wait for the ProvisioningRequest; Kueue assigns the topology "
                                   "in a second pass."},
        "InClusterQueue": {"who": NB, "do": "A higher-priority Workload of the same ClusterQueue took the quota; "
                           "it is queued again."},
        "InCohortReclamation": {"who": NB, "do": "Its ClusterQueue was borrowing and the lender reclaimed its "
                                "nominal quota; run within nominal quota to avoid it."},
        "InCohortFairSharing": {"who": NB, "do": "Fair sharing gave the quota to a queue with a lower share; "
                                "queued again."},
        "InCohortReclaimWhileBorrowing": {"who": NB, "do": "Preempted by a borrowing Workload under "
                                          "borrowWithinCohort; queued again."},
        "PodsReadyTimeout": {"who": WO, "do": "The Pods were not ready within waitForPodsReady.timeout: fix "
                             "images, requests or node selection before the back-off ends."},
        "AdmissionCheck": {"who": NB, "do": "A check went to Retry after admission; Kueue requeues it. Read "
                           "status.admissionChecks messages."},
        "NodeFailures": {"who": NB, "do": "Nodes of its topology assignment failed; it is queued again. "
                         "ClusterAdmin: `kubectl get nodes`."},
        "RequeueBackoff": {"who": NB, "do": "Wait until status.requeueState.requeueAt; fix the eviction's cause "
                           "meanwhile."},
        "RequeueLoop": {"who": "WorkloadOwner (ClusterAdmin for NodeFailures and a MultiKueue worker that finds the "
                        "Job out of sync)", "do": "Read status.lastEviction "
                        "and fix what evicts it each time (PodsReadyTimeout: images, node capacity, the flavor's "
                        "nodeLabels; Preempted: priority or quota; MultiKueue OutOfSync: what changes the Job on the "
                        "worker the message names) before the next admission; Kueue deactivates it "
                        "after waitForPodsReady.requeuingStrategy.backoffLimitCount requeues if one is set."},
        "FlavorMigration": {"who": NB, "do": "ConcurrentAdmission moves the Job to a more favourable flavor: the "
                            "variant named in the message takes over once these Pods stop. If Pods hang "
                            "Terminating, check their finalizers and node."},
        "VariantEvicted": {"who": NB, "do": "ConcurrentAdmission stops this variant because the Job's admitted "
                           "variant was evicted; the Job is queued again. Read the other variant's lastEviction "
                           "for why."},
        "DeactivatedByUser": {"who": WO, "do": "`kubectl patch workload <wl> -n <ns> --type merge -p "
                              "'{\"spec\":{\"active\":true}}'` if it should run."},
        "RequeuingLimitExceeded": {"who": WO, "do": "It timed out waiting for Pods too often; fix the Pods' "
                                   "problem, then reactivate."},
        "MaximumExecutionTimeExceeded": {"who": WO, "do": "Raise label kueue.x-k8s.io/max-exec-time-seconds "
                                         "on the Job or make it faster; recreate or reactivate."},
        "EvictedOnManagerCluster": {"who": WO, "do": "MultiKueue: read the eviction on the manager cluster."},
        "OwnerSuspended": {"who": NB, "do": "Kueue unsuspends the owner after admission; if minutes pass, check "
                           "the Kueue controller logs and `kubectl describe <kind> <name> -n <ns>`."},
        "SuspendedByOtherManager": {"who": CA, "do": "The field manager in status.evidence suspended the Job after "
                                    "admission: find that controller or webhook (`kubectl get "
                                    "mutatingwebhookconfigurations`) and exclude Kueue-managed Jobs from it."},
        "GhostReservation": {"who": CA, "do": "Nothing runs behind the quota in status.quota: check the Kueue "
                             "controller logs for the Workload, then delete the stale Workload (`kubectl -n <ns> "
                             "delete workload <wl>`); Kueue creates a fresh one if its owner still has to run."},
        "KueueStalled": {"who": CA, "do": "The numbers in status.quota say it fits, yet Kueue is silent: collect "
                         "`kubectl -n kueue-system logs deploy/kueue-controller-manager`, `kubectl -n kueue-system get "
                         "pods`, kueue_admission_attempts_total and the ClusterQueue's pendingworkloads view; "
                         "restarting the Kueue controller re-evaluates every queue."},
        "FailedCreate": {"who": WO, "do": "`kubectl describe job <job> -n <ns>`; raise the namespace "
                         "ResourceQuota (`kubectl get resourcequota -n <ns>`) or satisfy the webhook."},
        "ExternallyManaged": {"who": f"{WO} ({CA} when the cluster has a MultiKueue check but not this queue)",
                              "do": "spec.managedBy is immutable: `kubectl get <kind> <name> -n <ns> -o yaml`, remove "
                              "spec.managedBy (spec.runPolicy.managedBy for Kubeflow jobs), uid, resourceVersion and "
                              "status, delete the owner and create it again; or put the MultiKueue AdmissionCheck back "
                              "on the ClusterQueue (spec.admissionChecksStrategy)."},
        "PodsPending": {"who": NB, "do": "Pods are being created; wait."},
        "SchedulingGated": {"who": "Nobody (Kueue's gates) / ClusterAdmin (foreign gates)", "do": "Kueue removes "
                            "kueue.x-k8s.io/* gates itself; other gates belong to another controller: "
                            "`kubectl get pod <pod> -o jsonpath='{.spec.schedulingGates}'`."},
        "FailedScheduling": {"who": CA, "do": "status.pods carries kube-scheduler's reasons with counts; add "
                             "nodes/capacity or fix the flavor's nodeLabels/taints (`kubectl get nodes -l "
                             "<labels>`)."},
        "InsufficientResources": {"who": CA, "do": "status.blocker names the resource, the per-Pod request and "
                                  "the most free on a usable node; status.nodeMatches counts the nodes per "
                                  "constraint. Add or free nodes, or lower the request."},
        "PodTooLarge": {"who": WO, "do": "Shrink the Pod below the largest usable node's allocatable "
                        "(status.blocker.available), or ask for larger nodes: waiting never helps."},
        "NodeSelectorMismatch": {"who": f"{CA} (flavor nodeLabels) / {WO} (the Job's own selector)",
                                 "do": "status.blocker names the selector; label the nodes or fix the flavor's "
                                 "nodeLabels or the Job's nodeSelector/affinity (`kubectl get nodes -L <key>`)."},
        "UntoleratedTaint": {"who": f"{CA} / {WO}", "do": "status.blocker names the taint; add the toleration to the "
                             "ResourceFlavor (spec.tolerations) or the Job, or remove the taint "
                             "(`kubectl describe node`)."},
        "VolumeNotBound": {"who": f"{WO} / {CA} (storage)", "do": "`kubectl get pvc -n <ns>`: create the claim "
                           "named in status.blocker, or fix its StorageClass/provisioner."},
        "VolumeNodeConflict": {"who": WO, "do": "The claim's volume lives in a zone or on nodes the Pods cannot "
                               "use: recreate the claim where the flavor's nodes are, or pick another flavor."},
        "PodPreemptionInProgress": {"who": NB, "do": "Nothing: kube-scheduler preempted Pods on the nominated node "
                                    "and places this one when they are gone."},
        "NoSchedulingAttempt": {"who": CA, "do": "Check spec.schedulerName of the Pods and that this scheduler "
                                "runs (`kubectl -n kube-system get pods`)."},
        "PodsFailed": {"who": WO, "do": "`kubectl logs <pod> -n <ns> --previous`; OOMKilled means raise memory."},
        "PodsNotVisible": {"who": NB, "do": "Re-run with Pods in the input."},
        "ImagePullBackOff": {"who": WO, "do": "Fix the image name/tag or the imagePullSecrets."},
        "ErrImagePull": {"who": WO, "do": "Fix the image name/tag or the registry access."},
        "InvalidImageName": {"who": WO, "do": "Fix the image reference (lowercase repository, valid tag)."},
        "CreateContainerConfigError": {"who": WO, "do": "Create the missing ConfigMap/Secret (or key) the "
                                       "container's env or volumes name."},
        "CreateContainerError": {"who": WO, "do": "Read the runtime error in status.pods; often a bad command "
                                 "or mount."},
        "CrashLoopBackOff": {"who": WO, "do": "`kubectl logs <pod> -n <ns> --previous`."},
        "OOMKilled": {"who": WO, "do": "Raise the container's memory limit (the message names it) or lower its "
                      "memory use; `kubectl describe pod` shows Last State: OOMKilled."},
        "RunContainerError": {"who": WO, "do": "The command/entrypoint cannot start: fix the image or command."},
        "FailedMount": {"who": WO, "do": "Create the ConfigMap, Secret or PVC the volume names (`kubectl describe "
                        "pod <pod> -n <ns>` shows the FailedMount event); a CSI mount error is the ClusterAdmin's."},
        "FailedAttachVolume": {"who": CA, "do": "`kubectl get volumeattachments` and the CSI driver's logs; the "
                               "volume may be in another zone or still attached to another node."},
        "FailedMapVolume": {"who": CA, "do": "The CSI driver cannot map the block volume on the node (portals, "
                            "multipath, NVMe): check the driver's node plugin logs and the storage backend."},
        "FailedCreatePodSandBox": {"who": CA, "do": "The node's container runtime or CNI plugin is broken: "
                                   "`kubectl -n kube-system get pods -o wide` for the CNI on that node; cordon it "
                                   "meanwhile."},
        "FailedPrepareDynamicResources": {"who": CA, "do": "The DRA driver on the node cannot prepare the claim: "
                                          "check its kubelet-plugin logs and `kubectl get resourceclaims -n <ns>`."},
        "ContainerCreating": {"who": NB, "do": "Wait a few minutes (image pull, volumes); longer: `kubectl "
                              "describe pod` events (FailedMount, FailedCreatePodSandBox)."},
        "PodsNotReady": {"who": WO, "do": "Readiness probes fail: `kubectl describe pod <pod> -n <ns>` (Unhealthy "
                         "events)."},
        "Terminating": {"who": NB, "do": "Wait; Pods stuck Terminating: check finalizers and the node."},
        "PodsReady": {"who": NB, "do": "Nothing."},
        "PodsRunning": {"who": NB, "do": "Nothing."},
        "DispatchedToWorkerCluster": {"who": NB, "do": "Run kueue-doctor against the worker cluster named in "
                                      "the message."},
        "Succeeded": {"who": NB, "do": "Nothing."},
        "Failed": {"who": WO, "do": "status.message names the failed Pods and how they ended: OOMKilled, raise "
                   "the container's memory limit; an exit code, `kubectl logs <pod> -n <ns>` (`--previous` for a "
                   "restarted container). Fix the cause and resubmit the owner."},
        "OwnerNotFound": {"who": NB, "do": "Nothing: the Job (or other owner) was deleted, often with "
                          "`--cascade=orphan`; Kueue released the quota. Delete the leftover Workload "
                          "(`kubectl delete workload <wl> -n <ns>`) if it is not garbage-collected."},
        "OutOfSync": {"who": WO, "do": "The Job no longer matches the prebuilt Workload named by its label "
                      "kueue.x-k8s.io/prebuilt-workload-name: recreate the Workload from the Job's current pod "
                      "template, or recreate both."},
        "FailedToStart": {"who": WO, "do": "Read the error in status.message and `kubectl describe <kind> <name> "
                          "-n <ns>`; fix the Job (pod sets, selectors it cannot accept) and recreate it."},
        "WorkloadSliceReplaced": {"who": NB, "do": "Nothing: an elastic Job scaled and its new Workload slice "
                                  "(UID in the message) carries on; diagnose that one."},
        "MalformedWorkload": {"who": NB, "do": "Use a complete dump: `kubectl get workloads -A -o yaml`."},
        "DiagnosisFailed": {"who": NB, "do": "A kueue-doctor bug: report it with the Workload's YAML and the error "
                            "in status.message; meanwhile read `kubectl describe workload <wl> -n <ns>`."},
        "UnrecognizedMessage": {"who": NB, "do": "Read Kueue's message quoted in status.message; please report it "
                                "so kueue-doctor learns it."},
        "WorkloadNotInInput": {"who": NB, "do": "Add the namespace's Workloads to the dump: `kubectl get workloads "
                               "-n <ns> -o yaml`; only `explain -f` on a dump gives this."},
    },
}


# --------------------------------------------------------------------------------------------------
# rendering


def _anchor(prefix: str, value: str) -> str:
    return f'<a id="{prefix}-{value.lower()}"></a>'


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _guide(prefix: str, value: str) -> dict[str, str]:
    entry = GUIDE.get(prefix, {}).get(value)
    if not entry or not entry.get("do") or not entry.get("who"):
        raise KeyError(f"hack/gen_docs.py GUIDE has no entry for {prefix} {value}")
    return entry


def verdicts_md(catalog: Mapping[str, Any]) -> str:
    passing = [s for s in catalog["scenarios"] if "xfail" not in s]
    pairs: dict[str, set[str]] = {}
    reason_causes: dict[str, set[str]] = {}
    for s in passing:
        e = s["expect"]
        pairs.setdefault(e["cause"], set()).add(e["reason"])
        reason_causes.setdefault(e["reason"], set()).add(e["cause"])
    uncovered = catalog["uncovered"].get("cause", {})
    out = [
        "# Verdicts: what each stage, reason and cause means, and what to do",
        "",
        "<!-- Generated by hack/gen_docs.py from operator/kueue_doctor/vocabulary.py and "
        "tests/cases/verdicts.yaml. Do not edit by hand. -->",
        "",
        "Every diagnosis says **where** a Workload is (`stage`), **why** (`reason`, then the finer `cause`) and "
        "**who acts** (`actionBy`). `kubectl get adiag -A` or `kueue-doctor explain -f dump.yaml` show them; "
        "`-o yaml` adds the numbers (`status.quota`), the Pods (`status.pods`) and the evidence.",
        "",
        "At 3 a.m.: read `actionBy` first. `Nobody` means Kueue or Kubernetes will move on by itself. "
        "Otherwise find the cause below and do what it says. The scenarios of tests/cases/verdicts.yaml "
        "(see [coverage.md](coverage.md)) show each verdict on a realistic dump.",
        "",
        "## Who acts",
        "",
        "| actionBy | Meaning | What to do |",
        "|---|---|---|",
    ]
    for value, meaning in ACTIONS.items():
        g = _guide("action", str(value))
        out.append(f"| {_anchor('action', str(value))}`{value}` | {_cell(meaning)} | {_cell(g['do'])} |")
    out += ["", "## Stages", "", "| Stage | Meaning | What to do | Who acts |", "|---|---|---|---|"]
    for value, meaning in STAGES.items():
        g = _guide("stage", str(value))
        out.append(f"| {_anchor('stage', str(value))}`{value}` | {_cell(meaning)} | {_cell(g['do'])} | "
                   f"{_cell(g['who'])} |")
    out += ["", "## Reasons", ""]
    for stage in STAGES:
        out += [f"### Stage `{stage}`", ""]
        for value, info in REASONS.items():
            meaning = info.meaning
            if info.stage != stage:
                continue
            g = _guide("reason", value)
            causes = ", ".join(f"[`{c}`](#cause-{c.lower()})" for c in sorted(reason_causes.get(value, ())))
            out += [f"#### {_anchor('reason', value)}`{value}`", "", meaning, "",
                    f"- **What to do:** {g['do']}", f"- **Who acts:** {g['who']}"]
            if causes:
                out.append(f"- **Causes seen with it:** {causes}")
            out.append("")
    out += ["## Causes", ""]
    for value, cause_info in CAUSES.items():
        meaning = cause_info.meaning
        g = _guide("cause", value)
        reasons = ", ".join(f"[`{r}`](#reason-{r.lower()})" for r in sorted(pairs.get(value, ())))
        out += [f"### {_anchor('cause', value)}`{value}`", "", meaning, "",
                f"- **What to do:** {g['do']}", f"- **Who acts:** {g['who']}"]
        if reasons:
            out.append(f"- **Reported with reason:** {reasons}")
        elif value in uncovered:
            out.append(f"- **Not produced yet:** {' '.join(uncovered[value].split())}")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def coverage_md(catalog: Mapping[str, Any]) -> str:
    scenarios = catalog["scenarios"]
    passing = [s for s in scenarios if "xfail" not in s]
    matrix = coverage(passing)
    uncovered = catalog["uncovered"]
    out = [
        "# Coverage matrix of the verdict catalog",
        "",
        "<!-- Generated by hack/gen_docs.py from tests/cases/verdicts.yaml. Do not edit by hand. -->",
        "",
        f"{len(scenarios)} scenarios ({len(passing)} passing, {len(scenarios) - len(passing)} expected to fail "
        "until the engine is fixed) in `tests/cases/verdicts.yaml`, run by `tests/unit/test_catalog.py`. A value "
        "counts as covered when a passing scenario's expectation (or, for vocabulary, API version, owner and "
        "message template, its objects) has it. Values no passing scenario covers are listed with the reason.",
        "",
    ]
    for dim in [*DIMENSIONS, "template"]:
        out += [f"## {DIMENSION_TITLES[dim]}", "", "| Value | Scenarios |", "|---|---|"]
        values = required_values(dim) if dim != "template" else sorted(matrix["template"])
        for v in values:
            names = matrix[dim].get(v, [])
            if names:
                cell = ", ".join(f"`{n}`" for n in names)
            else:
                why = (uncovered.get(dim) or {}).get(v, "NOT COVERED")
                cell = f"**uncovered**: {' '.join(why.split())}"
            out.append(f"| `{v}` | {_cell(cell)} |")
        out.append("")
    xfails = [s for s in scenarios if "xfail" in s]
    out += ["## Known engine bugs (xfail scenarios)", "", "| Scenario | Expected | Why the engine is wrong |",
            "|---|---|---|"]
    for s in xfails:
        e = s["expect"]
        out.append(f"| `{s['name']}` | {e['stage']}/{e['reason']}/{e['cause']}/{e['actionBy']} | "
                   f"{_cell(' '.join(s['xfail'].split()))} |")
    out += ["", "## Scenarios", "", "| Scenario | Situation | Verdict (stage/reason/cause/actionBy) |",
            "|---|---|---|"]
    for s in scenarios:
        e = s["expect"]
        mark = " (xfail)" if "xfail" in s else ""
        out.append(f"| `{s['name']}`{mark} | {_cell(s['why'])} | "
                   f"{e['stage']}/{e['reason']}/{e['cause']}/{e['actionBy']} |")
    return "\n".join(out) + "\n"


def explain_schema() -> dict[Path, str]:
    """docs/schema/explain.schema.json: its descriptions carry the vocabulary, so it is regenerated with the docs."""
    from kueue_doctor.api import EXPLAIN_SCHEMA_PATH, explain_schema_json

    return {ROOT / EXPLAIN_SCHEMA_PATH: explain_schema_json()}


def main(argv: list[str]) -> int:
    catalog = load_catalog()
    outputs = {VERDICTS_MD: verdicts_md(catalog), COVERAGE_MD: coverage_md(catalog), **explain_schema()}
    if "--check" in argv:
        stale = [str(p.relative_to(ROOT)) for p, text in outputs.items()
                 if not p.exists() or p.read_text() != text]
        if stale:
            print(f"stale: {', '.join(stale)}; run python hack/gen_docs.py", file=sys.stderr)
            return 1
        return 0
    for path, text in outputs.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
