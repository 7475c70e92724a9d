"""JobSet's exclusive placement creates a Job's followers only once its leader is scheduled (jobset#1187).

With alpha.jobset.sigs.k8s.io/exclusive-topology, JobSet's Pod webhook gives each follower (completion index != 0)
its leader's topology domain as a nodeSelector, and refuses to admit it ("follower pod node selector not set",
"leader pod not yet scheduled, ...") while the leader (index 0) has no node (jobset pkg/webhooks/pod_webhook.go).
The Job controller retries and records FailedCreate each time: that is the leader's wait, not a broken webhook, and
the Pods a verdict counts as "not created" are those followers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...kube.objects import controller_ref, i, labels, m, name, s, spec
from .. import pods as podlib
from ..context import Context
from .owners import owner_jobset

EXCLUSIVE_KEY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# the webhook's refusals of a follower whose leader has no node yet (jobset pkg/webhooks/pod_webhook.go)
_REFUSALS = ("follower pod node selector", "leader pod not yet scheduled")
_INDEX = "batch.kubernetes.io/job-completion-index"


def _withheld(ctx: Context, job: Mapping[str, Any]) -> tuple[int, str, str] | None:
    """(followers missing, unplaced leader, the refusal) for a Job of the JobSet whose followers the webhook refuses
    while its leader waits for a node."""
    found = podlib.job_failed_create(ctx.state.events_about("Job", ctx.ns, name(job)))
    if found is None or not any(r in found[1] for r in _REFUSALS):
        return None
    mine = [p for p in ctx.pods if s(m(controller_ref(p)).get("name")) == name(job)]
    leader = next((p for p in mine if s(labels(p).get(_INDEX)) == "0"), None)
    missing = i(spec(job).get("parallelism"), 1) - len(mine)
    if leader is None or s(spec(leader).get("nodeName")) or missing <= 0:
        return None
    return missing, name(leader) or "", found[1]


def withheld_note(ctx: Context, summary: podlib.PodSummary) -> str:
    """" The Pod not created is a follower of Job x: JobSet ... withholds it until leader y is scheduled ...", or ""
    when no Pod is missing that way."""
    jobset = owner_jobset(ctx) if summary.created < summary.expected else None
    if jobset is None:
        return ""
    held = []
    for job in ctx.state.descendants(jobset, depth=1):
        found = _withheld(ctx, job) if s(job.get("kind")) == "Job" else None
        if found is not None:
            held.append((job, found))
    if not held:
        return ""
    missing = sum(found[0] for _, found in held)
    many = len(held) > 1
    jobs = ", ".join(name(job) or "" for job, _ in held[:3]) + (", ..." if len(held) > 3 else "")
    leaders = ", ".join(found[1] for _, found in held[:3]) + (", ..." if len(held) > 3 else "")
    refusal = held[0][1][2].split("denied the request: ")[-1]
    key = next(filter(None, (s(m(m(o.get("metadata")).get("annotations")).get(EXCLUSIVE_KEY))
                             for o in (held[0][0], jobset))), None)
    rule = f" ({EXCLUSIVE_KEY}: {key})" if key else ""
    what = (f"The {missing} Pods not created are followers" if missing > 1 else "The Pod not created is a follower")
    them = "them" if missing > 1 else "it"
    return (f" {what} of Job{'s' if many else ''} {jobs}: JobSet's exclusive placement{rule} withholds {them} until "
            f"leader{'s' if many else ''} {leaders} {'are' if many else 'is'} scheduled, so FailedCreate "
            f"\"{refusal}\" is that wait, not a broken webhook (jobset#1187).")
