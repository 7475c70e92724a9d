"""The publisher's decisions: write what changed, when it should, and keep `since`."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from kueue_doctor.live import publisher
from kueue_doctor.live.publisher import decide, record_of, records_of, unsure, with_since
from kueue_doctor.live.publisher import digest as real_digest


def diag(reason: str = "WaitingForQuota", message: str = "Needs 1 more cpu", since: str = "2026-11-30T09:00:00Z",
         stage: str = "Admission") -> dict[str, Any]:
    return {"apiVersion": "kueue-doctor.dev/v1alpha1", "kind": "AdmissionDiagnosis",
            "metadata": {"name": "w", "namespace": "ns", "labels": {"kueue-doctor.dev/reason": reason},
                         "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "w",
                                              "uid": "u"}]},
            "spec": {"workloadRef": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "w",
                                     "uid": "u"}},
            "status": {"stage": stage, "reason": reason, "actionBy": "Nobody", "message": message, "since": since}}


def test_new_diagnosis_is_written_identical_content_never() -> None:
    assert decide(None, diag(), now=0.0, refresh=60).write
    prev = record_of(diag(), written_at=0.0)
    assert not decide(prev, diag(), now=1000.0, refresh=60).write


def test_an_unchanged_diagnosis_is_recognised_without_its_digest_and_an_edit_is_never_hidden(
        monkeypatch: Any) -> None:
    """Every pass re-diagnoses thousands of waiting Workloads whose diagnosis did not change; hashing each one's
    sorted JSON to learn that cost as much as a fifth of the engine's time in Kueue's perf scenario."""
    digests = []
    monkeypatch.setattr(publisher, "digest", lambda obj: digests.append(1) or real_digest(obj))
    prev = record_of(diag(), written_at=0.0)  # found in the cluster: in the apiserver's key order, not ours
    assert not decide(prev, diag(), now=1000.0, refresh=60).write and len(digests) == 2  # compared by digest once
    assert not decide(prev, diag(), now=1001.0, refresh=60).write and len(digests) == 2  # then by fingerprint
    assert decide(prev, diag(reason="ExceedsMaxQuota"), now=1002.0, refresh=60).write
    edited = unsure(prev)  # someone edited the stored object: the same body of ours must be written again
    assert decide(edited, diag(), now=1003.0, refresh=60).write


def test_a_changed_diagnosis_is_digested_once_for_its_decision_and_its_write(monkeypatch: Any) -> None:
    digests = []
    monkeypatch.setattr(publisher, "digest", lambda obj: digests.append(1) or real_digest(obj))
    pub = publisher.Publisher(None)
    pub.records[("ns", "w")] = record_of(diag(), written_at=0.0)
    digests.clear()
    changed = diag(reason="ExceedsMaxQuota")
    (write,) = pub.prepare([changed], datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    assert len(digests) == 1
    assert write.body.record.digest == real_digest(changed)


def test_verdict_change_is_written_at_once_but_numbers_only_once_per_refresh_interval() -> None:
    prev = record_of(diag(), written_at=100.0)
    assert decide(prev, diag(reason="ExceedsMaxQuota"), now=101.0, refresh=60).write
    minor = decide(prev, diag(message="Needs 2 more cpu"), now=101.0, refresh=60)
    assert not minor.write and minor.due == 160.0
    assert decide(prev, diag(message="Needs 2 more cpu"), now=161.0, refresh=60).write


def test_the_cluster_queue_a_diagnosis_names_is_written_at_once_when_it_appears_or_moves() -> None:
    """A Workload seen before its LocalQueue has no ClusterQueue yet; users select diagnoses by it (labels,
    `kubectl get -l`), so naming it must not wait for the refresh interval."""
    prev = record_of(diag(), written_at=100.0)
    queued = diag()
    queued["status"]["clusterQueue"] = "cq-a"
    assert decide(prev, queued, now=101.0, refresh=60).write
    moved = copy.deepcopy(queued)
    moved["status"]["clusterQueue"] = "cq-b"
    assert decide(record_of(queued, written_at=101.0), moved, now=102.0, refresh=60).write


def test_objects_found_at_start_up_are_not_rewritten_when_unchanged() -> None:
    existing = record_of(diag(), written_at=None)
    assert not decide(existing, diag(), now=5.0, refresh=60).write


def test_since_is_kept_while_the_reason_holds_and_moves_when_it_changes() -> None:
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    prev = record_of(diag(since="2026-11-30T08:00:00Z"), written_at=0.0)
    same = with_since(copy.deepcopy(diag(since="2026-11-30T09:30:00Z")), prev, observed)
    assert same["status"]["since"] == "2026-11-30T08:00:00Z"
    # a new reason with an older Kueue timestamp (the condition did not flip): now is when it changed
    changed = with_since(diag(reason="ExceedsMaxQuota", since="2026-11-30T07:00:00Z"), prev, observed)
    assert changed["status"]["since"] == "2026-11-30T10:00:00Z"
    # a new reason with a newer Kueue timestamp (e.g. Evicted just now): Kueue's time is more exact
    evicted = with_since(diag(reason="Preempted", since="2026-11-30T09:59:30Z"), prev, observed)
    assert evicted["status"]["since"] == "2026-11-30T09:59:30Z"


def test_numbers_only_refreshes_share_a_budget_and_never_hold_back_a_verdict_change() -> None:
    """Each admission changes the usage numbers of every waiting Workload: 100 refreshes due at once go out
    at the budget's pace, while a verdict change among them is written at once."""
    from kueue_doctor.live.publisher import Publisher

    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    def named(n: int, **kw: Any) -> dict[str, Any]:
        d = diag(**kw)
        d["metadata"]["name"] = f"w{n}"
        return d

    pub = Publisher(api=None, refresh_interval=60, refresh_writes_per_second=10)
    pub.seed(records_of([[named(n) for n in range(100)]]))  # found at start-up: written_at unknown, due for a refresh
    changed = [named(n, message="Needs 2 more cpu") for n in range(99)] + [named(99, reason="ExceedsMaxQuota")]
    first = pub.prepare(changed, observed)
    names = [w.key[1] for w in first]
    assert "w99" in names and len(first) <= 11  # the verdict change, and one second's budget of refreshes
    assert len(pub.deferred) == 100 - len(first)
    assert pub.next_due() is not None


