"""Metrics come from the current verdicts at scrape time: complete per queue, capped per Workload."""

from __future__ import annotations

from prometheus_client import generate_latest

from kueue_doctor.live.metrics import Verdict, registry_for
from kueue_doctor.live.runtime import Options, Runtime


def scrape(verdicts: list[Verdict], cap: int = 2000) -> list[str]:
    rt = Runtime(api=None, options=Options(max_workload_series=cap))
    rt.verdicts.update({(v.namespace, v.name): v for v in verdicts})
    return generate_latest(registry_for(rt)).decode().splitlines()


def v(name: str, reason: str, since: float, stage: str = "Admission", lq: str = "main", action: str = "Nobody"
      ) -> Verdict:
    return Verdict("team-a", name, lq, "cq-a", stage, reason, action, since)


def test_oldest_waiting_is_the_minimum_since_per_queue_reason_and_action_and_ignores_running() -> None:
    lines = scrape([v("a", "WaitingForQuota", 100.0), v("b", "WaitingForQuota", 50.0),
                    v("c", "Running", 10.0, stage="Running"), v("d", "QueueMisconfigured", 70.0, action="ClusterAdmin")])
    oldest = [ln for ln in lines if ln.startswith("kueue_doctor_oldest_waiting_since_timestamp_seconds{")]
    assert ('kueue_doctor_oldest_waiting_since_timestamp_seconds{action_by="Nobody",cluster_queue="cq-a",'
            'local_queue="main",reason="WaitingForQuota",workload_namespace="team-a"} 50.0') in oldest
    assert len(oldest) == 2  # Running is not waiting
    assert 'kueue_doctor_workloads{cluster_queue="cq-a",reason="WaitingForQuota",stage="Admission"} 2.0' in lines


def test_per_workload_series_are_capped_oldest_first_and_the_rest_is_counted() -> None:
    lines = scrape([v(f"w{i}", "WaitingForQuota", float(1000 - i)) for i in range(5)], cap=2)
    per = [ln for ln in lines if ln.startswith("kueue_doctor_workload_waiting_since_timestamp_seconds{")]
    assert [ln.split('workload="')[1].split('"')[0] for ln in per] == ["w4", "w3"]
    assert "kueue_doctor_workload_series_dropped 3.0" in lines


def test_every_metric_has_help_text_for_someone_who_never_read_the_code() -> None:
    lines = scrape([v("a", "WaitingForQuota", 1.0)])
    helps = [ln for ln in lines if ln.startswith("# HELP ")]
    assert helps and all(len(ln.split(" ", 3)[3]) > 30 for ln in helps)


def test_one_cause_is_counted_once_per_cluster_queue_with_the_workloads_it_blocks() -> None:
    def blocked(name: str, cq: str, cause: str, stage: str = "Admission") -> Verdict:
        return Verdict("team-a", name, "main", cq, stage, "QueueMisconfigured" if stage != "Running" else "Running",
                       "ClusterAdmin", 1.0, cause)
    lines = scrape([*(blocked(f"ci-{i}", "ci", "ResourceNotCovered") for i in range(37)),
                    blocked("gpu-0", "gpu", "FlavorNotFound"), blocked("ok", "ci", "PodsRunning", stage="Running")])
    got = [ln for ln in lines if ln.startswith("kueue_doctor_queue_blocked_workloads{")]
    assert got == [
        'kueue_doctor_queue_blocked_workloads{action_by="ClusterAdmin",cause="ResourceNotCovered",cluster_queue="ci",'
        'reason="QueueMisconfigured"} 37.0',
        'kueue_doctor_queue_blocked_workloads{action_by="ClusterAdmin",cause="FlavorNotFound",cluster_queue="gpu",'
        'reason="QueueMisconfigured"} 1.0']  # a running Workload blocks nothing


def test_time_in_reason_is_observed_when_a_workload_leaves_its_reason() -> None:
    import asyncio

    from tests.builders import condition

    from .scenario import objects, started, waiting

    rt, _api = started(objects())
    asyncio.run(rt.loop.run_once())  # first sight: nothing left yet
    assert rt.stats.time_in_reason.series == {}
    admitted = waiting().conditions(
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a"),
        condition("Admitted", "True", "Admitted", "The workload is admitted"),
        condition("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")
    ).resource_version("101").obj()
    rt.inbox.observe("MODIFIED", admitted)
    asyncio.run(rt.loop.run_once())
    ((labels, (counts, total)),) = rt.stats.time_in_reason.series.items()
    assert labels == ("cq-a", "Admission", "WaitingForQuota") and sum(counts) == 1 and total > 0
    text = generate_latest(registry_for(rt)).decode()
    assert ('kueue_doctor_time_in_reason_seconds_count{cluster_queue="cq-a",reason="WaitingForQuota",'
            'stage="Admission"} 1.0') in text
    assert 'kueue_doctor_time_in_reason_seconds_bucket{cluster_queue="cq-a",le="+Inf"' in text


def test_write_delay_counts_each_verdict_change_written_and_no_numbers_only_refresh() -> None:
    """kueue_doctor_write_delay_seconds: one observation per verdict change that reached its AdmissionDiagnosis
    (the first sight of each Workload, then the admission), none for a change of numbers only."""
    import asyncio

    from tests.builders import condition

    from .scenario import PENDING, objects, started, waiting

    def count(rt: Runtime) -> float:
        line = next(x for x in generate_latest(registry_for(rt)).decode().splitlines()
                    if x.startswith("kueue_doctor_write_delay_seconds_count"))
        return float(line.split()[-1])

    rt, _api = started(objects())
    asyncio.run(rt.loop.run_once())
    assert count(rt) == 2  # both Workloads' first diagnoses
    rt.inbox.observe("MODIFIED", waiting(PENDING.replace("1 more needed", "2 more needed"))
                     .resource_version("101").obj())
    asyncio.run(rt.loop.run_once())
    assert rt.stats.writes.get("applied", 0) == 2 and count(rt) == 2  # numbers only: deferred, not a verdict change
    admitted = waiting().conditions(
        condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a"),
        condition("Admitted", "True", "Admitted", "The workload is admitted")).resource_version("102").obj()
    rt.inbox.observe("MODIFIED", admitted)
    asyncio.run(rt.loop.run_once())
    assert count(rt) == 3
    ((counts, total),) = rt.stats.write_delay.series.values()
    assert sum(counts) == 3 and total >= 0
