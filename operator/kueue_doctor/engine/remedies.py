"""The way out: the smallest changes that would let a Workload in, each with who can make it.

For ExceedsMaxQuota, from the finding's quota lines (Kueue's own numbers when its message gave them):
the ClusterQueue's quota that would be enough for each short resource, and the parallelism that would fit
the maximum. For WaitingForQuota, Kueue's "N more needed": what must be freed, or added. A remedy is
`exact` only when Kueue's numbers say the change is enough on its own (no cohort involved, one pod set);
otherwise it is an estimate and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ..kube.objects import lst, m, name, s, spec
from ..kube.quantity import parse
from ..vocabulary import ActionBy, Cause, Reason
from . import quota
from .context import Context
from .rules import Finding

_QUOTA_FIELD = {Cause.BORROWING_LIMIT_REACHED: "borrowingLimit"}


def remedies(ctx: Context, f: Finding) -> list[dict[str, Any]]:
    if f.reason == Reason.WAITING_FOR_QUOTA:
        return [r for q in f.quota if (r := _freed_remedy(ctx, q)) is not None]
    if f.reason != Reason.EXCEEDS_MAX_QUOTA or not f.quota:
        return []
    short = [q for q in f.quota if _over(_dec(q.get("requested")), _dec(q.get("maximum")))]
    if not short:
        return []
    exact = ctx.cohort is None and len(ctx.requests) <= 1 and all(q.get("source") == "Kueue" for q in short)
    out = [r for q in short if (r := _quota_remedy(ctx, f, q, exact)) is not None]
    parallel = _parallelism_remedy(ctx, short, exact)
    if parallel is not None:
        out.append(parallel)
    return out


def _dec(value: Any) -> Decimal | None:
    return parse(value) if isinstance(value, str) else None


def _over(requested: Decimal | None, maximum: Decimal | None) -> bool:
    return requested is not None and maximum is not None and requested > maximum


def _quota_remedy(ctx: Context, f: Finding, line: Mapping[str, Any], exact: bool) -> dict[str, Any] | None:
    flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
    requested, maximum = _dec(line.get("requested")), _dec(line.get("maximum"))
    field_name = _QUOTA_FIELD.get(f.cause, "nominalQuota") if f.cause is not None else "nominalQuota"
    current = _dec(line.get("borrowingLimit" if field_name == "borrowingLimit" else "nominal"))
    path = _quota_path(ctx, flavor, resource, field_name)
    if requested is None or maximum is None or current is None or path is None or not ctx.cq_name:
        return None
    enough = current + (requested - maximum)
    now_text, enough_text = quota.fmt(resource, current) or str(current), quota.fmt(resource, enough) or str(enough)
    who = ActionBy.QUEUE_ADMIN if field_name == "nominalQuota" and ctx.cohort is None else ActionBy.CLUSTER_ADMIN
    return {"actionBy": who.value, "kind": "ClusterQueue", "name": ctx.cq_name, "field": path, "now": now_text,
            "enough": enough_text, "exact": exact,
            "message": (f"Raise {field_name} of {resource} in flavor {flavor} of ClusterQueue {ctx.cq_name} from "
                        f"{now_text} to {enough_text}" + ("." if exact else
                                                          " (an estimate: the cohort's lending may change it)."))}


def _freed_remedy(ctx: Context, line: Mapping[str, Any]) -> dict[str, Any] | None:
    """WaitingForQuota with Kueue's "N more needed": N must be freed by running Workloads, or added to the
    nominal quota (exact only without a cohort, where nothing else can lend or reclaim)."""
    flavor, resource = s(line.get("flavor")) or "", s(line.get("resource")) or ""
    missing, nominal = _dec(line.get("missing")), _dec(line.get("nominal"))
    path = _quota_path(ctx, flavor, resource, "nominalQuota")
    if missing is None or missing <= 0 or nominal is None or path is None or not ctx.cq_name:
        return None
    exact = ctx.cohort is None and line.get("source") == "Kueue"
    need, now_text = quota.fmt(resource, missing) or str(missing), quota.fmt(resource, nominal) or str(nominal)
    enough = quota.fmt(resource, nominal + missing) or str(nominal + missing)
    return {"actionBy": ActionBy.QUEUE_ADMIN.value if ctx.cohort is None else ActionBy.CLUSTER_ADMIN.value,
            "kind": "ClusterQueue", "name": ctx.cq_name, "field": path, "now": now_text, "enough": enough,
            "exact": exact,
            "message": (f"{need} {resource} in flavor {flavor} must be freed by Workloads of ClusterQueue "
                        f"{ctx.cq_name} finishing, or nominalQuota raised from {now_text} to {enough}"
                        + ("." if exact else " (an estimate: the cohort's lending and reclaim may change it)."))}


def _quota_path(ctx: Context, flavor: str, resource: str, field_name: str) -> str | None:
    for g, group in enumerate(lst(spec(ctx.cq or {}).get("resourceGroups"))):
        for fl, fq in enumerate(lst(m(group).get("flavors"))):
            if s(m(fq).get("name")) != flavor:
                continue
            for r, res in enumerate(lst(m(fq).get("resources"))):
                if s(m(res).get("name")) == resource:
                    return f"spec.resourceGroups[{g}].flavors[{fl}].resources[{r}].{field_name}"
    return None


def _parallelism_remedy(ctx: Context, short: Sequence[Mapping[str, Any]], exact: bool) -> dict[str, Any] | None:
    """A batch Job with one pod set: the largest parallelism whose requests fit every maximum."""
    owner = ctx.owner
    if owner is None or s(owner.get("kind")) != "Job" or len(ctx.requests) != 1:
        return None
    parallelism = m(owner.get("spec")).get("parallelism")
    count = next(iter(_counts(ctx).values()), None)
    if not isinstance(parallelism, int) or not count or parallelism != count:
        return None
    fits = parallelism
    try:
        for line in short:
            requested, maximum = _dec(line.get("requested")), _dec(line.get("maximum"))
            if requested is None or maximum is None or requested <= 0:
                return None
            fits = min(fits, int(maximum // (requested / count)))
    except (InvalidOperation, TypeError, ZeroDivisionError):
        return None
    if fits < 1:
        return None
    return {"actionBy": ActionBy.WORKLOAD_OWNER.value, "kind": "Job", "name": name(owner) or "",
            "namespace": ctx.ns, "field": "spec.parallelism", "now": str(parallelism), "enough": str(fits),
            "exact": exact,
            "message": f"Lower spec.parallelism of Job {ctx.ns}/{name(owner)} from {parallelism} to {fits} (the Job "
                       "then runs fewer Pods at a time)" + ("." if exact else " (an estimate).")}


def _counts(ctx: Context) -> dict[str, int]:
    out = {}
    for ps in lst(ctx.spec.get("podSets")):
        count = m(ps).get("count")
        out[s(m(ps).get("name")) or "main"] = count if isinstance(count, int) else 1
    return out
