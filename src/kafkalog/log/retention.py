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

With a remote tier (``Log.remote_log_enabled`` and not ``remote.log.copy.disable``, Kafka's
``remoteLogEnabledAndRemoteCopyEnabled``) retention here is *local* retention: ``local.retention.ms`` /
``local.retention.bytes`` decide (−2 follows ``retention.*``), a segment may go only once the remote tier holds
it (its last offset <= ``highest_offset_in_remote_storage``) or the log start offset passed it, the
log-start-offset rule compares with the local log start offset, an active segment that breaches is rolled so
the next pass can delete it, and deleting moves only the local log start offset. Total retention of a tiered
log (``retention.*`` over both tiers) is the ``RemoteLogManager``'s: it deletes remote segments and calls
``maybe_increment_log_start_offset(..., "segment deletion")``. An empty ``cleanup.policy`` deletes by the log
start offset only, or by local retention on a tiered log (Kafka's ``deleteOldSegments``).

Timestamp lookup (``fetch_offset_by_timestamp``, Kafka's ``fetchOffsetByTimestamp``): -2 earliest (log start
offset, with the earliest epoch when it starts there), -1 latest (log end offset), -3 the record with the
largest local timestamp, -4 earliest local (the local log start offset and its epoch; -2's answer without a
remote tier), -5 latest tiered (the highest offset in remote storage and its epoch, -1 with epoch -1 when
nothing was copied; ``(-1, -1, -1)`` without a remote tier), -6 earliest pending upload (the first offset not
copied, KIP-1023); otherwise the first record at or after the log start offset with a timestamp >= the target:
with a remote tier the reader's answer from the remote tier first, then the local segments from the local
log start offset; or None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalog.errors import KafkaError
from kafkalog.log.tiers import SEGMENT_DELETION
from kafkalog.log.types import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kafkalog.storage import LogSegment, TimestampAndOffset

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["deletable_segments", "delete_old_segments", "fetch_offset_by_timestamp"]

_NO_TIMESTAMP = -1
_NO_PARTITION_LEADER_EPOCH = -1


def _tiered(log: Log) -> bool:
    """Kafka's ``remoteLogEnabledAndRemoteCopyEnabled``: retention here is local retention."""
    return log.remote_log_enabled and not log.config.remote_log_copy_disable


def deletable_segments(
    log: Log, predicate: Callable[[LogSegment, LogSegment | None], bool]
) -> list[LogSegment]:
    """Oldest-first run of segments that ``predicate`` allows deleting and that end at or below the HW; with a
    remote tier only segments it holds (or below the log start offset), and a breaching non-empty active
    segment is rolled (Kafka's ``deletableSegments``: the next pass deletes it)."""
    segments = log.local_log.segments.values()
    out: list[LogSegment] = []
    hw = log.high_watermark
    remote = log.remote_log_enabled
    tiered = remote and not log.config.remote_log_copy_disable
    highest_remote = log.highest_offset_in_remote_storage
    log_start = log.log_start_offset
    should_roll = False
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        is_last_and_empty = nxt is None and segment.size == 0
        breached = hw >= upper and not is_last_and_empty and predicate(segment, nxt)
        if breached and remote and nxt is None:  # a non-empty active segment
            should_roll = True
        # isSegmentEligibleForDeletion: copied to the remote tier, or below the log start offset
        eligible = (
            not tiered
            or 0 < upper <= highest_remote + 1
            or (nxt is not None and log_start >= nxt.base_offset)
        )
        if breached and eligible:
            out.append(segment)
        else:
            break
    if should_roll:
        log.logger.info("Rolling the active segment to make it eligible for deletion")
        log.roll()
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
    if remaining_first is not None:
        # before the files go, so a reader is sent to the remote tier (or out of range) rather than to them
        if _tiered(log):
            log.maybe_increment_local_log_start_offset(remaining_first.base_offset, SEGMENT_DELETION)
        elif remaining_first.base_offset > log.log_start_offset:
            # under the pass's lock: the epoch checkpoint is written once it is released (Log.delete_old_segments)
            log.maybe_increment_log_start_offset(
                remaining_first.base_offset, SEGMENT_DELETION, defer_epoch_checkpoint=True
            )
    with local.io(f"error while deleting segments for {log.topic_partition} in dir {log.dir.parent}"):
        local.remove_and_delete_segments(deletable, True, reason)
        for segment in deletable:
            log.producer_state.delete_snapshot(segment.base_offset)
    return len(deletable)


def _log_start_offset_breached(log: Log) -> int:
    remote = log.remote_log_enabled
    start = log.local_log_start_offset if remote else log.log_start_offset
    deletable = deletable_segments(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= start)
    name = "local log start offset" if remote else "log start offset"
    if deletable:
        log.logger.info(
            "Deleting segments due to %s %d breach: %s", name, start, ",".join(str(s) for s in deletable)
        )
    return _delete_segments(log, deletable, f"{name} {start} breach")


def _retention_size_breached(log: Log) -> int:
    tiered = _tiered(log)
    limit = log.config.effective_local_retention_bytes if tiered else log.config.retention_bytes
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
            "Deleting segments due to %slog size %d breach (%s %d): %s",
            "local " if tiered else "",
            size,
            "local.retention.bytes" if tiered else "retention.bytes",
            limit,
            ",".join(str(s) for s in deletable),
        )
    prefix = "local " if tiered else ""
    return _delete_segments(log, deletable, f"{prefix}retention size in bytes {limit} breach")


