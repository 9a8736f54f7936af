"""Copying a partition into another log dir, as Kafka's alter-log-dirs does (the ``-future`` log).

:meth:`kafkalog.manager.LogManager.move_partition` opens the ``-future`` log with :func:`open_future_log`, copies
most of the data with :func:`copy_into` while appends go on, then copies the rest under the current log's lock
and swaps the two directories.

Invariants owned here:

* **The future log is a copy, offset for offset.** Batches are appended as a follower's (offsets kept) from
  the future log's end; a future log whose end is outside the current log's
  ``[log start offset, log end offset]`` (left behind by an earlier move that was cut short, or by retention
  since) starts over, empty, at the current log start offset. The future log's start offset never stays
  behind the current one's.
* **A tiered log's remote tier is shared, not copied.** Only the local segments are: the future log starts at
  the current local log start offset with the current log start offset below it, and learns the highest
  offset in remote storage (Kafka's future replica of a tiered partition); the owner attaches the remote
  reader to the log it swaps in. A future log that starts over after it learned that offset starts past it
  (a tiered log is never truncated into its remote range: :meth:`~kafkalog.log.Log.truncate_to`).
* **Resumable.** A ``-future`` log already in the destination dir (found on open, or left by a move that
  failed) is resumed from its end, not copied again.
"""

from __future__ import annotations

from pathlib import Path

from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition, log_future_dir_name
from kafkalog.log.scheduler import Scheduler
from kafkalog.log.types import FetchIsolation
from kafkalog.manager.dirs import DirFailureHandler
from kafkalog.records import MemoryRecords
from kafkalog.time import Time

__all__ = ["copy_into", "open_future_log"]

_CHUNK = 1 << 20


def open_future_log(
    current: Log,
    tp: TopicPartition,
    log_dir: Path,
    scheduler: Scheduler,
    time: Time,
    on_dir_failure: DirFailureHandler,
) -> Log:
    """Open (or create) ``tp``'s ``-future`` log in ``log_dir``, with the current log's config and topic id."""
    return Log.open(
        log_dir / log_future_dir_name(tp),
        current.config,
        log_start_offset=current.log_start_offset,
        scheduler=scheduler,
        time=time,
        last_shutdown_clean=True,
        topic_id=current.topic_id,
        on_dir_failure=on_dir_failure,
        remote_storage_system_enable=current.remote_storage_system_enable,
    )


def copy_into(source: Log, target: Log) -> None:
    """Append to ``target`` every batch of ``source`` past its end (see the module doc)."""
    # the log start offset unless the log has a remote tier; never at or below what the target already knows
    # to be remote (a truncation there is refused: the range is read from the remote tier)
    local_start = max(source.local_log_start_offset, target.highest_offset_in_remote_storage + 1)
    if target.log_end_offset < local_start or target.log_end_offset > source.log_end_offset:
        target.truncate_fully_and_start_at(local_start, source.log_start_offset)
        if local_start > source.log_start_offset:
            # the remote range's leader epochs (Kafka's buildRemoteLogAuxState): the remote reader finds the
            # segments below the local log start offset by them
            below = [e for e in source.leader_epoch_cache.epoch_entries if e.start_offset < local_start]
            target.leader_epoch_cache.assign_entries(below)
    while target.log_end_offset < source.log_end_offset:
        records = source.read(target.log_end_offset, _CHUNK, FetchIsolation.LOG_END).records
        mem = records if isinstance(records, MemoryRecords) else records.to_memory_records()
        if mem.size_in_bytes == 0:
            break
        target.append_as_follower(mem)
    target.maybe_increment_log_start_offset(source.log_start_offset, "alter log dirs")
    if source.remote_log_enabled:
        target.update_highest_offset_in_remote_storage(source.highest_offset_in_remote_storage)
