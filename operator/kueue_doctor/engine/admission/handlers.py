"""The Template -> handler table for Kueue's QuotaReserved=False message, and what handlers share.

A handler is a record like a rule: the templates it handles, the verdicts it declares, the function.
`kueue_message.py` and `flavors.py` register theirs with `@handles`; `kueue_message.from_kueue_message`
is the one rule that dispatches on the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...vocabulary import ActionBy, Cause, Reason
from ..context import Context
from ..messages import ParsedMessage, Template
from ..rules import Finding, Verdict, declared

Handle = Callable[[Context, ParsedMessage], Finding | None]


@dataclass(frozen=True)
class MessageHandler:
    templates: tuple[Template, ...]
    emits: frozenset[Verdict]
    handle: Handle


HANDLERS: dict[Template, MessageHandler] = {}


def handles(*templates: Template, emits: Iterable[Verdict]) -> Callable[[Handle], MessageHandler]:
    verdicts = declared(emits)

    def register(fn: Handle) -> MessageHandler:
        handler = MessageHandler(templates, verdicts, fn)
        for t in templates:
            if t in HANDLERS:
                raise ValueError(f"two handlers for Kueue message template {t}")
            HANDLERS[t] = handler
        return handler
    return register


def finding(reason: Reason, cause: Cause, text: str, ctx: Context, action: ActionBy | None = None,
            **kw: Any) -> Finding:
    """A verdict read from the QuotaReserved message: its time, and the condition as evidence."""
    return Finding(reason, cause, text, action, since=ctx.cond_time("QuotaReserved"),
                   evidence=[ctx.condition_evidence("QuotaReserved")], **kw)
