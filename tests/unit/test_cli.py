"""`kueue-doctor explain` and `crd` as a user runs them: files, stdin, formats, errors, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import yaml

from kueue_doctor.cli import main
from tests.builders import ClusterQueue, Job, LocalQueue, Pod, ResourceFlavor, Workload, condition

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "headlamp-exceeds-max-quota.yaml"


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_bundled_headlamp_example_is_exceeds_max_quota_in_the_table() -> None:
    code, out, err = run("explain", "-f", str(EXAMPLE))
    assert code == 0, err
    header, row = out.splitlines()[:2]
    assert header.split()[:7] == ["NAMESPACE", "WORKLOAD", "STAGE", "REASON", "CAUSE", "ACTION", "FOR"]
    assert row.split()[:6] == ["default", "job-sample-job-8c7a4", "Admission", "ExceedsMaxQuota",
                               "ExceedsNominalQuota", "QueueAdmin"]


def test_json_output_is_an_array_of_admission_diagnosis_objects() -> None:
    code, out, _ = run("explain", "-f", str(EXAMPLE), "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert isinstance(doc, list) and doc[0]["kind"] == "AdmissionDiagnosis"
    assert doc[0]["status"]["quota"][0]["requested"] == "3"


def test_yaml_from_stdin_with_multiple_documents_and_unused_kinds(tmp_path: Path) -> None:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "unrelated", "namespace": "team-a"}},
        ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "1"}}).obj(),
        LocalQueue("user-queue", "team-a", "cq").stop_policy("Hold").obj(),
        Workload("job-a-11111", "team-a").queue("user-queue").request("cpu", "1").condition(condition(
            "QuotaReserved", "False", "Inadmissible", "LocalQueue user-queue is stopped")).obj(),
    ]
    code, out, err = run("explain", "-f", "-", "-o", "yaml", stdin=yaml.safe_dump_all(objs))
    assert code == 0, err
    (doc,) = list(yaml.safe_load_all(out))
    assert doc["status"]["reason"] == "QueueStopped"


def test_namespace_and_name_filters() -> None:
    objs = [Workload("job-a-11111", "a").queue("user-queue").obj(), Workload("job-b-22222", "b").queue("user-queue").obj()]
    stdin = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    code, out, _ = run("explain", "-f", "-", "-n", "b", "-o", "json", stdin=stdin)
    assert [d["metadata"]["name"] for d in json.loads(out)] == ["job-b-22222"]
    code, out, err = run("explain", "-f", "-", "job-zzz", stdin=stdin)
    assert code == 1 and "no Workload named job-zzz" in err


def test_unreadable_yaml_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "dump.yaml"
    bad.write_text("apiVersion: v1\nkind: List\nitems: [\n  - {a: 1\n")
    code, _, err = run("explain", "-f", str(bad))
    assert code == 2
    assert str(bad) in err and "line" in err


def test_a_document_that_is_not_an_object_exits_2_naming_the_document(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("kind: Namespace\napiVersion: v1\nmetadata: {name: a}\n---\njust a string\n")
    code, _, err = run("explain", "-f", str(f))
    assert code == 2 and "document 2" in err and "str" in err


def _example_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(EXAMPLE.read_text())["items"]
    return items


def test_kubectl_json_outputs_appended_to_one_file_are_read_as_one_dump(tmp_path: Path) -> None:
    """`kubectl get clusterqueues,localqueues -o json > dump.json; kubectl get workloads -o json >> dump.json`."""
    items = _example_items()
    workloads = [o for o in items if o["kind"] == "Workload"]
    others = [o for o in items if o["kind"] != "Workload"]
    dump = tmp_path / "dump.json"
    dump.write_text("\n".join(json.dumps({"apiVersion": "v1", "kind": "List", "items": part}, indent=2)
                              for part in (others, workloads)) + "\n")
    code, out, err = run("explain", "-f", str(dump))
    assert code == 0, err
    assert out.splitlines()[1].split()[3] == "ExceedsMaxQuota"
    dump.write_text(json.dumps(others) + "\n{ broken")  # a broken tail is still an error with its position
    code, _, err = run("explain", "-f", str(dump))
    assert code == 2 and "line 2" in err, err


def test_kubectl_yaml_outputs_appended_without_a_separator_are_read_whole(tmp_path: Path) -> None:
    """The README's recipe: `kubectl get ... -o yaml > dump.yaml; kubectl get configmap ... -o yaml >> dump.yaml`
    writes no `---` between the two outputs, which YAML reads as one mapping whose later keys replace the
    earlier (the whole List lost); a List of Lists (a script's merge) is read too."""
    items = _example_items()
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system", "resourceVersion": "7"},
                  "data": {"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
                                                             "kind: Configuration\n"}}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}) + yaml.safe_dump(config_map))
    code, out, err = run("explain", "-f", str(dump))
    assert code == 0, err
    assert out.splitlines()[1].split()[3] == "ExceedsMaxQuota", out
    nested = {"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": items}]}
    dump.write_text(yaml.safe_dump(nested))
    code, out, err = run("explain", "-f", str(dump))
    assert code == 0 and not err and out.splitlines()[1].split()[3] == "ExceedsMaxQuota", (out, err)


