"""The background log cleaner and its synchronous entry points (Kafka's ``LogCleaner``).

**Running** (:class:`LogCleaner`): ``log.cleaner.threads`` periodic tasks (``kafka-log-cleaner-thread-<i>``)
on a scheduler — its own :class:`~kafkalog.log.scheduler.KafkaScheduler` with that many threads unless one
is given — each with its own offset map of ``log.cleaner.dedupe.buffer.size / threads`` bytes; a task
cleans the filthiest log round after round until none is cleanable, applies retention to compacted logs,
then waits ``log.cleaner.backoff.ms``. All threads share one I/O throttle
(``log.cleaner.io.max.bytes.per.second``). :meth:`LogCleaner.clean_once` and :meth:`LogCleaner.clean_log` do
the same work synchronously (the ``kafkalog compact`` command). An unexpected error marks the partition
uncleanable (it is skipped until the cleaner restarts); an I/O error takes its log dir offline.

**One cleaner per log dir** (invariant owned here): two cleaners on the same logs would write the same
``<base>.log.cleaned`` files and swap over each other's segments. A ``LogCleaner`` claims the real path of
each log dir it works in, in a registry of this process: :meth:`~LogCleaner.startup` its configured dirs
until :meth:`~LogCleaner.shutdown`, :meth:`~LogCleaner.clean_once` and :meth:`~LogCleaner.clean_log` theirs
for the call, and every round the dir of the log it cleans. A dir claimed by another cleaner is refused
with :class:`~kafkalog.errors.LogDirLockedError` (a background round marks that partition uncleanable for
this cleaner instead). A ``LogManager`` with ``log.cleaner.enable`` (the default) runs one: use
``LogManager.cleaner`` rather than building another. Other processes are kept out by the data dir's
``.lock``, which the ``LogManager`` holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafkalog.cleaner.cleaner import Cleaner, CleanerStats, LogToClean, Throttler
from kafkalog.cleaner.manager import (
    CleanerConfig,
    CleaningError,
    LogCleanerManager,
    LogsSource,
    PreCleanStats,
)
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.errors import (
    InvalidConfigurationError,
    KafkaError,
    KafkaStorageError,
    LogCleaningAbortedError,
    LogDirLockedError,
)
from kafkalog.log.names import TopicPartition
from kafkalog.log.scheduler import KafkaScheduler, ScheduledTask, Scheduler
from kafkalog.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["CleanResult", "LogCleaner"]

_log = logging.getLogger("kafkalog.log.cleaner")

_claims_lock = threading.Lock()
#: The cleaner working in each log dir of this process, by real path (see the module doc).
_claims: weakref.WeakValueDictionary[str, LogCleaner] = weakref.WeakValueDictionary()


@dataclass(frozen=True)
class CleanResult:
    """One cleaning round of one log: the dirty range it covered and its statistics."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    stats: CleanerStats


class _Shutdown(LogCleaningAbortedError):
    """The cleaner is shutting down."""


@dataclass
class _Worker:
    index: int
    cleaner: Cleaner
    last_stats: CleanerStats = field(default_factory=CleanerStats)
    last_pre_clean_stats: PreCleanStats = field(default_factory=PreCleanStats)
    task: ScheduledTask | None = None
    failed: bool = False


