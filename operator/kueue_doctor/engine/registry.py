"""The one place that orders the rules. Within a phase the first rule that answers wins, so the most
definite facts come first (the objects before Kueue's message, which may lag; a stated cause before a guess).

To add a verdict: write the rule next to its concern, list it here, add its vocabulary entry and a
catalog scenario (CONTRIBUTING.md).
"""

from __future__ import annotations

from . import no_workload
from .admission import checks, eviction, kueue_message, order, queues, stalled, terminal
from .rules import Phase, Rule
from .scheduling import appwrapper, dispatch, ghost, workload_pods


def _order() -> tuple[Rule, ...]:
    # a function, not a module-level tuple: mypy (and so mypyc) types the decorated rules before it reads them
    return (
        # no-workload: a Workload the dump left out (Pods show it admitted), an incomplete Pod group (its stand-in has
        # no owner object: the rules below read it), a RayJob Kueue skips whatever its Configuration says, Kueue's
        # Configuration (it explains everything else), then what the owner names, Kueue's words
        no_workload.workload_not_in_input,
        no_workload.pod_group_incomplete,
        no_workload.pod_group_not_composed,
        no_workload.pod_group_prebuilt_missing,
        no_workload.rayjob_on_existing_cluster,
        no_workload.integration_not_enabled,
        no_workload.namespace_not_managed,
        no_workload.queue_name_in_annotation,
        no_workload.kueue_not_running,
        no_workload.prebuilt_workload_missing,
        no_workload.owner_still_active,
        no_workload.priority_class_missing,
        no_workload.too_many_pod_sets,
        no_workload.workload_rejected,
        no_workload.workload_not_created,
        # terminal: Finished, or deactivated
        terminal.finished,
        terminal.deactivated,
        # reserved: holds quota, not admitted (or being evicted)
        ghost.evicted_ghost,
        eviction.rejected_while_evicting,
        eviction.out_of_sync_loop_reserved,
        eviction.requeue_loop_while_evicting,
        eviction.eviction_in_progress,
        checks.admission_checks_not_ready,
        checks.delayed_topology_request,
        checks.reserved_awaiting_admission,
        # pending: holds no quota
        queues.no_queue_name,
        queues.local_queue_missing,
        queues.local_queue_stopped,
        queues.cluster_queue_missing,
        queues.cluster_queue_stopped,
        queues.cluster_queue_inactive,
        queues.namespace_not_selected,
        eviction.rejected_after_eviction,
        eviction.out_of_sync_loop,
        eviction.requeue_loop,
        eviction.recent_eviction,
        stalled.kueue_stalled,
        order.behind_queue_head,
        kueue_message.from_kueue_message,
        order.not_yet_evaluated,
        kueue_message.unrecognized,
        # admitted: the owner, the Pods, the containers
        dispatch.multikueue,
        ghost.admitted_ghost,
        dispatch.managed_by_multikueue,
        dispatch.suspended_owner,
        dispatch.suspended_ray_cluster,
        appwrapper.appwrapper_recovering,
        appwrapper.appwrapper_failure_not_seen_yet,
        workload_pods.pods_ready,
        workload_pods.pods_failed_create,
        workload_pods.pods_not_visible,
        workload_pods.pod_group_replacements,
        workload_pods.pods_running,
        workload_pods.pods_not_created,
        workload_pods.pods_unschedulable,
        workload_pods.pods_scheduling_gated,
        workload_pods.pods_not_scheduled,
        workload_pods.pods_terminating,
        workload_pods.containers_not_starting,
    )


ORDER: tuple[Rule, ...] = _order()

BY_PHASE: dict[Phase, tuple[Rule, ...]] = {phase: tuple(r for r in ORDER if r.phase == phase) for phase in Phase}

if len({r.name for r in ORDER}) != len(ORDER):
    raise ValueError("two rules share a name")
