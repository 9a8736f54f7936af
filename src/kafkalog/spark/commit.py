"""Driver side of the ``kafkalog`` sink: appending staged batches atomically, with a roll-forward journal.

The files under ``<data dir>/.kafkalog-spark/`` — the commit journal (``journal/<job>.json``), failed
journals (``journal/failed/``), streaming sink markers (``sinks/<sink id>.json``) — and the journal's replay
are owned by :mod:`kafkalog.manager.sink_journal` (``LogManager.open`` replays too); ``commit.seq`` and the
readers' side by :mod:`kafkalog.datadir`; ``staging/`` by :mod:`kafkalog.spark.staging`. This module is the
driver's protocol around them, and the staging sweep.

Commit protocol (:func:`commit_staged`; on the driver, one at a time per data dir through the LogManager's
``.lock``, waiting up to ``lockTimeoutMs`` for it):

1. open the data dir with :class:`~kafkalog.manager.LogManager` and **replay** every pending journal
   (:func:`replay_pending`), then sweep staging no journal names (:func:`sweep_stale_staging`; the job's own
   is kept);
2. streaming: if the sink marker already holds this batch id or a later one, the batch is a replay — drop
   its staging and return (exactly once);
3. create missing topics (``createTopics``), then **pre-check** everything that could make an append fail:
   partitions exist, staged files have the recorded sizes and valid CRCs, batch sizes within the topic's
   ``max.message.bytes`` and ``segment.bytes``, CreateTime timestamps inside the topic's window (with one
   minute of slack), keys present for compacted topics. A failure here appends nothing;
4. flush the target logs (their end offsets become durable), write + fsync the journal — **the commit
   point** — then increment ``commit.seq``. From here until step 6 every reader stops these partitions at
   ``base_offset`` (:func:`kafkalog.datadir.read_pending_sink_bounds`): the job appears to readers at once;
5. append every staged batch with ``append_as_leader`` (the validator assigns offsets in place, nothing is
   re-encoded when the staged codec is the topic's), partition by partition in journal order; flush the logs;
6. write the sink marker (streaming), delete the journal (fsync), delete the job's staging directories.

A job's start (:func:`prepare_job`, called by the writers' constructors on the driver) and :func:`abort_staged`
also replay and sweep, so a job that keeps crashing before its commit cannot fill the disk.

Crash at each step: (1-3) nothing was appended, staging is removed by ``abort()`` or the sweep;
(4, before the rename) no journal, nothing appended; (5) the next writer — ``LogManager.open`` replays before
anything else appends, and so do the next job's start and commit — finds the journal and rolls forward: it
checks every staged file against the journal (size, CRC-32C), then for each partition which staged batches
are already at ``[B, ...)`` (record count, and CRC where the log keeps the staged bytes, compared batch by
batch), appends the rest, then does step 6. Staged files cannot change under a journal (they are created
exclusively, under names unique per task attempt), so the comparison never sees other bytes than the ones
appended. Records are never retracted once appended, and a decided commit always completes — or, when it
can never complete (a staged file missing or changed, a topic deleted, a batch the log refuses), its journal
is moved to ``journal/failed/`` and no longer blocks anything (docs/operations.md §6.1). If another writer
appended to a partition between the crash and the replay (possible only after a replay failed with an I/O
error at open), the remainder is appended after its records (logged as a warning; the range is then not
contiguous). An append failing in step 5 in the committing process (an I/O error, say) leaves the journal in
place: the error is raised, and the next commit or replay completes the job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from crc32c import crc32c

from kafkalog.datadir import bump_sink_commit_seq
from kafkalog.errors import CorruptRecordError, LogDirLockedError
from kafkalog.manager import LogManager
from kafkalog.manager.sink_journal import (
    JOURNAL_VERSION,
    PartitionResult,
    apply_journal,
    batch_fields,
    failed_journal_dir,
    finish_journal,
    has_pending_journals,
    iter_staged_batches,
    journal_dir,
    last_committed_batch,
    parallel,
    pending_journals,
    remove_staging_dirs,
    replay_pending,
    sinks_dir,
    staging_root,
    write_journal,
    write_marker,
)
from kafkalog.records import TimestampType
from kafkalog.records.batch import MAGIC_V2
from kafkalog.records.framing import ATTRIBUTES_OFFSET, MAGIC_OFFSET
from kafkalog.spark.sink_layout import StagedFile
from kafkalog.spark.sink_options import SinkError, SinkOptions

__all__ = [
    "CommitResult",
    "PartitionResult",
    "SinkBatch",
    "abort_staged",
    "commit_staged",
    "failed_journal_dir",
    "iter_staged_batches",
    "journal_dir",
    "last_committed_batch",
    "new_job_id",
    "open_manager",
    "prepare_job",
    "replay_pending",
    "sinks_dir",
    "sweep_stale_staging",
]

_log = logging.getLogger("kafkalog.spark.commit")
_TIMESTAMP_SLACK_MS: Final = 60_000
_SWEEP_IDLE_MARGIN_MS: Final = 60_000


@dataclass(frozen=True)
class SinkBatch:
    """A streaming micro-batch: the sink's stable id and Spark's batch id."""

    sink_id: str
    batch_id: int


@dataclass
class CommitResult:
    """What a commit did."""

    job_id: str
    partitions: list[PartitionResult] = field(default_factory=list)
    skipped: bool = False
    replayed: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        """Records appended by this job."""
        return sum(p.records for p in self.partitions)


# --- the data dir ------------------------------------------------------------------------------------------


def open_manager(data_dir: str | Path, lock_timeout_ms: int) -> LogManager:
    """Open the data dir with a LogManager (no background tasks), waiting for its lock up to the timeout."""
    deadline = time.monotonic() + lock_timeout_ms / 1000
    delay = 0.05
    while True:
        try:
            return LogManager.open(data_dir, background=False)
        except LogDirLockedError as exc:
            if time.monotonic() >= deadline:
                raise LogDirLockedError(
                    f"{exc} (waited {lock_timeout_ms} ms; close the LogManager of the other process, or raise "
                    "the sink's lockTimeoutMs option)"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _rel(data_dir: Path, path: Path) -> str:
    return os.path.relpath(path, data_dir)


# --- staged batches ----------------------------------------------------------------------------------------


def _check_staged_file(data_dir: Path, staged: StagedFile, limit: int) -> int:
    """Check one staged file against what its task reported; its CRC-32C (recorded in the journal)."""
    path = data_dir / staged.path
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise SinkError(f"staged file {path} is missing (removed by a sweep or another abort?)") from None
    if size != staged.size:
        raise SinkError(f"staged file {path} is {size} bytes, the task staged {staged.size}")
    records = batches = file_crc = 0
    for buf in iter_staged_batches(path):
        file_crc = crc32c(buf, file_crc)
        if buf[MAGIC_OFFSET] != MAGIC_V2:
            raise CorruptRecordError(f"staged file {path}: batch {batches} is not magic 2")
        count, crc, _, bsize = batch_fields(buf)
        if crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]) != crc:
            raise CorruptRecordError(f"staged file {path}: batch {batches} fails its CRC check")
        if bsize > limit:
            raise SinkError(
                f"staged file {path}: batch {batches} is {bsize} bytes, above the topic limit {limit}"
            )
        records += count
        batches += 1
    if records != staged.records or batches != staged.batches:
        raise SinkError(f"staged file {path} holds {records} records in {batches} batches, not as staged")
    return file_crc


# --- staging sweep -----------------------------------------------------------------------------------------


def _newest_mtime_and_size(path: Path) -> tuple[float, int]:
    newest = path.stat().st_mtime
    size = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(root, name))
                newest = max(newest, st.st_mtime)
                if name in files:
                    size += st.st_size
    return newest, size


def _journaled_task_dirs(data_dir: Path) -> set[str]:
    """Task directories (``<job>/<task>``) named by a pending or a failed journal: never swept."""
    protected: set[str] = set()
    docs = [doc for _, doc in pending_journals(data_dir)]
    fdir = failed_journal_dir(data_dir)
    if fdir.is_dir():
        for path in fdir.glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                docs.append(json.loads(path.read_text()))
    for doc in docs:
        for entry in doc.get("partitions", []):
            for f in entry.get("files", []):
                parts = Path(f["path"]).parts  # .kafkalog-spark/staging/<job>/<task>/<file>
                if len(parts) > 3:
                    protected.add(f"{parts[2]}/{parts[3]}")
    return protected


def _sweep_units(root: Path) -> list[Path]:
    """What the sweep removes as a whole: a batch job's directory, or one task directory of a streaming
    query's ``stream-<sink>`` directory (which lives as long as the query)."""
    units: list[Path] = []
    for job in sorted(root.iterdir()):
        if not job.is_dir():
            continue
        if job.name.startswith("stream-"):
            units += sorted(t for t in job.iterdir() if t.is_dir())
        else:
            units.append(job)
    return units


