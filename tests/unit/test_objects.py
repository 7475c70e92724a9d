"""kube/objects.py: the shared accessors for times, durations, integers and cut texts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from kueue_doctor.kube.objects import (
    TRUNCATION_SUFFIX,
    as_time,
    clip,
    earliest,
    format_duration,
    int_or_none,
    later,
    parse_time,
    release,
    when_text,
)

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("seconds", "short", "precise"), [
    (-30, "0s", "0s"),
    (0, "0s", "0s"),
    (89, "89s", "89s"),
    (90, "90s", "1m"),
    (119, "119s", "1m"),
    (120, "2m", "2m"),
    (17 * 60 + 59, "17m", "17m"),
    (119 * 60 + 59, "119m", "119m"),
    (2 * 3600, "2h", "2h00m"),
    (3 * 3600 + 5 * 60 + 9, "3h", "3h05m"),
    (47 * 3600 + 59 * 60, "47h", "47h59m"),
    (48 * 3600, "2d", "2d0h"),
    (2 * 86400 + 4 * 3600 + 59 * 60, "2d", "2d4h"),
    (400 * 86400, "400d", "400d0h"),
])
def test_format_duration_gives_one_unit_or_two_when_precise(seconds: int, short: str, precise: str) -> None:
    assert format_duration(timedelta(seconds=seconds)) == short
    assert format_duration(seconds) == short
    assert format_duration(timedelta(seconds=seconds), precise=True) == precise
    assert format_duration(seconds, precise=True) == precise


def test_format_duration_drops_fractions_of_a_second() -> None:
    assert format_duration(timedelta(seconds=119, microseconds=999_999)) == "119s"
    assert format_duration(timedelta(microseconds=-1)) == "0s"


def test_as_time_reads_strings_like_parse_time_and_keeps_datetimes() -> None:
    assert as_time("2026-03-02T09:00:00Z") == parse_time("2026-03-02T09:00:00Z") == T0
    assert as_time("2026-03-02T09:00:00.123456Z") == T0 + timedelta(microseconds=123456)
    assert as_time(T0) is T0
    naive = datetime(2026, 3, 2, 9, 0, 0)
    assert as_time(naive) == T0 and as_time(naive).tzinfo is UTC  # type: ignore[union-attr]
    other = datetime(2026, 3, 2, 10, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert as_time(other) is other
    # an unquoted timestamp of a hand-edited YAML file, as yaml.safe_load hands it to `diagnose_objects`: read too
    assert parse_time(T0) is T0 and parse_time(naive) == T0
    unreadable: tuple[object, ...] = (None, "", "yesterday", 1700000000, b"2026-03-02T09:00:00Z", ["2026-03-02T09:00:00Z"])
    for bad in unreadable:
        assert as_time(bad) is None


def test_int_or_none_keeps_absent_apart_from_zero() -> None:
    assert int_or_none(0) == 0 and int_or_none(137) == 137 and int_or_none(-1) == -1
    not_ints: tuple[object, ...] = (None, True, False, "137", 1.0, [], {})
    for not_an_int in not_ints:
        assert int_or_none(not_an_int) is None


def test_clip_cuts_with_the_kubernetes_suffix() -> None:
    assert TRUNCATION_SUFFIX == " ..."
    assert clip("x" * 20, 10) == "x" * 6 + " ..."
    assert clip("x" * 10, 10) == "x" * 10
    assert clip("", 10) is None and clip(None, 10) is None


def test_earliest_ignores_a_missing_time() -> None:
    later = T0 + timedelta(minutes=1)
    assert earliest(T0, later) == earliest(later, T0) == T0
    assert earliest(None, T0) == earliest(T0, None) == T0
    assert earliest(None, None) is None


def test_a_group_workload_is_owned_by_its_statefulset_not_its_member_pods() -> None:
    """Kueue gives a StatefulSet's Workload the StatefulSet and each member Pod as plain (non-controller) owners
    (statefulset_reconciler constructWorkload, pod_controller EnsureWorkloadOwnedByAllMembers)."""
    from kueue_doctor.kube.objects import workload_owner_ref

    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u-sts"}
    pods = [{"apiVersion": "v1", "kind": "Pod", "name": f"web-{n}", "uid": f"u-{n}"} for n in range(2)]
    wl = {"metadata": {"name": "statefulset-web-8f657", "ownerReferences": [sts, *pods]}}
    assert workload_owner_ref(wl) == sts
    assert workload_owner_ref({"metadata": {"ownerReferences": pods}}) is None  # a Pod group: no single owner
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-j", "controller": True}
    assert workload_owner_ref({"metadata": {"ownerReferences": [job]}}) == job


def test_times_no_object_carries_read_as_absent_and_messages_never_say_none() -> None:
    # Go's zero time (a tool writing an unset metav1.Time) and the far future (any threshold added overflows)
    for bad in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", datetime(9999, 12, 31), datetime(1, 1, 1)):
        assert parse_time(bad) is None and as_time(bad) is None
    # the other forms hand-edited and non-kubectl dumps carry
    assert parse_time("2026-03-02 09:00:00") == T0
    assert parse_time("2026-03-02T11:00:00+02:00") == T0
    assert parse_time("2026-03-02T09:00:00.123456789Z") == T0 + timedelta(microseconds=123456)
    assert when_text(None) == "an unknown time" and when_text(T0) == "2026-03-02T09:00:00Z"
    assert later(T0, 2**63) is None and later(T0, 60) == T0 + timedelta(minutes=1)


def test_release_reads_tags_and_image_references_and_refuses_what_is_no_release() -> None:
    # what the rules compare against a fixed release: KubeRay's ray.io/kuberay-version, Kueue's image tag
    assert release("v1.6.2") == release("1.6.2") == (1, 6, 2)
    assert release("registry.k8s.io/kueue/kueue:v0.19.0") == (0, 19, 0)
    assert release("registry.k8s.io/kueue/kueue:v0.19.1@sha256:" + "a" * 64) == (0, 19, 1)
    assert release("localhost:5000/kueue:v0.18.2") == (0, 18, 2)  # the registry's port is no release
    assert release("v1.7.0-rc.1") == (1, 7, 0)
    for unknown in ("", None, "main", "latest", "localhost:5000/kueue:main", "kueue@sha256:" + "b" * 64, "v1.6"):
        assert release(unknown) is None
