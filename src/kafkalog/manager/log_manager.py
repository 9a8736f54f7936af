"""LogManager: a data directory (Kafka's ``log.dirs``) holding many topic-partitions.

Invariants owned here:

* **One process per log dir.** ``open`` takes every dir's ``.lock`` (:class:`~kafkalog.datadir.DirLock`)
  before reading anything and keeps it until :meth:`LogManager.close`; a second opener gets
  :class:`~kafkalog.errors.LogDirLockedError` and nothing on disk changes.
* **Every log comes back where it stopped.** Logs open with what their dir's offset checkpoints and
  ``.kafka_cleanshutdown`` marker recorded (:mod:`kafkalog.manager.dirs`): with the marker no segment is
  scanned, without it recovery starts at the checkpointed recovery point. :meth:`LogManager.close` writes
  the checkpoints and, only for a dir whose logs all loaded fully, the marker again (KAFKA-15375).
* **A bad partition does not stop the others.** A partition directory that fails to load is skipped
  (:mod:`kafkalog.manager.dirs`) and reported in :attr:`LogManager.load_failures`, and its partition raises
  :class:`~kafkalog.errors.KafkaStorageError` instead of being recreated empty (which would hide its data);
  a directory whose name is not a partition's (``lost+found``) is left alone and listed in
  :attr:`LogManager.ignored_dirs`; an I/O error later takes only its log dir offline
  (Kafka's LogDirFailureChannel): the error is logged once with its cause, that dir's logs raise
  :class:`~kafkalog.errors.KafkaStorageError` from then on, logs in other dirs keep working.
* **A decided Spark sink commit completes before anything else appends**: ``open`` replays the pending
  commit journals (:mod:`kafkalog.manager.sink_journal`, which quarantines one that can never complete);
  a replay failure that may pass leaves the journal pending and is logged, anything else fails the open.
* **Topic names cannot escape the data directory**: they are validated as Kafka does before any path is
  built (``[a-zA-Z0-9._-]``, at most 249 characters, not ``.`` or ``..``).
* **Topics are created whole or not at all** (:meth:`LogManager.create_topic`, :meth:`LogManager.add_partitions`):
  the partition limits (:mod:`kafkalog.manager.limits`: ``max.partitions.per.request``, ``max.partitions``,
  the file descriptors) are checked first, a failure half way removes the partitions already made, and
  ``kafkalog-topics.json`` is written only once they all exist, so it never records a partition that does
  not; on open, a stored count above the partition directories found is lowered to them (a topic with none
  is forgotten), so no stored count drives allocation.
* **Topic metadata** (partition count, config overrides, topic id) lives in ``kafkalog-topics.json`` in
  every log dir (:mod:`kafkalog.datadir`) and survives restarts; a data dir written by Kafka has its topics
  inferred from the partition directories.
* **High watermark.** kafkalog is a single-replica store: by default (``hw_follows_leo=True``) a managed log's
  high watermark follows its log end offset after every append, as Kafka's does for a partition whose only
  in-sync replica is the leader. With ``hw_follows_leo=False`` the caller moves it
  (``Log.update_high_watermark``), e.g. when replicating the partition itself.

Background tasks (on the scheduler, Kafka's names and settings, :mod:`kafkalog.manager.tasks`; ``config``
takes Kafka's broker names): retention, flushing logs whose last flush is older than their ``flush.ms``, the
three offset checkpoints, and ``kafka-delete-logs`` (removes ``-delete`` directories
``log.segment.delete.delay.ms`` after they were renamed: Kafka's broker default for ``file.delete.delay.ms``,
60 s; ``log.delete.delay.ms`` is accepted as an alias). Each log also runs its own
``PeriodicProducerExpirationCheck``. With ``log.cleaner.enable`` (``cleaner=``: Kafka's ``log.cleaner.*`` names) a
:class:`~kafkalog.cleaner.service.LogCleaner` compacts the ``cleanup.policy=compact`` logs on threads of its
own and keeps each dir's ``cleaner-offset-checkpoint``; retention of compacted logs is then its job (Kafka's
split), and deleting a topic or moving a partition pauses its cleaning first.

Tiered storage (KIP-405, :mod:`kafkalog.manager.remote_tier`): with ``remote.log.storage.system.enable=true``
(``remote_log_manager_config=``, or Kafka's ``remote.log.*`` and ``rsm.config.*`` names among ``config``'s) the
manager opens the tiering objects, keeps ``__remote_log_metadata`` as an ordinary topic of the data dir,
starts every log with ``remote.storage.enable=true`` (at open, at creation, when a config change turns it
on) so its reads fall through to the remote tier, runs ``kafka-remote-log-copy`` and
``kafka-remote-log-expiration`` every ``remote.log.manager.task.interval.ms``, records the archive's location
in each log dir (``kafkalog-tiered-storage.json``) and closes it all with the manager.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkalog.cleaner.manager import CleanerConfig
from kafkalog.cleaner.service import LogCleaner
from kafkalog.datadir import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_topics,
    write_topics,
)
from kafkalog.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    KafkaError,
    KafkaStorageError,
    LogDirNotAvailableError,
    PolicyViolationError,
    ResourceExhaustedError,
    UnknownTopicOrPartitionError,
    is_resource_exhaustion,
)
from kafkalog.log.config import LogConfig, ManagerConfig, validate_remote_storage
from kafkalog.log.loader import LoadProgress
from kafkalog.log.log import Log
from kafkalog.log.names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    TopicPartition,
    log_delete_dir_name,
    log_dir_name,
    validate_topic_name,
)
from kafkalog.log.scheduler import KafkaScheduler, ScheduledTask, Scheduler
from kafkalog.log.types import AppendOrigin, FetchIsolation, LogAppendInfo
from kafkalog.manager.dirs import DirOffsets, LoadFailure, LogDirState
from kafkalog.manager.limits import check_new_partitions
from kafkalog.manager.moves import copy_into, open_future_log
from kafkalog.manager.remote_tier import (
    DEFAULT_COPIER_THREADS,
    DEFAULT_EXPIRATION_THREADS,
    REMOTE_LOG_METADATA_TOPIC_CONFIG,
    RemoteTier,
    split_remote_props,
    thread_pool_sizes,
)
from kafkalog.manager.sink_journal import has_pending_journals, replay_pending
from kafkalog.manager.tasks import schedule_background_tasks
from kafkalog.manager.topics import TopicRegistry
from kafkalog.partitioner import NullKeyPartitioner, partition_for_key
from kafkalog.records import Compression, MemoryRecords, SimpleRecord
from kafkalog.remote import TopicIdPartition
from kafkalog.remote.partitioner import REMOTE_LOG_METADATA_TOPIC_NAME
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.files import log_file, offset_index_file, time_index_file, transaction_index_file
from kafkalog.tiering import RemoteLogManagerConfig, TopicBasedRemoteLogMetadataManager
from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["LoadFailure", "LogManager", "ManagerConfig"]

_log = logging.getLogger("kafkalog.manager")


class LogManager:
    """The logs of every topic-partition in a set of log directories (see the module doc).

    Use :meth:`open`; the manager is a context manager (``close`` on exit). Thread-safe: topic operations
    take one manager lock; appends and reads take only the log's own lock.
    """

    def __init__(
        self,
        dirs: list[LogDirState],
        default_config: LogConfig,
        config: ManagerConfig,
        scheduler: Scheduler,
        owns_scheduler: bool,
        time: Time,
        hw_follows_leo: bool,
        cleaner_config: CleanerConfig | None = None,
        remote_log_manager_config: RemoteLogManagerConfig | None = None,
    ) -> None:
        self._dirs = dirs
        #: Kafka's ``RemoteLogManagerConfig`` (tiering off unless ``remote.log.storage.system.enable``).
        self.remote_log_manager_config = remote_log_manager_config or RemoteLogManagerConfig()
        #: The tiering objects (None without tiering), opened after the logs load.
        self.remote_tier: RemoteTier | None = None
        self._recorded_topic_ids: dict[str, uuid.UUID | None] = {}
        #: Kafka's copier and expiration thread pool sizes.
        self._remote_threads = (DEFAULT_COPIER_THREADS, DEFAULT_EXPIRATION_THREADS)
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = None  # started with the background tasks
        self.default_config = default_config
        self.config = config
        self.scheduler = scheduler
        self._owns_scheduler = owns_scheduler
        self.time = time
        self.hw_follows_leo = hw_follows_leo
        self._lock = threading.RLock()
        #: the broker's ``remote.log.storage.system.enable`` (Kafka's tiered-storage gate): topic configs and
        #: ``Log.open`` are checked against it
        self.remote_storage_system_enable = self.remote_log_manager_config.remote_log_storage_system_enable
        self._topics = TopicRegistry(default_config, hw_follows_leo, self.remote_storage_system_enable)
        self._future_logs: dict[TopicPartition, Log] = {}
        self._logs_to_delete: list[tuple[Log, int]] = []
        #: Deleted topics' ``-delete`` directories (their logs closed) and when they were deleted.
        self._dirs_to_delete: list[tuple[Path, int]] = []
        self._null_key: dict[str, NullKeyPartitioner] = {}
        self._tasks: list[ScheduledTask] = []
        self.load_failures: list[LoadFailure] = []
        #: The last write of the topics file ran out of descriptors or memory: the checkpoint task retries it.
        self._topics_unwritten = False
        self.ignored_dirs: list[Path] = []
        self._failed: dict[TopicPartition, LoadFailure] = {}
        self._closed = False
        self._unclean_dirs: list[Path] = []
        self._load_progress: LoadProgress | None = None  # open's, for the logs it loads

    # --- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        log_dirs: Path | str | Sequence[Path | str],
        default_config: LogConfig | Mapping[str, Any] | None = None,
        *,
        config: ManagerConfig | Mapping[str, Any] | None = None,
        scheduler: Scheduler | None = None,
        time: Time | None = None,
        hw_follows_leo: bool = True,
        background: bool = True,
        cleaner: CleanerConfig | Mapping[str, Any] | None = None,
        load_progress: LoadProgress | None = None,
        remote_log_manager_config: RemoteLogManagerConfig | Mapping[str, Any] | None = None,
    ) -> LogManager:
        """Lock and load every log dir (created if missing); see the module doc for what is read.

        ``load_progress`` is called with the ``.log`` bytes each partition's load is done with
        (:mod:`kafkalog.log.loader`, Progress), from the ``num.recovery.threads.per.data.dir`` loading threads,
        so possibly from several at once.

        Tiering's settings come as ``remote_log_manager_config`` or, by Kafka's names (``remote.log.*``,
        ``rsm.config.*``), among ``config``'s; the two are merged (``remote_log_manager_config`` wins)."""
        paths = [Path(log_dirs)] if isinstance(log_dirs, str | Path) else [Path(d) for d in log_dirs]
        if not paths:
            raise InvalidConfigurationError("at least one log dir is required")
        if len({p.resolve() for p in paths}) != len(paths):
            raise InvalidConfigurationError(f"duplicate log dir in {[str(p) for p in paths]}")
        base = (
            default_config if isinstance(default_config, LogConfig) else LogConfig.from_props(default_config)
        )
        remote_props: dict[str, Any] = {}
        if config is not None and not isinstance(config, ManagerConfig):
            remote_props, config = split_remote_props(config)
        if isinstance(remote_log_manager_config, RemoteLogManagerConfig):
            rcfg = remote_log_manager_config
        else:
            remote_props.update(remote_log_manager_config or {})
            rcfg = RemoteLogManagerConfig.from_props(remote_props)
        remote_threads = thread_pool_sizes(remote_props)
        validate_remote_storage(base, rcfg.remote_log_storage_system_enable)
        mcfg = config if isinstance(config, ManagerConfig) else ManagerConfig.from_props(config)
        dirs = LogDirState.lock_all(paths)
        owns = scheduler is None
        time = time or SYSTEM_TIME
        sched: Scheduler = scheduler if scheduler is not None else KafkaScheduler(1, "kafka-scheduler-", time)
        if owns and isinstance(sched, KafkaScheduler):
            sched.startup()
        ccfg = cleaner if isinstance(cleaner, CleanerConfig) else CleanerConfig.from_props(cleaner)
        manager = cls(dirs, base, mcfg, sched, owns, time, hw_follows_leo, ccfg, rcfg)
        manager._load_progress = load_progress
        manager._remote_threads = remote_threads
        try:
            manager._load()
            manager._complete_pending_sink_commits()
            manager._open_remote_tier(scheduler)
        except BaseException:
            manager._release(close_logs=True)
            raise
        finally:
            manager._load_progress = None  # only the opening load reports
        if background:
            try:
                manager._start_background_tasks()  # LogDirLockedError: another cleaner works in a dir
            except BaseException:
                manager.close()  # a clean close: nothing is left locked or open
                raise
        return manager

    def _load(self) -> None:
        had_metadata = self._topics.load(doc for doc in (read_topics(d.path) for d in self._dirs) if doc)
        # the topics as the log dirs record them, before a topic none of whose partitions was found (a log dir
        # left out) is forgotten: the remote data of a topic still recorded is never deleted at open
        self._recorded_topic_ids = {name: self._topics.topic_uuid(name) for name in self._topics.names()}
        for d in self._dirs:
            loaded = d.load(
                self.config.num_recovery_threads_per_data_dir, self._load_one, self.config.max_partitions
            )
            self.ignored_dirs.extend(loaded.ignored)
            for tp, failure in loaded.failures:
                self.load_failures.append(failure)
                if not failure.path.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                    self._failed[tp] = failure
        changed = [self._topics.infer(tp) for tp in [*self.all_logs(), *self._failed]]
        if self._correct_stored_counts() or any(changed) or not had_metadata:
            self._write_topics()

    def _correct_stored_counts(self) -> bool:
        """Make each stored partition count say what is on disk (True if one changed): a count above the
        highest partition found is lowered to it, and a topic none of whose partitions exists (a creation or
        a deletion that a crash cut short) is forgotten, so no stored count drives allocation."""
        found: dict[str, int] = {}
        for tp in [*self.all_logs(), *self._failed, *self._future_logs]:
            found[tp.topic] = max(found.get(tp.topic, 0), tp.partition + 1)
        changed = False
        for name in self._topics.names():
            stored = self._topics.get(name).partitions
            have = found.get(name, 0)
            if have >= stored:
                continue
            changed = True
            if have == 0:
                _log.warning(
                    "Topic %s is registered with %d partitions but none exists in %s; forgetting it",
                    name,
                    stored,
                    self.log_dirs,
                )
                self._topics.remove(name)
            else:
                _log.warning(
                    "Topic %s is registered with %d partitions but only partitions below %d exist; "
                    "its count is now %d",
                    name,
                    stored,
                    have,
                    have,
                )
                self._topics.set_partitions(name, have)
        return changed

    def _open_remote_tier(self, scheduler: Scheduler | None) -> None:
        """With ``remote.log.storage.system.enable``: the tiering objects, the metadata topic (created when
        missing), the archive's location recorded in every log dir, and every tiered log started (a log whose
        start fails, storage down, is started again by the next task pass)."""
        rcfg = self.remote_log_manager_config
        if not rcfg.remote_log_storage_system_enable:
            self._finish_remote_deletions_without_tiering(scheduler)
            return
        name = REMOTE_LOG_METADATA_TOPIC_NAME
        with self._lock:
            if name not in self._topics:
                self.create_topic(
                    name, rcfg.remote_log_metadata_topic_num_partitions, REMOTE_LOG_METADATA_TOPIC_CONFIG
                )
            elif (have := self.num_partitions(name)) != rcfg.remote_log_metadata_topic_num_partitions:
                # Kafka's TopicBasedRemoteLogMetadataManager refuses too: the partitioner would look for a
                # partition's events in the wrong metadata partition, and its remote segments be forgotten
                raise InvalidConfigurationError(
                    f"Existing topic partition count [{have}] of {name} and configured partition count "
                    f"[{rcfg.remote_log_metadata_topic_num_partitions}] of remote.log.metadata.topic.num.partitions "
                    "do not match"
                )
        copiers, expirers = self._remote_threads
        self.remote_tier = RemoteTier.open(rcfg, self._metadata_log, self.time, scheduler, copiers, expirers)
        self.remote_tier.record_location(d.path for d in self._dirs if d.online)
        for log in self._online_logs():
            self._start_remote(log)
        try:
            self.remote_tier.resume_partition_deletions(self._remote_deletion_due)
        except (KafkaError, OSError) as exc:
            _log.warning("Could not look for remote deletions cut short (the next open retries): %s", exc)

    def _finish_remote_deletions_without_tiering(self, scheduler: Scheduler | None) -> None:
        """With the broker gate ``remote.log.storage.system.enable`` off, a deletion of remote data that a
        failure cut short (tiering turned off, then the gate) is still finished: when ``__remote_log_metadata``
        has such marks and the storage is configured (``rsm.config.storage.url``), the tiering objects are
        opened for them alone (no log tiers; the expiration task retries a failed deletion), as Kafka deletes a
        partition's remote data whatever became of its tiering. Without a storage the marks are kept and one
        warning names the partitions and the setting that lets the next open finish them."""
        rcfg = self.remote_log_manager_config
        name = REMOTE_LOG_METADATA_TOPIC_NAME
        with self._lock:
            if name not in self._topics:
                return
            partitions = self.num_partitions(name)
        rcfg = dataclasses.replace(rcfg, remote_log_metadata_topic_num_partitions=partitions)
        if not rcfg.rsm.storage_url:
            rlmm = TopicBasedRemoteLogMetadataManager(self._metadata_log, partitions)
            try:
                pending = rlmm.partitions_pending_deletion()
            except (KafkaError, OSError) as exc:
                _log.warning("Could not look for remote deletions cut short in %s: %s", name, exc)
                return
            finally:
                rlmm.close()
            if pending:
                _log.warning(
                    "The remote data of %d partition(s) (%s) is marked for deletion in %s, but no remote storage "
                    "is configured (%sstorage.url): the data stays in the remote storage and the marks are kept; "
                    "open with the storage configured to delete it",
                    len(pending),
                    ", ".join(f"{t.topic}-{t.partition}" for t in pending[:10]),
                    name,
                    rcfg.remote_log_storage_manager_impl_prefix,
                )
            return
        copiers, expirers = self._remote_threads
        try:
            tier = RemoteTier.open(rcfg, self._metadata_log, self.time, scheduler, copiers, expirers)
        except (KafkaError, OSError) as exc:  # the gate is off: a stale storage setting never fails the open
            _log.warning(
                "Could not open the remote storage to finish remote deletions cut short (the marks are kept): %s",
                exc,
            )
            return
        try:
            pending = tier.rlm.rlmm.partitions_pending_deletion()
        except (KafkaError, OSError) as exc:
            _log.warning("Could not look for remote deletions cut short (the next open retries): %s", exc)
            pending = []
        if not pending:
            tier.close()
            return
        self.remote_tier = tier
        tier.resume_partition_deletions(self._remote_deletion_due)

    def _remote_deletion_due(self, tip: TopicIdPartition) -> bool:
        """Whether ``tip``'s remote data, marked for deletion, is to be deleted now: its topic was deleted
        (:meth:`_topic_deleted`), or the topic of its id no longer tiers (``remote.storage.enable`` turned off,
        or the broker gate). False while a log dir is offline, or for a topic whose id is unknown."""
        if self._topic_deleted(tip):
            return True
        if self.offline_dirs:
            return False
        with self._lock:
            if tip.topic not in self._topics:
                return False
            topic_id = self._topics.topic_uuid(tip.topic)
            config = self._topics.config_for(tip.topic)
        if topic_id is None or topic_id != uuid.UUID(bytes=tip.topic_id.to_bytes()):
            return False
        return not (self.remote_storage_system_enable and config.remote_storage_enable)

    def _topic_deleted(self, tip: TopicIdPartition) -> bool:
        """Whether ``tip``'s topic was deleted: neither the log dirs' record at open nor the registry now has a
        topic of its name with its id (a topic of its name with another id is a new one). False while a log dir
        is offline, or for a name whose id is unknown: its remote data is never deleted on a guess."""
        if self.offline_dirs:
            return False
        ids: list[uuid.UUID | None] = []
        if tip.topic in self._recorded_topic_ids:
            ids.append(self._recorded_topic_ids[tip.topic])
        if tip.topic in self._topics:
            ids.append(self._topics.topic_uuid(tip.topic))
        if None in ids:
            return False
        return uuid.UUID(bytes=tip.topic_id.to_bytes()) not in ids

    def _metadata_log(self, partition: int) -> Log:
        """A ``__remote_log_metadata`` partition's log, without the manager's lock: the metadata manager asks
        under its own lock, which a caller holding the manager's lock (creating a tiered topic) may wait for,
        so taking the manager's lock here would deadlock (a topic deleted on the remote deleter's thread while
        another is created). Its partitions are created at open and never deleted."""
        tp = TopicPartition(REMOTE_LOG_METADATA_TOPIC_NAME, partition)
        found = self._find(tp)
        if found is None:
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {tp}")
        d, log = found
        if not d.online:
            raise LogDirNotAvailableError(f"the log dir {d.path} of {tp} is offline")
        return log

    def _start_remote(self, log: Log) -> None:
        tier = self.remote_tier
        if tier is None:
            return
        try:
            tier.maybe_start(log)
        except (KafkaError, OSError) as exc:
            _log.warning(
                "Could not start the remote tier of %s (the copy task retries): %s", log.topic_partition, exc
            )

    def copy_remote_segments(self) -> int:
        """One pass of ``kafka-remote-log-copy`` over every online tiered log now; segments copied."""
        tier = self.remote_tier
        return 0 if tier is None else tier.copy_all(self._online_logs())

    def expire_remote_segments(self) -> int:
        """One pass of ``kafka-remote-log-expiration`` over every online tiered log now (total retention over
        both tiers; remote segments below the log start offset); segments deleted."""
        tier = self.remote_tier
        return 0 if tier is None else tier.expire_all(self._online_logs())

    def remote_log_metrics(self, topic: str | None = None, partition: int | None = None) -> dict[str, int]:
        """Kafka's remote storage metrics (``RemoteCopyBytesPerSec``, ``RemoteFetchBytesPerSec``, ... as counts
        since open), of one partition or summed over all; zeros without tiering."""
        from kafkalog.tiering import METRIC_NAMES

        tier = self.remote_tier
        if tier is None:
            return dict.fromkeys(METRIC_NAMES, 0)
        tp = None if topic is None or partition is None else TopicPartition(topic, partition)
        return tier.metrics(tp)

    def remote_tier_idle(self, timeout: float) -> bool:
        """Wait until the remote deletions of deleted topics and of tiering turned off are done."""
        return True if self.remote_tier is None else self.remote_tier.wait_idle(timeout)

    def _complete_pending_sink_commits(self) -> None:
        """Roll forward a Spark sink commit that a crash cut after its commit point, before anything else
        appends (:func:`kafkalog.manager.sink_journal.replay_pending`).

        A journal that can never complete is quarantined by the replay itself (``journal/failed/``, logged as
        an error). What the replay raises is a failure that may pass: an I/O error (the failing log dir is
        already offline, as Kafka's LogDirFailureChannel takes it, and the other dirs keep serving) or a
        journal this version cannot read (a newer version's, or damaged by hand). Either way the journal
        stays pending and nothing was appended past it, so readers keep bounding its partitions at its base
        offset (:func:`kafkalog.datadir.read_pending_sink_bounds`) and the next sink job or commit replays it
        again and raises the error to the job; the open goes on and the error is logged once, here. Anything
        else is a bug and fails the open (the manager releases its dirs)."""
        if not any(has_pending_journals(path) for path in self.log_dirs):
            return
        try:
            replay_pending(self)
        except (KafkaError, OSError) as exc:
            _log.error(
                "Could not complete a pending Spark sink commit in %s (%s: %s); its journal stays pending and "
                "the next sink commit retries it (docs/operations.md, Spark sink recovery)",
                self.log_dirs,
                type(exc).__name__,
                exc,
            )

    def _load_one(self, d: LogDirState, path: Path, tp: TopicPartition, offsets: DirOffsets) -> None:
        config = self._topics.config_for(tp.topic)
        # a -delete dir belongs to a deleted topic: a topic of the same name created since has another id
        deleted = path.name.endswith(DELETE_DIR_SUFFIX)
        topic_id = None if deleted else self._topics.topic_uuid(tp.topic)
        log = Log.open(
            path,
            config,
            log_start_offset=offsets.log_start_offsets.get(tp, 0),
            recovery_point=offsets.recovery_points.get(tp, 0),
            scheduler=self.scheduler,
            time=self.time,
            last_shutdown_clean=d.had_clean_shutdown,
            topic_id=topic_id,
            on_dir_failure=self._handle_dir_failure,
            load_progress=self._load_progress,
            remote_storage_system_enable=self.remote_storage_system_enable,
        )
        if deleted:
            with self._lock:
                self._retire(log)
            return
        if self.hw_follows_leo:
            log.hw_follows_leo = True
        elif tp in offsets.high_watermarks:
            log.update_high_watermark(offsets.high_watermarks[tp])
        with self._lock:
            if path.name.endswith(FUTURE_DIR_SUFFIX):
                self._future_logs[tp] = log
                return
            if tp in self.all_logs():
                log.close()
                raise KafkaError(f"duplicate log directories for {tp} ({path} and another log dir)")
            d.logs[tp] = log

    def _cleanable_logs(self) -> dict[TopicPartition, Log]:
        # no manager lock: the cleaner calls this while the manager may wait for it (each copy is atomic)
        return {tp: log for d in self._dirs if d.online for tp, log in list(d.logs.items())}

    def _cleaning_paused(self, tps: list[TopicPartition]) -> contextlib.AbstractContextManager[None]:
        return self.cleaner.paused(tps) if self.cleaner is not None else contextlib.nullcontext()

    def _start_background_tasks(self) -> None:
        if self.cleaner_config.enable_cleaner:
            dirs = [d.path for d in self._dirs]
            self.cleaner = LogCleaner(
                self.cleaner_config, dirs, self._cleanable_logs, self.time, self._handle_dir_failure
            )
            self.cleaner.startup()
        self._tasks.extend(schedule_background_tasks(self, self.scheduler, self.config))
        if self.remote_tier is not None:
            self.remote_tier.schedule(lambda: list(self._online_logs()), lambda: self._closed)

    # --- directory failure --------------------------------------------------------------------------------
    def _dir_of(self, log_dir: Path) -> LogDirState | None:
        for d in self._dirs:
            if d.path == log_dir or d.path.resolve() == Path(log_dir).resolve():
                return d
        return None

    def _handle_dir_failure(self, log_dir: Path, message: str, cause: BaseException) -> None:
        """Kafka's LogDirFailureChannel: take the whole log dir offline, once, with the cause logged. Running
        out of descriptors or memory (EMFILE, ENFILE, ENOMEM) is no disk fault: logged, the dir stays online
        (what failed, a checkpoint or the topics file, is written again later)."""
        if is_resource_exhaustion(cause):
            _log.warning("%s in %s: %s (retriable; the log dir stays online)", message, log_dir, cause)
            return
        d = self._dir_of(log_dir)
        if d is None:
            _log.error("%s: %s", message, cause)
            return
        with self._lock:
            first = d.online
            d.online = False
            logs = list(d.logs.values())
        if first and self.cleaner is not None:
            self.cleaner.handle_log_dir_failure(d.path)
        if first:
            _log.error(
                "Error while handling log dir %s: %s (%s); the directory is now offline and its %d partitions "
                "are unavailable",
                d.path,
                message,
                cause,
                len(logs),
            )
        for log in logs:
            log.local_log.offline = True
            with contextlib.suppress(Exception):
                log.local_log.close_handlers()

    @property
    def log_dirs(self) -> list[Path]:
        """Every configured log dir."""
        return [d.path for d in self._dirs]

    @property
    def offline_dirs(self) -> list[Path]:
        """Log dirs taken offline by an I/O error."""
        return [d.path for d in self._dirs if not d.online]

    # --- topics -------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError("the LogManager is closed")

    def topics(self) -> list[str]:
        """Every topic, sorted."""
        with self._lock:
            return self._topics.names()

    def num_partitions(self, topic: str) -> int:
        """The topic's partition count."""
        with self._lock:
            return self._topics.get(topic).partitions

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition numbers, sorted."""
        return list(range(self.num_partitions(topic)))

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's effective config (defaults plus its overrides)."""
        with self._lock:
            self._topics.get(topic)
            return self._topics.config_for(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The topic id written to each partition's ``partition.metadata``."""
        with self._lock:
            self._topics.get(topic)
            return self._topics.topic_uuid(topic)

    def create_topic(
        self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None
    ) -> list[Log]:
        """Create a topic with ``partitions`` partitions (``num.partitions`` by default) and config overrides,
        whole or not at all: nothing is written when the name, count or config is refused or the partition
        limits (:mod:`kafkalog.manager.limits`) forbid it, and a failure half way removes the partitions
        already made and leaves ``kafkalog-topics.json`` as it was."""
        self._check_open()
        count = self.config.num_partitions if partitions is None else partitions
        with self._lock:
            self._topics.check_new(name, count, config)
            self.check_new_partitions(count)
            self._topics.register(name, count, config)
            try:
                logs = self._create_logs(name, range(count))
            except BaseException:
                self._topics.remove(name)
                raise
            self._write_topics()
            return logs

    def add_partitions(self, topic: str, total: int) -> list[Log]:
        """Grow a topic to ``total`` partitions; returns the new partitions' logs. Whole or not at all, and
        within the partition limits, as :meth:`create_topic`."""
        self._check_open()
        with self._lock:
            old = self._topics.check_growth(topic, total)
            self.check_new_partitions(total - old)
            self._topics.grow(topic, total)
            try:
                logs = self._create_logs(topic, range(old, total))
            except BaseException:
                self._topics.set_partitions(topic, old)
                raise
            self._write_topics()
            self._null_key.pop(topic, None)
            return logs

    def check_new_partitions(self, count: int, request_total: int | None = None) -> None:
        """Refuse ``count`` new partitions past ``max.partitions.per.request`` (counting ``request_total``, the
        whole request's, when given), ``max.partitions`` or the free file descriptors with
        :class:`~kafkalog.errors.PolicyViolationError` (changes nothing)."""
        with self._lock:
            check_new_partitions(self.config, count, self._topics.total_partitions(), request_total)

    def _create_logs(self, topic: str, numbers: range) -> list[Log]:
        """Create the partitions ``numbers`` of ``topic``; on any failure the ones made are closed and their
        directories removed, then the error is raised (an ``OSError`` as :class:`KafkaStorageError`)."""
        made: list[tuple[LogDirState, TopicPartition, Path]] = []
        logs: list[Log] = []
        try:
            for p in numbers:
                tp = TopicPartition(topic, p)
                if self._find(tp) is not None or tp in self._failed:
                    logs.append(self._create_log(tp))
                    continue
                d = self._next_dir()
                path = d.path / log_dir_name(tp)
                if not path.exists():
                    made.append((d, tp, path))
                logs.append(self._open_new_log(d, tp))
        except BaseException as exc:
            for d, tp, path in reversed(made):
                log = d.logs.pop(tp, None)
                if log is not None:
                    with contextlib.suppress(Exception):
                        log.close()
                _remove_new_partition_dir(path)
            if isinstance(exc, OSError) and not isinstance(exc, KafkaError):
                raise KafkaStorageError(f"could not create partitions of {topic}: {exc}") from exc
            raise
        return logs

    def validate_topic_config_change(self, topic: str, changes: Mapping[str, Any]) -> LogConfig:
        """What :meth:`alter_topic_config` would check, without changing anything (IncrementalAlterConfigs'
        ``validate_only`` answers the refusal the change would get); returns the config it would give."""
        self._check_open()
        if topic == REMOTE_LOG_METADATA_TOPIC_NAME:
            _check_remote_log_metadata_change(changes)
        with self._lock:
            return self._topics.altered(topic, changes)[1]

    def alter_topic_config(self, topic: str, changes: Mapping[str, Any]) -> LogConfig:
        """Set (or with a None value remove) config overrides; live logs switch to the new config at once.

        ``__remote_log_metadata`` keeps :data:`REMOTE_LOG_METADATA_TOPIC_CONFIG`'s retention and cleanup policy
        (:class:`PolicyViolationError` otherwise): its records are the only record of the remote tier."""
        self._check_open()
        if topic == REMOTE_LOG_METADATA_TOPIC_NAME:
            _check_remote_log_metadata_change(changes)
        with self._lock:
            new_config = self._topics.alter(topic, changes)
            self._write_topics()
            for tp, log in self.all_logs().items():
                if tp.topic == topic:
                    log.update_config(new_config)
                    tier = self.remote_tier
                    if tier is None:
                        continue
                    if log.remote_log_enabled:
                        self._start_remote(log)
                    elif tier.is_started(tp):  # turned off: Kafka deletes the remote data with it
                        tier.stop(log, delete=new_config.remote_log_delete_on_disable)
            return new_config

    def delete_topic(self, topic: str) -> None:
        """Delete a topic: its partition dirs are renamed to ``<tp>.<uuid>-delete`` now and removed
        ``log.delete.delay.ms`` later by the ``kafka-delete-logs`` task (or on the next open). With a remote tier,
        ``__remote_log_metadata`` is not deleted (:class:`PolicyViolationError`)."""
        self._check_open()
        if topic == REMOTE_LOG_METADATA_TOPIC_NAME and self.remote_tier is not None:
            why = (
                "while remote.log.storage.system.enable=true"
                if self.remote_storage_system_enable
                else "while the remote tier is open to finish the deletions of remote data it records"
            )
            raise PolicyViolationError(
                f"Topic {topic} is the remote log manager's record of the remote tier and is not allowed to be "
                f"deleted {why}"
            )
        partitions = [tp for tp in self._cleanable_logs() if tp.topic == topic]
        with self._cleaning_paused(partitions), self._lock:
            self._topics.get(topic)
            for d in self._dirs:
                for tp in [tp for tp in d.logs if tp.topic == topic]:
                    log = d.logs.pop(tp)
                    if self.remote_tier is not None:  # its remote segments go with it (in the background)
                        self.remote_tier.stop(log, delete=True)
                    if d.online:
                        log.rename_dir(log_delete_dir_name(tp))
                        self._retire(log)
                        if self.cleaner is not None:
                            self.cleaner.update_checkpoints(d.path, remove=tp)
            for tp in [tp for tp in self._future_logs if tp.topic == topic]:
                log = self._future_logs.pop(tp)
                log.rename_dir(log_delete_dir_name(tp))
                self._retire(log)
            for tp in [tp for tp in self._failed if tp.topic == topic]:
                # a partition that failed to load: renamed now (its data is no longer the topic's), loaded
                # without recovery and deleted by the next open
                failed = self._failed.pop(tp)
                for d in self._dirs:
                    d.forget(tp)
                with contextlib.suppress(OSError):
                    failed.path.rename(failed.path.with_name(log_delete_dir_name(tp)))
            self._topics.remove(topic)
            self._null_key.pop(topic, None)
            self._write_topics()
            for d in self._dirs:
                if d.online:
                    self._write_dir_checkpoints(d)

    def _retire(self, log: Log) -> None:
        """A deleted topic's log, renamed ``-delete``: its handles close now and only its directory's path is
        kept for the delay, so its descriptors are not held that long (a client creating and deleting topics
        could otherwise run the process out of descriptors, and EMFILE takes a log dir offline). Caller holds
        the manager lock."""
        log.close_handlers()
        self._dirs_to_delete.append((log.dir, self.time.milliseconds()))

    def delete_logs(self) -> None:
        """Remove ``-delete`` directories whose delay has passed (the ``kafka-delete-logs`` task)."""
        now = self.time.milliseconds()
        with self._lock:
            delay = self.config.log_delete_delay_ms
            if delay is None:
                delay = self.default_config.file_delete_delay_ms
            due = [(log, t) for log, t in self._logs_to_delete if now - t >= delay]
            self._logs_to_delete = [e for e in self._logs_to_delete if e not in due]
            due_dirs = [path for path, t in self._dirs_to_delete if now - t >= delay]
            self._dirs_to_delete = [e for e in self._dirs_to_delete if now - e[1] < delay]
        for path in due_dirs:
            try:
                shutil.rmtree(path)
                _log.info("Deleted log %s", path)
            except OSError as exc:
                _log.error("Exception while deleting %s: %s", path, exc)
        for log, _ in due:
            try:
                log.delete()
                _log.info("Deleted log for partition %s in %s", log.topic_partition, log.dir)
            except (KafkaError, OSError) as exc:
                _log.error("Exception while deleting %s: %s", log.dir, exc)
                with contextlib.suppress(OSError):
                    shutil.rmtree(log.dir)

    # --- logs ---------------------------------------------------------------------------------------------
    def all_logs(self) -> dict[TopicPartition, Log]:
        """Every current (not future, not deleted) log, in online and offline dirs."""
        with self._lock:
            out: dict[TopicPartition, Log] = {}
            for d in self._dirs:
                out.update(d.logs)
            return out

    def _find(self, tp: TopicPartition) -> tuple[LogDirState, Log] | None:
        for d in self._dirs:
            log = d.logs.get(tp)
            if log is not None:
                return d, log
        return None

    def get_log(self, topic: str, partition: int) -> Log:
        """The log of a partition; ``UnknownTopicOrPartitionError`` if it does not exist,
        ``LogDirNotAvailableError`` if its log dir is offline."""
        self._check_open()
        with self._lock:
            found = self._find(TopicPartition(topic, partition))
            if found is None:
                meta = self._topics.document.topics.get(topic)
                if meta is not None and 0 <= partition < meta.partitions:
                    return self._create_log(TopicPartition(topic, partition))
                raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")
            d, log = found
            if not d.online:
                raise LogDirNotAvailableError(f"the log dir {d.path} of {topic}-{partition} is offline")
            return log

    def get_or_create_log(self, topic: str, partition: int, config: Mapping[str, Any] | None = None) -> Log:
        """The partition's log, creating the topic (with ``config`` as its overrides and ``partition + 1``
        partitions) or growing it to ``partition + 1`` partitions when needed: every partition up to
        ``partition`` is created, within the partition limits, as :meth:`create_topic` does."""
        self._check_open()
        validate_topic_name(topic)
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise InvalidPartitionsError(f"invalid partition {partition!r}")
        with self._lock:
            if topic not in self._topics:
                self.create_topic(topic, partition + 1, config)
            elif partition >= self._topics.get(topic).partitions:
                self.add_partitions(topic, partition + 1)
            return self.get_log(topic, partition)

    def _next_dir(self) -> LogDirState:
        online = [d for d in self._dirs if d.online]
        if not online:
            raise LogDirNotAvailableError("all log dirs are offline")
        return min(online, key=lambda d: len(d.logs))

    def _create_log(self, tp: TopicPartition) -> Log:
        found = self._find(tp)
        if found is not None:
            return found[1]
        failed = self._failed.get(tp)
        if failed is not None:  # never hide data that failed to load behind a new empty log
            raise KafkaStorageError(f"partition {tp} failed to load from {failed.path}: {failed.error}")
        return self._open_new_log(self._next_dir(), tp)

    def _open_new_log(self, d: LogDirState, tp: TopicPartition) -> Log:
        try:
            log = Log.open(
                d.path / log_dir_name(tp),
                self._topics.config_for(tp.topic),
                scheduler=self.scheduler,
                time=self.time,
                last_shutdown_clean=True,
                topic_id=self._topics.topic_uuid(tp.topic),
                on_dir_failure=self._handle_dir_failure,
                remote_storage_system_enable=self.remote_storage_system_enable,
            )
        except OSError as exc:
            if not is_resource_exhaustion(exc) or isinstance(exc, KafkaStorageError):
                raise
            # retriable: the next get_log opens what was created (an empty partition directory loads as such)
            raise ResourceExhaustedError(
                f"error while creating the log of {tp} in {d.path}: {exc}", exc.errno
            ) from exc
        log.hw_follows_leo = self.hw_follows_leo
        d.logs[tp] = log
        self._start_remote(log)
        return log

    # --- producing ----------------------------------------------------------------------------------------
    def partition_for_key(self, topic: str, key: bytes | None) -> int:
        """Kafka's default partitioner: murmur2 of the key; null keys sticky round robin."""
        n = self.num_partitions(topic)
        if key is not None:
            return partition_for_key(key, n)
        with self._lock:
            spreader = self._null_key.get(topic)
            if spreader is None:
                spreader = self._null_key[topic] = NullKeyPartitioner(n)
            return spreader.next_partition()

    def append(
        self,
        topic: str,
        partition: int,
        records: MemoryRecords,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        leader_epoch: int = 0,
    ) -> LogAppendInfo:
        """Append pre-built batches to a partition as its leader."""
        return self.get_log(topic, partition).append_as_leader(records, leader_epoch, origin)

    def produce(
        self,
        topic: str,
        records: Iterable[SimpleRecord | tuple[bytes | None, bytes | None]],
        *,
        partition: int | None = None,
        compression: Compression | str | None = None,
    ) -> dict[int, LogAppendInfo]:
        """Append records the way a Kafka producer would place them: one batch per partition (keys hashed with
        murmur2 unless ``partition`` is given), compressed with ``compression`` or the topic's codec."""
        groups: dict[int, list[SimpleRecord]] = {}
        for rec in records:
            r = rec if isinstance(rec, SimpleRecord) else SimpleRecord(key=rec[0], value=rec[1])
            p = self.partition_for_key(topic, r.key) if partition is None else partition
            groups.setdefault(p, []).append(r)
        out: dict[int, LogAppendInfo] = {}
        for p in sorted(groups):
            out[p] = self.get_log(topic, p).append(groups[p], compression=compression)
        return out

    # --- reading ------------------------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        max_length: int = 1 << 20,
        isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
    ) -> MemoryRecords:
        """Whole batches from the one holding ``start_offset``, up to the isolation level's bound."""
        info = self.get_log(topic, partition).read(start_offset, max_length, isolation)
        return _as_memory(info.records)

    # --- moving a partition between log dirs (future logs) ------------------------------------------------
    def move_partition(self, topic: str, partition: int, log_dir: Path | str) -> Log:
        """Move a partition to another log dir, as Kafka's alter-log-dirs does: copy into a ``-future`` log
        (resumed if one exists), catch up under the log's lock, then swap: the old dir becomes ``-delete``."""
        self._check_open()
        tp = TopicPartition(topic, partition)
        dest = self._dir_of(Path(log_dir))
        if dest is None or not dest.online:
            raise LogDirNotAvailableError(f"{log_dir} is not an online log dir of this manager")
        with self._lock:
            found = self._find(tp)
            if found is None:
                raise UnknownTopicOrPartitionError(f"unknown topic or partition {tp}")
            src_dir, current = found
            if src_dir is dest:
                return current
            future = self._future_logs.get(tp)
            if future is None or future.dir.parent != dest.path:
                future = open_future_log(
                    current, tp, dest.path, self.scheduler, self.time, self._handle_dir_failure
                )
                self._future_logs[tp] = future
        copy_into(current, future)  # most of the data without blocking appends
        with self._cleaning_paused([tp]), current.lock, self._lock:
            copy_into(current, future)
            future.flush(include_offset=True)
            del src_dir.logs[tp]
            current.rename_dir(log_delete_dir_name(tp))
            self._logs_to_delete.append((current, self.time.milliseconds()))
            future.rename_dir(log_dir_name(tp))
            future.hw_follows_leo = self.hw_follows_leo
            if not self.hw_follows_leo:
                future.update_high_watermark(current.high_watermark)
            del self._future_logs[tp]
            dest.logs[tp] = future
            if self.remote_tier is not None:  # the remote tier follows the partition to its new Log
                self.remote_tier.replace(current, future)
            if self.cleaner is not None:
                self.cleaner.alter_checkpoint_dir(tp, src_dir.path, dest.path)
            for d in (src_dir, dest):
                self._write_dir_checkpoints(d)
            return future

    # --- maintenance --------------------------------------------------------------------------------------
    def _online_logs(self) -> Iterator[Log]:
        for d in self._dirs:
            if d.online:
                yield from list(d.logs.values())

    def delete_old_segments(self) -> int:
        """Apply retention to every online log now (the ``kafka-log-retention`` task); with a cleaner
        running, compacted logs are its job (the others are paused for it meanwhile)."""
        if self.cleaner is not None:
            return self.cleaner.delete_old_segments_of_non_compacted_logs()
        total = 0
        for log in self._online_logs():
            with contextlib.suppress(KafkaStorageError):
                if log.config.delete:
                    total += log.delete_old_segments()
        return total

    def flush_dirty_logs(self) -> None:
        """Flush logs whose last flush is older than their ``flush.ms`` (the ``kafka-log-flusher`` task)."""
        now = self.time.milliseconds()
        for log in self._online_logs():
            with contextlib.suppress(KafkaStorageError):
                if now - log.last_flush_time >= log.config.flush_ms:
                    log.flush()

    def flush(self) -> None:
        """Flush every online log to its log end offset."""
        for log in self._online_logs():
            log.flush(include_offset=True)

    def _write_dir_checkpoints(self, d: LogDirState) -> None:
        d.write_checkpoints(self._handle_dir_failure)

    def checkpoint_recovery_points(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in every online dir (and the topics file, if its last
        write ran out of descriptors)."""
        if self._topics_unwritten:
            with self._lock:
                if self._topics_unwritten:
                    self._write_topics()
        for d in self._dirs:
            d.write_checkpoint(RECOVERY_POINT_CHECKPOINT, self._handle_dir_failure)

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` (logs whose start is past their first segment, as Kafka)."""
        for d in self._dirs:
            d.write_checkpoint(LOG_START_OFFSET_CHECKPOINT, self._handle_dir_failure)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (high watermarks) in every online dir."""
        for d in self._dirs:
            d.write_checkpoint(REPLICATION_OFFSET_CHECKPOINT, self._handle_dir_failure)

    def checkpoint(self) -> None:
        """Write every checkpoint file now."""
        with self._lock:
            for d in self._dirs:
                self._write_dir_checkpoints(d)

    def _write_topics(self) -> None:
        document = self._topics.next_generation(self.hw_follows_leo)
        self._topics_unwritten = False
        for d in self._dirs:
            if not d.online:
                continue
            try:
                write_topics(d.path, document)
            except OSError as exc:
                if is_resource_exhaustion(exc):  # written again by the next checkpoint task
                    self._topics_unwritten = True
                self._handle_dir_failure(d.path, "error while writing topic metadata", exc)

    # --- lifecycle ----------------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and close every log, write the checkpoints and (for dirs that loaded fully) the
        clean-shutdown marker, stop the background tasks and release the locks."""
        if self._closed:
            return
        for task in self._tasks:
            task.cancel()
        if self.remote_tier is not None:
            self.remote_tier.close()  # a pass under way finishes first: before the logs close
        if self.cleaner is not None:
            self.cleaner.shutdown()  # joins its threads: no swap while the logs close
        with self._lock:
            self._closed = True
            self._unclean_dirs = [d.path for d in self._dirs if not d.online]
            for d in self._dirs:
                if not d.online:
                    continue
                clean = d.loaded_fully
                for log in list(d.logs.values()):
                    try:
                        log.close()
                    except (KafkaError, OSError) as exc:
                        clean = False
                        _log.error("Error while closing %s: %s", log.topic_partition, exc)
                self._write_dir_checkpoints(d)
                if not (clean and d.online and d.write_clean_shutdown()):
                    self._unclean_dirs.append(d.path)
            for log in self._future_logs.values():
                with contextlib.suppress(KafkaError, OSError):
                    log.close()
            for log, _ in self._logs_to_delete:
                with contextlib.suppress(KafkaError, OSError):
                    log.close()
        self._release(close_logs=False)

    def _release(self, close_logs: bool) -> None:
        if self.remote_tier is not None:
            self.remote_tier.close()
        if self.cleaner is not None:
            self.cleaner.shutdown()
        if close_logs:
            self._closed = True
            for d in self._dirs:
                for log in d.logs.values():
                    with contextlib.suppress(Exception):
                        log.close_handlers()
        if self._owns_scheduler and isinstance(self.scheduler, KafkaScheduler):
            self.scheduler.shutdown()
        for d in self._dirs:
            d.lock.release()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def unclean_dirs(self) -> list[Path]:
        """After :meth:`close`: the log dirs it could not mark clean (offline, a log that failed to close or
        load, the marker not written); the next open recovers them. Empty before ``close``."""
        return list(self._unclean_dirs)

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogManager(log_dirs={[str(d.path) for d in self._dirs]}, topics={len(self._topics)})"


def _as_memory(records: MemoryRecords | FileRecords) -> MemoryRecords:
    return records if isinstance(records, MemoryRecords) else records.to_memory_records()


def _remove_new_partition_dir(path: Path) -> None:
    """Remove the directory of a partition whose creation failed. ``shutil.rmtree`` walks with descriptors,
    which are what a creation that failed with EMFILE/ENFILE lacks: then the files a new log creates are
    unlinked by name (no descriptor needed) and the directory removed, so a failed creation leaves nothing."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for name in (log_file, offset_index_file, time_index_file, transaction_index_file):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(name(path, 0))
    for extra in ("partition.metadata", "leader-epoch-checkpoint"):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(path / extra)
    try:
        os.rmdir(path)
    except OSError as exc:
        _log.warning("could not remove the partially created partition directory %s: %s", path, exc)


def _check_remote_log_metadata_change(changes: Mapping[str, Any]) -> None:
    """Refuse a change of ``__remote_log_metadata``'s retention or cleanup policy: retention deleting its records
    (or compaction, its keys being null) makes a restart forget remote segments (their records lost, their
    objects orphaned); Kafka sets these from ``remote.log.metadata.topic.retention.ms``, not per topic."""
    for key in ("retention.ms", "retention.bytes", "cleanup.policy"):
        if key not in changes:
            continue
        value, fixed = changes[key], REMOTE_LOG_METADATA_TOPIC_CONFIG[key]
        given = value if isinstance(value, str) or value is None else str(value)
        if given is None or given.replace(" ", "") != str(fixed):
            raise PolicyViolationError(
                f"{key} of {REMOTE_LOG_METADATA_TOPIC_NAME} is fixed at {fixed}: its records are the only record "
                "of what the remote tier holds"
            )
