"""The AdmissionDiagnosis API: the committed CRD is generated from the models, and teaches the vocabulary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kueue_doctor import api
from kueue_doctor.vocabulary import CAUSES, REASONS, STAGES

CRD_FILE = Path(__file__).parents[2] / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml"


def test_committed_crd_matches_the_models() -> None:
    assert CRD_FILE.read_text() == api.crd_yaml(), (
        "crds/ is stale: run `kueue-doctor crd > crds/admissiondiagnoses.kueue-doctor.dev.yaml`")


def _walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        out += _walk(sub, f"{path}.{name}")
    if "items" in schema:
        out += _walk(schema["items"], f"{path}[]")
    return out


def test_every_status_and_spec_field_has_a_description_for_kubectl_explain() -> None:
    schema = api.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in ("spec", "status"):
        for path, node in _walk(schema["properties"][part], part):
            if path.endswith("[]"):
                continue  # list items are described by their list field
            assert node.get("description"), f"{path} has no description"


def test_reason_description_lists_every_reason_with_its_stage_and_no_enum() -> None:
    status = api.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    reason = status["properties"]["reason"]
    assert "enum" not in reason  # a newer operator may add reasons before the CRD is upgraded
    for name, info in REASONS.items():
        assert f"- {name} ({info.stage})" in reason["description"]
    for name in CAUSES:
        assert f"- {name}:" in status["properties"]["cause"]["description"]
    for name in STAGES:
        assert f"- {name}:" in status["properties"]["stage"]["description"]


def test_crd_is_structural_without_status_subresource_and_with_printer_columns() -> None:
    crd = api.crd()
    version = crd["spec"]["versions"][0]
    assert "subresources" not in version  # one server-side apply writes the whole object
    assert crd["spec"]["names"]["shortNames"] == ["adiag"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Owner", "Stage", "Reason", "ClusterQueue", "Action", "Since", "OwnerKind", "Message", "Age"]
    schema = version["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert not {"$ref", "anyOf", "oneOf", "allOf", "$defs"} & set(node), path
        assert node.get("type") in ("object", "array", "string", "integer", "boolean"), path


def test_crd_carries_the_schema_hash_the_operator_compares_against() -> None:
    assert api.crd()["metadata"]["annotations"] == {api.SCHEMA_ANNOTATION: api.schema_hash()}


def test_spec_and_status_are_atomic_for_server_side_apply() -> None:
    # the operator is their only writer: the apiserver then keeps no ownership per field, which costs CPU on every
    # write and bytes in every object (bench/write_cost.py)
    props = api.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert props["spec"]["x-kubernetes-map-type"] == "atomic"
    assert props["status"]["x-kubernetes-map-type"] == "atomic"
