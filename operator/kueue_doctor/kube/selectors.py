"""Label selectors, evaluated as the apiserver does (matchLabels AND matchExpressions)."""

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
