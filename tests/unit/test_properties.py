"""Properties: exact quantity arithmetic, and no input makes the engine raise."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.kube.objects import lst, m
from kueue_doctor.kube.quantity import format_quantity, parse, readable
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
    assert format_quantity("nvidia.com/gpu", Decimal(1000)) == "1000"  # a count whole (Kueue prints 1k): exact too


def test_quantities_in_sentences_read_as_an_sre_counts() -> None:
    assert readable("memory", Decimal(9262144000)) == "8.63Gi"  # format_quantity: "9262144000"
    assert readable("memory", Decimal(8 * 10**9)) == "7.45Gi"  # format_quantity: "7812500Ki"
    assert readable("memory", Decimal(1536 * 2**20)) == "1.5Gi"
    assert readable("memory", Decimal(128 * 2**30)) == "128Gi"
    assert readable("memory", Decimal(1023)) == "1023"
    assert readable("nvidia.com/gpu", Decimal(1000)) == "1000"
    assert readable("cpu", Decimal("0.5")) == "500m"


@given(st.integers(min_value=1, max_value=2**62))
def test_bytes_in_sentences_are_within_half_a_percent(n: int) -> None:
    text = readable("memory", Decimal(n))
    value = parse(text)
    assert text is not None and value is not None and abs(value - n) <= Decimal(n) / 200


@pytest.mark.parametrize(("text", "value"), [
    # Decimal reads these, no Quantity holds them: every sum and comparison with them raised (fuzzing)
    ("NaN", None), ("Infinity", None), ("-inf", None), (float("inf"), None), ("1.5.3", None), ("500mi", None),
    # what an apiserver stores instead: magnitudes capped at 2^63-1, precision rounded up to 1n
    ("1e400", Decimal(2**63 - 1)), (2**70, Decimal(2**63 - 1)), ("-1e400", -Decimal(2**63 - 1)),
    ("0.0000000001n", Decimal("1e-9")),
    # valid forms: exponents, binary suffixes, negatives, and an unquoted `cpu: 0.5` of a hand-written YAML file
    ("1e3", Decimal(1000)), ("1Ki", Decimal(1024)), ("-1", Decimal(-1)), (0.5, Decimal("0.5")),
])
def test_quantities_no_apiserver_stores_are_unreadable_or_bounded(text: object, value: Decimal | None) -> None:
    assert parse(text) == value


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


# ---------------------------------------------------------------------------------------------- odd shapes

# What users feed kueue-doctor besides `kubectl get -o yaml` of v1beta2: other tools' time formats, hand edits,
# v1beta1 dumps. Each catalog scenario with a few such mutations must still get a verdict that is no rule's crash
# (DiagnosisFailed) and whose message names no absent value as "None".
SCENARIOS = yaml.safe_load((Path(__file__).parents[1] / "cases" / "verdicts.yaml").read_text())["scenarios"]
ODD_TIMES = ["2026-11-30 09:00:00", "2026-11-30T09:00:00.123456789Z", "2026-11-30T11:00:00+02:00", "not-a-time",
             "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "", None, 1764493200, datetime(2026, 11, 30, 9, 0)]
ODD_QUANTITIES = ["1.5.3", "-1", "1e3", "500mi", "1Ki", "NaN", "Infinity", "1e400", "", None, 0.5, [], {}]
ODD_VALUES: list[Any] = [None, "", 0, [], {}, "x", ["x"], {"x": "y"}, "x" * 3000, "作业-ü"]
QUANTITY_KEYS = {"cpu", "memory", "nvidia.com/gpu", "pods", "nominalQuota", "borrowingLimit", "lendingLimit",
                 "total", "count"}
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT")
# a value left out, read into the text: "at None", "ClusterQueue None", "ConfigMap None/...", "=None"
_NONE_IN_TEXT = re.compile(r"\b(?:at|since|ClusterQueue|LocalQueue|ConfigMap|from) None\b|=None\b|/None\b|: None\b")


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for n, v in enumerate(obj):
            out += _leaves(v, (*path, n))
    return out


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def odd_shape(objects: list[dict[str, Any]], data: st.DataObject) -> None:
    """One mutation of the kinds fuzzing found crashes with, in place."""
    obj = data.draw(st.sampled_from(objects))
    paths = _leaves(obj)
    kind = data.draw(st.sampled_from(["time", "quantity", "value", "drop", "condition", "v1beta1"]))
    if kind == "time":
        paths = [p for p in paths if isinstance(_at(obj, p), str) and _TIME.match(_at(obj, p))]
    elif kind == "quantity":
        paths = [p for p in paths if p[-1] in QUANTITY_KEYS and not isinstance(_at(obj, p), (dict, list))]
    elif kind == "condition":
        conds = [c for c in lst(m(obj.get("status")).get("conditions")) if isinstance(c, dict)]
        if conds:
            cond = data.draw(st.sampled_from(conds))
            choice = data.draw(st.sampled_from(["type", "reason", "status", "message", "duplicate"]))
            if choice == "duplicate":  # the same type twice, the other status
                obj["status"]["conditions"].append({**cond, "status": "False" if cond.get("status") == "True"
                                                    else "True"})
            else:
                cond[choice] = data.draw(st.sampled_from(["SomethingNew", "Unknown", "", None, "x" * 3000]))
        return
    elif kind == "v1beta1":
        for o in objects:
            if str(o.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
                o["apiVersion"] = "kueue.x-k8s.io/v1beta1"
                sp = o.get("spec")
                if isinstance(sp, dict) and "cohortName" in sp:
                    sp["cohort"] = sp.pop("cohortName")
        return
    if not paths:
        return
    path = data.draw(st.sampled_from(paths))
    parent = _at(obj, path[:-1])
    if kind == "drop":
        del parent[path[-1]]
        return
    values = {"time": ODD_TIMES, "quantity": ODD_QUANTITIES}.get(kind, ODD_VALUES)
    parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(values)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_catalog_scenarios_in_odd_shapes_get_a_verdict_not_a_crash(data: st.DataObject) -> None:
    scenario = data.draw(st.sampled_from(SCENARIOS))
    objects = copy.deepcopy(scenario["objects"])
    for _ in range(data.draw(st.integers(1, 3))):
        odd_shape(objects, data)
    now = datetime.fromisoformat(str(scenario["now"]).replace("Z", "+00:00"))
    for d in diagnose_objects(objects, now):
        AdmissionDiagnosis.model_validate(d)
        message = d["status"]["message"]
        assert d["status"].get("cause") != "DiagnosisFailed", message
        assert message.strip() and not _NONE_IN_TEXT.search(message), message


DROP = object()
# Shapes fuzzing found (seeded driver over the catalog and the e2e fixtures), each on the scenario it was found on:
# (scenario, kind, path, value). Before, each made a rule raise (a DiagnosisFailed verdict), diagnose_objects itself
# raise, or a message say "None" for a value the object left out.
FOUND: list[tuple[str, str, tuple[Any, ...], Any]] = [
    # raised out of diagnose_objects: a Pod group member without creationTimestamp; an owner created in year 9999
    ("pod-group-named-by-annotation-waiting-for-all-its-pods", "Pod", ("metadata", "creationTimestamp"), DROP),
    ("job-naming-a-pod-priority-class-has-no-workload", "Job", ("metadata", "creationTimestamp"),
     "9999-12-31T23:59:59Z"),
    # quantities Decimal reads and no apiserver stores
    ("tas-capacity-held-by-terminating-pod-outside-kueue", "Pod",
     ("spec", "containers", 0, "resources", "requests", "cpu"), "1000000000000000000000Ei"),
    ("pod-larger-than-any-node", "Node", ("status", "allocatable", "cpu"), "NaN"),
    ("tas-leader-and-workers-group-fits-no-rack", "Workload", ("spec", "podSets", 0, "count"), "1.5.3"),
    # a threshold added to a time in year 9999
    ("node-selector-matches-nothing-no-nodes-in-the-input", "Workload", ("status", "conditions", 1,
                                                                          "lastTransitionTime"), "9999-12-31T23:59:59Z"),
    # a label map with a non-string value (a set member then, unhashable)
    ("flavor-nodes-carry-an-untolerated-taint", "ResourceFlavor", ("spec", "nodeLabels", "admission"), {}),
    ("job-node-selector-matches-no-node", "Pod", ("spec", "nodeSelector", "admission"), {}),
    ("job-node-selector-matches-no-node", "Workload", ("metadata", "ownerReferences", 0, "kind"), ["Job"]),
    # a hand-edited status.replicas: the surge groups were counted one by one, for ever
    ("lws-surge-groups-percentage-maxsurge-no-workload", "LeaderWorkerSet", ("status", "replicas"), 10**20),
    # names left out: "points at ClusterQueue None", "ClusterQueue None is inactive"
    ("low-priority-job-being-preempted", "LocalQueue", ("spec",), DROP),
    ("cluster-queue-admission-check-inactive", "LocalQueue", ("metadata", "namespace"), DROP),
]


@pytest.mark.parametrize(("scenario", "kind", "path", "value"), FOUND,
                         ids=[f"{sc}:{kind}.{'.'.join(map(str, p))}" for sc, kind, p, _ in FOUND])
def test_shapes_fuzzing_found_get_a_verdict(scenario: str, kind: str, path: tuple[Any, ...], value: Any) -> None:
    found = next(sc for sc in SCENARIOS if sc["name"] == scenario)
    objects = copy.deepcopy(found["objects"])
    target = [o for o in objects if o.get("kind") == kind][-1]
    parent = _at(target, path[:-1])
    if value is DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    now = datetime.fromisoformat(str(found["now"]).replace("Z", "+00:00"))
    for d in diagnose_objects(objects, now):
        message = d["status"]["message"]
        assert d["status"].get("cause") != "DiagnosisFailed", message
        assert message.strip() and not _NONE_IN_TEXT.search(message), message


def test_unquoted_yaml_timestamps_read_as_the_apiserver_serves_them() -> None:
    """A hand-edited dump's `lastTransitionTime: 2026-11-30T09:00:00Z` (unquoted) loads as text, not a datetime."""
    from kueue_doctor.kube.load import parse_documents

    doc = parse_documents("status:\n  conditions:\n  - lastTransitionTime: 2026-11-30T09:00:00Z\n"
                          "    other: 2026-11-30 09:00:00\n", "dump.yaml")[0]
    assert doc["status"]["conditions"][0] == {"lastTransitionTime": "2026-11-30T09:00:00Z",
                                              "other": "2026-11-30 09:00:00"}