def test_a_rendered_copy_of_a_queue_never_replaces_the_served_one(tmp_path: Path) -> None:
    """`helm template` / `kustomize build` output beside the dump: the same ClusterQueue without resourceVersion
    and status; the apiserver's copy (its status says what is in use) is the one read, wherever it stands."""
    items = _example_items()
    (cq,) = [o for o in items if o["kind"] == "ClusterQueue"]
    cq["metadata"]["resourceVersion"] = "2616"
    rendered = {"apiVersion": cq["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": cq["metadata"]["name"]},
                "spec": {**cq["spec"], "stopPolicy": "Hold"}}
    for order in ([*items, rendered], [rendered, *items]):
        f = tmp_path / "with-rendered.yaml"
        f.write_text(yaml.safe_dump_all(order))
        code, out, err = run("explain", "-f", str(f))
        assert code == 0, err
        assert out.splitlines()[1].split()[3] == "ExceedsMaxQuota", out  # not stopped: the served copy is read
        assert "resourceVersion 2616 kept over none" in err, err


def test_two_copies_of_a_workload_read_the_newest_and_say_so(tmp_path: Path) -> None:
    """Two dumps taken minutes apart, concatenated: the copy with the higher resourceVersion is the Workload now,
    wherever it stands in the input."""
    items = _example_items()
    (wl,) = [o for o in items if o["kind"] == "Workload"]
    older = json.loads(json.dumps(wl))
    newer = json.loads(json.dumps(wl))
    older["metadata"]["resourceVersion"], newer["metadata"]["resourceVersion"] = "900", "1000"
    newer["status"]["conditions"] = [c for c in newer["status"]["conditions"] if c["type"] != "QuotaReserved"]
    rest = [o for o in items if o is not wl]
    for order in ([newer, older], [older, newer]):
        f = tmp_path / "dupes.yaml"
        f.write_text(yaml.safe_dump_all([*rest, *order]))
        code, out, err = run("explain", "-f", str(f), "-o", "json")
        assert code == 0, err
        (d,) = json.loads(out)
        assert d["status"]["reason"] == "NotYetEvaluated", order  # the newer copy has no QuotaReserved yet
        assert "1 object(s) appear more than once" in err and "resourceVersion 1000 kept over 900" in err
    # Kueue's visibility answers have no name: two of them (two ClusterQueues' `--raw` reads) are no copies
    from kueue_doctor.kube.load import newest_copies
    summary = {"kind": "PendingWorkloadsSummary", "apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "metadata": {},
               "items": []}
    assert len(newest_copies([summary, {**summary, "items": [{"metadata": {"name": "x"}}]}])) == 2


