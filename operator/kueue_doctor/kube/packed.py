"""Objects kept as small compressed bytes and decoded when read: the operator's Pods (issue 12).

A slimmed Pod is about 1.6 KB of marshal bytes but 5.5 KB as Python dicts, lists and strings, and a cluster has
five to fifty times more Pods than Workloads. The engine reads a Workload's Pods only for the few rules that need
them (`Context.pods` is lazy) and once per pass at most, so keeping each Pod as ~400 bytes of zlib and paying
about 20-40 microseconds to decode it when read is the better trade. Siblings compress well against each other:
the first object stored is the zlib preset dictionary of the store (its labels, tolerations, condition types and
node names are what the others repeat), fixed for the store's life.

`marshal` is the format because it is the fastest stdlib codec for plain JSON values and the bytes never leave
the process; a value marshal refuses (a Mapping subclass, any non-builtin type) is kept as it is, never mangled.
"""

from __future__ import annotations

import contextlib
import marshal
import zlib
from collections.abc import ItemsView, Iterator, Mapping, MutableMapping, ValuesView
from typing import Any, Generic, TypeVar

K = TypeVar("K")

_WBITS = -15  # raw deflate: no zlib header or checksum on every blob (the bytes never leave the process)
_LEVEL = 1  # level 6 is 10% smaller and 20% slower to write; every Pod event writes one


class Deflate:
    """Bytes deflated against the first bytes given (the preset dictionary, fixed for the instance's life):
    siblings (two Pods, two diagnoses) repeat most of each other."""

    def __init__(self) -> None:
        self._zdict: bytes | None = None

    def compress(self, raw: bytes) -> bytes:
        if self._zdict is None:
            self._zdict = raw[-32768:]  # zlib's window: a preset dictionary longer than that is not used
        packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS, 8, zlib.Z_DEFAULT_STRATEGY, self._zdict)
        return packer.compress(raw) + packer.flush()

    def decompress(self, blob: bytes) -> bytes:
        assert self._zdict is not None
        unpacker = zlib.decompressobj(_WBITS, zdict=self._zdict)
        return unpacker.decompress(blob) + unpacker.flush()


class Codec:
    """Packs plain JSON values into raw deflate of their marshal bytes (`Deflate`); anything else is returned as
    it was given."""

    def __init__(self) -> None:
        self._deflate = Deflate()

    def pack(self, obj: Mapping[str, Any]) -> bytes | Mapping[str, Any]:
        try:
            raw = marshal.dumps(obj)  # type: ignore[arg-type]  # any JSON value; ValueError otherwise
        except ValueError:  # not plain JSON values (a Mapping subclass): kept as given
            return obj
        return self._deflate.compress(raw)

    def unpack(self, blob: bytes | Mapping[str, Any]) -> dict[str, Any]:
        """A fresh decoded copy (what was given, when it was kept as given)."""
        if type(blob) is not bytes:
            return blob  # type: ignore[return-value]  # kept as it was given
        obj: dict[str, Any] = marshal.loads(self._deflate.decompress(blob))
        return obj


class PackedObjects(MutableMapping[K, Mapping[str, Any]], Generic[K]):
    """A dict of objects whose values are stored compressed; each read returns a fresh decoded copy (the same copy
    while `remembering`).

    Callers must not rely on identity (two reads give equal, distinct dicts) nor mutate what they read in the
    hope of changing what is stored: neither the state nor the engine does either.
    """

    def __init__(self) -> None:
        self._blobs: dict[K, bytes | Mapping[str, Any]] = {}
        self._codec = Codec()
        self._memo: dict[K, Mapping[str, Any]] | None = None  # decoded copies, while `remembering`
        self._depth = 0

    def __getitem__(self, key: K) -> Mapping[str, Any]:
        memo = self._memo
        if memo is None:
            return self._codec.unpack(self._blobs[key])
        found = memo.get(key)
        if found is None:
            found = memo[key] = self._codec.unpack(self._blobs[key])
        return found

    def __setitem__(self, key: K, obj: Mapping[str, Any]) -> None:
        self._blobs[key] = self._codec.pack(obj)
        if self._memo is not None:
            self._memo.pop(key, None)

    def __delitem__(self, key: K) -> None:
        del self._blobs[key]
        if self._memo is not None:
            self._memo.pop(key, None)

    def items(self) -> ItemsView[K, Mapping[str, Any]]:
        """Every object, each decoded afresh even while `remembering`: a walk over all of them (the index build)
        must not leave them all decoded in the memo."""
        return _Items(self)

    def values(self) -> ValuesView[Mapping[str, Any]]:
        return _Values(self)

    @contextlib.contextmanager
    def remembering(self) -> Iterator[None]:
        """Each object read while the block runs is decoded once and the same copy returned again: a diagnosis
        pass reads a Workload several times (its own verdict, its queue's order, what moved lately)."""
        if self._depth == 0:
            self._memo = {}
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._memo = None

    def __contains__(self, key: object) -> bool:
        return key in self._blobs

    def __iter__(self) -> Iterator[K]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)

    def token(self, key: K) -> object:
        """What is stored for `key`: the same object until the key is written again (a cache of something read
        from the object checks it instead of decoding)."""
        return self._blobs[key]

    def stored_bytes(self) -> int:
        """The compressed bytes held (the blobs, not the dict's own table): for the memory bench."""
        return sum(len(b) for b in self._blobs.values() if type(b) is bytes)


class _Items(ItemsView[K, Mapping[str, Any]]):
    _mapping: PackedObjects[K]

    def __iter__(self) -> Iterator[tuple[K, Mapping[str, Any]]]:
        unpack = self._mapping._codec.unpack
        for key, blob in self._mapping._blobs.items():
            yield key, unpack(blob)


class _Values(ValuesView[Mapping[str, Any]]):
    _mapping: PackedObjects[Any]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        unpack = self._mapping._codec.unpack
        for blob in self._mapping._blobs.values():
            yield unpack(blob)
