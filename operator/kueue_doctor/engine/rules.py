"""What a rule is: a frozen record (name, phase, the verdicts it may give, the check), and its Finding.

Rules are data so that the order lives in one place (`registry.py`), dispatch happens once per phase
(`diagnose.py`), and the catalog test can prove that every rule gives only the (reason, cause) pairs
it declares and that every declared pair has a scenario. A check is a small function
`Context -> Finding | None`: None means "not mine, ask the next rule".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from ..vocabulary import CAUSES, ActionBy, Cause, Reason

if TYPE_CHECKING:
    from .context import Context

Verdict = tuple[Reason, Cause | None]


class Phase(StrEnum):
    """Where the Workload is in Kueue's life cycle; decided once from its conditions (`diagnose.phase_of`)."""

    TERMINAL = "terminal"  # Finished, or deactivated (spec.active=false)
    RESERVED = "reserved"  # holds quota but is not (or no longer) admitted: checks, eviction in progress
    PENDING = "pending"  # holds no quota: queues, Kueue's QuotaReserved=False message, evictions
    ADMITTED = "admitted"  # admitted and not evicted: owner, Pods, containers


@dataclass
class Finding:
    """A rule's verdict; `action` defaults to the cause's declared actor."""

    reason: Reason
    cause: Cause | None
    message: str
    action: ActionBy | None = None
    since: datetime | None = None
    quota: list[dict[str, Any]] = field(default_factory=list)
    flavors: list[str] = field(default_factory=list)
    blocked_by: list[dict[str, Any]] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    pods: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action is None:
            self.action = CAUSES[self.cause].action if self.cause is not None else ActionBy.NOBODY

    @property
    def actor(self) -> ActionBy:
        assert self.action is not None  # set in __post_init__
        return self.action

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


def rule(phase: Phase, emits: Iterable[Verdict]) -> Callable[[Check], Rule]:
    """Turn a check into a Rule record. Registering (and so ordering) is `registry.py`'s job."""
    declared = frozenset(emits)
    for reason, cause in declared:
        if cause is not None and reason not in CAUSES[cause].reasons:
            raise ValueError(f"cause {cause} does not refine reason {reason} (vocabulary.CAUSES)")

    def make(check: Check) -> Rule:
        return Rule(check.__name__, phase, declared, check)

    return make


def pairs(reason: Reason, *causes: Cause | None) -> list[Verdict]:
    """Shorthand for a rule's `emits`: one reason with several causes."""
    return [(reason, c) for c in causes]