def test_objects_no_apiserver_serves_are_named_not_mistaken(tmp_path: Path) -> None:
    """A nameless object is left out with a warning naming where it was; a Workload whose conditions or pod sets
    are not lists is Unknown/MalformedWorkload naming the field (it would otherwise read as not yet evaluated)."""
    items = _example_items()
    (wl,) = [o for o in items if o["kind"] == "Workload"]
    rest = [o for o in items if o is not wl]
    cases: list[tuple[Any, str]] = [
        ({**wl, "status": {**wl["status"], "conditions": "QuotaReserved=False"}}, "status.conditions as a str"),
        ({**wl, "status": {**wl["status"], "conditions": [*wl["status"]["conditions"], "x"]}},
         "status.conditions[1] as a str"),
        ({**wl, "spec": {**wl["spec"], "podSets": {"main": 1}}}, "spec.podSets as a dict"),
        ({**wl, "status": ["QuotaReserved"]}, "status as a list"),
    ]
    for broken, said in cases:
        f = tmp_path / "broken.yaml"
        f.write_text(yaml.safe_dump_all([*rest, broken]))
        code, out, err = run("explain", "-f", str(f), "-o", "json")
        assert code == 0, err
        (d,) = json.loads(out)
        assert (d["status"]["reason"], d["status"]["cause"]) == ("Unknown", "MalformedWorkload"), said
        assert said in d["status"]["message"], d["status"]["message"]
    f = tmp_path / "nameless.yaml"
    f.write_text(yaml.safe_dump_all([*rest, {**wl, "metadata": None}]))
    code, out, err = run("explain", "-f", str(f))
    assert code == 0, err
    assert f"{f}: document {len(rest) + 1}: a Workload without metadata.name is left out" in err, err


def test_missing_file_exits_2() -> None:
    code, _, err = run("explain", "-f", "/nonexistent/dump.yaml")
    assert code == 2 and "/nonexistent/dump.yaml" in err


def test_now_defaults_to_the_newest_timestamp_of_the_dump_and_can_be_overridden() -> None:
    code, out, _ = run("explain", "-f", str(EXAMPLE))
    assert out.splitlines()[1].split()[6] == "0s"
    code, out, _ = run("explain", "-f", str(EXAMPLE), "--now", "2026-11-30T10:05:01Z")
    assert out.splitlines()[1].split()[6] == "2h00m"
    code, _, err = run("explain", "-f", str(EXAMPLE), "--now", "yesterday")
    assert code == 2 and "RFC 3339" in err


def test_crd_command_prints_the_committed_crd() -> None:
    code, out, _ = run("crd")
    assert code == 0
    assert out == (ROOT / "crds" / "admissiondiagnoses.kueue-doctor.dev.yaml").read_text()


EXPECTED_EXAMPLES = {
    "headlamp-exceeds-max-quota.yaml": {"ExceedsMaxQuota"},
    "preemption-in-progress.yaml": {"WaitingForPreemption", "Preempted"},
    "admitted-pods-unschedulable.yaml": {"PodsUnschedulable"},
    "waiting-for-quota.yaml": {"WaitingForQuota", "Running"},
    "borrowing-limit-reached.yaml": {"ExceedsMaxQuota"},
    "jobset-without-workload.yaml": {"NoWorkload"},
}


def test_every_bundled_example_is_explained_with_its_documented_verdicts() -> None:
    found = sorted(p.name for p in (ROOT / "examples").glob("*.yaml"))
    assert found == sorted(EXPECTED_EXAMPLES), "a new example needs its expected verdicts here"
    for name, reasons in EXPECTED_EXAMPLES.items():
        code, out, err = run("explain", "-f", str(ROOT / "examples" / name), "-o", "json")
        assert code == 0, err
        assert {d["status"]["reason"] for d in json.loads(out)} == reasons, name


def _trainer_dump() -> str:
    job = Job("trainer", "team-a").queue("user-queue").request("cpu", "1")
    objs = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "4"}}).obj(),
            LocalQueue("user-queue", "team-a", "cq").obj(), job.obj(),
            Workload("job-trainer-5d4c3", "team-a").queue("user-queue").request("cpu", "1").owner(job).obj(),
            Workload("job-other-11111", "team-a").queue("user-queue").request("cpu", "1").obj()]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})


