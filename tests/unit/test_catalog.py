"""The verdict catalog (tests/cases/verdicts.yaml): every scenario's verdict, and the coverage it promises.

Each scenario is a situation a platform team meets, as a dump of objects shaped as the apiserver returns
them. The catalog is also the coverage matrix: every value of the public vocabulary, both reason
vocabularies of Kueue, both API versions and every supported owner kind appear in a passing scenario,
or in the catalog's explicit `uncovered` map with the reason. docs/coverage.md and docs/verdicts.md are
generated from it and from the vocabulary by hack/gen_docs.py; tests here fail when they are stale.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kueue_doctor import diagnose_objects
from kueue_doctor.api import AdmissionDiagnosis
from kueue_doctor.engine.admission.kueue_message import HANDLERS
from kueue_doctor.engine.context import Context
from kueue_doctor.engine.diagnose import decide
from kueue_doctor.engine.no_workload import stand_ins
from kueue_doctor.engine.registry import ORDER
from kueue_doctor.engine.rules import Verdict
from kueue_doctor.engine.scheduling.owners import SUSPEND_PATHS
from kueue_doctor.kube.kueue_names import expected_workload_name
from kueue_doctor.kube.objects import TRUNCATION_SUFFIX
from kueue_doctor.state import ClusterState
from kueue_doctor.vocabulary import ACTIONS, CAUSES, REASONS, STAGES, Cause, Reason

ROOT = Path(__file__).parents[2]


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "hack" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_docs", module)
    spec.loader.exec_module(module)
    return module


gen = _gen_docs()
CATALOG = gen.load_catalog()
SCENARIOS: list[dict[str, Any]] = CATALOG["scenarios"]
UNCOVERED: dict[str, dict[str, str]] = CATALOG["uncovered"]
PASSING = [s for s in SCENARIOS if "xfail" not in s]


def _param(scenario: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=scenario["xfail"])] if "xfail" in scenario else []
    return pytest.param(scenario, id=scenario["name"], marks=marks)


# --------------------------------------------------------------------------------------------------
# (a) every scenario gives the expected verdict


def _partial(actual: Any, expected: Any, path: str) -> list[str]:
    """Element-wise partial match: every key given in `expected` must equal the same key in `actual`."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{path}: expected a mapping, got {actual!r}"]
        out = []
        for k, v in expected.items():
            out += _partial(actual.get(k), v, f"{path}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return [f"{path}: expected at least {len(expected)} items, got {actual!r}"]
        out = []
        for n, item in enumerate(expected):
            out += _partial(actual[n], item, f"{path}[{n}]")
        return out
    return [] if actual == expected else [f"{path}: expected {expected!r}, got {actual!r}"]


def verdict_of(scenario: dict[str, Any]) -> dict[str, Any]:
    """Run the scenario; every diagnosis must be a valid AdmissionDiagnosis. The expected Workload's status."""
    out = diagnose_objects(scenario["objects"], gen.parse_now(scenario["now"]))
    for d in out:
        AdmissionDiagnosis.model_validate(d)  # exactly what the operator writes
    ns, name = scenario["expect"]["workload"].split("/", 1)
    found = [d for d in out if (d["metadata"]["namespace"], d["metadata"]["name"]) == (ns, name)]
    assert found, f"no diagnosis for {ns}/{name}: {[d['metadata']['name'] for d in out]}"
    status: dict[str, Any] = found[0]["status"]
    return status


def problems(scenario: dict[str, Any], status: dict[str, Any]) -> list[str]:
    exp = scenario["expect"]
    out = [f"{k}: expected {exp[k]!r}, got {status.get(k)!r}"
           for k in ("stage", "reason", "cause", "actionBy") if status.get(k) != exp[k]]
    for text in exp.get("message_contains", []):
        if text not in status["message"]:
            out.append(f"message lacks {text!r}: {status['message']!r}")
    for text in exp.get("message_lacks", []):  # a claim the situation must not make
        if text in status["message"]:
            out.append(f"message says {text!r}: {status['message']!r}")
    for key in ("quota", "blockedBy", "pods", "lastEviction", "admissionChecks", "blocker", "nodeMatches",
                "remedies"):
        if key in exp:
            out += _partial(status.get(key), exp[key], key)
    return out


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    status = verdict_of(scenario)
    found = problems(scenario, status)
    assert not found, f"{scenario['name']} ({scenario['why']}):\n  " + "\n  ".join(found) + (
        f"\n  verdict: {status['stage']}/{status['reason']}/{status.get('cause')}/{status['actionBy']}: "
        f"{status['message']}")


# --------------------------------------------------------------------------------------------------
# the catalog itself is well formed


def test_scenarios_are_well_formed() -> None:
    names = [s["name"] for s in SCENARIOS]
    assert len(names) == len(set(names)), "scenario names must be unique"
    allowed = {"name", "why", "now", "objects", "expect", "xfail"}
    for s in SCENARIOS:
        assert set(s) <= allowed and {"name", "why", "now", "objects", "expect"} <= set(s), s["name"]
        assert s["why"].strip() and "\n" not in s["why"].strip(), f"{s['name']}: `why` is one line"
        gen.parse_now(s["now"])
        exp = s["expect"]
        assert exp["stage"] in STAGES, s["name"]
        assert exp["reason"] in REASONS and REASONS[exp["reason"]].stage == exp["stage"], s["name"]
        assert exp["cause"] in CAUSES, f"{s['name']}: cause {exp['cause']} is not in the vocabulary"
        assert exp["actionBy"] in ACTIONS, s["name"]
        assert "/" in exp["workload"], s["name"]
        named = {gen.key_of(o) for o in s["objects"] if o.get("kind") == "Workload"}
        if exp["reason"] == "NoWorkload" or exp["cause"] == "WorkloadNotInInput":  # named as Kueue names its Workload
            named = {f"{o['metadata']['namespace']}/{expected_workload_name(o)}" for o in s["objects"]
                     if o.get("kind") != "Workload" and o.get("metadata", {}).get("namespace")}
        assert exp["workload"] in named, f"{s['name']}: {exp['workload']} is not among the objects"
        assert s.get("xfail", "x").strip(), f"{s['name']}: xfail needs the reason the engine is wrong"


def test_uncovered_lists_only_known_dimensions_and_values() -> None:
    assert set(UNCOVERED) == set(gen.DIMENSIONS), "uncovered: one map per dimension, even if empty"
    for dim, values in UNCOVERED.items():
        for value, why in (values or {}).items():
            assert value in gen.required_values(dim), f"uncovered.{dim}.{value} is not a value of {dim}"
            assert isinstance(why, str) and why.strip(), f"uncovered.{dim}.{value} needs a reason"


# --------------------------------------------------------------------------------------------------
# (b) coverage: every value appears in a passing scenario, or is listed as uncovered with the reason


@pytest.mark.parametrize("dimension", gen.DIMENSIONS)
def test_every_value_is_covered_or_listed_as_uncovered(dimension: str) -> None:
    matrix = gen.coverage(PASSING)
    covered = set(matrix[dimension])
    excused = set(UNCOVERED.get(dimension) or {})
    missing = [v for v in gen.required_values(dimension) if v not in covered and v not in excused]
    assert not missing, (f"{dimension} values without a passing scenario: {missing}; add a scenario to "
                         "tests/cases/verdicts.yaml or list them under `uncovered` with the reason")
    stale = sorted(excused & covered)
    assert not stale, f"uncovered.{dimension} lists values a passing scenario now covers: {stale}; remove them"


def test_supported_owner_kinds_are_kinds_the_engine_knows() -> None:
    for owner in gen.OWNERS:
        if owner != gen.POD_GROUP:
            group, kind = owner.split("/")
            assert (group, kind) in SUSPEND_PATHS, owner
    for group, kind in SUSPEND_PATHS:  # a new owner kind must be added to the catalog's owner list
        assert f"{group}/{kind}" in gen.OWNERS, f"{group}/{kind} is in SUSPEND_PATHS but not in gen_docs.OWNERS"


# --------------------------------------------------------------------------------------------------
# (c) every message template the engine maps has a scenario


def test_every_mapped_kueue_message_template_has_a_scenario() -> None:
    seen = set(gen.coverage(PASSING)["template"])
    missing = sorted(str(t) for t in HANDLERS if str(t) not in seen)
    assert not missing, f"message templates of kueue_message.HANDLERS with no passing scenario: {missing}"


# --------------------------------------------------------------------------------------------------
# (d) the rules keep to what they declare


def _decisions() -> list[tuple[str, str | None, Verdict]]:
    """(scenario, rule name, verdict) for every Workload of every passing scenario."""
    out = []
    for scenario in PASSING:
        state = ClusterState.from_objects(scenario["objects"])
        now = gen.parse_now(scenario["now"])
        for wl in {**stand_ins(state, now), **state.workloads}.values():
            rule, found = decide(Context(wl, state, now))
            out.append((scenario["name"], rule.name if rule else None, found.verdict))
    return out


DECISIONS = _decisions()
RULES = {r.name: r for r in ORDER}


def test_every_rule_gives_only_the_verdicts_it_declares() -> None:
    wrong = [f"{name}: rule {rule} gave {verdict}, declares {sorted(map(str, RULES[rule].emits))}"
             for name, rule, verdict in DECISIONS if rule is not None and verdict not in RULES[rule].emits]
    assert not wrong, "\n".join(wrong)


def test_every_declared_verdict_has_a_scenario() -> None:
    given = {verdict for _, _, verdict in DECISIONS}
    excused = {_verdict(v) for v in CATALOG.get("uncovered_verdicts") or {}}
    declared = {v for r in ORDER for v in r.emits}
    missing = sorted(f"{reason}/{cause or ''}" for reason, cause in declared - given - excused)
    assert not missing, ("declared verdicts no passing scenario produces (add a scenario to "
                         "tests/cases/verdicts.yaml, or list them under uncovered_verdicts with the reason): "
                         + ", ".join(missing))
    stale = sorted(f"{reason}/{cause or ''}" for reason, cause in excused & given)
    assert not stale, f"uncovered_verdicts lists verdicts a passing scenario now gives: {stale}; remove them"


def _verdict(text: str) -> Verdict:
    reason, _, cause = text.partition("/")
    return Reason(reason), Cause(cause) if cause else None


def test_the_message_rule_declares_what_its_handlers_declare() -> None:
    from kueue_doctor.engine.admission.kueue_message import from_kueue_message

    handled = {v for h in HANDLERS.values() for v in h.emits}
    assert handled <= from_kueue_message.emits, sorted(map(str, handled - from_kueue_message.emits))


# --------------------------------------------------------------------------------------------------
# docs


def test_committed_coverage_doc_is_generated_from_the_catalog() -> None:
    assert (ROOT / "docs" / "coverage.md").read_text() == gen.coverage_md(CATALOG), (
        "docs/coverage.md is stale: run `python hack/gen_docs.py`")


def test_committed_verdicts_doc_is_generated() -> None:
    assert (ROOT / "docs" / "verdicts.md").read_text() == gen.verdicts_md(CATALOG), (
        "docs/verdicts.md is stale: run `python hack/gen_docs.py`")


@pytest.mark.parametrize("table,prefix", [(STAGES, "stage"), (REASONS, "reason"), (CAUSES, "cause"),
                                          (ACTIONS, "action")])
def test_verdicts_doc_explains_every_vocabulary_value(table: Mapping[str, Any], prefix: str) -> None:
    text = (ROOT / "docs" / "verdicts.md").read_text()
    missing = [str(v) for v in table if f'<a id="{prefix}-{str(v).lower()}"></a>' not in text]
    assert not missing, f"docs/verdicts.md has no entry for {prefix} values {missing}"
    for value in table:
        todo = gen.GUIDE.get(prefix, {}).get(str(value))
        assert todo and todo.get("do") and todo.get("who"), f"hack/gen_docs.py GUIDE lacks {prefix} {value}"


def test_a_plain_pod_without_kueues_annotation_is_found_through_the_workloads_owner_reference() -> None:
    """A dump whose Pod lost the kueue.x-k8s.io/workload annotation (older Kueue, a scrubbed dump): the Workload
    of a plain Pod names it in its ownerReferences, which is enough to find it even when no Pod carries a link."""
    import copy

    scenario = copy.deepcopy(next(s for s in SCENARIOS if s["name"] == "plain-pod-created-with-its-own-scheduling-gate"))
    for obj in scenario["objects"]:
        if obj["kind"] == "Pod":
            obj["metadata"].pop("annotations", None)
            obj["metadata"].pop("ownerReferences", None)
    status = verdict_of(scenario)
    assert (status["reason"], status["cause"]) == ("PodsUnschedulable", "SchedulingGated"), status["message"]


def test_a_message_over_the_status_budget_loses_its_notes_not_its_last_words() -> None:
    """The status message holds 1,024 characters. Verdicts quoting the scheduler, the nodes, the quota and the
    eviction deadline were cut mid-sentence at their end, where the next step is. Over the budget a message drops
    what other fields hold (the scheduler's words: evidence; the node funnel: status.nodeMatches; the per-pod-set
    detail), so it keeps the cluster admin's step and the deadline, whole."""
    (scenario,) = [s for s in SCENARIOS if s["name"] == "quota-above-node-capacity"]
    status = verdict_of(scenario)
    message = status["message"]
    assert "The cluster admin sets nominalQuota to what the nodes hold; then Kueue's own preemption " \
        "(withinClusterQueue) decides who runs." in message, message
    assert message.endswith("Kueue evicts it at about 2026-12-02T10:10:01Z unless the Pods become ready."), message
    assert " Nodes: " not in message and status["nodeMatches"], status  # the funnel is in status.nodeMatches


def test_no_catalog_message_is_cut() -> None:
    """Every verdict of the catalog fits its message whole: none is clipped (the mark ends its text, before the
    sentence on Kueue's wording that diagnose appends after clipping)."""
    def cut_short(message: str) -> bool:
        return message.endswith(TRUNCATION_SUFFIX) or f"{TRUNCATION_SUFFIX} Kueue wrote " in message

    cut = [s["name"] for s in SCENARIOS if cut_short(verdict_of(s)["message"])]
    assert not cut, cut


def test_verdicts_do_not_depend_on_the_hash_seed() -> None:
    """Each process of the operator (a restart, a failover, another shard) must write the same message for the same
    objects, or it rewrites every diagnosis: resource names were once gathered in a set, whose order changes with
    PYTHONHASHSEED. Two scenarios that list several resources, diagnosed under three seeds."""
    import json
    import os
    import subprocess

    names = ["kueue-stalled-with-hostname-affinity", "strictfifo-head-blocks-another-flavor"]
    code = ("import json, sys; sys.path[:0] = ['operator', '.']; from tests.unit.test_catalog import SCENARIOS, "
            "verdict_of; print(json.dumps([verdict_of(s)['message'] for s in SCENARIOS if s['name'] in "
            f"{names!r}]))")
    root = Path(__file__).resolve().parents[2]
    runs = {subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(1, 4)}
    assert len(runs) == 1, runs
    assert len(json.loads(runs.pop())) == len(names)
