"""The `kueue-doctor` command: `explain` (files or the live cluster) and `crd`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Any

from . import __version__
from .kube import objects as kobj
from .kube.kueue_names import POD_GROUP_KEY, expected_workload_name, identifier
from .kube.load import InputError, load_files, newest_timestamp
from .kube.objects import format_duration, owner_refs, parse_time, s
from .live.team_labels import DEFAULT_LABEL_VALUES, OTHER_VALUE

if TYPE_CHECKING:
    from .engine.queue_summary import Group
    from .kube.shards import Shard
    from .live.leader import ElectionConfig
    from .state import ClusterState

EXIT_OK, EXIT_NOT_FOUND, EXIT_BAD_INPUT = 0, 1, 2
EXAMPLE = "examples/headlamp-exceeds-max-quota.yaml"


COMMANDS = ("explain", "describe", "crd", "schema", "shard-plan", "run")
PLUGIN_PROG = "kubectl kueue-doctor"  # the same CLI as a kubectl plugin: the executable kubectl-kueue_doctor


def _input_flags() -> argparse.ArgumentParser:
    """What explain and describe read: files or the live cluster, with kubectl's global flags."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("workload", nargs="?", metavar="NAME|KIND/NAME",
                   help="only this Workload, or the Workload(s) of this owner: a bare name matches a Workload or "
                   "its owner (Job, JobSet, RayJob, Pod, ...); KIND/NAME names the owner kubectl-style (job/trainer, "
                   "jobsets.jobset.x-k8s.io/x, rayjob/x, pod/x; workload/x for the Workload itself)")
    p.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                   help="YAML or JSON file (multi-document, kind: List, or a JSON array); '-' for stdin; repeatable."
                   " Without -f, reads the live cluster of the current kubeconfig.")
    p.add_argument("-n", "--namespace", help="only Workloads in this namespace (as `kubectl kueue-doctor` on a live "
                   "cluster: default the kubeconfig context's namespace, as kubectl does)")
    p.add_argument("-A", "--all-namespaces", action="store_true",
                   help="every namespace (the default of `kueue-doctor` without -n; as in kubectl, -A wins over -n)")
    p.add_argument("--kubeconfig", metavar="FILE", help="live: kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="live: the kubeconfig context to use (default: its current-context)")
    p.add_argument("--now", metavar="TIME",
                   help="evaluate as of this RFC 3339 time (default: for files, the newest timestamp in them; "
                   "live: the current time)")
    p.add_argument("--kueue-namespace", default="kueue-system", metavar="NAMESPACE",
                   help="live: where Kueue runs; its ConfigMap kueue-manager-config says which owners it manages "
                   "(default kueue-system)")
    return p


def build_parser(prog: str = "kueue-doctor") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Explain why Kueue Workloads are not running: stuck at Kueue admission (queues, quota, "
        "flavors, admission checks, preemption) or at Pod scheduling (kube-scheduler, kubelet). kubectl's global "
        "flags (--kubeconfig, --context, -n, -A, -o) may stand before or after the command.",
    )
    parser.add_argument("--version", action="version", version=f"kueue-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    inputs = _input_flags()

    ex = sub.add_parser("explain", parents=[inputs],
                        help="diagnose Workloads from YAML/JSON dumps (-f) or the live cluster",
                        description="Diagnose every Workload found in the input. Feed it `kubectl get workloads,"
                        "localqueues,clusterqueues,resourceflavors,cohorts,admissionchecks,jobs,pods,events -A "
                        "-o yaml` (more kinds give more detail; missing kinds are never guessed).")
    ex.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table",
                    help="table (default), wide (more columns, full messages), json (an array; its JSON Schema: "
                    "`kueue-doctor schema`), yaml")
    ex.add_argument("--by-queue", action="store_true",
                    help="one line per ClusterQueue and verdict: how many Workloads it blocks, the longest wait, "
                    "and the message of the Workload waiting longest (Running and Finished left out)")

    sub.add_parser("describe", parents=[inputs],
                   help="one Workload or owner top to bottom, like kubectl describe: verdict, numbers, remedies, "
                   "pending limit, evidence, events",
                   description="Describe the verdict of each matching Workload (name one: job/trainer) in the "
                   "order an SRE reads it: verdict, quota numbers, Pods, the ways out, the pending limit, the "
                   "evidence, and the Warning events of the Workload, its owner and its Pods.")

    sub.add_parser("crd", help="print the AdmissionDiagnosis CustomResourceDefinition YAML")
    sub.add_parser("schema", help="print the JSON Schema of `explain -o json` (docs/schema/explain.schema.json)")

    pl = sub.add_parser("shard-plan", help="plan --shard-boundaries: namespaces split into N runs of about "
                        "equal Workloads, which the apiserver can filter by (docs/scale.md#shards)",
                        description="Read the namespaces and their Workloads (-f dumps or the live cluster) and "
                        "print the --shard-boundaries that split them into N shards of about equal Workloads, with "
                        "each shard's namespaces and Workloads under those ranges and under the default (hash "
                        "modulo N).")
    pl.add_argument("--total-shards", type=int, required=True, metavar="N", help="how many shards (2 or more)")
    pl.add_argument("-f", "--filename", action="append", default=[], metavar="FILE",
                    help="YAML or JSON file with Namespaces and Workloads ('-' for stdin; repeatable); without "
                    "-f, the live cluster of the current kubeconfig")
    pl.add_argument("--kubeconfig", metavar="FILE", help="live: kubeconfig file")
    pl.add_argument("--context", help="live: the kubeconfig context to use")

    rn = sub.add_parser("run", help="run the operator: AdmissionDiagnosis objects and Prometheus metrics",
                        description="Watch Kueue, Jobs, Pods and Events; keep one AdmissionDiagnosis per Workload "
                        "current and serve metrics. Writes only AdmissionDiagnosis objects.")
    rn.add_argument("-n", "--namespace", action="append", default=[], dest="namespaces", metavar="NAMESPACE",
                    help="watch only this namespace (repeatable); default: all namespaces")
    rn.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    rn.add_argument("--context", help="kubeconfig context")
    rn.add_argument("--metrics-port", type=int, default=8080, help="Prometheus metrics port (default 8080)")
    rn.add_argument("--health-port", type=int, default=8081, help="liveness endpoint port, /healthz (default 8081)")
    rn.add_argument("--log-format", choices=("text", "json"), default="text", help="log format (default text)")
    rn.add_argument("--max-workload-series", type=int, default=2000, metavar="N",
                    help="cap on per-Workload metric series, oldest first (default 2000)")
    rn.add_argument("--metric-label-from", action="append", default=[], metavar="LABEL", dest="metric_labels",
                    help="copy this label of the Workload (else of its LocalQueue, else of its ClusterQueue) into "
                    "the per-queue metrics as custom_<label>, named and sanitized as Kueue does (repeatable); at "
                    f"most --metric-label-values distinct values per label, the rest counted as \"{OTHER_VALUE}\"")
    rn.add_argument("--metric-label-values", type=int, default=DEFAULT_LABEL_VALUES, metavar="N",
                    help=f"cap on distinct values per --metric-label-from label (default {DEFAULT_LABEL_VALUES})")
    rn.add_argument("--refresh-interval", type=float, default=60.0, metavar="SECONDS",
                    help="at most one write per diagnosis per interval when only numbers change (default 60)")
    rn.add_argument("--resync-interval", type=float, default=300.0, metavar="SECONDS",
                    help="re-list Workloads and diagnoses to repair watch gaps (default 300)")
    rn.add_argument("--recheck-interval", type=float, default=30.0, metavar="SECONDS",
                    help="ask RBAC, the AdmissionDiagnosis CRD and Kueue's API again this often: access taken away "
                    "or given back at runtime is followed without a restart (default 30)")
    rn.add_argument("--max-writes-per-second", type=float, default=1000.0, metavar="N",
                    help="cap on AdmissionDiagnosis writes; below it, 16 writes in flight and the apiserver's answers "
                    "(429 Retry-After) set the pace of a first install (default 1000)")
    rn.add_argument("--max-refresh-writes-per-second", type=float, default=50.0, metavar="N",
                    help="budget, across all diagnoses, for rewrites that only refresh numbers of an unchanged verdict "
                    "(every admission changes the usage numbers of every waiting Workload); verdict changes are "
                    "never held back by it; 0: no budget (default 50)")
    rn.add_argument("--kueue-namespace", default="kueue-system", metavar="NAMESPACE",
                    help="where Kueue runs: its ConfigMap kueue-manager-config and Deployment kueue-controller-manager "
                    "are read there (default kueue-system)")
    rn.add_argument("--reports", action="store_true",
                    help="also keep one OpenReports Report (openreports.io/v1alpha1) per namespace listing the "
                    "Workloads that are not running, for Policy Reporter to notify (docs/notifications.md; off by "
                    "default; needs the Report CRD and RBAC on reports)")
    rn.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_shard_flags(rn)
    add_leader_election_flags(rn)
    return parser


def add_shard_flags(rn: argparse.ArgumentParser) -> None:
    sh = rn.add_argument_group("namespace shards (beyond one replica; docs/scale.md#shards)")
    sh.add_argument("--total-shards", type=int, default=1, metavar="N",
                    help="split the namespaces among N replicas by the FNV-1a hash of their names; each diagnoses "
                    "and writes only its own namespaces' Workloads (default 1: one replica owns all)")
    sh.add_argument("--shard-index", type=int, default=None, metavar="I",
                    help="the shard this replica is, 0 to N-1 (default 0)")
    sh.add_argument("--shard-index-from-hostname", action="store_true",
                    help="take the shard index from the ordinal ending the host name, modulo --total-shards (a "
                    "StatefulSet Pod's: with 2 shards kueue-doctor-1 and kueue-doctor-3 are shard 1, the second its "
                    "standby)")
    sh.add_argument("--shard-boundaries", default="", metavar="HEX,...",
                    help="N-1 cut points of the namespaces' hash space, as `kueue-doctor shard-plan` prints them: "
                    "shard I owns the hashes from cut point I-1 up to cut point I, and asks the apiserver to send "
                    "only its own namespaces' Events, owners and AdmissionDiagnoses (KEP-5866 shardSelector, "
                    "served with the alpha gate ShardedListAndWatch; ignored, and filtered here, elsewhere). "
                    "Every replica must get the same. Default: hash modulo N, filtered here")


def shard_of(args: argparse.Namespace, err: IO[str], hostname: str | None = None) -> Shard | int:
    """The shard asked for, or EXIT_BAD_INPUT after saying what is wrong."""
    from .kube.shards import Shard

    index = args.shard_index
    if args.shard_index_from_hostname:
        host = hostname if hostname is not None else (os.environ.get("HOSTNAME") or socket.gethostname())
        ordinal = host.rsplit("-", 1)[-1]
        if "-" not in host or not ordinal.isdigit():
            err.write(f"kueue-doctor run: --shard-index-from-hostname: the host name {host!r} does not end in "
                      "-<ordinal> (a StatefulSet Pod's name does); pass --shard-index instead\n")
            return EXIT_BAD_INPUT
        if index is not None and index != int(ordinal) % max(args.total_shards, 1):
            err.write(f"kueue-doctor run: --shard-index {index} contradicts the host name {host!r} "
                      "(--shard-index-from-hostname); pass one of them\n")
            return EXIT_BAD_INPUT
        index = int(ordinal) % max(args.total_shards, 1)
    from .kube.shards import parse_boundaries

    try:
        boundaries = parse_boundaries(args.shard_boundaries)
    except ValueError as exc:
        err.write(f"kueue-doctor run: {exc}\n")
        return EXIT_BAD_INPUT
    shard = Shard(index or 0, args.total_shards, boundaries)
    if shard.problems():
        err.write("kueue-doctor run: " + "; ".join(shard.problems()) + "\n")
        return EXIT_BAD_INPUT
    return shard


# kubectl's global flags that take a value; written before the command they are moved after it
_VALUE_FLAGS = frozenset({"--kubeconfig", "--context", "-n", "--namespace", "-o", "--output"})


def command_first(argv: Sequence[str]) -> list[str]:
    """kubectl takes its global flags anywhere (`kubectl kueue-doctor -n a explain job/x`): put the command first,
    so each command's parser sees every flag. Anything else before the command is left for argparse to refuse."""
    before: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in COMMANDS:
            return [arg, *before, *argv[i + 1:]]
        if not arg.startswith("-"):
            break
        takes_value = arg in _VALUE_FLAGS and i + 1 < len(argv)
        before.extend(argv[i:i + 2] if takes_value else [arg])
        i += 2 if takes_value else 1
    return list(argv)


def kubectl_main() -> int:
    """The console script `kubectl-kueue_doctor`: kubectl runs it for `kubectl kueue-doctor ...`."""
    return main(sys.argv[1:], plugin=True)


def add_leader_election_flags(rn: argparse.ArgumentParser) -> None:
    """The same names as kube-controller-manager's and kube-scheduler's leader-election flags."""
    le = rn.add_argument_group("leader election (for two or more replicas; docs/reliability.md)")
    le.add_argument("--leader-elect", action="store_true",
                    help="elect a leader on a coordination.k8s.io Lease: only the leader writes, the other replicas "
                    "keep their state warm and take over when its lease expires (default: off, a single writer)")
    le.add_argument("--leader-elect-resource-name", default="kueue-doctor", metavar="NAME",
                    help="name of the Lease (default kueue-doctor; with --total-shards N above 1, shard I uses "
                    "NAME-shard-I-of-N)")
    le.add_argument("--leader-elect-resource-namespace", default="", metavar="NAMESPACE",
                    help="namespace of the Lease (default: $POD_NAMESPACE, else the service account's namespace)")
    for name, default, meaning in (
            ("lease-duration", 10.0, "how long a standby waits after the leader's last renewal before taking over"),
            ("renew-deadline", 7.0, "how long a leader retries renewing before it stops writing"),
            ("retry-period", 2.0, "time between two renewals or reads of the Lease")):
        le.add_argument(f"--leader-elect-{name}", type=float, default=default, metavar="SECONDS",
                        help=f"{meaning} (default {default:g})")


def election_config(args: argparse.Namespace, err: IO[str], shard: Shard | None = None
                    ) -> ElectionConfig | int | None:
    """The election asked for, None without --leader-elect, or EXIT_BAD_INPUT after saying what is wrong."""
    from .kube.shards import Shard
    from .live.leader import ElectionConfig, default_namespace

    if not args.leader_elect:
        return None
    config = ElectionConfig(namespace=args.leader_elect_resource_namespace or default_namespace(),
                            lease_name=(shard or Shard()).lease(args.leader_elect_resource_name),
                            lease_duration=args.leader_elect_lease_duration,
                            renew_deadline=args.leader_elect_renew_deadline,
                            retry_period=args.leader_elect_retry_period)
    problems = config.problems()
    if problems:
        err.write("kueue-doctor run: leader election: " + "; ".join(problems) + "\n")
        return EXIT_BAD_INPUT
    return config


def main(argv: Sequence[str] | None = None, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None, plugin: bool = False) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = build_parser(PLUGIN_PROG if plugin else "kueue-doctor").parse_args(
        command_first(sys.argv[1:] if argv is None else argv))
    if args.command == "crd":
        from .api import crd_yaml

        out.write(crd_yaml())
        return EXIT_OK
    if args.command == "schema":
        from .api import explain_schema_json

        out.write(explain_schema_json())
        return EXIT_OK
    if args.command == "shard-plan":
        return shard_plan(args, stdin, out, err)
    if args.command == "run":
        from .live.runtime import Options
        from .live.service import run
        from .live.team_labels import parse_specs

        try:
            parse_specs(args.metric_labels)
        except ValueError as exc:
            err.write(f"kueue-doctor: {exc}\n")
            return EXIT_BAD_INPUT

        shard = shard_of(args, err)
        if isinstance(shard, int):
            return shard
        election = election_config(args, err, shard)
        if isinstance(election, int):
            return election
        options = Options(namespaces=args.namespaces, refresh_interval=args.refresh_interval,
                          resync_interval=args.resync_interval, max_workload_series=args.max_workload_series,
                          writes_per_second=args.max_writes_per_second,
                          refresh_writes_per_second=args.max_refresh_writes_per_second,
                          kueue_namespace=args.kueue_namespace,
                          metric_labels=args.metric_labels, metric_label_values=args.metric_label_values,
                          reports=args.reports, recheck_interval=args.recheck_interval, shard=shard)
        return run(options, args.metrics_port, args.health_port, args.kubeconfig, args.context, args.log_format,
                   args.verbose, election)
    return explain(args, stdin, out, err, plugin)


def shard_plan(args: argparse.Namespace, stdin: IO[str] | None, out: IO[str], err: IO[str]) -> int:
    """`shard-plan`: the cut points that balance the Workloads, beside what the default partition gives."""
    from .kube.shards import SPACE, Shard, hex64, plan

    if args.total_shards < 2:
        err.write(f"kueue-doctor shard-plan: --total-shards must be 2 or more (got {args.total_shards})\n")
        return EXIT_BAD_INPUT
    objects: Sequence[Mapping[str, Any]]
    if args.filename:
        try:
            objects = load_files(args.filename, stdin, [])
        except InputError as exc:
            err.write(f"kueue-doctor: {exc}\n")
            return EXIT_BAD_INPUT
        source = ", ".join(args.filename)
    else:
        from .live.snapshot import LiveError, namespaces_and_workloads

        try:
            objects = namespaces_and_workloads(args.kubeconfig, args.context)
        except LiveError as exc:
            err.write(f"kueue-doctor: {exc}\n")
            return EXIT_BAD_INPUT
        source = "the live cluster"
    weights: dict[str, int] = {}
    for obj in objects:
        if obj.get("kind") == "Namespace" and (ns := kobj.name(obj)):
            weights.setdefault(ns, 0)
        elif obj.get("kind") == "Workload" and (ns := kobj.namespace(obj)):
            weights[ns] = weights.get(ns, 0) + 1
    if not weights:
        err.write(f"kueue-doctor shard-plan: no Namespace nor Workload in {source}\n")
        return EXIT_NOT_FOUND
    total = args.total_shards
    cuts = plan(weights, total)
    ranged = [Shard(i, total, cuts) for i in range(total)]
    modulo = [Shard(i, total) for i in range(total)]

    def counts(shard: Shard) -> tuple[int, int]:
        mine = [w for ns, w in weights.items() if shard.owns(ns)]
        return len(mine), sum(mine)

    flag = ",".join(hex64(c) for c in cuts)
    out.write(f"{len(weights)} namespaces, {sum(weights.values())} Workloads ({source}).\n"
              f"--total-shards={total} --shard-boundaries={flag}\n\n")
    out.write(f"{'SHARD':<6} {'NAMESPACE HASHES':<39} {'NAMESPACES':>10} {'WORKLOADS':>10}   "
              f"{'MODULO N: NAMESPACES':>20} {'WORKLOADS':>10}\n")
    bounds = (0, *cuts, SPACE)
    for i in range(total):
        (rn, rw), (mn, mw) = counts(ranged[i]), counts(modulo[i])
        out.write(f"{i:<6} {hex64(bounds[i]) + '-' + hex64(bounds[i + 1]):<39} {rn:>10} {rw:>10}   "
                  f"{mn:>20} {mw:>10}\n")
    out.write("\nGive every replica the same --shard-boundaries (chart: shardBoundaries). Namespaces created later "
              "fall into the range of their hash; plan again when the split drifts. The apiserver filters by these "
              "ranges only with the alpha gate ShardedListAndWatch on; elsewhere each shard filters the same ranges "
              "itself.\n")
    return EXIT_OK


def explain(args: argparse.Namespace, stdin: IO[str] | None, out: IO[str], err: IO[str], plugin: bool = False
            ) -> int:
    """`explain` and `describe`: read the input, diagnose the Workloads asked for, print them."""
    from .engine.diagnose import diagnose
    from .engine.no_workload import GRACE, stand_ins, unmanaged_reason
    from .engine.queue_position import with_positions
    from .engine.queue_summary import by_queue
    from .state import ClusterState

    now: datetime | None = None
    grace = GRACE
    if args.now:
        now = parse_time(args.now)
        if now is None:
            err.write(f"kueue-doctor: --now {args.now!r} is not an RFC 3339 time (e.g. 2026-11-30T09:00:00Z)\n")
            return EXIT_BAD_INPUT
    namespace, from_context = _namespace(args, plugin)
    target = Target.parse(args.workload)
    if args.filename:
        try:
            warnings: list[str] = []
            objects = load_files(args.filename, stdin, warnings)
        except InputError as exc:
            err.write(f"kueue-doctor: {exc}\n")
            return EXIT_BAD_INPUT
        for warning in warnings:
            err.write(f"kueue-doctor: warning: {warning}\n")
        state = ClusterState.from_objects(objects)
        if now is None:  # the dump's time is its newest timestamp: it may have been taken long after that
            now, grace = newest_timestamp(objects) or datetime.now(UTC), timedelta(0)
    else:
        from .live.snapshot import LiveError, snapshot

        try:
            state = snapshot(namespace=namespace, kubeconfig=args.kubeconfig, context=args.context,
                             kueue_namespace=args.kueue_namespace,
                             named=(target.kind, target.name) if target and target.kind else None)
        except LiveError as exc:
            err.write(f"kueue-doctor: {exc}\n")
            return EXIT_BAD_INPUT
        now = now or datetime.now(UTC)
    candidates = {**stand_ins(state, now, grace), **state.workloads}  # owners Kueue made no Workload for, too
    keys = [k for k, wl in candidates.items()
            if (namespace is None or k[0] == namespace) and (target is None or target.matches(k[1], wl))]
    pods_named = _pods_named(state, target, namespace)
    keys += [k for k in (state.workload_of_pod(p) for p in pods_named) if k in candidates and k not in keys]
    diagnoses = with_positions(state, diagnose(state, now, keys, grace))
    owners = [o for (ns, kind, nm), o in state.owners.items()
              if target is not None and nm == target.name and (namespace is None or ns == namespace)
              and target.kind in (None, kind)] if target is not None and not diagnoses else []
    linked = [k for o in owners for k in state.workloads_of_owner(o) if k in state.workloads]
    if owners and not linked and not diagnoses:  # a child (an AppWrapper's or JobSet's Job): its ancestor's Workload
        for owner in owners:
            above, keys = _ancestor_workloads(state, owner)
            if above is not None and keys:
                linked += keys
                err.write(f"kueue-doctor: {owner.get('kind')} {kobj.namespace(owner)}/{kobj.name(owner)} has no "
                          f"Workload of its own: it belongs to {_described(above)}, which Kueue manages through the "
                          "Workload diagnosed here.\n")
    if linked:  # its Workload names it only by its job-uid label (its ownerReference gone): still its Workload
        diagnoses = with_positions(state, diagnose(state, now, linked, grace))
    if target is not None and not diagnoses:
        why = [unmanaged_reason(state, o, now, grace) for o in owners]
        elsewhere = sorted({ns for (ns, kind, nm) in state.owners if nm == target.name and target.kind in (None, kind)
                            and ns != namespace})
        listed = sum(1 for (_, kind, _) in state.owners if kind == target.kind)
        if target.kind == "Pod":  # Pods are no owners: a Pod's Workload is found through it (_pods_named)
            elsewhere = sorted({ns for ns, nm in state.pods if nm == target.name and ns != namespace})
            listed = len(state.pods)
        if pods_named:
            why.append(_unmanaged_pod(pods_named[0]))
        text = " ".join(w for w in why if w) or target.not_found(namespace, len(state.workloads), elsewhere, listed,
                                                                 live=not args.filename, pods=len(state.pods))
        if from_context:
            text += f" (namespace {namespace} is the kubeconfig context's; -A looks in every namespace)"
        err.write(text + "\n")
        return EXIT_NOT_FOUND
    if not candidates:
        err.write("kueue-doctor: the input has no Workload (kind Workload, apiVersion kueue.x-k8s.io/v1beta2 or "
                  "v1beta1); include `kubectl get workloads -A -o yaml`.\n")
    elif not diagnoses and from_context:
        err.write(f"kueue-doctor: no Workload in namespace {namespace} (the kubeconfig context's namespace); "
                  "-A looks in every namespace.\n")
    if args.command == "describe":
        from .describe import describe

        out.write(describe(diagnoses, state, now))
    elif args.by_queue:
        write_groups(by_queue(diagnoses), args.output, now, out)
    else:
        write(diagnoses, args.output, now, out)
    return EXIT_OK


def _ancestor_workloads(state: ClusterState, owner: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, list[Any]]:
    """The nearest owner above `owner` (by controller references, three levels at most) that has Workloads; a Pod
    above it (a LeaderWorkerSet's worker StatefulSet is its group leader's) leads to that Pod's Workload."""
    node = owner
    for _ in range(3):
        ref = kobj.controller_ref(node)
        if ref is None:
            break
        if ref.get("kind") == "Pod" and kobj.group_of(ref.get("apiVersion")) == "":
            pod = state.pods.get((kobj.namespace(node) or "", str(ref.get("name") or "")))
            key = state.workload_of_pod(pod) if pod is not None and kobj.uid(pod) == ref.get("uid") else None
            return (pod, [key]) if key is not None and key in state.workloads else (None, [])
        parent = state.owners_by_uid.get(str(ref.get("uid") or "")) or state.owners.get(
            (kobj.namespace(node) or "", str(ref.get("kind") or ""), str(ref.get("name") or "")))
        if parent is None:
            break
        keys = [k for k in state.workloads_of_owner(parent) if k in state.workloads]
        if keys:
            return parent, keys
        node = parent
    return None, []


def _described(obj: Mapping[str, Any]) -> str:
    """``<Kind> <name>``; a LeaderWorkerSet's Pod with its group (the worker StatefulSets are the leaders')."""
    text = f"{obj.get('kind')} {kobj.name(obj)}"
    lws, group = (kobj.s(kobj.labels(obj).get(f"leaderworkerset.sigs.k8s.io/{k}")) for k in ("name", "group-index"))
    return f"{text} (group {group} of LeaderWorkerSet {lws})" if obj.get("kind") == "Pod" and lws and group else text


def _namespace(args: argparse.Namespace, plugin: bool) -> tuple[str | None, bool]:
    """The namespace to read (None: all) and whether it is the kubeconfig context's.

    As kubectl does, the plugin reads the context's namespace of a live cluster unless -n or -A says otherwise;
    `kueue-doctor` and any file input read every namespace unless -n says otherwise. -A wins over -n."""
    if args.all_namespaces:
        return None, False
    if args.namespace:
        return args.namespace, False
    if plugin and not args.filename:
        from .live.rest import context_namespace

        return context_namespace(args.kubeconfig, args.context), True
    return None, False


def _pods_named(state: ClusterState, target: Target | None, namespace: str | None) -> list[Mapping[str, Any]]:
    """The Pods the user named (pod/NAME, or a bare name): a Pod's Workload is not found by its name (a Pod group's
    Workload is the group's; a Job's Pod leads to the Job's), so `explain pod/NAME` goes through the Pod."""
    if target is not None and target.kind in ("Deployment", "ReplicaSet"):
        return _replica_pods(state, target, namespace)
    if target is None or target.kind not in (None, "Pod") or not state.pods:
        return []
    if namespace is not None:
        pod = state.pods.get((namespace, target.name))
        return [pod] if pod is not None else []
    return [state.pods[k] for k in sorted(k for k in state.pods if k[1] == target.name)]


def _replica_pods(state: ClusterState, target: Target, namespace: str | None) -> list[Mapping[str, Any]]:
    """The Pods of the Deployment or ReplicaSet named: Kueue gives each Pod a Workload of its own (its Deployment
    integration only labels the Pods), so these lead to the Workloads the user means."""
    out = []
    for (ns, _), pod in sorted(state.pods.items()):
        if namespace is not None and ns != namespace:
            continue
        made = kobj.deployment_of(pod)
        controller = kobj.controller_ref(pod) or {}
        if (made is not None and made[0] == target.name) if target.kind == "Deployment" else (
                controller.get("kind") == "ReplicaSet" and controller.get("name") == target.name):
            out.append(pod)
    return out


def _unmanaged_pod(pod: Mapping[str, Any]) -> str:
    """A Pod in the input that leads to no Workload (nor to a Pod group's verdict): what it lacks, by its labels."""
    where = f"Pod {kobj.namespace(pod)}/{kobj.name(pod)} is in the input"
    queue = s(kobj.labels(pod).get("kueue.x-k8s.io/queue-name"))
    group = identifier(pod, POD_GROUP_KEY)
    if group:
        return (f"kueue-doctor: {where}, in Pod group {group}, but the input has no Workload {group} and nothing "
                "says why" + ("" if queue else " (its Pods have no kueue.x-k8s.io/queue-name label: Kueue ignores "
                              "the group)") + f": kubectl get workload {group} -n {kobj.namespace(pod)}.")
    if queue:
        wl = expected_workload_name(pod)
        return (f"kueue-doctor: {where} with queue {queue}, but the input has no Workload {wl} (the name Kueue gives "
                f"a single Pod's): Kueue has not made it, or the dump lacks it (kubectl get workload {wl} -n "
                f"{kobj.namespace(pod)}).")
    return (f"kueue-doctor: {where} but belongs to no Workload: it has no kueue.x-k8s.io/queue-name label (Kueue "
            "manages a plain Pod only if it had one when it was created) and no owner with a Workload in the input "
            "(a Job's Pod: name the Job, job/NAME).")


# kubectl's names for the owner kinds Kueue manages (singular, plural, short) -> the kind
_KIND_NAMES = {alias: kind for kind, aliases in {
    "Workload": ("workload", "workloads", "wl"), "Job": ("job", "jobs"), "Pod": ("pod", "pods", "po"),
    "JobSet": ("jobset", "jobsets"), "RayJob": ("rayjob", "rayjobs"), "RayCluster": ("raycluster", "rayclusters"),
    "RayService": ("rayservice", "rayservices"),
    "SparkApplication": ("sparkapplication", "sparkapplications", "sparkapp"),
    "StatefulSet": ("statefulset", "statefulsets", "sts"), "Deployment": ("deployment", "deployments", "deploy"),
    "LeaderWorkerSet": ("leaderworkerset", "leaderworkersets", "lws"), "MPIJob": ("mpijob", "mpijobs"),
    "PyTorchJob": ("pytorchjob", "pytorchjobs"), "TFJob": ("tfjob", "tfjobs"),
    "XGBoostJob": ("xgboostjob", "xgboostjobs"), "PaddleJob": ("paddlejob", "paddlejobs"),
    "JAXJob": ("jaxjob", "jaxjobs"), "TrainJob": ("trainjob", "trainjobs"),
    "ReplicaSet": ("replicaset", "replicasets", "rs"), "AppWrapper": ("appwrapper", "appwrappers", "aw"),
}.items() for alias in aliases}


@dataclass(frozen=True)
class Target:
    """What the user named: a Workload or owner name, or KIND/NAME as kubectl spells it."""

    name: str
    kind: str | None = None  # None: a bare name; "Workload": the Workload itself; else an owner kind

    @classmethod
    def parse(cls, text: str | None) -> Target | None:
        if not text:
            return None
        if "/" not in text:
            return cls(text)
        kind, name = text.split("/", 1)
        word = kind.split(".", 1)[0].lower()  # jobs.batch, jobsets.jobset.x-k8s.io
        return cls(name, _KIND_NAMES.get(word, kind))

    def matches(self, wl_name: str, workload: Mapping[str, Any]) -> bool:
        if self.kind in (None, "Workload") and wl_name == self.name:
            return True
        if self.kind == "Workload":
            return False
        kind = self.kind.lower() if self.kind else None
        return any(s(ref.get("name")) == self.name and (kind is None or (s(ref.get("kind")) or "").lower() == kind)
                   for ref in owner_refs(workload))

    def not_found(self, namespace: str | None, read: int, elsewhere: Sequence[str] = (), listed: int = 0,
                  live: bool = False, pods: int = 0) -> str:
        """Neither the Workload nor the owner named is in the input: a name or namespace typo, or a dump without
        that kind. (An owner that is in the input but has no Workload is explained by no_workload.py instead.)"""
        where = f" in namespace {namespace}" if namespace else ""
        if self.kind in (None, "Workload"):
            owned = "" if self.kind else " and none owned by an object of that name"
            return (f"kueue-doctor: no Workload named {self.name}{where}{owned} in the input ({read} Workloads read). "
                    "Workload names look like job-<job name>-<hash>; name the owner as KIND/NAME (job/trainer), "
                    "or list them: kubectl get workloads -A")
        ns = f" -n {namespace}" if namespace else ""
        head = f"kueue-doctor: no {self.kind} named {self.name}{where}"
        if elsewhere:
            return (f"{head}; the input has {self.kind} {self.name} in namespace {', '.join(elsewhere[:5])}: "
                    f"add -n {elsewhere[0]} (or -A).")
        if self.kind == "ReplicaSet":  # no owner of its own: its Pods lead to their Workloads
            return (f"{head}: no Pod in the input has it as its controller ({pods} Pods read): check the name "
                    f"(kubectl get replicasets{ns or ' -A'}), and that the dump has its Pods (kubectl get pods -A "
                    "-o yaml).")
        if live or listed:
            return (f"{head} {'in the cluster' if live else f'in the input ({listed} {self.kind}s read)'}, and no "
                    f"Workload of it: check the name (kubectl get {self.kind.lower()}s{ns or ' -A'}).")
        return (f"{head} and no Workload of it in the input ({read} Workloads read, no {self.kind}s): check the name, "
                f"and add the {self.kind}s to the dump (kubectl get {self.kind.lower()}s -A -o yaml).")


def write(diagnoses: list[dict[str, Any]], output: str, now: datetime, out: IO[str]) -> None:
    if output == "json":
        json.dump(diagnoses, out, indent=2, sort_keys=False)
        out.write("\n")
    elif output == "yaml":
        import yaml

        out.write(yaml.safe_dump_all(diagnoses, sort_keys=False, width=120) if diagnoses else "")
    else:
        out.write(table(diagnoses, now, wide=output == "wide"))


def write_groups(groups: list[Group], output: str, now: datetime, out: IO[str]) -> None:
    if output in ("json", "yaml"):
        docs = [g.as_dict() for g in groups]
        if output == "json":
            json.dump(docs, out, indent=2)
            out.write("\n")
        else:
            import yaml

            out.write(yaml.safe_dump(docs, sort_keys=False, width=120) if docs else "")
        return
    head = ["CLUSTERQUEUE", "WORKLOADS", "REASON", "CAUSE", "ACTION", "LONGEST", "OLDEST", "MESSAGE"]
    rows = [[g.cluster_queue, str(g.count), g.reason, g.cause or "-", g.action_by, _age(now, g.oldest_since),
             g.oldest, g.message] for g in groups]
    out.write(_columns(head, rows, wide=output == "wide"))


def _age(now: datetime, since: str | None) -> str:
    t = parse_time(since)
    return format_duration(now - t, precise=True) if t is not None else "-"


def _position_cell(pos: Mapping[str, Any] | None) -> str:
    """`3/7`, with Kueue's own position when its visibility API says otherwise: `3/7(kueue:5)`."""
    if not pos:
        return "-"
    vis = pos.get("visibility")
    return f"{pos['position']}/{pos['pending']}" + (f"(kueue:{vis})" if vis is not None and vis != pos["position"]
                                                     else "")


def table(diagnoses: list[dict[str, Any]], now: datetime, wide: bool = False) -> str:
    head = ["NAMESPACE", "WORKLOAD", "STAGE", "REASON", "CAUSE", "ACTION", "FOR"]
    if wide:
        head[4:4] = []
        head += ["CLUSTERQUEUE", "LOCALQUEUE", "FLAVORS", "POSITION"]
    head.append("MESSAGE")
    rows = []
    for d in diagnoses:
        st: Mapping[str, Any] = d["status"]
        row = [d["metadata"]["namespace"], d["metadata"]["name"], st["stage"], st["reason"], st.get("cause") or "-",
               st["actionBy"], _age(now, st.get("since"))]
        if wide:
            pos = st.get("queuePosition")
            row += [st.get("clusterQueue") or "-", st.get("localQueue") or "-", ",".join(st.get("flavors", [])) or "-",
                    _position_cell(pos)]
        row.append(st["message"])
        rows.append(row)
    text = _columns(head, rows, wide)
    if wide:  # the way out, one line per change, under the table
        fixes = [f"  {d['metadata']['namespace']}/{d['metadata']['name']}: {r['actionBy']}: {r['message']}"
                 for d in diagnoses for r in d["status"].get("remedies") or []]
        if fixes:
            text += "\nWays out (status.remedies):\n" + "\n".join(fixes) + "\n"
    return text


def _columns(head: list[str], rows: list[list[str]], wide: bool) -> str:
    """Aligned columns, one line per row (a newline inside a cell, as in a check's message, is shown as "⏎");
    the last (the message) is cut to the terminal unless wide."""
    rows = [head, *([" ⏎ ".join(c.splitlines()) if "\n" in c or "\r" in c else c for c in r] for r in rows)]
    widths = [max(len(r[c]) for r in rows) for c in range(len(head) - 1)]
    term = shutil.get_terminal_size((160, 20)).columns
    lines = []
    for r in rows:
        cells = [r[c].ljust(widths[c]) for c in range(len(widths))]
        line = "  ".join(cells) + "  "
        msg = r[-1]
        if not wide:
            room = max(term - len(line), 40)
            if len(msg) > room:
                msg = msg[: room - 1] + "…"
        lines.append(line + msg)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
