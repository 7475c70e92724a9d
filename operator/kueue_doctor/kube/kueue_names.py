"""The name Kueue gives the Workload of an owner (pkg/controller/jobframework/workload_names.go).

A diagnosis of an owner that has no Workload yet is named the same way, so the object the user reads
while Kueue has not acted is the one that continues once the Workload exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from .objects import group_of, labels, m, meta, name, s, uid

HASH_LENGTH = 5
LONG_MAX = 253  # a CRD object name
SHORT_MAX = 63  # with Kueue's alpha ShortWorkloadNames gate: names usable as label values
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
POD_GROUP_KEY = "kueue.x-k8s.io/pod-group-name"
PODSET_LABEL = "kueue.x-k8s.io/podset"  # on every Pod Kueue admitted; never taken off
# a Pod with one of these is placed by Kueue's TAS (utiltas.IsTAS): Kueue counts it through its Workload; any other
# Pod bound to a node it counts as the node's non-TAS usage until the Pod's phase is terminal
TAS_POD_ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology",
                       "kueue.x-k8s.io/podset-unconstrained-topology", "kueue.x-k8s.io/podset-slice-required-topology",
                       "kueue.x-k8s.io/podset-slice-required-topology-constraints")


def identifier(obj: Mapping[str, Any], key: str) -> str | None:
    """A Kueue identifier (prebuilt Workload name, pod group name): the annotation first, then the label, as
    Kueue reads them with WorkloadIdentifierAnnotations (beta, on by default since 0.18)."""
    return s(m(meta(obj).get("annotations")).get(key)) or s(labels(obj).get(key))


def workload_name(kind: str, group: str, owner_name: str, owner_uid: str, short: bool = False) -> str:
    """`<lowercase kind>-<owner name>-<5 hex of sha1(kind, group, name, uid)>`, the prefix truncated to fit."""
    max_prefix = (SHORT_MAX if short else LONG_MAX) - 1 - HASH_LENGTH
    prefix = f"{kind.lower()}-{owner_name}"[:max_prefix]
    digest = hashlib.sha1("\n".join((kind, group, owner_name, owner_uid)).encode()).hexdigest()
    return f"{prefix}-{digest[:HASH_LENGTH]}"


def expected_workload_name(owner: Mapping[str, Any]) -> str:
    """The name of the owner's Workload: the prebuilt one it names, else the one Kueue generates (a Pod of a Pod
    group: the group's Workload, named after the group)."""
    prebuilt = identifier(owner, PREBUILT_LABEL)
    if prebuilt:
        return prebuilt
    group = identifier(owner, POD_GROUP_KEY)
    if group and s(owner.get("kind")) == "Pod" and group_of(owner.get("apiVersion")) == "":
        return group
    return workload_name(s(owner.get("kind")) or "", group_of(owner.get("apiVersion")), name(owner) or "",
                         uid(owner) or "")


_OBJECT_NAME_PREFIX = 247  # objNameMaxPrefixLength: longer names keep 247 characters and a 5-hex sha1 suffix


def provisioning_request_name(workload: str, check: str, attempt: int) -> str:
    """The name Kueue gives the ProvisioningRequest of `attempt` (ProvisioningRequestName, limitObjectName)."""
    full = f"{workload}-{check}-{attempt}"
    if len(full) <= _OBJECT_NAME_PREFIX:
        return full
    return f"{full[:_OBJECT_NAME_PREFIX]}-{hashlib.sha1(full.encode()).hexdigest()[:5]}"
