"""Why fair sharing lets Kueue preempt nothing in the other ClusterQueues of the cohort for a waiting Workload.

With fair sharing on, Kueue preempts a Workload of another (borrowing) ClusterQueue only when a preemption
strategy passes (pkg/scheduler/preemption/preemption.go runFirstFsStrategy/runSecondFsStrategy,
fairsharing/strategy.go): the preemptor queue's share after admitting the Workload is at most the target queue's
share after the preemption (LessThanOrEqualToFinalShare), or below its share before (LessThanInitialShare). A
queue within its nominal quota preempts whatever the shares (FairSharingPreemptWithinNominal, on by default
since v0.17). The shares are Kueue's DominantResourceShare (`quota.dominant_share`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any, Protocol

from ...kube.objects import s, spec
from ...kube.quantity import parse
from ...state import Derived
from .. import quota
from ..context import Context


class Holding(Protocol):
    """A Workload holding quota (holders.Holder)."""

    @property
    def key(self) -> tuple[str, str]: ...
    @property
    def priority(self) -> int: ...
    @property
    def usage(self) -> dict[tuple[str, str], Decimal]: ...


def _allowed(policy: str, theirs: int, mine: int) -> bool:
    """The policy lets Kueue consider a Workload of priority `theirs` (findCandidatesForPolicy); for
    LowerOrNewerEqualPriority equal priorities count too (newer ones only: a superset, never fewer)."""
    return policy == "Any" or (policy == "LowerPriority" and theirs < mine) or (
        policy == "LowerOrNewerEqualPriority" and theirs <= mine)


def shares_stop_preemption(ctx: Context, res: str, flavor: str, line: dict[str, Any], missing: Decimal | None,
                           short: frozenset[tuple[str, str]], policy: str, reclaim: str,
                           holders_of: Callable[[str], Sequence[Holding]]) -> str:
    """" Fair sharing stops Kueue from preempting ...": said only when it is certain in Kueue's arithmetic: one
    short (flavor, resource); the queue would be above its nominal quota; its own lower-priority Workloads (taken
    first, whatever the shares) cannot make room alone; every borrowing queue holding Workloads reclaimWithinCohort
    lets Kueue take is a sibling (same Cohort: their own shares compare) and fails both strategies even in the
    preemptor's best case (all its own candidates gone, the target's smallest preemption). "" otherwise."""
    cq, cohort = ctx.cq_name, ctx.cohort
    requested, nominal = parse(line.get("requested")), parse(line.get("nominal"))
    if not cq or not cohort or reclaim == "Never" or missing is None or len(short) != 1 or (flavor, res) not in short \
            or requested is None or nominal is None or not quota.fair_sharing_on(ctx.state, ctx.cq):
        return ""
    used = parse(line.get("used")) or Decimal(0)
    if used + requested <= nominal:
        return ""  # within nominal: Kueue reclaims from borrowing queues whatever the shares
    mine = ctx.priority
    own = [h for h in holders_of(cq) if policy != "Never" and _allowed(policy, h.priority, mine)
           and h.key != (ctx.ns, ctx.name) and h.usage.get((flavor, res), 0) > 0]
    freed = sum((h.usage[flavor, res] for h in own), Decimal(0))
    gain = quota.own_room_gain(ctx.state, cq, flavor, res, freed) if freed > 0 else Decimal(0)
    if gain is None or gain >= missing:
        return ""
    preemptor = quota.dominant_share(ctx.state, cq, {(flavor, res): requested - freed})
    if preemptor is None:
        return ""
    targets, takeable, single = [], gain, True
    for other in quota.cohort_queues(ctx.state, cq):
        if other == cq or not quota.borrowing(ctx.state, other, flavor, res):
            continue
        candidates = [h for h in holders_of(other) if _allowed(reclaim, h.priority, mine)
                      and h.usage.get((flavor, res), 0) > 0]
        if not candidates:
            continue
        if s(spec(ctx.state.cluster_queues.get(other) or {}).get("cohortName")) != cohort:
            return ""  # in another subtree Kueue compares the Cohorts' shares below the common ancestor
        before, best = _target_shares(ctx, other, candidates, (flavor, res, reclaim, mine))
        if before is None or best is None:
            return ""
        single = single and not (preemptor <= best or preemptor < before)  # not even one Workload passes
        memo, key = ctx.state.derived(TAKEABLE), (other, flavor, res, reclaim, mine, preemptor, before)
        at_most = memo[key] if key in memo else memo.setdefault(
            key, _takeable(ctx, other, candidates, flavor, res, preemptor, before))
        if at_most is None:
            return ""
        takeable += at_most
        targets.append((other, before, best, at_most))
    if not targets or not (single or takeable < missing):
        return ""  # a strategy may pass often enough: whom Kueue takes then is its choice, not claimed here
    return _text(ctx, res, missing, own, freed, preemptor, targets, used + requested - freed - nominal,
                 None if single else takeable)


def _takeable(ctx: Context, cq: str, candidates: Sequence[Holding], flavor: str, res: str, preemptor: quota.Share,
              before: quota.Share) -> Decimal | None:
    """The most of (flavor, res) Kueue's fair preemption can take from a sibling queue for this preemptor (an upper
    bound, whatever the order of the candidates): LessThanOrEqualToFinalShare passes a Workload only while the
    queue's share after it stays >= the preemptor's, and the share left by removing x of `res` alone bounds the
    real one (the victims' other resources only lower it); LessThanInitialShare takes one Workload of the queue at
    most (runSecondFsStrategy drops the queue after one), and only while its share is above the preemptor's.
    None with a cohort cycle."""
    usages = sorted(h.usage[flavor, res] for h in candidates)
    total = sum(usages, Decimal(0))

    def keeps(x: Decimal) -> bool | None:
        after = quota.dominant_share(ctx.state, cq, {(flavor, res): -x})
        return None if after is None else preemptor <= after

    lo, hi = Decimal(0), total
    first = keeps(usages[0])
    if first is None:
        return None
    if not first:
        lo = Decimal(0)  # not even its smallest Workload passes: nothing by the first strategy
    elif keeps(total):
        lo = total
    else:
        for _ in range(40):  # the largest x the queue's share allows, within 1e-12 of it
            mid = (lo + hi) / 2
            if keeps(mid):
                lo = mid
            else:
                hi = mid
    return lo + (usages[-1] if preemptor < before else Decimal(0))


TAKEABLE: Derived[dict[tuple[str, str, str, str, int, quota.Share, quota.Share], Decimal | None]] = Derived(
    "what fair preemption can take from a sibling queue per preemptor share", lambda _: {}, numbers=True)


def _target_shares(ctx: Context, cq: str, candidates: Sequence[Holding], key: tuple[str, str, str, int]
                   ) -> tuple[quota.Share | None, quota.Share | None]:
    """(its share now, the highest it has after preempting one candidate): the same for every Workload of a queue
    short of the same with the same priority, so kept per pass."""
    memo = ctx.state.derived(TARGET_SHARES)
    found = memo.get((cq, *key))
    if found is None:
        before = quota.dominant_share(ctx.state, cq, {})
        after = [quota.dominant_share(ctx.state, cq, {k: -v for k, v in h.usage.items()}) for h in candidates]
        best = None if any(a is None for a in after) else max((a for a in after if a is not None), default=None)
        found = memo[cq, *key] = (before, best)
    return found


TARGET_SHARES: Derived[dict[tuple[str, str, str, str, int], tuple[quota.Share | None, quota.Share | None]]] = Derived(
    "a borrowing queue's fair-sharing shares before and after one preemption", lambda _: {}, numbers=True)


def _text(ctx: Context, res: str, missing: Decimal, own: Sequence[Holding], freed: Decimal,
          preemptor: quota.Share, targets: list[tuple[str, quota.Share, quota.Share, Decimal]], borrowed: Decimal,
          takeable: Decimal | None) -> str:
    """Short: the verdict's message is clipped at 1024 characters. `takeable`: what the strategies let Kueue take in
    all when some Workloads pass them but not enough (None: none passes)."""
    cq = ctx.cq_name or ""
    lendable = quota.cohort_lendable(ctx.state, cq, res)
    weight = quota.fair_weight(ctx.state, cq)
    # LowerOrNewerEqualPriority counts equal priorities too (`_allowed`): "lower-priority" only when they all are
    lower = all(h.priority < ctx.priority for h in own)
    mine = (f"even after preempting its own {'lower-priority' if lower else 'preemptible'} {own[0].key[1]}"
            + (f" and {len(own) - 1} more" if len(own) > 1 else "")
            + f", which frees only {quota.fmt(res, freed)} of the {quota.fmt(res, missing)} {res} missing; "
            if own else "")
    if takeable is None:
        theirs = ", ".join(f"{other} {before.shown()} -> {after.shown()}" for other, before, after, _ in targets[:3])
        rules = ("Kueue preempts in a borrowing queue only if that stays <= the queue's share after "
                 f"(LessThanOrEqualToFinalShare) or < before (LessThanInitialShare): {theirs}")
    else:  # some pass, too few: Kueue preempts none of them (fairPreemptions restores them)
        theirs = ", ".join(f"{other} (share {before.shown()}) at most {quota.fmt(res, n)}"
                           for other, before, _, n in targets[:3])
        rules = ("Kueue preempts in a borrowing queue only while that stays <= the queue's share after "
                 "(LessThanOrEqualToFinalShare), or one Workload while < its share before (LessThanInitialShare): "
                 f"{theirs} {res} of the {quota.fmt(res, missing)} missing, so none")
    text = (f" Fair sharing stops preemption: admitted, {cq} would borrow {quota.fmt(res, borrowed)}"
            + (f" of the {quota.fmt(res, lendable)}" if lendable else "") + f" {res} its cohort lends (share "
            f"{preemptor.shown()}, weight {weight.normalize():f}; {mine}{rules}). It waits for Workloads of cohort "
            f"{ctx.cohort} to finish")
    highest = max(before for _, before, _, _ in targets)
    if takeable is not None:  # above the share before, one Workload per queue passes already: no weight to name
        return text + (f"; or the cluster admin raises {cq}'s fairSharing.weight or nominalQuota (within nominal, "
                       "shares do not count).")
    if not highest.zero_weight_borrows and highest.value > 0:
        unweighted = preemptor.value if preemptor.zero_weight_borrows else preemptor.value * float(weight)
        needed = f"{unweighted / highest.value:.2f}".rstrip("0").rstrip(".")
        return text + (f"; or the cluster admin raises {cq}'s fairSharing.weight above {needed}, or its nominalQuota "
                       "(within nominal, shares do not count).")
    return text + "."