def sweep_stale_staging(
    data_dir: str | Path,
    ttl_ms: int,
    *,
    max_bytes: int | None = None,
    idle_ms: int = 0,
    keep: Sequence[str] = (),
    now_ms: int | None = None,
) -> list[Path]:
    """Remove staging that no pending or failed journal names (call it under the data dir's lock).

    A unit (:func:`_sweep_units`) untouched for ``ttl_ms`` is removed. Then, while the unreferenced staging
    left holds more than ``max_bytes``, the least recently touched unit idle for at least ``idle_ms`` is
    removed (a job still staging or waiting for the lock touched its files more recently). ``keep`` lists
    directories (relative to the data dir) never removed: the calling job's own.
    """
    data = Path(data_dir)
    root = staging_root(data)
    if not root.is_dir():
        return []
    protected = _journaled_task_dirs(data)
    kept = {str(Path(k)) for k in keep}
    now = (now_ms if now_ms is not None else _now_ms()) / 1000
    candidates: list[tuple[float, int, Path]] = []
    for unit in _sweep_units(root):
        rel = unit.relative_to(root)
        rel_data = str(unit.relative_to(data))
        if rel_data in kept or str(Path(rel_data).parent) in kept:
            continue
        if len(rel.parts) == 2:
            if str(rel) in protected:
                continue
        elif any(p.startswith(f"{rel}/") for p in protected):
            continue
        try:
            newest, size = _newest_mtime_and_size(unit)
        except FileNotFoundError:
            continue
        candidates.append((newest, size, unit))
    removed: list[Path] = []
    left: list[tuple[float, int, Path]] = []
    for newest, size, unit in candidates:
        if newest < now - ttl_ms / 1000:
            shutil.rmtree(unit, ignore_errors=True)
            removed.append(unit)
        else:
            left.append((newest, size, unit))
    if max_bytes is not None:
        total = sum(size for _, size, _ in left)
        for newest, size, unit in sorted(left, key=lambda item: item[0]):
            if total <= max_bytes:
                break
            if newest > now - idle_ms / 1000:
                break  # everything after this one is younger
            shutil.rmtree(unit, ignore_errors=True)
            removed.append(unit)
            total -= size
    for unit in removed:  # a streaming query's directory once its last task directory is gone
        if unit.parent != root:
            with contextlib.suppress(OSError):
                unit.parent.rmdir()
    return removed


