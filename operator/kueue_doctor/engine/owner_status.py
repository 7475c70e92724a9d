"""What an owner's own controller says about it, read by both phases (a rejected owner holds its Workload
OnHold, or leaves an admitted one without Pods; an owner still unsuspended long after its eviction): kept out of
admission/ and scheduling/, which import neither the other."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..kube.objects import group_of, m, parse_time, s


def owner_rejected(owner: Mapping[str, Any] | None) -> str | None:
    """The owner's controller refused it and will make nothing: a RayJob KubeRay marked ValidationFailed (a name
    over 47 characters, a bad spec). Its status.message, or a stand-in; None otherwise. Kueue 0.19.1+ then holds
    its Workload (OnHold) and releases the quota; 0.19.0 left it admitted."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    st = m(owner.get("status"))
    if s(st.get("jobDeploymentStatus")) != "ValidationFailed":
        return None
    return s(st.get("message")) or "no message"


RAYJOB_DONE = ("Complete", "Failed")  # KubeRay's terminal jobDeploymentStatus values


def rayjob_finished(owner: Mapping[str, Any] | None) -> tuple[str, str, datetime | None] | None:
    """A RayJob KubeRay is done with: (jobDeploymentStatus, jobStatus, status.endTime), else None. A RayJob has no
    conditions; Kueue's RayJob.Finished reads only jobDeploymentStatus Complete or Failed, and KubeRay sets endTime
    on that transition (rayjob_controller updateRayJobStatus)."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    st = m(owner.get("status"))
    deployment = s(st.get("jobDeploymentStatus"))
    if deployment not in RAYJOB_DONE:
        return None
    return deployment or "", s(st.get("jobStatus")) or "", parse_time(st.get("endTime"))


RAY_CLUSTER_SELECTOR_KEY = "ray.io/cluster"  # KubeRay's utils.RayJobClusterSelectorKey: the RayCluster's name


def existing_cluster_selector(owner: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A RayJob that runs on an existing RayCluster (spec.clusterSelector; KubeRay reads the cluster's name from
    its ray.io/cluster key): its selector, else None. Kueue v0.19 skips such RayJobs (RayJob.Skip, kueue#7219):
    their quota is the RayCluster's Workload."""
    if owner is None or s(owner.get("kind")) != "RayJob":
        return None
    selector = m(m(owner.get("spec")).get("clusterSelector"))
    return {str(k): str(v) for k, v in selector.items()} or None


# How owners show suspension: (group, kind) -> path of the boolean. Kueue suspends these until admission.
SUSPEND_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("batch", "Job"): ("spec", "suspend"),
    ("jobset.x-k8s.io", "JobSet"): ("spec", "suspend"),
    ("ray.io", "RayJob"): ("spec", "suspend"),
    ("ray.io", "RayCluster"): ("spec", "suspend"),
    ("kubeflow.org", "MPIJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PyTorchJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "TFJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "XGBoostJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "PaddleJob"): ("spec", "runPolicy", "suspend"),
    ("kubeflow.org", "JAXJob"): ("spec", "runPolicy", "suspend"),
    ("trainer.kubeflow.org", "TrainJob"): ("spec", "suspend"),
}


def suspend_path(owner: Mapping[str, Any]) -> tuple[str, ...] | None:
    return SUSPEND_PATHS.get((group_of(owner.get("apiVersion")), s(owner.get("kind")) or ""))


def owner_suspended(owner: Mapping[str, Any]) -> bool | None:
    path = suspend_path(owner)
    if path is None:
        return None
    node: Any = owner
    for part in path:
        node = m(node).get(part)
    return node is True
