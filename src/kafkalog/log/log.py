"""Log: one topic partition's log — offsets, validation, producer state, retention (Kafka's ``UnifiedLog``).

``Log`` holds the state and the policy; :class:`~kafkalog.log.local_log.LocalLog` does the file work. The
log start offset, high watermark and first unstable offset live in one
:class:`~kafkalog.log.watermarks.Watermarks` (``self.watermarks``), which owns their invariant; roll and
truncation are methods here (Kafka's ``maybeRoll``, ``roll``, ``truncateTo``, ``truncateFullyAndStartAt``);
the append pipeline (:mod:`kafkalog.log.append`) and retention (:mod:`kafkalog.log.retention`) use this
class's public names only.

Invariants (checked by the tests and assumed everywhere):

* ``log_start_offset <= local_log_start_offset <= log_end_offset`` and
  ``log_start_offset <= high_watermark <= log_end_offset``, and the last stable offset is
  ``min(first unstable offset, high watermark)`` (:meth:`Log.check_watermarks`); the recovery point is <=
  the log end offset and >= the log start offset.
* Offsets only grow on append; a rejected append changes nothing on disk or in memory.
* There is always an active segment; segments whose offsets reach past the high watermark are never
  deleted by retention. A log rolls before an append exactly when ``LogSegment.should_roll_for`` says so,
  asked once per append (:meth:`Log.maybe_roll`).
* Truncation removes whole batches at and above the target, never below it; the producer state, the leader
  epoch cache and the producer snapshots follow the log; the high watermark never stays above the log end
  offset, the log start offset never above the target. On a tiered log a truncation never reaches the remote
  tier: a target at or below :attr:`Log.highest_offset_in_remote_storage` is refused
  (:class:`OffsetOutOfRangeError`, nothing changes). Kafka keeps that offset across a truncation because a new
  leader epoch separates the old and the new lineage; kafkalog has no replication, so no epoch bump, and local
  retention would take the re-appended, never-copied offsets for copied ones.
* One writer at a time (``self.lock``); readers take no lock: they work from immutable offset metadata and
  segment snapshots, and a segment deleted under a reader yields :class:`OffsetOutOfRangeError`, never a
  crash (with a remote tier, local retention deleting it sends the read to the remote tier instead). ``read`` returns records in memory, never a lazy slice of a segment that could be deleted later.

Tiered storage (KIP-405, Kafka's ``UnifiedLog`` tiered parts): when :attr:`Log.remote_log_enabled` (the
broker gate ``remote.log.storage.system.enable`` passed to :meth:`Log.open`, the topic's
``remote.storage.enable``, and not an internal ``__`` topic), the offsets in ``[log_start_offset,
local_log_start_offset)`` live only in the remote tier, which the log reaches through the
:class:`~kafkalog.log.tiers.RemoteLogReader` its owner attaches (:meth:`Log.set_remote_log_reader`); the
``RemoteLogManager`` reports what it copied with :meth:`Log.update_highest_offset_in_remote_storage`. Without
a remote tier the local log start offset equals the log start offset (Kafka leaves its field stale then).

Logging uses Kafka's prefix ``[Log partition=<topic>-<p>, dir=<parent>] `` and Kafka's messages for load,
roll and deletion.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kafkalog.errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    ResourceExhaustedError,
)
from kafkalog.log import append as append_path
from kafkalog.log import retention
from kafkalog.log.checkpoint import read_partition_metadata, write_clean_shutdown, write_partition_metadata
from kafkalog.log.config import LogConfig, validate_remote_storage, validate_remote_storage_change
from kafkalog.log.leader_epoch import LeaderEpochFileCache
from kafkalog.log.loader import (
    LoadedLog,
    LoadProgress,
    check_partition_dir,
    load_log,
    rebuild_producer_state,
    split_overflowed_segment,
)
from kafkalog.log.local_log import LocalLog, LogDirFailureHandler
from kafkalog.log.names import TopicPartition, parse_topic_partition_name
from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.log.scheduler import ScheduledTask, Scheduler, background_executor
from kafkalog.log.tiers import CLIENT_RECORD_DELETION, RemoteLogReader
from kafkalog.log.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendOrigin,
    FetchIsolation,
    LogAppendInfo,
    LogOffsetSnapshot,
)
from kafkalog.log.watermarks import Watermarks
from kafkalog.records import Compression, MemoryRecords, Record, SimpleRecord
from kafkalog.records.simple import build_plain_batch
from kafkalog.storage import (
    FetchDataInfo,
    LogOffsetMetadata,
    LogSegment,
    TimestampAndOffset,
)
from kafkalog.storage.files import open_regular
from kafkalog.storage.types import UNKNOWN_OFFSET
from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "Log"]

_log = logging.getLogger("kafkalog.log")
# ``Log.read`` compares these once per call (an enum member lookup costs more than a global).
_HIGH_WATERMARK = FetchIsolation.HIGH_WATERMARK
_LOG_END = FetchIsolation.LOG_END
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED
_INT32_MAX = 2**31 - 1


def _remote_log_enabled(system_enable: bool, config: LogConfig, topic: str) -> bool:
    """Kafka's ``UnifiedLog.isRemoteLogEnabled``: the broker gate, the topic config, not compacted, and not an
    internal topic (every ``__`` topic: Kafka's internal ones, ``__remote_log_metadata``, ``__cluster_metadata``)."""
    return (
        system_enable and config.remote_storage_enable and not config.compact and not topic.startswith("__")
    )


class _LogAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"{self.extra['prefix']}{msg}", kwargs  # type: ignore[index]


class Log:
    """The log of one topic partition (see the module doc)."""

    def __init__(
        self,
        local_log: LocalLog,
        log_start_offset: int,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochFileCache,
        topic_id: uuid.UUID | None = None,
        had_clean_shutdown: bool = False,
        remote_storage_system_enable: bool = False,
    ) -> None:
        self.local_log = local_log
        #: the broker's ``remote.log.storage.system.enable`` (see :attr:`remote_log_enabled`)
        self.remote_storage_system_enable = remote_storage_system_enable
        self._highest_offset_in_remote_storage = -1
        #: a start-offset move deferred the leader-epoch checkpoint to after the lock (see delete_old_segments)
        self._epoch_checkpoint_pending = False
        self._remote_log_reader: RemoteLogReader | None = None
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache
        self.lock = threading.RLock()
        self.topic_id = topic_id
        self.had_clean_shutdown = had_clean_shutdown
        self.loaded_fully = True
        self.owns_clean_shutdown_marker = False
        self._closed = False
        self._expiry_task: ScheduledTask | None = None
        #: whether ``partition.metadata`` still has to be written (:meth:`maybe_flush_metadata_file`)
        self.metadata_flush_pending = False
        self._pending_flush: concurrent.futures.Future[None] | None = None
        self.logger = _LogAdapter(
            _log, {"prefix": f"[Log partition={self.topic_partition}, dir={self.dir.parent}] "}
        )
        #: log start offset, high watermark, first unstable offset (written only through its methods)
        self.watermarks = Watermarks(log_start_offset, producer_state, self.logger)
        # Kafka's UnifiedLog initializer: the local log start offset is the first local segment's base (at least
        # the log start offset); without a remote tier the log start offset is raised to it.
        first = local_log.segments.first_segment
        local_start = max(log_start_offset, first.base_offset if first is not None else 0)
        self._update_log_start_offset(
            log_start_offset if self.remote_log_enabled else local_start, local_start
        )
        if self.high_watermark < local_start:  # Kafka's updateLocalLogStartOffset
            self.watermarks.set_high_watermark(LogOffsetMetadata(local_start))
        self.watermarks.update_first_unstable_offset()
        self._initialize_topic_id()
        scheduler = local_log.scheduler
        if scheduler is not None:
            interval = self.config.producer_id_expiration_check_interval_ms
            self._expiry_task = scheduler.schedule(
                "PeriodicProducerExpirationCheck", self.remove_expired_producers, interval, interval
            )

    # --- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | dict[str, Any] | None = None,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        scheduler: Scheduler | None = None,
        time: Time | None = None,
        *,
        last_shutdown_clean: bool | None = None,
        topic_id: uuid.UUID | None = None,
        on_dir_failure: LogDirFailureHandler | None = None,
        load_progress: LoadProgress | None = None,
        remote_storage_system_enable: bool = False,
    ) -> Log:
        """Open (creating if missing) and load the partition directory ``directory`` (``<topic>-<partition>``).

        ``last_shutdown_clean`` None reads (and deletes) the directory's own ``.kafka_cleanshutdown``
        marker; a :class:`~kafkalog.manager.LogManager` passes what it found for the whole log dir.
        ``load_progress`` is called with the ``.log`` bytes the load is done with
        (:mod:`kafkalog.log.loader`, Progress).
        ``remote_storage_system_enable`` is the broker's ``remote.log.storage.system.enable``: a config with
        ``remote.storage.enable=true`` is refused (:class:`~kafkalog.errors.InvalidConfigurationError`, Kafka's
        text, nothing on disk touched) unless it is on.
        """
        from kafkalog.log.checkpoint import read_clean_shutdown

        directory = Path(directory)
        cfg = config if isinstance(config, LogConfig) else LogConfig.from_props(config or {})
        validate_remote_storage(cfg, remote_storage_system_enable)
        time = time or SYSTEM_TIME
        tp = parse_topic_partition_name(directory)
        directory.mkdir(parents=True, exist_ok=True)
        check_partition_dir(directory)  # nothing below follows a link out of the data directory
        clean = read_clean_shutdown(directory) if last_shutdown_clean is None else last_shutdown_clean
        epoch_cache = LeaderEpochFileCache.for_directory(directory, f"[LeaderEpochCache {tp}] ")
        psm = ProducerStateManager(
            str(tp), directory, cfg.transaction_max_timeout_ms, cfg.producer_id_expiration_ms, time
        )
        start = time.nanoseconds()
        loaded: LoadedLog = load_log(
            directory,
            tp,
            cfg,
            scheduler=scheduler,
            time=time,
            had_clean_shutdown=clean,
            log_start_offset_checkpoint=log_start_offset,
            recovery_point_checkpoint=recovery_point,
            leader_epoch_cache=epoch_cache,
            producer_state=psm,
            load_progress=load_progress,
            remote_log_enabled=_remote_log_enabled(remote_storage_system_enable, cfg, tp.topic),
        )
        local = LocalLog(
            directory,
            cfg,
            loaded.segments,
            loaded.recovery_point,
            loaded.next_offset_metadata,
            scheduler,
            time,
            tp,
            on_dir_failure,
        )
        try:
            log = cls(
                local,
                loaded.log_start_offset,
                psm,
                epoch_cache,
                topic_id,
                clean,
                remote_storage_system_enable=remote_storage_system_enable,
            )
        except BaseException:
            # e.g. InconsistentTopicIdError: release the segments' files (the active index is trimmed on close)
            local.close()
            raise
        # A standalone log keeps its own clean-shutdown marker; a LogManager keeps one per log dir.
        log.owns_clean_shutdown_marker = last_shutdown_clean is None
        log.logger.info(
            "Completed load of log with %d segments, log start offset %d and log end offset %d in %d ms",
            local.segments.number_of_segments,
            log.log_start_offset,
            log.log_end_offset,
            (time.nanoseconds() - start) // 1_000_000,
        )
        return log

    def _initialize_topic_id(self) -> None:
        stored = read_partition_metadata(self.dir)
        if stored is not None and self.topic_id is not None and stored != self.topic_id:
            raise InconsistentTopicIdError(
                f"tried to assign topic ID {self.topic_id} to log for topic partition {self.topic_partition}, but log "
                f"already contained topic ID {stored}"
            )
        if stored is not None:
            self.topic_id = stored
        elif self.topic_id is not None:
            self.metadata_flush_pending = True

    def maybe_flush_metadata_file(self) -> None:
        """Write ``partition.metadata`` if the topic id is not on disk yet (before the first append)."""
        if self.metadata_flush_pending and self.topic_id is not None:
            write_partition_metadata(self.dir, self.topic_id)
            self.metadata_flush_pending = False

    # --- basic properties ---------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.local_log.dir

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    @property
    def topic_partition(self) -> TopicPartition:
        return self.local_log.topic_partition

    @property
    def time(self) -> Time:
        return self.local_log.time

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (a snapshot)."""
        return self.local_log.segments.values()

    @property
    def active_segment(self) -> LogSegment:
        return self.local_log.active_segment

    @property
    def num_log_segments(self) -> int:
        return self.local_log.segments.number_of_segments

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return self.local_log.segments.size_in_bytes()

    @property
    def log_end_offset(self) -> int:
        return self.local_log.log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self.local_log.log_end_offset_metadata

    @property
    def log_start_offset(self) -> int:
        return self.watermarks.log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        """The first offset the local segments serve (Kafka's ``localLogStartOffset``): below it, down to the
        log start offset, the remote tier serves. Equal to the log start offset without a remote tier."""
        return self.watermarks.local_log_start_offset

    # --- the remote tier ----------------------------------------------------------------------------------
    @property
    def remote_log_enabled(self) -> bool:
        """Kafka's ``remoteLogEnabled``: the broker's ``remote.log.storage.system.enable`` (given to
        :meth:`open`), the topic's ``remote.storage.enable``, not compacted, and not an internal ``__`` topic."""
        return _remote_log_enabled(self.remote_storage_system_enable, self.config, self.topic_partition.topic)

    @property
    def highest_offset_in_remote_storage(self) -> int:
        """The last offset (inclusive) copied to the remote tier, −1 when nothing was (Kafka's
        ``highestOffsetInRemoteStorage``): local retention deletes only segments at or below it."""
        return self._highest_offset_in_remote_storage

    def update_highest_offset_in_remote_storage(self, offset: int) -> None:
        """Raise :attr:`highest_offset_in_remote_storage` to ``offset`` (never lowers it); ignored with a
        warning when the remote tier is not enabled, as Kafka's ``updateHighestOffsetInRemoteStorage``."""
        with self.lock:
            if not self.remote_log_enabled:
                self.logger.warning(
                    "Unable to update the highest offset in remote storage with offset %d since remote storage "
                    "is not enabled. The existing highest offset is %d.",
                    offset,
                    self._highest_offset_in_remote_storage,
                )
            elif offset > self._highest_offset_in_remote_storage:
                self._highest_offset_in_remote_storage = offset

    @property
    def remote_log_reader(self) -> RemoteLogReader | None:
        """The reader of the remote tier (None: reads below the local log start offset are out of range)."""
        return self._remote_log_reader

    def set_remote_log_reader(self, reader: RemoteLogReader | None) -> None:
        """Attach (or with None detach) the remote tier's reader (the ``RemoteLogManager``'s ``reader_for``)."""
        self._remote_log_reader = reader

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    @property
    def high_watermark(self) -> int:
        return self.watermarks.high_watermark

    @property
    def high_watermark_metadata(self) -> LogOffsetMetadata:
        return self.watermarks.high_watermark_metadata

    @property
    def last_stable_offset(self) -> int:
        return self.watermarks.last_stable_offset

    @property
    def first_unstable_offset(self) -> int | None:
        return self.watermarks.first_unstable_offset

    def metrics(self) -> dict[str, int]:
        """Kafka's per-log gauges: ``NumLogSegments``, ``LogStartOffset``, ``LogEndOffset``, ``Size``."""
        return {
            "num_log_segments": self.num_log_segments,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "size": self.size,
        }

    def __repr__(self) -> str:
        return (
            f"Log(dir={self.dir}, topicId={self.topic_id}, topic={self.topic_partition.topic}, "
            f"partition={self.topic_partition.partition}, highWatermark={self.high_watermark}, "
            f"lastStableOffset={self.last_stable_offset}, logStartOffset={self.log_start_offset}, "
            f"logEndOffset={self.log_end_offset})"
        )

    def update_config(self, new_config: LogConfig | dict[str, Any]) -> LogConfig:
        """Switch to a new config (a mapping updates the current one); returns the old config. Kafka's
        tiered checks run against the log's ``remote.log.storage.system.enable`` first (a refused config
        changes nothing). Turning the remote tier off moves the log start offset up to the local one."""
        with self.lock:
            old = self.config
            cfg = new_config if isinstance(new_config, LogConfig) else old.updated(new_config)
            validate_remote_storage(cfg, self.remote_storage_system_enable)
            validate_remote_storage_change(old, cfg)
            was_remote = self.remote_log_enabled
            self.local_log.update_config(cfg)
            if was_remote and not self.remote_log_enabled:
                # remote.storage.enable turned off (with remote.log.delete.on.disable): the remote range is gone
                # for this log, which keeps its invariant (the two start offsets are one without a remote tier)
                local_start = self.local_log_start_offset
                # nothing of this log is in the remote tier any more: local retention must not treat offsets at
                # or below the old highest remote offset as copied if tiering is turned on again
                self._highest_offset_in_remote_storage = -1
                if local_start > self.log_start_offset:
                    self._update_log_start_offset(local_start, local_start)
                    self.leader_epoch_cache.truncate_from_start(local_start)
                    self.producer_state.on_log_start_offset_incremented(local_start)
                    self.watermarks.update_first_unstable_offset()
                    self.logger.info(
                        "Incremented log start offset to %d due to remote storage disabled", local_start
                    )
            return old

    # --- watermarks ---------------------------------------------------------------------------------------
    def check_watermarks(self) -> None:
        """Raise ``AssertionError`` if ``log start <= HW <= LEO`` or ``LSO = min(FUO, HW)`` does not hold
        (:meth:`Watermarks.check <kafkalog.log.watermarks.Watermarks.check>`; the stateful tests call it)."""
        with self.lock:
            self.watermarks.check(self.log_end_offset)

    def _update_log_start_offset(self, offset: int, local_log_start_offset: int | None = None) -> None:
        self.watermarks.set_log_start_offset(offset, local_log_start_offset)
        local_start = self.watermarks.local_log_start_offset
        if self.local_log.recovery_point < local_start:
            self.local_log.update_recovery_point(local_start)

    def _update_high_watermark_metadata(self, metadata: LogOffsetMetadata) -> None:
        with self.lock:
            self.watermarks.set_high_watermark(metadata)

    def update_high_watermark(self, hw: int | LogOffsetMetadata) -> int:
        """Set the high watermark, clamped to ``[log_start_offset, log_end_offset]``; returns the value set.

        Clamped under the lock: a log start offset or log end offset another writer moves in between is seen."""
        meta = hw if isinstance(hw, LogOffsetMetadata) else LogOffsetMetadata(hw)
        with self.lock:
            end = self.log_end_offset_metadata
            if meta.message_offset >= end.message_offset:
                new = end
            elif meta.message_offset < self.log_start_offset:
                new = LogOffsetMetadata(self.log_start_offset)
            else:
                new = meta
            self.watermarks.set_high_watermark(new)
            return new.message_offset

    def maybe_update_high_watermark(self, hw: int) -> int | None:
        """Follower form: update only if the clamped value changes; returns the new value or None."""
        with self.lock:
            end = self.log_end_offset_metadata
            new = end if hw >= end.message_offset else LogOffsetMetadata(max(hw, self.log_start_offset))
            if new.message_offset != self.high_watermark:
                self._update_high_watermark_metadata(new)
                return new.message_offset
            return None

    def maybe_increment_high_watermark(self, new_hw: LogOffsetMetadata | int) -> LogOffsetMetadata | None:
        """Leader form: move the high watermark forward only; returns the old metadata if it moved (never past
        the log end offset: checked under the lock, so a truncation in between is seen)."""
        with self.lock:
            meta = (
                new_hw if isinstance(new_hw, LogOffsetMetadata) else self.convert_to_offset_metadata(new_hw)
            )
            if meta.message_offset > self.log_end_offset:
                raise ValueError(
                    f"high watermark {meta} update exceeds current log end offset {self.log_end_offset_metadata}"
                )
            old = self.watermarks.high_watermark_metadata
            if old.message_offset < meta.message_offset or (
                old.message_offset == meta.message_offset
                and not old.message_offset_only
                and not meta.message_offset_only
                and old.on_older_segment(meta)
            ):
                self._update_high_watermark_metadata(meta)
                return old
            return None

    @property
    def hw_follows_leo(self) -> bool:
        """Whether the high watermark follows the log end offset after every append (a partition whose only
        in-sync replica is the leader, as in a :class:`~kafkalog.manager.LogManager`); False leaves it to
        :meth:`update_high_watermark` / :meth:`maybe_increment_high_watermark` (the caller replicates)."""
        return self.watermarks.follows_log_end

    @hw_follows_leo.setter
    def hw_follows_leo(self, value: bool) -> None:
        with self.lock:
            self.watermarks.set_follows_log_end(bool(value), self.log_end_offset_metadata)

    def _update_high_watermark_with_log_end_offset(self) -> None:
        end = self.log_end_offset_metadata
        if end.message_offset <= self.high_watermark:
            self._update_high_watermark_metadata(end)

    def maybe_increment_log_start_offset(
        self,
        new_log_start_offset: int,
        reason: str = CLIENT_RECORD_DELETION,
        *,
        defer_epoch_checkpoint: bool = False,
    ) -> bool:
        """Move the log start offset forward (never past the high watermark); segments go at the next retention.

        Covers both tiers, as Kafka's: the local log start offset is raised to it too (with a remote tier it
        may already be above it: then only the log start offset moves). ``reason`` is Kafka's
        ``LogStartOffsetIncrementReason`` text (:mod:`kafkalog.log.tiers`). Returns whether it moved.

        The truncated leader-epoch checkpoint is written after the Log's lock is released (appends never wait
        for its fsyncs); a caller that holds the lock around this call passes ``defer_epoch_checkpoint`` and
        calls :meth:`write_deferred_epoch_checkpoint` once it has released it."""
        with self.lock:
            if new_log_start_offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.topic_partition} since it is larger than the high watermark {self.high_watermark}"
                )
            local_start = self.local_log_start_offset
            if new_log_start_offset <= self.log_start_offset:
                if new_log_start_offset > local_start:  # a remote log's local start follows (Kafka's)
                    self.watermarks.set_local_log_start_offset(new_log_start_offset)
                return False
            self._update_log_start_offset(new_log_start_offset, max(new_log_start_offset, local_start))
            self.logger.info("Incremented log start offset to %d due to %s", new_log_start_offset, reason)
            epochs_changed = self.leader_epoch_cache.truncate_from_start(new_log_start_offset, flush=False)
            self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
            self.watermarks.update_first_unstable_offset()
            if epochs_changed and defer_epoch_checkpoint:
                self._epoch_checkpoint_pending = True
                return True
        if epochs_changed:  # the checkpoint's fsyncs outside the lock: appends never wait for them
            self.leader_epoch_cache.flush()
        return True

    def write_deferred_epoch_checkpoint(self) -> None:
        """Write the leader-epoch checkpoint a ``defer_epoch_checkpoint`` start-offset move left pending (call
        it after releasing the Log's lock)."""
        with self.lock:
            pending = self._epoch_checkpoint_pending
            self._epoch_checkpoint_pending = False
        if pending:
            self.leader_epoch_cache.flush()

    def maybe_increment_local_log_start_offset(self, new_local_log_start_offset: int, reason: str) -> bool:
        """Move the local log start offset forward alone (local retention deleted segments the remote tier
        holds; Kafka's ``maybeIncrementLocalLogStartOffset``); returns whether it moved. Never past the log end
        offset (:class:`OffsetOutOfRangeError`, nothing changes: Kafka does not check)."""
        with self.lock:
            if new_local_log_start_offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"cannot increment the local log start offset to {new_local_log_start_offset} of partition "
                    f"{self.topic_partition} since it is larger than the log end offset {self.log_end_offset}"
                )
            if new_local_log_start_offset <= self.local_log_start_offset:
                return False
            self.watermarks.set_local_log_start_offset(new_local_log_start_offset)
            self.logger.info(
                "Incremented local log start offset to %d due to reason %s",
                new_local_log_start_offset,
                reason,
            )
            return True

    def convert_to_offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and position of ``offset`` (message-offset-only metadata if it cannot be resolved)."""
        try:
            return self.local_log.convert_to_offset_metadata_or_throw(offset)
        except OffsetOutOfRangeError:
            return LogOffsetMetadata(offset)

    def fetch_offset_snapshot(self) -> LogOffsetSnapshot:
        """Log start, log end, high watermark and last stable offset captured together."""
        hw = self.watermarks.high_watermark_metadata
        if hw.message_offset_only:
            hw = self.convert_to_offset_metadata(hw.message_offset)
        lso = LogOffsetMetadata(self.last_stable_offset)
        return LogOffsetSnapshot(self.log_start_offset, self.log_end_offset_metadata, hw, lso)

    # --- append -------------------------------------------------------------------------------------------
    def append_as_leader(
        self, records: MemoryRecords, leader_epoch: int = 0, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> LogAppendInfo:
        """Validate, assign offsets from the log end offset, and append (a leader's produce)."""
        if origin is AppendOrigin.CLIENT:
            info = append_path.try_append_fast(self, records, leader_epoch)
            if info is not None:
                return info
        return self._append(
            records,
            origin,
            validate_and_assign=origin is not AppendOrigin.RAFT_LEADER,
            leader_epoch=leader_epoch,
            ignore_record_size=False,
        )

    def append_as_follower(self, records: MemoryRecords) -> LogAppendInfo:
        """Append batches with the offsets they carry (a follower's replication); offsets must not go back."""
        return self._append(
            records,
            AppendOrigin.REPLICATION,
            validate_and_assign=False,
            leader_epoch=-1,
            ignore_record_size=True,
        )

    def append(
        self,
        records: Iterable[SimpleRecord | Record | bytes | tuple[bytes | None, bytes | None]],
        *,
        compression: Compression | str | None = None,
        leader_epoch: int = 0,
    ) -> LogAppendInfo:
        """Convenience for library users: build one batch (topic codec unless given) and append as leader."""
        now = self.time.milliseconds()
        if (compression is None or compression is Compression.NONE) and type(records) is list:
            built = build_plain_batch(records, now)  # a few small records, built in Python (or None)
            if built is not None:
                info = append_path.try_append_built(self, built, leader_epoch, now)
                if info is not None:
                    return info
        codec = compression
        if codec is None:
            codec = self.config.target_compression or Compression.NONE
        batch = MemoryRecords.build(records, compression=codec, now_ms=now)
        if batch.size_in_bytes == 0:
            raise InvalidRecordError("append of no records")
        return self.append_as_leader(batch, leader_epoch)

    def _append(
        self,
        records: MemoryRecords,
        origin: AppendOrigin,
        *,
        validate_and_assign: bool,
        leader_epoch: int,
        ignore_record_size: bool,
    ) -> LogAppendInfo:
        return append_path.append(
            self,
            records,
            origin,
            validate_and_assign=validate_and_assign,
            leader_epoch=leader_epoch,
            ignore_record_size=ignore_record_size,
        )

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record in the leader epoch cache that ``leader_epoch`` starts at ``start_offset``."""
        self.leader_epoch_cache.assign(leader_epoch, start_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    # --- rolling and flushing -----------------------------------------------------------------------------
    def maybe_roll(self, messages_size: int, info: LogAppendInfo, now: int | None = None) -> LogSegment:
        """The segment an append of ``messages_size`` bytes described by ``info`` goes to, rolling first when
        :meth:`LogSegment.should_roll_for` says so (size, ``segment.ms`` minus jitter on record time, full
        indexes, relative offset overflow) at ``now`` (default: the clock). The new segment starts at the
        append's first offset or, when that is unknown, its last offset minus ``2**31 - 1``, as Kafka does.
        Called under the lock, once per append: the decision is made here only."""
        local = self.local_log
        segment = local.active_segment
        settings = local.append_settings
        if not segment.should_roll_for(
            settings.max_segment_ms,
            settings.segment_bytes,
            info.max_timestamp,
            info.last_offset,
            messages_size,
            self.time.milliseconds() if now is None else now,
        ):
            return segment
        self.logger.debug(
            "Rolling new log segment (log_size = %d/%d), offset_index_size = %d/%d, time_index_size = %d/%d",
            segment.size,
            settings.segment_bytes,
            segment.offset_index.entries,
            segment.offset_index.max_entries,
            segment.time_index.entries,
            segment.time_index.max_entries,
        )
        first = info.first_offset
        return self.roll(first if first != UNKNOWN_OFFSET else info.last_offset - _INT32_MAX)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment (Kafka's ``UnifiedLog.roll``) and return at once.

        The producer state's map end offset moves to the new base offset and a producer snapshot is written
        (not synced); the high watermark moves with the log end offset when it follows it. The rolled
        segment, its snapshot and everything below the new base offset are fsynced in the background
        (``flush-log``: on the log's scheduler, or on one shared thread for a standalone log, which
        :meth:`close` waits for), including the rolled segment's trimmed indexes and final time-index entry
        even when a flush just before the roll already passed them."""
        with self.lock:
            local = self.local_log
            rolled = local.segments.active_segment
            new_segment = local.roll(expected_next_offset)
            self.producer_state.update_map_end_offset(new_segment.base_offset)
            snapshot = self.producer_state.take_snapshot(sync=False)
            self._update_high_watermark_with_log_end_offset()
            base = new_segment.base_offset

            def flush_log() -> None:
                if snapshot is not None and snapshot.exists():
                    fd = open_regular(snapshot, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                self.flush_up_to_offset_exclusive(base)
                # The rolled segment's trimmed indexes and final time-index entry must reach the disk even when
                # the recovery point already passed it (a flush just before the roll).
                if rolled is not None and rolled is not new_segment and not rolled.deleted:
                    try:
                        rolled.flush()
                    except (OSError, KafkaError):
                        pass  # deleted concurrently by retention or truncation

            scheduler = local.scheduler
            if scheduler is not None:
                scheduler.schedule_once("flush-log", self._guarded(flush_log))
            else:
                # No scheduler (a standalone log): still in the background, as Kafka does, on one shared
                # thread, so a roll costs the appender no fsyncs; close() waits for it.
                self._pending_flush = background_executor().submit(self._guarded(flush_log))
            return new_segment

    def _guarded(self, fn: Callable[[], None]) -> Callable[[], None]:
        """``fn`` as a background task: skipped once the log is closed, quiet on a storage error (the log is
        then offline and its owner was told)."""

        def run() -> None:
            if self._closed:
                return
            try:
                fn()
            except KafkaStorageError:
                pass

        return run

    def flush(
        self, offset: int | None = None, *, include_offset: bool = False, indexes: bool = False
    ) -> None:
        """fsync everything below ``offset`` (default: the log end offset) and advance the recovery point.

        The active segment's offset and time indexes only with ``indexes`` (see :meth:`LocalLog.flush`)."""
        target = self.log_end_offset if offset is None else offset
        flush_offset = target + 1 if include_offset else target
        local = self.local_log
        if local.offline:
            raise local.offline_error()
        try:  # not ``local.io(message)``: this runs after every append with flush.messages=1
            if flush_offset > local.recovery_point:
                local.flush(flush_offset, active_indexes=indexes)
                with self.lock:
                    local.mark_flushed(target)
            elif indexes:
                local.active_segment.flush()
        except KafkaStorageError:
            raise
        except OSError as exc:
            message = f"error while flushing log for {self.topic_partition} in dir {self.dir.parent}"
            raise local.io_failed(message, exc) from exc

    def flush_up_to_offset_exclusive(self, offset: int) -> None:
        self.flush(offset)

    @property
    def last_flush_time(self) -> int:
        return self.local_log.last_flushed_time

    # --- reads --------------------------------------------------------------------------------------------
    def read(
        self,
        start_offset: int,
        max_length: int = 1 << 20,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Read from the batch holding ``start_offset``, bounded by the isolation level's offset.

        The records are read into memory before returning, usually with one ``pread`` that also holds the
        batch header (:mod:`kafkalog.storage.segment_read`): a lazy file slice could outlive its segment
        (retention deletes files without delay when ``file.delete.delay.ms`` is 0), and a deleted segment
        must read as ``OffsetOutOfRangeError``.
        """
        watermarks = self.watermarks  # lock-free: each of its fields is replaced whole (see its module doc)
        if start_offset < watermarks.local_log_start_offset:  # the one check the local path pays for tiering
            return self._read_remote(start_offset, max_length, isolation, min_one_message)
        local = self.local_log
        if isolation is _HIGH_WATERMARK:
            max_meta = watermarks.high_watermark_metadata
            if max_meta.segment_base_offset < 0:  # offset only: resolve it (``_fetch_hw_metadata``)
                max_meta = self._fetch_hw_metadata()
        elif isolation is _LOG_END:
            max_meta = local.log_end_offset_metadata
        else:
            max_meta = self._fetch_lso_metadata()
        try:
            return local.read(
                start_offset,
                max_length,
                min_one_message,
                max_meta,
                isolation is _TXN_COMMITTED,
                in_memory=True,
            )
        except OffsetOutOfRangeError:
            if start_offset < watermarks.local_log_start_offset:  # local retention passed it under us
                return self._read_remote(start_offset, max_length, isolation, min_one_message)
            raise
        except KafkaStorageError as exc:
            if self.local_log.offline or isinstance(exc, ResourceExhaustedError):
                raise
            if start_offset < watermarks.local_log_start_offset:  # local retention deleted it under us
                return self._read_remote(start_offset, max_length, isolation, min_one_message)
            # The segment was deleted under us (retention or truncation): report the range instead.
            raise OffsetOutOfRangeError(
                f"offset {start_offset} of partition {self.topic_partition} is no longer available "
                f"(log start offset {self.log_start_offset})"
            ) from None

    def _read_remote(
        self, start_offset: int, max_length: int, isolation: FetchIsolation, min_one_message: bool
    ) -> FetchDataInfo:
        """A read below the local log start offset: the remote tier's reader answers, bounded by the
        isolation's offset (HW, LSO or LEO); only remote data is returned (the next fetch continues locally,
        as Kafka's). Below the log start offset, without a remote tier or reader, or when the reader holds no
        segment for the offset: :class:`OffsetOutOfRangeError`; :class:`RemoteStorageError` propagates."""
        reader = self._remote_log_reader
        log_start = self.log_start_offset
        if start_offset >= log_start and reader is not None and self.remote_log_enabled:
            if isolation is _HIGH_WATERMARK:
                max_offset = self.high_watermark
            elif isolation is _LOG_END:
                max_offset = self.log_end_offset
            else:
                max_offset = self.last_stable_offset
            info = reader.read(
                start_offset, max_length, max_offset, min_one_message, isolation is _TXN_COMMITTED
            )
            if info is not None:
                return info
        if start_offset >= log_start:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} of partition {self.topic_partition} is below the local log start offset "
                f"{self.local_log_start_offset} and no remote log reader served it (log start offset {log_start})"
            )
        raise OffsetOutOfRangeError(
            f"received request for offset {start_offset} for partition {self.topic_partition}, but we only have "
            f"log segments starting from offset: {log_start}."
        )

    def _fetch_hw_metadata(self) -> LogOffsetMetadata:
        watermarks = self.watermarks
        hw = watermarks.high_watermark_metadata
        if hw.message_offset_only:
            with self.lock:
                hw = self.convert_to_offset_metadata(watermarks.high_watermark)
                watermarks.resolve_high_watermark(hw)
        return hw

    def _fetch_lso_metadata(self) -> LogOffsetMetadata:
        hw = self._fetch_hw_metadata()
        fuo = self.watermarks.first_unstable_offset_metadata
        if fuo is not None and fuo.message_offset < hw.message_offset:
            if fuo.message_offset_only:
                fuo = self.convert_to_offset_metadata(fuo.message_offset)
            return fuo
        return hw

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[Any]:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)``."""
        return self.local_log.collect_aborted_transactions_range(
            self.log_start_offset, start_offset, upper_bound_offset
        )

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: -1 latest, -2 earliest, -3 max timestamp, else the first offset with ts >= target."""
        return retention.fetch_offset_by_timestamp(self, target_timestamp)

    # --- retention, truncation, replacement ---------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """Apply retention (time, size, log start offset); returns how many segments were deleted. The leader
        epoch checkpoint a moved log start offset truncated is written after the pass releases the lock."""
        try:
            return retention.delete_old_segments(self)
        finally:
            self.write_deferred_epoch_checkpoint()

    def truncate_to(self, target_offset: int) -> bool:
        """Drop every offset >= ``target_offset`` (whole batches); returns whether anything was truncated.

        Nothing below the target goes. The producer state, the leader epoch cache and the producer snapshots
        follow the log (snapshots of deleted segments are deleted, the state is rebuilt up to the new log end
        offset); the high watermark never stays above the log end offset, the log start offset never above
        the target; a target below the first segment truncates fully (:meth:`truncate_fully_and_start_at`).

        A target at or below :attr:`highest_offset_in_remote_storage` (a tiered log) is refused with
        :class:`OffsetOutOfRangeError` and changes nothing: the remote tier holds those offsets, and without a
        new leader epoch to tell them apart the offsets appended again would count as copied (see the module
        doc)."""
        if target_offset < 0:
            raise ValueError(
                f"cannot truncate partition {self.topic_partition} to a negative offset ({target_offset})"
            )
        with self.lock:
            self._check_truncation_above_remote(target_offset, "truncate")
            if target_offset >= self.log_end_offset:
                self.logger.info(
                    "Truncating to %d has no effect as the largest offset in the log is %d",
                    target_offset,
                    self.log_end_offset - 1,
                )
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
                return False
            self.logger.info("Truncating to offset %d", target_offset)
            local = self.local_log
            first = local.segments.first_segment
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            with local.io(f"error while truncating log to offset {target_offset} for {self.topic_partition}"):
                deleted = local.truncate_to(target_offset)
                for s in deleted:
                    self.producer_state.delete_snapshot(s.base_offset)
                self.leader_epoch_cache.truncate_from_end(target_offset)
                # Kafka moves only the log start offset back; the local one never stays above the log end.
                self.watermarks.set_log_start_offset(
                    min(target_offset, self.log_start_offset), min(target_offset, self.local_log_start_offset)
                )
                self._rebuild_producer_state(target_offset)
                if self.high_watermark >= self.log_end_offset:
                    self._update_high_watermark_metadata(self.log_end_offset_metadata)
            return True

    def truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None = None) -> None:
        """Delete everything and start an empty log at ``new_offset`` (one empty segment; the log start offset
        is ``log_start_offset``, default ``new_offset``); the recovery point moves to ``new_offset`` when it
        falls outside the log.

        A ``new_offset`` at or below :attr:`highest_offset_in_remote_storage` (a tiered log) is refused with
        :class:`OffsetOutOfRangeError` and changes nothing, as in :meth:`truncate_to`."""
        with self.lock:
            self._check_truncation_above_remote(new_offset, "truncate fully and start")
            self.logger.debug(
                "Truncate and start at offset %d, logStartOffset: %s", new_offset, log_start_offset
            )
            local = self.local_log
            local.truncate_fully_and_start_at(new_offset)
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            start = new_offset if log_start_offset is None else log_start_offset
            # Kafka: with a remote tier the local log start offset is the new offset (the log start offset may
            # stay below it, the remote tier serving the range); without one the two are equal.
            self.watermarks.set_log_start_offset(
                start, max(start, new_offset) if self.remote_log_enabled else start
            )
            self._rebuild_producer_state(new_offset)
            self._update_high_watermark_metadata(self.log_end_offset_metadata)
            if local.recovery_point > new_offset or local.recovery_point < self.log_start_offset:
                local.update_recovery_point(new_offset)

    def _check_truncation_above_remote(self, offset: int, what: str) -> None:
        """Refuse a truncation to ``offset`` at or below the highest offset in remote storage."""
        highest = self._highest_offset_in_remote_storage
        if highest >= 0 and offset <= highest:
            raise OffsetOutOfRangeError(
                f"cannot {what} partition {self.topic_partition} at offset {offset}: offsets up to {highest} "
                f"are in remote storage (a truncation of a tiered log must stay above them)"
            )

    def _rebuild_producer_state(self, last_offset: int) -> None:
        rebuild_producer_state(
            self.producer_state,
            self.local_log.segments,
            self.log_start_offset,
            last_offset,
            self.time,
            reload_from_clean_shutdown=False,
        )

    def split_overflowed_segment(self, segment: LogSegment) -> list[LogSegment]:
        """Split a legacy segment whose offsets overflow its base (KAFKA-6264)."""
        with self.lock:
            return split_overflowed_segment(
                segment,
                self.local_log.segments,
                self.dir,
                self.config,
                self.local_log.scheduler,
                self.time,
                "",
            )

    def remove_expired_producers(self) -> None:
        """Expire producer ids idle for ``producer.id.expiration.ms`` (the periodic check)."""
        with self.lock:
            self.producer_state.remove_expired_producers(self.time.milliseconds())

    # --- lifecycle ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """A clean close: flush everything (the empty active segment's files too), snapshot producer state at
        the log end offset, close every segment, then (for a standalone log that loaded fully) write the
        clean-shutdown marker so the next open scans nothing (KAFKA-15375: never for a partial load)."""
        self._await_pending_flush()
        with self.lock:
            if self._closed:
                return
            if self._expiry_task is not None:
                self._expiry_task.cancel()
                self._expiry_task = None
            with self.local_log.io(
                f"error while closing log for {self.topic_partition} in dir {self.dir.parent}"
            ):
                self.maybe_flush_metadata_file()
                if not self.local_log.offline:
                    self.flush(include_offset=True, indexes=True)
                self.producer_state.take_snapshot()
                self.local_log.close()
                if self.owns_clean_shutdown_marker and self.loaded_fully:
                    write_clean_shutdown(self.dir)
            self._closed = True

    def _await_pending_flush(self) -> None:
        """Wait for a standalone log's background roll flush (before taking the lock: that flush takes it)."""
        pending = self._pending_flush
        if pending is not None:
            concurrent.futures.wait([pending])

    def close_handlers(self) -> None:
        """Close file handles without flushing (the directory went offline, the log was deleted); its
        scheduled producer expiry stops too (the scheduler no longer holds the log)."""
        with self.lock:
            if self._expiry_task is not None:
                self._expiry_task.cancel()
                self._expiry_task = None
            self.local_log.close_handlers()
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        """:meth:`close` (which flushes everything once); a log whose directory is offline, or goes offline
        while closing, still lets go of its files (:meth:`close_handlers`): there is nothing left to flush
        to a failed directory, and its owner was told when it failed."""
        if self._closed:
            return
        if self.local_log.offline:
            self._await_pending_flush()
            self.close_handlers()
            return
        try:
            self.close()
        except KafkaStorageError:
            self.close_handlers()
            raise

    def rename_dir(self, name: str) -> None:
        """Rename the partition directory (e.g. to ``<tp>.<uuid>-delete``)."""
        with self.lock:
            if self.local_log.rename_dir(name):
                self.producer_state.update_parent_dir(self.dir)
                self.leader_epoch_cache = self.leader_epoch_cache.with_directory(self.dir)

    def delete(self) -> None:
        """Delete every segment, snapshot and the directory now (also after ``close``)."""
        with self.lock:
            self.local_log.check_if_closed()
            if self._expiry_task is not None:
                self._expiry_task.cancel()
                self._expiry_task = None
            self.leader_epoch_cache.clear()
            self.local_log.delete_all_segments()
            self.producer_state.truncate_fully_and_start_at(0)
            self._closed = True
            self.local_log.delete_empty_dir()
