"""Team labels: `--metric-label-from` puts the Workload's (else LocalQueue's, else ClusterQueue's) label on the
per-queue metrics as custom_<label>, Kueue's naming, with a bounded number of values."""

from __future__ import annotations

import io
import weakref

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from kueue_doctor.cli import main
from kueue_doctor.live.metrics import Verdict, registry_for
from kueue_doctor.live.runtime import Options, Runtime
from kueue_doctor.live.team_labels import OTHER_VALUE, LabelSpec, parse_specs
from tests.builders import ClusterQueue, LocalQueue, Workload

UNTRACKED = "kueue.x-k8s.io/_UNTRACKED_VALUE_"


def test_names_are_kueues_custom_prefix_with_kep_7066_sanitizing_or_the_name_given() -> None:
    assert parse_specs(["team", "example.com/cost-center", "cc=example.com/cost-center"]) == [
        LabelSpec("team", "custom_team"), LabelSpec("example.com/cost-center", "custom_example_com_cost_center"),
        LabelSpec("example.com/cost-center", "custom_cc")]
    assert OTHER_VALUE == UNTRACKED  # Kueue's own value for what it does not track (apis/config/v1beta2)


@pytest.mark.parametrize(("flags", "said"), [
    (["not a label"], "is not a Kubernetes label key"),
    (["9x=team"], "must match ^[a-zA-Z][a-zA-Z0-9_]*$"),
    (["cost-center", "cost.center"], "both become custom_cost_center"),
    (["Example.com/team"], "is not a Kubernetes label key"),
])
def test_a_bad_or_colliding_label_stops_the_operator_at_start_saying_which(flags: list[str], said: str) -> None:
    with pytest.raises(ValueError, match=None) as exc:
        parse_specs(flags)
    assert said in str(exc.value)
    err = io.StringIO()
    argv = ["run"] + [a for f in flags for a in ("--metric-label-from", f)]
    assert main(argv, stderr=err) == 2 and said in err.getvalue()


def _runtime(flags: list[str], cap: int = 50) -> Runtime:
    rt = Runtime(api=None, options=Options(metric_labels=flags, metric_label_values=cap))
    for obj in (ClusterQueue("cq-a").label("team", "from-cq").label("env", "prod").obj(),
                LocalQueue("main", "ns-a", "cq-a").label("team", "from-lq").obj(),
                LocalQueue("main", "ns-b", "cq-a").obj(),
                Workload("wl-1", "ns-a").queue("main").label("team", "ml").obj(),
                Workload("wl-2", "ns-a").queue("main").obj(),
                Workload("wl-3", "ns-b").queue("main").obj()):
        rt.state.upsert(obj)
    for ns, name in (("ns-a", "wl-1"), ("ns-a", "wl-2"), ("ns-b", "wl-3")):
        rt.verdicts[ns, name] = Verdict(ns, name, "main", "cq-a", "Admission", "WaitingForQuota", "Nobody", 100.0)
    return rt


_REGISTRIES: weakref.WeakKeyDictionary[Runtime, CollectorRegistry] = weakref.WeakKeyDictionary()


def _samples(rt: Runtime, metric: str) -> list[dict[str, str]]:
    """A scrape of the runtime's one registry, as the operator serves it (the bounded values live in it)."""
    registry = _REGISTRIES.get(rt) or _REGISTRIES.setdefault(rt, registry_for(rt))
    text = generate_latest(registry).decode()
    return [dict(s.labels, value=str(s.value)) for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == metric]


def test_the_value_comes_from_the_workload_else_its_localqueue_else_its_clusterqueue() -> None:
    rt = _runtime(["team", "env", "missing"])
    got = {(s["workload_namespace"], s["custom_team"], s["custom_env"], s["custom_missing"])
           for s in _samples(rt, "kueue_doctor_oldest_waiting_since_timestamp_seconds")}
    assert got == {("ns-a", "ml", "prod", ""), ("ns-a", "from-lq", "prod", ""), ("ns-b", "from-cq", "prod", "")}
    by_team = {s["custom_team"]: s["value"] for s in _samples(rt, "kueue_doctor_workloads")}
    assert by_team == {"ml": "1.0", "from-lq": "1.0", "from-cq": "1.0"}
    for metric in ("kueue_doctor_queue_blocked_workloads", "kueue_doctor_workload_waiting_since_timestamp_seconds"):
        assert {s["custom_team"] for s in _samples(rt, metric)} == {"ml", "from-lq", "from-cq"}, metric


def test_without_the_flag_the_metrics_keep_their_labels() -> None:
    rt = _runtime([])
    (sample,) = _samples(rt, "kueue_doctor_workloads")
    assert set(sample) == {"cluster_queue", "stage", "reason", "value"}


def test_distinct_values_are_capped_and_the_rest_counted_under_kueues_untracked_value() -> None:
    rt = _runtime(["team"], cap=2)
    by_team = {s["custom_team"]: s["value"] for s in _samples(rt, "kueue_doctor_workloads")}
    assert by_team == {"from-cq": "1.0", "from-lq": "1.0", UNTRACKED: "1.0"}  # the first two, sorted, keep a place
    del rt.verdicts["ns-b", "wl-3"]  # from-cq is no longer in use: its place goes to the value that waited
    by_team = {s["custom_team"]: s["value"] for s in _samples(rt, "kueue_doctor_workloads")}
    assert by_team == {"from-lq": "1.0", "ml": "1.0"}
    rt.state.upsert(Workload("wl-4", "ns-a").queue("main").label("team", "aaa").obj())
    rt.verdicts["ns-a", "wl-4"] = Verdict("ns-a", "wl-4", "main", "cq-a", "Admission", "WaitingForQuota", "Nobody",
                                          100.0)
    by_team = {s["custom_team"]: s["value"] for s in _samples(rt, "kueue_doctor_workloads")}
    assert by_team == {"from-lq": "1.0", "ml": "1.0", UNTRACKED: "1.0"}  # values in use keep their place


def test_an_owner_kueue_made_no_workload_for_gives_its_own_label_first() -> None:
    from kueue_doctor.kube.kueue_names import expected_workload_name
    from tests.builders import Job

    rt = _runtime(["team"])
    job = Job("lonely", "ns-b").queue("main").label("team", "owner-team").obj()
    rt.state.upsert(job)
    name = expected_workload_name(job)
    rt.verdicts["ns-b", name] = Verdict("ns-b", name, "main", "cq-a", "Admission", "NoWorkload", "ClusterAdmin", 50.0)
    per = {s["workload"]: s["custom_team"] for s in _samples(rt, "kueue_doctor_workload_waiting_since_timestamp_seconds")}
    assert per[name] == "owner-team" and per["wl-3"] == "from-cq"


def test_a_workload_relabelled_between_scrapes_shows_its_new_value_on_the_next() -> None:
    rt = _runtime(["team"])
    assert {s["custom_team"] for s in _samples(rt, "kueue_doctor_workloads")} == {"ml", "from-lq", "from-cq"}
    rt.state.upsert(Workload("wl-1", "ns-a").queue("main").label("team", "ml-platform").obj())
    rt.state.upsert(Workload("wl-3", "ns-b").queue("main").label("team", "speech").obj())
    assert {s["custom_team"] for s in _samples(rt, "kueue_doctor_workloads")} == {"ml-platform", "from-lq", "speech"}