def _named(name: str, reason: str) -> dict[str, Any]:
    d = diag(reason=reason)
    d["metadata"]["name"] = name
    return d


def _slow_apiserver(monkeypatch: Any) -> tuple[list[tuple[str, str]], Any]:
    """rest.apply held at a gate (a throttled or slow apiserver); the (name, reason) of each write in order."""
    import threading

    from kueue_doctor.live import rest

    gate, applied, inside, lock = threading.Event(), [], [], threading.Lock()

    def apply(api: Any, path: str, body: bytes) -> None:
        obj = json.loads(body)  # the publisher sends each diagnosis as the JSON it prepared
        name = obj["metadata"]["name"]
        with lock:
            assert name not in inside, f"two writes of {name} in flight at once: the older may land last"
            inside.append(name)
        gate.wait(timeout=10)
        with lock:
            inside.remove(name)
            applied.append((name, obj["status"]["reason"]))

    monkeypatch.setattr(rest, "apply", apply)
    return applied, gate


def test_writes_stream_and_a_diagnosis_that_changes_while_it_waits_is_written_once_with_its_newest_content(
        monkeypatch: Any) -> None:
    """A pass hands its writes over and goes on; while the apiserver is slow, a Workload whose verdict moves again
    is written once, in its first place in line, and one in flight is written again only after it lands."""
    import asyncio

    from kueue_doctor.live.publisher import Publisher

    applied, gate = _slow_apiserver(monkeypatch)
    pub = Publisher(None, concurrency=2, writes_per_second=0)
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    async def scenario() -> None:
        pub.submit(pub.prepare([_named("w1", "NotYetEvaluated")], observed))
        await asyncio.sleep(0.05)  # w1 is in flight, held at the gate; the second writer is idle
        pub.submit(pub.prepare([_named("w1", "WaitingForQuota")], observed))  # must wait for the first to land
        pub.submit(pub.prepare([_named("w2", "NotYetEvaluated"), _named("w3", "NotYetEvaluated")], observed))
        pub.submit(pub.prepare([_named("w3", "WaitingForQuota")], observed))  # replaces its queued body
        await asyncio.sleep(0.05)
        assert pub.queued() == 4  # w1 and w2 in flight; w1 (again) and w3 (newest body) queued
        gate.set()
        await pub.flush()
        await pub.close()

    asyncio.run(scenario())
    assert sorted(applied) == [("w1", "NotYetEvaluated"), ("w1", "WaitingForQuota"), ("w2", "NotYetEvaluated"),
                               ("w3", "WaitingForQuota")]
    assert applied.index(("w1", "NotYetEvaluated")) < applied.index(("w1", "WaitingForQuota"))
    assert pub.records[("ns", "w1")].verdict[1] == pub.records[("ns", "w3")].verdict[1] == "WaitingForQuota"


