"""Kueue's Configuration: which owners Kueue manages (apis/config/v1beta2 and v1beta1, the same fields).

Read from the ConfigMap Kueue's manager mounts (`kueue-manager-config`, key `controller_manager_config.yaml`)
or from a `Configuration` document in a dump. Defaults are Kueue's own (apis/config/*/defaults.go), so an
absent field means what it means to Kueue. What cannot be read is said (`problem`), never guessed silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from .objects import lst, m, name, namespace, parse_duration, s

CONFIG_GROUP = "config.kueue.x-k8s.io"
CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
DEFAULT_NAMESPACE = "kueue-system"
DEFAULT_FRAMEWORKS = ("batch/job",)
PODS_READY_TIMEOUT = 1800  # seconds: waitForPodsReady.timeout's default (waitForPodsReady is on by default, v0.19)
BACKOFF_BASE_SECONDS = 60  # waitForPodsReady.requeuingStrategy defaults (apis/config/v1beta2/defaults.go)
BACKOFF_MAX_SECONDS = 3600
DEPLOYMENT = "kueue-controller-manager"  # Kueue's manager; its --feature-gates flag overrides featureGates
# The feature gates the engine reads, with their defaults in Kueue v0.19.2 (pkg/features/kube_features.go).
GATE_DEFAULTS: Mapping[str, bool] = {
    "PriorityBoost": False,  # alpha: the kueue.x-k8s.io/priority-boost annotation counts only when on
    "QuotaCheckStrategy": True,  # beta in v0.19: resources.quotaCheckStrategy is read
    "MultiKueueIncrementalDispatcherConfig": True,  # multiKueue.incrementalDispatcherConfig.stepSize is read
    "MultiKueueIncrementalDispatcherRespectConfigOrder": True,  # workers nominated in MultiKueueConfig order
}
DISPATCHER_ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"  # multiKueue.dispatcherName's default
DISPATCHER_INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
INCREMENTAL_STEP = 3  # workloaddispatcher.DefaultStepSize
INCREMENTAL_ROUND = 300  # seconds: workloaddispatcher.incrementalDispatcherRoundTimeout


@dataclass(frozen=True)
class KueueConfig:
    """What the engine needs of Kueue's Configuration; `known` is False when it could not be read."""

    known: bool
    source: str  # where it was read: "ConfigMap kueue-system/kueue-manager-config", or why it was not
    ref: tuple[str, str, str | None] = ("Configuration", "", None)  # (kind, name, namespace) it was read from
    frameworks: frozenset[str] = frozenset(DEFAULT_FRAMEWORKS)
    external_frameworks: frozenset[str] = frozenset()
    manage_jobs_without_queue_name: bool = False
    namespace: str = DEFAULT_NAMESPACE
    managed_jobs_namespace_selector: Mapping[str, Any] | None = None
    # waitForPodsReady: seconds before Kueue evicts a Workload whose Pods are not ready (after the admission;
    # after losing readiness), None when turned off (v1beta1 `enable: false`)
    pods_ready_timeout: int | None = PODS_READY_TIMEOUT
    pods_ready_recovery_timeout: int | None = PODS_READY_TIMEOUT
    # waitForPodsReady.requeuingStrategy: requeues after a PodsReady timeout before Kueue deactivates the Workload
    # (None: unlimited, the default), and the back-off before each requeue
    requeue_limit: int | None = None
    backoff_base_seconds: int = BACKOFF_BASE_SECONDS
    backoff_max_seconds: int = BACKOFF_MAX_SECONDS  # 0: no cap
    problem: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    # featureGates of the Configuration, or the manager's --feature-gates flag (which then wins, as in Kueue)
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    gates_source: str = "Kueue v0.19 defaults"

    def retention(self, after: str) -> int | None:
        """Seconds of objectRetentionPolicies.workloads.<after> (afterFinished, afterDeactivatedByKueue); None when
        unset (Kueue deletes nothing), 0 for an immediate deletion."""
        value = m(m(self.raw.get("objectRetentionPolicies")).get("workloads")).get(after)
        text = s(value) or ""
        if re.fullmatch(r"0+(\.0*)?(ns|us|µs|ms|s|m|h)?", text.strip()):
            return 0
        return parse_duration(text)

    @property
    def ignores_undeclared(self) -> bool:
        """resources.quotaCheckStrategy IgnoreUndeclared (with its gate on): Kueue skips requests of resources a
        ClusterQueue does not cover instead of refusing the Workload."""
        strategy = s(m(self.raw.get("resources")).get("quotaCheckStrategy"))
        return strategy == "IgnoreUndeclared" and self.gate("QuotaCheckStrategy")

    @property
    def dispatcher(self) -> str:
        """multiKueue.dispatcherName: who nominates the worker clusters a Workload is copied to."""
        return s(m(self.raw.get("multiKueue")).get("dispatcherName")) or DISPATCHER_ALL_AT_ONCE

    @property
    def incremental_step(self) -> int:
        """How many more worker clusters the incremental dispatcher nominates per round."""
        step = m(m(self.raw.get("multiKueue")).get("incrementalDispatcherConfig")).get("stepSize")
        if self.gate("MultiKueueIncrementalDispatcherConfig") and isinstance(step, int) and step >= 1:
            return step
        return INCREMENTAL_STEP

    @property
    def requeues_at_eviction(self) -> bool:
        """waitForPodsReady.requeuingStrategy.timestamp Eviction (the default): a Workload evicted by its PodsReady
        timeout is queued at the eviction time, behind the others of its priority; Creation keeps its creation time,
        ahead of younger ones (pkg/workload Ordering.GetQueueOrderTimestamp)."""
        timestamp = s(m(m(self.raw.get("waitForPodsReady")).get("requeuingStrategy")).get("timestamp"))
        return timestamp != "Creation"

    def gate(self, gate: str) -> bool:
        """Whether Kueue runs with the feature gate on: as set, else its v0.19.2 default."""
        return self.feature_gates.get(gate, GATE_DEFAULTS.get(gate, False))

    def gate_text(self, gate: str) -> str:
        """"off (the default in Kueue v0.19)" or "on (featureGates of ConfigMap kueue-system/...)"."""
        state = "on" if self.gate(gate) else "off"
        return f"{state} ({self.gates_source})" if gate in self.feature_gates else \
            f"{state} (the default in Kueue v0.19)"

    def framework_enabled(self, framework: str) -> bool:
        return framework in self.frameworks or framework in self.external_frameworks

    def transformed_into(self, resource: str) -> list[tuple[str, str, str]]:
        """(input, strategy, amount per unit of input) of each of resources.transformations whose outputs include
        `resource`: Kueue counts such a resource for Workloads that never ask for it."""
        out = []
        for tr in lst(m(self.raw.get("resources")).get("transformations")):
            tr = m(tr)
            amount = m(tr.get("outputs")).get(resource)
            if amount is not None and s(tr.get("input")):
                out.append((s(tr.get("input")) or "", s(tr.get("strategy")) or "Retain", str(amount)))
        return out


    def requeue_backoff_seconds(self, count: int) -> int:
        """The back-off Kueue waits before the `count`-th requeue after a PodsReady timeout: base * 2^(count-1),
        capped at backoffMaxSeconds, uncapped when that is 0 (pkg/workload UpdateRequeueState, pkg/util/wait
        NewBackoff; its jitter adds at most 0.01%)."""
        if count < 1:
            return 0
        doubled: int = self.backoff_base_seconds << min(count - 1, 62)
        return min(doubled, self.backoff_max_seconds) if self.backoff_max_seconds > 0 else doubled