def _sweep(data_dir: Path, options: SinkOptions, keep: Sequence[str] = ()) -> list[Path]:
    return sweep_stale_staging(
        data_dir,
        options.staging_ttl_ms,
        max_bytes=options.staging_max_bytes,
        idle_ms=options.lock_timeout_ms + _SWEEP_IDLE_MARGIN_MS,
        keep=keep,
    )


def _sweep_due(data_dir: Path, options: SinkOptions) -> bool:
    """Whether a sweep would remove something: staging past its TTL, or more than ``stagingMaxBytes`` of it
    with some idle long enough (journals are not read: a pending one triggers a replay anyway)."""
    root = staging_root(data_dir)
    if not root.is_dir():
        return False
    now = _now_ms() / 1000
    total, idle = 0, False
    for unit in _sweep_units(root):
        try:
            newest, size = _newest_mtime_and_size(unit)
        except FileNotFoundError:
            continue
        if newest < now - options.staging_ttl_ms / 1000:
            return True
        total += size
        idle = idle or newest < now - (options.lock_timeout_ms + _SWEEP_IDLE_MARGIN_MS) / 1000
    return idle and total > options.staging_max_bytes


def prepare_job(options: SinkOptions) -> list[str]:
    """At the start of a write job (driver): when a journal is pending, a temp file is left or a sweep is due
    (:func:`_sweep_due`), take the data dir's lock (without waiting), replay the pending
    journals and sweep staging no journal names (:func:`sweep_stale_staging` with the sink's limits).
    Skipped when another process holds the lock (its own commit replays and sweeps). The job ids replayed.

    Cheap when there is nothing to do (directory listings and the staging's mtimes), so the streaming sink,
    whose writer Spark rebuilds for every micro-batch commit, calls it every time."""
    data_dir = Path(options.path)
    busy = (
        has_pending_journals(data_dir)
        or any(d.is_dir() and any(d.glob("*.tmp")) for d in (journal_dir(data_dir), sinks_dir(data_dir)))
        or _sweep_due(data_dir, options)
    )
    if not busy:
        return []
    try:
        manager = LogManager.open(data_dir, background=False)
    except LogDirLockedError:
        return []
    try:  # LogManager.open replayed the journals already; a failure it only logged is raised here
        replayed = replay_pending(manager)
        _sweep(data_dir, options)
        return replayed
    finally:
        manager.close()


