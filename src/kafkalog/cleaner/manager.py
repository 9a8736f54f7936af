"""Choosing what to clean and remembering what was cleaned (Kafka's ``LogCleanerManager``); the threads that
do the cleaning are :mod:`kafkalog.cleaner.service`.

**``cleaner-offset-checkpoint``** (one per log dir, at its root; Kafka's text checkpoint format written
atomically by :mod:`kafkalog.log.checkpoint`)::

    0
    <number of entries>
    <topic> <partition> <first dirty offset>
    ...

Each entry is where the next cleaning of that partition starts. A checkpointed offset below the log start
offset, or past the log end offset (a truncated or damaged log), is reset to the log start offset and
rewritten. Entries of partitions the cleaner does not know are dropped when the file is rewritten only if
the cleaner was given the full set of logs (a standalone ``clean_log`` keeps them).

**Choosing a log** (:meth:`LogCleanerManager.grab_filthiest_compacted_log`): among logs with ``compact`` in
``cleanup.policy`` that are not being cleaned, paused or marked uncleanable, the one with the highest dirty
ratio ``cleanable bytes / (clean + cleanable bytes)`` whose ratio exceeds ``min.cleanable.dirty.ratio`` — or
which must be compacted now because its oldest dirty segment's first batch is older than
``max.compaction.lag.ms``. The cleanable range never includes the active segment, anything at or past the
last stable offset (itself at most the high watermark), nor a segment whose newest record is younger than
``min.compaction.lag.ms``.

**States** of a partition: none -> in progress -> none (done) | aborted -> paused(1); paused(n) is undone by
``resume_cleaning`` n times. An abort request makes the cleaner stop at its next check (every chunk) with
:class:`~kafkalog.errors.LogCleaningAbortedError`; nothing is swapped in after that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from kafkalog.cleaner.cleaner import LogToClean
from kafkalog.errors import InvalidConfigurationError, KafkaError, LogCleaningAbortedError
from kafkalog.log.checkpoint import CheckpointFile, offset_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleanerConfig",
    "CleaningError",
    "LogCleanerManager",
    "OffsetsToClean",
    "PreCleanStats",
    "cleanable_offsets",
    "max_compaction_delay",
]

_log = logging.getLogger("kafkalog.log.cleaner")
CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_LONG_MAX: Final = 2**63 - 1

LogsSource = Callable[[], Mapping[TopicPartition, "Log"]]


# --- configuration ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CleanerConfig:
    """The broker-level cleaner settings (Kafka's ``CleanerConfig``; names in :meth:`from_props`)."""

    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1024 * 1024 + 12
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15_000
    enable_cleaner: bool = True

    _NAMES: ClassVar[dict[str, str]] = {
        "log.cleaner.threads": "num_threads",
        "log.cleaner.dedupe.buffer.size": "dedupe_buffer_size",
        "log.cleaner.io.buffer.load.factor": "dedupe_buffer_load_factor",
        "log.cleaner.io.buffer.size": "io_buffer_size",
        "message.max.bytes": "max_message_size",
        "log.cleaner.io.max.bytes.per.second": "max_io_bytes_per_second",
        "log.cleaner.backoff.ms": "backoff_ms",
        "log.cleaner.enable": "enable_cleaner",
    }

    def __post_init__(self) -> None:
        if self.num_threads < 1:
            raise InvalidConfigurationError("log.cleaner.threads must be at least 1")
        if not 0 < self.dedupe_buffer_load_factor <= 1:
            raise InvalidConfigurationError("log.cleaner.io.buffer.load.factor must be in (0, 1]")
        if self.dedupe_buffer_size < 24 * self.num_threads:
            raise InvalidConfigurationError(
                "log.cleaner.dedupe.buffer.size is too small for one entry per thread"
            )
        if self.io_buffer_size < 0 or self.backoff_ms < 0 or self.max_io_bytes_per_second <= 0:
            raise InvalidConfigurationError("cleaner buffer sizes, backoff and I/O rate must be positive")

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None) -> CleanerConfig:
        """Build from Kafka's broker names; unknown names are refused."""
        values: dict[str, Any] = {}
        for name, value in (props or {}).items():
            attr = cls._NAMES.get(name)
            if attr is None:
                raise InvalidConfigurationError(f"unknown log cleaner configuration {name!r}")
            try:
                if attr == "enable_cleaner":
                    values[attr] = value if isinstance(value, bool) else str(value).strip().lower() == "true"
                elif attr in ("dedupe_buffer_load_factor", "max_io_bytes_per_second"):
                    values[attr] = float(value)
                else:
                    values[attr] = int(value)
            except (TypeError, ValueError):
                raise InvalidConfigurationError(f"invalid value {value!r} for {name}") from None
        return cls(**values)

    @property
    def read_buffer_size(self) -> int:
        """Bytes one cleaner thread reads at a time: its half of its share of ``log.cleaner.io.buffer.size``
        (Kafka's read buffer), at least 1 MiB: a read is one compiled pass, and smaller ones cost more calls
        than they save memory. A larger batch is read whole."""
        return max(self.io_buffer_size // self.num_threads // 2, 1 << 20)


# --- selection ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetsToClean:
    """The cleanable range ``[first_dirty_offset, first_uncleanable_dirty_offset)`` and whether the stored
    checkpoint was invalid (and must be rewritten)."""

    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


@dataclass
class PreCleanStats:
    """What the last selection saw: cleanable partitions and the largest max-compaction-lag delay."""

    max_compaction_delay_ms: int = 0
    delayed_partitions: int = 0
    cleanable_partitions: int = 0

    def update_max_compaction_delay(self, delay_ms: int) -> None:
        """Account one log's delay past ``max.compaction.lag.ms``."""
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay_ms)
        if delay_ms > 0:
            self.delayed_partitions += 1


