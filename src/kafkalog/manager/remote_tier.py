"""The remote tier of a :class:`~kafkalog.manager.LogManager` (KIP-405): the tiering objects it opens and closes,
the logs it attaches them to, and the two background tasks that move data between the tiers.

Invariants owned here:

* **One set of tiering objects per manager**, made only with ``remote.log.storage.system.enable=true``: the
  store of ``rsm.config.storage.url`` (with the ``rsm.config.storage.*`` options), an
  :class:`~kafkalog.tiering.AivenRemoteStorageManager`, a
  :class:`~kafkalog.tiering.TopicBasedRemoteLogMetadataManager` over ``__remote_log_metadata`` and a
  :class:`~kafkalog.tiering.RemoteLogManager`. They are closed with the manager, after the tasks stop.
* **The metadata topic is an ordinary topic of the data dir**: ``__remote_log_metadata`` with
  ``remote.log.metadata.topic.num.partitions`` partitions, ``cleanup.policy=delete`` (never compacted) and
  ``retention.ms`` = Kafka's ``remote.log.metadata.topic.retention.ms`` default, -1 (kept forever, as is
  ``retention.bytes``), created at open when missing. Its partitions are never tiered (an internal ``__``
  topic).
* **Every log with** ``remote.storage.enable=true`` **is started** (its metadata replayed, its highest remote
  offset restored, and a COPY/DELETE_SEGMENT_STARTED left by a crash cleaned up: ``cleanup_incomplete``) and
  gets the remote reader its reads fall through to: at open, when it is created, and when a config change
  turns tiering on. Turning it off (``remote.log.delete.on.disable=true``) or deleting the topic stops the
  partition and deletes its remote data in the background, marked first (DELETE_PARTITION_MARKED, durable
  before the call returns, Kafka's ``stopPartitions``): a deletion a crash or a storage failure cut short is
  retried by every expiration pass and finished by the next open (:meth:`RemoteTier.resume_partition_deletions`)
  for a topic the log dirs no longer record or whose tiering is off (also with the broker gate
  ``remote.log.storage.system.enable`` turned off, as long as the storage is configured), never while a log
  dir is offline; a partition that tiers again finishes it when it starts.
* **Kafka's tasks** ``kafka-remote-log-copy`` (``RLMCopyTask``) and ``kafka-remote-log-expiration``
  (``RLMExpirationTask``) run every ``remote.log.manager.task.interval.ms`` on a scheduler of their own (an
  upload never delays the log's own retention, flush and checkpoint tasks); a pass runs its partitions on
  Kafka's copier (expiration) thread pool, ``remote.log.manager.copier.thread.pool.size``
  (``remote.log.manager.expiration.thread.pool.size``), 10 threads each by default. A partition's copy,
  expiration and stop never run at once (one lock per partition). A pass never raises and never takes
  a log dir offline: a storage outage is a log line and the ``Failed*`` metrics, and the next pass retries
  (the log keeps appending locally meanwhile).
* The data dir records where its archive is (``kafkalog-tiered-storage.json``,
  :func:`kafkalog.datadir.write_archive_location`: URL, layout, key prefix; never a storage option), so the
  read-only side reads one history.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from kafkalog.datadir import ArchiveLocation, write_archive_location
from kafkalog.errors import InvalidConfigurationError, KafkaError, KafkaStorageError
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.log.scheduler import KafkaScheduler, ScheduledTask, Scheduler
from kafkalog.objstore import open_store
from kafkalog.objstore.options import public_url
from kafkalog.remote import RemoteLogSegmentState, TopicIdPartition
from kafkalog.tiered.aiven import aiven_segment_key
from kafkalog.tiering import (
    AivenRemoteStorageManager,
    RemoteLogManager,
    RemoteLogManagerConfig,
    TopicBasedRemoteLogMetadataManager,
    topic_id_partition,
)
from kafkalog.time import Time

__all__ = [
    "CLOSE_WAIT_S",
    "COPY_TASK",
    "DEFAULT_COPIER_THREADS",
    "DEFAULT_EXPIRATION_THREADS",
    "EXPIRATION_TASK",
    "REMOTE_LOG_METADATA_TOPIC_CONFIG",
    "RemoteTier",
    "split_remote_props",
    "thread_pool_sizes",
]

_log = logging.getLogger("kafkalog.manager")

#: How long closing the manager waits for remote tier passes and deletions under way.
CLOSE_WAIT_S: Final = 30.0
COPY_TASK: Final = "kafka-remote-log-copy"
#: Kafka's ``remote.log.manager.copier.thread.pool.size`` / ``remote.log.manager.expiration.thread.pool.size``
#: defaults: partitions copied (expired) at once by one pass.
DEFAULT_COPIER_THREADS: Final = 10
DEFAULT_EXPIRATION_THREADS: Final = 10
EXPIRATION_TASK: Final = "kafka-remote-log-expiration"
#: The config of ``__remote_log_metadata`` (Kafka's ``TopicBasedRemoteLogMetadataManagerConfig``: delete
#: policy, ``remote.log.metadata.topic.retention.ms`` default -1).
REMOTE_LOG_METADATA_TOPIC_CONFIG: Final[Mapping[str, Any]] = {
    "cleanup.policy": "delete",
    "retention.ms": -1,
    "retention.bytes": -1,
    "remote.storage.enable": False,
}
#: Broker keys that are the remote tier's (besides everything under the RSM prefix).
_REMOTE_KEYS: Final = (
    "remote.log.storage.system.enable",
    "remote.log.manager.task.interval.ms",
    "remote.log.metadata.topic.num.partitions",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.storage.manager.impl.prefix",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.copy.quota.window.num",
    "remote.log.manager.copy.quota.window.size.seconds",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.fetch.quota.window.num",
    "remote.log.manager.fetch.quota.window.size.seconds",
    "remote.log.reader.threads",
    "remote.log.reader.max.pending.tasks",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
)


def split_remote_props(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``props`` (a broker's, Kafka's names) as ``(the remote tier's, the rest)``: the ``remote.log.*`` keys
    and everything under ``remote.log.storage.manager.impl.prefix`` (``rsm.config.`` by default)."""
    prefix = str(props.get("remote.log.storage.manager.impl.prefix", "rsm.config."))
    remote: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in props.items():
        if key in _REMOTE_KEYS or key.startswith(prefix):
            remote[key] = value
        else:
            rest[key] = value
    return remote, rest