# --- commit / abort ----------------------------------------------------------------------------------------


def _group(staged: Sequence[StagedFile]) -> dict[tuple[str, int], list[StagedFile]]:
    groups: dict[tuple[str, int], list[StagedFile]] = {}
    for s in staged:
        groups.setdefault((s.topic, s.partition), []).append(s)
    return dict(sorted(groups.items()))


def _ensure_topics(manager: LogManager, options: SinkOptions, groups: Mapping[tuple[str, int], Any]) -> None:
    existing = set(manager.topics())
    for topic in sorted({t for t, _ in groups}):
        if topic not in existing:
            if not options.create_topics:
                raise SinkError(
                    f"topic {topic!r} does not exist in {options.path} (and the sink's createTopics option is off)"
                )
            manager.create_topic(topic, options.create_partitions, dict(options.create_config))
            existing.add(topic)
    for topic, partition in groups:
        count = manager.num_partitions(topic)
        if not 0 <= partition < count:
            raise SinkError(f"partition {partition} of topic {topic!r} does not exist ({count} partitions)")


def _precheck(
    manager: LogManager, data_dir: Path, groups: Mapping[tuple[str, int], list[StagedFile]], now: int
) -> dict[str, int]:
    """Check every staged file (see the module doc, step 3); the CRC-32C of each file by path."""
    checks: list[tuple[StagedFile, int]] = []
    for (topic, partition), files in groups.items():
        cfg = manager.get_log(topic, partition).config
        limit = min(cfg.max_message_bytes, cfg.segment_bytes)
        for staged in files:
            if cfg.timestamp_type is TimestampType.CREATE_TIME and staged.records:
                lo = now + _TIMESTAMP_SLACK_MS - cfg.message_timestamp_before_max_ms
                hi = now + cfg.message_timestamp_after_max_ms
                if staged.min_timestamp < lo or staged.max_timestamp > hi:
                    raise SinkError(
                        f"{topic}-{partition}: record timestamps {staged.min_timestamp}..{staged.max_timestamp} "
                        f"fall outside the topic's window [{lo}, {hi}] (message.timestamp.*.max.ms)"
                    )
            if cfg.compact and staged.null_keys:
                raise SinkError(
                    f"compacted topic {topic!r} cannot accept {staged.null_keys} records without key"
                )
            checks.append((staged, limit))
    crcs = parallel(lambda item: _check_staged_file(data_dir, item[0], item[1]), checks)
    return {staged.path: crc for (staged, _), crc in zip(checks, crcs, strict=True)}


