"""The ClusterQueue `Active=False` message: every reason the queue admits nothing, in message order.

Kueue (pkg/cache/scheduler/clusterqueue.go inactiveReason) joins the causes of an inactive ClusterQueue
into one message ("Can't admit new workloads: references missing ResourceFlavor(s): a,b, ..."); its
parts are found by their fixed prefixes, so names containing ", " stay whole.

Neighbours: `templates.py` (the truncation rule). A Workload's own "ClusterQueue cq is inactive" message
is a template of `workload.py`; this module reads the ClusterQueue's condition, which says why.
"""

from __future__ import annotations

import re

from ...kube.objects import TRUNCATION_SUFFIX
from .templates import is_truncated

_CQ_PARTS: tuple[tuple[str, str], ...] = (
    ("is stopped", "Stopped"),
    ("references missing ResourceFlavor(s): ", "FlavorNotFound"),
    ("references missing AdmissionCheck(s): ", "AdmissionCheckNotFound"),
    ("references inactive AdmissionCheck(s): ", "AdmissionCheckInactive"),
    ("Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: ",
     "MultipleMultiKueueAdmissionChecks"),
    ("Cannot specify MultiKueue AdmissionCheck per flavor, found: ",
     "MultiKueueAdmissionCheckAppliedPerFlavor"),
    ("Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: ",
     "MultiKueueWithProvisioningRequest"),
    ("there is no Topology ", "TopologyNotFound"),
)
_CQ_CAUSE = dict(_CQ_PARTS)
_CQ_PART_RX = re.compile(r"(?:\A|, )(?P<prefix>" + "|".join(re.escape(p) for p, _ in _CQ_PARTS) + ")")
_CQ_PREFIX = "Can't admit new workloads: "


def parse_cluster_queue_inactive(message: object) -> tuple[tuple[str, str], ...]:
    """ClusterQueue Active=False message -> ((cause, detail), ...) in message order.

    cause is one of FlavorNotFound, AdmissionCheckNotFound, AdmissionCheckInactive, Stopped, Terminating,
    TopologyNotFound, MultipleMultiKueueAdmissionChecks, MultiKueueAdmissionCheckAppliedPerFlavor,
    MultiKueueWithProvisioningRequest, Unknown. detail is the raw text after the part's fixed prefix: for
    the name lists Kueue writes "a,b" (v0.12+, no blank) or "[a b]" (<= v0.11); see `split_name_list`.
    "Can admit new workloads" (Active=True) gives ().
    """
    if not isinstance(message, str):
        return ()
    try:
        return _parse_cq_inactive(message)
    except Exception:
        return (("Unknown", message),)


def _parse_cq_inactive(message: str) -> tuple[tuple[str, str], ...]:
    if message in ("", "Can admit new workloads"):
        return ()
    if message == "Can't admit new workloads; clusterQueue is terminating":
        return (("Terminating", ""),)
    if message == "Can't admit new workloads.":
        return (("Unknown", ""),)
    if not message.startswith(_CQ_PREFIX):
        return (("Unknown", message),)
    body = message[len(_CQ_PREFIX):]
    if body.endswith(TRUNCATION_SUFFIX) and is_truncated(message):
        body = body[:-len(TRUNCATION_SUFFIX)]
    elif body.endswith("."):
        body = body[:-1]
    starts = list(_CQ_PART_RX.finditer(body))
    out: list[tuple[str, str]] = []
    if not starts:
        return (("Unknown", body),)
    first = starts[0].start()
    if first > 0:
        out.append(("Unknown", body[:first]))
    for i, st in enumerate(starts):
        stop = starts[i + 1].start() if i + 1 < len(starts) else len(body)
        out.append((_CQ_CAUSE[st.group("prefix")], body[st.end():stop]))
    return tuple(out)


def split_name_list(detail: str) -> tuple[str, ...]:
    """Names of a ClusterQueue inactive detail: "a,b" (v0.12+), "[a b]" (<= v0.11), "a, b" (both MultiKueue
    and ProvisioningRequest: two lists) or '"topo" for TAS flavor "f"' (-> ("topo", "f"))."""
    d = detail.strip()
    if d.startswith('"'):
        return tuple(re.findall(r'"([^"]*)"', d))
    if d.startswith("[") and d.endswith("]"):
        return tuple(x for x in d[1:-1].split() if x)
    return tuple(x for x in re.split(r",\s*", d) if x)