def max_compaction_delay(log: Log, first_dirty_offset: int, now: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty non-active segment is (0 if not)."""
    segments = log.local_log.segments.non_active_log_segments_from(first_dirty_offset)
    stamps = [s.get_first_batch_timestamp() for s in segments]
    earliest = min((ts for ts in stamps if ts > 0), default=_LONG_MAX)
    clean_until = now - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _first_uncleanable_segment(log: Log, first_dirty_offset: int, now: int, lag_ms: int) -> int | None:
    for segment in log.local_log.segments.non_active_log_segments_from(first_dirty_offset):
        if segment.largest_timestamp() > now - lag_ms:
            return segment.base_offset
    return None


def cleanable_offsets(log: Log, last_clean_offset: int | None, now: int) -> OffsetsToClean:
    """The cleanable range of ``log`` given its checkpoint (see the module doc)."""
    start = log.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    force = False
    if checkpoint < start:
        if not (log.config.compact and log.config.delete):
            _log.warning(
                "Resetting first dirty offset of %s to log start offset %d since the checkpointed offset %d is "
                "invalid.",
                log.topic_partition,
                start,
                checkpoint,
            )
        first_dirty, force = start, True
    elif checkpoint > log.log_end_offset:
        _log.warning(
            "The last checkpoint dirty offset for partition %s is %d, which is larger than the log end offset "
            "%d. Resetting to the log start offset %d.",
            log.topic_partition,
            checkpoint,
            log.log_end_offset,
            start,
        )
        first_dirty, force = start, True
    else:
        first_dirty = checkpoint
    candidates = [log.last_stable_offset, log.active_segment.base_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        found = _first_uncleanable_segment(log, first_dirty, now, lag)
        if found is not None:
            candidates.append(found)
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


class CleaningError(KafkaError):
    """An unexpected error while choosing or cleaning ``log`` (it is then marked uncleanable)."""

    def __init__(self, log: Log, message: str) -> None:
        super().__init__(message)
        self.log = log


# --- the manager ------------------------------------------------------------------------------------------------

_IN_PROGRESS: Final = "in-progress"
_ABORTED: Final = "aborted"


@dataclass
class _Paused:
    count: int


class LogCleanerManager:
    """Cleaning states, the ``cleaner-offset-checkpoint`` files and the choice of the next log (module doc)."""

    def __init__(
        self, log_dirs: Sequence[Path | str] = (), logs: LogsSource | None = None, time: Time = SYSTEM_TIME
    ):
        self._lock = threading.RLock()
        self._paused_cond = threading.Condition(self._lock)
        self._logs = logs
        self.time = time
        self._checkpoints: dict[Path, CheckpointFile[tuple[TopicPartition, int]]] = {
            Path(d): offset_checkpoint(Path(d) / CLEANER_OFFSET_CHECKPOINT) for d in log_dirs
        }
        self._failed_dirs: set[Path] = set()
        self._in_progress: dict[TopicPartition, str | _Paused] = {}
        self._uncleanable: dict[Path, set[TopicPartition]] = {}
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run = time.milliseconds()

    # --- logs and checkpoints ---------------------------------------------------------------------------
    def logs(self) -> Mapping[TopicPartition, Log]:
        """The logs the cleaner looks after (empty when it only cleans logs it is handed)."""
        return self._logs() if self._logs is not None else {}

    def _checkpoint(self, log_dir: Path) -> CheckpointFile[tuple[TopicPartition, int]] | None:
        if log_dir in self._failed_dirs:
            return None
        cp = self._checkpoints.get(log_dir)
        if cp is None:
            cp = self._checkpoints[log_dir] = offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
        return cp

    def read_checkpoint(self, log_dir: Path) -> dict[TopicPartition, int]:
        """The entries of ``log_dir``'s checkpoint (empty if missing or unreadable)."""
        with self._lock:
            cp = self._checkpoint(Path(log_dir))
            if cp is None:
                return {}
            try:
                return dict(cp.read())
            except (KafkaError, OSError) as exc:
                _log.error("Failed to access checkpoint file %s: %s", cp.path, exc)
                return {}

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """Every checkpointed first dirty offset, over all known log dirs."""
        with self._lock:
            out: dict[TopicPartition, int] = {}
            for log_dir in list(self._checkpoints):
                out.update(self.read_checkpoint(log_dir))
            return out

    def update_checkpoints(
        self,
        log_dir: Path | str,
        update: tuple[TopicPartition, int] | None = None,
        remove: TopicPartition | None = None,
    ) -> None:
        """Rewrite ``log_dir``'s checkpoint with ``update`` set and ``remove`` removed."""
        with self._lock:
            cp = self._checkpoint(Path(log_dir))
            if cp is None:
                return
            try:
                current = dict(cp.read())
            except (KafkaError, OSError) as exc:
                _log.error("Failed to read checkpoint file %s, rewriting it: %s", cp.path, exc)
                current = {}
            if self._logs is not None:
                known = self.logs()
                current = {tp: off for tp, off in current.items() if tp in known}
            if remove is not None:
                current.pop(remove, None)
            if update is not None:
                current[update[0]] = update[1]
            try:
                cp.write(sorted(current.items()))
            except OSError as exc:
                _log.error("Failed to write checkpoint file %s: %s", cp.path, exc)

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path | str, dest: Path | str) -> None:
        """Move ``tp``'s entry from ``source``'s checkpoint to ``dest``'s (a partition moved between dirs)."""
        with self._lock:
            offset = self.read_checkpoint(Path(source)).get(tp)
            if offset is not None:
                self.update_checkpoints(source, remove=tp)
                self.update_checkpoints(dest, update=(tp, offset))
            moved = self._uncleanable.get(Path(source), set())
            if tp in moved:
                moved.discard(tp)
                self.mark_partition_uncleanable(dest, tp)

    def maybe_truncate_checkpoint(self, log_dir: Path | str, tp: TopicPartition, offset: int) -> None:
        """Lower ``tp``'s checkpoint to ``offset`` if it is above it (the log was truncated)."""
        with self._lock:
            if self.read_checkpoint(Path(log_dir)).get(tp, 0) > offset:
                self.update_checkpoints(log_dir, update=(tp, offset))

    def handle_log_dir_failure(self, log_dir: Path | str) -> None:
        """Stop reading and writing ``log_dir``'s checkpoint."""
        _log.warning("Stopping cleaning logs in dir %s", log_dir)
        with self._lock:
            self._failed_dirs.add(Path(log_dir))

    # --- selection --------------------------------------------------------------------------------------
    def _is_uncleanable(self, log: Log, tp: TopicPartition) -> bool:
        return tp in self._uncleanable.get(log.dir.parent, set())

    def grab_filthiest_compacted_log(self, pre_clean_stats: PreCleanStats | None = None) -> LogToClean | None:
        """The dirtiest cleanable log, now marked in progress (None if none qualifies)."""
        stats = pre_clean_stats if pre_clean_stats is not None else PreCleanStats()
        with self._lock:
            now = self.time.milliseconds()
            self.time_of_last_run = now
            last_clean = self.all_cleaner_checkpoints()
            dirty: list[LogToClean] = []
            for tp, log in self.logs().items():
                if not log.config.compact or tp in self._in_progress or self._is_uncleanable(log, tp):
                    continue
                if log.closed or log.local_log.offline:
                    continue
                try:
                    ltc = self._log_to_clean(log, last_clean.get(tp), now, stats)
                except Exception as exc:
                    raise CleaningError(
                        log, f"failed to calculate log cleaning stats for {tp}: {exc}"
                    ) from exc
                if ltc.total_bytes > 0:
                    dirty.append(ltc)
            self.dirtiest_log_cleanable_ratio = max((d.cleanable_ratio for d in dirty), default=0.0)
            cleanable = [
                d
                for d in dirty
                if (d.need_compaction_now and d.cleanable_bytes > 0)
                or d.cleanable_ratio > d.log.config.min_cleanable_dirty_ratio
            ]
            if not cleanable:
                return None
            stats.cleanable_partitions = len(cleanable)
            filthiest = max(cleanable, key=lambda d: d.cleanable_ratio)
            self._in_progress[filthiest.topic_partition] = _IN_PROGRESS
            return filthiest

    def _log_to_clean(self, log: Log, checkpoint: int | None, now: int, stats: PreCleanStats) -> LogToClean:
        offsets = cleanable_offsets(log, checkpoint, now)
        if offsets.force_update_checkpoint:
            self.update_checkpoints(log.dir.parent, update=(log.topic_partition, offsets.first_dirty_offset))
        delay = max_compaction_delay(log, offsets.first_dirty_offset, now)
        stats.update_max_compaction_delay(delay)
        return LogToClean(log, offsets.first_dirty_offset, offsets.first_uncleanable_dirty_offset, delay > 0)

    def log_to_clean(self, log: Log) -> LogToClean:
        """The cleanable range of ``log`` now, from its checkpoint (repaired if invalid)."""
        with self._lock:
            checkpoint = self.read_checkpoint(log.dir.parent).get(log.topic_partition)
            return self._log_to_clean(log, checkpoint, self.time.milliseconds(), PreCleanStats())

    def deletable_logs(self) -> dict[TopicPartition, Log]:
        """Compacted logs not being cleaned, now marked in progress (retention runs on them next)."""
        with self._lock:
            out = {
                tp: log
                for tp, log in self.logs().items()
                if log.config.compact and tp not in self._in_progress and not self._is_uncleanable(log, tp)
            }
            for tp in out:
                self._in_progress[tp] = _IN_PROGRESS
            return out

    def pause_cleaning_for_non_compacted_partitions(self) -> dict[TopicPartition, Log]:
        """Pause (once) every non-compacted log not in progress; retention may then work on them."""
        with self._lock:
            out = {
                tp: log
                for tp, log in self.logs().items()
                if not log.config.compact and tp not in self._in_progress
            }
            for tp in out:
                self._in_progress[tp] = _Paused(1)
            return out

    # --- states -----------------------------------------------------------------------------------------
    def cleaning_state(self, tp: TopicPartition) -> str | None:
        """``in-progress``, ``aborted``, ``paused(<n>)`` or None."""
        with self._lock:
            state = self._in_progress.get(tp)
            return f"paused({state.count})" if isinstance(state, _Paused) else state

    def start_cleaning(self, tp: TopicPartition) -> bool:
        """Mark ``tp`` in progress unless it already is (or is paused); returns whether it was marked."""
        with self._lock:
            if tp in self._in_progress:
                return False
            self._in_progress[tp] = _IN_PROGRESS
            return True

    def abort_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Abort ``tp``'s cleaning if in progress and wait for it to stop (then resume)."""
        with self._lock:
            self.abort_and_pause_cleaning(tp, timeout_s)
            self.resume_cleaning([tp])

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Abort ``tp``'s cleaning and pause it (once more); waits until the cleaner has stopped."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state is None:
                self._in_progress[tp] = _Paused(1)
            elif state == _IN_PROGRESS:
                self._in_progress[tp] = _ABORTED
            elif isinstance(state, _Paused):
                self._in_progress[tp] = _Paused(state.count + 1)
            else:
                raise KafkaError(
                    f"compaction for partition {tp} cannot be aborted and paused in state {state}"
                )
            if not self._paused_cond.wait_for(
                lambda: isinstance(self._in_progress.get(tp), _Paused), timeout_s
            ):
                raise KafkaError(f"timed out waiting for the cleaning of {tp} to abort")

    def resume_cleaning(self, tps: Sequence[TopicPartition]) -> None:
        """Undo one pause of each partition."""
        with self._lock:
            for tp in tps:
                state = self._in_progress.get(tp)
                if not isinstance(state, _Paused):
                    raise KafkaError(
                        f"compaction for partition {tp} cannot be resumed since it is in state {state}"
                    )
                if state.count <= 1:
                    del self._in_progress[tp]
                else:
                    self._in_progress[tp] = _Paused(state.count - 1)

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Raise :class:`LogCleaningAbortedError` if ``tp``'s cleaning was aborted."""
        with self._lock:
            if self._in_progress.get(tp) == _ABORTED:
                raise LogCleaningAbortedError(f"cleaning of {tp} was aborted")

    def done_cleaning(self, tp: TopicPartition, log_dir: Path, end_offset: int | None) -> None:
        """The cleaning of ``tp`` ended: checkpoint ``end_offset`` (unless None or aborted) and clear the state."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state == _ABORTED:
                self._in_progress[tp] = _Paused(1)
                self._paused_cond.notify_all()
                return
            if state != _IN_PROGRESS:
                raise KafkaError(f"in-progress partition {tp} cannot be in state {state}")
            if end_offset is not None:
                self.update_checkpoints(log_dir, update=(tp, end_offset))
            del self._in_progress[tp]

    def done_deleting(self, tps: Sequence[TopicPartition]) -> None:
        """Retention on these logs ended."""
        with self._lock:
            for tp in tps:
                state = self._in_progress.get(tp)
                if state == _ABORTED:
                    self._in_progress[tp] = _Paused(1)
                    self._paused_cond.notify_all()
                elif state == _IN_PROGRESS:
                    del self._in_progress[tp]
                else:
                    raise KafkaError(f"in-progress partition {tp} cannot be in state {state}")

    def mark_partition_uncleanable(self, log_dir: Path | str, tp: TopicPartition) -> None:
        """Skip ``tp`` from now on (an unexpected error happened while cleaning it)."""
        with self._lock:
            self._uncleanable.setdefault(Path(log_dir), set()).add(tp)

    def uncleanable_partitions(self, log_dir: Path | str) -> set[TopicPartition]:
        """Partitions of ``log_dir`` marked uncleanable."""
        with self._lock:
            return set(self._uncleanable.get(Path(log_dir), set()))

    def maintain_uncleanable_partitions(self) -> None:
        """Forget uncleanable partitions whose logs are gone."""
        if self._logs is None:
            return
        with self._lock:
            known = self.logs()
            for log_dir in list(self._uncleanable):
                self._uncleanable[log_dir] = {tp for tp in self._uncleanable[log_dir] if tp in known}
                if not self._uncleanable[log_dir]:
                    del self._uncleanable[log_dir]
