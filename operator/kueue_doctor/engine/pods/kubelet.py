"""The kubelet's side of a bound Pod: container waiting and terminated states, and start-up event reasons.

A Pod on a node waits for the kubelet: images, volumes, the sandbox, init containers. The kubelet says
why in each container's ``state.waiting.reason`` / ``state.terminated.reason`` (``ImagePullBackOff``,
``CreateContainerConfigError``, ``CrashLoopBackOff``, ``OOMKilled`` with its exit code) and, while the
container is still ``ContainerCreating``, only in events (``FailedMount``, ``FailedCreatePodSandBox``).

Neighbours: `summary.py` turns these into PodBlocker categories (Failing, ContainersNotStarting);
`events.py` indexes the start-up events named here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ...kube.objects import int_or_none, lst, m, s

# kubelet waiting reasons that are normal for a short while (the engine decides how long, from `since`).
BENIGN_WAITING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})
# Waiting reasons that mean the container ran and keeps failing, not that it cannot start.
_FAILING_WAITING_REASONS = frozenset({"CrashLoopBackOff", "RunContainerError", "PostStartHookError"})
# kubelet events that explain a Pod stuck in ContainerCreating, most telling first.
STARTUP_EVENT_REASONS = (
    "FailedCreatePodSandBox", "FailedPrepareDynamicResources", "FailedAttachVolume", "FailedMapVolume",
    "FailedMount",
)
# The kubelet's image events (K pkg/kubelet/images/image_manager.go, events.PullingImage / PulledImage):
# "Pulling image %q" with no newer "Pulled" is a pull still under way, what a long ContainerCreating waits for.
IMAGE_PULL_EVENT_REASONS = ("Pulling", "Pulled")
PULLING_IMAGE = "pulling image"  # the detail of a ContainerCreating group whose image is still being pulled


def _terminated_detail(terminated: Mapping[str, Any]) -> str:
    reason = s(terminated.get("reason")) or ""
    code = int_or_none(terminated.get("exitCode"))
    parts = [p for p in (reason, f"exit code {code}" if code is not None else "") if p]
    return ", ".join(parts)


def container_blocker(status: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """The most telling container state: ``(category, reason, message, detail)`` or None if all fine.

    Init containers come first (regular ones only wait with ``PodInitializing`` while they run).
    """
    benign: tuple[str, str, str, str] | None = None
    for key, init in (("initContainerStatuses", True), ("containerStatuses", False)):
        for cs in lst(status.get(key)):
            cs = m(cs)
            state = m(cs.get("state"))
            where = f"init container {s(cs.get('name')) or ''}" if init else ""
            waiting = m(state.get("waiting"))
            if waiting:
                reason = s(waiting.get("reason")) or "Waiting"
                message = s(waiting.get("message")) or ""
                if reason in BENIGN_WAITING_REASONS:
                    benign = benign or ("ContainersNotStarting", reason, message, where)
                    continue
                detail = where
                if reason in _FAILING_WAITING_REASONS:
                    last = _terminated_detail(m(m(cs.get("lastState")).get("terminated")))
                    detail = ", ".join(p for p in (last, where) if p)
                    return "Failing", reason, message, detail
                return "ContainersNotStarting", reason, message, detail
            terminated = m(state.get("terminated"))
            if terminated and int_or_none(terminated.get("exitCode")) not in (0, None):
                reason = s(terminated.get("reason")) or "Error"
                detail = ", ".join(p for p in (_terminated_detail(terminated), where) if p)
                return "Failing", reason, s(terminated.get("message")) or "", detail
    return benign


def failed_pod(status: Mapping[str, Any]) -> tuple[str, str, str]:
    """Why a Pod is in phase Failed: ``(reason, message, detail)``."""
    reason = s(status.get("reason")) or ""
    message = s(status.get("message")) or ""
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in lst(status.get(key)):
            terminated = m(m(m(cs).get("state")).get("terminated"))
            if terminated and int_or_none(terminated.get("exitCode")) not in (0, None):
                # an init container that failed ends the Pod before its main containers start (kubectl: Init:Error)
                where = f"init container {s(m(cs).get('name')) or ''}" if key == "initContainerStatuses" else ""
                detail = ", ".join(p for p in (_terminated_detail(terminated), where) if p)
                if reason:
                    return reason, message, detail
                return (s(terminated.get("reason")) or "Error", s(terminated.get("message")) or message,
                        detail)
    return reason or "Failed", message, ""


# The eviction manager's texts for a Pod that outgrew its own local-storage limits (K pkg/kubelet/eviction/helpers.go:
# 54-58, v1.36.3): evicted at once, whatever the node has free, unlike "The node was low on resource: ..." (pressure).
_OWN_LIMIT_EVICTIONS = (
    (re.compile(r'Pod ephemeral local storage usage exceeds the total limit of containers (\S+?)\.? '), "pod"),
    (re.compile(r'Container (\S+) exceeded its local ephemeral storage limit "([^"]*)"'), "container"),
    (re.compile(r'Usage of EmptyDir volume "([^"]*)" exceeds the limit "([^"]*)"'), "emptyDir"),
)


def own_limit_eviction(message: str) -> tuple[str, str, str] | None:
    """``(what, name, limit)`` when the kubelet evicted the Pod for exceeding its own ephemeral-storage limit
    (``what`` is "pod", "container" or "emptyDir"; ``name`` the container or volume), else None."""
    for pattern, what in _OWN_LIMIT_EVICTIONS:
        found = pattern.match(message)
        if found is not None:
            groups = found.groups()
            return (what, "", groups[0]) if len(groups) == 1 else (what, groups[0], groups[1])
    return None


# Image pulls refused for their rate, not for the image: the kubelet's own throttle (registryPullQPS/registryBurst, K
# pkg/kubelet/images/helpers.go:51, v1.36.3) and a registry's HTTP 429 (Docker Hub: "toomanyrequests: You have reached
# your pull rate limit"), as the runtime's error carries it into ErrImagePull / ImagePullBackOff.
PULL_QPS_EXCEEDED = "pull QPS exceeded"
_REGISTRY_RATE_LIMIT = re.compile(r"toomanyrequests[^\n]*|429 Too Many Requests[^\n]*")


def pull_rate_limited(message: str) -> tuple[str, str] | None:
    """``("kubelet", text)`` when the node's kubelet throttled the pull, ``("registry", the registry's words)`` when the
    registry answered 429, else None."""
    if message == PULL_QPS_EXCEEDED or message.endswith(": " + PULL_QPS_EXCEEDED):
        return "kubelet", PULL_QPS_EXCEEDED
    found = _REGISTRY_RATE_LIMIT.search(message)
    if found is None:
        return None
    said = found.group(0)
    cut = said.find("toomanyrequests")
    return "registry", (said[cut:] if cut > 0 else said)[:200]


# The kubelet's pull failure (K pkg/kubelet/images/image_manager.go:338-346 "Back-off pulling image %q" + ": " + the
# stored "<ErrImagePull>: <the runtime's error>", :368; evalCRIPullErr :384-412). The runtime's error names the image
# two or three times and ends with what matters (containerd: 'failed to resolve reference "<image>": <image>: not
# found', 'pull access denied, repository does not exist or may require authorization: ...'): cut in the middle, not
# at the end.
_BACK_OFF_PULLING = re.compile(r'^Back-off pulling image "([^"]*)"(?:: (?:ErrImagePull: )?)?')
_IMAGE_NOT_FOUND = re.compile(r"(?:: not found|code = NotFound desc = .*not found|manifest unknown)\s*$")
_PULL_DENIED = re.compile(r"pull access denied|authorization failed|insufficient_scope|401 Unauthorized|403 Forbidden|"
                          r"unauthorized: ")
# the node cannot talk to the registry (Go's net and TLS errors as containerd wraps them, a registry's 5xx, the
# runtime's RegistryUnavailable that the kubelet turns into "because the registry is unavailable", :387): the network's,
# the registry's or the node's trust store's, not the Job's; a name that does not resolve may be either's
_REGISTRY_UNREACHABLE = re.compile(r"i/o timeout|connection refused|connection reset by peer|no route to host|"
                                   r"network is unreachable|TLS handshake timeout|x509: |tls: failed to verify|"
                                   r"50[0234] [A-Z][a-z]|because the registry is unavailable")
_NO_SUCH_HOST = re.compile(r"lookup (\S+?)(?: on \S+)?: no such host")
PULL_SAID_LIMIT = 300


def image_pull_said(message: str) -> tuple[str, str, bool]:
    """``(what the runtime said, the next step, whether it is the platform's)`` for an ErrImagePull / ImagePullBackOff
    message: the kubelet's back-off prefix dropped, a long error cut in its middle so that its end (not found, access
    denied, a timeout) stays; the step is "" when the error does not say whose it is."""
    # the kubelet's back-off line carries the last pull error when it has one; alone, it is all there is to quote
    text = _BACK_OFF_PULLING.sub("", message.strip(), count=1) or message.strip()
    if len(text) > PULL_SAID_LIMIT:
        text = text[:110].rstrip() + " ... " + text[-(PULL_SAID_LIMIT - 115):].lstrip()
    if _IMAGE_NOT_FOUND.search(message):
        return text, ("The image or its tag does not exist in that registry: the owner fixes the image in the "
                      "Job."), False
    if _PULL_DENIED.search(message):
        return text, ("The registry refuses the pull: the owner gives the Pods credentials (imagePullSecrets, or their "
                      "ServiceAccount's) or fixes the repository name."), False
    host = _NO_SUCH_HOST.search(message)
    if host is not None:
        return text, (f"The node cannot resolve the registry host {host.group(1)}: the owner checks the registry "
                      "name in the image; if it is right, the cluster admin checks the nodes' DNS."), False
    if _REGISTRY_UNREACHABLE.search(message):
        return text, ("The node cannot reach the registry or trust it (network, proxy, firewall, the registry's TLS "
                      "certificate, or the registry is down): nothing in the Job is wrong. Cluster admin: from the "
                      "node, crictl pull the image; the kubelet retries on its own back-off."), True
    return text, "", False


# FailedMount texts (K pkg/volume/util/operationexecutor/operation_generator.go:483,554,608 "<op> failed for volume %q
# : <err>"; volume/csi/csi_client.go:160; kubelet.go:2204 the summary), by whose side they are on: what the Pod spec
# names and does not exist is the owner's; a storage driver or a mount that fails on the node is the platform's.
_OWNER_MOUNT = re.compile(r'(?:configmap|secret|persistentvolumeclaim) "[^"]+" not found|couldn\'t find key ')
_STORAGE_MOUNT = re.compile(r"MountVolume\.(?:MountDevice|WaitForAttach|MapPodDevice) failed|rpc error: |"
                            r"not found in the list of registered CSI drivers|mount failed: |MapVolume\.")
_UNMOUNTED = re.compile(r"unmounted volumes=\[([^\]]*)\]")
_OWNER_VOLUME_KINDS = frozenset({"configMap", "secret", "projected", "downwardAPI"})


def mount_failure_side(message: str, volumes: Iterable[Mapping[str, Any]]) -> str:
    """"owner" (a ConfigMap, Secret or claim the Pod names is missing), "storage" (the driver or the node fails to
    attach/mount a volume), or "" when the message does not tell. The kubelet's summary names only the volumes: a
    claim's or a CSI volume's is the storage side's (a bound Pod's claim exists), a ConfigMap's or Secret's the
    owner's."""
    if _OWNER_MOUNT.search(message):
        return "owner"
    if _STORAGE_MOUNT.search(message):
        return "storage"
    found = _UNMOUNTED.search(message)
    if found is None:
        return ""
    named = found.group(1).split()
    kinds = {next((k for k in m(v) if k != "name"), "") for v in volumes if s(m(v).get("name")) in named}
    if not kinds:
        return ""
    return "owner" if kinds <= _OWNER_VOLUME_KINDS else "storage"