def test_a_queued_write_is_withdrawn_when_the_verdict_returns_to_what_the_cluster_holds(monkeypatch: Any) -> None:
    import asyncio

    from kueue_doctor.live.publisher import Publisher

    applied, gate = _slow_apiserver(monkeypatch)
    pub = Publisher(None, concurrency=1, writes_per_second=0)
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    pub.seed(records_of([[_named("w1", "WaitingForQuota")]]))

    async def scenario() -> None:
        pub.submit(pub.prepare([_named("w0", "NotYetEvaluated")], observed))
        await asyncio.sleep(0.05)  # w0 in flight
        pub.submit(pub.prepare([_named("w1", "ExceedsMaxQuota")], observed))  # queued behind it
        pub.submit(pub.prepare([_named("w1", "WaitingForQuota")], observed))  # back to what is stored
        assert pub.queued() == 1
        gate.set()
        await pub.flush()
        await pub.close()

    asyncio.run(scenario())
    assert applied == [("w0", "NotYetEvaluated")]


def test_a_verdict_change_is_written_before_numbers_only_refreshes_queued_earlier(monkeypatch: Any) -> None:
    """When the apiserver is the slower side, refreshes of waiting Workloads' numbers (every admission changes
    them) must not hold back the Workload that was just admitted."""
    import asyncio

    from kueue_doctor.live.publisher import Publisher

    applied, gate = _slow_apiserver(monkeypatch)
    pub = Publisher(None, refresh_interval=0, concurrency=1, writes_per_second=0)
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    pub.seed(records_of([[_named("w1", "WaitingForQuota"), _named("w2", "WaitingForQuota")]]))

    def numbers(name: str) -> dict[str, Any]:
        d = _named(name, "WaitingForQuota")
        d["status"]["message"] = "Needs 3 more cpu"
        return d

    async def scenario() -> None:
        pub.submit(pub.prepare([_named("w0", "NotYetEvaluated")], observed))
        await asyncio.sleep(0.05)  # w0 in flight
        pub.submit(pub.prepare([numbers("w1")], observed))
        pub.submit(pub.prepare([_named("w2", "Running")], observed))
        gate.set()
        await pub.flush()
        await pub.close()

    asyncio.run(scenario())
    assert applied == [("w0", "NotYetEvaluated"), ("w2", "Running"), ("w1", "WaitingForQuota")]


