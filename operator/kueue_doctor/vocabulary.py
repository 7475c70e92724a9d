"""The public vocabulary: stages, reasons, causes and who acts.

Users script and alert on these strings, so each is an enum defined once, with the meaning that
`kubectl explain admissiondiagnosis.status` shows (the CRD descriptions, docs/verdicts.md and the
metrics' label values are generated from these tables). Each cause declares the reasons it refines and
who acts by default, so a rule cannot pair a cause with a reason the docs do not promise.
Add values; never rename one silently.
"""

from __future__ import annotations

from dataclasses import dataclass
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


class Reason(StrEnum):
    """Why, in one word; each reason belongs to exactly one Stage (REASONS)."""

    NO_WORKLOAD = "NoWorkload"
    NOT_YET_EVALUATED = "NotYetEvaluated"
    QUEUE_MISCONFIGURED = "QueueMisconfigured"
    QUEUE_STOPPED = "QueueStopped"
    EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
    WAITING_FOR_QUOTA = "WaitingForQuota"
    WAITING_FOR_PREEMPTION = "WaitingForPreemption"
    WAITING_FOR_ADMISSION_CHECKS = "WaitingForAdmissionChecks"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    DEACTIVATED = "Deactivated"
    JOB_SUSPENDED = "JobSuspended"
    PODS_NOT_CREATED = "PodsNotCreated"
    PODS_UNSCHEDULABLE = "PodsUnschedulable"
    CONTAINERS_NOT_STARTING = "ContainersNotStarting"
    PODS_NOT_READY = "PodsNotReady"
    RUNNING = "Running"
    FINISHED = "Finished"
    UNKNOWN = "Unknown"


