"""The alert rules (charts/kueue-doctor/files/alerts.rules.yaml): valid, tested by promtool, documented, shipped.

promtool comes from `bash hack/prometheus.sh`; without it the promtool tests skip locally and fail in CI.
`python -m tests.unit.test_alerts` rewrites manifests/overlays/prometheus-rule/prometheusrule.yaml from the
rules file.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..prom import (
    ALERT_TESTS,
    ALERTS_DOC,
    PROMETHEUS_RULE,
    ROOT,
    RULES,
    alerts,
    check_names,
    exported_metrics,
    load_rules,
    names_in,
    need_binary,
    run,
)

RUNBOOK_BASE = "https://github.com/kueue-doctor/kueue-doctor/blob/main/docs/alerts.md#"
WORKLOAD_GAUGE = "kueue_doctor_oldest_waiting_since_timestamp_seconds"
CAPPED_SERIES = "kueue_doctor_workload_waiting_since_timestamp_seconds"
SEVERITIES = {"critical", "warning", "info"}
# Prometheus' alert template language only: no Helm/Go-template of the chart may sneak in
TEMPLATE_ACTION = re.compile(r"\{\{\s*(.*?)\s*\}\}")
ALLOWED_ACTION = re.compile(
    r"^(\$labels\.\w+|\$value(\s*\|\s*(humanize|humanizeDuration|humanizePercentage))?|with \$labels\.\w+|\.|else|end)$")


def prometheus_rule_document() -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "kueue-doctor", "namespace": "kueue-doctor",
                     "labels": {"app.kubernetes.io/name": "kueue-doctor", "app.kubernetes.io/part-of": "kueue-doctor"}},
        "spec": {"groups": load_rules()["groups"]},
    }


def write_prometheus_rule() -> None:
    header = ("# Generated from charts/kueue-doctor/files/alerts.rules.yaml by `python -m tests.unit.test_alerts`;\n"
              "# tests/unit/test_alerts.py fails when the groups differ. Runbooks: docs/alerts.md.\n")
    PROMETHEUS_RULE.write_text(header + yaml.safe_dump(prometheus_rule_document(), sort_keys=False, width=200))


def alert_tests() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(ALERT_TESTS.glob("*.test.yaml")):
        doc = yaml.safe_load(path.read_text())
        for t in doc["tests"]:
            out.extend(t.get("alert_rule_test") or [])
    return out


def threshold(expr: str) -> float | None:
    m = re.search(r">\s*([0-9.]+)\s*$", expr)
    return float(m.group(1)) if m else None


# ----- structure, without promtool -----

def test_every_alert_is_complete_and_named_for_kueue_doctor() -> None:
    rules = alerts()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)), names
    assert {"KueueDoctorClusterQueueMisconfigured", "KueueDoctorQueueMisconfigured", "KueueDoctorExceedsMaxQuota",
            "KueueDoctorWaitingForQuotaTooLong", "KueueDoctorPodsUnschedulable", "KueueDoctorContainersNotStarting",
            "KueueDoctorDown", "KueueDoctorPassesStalled"} <= set(names)
    for r in rules:
        assert r["alert"].startswith("KueueDoctor"), r["alert"]
        assert r["labels"]["severity"] in SEVERITIES, r["alert"]
        assert set(r["annotations"]) >= {"summary", "description", "runbook_url"}, r["alert"]
        assert r["annotations"]["runbook_url"] == RUNBOOK_BASE + r["alert"].lower(), r["alert"]
        assert "for" in r, r["alert"]


def test_templates_are_prometheus_templates_only_and_use_labels_the_series_have() -> None:
    exported = exported_metrics()
    for r in alerts():
        labels = set().union(*(exported.get(s.metric, {"job", "instance"}) for s in names_in(r["expr"]).selectors))
        labels |= {"job", "instance"}
        for text in r["annotations"].values():
            for action in TEMPLATE_ACTION.findall(text):
                assert ALLOWED_ACTION.match(action), f"{r['alert']}: unexpected template action {{{{ {action} }}}}"
            for used in re.findall(r"\$labels\.(\w+)", text):
                assert used in labels, f"{r['alert']}: $labels.{used} is not a label of {sorted(labels)}"


def test_expressions_use_only_exported_metrics_and_their_labels() -> None:
    exported = exported_metrics()
    for r in alerts():
        assert check_names(r["expr"], exported) == [], r["alert"]


def test_workload_alerts_use_the_complete_per_queue_gauge_never_the_capped_series() -> None:
    for r in alerts():
        metrics = names_in(r["expr"]).metrics
        assert CAPPED_SERIES not in metrics, r["alert"]
        if WORKLOAD_GAUGE in metrics:
            assert r["expr"].startswith(f"time() - {WORKLOAD_GAUGE}{{"), r["alert"]
            assert threshold(r["expr"]) is not None, f"{r['alert']}: a Workload alert needs `> <seconds>` at the end"
            for label in ("workload_namespace", "local_queue", "cluster_queue", "reason"):
                assert f"$labels.{label}" in r["annotations"]["description"], (r["alert"], label)


def test_platform_faults_page_and_tenant_faults_warn() -> None:
    by_name = {r["alert"]: r for r in alerts()}
    platform = by_name["KueueDoctorClusterQueueMisconfigured"]
    tenant = by_name["KueueDoctorQueueMisconfigured"]
    assert platform["labels"]["severity"] == "critical"
    assert 'action_by="ClusterAdmin"' in platform["expr"]
    assert tenant["labels"]["severity"] == "warning"
    assert 'action_by!="ClusterAdmin"' in tenant["expr"]
    # every other alert is below critical: one page per broken platform queue, nothing else wakes anyone
    assert [n for n, r in by_name.items() if r["labels"]["severity"] == "critical"] == [
        "KueueDoctorClusterQueueMisconfigured"]


def test_thresholds_match_the_issue() -> None:
    by_name = {r["alert"]: r for r in alerts()}
    assert threshold(by_name["KueueDoctorClusterQueueMisconfigured"]["expr"]) == 300
    assert threshold(by_name["KueueDoctorQueueMisconfigured"]["expr"]) == 300
    assert threshold(by_name["KueueDoctorExceedsMaxQuota"]["expr"]) == 300
    assert threshold(by_name["KueueDoctorNoWorkload"]["expr"]) == 300
    assert threshold(by_name["KueueDoctorWaitingForQuotaTooLong"]["expr"]) == 3600
    assert threshold(by_name["KueueDoctorPodsUnschedulable"]["expr"]) == 900
    assert threshold(by_name["KueueDoctorContainersNotStarting"]["expr"]) == 900
    # three resync intervals (300 s by default): a quiet cluster completes one pass per resync only
    assert threshold(by_name["KueueDoctorPassesStalled"]["expr"]) == 900


def test_every_alert_has_a_runbook_section_and_every_section_an_alert() -> None:
    doc = ALERTS_DOC.read_text()
    anchors = set(re.findall(r'<a id="(kueuedoctor\w+)"></a>', doc))
    names = {r["alert"].lower() for r in alerts()}
    assert anchors == names
    for r in alerts():
        section = doc.split(f'<a id="{r["alert"].lower()}"></a>')[1].split("\n### ")[0]
        assert "**Meaning.**" in section and "**What to do.**" in section, r["alert"]
        if WORKLOAD_GAUGE in r["expr"]:
            assert "kubectl get adiag" in section and "-l kueue-doctor.dev/reason=" in section, r["alert"]


def test_every_alert_is_proven_to_fire_and_to_stay_silent_by_a_promtool_test() -> None:
    cases = alert_tests()
    for r in alerts():
        mine = [c for c in cases if c["alertname"] == r["alert"]]
        assert any(c.get("exp_alerts") for c in mine), f"{r['alert']}: no promtool test shows it firing"
        assert any(not c.get("exp_alerts") for c in mine), f"{r['alert']}: no promtool test shows it silent"


def test_no_helm_template_syntax_in_the_plain_rules_file() -> None:
    text = RULES.read_text()
    assert "{{-" not in text and "-}}" not in text and ".Values" not in text and ".Release" not in text


def test_prometheus_rule_overlay_holds_exactly_the_rules_file_groups() -> None:
    docs = [d for d in yaml.safe_load_all(PROMETHEUS_RULE.read_text()) if d]
    (rule,) = docs
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"]["groups"] == load_rules()["groups"], (
        "manifests/overlays/prometheus-rule/prometheusrule.yaml differs from the rules file: "
        "run `python -m tests.unit.test_alerts`")
    kustomization = yaml.safe_load((PROMETHEUS_RULE.parent / "kustomization.yaml").read_text())
    assert "prometheusrule.yaml" in kustomization["resources"] and "../../base" in kustomization["resources"]


def test_the_overlay_renders_with_kustomize(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    out = subprocess.run([kubectl, "kustomize", str(PROMETHEUS_RULE.parent)], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out) if d}
    rule = docs["PrometheusRule", "kueue-doctor"]
    assert rule["metadata"]["namespace"] == "kueue-doctor"
    assert rule["spec"]["groups"] == load_rules()["groups"]
    # the ServiceMonitor (overlays/service-monitor) names the job after this Service: KueueDoctorDown matches it
    service = docs["Service", "kueue-doctor-metrics"]
    assert re.fullmatch(".*kueue-doctor.*", service["metadata"]["name"])
    assert ("Deployment", "kueue-doctor") in docs


# ----- promtool -----

def test_promtool_check_rules_accepts_the_file() -> None:
    promtool = need_binary("promtool")
    res = run([promtool, "check", "rules", str(RULES)])
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in res.stdout


def test_promtool_unit_tests_pass() -> None:
    promtool = need_binary("promtool")
    files = sorted(str(p.relative_to(ROOT)) for p in ALERT_TESTS.glob("*.test.yaml"))
    assert files
    res = subprocess.run([promtool, "test", "rules", *files], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("SUCCESS") == len(files), res.stdout


if __name__ == "__main__":
    write_prometheus_rule()
    print(f"wrote {PROMETHEUS_RULE.relative_to(ROOT)}")
