"""Prometheus metrics, computed from the current verdicts at scrape time (no per-tick churn).

Also the read model they come from: `Verdict` (what a metric needs of one diagnosis, kept by the loop
after each pass) and `Stats` (the operator's counters, also read by /healthz in service.py).
Timestamps, not ages: alerts compute `time() - x`. The Workload's namespace is the label
`workload_namespace`, so no scrape setting (honor_labels) can overwrite it with the target's namespace.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector, CollectorRegistry

from ..kube.objects import m, parse_time
from ..kube.packed import PackedObjects
from ..state import Key
from .team_labels import BoundedValues, parse_specs, raw_values

if TYPE_CHECKING:
    from .runtime import Runtime

WAITING_STAGES = ("Admission", "Scheduling", "Unknown")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What metrics need of one diagnosis."""

    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    stage: str
    reason: str
    action_by: str
    since: float | None  # unix seconds
    cause: str = ""
    limit_exceeded: bool = False  # status.pendingLimit.exceeded

    @classmethod
    def of(cls, diagnosis: Mapping[str, Any]) -> Verdict:
        """From an AdmissionDiagnosis as published (its `since` is the one written)."""
        st = diagnosis["status"]
        since = parse_time(st.get("since"))
        md = diagnosis["metadata"]
        return cls(md["namespace"], md["name"], st.get("localQueue") or "", st.get("clusterQueue") or "",
                   st["stage"], st["reason"], st["actionBy"], since.timestamp() if since else None,
                   st.get("cause") or "", bool((st.get("pendingLimit") or {}).get("exceeded")))


# Time in a reason runs from seconds (a Workload admitted at once) to days (a queue nobody fixes).
TIME_IN_REASON_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
                          28800.0, 86400.0, 172800.0, 604800.0)
# A verdict change reaches its AdmissionDiagnosis in tens of milliseconds on a quiet apiserver, seconds behind a
# burst of Kueue's, minutes when the apiserver takes fewer writes than the verdicts change.
WRITE_DELAY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Histograms:
    """Histograms with bounded labels (no Workload names), one per label tuple, observed as things happen and
    exported as they stand at scrape time."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.series: dict[tuple[str, ...], tuple[list[int], float]] = {}

    def observe(self, labels: tuple[str, ...], seconds: float) -> None:
        counts, total = self.series.get(labels, ([0] * (len(self.bounds) + 1), 0.0))
        index = next((n for n, bound in enumerate(self.bounds) if seconds <= bound), len(self.bounds))
        counts[index] += 1
        self.series[labels] = (counts, total + seconds)

    def family(self, name: str, documentation: str, labels: list[str]) -> HistogramMetricFamily:
        out = HistogramMetricFamily(name, documentation, labels=labels)
        for values, (counts, total) in sorted(self.series.items()):
            running, buckets = 0, []
            for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
                running += n
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
            out.add_metric(list(values), buckets, total)
        return out


class Stats:
    """Operational counters the metrics collector reads."""

    def __init__(self) -> None:
        self.passes = 0
        self.diagnosed = 0  # Workloads diagnosed, each once per pass that took it
        self.pass_seconds_sum = 0.0
        self.heartbeat = time.monotonic()  # the loop's last sign of life (liveness)
        self.crd_installed = True
        self.crd_current = True
        self.writes: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.last_pass: float | None = None  # unix time of the last successful pass
        self.kueue_installed = False
        self.access: dict[str, bool] = {}
        self.time_in_reason = Histograms(TIME_IN_REASON_BUCKETS)  # by (ClusterQueue, stage, reason)
        self.write_delay = Histograms(WRITE_DELAY_BUCKETS)  # no labels: one series per replica
        self.leader = True  # False on a standby replica (leader.py); True without leader election

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def written(self, result: str) -> None:
        """The publisher's callback after each write (applied, deleted, error)."""
        self.count(self.writes, result)
        self.heartbeat = time.monotonic()  # a long first pass of writes is alive, not stuck

    def delayed(self, seconds: float) -> None:
        """The publisher's callback when a verdict change's write lands: how long it waited."""
        self.write_delay.observe((), seconds)