class Cause(StrEnum):
    """The finer detail of a reason; each declares the reasons it refines and who acts by default (CAUSES)."""

    PENDING_EVALUATION = "PendingEvaluation"
    BLOCKED_BY_QUEUE_HEAD = "BlockedByQueueHead"
    ADMISSION_GATED = "AdmissionGated"
    WAITING_FOR_PODS_READY = "WaitingForPodsReady"
    QUOTA_RESERVED_AWAITING_ADMISSION = "QuotaReservedAwaitingAdmission"
    ON_HOLD = "OnHold"
    EQUIVALENT_WORKLOAD_FAILED = "EquivalentWorkloadFailed"
    LOCAL_QUEUE_NOT_FOUND = "LocalQueueNotFound"
    LOCAL_QUEUE_INACTIVE = "LocalQueueInactive"
    CLUSTER_QUEUE_NOT_FOUND = "ClusterQueueNotFound"
    CLUSTER_QUEUE_INACTIVE = "ClusterQueueInactive"
    FLAVOR_NOT_FOUND = "FlavorNotFound"
    ADMISSION_CHECK_NOT_FOUND = "AdmissionCheckNotFound"
    ADMISSION_CHECK_INACTIVE = "AdmissionCheckInactive"
    TOPOLOGY_NOT_FOUND = "TopologyNotFound"
    COHORT_CYCLE = "CohortCycle"
    NAMESPACE_NOT_SELECTED = "NamespaceNotSelected"
    RESOURCE_NOT_COVERED = "ResourceNotCovered"
    NO_MATCHING_FLAVOR = "NoMatchingFlavor"
    TOPOLOGY_MISMATCH = "TopologyMismatch"
    INVALID_REQUESTS = "InvalidRequests"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    EXCEEDS_NOMINAL_QUOTA = "ExceedsNominalQuota"
    EXCEEDS_COHORT_QUOTA = "ExceedsCohortQuota"
    EXCEEDS_MAXIMUM_CAPACITY = "ExceedsMaximumCapacity"
    BORROWING_LIMIT_REACHED = "BorrowingLimitReached"
    TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
    INSUFFICIENT_UNUSED_QUOTA = "InsufficientUnusedQuota"
    PREEMPTION_IN_PROGRESS = "PreemptionInProgress"
    PREEMPTION_FAILED = "PreemptionFailed"
    PREEMPTION_GATED = "PreemptionGated"
    ADMISSION_CHECK_PENDING = "AdmissionCheckPending"
    ADMISSION_CHECK_RETRY = "AdmissionCheckRetry"
    ADMISSION_CHECK_REJECTED = "AdmissionCheckRejected"
    DELAYED_TOPOLOGY_REQUEST = "DelayedTopologyRequest"
    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    ADMISSION_CHECK = "AdmissionCheck"
    NODE_FAILURES = "NodeFailures"
    REQUEUE_BACKOFF = "RequeueBackoff"
    FLAVOR_MIGRATION = "FlavorMigration"
    VARIANT_EVICTED = "VariantEvicted"
    DEACTIVATED_BY_USER = "DeactivatedByUser"
    REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
    MAXIMUM_EXECUTION_TIME_EXCEEDED = "MaximumExecutionTimeExceeded"
    EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
    OWNER_SUSPENDED = "OwnerSuspended"
    SUSPENDED_BY_OTHER_MANAGER = "SuspendedByOtherManager"
    REQUEUE_LOOP = "RequeueLoop"
    GHOST_RESERVATION = "GhostReservation"
    KUEUE_STALLED = "KueueStalled"
    FAILED_CREATE = "FailedCreate"
    EXTERNALLY_MANAGED = "ExternallyManaged"
    PODS_PENDING = "PodsPending"
    SCHEDULING_GATED = "SchedulingGated"
    FAILED_SCHEDULING = "FailedScheduling"
    INSUFFICIENT_RESOURCES = "InsufficientResources"
    POD_TOO_LARGE = "PodTooLarge"
    NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
    UNTOLERATED_TAINT = "UntoleratedTaint"
    VOLUME_NOT_BOUND = "VolumeNotBound"
    VOLUME_NODE_CONFLICT = "VolumeNodeConflict"
    POD_PREEMPTION_IN_PROGRESS = "PodPreemptionInProgress"
    NO_SCHEDULING_ATTEMPT = "NoSchedulingAttempt"
    PODS_FAILED = "PodsFailed"
    PODS_NOT_VISIBLE = "PodsNotVisible"
    IMAGE_PULL_BACKOFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    INVALID_IMAGE_NAME = "InvalidImageName"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    CREATE_CONTAINER_ERROR = "CreateContainerError"
    CRASH_LOOP_BACKOFF = "CrashLoopBackOff"
    OOM_KILLED = "OOMKilled"
    RUN_CONTAINER_ERROR = "RunContainerError"
    FAILED_MOUNT = "FailedMount"
    FAILED_ATTACH_VOLUME = "FailedAttachVolume"
    FAILED_MAP_VOLUME = "FailedMapVolume"
    FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"
    FAILED_PREPARE_DYNAMIC_RESOURCES = "FailedPrepareDynamicResources"
    CONTAINER_CREATING = "ContainerCreating"
    PODS_NOT_READY = "PodsNotReady"
    TERMINATING = "Terminating"
    PODS_READY = "PodsReady"
    PODS_RUNNING = "PodsRunning"
    DISPATCHED_TO_WORKER_CLUSTER = "DispatchedToWorkerCluster"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    OWNER_NOT_FOUND = "OwnerNotFound"
    OUT_OF_SYNC = "OutOfSync"
    FAILED_TO_START = "FailedToStart"
    WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
    MALFORMED_WORKLOAD = "MalformedWorkload"
    DIAGNOSIS_FAILED = "DiagnosisFailed"
    DYNAMIC_RESOURCES_UNSUPPORTED = "DynamicResourcesUnsupported"
    UNRECOGNIZED_MESSAGE = "UnrecognizedMessage"
    WORKLOAD_NOT_IN_INPUT = "WorkloadNotInInput"
    INTEGRATION_NOT_ENABLED = "IntegrationNotEnabled"
    NAMESPACE_NOT_MANAGED = "NamespaceNotManaged"
    NOT_MANAGED_BY_KUEUE = "NotManagedByKueue"
    WORKLOAD_PRIORITY_CLASS_NOT_FOUND = "WorkloadPriorityClassNotFound"
    PREBUILT_WORKLOAD_NOT_FOUND = "PrebuiltWorkloadNotFound"
    WORKLOAD_REJECTED = "WorkloadRejected"
    KUEUE_NOT_RUNNING = "KueueNotRunning"
    WORKLOAD_NOT_CREATED = "WorkloadNotCreated"
    POD_GROUP_INCOMPLETE = "PodGroupIncomplete"


@dataclass(frozen=True)
class ReasonInfo:
    stage: Stage
    meaning: str


@dataclass(frozen=True)
class CauseInfo:
    reasons: tuple[Reason, ...]  # the reasons it may refine
    action: ActionBy  # who acts unless the rule knows better
    meaning: str


STAGES: dict[Stage, str] = {
    Stage.ADMISSION: "Kueue has not admitted the Workload yet (queues, quota, flavors, admission checks, "
    "preemption). No Pod can exist or run before this stage is passed.",
    Stage.SCHEDULING: "Kueue admitted the Workload, but its Pods are not all created, placed on nodes and "
    "started (Job controller, kube-scheduler, kubelet).",
    Stage.RUNNING: "Admitted and its Pods are running (or it runs on a MultiKueue worker cluster).",
    Stage.FINISHED: "Kueue marked the Workload Finished (succeeded or failed); its quota is released.",
    Stage.UNKNOWN: "kueue-doctor could not classify what it saw; status.evidence holds the raw facts.",
}

