"""What a rule is: a frozen record (name, phase, the verdicts it may give, the check), and its Finding.

Rules are data so that the order lives in one place (`registry.py`), dispatch happens once per phase
(`diagnose.py`), and the catalog test can prove that every rule gives only the (reason, cause) pairs
it declares and that every declared pair has a scenario. A check is a small function
`Context -> Finding | None`: None means "not mine, ask the next rule".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..vocabulary import CAUSES, ActionBy, Cause, Reason

if TYPE_CHECKING:
    from .context import Context

Verdict = tuple[Reason, Cause | None]


class Phase(StrEnum):
    """Where the Workload is in Kueue's life cycle; decided once from its conditions (`diagnose.phase_of`)."""

    NO_WORKLOAD = "no-workload"  # an owner Kueue should manage has no Workload (diagnosed through a stand-in)
    TERMINAL = "terminal"  # Finished, or deactivated (spec.active=false)
    RESERVED = "reserved"  # holds quota but is not (or no longer) admitted: checks, eviction in progress
    PENDING = "pending"  # holds no quota: queues, Kueue's QuotaReserved=False message, evictions
    ADMITTED = "admitted"  # admitted and not evicted: owner, Pods, containers


@dataclass
class Finding:
    """A rule's verdict. `action` is who must act; without one, the cause's declared actor (`actor`)."""

    reason: Reason
    cause: Cause | None
    message: str
    action: InitVar[ActionBy | None] = None
    since: datetime | None = None
    quota: list[dict[str, Any]] = field(default_factory=list)
    flavors: list[str] = field(default_factory=list)
    blocked_by: list[dict[str, Any]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    pods: dict[str, Any] | None = None
    blocker: dict[str, Any] | None = None  # status.blocker: what blocks, structured
    node_matches: list[dict[str, Any]] = field(default_factory=list)  # status.nodeMatches
    # parts of `message` that another field or the evidence also holds, or that only add detail: dropped in this
    # order while the message is over the status' budget, so that it never ends cut mid-sentence (then the note
    # of when the Pods' wait ends, unless listed here)
    notes: tuple[str, ...] = ()
    actor: ActionBy = field(init=False)

    def __post_init__(self, action: ActionBy | None) -> None:
        if action is None:
            action = CAUSES[self.cause].action if self.cause is not None else ActionBy.NOBODY
        self.actor = action

    @property
    def verdict(self) -> Verdict:
        return self.reason, self.cause


Check = Callable[["Context"], Finding | None]


@dataclass(frozen=True)
class Rule:
    name: str
    phase: Phase
    emits: frozenset[Verdict]
    check: Check

    def __call__(self, ctx: Context) -> Finding | None:
        return self.check(ctx)


def declared(emits: Iterable[Verdict]) -> frozenset[Verdict]:
    """The verdicts a rule or handler declares, refused at import when a cause is paired with a reason
    the vocabulary does not let it refine."""
    out = frozenset(emits)
    for reason, cause in out:
        if cause is not None and reason not in CAUSES[cause].reasons:
            raise ValueError(f"cause {cause} does not refine reason {reason} (vocabulary.CAUSES)")
    return out


def rule(phase: Phase, emits: Iterable[Verdict]) -> Callable[[Check], Rule]:
    """Turn a check into a Rule record. Registering (and so ordering) is `registry.py`'s job."""
    verdicts = declared(emits)

    def make(check: Check) -> Rule:
        return Rule(check.__name__, phase, verdicts, check)

    return make


def pairs(reason: Reason, *causes: Cause | None) -> list[Verdict]:
    """Shorthand for a rule's `emits`: one reason with several causes."""
    return [(reason, c) for c in causes]
