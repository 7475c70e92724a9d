"""Label selectors, evaluated as the apiserver does (matchLabels AND matchExpressions), and node selector terms
(required node affinity) as kube-scheduler does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .objects import lst, m, s


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    for k, v in m(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for expr in lst(selector.get("matchExpressions")):
        expr = m(expr)
        key, op, values = s(expr.get("key")) or "", expr.get("operator"), lst(expr.get("values"))
        present = key in labels
        if op == "In" and (not present or labels.get(key) not in values):
            return False
        if op == "NotIn" and present and labels.get(key) in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    key, op, values = s(expr.get("key")) or "", s(expr.get("operator")), [str(v) for v in lst(expr.get("values"))]
    present = key in labels
    value = str(labels.get(key)) if present else ""
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values and value.lstrip("-").isdigit() and values[0].lstrip("-").isdigit():
        return int(value) > int(values[0]) if op == "Gt" else int(value) < int(values[0])
    return False


def node_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """One nodeSelectorTerm of a required node affinity against a Node (its labels; matchFields metadata.name)."""
    meta = m(node.get("metadata"))
    labels = m(meta.get("labels"))
    exprs, fields = lst(term.get("matchExpressions")), lst(term.get("matchFields"))
    if not exprs and not fields:
        return False  # an empty term matches nothing (nodeaffinity semantics)
    if not all(_expression_matches(m(e), labels) for e in exprs):
        return False
    for f in fields:
        f = m(f)
        if s(f.get("key")) == "metadata.name" and not _expression_matches(
                {**f, "key": "n"}, {"n": s(meta.get("name")) or ""}):
            return False
    return True
