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
from typing import Final

import zstandard

from kafkalog.errors import RemoteStorageError
from kafkalog.objstore.store import ObjectStore
from kafkalog.tiered.crypto import decrypt_chunk
from kafkalog.tiered.manifest import ChunkIndex

__all__ = ["DEFAULT_CHUNK_CACHE_BYTES", "BytesFile", "ChunkedFile", "object_url"]

#: Default bound on the decoded chunks one :class:`ChunkedFile` keeps (at least one chunk is always kept).
DEFAULT_CHUNK_CACHE_BYTES: Final = 32 * 1024 * 1024


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

    A read maps its byte range to chunks through the chunk index, fetches the chunks it does not hold in one
    ``get_ranges`` call, decodes each (AES-GCM, then zstd: the reverse of the upload's order) and keeps the
    decoded chunks in an LRU bounded by ``cache_bytes``."""

    def __init__(
        self,
        store: ObjectStore,
        key: str,
        chunk_index: ChunkIndex,
        *,
        compressed: bool,
        data_key: Callable[[], tuple[bytes, bytes]] | None,
        cache_bytes: int = DEFAULT_CHUNK_CACHE_BYTES,
    ) -> None:
        self._store = store
        self._key = key
        self._index = chunk_index
        self._compressed = compressed
        self._data_key = data_key
        self._max_chunks = max(1, cache_bytes // max(1, chunk_index.original_chunk_size))
        self._cache: OrderedDict[int, bytes] = OrderedDict()
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

    def _decode(self, i: int, raw: bytes) -> bytes:
        chunk = self._index.chunk(i)
        where = f"{self.name} chunk {i}"
        data = raw
        if self._data_key is not None:
            key, aad = self._data_key()
            data = decrypt_chunk(key, aad, data, where)
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
        return data

    def pread(self, n: int, position: int) -> bytes:
        chunks = self._index.chunks_for_range(position, position + max(n, 0))
        if not chunks:
            return b""
        with self._lock:
            have = {c.index: self._cache[c.index] for c in chunks if c.index in self._cache}
            for i in have:
                self._cache.move_to_end(i)
        missing = [c for c in chunks if c.index not in have]
        if missing:
            ranges = [(c.transformed_position, c.transformed_position + c.transformed_size) for c in missing]
            raws = self._store.get_ranges(self._key, ranges)
            for c, raw in zip(missing, raws, strict=True):
                have[c.index] = self._decode(c.index, raw)
            with self._lock:
                for c in missing:
                    self._cache[c.index] = have[c.index]
                    self._cache.move_to_end(c.index)
                while len(self._cache) > self._max_chunks:
                    self._cache.popitem(last=False)
        first = chunks[0]
        data = b"".join(have[c.index] for c in chunks)
        start = position - first.original_position
        return data[start : start + n]

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
