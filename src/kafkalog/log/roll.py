"""Rolling a :class:`~kafkalog.log.log.Log` to a new active segment (Kafka's ``UnifiedLog.maybeRoll`` / ``roll``).

Invariants owned here: a log rolls before an append exactly when :meth:`LogSegment.should_roll_for` says so
(size, ``segment.ms`` minus jitter on record time, full indexes, relative offset overflow), at the append's
first offset (or, when unknown, the last offset minus ``2**31 - 1``, as Kafka does); a roll moves the producer
state's map end offset to the new base offset and writes a producer snapshot (not synced), moves the high
watermark with the log end offset when it follows it, then returns at once: the rolled segment, its snapshot
and everything below the new base offset are fsynced in the background (``flush-log``: on the log's scheduler,
or on one shared thread for a standalone log, which ``close()`` waits for), including the rolled segment's
trimmed indexes and final time-index entry even when a flush just before the roll already passed them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkalog.errors import KafkaError, KafkaStorageError
from kafkalog.log.append import UNKNOWN_OFFSET
from kafkalog.log.scheduler import background_executor
from kafkalog.log.types import LogAppendInfo
from kafkalog.storage import LogSegment
from kafkalog.storage.files import open_regular

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["maybe_roll", "roll"]

_INT32_MAX = 2**31 - 1


def maybe_roll(log: Log, messages_size: int, info: LogAppendInfo) -> LogSegment:
    """The segment an append of ``messages_size`` bytes described by ``info`` goes to (rolling first if due)."""
    local = log.local_log
    segment = local.active_segment
    config = local.config
    if segment.should_roll_for(
        config.max_segment_ms,
        config.segment_bytes,
        info.max_timestamp,
        info.last_offset,
        messages_size,
        log.time.milliseconds(),
    ):
        log.logger.debug(
            "Rolling new log segment (log_size = %d/%d), offset_index_size = %d/%d, time_index_size = %d/%d",
            segment.size,
            config.segment_bytes,
            segment.offset_index.entries,
            segment.offset_index.max_entries,
            segment.time_index.entries,
            segment.time_index.max_entries,
        )
        roll_offset = (
            info.first_offset if info.first_offset != UNKNOWN_OFFSET else info.last_offset - _INT32_MAX
        )
        return roll(log, roll_offset)
    return segment


def roll(log: Log, expected_next_offset: int | None = None) -> LogSegment:
    """Start a new active segment; the previous one is flushed in the background (``flush-log``)."""
    with log.lock:
        local = log.local_log
        rolled = local.segments.active_segment
        new_segment = local.roll(expected_next_offset)
        log.producer_state.update_map_end_offset(new_segment.base_offset)
        snapshot = log.producer_state.take_snapshot(sync=False)
        log._update_high_watermark_with_log_end_offset()
        base = new_segment.base_offset

        def flush_log() -> None:
            if snapshot is not None and snapshot.exists():
                fd = open_regular(snapshot, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            log.flush_up_to_offset_exclusive(base)
            # The rolled segment's trimmed indexes and final time-index entry must reach the disk even when the
            # recovery point already passed it (a flush just before the roll).
            if rolled is not None and rolled is not new_segment and not rolled.deleted:
                try:
                    rolled.flush()
                except (OSError, KafkaError):
                    pass  # deleted concurrently by retention or truncation

        scheduler = local.scheduler
        if scheduler is not None:
            scheduler.schedule_once("flush-log", _guarded(log, flush_log))
        else:
            # No scheduler (a standalone log): still in the background, as Kafka does, on one shared thread, so
            # a roll costs the appender no fsyncs; close() waits for it.
            log._pending_flush = background_executor().submit(_guarded(log, flush_log))
        return new_segment


def _guarded(log: Log, fn: Callable[[], None]) -> Callable[[], None]:
    """``fn`` as a background task: skipped once the log is closed, quiet on a storage error (the log is
    then offline and its owner was told)."""

    def run() -> None:
        if log.closed:
            return
        try:
            fn()
        except KafkaStorageError:
            pass

    return run