REASONS: dict[Reason, ReasonInfo] = {
    Reason.NO_WORKLOAD: ReasonInfo(Stage.ADMISSION,
        "The owner (Job, JobSet, RayJob, ...) asks for Kueue (queue-name label, or manageJobsWithoutQueueName) "
        "but Kueue has made no Workload for it, so no queue or quota is even looked at: the integration is off, "
        "the namespace is not managed, Kueue refused to build the Workload, or Kueue is not running."),
    Reason.NOT_YET_EVALUATED: ReasonInfo(Stage.ADMISSION,
        "No admission decision yet: the Workload is new, waits behind the head of a StrictFIFO queue, is held by "
        "waitForPodsReady blockAdmission, or is admission-gated. Usually nobody has to act."),
    Reason.QUEUE_MISCONFIGURED: ReasonInfo(Stage.ADMISSION,
        "The queue setup can never admit this Workload as it is: LocalQueue or ClusterQueue missing or inactive, "
        "a ResourceFlavor or AdmissionCheck missing, the namespace not selected, a requested resource not "
        "covered, or no flavor matching the Pods' node selector/tolerations."),
    Reason.QUEUE_STOPPED: ReasonInfo(Stage.ADMISSION,
        "The LocalQueue or ClusterQueue is deliberately stopped (stopPolicy Hold or HoldAndDrain); nothing is "
        "admitted until an admin restarts it."),
    Reason.EXCEEDS_MAX_QUOTA: ReasonInfo(Stage.ADMISSION,
        "The Workload asks for more than the ClusterQueue could ever give, borrowing included; it will never be "
        "admitted without a change to the quota or to the request."),
    Reason.WAITING_FOR_QUOTA: ReasonInfo(Stage.ADMISSION,
        "The Workload fits the ClusterQueue's maximum, but not the quota unused right now; it is admitted when "
        "other Workloads finish or quota is added."),
    Reason.WAITING_FOR_PREEMPTION: ReasonInfo(Stage.ADMISSION,
        "Kueue is evicting other Workloads (status.blockedBy) to make room for this one; it is admitted once they"
        " release their quota."),
    Reason.WAITING_FOR_ADMISSION_CHECKS: ReasonInfo(Stage.ADMISSION,
        "Quota is reserved, but admission checks (for example a ProvisioningRequest) are not all Ready, or a "
        "delayed topology request is pending."),
    Reason.PREEMPTED: ReasonInfo(Stage.ADMISSION,
        "The Workload was preempted by another one (status.lastEviction) and Kueue has not tried to admit it "
        "again yet."),
    Reason.EVICTED: ReasonInfo(Stage.ADMISSION,
        "Kueue evicted the Workload (PodsReady timeout, admission check, stopped queue, node failures) and has "
        "not tried to admit it again yet, for example during the requeue back-off."),
    Reason.DEACTIVATED: ReasonInfo(Stage.ADMISSION,
        "spec.active is false (set by a user, or by Kueue after too many requeues, a rejected admission check or "
        "the maximum execution time); it is never admitted until reactivated."),
    Reason.JOB_SUSPENDED: ReasonInfo(Stage.SCHEDULING,
        "Admitted, but the owner (Job, JobSet, ...) is still suspended: Kueue's job controller has not started it"
        " yet, or another controller suspended it again."),
    Reason.PODS_NOT_CREATED: ReasonInfo(Stage.SCHEDULING,
        "Admitted and started, but fewer Pods exist than expected: the Job controller cannot create them "
        "(ResourceQuota, webhook, LimitRange) or has not yet, or they are gone while Kueue still holds the quota."),
    Reason.PODS_UNSCHEDULABLE: ReasonInfo(Stage.SCHEDULING,
        "Admitted, but kube-scheduler cannot place the Pods (real node capacity, the flavor's nodeLabels/taints, "
        "affinity), or scheduling gates hold them."),
    Reason.CONTAINERS_NOT_STARTING: ReasonInfo(Stage.SCHEDULING,
        "Pods are on nodes but their containers do not start or stay up (image pull, config errors, crash loops)."),
    Reason.PODS_NOT_READY: ReasonInfo(Stage.SCHEDULING,
        "Admitted, Kueue reports the Pods not ready (PodsReady=False), and kueue-doctor cannot see the Pods (not "
        "in the input, or no RBAC) to say why."),
    Reason.RUNNING: ReasonInfo(Stage.RUNNING,
        "Admitted and running."),
    Reason.FINISHED: ReasonInfo(Stage.FINISHED,
        "Finished; see status.cause (Succeeded, Failed, ...)."),
    Reason.UNKNOWN: ReasonInfo(Stage.UNKNOWN,
        "Not classified; read status.message and status.evidence."),
}

