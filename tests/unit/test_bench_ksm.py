"""bench/ksm.py: the /metrics parser that finds a Workload's condition series on kube-state-metrics' page, and
the first-seen stamping that makes KSM's reaction time in bench/operator_scale.py --peer ksm."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ksm", ROOT / "bench" / "ksm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_ksm"] = mod
    spec.loader.exec_module(mod)
    return mod


ksm = _load()

# as kube-state-metrics v2.20.0 writes it for hack/ksm/workload-conditions.yaml (label order is KSM's)
PAGE = """\
# HELP kueue_workload_status_condition A condition of a Kueue Workload, one series per condition.
# TYPE kueue_workload_status_condition gauge
kueue_workload_status_condition{customresource_group="kueue.x-k8s.io",customresource_kind="Workload",\
customresource_version="v1beta2",namespace="bench-000",name="wl-00001",queue_name="lq",reason="Pending",\
status="False",type="QuotaReserved"} 0
kueue_workload_status_condition{customresource_group="kueue.x-k8s.io",customresource_kind="Workload",\
customresource_version="v1beta2",namespace="bench-000",name="wl-00000",queue_name="lq",reason="QuotaReserved",\
status="True",type="QuotaReserved"} 1
kueue_workload_status_condition{customresource_group="kueue.x-k8s.io",customresource_kind="Workload",\
customresource_version="v1beta2",namespace="bench-000",name="wl-00000",queue_name="lq",reason="Admitted",\
status="True",type="Admitted"} 1
kueue_workload_status_condition{namespace="team \\"a\\"",name="x",type="PodsReady",status="Unknown",\
reason="Wait\\\\ing"} 0
kueue_workload_status_condition_other{namespace="bench-000",name="wl-00001",type="QuotaReserved"} 7
kube_pod_status_phase{namespace="bench-000",pod="wl-00001-0",phase="Pending"} 1
kueue_workload_status_condition{name="no-namespace",type="Admitted",status="True",reason="Admitted"} 1
"""


def test_condition_series_finds_each_workload_condition_by_namespace_name_and_type() -> None:
    got = ksm.condition_series(PAGE)
    assert got[("bench-000", "wl-00001", "QuotaReserved")] == ksm.Condition("False", "Pending", 0.0)
    assert got[("bench-000", "wl-00000", "QuotaReserved")] == ksm.Condition("True", "QuotaReserved", 1.0)
    assert got[("bench-000", "wl-00000", "Admitted")] == ksm.Condition("True", "Admitted", 1.0)
    # escaped label values come back as the Workload has them
    assert got[('team "a"', "x", "PodsReady")] == ksm.Condition("Unknown", "Wait\\ing", 0.0)
    # another metric whose name starts the same, another collector's series, a series without namespace: not ours
    assert len(got) == 4


def test_condition_series_reads_only_the_family_of_its_metric_on_a_page_with_other_families() -> None:
    pods = "".join(f'kube_pod_info{{namespace="bench-000",pod="p-{i}"}} 1\n' for i in range(2000))
    line = PAGE.splitlines()[2] + "\n"  # wl-00001's QuotaReserved
    page = ("# HELP kube_pod_info Information about pod.\n# TYPE kube_pod_info gauge\n" + pods
            + "# HELP kueue_workload_status_condition A condition.\n# TYPE kueue_workload_status_condition gauge\n"
            + line + "# HELP kube_pod_status_phase The pods current phase.\n# TYPE kube_pod_status_phase gauge\n"
            + 'kube_pod_status_phase{namespace="bench-000",pod="p-0",phase="Pending"} 1\n'
            + 'kueue_workload_status_condition{namespace="stray",name="x",type="Admitted"} 1\n')
    want = {("bench-000", "wl-00001", "QuotaReserved"): ksm.Condition("False", "Pending", 0.0)}
    assert ksm.condition_series(page) == want
    # the family at the end of the page, and a page without any header, read the same
    tail = "# TYPE kueue_workload_status_condition gauge\n" + line
    assert ksm.condition_series(tail) == ksm.condition_series(line) == want


def test_condition_series_of_one_type_skips_the_others() -> None:
    got = ksm.condition_series(PAGE, condition_type="QuotaReserved")
    assert set(got) == {("bench-000", "wl-00001", "QuotaReserved"), ("bench-000", "wl-00000", "QuotaReserved")}


def test_condition_series_of_one_reason_skips_the_others() -> None:
    got = ksm.condition_series(PAGE, condition_type="QuotaReserved", reason="Pending")
    assert set(got) == {("bench-000", "wl-00001", "QuotaReserved")}
    # another label whose name ends in "reason" is not the reason
    other = PAGE.replace('queue_name="lq",reason="QuotaReserved"', 'old_reason="Pending",reason="QuotaReserved"')
    assert ksm.condition_series(other, condition_type="QuotaReserved", reason="Pending").keys() == got.keys()


def test_first_seen_stamps_the_first_scrape_after_the_change_that_shows_the_new_state() -> None:
    key = ("bench-000", "wl-00001", "QuotaReserved")
    other = ("bench-000", "wl-00002", "QuotaReserved")
    old = ksm.Condition("False", "Pending", 0.0)
    new = ksm.Condition("False", "Inadmissible", 0.0)
    scrapes = [
        (9.0, {key: new}),  # before the change was sent: cannot be its effect
        (10.05, {key: old}),  # after, but KSM has not seen the watch event yet
        (10.10, {key: ksm.Condition("True", "Inadmissible", 1.0)}),  # same reason, other status: not it
        (10.15, {key: new, other: new}),
        (10.20, {key: new, other: new}),
    ]
    want = {key: ("False", "Inadmissible"), other: ("False", "Inadmissible")}
    # `other` was never sent: whatever the page shows, it has no reaction time
    assert ksm.first_seen(scrapes, want, after={key: 10.0}) == {key: 10.15}


def test_argv_runs_out_of_cluster_on_loopback_with_the_workload_conditions() -> None:
    cmd = ksm.argv(Path("/c/kube-state-metrics"), Path("/w/admin.kubeconfig"), ksm.CONFIG, 18080, 18081, "pods")
    assert cmd[0] == "/c/kube-state-metrics"
    assert {"--kubeconfig=/w/admin.kubeconfig", f"--custom-resource-state-config-file={ksm.CONFIG}",
            "--host=127.0.0.1", "--port=18080", "--telemetry-host=127.0.0.1", "--telemetry-port=18081",
            "--resources=pods"} == set(cmd[1:])
    only = ksm.argv(Path("/c/ksm"), Path("/w/k"), ksm.CONFIG, 1, 2, "")
    assert "--custom-resource-state-only=true" in only
    assert not any(a.startswith("--resources") for a in only)


def test_the_committed_configuration_exposes_the_metric_the_parser_reads() -> None:
    cfg = yaml.safe_load(ksm.CONFIG.read_text())
    assert cfg["kind"] == "CustomResourceStateMetrics"
    (res,) = cfg["spec"]["resources"]
    assert res["groupVersionKind"] == {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "Workload"}
    (metric,) = res["metrics"]
    assert f"{res['metricNamePrefix']}_{metric['name']}" == ksm.METRIC
    assert res["labelsFromPath"]["namespace"] == ["metadata", "namespace"]
    assert res["labelsFromPath"]["name"] == ["metadata", "name"]
    gauge = metric["each"]["gauge"]
    assert gauge["path"] == ["status", "conditions"]
    assert {"type", "status", "reason"} <= set(gauge["labelsFromPath"])
