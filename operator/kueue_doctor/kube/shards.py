"""Namespace shards: which replica of `--total-shards N` owns a namespace.

A namespace belongs to shard `fnv1a64(name) % N`: the 64-bit FNV-1a hash of the namespace's name (Go's hash/fnv
New64a, the hash the apiserver's sharded list and watch uses, KEP-5866) modulo N. Not the KEP's split of the hash
into N contiguous ranges: FNV-1a's high bits barely depend on a name's last characters, so names that differ only
at their end (team-a ... team-z, team-0 ... team-1999) fall into one range (all 26 of team-a..z into one of 2
ranges; team-0..1999 into 690/200/1110 of 3), while the low bits spread them evenly (13/13; 660/675/665).
Python's `hash()` is salted per process and must never decide ownership: two replicas would disagree.

With `--shard-boundaries` (N-1 cut points, planned from the cluster's namespaces by `kueue-doctor shard-plan`),
shard I owns the hashes from cut point I-1 up to cut point I instead: a partition the apiserver can apply itself
(`selector`), so that where it serves KEP-5866 (the alpha gate ShardedListAndWatch) a shard is never even sent
another shard's Events, owners and AdmissionDiagnoses. Where it does not, the parameter is ignored and the same
partition is applied here (`keeps`, `owns`): the same verdicts and writes either way. Cut points planned from
the namespaces' hashes, not N equal ranges, because of the high bits above.

What a shard keeps (`keeps`): every cluster-scoped object (ClusterQueues, Cohorts, flavors, Namespaces, ...) and
every Workload and LocalQueue of the cluster, because a ClusterQueue's facts (queue positions, the usage of its
cohort, who is ahead) are read from all the Workloads of the ClusterQueue, whatever their namespace; of the other
namespaced kinds (Events, Jobs and other owners, our AdmissionDiagnoses, Pods) only those of its own namespaces.
What it diagnoses, exports and writes (`owns`): the Workloads and owners of its own namespaces only. Of the other
shards' Workloads it keeps projections of what those facts read (`slim`: kube/slim.foreign_workload).
Other shards' Pods are not kept: the one reader of Pods across namespaces is a node's free capacity, which needs
the Nodes, and the operator reads none (only `explain`, never sharded, does). Were the operator to read Nodes, the
bound Pods of every namespace (and not only Kueue's) would be needed again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from .objects import namespace, s
from .slim import foreign_workload
from .slim import slim as slim_whole

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
SPACE = 1 << 64
SHARED_KINDS = frozenset({"Workload", "LocalQueue"})  # kept by every shard: ClusterQueue-level facts need them all
NAMESPACE_FIELD = "object.metadata.namespace"


def fnv1a64(text: str) -> int:
    """The 64-bit FNV-1a hash of `text` (UTF-8), as Go's hash/fnv New64a computes it."""
    h = FNV_OFFSET
    for byte in text.encode():
        h = ((h ^ byte) * FNV_PRIME) % SPACE
    return h


def hex64(value: int) -> str:
    """A hash bound as KEP-5866 spells it: 0x and 16 lowercase hex digits (2**64 itself has 17)."""
    return f"0x{value:016x}"