def test_the_job_the_user_names_finds_its_workload() -> None:
    stdin = _trainer_dump()
    for target in ("job/trainer", "jobs.batch/trainer", "Job/trainer", "trainer", "workload/job-trainer-5d4c3",
                   "job-trainer-5d4c3"):
        code, out, err = run("explain", "-f", "-", "-n", "team-a", target, "-o", "json", stdin=stdin)
        assert code == 0, (target, err)
        assert [d["metadata"]["name"] for d in json.loads(out)] == ["job-trainer-5d4c3"], target


def test_an_owner_not_in_the_input_says_what_to_check_and_exits_1() -> None:
    """Neither the owner nor a Workload of it in the input: a typo, another namespace, or a dump without that
    kind; never "Kueue has not made one" (an owner in the input without a Workload is explained by its rules)."""
    code, out, err = run("explain", "-f", "-", "-n", "team-a", "rayjob/trainer", stdin=_trainer_dump())
    assert code == 1 and out == ""
    assert "no RayJob named trainer in namespace team-a and no Workload of it in the input" in err, err
    assert "add the RayJobs to the dump (kubectl get rayjobs -A -o yaml)" in err, err
    code, _, err = run("explain", "-f", "-", "-n", "team-a", "job/trainr", stdin=_trainer_dump())
    assert code == 1 and "no Job named trainr in namespace team-a in the input (1 Jobs read)" in err, err
    code, _, err = run("explain", "-f", "-", "-n", "team-b", "job/trainer", stdin=_trainer_dump())
    assert code == 1 and "the input has Job trainer in namespace team-a: add -n team-a (or -A)" in err, err
    code, _, err = run("explain", "-f", "-", "workload/trainer", stdin=_trainer_dump())
    assert code == 1 and "no Workload named trainer" in err


def test_all_namespaces_wins_over_namespace_as_in_kubectl() -> None:
    code, out, _ = run("explain", "-f", "-", "-n", "elsewhere", "-A", "trainer", "-o", "json", stdin=_trainer_dump())
    assert code == 0 and [d["metadata"]["name"] for d in json.loads(out)] == ["job-trainer-5d4c3"]


def test_by_queue_names_one_cause_once_with_the_workloads_it_blocks() -> None:
    """Three Workloads of ClusterQueue ci are counted ephemeral-storage it does not cover (no container asks for
    it: a LimitRange default, so the cluster admin acts); one runs elsewhere."""
    text = ("couldn't assign flavors to pod set main: resource ephemeral-storage unavailable in ClusterQueue")
    objs: list[dict[str, Any]] = [
        ResourceFlavor("default-flavor").obj(), ClusterQueue("ci").quotas({"default-flavor": {"cpu": "8"}}).obj(),
        LocalQueue("user-queue", "team-a", "ci").obj()]
    for n, at in enumerate(("2026-11-30T09:10:00Z", "2026-11-30T08:30:00Z", "2026-11-30T09:20:00Z")):
        objs.append(Workload(f"job-build-{n}", "team-a").queue("user-queue").request("cpu", "1").condition(
            condition("QuotaReserved", "False", "Pending", text, at)).obj())
    stdin = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
    code, out, err = run("explain", "-f", "-", "--by-queue", "-o", "json", "--now", "2026-11-30T10:00:00Z",
                         stdin=stdin)
    assert code == 0, err
    (group,) = json.loads(out)
    assert (group["clusterQueue"], group["reason"], group["cause"], group["count"]) == (
        "ci", "QueueMisconfigured", "ResourceNotCovered", 3)
    assert group["oldest"] == "team-a/job-build-1" and group["oldestSince"] == "2026-11-30T08:30:00Z"
    assert "ephemeral-storage" in group["message"] and len(group["workloads"]) == 3
    code, out, _ = run("explain", "-f", "-", "--by-queue", "--now", "2026-11-30T10:00:00Z", stdin=stdin)
    header, row = out.splitlines()
    assert header.split()[:7] == ["CLUSTERQUEUE", "WORKLOADS", "REASON", "CAUSE", "ACTION", "LONGEST", "OLDEST"]
    assert row.split()[:7] == ["ci", "3", "QueueMisconfigured", "ResourceNotCovered", "ClusterAdmin", "90m",
                               "team-a/job-build-1"]