def thread_pool_sizes(props: Mapping[str, Any]) -> tuple[int, int]:
    """Kafka's ``remote.log.manager.copier.thread.pool.size`` and ``...expiration.thread.pool.size`` from
    ``props`` (each an int >= 1; else :class:`~kafkalog.errors.InvalidConfigurationError` naming the key)."""
    out = []
    for key, default in (
        ("remote.log.manager.copier.thread.pool.size", DEFAULT_COPIER_THREADS),
        ("remote.log.manager.expiration.thread.pool.size", DEFAULT_EXPIRATION_THREADS),
    ):
        value = props.get(key, default)
        try:
            number = int(str(value).strip()) if not isinstance(value, bool) else -1
        except ValueError:
            number = -1
        if not 1 <= number <= 1024:
            raise InvalidConfigurationError(
                f"Invalid value {value!r} for configuration {key}: must be in [1, 1024]"
            )
        out.append(number)
    return out[0], out[1]


class RemoteTier:
    """The remote tier of one manager (see the module doc). Made by :meth:`open`; thread-safe."""

    def __init__(
        self,
        config: RemoteLogManagerConfig,
        rlm: RemoteLogManager,
        scheduler: Scheduler,
        owns_scheduler: bool,
        copier_threads: int = DEFAULT_COPIER_THREADS,
        expiration_threads: int = DEFAULT_EXPIRATION_THREADS,
    ) -> None:
        self.config = config
        self.rlm = rlm
        self._scheduler = scheduler
        self._owns_scheduler = owns_scheduler
        self._tasks: list[ScheduledTask] = []
        self._locks: dict[TopicPartition, threading.Lock] = {}
        self._started: set[TopicPartition] = set()
        #: partitions whose remote data a background deletion has yet to delete: not started again until it ran
        #: (a start before it would be undone by it, and the segments it deletes counted as copied)
        self._deleting: set[TopicPartition] = set()
        #: the deletions queued or running on the deleter (one per partition of a topic id at a time)
        self._queued: set[TopicIdPartition] = set()
        #: which marked deletions are due (the manager's: the topic deleted, or its tiering off); set by
        #: :meth:`resume_partition_deletions`, used again by the retry of every expiration pass
        self._deletion_due: Callable[[TopicIdPartition], bool] | None = None
        #: a deletion failed since the last retry (storage down): the next expiration pass looks again
        self._retry_deletions = False
        self._lock = threading.Lock()
        self._closed = False
        #: Remote deletions of stopped partitions (topic deleted, tiering turned off) run here, not under the
        #: manager's lock: one at a time.
        self._deleter = ThreadPoolExecutor(1, thread_name_prefix="kafka-remote-log-delete-")
        #: Kafka's copier and expiration thread pools: one pass runs its partitions on these, many at once.
        self._copiers = ThreadPoolExecutor(copier_threads, thread_name_prefix="kafka-rlm-copier-")
        self._expirers = ThreadPoolExecutor(expiration_threads, thread_name_prefix="kafka-rlm-expiration-")

    def __repr__(self) -> str:
        return f"RemoteTier({public_url(self.config.rsm.storage_url)!r}, {len(self._started)} partitions)"

    @classmethod
    def open(
        cls,
        config: RemoteLogManagerConfig,
        log_for_partition: Callable[[int], Log],
        time: Time,
        scheduler: Scheduler | None,
        copier_threads: int = DEFAULT_COPIER_THREADS,
        expiration_threads: int = DEFAULT_EXPIRATION_THREADS,
    ) -> RemoteTier:
        """The tiering objects for ``config`` (no I/O on the store yet). ``log_for_partition`` gives the
        ``__remote_log_metadata`` partitions' logs; ``scheduler`` None: a scheduler of the tier's own;
        ``copier_threads`` / ``expiration_threads``: Kafka's ``remote.log.manager.copier.thread.pool.size`` /
        ``remote.log.manager.expiration.thread.pool.size``."""
        if not config.rsm.storage_url:
            raise InvalidConfigurationError(
                f"remote.log.storage.system.enable=true needs "
                f"{config.remote_log_storage_manager_impl_prefix}storage.url (the archive's URL)"
            )
        store = open_store(config.rsm.storage_url, config.rsm.storage_options)
        rsm = AivenRemoteStorageManager(store, config.rsm)
        rlmm = TopicBasedRemoteLogMetadataManager(
            log_for_partition, config.remote_log_metadata_topic_num_partitions
        )
        rlm = RemoteLogManager(rsm, rlmm, config, time)
        owns = scheduler is None
        sched: Scheduler = scheduler if scheduler is not None else KafkaScheduler(2, "kafka-rlm-", time)
        if owns and isinstance(sched, KafkaScheduler):
            sched.startup()
        return cls(config, rlm, sched, owns, copier_threads, expiration_threads)

    @property
    def location(self) -> ArchiveLocation:
        """Where the archive is, as the data dir records it."""
        return ArchiveLocation(self.config.rsm.storage_url, "aiven", self.config.rsm.key_prefix)

    def record_location(self, log_dirs: Iterable[Path]) -> None:
        """Write ``kafkalog-tiered-storage.json`` in every log dir (only where it changed)."""
        for d in log_dirs:
            write_archive_location(d, self.location)

    # --- partitions -----------------------------------------------------------------------------------------
    def _partition_lock(self, tp: TopicPartition) -> threading.Lock:
        with self._lock:
            lock = self._locks.get(tp)
            if lock is None:
                lock = self._locks[tp] = threading.Lock()
            return lock

    def maybe_start(self, log: Log) -> bool:
        """Start ``log``'s remote tier if it has tiering on and is not started (True if it was started now)."""
        tp = log.topic_partition
        if not log.remote_log_enabled or log.topic_id is None:
            return False
        with self._partition_lock(tp):
            with self._lock:
                if tp in self._started or tp in self._deleting:
                    return False
            tip = self.rlm.start_partition(log, log.topic_id)
            self._restart_above_remote(log, tip)
            log.set_remote_log_reader(self.rlm.reader_for(log))
            self._restore_log_start(log, tip)
            self._sweep_orphans(tip)
            with self._lock:
                self._started.add(tp)
        return True

    def _sweep_orphans(self, tip: TopicIdPartition) -> None:
        """Delete the partition's objects whose segment the metadata does not know (after the start's cleanup,
        only COPY_SEGMENT_FINISHED segments are known). Such an object is an upload whose request the server
        completed after its client died (a kill mid-PUT) and after the cleanup of its COPY_SEGMENT_STARTED
        had already deleted the segment's objects: nothing else writes this partition's keys. One LIST per
        started partition; a failure is logged and the next start sweeps again."""
        rsm = self.rlm.rsm
        store = getattr(rsm, "store", None)
        config = getattr(rsm, "config", None)
        if store is None or config is None:
            return
        directory = aiven_segment_key(config.key_prefix, tip.topic, str(tip.topic_id), tip.partition, 0, "")
        directory = directory.rsplit("/", 1)[0] + "/"
        try:
            known = {str(md.remote_log_segment_id.id) for md in self.rlm.rlmm.list_remote_log_segments(tip)}
            for obj in store.list(directory, delimiter=False).objects:
                name = obj.key[len(directory) :].split(".", 1)[0]
                segment_id = name.split("-", 1)[1] if "-" in name else ""
                if segment_id and segment_id not in known:
                    _log.info(
                        "Deleting orphan remote object %s (its segment is not in the metadata)", obj.key
                    )
                    store.delete(obj.key)
        except (KafkaError, OSError) as exc:
            _log.warning("Could not sweep the orphan remote objects of %s: %s", tip, exc)

    def _restart_above_remote(self, log: Log, tip: TopicIdPartition) -> None:
        """A log whose end is at or below its highest offset in remote storage (recovery truncated a tail the
        remote tier already holds: a power loss before the copied segment was flushed, ``recover
        --truncate-after-damage``) starts its local log again just above that offset, the remote tier serving
        the range below: appending there would reuse copied offsets, which the remote tier then holds twice
        in one leader epoch (Kafka's ``findHighestRemoteOffset`` caps the restored offset at the log end,
        relying on a new epoch to tell the lineages apart; kafkalog has none: the truncation rule of
        :meth:`Log.truncate_to`)."""
        highest = max(
            (
                md.end_offset
                for md in self.rlm.rlmm.list_remote_log_segments(tip)
                if md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ),
            default=-1,
        )
        if highest < log.log_end_offset:
            return
        _log.warning(
            "Log end offset %d of %s is at or below its highest offset in remote storage %d (a tail lost "
            "locally); the local log starts again at %d, the remote tier serves the offsets below",
            log.log_end_offset,
            log.topic_partition,
            highest,
            highest + 1,
        )
        epochs = [e for e in log.leader_epoch_cache.epoch_entries if e.start_offset <= highest]
        log.truncate_fully_and_start_at(highest + 1, min(log.log_start_offset, highest + 1))
        log.leader_epoch_cache.assign_entries(epochs)
        log.update_highest_offset_in_remote_storage(highest)

    def _restore_log_start(self, log: Log, tip: TopicIdPartition) -> None:
        """The log start offset over both tiers after a restart: the log-start-offset checkpoint is written
        periodically, so a crash after an expiration or DeleteRecords pass may load an older, lower one, below
        which neither tier holds data any more (remote segments deleted, local ones deleted after their copy).
        It becomes the first offset either tier holds (Kafka's ``updateLogStartOffsetFromRemoteTier``), and not below
        the leader-epoch cache's first entry (truncated from the start whenever the log start moved, so it
        remembers a DeleteRecords the checkpoint lost; the remote reader finds segments by those epochs)."""
        finished = [
            md.start_offset
            for md in self.rlm.rlmm.list_remote_log_segments(tip)
            if md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]
        first = min([*finished, log.local_log_start_offset])
        entries = log.leader_epoch_cache.epoch_entries
        if entries:  # truncated from the start when the log start moved: a witness that outlives the crash
            first = max(first, min(entries[0].start_offset, log.local_log_start_offset))
        if first > log.log_start_offset:
            _log.info(
                "Log start offset of %s moves from %d to %d, the first offset held by either tier",
                log.topic_partition,
                log.log_start_offset,
                first,
            )
            log.maybe_increment_log_start_offset(first, "segment deletion")

    def replace(self, old: Log, new: Log) -> None:
        """``new`` took ``old``'s place (a partition moved to another log dir): the partition's remote tier is
        started again on the new Log (its reader attached to it), nothing remote is deleted."""
        tp = old.topic_partition
        with self._partition_lock(tp):
            with self._lock:
                was = tp in self._started
                self._started.discard(tp)
            if was:
                with contextlib.suppress(KafkaError, OSError):
                    old.set_remote_log_reader(None)
                self.rlm.stop_partition(tp, False)
        self.maybe_start(new)

    def is_started(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is managed by the remote tier."""
        with self._lock:
            return tp in self._started

    def stop(self, log: Log, delete: bool) -> None:
        """Stop managing ``log`` (its reader detached); with ``delete`` its remote segments and metadata are
        deleted in the background. The deletion is marked first (DELETE_PARTITION_MARKED, durable before this
        returns), so one that a failure or a crash cuts short is finished by the next open
        (:meth:`resume_partition_deletions`). A deleted log whose tiering never started here (its start
        failed, storage down) is marked and deleted too."""
        tp = log.topic_partition
        with self._lock:
            was = tp in self._started
            self._started.discard(tp)
        if not was and not (delete and log.remote_log_enabled and log.topic_id is not None):
            return
        with contextlib.suppress(KafkaError, OSError):
            log.set_remote_log_reader(None)
        if not delete:
            with self._partition_lock(tp):
                try:
                    self.rlm.stop_partition(tp, False)
                except Exception:
                    _log.exception("Could not stop the remote tier of %s", tp)
            return
        tip = topic_id_partition(log)
        try:
            self.rlm.mark_partition_deleted(tip)
        except (KafkaError, OSError) as exc:
            _log.warning("Could not mark the remote data of %s for deletion: %s", tp, exc)
        self._submit_deletion(tp, tip)

    def _submit_deletion(self, tp: TopicPartition, tip: TopicIdPartition) -> None:
        """Delete ``tip``'s remote data on the deleter thread (the RLM stops it first if it manages it)."""

        def run() -> None:
            with self._partition_lock(tp):
                try:
                    self.rlm.delete_partition(tip)
                except Exception as exc:
                    self._retry_deletions = True
                    _log.warning(
                        "Could not delete the remote data of %s (it stays marked; retried by the next "
                        "expiration pass and at the next open): %s",
                        tip,
                        exc,
                        exc_info=not isinstance(exc, (KafkaError, OSError)),
                    )
                finally:
                    with self._lock:
                        self._queued.discard(tip)
                        self._deleting.discard(tp)

        with self._lock:
            if tip in self._queued:
                return  # one already queued or running finishes it
            self._queued.add(tip)
            self._deleting.add(tp)
        try:
            self._deleter.submit(run)
        except RuntimeError:  # closing: the next open finishes it (it is marked)
            with self._lock:
                self._queued.discard(tip)
                self._deleting.discard(tp)

    def resume_partition_deletions(self, due: Callable[[TopicIdPartition], bool]) -> int:
        """Finish in the background every deletion of a partition's remote data that a crash or a storage
        failure cut short (DELETE_PARTITION_MARKED / STARTED without FINISHED in ``__remote_log_metadata``,
        every metadata partition replayed), for the partitions ``due`` says no longer tier (their topic
        deleted, or its tiering turned off: Kafka's ``deleteRemoteLogPartition``). A partition that tiers
        again is not due: its start finishes the deletion first (:meth:`RemoteLogManager.start_partition`).
        ``due`` is kept for the retry of every expiration pass (:meth:`retry_partition_deletions`). Returns
        how many were submitted."""
        self._deletion_due = due
        self._retry_deletions = True  # kept if the look below fails: the next expiration pass looks again
        pending = [tip for tip in self.rlm.rlmm.partitions_pending_deletion() if due(tip)]
        self._retry_deletions = False
        for tip in pending:
            _log.info("Resuming the deletion of the remote data of %s", tip)
            self._submit_deletion(TopicPartition(tip.topic, tip.partition), tip)
        return len(pending)

    def retry_partition_deletions(self) -> int:
        """The in-process retry (run by every expiration pass): when a deletion failed since the last look,
        submit again every marked deletion that is due (never raises); returns how many were submitted."""
        due = self._deletion_due
        if due is None or not self._retry_deletions or self._closed:
            return 0
        try:
            return self.resume_partition_deletions(due)
        except (KafkaError, OSError) as exc:
            _log.warning("Could not look for remote deletions to retry (the next pass retries): %s", exc)
            return 0

    # --- tasks ----------------------------------------------------------------------------------------------
    def schedule(self, logs: Callable[[], list[Log]], closed: Callable[[], bool]) -> None:
        """Schedule Kafka's copy and expiration tasks every ``remote.log.manager.task.interval.ms``."""
        period = self.config.remote_log_manager_task_interval_ms

        def each(step: Callable[[list[Log]], int]) -> Callable[[], None]:
            def run() -> None:
                if not (closed() or self._closed):
                    step(logs())

            return run

        self._tasks.append(self._scheduler.schedule(COPY_TASK, each(self.copy_all), period, period))
        self._tasks.append(self._scheduler.schedule(EXPIRATION_TASK, each(self.expire_all), period, period))

    def run_once(self, log: Log, step: Callable[[Log], int], name: str = "remote tier task") -> int:
        """One pass of ``step`` (``copy_once`` / ``expire_once``) over ``log``, under its partition lock."""
        tp = log.topic_partition
        try:
            self.maybe_start(log)
        except (KafkaError, OSError) as exc:
            _log.warning("Could not start the remote tier of %s (retrying in the next pass): %s", tp, exc)
            return 0
        if not self.is_started(tp):
            return 0
        with self._partition_lock(tp):
            if not self.is_started(tp) or log.closed:
                return 0
            try:
                return step(log)
            except KafkaStorageError:
                return 0  # its log dir went offline: the manager has logged it
            except Exception:  # a pass never raises to the scheduler
                _log.exception("Error in %s for %s", name, tp)
                return 0

    def _pass(
        self, pool: ThreadPoolExecutor, logs: Iterable[Log], step: Callable[[Log], int], name: str
    ) -> int:
        tiered = [log for log in logs if log.remote_log_enabled]
        if self._closed or not tiered:
            return 0
        if len(tiered) == 1:
            return self.run_once(tiered[0], step, name)
        try:
            futures = [pool.submit(self.run_once, log, step, name) for log in tiered]
        except RuntimeError:  # the pool shut down: the manager is closing
            return 0
        return sum(f.result() for f in futures)

    def copy_all(self, logs: Iterable[Log]) -> int:
        """One copy pass over ``logs`` now (what ``kafka-remote-log-copy`` runs), its partitions on the copier
        threads; returns the segments copied."""
        return self._pass(self._copiers, logs, self.rlm.copy_once, COPY_TASK)

    def expire_all(self, logs: Iterable[Log]) -> int:
        """One expiration pass over ``logs`` now (what ``kafka-remote-log-expiration`` runs), its partitions on
        the expiration threads; returns the remote segments deleted. A deletion of a partition's remote data
        that failed is submitted again first (:meth:`retry_partition_deletions`)."""
        self.retry_partition_deletions()
        return self._pass(self._expirers, logs, self.rlm.expire_once, EXPIRATION_TASK)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the remote deletions submitted so far are done (True) or ``timeout`` seconds passed."""
        done = self._deleter.submit(lambda: None)
        try:
            done.result(timeout)
        except TimeoutError:
            return False
        return True

    def metrics(self, tp: TopicPartition | None = None) -> dict[str, int]:
        """Kafka's remote metrics (of one partition, or summed)."""
        return self.rlm.metrics(tp)

    def close(self) -> None:
        """Stop the tasks, cancel an upload under way (its multipart upload aborted:
        :meth:`RemoteLogManager.cancel_copies`), wait (at most :data:`CLOSE_WAIT_S` in all) for a pass or
        deletion under way, and close the tiering objects. A pass still running then (storage hanging past
        its own timeouts, a bug) is logged and left to its daemon thread: closing the manager never hangs on
        the remote tier."""
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        self.rlm.cancel_copies()  # an upload under way ends now, aborted, not after CLOSE_WAIT_S
        deadline = time.monotonic() + CLOSE_WAIT_S
        stuck = not self.wait_idle(CLOSE_WAIT_S)
        for pool in (self._deleter, self._copiers, self._expirers):
            pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            tps = list(self._locks)
        for tp in tps:  # a pass under way finishes first
            lock = self._partition_lock(tp)
            if lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                lock.release()
            else:
                stuck = True
                _log.error(
                    "A remote tier pass of %s did not finish within %.0f s of close; left running",
                    tp,
                    CLOSE_WAIT_S,
                )
        if self._owns_scheduler and isinstance(self._scheduler, KafkaScheduler) and not stuck:
            self._scheduler.shutdown()
        # the remote reads of fetches: new ones refused, running ones waited for (within the same bound)
        self.rlm.stop_readers(max(0.0, deadline - time.monotonic()))
        for closer in (self.rlm.rlmm.close, self.rlm.rsm.close):
            try:
                closer()
            except Exception:
                _log.exception("Error while closing the remote tier")
