"""The Grafana dashboard (charts/kueue-doctor/files/dashboard.json): every query parses (promtool) and uses only
metrics and labels the operator exports; templated on datasource, cluster_queue and workload_namespace."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..prom import (
    DASHBOARD,
    ROOT,
    check_exprs_parse,
    check_names,
    exported_metrics,
    grafana_to_promql,
    names_in,
    need_binary,
)


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panels() -> list[dict[str, Any]]:
    out = []
    for p in dashboard()["panels"]:
        out.append(p)
        out.extend(p.get("panels") or [])  # collapsed rows keep their panels inside
    return out


def queries() -> dict[str, str]:
    """'panel title [refId]' -> expr, for every panel target and templating query."""
    out = {}
    for p in panels():
        for t in p.get("targets") or []:
            out[f"{p['title']} [{t['refId']}]"] = t["expr"]
    return out


def test_is_a_grafana_dashboard_with_a_stable_uid_and_unique_panel_ids() -> None:
    d = dashboard()
    assert d["uid"] == "kueue-doctor" and d["title"] and d["schemaVersion"] >= 36
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    for p in panels():
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]), p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]


def test_templated_on_datasource_cluster_queue_and_workload_namespace() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name, metric in (("cluster_queue", "kueue_doctor_workloads"),
                         ("workload_namespace", "kueue_doctor_oldest_waiting_since_timestamp_seconds")):
        v = variables[name]
        assert v["type"] == "query" and v["datasource"]["uid"] == "${datasource}"
        assert v["query"]["query"] == f"label_values({metric}, {name})"
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"  # .* also keeps cluster_queue=""
        assert name in exported_metrics()[metric]
    for p in panels():
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}", p["title"]


def test_every_selector_of_a_filterable_metric_is_filtered_by_the_variables() -> None:
    exported = exported_metrics()
    for title, expr in queries().items():
        for sel in names_in(grafana_to_promql(expr)).selectors:
            for label in ("cluster_queue", "workload_namespace"):
                if label in exported.get(sel.metric, set()):
                    assert sel.matchers.get(label) == ("=~", ".*"), f"{title}: {sel.metric} not filtered by ${label}"
        # each label is filtered by its own variable (not cluster_queue=~"$workload_namespace")
        for label, variable in re.findall(r'(\w+)=~"\$(\w+)"', expr):
            assert label == variable, f"{title}: {label}=~${variable}"


def test_queries_use_only_metrics_the_operator_exports_and_only_their_labels() -> None:
    exported = exported_metrics()
    problems = {title: p for title, expr in queries().items() if (p := check_names(expr, exported))}
    assert problems == {}


def test_exported_metrics_are_the_ones_docs_metrics_md_lists() -> None:
    """The reference for names is docs/metrics.md; the dashboard checks run against the live collector."""
    doc = (ROOT / "docs" / "metrics.md").read_text()
    documented = {}
    for name, kind in re.findall(r"^\| `(kueue_doctor_\w+)` \| (\w+) \|", doc, re.M):
        documented[name] = kind
    exported = set(exported_metrics())
    for name, kind in documented.items():
        expected = {"counter": {name if name.endswith("_total") else name + "_total"},
                    "summary": {name + "_count", name + "_sum"},
                    "histogram": {name + "_bucket", name + "_count", name + "_sum"}}.get(kind, {name})
        assert expected <= exported, (name, kind)


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    exprs = queries()
    used = set().union(*(names_in(grafana_to_promql(e)).metrics for e in exprs.values()))
    # operator health: passes, duration, writes by result, errors, last pass age, resource access, Kueue CRDs
    assert {"kueue_doctor_diagnosis_passes_total", "kueue_doctor_diagnosis_pass_duration_seconds_sum",
            "kueue_doctor_diagnosis_pass_duration_seconds_count", "kueue_doctor_writes_total",
            "kueue_doctor_errors_total", "kueue_doctor_last_successful_pass_timestamp_seconds",
            "kueue_doctor_resource_access", "kueue_doctor_kueue_crds_installed", "kueue_doctor_workloads",
            "kueue_doctor_oldest_waiting_since_timestamp_seconds",
            "kueue_doctor_workload_waiting_since_timestamp_seconds"} <= used
    by_title = {p["title"]: p for p in panels()}
    stage_reason = by_title["Waiting Workloads by stage and reason"]["targets"][0]["expr"]
    assert "sum by (stage, reason)" in stage_reason
    split = by_title["Admission vs scheduling per ClusterQueue"]["targets"][0]["expr"]
    assert "sum by (cluster_queue, stage)" in split
    oldest = by_title["Oldest waiting Workloads"]
    assert oldest["type"] == "table" and "kueue_doctor_workload_waiting_since_timestamp_seconds" in \
        oldest["targets"][0]["expr"]
    assert oldest["options"]["sortBy"][0]["desc"] is True
    assert oldest["targets"][0]["instant"] and oldest["targets"][0]["format"] == "table"
    misconfigured = by_title["Misconfigured Workloads"]["targets"][0]["expr"]
    assert 'reason=~"QueueMisconfigured|ExceedsMaxQuota|NoWorkload"' in misconfigured  # Kueue never took these


def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    promtool = need_binary("promtool")
    exprs = queries()
    for v in dashboard()["templating"]["list"]:
        if v["type"] == "query":  # label_values(metric, label): the metric selector must parse
            m = re.fullmatch(r"label_values\((.+), (\w+)\)", v["query"]["query"])
            assert m, v["query"]
            exprs[f"variable {v['name']}"] = m.group(1)
    assert check_exprs_parse(promtool, exprs, tmp_path) == ""


def test_the_parser_check_catches_a_broken_query(tmp_path: Path) -> None:
    """The promtool check is real: a broken expression fails it and names the panel."""
    promtool = need_binary("promtool")
    out = check_exprs_parse(promtool, {"ok": "sum(kueue_doctor_workloads)", "broken panel": "sum by (stage (x"},
                            tmp_path)
    assert "broken panel" in out and out.strip()
