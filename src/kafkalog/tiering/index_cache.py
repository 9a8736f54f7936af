"""Kafka's ``RemoteIndexCache``: the offset, time and transaction indexes of remote segments, fetched once and
kept in a least-recently-used cache bounded in bytes.

Formats (Kafka's, as the segment's own files): the offset index is 8-byte entries ``relativeOffset int32 ·
position int32``; the time index 12-byte entries ``timestamp int64 · relativeOffset int32``; the transaction
index :mod:`kafkalog.storage.txn_index`'s 34-byte entries. Offsets are relative to the segment's start offset.

Invariants owned here: the cache never holds more than ``max_bytes`` of index bytes, except that the entry
just fetched is always kept (one segment's indexes are needed to answer); a lookup never reads the
segment's ``.log``; a fetch failure is the :class:`~kafkalog.errors.RemoteStorageError` of the RSM and caches
nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from kafkalog.remote.metadata import RemoteLogSegmentMetadata, Uuid
from kafkalog.storage.txn_index import AbortedTxn, parse_txn_index
from kafkalog.tiering.rsm import IndexType, RemoteStorageManager

__all__ = ["RemoteIndexCache", "RemoteIndexEntry"]

_OFFSET_ENTRY: Final = np.dtype([("offset", ">i4"), ("position", ">i4")])
_TIME_ENTRY: Final = np.dtype([("timestamp", ">i8"), ("offset", ">i4")])
_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RemoteIndexEntry:
    """One remote segment's indexes, parsed (absolute offsets)."""

    start_offset: int
    offsets: _I64
    positions: _I64
    timestamps: _I64
    time_offsets: _I64
    aborted_txns: tuple[AbortedTxn, ...]
    size_in_bytes: int

    @classmethod
    def parse(
        cls, start_offset: int, offset_index: bytes, time_index: bytes, txn_index: bytes, name: str
    ) -> RemoteIndexEntry:
        """Parse the three index files of the segment starting at ``start_offset`` (a partial entry ignored)."""
        oi = np.frombuffer(offset_index, _OFFSET_ENTRY, len(offset_index) // _OFFSET_ENTRY.itemsize)
        ti = np.frombuffer(time_index, _TIME_ENTRY, len(time_index) // _TIME_ENTRY.itemsize)
        return cls(
            start_offset,
            oi["offset"].astype(np.int64) + start_offset,
            oi["position"].astype(np.int64),
            ti["timestamp"].astype(np.int64),
            ti["offset"].astype(np.int64) + start_offset,
            tuple(parse_txn_index(txn_index, name)),
            len(offset_index) + len(time_index) + len(txn_index),
        )

    def lookup_offset(self, target_offset: int) -> int:
        """Kafka's ``OffsetIndex.lookup(...).position``: the position of the greatest indexed offset ≤ target
        (0 when there is none)."""
        i = int(np.searchsorted(self.offsets, target_offset, side="right")) - 1
        return int(self.positions[i]) if i >= 0 else 0

    def lookup_offset_span(self, target_offset: int) -> tuple[int, int | None]:
        """``(position, next position)``: :meth:`lookup_offset`'s position and that of the next index entry (the
        batch holding ``target_offset`` starts between the two; None: past the last entry)."""
        i = int(np.searchsorted(self.offsets, target_offset, side="right")) - 1
        position = int(self.positions[i]) if i >= 0 else 0
        nxt = int(self.positions[i + 1]) if i + 1 < len(self.positions) else None
        return position, nxt

    def lookup_timestamp(self, timestamp: int, starting_offset: int) -> int:
        """Kafka's ``RemoteIndexCache.lookupTimestamp``: the time index's entry for ``timestamp`` (the greatest
        timestamp ≤ it), then the offset index's position for ``max(that offset, starting_offset)``."""
        i = int(np.searchsorted(self.timestamps, timestamp, side="right")) - 1
        offset = int(self.time_offsets[i]) if i >= 0 else self.start_offset
        return self.lookup_offset(max(offset, starting_offset))


class RemoteIndexCache:
    """Parsed indexes of remote segments by segment id, least recently used evicted past ``max_bytes``
    (``remote.log.index.file.cache.total.size.bytes``)."""

    def __init__(self, rsm: RemoteStorageManager, max_bytes: int) -> None:
        self._rsm = rsm
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Uuid, RemoteIndexEntry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        #: Lookups answered from the cache / that fetched indexes (Kafka's ``RemoteIndexCache`` hit/miss).
        self.hits = 0
        self.misses = 0

    @property
    def size_in_bytes(self) -> int:
        """Index bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, metadata: RemoteLogSegmentMetadata) -> RemoteIndexEntry:
        """The segment's indexes (fetched with three index reads on a miss)."""
        key = metadata.remote_log_segment_id.id
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry
            self.misses += 1
        entry = RemoteIndexEntry.parse(
            metadata.start_offset,
            self._rsm.fetch_index(metadata, IndexType.OFFSET),
            self._rsm.fetch_index(metadata, IndexType.TIMESTAMP),
            self._rsm.fetch_index(metadata, IndexType.TRANSACTION),
            f"remote transaction index of segment {key}",
        )
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.size_in_bytes
            self._entries[key] = entry
            self._bytes += entry.size_in_bytes
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.size_in_bytes
        return entry

    def remove(self, segment_id: Uuid) -> None:
        """Forget a segment's indexes (it was deleted)."""
        with self._lock:
            old = self._entries.pop(segment_id, None)
            if old is not None:
                self._bytes -= old.size_in_bytes

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
