"""Tests of kueue_doctor.engine.messages against the exact texts Kueue writes.

The corpus tests/cases/kueue_messages.yaml holds every text with its origin in the Kueue repository;
each entry is checked by `test_corpus_entry`, and `test_corpus_covers_every_template_and_failure_kind`
keeps the corpus complete when a member is added to `Template` or `FailureKind`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "operator") not in sys.path:
    sys.path.insert(0, str(ROOT / "operator"))

from kueue_doctor.engine.messages import (  # noqa: E402
    FailureKind,
    FlavorAttempt,
    FlavorFailure,
    ParsedMessage,
    Template,
    parse_cluster_queue_inactive,
    parse_flavors_considered,
    parse_preempted_workload_event,
    parse_workload_message,
    split_name_list,
)

CORPUS_PATH = ROOT / "tests" / "cases" / "kueue_messages.yaml"
CORPUS: list[dict[str, Any]] = yaml.safe_load(CORPUS_PATH.read_text(encoding="utf-8"))


def kueue_truncate(message: str, limit: int) -> str:
    """pkg/util/api/api.go truncateMessage: byte limit, suffix " ..."."""
    raw = message.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return message
    return raw[: limit - 4].decode("utf-8", "ignore") + " ..."


# ------------------------------------------------------------------------------------------------
# corpus
# ------------------------------------------------------------------------------------------------


def _norm(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_norm(x) for x in v]
    return v


def _check_fields(obj: Any, expect: Mapping[str, Any], where: str) -> None:
    for key, want in expect.items():
        if key == "reasons":
            _check_failures(obj.reasons, want, f"{where}.reasons")
            continue
        got = getattr(obj, key)
        assert _norm(got) == _norm(want), f"{where}.{key}: got {got!r}, want {want!r}"


def _check_failures(got: tuple[FlavorFailure, ...], want: list[dict[str, Any]], where: str) -> None:
    assert len(got) == len(want), f"{where}: got {len(got)} failures {got!r}, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _check_fields(g, w, f"{where}[{i}]")


def _check_parsed(p: ParsedMessage, expect: Mapping[str, Any], where: str = "parsed") -> None:
    for key, want in expect.items():
        if key == "template":
            assert p.template == want, f"{where}.template: got {p.template!r}, want {want!r}"
        elif key == "names":
            assert dict(p.names) == want, f"{where}.names: got {dict(p.names)!r}, want {want!r}"
        elif key == "failures":
            _check_failures(p.failures, want, f"{where}.failures")
        elif key == "failures_count":
            assert len(p.failures) == want, f"{where}: {len(p.failures)} failures, want {want}"
        elif key == "last_failure":
            assert p.failures, f"{where}: no failures"
            _check_fields(p.failures[-1], want, f"{where}.failures[-1]")
        elif key == "preemption":
            assert p.preemption is not None, f"{where}.preemption is None"
            _check_fields(p.preemption, want, f"{where}.preemption")
        elif key == "inner":
            assert p.inner is not None, f"{where}.inner is None"
            _check_parsed(p.inner, want, f"{where}.inner")
        elif key == "flavors_considered":
            _check_attempts(p.flavors_considered, want, f"{where}.flavors_considered")
        else:
            got = getattr(p, key)
            assert _norm(got) == _norm(want), f"{where}.{key}: got {got!r}, want {want!r}"


def _check_attempts(got: tuple[FlavorAttempt, ...], want: list[dict[str, Any]], where: str) -> None:
    assert len(got) == len(want), f"{where}: got {got!r}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        _check_fields(g, w, f"{where}[{i}]")


@pytest.mark.parametrize("entry", CORPUS, ids=[e["id"] for e in CORPUS])
def test_corpus_entry(entry: dict[str, Any]) -> None:
    assert entry.get("source") and entry.get("ref") and entry.get("appears_in"), "every entry cites its origin"
    text = entry["text"]
    if entry.get("truncate_to"):
        text = kueue_truncate(text, int(entry["truncate_to"]))
        assert text != entry["text"], "truncate_to must actually cut the text"
    function = entry.get("function", "parse_workload_message")
    expect = entry["expect"]
    if function == "parse_workload_message":
        p = parse_workload_message(text)
        assert p.text == text
        _check_parsed(p, expect)
    elif function == "parse_cluster_queue_inactive":
        assert _norm(parse_cluster_queue_inactive(text)) == expect
    elif function == "parse_flavors_considered":
        _check_attempts(parse_flavors_considered(text), expect, "flavors_considered")
    elif function == "parse_preempted_workload_event":
        ev = parse_preempted_workload_event(text)
        assert ev is not None
        _check_fields(ev, expect, "event")
    else:  # pragma: no cover - corpus typo
        pytest.fail(f"unknown function {function}")


def _walk_expect(expect: Any) -> Iterator[tuple[str, str]]:
    if isinstance(expect, dict):
        for key, value in expect.items():
            if key == "template":
                yield "template", value
            elif key == "kind":
                yield "kind", value
            else:
                yield from _walk_expect(value)
    elif isinstance(expect, list):
        for item in expect:
            yield from _walk_expect(item)


def test_corpus_covers_every_template_and_failure_kind() -> None:
    seen: set[tuple[str, str]] = set()
    for entry in CORPUS:
        if entry.get("function", "parse_workload_message") == "parse_cluster_queue_inactive":
            continue
        seen.update(_walk_expect(entry["expect"]))
    missing_t = [t.value for t in Template if ("template", t.value) not in seen]
    missing_k = [k.value for k in FailureKind if ("kind", k.value) not in seen]
    assert not missing_t, f"templates without a corpus entry: {missing_t}"
    assert not missing_k, f"failure kinds without a corpus entry: {missing_k}"


def test_corpus_has_a_text_for_every_flavor_reason_pattern() -> None:
    """Each row of the reason table (a regex and the builder that reads its groups) meets a real text: a row
    no corpus text reaches could build nothing but an error (the stale-domain row read a group it lacked)."""
    from kueue_doctor.engine.messages.flavors import _REASON_TABLE

    texts = [e["text"] for e in CORPUS if isinstance(e.get("text"), str)]
    unmatched = [rx.pattern[:80] for _first, rx, _build in _REASON_TABLE if not any(rx.search(x) for x in texts)]
    assert not unmatched, f"reason patterns without a corpus text: {unmatched}"


def test_corpus_covers_every_cluster_queue_inactive_cause() -> None:
    causes = {
        cause
        for e in CORPUS
        if e.get("function") == "parse_cluster_queue_inactive"
        for cause, _ in e["expect"]
    }
    assert causes == {
        "FlavorNotFound", "AdmissionCheckNotFound", "AdmissionCheckInactive", "Stopped", "Terminating",
        "TopologyNotFound", "MultipleMultiKueueAdmissionChecks", "MultiKueueAdmissionCheckAppliedPerFlavor",
        "MultiKueueWithProvisioningRequest", "Unknown",
    }


def test_corpus_ids_are_unique() -> None:
    ids = [e["id"] for e in CORPUS]
    assert len(ids) == len(set(ids))


# ------------------------------------------------------------------------------------------------
# flavor assignment: one test per reason template
# ------------------------------------------------------------------------------------------------


def only(p: ParsedMessage) -> FlavorFailure:
    assert p.template is Template.FLAVOR_ASSIGNMENT, p
    assert len(p.failures) == 1, p.failures
    return p.failures[0]


def test_insufficient_unused_quota_names_resource_flavor_and_missing_amount() -> None:
    # pkg/scheduler/scheduler_test.go:1633 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"))
    assert (f.kind, f.podset, f.resource, f.flavor, f.missing) == (
        FailureKind.INSUFFICIENT_UNUSED_QUOTA, "main", "cpu", "default", "1")
    assert f.text == "insufficient unused quota for cpu in flavor default, 1 more needed"


def test_exceeds_maximum_capacity_keeps_previous_request_and_maximum_raw() -> None:
    # pkg/scheduler/scheduler_test.go:6683 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set ps2: insufficient quota for cpu in flavor default, previously considered "
        "podsets requests (1k) + current podset request (9223372036854775) > maximum capacity (10k)"))
    assert (f.kind, f.podset, f.previous, f.requested, f.maximum) == (
        FailureKind.EXCEEDS_MAXIMUM_CAPACITY, "ps2", "1k", "9223372036854775", "10k")


def test_exceeds_maximum_capacity_old_template_before_v0_14_2() -> None:
    # pkg/scheduler/flavorassigner/flavorassigner_test.go:438 @ v0.14.0
    f = only(parse_workload_message("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
                                    "one, request > maximum capacity (5 > 4)"))
    assert (f.kind, f.resource, f.flavor, f.requested, f.maximum, f.previous) == (
        FailureKind.EXCEEDS_MAXIMUM_CAPACITY, "cpu", "one", "5", "4", None)


def test_untolerated_taint_is_rebuilt_as_key_value_effect() -> None:
    # pkg/scheduler/flavorassigner/flavorassigner_test.go:942 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set main: untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"))
    assert (f.kind, f.taint, f.flavor) == (FailureKind.UNTOLERATED_TAINT, "instance=spot:NoSchedule", "tainted")


def test_untolerated_taint_without_value_uses_taint_to_string_form() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set main: untolerated taint {dedicated  NoExecute <nil>} in flavor gpu"))
    assert f.taint == "dedicated:NoExecute"


def test_resource_unavailable_in_cluster_queue_is_resource_not_covered() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue"))
    assert (f.kind, f.resource) == (FailureKind.RESOURCE_NOT_COVERED, "example.com/gpu")


def test_missing_resource_flavor_is_flavor_not_found() -> None:
    f = only(parse_workload_message("couldn't assign flavors to pod set main: flavor deleted-flavor not found"))
    assert (f.kind, f.flavor) == (FailureKind.FLAVOR_NOT_FOUND, "deleted-flavor")


def test_node_affinity_mismatch_names_flavor() -> None:
    f = only(parse_workload_message("couldn't assign flavors to pod set main: flavor one doesn't match node affinity"))
    assert (f.kind, f.flavor) == (FailureKind.NODE_AFFINITY_MISMATCH, "one")


def test_tas_flavor_problem_names_flavor_and_problem() -> None:
    # pkg/scheduler/scheduler_tas_test.go:2053 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: Flavor \"tas-default\" does not contain the requested level"))
    assert (f.kind, f.flavor, f.detail) == (
        FailureKind.TOPOLOGY_FLAVOR, "tas-default", "does not contain the requested level")


def test_topology_placement_parses_counts_and_exclusions() -> None:
    # pkg/scheduler/scheduler_tas_test.go:1105 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: topology \"tas-three-level\" doesn't allow to fit any of 1 pod(s). "
        "Total nodes: 6; excluded: resource \"cpu\": 1, topologyDomain: 5"))
    assert (f.kind, f.topology, f.fit, f.requested_count, f.unit, f.total_nodes) == (
        FailureKind.TOPOLOGY_PLACEMENT, "tas-three-level", 0, 1, "pod", 6)
    assert f.excluded == (('resource "cpu"', 1), ("topologyDomain", 5))


def test_topology_placement_partial_fit() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: topology \"tas-single-level\" allows to fit only 3 out of 4 pod(s)"))
    assert (f.fit, f.requested_count, f.excluded, f.total_nodes) == (3, 4, (), None)


def test_topology_placement_multi_layer_slices() -> None:
    # pkg/scheduler/scheduler_tas_test.go:3505 @ v0.19.2
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: topology \"tas-three-level\" doesn't allow to fit; 0/1 slice(s) fit "
        "on level cloud.provider.com/rack; 2/3 slice(s) fit on level kubernetes.io/hostname"))
    assert f.layers == (("cloud.provider.com/rack", 0, 1), ("kubernetes.io/hostname", 2, 3))


def test_topology_request_reason_names_level() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: no topology domains at level: kubernetes.io/hostname"))
    assert (f.kind, f.level) == (FailureKind.TOPOLOGY_REQUEST, "kubernetes.io/hostname")


def test_topology_request_reason_with_comma_is_not_split() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: slice topology requested, but slice size not provided"))
    assert f.kind is FailureKind.TOPOLOGY_REQUEST


def test_topology_error_keeps_error_text() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: unable to calculate domain capacities for PodSet one, error: boom"))
    assert (f.kind, f.detail) == (FailureKind.TOPOLOGY_ERROR, "one, error: boom")


def test_node_replacement_names_node() -> None:
    f = only(parse_workload_message(
        "couldn't assign flavors to pod set one: cannot find replacement assignment for unhealthy node: x0"))
    assert (f.kind, f.detail) == (FailureKind.NODE_REPLACEMENT, "x0")


def test_elastic_slice_flavor_mismatch_names_both_flavors() -> None:
    f = only(parse_workload_message("couldn't assign flavors to pod set main: could not assign one flavor since "
                                    "the original workload is assigned: two"))
    assert (f.kind, f.flavor, f.detail) == (FailureKind.SLICE_FLAVOR_MISMATCH, "one", "two")


def test_skipped_flavor_from_nomination_mapping() -> None:
    p = parse_workload_message(
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 10 more needed, "
        "skipping flavor on-demand as it is not found in the nomination mapping for resource cpu")
    assert [f.kind for f in p.failures] == [FailureKind.INSUFFICIENT_UNUSED_QUOTA, FailureKind.FLAVOR_SKIPPED]
    assert (p.failures[1].flavor, p.failures[1].resource) == ("on-demand", "cpu")


def test_reasons_with_commas_are_scanned_not_split() -> None:
    # pkg/scheduler/scheduler_test.go:760 @ v0.19.2: both reasons contain ", "
    p = parse_workload_message(
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor on-demand, previously considered "
        "podsets requests (0) + current podset request (10) > maximum capacity (5), untolerated taint {key val "
        "NoSchedule <nil>} in flavor spot-tainted")
    assert [f.kind for f in p.failures] == [FailureKind.EXCEEDS_MAXIMUM_CAPACITY, FailureKind.UNTOLERATED_TAINT]


def test_unknown_reason_becomes_unparsed_and_text_is_kept() -> None:
    p = parse_workload_message(
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor a, 1 more needed, "
        "brand new reason, with comma, flavor b not found")
    assert [f.kind for f in p.failures] == [
        FailureKind.INSUFFICIENT_UNUSED_QUOTA, FailureKind.UNPARSED, FailureKind.FLAVOR_NOT_FOUND]
    assert p.failures[1].text == "brand new reason, with comma"


def test_multiple_podsets_are_separated_by_semicolon() -> None:
    p = parse_workload_message(
        "couldn't assign flavors to pod set launcher: flavor a not found; couldn't assign flavors to pod set worker: "
        "topology \"t\" doesn't allow to fit any of 2 pod(s). Total nodes: 5; excluded: nodeSelector: 5")
    assert [(f.podset, f.kind) for f in p.failures] == [
        ("launcher", FailureKind.FLAVOR_NOT_FOUND), ("worker", FailureKind.TOPOLOGY_PLACEMENT)]
    assert p.podsets == ("launcher", "worker")
    assert p.failures[1].excluded == (("nodeSelector", 5),)


def test_pending_preemption_trailer_gives_count() -> None:
    # pkg/scheduler/scheduler_test.go:4089 @ v0.19.2
    p = parse_workload_message("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                               "default, 1 more needed. Pending the preemption of 1 workload(s)")
    assert (p.pending_preemptions, p.failed_preemptions) == (1, None)
    assert p.failures[0].missing == "1"


def test_failed_preemption_trailer_gives_count() -> None:
    p = parse_workload_message("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                               "default, 1 more needed. Preempting 3 workload(s) failed, will retry.")
    assert (p.pending_preemptions, p.failed_preemptions) == (None, 3)


def test_bare_migration_trailer_is_pending_migration() -> None:
    p = parse_workload_message(". Pending the migration of 1 workload(s)")
    assert (p.template, p.pending_migrations) == (Template.PENDING_MIGRATION, 1)


def test_failed_to_assign_flavors_gives_podset_error() -> None:
    p = parse_workload_message("failed to assign flavors to pod set main: no TAS flavor assigned")
    assert p.template is Template.FLAVOR_ASSIGNMENT_ERROR
    assert p.podset_errors == (("main", "no TAS flavor assigned"),)


def test_truncated_condition_message_marks_last_reason_unparsed() -> None:
    reasons = ", ".join(f"insufficient unused quota for cpu in flavor f{i:05d}, {i} more needed" for i in range(700))
    text = kueue_truncate("couldn't assign flavors to pod set main: " + reasons, 32 * 1024)
    assert text.endswith(" ...") and len(text.encode()) == 32 * 1024
    p = parse_workload_message(text)
    assert p.truncated
    assert all(f.kind is FailureKind.INSUFFICIENT_UNUSED_QUOTA for f in p.failures[:-1])
    assert p.failures[-1].kind is FailureKind.UNPARSED
    assert text.startswith("couldn't assign flavors to pod set main: " + ", ".join(f.text for f in p.failures))


def test_truncated_event_cut_inside_podset_header_keeps_text() -> None:
    first = "couldn't assign flavors to pod set a: " + ", ".join(
        f"flavor f{i:03d} doesn't match node affinity" for i in range(24))
    text = kueue_truncate(first + "; couldn't assign flavors to pod set b: flavor x not found", 1024)
    p = parse_workload_message(text)
    assert p.truncated and p.failures[-1].kind is FailureKind.UNPARSED
    assert all(f.podset == "a" for f in p.failures)


# ------------------------------------------------------------------------------------------------
# queue blockers, admissibility, evictions
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "template", "names"), [
    ("LocalQueue lq doesn't exist", Template.LOCAL_QUEUE_NOT_FOUND, {"localQueue": "lq"}),
    ("LocalQueue  doesn't exist", Template.LOCAL_QUEUE_NOT_FOUND, {"localQueue": ""}),
    ("LocalQueue lq is inactive", Template.LOCAL_QUEUE_INACTIVE, {"localQueue": "lq"}),
    ("LocalQueue lq is stopped", Template.LOCAL_QUEUE_STOPPED, {"localQueue": "lq"}),
    ("LocalQueue lq is terminating or missing", Template.LOCAL_QUEUE_TERMINATING, {"localQueue": "lq"}),
    ("ClusterQueue cq doesn't exist", Template.CLUSTER_QUEUE_NOT_FOUND, {"clusterQueue": "cq"}),
    ("ClusterQueue cq not found", Template.CLUSTER_QUEUE_NOT_FOUND, {"clusterQueue": "cq"}),
    ("ClusterQueue cq is inactive", Template.CLUSTER_QUEUE_INACTIVE, {"clusterQueue": "cq"}),
    ("ClusterQueue cq is stopped", Template.CLUSTER_QUEUE_STOPPED, {"clusterQueue": "cq"}),
    ("ClusterQueue cq is terminating or missing", Template.CLUSTER_QUEUE_TERMINATING, {"clusterQueue": "cq"}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_queue_blocker_names_the_queue(text: str, template: Template, names: dict[str, str]) -> None:
    p = parse_workload_message(text)
    assert (p.template, dict(p.names)) == (template, names)


@pytest.mark.parametrize("text", [
    "workload namespace doesn't match ClusterQueue selector",  # v0.18.5+
    "Workload namespace doesn't match ClusterQueue selector",  # <= v0.18.4
])
def test_namespace_selector_mismatch_matches_both_casings(text: str) -> None:
    assert parse_workload_message(text).template is Template.NAMESPACE_NOT_SELECTED


def test_missing_namespace_names_namespace() -> None:
    p = parse_workload_message('workload namespace "team-a" does not exist: namespaces "team-a" not found')
    assert (p.template, p.names["namespace"]) == (Template.NAMESPACE_MISSING, "team-a")


def test_resources_validation_keeps_field_errors() -> None:
    p = parse_workload_message('resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid '
                               'value: ["cpu"]: requests must not exceed its limits')
    assert p.template is Template.RESOURCES_INVALID
    assert p.details is not None and p.details.endswith("requests must not exceed its limits")


def test_limit_range_violation() -> None:
    p = parse_workload_message("resources didn't satisfy LimitRange constraints: spec.podSets[0].template.spec."
                               'containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max')
    assert p.template is Template.LIMIT_RANGE


def test_invalid_namespace_selector() -> None:
    p = parse_workload_message('invalid namespace selector: "InvalOp" is not a valid label selector operator')
    assert p.template is Template.INVALID_NAMESPACE_SELECTOR


def test_admission_gated_lists_gates_raw() -> None:
    p = parse_workload_message("Admission is gated by: example.com/controller1,example.com/controller2")
    assert (p.template, p.names["gatedBy"]) == (
        Template.ADMISSION_GATED, "example.com/controller1,example.com/controller2")


def test_preemption_message_gives_preemptor_reason_and_paths() -> None:
    # pkg/scheduler/preemption/preemption_hierarchical_test.go:452 @ v0.19.2
    p = parse_workload_message(
        "Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to reclamation within the cohort while "
        "borrowing; preemptor path: /r/c/q; preemptee path: /r/c/q_same_cohort")
    assert p.template is Template.PREEMPTED and p.preemption is not None
    pi = p.preemption
    assert (pi.preemptor_uid, pi.preemptor_job_uid, pi.reason, pi.preemptor_path, pi.preemptee_path) == (
        "wl-in", "job-in", "InCohortReclaimWhileBorrowing", "/r/c/q", "/r/c/q_same_cohort")


def test_preemption_unknown_values_become_none() -> None:
    p = parse_workload_message("Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN; "
                               "preemptor path: UNKNOWN; preemptee path: UNKNOWN")
    assert p.preemption is not None
    assert (p.preemption.preemptor_uid, p.preemption.reason, p.preemption.preemptee_path) == (None, None, None)


def test_preempted_event_note_gives_priorities() -> None:
    p = parse_workload_message(
        "Preempted to accommodate a workload (UID: wl-foo, JobUID: job-foo) due to prioritization in the ClusterQueue; "
        "preemptor path: /tas-main; preemptee path: /tas-main; preemptor effective priority: 3 (base: 3, boost: 0); "
        "preemptee effective priority: -1 (base: 1, boost: -2)")
    assert p.preemption is not None
    assert (p.preemption.reason, p.preemption.preemptor_priority, p.preemption.preemptee_priority,
            p.preemption.preemptee_boost) == ("InClusterQueue", 3, -1, -2)


def test_preempted_workload_event_on_the_preemptor() -> None:
    ev = parse_preempted_workload_event(
        "Preempted workload default/low-priority-admitted (UID: low-priority-admitted-uid) in ClusterQueue tas-main; "
        "preemptor effective priority: 3 (base: 3, boost: 0); preemptee effective priority: 1 (base: 1, boost: 0)")
    assert ev is not None
    assert (ev.namespace, ev.name, ev.uid, ev.cluster_queue, ev.preemption.preemptor_priority) == (
        "default", "low-priority-admitted", "low-priority-admitted-uid", "tas-main", 3)
    assert parse_preempted_workload_event("The workload is admitted") is None


def test_pods_ready_timeout_names_workload() -> None:
    p = parse_workload_message("Exceeded the PodsReady timeout ns/wl")
    assert (p.template, dict(p.names)) == (
        Template.PODS_READY_TIMEOUT, {"workload": "ns/wl", "namespace": "ns", "name": "wl"})


def test_admission_check_eviction_lists_checks_and_messages() -> None:
    p = parse_workload_message('Evicted due to AdmissionChecks in Retry state: "check-1" (infrastructure not '
                               'prepared); "check-3" (budget exhausted)')
    assert p.template is Template.ADMISSION_CHECK_EVICTION
    assert p.checks == (("check-1", "infrastructure not prepared"), ("check-3", "budget exhausted"))


def test_deactivation_gives_underlying_cause_and_inner_message() -> None:
    p = parse_workload_message('The workload is deactivated due to AdmissionCheck in Rejected state: "check-1"')
    assert (p.template, p.names["underlyingCause"]) == (Template.DEACTIVATED_DUE_TO, "AdmissionCheck")
    assert p.inner is not None and p.inner.template is Template.ADMISSION_CHECK_REJECTED
    assert p.inner.checks == (("check-1", ""),)


def test_previously_wrapper_parses_inner_message() -> None:
    p = parse_workload_message("Previously: The workload is deactivated")
    assert p.template is Template.PREVIOUSLY
    assert p.inner is not None and p.inner.template is Template.DEACTIVATED


def test_deeply_nested_wrappers_stop_without_recursion_error() -> None:
    p = parse_workload_message("Previously: " * 5000 + "The workload is deactivated")
    assert p.template is Template.PREVIOUSLY
    depth = 0
    cur: ParsedMessage | None = p
    while cur is not None:
        depth += 1
        cur = cur.inner
    assert depth <= 10


def test_node_failures_lists_nodes() -> None:
    p = parse_workload_message("Workload was evicted as there was no replacement for unhealthy node(s): x0")
    assert (p.template, p.names["nodes"]) == (Template.NODE_FAILURES, "x0")


def test_quota_reserved_event_parses_flavors_considered() -> None:
    p = parse_workload_message(
        "Quota reserved in ClusterQueue eng-beta, wait time since queued was 9223372037s; Flavors considered: main: "
        "on-demand(NoFit;insufficient quota for cpu in flavor on-demand, previously considered podsets requests (0) + "
        "current podset request (80) > maximum capacity (60)), spot(Fit;borrow=1)")
    assert p.template is Template.QUOTA_RESERVED
    assert [(a.flavor, a.mode, a.borrow) for a in p.flavors_considered] == [("on-demand", "NoFit", None),
                                                                             ("spot", "Fit", 1)]
    assert p.flavors_considered[0].reasons[0].maximum == "60"


def test_flavors_considered_reason_with_semicolon_space_is_one_reason() -> None:
    attempts = parse_flavors_considered(
        "Flavors considered: one: tas(preemptionMode=Preempt;topology \"t\" doesn't allow to fit any of 1 pod(s). "
        "Total nodes: 1; excluded: resource \"cpu\": 1;insufficient unused quota for cpu in flavor tas, 1 more needed)")
    assert len(attempts) == 1
    assert [r.kind for r in attempts[0].reasons] == [FailureKind.TOPOLOGY_PLACEMENT,
                                                     FailureKind.INSUFFICIENT_UNUSED_QUOTA]


def test_unknown_text_is_unknown_with_details() -> None:
    p = parse_workload_message("Not all pods are ready or succeeded")
    assert (p.template, p.details) == (Template.UNKNOWN, "Not all pods are ready or succeeded")


def test_empty_text_is_unknown() -> None:
    assert parse_workload_message("").template is Template.UNKNOWN


# ------------------------------------------------------------------------------------------------
# ClusterQueue Active=False
# ------------------------------------------------------------------------------------------------


def test_cluster_queue_inactive_part_with_comma_is_not_split() -> None:
    # pkg/cache/scheduler/clusterqueue_test.go:367 @ v0.19.2
    assert parse_cluster_queue_inactive(
        "Can't admit new workloads: Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, "
        "found: check1, check3.") == (("MultiKueueWithProvisioningRequest", "check1, check3"),)


def test_cluster_queue_inactive_lists_every_cause_in_order() -> None:
    assert parse_cluster_queue_inactive(
        "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): a,b, references inactive "
        "AdmissionCheck(s): c.") == (("Stopped", ""), ("FlavorNotFound", "a,b"), ("AdmissionCheckInactive", "c"))


def test_cluster_queue_active_message_gives_no_cause() -> None:
    assert parse_cluster_queue_inactive("Can admit new workloads") == ()


@pytest.mark.parametrize(("detail", "names"), [
    ("on-demand,spot", ("on-demand", "spot")),
    ("[on-demand spot]", ("on-demand", "spot")),
    ("check1, check3", ("check1", "check3")),
    ('"default" for TAS flavor "tas-flavor"', ("default", "tas-flavor")),
])
def test_split_name_list_handles_every_list_format(detail: str, names: tuple[str, ...]) -> None:
    assert split_name_list(detail) == names


# ------------------------------------------------------------------------------------------------
# robustness: never raise, never drop text
# ------------------------------------------------------------------------------------------------

FRAGMENTS: list[str] = sorted({e["text"] for e in CORPUS} | {
    "couldn't assign flavors to pod set ", "; ", ", ", ". Pending the preemption of ", " workload(s)",
    "Previously: ", "The workload is deactivated due to ", "Evicted on manager: ", "Can't admit new workloads: ",
    "Flavors considered: ", "(", ")", "{", "}", '"', " ...", "insufficient unused quota for ", " more needed",
    "topology \"", "Total nodes: ", "; excluded: ", "\x00", "\u00e9", "\ud800",
})


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    p = parse_workload_message(text)
    assert isinstance(p.template, Template)
    parse_cluster_queue_inactive(text)
    parse_flavors_considered(text)
    parse_preempted_workload_event(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8), st.integers(min_value=0, max_value=2000))
def test_concatenated_real_fragments_never_raise(parts: list[str], cut: int) -> None:
    text = "".join(parts)
    for candidate in (text, text[:cut], kueue_truncate(text, 1024), text + " ..."):
        p = parse_workload_message(candidate)
        assert p.text == candidate
        parse_cluster_queue_inactive(candidate)
        parse_flavors_considered(candidate)
        parse_preempted_workload_event(candidate)


REASONS: list[str] = [
    "insufficient unused quota for cpu in flavor default, 1 more needed",
    "insufficient quota for memory in flavor two, previously considered podsets requests (0) + current podset "
    "request (10Mi) > maximum capacity (5Mi)",
    "insufficient quota for cpu in flavor one, request > maximum capacity (3 > 2)",
    "resource example.com/gpu unavailable in ClusterQueue",
    "flavor x not found",
    "flavor one doesn't match node affinity",
    "untolerated taint {key val NoSchedule <nil>} in flavor spot",
    'Flavor "tas" supports only TopologyAwareScheduling',
    'topology "t" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, resource "cpu": 1',
    "skipping flavor on-demand as it is not found in the nomination mapping for resource cpu",
    "slice topology requested, but slice size not provided",
    "something unknown, with a comma",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(REASONS), min_size=1, max_size=6), min_size=1, max_size=3))
def test_every_reason_text_is_kept(podsets: list[list[str]]) -> None:
    parts = [f"couldn't assign flavors to pod set ps{i}: " + ", ".join(rs) for i, rs in enumerate(podsets)]
    p = parse_workload_message("; ".join(parts))
    assert p.template is Template.FLAVOR_ASSIGNMENT
    for i, rs in enumerate(podsets):
        got = [f.text for f in p.failures if f.podset == f"ps{i}"]
        assert ", ".join(got) == ", ".join(rs)
        known = [r for r in rs if r != "something unknown, with a comma"]
        assert [f.text for f in p.failures if f.podset == f"ps{i}" and f.kind is not FailureKind.UNPARSED] == known


def test_parsers_return_on_non_str_input() -> None:
    assert parse_workload_message(None).template is Template.UNKNOWN  # type: ignore[arg-type]
    assert parse_cluster_queue_inactive(None) == ()  # type: ignore[arg-type]
    assert parse_flavors_considered(None) == ()  # type: ignore[arg-type]
    assert parse_preempted_workload_event(None) is None  # type: ignore[arg-type]


def test_ten_thousand_messages_parse_quickly() -> None:
    texts = [e["text"] for e in CORPUS if e.get("function", "parse_workload_message") == "parse_workload_message"]
    batch = (texts * (10_000 // len(texts) + 1))[:10_000]
    start = time.perf_counter()
    for t in batch:
        parse_workload_message(t)
    assert time.perf_counter() - start < 5.0  # ~0.2 s on a laptop; generous for slow CI
