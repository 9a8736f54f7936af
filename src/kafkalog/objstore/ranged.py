""":class:`RangedFile` (one object read by position, block by block) and :class:`StorePartitionSource` (a copied
Kafka partition directory in a bucket, as a :class:`~kafkalog.objstore.files.PartitionSource`).

Invariants owned here:

* A :class:`RangedFile` reads its object only in aligned blocks of ``block_size`` bytes (the last one
  shorter), each block at most once while it stays in a bounded LRU of ``cache_blocks`` blocks; the blocks
  one read misses are fetched by one GET each, all at once (the first on the reader's thread, the others on
  the read-ahead threads), so each cached block is its own buffer and pins no other bytes. Reads hand out
  views of the blocks: ``readinto`` copies them once, straight into the caller's buffer.
  A read that spans more than one block (a scan's chunk), or a sequential one (starting where the previous
  one ended, or in the block after it), starts fetching the next ``readahead_blocks`` blocks in the
  background, so a scan overlaps the transfer of the next blocks with the decoding of these; ``prefetch``
  starts them before the first read (a scan about to reach the file: the next segment). Memory held per open
  file is at most ``(cache_blocks + readahead_blocks) * block_size`` (32 MiB by default). The size is the
  listing's or one HEAD's, taken at open: bytes past it are never returned (an object that shrank since is an
  error from the store).
* A :class:`StorePartitionSource` lists ``<prefix>/<topic>-<partition>/`` with one LIST per
  :meth:`~StorePartitionSource.list_files` call, opens the files as :class:`RangedFile` s with the sizes
  of its last listing (no HEAD), and calls a prefix with nothing under it
  :class:`~kafkalog.errors.RemoteResourceNotFoundError`: an absent partition is an error, never an empty
  one.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import ClassVar

from kafkalog.errors import InvalidConfigurationError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore.options import RANGED_OPTION_KEYS, parse_int
from kafkalog.objstore.store import ObjectStore, range_view

#: Default block: the unit of every ranged GET (4 MiB, the Aiven plugin's recommended chunk size).
DEFAULT_BLOCK_SIZE = 4 * 1024 * 1024
#: Blocks an open file keeps (LRU).
DEFAULT_CACHE_BLOCKS = 4
#: Blocks fetched ahead of a scan (16 MiB: one read of the Spark source's, ``read_task``'s ``chunk_bytes``).
DEFAULT_READAHEAD_BLOCKS = 4
#: Largest file read whole into memory (``storage.whole.file.max.bytes``): the small files of a partition
#: directory (indexes: ``segment.index.bytes`` is 10 MiB by default; producer snapshots; checkpoints).
DEFAULT_WHOLE_FILE_MAX_BYTES = 128 * 1024 * 1024
#: Threads fetching read-ahead blocks, shared by every open file of the process.
READAHEAD_THREADS = 8


_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def readahead_pool() -> ThreadPoolExecutor:
    """The process's read-ahead threads; a process forked after they started (a Spark Python worker, a
    multiprocessing child) gets its own: the parent's threads do not exist there, and a task given to
    their pool would never run."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(READAHEAD_THREADS, thread_name_prefix="kafkalog-readahead")
            _pool_pid = os.getpid()
        return _pool


@dataclass(frozen=True)
class RangedSettings:
    """How a :class:`RangedFile` reads: block size, blocks cached, blocks read ahead."""

    block_size: int = DEFAULT_BLOCK_SIZE
    cache_blocks: int = DEFAULT_CACHE_BLOCKS
    readahead_blocks: int = DEFAULT_READAHEAD_BLOCKS
    whole_file_max_bytes: int = DEFAULT_WHOLE_FILE_MAX_BYTES

    def __post_init__(self) -> None:
        if self.whole_file_max_bytes < 1:
            raise InvalidConfigurationError(
                f"storage.whole.file.max.bytes must be positive, not {self.whole_file_max_bytes}"
            )
        if self.block_size < 1:
            raise InvalidConfigurationError(f"storage.block.size must be positive, not {self.block_size}")
        if self.cache_blocks < 1:
            raise InvalidConfigurationError(
                f"storage.block.cache.count must be at least 1, not {self.cache_blocks}"
            )
        if self.readahead_blocks < 0:
            raise InvalidConfigurationError(
                f"storage.readahead.blocks must be >= 0, not {self.readahead_blocks}"
            )

    #: The storage options :meth:`from_options` reads.
    keys: ClassVar[tuple[str, ...]] = RANGED_OPTION_KEYS

    @classmethod
    def from_options(cls, options: Mapping[str, str] | None) -> RangedSettings:
        """The settings named in storage ``options`` (``storage.block.size`` in bytes,
        ``storage.block.cache.count``, ``storage.readahead.blocks``, ``storage.whole.file.max.bytes``),
        defaults for the rest."""
        o = options or {}
        return cls(
            parse_int("storage.block.size", o["storage.block.size"], minimum=1)
            if "storage.block.size" in o
            else DEFAULT_BLOCK_SIZE,
            parse_int("storage.block.cache.count", o["storage.block.cache.count"], minimum=1)
            if "storage.block.cache.count" in o
            else DEFAULT_CACHE_BLOCKS,
            parse_int("storage.readahead.blocks", o["storage.readahead.blocks"], minimum=0)
            if "storage.readahead.blocks" in o
            else DEFAULT_READAHEAD_BLOCKS,
            parse_int("storage.whole.file.max.bytes", o["storage.whole.file.max.bytes"], minimum=1)
            if "storage.whole.file.max.bytes" in o
            else DEFAULT_WHOLE_FILE_MAX_BYTES,
        )


