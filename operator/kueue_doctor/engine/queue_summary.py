"""One cause, named once: the diagnoses of each ClusterQueue grouped by verdict.

A misconfiguration (an uncovered resource, a missing flavor, a stopped queue) blocks every Workload of a
queue with the same verdict; grouping says so in one line with the count, the longest wait and the
message of the Workload waiting longest (which names what to fix). Pure: diagnoses in, groups out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kube.objects import m, s

EXAMPLES = 20  # Workload names kept per group in the JSON form


@dataclass
class Group:
    cluster_queue: str
    reason: str
    cause: str | None
    action_by: str
    count: int = 0
    oldest_since: str | None = None
    oldest: str = ""  # namespace/name of the Workload waiting longest
    message: str = ""
    workloads: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"clusterQueue": self.cluster_queue, "reason": self.reason, "cause": self.cause,
                "actionBy": self.action_by, "count": self.count, "oldestSince": self.oldest_since,
                "oldest": self.oldest, "message": self.message, "workloads": self.workloads}


def by_queue(diagnoses: Iterable[Mapping[str, Any]], include_running: bool = False) -> list[Group]:
    """Groups by (ClusterQueue, reason, cause, actionBy), the largest first; Running and Finished Workloads
    are left out unless asked for (they block nothing)."""
    groups: dict[tuple[str, str, str | None, str], Group] = {}
    for d in diagnoses:
        st, md = m(d.get("status")), m(d.get("metadata"))
        stage = s(st.get("stage")) or ""
        if not include_running and stage in ("Running", "Finished"):
            continue
        # without its ClusterQueue (the LocalQueue not in the input): grouped by the LocalQueue it names, not
        # with every other such Workload under one "-"
        lq = s(st.get("localQueue"))
        queue = s(st.get("clusterQueue")) or (f"LocalQueue {s(md.get('namespace')) or ''}/{lq}" if lq else "-")
        key = (queue, s(st.get("reason")) or "Unknown", s(st.get("cause")), s(st.get("actionBy")) or "Nobody")
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(*key)
        g.count += 1
        who = f"{s(md.get('namespace')) or ''}/{s(md.get('name')) or ''}"
        if len(g.workloads) < EXAMPLES:
            g.workloads.append(who)
        since = s(st.get("since"))
        if not g.oldest or (since is not None and (g.oldest_since is None or since < g.oldest_since)):
            g.oldest_since, g.oldest, g.message = since, who, s(st.get("message")) or ""
    return sorted(groups.values(), key=lambda g: (-g.count, g.cluster_queue, g.reason, g.cause or ""))
