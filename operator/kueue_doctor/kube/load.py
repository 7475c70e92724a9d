"""Reading object dumps: multi-document YAML or JSON, `kind: List`, JSON arrays, stdin.

Bad input raises `InputError` naming the file, the document and the problem; the CLI turns it into
exit code 2. What can be read around (an object without a name, the same object twice) is read and said in
`warnings`, which the CLI prints. Objects of kinds the engine does not use are kept here and ignored by the state.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import IO, Any

import yaml

from .objects import group_of, lst, m, parse_time

try:  # libyaml is ~10x faster on large dumps; fall back to the pure-Python loader
    _Base: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Base = yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, with timestamps left as the text they are: an unquoted `lastTransitionTime: 2026-11-30
    09:00:00Z` of a hand-edited file reads as the string the apiserver would serve, not a datetime object that
    every string field read would take for absent (and `-o json` could not write)."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


# groups whose objects always have a name (Kueue's visibility answers do not: a PendingWorkloadsSummary has none)
NAMED_GROUPS = frozenset({"kueue.x-k8s.io", "", "batch", "apps"})


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


def _json_values(text: str) -> list[Any] | None:
    """Several JSON values one after another (`kubectl get -o json >> dump.json` for each kind); None when the
    text is not that."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    at, end = 0, len(text)
    while True:
        while at < end and text[at].isspace():
            at += 1
        if at >= end:
            return out
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        out.append(value)


def _split_appended_yaml(text: str) -> str:
    """`kubectl get -o yaml >> dump.yaml` twice writes no `---` between the outputs: YAML reads that as one
    mapping whose later keys silently replace the earlier ones (the whole first List is lost). A second top-level
    `apiVersion:` in one document starts a new object: a separator goes before it. Column 0 holds only top-level
    keys (block scalars and nested values are indented), so nothing else is touched."""
    if text.count("\napiVersion:") + text.startswith("apiVersion:") < 2:
        return text
    out: list[str] = []
    seen = False
    for line in text.splitlines(keepends=True):
        if line.startswith("---"):
            seen = False
        elif line.startswith("apiVersion:"):
            if seen:
                out.append("---\n")
            seen = True
        out.append(line)
    return "".join(out)


def parse_documents(text: str, source: str) -> list[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as exc:
            values = _json_values(text) if exc.msg == "Extra data" else None
            if values is not None:
                return values
            # JSON is YAML: let the YAML parser report the error with a position
    try:
        return list(yaml.load_all(_split_appended_yaml(text), Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}: not valid YAML or JSON{where}: {problem}") from exc


def flatten(doc: Any, source: str, number: int, warnings: list[str] | None = None) -> Iterator[Mapping[str, Any]]:
    """Yield the objects of one document: itself, or the items of a List / JSON array."""
    if doc is None:
        return
    if isinstance(doc, list):
        for n, item in enumerate(doc):
            yield from (flatten(item, source, number, warnings) if isinstance(item, list)
                        else _checked(item, source, number, n, warnings))
        return
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: document {number}: expected a Kubernetes object (a mapping with kind), "
                         f"got a {type(doc).__name__}")
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for n, item in enumerate(doc["items"]):
            inner = item.get("kind") if isinstance(item, Mapping) else None
            if isinstance(inner, str) and inner.endswith("List") and isinstance(item.get("items"), list):
                yield from flatten(item, source, number, warnings)  # a List of Lists (a script's merge)
            else:
                yield from _checked(item, source, number, n, warnings)
        return
    yield from _checked(doc, source, number, None, warnings)


def _checked(item: Any, source: str, number: int, index: int | None, warnings: list[str] | None = None
             ) -> Iterator[Mapping[str, Any]]:
    where = f"{source}: document {number}" + (f", item {index}" if index is not None else "")
    if not isinstance(item, Mapping):
        raise InputError(f"{where}: expected a Kubernetes object, got a {type(item).__name__}")
    if not isinstance(item.get("kind"), str) and item:
        raise InputError(f"{where}: object has no kind (is this `kubectl get -o yaml` output?)")
    if not item:
        return
    name = m(item.get("metadata")).get("name")
    if (not isinstance(name, str) or not name) and group_of(item.get("apiVersion")) in NAMED_GROUPS:
        if warnings is not None:
            warnings.append(f"{where}: a {item['kind']} without metadata.name is left out (no apiserver serves "
                            "one); anything that depends on it is diagnosed as if it were missing")
        return
    yield item


def _identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str] | None:
    """None for a nameless object (Kueue's visibility answers): never taken for a copy of another."""
    md = m(obj.get("metadata"))
    name = md.get("name")
    if not isinstance(name, str) or not name:
        return None
    return group_of(obj.get("apiVersion")), str(obj.get("kind")), str(md.get("namespace") or ""), name


def _newer(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Is `b` a newer copy of the object than `a`? A served copy (with a resourceVersion) over a rendered one
    (Helm, kustomize: no resourceVersion, no status); by resourceVersion where both are numbers (etcd's
    revisions, as every apiserver serves them today); otherwise the later copy in the input, as the state would."""
    ra, rb = m(a.get("metadata")).get("resourceVersion"), m(b.get("metadata")).get("resourceVersion")
    if bool(ra) != bool(rb):
        return bool(rb)
    if isinstance(ra, str) and isinstance(rb, str) and ra.isdigit() and rb.isdigit():
        return int(rb) >= int(ra)
    return True


def newest_copies(objects: list[Mapping[str, Any]], warnings: list[str] | None = None) -> list[Mapping[str, Any]]:
    """One copy of each object (dumps taken at different times, concatenated): the one with the highest
    resourceVersion, in the place of its first copy."""
    at: dict[tuple[str, str, str, str], int] = {}
    out: list[Mapping[str, Any]] = []
    replaced: list[tuple[tuple[str, str, str, str], Any, Any]] = []
    for obj in objects:
        key = _identity(obj)
        if key is None:
            out.append(obj)
            continue
        i = at.get(key)
        if i is None:
            at[key] = len(out)
            out.append(obj)
            continue
        kept, other = (obj, out[i]) if _newer(out[i], obj) else (out[i], obj)
        replaced.append((key, m(kept.get("metadata")).get("resourceVersion"),
                         m(other.get("metadata")).get("resourceVersion")))
        out[i] = kept
    if replaced and warnings is not None:
        (_, kind, ns, name), kept_rv, other_rv = replaced[0]
        warnings.append(f"{len(replaced)} object(s) appear more than once in the input; each is read from its copy "
                        "with the highest metadata.resourceVersion, a copy without one (a rendered manifest) last "
                        f"(the first: {kind} {ns + '/' if ns else ''}{name}, resourceVersion {kept_rv} kept over "
                        f"{other_rv or 'none'})")
    return out


def load_files(paths: list[str], stdin: IO[str] | None = None, warnings: list[str] | None = None
               ) -> list[Mapping[str, Any]]:
    """Every object in the files; what was read around (objects without a name, duplicates) is told in `warnings`
    when a list is given."""
    objects: list[Mapping[str, Any]] = []
    for path in paths:
        source = "<stdin>" if path == "-" else path
        for number, doc in enumerate(parse_documents(read_text(path, stdin), source), start=1):
            objects.extend(flatten(doc, source, number, warnings))
    return newest_copies(objects, warnings)


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
