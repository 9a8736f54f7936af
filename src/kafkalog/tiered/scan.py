"""End offset and max timestamp of a segment from its data, for archives without metadata.

Invariant owned here: the end offset is the last offset of the last complete batch of the ``.log`` (found
by scanning from the position of the offset index's last entry, so only the tail is read); the max
timestamp is the larger of the time index's last entry and the scanned batches' max timestamps. Index
entries are Kafka's big-endian ``(relative offset i32, position i32)`` and ``(timestamp i64, relative
offset i32)``; trailing zero entries (a preallocated index) end the index.
"""

from __future__ import annotations

import struct

from kafkalog.errors import KafkaError, RemoteStorageError
from kafkalog.objstore.files import RandomAccessFile
from kafkalog.records import MemoryRecords

__all__ = ["last_offset_index_entry", "last_time_index_timestamp", "scan_end"]


def last_offset_index_entry(data: bytes) -> tuple[int, int] | None:
    """``(relative offset, position)`` of the last entry of an offset index, or None if it has none."""
    last: tuple[int, int] | None = None
    for i in range(len(data) // 8):
        rel, pos = struct.unpack_from(">ii", data, i * 8)
        if last is not None and (rel <= last[0] or pos <= last[1]):
            break
        last = (rel, pos)
    return last


def last_time_index_timestamp(data: bytes) -> int:
    """The largest timestamp of a time index (-1 if it has no entries)."""
    best = -1
    for i in range(len(data) // 12):
        ts, _ = struct.unpack_from(">qi", data, i * 12)
        if ts == 0 and i > 0:
            break
        best = max(best, ts)
    return best


def scan_end(
    log: RandomAccessFile, base_offset: int, offset_index: bytes, time_index: bytes
) -> tuple[int, int]:
    """``(end offset, max timestamp)`` of a segment; a segment with no complete batch is an error."""
    entry = last_offset_index_entry(offset_index)
    position = entry[1] if entry is not None else 0
    if position > log.size:
        raise RemoteStorageError(
            f"{log.name}: its offset index points past its end ({position} > {log.size})"
        )
    tail = log.pread(log.size - position, position)
    end = -1
    max_ts = last_time_index_timestamp(time_index)
    try:
        for batch in MemoryRecords(tail).batches():
            end = batch.last_offset
            max_ts = max(max_ts, batch.max_timestamp)
    except KafkaError as exc:
        raise RemoteStorageError(f"{log.name}: cannot scan its last batches: {exc}") from None
    if end < 0:
        if entry is None and position == 0 and not tail:
            raise RemoteStorageError(f"{log.name}: empty segment, no end offset can be read from it")
        raise RemoteStorageError(f"{log.name}: no complete batch after position {position}")
    return end, max_ts