UNREAD = KueueConfig(known=False, source="not in the input")


def default_selector(kueue_namespace: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": ["kube-system", kueue_namespace]}]}


def from_configuration(doc: Mapping[str, Any], source: str,
                       ref: tuple[str, str, str | None] = ("Configuration", "", None)) -> KueueConfig:
    """A `Configuration` document (either API version) with Kueue's defaults applied."""
    ns = s(doc.get("namespace")) or DEFAULT_NAMESPACE
    integrations = m(doc.get("integrations"))
    frameworks = [f for f in lst(integrations.get("frameworks")) if isinstance(f, str)]
    external = [f for f in lst(integrations.get("externalFrameworks")) if isinstance(f, str)]
    selector = doc.get("managedJobsNamespaceSelector")
    ready = m(doc.get("waitForPodsReady"))
    timeout = None if ready.get("enable") is False else parse_duration(s(ready.get("timeout")) or "") or \
        PODS_READY_TIMEOUT
    recovery = parse_duration(s(ready.get("recoveryTimeout")) or "") or timeout if timeout is not None else None
    strategy = m(ready.get("requeuingStrategy"))
    gates = {k: v for k, v in m(doc.get("featureGates")).items() if isinstance(k, str) and isinstance(v, bool)}
    return KueueConfig(
        feature_gates=gates, gates_source=f"featureGates of {source.removeprefix('Configuration document ')}",
        known=True, source=source, pods_ready_timeout=timeout, pods_ready_recovery_timeout=recovery,
        requeue_limit=_count(strategy.get("backoffLimitCount")),
        # an explicit 0 stays (defaults.go: cmp.Or on the pointers): a base of 0 requeues at once, a max of 0 is no cap
        backoff_base_seconds=_or_default(_count(strategy.get("backoffBaseSeconds")), BACKOFF_BASE_SECONDS),
        backoff_max_seconds=_or_default(_count(strategy.get("backoffMaxSeconds")), BACKOFF_MAX_SECONDS),
        frameworks=frozenset(frameworks or DEFAULT_FRAMEWORKS),
        external_frameworks=frozenset(external),
        manage_jobs_without_queue_name=doc.get("manageJobsWithoutQueueName") is True,
        namespace=ns,
        managed_jobs_namespace_selector=m(selector) if isinstance(selector, Mapping) else default_selector(ns),
        raw=doc, ref=ref)


def _or_default(value: int | None, default: int) -> int:
    return default if value is None else value


def _count(value: object) -> int | None:
    """A non-negative int32 field; None when unset or not a number (Kueue's webhook rejects a negative one)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def from_config_map(cm: Mapping[str, Any]) -> KueueConfig:
    ns = namespace(cm)  # a hand-made ConfigMap may have none
    where = f"ConfigMap {ns + '/' if ns else ''}{name(cm)}"
    text = m(cm.get("data")).get(CONFIG_KEY)
    if not isinstance(text, str):
        return KueueConfig(known=False, source=where, problem=f"{where} has no key {CONFIG_KEY}")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return KueueConfig(known=False, source=where, problem=f"{where}: {CONFIG_KEY} is not YAML ({exc})")
    if not isinstance(doc, Mapping) or s(doc.get("kind")) != "Configuration":
        return KueueConfig(known=False, source=where, problem=f"{where}: {CONFIG_KEY} is not a Kueue Configuration")
    return from_configuration(doc, where, ("ConfigMap", name(cm) or CONFIG_MAP, namespace(cm)))


def with_deployment_flags(cfg: KueueConfig, deployment: Mapping[str, Any] | None) -> KueueConfig:
    """The manager's --feature-gates flag replaces the Configuration's featureGates (Kueue refuses both at once:
    config.LoadAndValidateFeatureGates)."""
    pod_spec = m(m(m(deployment or {}).get("spec")).get("template")).get("spec")
    for container in lst(m(pod_spec).get("containers")):
        for arg in lst(m(container).get("args")):
            flag = arg.partition("=")[2] if isinstance(arg, str) and arg.startswith("--feature-gates=") else None
            if flag is None:
                continue
            gates = {}
            for item in flag.split(","):
                key, _, value = item.strip().partition("=")
                if key and value.lower() in ("true", "false"):
                    gates[key] = value.lower() == "true"
            where = f"--feature-gates of Deployment {namespace(deployment or {})}/{DEPLOYMENT}"
            return replace(cfg, feature_gates=gates, gates_source=where)
    return cfg


def is_config_map(obj: Mapping[str, Any]) -> bool:
    return s(obj.get("kind")) == "ConfigMap" and name(obj) == CONFIG_MAP


def is_configuration(obj: Mapping[str, Any]) -> bool:
    return s(obj.get("kind")) == "Configuration" and str(obj.get("apiVersion", "")).startswith(CONFIG_GROUP + "/")
