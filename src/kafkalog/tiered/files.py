"""Random-access files over archived objects: a chunked (zstd / AES-GCM) reader with a bounded cache of
decoded chunks, and an in-memory file (an untransformed ``.log`` is read through
:class:`kafkalog.objstore.ranged.RangedFile`, its bytes passed through).

Invariant owned here: ``pread(n, position)`` returns the bytes of the *original* Kafka file at
``[position, position + n)`` (shorter only at its end), whatever transformation the object went through; a
transformed chunk that does not decode to exactly its original size is a
:class:`~kafkalog.errors.RemoteStorageError` naming the object, never short or wrong data.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

import zstandard

from kafkalog.errors import RemoteStorageError
from kafkalog.objstore.ranged import DEFAULT_READAHEAD_BLOCKS, readahead_pool
from kafkalog.objstore.store import ObjectStore, range_views
from kafkalog.tiered.crypto import decrypt_chunk
from kafkalog.tiered.manifest import Chunk, ChunkIndex

__all__ = ["DEFAULT_CHUNK_CACHE_BYTES", "DEFAULT_READAHEAD_CHUNKS", "BytesFile", "ChunkedFile", "object_url"]

#: Default bound on the decoded chunks one :class:`ChunkedFile` keeps (at least one chunk is always kept).
DEFAULT_CHUNK_CACHE_BYTES: Final = 32 * 1024 * 1024
#: Default chunks fetched and decoded ahead of a sequential reader (``storage.readahead.blocks``: for an
#: archive's transformed ``.log`` the unit is its chunk).
DEFAULT_READAHEAD_CHUNKS: Final = DEFAULT_READAHEAD_BLOCKS


def object_url(store: ObjectStore, key: str) -> str:
    """What errors call an object: the store's URL (never with credentials) joined with the key."""
    url = store.url
    return f"{url}{key}" if url.endswith("/") else f"{url}/{key}"


class BytesFile:
    """A small file held in memory (indexes, snapshots, checkpoints of an archive)."""

    def __init__(self, name: str, data: bytes) -> None:
        self._name = name
        self._data = data

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return len(self._data)

    def pread(self, n: int, position: int) -> bytes:
        return self._data[position : position + max(n, 0)]

    def close(self) -> None:
        pass