class DiagnosisCollector(Collector):
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.specs = parse_specs(runtime.options.metric_labels)  # --metric-label-from: custom_<label> per queue
        self.custom = [s.metric_label for s in self.specs]
        self.bounded = BoundedValues(self.specs, runtime.options.metric_label_values)
        # each Workload's labels for the specs, with the stored form they were read from (PackedObjects.token):
        # a scrape decodes only the Workloads that changed since the last one
        self._labels: dict[Key, tuple[object, Mapping[str, Any]]] = {}

    def team_values(self, verdicts: list[Verdict]) -> dict[tuple[str, str], tuple[str, ...]]:
        """Each Workload's custom label values, read now from the Workload (or owner), LocalQueue, ClusterQueue
        the state holds, bounded to the capped set of values."""
        if not self.specs:
            return {}
        state = self.runtime.state
        raw = {}
        labels: dict[Key, tuple[object, Mapping[str, Any]]] = {}
        for v in verdicts:
            key = (v.namespace, v.name)
            first = self._workload_labels(key, labels) or state.owner_for_workload_name(key)
            raw[key] = raw_values(self.specs, [first, state.local_queues.get((v.namespace, v.local_queue)),
                                               state.cluster_queues.get(v.cluster_queue)])
        self._labels = labels  # only the Workloads still diagnosed
        self.bounded.refresh(raw.values())
        return {k: self.bounded.bounded(vals) for k, vals in raw.items()}

    def _workload_labels(self, key: Key, into: dict[Key, tuple[object, Mapping[str, Any]]]
                         ) -> Mapping[str, Any] | None:
        """The Workload as far as the specs read it (its labels), None when there is no Workload."""
        workloads = self.runtime.state.workloads
        if not isinstance(workloads, PackedObjects):
            return workloads.get(key)
        try:  # the loop may remove it meanwhile (a scrape runs in its own thread)
            token = workloads.token(key)
            kept = self._labels.get(key)
            if kept is None or kept[0] is not token:  # first seen, or changed since the last scrape
                wl_labels = m(m(workloads[key].get("metadata")).get("labels"))
                kept = (token, {"metadata": {"labels": {s.key: wl_labels[s.key] for s in self.specs
                                                        if s.key in wl_labels}}})
        except KeyError:
            return None
        into[key] = kept
        return kept[1]

    def collect(self) -> Iterator[Metric]:
        rt = self.runtime
        verdicts = list(rt.verdicts.values())
        team = self.team_values(verdicts)
        none: tuple[str, ...] = ()

        def custom(v: Verdict) -> tuple[str, ...]:
            return team.get((v.namespace, v.name), none)

        by_verdict = GaugeMetricFamily(
            "kueue_doctor_workloads",
            "Workloads per verdict: stage (Admission = Kueue has not admitted it; Scheduling = admitted, Pods not "
            "running), reason (see docs/verdicts.md) and ClusterQueue. Complete: every Workload is counted.",
            labels=["cluster_queue", "stage", "reason", *self.custom])
        for labels, n in sorted(Counter((v.cluster_queue, v.stage, v.reason, *custom(v)) for v in verdicts).items()):
            by_verdict.add_metric(list(labels), n)
        yield by_verdict

        blocked = GaugeMetricFamily(
            "kueue_doctor_queue_blocked_workloads",
            "One cause, named once: Workloads not Running or Finished per ClusterQueue, reason, cause and who must "
            "act, e.g. 37 Workloads of ClusterQueue ci QueueMisconfigured/ResourceNotCovered. `kueue-doctor explain "
            "--by-queue` names the object to fix. Complete, never capped.",
            labels=["cluster_queue", "reason", "cause", "action_by", *self.custom])
        for labels, n in sorted(Counter(
                (v.cluster_queue, v.reason, v.cause, v.action_by, *custom(v)) for v in verdicts
                if v.stage in WAITING_STAGES).items()):
            blocked.add_metric(list(labels), n)
        yield blocked

        spent = rt.stats.time_in_reason.family(
            "kueue_doctor_time_in_reason_seconds",
            "How long Workloads stayed in a reason before leaving it (admitted, scheduled, running, finished), per "
            "ClusterQueue, stage and reason: where the waiting time goes. Observed by this operator process when "
            "the verdict changes (a restart starts it anew). p95: histogram_quantile(0.95, sum by (le, reason) "
            "(rate(kueue_doctor_time_in_reason_seconds_bucket[1h]))).",
            ["cluster_queue", "stage", "reason"])
        yield spent

        over = GaugeMetricFamily(
            "kueue_doctor_pending_limit_exceeded_workloads",
            "Workloads waiting longer than the pending limit their owner, LocalQueue or ClusterQueue declares "
            "(annotation kueue-doctor.dev/max-pending), per namespace and queue. Complete. kubectl get adiag -n "
            "<namespace> -o yaml shows status.pendingLimit.",
            labels=["workload_namespace", "local_queue", "cluster_queue", *self.custom])
        for labels, n in sorted(Counter((v.namespace, v.local_queue, v.cluster_queue, *custom(v)) for v in verdicts
                                        if v.limit_exceeded and v.stage in WAITING_STAGES).items()):
            over.add_metric(list(labels), n)
        yield over

        oldest = GaugeMetricFamily(
            "kueue_doctor_oldest_waiting_since_timestamp_seconds",
            "Unix time since when the longest-waiting Workload of this LocalQueue, ClusterQueue and reason has been "
            "in that reason (Workloads not Running or Finished); action_by says who must act (ClusterAdmin, "
            "QueueAdmin, WorkloadOwner, Nobody). Alert on time() - this. Complete, never capped.",
            labels=["workload_namespace", "local_queue", "cluster_queue", "reason", "action_by", *self.custom])
        waiting = [v for v in verdicts if v.stage in WAITING_STAGES and v.since is not None]
        first: dict[tuple[str, ...], float] = {}
        for v in waiting:
            k = (v.namespace, v.local_queue, v.cluster_queue, v.reason, v.action_by, *custom(v))
            if v.since is not None and (k not in first or v.since < first[k]):
                first[k] = v.since
        for k, ts in sorted(first.items()):
            oldest.add_metric(list(k), ts)
        yield oldest

        per_wl = GaugeMetricFamily(
            "kueue_doctor_workload_waiting_since_timestamp_seconds",
            "Unix time since when this Workload has been in its current reason, for drill-down. Only the oldest "
            "--max-workload-series Workloads are exported; kueue_doctor_workload_series_dropped counts the rest.",
            labels=["workload_namespace", "workload", "local_queue", "cluster_queue", "reason", "action_by",
                    *self.custom])
        waiting.sort(key=lambda v: (v.since or 0.0, v.namespace, v.name))
        cap = max(rt.options.max_workload_series, 0)
        for v in waiting[:cap]:
            per_wl.add_metric([v.namespace, v.name, v.local_queue, v.cluster_queue, v.reason, v.action_by,
                               *custom(v)], v.since or 0.0)
        yield per_wl
        yield GaugeMetricFamily(
            "kueue_doctor_workload_series_dropped",
            "Waiting Workloads left out of kueue_doctor_workload_waiting_since_timestamp_seconds by the series cap "
            "(raise --max-workload-series to see them; the per-queue gauges stay complete).",
            value=max(len(waiting) - cap, 0))

        st = rt.stats
        yield CounterMetricFamily(
            "kueue_doctor_diagnosis_passes",
            "Diagnosis passes completed (one per burst of changes, and one full pass per resync interval).",
            value=st.passes)
        yield CounterMetricFamily(
            "kueue_doctor_diagnosis_workloads",
            "Workloads diagnosed by the passes, each counted once per pass that took it: the operator's work. Per "
            "second against Kueue's admissions it says how much re-diagnosing a change costs; a steady rise while "
            "nothing is admitted points at an object rewritten in a loop (compare kueue_doctor_watch_events_total "
            "by kind).",
            value=st.diagnosed)
        durations = SummaryMetricFamily(
            "kueue_doctor_diagnosis_pass_duration_seconds",
            "Time to diagnose the changed Workloads of one pass (engine only, writes excluded).",
            count_value=st.passes, sum_value=st.pass_seconds_sum)
        yield durations
        last = GaugeMetricFamily(
            "kueue_doctor_last_successful_pass_timestamp_seconds",
            "Unix time of the last completed diagnosis pass; if time() - this grows past the resync interval, "
            "the operator is stuck: read its logs.")
        if st.last_pass is not None:
            last.add_metric([], st.last_pass)
        yield last
        writes = CounterMetricFamily(
            "kueue_doctor_writes", "Writes to AdmissionDiagnosis objects by result (applied, deleted, error).",
            labels=["result"])
        for result, n in sorted(st.writes.items()):
            writes.add_metric([result], n)
        yield writes
        yield GaugeMetricFamily(
            "kueue_doctor_writes_pending",
            "AdmissionDiagnosis writes due and not yet accepted by the apiserver (queued or in flight). Growing for "
            "minutes: the apiserver takes fewer writes than the verdicts change (look at kueue_doctor_errors_total"
            "{kind=\"throttled\"} for 429s, and the apiserver's load); the metrics stay current, the objects lag.",
            value=rt.publisher.queued())
        yield st.write_delay.family(
            "kueue_doctor_write_delay_seconds",
            "How long a verdict change (a new diagnosis, a new stage, reason, cause or actor) waited from the pass "
            "that found it until the apiserver accepted its AdmissionDiagnosis write: how far kubectl get adiag lags "
            "the metrics, which are current. Numbers-only refreshes are not counted; a failed write counts from its "
            "retry. A p99 of minutes: the apiserver takes fewer writes than the verdicts change (see "
            "kueue_doctor_writes_pending, 429s in kueue_doctor_errors_total{kind=\"throttled\"}, the apiserver's "
            "CPU).", [])
        events = CounterMetricFamily("kueue_doctor_watch_events", "Watch events received, by kind.",
                                     labels=["kind"])
        for kind, n in sorted(st.events.items()):
            events.add_metric([kind], n)
        yield events
        errors = CounterMetricFamily("kueue_doctor_errors", "Errors by kind (failed passes, resyncs, API calls).",
                                     labels=["kind"])
        for kind, n in sorted(st.errors.items()):
            errors.add_metric([kind], n)
        yield errors
        yield GaugeMetricFamily(
            "kueue_doctor_kueue_crds_installed",
            "1 when Kueue's API (kueue.x-k8s.io) is served; 0 means Kueue is not installed and nothing is diagnosed.",
            value=1 if st.kueue_installed else 0)
        yield GaugeMetricFamily(
            "kueue_doctor_admissiondiagnosis_crd_installed",
            "1 when the AdmissionDiagnosis CRD is served; 0 means verdicts are computed (metrics work) but no "
            "AdmissionDiagnosis object is written: install crds/ or the Helm chart.",
            value=1 if st.crd_installed else 0)
        yield GaugeMetricFamily(
            "kueue_doctor_admissiondiagnosis_crd_current",
            "1 when the installed AdmissionDiagnosis CRD is the schema this operator writes against; 0 means it is "
            "older or newer: upgrade crds/ or the Helm chart (kubectl explain and printer columns may be stale).",
            value=1 if st.crd_current else 0)
        access = GaugeMetricFamily(
            "kueue_doctor_resource_access",
            "1 when RBAC lets the operator list and watch this kind, 0 when forbidden (verdicts then lack that "
            "detail, e.g. PodsNotVisible without Pods).", labels=["kind"])
        for kind, ok in sorted(st.access.items()):
            access.add_metric([kind], 1 if ok else 0)
        yield access


