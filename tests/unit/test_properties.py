"""Properties: exact quantity arithmetic, and no input makes the engine raise."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.kube.quantity import format_quantity, parse
from tests.builders import Admission, ClusterQueue, LocalQueue, ResourceFlavor, Workload, condition

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

# ---------------------------------------------------------------------------------------------- quantities

milli = st.integers(min_value=0, max_value=10**12)


@given(milli)
def test_cpu_milli_units_round_trip_exactly(n: int) -> None:
    value = Decimal(n) / 1000
    text = format_quantity("cpu", value)
    assert text is not None
    assert parse(text) == value


@given(st.integers(min_value=0, max_value=2**62))
def test_memory_bytes_round_trip_exactly_in_binary_form(n: int) -> None:
    text = format_quantity("memory", Decimal(n))
    assert text is not None and parse(text) == Decimal(n)


@given(st.lists(milli, min_size=1, max_size=50))
def test_sums_of_quantities_are_exact_never_float(ns: list[int]) -> None:
    parsed = [parse(f"{n}m") for n in ns]
    assert all(isinstance(p, Decimal) for p in parsed)
    assert sum(p for p in parsed if p is not None) == Decimal(sum(ns)) / 1000


def test_kueue_formatting_of_quantities() -> None:
    assert format_quantity("cpu", Decimal("0.5")) == "500m"
    assert format_quantity("cpu", Decimal(5)) == "5"
    assert format_quantity("memory", Decimal(2**30)) == "1Gi"
    assert format_quantity("nvidia.com/gpu", Decimal(4)) == "4"
    assert parse("<unlimited>") is None and parse("bogus") is None and parse(True) is None


# ---------------------------------------------------------------------------------------------- robustness

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30),
                      st.sampled_from(["True", "False", "QuotaReserved", "Admitted", "Evicted", "PodsReady",
                                       "Finished", "2026-11-30T09:00:00Z", "1Gi", "500m", "main", "team-a-cq"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)), max_leaves=25)
field_names = st.sampled_from(["metadata", "spec", "status", "conditions", "admission", "podSets", "queueName",
                               "clusterQueue", "resourceGroups", "podSetAssignments", "requeueState", "active",
                               "ownerReferences", "admissionChecks", "type", "status", "reason", "message"])


def mutate(obj: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace random sub-trees of a realistic object with random JSON."""
    if depth > 4 or not isinstance(obj, (dict, list)):
        return data.draw(json_value) if data.draw(st.integers(0, 9)) == 0 else obj
    if isinstance(obj, list):
        return [mutate(x, data, depth + 1) for x in obj]
    out = {}
    for k, v in obj.items():
        choice = data.draw(st.integers(0, 12))
        if choice == 0:
            continue  # drop the field
        out[k] = data.draw(json_value) if choice == 1 else mutate(v, data, depth + 1)
    if data.draw(st.integers(0, 5)) == 0:
        out[data.draw(field_names)] = data.draw(json_value)
    return out


def realistic() -> list[dict[str, Any]]:
    def wl(name: str) -> Workload:
        return Workload(name, "team-a").queue("user-queue").request("cpu", "1")

    return [ResourceFlavor("default-flavor").obj(),
            ClusterQueue("team-a-cq").cohort("c")
            .quotas({"default-flavor": {"cpu": {"nominalQuota": "2", "borrowingLimit": "1"}}}).obj(),
            LocalQueue("user-queue", "team-a", "team-a-cq").obj(),
            wl("job-a-00001").condition(condition(
                "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient quota for "
                "cpu in flavor default-flavor, previously considered podsets requests (0) + current podset request "
                "(3) > maximum capacity (3)")).obj(),
            wl("job-b-00002").conditions(
                condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-cq"),
                condition("Admitted", "True", "Admitted", "The workload is admitted"),
                condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload (UID: x, JobUID: y) "
                          "due to prioritization in the ClusterQueue; preemptor path: /c/team-a-cq; preemptee path: "
                          "/c/t")).admission(Admission("team-a-cq").assignment(
                              count=None, flavors={"cpu": "default-flavor"}, usage={"cpu": "1"})).obj()]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_mutated_object_makes_the_engine_raise(data: st.DataObject) -> None:
    objects = [mutate(o, data) for o in realistic()]
    for d in diagnose_objects(objects, NOW):
        AdmissionDiagnosis.model_validate(d)
        # no rule fails on a malformed field (DiagnosisFailed is the safety net, not an answer): a field of the
        # wrong JSON type reads as absent, in the pure engine and in the compiled one (which checks the types of
        # what a typed function is given)
        assert d["status"].get("cause") != "DiagnosisFailed", d["status"]["message"]


@settings(max_examples=200, deadline=None)
@given(st.lists(json_value, max_size=6))
def test_arbitrary_json_values_as_objects_are_ignored_or_diagnosed(values: list[Any]) -> None:
    objects = [*values, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": values[0]
                         if values else None, "spec": values[-1] if values else None}]
    diagnose_objects(objects, NOW)