def test_an_incomplete_pod_group_is_explained_when_asked_for_by_name(tmp_path: Path) -> None:
    """A Pod group without a Workload is no owner: `explain` (which diagnoses the Workloads it selects by key)
    must still find its stand-in, whole dump or by name."""
    from tests.unit.test_catalog import SCENARIOS

    scenario = next(s for s in SCENARIOS if s["name"] == "pod-group-named-by-annotation-waiting-for-all-its-pods")
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(scenario["objects"]))
    for argv in (["explain", "-f", str(dump), "-A"], ["explain", "-f", str(dump), "-n", "team-a", "duo"]):
        code, out, err = run(*argv, "--now", scenario["now"])
        assert code == 0 and "PodGroupIncomplete" in out, (argv, out, err)


def test_a_message_with_line_breaks_stays_on_its_row_of_the_table() -> None:
    """A ProvisioningRequest's or a webhook's error can hold newlines; a row broken in two would be misread."""
    from datetime import UTC, datetime

    from kueue_doctor.cli import table

    diagnosis = {"metadata": {"namespace": "ml", "name": "job-a-1"},
                 "status": {"stage": "Admission", "reason": "WaitingForAdmissionChecks", "actionBy": "ClusterAdmin",
                            "message": "check dws is Pending (Error creating ProvisioningRequest:\nonly one PodSet)"}}
    for wide in (False, True):
        lines = table([diagnosis], datetime(2026, 11, 30, tzinfo=UTC), wide).splitlines()
        assert len(lines) == 2, lines  # the header and one row
        assert "ProvisioningRequest: ⏎ only one PodSet" in lines[1] or not wide, lines[1]


