"""One log dir of a :class:`~kafkalog.manager.LogManager`: its lock, its logs, its offset checkpoints, loading it.

Invariants owned here:

* **Every log comes back where it stopped.** The dir's ``recovery-point-offset-checkpoint``,
  ``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` (Kafka's text format, replaced
  atomically by :mod:`kafkalog.log.checkpoint`) hold one entry per log of the dir: its recovery point, its
  high watermark, and its log start offset only when that is past its first segment (as Kafka). Loading
  opens each log with what they recorded and with the dir's ``.kafka_cleanshutdown`` marker, which is
  deleted as soon as it is read (KAFKA-10471). An unreadable checkpoint is logged and ignored (its logs
  recover from their first segment). Nothing is written to an offline dir, and a failed write takes the
  dir offline through the manager's dir-failure handler.
* **A bad partition does not stop the others.** The dir's partition directories are opened on
  ``num.recovery.threads.per.data.dir`` threads; one that fails is reported as a :class:`LoadFailure` and
  marks the dir as not loaded fully (so it gets no clean-shutdown marker on close, KAFKA-15375) and keeps
  its entries in the offset checkpoints as they were read (a rewrite does not drop its log start offset or
  recovery point: once the partition loads again it starts where it stopped). A directory whose name is not
  a partition's (``lost+found``), or whose partition number is not below ``max.partitions``
  (``t-2000000000`` would make its topic's count two billion), is left alone and reported as ignored;
  ``-stray`` directories are skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.datadir import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    DirLock,
)
from kafkalog.errors import KafkaError
from kafkalog.log.checkpoint import offset_checkpoint, read_clean_shutdown, write_clean_shutdown
from kafkalog.log.log import Log
from kafkalog.log.names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    TopicPartition,
    parse_topic_partition_name,
    validate_topic_name,
)

__all__ = ["CHECKPOINTS", "DirFailureHandler", "DirLoad", "DirOffsets", "LoadFailure", "LogDirState"]

_log = logging.getLogger("kafkalog.manager")

#: The manager's dir-failure handler (Kafka's LogDirFailureChannel): ``(log dir, message, cause)``.
DirFailureHandler = Callable[[Path, str, BaseException], None]


@dataclass(frozen=True)
class LoadFailure:
    """A partition directory that could not be loaded (it is left as it is on disk)."""

    path: Path
    error: BaseException


@dataclass(frozen=True)
class DirOffsets:
    """What a log dir's offset checkpoints recorded, per partition."""

    recovery_points: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int]


@dataclass
class DirLoad:
    """The outcome of loading one log dir: the directories left alone and those that failed, in name order."""

    ignored: list[Path] = field(default_factory=list)
    failures: list[tuple[TopicPartition, LoadFailure]] = field(default_factory=list)


#: Opens (and registers with the manager) one partition directory of a log dir.
OpenPartition = Callable[["LogDirState", Path, TopicPartition, DirOffsets], None]


