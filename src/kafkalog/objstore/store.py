"""The :class:`ObjectStore` protocol, its value types, and :class:`MemoryStore` (an in-process store for
unit tests and for writers of test archives).

Contract of every implementation:

* ``list(prefix, delimiter=True)`` returns the immediate children of ``prefix`` (which ends with ``/`` or is
  empty): common prefixes (each ending with ``/``) and objects, both sorted by key; with
  ``delimiter=False`` every object under ``prefix``, recursively, and no prefixes. A prefix with nothing
  under it is an empty result, not an error.
* ``head`` / ``get`` / ``get_range`` of a missing key raise
  :class:`~kafkalog.errors.RemoteResourceNotFoundError`; any other failure (after bounded retries) raises
  :class:`~kafkalog.errors.RemoteStorageError`. Both name the key and never a secret.
* ``get_range(key, start, end)`` returns bytes ``[start, end)``; a range past the object's end is an error
  (a reader that asks for more than an object holds has been lied to by a manifest or index).
* ``get_ranges`` returns one ``bytes`` per range, in order; implementations may coalesce nearby ranges and
  run requests concurrently (bounded).
* A store may also offer ``get_range_view(key, start, end)`` and ``get_range_views(key, ranges)``: the same
  bytes as ``get_range`` / ``get_ranges``, as read-only ``memoryview`` s of the buffers the client received
  (no copy). :func:`range_view` and :func:`range_views` use them where a store has them, else wrap the
  ``bytes``; block readers (:class:`~kafkalog.objstore.ranged.RangedFile`) read through these.
* ``stats`` counts requests and payload bytes of every read (list, head, get), so tests and benchmarks can
  measure what a query transfers at the seam.
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError

#: Bytes of one part of a streamed upload (:meth:`ObjectStore.put_stream`; S3's minimum part is 5 MiB).
PUT_PART_SIZE: Final = 8 * 1024 * 1024
#: Parts of one streamed upload in flight at once.
PUT_CONCURRENCY: Final = 4


class ObjectMeta(NamedTuple):
    """One object: its key (relative to the store's root), size in bytes, last-modified time (ms) if known."""

    key: str
    size: int
    last_modified_ms: int | None = None


class ListResult(NamedTuple):
    """A listing: common prefixes (ending with ``/``) and objects, each sorted by key."""

    prefixes: list[str]
    objects: list[ObjectMeta]


@dataclass
class StoreStats:
    """Requests and payload bytes a store has served (thread-safe counters)."""

    list_requests: int = 0
    head_requests: int = 0
    get_requests: int = 0
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count_get(self, nbytes: int, requests: int = 1) -> None:
        """Count ``requests`` GETs that returned ``nbytes`` payload bytes in total."""
        with self._lock:
            self.get_requests += requests
            self.bytes_read += nbytes

    def count_list(self) -> None:
        """Count one LIST request."""
        with self._lock:
            self.list_requests += 1

    def count_head(self) -> None:
        """Count one HEAD request."""
        with self._lock:
            self.head_requests += 1

    def reset(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self.list_requests = self.head_requests = self.get_requests = self.bytes_read = 0


@runtime_checkable
class ObjectStore(Protocol):
    """What kafkalog needs from object storage (see the module docstring for the contract)."""

    @property
    def url(self) -> str:
        """The store's root as a URL without credentials (``s3://bucket/prefix``, ``memory://``, ...)."""
        ...

    @property
    def stats(self) -> StoreStats:
        """Counters of the requests and bytes this store has served."""
        ...

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        """Children of ``prefix`` (one level with ``delimiter``, else every object below it)."""
        ...

    def head(self, key: str) -> ObjectMeta:
        """Size (and time) of one object."""
        ...

    def get(self, key: str) -> bytes:
        """The whole object."""
        ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of one object."""
        ...

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        """Several ``[start, end)`` ranges of one object, in order."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Write one object whole (test writers, and the tiered-storage copy of later work)."""
        ...

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        """Write one object from ``chunks``, consumed in order as the upload goes (a multipart upload on
        object storage, with at most :data:`PUT_PART_SIZE` x :data:`PUT_CONCURRENCY` bytes buffered): the
        object appears whole or not at all, and the caller never holds more than one chunk."""
        ...

    def delete(self, key: str) -> None:
        """Delete one object; a missing key is not an error."""
        ...


class MemoryStore:
    """An :class:`ObjectStore` held in a dict (unit tests, test-archive writers). Thread-safe. It pickles as
    its name when it is the process-wide store of its ``memory://<name>`` URL (so a planned reader unpickled in
    the same process reads, and counts requests in, that one store), else as a copy of its objects."""

    def __init__(self, objects: dict[str, bytes] | None = None, *, url: str = "memory://") -> None:
        self._objects: dict[str, bytes] = dict(objects or {})
        self._lock = threading.Lock()
        self._url = url
        self._stats = StoreStats()

    def __repr__(self) -> str:
        return f"MemoryStore({self._url!r}, {len(self._objects)} objects)"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        name = _memory_name(self._url)
        with _shared_lock:
            shared = _shared.get(name) is self
        if shared:
            return shared_memory_store, (name,)
        with self._lock:
            objects = dict(self._objects)
        return _memory_copy, (objects, self._url)

    @property
    def url(self) -> str:
        return self._url

    @property
    def stats(self) -> StoreStats:
        return self._stats

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        self._stats.count_list()
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix))
            sizes = {k: len(self._objects[k]) for k in keys}
        if not delimiter:
            return ListResult([], [ObjectMeta(k, sizes[k]) for k in keys])
        prefixes: set[str] = set()
        objects: list[ObjectMeta] = []
        for k in keys:
            rest = k[len(prefix) :]
            cut = rest.find("/")
            if cut >= 0:
                prefixes.add(prefix + rest[: cut + 1])
            else:
                objects.append(ObjectMeta(k, sizes[k]))
        return ListResult(sorted(prefixes), objects)

    def _data(self, key: str) -> bytes:
        with self._lock:
            data = self._objects.get(key)
        if data is None:
            raise RemoteResourceNotFoundError(f"{self._url}: object {key!r} does not exist")
        return data

    def head(self, key: str) -> ObjectMeta:
        self._stats.count_head()
        return ObjectMeta(key, len(self._data(key)))

    def get(self, key: str) -> bytes:
        data = self._data(key)
        self._stats.count_get(len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        data = self._data(key)
        if not 0 <= start <= end <= len(data):
            raise RemoteStorageError(
                f"{self._url}: range [{start}, {end}) of {key!r} is outside the object ({len(data)} bytes)"
            )
        self._stats.count_get(end - start)
        return data[start:end]

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        return [self.get_range(key, s, e) for s, e in ranges]

    def put(self, key: str, data: bytes) -> None:
        with self._lock:
            self._objects[key] = bytes(data)

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        self.put(key, b"".join(chunks))  # the object is held in memory anyway

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)