class ChunkedFile:
    """The original bytes of a chunked, compressed and/or encrypted ``.log`` object.

    A read maps its byte range to chunks through the chunk index; the chunks it does not hold are fetched by
    one ``get_ranges`` call and decoded (AES-GCM, then zstd: the reverse of the upload's order) on the
    read-ahead threads, in parallel (zstd and AES release the GIL). Decoded chunks stay in an LRU bounded by
    ``cache_bytes``. A sequential read (starting where the last one ended), or one spanning more than one
    chunk (a scan's chunk), also starts fetching and decoding the next ``readahead_chunks`` chunks in the
    background, so a scan overlaps the transfer and decoding of the next chunks with the use of these:
    memory per open file is at most ``cache_bytes`` plus ``readahead_chunks`` decoded chunks (and their
    transformed bytes while they decode)."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        chunk_index: ChunkIndex,
        *,
        compressed: bool,
        data_key: Callable[[], tuple[bytes, bytes]] | None,
        cache_bytes: int = DEFAULT_CHUNK_CACHE_BYTES,
        readahead_chunks: int = DEFAULT_READAHEAD_CHUNKS,
    ) -> None:
        self._store = store
        self._key = key
        self._index = chunk_index
        self._compressed = compressed
        self._data_key = data_key
        self._max_chunks = max(1, cache_bytes // max(1, chunk_index.original_chunk_size))
        self._readahead = max(0, readahead_chunks)
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._pending: dict[int, Future[bytes]] = {}
        self._next_sequential = -1
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return object_url(self._store, self._key)

    @property
    def size(self) -> int:
        return self._index.original_file_size

    @property
    def cached_chunks(self) -> int:
        """How many decoded chunks the cache holds now."""
        return len(self._cache)

    def _decode(self, i: int, raw: bytes | memoryview) -> bytes:
        chunk = self._index.chunk(i)
        where = f"{self.name} chunk {i}"
        data: bytes | memoryview = raw
        if self._data_key is not None:
            key, aad = self._data_key()
            data = decrypt_chunk(key, aad, bytes(data), where)
        if self._compressed:
            try:
                declared = zstandard.frame_content_size(data)
            except zstandard.ZstdError:
                raise RemoteStorageError(f"{where}: not a zstd frame") from None
            if declared != chunk.original_size:
                raise RemoteStorageError(
                    f"{where}: zstd frame declares {declared} bytes, the chunk index {chunk.original_size}"
                )
            try:
                data = zstandard.ZstdDecompressor().decompress(data, max_output_size=chunk.original_size)
            except zstandard.ZstdError as exc:
                raise RemoteStorageError(f"{where}: zstd: {exc}") from None
        if len(data) != chunk.original_size:
            raise RemoteStorageError(
                f"{where}: decodes to {len(data)} bytes, the chunk index says {chunk.original_size}"
            )
        return data if isinstance(data, bytes) else bytes(data)

    def _fetch_and_decode(self, chunks: list[Chunk]) -> list[bytes]:
        """Fetch ``chunks`` (one ``get_ranges`` call) and decode them, the first here and the others on the
        read-ahead threads."""
        ranges = [(c.transformed_position, c.transformed_position + c.transformed_size) for c in chunks]
        raws = range_views(self._store, self._key, ranges)
        pool = readahead_pool()
        later = [pool.submit(self._decode, c.index, raw) for c, raw in zip(chunks[1:], raws[1:], strict=True)]
        try:
            first = self._decode(chunks[0].index, raws[0])
        except BaseException:
            for future in later:
                future.cancel()
            raise
        return [first, *(future.result() for future in later)]

    def _fetch_one(self, chunk: Chunk) -> bytes:
        return self._fetch_and_decode([chunk])[0]

    def _remember(self, index: int, data: bytes) -> None:
        with self._lock:
            self._cache[index] = data
            self._cache.move_to_end(index)
            while len(self._cache) > self._max_chunks:
                self._cache.popitem(last=False)

    def _chunks(self, position: int, end: int) -> tuple[list[Chunk], dict[int, bytes]]:
        chunks = self._index.chunks_for_range(position, end)
        if not chunks:
            return chunks, {}
        sequential = (
            0
            <= self._next_sequential
            <= position
            < self._next_sequential + max(1, self._index.original_chunk_size)
        )
        self._next_sequential = min(end, self.size)
        have: dict[int, bytes] = {}
        with self._lock:
            for c in chunks:
                data = self._cache.get(c.index)
                if data is not None:
                    self._cache.move_to_end(c.index)
                    have[c.index] = data
        missing: list[Chunk] = []
        for c in chunks:
            if c.index in have:
                continue
            future = self._pending.pop(c.index, None)
            if future is not None:
                have[c.index] = future.result()  # a read-ahead chunk: its error, if any, is this read's
                self._remember(c.index, have[c.index])
            else:
                missing.append(c)
        if missing:
            for c, data in zip(missing, self._fetch_and_decode(missing), strict=True):
                have[c.index] = data
                self._remember(c.index, data)
        if sequential or len(chunks) > 1:
            self._read_ahead(chunks[-1].index + 1)
        return chunks, have

    def prefetch(self, position: int) -> None:
        """Start fetching and decoding the ``readahead_chunks`` chunks from ``position`` in the background, and
        count a read there as sequential (a scan about to reach this file)."""
        if not 0 <= position < self.size or self._index.original_chunk_size < 1:
            return
        self._next_sequential = position
        self._read_ahead(position // self._index.original_chunk_size)

    def _read_ahead(self, first: int) -> None:
        count = self._index.count
        pool = readahead_pool()
        for i in range(first, min(first + self._readahead, count)):
            if i in self._pending or i in self._cache:
                continue
            self._pending[i] = pool.submit(self._fetch_one, self._index.chunk(i))
        for i in [i for i in self._pending if i < first]:
            self._pending.pop(i).cancel()

    def pread(self, n: int, position: int) -> bytes:
        chunks, have = self._chunks(position, position + max(n, 0))
        if not chunks:
            return b""
        start = position - chunks[0].original_position
        if len(chunks) == 1:
            return have[chunks[0].index][start : start + n]
        data = b"".join(have[c.index] for c in chunks)
        return data[start : start + n]

    def readinto(self, view: memoryview, position: int) -> int:
        """Fill ``view`` (bytes) from ``position`` with one copy of the decoded chunks; returns how many bytes
        (fewer at the end of the file)."""
        out = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        end = position + out.nbytes
        chunks, have = self._chunks(position, end)
        at = 0
        for c in chunks:
            data = memoryview(have[c.index])
            lo = max(position, c.original_position) - c.original_position
            hi = min(end, c.original_position + len(data)) - c.original_position
            out[at : at + hi - lo] = data[lo:hi]
            at += hi - lo
        return at

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
