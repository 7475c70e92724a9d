"""Reading object dumps: multi-document YAML or JSON, `kind: List`, JSON arrays, stdin.

Bad input raises `InputError` naming the file, the document and the problem; the CLI turns it into
exit code 2. Objects of kinds the engine does not use are kept here and ignored by the state.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

import yaml

from .objects import lst, m, parse_time

try:  # libyaml is ~10x faster on large dumps; fall back to the pure-Python loader
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader


class InputError(Exception):
    """Unreadable input, with the file and document it was found in."""


def read_text(path: str, stdin: IO[str] | None = None) -> str:
    if path == "-":
        return (stdin or sys.stdin).read()
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def parse_documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError:
            pass  # JSON is YAML: let the YAML parser report the error with a position
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}: not valid YAML or JSON{where}: {problem}") from exc


def flatten(doc: Any, source: str, number: int) -> Iterator[Mapping[str, Any]]:
    """Yield the objects of one document: itself, or the items of a List / JSON array."""
    if doc is None:
        return
    if isinstance(doc, list):
        for n, item in enumerate(doc):
            yield from flatten(item, source, number) if isinstance(item, list) else _checked(item, source, number, n)
        return
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: document {number}: expected a Kubernetes object (a mapping with kind), "
                         f"got a {type(doc).__name__}")
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for n, item in enumerate(doc["items"]):
            yield from _checked(item, source, number, n)
        return
    yield from _checked(doc, source, number, None)


def _checked(item: Any, source: str, number: int, index: int | None) -> Iterator[Mapping[str, Any]]:
    where = f"{source}: document {number}" + (f", item {index}" if index is not None else "")
    if not isinstance(item, Mapping):
        raise InputError(f"{where}: expected a Kubernetes object, got a {type(item).__name__}")
    if not isinstance(item.get("kind"), str) and item:
        raise InputError(f"{where}: object has no kind (is this `kubectl get -o yaml` output?)")
    if item:
        yield item


def load_files(paths: list[str], stdin: IO[str] | None = None) -> list[Mapping[str, Any]]:
    objects: list[Mapping[str, Any]] = []
    for path in paths:
        source = "<stdin>" if path == "-" else path
        for number, doc in enumerate(parse_documents(read_text(path, stdin), source), start=1):
            objects.extend(flatten(doc, source, number))
    return objects


def newest_timestamp(objects: list[Mapping[str, Any]]) -> datetime | None:
    """The snapshot time of a dump: the newest timestamp the objects carry."""
    newest: datetime | None = None

    def see(value: Any) -> None:
        nonlocal newest
        t = parse_time(value)
        if t is not None and (newest is None or t > newest):
            newest = t

    for obj in objects:
        meta = m(obj.get("metadata"))
        see(meta.get("creationTimestamp"))
        see(meta.get("deletionTimestamp"))
        st = m(obj.get("status"))
        for cond in lst(st.get("conditions")):
            see(m(cond).get("lastTransitionTime"))
            see(m(cond).get("lastProbeTime"))
        for check in lst(st.get("admissionChecks")):
            see(m(check).get("lastTransitionTime"))
        for key in ("lastTimestamp", "firstTimestamp", "eventTime"):
            see(obj.get(key))
        see(m(obj.get("series")).get("lastObservedTime"))
        for cs in lst(st.get("containerStatuses")):
            state = m(m(cs).get("state"))
            see(m(state.get("running")).get("startedAt"))
            see(m(state.get("terminated")).get("finishedAt"))
    return newest
