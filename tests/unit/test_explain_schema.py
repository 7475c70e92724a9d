"""The machine-readable contract: the JSON Schema of `explain -o json`, generated from the pydantic models."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema

from kueue_doctor.api import EXPLAIN_SCHEMA_PATH, explain_schema_json
from kueue_doctor.cli import main

ROOT = Path(__file__).parents[2]


def test_the_committed_schema_is_the_one_the_models_generate() -> None:
    committed = (ROOT / EXPLAIN_SCHEMA_PATH).read_text()
    assert committed == explain_schema_json(), (
        f"{EXPLAIN_SCHEMA_PATH} is stale: run `python -m kueue_doctor schema > {EXPLAIN_SCHEMA_PATH}` "
        "(or `python hack/gen_docs.py`, which writes it too) and commit it; a changed field is a contract change "
        "for CHANGELOG.md")
    out = io.StringIO()
    assert main(["schema"], stdout=out) == 0 and out.getvalue() == committed


def test_every_bundled_example_validates_against_it_and_a_broken_output_does_not() -> None:
    schema = json.loads((ROOT / EXPLAIN_SCHEMA_PATH).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        out = io.StringIO()
        assert main(["explain", "-f", str(example), "-o", "json"], stdout=out) == 0
        doc = json.loads(out.getvalue())
        assert doc and not list(validator.iter_errors(doc)), example.name
    broken = json.loads(out.getvalue())
    del broken[0]["status"]["reason"]
    broken[0]["status"]["quota"] = [{"flavor": "f"}]
    errors = {e.message for e in validator.iter_errors(broken)}
    assert "'reason' is a required property" in errors and "'resource' is a required property" in errors