def parse_boundaries(text: str) -> tuple[int, ...]:
    """`--shard-boundaries`: comma-separated hex cut points (0x optional); ValueError on anything else."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return tuple(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"--shard-boundaries takes hex numbers separated by commas (as `kueue-doctor shard-plan` "
                         f"prints them), got {text!r}") from None


def plan(weights: Mapping[str, int], total: int) -> tuple[int, ...]:
    """N-1 cut points that split the namespaces, in the order of their hashes, into `total` runs of about equal
    weight (Workloads; a namespace weighs at least 1). Each cut is the hash of the first namespace of the next
    run, so a namespace created later falls into whichever run its hash does."""
    ordered = sorted((fnv1a64(ns), max(1, w)) for ns, w in weights.items())
    whole = sum(w for _, w in ordered)
    cuts: list[int] = []
    seen = 0
    for position, (h, w) in enumerate(ordered):
        want = len(cuts) + 1
        # cut before this namespace when most of its weight lies past the next run's share
        if want < total and position and seen + w / 2 >= whole * want / total and (not cuts or h > cuts[-1]):
            cuts.append(h)
        seen += w
    while len(cuts) < total - 1:  # fewer namespaces than shards: the rest of the hash space, split evenly
        last = cuts[-1] if cuts else 0
        cuts.append(last + (SPACE - last) // (total - len(cuts)))
    return tuple(cuts)


@dataclass(frozen=True)
class Shard:
    index: int = 0
    total: int = 1
    boundaries: tuple[int, ...] = ()  # N-1 cut points of the hash space; () is fnv1a64 % N

    def problems(self) -> list[str]:
        if self.total < 1:
            return [f"--total-shards must be 1 or more (got {self.total})"]
        if not 0 <= self.index < self.total:
            return [f"--shard-index must be between 0 and {self.total - 1} for {self.total} shard(s) "
                    f"(got {self.index})"]
        if self.boundaries and len(self.boundaries) != self.total - 1:
            return [f"--shard-boundaries needs {self.total - 1} cut point(s) for {self.total} shards, got "
                    f"{len(self.boundaries)}: plan them with `kueue-doctor shard-plan --total-shards {self.total}`"]
        bounds = (0, *self.boundaries, SPACE)
        if self.boundaries and any(not a < b for a, b in pairwise(bounds)):
            return ["--shard-boundaries must rise strictly between 0x0 and 0x10000000000000000 (each shard owns "
                    f"the hashes from one cut point up to the next), got {','.join(map(hex64, self.boundaries))}"]
        return []

    @property
    def sharded(self) -> bool:
        return self.total > 1

    def of(self, namespace: str) -> int:
        """The shard that owns `namespace`."""
        if self.boundaries:
            return bisect_right(self.boundaries, fnv1a64(namespace))
        return fnv1a64(namespace) % self.total

    @property
    def selector(self) -> str | None:
        """KEP-5866's shardSelector for this shard's namespaces; None when the partition is not ranges."""
        if not self.sharded or not self.boundaries:
            return None
        bounds = (0, *self.boundaries, SPACE)
        return f"shardRange({NAMESPACE_FIELD}, '{hex64(bounds[self.index])}', '{hex64(bounds[self.index + 1])}')"

    def narrows(self, kind: str) -> bool:
        """The apiserver may be asked to send only this shard's objects of `kind` (all a shard keeps of it)."""
        return self.selector is not None and kind not in SHARED_KINDS

    def owns(self, namespace: str | None) -> bool:
        """This shard diagnoses and writes for `namespace`; "" or None (cluster-scoped) belongs to every shard."""
        return not self.sharded or not namespace or self.of(namespace) == self.index

    def keeps(self, obj: Mapping[str, Any]) -> bool:
        """This shard stores `obj` (see the module docstring): checked before an object is slimmed or queued."""
        if not self.sharded:
            return True
        meta = obj.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        return not ns or s(obj.get("kind")) in SHARED_KINDS or self.of(str(ns)) == self.index

    def slim(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """What this shard stores of `obj` (one it `keeps`): slimmed, or projected when it is another shard's
        Workload."""
        if self.sharded and obj.get("kind") == "Workload" and not self.owns(namespace(obj)):
            return foreign_workload(obj)
        return slim_whole(obj)

    def lease(self, base: str) -> str:
        """The leader-election Lease of this shard: `base` unsharded, else `base-shard-I-of-N` (a replica started
        with another N never stands by for, nor leads, this shard)."""
        return base if not self.sharded else f"{base}-shard-{self.index}-of-{self.total}"

    def describe(self) -> str:
        if self.boundaries:
            bounds = (0, *self.boundaries, SPACE)
            return (f"shard {self.index} of {self.total} (namespace hashes {hex64(bounds[self.index])} to "
                    f"{hex64(bounds[self.index + 1])})")
        return f"shard {self.index} of {self.total}"