CAUSES: dict[Cause, CauseInfo] = {
    Cause.PENDING_EVALUATION: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "Queued; Kueue's scheduler has not evaluated it yet."),
    Cause.BLOCKED_BY_QUEUE_HEAD: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "The Workload at the head of the queue (status.blockedBy) must be admitted first: in a StrictFIFO "
        "ClusterQueue an older or higher-priority one; in a BestEffortFIFO one, a Workload Kueue keeps at the head "
        "while the Workloads it preempted release their quota."),
    Cause.ADMISSION_GATED: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "The annotation kueue.x-k8s.io/admission-gated-by holds admission for other controllers."),
    Cause.WAITING_FOR_PODS_READY: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "waitForPodsReady.blockAdmission: Kueue admits nothing new until every admitted Workload has its Pods "
        "ready."),
    Cause.QUOTA_RESERVED_AWAITING_ADMISSION: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "Quota was just reserved; Kueue has not marked it Admitted yet."),
    Cause.ON_HOLD: CauseInfo((Reason.NOT_YET_EVALUATED,), ActionBy.NOBODY,
        "Kueue holds the Workload (OnHold) and released its quota: its StatefulSet was scaled to zero (scaling up "
        "lifts it), or the owner's controller rejected the owner (a RayJob KubeRay marked ValidationFailed: the "
        "owner must fix and recreate it)."),
    Cause.EQUIVALENT_WORKLOAD_FAILED: CauseInfo(
        (Reason.WAITING_FOR_QUOTA, Reason.EXCEEDS_MAX_QUOTA, Reason.QUEUE_MISCONFIGURED), ActionBy.NOBODY,
        "Kueue skipped the evaluation because a Workload of the same shape in this ClusterQueue just failed; that"
        " Workload's diagnosis applies."),
    Cause.LOCAL_QUEUE_NOT_FOUND: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.WORKLOAD_OWNER,
        "spec.queueName names a LocalQueue that does not exist in the namespace."),
    Cause.LOCAL_QUEUE_INACTIVE: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.QUEUE_ADMIN,
        "No longer given (kept for scripts that match it): Kueue's \"LocalQueue x is inactive\" means the LocalQueue"
        " is stopped, now LocalQueueStopped."),
    Cause.CLUSTER_QUEUE_NOT_FOUND: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The LocalQueue points at a ClusterQueue that does not exist."),
    Cause.CLUSTER_QUEUE_INACTIVE: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue is not Active; its Active condition says why."),
    Cause.FLAVOR_NOT_FOUND: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue references a ResourceFlavor that does not exist."),
    Cause.ADMISSION_CHECK_NOT_FOUND: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue references an AdmissionCheck that does not exist."),
    Cause.ADMISSION_CHECK_INACTIVE: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "An AdmissionCheck of the ClusterQueue is not Active."),
    Cause.TOPOLOGY_NOT_FOUND: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "A TAS flavor of the ClusterQueue names a Topology that does not exist."),
    Cause.COHORT_CYCLE: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue's cohort tree has a cycle; Kueue treats its ClusterQueues as inactive."),
    Cause.NAMESPACE_NOT_SELECTED: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue's namespaceSelector does not select the Workload's namespace (a null selector selects "
        "none)."),
    Cause.RESOURCE_NOT_COVERED: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.WORKLOAD_OWNER,
        "The Workload requests a resource that no resource group of the ClusterQueue covers."),
    Cause.NO_MATCHING_FLAVOR: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.WORKLOAD_OWNER,
        "No flavor of the ClusterQueue fits the Pods: untolerated flavor taints or node selector/affinity that "
        "rejects the flavor's nodeLabels."),
    Cause.TOPOLOGY_MISMATCH: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.WORKLOAD_OWNER,
        "The Pods ask for Topology Aware Scheduling the flavors do not offer (or the reverse)."),
    Cause.INVALID_REQUESTS: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.WORKLOAD_OWNER,
        "Kueue rejected the Pod requests (requests above limits, LimitRange min/max)."),
    Cause.LOCAL_QUEUE_STOPPED: CauseInfo((Reason.QUEUE_STOPPED, Reason.EVICTED), ActionBy.QUEUE_ADMIN,
        "The LocalQueue's stopPolicy is Hold or HoldAndDrain."),
    Cause.CLUSTER_QUEUE_STOPPED: CauseInfo((Reason.QUEUE_STOPPED, Reason.EVICTED), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue's stopPolicy is Hold or HoldAndDrain."),
    Cause.EXCEEDS_NOMINAL_QUOTA: CauseInfo((Reason.EXCEEDS_MAX_QUOTA,), ActionBy.QUEUE_ADMIN,
        "The request is above the ClusterQueue's nominal quota and it has no cohort to borrow from."),
    Cause.EXCEEDS_COHORT_QUOTA: CauseInfo((Reason.EXCEEDS_MAX_QUOTA,), ActionBy.CLUSTER_ADMIN,
        "The request is above nominal quota plus everything the cohort could lend."),
    Cause.EXCEEDS_MAXIMUM_CAPACITY: CauseInfo((Reason.EXCEEDS_MAX_QUOTA,), ActionBy.CLUSTER_ADMIN,
        "The request is above the maximum Kueue states for the ClusterQueue (the ClusterQueue is not in the "
        "input, so nominal quota and borrowing cannot be told apart)."),
    Cause.BORROWING_LIMIT_REACHED: CauseInfo(
        (Reason.EXCEEDS_MAX_QUOTA, Reason.WAITING_FOR_QUOTA), ActionBy.CLUSTER_ADMIN,
        "The ClusterQueue's borrowingLimit caps what it may borrow below what is needed."),
    Cause.TOPOLOGY_PLACEMENT_FAILED: CauseInfo(
        (Reason.EXCEEDS_MAX_QUOTA, Reason.WAITING_FOR_QUOTA), ActionBy.WORKLOAD_OWNER,
        "Topology Aware Scheduling cannot place the Pods in the requested topology domain."),
    Cause.INSUFFICIENT_UNUSED_QUOTA: CauseInfo((Reason.WAITING_FOR_QUOTA,), ActionBy.NOBODY,
        "Quota is in use by other admitted Workloads (of this ClusterQueue or borrowed by others in the cohort)."),
    Cause.PREEMPTION_IN_PROGRESS: CauseInfo((Reason.WAITING_FOR_PREEMPTION,), ActionBy.NOBODY,
        "Kueue evicted victims (status.blockedBy) and waits for them to release quota."),
    Cause.PREEMPTION_FAILED: CauseInfo((Reason.WAITING_FOR_PREEMPTION,), ActionBy.NOBODY,
        "Kueue's attempt to preempt victims failed (API errors); it will retry."),
    Cause.PREEMPTION_GATED: CauseInfo((Reason.WAITING_FOR_PREEMPTION,), ActionBy.NOBODY,
        "The Workload needs preemption, but a preemption gate is closed."),
    Cause.ADMISSION_CHECK_PENDING: CauseInfo((Reason.WAITING_FOR_ADMISSION_CHECKS,), ActionBy.NOBODY,
        "An admission check is Pending (status.admissionChecks)."),
    Cause.ADMISSION_CHECK_RETRY: CauseInfo((Reason.WAITING_FOR_ADMISSION_CHECKS,), ActionBy.NOBODY,
        "An admission check asked for a retry; the Workload will release quota and retry."),
    Cause.ADMISSION_CHECK_REJECTED: CauseInfo(
        (Reason.DEACTIVATED, Reason.WAITING_FOR_ADMISSION_CHECKS), ActionBy.WORKLOAD_OWNER,
        "An admission check rejected the Workload; Kueue deactivates it, except when the rejection comes without "
        "quota or during an eviction, which Kueue <= 0.19.2 never acts on: its owner must (kueue#10807)."),
    Cause.DELAYED_TOPOLOGY_REQUEST: CauseInfo((Reason.WAITING_FOR_ADMISSION_CHECKS,), ActionBy.NOBODY,
        "The topology assignment is delayed until the admission checks are ready."),
    Cause.IN_CLUSTER_QUEUE: CauseInfo((Reason.PREEMPTED,), ActionBy.NOBODY,
        "Preempted by a higher-priority Workload of the same ClusterQueue."),
    Cause.IN_COHORT_RECLAMATION: CauseInfo((Reason.PREEMPTED,), ActionBy.NOBODY,
        "Preempted so that another ClusterQueue of the cohort gets back its nominal quota."),
    Cause.IN_COHORT_FAIR_SHARING: CauseInfo((Reason.PREEMPTED,), ActionBy.NOBODY,
        "Preempted by fair sharing within the cohort."),
    Cause.IN_COHORT_RECLAIM_WHILE_BORROWING: CauseInfo((Reason.PREEMPTED,), ActionBy.NOBODY,
        "Preempted by a borrowing Workload while reclaiming within the cohort."),
    Cause.PODS_READY_TIMEOUT: CauseInfo((Reason.EVICTED,), ActionBy.WORKLOAD_OWNER,
        "The Pods did not become ready within waitForPodsReady.timeout."),
    Cause.ADMISSION_CHECK: CauseInfo((Reason.EVICTED,), ActionBy.NOBODY,
        "An admission check moved to Retry or Rejected after admission."),
    Cause.NODE_FAILURES: CauseInfo((Reason.EVICTED,), ActionBy.NOBODY,
        "Nodes of a topology assignment failed and no replacement was found."),
    Cause.REQUEUE_BACKOFF: CauseInfo((Reason.EVICTED, Reason.PREEMPTED), ActionBy.NOBODY,
        "Evicted earlier; Kueue waits until status.requeueState.requeueAt before trying again."),
    Cause.FLAVOR_MIGRATION: CauseInfo((Reason.EVICTED,), ActionBy.NOBODY,
        "Evicted to move to a more favourable flavor (ConcurrentAdmission, alpha)."),
    Cause.VARIANT_EVICTED: CauseInfo((Reason.EVICTED,), ActionBy.NOBODY,
        "An admitted variant was evicted (ConcurrentAdmission, alpha)."),
    Cause.DEACTIVATED_BY_USER: CauseInfo((Reason.DEACTIVATED, Reason.EVICTED), ActionBy.WORKLOAD_OWNER,
        "Someone set spec.active=false."),
    Cause.REQUEUING_LIMIT_EXCEEDED: CauseInfo((Reason.DEACTIVATED, Reason.EVICTED), ActionBy.WORKLOAD_OWNER,
        "Kueue deactivated it after waitForPodsReady.requeuingStrategy.backoffLimitCount requeues."),
    Cause.MAXIMUM_EXECUTION_TIME_EXCEEDED: CauseInfo((Reason.DEACTIVATED, Reason.EVICTED), ActionBy.WORKLOAD_OWNER,
        "Kueue deactivated it after its maximum execution time."),
    Cause.EVICTED_ON_MANAGER_CLUSTER: CauseInfo((Reason.DEACTIVATED, Reason.EVICTED), ActionBy.WORKLOAD_OWNER,
        "MultiKueue: evicted on the manager cluster."),
    Cause.OWNER_SUSPENDED: CauseInfo((Reason.JOB_SUSPENDED,), ActionBy.NOBODY,
        "The owner is still suspended after admission."),
    Cause.SUSPENDED_BY_OTHER_MANAGER: CauseInfo((Reason.JOB_SUSPENDED,), ActionBy.CLUSTER_ADMIN,
        "After Kueue admitted the Workload, a field manager that is not Kueue wrote the owner's suspend field "
        "(metadata.managedFields): another controller or a mutating webhook suspends the Job again."),
    Cause.REQUEUE_LOOP: CauseInfo((Reason.EVICTED, Reason.PREEMPTED), ActionBy.WORKLOAD_OWNER,
        "Evicted 3 times or more for the same reason (status.schedulingStats.evictions, status.requeueState), or "
        "twice because a MultiKueue worker found the Job out of sync with its Workload (the platform admin's): "
        "requeuing alone does not help, the cause of the evictions must be fixed."),
    Cause.GHOST_RESERVATION: CauseInfo((Reason.PODS_NOT_CREATED, Reason.EVICTED), ActionBy.CLUSTER_ADMIN,
        "The Workload still holds quota (QuotaReserved=True) although its owner is deleted or finished, or was "
        "stopped with no Pod left: nothing runs, yet Kueue has not released the quota."),
    Cause.KUEUE_STALLED: CauseInfo((Reason.NOT_YET_EVALUATED, Reason.WAITING_FOR_QUOTA), ActionBy.CLUSTER_ADMIN,
        "The Workload fits the ClusterQueue's unused quota by the numbers in the input, yet Kueue has not admitted "
        "or re-evaluated it for more than 10 minutes: the Kueue controller looks stuck."),
    Cause.FAILED_CREATE: CauseInfo((Reason.PODS_NOT_CREATED,), ActionBy.WORKLOAD_OWNER,
        "The Job controller reports FailedCreate (ResourceQuota, webhook or LimitRange denials)."),
    Cause.EXTERNALLY_MANAGED: CauseInfo((Reason.PODS_NOT_CREATED,), ActionBy.WORKLOAD_OWNER,
        "The owner's spec.managedBy hands it to MultiKueue (kueue.x-k8s.io/multikueue), but its ClusterQueue has no "
        "MultiKueue admission check: the owner's own controller (the Job controller, JobSet, KubeRay, ...) skips it "
        "and MultiKueue ignores it, so no Pod is ever created while the Workload holds its quota. The owner recreates "
        "it without spec.managedBy (immutable), or the cluster admin puts the MultiKueue check back on the queue."),
    Cause.PODS_PENDING: CauseInfo((Reason.PODS_NOT_CREATED,), ActionBy.NOBODY,
        "Pods are still being created."),
    Cause.SCHEDULING_GATED: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.NOBODY,
        "Pods carry scheduling gates (status.pods lists them); Kueue's own gates are removed by Kueue after "
        "admission, others by their controllers."),
    Cause.FAILED_SCHEDULING: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.CLUSTER_ADMIN,
        "kube-scheduler cannot place the Pods for a reason not split out above (pod affinity, topology spread, "
        "ports, cordoned nodes, volume limits, DRA); status.pods carries its reasons with counts."),
    Cause.INSUFFICIENT_RESOURCES: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.CLUSTER_ADMIN,
        "The nodes the Pods may use (selector, affinity, taints passed) lack free capacity of a resource "
        "(status.blocker names it with the numbers): Kueue's quota is larger than what the nodes have free."),
    Cause.POD_TOO_LARGE: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.WORKLOAD_OWNER,
        "One Pod requests more of a resource than any node it may use can allocate at all: waiting never "
        "helps, the owner must shrink the Pod (or the admin add larger nodes)."),
    Cause.NODE_SELECTOR_MISMATCH: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.CLUSTER_ADMIN,
        "No node carries the labels the Pods' node selector or required node affinity ask for (the flavor's "
        "nodeLabels included); status.blocker names the selector."),
    Cause.UNTOLERATED_TAINT: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.CLUSTER_ADMIN,
        "The nodes the Pods select carry a taint the Pods do not tolerate (status.blocker names it): add the "
        "toleration to the ResourceFlavor or the Job, or remove the taint."),
    Cause.VOLUME_NOT_BOUND: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.WORKLOAD_OWNER,
        "A PersistentVolumeClaim of the Pods is missing, being deleted or unbound, or no PersistentVolume can "
        "be found or provisioned for it (status.blocker names the claim)."),
    Cause.VOLUME_NODE_CONFLICT: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.WORKLOAD_OWNER,
        "The Pods' volumes are bound to PersistentVolumes whose node affinity or zone no usable node matches "
        "(the volume lives where the flavor's nodes are not)."),
    Cause.POD_PREEMPTION_IN_PROGRESS: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.NOBODY,
        "kube-scheduler preempted lower-priority Pods on a node (status.nominatedNodeName) and waits for them "
        "to terminate: transient, the Pod is placed once they are gone."),
    Cause.NO_SCHEDULING_ATTEMPT: CauseInfo((Reason.PODS_UNSCHEDULABLE,), ActionBy.CLUSTER_ADMIN,
        "No scheduler has evaluated the Pods (check spec.schedulerName and that scheduler)."),
    Cause.PODS_FAILED: CauseInfo((Reason.CONTAINERS_NOT_STARTING, Reason.PODS_NOT_CREATED), ActionBy.WORKLOAD_OWNER,
        "Pods failed (OOMKilled, Error, evicted by the kubelet); status.pods says how. Under PodsNotCreated: a plain "
        "Pod group's failed Pods wait for replacements only their creator makes (Kueue's WaitingForReplacementPods)."),
    Cause.PODS_NOT_VISIBLE: CauseInfo((Reason.PODS_NOT_READY,), ActionBy.NOBODY,
        "Pods are not in the input (or not readable), so kueue-doctor cannot say more."),
    Cause.IMAGE_PULL_BACKOFF: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container image cannot be pulled (name, tag, registry access)."),
    Cause.ERR_IMAGE_PULL: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container image pull failed."),
    Cause.INVALID_IMAGE_NAME: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container image name is invalid."),
    Cause.CREATE_CONTAINER_CONFIG_ERROR: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container cannot be configured (missing ConfigMap or Secret, bad env)."),
    Cause.CREATE_CONTAINER_ERROR: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "The container runtime cannot create a container."),
    Cause.CRASH_LOOP_BACKOFF: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container keeps crashing."),
    Cause.OOM_KILLED: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A container used more memory than its limit and was killed (OOMKilled), then restarted or failed: "
        "raise its memory limit or lower its use."),
    Cause.RUN_CONTAINER_ERROR: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "The container runtime cannot start a container."),
    Cause.FAILED_MOUNT: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "A volume cannot be mounted (missing ConfigMap, Secret or PVC, wrong name): the kubelet keeps the Pod in "
        "ContainerCreating."),
    Cause.FAILED_ATTACH_VOLUME: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.CLUSTER_ADMIN,
        "A volume cannot be attached to the node (storage driver, zone)."),
    Cause.FAILED_MAP_VOLUME: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.CLUSTER_ADMIN,
        "A block volume cannot be mapped on the node."),
    Cause.FAILED_CREATE_POD_SANDBOX: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.CLUSTER_ADMIN,
        "The node cannot create the Pod sandbox (container runtime or CNI network problem)."),
    Cause.FAILED_PREPARE_DYNAMIC_RESOURCES: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.CLUSTER_ADMIN,
        "The kubelet cannot prepare the Pod's dynamic resources (DRA driver)."),
    Cause.CONTAINER_CREATING: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.NOBODY,
        "Containers are being created (volumes, image pulls in progress)."),
    Cause.PODS_NOT_READY: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.WORKLOAD_OWNER,
        "Containers run but readiness probes fail, or their node is not Ready (then the cluster admin acts)."),
    Cause.TERMINATING: CauseInfo((Reason.CONTAINERS_NOT_STARTING,), ActionBy.NOBODY,
        "Pods are terminating (stuck on a node that is down: the cluster admin acts)."),
    Cause.PODS_READY: CauseInfo((Reason.RUNNING,), ActionBy.NOBODY,
        "All Pods are ready (Kueue's PodsReady condition is True)."),
    Cause.PODS_RUNNING: CauseInfo((Reason.RUNNING,), ActionBy.NOBODY,
        "The expected Pods are running."),
    Cause.DISPATCHED_TO_WORKER_CLUSTER: CauseInfo((Reason.RUNNING,), ActionBy.NOBODY,
        "MultiKueue dispatched it to a worker cluster; its Pods run there."),
    Cause.SUCCEEDED: CauseInfo((Reason.FINISHED,), ActionBy.NOBODY,
        "The Workload succeeded."),
    Cause.FAILED: CauseInfo((Reason.FINISHED,), ActionBy.WORKLOAD_OWNER,
        "The Workload failed: its Pods failed (the message names them and how they ended, when the input has "
        "them) or its owner's controller failed it; the owner fixes the cause and resubmits."),
    Cause.OWNER_NOT_FOUND: CauseInfo((Reason.FINISHED,), ActionBy.NOBODY,
        "Kueue finished the Workload because its owner (Job, ...) no longer exists."),
    Cause.OUT_OF_SYNC: CauseInfo((Reason.FINISHED,), ActionBy.NOBODY,
        "Kueue finished a prebuilt Workload that no longer matches its Job."),
    Cause.FAILED_TO_START: CauseInfo((Reason.FINISHED,), ActionBy.NOBODY,
        "Kueue could not start the owner after admission; the message says why."),
    Cause.WORKLOAD_SLICE_REPLACED: CauseInfo((Reason.FINISHED,), ActionBy.NOBODY,
        "An elastic Job's Workload slice was replaced by a new slice."),
    Cause.MALFORMED_WORKLOAD: CauseInfo((Reason.UNKNOWN,), ActionBy.NOBODY,
        "The Workload object lacks fields kueue-doctor needs (name, uid, spec)."),
    Cause.DIAGNOSIS_FAILED: CauseInfo((Reason.UNKNOWN,), ActionBy.NOBODY,
        "kueue-doctor failed on this Workload (a bug: the message names the error; please report it)."),
    Cause.DYNAMIC_RESOURCES_UNSUPPORTED: CauseInfo((Reason.QUEUE_MISCONFIGURED,), ActionBy.CLUSTER_ADMIN,
        "The Pods use Dynamic Resource Allocation claims Kueue is not set up to admit."),
    Cause.UNRECOGNIZED_MESSAGE: CauseInfo((Reason.UNKNOWN,), ActionBy.NOBODY,
        "Kueue wrote a message kueue-doctor does not know; it is quoted in status.message."),
    Cause.WORKLOAD_NOT_IN_INPUT: CauseInfo((Reason.UNKNOWN,), ActionBy.NOBODY,
        "The owner's Pods show Kueue admitted a Workload the input (a dump) does not include: add the Workloads to "
        "the dump to diagnose it."),
    Cause.INTEGRATION_NOT_ENABLED: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.CLUSTER_ADMIN,
        "The owner's kind is not in Kueue's integrations.frameworks, so Kueue ignores it (and an unsuspended "
        "owner runs outside any quota)."),
    Cause.NAMESPACE_NOT_MANAGED: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.CLUSTER_ADMIN,
        "The owner's namespace does not match Kueue's managedJobsNamespaceSelector, so Kueue's job controller "
        "ignores it (while its webhook may still have suspended it)."),
    Cause.NOT_MANAGED_BY_KUEUE: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.WORKLOAD_OWNER,
        "Kueue never manages the owner as it is written (its queue name is an annotation, which Kueue does not "
        "read; a RayJob runs on an existing RayCluster through spec.clusterSelector), yet it is suspended, so "
        "nothing will start it: its owner fixes it and submits it again."),
    Cause.WORKLOAD_PRIORITY_CLASS_NOT_FOUND: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.WORKLOAD_OWNER,
        "The owner's kueue.x-k8s.io/priority-class label names a WorkloadPriorityClass that does not exist, so "
        "Kueue cannot build the Workload."),
    Cause.PREBUILT_WORKLOAD_NOT_FOUND: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.WORKLOAD_OWNER,
        "The owner's kueue.x-k8s.io/prebuilt-workload-name label names a Workload that does not exist; Kueue "
        "waits for it and creates none."),
    Cause.WORKLOAD_REJECTED: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.WORKLOAD_OWNER,
        "Kueue posted a Warning Event on the owner: it could not build or create the Workload (the Event's "
        "message says why)."),
    Cause.KUEUE_NOT_RUNNING: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.CLUSTER_ADMIN,
        "Kueue's controller manager has no available replica, so no Workload is created or admitted."),
    Cause.WORKLOAD_NOT_CREATED: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.CLUSTER_ADMIN,
        "Kueue should have created a Workload and has not, and the input does not show why; Kueue's controller "
        "logs name the owner."),
    Cause.POD_GROUP_INCOMPLETE: CauseInfo((Reason.NO_WORKLOAD,), ActionBy.WORKLOAD_OWNER,
        "Fewer Pods of a Pod group (kueue.x-k8s.io/pod-group-name) exist than its pod-group-total-count: Kueue "
        "creates the group's Workload only once all exist, and keeps every Pod gated until then."),
}


ACTIONS: dict[ActionBy, str] = {
    ActionBy.NOBODY: "Nothing to do but wait; Kueue or Kubernetes will move on by itself.",
    ActionBy.WORKLOAD_OWNER: "The Workload's owner must change the Job (queue name, requests, selectors, image).",
    ActionBy.QUEUE_ADMIN: "The admin of the tenant's queues (LocalQueue, quota shares) must act.",
    ActionBy.CLUSTER_ADMIN: "The platform admin must change the ClusterQueue, ResourceFlavor, AdmissionCheck "
    "or nodes.",
}


def stage_of(reason: str) -> Stage:
    info = REASONS.get(reason)  # type: ignore[call-overload]  # any str: unknown ones are Stage.UNKNOWN
    return info.stage if info else Stage.UNKNOWN


def cause_of(value: str | None) -> Cause | None:
    """A Kueue-written reason string as a cause, when the vocabulary has it (Finished, Evicted reasons)."""
    try:
        return Cause(value) if value else None
    except ValueError:
        return None