# ---------------------------------------------------------------------------------------------- cohort trees

def _quota(nominal: int, lending: int | None, borrowing: int | None) -> dict[str, Any]:
    res: dict[str, Any] = {"name": "cpu", "nominalQuota": str(nominal)}
    if lending is not None:
        res["lendingLimit"] = str(lending)
    if borrowing is not None:
        res["borrowingLimit"] = str(borrowing)
    return {"coveredResources": ["cpu"], "flavors": [{"name": "rf", "resources": [res]}]}


limit = st.one_of(st.none(), st.integers(min_value=0, max_value=12))
cq_spec = st.tuples(st.integers(min_value=0, max_value=12), limit, limit, st.integers(min_value=0, max_value=20))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queues=st.lists(st.tuples(st.integers(min_value=0, max_value=2), cq_spec), min_size=2, max_size=7),
       cohorts=st.lists(st.tuples(st.integers(min_value=0, max_value=6), limit, limit), min_size=3, max_size=3),
       raise_by=st.integers(min_value=1, max_value=8))
def test_a_raised_lending_limit_is_computed_as_a_rebuilt_tree_computes_it(
        queues: list[tuple[int, tuple[int, int | None, int | None, int]]],
        cohorts: list[tuple[int, int | None, int | None]], raise_by: int) -> None:
    """What-if trees for a raised lendingLimit (`_with_lending_limit`: the node and its ancestors recomputed) give
    the asking queue the same `available` as the tree rebuilt from objects that carry the raised limit: a root
    Cohort with two child Cohorts, queues spread over the three, any nominal, limits and usage."""
    from kueue_doctor.engine.quota import _with_lending_limit, cohort_tree
    from kueue_doctor.state import ClusterState

    names = ["root", "left", "right"]

    def objects(raised: tuple[str, str] | None) -> list[dict[str, Any]]:
        objs: list[dict[str, Any]] = [ResourceFlavor("rf").obj()]
        for n, (nominal, lending, borrowing) in enumerate(cohorts):
            lending = lending + raise_by if raised == ("Cohort", names[n]) and lending is not None else lending
            spec: dict[str, Any] = {"resourceGroups": [_quota(nominal, lending, borrowing)]}
            if n:
                spec["parentName"] = "root"
            objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort",
                         "metadata": {"name": names[n], "uid": f"c{n}"}, "spec": spec})
        for n, (where, (nominal, lending, borrowing, used)) in enumerate(queues):
            name = f"q{n}"
            lending = lending + raise_by if raised == ("ClusterQueue", name) and lending is not None else lending
            objs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                         "metadata": {"name": name, "uid": f"q{n}"},
                         "spec": {"cohortName": names[where], "resourceGroups": [_quota(nominal, lending, borrowing)]},
                         "status": {"flavorsReservation": [{"name": "rf", "resources": [{"name": "cpu",
                                                                                        "total": str(used)}]}]}})
        return objs

    state = ClusterState.from_objects(objects(None))
    tree = cohort_tree(state, "q0", "rf", "cpu")
    assert tree is not None
    mine = {(n.kind, n.name) for n in tree.path}
    for node in tree.nodes.values():
        if (node.kind, node.name) in mine or node.quota.lending_limit is None:
            continue
        what_if = _with_lending_limit(state, tree, node, node.quota.lending_limit + raise_by)
        rebuilt = cohort_tree(ClusterState.from_objects(objects((node.kind, node.name))), "q0", "rf", "cpu")
        assert what_if is not None and rebuilt is not None
        assert what_if.available() == rebuilt.available(), (node.kind, node.name)