def range_view(store: ObjectStore, key: str, start: int, end: int) -> memoryview:
    """Bytes ``[start, end)`` of ``key`` as a read-only view: the client's own buffer where the store offers
    ``get_range_view`` (no copy), else a view of ``get_range``'s ``bytes``."""
    view = getattr(store, "get_range_view", None)
    if view is not None:
        got: memoryview = view(key, start, end)
        return got
    return memoryview(store.get_range(key, start, end))


def range_views(store: ObjectStore, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[memoryview]:
    """Several ranges of ``key`` as read-only views (see :func:`range_view`), in order."""
    views = getattr(store, "get_range_views", None)
    if views is not None:
        got: builtins.list[memoryview] = views(key, ranges)
        return got
    return [memoryview(b) for b in store.get_ranges(key, ranges)]


def _memory_copy(objects: dict[str, bytes], url: str) -> MemoryStore:
    """An unpickled copy of an unregistered :class:`MemoryStore`."""
    return MemoryStore(objects, url=url)


_shared: dict[str, MemoryStore] = {}
_shared_lock = threading.Lock()


def _memory_name(url: str) -> str:
    return url.removeprefix("memory://").strip("/")


def shared_memory_store(name: str) -> MemoryStore:
    """The process-wide store ``memory://<name>`` (made empty on first use)."""
    name = _memory_name(name)
    with _shared_lock:
        store = _shared.get(name)
        if store is None:
            store = _shared[name] = MemoryStore(url=f"memory://{name}")
        return store


def forget_shared_memory_store(name: str) -> None:
    """Drop the process-wide store ``memory://<name>``."""
    with _shared_lock:
        _shared.pop(_memory_name(name), None)