def test_the_owner_named_finds_a_workload_that_names_it_only_by_its_job_uid_label() -> None:
    """kueue#12232: the Workload lost its ownerReference; its job-uid label still says whose it is. `explain
    job/trainer -n team-a` shows it, instead of "no Job named trainer in namespace team-a; the input has Job
    trainer in namespace team-a"."""
    job = Job("trainer", "team-a").queue("user-queue").request("cpu", "1")
    job_obj = job.obj()
    wl = Workload("job-trainer-5d4c3", "team-a").queue("user-queue").request("cpu", "1").obj()
    wl["metadata"].pop("ownerReferences", None)
    wl["metadata"].setdefault("labels", {})["kueue.x-k8s.io/job-uid"] = job_obj["metadata"]["uid"]
    objs = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "4"}}).obj(),
            LocalQueue("user-queue", "team-a", "cq").obj(), job_obj, wl]
    code, out, err = run("explain", "-f", "-", "-n", "team-a", "job/trainer", "-o", "json",
                         stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    assert code == 0, err
    assert [d["metadata"]["name"] for d in json.loads(out)] == ["job-trainer-5d4c3"]


def test_describe_keeps_a_message_with_line_breaks_on_its_line() -> None:
    """The Message: field of describe, like the tables, never breaks a quoted multi-line error over lines that
    look like other fields."""
    from kueue_doctor.describe import _fields

    lines = _fields([("Message", "Pending (Error creating ProvisioningRequest:\nViolations details: {...})"),
                     ("Cause", None)])
    assert lines == ["Message: Pending (Error creating ProvisioningRequest: ⏎ Violations details: {...})",
                     "Cause:   <none>"]


def _group_pod(name: str) -> Pod:
    """A Pod of plain Pod group infer (3 Pods) as Kueue v0.19.2's pod webhook leaves it: queue and group labels,
    the managed label and finalizer, the total count, the role hash, both gates; no ownerReference."""
    return (Pod(name, "team-a").request("cpu", "2")
            .labels({"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/pod-group-name": "infer",
                     "kueue.x-k8s.io/managed": "true"})
            .annotation("kueue.x-k8s.io/pod-group-total-count", "3").annotation("kueue.x-k8s.io/role-hash", "9b2c4d1e")
            .finalizers("kueue.x-k8s.io/managed").gate("kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"))


def test_a_pod_named_finds_the_workload_of_its_pod_group() -> None:
    """`explain pod/NAME` on a member of a plain Pod group: the group's Workload (named after the group), also
    for a member that is no owner of the Workload yet (a replacement Kueue has not added), and the group's own
    verdict while it has no Workload; never "no Pods" when the Pods are in the input."""
    pods = [_group_pod(f"infer-{n}") for n in range(3)]
    wl = Workload("infer", "team-a").queue("user-queue").count(3).request("cpu", "2").annotation(
        "kueue.x-k8s.io/is-group-workload", "true").condition(condition(
            "QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: insufficient unused quota "
            "for cpu in flavor default-flavor, 1 more needed", "2026-11-30T09:00:02Z"))
    for pod in pods[:2]:  # infer-2 replaced a failed Pod: Kueue has not made it an owner of the Workload yet
        wl.owner(pod, controller=False)
    queues = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "5"}}).obj(),
              LocalQueue("user-queue", "team-a", "cq").obj()]
    dump = json.dumps({"apiVersion": "v1", "kind": "List", "items": [*queues, wl.obj(), *(p.obj() for p in pods)]})
    for target in ("pod/infer-0", "pods/infer-2", "po/infer-1", "infer-1"):
        code, out, err = run("explain", "-f", "-", "-n", "team-a", target, "-o", "json",
                             "--now", "2026-11-30T09:30:00Z", stdin=dump)
        assert code == 0, (target, err)
        assert [(d["metadata"]["name"], d["status"]["reason"]) for d in json.loads(out)] == [
            ("infer", "WaitingForQuota")], target
    code, out, err = run("explain", "-f", "-", "-A", "pod/infer-2", "-o", "json", "--now", "2026-11-30T09:30:00Z",
                         stdin=dump)
    assert code == 0 and [d["metadata"]["name"] for d in json.loads(out)] == ["infer"], err
    no_workload = json.dumps({"apiVersion": "v1", "kind": "List", "items": [*queues, *(p.obj() for p in pods[:2])]})
    code, out, err = run("explain", "-f", "-", "-n", "team-a", "pod/infer-1", "-o", "json",
                         "--now", "2026-11-30T09:30:00Z", stdin=no_workload)
    assert code == 0, err
    assert [(d["metadata"]["name"], d["status"]["cause"]) for d in json.loads(out)] == [
        ("infer", "PodGroupIncomplete")]
    code, _, err = run("explain", "-f", "-", "-n", "team-a", "pod/infer-9", stdin=dump)
    assert code == 1 and "no Pod named infer-9 in namespace team-a in the input (3 Pods read)" in err, err
    assert "no Pods" not in err, err
    code, _, err = run("explain", "-f", "-", "-n", "team-b", "pod/infer-1", stdin=dump)
    assert code == 1 and "the input has Pod infer-1 in namespace team-a: add -n team-a" in err, err


def test_a_pod_kueue_does_not_manage_is_said_to_be_in_the_input() -> None:
    queues = [ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "5"}}).obj(),
              LocalQueue("user-queue", "team-a", "cq").obj(),
              Workload("job-other-1a2b3", "team-a").queue("user-queue").request("cpu", "1").obj()]
    dump = json.dumps({"apiVersion": "v1", "kind": "List",
                       "items": [*queues, Pod("debug", "team-a").request("cpu", "1").obj()]})
    code, out, err = run("explain", "-f", "-", "-n", "team-a", "pod/debug", stdin=dump)
    assert code == 1 and out == "", out
    assert "Pod team-a/debug is in the input but belongs to no Workload" in err, err
    queued = Pod("solo", "team-a").request("cpu", "1").label("kueue.x-k8s.io/queue-name", "user-queue").obj()
    dump = json.dumps({"apiVersion": "v1", "kind": "List", "items": [*queues, queued]})
    code, _, err = run("explain", "-f", "-", "-n", "team-a", "pod/solo", stdin=dump)
    assert code == 1 and "Pod team-a/solo is in the input with queue user-queue, but the input has no Workload pod-solo-" \
        in err, err