class RangedFile:
    """A :class:`~kafkalog.objstore.files.RandomAccessFile` over one object (see the module docstring).

    Thread-compatible: one reader thread at a time (the read-ahead threads only fill futures)."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        *,
        size: int | None = None,
        settings: RangedSettings | None = None,
        name: str | None = None,
    ) -> None:
        self._store = store
        self._key = key
        self._settings = settings or RangedSettings()
        self._name = name or _under(store.url, key)
        self._size = store.head(key).size if size is None else size
        self._blocks: OrderedDict[int, memoryview] = OrderedDict()
        self._pending: dict[int, Future[memoryview]] = {}
        self._next_sequential = -1  # the position a sequential read would start at
        self._closed = False

    def __repr__(self) -> str:
        return f"RangedFile({self._name!r}, {self._size} bytes)"

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return self._size

    @property
    def settings(self) -> RangedSettings:
        """Block size, cache and read-ahead of this file."""
        return self._settings

    def _span(self, block: int) -> tuple[int, int]:
        bs = self._settings.block_size
        return block * bs, min((block + 1) * bs, self._size)

    def prefetch(self, position: int) -> None:
        """Start fetching the ``readahead_blocks`` blocks from ``position`` in the background, and count a read
        there as sequential (a scan about to reach this file: the next segment of a partition)."""
        if self._closed or not 0 <= position < self._size:
            return
        self._next_sequential = position
        self._read_ahead(position // self._settings.block_size)

    def _check(self, n: int, position: int) -> None:
        if self._closed:
            raise ValueError(f"{self._name}: read of a closed file")
        if n < 0 or position < 0:
            raise ValueError(f"{self._name}: negative read ({n} bytes at {position})")

    def pread(self, n: int, position: int) -> bytes:
        self._check(n, position)
        end = min(position + n, self._size)
        if end <= position:
            return b""
        parts = self._slices(position, end)
        return bytes(parts[0]) if len(parts) == 1 else b"".join(parts)

    def readinto(self, view: memoryview, position: int) -> int:
        """Fill ``view`` (bytes) with the file's bytes from ``position``; returns how many (fewer at the end of
        the file). The blocks are copied once, straight into ``view``."""
        n = view.nbytes
        self._check(n, position)
        end = min(position + n, self._size)
        if end <= position:
            return 0
        out = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        at = 0
        for part in self._slices(position, end):
            out[at : at + len(part)] = part
            at += len(part)
        return at

    def _slices(self, position: int, end: int) -> list[memoryview]:
        """Views of the cached blocks holding ``[position, end)``, in order (no copy). A sequential read, or
        one spanning more than one block (a scan's chunk), starts the read-ahead of the blocks after it."""
        bs = self._settings.block_size
        first, last = position // bs, (end - 1) // bs
        # sequential: starts where the last read ended, or skips less than a block past it
        sequential = 0 <= self._next_sequential <= position < self._next_sequential + bs
        self._next_sequential = end
        blocks = self._fetch(range(first, last + 1))
        if sequential or last > first:
            self._read_ahead(last + 1)
        out: list[memoryview] = []
        for b in range(first, last + 1):
            start = b * bs
            data = blocks[b]
            out.append(data[max(position, start) - start : min(end, start + len(data)) - start])
        return out

    def _fetch(self, wanted: range) -> dict[int, memoryview]:
        got: dict[int, memoryview] = {}
        missing: list[int] = []
        for b in wanted:
            data = self._blocks.get(b)
            if data is not None:
                self._blocks.move_to_end(b)
                got[b] = data
                continue
            future = self._pending.pop(b, None)
            if future is not None:
                got[b] = future.result()  # a read-ahead block: its error, if any, is this read's
                self._remember(b, got[b])
            else:
                missing.append(b)
        if missing:
            # one GET per block, all at once: each block is its own buffer (a cached block never pins its
            # neighbours' bytes), and a read of several blocks transfers them in parallel
            pool = readahead_pool()
            later = {b: pool.submit(range_view, self._store, self._key, *self._span(b)) for b in missing[1:]}
            try:
                got[missing[0]] = range_view(self._store, self._key, *self._span(missing[0]))
            finally:
                for b, future in later.items():
                    got[b] = future.result()
            for b in missing:
                self._remember(b, got[b])
        return got

    def _remember(self, block: int, data: memoryview) -> None:
        self._blocks[block] = data
        self._blocks.move_to_end(block)
        while len(self._blocks) > self._settings.cache_blocks:
            self._blocks.popitem(last=False)

    def _read_ahead(self, first: int) -> None:
        bs = self._settings.block_size
        for b in range(first, first + self._settings.readahead_blocks):
            if b * bs >= self._size or b in self._blocks or b in self._pending:
                continue
            start, end = self._span(b)
            self._pending[b] = readahead_pool().submit(range_view, self._store, self._key, start, end)
        # read-ahead blocks the reader skipped past are dropped (their results are never waited for)
        for b in [b for b in self._pending if b < first]:
            self._pending.pop(b).cancel()

    def close(self) -> None:
        self._closed = True
        self._blocks.clear()
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()


def _under(url: str, key: str) -> str:
    """The URL of ``key`` in a store whose root is ``url`` (for names in messages)."""
    return url + key if url.endswith("/") else f"{url}/{key}"


def _join(prefix: str) -> str:
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


class StorePartitionSource:
    """A :class:`~kafkalog.objstore.files.PartitionSource` over ``<prefix>/`` of ``store``: the objects
    directly under it are the partition directory's files (see the module docstring)."""

    def __init__(self, store: ObjectStore, prefix: str, *, settings: RangedSettings | None = None) -> None:
        self._store = store
        self._prefix = _join(prefix)
        self._settings = settings or RangedSettings()
        self._sizes: dict[str, int] = {}
        self._name = _under(store.url, self._prefix)

    def __repr__(self) -> str:
        return f"StorePartitionSource({self._name!r})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def store(self) -> ObjectStore:
        """The store the files are read from."""
        return self._store

    def list_files(self) -> Mapping[str, int]:
        listing = self._store.list(self._prefix)
        if not listing.objects and not listing.prefixes:
            raise RemoteResourceNotFoundError(
                f"{self._name}: no such partition directory (nothing under this prefix; check the URL)"
            )
        sizes = {m.key[len(self._prefix) :]: m.size for m in listing.objects}
        self._sizes = sizes
        return dict(sizes)

    def _key(self, name: str) -> str:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"{self._name}: {name!r} is not a file name of a partition directory")
        return self._prefix + name

    def open(self, name: str) -> RangedFile:
        key = self._key(name)
        return RangedFile(
            self._store, key, size=self._sizes.get(name), settings=self._settings, name=self._name + name
        )

    def read(self, name: str) -> bytes:
        key = self._key(name)
        return read_whole(self._store, key, self._sizes.get(name), self._settings, self._name + name)


