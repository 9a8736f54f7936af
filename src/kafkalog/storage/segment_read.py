"""A segment read into memory, usually with a single ``pread``: the path of ``Log.read`` (Kafka's fetch).

:meth:`LogSegment.read <kafkalog.storage.segment.LogSegment.read>` finds the batch with a header read and
returns a lazy file slice that the log then reads: two ``pread`` calls, more when the batch is not at an
index entry. :func:`read_records` asks the offset index for the entries around the offset in one search
and reads, at the upper entry's position, as many bytes as the read will most likely return (the header
tells whether the guess was right):

* When every batch has an index entry (batches of ``index.interval.bytes`` or more), the batch at the upper
  entry holds the offset and the bytes to the next entry are that batch: one ``pread`` returns the header
  and the records.
* Otherwise (small batches, a gap) the offset is in a batch between the two entries: one more ``pread``
  of the bytes between them is walked in memory, and the records are cut from what was read.
* Past the last entry (the tail of the active segment), one ``pread`` of the bytes from the last entry to
  the end is walked the same way.

Invariants:

* The answer is exactly :meth:`LogSegment.read`'s, with the records in memory: the same batch (the one
  holding ``start_offset``, else the first one after it), the same metadata, the same byte count (at most
  ``max_size``, the whole first batch with ``min_one_message``, never past ``max_position``) and the same
  ``first_entry_incomplete``.
* Nothing past the segment's logical size as it was when the read began is read or returned, so a reader
  never sees a torn batch; speculative bytes are never returned and are bounded by
  :data:`SPECULATIVE_MAX` per ``pread``.
* Whatever this path cannot vouch for (a legacy or corrupt header, several batches appended under one
  index entry, entries more than :data:`SPECULATIVE_MAX` apart, a file cut meanwhile) is answered by
  :meth:`LogSegment.read`, the reference path, and read into memory.
* A closed segment (deleted under a reader) raises :class:`~kafkalog.errors.KafkaStorageError`; its
  indexes are not loaded again (which would re-create their files).
"""

from __future__ import annotations

import struct
from typing import Final

from kafkalog.errors import KafkaStorageError
from kafkalog.records import MemoryRecords
from kafkalog.records.batch import MAGIC_V2
from kafkalog.records.framing import (
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
)
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.segment import TO_SEGMENT_END, LogSegment
from kafkalog.storage.types import FetchDataInfo, fetch_data_info, read_info

__all__ = ["SPECULATIVE_MAX", "read_records"]

#: The most bytes read on a guess; a larger read first reads the batch header (27 bytes).
SPECULATIVE_MAX: Final = 64 << 10
#: Bytes of a v2 batch header up to and including ``lastOffsetDelta``.
_HEADER: Final = LAST_OFFSET_DELTA_OFFSET + 4
_OFFSET_SIZE_UNPACK = struct.Struct(">qi").unpack_from
_INT32_UNPACK = struct.Struct(">i").unpack_from
_EMPTY = MemoryRecords.EMPTY


def read_records(
    segment: LogSegment, start_offset: int, max_size: int, max_position: int | None, min_one_message: bool
) -> FetchDataInfo | None:
    """:meth:`LogSegment.read` with the records read into memory (see the module doc)."""
    if max_size < 0 or max_position is None:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    log = segment.log
    index = segment._oi  # noqa: SLF001 -- LogSegment.read's fast path, split out; None when not loaded
    around = None if index is None else index.bracket(start_offset)
    if around is None:  # the index is not loaded: load it, unless the segment was deleted
        if not log.closed:
            around = segment.offset_index.bracket(start_offset)
        if around is None:
            raise KafkaStorageError(f"segment {log.path} is closed")
    lower, upper, span = around
    end = log.size_in_bytes
    if upper < 0 or upper >= end:
        return _tail(segment, start_offset, max_size, max_position, min_one_message, lower, end)
    remaining = end - upper
    limit = (end if max_position == TO_SEGMENT_END or max_position > end else max_position) - upper
    if span < 0:
        span = remaining
    want = span if min_one_message and span > max_size else max_size
    if want > limit:
        want = limit
    if want > SPECULATIVE_MAX or want < _HEADER:
        want = _HEADER
    if want > remaining:
        want = remaining
    data = log.read_at(upper, want)
    if len(data) < _HEADER or data[MAGIC_OFFSET] != MAGIC_V2:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    base, size = _OFFSET_SIZE_UNPACK(data, 0)
    total = size + LOG_OVERHEAD
    if size < RECORD_OVERHEAD_V0 or total > remaining or total < _HEADER:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    if base > start_offset:
        return _before(
            segment, start_offset, max_size, max_position, min_one_message, lower, upper, end, data, total
        )
    if start_offset > base + _INT32_UNPACK(data, LAST_OFFSET_DELTA_OFFSET)[0]:
        # Several batches appended at once share one entry: the offset is in a later one.
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    # The batch at ``upper`` holds the offset (the common case, inlined from ``_result``).
    adjusted = total if min_one_message and total > max_size else max_size
    if (limit if limit < adjusted else adjusted) == len(data):
        return read_info(start_offset, segment.base_offset, upper, MemoryRecords(data), adjusted < total)
    return _result(
        segment, start_offset, upper, total, data, upper, end, max_size, max_position, min_one_message
    )


