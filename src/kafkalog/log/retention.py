"""Retention and offset lookup by timestamp for a :class:`~kafkalog.log.log.Log` (Kafka's ``UnifiedLog`` policy).

Retention (``delete_old_segments``): the log-start-offset rule always applies (a segment whose successor
starts at or below the log start offset goes, even on compacted topics, KAFKA-7400); with
``cleanup.policy`` containing ``delete`` also the size rule (``retention.bytes``: oldest segments go while
the log stays at or above the limit without them) and the time rule (``retention.ms``: a segment whose
largest record timestamp — file mtime without timestamps — is older than the limit). Segments are
considered oldest first and the walk stops at the first one that must stay; a segment whose offsets reach
past the high watermark always stays, and an empty last segment is never deleted. If every segment goes,
the log rolls first so an empty active segment remains at the log end offset; the log start offset moves
to the first remaining segment. Deleted segments are renamed ``.deleted`` and removed after
``file.delete.delay.ms``; their producer snapshots are deleted too.

Timestamp lookup (``fetch_offset_by_timestamp``): -2 earliest (log start offset), -1 latest (log end
offset), -3 the record with the largest timestamp, -5 latest tiered and -6 earliest pending upload (always
``(-1, -1, -1)``: there is no remote storage, as in Kafka with remote storage disabled); otherwise the first
record at or after the log start offset with a timestamp >= the target, or None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalog.log.types import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kafkalog.storage import LogSegment, TimestampAndOffset

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["deletable_segments", "delete_old_segments", "fetch_offset_by_timestamp"]

_NO_TIMESTAMP = -1
#: ListOffsets sentinels that only mean something with tiered storage (KIP-405 / KIP-1023).
_TIERED_ONLY_TIMESTAMPS = (-5, -6)


def deletable_segments(
    log: Log, predicate: Callable[[LogSegment, LogSegment | None], bool]
) -> list[LogSegment]:
    """Oldest-first run of segments that ``predicate`` allows deleting and that end at or below the HW."""
    segments = log.local_log.segments.values()
    out: list[LogSegment] = []
    hw = log.high_watermark
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        is_last_and_empty = nxt is None and segment.size == 0
        if hw >= upper and not is_last_and_empty and predicate(segment, nxt):
            out.append(segment)
        else:
            break
    return out


def _delete_segments(log: Log, deletable: list[LogSegment], reason: str) -> int:
    if not deletable:
        return 0
    local = log.local_log
    if local.segments.number_of_segments == len(deletable):
        new_active = log.roll()
        if deletable[-1].base_offset == new_active.base_offset:
            deletable = deletable[:-1]
    if not deletable:
        return 0
    remaining_first = local.segments.higher_segment(deletable[-1].base_offset)
    if remaining_first is not None and remaining_first.base_offset > log.log_start_offset:
        log.maybe_increment_log_start_offset(remaining_first.base_offset, "segment deletion")
    with local.io(f"error while deleting segments for {log.topic_partition} in dir {log.dir.parent}"):
        local.remove_and_delete_segments(deletable, True, reason)
        for segment in deletable:
            log.producer_state.delete_snapshot(segment.base_offset)
    return len(deletable)


def _log_start_offset_breached(log: Log) -> int:
    start = log.log_start_offset
    deletable = deletable_segments(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= start)
    if deletable:
        log.logger.info(
            "Deleting segments due to log start offset %d breach: %s",
            start,
            ",".join(str(s) for s in deletable),
        )
    return _delete_segments(log, deletable, f"log start offset {start} breach")


def _retention_size_breached(log: Log) -> int:
    limit = log.config.retention_bytes
    size = log.size
    if limit < 0 or size < limit:
        return 0
    diff = size - limit

    def should_delete(segment: LogSegment, _nxt: LogSegment | None) -> bool:
        nonlocal diff
        if diff - segment.size >= 0:
            diff -= segment.size
            return True
        return False

    deletable = deletable_segments(log, should_delete)
    if deletable:
        log.logger.info(
            "Deleting segments due to log size %d breach (retention.bytes %d): %s",
            size,
            limit,
            ",".join(str(s) for s in deletable),
        )
    return _delete_segments(log, deletable, f"retention size in bytes {limit} breach")


def _retention_ms_breached(log: Log) -> int:
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0
    now = log.time.milliseconds()
    deletable = deletable_segments(log, lambda seg, _n: now - seg.largest_timestamp() > retention_ms)
    if deletable:
        log.logger.info(
            "Deleting segments due to retention time %dms breach: %s",
            retention_ms,
            ",".join(str(s) for s in deletable),
        )
    return _delete_segments(log, deletable, f"retention time {retention_ms}ms breach")


def delete_old_segments(log: Log) -> int:
    """Apply every retention rule; returns how many segments were deleted (see module doc)."""
    with log.lock:
        if log.closed:
            return 0
        deleted = _log_start_offset_breached(log)
        if log.config.delete:
            deleted += _retention_size_breached(log)
            deleted += _retention_ms_breached(log)
        return deleted


def fetch_offset_by_timestamp(log: Log, target: int) -> TimestampAndOffset | None:
    """See the module doc."""

    cache = log.leader_epoch_cache
    if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        earliest = cache.earliest_entry
        epoch = (
            earliest.epoch if earliest is not None and earliest.start_offset <= log.log_start_offset else None
        )
        return TimestampAndOffset(_NO_TIMESTAMP, log.log_start_offset, epoch)
    if target == LATEST_TIMESTAMP:
        return TimestampAndOffset(_NO_TIMESTAMP, log.log_end_offset, cache.latest_epoch)
    if target in _TIERED_ONLY_TIMESTAMPS:
        return TimestampAndOffset(_NO_TIMESTAMP, -1, -1)
    segments = log.local_log.segments.values()
    if target == MAX_TIMESTAMP:
        best = max(segments, key=lambda s: s.max_timestamp_so_far, default=None)
        if best is None or best.max_timestamp_so_far < 0:
            return None
        max_ts = best.max_timestamp_so_far
        position = best.offset_index.lookup(best.offset_of_max_timestamp_so_far).position
        for batch in best.batches(position):
            if batch.max_timestamp == max_ts:
                for record in batch.records():
                    if record.timestamp == max_ts:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(max_ts, record.offset, epoch if epoch >= 0 else None)
        return None
    for segment in segments:
        if segment.largest_timestamp() >= target:
            found = segment.find_offset_by_timestamp(target, log.log_start_offset)
            if found is not None:
                return found
    return None