def read_whole(
    store: ObjectStore, key: str, size: int | None, settings: RangedSettings | None, name: str
) -> bytes:
    """The whole object ``key`` (``size`` from a listing; None: one HEAD first), refused with
    :class:`~kafkalog.errors.RemoteStorageError` when larger than ``storage.whole.file.max.bytes``, so a
    file read whole (an index, a snapshot, a checkpoint) never takes more memory than that bound."""
    limit = (settings or RangedSettings()).whole_file_max_bytes
    if size is None:
        size = store.head(key).size
    if size > limit:
        raise RemoteStorageError(
            f"{name}: {size} bytes, more than storage.whole.file.max.bytes ({limit}) allows for a file read "
            "whole (an index, snapshot or checkpoint); raise that storage option if the file is right"
        )
    # a ranged GET of the size checked: an object that grew since the HEAD or listing is not read past it
    return store.get_range(key, 0, size) if size else b""


def partition_prefixes(store: ObjectStore, prefix: str = "") -> dict[str, str]:
    """``{"<topic>-<partition>": key prefix}`` of the partition directories directly under ``prefix`` (one
    LIST; a child whose name does not end in ``-<number>`` is not a partition directory and is left out)."""
    base = _join(prefix)
    out: dict[str, str] = {}
    for child in store.list(base).prefixes:
        name = child[len(base) :].rstrip("/")
        topic, dash, number = name.rpartition("-")
        if dash and topic and number.isdigit():
            out[name] = child
    return out