def _before(
    segment: LogSegment,
    start_offset: int,
    max_size: int,
    max_position: int,
    min_one_message: bool,
    lower: int,
    upper: int,
    end: int,
    data: bytes,
    total: int,
) -> FetchDataInfo | None:
    """The batch at ``upper`` (``total`` bytes, starting with ``data``) starts after the offset: the offset is
    in a batch between the entries at ``lower`` and ``upper``, or in a gap before ``upper`` (then the batch at
    ``upper`` is the first one after it)."""
    if upper - lower > SPECULATIVE_MAX:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    region = segment.log.read_at(lower, upper - lower) if upper > lower else b""
    if len(region) != upper - lower:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    found = _walk(region, start_offset)
    if found is None:
        return _result(
            segment, start_offset, upper, total, data, upper, end, max_size, max_position, min_one_message
        )
    rel, batch_size = found
    if rel < 0:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    return _result(
        segment,
        start_offset,
        lower + rel,
        batch_size,
        region,
        lower,
        end,
        max_size,
        max_position,
        min_one_message,
    )


def _tail(
    segment: LogSegment,
    start_offset: int,
    max_size: int,
    max_position: int,
    min_one_message: bool,
    lower: int,
    end: int,
) -> FetchDataInfo | None:
    """No entry at or above the offset (the tail of the active segment): walk the bytes from the last entry
    below it to the end, if they are few."""
    if lower >= end or end - lower > SPECULATIVE_MAX:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    region = segment.log.read_at(lower, end - lower)
    found = _walk(region, start_offset)
    if found is None or found[0] < 0 or len(region) != end - lower:
        return _reference(segment, start_offset, max_size, max_position, min_one_message)
    return _result(
        segment,
        start_offset,
        lower + found[0],
        found[1],
        region,
        lower,
        end,
        max_size,
        max_position,
        min_one_message,
    )


def _walk(region: bytes, target_offset: int) -> tuple[int, int] | None:
    """``(position, size)`` in ``region`` of the first batch whose last offset is >= ``target_offset``;
    None if the batches of ``region`` end below it; ``(-1, 0)`` when a header cannot be vouched for (a
    batch crossing the region's end, an impossible size)."""
    pos = 0
    n = len(region)
    while pos < n:
        if n - pos < _HEADER:
            return -1, 0
        # next_frame inlined (the read path's hot loop); a partial or impossible frame declines, and the
        # reference path (FileRecords.search_for_offset_with_size) decides
        last, size = _OFFSET_SIZE_UNPACK(region, pos)
        total = size + LOG_OVERHEAD
        if size < RECORD_OVERHEAD_V0 or total > n - pos:
            return -1, 0
        if MAGIC_V2 <= region[pos + MAGIC_OFFSET] < 128 and total >= _HEADER:  # v2 as a file reads it
            last += _INT32_UNPACK(region, pos + LAST_OFFSET_DELTA_OFFSET)[0]
        if last >= target_offset:
            return pos, total
        pos += total
    return None


def _result(
    segment: LogSegment,
    start_offset: int,
    position: int,
    batch_size: int,
    buf: bytes,
    buf_position: int,
    end: int,
    max_size: int,
    max_position: int,
    min_one_message: bool,
) -> FetchDataInfo:
    """The answer for the batch of ``batch_size`` bytes at ``position``; ``buf`` holds the bytes read from
    ``buf_position`` on (the records are cut from it when it covers them)."""
    adjusted = batch_size if min_one_message and batch_size > max_size else max_size
    if adjusted == 0:
        return read_info(start_offset, segment.base_offset, position, _EMPTY)
    fetch = (end if max_position == TO_SEGMENT_END or max_position > end else max_position) - position
    if adjusted < fetch:
        fetch = adjusted
    if fetch <= 0:
        records = _EMPTY
    else:
        rel = position - buf_position
        if rel == 0 and fetch == len(buf):
            records = MemoryRecords(buf)
        elif rel + fetch <= len(buf):
            records = MemoryRecords(buf[rel : rel + fetch])
        else:
            records = MemoryRecords(segment.log.read_at(position, fetch))
    return read_info(start_offset, segment.base_offset, position, records, adjusted < batch_size)


def _reference(
    segment: LogSegment, start_offset: int, max_size: int, max_position: int | None, min_one_message: bool
) -> FetchDataInfo | None:
    """:meth:`LogSegment.read`, its file slice read into memory."""
    info = segment.read(start_offset, max_size, max_position, min_one_message)
    if info is None or not isinstance(info.records, FileRecords):
        return info
    return fetch_data_info(
        info.fetch_offset_metadata,
        info.records.to_memory_records(),
        info.first_entry_incomplete,
        info.aborted_transactions,
    )
