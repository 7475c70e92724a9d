"""Views of the Kueue event notes that carry more than their Workload's conditions.

`parse_flavors_considered` finds the optional "; Flavors considered: " list of a QuotaReserved event note
(what each flavor of each pod set was tried for, and why it did not fit) and `parse_preempted_workload_event` reads the
PreemptedWorkload note Kueue posts on the preemptor, naming the victim.

Neighbours: `flavors.py` parses the attempts of the list, `workload.py` the whole note (both events are
also templates of `parse_workload_message`), `templates.py` holds the result types.
"""

from __future__ import annotations

from .flavors import parse_attempts
from .templates import FlavorAttempt, PreemptedWorkloadEvent, Template, is_truncated
from .workload import parse_workload_message


def parse_flavors_considered(note: object) -> tuple[FlavorAttempt, ...]:
    """Flavor attempts of a QuotaReserved event note (or of just its "Flavors considered" list)."""
    if not isinstance(note, str):
        return ()
    try:
        idx = note.find("; Flavors considered: ")
        if idx >= 0:
            s = note[idx + len("; Flavors considered: "):]
        elif note.startswith("Flavors considered: "):
            s = note[len("Flavors considered: "):]
        elif note.startswith("Quota reserved in ClusterQueue "):
            return ()
        else:
            s = note
        return parse_attempts(s, is_truncated(note))
    except Exception:
        return ()


def parse_preempted_workload_event(note: object) -> PreemptedWorkloadEvent | None:
    """Parse "Preempted workload ns/name (UID: u) in ClusterQueue cq; preemptor effective priority: ...".

    Returns None for any other text.
    """
    p = parse_workload_message(note)
    if p.template is not Template.PREEMPTED_WORKLOAD or p.preemption is None:
        return None
    n = p.names
    return PreemptedWorkloadEvent(workload=n.get("workload", ""), namespace=n.get("namespace"),
                                  name=n.get("name", ""), uid=n.get("uid", ""),
                                  cluster_queue=n.get("clusterQueue", ""), preemption=p.preemption)
