"""The public vocabulary: stages, reasons, causes and who acts.

Users script and alert on these strings, so they live in one table each, with the meaning that
`kubectl explain admissiondiagnosis.status` shows. Add values; never rename one silently.
"""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    ADMISSION = "Admission"
    SCHEDULING = "Scheduling"
    RUNNING = "Running"
    FINISHED = "Finished"
    UNKNOWN = "Unknown"


class ActionBy(StrEnum):
    NOBODY = "Nobody"
    WORKLOAD_OWNER = "WorkloadOwner"
    QUEUE_ADMIN = "QueueAdmin"
    CLUSTER_ADMIN = "ClusterAdmin"


STAGES: dict[str, str] = {
    Stage.ADMISSION: "Kueue has not admitted the Workload yet (queues, quota, flavors, admission checks, "
    "preemption). No Pod can exist or run before this stage is passed.",
    Stage.SCHEDULING: "Kueue admitted the Workload, but its Pods are not all created, placed on nodes and "
    "started (Job controller, kube-scheduler, kubelet).",
    Stage.RUNNING: "Admitted and its Pods are running (or it runs on a MultiKueue worker cluster).",
    Stage.FINISHED: "Kueue marked the Workload Finished (succeeded or failed); its quota is released.",
    Stage.UNKNOWN: "kueue-doctor could not classify what it saw; status.evidence holds the raw facts.",
}

# reason -> (stage, meaning). Order is the order of the docs and of `kubectl explain`.
REASONS: dict[str, tuple[Stage, str]] = {
    "NotYetEvaluated": (Stage.ADMISSION, "No admission decision yet: the Workload is new, waits behind the "
                        "head of a StrictFIFO queue, is held by waitForPodsReady blockAdmission, or is "
                        "admission-gated. Usually nobody has to act."),
    "QueueMisconfigured": (Stage.ADMISSION, "The queue setup can never admit this Workload as it is: "
                           "LocalQueue or ClusterQueue missing or inactive, a ResourceFlavor or "
                           "AdmissionCheck missing, the namespace not selected, a requested resource "
                           "not covered, or no flavor matching the Pods' node selector/tolerations."),
    "QueueStopped": (Stage.ADMISSION, "The LocalQueue or ClusterQueue is deliberately stopped (stopPolicy "
                     "Hold or HoldAndDrain); nothing is admitted until an admin restarts it."),
    "ExceedsMaxQuota": (Stage.ADMISSION, "The Workload asks for more than the ClusterQueue could ever give, "
                        "borrowing included; it will never be admitted without a change to the quota or "
                        "to the request."),
    "WaitingForQuota": (Stage.ADMISSION, "The Workload fits the ClusterQueue's maximum, but not the quota "
                        "unused right now; it is admitted when other Workloads finish or quota is added."),
    "WaitingForPreemption": (Stage.ADMISSION, "Kueue is evicting other Workloads (status.blockedBy) to make "
                             "room for this one; it is admitted once they release their quota."),
    "WaitingForAdmissionChecks": (Stage.ADMISSION, "Quota is reserved, but admission checks (for example a "
                                  "ProvisioningRequest) are not all Ready, or a delayed topology request "
                                  "is pending."),
    "Preempted": (Stage.ADMISSION, "The Workload was preempted by another one (status.lastEviction) and "
                  "Kueue has not tried to admit it again yet."),
    "Evicted": (Stage.ADMISSION, "Kueue evicted the Workload (PodsReady timeout, admission check, stopped "
                "queue, node failures) and has not tried to admit it again yet, for example during the "
                "requeue back-off."),
    "Deactivated": (Stage.ADMISSION, "spec.active is false (set by a user, or by Kueue after too many "
                    "requeues, a rejected admission check or the maximum execution time); it is never "
                    "admitted until reactivated."),
    "JobSuspended": (Stage.SCHEDULING, "Admitted, but the owner (Job, JobSet, ...) is still suspended: Kueue's "
                     "job controller has not started it yet."),
    "PodsNotCreated": (Stage.SCHEDULING, "Admitted and started, but fewer Pods exist than expected: the Job "
                       "controller cannot create them (ResourceQuota, webhook, LimitRange) or has not yet."),
    "PodsUnschedulable": (Stage.SCHEDULING, "Admitted, but kube-scheduler cannot place the Pods (real node "
                          "capacity, the flavor's nodeLabels/taints, affinity), or scheduling gates hold them."),
    "ContainersNotStarting": (Stage.SCHEDULING, "Pods are on nodes but their containers do not start or stay "
                              "up (image pull, config errors, crash loops)."),
    "PodsNotReady": (Stage.SCHEDULING, "Admitted, Kueue reports the Pods not ready (PodsReady=False), and "
                     "kueue-doctor cannot see the Pods (not in the input, or no RBAC) to say why."),
    "Running": (Stage.RUNNING, "Admitted and running."),
    "Finished": (Stage.FINISHED, "Finished; see status.cause (Succeeded, Failed, ...)."),
    "Unknown": (Stage.UNKNOWN, "Not classified; read status.message and status.evidence."),
}