# The families computed from the verdicts. A standby exports them without samples, so that sums and alerts over
# two replicas count every Workload once (the leader's); its own health families it exports as usual.
VERDICT_FAMILIES = frozenset({
    "kueue_doctor_workloads", "kueue_doctor_queue_blocked_workloads", "kueue_doctor_time_in_reason_seconds",
    "kueue_doctor_pending_limit_exceeded_workloads", "kueue_doctor_oldest_waiting_since_timestamp_seconds",
    "kueue_doctor_workload_waiting_since_timestamp_seconds", "kueue_doctor_workload_series_dropped"})


class LeaderOnly(Collector):
    """The verdict families from the leader only, and `kueue_doctor_leader` saying which replica that is."""

    def __init__(self, inner: Collector, runtime: Runtime) -> None:
        self.inner, self.runtime = inner, runtime

    def collect(self) -> Iterator[Metric]:
        leader = self.runtime.stats.leader
        for family in self.inner.collect():
            if not leader and family.name in VERDICT_FAMILIES:
                family.samples = []
            yield family
        yield GaugeMetricFamily(
            "kueue_doctor_leader",
            "1 when this replica leads: it writes AdmissionDiagnosis objects and exports the verdict metrics. 0: a "
            "warm standby (watches and diagnoses in memory, writes nothing, exports no verdicts) that takes over "
            "when the leader's Lease expires. Exactly one replica should say 1: alert on sum(kueue_doctor_leader) "
            "!= 1 (none: nothing is written; read the replicas' logs for the Lease).",
            value=1 if leader else 0)
        shard = self.runtime.options.shard
        info = GaugeMetricFamily(
            "kueue_doctor_shard_info",
            "Always 1: the namespace shard this replica is (--shard-index of --total-shards; 0 of 1 when not sharded). "
            "It diagnoses, writes and exports only the Workloads of the namespaces whose FNV-1a hash falls in its "
            "range, so sums over all replicas count every Workload once; each shard has its own leader.",
            labels=["shard", "total"])
        info.add_metric([str(shard.index), str(shard.total)], 1)
        yield info


def registry_for(runtime: Runtime) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LeaderOnly(DiagnosisCollector(runtime), runtime))
    return registry
