"""What the nodes a flavor sends Pods to look like (only when Nodes are in the input)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...kube.objects import conditions, is_true, lst, m, s, spec
from ...kube.selectors import label_selector_matches
from ...state import Derived
from ..context import Context


def flavor_selector(ctx: Context, flavor: str) -> str:
    rf = ctx.state.flavors.get(flavor)
    labels = m(spec(rf).get("nodeLabels")) if rf else {}
    return ",".join(f"{k}={v}" for k, v in labels.items())


def flavor_node_hint(ctx: Context, flavor: str) -> str | None:
    """How many known nodes carry the flavor's nodeLabels (only when Nodes are in the input).

    The same for every unschedulable Workload of the flavor and a walk over all Nodes: kept per index
    with the Node count it was computed at (Node changes do not rebuild the index)."""
    memo = ctx.state.derived(NODE_HINTS)
    version = (ctx.state.nodes_version, ctx.state.knows("Node"))
    found = memo.get(flavor)
    if found is None or found[0] != version:
        found = memo[flavor] = (version, _flavor_node_hint(ctx, flavor))
    return found[1]


NODE_HINTS: Derived[dict[str, tuple[tuple[int, bool], str | None]]] = Derived("node hint per ResourceFlavor",
                                                                              lambda _: {})


def _flavor_node_hint(ctx: Context, flavor: str) -> str | None:
    rf = ctx.state.flavors.get(flavor)
    if rf is None:
        return None
    labels = dict(m(spec(rf).get("nodeLabels")))
    taints = [m(t) for t in lst(spec(rf).get("nodeTaints"))]
    if not labels and not taints:
        return None
    desc = f"ResourceFlavor {flavor} sends the Pods to nodes with " + (
        ",".join(f"{k}={v}" for k, v in labels.items()) or "any labels")
    if ctx.state.knows("Node"):
        matching = [n for n in ctx.state.nodes.values()
                    if label_selector_matches({"matchLabels": labels}, m(m(n.get("metadata")).get("labels")))]
        ready = [n for n in matching if is_true(conditions(n).get("Ready")) and not spec(n).get("unschedulable")]
        desc += f": {len(matching)} of {len(ctx.state.nodes)} nodes match ({len(ready)} ready and schedulable"
        node_taints = _node_taints(matching)
        desc += f"; tainted {', '.join(node_taints[:3])})" if node_taints else ")"
        if not matching:
            desc += "; fix the flavor's nodeLabels or label the nodes"
    return desc + "."


def _node_taints(nodes: list[Mapping[str, Any]]) -> list[str]:
    """Distinct NoSchedule/NoExecute taints of these nodes, as ``key=value:Effect``."""
    out: list[str] = []
    for n in nodes:
        for t in lst(spec(n).get("taints")):
            t = m(t)
            if t.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            value = s(t.get("value"))
            text = f"{s(t.get('key'))}{'=' + value if value else ''}:{t.get('effect')}"
            if text not in out:
                out.append(text)
    return out
