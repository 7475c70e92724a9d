"""The kubectl plugin: the same CLI as `kubectl-kueue_doctor`, with kubectl's global flags wherever kubectl users
write them, the context's namespace by default, and `describe` reading top to bottom."""

from __future__ import annotations

import importlib
import io
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_doctor.cli import command_first, main
from kueue_doctor.live.rest import context_namespace
from tests.builders import ClusterQueue, Job, LocalQueue, ResourceFlavor, Workload, condition

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "headlamp-exceeds-max-quota.yaml"


def run(*argv: str, plugin: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, plugin=plugin)
    return code, out.getvalue(), err.getvalue()


def test_the_console_script_kubectl_discovers_runs_the_cli(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """pyproject installs `kubectl-kueue_doctor` (kubectl's name for `kubectl kueue-doctor`): its target runs."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["kubectl-kueue_doctor"].partition(":")
    target = getattr(importlib.import_module(module), attr)
    monkeypatch.setattr(sys, "argv", ["kubectl-kueue_doctor", "explain", "-f", str(EXAMPLE)])
    assert target() == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:4] == ["default", "job-sample-job-8c7a4", "Admission", "ExceedsMaxQuota"]
    monkeypatch.setattr(sys, "argv", ["kubectl-kueue_doctor", "--help"])
    with pytest.raises(SystemExit):
        target()
    assert capsys.readouterr().out.startswith("usage: kubectl kueue-doctor")
    assert scripts["kueue-doctor"] == "kueue_doctor.cli:main"


def test_global_flags_before_the_command_are_moved_after_it_as_kubectl_allows() -> None:
    assert command_first(["-n", "a", "--context=c", "-A", "explain", "job/x", "-o", "yaml"]) == [
        "explain", "-n", "a", "--context=c", "-A", "job/x", "-o", "yaml"]
    assert command_first(["--kubeconfig", "k", "-ojson", "describe"]) == ["describe", "--kubeconfig", "k", "-ojson"]
    assert command_first(["--version"]) == ["--version"]
    assert command_first(["job/x", "explain"]) == ["job/x", "explain"]  # argparse refuses it, naming the problem
    code, out, _ = run("-n", "default", "-o", "json", "explain", "-f", str(EXAMPLE))
    assert code == 0 and '"ExceedsMaxQuota"' in out
    code, out, _ = run("explain", "--namespace=default", "-oyaml", "-f", str(EXAMPLE))
    assert code == 0 and yaml.safe_load(out)["status"]["reason"] == "ExceedsMaxQuota"


def _kubeconfig(tmp_path: Path) -> Path:
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "here",
           "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
                        {"name": "bare", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_context_namespace_is_read_as_kubectl_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _kubeconfig(tmp_path)
    assert context_namespace(str(path)) == "team-a"
    assert context_namespace(str(path), "bare") == "default"
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert context_namespace() == "team-a"
    assert context_namespace(str(tmp_path / "missing")) == "default"


def test_the_plugin_reads_the_context_namespace_of_a_live_cluster_and_says_so(tmp_path: Path) -> None:
    """Live, without -n or -A, the plugin looks where kubectl would; an unreachable server is exit 2 naming it."""
    path = _kubeconfig(tmp_path)
    code, _, err = run("explain", "job/trainer", "--kubeconfig", str(path), plugin=True)
    assert code == 2 and "cannot reach the cluster" in err


def _dump() -> str:
    job = Job("trainer", "team-a").queue("user-queue").request("cpu", "1")
    text = ("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, previously "
            "considered podsets requests (0) + current podset request (8) > maximum capacity (4)")
    objs: list[dict[str, Any]] = [
        ResourceFlavor("default-flavor").obj(), ClusterQueue("cq").quotas({"default-flavor": {"cpu": "4"}}).obj(),
        LocalQueue("user-queue", "team-a", "cq").obj(), job.obj(),
        Workload("job-trainer-5d4c3", "team-a").queue("user-queue").request("cpu", "8").owner(job).condition(
            condition("QuotaReserved", "False", "Pending", text, "2026-11-30T09:00:00Z")).obj(),
        {"apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "Pending", "message": text,
         "metadata": {"name": "ev1", "namespace": "team-a", "uid": "ev1"}, "count": 3,
         "lastTimestamp": "2026-11-30T09:30:00Z", "source": {"component": "kueue-admission"},
         "involvedObject": {"kind": "Workload", "namespace": "team-a", "name": "job-trainer-5d4c3"}},
    ]
    return yaml.safe_dump_all(objs)


def test_describe_reads_top_to_bottom_verdict_numbers_remedies_evidence_events() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["describe", "-f", "-", "-n", "team-a", "job/trainer", "--now", "2026-11-30T10:00:00Z"],
                stdin=io.StringIO(_dump()), stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    titles = [ln.rstrip(":") for ln in text.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert titles == ["Verdict", "Quota", "Admission Checks", "Pods", "Blocked By", "Last Eviction", "Remedies",
                      "Pending Limit", "Queue Position", "History", "Evidence", "Hints", "Events"]
    assert "Owner:        Job/trainer" in text and "ClusterQueue: cq" in text
    assert "  Reason:    ExceedsMaxQuota" in text and "  Action by: QueueAdmin" in text
    assert "  For:       60m (since 2026-11-30T09:00:00Z)" in text
    quota = next(ln for ln in text.splitlines() if ln.startswith("  default-flavor"))
    assert quota.split()[:4] == ["default-flavor", "cpu", "8", "4"]
    assert "nominalQuota: 4 -> 8 (exact, from Kueue's numbers)" in text
    event = next(ln for ln in text.splitlines() if ln.startswith("  Warning"))
    assert event.split()[:6] == ["Warning", "Pending", "30m", "(x3)", "kueue-admission", "Workload/job-trainer-5d4c3"]


def test_describe_names_what_it_could_not_read_and_a_missing_target_exits_1() -> None:
    code, out, _ = run("describe", "-f", str(EXAMPLE))
    assert code == 0 and "Events:\n  <not read: the input has no Events" in out
    assert "Pending Limit:\n  <none>" in out
    code, out, err = run("describe", "-f", str(EXAMPLE), "job/nope")
    assert code == 1 and out == "" and "no Job named nope" in err


def test_the_krew_manifest_names_this_checkouts_archive_and_version() -> None:
    """plugins/kueue-doctor.yaml's sha256 is of hack/plugin/archive.py's archive (the launcher and LICENSE), and
    its version, the launcher's and pyproject's agree: a changed launcher without a new sha256 fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("archive", ROOT / "hack" / "plugin" / "archive.py")
    assert spec is not None and spec.loader is not None
    archive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(archive)
    assert archive.problems() == [], "run python hack/plugin/archive.py --update-manifest"
    assert archive.archive_bytes() == archive.archive_bytes()  # byte for byte, every time


def test_which_namespace_is_read_plugin_or_not_file_or_live(tmp_path: Path) -> None:
    """kubectl's rule for the plugin on a live cluster (the context's namespace; -A all; -n that one); files and
    `kueue-doctor` read every namespace unless -n says otherwise."""
    import argparse

    from kueue_doctor.cli import _namespace

    k = str(_kubeconfig(tmp_path))

    def ns(plugin: bool, **kw: Any) -> tuple[str | None, bool]:
        args = argparse.Namespace(**{"all_namespaces": False, "namespace": None, "filename": [], "kubeconfig": k,
                                     "context": None, **kw})
        return _namespace(args, plugin)

    assert ns(True) == ("team-a", True)
    assert ns(True, context="bare") == ("default", True)
    assert ns(True, namespace="x") == ("x", False)
    assert ns(True, all_namespaces=True, namespace="x") == (None, False)
    assert ns(True, filename=["dump.yaml"]) == (None, False)
    assert ns(False) == (None, False)