@dataclass
class LogDirState:
    """One locked log dir: whether it is online and loaded fully, and the current logs it holds."""

    path: Path
    lock: DirLock
    had_clean_shutdown: bool = False
    online: bool = True
    loaded_fully: bool = True
    logs: dict[TopicPartition, Log] = field(default_factory=dict)
    #: Checkpoint entries (by checkpoint name) of the partitions that failed to load, kept as they were read.
    failed_entries: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    #: Serializes the offset checkpoints' writes: they share one ``.tmp`` name, and a background task and a
    #: request (a topic deleted) writing at once made one rename fail (ENOENT) and took the dir offline.
    checkpoint_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def lock_all(cls, paths: list[Path]) -> list[LogDirState]:
        """Create (if missing) and lock every dir; on any failure the locks already taken are released."""
        dirs: list[LogDirState] = []
        try:
            for path in paths:
                path.mkdir(parents=True, exist_ok=True)
                dirs.append(cls(path, DirLock(path).acquire()))
        except BaseException:
            for d in dirs:
                d.lock.release()
            raise
        return dirs

    # --- loading ------------------------------------------------------------------------------------------
    def load(self, threads: int, open_partition: OpenPartition, max_partitions: int | None = None) -> DirLoad:
        """Read the clean-shutdown marker and the checkpoints, then open every partition directory with
        ``open_partition`` on ``threads`` threads; a failure is reported, not raised. A directory numbered
        ``max_partitions`` or above is left alone and reported as ignored: no topic within the limit has such a
        partition, and loading it would make its topic's partition count that large."""
        self.had_clean_shutdown = read_clean_shutdown(self.path)
        read = {name: self._read_checkpoint(name) for name in CHECKPOINTS}
        offsets = DirOffsets(
            read[RECOVERY_POINT_CHECKPOINT],
            read[LOG_START_OFFSET_CHECKPOINT],
            read[REPLICATION_OFFSET_CHECKPOINT],
        )
        result = DirLoad()
        candidates: list[tuple[Path, TopicPartition]] = []
        for path in sorted(p for p in self.path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if path.name.endswith(STRAY_DIR_SUFFIX):
                continue
            try:
                tp = parse_topic_partition_name(path)
                validate_topic_name(tp.topic)
            except KafkaError as exc:  # lost+found, a user's folder: not a partition, left alone
                result.ignored.append(path)
                _log.warning("Ignoring directory %s in log dir %s: %s", path.name, self.path, exc)
                continue
            if max_partitions is not None and tp.partition >= max_partitions:
                result.ignored.append(path)
                _log.warning(
                    "Ignoring directory %s in log dir %s: partition %d is not below max.partitions (%d)",
                    path.name,
                    self.path,
                    tp.partition,
                    max_partitions,
                )
                continue
            candidates.append((path, tp))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-recovery-") as pool:
            jobs = [(p, tp, pool.submit(open_partition, self, p, tp, offsets)) for p, tp in candidates]
            for path, tp, job in jobs:
                try:
                    job.result()
                except Exception as exc:
                    self.loaded_fully = False
                    result.failures.append((tp, LoadFailure(path, exc)))
                    if not path.name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                        self._keep_entries(tp, offsets)
                    _log.error("Error while loading log dir %s: skipping %s: %s", self.path, path.name, exc)
        return result

    def _keep_entries(self, tp: TopicPartition, offsets: DirOffsets) -> None:
        read = {
            RECOVERY_POINT_CHECKPOINT: offsets.recovery_points,
            LOG_START_OFFSET_CHECKPOINT: offsets.log_start_offsets,
            REPLICATION_OFFSET_CHECKPOINT: offsets.high_watermarks,
        }
        for name, values in read.items():
            if tp in values:
                self.failed_entries.setdefault(name, {})[tp] = values[tp]

    def _read_checkpoint(self, name: str) -> dict[TopicPartition, int]:
        try:
            return dict(offset_checkpoint(self.path / name).read())
        except FileNotFoundError:
            return {}
        except (KafkaError, OSError) as exc:
            _log.warning("Ignoring unreadable checkpoint %s: %s", self.path / name, exc)
            return {}

    # --- writing ------------------------------------------------------------------------------------------
    def write_checkpoint(self, name: str, on_failure: DirFailureHandler) -> None:
        """Write the offset checkpoint ``name`` (a key of :data:`CHECKPOINTS`) if the dir is online."""
        if not self.online:
            return
        value = CHECKPOINTS[name]
        with self.checkpoint_lock:  # the values read under it too: the last write has the newest
            values: dict[TopicPartition, int] = {}
            for tp, log in list(self.logs.items()):
                v = value(log)
                if v is not None:
                    values[tp] = v
            for tp, v in self.failed_entries.get(name, {}).items():
                values.setdefault(tp, v)
            entries = sorted(values.items())
            try:
                offset_checkpoint(self.path / name).write(entries)
            except OSError as exc:
                failure: OSError | None = exc
            else:
                failure = None
        if failure is not None:
            on_failure(self.path, f"error while writing {name}", failure)

    def forget(self, tp: TopicPartition) -> None:
        """Drop the checkpoint entries kept for ``tp`` (a failed partition whose directory was deleted)."""
        for entries in self.failed_entries.values():
            entries.pop(tp, None)

    def write_checkpoints(self, on_failure: DirFailureHandler) -> None:
        """Write every offset checkpoint of the dir (if it is online)."""
        for name in CHECKPOINTS:
            self.write_checkpoint(name, on_failure)

    def write_clean_shutdown(self) -> bool:
        """Write the clean-shutdown marker; a failure is logged (the next open then recovers the dir) and
        answers False."""
        try:
            write_clean_shutdown(self.path)
        except OSError as exc:
            _log.error("Could not write the clean shutdown marker in %s: %s", self.path, exc)
            return False
        return True


def _start_offset_entry(log: Log) -> int | None:
    """Kafka's ``checkpointLogStartOffsetsInDir`` filter: a log with a remote tier always (its log start
    offset may be below its first local segment, which the loader would otherwise raise it to), any other
    only when its log start offset is past its first segment's base."""
    if log.remote_log_enabled:
        return log.log_start_offset
    segments = log.segments
    if segments and log.log_start_offset > segments[0].base_offset:
        return log.log_start_offset
    return None


#: Each per-log-dir offset checkpoint and the value it records for a log (None: no entry).
CHECKPOINTS: dict[str, Callable[[Log], int | None]] = {
    RECOVERY_POINT_CHECKPOINT: lambda log: log.recovery_point,
    LOG_START_OFFSET_CHECKPOINT: _start_offset_entry,
    REPLICATION_OFFSET_CHECKPOINT: lambda log: log.high_watermark,
}
