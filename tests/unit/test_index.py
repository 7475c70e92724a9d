"""The Workload/queue index kept object by object equals the index built from scratch, and verdicts on it
equal verdicts on a fresh state, whatever the order of changes (the operator relies on both)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.state import ClusterState, _Index
from tests.builders import Admission, ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor, Workload, condition

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
PREEMPTED = ("Preempted to accommodate a workload (UID: {uid}, JobUID: job-uid) due to prioritization in the "
             "ClusterQueue")


def workload(n: int, queue: int, admitted_in: int | None, owner: int | None, preempted_by: int | None) -> dict[str, Any]:
    wl = Workload(f"wl-{n}", "team-a").queue(f"lq-{queue}").request("cpu", "1").uid(f"uid-{n}")
    if owner is not None:
        wl = wl.owner(Job(f"job-{owner}", "team-a").uid(f"job-{owner}"))
    if admitted_in is not None:
        wl = (wl.admission(Admission(f"cq-{admitted_in}").assignment(flavors={"cpu": "rf"}, usage={"cpu": "1"}))
              .condition(condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved")))
    if preempted_by is not None:
        wl = wl.condition(condition("Evicted", "True", "Preempted", PREEMPTED.format(uid=f"uid-{preempted_by}")))
    return wl.obj()


def queues(n: int, cohort: str | None = None) -> list[dict[str, Any]]:
    cq = ClusterQueue(f"cq-{n}").quotas({"rf": {"cpu": "2"}})
    if cohort:
        cq = cq.cohort(cohort)
    return [cq.obj(), LocalQueue(f"lq-{n}", "team-a", f"cq-{n}").obj()]


changes = st.lists(st.one_of(
    st.tuples(st.just("workload"), st.integers(0, 7), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 2)),
              st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 7))),
    st.tuples(st.just("remove"), st.integers(0, 7)),
    st.tuples(st.just("repoint"), st.integers(0, 2), st.integers(0, 2)),  # LocalQueue lq-a now feeds cq-b
    st.tuples(st.just("cohort"), st.integers(0, 2), st.sampled_from([None, "co-1", "co-2"])),
    st.tuples(st.just("cq-status"), st.integers(0, 2)),
), max_size=25)


def as_sets(idx: _Index) -> dict[str, Any]:
    # a UID linked by two Workloads (two of one owner) names either: which one is not defined
    return {"uid": set(idx.workloads_by_uid_link), "claims": {k: set(v) for k, v in idx._uid_claims.items()},
            "preempted": set(idx.preempted),
            **{name: {k: set(v) for k, v in getattr(idx, name).items()}
               for name in ("workloads_by_owner", "workloads_by_lq", "workloads_by_cq", "cqs_by_cohort",
                            "cqs_referencing")}}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes)
def test_the_kept_index_equals_a_fresh_one_after_any_changes(ops: list[tuple[Any, ...]]) -> None:
    base = [Namespace("team-a").obj(), ResourceFlavor("rf").obj(), *(o for n in range(3) for o in queues(n))]
    state = ClusterState.from_objects(base)
    state.index.workloads_by_uid(state)  # built early, so that it too must be kept up to date
    for op in ops:
        if op[0] == "workload":
            state.upsert(workload(*op[1:]))
        elif op[0] == "remove":
            state.remove(Workload(f"wl-{op[1]}", "team-a").obj())
        elif op[0] == "repoint":
            state.upsert(LocalQueue(f"lq-{op[1]}", "team-a", f"cq-{op[2]}").obj())
        elif op[0] == "cohort":
            state.upsert(queues(op[1], op[2])[0])
        else:
            state.upsert(ClusterQueue(f"cq-{op[1]}").quotas({"rf": {"cpu": "2"}})
                         .reservation("rf", "cpu", "1").obj())
        fresh = _Index.build(state)
        assert as_sets(state.index) == as_sets(fresh)
        assert all(k in state.index._uid_claims[u] for u, k in state.index.workloads_by_uid_link.items())
        assert {k: set(v) for k, v in state.index.workloads_by_uid(state).items()} == \
            {k: set(v) for k, v in fresh.workloads_by_uid(state).items()}
    again = ClusterState.from_objects([*base, *state.workloads.values(), *state.local_queues.values(),
                                       *state.cluster_queues.values()])
    assert diagnose(state, NOW) == diagnose(again, NOW)
