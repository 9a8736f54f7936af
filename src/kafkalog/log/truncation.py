"""Truncation of a :class:`~kafkalog.log.log.Log` (Kafka's ``UnifiedLog.truncateTo`` and
``truncateFullyAndStartAt``), kept beside the Log like :mod:`kafkalog.log.retention`.

Invariants owned here: truncation removes whole batches at and above the target offset, never below it;
the producer state, the leader epoch cache and the producer snapshots follow the log (snapshots of deleted
segments are deleted, the state is rebuilt up to the new log end offset); the high watermark never stays
above the log end offset; the log start offset never stays above the target; a full truncation leaves one
empty segment at the new offset and moves the recovery point there when it fell outside the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog.log.loader import rebuild_producer_state

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["truncate_fully_and_start_at", "truncate_to"]


def truncate_to(log: Log, target_offset: int) -> bool:
    """Drop every offset >= ``target_offset`` (whole batches); returns whether anything was truncated."""
    if target_offset < 0:
        raise ValueError(
            f"cannot truncate partition {log.topic_partition} to a negative offset ({target_offset})"
        )
    with log.lock:
        if target_offset >= log.log_end_offset:
            log.logger.info(
                "Truncating to %d has no effect as the largest offset in the log is %d",
                target_offset,
                log.log_end_offset - 1,
            )
            log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
            return False
        log.logger.info("Truncating to offset %d", target_offset)
        first = log.local_log.segments.first_segment
        if first is not None and first.base_offset > target_offset:
            truncate_fully_and_start_at(log, target_offset)
            return True
        with log.local_log.io(
            f"error while truncating log to offset {target_offset} for {log.topic_partition}"
        ):
            deleted = log.local_log.truncate_to(target_offset)
            for s in deleted:
                log.producer_state.delete_snapshot(s.base_offset)
            log.leader_epoch_cache.truncate_from_end(target_offset)
            log._log_start_offset = min(target_offset, log._log_start_offset)
            rebuild_producer_state(
                log.producer_state,
                log.local_log.segments,
                log.log_start_offset,
                target_offset,
                log.time,
                reload_from_clean_shutdown=False,
            )
            if log.high_watermark >= log.log_end_offset:
                log._update_high_watermark_metadata(log.log_end_offset_metadata)
        return True


def truncate_fully_and_start_at(log: Log, new_offset: int, log_start_offset: int | None = None) -> None:
    """Delete everything and start an empty log at ``new_offset``."""
    with log.lock:
        log.logger.debug("Truncate and start at offset %d, logStartOffset: %s", new_offset, log_start_offset)
        log.local_log.truncate_fully_and_start_at(new_offset)
        log.leader_epoch_cache.clear_and_flush()
        log.producer_state.truncate_fully_and_start_at(new_offset)
        log._log_start_offset = new_offset if log_start_offset is None else log_start_offset
        rebuild_producer_state(
            log.producer_state,
            log.local_log.segments,
            log.log_start_offset,
            new_offset,
            log.time,
            reload_from_clean_shutdown=False,
        )
        log._update_high_watermark_metadata(log.log_end_offset_metadata)
        if log.local_log.recovery_point > new_offset or log.local_log.recovery_point < log.log_start_offset:
            log.local_log.update_recovery_point(new_offset)