def _catalog_objects(scenario: str) -> list[dict[str, Any]]:
    cases = yaml.safe_load((ROOT / "tests" / "cases" / "verdicts.yaml").read_text())["scenarios"]
    return next(c["objects"] for c in cases if c["name"] == scenario)


def test_a_deployment_or_replicaset_named_leads_to_the_workloads_of_its_pods() -> None:
    """Kueue gives each Pod of a Deployment a Workload of its own: `explain deployment/web` (the name the user
    knows) diagnoses those, and rs/NAME only its own ReplicaSet's; without such Pods it says what to look at."""
    objects = _catalog_objects("deployment-rolling-update-waits-for-its-own-quota")
    dump = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    now = ("--now", "2026-11-30T10:00:00Z")
    code, out, err = run("explain", "-f", "-", "-n", "serving", "deploy/web", "-o", "json", *now, stdin=dump)
    assert code == 0, err
    assert [(d["metadata"]["name"], d["status"]["reason"]) for d in json.loads(out)] == [
        ("pod-web-5f6d7c8b9-h2xkq-1a2b3", "Running"), ("pod-web-7c8d9e0f1-q8zkt-4c5d6", "WaitingForQuota")]
    code, out, err = run("explain", "-f", "-", "-A", "replicaset/web-7c8d9e0f1", "-o", "json", *now, stdin=dump)
    assert code == 0 and [d["metadata"]["name"] for d in json.loads(out)] == ["pod-web-7c8d9e0f1-q8zkt-4c5d6"], err
    without_pods = json.dumps({"apiVersion": "v1", "kind": "List",
                               "items": [o for o in objects if o["kind"] not in ("Pod", "Workload")]})
    code, out, err = run("explain", "-f", "-", "-n", "serving", "deployment/web", *now, stdin=without_pods)
    assert code == 1 and out == "", out
    assert "Deployment serving/web has no Workload in the input" in err and "none of its Pods" in err, err
    code, _, err = run("explain", "-f", "-", "-n", "serving", "rs/web-0a1b2c3d4", *now, stdin=dump)
    assert code == 1 and "no Pod in the input has it as its controller (2 Pods read)" in err, err


def test_a_leaderworkerset_worker_statefulset_leads_to_its_groups_workload() -> None:
    """A LeaderWorkerSet's worker StatefulSet is its group leader Pod's (controller ownerReference), not the
    LeaderWorkerSet's: `explain sts/<leader pod>` diagnoses that group's Workload. It used to say the StatefulSet
    had no queue-name label and ran outside Kueue (recorded live: scenario-family-lws-second-group-waits)."""
    path = ROOT / "tests" / "e2e" / "fixtures" / "scenario-family-lws-second-group-waits.yaml"
    ns = next(o for o in yaml.safe_load_all(path.read_text()) if o and o["kind"] == "LeaderWorkerSet")["metadata"][
        "namespace"]
    for group, reason in ((1, "WaitingForQuota"), (0, "Running")):
        code, out, err = run("explain", "-f", str(path), "-n", ns, f"sts/serve-{group}", "-o", "json")
        assert code == 0, err
        found = [(d["metadata"]["name"].rsplit("-", 1)[0], d["status"]["reason"]) for d in json.loads(out)]
        assert found == [(f"leaderworkerset-serve-{group}", reason)], found
        assert (f"StatefulSet {ns}/serve-{group} has no Workload of its own: it belongs to Pod serve-{group} (group "
                f"{group} of LeaderWorkerSet serve)") in err, err
    code, out, err = run("explain", "-f", str(path), "-n", ns, "sts/serve", "-o", "json")  # the leaders' StatefulSet
    assert code == 0 and len(json.loads(out)) == 2 and "it belongs to LeaderWorkerSet serve" in err, err
