"""Which of Kueue's two reason wordings a verdict was read from, said in the verdict's message.

Kueue <= 0.19 (and 0.20 with the `UnadmittedWorkloadsObservability` gate off) writes QuotaReserved=False
with `Pending` / `Inadmissible`; with the gate on (the 0.20 default) the same condition carries a
granular reason (`ExceedsMaxQuota`, `WaitingForQuota`, `Misconfigured`, ...) and the same message text
(`pkg/controller/core/workload_controller.go`, `pkg/scheduler/flavorassigner`). The verdict is decided from
the message in both; the sentence added here tells the reader which reason to expect in
`kubectl describe workload`, so the two are never mistaken for a disagreement.
"""

from __future__ import annotations

from ...kube.objects import m, s
from ...vocabulary import REASONS, Stage
from ..context import Context
from ..rules import Finding

#: The reasons of the legacy wording (`kueue.WorkloadPending`, `WorkloadInadmissible`, `WorkloadWaiting`).
LEGACY = frozenset({"Pending", "Inadmissible", "Waiting"})
#: The granular QuotaReserved=False reasons of v0.19.2 (`WorkloadQuotaReservedReason*` in workload_types.go).
GRANULAR = frozenset({"NoMatchingFlavor", "WaitingForQuota", "ExceedsMaxQuota", "TopologyPlacementFailed",
                      "WaitingForPreemptedWorkloads", "Misconfigured", "Suspended", "PendingEvaluation",
                      "WaitingForPodsReady",
                      "Deactivated"})  # written on QuotaReserved by the granular path only (workload_controller.go)

_STYLE = {
    **dict.fromkeys(LEGACY, "legacy wording: Kueue <= 0.19, or UnadmittedWorkloadsObservability off"),
    **dict.fromkeys(GRANULAR, "granular wording: Kueue >= 0.20, or UnadmittedWorkloadsObservability on"),
}


def kueue_wording(ctx: Context, f: Finding) -> str:
    """" Kueue wrote QuotaReserved=False reason X (which wording)." for a verdict at the admission stage of a
    Workload whose QuotaReserved=False reason belongs to one of the two wordings; else ""."""
    if REASONS[f.reason].stage != Stage.ADMISSION:
        return ""
    cond = m(ctx.conds.get("QuotaReserved"))
    reason = s(cond.get("reason"))
    style = _STYLE.get(reason or "")
    if cond.get("status") != "False" or style is None:
        return ""
    return f" Kueue wrote QuotaReserved=False reason {reason} ({style})."
