"""The failed states of a Workload's admission checks, read one way by the check and the eviction rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...kube.objects import lst, m, s
from ..context import Context

RANK = {"Rejected": 0, "Retry": 1}  # the state that decides what happens next comes first


def failed_checks(ctx: Context) -> list[Mapping[str, Any]]:
    """The Workload's admission checks in Rejected or Retry, the one that decides what happens next first."""
    failed = [c for c in (m(x) for x in lst(ctx.status.get("admissionChecks"))) if s(c.get("state")) in RANK]
    return sorted(failed, key=lambda c: RANK[s(c.get("state")) or ""])