class LogCleaner:
    """The background log cleaner (see the module doc)."""

    def __init__(
        self,
        config: CleanerConfig | Mapping[str, Any] | None = None,
        log_dirs: Sequence[Path | str] = (),
        logs: LogsSource | None = None,
        time: Time = SYSTEM_TIME,
        on_dir_failure: Callable[[Path, str, BaseException], None] | None = None,
    ) -> None:
        self.config = config if isinstance(config, CleanerConfig) else CleanerConfig.from_props(config)
        self.time = time
        self.manager = LogCleanerManager(log_dirs, logs, time)
        self.throttler = Throttler(self.config.max_io_bytes_per_second, 300, time)
        self._on_dir_failure = on_dir_failure
        self._workers: list[_Worker] = []
        self._scheduler: Scheduler | None = None
        self._owns_scheduler = False
        self._running = False
        self._sync_lock = threading.Lock()
        self._sync_cleaner: Cleaner | None = None
        self._log_dirs = [Path(d) for d in log_dirs]
        self._claimed: list[str] = []  # held from startup to shutdown

    # --- the one cleaner per log dir ----------------------------------------------------------------------
    def _claim(self, log_dirs: Sequence[Path]) -> list[str]:
        """Claim ``log_dirs`` for this cleaner; returns the ones newly claimed (to release). Raises
        :class:`LogDirLockedError`, claiming nothing, if another cleaner holds one."""
        keys = list(dict.fromkeys(os.path.realpath(d) for d in log_dirs))
        with _claims_lock:
            for key in keys:
                owner = _claims.get(key)
                if owner is not None and owner is not self:
                    raise LogDirLockedError(
                        f"log dir {key} is already being cleaned by another LogCleaner in this process (a LogManager "
                        "runs one with log.cleaner.enable=true: use LogManager.cleaner); two cleaners would race "
                        "on the same .cleaned files"
                    )
            new = [key for key in keys if _claims.get(key) is not self]
            for key in new:
                _claims[key] = self
        return new

    def _release(self, keys: Sequence[str]) -> None:
        with _claims_lock:
            for key in keys:
                if _claims.get(key) is self:
                    del _claims[key]

    @contextlib.contextmanager
    def _claiming(self, log_dirs: Sequence[Path], *, keep: bool = False) -> Iterator[None]:
        """Hold ``log_dirs`` for the block (``keep``: until :meth:`shutdown`, for the background tasks)."""
        held = self._claim(log_dirs)
        if keep:
            with _claims_lock:
                self._claimed.extend(held)
            yield
            return
        try:
            yield
        finally:
            self._release(held)

    # --- cleaners ---------------------------------------------------------------------------------------
    def _new_cleaner(self, index: int, check_done: Callable[[TopicPartition], None]) -> Cleaner:
        memory = min(self.config.dedupe_buffer_size // self.config.num_threads, 2**31 - 1)
        return Cleaner(
            index,
            SkimpyOffsetMap(memory),
            self.config.read_buffer_size,
            self.config.max_message_size,
            self.config.dedupe_buffer_load_factor,
            self.throttler,
            self.time,
            check_done,
        )

    def _check_done(self, tp: TopicPartition) -> None:
        if not self._running:
            raise _Shutdown("the log cleaner is shutting down")
        self.manager.check_cleaning_aborted(tp)

    def _sync(self) -> Cleaner:
        if self._sync_cleaner is None:
            self._sync_cleaner = self._new_cleaner(-1, self.manager.check_cleaning_aborted)
        return self._sync_cleaner

    # --- lifecycle --------------------------------------------------------------------------------------
    def startup(self, scheduler: Scheduler | None = None) -> None:
        """Start ``log.cleaner.threads`` cleaner tasks on ``scheduler`` (default: a scheduler of our own)."""
        if self._running:
            return
        self._claimed = self._claim(self._log_dirs)
        if scheduler is None:
            own = KafkaScheduler(self.config.num_threads, "kafka-log-cleaner-thread-", self.time).startup()
            scheduler, self._owns_scheduler = own, True
        self._scheduler = scheduler
        self._running = True
        _log.info("Starting the log cleaner")
        for i in range(self.config.num_threads):
            worker = _Worker(i, self._new_cleaner(i, self._check_done))
            self._workers.append(worker)
            worker.task = scheduler.schedule(
                f"kafka-log-cleaner-thread-{i}", self._task(worker), 0, max(self.config.backoff_ms, 1)
            )

    def shutdown(self) -> None:
        """Stop the cleaner tasks (a cleaning in progress is aborted at its next check)."""
        if not self._running and not self._workers:
            return
        _log.info("Shutting down the log cleaner.")
        self._running = False
        for worker in self._workers:
            if worker.task is not None:
                worker.task.cancel()
        if self._owns_scheduler and isinstance(self._scheduler, KafkaScheduler):
            self._scheduler.shutdown()
        self._workers.clear()
        self._scheduler = None
        self._owns_scheduler = False
        self._release(self._claimed)
        self._claimed = []

    @property
    def is_running(self) -> bool:
        """Whether :meth:`startup` was called and :meth:`shutdown` was not."""
        return self._running

    def _task(self, worker: _Worker) -> Callable[[], None]:
        def run() -> None:
            try:
                while self._running and self._clean_filthiest_log(worker):
                    pass
                self.manager.maintain_uncleanable_partitions()
            except _Shutdown:
                pass
            except Exception:
                worker.failed = True
                _log.exception("Log cleaner thread %d failed", worker.index)
                raise

        return run

    # --- cleaning ---------------------------------------------------------------------------------------
    def _clean_filthiest_log(self, worker: _Worker) -> bool:
        """One round on the filthiest log, then retention on the compacted logs; returns whether the round
        moved a log's checkpoint forward (else the task backs off: an abandoned round is retried later)."""
        pre = PreCleanStats()
        try:
            ltc = self.manager.grab_filthiest_compacted_log(pre)
        except CleaningError as exc:
            self._mark_uncleanable(exc.log, exc)
            return False
        progressed = False
        if ltc is not None:
            worker.last_pre_clean_stats = pre
            result = self._clean_log_round(worker.cleaner, ltc)
            if result is not None:
                worker.last_stats = result.stats
                progressed = result.end_offset > ltc.first_dirty_offset
        self._retention_for_compacted_logs()
        return progressed

    def _clean_log_round(self, cleaner: Cleaner, ltc: LogToClean) -> CleanResult | None:
        """One round on a log already marked in progress; always clears the state."""
        log = ltc.log
        tp = log.topic_partition
        end: int | None = None
        result: CleanResult | None = None
        try:
            with self._claiming([log.dir.parent], keep=self._running):
                end, stats = cleaner.clean(ltc)
            result = CleanResult(tp, ltc.first_dirty_offset, end, stats)
            _log_stats(cleaner.id, tp, result)
        except _Shutdown:
            raise
        except LogCleaningAbortedError:
            end = None
        except KafkaStorageError:
            end = None  # the log dir is offline already
        except OSError as exc:
            end = None
            if self._on_dir_failure is not None:
                self._on_dir_failure(
                    log.dir.parent, f"failed to clean up log for {tp} in dir {log.dir.parent}", exc
                )
            else:
                self._mark_uncleanable(log, exc)
        except Exception as exc:
            end = None
            self._mark_uncleanable(log, exc)
        finally:
            self.manager.done_cleaning(tp, log.dir.parent, end)
        return result

    def _mark_uncleanable(self, log: Log, exc: BaseException) -> None:
        _log.warning(
            "Unexpected exception thrown when cleaning log %s. Marking its partition (%s) as uncleanable: %s",
            log,
            log.topic_partition,
            exc,
            exc_info=exc,
        )
        self.manager.mark_partition_uncleanable(log.dir.parent, log.topic_partition)

    def _retention_for_compacted_logs(self) -> None:
        deletable = self.manager.deletable_logs()
        try:
            for log in deletable.values():
                try:
                    log.delete_old_segments()
                except KafkaStorageError:
                    pass
                except Exception as exc:
                    self._mark_uncleanable(log, exc)
        finally:
            self.manager.done_deleting(list(deletable))

    def clean_once(self, max_rounds: int = 1000) -> list[CleanResult]:
        """Clean synchronously: the filthiest cleanable log, round after round, until none is left (or
        ``max_rounds``), then retention on compacted logs; returns every round done."""
        results: list[CleanResult] = []
        with self._sync_lock, self._claiming(self._log_dirs):
            cleaner = self._sync()
            seen: set[tuple[TopicPartition, int]] = set()
            for _ in range(max_rounds):
                try:
                    ltc = self.manager.grab_filthiest_compacted_log()
                except CleaningError as exc:
                    self._mark_uncleanable(exc.log, exc)
                    continue
                if ltc is None:
                    break
                key = (ltc.topic_partition, ltc.first_dirty_offset)
                if key in seen:  # no progress since this log's last round: stop rather than loop
                    self.manager.done_cleaning(ltc.topic_partition, ltc.log.dir.parent, None)
                    break
                seen.add(key)
                result = self._clean_log_round(cleaner, ltc)
                if result is not None:
                    results.append(result)
        self._retention_for_compacted_logs()
        return results

    def clean_log(self, log: Log, *, max_rounds: int = 1000) -> list[CleanResult]:
        """Clean ``log`` now, whatever its dirty ratio, round after round up to its first uncleanable offset;
        the checkpoint goes to ``log``'s log dir. Returns the rounds done (none if nothing is cleanable)."""
        tp = log.topic_partition
        if not log.config.compact:
            raise InvalidConfigurationError(f"{tp} does not have cleanup.policy=compact")
        results: list[CleanResult] = []
        with self._sync_lock, self._claiming([log.dir.parent]):
            cleaner = self._sync()
            for _ in range(max_rounds):
                if not self.manager.start_cleaning(tp):
                    raise KafkaError(f"the cleaning of {tp} is in progress or paused")
                try:
                    ltc = self.manager.log_to_clean(log)
                except BaseException:
                    self.manager.done_cleaning(tp, log.dir.parent, None)
                    raise
                if ltc.cleanable_bytes == 0 or ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
                    self.manager.done_cleaning(tp, log.dir.parent, None)
                    break
                result = self._clean_log_round(cleaner, ltc)
                if result is None:
                    break
                results.append(result)
                if (
                    result.end_offset >= ltc.first_uncleanable_offset
                    or result.end_offset <= ltc.first_dirty_offset
                ):
                    break
        return results

    # --- pass-throughs to the manager -------------------------------------------------------------------
    def abort_cleaning(self, tp: TopicPartition) -> None:
        """Abort ``tp``'s cleaning (waiting for it) and allow it again."""
        self.manager.abort_cleaning(tp)

    def abort_and_pause_cleaning(self, tp: TopicPartition) -> None:
        """Abort ``tp``'s cleaning and pause it until :meth:`resume_cleaning`."""
        self.manager.abort_and_pause_cleaning(tp)

    def resume_cleaning(self, tps: Sequence[TopicPartition]) -> None:
        """Undo one pause of each partition."""
        self.manager.resume_cleaning(tps)

    def update_checkpoints(self, log_dir: Path | str, remove: TopicPartition | None = None) -> None:
        """Rewrite ``log_dir``'s checkpoint (dropping ``remove``)."""
        self.manager.update_checkpoints(log_dir, remove=remove)

    def maybe_truncate_checkpoint(self, log_dir: Path | str, tp: TopicPartition, offset: int) -> None:
        """Lower ``tp``'s checkpoint after a truncation to ``offset``."""
        self.manager.maybe_truncate_checkpoint(log_dir, tp, offset)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path | str, dest: Path | str) -> None:
        """Move ``tp``'s checkpoint entry between log dirs."""
        self.manager.alter_checkpoint_dir(tp, source, dest)

    def handle_log_dir_failure(self, log_dir: Path | str) -> None:
        """Stop using ``log_dir``'s checkpoint."""
        self.manager.handle_log_dir_failure(log_dir)

    def pause_cleaning_for_non_compacted_partitions(self) -> dict[TopicPartition, Log]:
        """See :meth:`LogCleanerManager.pause_cleaning_for_non_compacted_partitions`."""
        return self.manager.pause_cleaning_for_non_compacted_partitions()

    def delete_old_segments_of_non_compacted_logs(self) -> int:
        """Retention on the logs without ``compact`` (Kafka's ``LogManager.cleanupLogs`` with a cleaner: the
        compacted ones are the cleaner's), paused for the cleaner meanwhile; returns the segments deleted."""
        paused = self.manager.pause_cleaning_for_non_compacted_partitions()
        total = 0
        try:
            for log in paused.values():
                with contextlib.suppress(KafkaStorageError):
                    total += log.delete_old_segments()
        finally:
            self.manager.resume_cleaning(list(paused))
        return total

    @contextlib.contextmanager
    def paused(self, tps: Sequence[TopicPartition]) -> Iterator[None]:
        """Abort the cleaning of ``tps`` (waiting for it) and keep them paused for the ``with`` block (a topic
        being deleted, a partition being moved). Never enter this holding a lock the logs source takes."""
        done: list[TopicPartition] = []
        try:
            for tp in tps:
                self.manager.abort_and_pause_cleaning(tp)
                done.append(tp)
            yield
        finally:
            self.manager.resume_cleaning(done)

    def await_cleaned(self, tp: TopicPartition, offset: int, max_wait_ms: int) -> bool:
        """Wait until ``tp``'s checkpoint reaches ``offset`` (tests); returns whether it did."""
        waited = 0
        while waited <= max_wait_ms:
            if self.manager.all_cleaner_checkpoints().get(tp, -1) >= offset:
                return True
            self.time.sleep(min(100, max_wait_ms - waited + 1))
            waited += 100
        return False

    # --- metrics ----------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Kafka's cleaner gauges (``kafka.log:type=LogCleaner`` and ``LogCleanerManager`` names)."""
        stats = [w.last_stats for w in self._workers]
        read = sum(s.bytes_read for s in stats)
        written = sum(s.bytes_written for s in stats)
        return {
            "max-buffer-utilization-percent": 100 * max((s.buffer_utilization for s in stats), default=0.0),
            "cleaner-recopy-percent": 100 * written / max(read, 1),
            "max-clean-time-secs": max((s.elapsed_secs for s in stats), default=0.0),
            "max-compaction-delay-secs": max(
                (w.last_pre_clean_stats.max_compaction_delay_ms / 1000 for w in self._workers), default=0.0
            ),
            "DeadThreadCount": float(sum(1 for w in self._workers if w.failed)),
            "max-dirty-percent": 100 * self.manager.dirtiest_log_cleanable_ratio,
            "time-since-last-run-ms": float(self.time.milliseconds() - self.manager.time_of_last_run),
        }


def _log_stats(cleaner_id: int, tp: TopicPartition, result: CleanResult) -> None:
    s = result.stats
    mb = 1024 * 1024
    elapsed = max(s.elapsed_secs, 1e-9)
    _log.info(
        "Log cleaner thread %d cleaned log %s (dirty section = [%d, %d]): %.1f MB of log processed in %.1f "
        "seconds (%.1f MB/sec); indexed %.1f MB; buffer utilization %.1f%%; start size %.1f MB (%d messages), "
        "end size %.1f MB (%d messages)",
        cleaner_id,
        tp,
        result.first_dirty_offset,
        result.end_offset,
        s.bytes_read / mb,
        s.elapsed_secs,
        s.bytes_read / mb / elapsed,
        s.map_bytes_read / mb,
        100 * s.buffer_utilization,
        s.bytes_read / mb,
        s.messages_read,
        s.bytes_written / mb,
        s.messages_written,
    )
    if s.invalid_messages_read:
        _log.warning("Found %d invalid messages during compaction.", s.invalid_messages_read)