def commit_staged(
    options: SinkOptions,
    job_id: str,
    staged: Sequence[StagedFile],
    *,
    cleanup: Sequence[str] = (),
    sink: SinkBatch | None = None,
) -> CommitResult:
    """Commit a job's staged files atomically (see the module doc); ``cleanup`` lists staging directories
    (relative to the data dir) to delete once the job is in the log."""
    data_dir = Path(options.path)
    groups = _group(staged)
    result = CommitResult(job_id)
    manager = open_manager(data_dir, options.lock_timeout_ms)
    try:
        result.replayed = replay_pending(manager)
        with contextlib.suppress(OSError):
            _sweep(data_dir, options, keep=cleanup)
        if sink is not None:
            last = last_committed_batch(data_dir, sink.sink_id)
            if last is not None and sink.batch_id <= last:
                _log.info(
                    "sink %s batch %d already committed (last %d): skipped", sink.sink_id, sink.batch_id, last
                )
                remove_staging_dirs(data_dir, cleanup)
                result.skipped = True
                return result
        if not groups:  # nothing staged (an empty DataFrame or micro-batch)
            if sink is not None:
                write_marker(data_dir, sink.sink_id, sink.batch_id, job_id, [])
            remove_staging_dirs(data_dir, cleanup)
            return result
        try:
            _ensure_topics(manager, options, groups)
            crcs = _precheck(manager, data_dir, groups, _now_ms())
        except BaseException:
            remove_staging_dirs(data_dir, cleanup)
            raise
        partitions = []
        for (topic, partition), files in groups.items():
            log = manager.get_log(topic, partition)
            log.flush()
            partitions.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "base_offset": log.log_end_offset,
                    "records": sum(f.records for f in files),
                    "files": [
                        {
                            "path": f.path,
                            "size": f.size,
                            "records": f.records,
                            "batches": f.batches,
                            "crc32c": crcs[f.path],
                        }
                        for f in files
                    ],
                }
            )
        journal = {
            "version": JOURNAL_VERSION,
            "job_id": job_id,
            "created_ms": _now_ms(),
            "sink": None if sink is None else {"id": sink.sink_id, "batch_id": sink.batch_id},
            "cleanup": list(cleanup),
            "partitions": partitions,
        }
        path = write_journal(data_dir, journal)  # the commit point
        bump_sink_commit_seq(
            data_dir
        )  # readers now bound these partitions at base_offset until finish_journal
        result.partitions = apply_journal(manager, data_dir, journal)
        finish_journal(manager, data_dir, path, journal, result.partitions)
        return result
    finally:
        manager.close()


def abort_staged(options: SinkOptions, cleanup: Sequence[str]) -> None:
    """Drop a job's staging directories. Pending journals are rolled forward first (a commit decided before it
    failed completes, and the staged files it names are never deleted before that); then staging no journal
    names is swept (:func:`sweep_stale_staging`)."""
    data_dir = Path(options.path)
    with open_manager(data_dir, options.lock_timeout_ms) as manager:
        replay_pending(manager)
        remove_staging_dirs(data_dir, cleanup)
        with contextlib.suppress(OSError):
            _sweep(data_dir, options)


def new_job_id(prefix: str = "") -> str:
    """A unique, time-ordered job id (``<ms>-<12 hex>``, with an optional prefix)."""
    return f"{prefix}{_now_ms():013d}-{uuid.uuid4().hex[:12]}"
