"""The bulk path of :meth:`LogSegment._reindex <kafkalog.storage.segment.LogSegment>` (recovery and index rebuilds).

A segment's clean v2 batches are validated a chunk (:data:`BULK_CHUNK`) at a time instead of batch by batch:
framing by the record kernels' ``scan_batches``, CRC-32C by ``verify_crcs`` (the ``crc32c`` library called
from compiled code), offset range and order on arrays. Index entries are chosen exactly as the batch-at-a-time
walk chooses them and written with one ``pwrite`` per index per chunk. Only a batch with a producer id or a
new leader epoch becomes a ``RecordBatch`` for the replay of producer state and leader epochs; for the others
the producer state's map end offset is moved, which is all the replay does for them.

The bulk path stops at the first batch it does not vouch for (a framing error, a bad CRC, an offset out of
range or out of order, a legacy batch, an index that would fill up); the caller's batch-at-a-time walk goes on
from there, so every error is found, logged and raised exactly as before (its speed against a raw read +
CRC-32C of the same bytes, and against the batch-by-batch walk: docs/benchmarks.md, "Design measurements").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kafkalog.errors import CorruptRecordError
from kafkalog.records import RecordBatch, read_batch_at
from kafkalog.records.batch import LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_V2
from kafkalog.records.kernels import (
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_LEADER_EPOCH,
    F_MAX_TIMESTAMP,
    F_POS,
    F_PRODUCER_ID,
    F_SIZE,
    N_BATCH_FIELDS,
    SCAN_END,
    SCAN_MORE,
    SCAN_PARTIAL,
    ScanResult,
    as_uint8,
    scan_batches,
    verify_crcs,
)
from kafkalog.storage.files import open_regular
from kafkalog.storage.types import TimestampOffset

if TYPE_CHECKING:
    from kafkalog.storage.segment import LogSegment
    from kafkalog.storage.types import EpochCacheLike, ProducerStateLike

__all__ = ["BULK_CHUNK", "Walk", "bulk_reindex", "check_batch_offsets"]

#: Bytes read at a time (stays in the CPU caches while it is scanned and CRC-checked).
BULK_CHUNK = 1 << 20
_INT32_MAX = 2**31 - 1


@dataclass
class Walk:
    """Where a re-index walk is: bytes validated, position of the last index entry, last offset seen."""

    valid_bytes: int
    last_index_entry: int
    previous_last: int


def check_batch_offsets(
    batch: RecordBatch,
    segment_base: int,
    previous_last: int,
    exact_counts: bool,
    path: object,
    *,
    check_count: bool = True,
) -> None:
    """The offset checks of a re-index walk on one (CRC-valid) batch: it starts at or above the segment's
    base offset and after ``previous_last`` (the base offset is outside the CRC), its last offset is not
    below its first, a v2 batch holds at most ``lastOffsetDelta + 1`` records (the cleaner keeps a batch's last
    offset when it removes records, so fewer is valid) and, with ``exact_counts`` (a topic that is not
    compacted), exactly that many. Raises :class:`CorruptRecordError` at the batch's position. (Appends check
    a client's count in the validator, as Kafka's ``LogValidator``; ``ensure_valid`` stays Kafka's CRC check.)

    ``check_count=False`` (crash recovery) leaves the record count alone: Kafka's ``LogSegment.recover`` keeps
    a CRC-valid batch whatever its count says (the count is only read when records are iterated), and
    recovery never truncates what Kafka's recovery keeps. ``kafkalog recover``, the operator's repair, checks it."""
    first = batch.base_offset if batch.magic >= MAGIC_V2 else batch.last_offset
    last = batch.last_offset
    if first < segment_base:
        raise CorruptRecordError(
            f"batch [{first}, {last}] in segment {path} starts below the segment's base offset {segment_base}",
            position=batch.position,
        )
    if first <= previous_last or last < first:
        raise CorruptRecordError(
            f"offsets go backwards in segment {path}: batch [{first}, {last}] after offset {previous_last}",
            position=batch.position,
        )
    count = batch.count if check_count and batch.magic >= MAGIC_V2 else None
    if count is not None and not (
        0 <= count <= last - first + 1 and (count == last - first + 1 or not exact_counts)
    ):
        raise CorruptRecordError(
            f"batch [{first}, {last}] in segment {path} holds {count} records, which disagrees with its "
            f"lastOffsetDelta {last - first}"
            + ("" if count > last - first + 1 else " on a topic that is not compacted"),
            position=batch.position,
        )


def _pread_into(fd: int, buffer: bytearray, size: int, position: int) -> int:
    """Read up to ``size`` bytes at ``position`` into the start of ``buffer``; returns how many (short at EOF)."""
    view = memoryview(buffer)[:size]
    done = 0
    while done < size:
        n = os.preadv(fd, [view[done:]], position + done)
        if n <= 0:
            break
        done += n
    return done


def bulk_reindex(
    segment: LogSegment,
    walk: Walk,
    on_batch: Callable[[RecordBatch], None] | None,
    producer_state: ProducerStateLike | None,
    epoch_cache: EpochCacheLike | None,
) -> None:
    """The prefix of clean v2 batches, a chunk at a time: framing (``scan_batches``), CRC (``verify_crcs``),
    offset range and order checked on arrays; index entries chosen as the walk chooses them and written
    with one ``pwrite`` per index per chunk. Only a batch with a producer id or a new leader epoch is made
    a ``RecordBatch`` and given to ``on_batch``; for the others the map end offset is moved, which is all
    replay does for them. Returns at the first batch it does not vouch for (``walk`` points at it)."""
    end = segment.log.size_in_bytes
    table = np.empty((N_BATCH_FIELDS, 4096), np.int64)
    chunk = bytearray(BULK_CHUNK)  # reused: no allocation (and no page faults) per chunk
    fd = open_regular(segment.log.path, os.O_RDONLY)
    try:
        while walk.valid_bytes < end:
            pos = walk.valid_bytes
            got = _pread_into(fd, chunk, min(len(chunk), end - pos), pos)
            if got >= LOG_OVERHEAD:  # a batch larger than the buffer: grow the buffer to hold it
                need = int.from_bytes(chunk[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                if len(chunk) < need <= end - pos:
                    chunk = bytearray(need)
                    got = _pread_into(fd, chunk, need, pos)
            buf = as_uint8(chunk)[:got]
            start = 0
            while True:
                scan = scan_batches(buf, start, table=table)
                done = _bulk_batches(segment, walk, chunk, buf, scan, on_batch, producer_state, epoch_cache)
                if done < scan.n or scan.code not in (SCAN_MORE, SCAN_PARTIAL, SCAN_END):
                    return  # a batch the walk must look at (or the error it will raise)
                if scan.code != SCAN_MORE:
                    break
                start = scan.next_pos
            if scan.next_pos == 0:
                return  # not even one batch: a partial tail, which the walk ends on quietly
    finally:
        os.close(fd)


def _bulk_batches(
    segment: LogSegment,
    walk: Walk,
    data: bytearray,
    buf: Any,
    scan: ScanResult,
    on_batch: Callable[[RecordBatch], None] | None,
    producer_state: ProducerStateLike | None,
    epoch_cache: EpochCacheLike | None,
) -> int:
    """Index (and replay) the leading clean batches of one scan; returns how many were taken."""
    n = scan.n
    if n == 0:
        return 0
    t = scan.table[:, :n]
    base = t[F_BASE_OFFSET]
    last = base + t[F_LAST_OFFSET_DELTA]
    bad_crc, _ = verify_crcs(buf, scan.table, n)
    rel = last - segment.base_offset
    ok = (rel >= 0) & (rel <= _INT32_MAX) & (base > np.concatenate(([walk.previous_last], last[:-1])))
    ok &= last >= base
    k = n if bad_crc < 0 else bad_crc
    if not ok[:k].all():
        k = int(np.argmin(ok[:k]))
    if k == 0:
        return 0
    t, last = t[:, :k], last[:k]
    first_position = walk.valid_bytes
    if not _bulk_index_entries(segment, walk, last, t[F_SIZE], t[F_MAX_TIMESTAMP]):
        return 0
    walk.previous_last = int(last[-1])
    if on_batch is None:
        return k
    special = np.zeros(k, dtype=bool)
    if producer_state is not None:
        special |= t[F_PRODUCER_ID] >= 0
    if epoch_cache is not None:
        ple = np.where(t[F_LEADER_EPOCH] >= 0, t[F_LEADER_EPOCH], -1)
        latest = epoch_cache.latest_epoch
        special |= ple > np.maximum.accumulate(np.concatenate(([-1 if latest is None else latest], ple)))[:-1]
    origin = first_position - int(t[F_POS, 0])  # file position of data[0]
    for i in np.flatnonzero(special).tolist():
        if producer_state is not None and i > 0:
            producer_state.update_map_end_offset(int(last[i - 1]) + 1)
        start, size = int(t[F_POS, i]), int(t[F_SIZE, i])
        # A copy: the buffer is reused, and replay may keep the batch.
        batch = read_batch_at(memoryview(bytes(data[start : start + size])), 0, origin=origin + start)
        assert batch is not None
        on_batch(batch)
    if producer_state is not None:
        producer_state.update_map_end_offset(int(last[-1]) + 1)
    return k


def _bulk_index_entries(segment: LogSegment, walk: Walk, last: Any, sizes: Any, max_ts: Any) -> bool:
    """Append the index entries the batch-at-a-time walk would append for these batches (same rule:
    an entry at a batch that starts more than ``index.interval.bytes`` after the last entry), and move
    ``walk`` and the max timestamp past them. Vectorised when every batch but the last is larger than the
    interval (each then gets an entry), else a plain loop. False (nothing done) if an index would fill
    up: the walk then reaches that point itself and raises as it always has."""
    cur = segment.max_timestamp_and_offset_so_far
    cur_ts, cur_offset = cur.timestamp, cur.offset
    ts_last = segment._time_index.last_entry().timestamp  # noqa: SLF001 -- LogSegment's recovery, split out
    vb, lie, interval = walk.valid_bytes, walk.last_index_entry, segment.index_interval_bytes
    k = len(last)
    if (sizes[:-1] > interval).all():
        starts = vb + np.concatenate(([0], np.cumsum(sizes[:-1])))
        run_max = np.maximum.accumulate(np.concatenate(([cur_ts], max_ts)))
        at = np.maximum.accumulate(np.where(max_ts > run_max[:-1], np.arange(k), -1))
        run_offset = np.where(at >= 0, last[np.maximum(at, 0)], cur_offset)
        chosen = np.arange(0 if vb - lie > interval else 1, k)
        ts = run_max[1:][chosen]
        keep = ts > np.maximum(ts_last, np.concatenate(([ts_last], ts[:-1])))
        offsets, positions = last[chosen].tolist(), starts[chosen].tolist()
        ts_entries, ts_offsets = ts[keep].tolist(), run_offset[chosen][keep].tolist()
        if len(chosen):
            lie = int(starts[chosen[-1]])
        cur_ts, cur_offset = int(run_max[-1]), int(run_offset[-1])
        vb = int(starts[-1] + sizes[-1])
    else:
        offsets, positions, ts_entries, ts_offsets = [], [], [], []
        for lo, size, ts_i in zip(last.tolist(), sizes.tolist(), max_ts.tolist()):
            if ts_i > cur_ts:
                cur_ts, cur_offset = ts_i, lo
            if vb - lie > interval:
                offsets.append(lo)
                positions.append(vb)
                if cur_ts > ts_last:
                    ts_entries.append(cur_ts)
                    ts_offsets.append(cur_offset)
                    ts_last = cur_ts
                lie = vb
            vb += size
    offset_index, time_index = segment._offset_index, segment._time_index  # noqa: SLF001 -- as above
    if (
        offset_index.entries + len(offsets) > offset_index.max_entries
        or time_index.entries + len(ts_entries) > time_index.max_entries - 1
    ):
        return False
    offset_index.append_many(offsets, positions)
    time_index.append_many(ts_entries, ts_offsets)
    if cur_ts > segment.max_timestamp_so_far:
        segment._max_ts_and_offset = TimestampOffset(cur_ts, cur_offset)  # noqa: SLF001 -- as above
    walk.valid_bytes, walk.last_index_entry = vb, lie
    return True