# cause -> meaning. Causes refine a reason; several reasons share some causes.
CAUSES: dict[str, str] = {
    # NotYetEvaluated
    "PendingEvaluation": "Queued; Kueue's scheduler has not evaluated it yet.",
    "BlockedByQueueHead": "StrictFIFO ClusterQueue: an older or higher-priority Workload at the head of the "
    "queue (status.blockedBy) must be admitted first.",
    "AdmissionGated": "The annotation kueue.x-k8s.io/admission-gated-by holds admission for other controllers.",
    "WaitingForPodsReady": "waitForPodsReady.blockAdmission: Kueue admits nothing new until every admitted "
    "Workload has its Pods ready.",
    "QuotaReservedAwaitingAdmission": "Quota was just reserved; Kueue has not marked it Admitted yet.",
    "OnHold": "The owner holds the Workload (for example a StatefulSet scaled to zero).",
    "EquivalentWorkloadFailed": "Kueue skipped the evaluation because a Workload of the same shape in this "
    "ClusterQueue just failed; that Workload's diagnosis applies.",
    # QueueMisconfigured
    "LocalQueueNotFound": "spec.queueName names a LocalQueue that does not exist in the namespace.",
    "LocalQueueInactive": "The LocalQueue is not Active (its ClusterQueue is missing or inactive).",
    "ClusterQueueNotFound": "The LocalQueue points at a ClusterQueue that does not exist.",
    "ClusterQueueInactive": "The ClusterQueue is not Active; its Active condition says why.",
    "FlavorNotFound": "The ClusterQueue references a ResourceFlavor that does not exist.",
    "AdmissionCheckNotFound": "The ClusterQueue references an AdmissionCheck that does not exist.",
    "AdmissionCheckInactive": "An AdmissionCheck of the ClusterQueue is not Active.",
    "TopologyNotFound": "A TAS flavor of the ClusterQueue names a Topology that does not exist.",
    "CohortCycle": "The ClusterQueue's cohort tree has a cycle; Kueue treats its ClusterQueues as inactive.",
    "NamespaceNotSelected": "The ClusterQueue's namespaceSelector does not select the Workload's namespace "
    "(a null selector selects none).",
    "ResourceNotCovered": "The Workload requests a resource that no resource group of the ClusterQueue covers.",
    "NoMatchingFlavor": "No flavor of the ClusterQueue fits the Pods: untolerated flavor taints or node "
    "selector/affinity that rejects the flavor's nodeLabels.",
    "TopologyMismatch": "The Pods ask for Topology Aware Scheduling the flavors do not offer (or the reverse).",
    "InvalidRequests": "Kueue rejected the Pod requests (requests above limits, LimitRange min/max).",
    # QueueStopped
    "LocalQueueStopped": "The LocalQueue's stopPolicy is Hold or HoldAndDrain.",
    "ClusterQueueStopped": "The ClusterQueue's stopPolicy is Hold or HoldAndDrain.",
    # ExceedsMaxQuota / WaitingForQuota
    "ExceedsNominalQuota": "The request is above the ClusterQueue's nominal quota and it has no cohort to "
    "borrow from.",
    "ExceedsCohortQuota": "The request is above nominal quota plus everything the cohort could lend.",
    "ExceedsMaximumCapacity": "The request is above the maximum Kueue states for the ClusterQueue (the "
    "ClusterQueue is not in the input, so nominal quota and borrowing cannot be told apart).",
    "BorrowingLimitReached": "The ClusterQueue's borrowingLimit caps what it may borrow below what is needed.",
    "TopologyPlacementFailed": "Topology Aware Scheduling cannot place the Pods in the requested topology domain.",
    "InsufficientUnusedQuota": "Quota is in use by other admitted Workloads (of this ClusterQueue or borrowed "
    "by others in the cohort).",
    # WaitingForPreemption
    "PreemptionInProgress": "Kueue evicted victims (status.blockedBy) and waits for them to release quota.",
    "PreemptionFailed": "Kueue's attempt to preempt victims failed (API errors); it will retry.",
    "PreemptionGated": "The Workload needs preemption, but a preemption gate is closed.",
    # WaitingForAdmissionChecks
    "AdmissionCheckPending": "An admission check is Pending (status.admissionChecks).",
    "AdmissionCheckRetry": "An admission check asked for a retry; the Workload will release quota and retry.",
    "AdmissionCheckRejected": "An admission check rejected the Workload; Kueue deactivates it.",
    "DelayedTopologyRequest": "The topology assignment is delayed until the admission checks are ready.",
    # Preempted / Evicted
    "InClusterQueue": "Preempted by a higher-priority Workload of the same ClusterQueue.",
    "InCohortReclamation": "Preempted so that another ClusterQueue of the cohort gets back its nominal quota.",
    "InCohortFairSharing": "Preempted by fair sharing within the cohort.",
    "InCohortReclaimWhileBorrowing": "Preempted by a borrowing Workload while reclaiming within the cohort.",
    "PodsReadyTimeout": "The Pods did not become ready within waitForPodsReady.timeout.",
    "AdmissionCheck": "An admission check moved to Retry or Rejected after admission.",
    "NodeFailures": "Nodes of a topology assignment failed and no replacement was found.",
    "RequeueBackoff": "Evicted earlier; Kueue waits until status.requeueState.requeueAt before trying again.",
    "FlavorMigration": "Evicted to move to a more favourable flavor (ConcurrentAdmission, alpha).",
    "VariantEvicted": "An admitted variant was evicted (ConcurrentAdmission, alpha).",
    # Deactivated
    "DeactivatedByUser": "Someone set spec.active=false.",
    "RequeuingLimitExceeded": "Kueue deactivated it after waitForPodsReady.requeuingStrategy.backoffLimitCount "
    "requeues.",
    "MaximumExecutionTimeExceeded": "Kueue deactivated it after its maximum execution time.",
    "EvictedOnManagerCluster": "MultiKueue: evicted on the manager cluster.",
    # Scheduling
    "OwnerSuspended": "The owner is still suspended after admission.",
    "FailedCreate": "The Job controller reports FailedCreate (ResourceQuota, webhook or LimitRange denials).",
    "PodsPending": "Pods are still being created.",
    "SchedulingGated": "Pods carry scheduling gates (status.pods lists them); Kueue's own gates are removed "
    "by Kueue after admission, others by their controllers.",
    "FailedScheduling": "kube-scheduler cannot place the Pods; status.pods carries its reasons with counts.",
    "NoSchedulingAttempt": "No scheduler has evaluated the Pods (check spec.schedulerName and that scheduler).",
    "PodsFailed": "Pods failed (OOMKilled, Error, evicted by the kubelet); status.pods says how.",
    "PodsNotVisible": "Pods are not in the input (or not readable), so kueue-doctor cannot say more.",
    "ImagePullBackOff": "A container image cannot be pulled (name, tag, registry access).",
    "ErrImagePull": "A container image pull failed.",
    "InvalidImageName": "A container image name is invalid.",
    "CreateContainerConfigError": "A container cannot be configured (missing ConfigMap or Secret, bad env).",
    "CreateContainerError": "The container runtime cannot create a container.",
    "CrashLoopBackOff": "A container keeps crashing.",
    "RunContainerError": "The container runtime cannot start a container.",
    "FailedMount": "A volume cannot be mounted (missing ConfigMap, Secret or PVC, wrong name): the kubelet keeps "
    "the Pod in ContainerCreating.",
    "FailedAttachVolume": "A volume cannot be attached to the node (storage driver, zone).",
    "FailedMapVolume": "A block volume cannot be mapped on the node.",
    "FailedCreatePodSandBox": "The node cannot create the Pod sandbox (container runtime or CNI network problem).",
    "FailedPrepareDynamicResources": "The kubelet cannot prepare the Pod's dynamic resources (DRA driver).",
    "ContainerCreating": "Containers are being created (volumes, image pulls in progress).",
    "PodsNotReady": "Containers run but readiness probes fail.",
    "Terminating": "Pods are terminating.",
    # Running / Finished
    "PodsReady": "All Pods are ready (Kueue's PodsReady condition is True).",
    "PodsRunning": "The expected Pods are running.",
    "DispatchedToWorkerCluster": "MultiKueue dispatched it to a worker cluster; its Pods run there.",
    "Succeeded": "The Workload succeeded.",
    "Failed": "The Workload failed; the owner's status says why.",
    "OwnerNotFound": "Kueue finished the Workload because its owner (Job, ...) no longer exists.",
    "OutOfSync": "Kueue finished a prebuilt Workload that no longer matches its Job.",
    "FailedToStart": "Kueue could not start the owner after admission; the message says why.",
    "WorkloadSliceReplaced": "An elastic Job's Workload slice was replaced by a new slice.",
    # Unknown
    "MalformedWorkload": "The Workload object lacks fields kueue-doctor needs (name, uid, spec).",
    "DiagnosisFailed": "kueue-doctor failed on this Workload (a bug: the message names the error; please report it).",
    "DynamicResourcesUnsupported": "The Pods use Dynamic Resource Allocation claims Kueue is not set up to admit.",
    "UnrecognizedMessage": "Kueue wrote a message kueue-doctor does not know; it is quoted in status.message.",
}

ACTIONS: dict[str, str] = {
    ActionBy.NOBODY: "Nothing to do but wait; Kueue or Kubernetes will move on by itself.",
    ActionBy.WORKLOAD_OWNER: "The Workload's owner must change the Job (queue name, requests, selectors, image).",
    ActionBy.QUEUE_ADMIN: "The admin of the tenant's queues (LocalQueue, quota shares) must act.",
    ActionBy.CLUSTER_ADMIN: "The platform admin must change the ClusterQueue, ResourceFlavor, AdmissionCheck "
    "or nodes.",
}


def stage_of(reason: str) -> Stage:
    entry = REASONS.get(reason)
    return entry[0] if entry else Stage.UNKNOWN


def describe(table: dict[str, str] | dict[str, tuple[Stage, str]]) -> str:
    """Render a vocabulary table as the text of a CRD field description."""
    lines = []
    for key, value in table.items():
        text = value[1] if isinstance(value, tuple) else value
        lines.append(f"{key}: {text}")
    return "\n".join(lines)