def _retention_ms_breached(log: Log) -> int:
    tiered = _tiered(log)
    retention_ms = log.config.effective_local_retention_ms if tiered else log.config.retention_ms
    if retention_ms < 0:
        return 0
    now = log.time.milliseconds()
    deletable = deletable_segments(log, lambda seg, _n: now - seg.largest_timestamp() > retention_ms)
    if deletable:
        log.logger.info(
            "Deleting segments due to %sretention time %dms breach: %s",
            "local log " if tiered else "",
            retention_ms,
            ",".join(str(s) for s in deletable),
        )
    prefix = "local log " if tiered else ""
    return _delete_segments(log, deletable, f"{prefix}retention time {retention_ms}ms breach")


def delete_old_segments(log: Log) -> int:
    """Apply every retention rule; returns how many segments were deleted (see module doc)."""
    with log.lock:
        if log.closed:
            return 0
        deleted = _log_start_offset_breached(log)
        config = log.config
        # Kafka's deleteOldSegments: an empty cleanup.policy deletes by local retention on a tiered log
        if config.delete or (not config.compact and _tiered(log)):
            deleted += _retention_size_breached(log)
            deleted += _retention_ms_breached(log)
        return deleted


def fetch_offset_by_timestamp(log: Log, target: int) -> TimestampAndOffset | None:
    """See the module doc."""

    cache = log.leader_epoch_cache
    remote = log.remote_log_enabled
    if target == EARLIEST_TIMESTAMP or (target == EARLIEST_LOCAL_TIMESTAMP and not remote):
        earliest = cache.earliest_entry
        epoch = (
            earliest.epoch if earliest is not None and earliest.start_offset <= log.log_start_offset else None
        )
        return TimestampAndOffset(_NO_TIMESTAMP, log.log_start_offset, epoch)
    if target == EARLIEST_LOCAL_TIMESTAMP:
        local_start = log.local_log_start_offset
        return TimestampAndOffset(_NO_TIMESTAMP, local_start, cache.epoch_for_offset(local_start))
    if target == LATEST_TIMESTAMP:
        return TimestampAndOffset(_NO_TIMESTAMP, log.log_end_offset, cache.latest_epoch)
    if target == LATEST_TIERED_TIMESTAMP:
        if not remote:
            return TimestampAndOffset(_NO_TIMESTAMP, -1, _NO_PARTITION_LEADER_EPOCH)
        highest = log.highest_offset_in_remote_storage
        epoch = cache.epoch_for_offset(highest)
        if epoch is None and highest == -1:
            epoch = _NO_PARTITION_LEADER_EPOCH
        return TimestampAndOffset(_NO_TIMESTAMP, highest, epoch)
    if target == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
        return _earliest_pending_upload(log)
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
    start = log.log_start_offset
    if remote and start != log.log_end_offset:
        reader = log.remote_log_reader
        if (
            reader is None
        ):  # Kafka: "RemoteLogManager is empty even though the remote log storage is enabled."
            raise KafkaError(
                f"no remote log reader for {log.topic_partition} even though the remote log storage is enabled"
            )
        found = reader.find_offset_by_timestamp(target, start)
        if found is not None:
            return found
        start = log.local_log_start_offset
    for segment in segments:
        if segment.largest_timestamp() >= target:
            found = segment.find_offset_by_timestamp(target, start)
            if found is not None:
                return found
    return None


def _earliest_pending_upload(log: Log) -> TimestampAndOffset | None:
    """KIP-1023's earliest pending upload offset (Kafka's ``fetchEarliestPendingUploadOffset``)."""
    if not log.remote_log_enabled:
        return TimestampAndOffset(_NO_TIMESTAMP, -1, _NO_PARTITION_LEADER_EPOCH)
    highest = log.highest_offset_in_remote_storage
    if highest == -1:
        if log.local_log_start_offset == log.log_start_offset:  # nothing uploaded yet
            return fetch_offset_by_timestamp(log, EARLIEST_TIMESTAMP)
        # the leader does not know yet what was uploaded
        return TimestampAndOffset(_NO_TIMESTAMP, -1, _NO_PARTITION_LEADER_EPOCH)
    pending = max(highest + 1, log.log_start_offset)
    return TimestampAndOffset(_NO_TIMESTAMP, pending, log.leader_epoch_cache.epoch_for_offset(pending))
