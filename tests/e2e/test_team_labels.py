"""Team labels on a running operator: `--metric-label-from` puts the Workload's, else the LocalQueue's, else the
ClusterQueue's label on the per-queue metrics as custom_<label>, read from /metrics of the real process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import ClusterQueue, Job, LocalQueue, Namespace, ResourceFlavor

from . import kube
from .conftest import ClusterHandle
from .test_operator import Operator, adiag, run_operator

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def labelled_operator(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    yield from run_operator(cluster, tmp_path_factory, "labelled-operator", "--metric-label-from", "team",
                            "--metric-label-from", "cost_center=example.com/cost-center", "--metric-label-values", "2")


def _waiting(op: Operator, cluster_queue: str) -> dict[str, tuple[str, str]]:
    """workload_namespace -> (custom_team, custom_cost_center) of the oldest-waiting series of the ClusterQueue."""
    out = {}
    for family in text_string_to_metric_families(op.metrics()):
        for s in family.samples:
            if s.name == "kueue_doctor_oldest_waiting_since_timestamp_seconds" and \
                    s.labels.get("cluster_queue") == cluster_queue:
                out[s.labels["workload_namespace"]] = (s.labels.get("custom_team", "<absent>"),
                                                       s.labels.get("custom_cost_center", "<absent>"))
    return out


def test_team_labels_come_from_the_workload_else_localqueue_else_clusterqueue_and_stay_bounded(
        cluster: ClusterHandle, labelled_operator: Operator, resources: kube.Resources) -> None:
    api = cluster.api_client
    suffix = kube.unique_name("tl")
    rf, cq = f"rf-{suffix}", f"cq-{suffix}"
    namespaces = [f"{n}-{suffix}" for n in ("wl", "lq", "cq", "more")]
    for ns in namespaces:
        resources.create(Namespace(ns).manifest())
    resources.create(ResourceFlavor(rf).manifest())
    resources.create(ClusterQueue(cq).quotas({rf: {"cpu": "100m", "pods": "1"}}).label("team", "platform")
                     .label("example.com/cost-center", "cc-42").manifest())
    resources.create(LocalQueue("main", namespaces[0], cq).manifest())
    resources.create(LocalQueue("main", namespaces[1], cq).label("team", "ml").manifest())
    resources.create(LocalQueue("main", namespaces[2], cq).manifest())
    resources.create(LocalQueue("main", namespaces[3], cq).label("team", "zz-third").manifest())
    for ns in namespaces:  # each needs 2 Pods of a ClusterQueue for 1: waiting (the first ExceedsMaxQuota)
        resources.create(Job("big", ns).queue("main").parallelism(2).request("cpu", "100m").manifest())
    wl = kube.wait_for_workload(api, namespaces[0], "big")
    # Kueue copies only configured labels from the Job; the Workload's own label is what the operator reads first
    kube.patch(api, "Workload", wl["metadata"]["name"], {"metadata": {"labels": {"team": "search"}}}, namespaces[0])
    names = {ns: kube.wait_for_workload(api, ns, "big")["metadata"]["name"] for ns in namespaces}
    # every verdict names its ClusterQueue before the first scrape, which admits the values (in sorted order) into
    # the 2 places: a verdict still without its queue (the LocalQueue not yet seen) would give the empty value and
    # let `search` take the place `platform` is meant to win
    def queues() -> list[tuple[str | None, str | None]]:
        found = [adiag(api, ns, n) for ns, n in names.items()]
        return [(d["status"].get("reason"), d["status"].get("clusterQueue")) if d else (None, None) for d in found]

    unsettled = {None, "NoWorkload", "QueueMisconfigured"}  # the queue objects not all seen yet
    kube.wait_for(lambda: all(r not in unsettled and q == cq for r, q in queues()), timeout=60,
                  message=lambda: f"the four diagnoses on {cq}, got {queues()}\n{labelled_operator.tail()}")

    # at most 2 values per label (--metric-label-values 2): ml and platform (sorted first), the rest untracked
    untracked = "kueue.x-k8s.io/_UNTRACKED_VALUE_"
    want = {namespaces[0]: (untracked, "cc-42"), namespaces[1]: ("ml", "cc-42"), namespaces[2]: ("platform", "cc-42"),
            namespaces[3]: (untracked, "cc-42")}
    kube.wait_for(lambda: _waiting(labelled_operator, cq) == want, timeout=60,
                  message=lambda: f"custom labels {want}, got {_waiting(labelled_operator, cq)}\n"
                  f"{labelled_operator.tail()}")
    text = labelled_operator.metrics()
    assert 'kueue_doctor_queue_blocked_workloads{action_by="' in text
    blocked = [ln for ln in text.splitlines() if ln.startswith("kueue_doctor_workloads{") and cq in ln]
    assert {ln.split('custom_team="')[1].split('"')[0] for ln in blocked} == {"ml", "platform", untracked}
    # a value in use keeps its place; when one goes, a waiting value takes it
    kube.delete(api, "Job", "big", namespaces[1])
    del want[namespaces[1]]
    want[namespaces[0]] = ("search", "cc-42")
    kube.wait_for(lambda: _waiting(labelled_operator, cq) == want, timeout=60,
                  message=lambda: f"custom labels {want}, got {_waiting(labelled_operator, cq)}")