def test_the_late_echo_of_an_overwritten_write_is_ours_not_an_edit(monkeypatch: Any) -> None:
    """Kopf hands a watch event over a batch window (0.1 s) late, so the echo of one write can arrive after the
    next write of the same diagnosis has landed. Taken for someone's edit, it made the next pass write again
    what the cluster already held (a write with no new version, seen in the failover e2e test). A real edit,
    with a version none of our writes got, is still rewritten."""
    import asyncio

    from kueue_doctor.live import rest
    from kueue_doctor.live.publisher import Publisher

    versions: list[dict[str, Any]] = []

    def apply(api: Any, path: str, body: bytes) -> dict[str, Any]:
        stored: dict[str, Any] = json.loads(body)
        stored["metadata"]["resourceVersion"] = str(100 + len(versions))
        versions.append(stored)
        return stored

    monkeypatch.setattr(rest, "apply", apply)
    pub = Publisher(None, writes_per_second=0)
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    async def write(reason: str) -> None:
        pub.submit(pub.prepare([_named("w1", reason)], observed))
        await pub.flush()

    async def scenario() -> None:
        await write("ExceedsMaxQuota")
        await write("WaitingForQuota")
        assert not pub.observed(versions[0])  # the first write's echo, after the second landed
        assert pub.prepare([_named("w1", "WaitingForQuota")], observed) == []
        assert not pub.observed(versions[1])
        edited = copy.deepcopy(versions[1])
        edited["metadata"]["resourceVersion"] = "200"
        edited["status"]["reason"] = "Running"
        assert pub.observed(edited)
        assert [w.key for w in pub.prepare([_named("w1", "WaitingForQuota")], observed)] == [("ns", "w1")]
        await pub.close()

    asyncio.run(scenario())


def test_a_closed_publisher_writes_again_when_given_work(monkeypatch: Any) -> None:
    """The loop closes the publisher when it stops; a loop started again (a test, a restarted task) must not find
    its writes refused by the shut-down thread pool of the writers."""
    import asyncio

    from kueue_doctor.live.publisher import Publisher

    applied, gate = _slow_apiserver(monkeypatch)
    gate.set()
    pub = Publisher(None, concurrency=2, writes_per_second=0)
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

    async def scenario() -> None:
        pub.submit(pub.prepare([_named("w1", "NotYetEvaluated")], observed))
        await pub.flush()
        await pub.close()
        pub.submit(pub.prepare([_named("w2", "NotYetEvaluated")], observed))
        await pub.flush()
        await pub.close()

    asyncio.run(scenario())
    assert applied == [("w1", "NotYetEvaluated"), ("w2", "NotYetEvaluated")]


def test_a_verdict_change_reports_how_long_it_waited_since_first_found_even_when_its_body_was_replaced(
        monkeypatch: Any) -> None:
    """kueue_doctor_write_delay_seconds: a Workload whose verdict moved again while its write waited is written once,
    and the delay it reports runs from the first change the cluster did not show yet, not from the replacement;
    a numbers-only refresh reports nothing."""
    import asyncio

    from kueue_doctor.live.publisher import Publisher

    applied, gate = _slow_apiserver(monkeypatch)
    delays: dict[str, float] = {}
    pub = Publisher(None, refresh_interval=0, concurrency=1, writes_per_second=0,
                    on_delay=lambda seconds: delays.setdefault(f"w{len(delays) + 1}", seconds))
    observed = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
    pub.seed(records_of([[_named("w9", "WaitingForQuota")]]))
    numbers = _named("w9", "WaitingForQuota")
    numbers["status"]["message"] = "Needs 3 more cpu"

    async def scenario() -> None:
        pub.submit(pub.prepare([_named("w1", "NotYetEvaluated")], observed))
        await asyncio.sleep(0.05)  # w1 in flight, held at the gate
        pub.submit(pub.prepare([_named("w2", "NotYetEvaluated"), numbers], observed))  # queued behind it
        await asyncio.sleep(0.3)
        pub.submit(pub.prepare([_named("w2", "WaitingForQuota")], observed))  # replaces w2's queued body
        gate.set()
        await pub.flush()
        await pub.close()

    asyncio.run(scenario())
    assert applied == [("w1", "NotYetEvaluated"), ("w2", "WaitingForQuota"), ("w9", "WaitingForQuota")]
    assert set(delays) == {"w1", "w2"}  # the two verdict changes, in the order they landed; w9 only refreshed
    assert delays["w1"] >= 0.3 and delays["w2"] >= 0.25  # w2 counted from its first body, found 0.3 s before
