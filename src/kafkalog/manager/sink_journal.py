"""The Spark sink's commit journal: its format, its replay, and where the sink's files live in a data dir.

A storage recovery rule, so it lives in the manager layer: :meth:`LogManager.open
<kafkalog.manager.LogManager.open>` replays pending journals before anything else appends, and the Spark
sink's driver (:mod:`kafkalog.spark.commit`) writes them and replays them before every job and commit.
Readers (:mod:`kafkalog.readonly`, the Spark source) never import this module: the one thing they read of a
journal, ``partitions[].topic/.partition/.base_offset``, is read by :func:`kafkalog.datadir.pending_sink_bounds`,
which also owns ``commit.seq``.

Files owned here, all under ``<data dir>/.kafkalog-spark/`` (a hidden directory, skipped by the LogManager
and by partition-directory scans)::

    staging/<job>/<task>/<topic>-<partition>.batches   staged record batches (kafkalog.spark.staging)
    journal/<job>.json                                 commit journals in progress
    journal/failed/<job>.json                          journals whose replay could not complete
    sinks/<sink id>.json                               last committed micro-batch of a streaming sink
    commit.seq                                         commit counter readers use (kafkalog.datadir)

* ``journal/<job>.json`` — the **commit journal** of one commit in progress (written atomically: temp file,
  fsync, rename, directory fsync)::

      {"version": 1, "job_id": "...", "created_ms": T,
       "sink": {"id": "<sink id>", "batch_id": N} | null,
       "cleanup": ["<staging dir, relative to the data dir>", ...],
       "partitions": [{"topic": "t", "partition": 0, "base_offset": B, "records": R,
                       "files": [{"path": "<staged file, relative>", "size": S, "records": r, "batches": b,
                                  "crc32c": C}]}]}

  ``base_offset`` is the partition's log end offset when the journal was written; the job's records take
  exactly ``[B, B + R)``. Durable journal = committed job. ``crc32c`` is the CRC-32C of the whole staged
  file (journals written before it existed replay without the check).
* ``journal/failed/<job>.json`` — a journal whose replay can never complete, with ``"error"``,
  ``"failed_ms"`` and ``"log_end_offsets"`` added (:func:`replay_pending`).
* ``sinks/<sink id>.json`` — per streaming sink (query) marker: the last micro-batch id whose records are in
  the log, ``{"version": 1, "sink_id": ..., "batch_id": N, "job_id": ..., "committed_ms": T,
  "offsets": {"<topic>": {"<partition>": [first, last]}}}``.
* Staged files are sequences of v2 record batches (:func:`iter_staged_batches`), created exclusively under
  names unique per task attempt, so they never change under a journal.

Replay (:func:`replay_pending`): every staged file is checked against the journal (size, CRC-32C); then for
each partition the batches already at ``[B, ...)`` are recognised (record count, and CRC where the log keeps
the staged bytes, compared batch by batch), the rest is appended, the logs are flushed, the sink marker is
written, the journal deleted (fsync) and the job's staging removed. Records are never retracted once
appended, and a decided commit always completes — or, when it can never complete, its journal is moved to
``journal/failed/`` and no longer blocks anything (docs/operations.md §6.1).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import struct
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from crc32c import crc32c

from kafkalog._durable import atomic_write, fsync_dir
from kafkalog.datadir import SINK_DIR
from kafkalog.errors import CorruptRecordError, KafkaError, KafkaStorageError, SinkError
from kafkalog.log.types import FetchIsolation
from kafkalog.records import MemoryRecords, TimestampType
from kafkalog.records.batch import HEADER, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from kafkalog.manager.log_manager import LogManager

__all__ = [
    "JOURNAL_VERSION",
    "PartitionResult",
    "apply_journal",
    "batch_fields",
    "failed_journal_dir",
    "finish_journal",
    "has_pending_journals",
    "iter_staged_batches",
    "journal_dir",
    "last_committed_batch",
    "parallel",
    "pending_journals",
    "remove_staging_dirs",
    "replay_pending",
    "sinks_dir",
    "staging_root",
    "write_journal",
    "write_marker",
]

_log = logging.getLogger("kafkalog.spark.commit")  # the logger's name is unchanged by the move
JOURNAL_VERSION: Final = 1
_SIZE: Final = struct.Struct(">qi")
_THREADS: Final = 2


def staging_root(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/staging``: one directory per job, one per task inside it."""
    return Path(data_dir) / SINK_DIR / "staging"


def journal_dir(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/journal``."""
    return Path(data_dir) / SINK_DIR / "journal"


def sinks_dir(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/sinks``."""
    return Path(data_dir) / SINK_DIR / "sinks"


def has_pending_journals(data_dir: str | Path) -> bool:
    """Whether a commit journal waits to be rolled forward (cheap: one directory listing)."""
    try:
        return any(name.endswith(".json") for name in os.listdir(journal_dir(data_dir)))
    except FileNotFoundError:
        return False


@dataclass(frozen=True)
class PartitionResult:
    """Where one partition's records of a job landed: offsets ``first..last`` (inclusive)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    records: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def _unlink_durably(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fsync_dir(path.parent)


def remove_staging_dirs(data_dir: Path, rel_dirs: Sequence[str]) -> None:
    """Delete staging directories (relative to the data dir), never anything outside the staging area, and a
    job directory once its last task directory is gone."""
    root = staging_root(data_dir).resolve()
    for rel in rel_dirs:
        target = (data_dir / rel).resolve()
        if root not in target.parents:  # never delete outside the staging area
            continue
        shutil.rmtree(target, ignore_errors=True)
        parent = target.parent
        if parent != root:
            with contextlib.suppress(OSError):
                parent.rmdir()  # the job directory, once its last task directory is gone


def iter_staged_batches(path: Path) -> Iterator[bytearray]:
    """The record batches of a staged file, one writable buffer each (a truncated file raises)."""
    with open(path, "rb") as f:
        while True:
            head = f.read(LOG_OVERHEAD)
            if not head:
                return
            if len(head) < LOG_OVERHEAD:
                raise CorruptRecordError(f"staged file {path} ends in a partial batch header")
            _, size = _SIZE.unpack(head)
            if size < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                raise CorruptRecordError(f"staged file {path}: impossible batch size {size}")
            buf = bytearray(LOG_OVERHEAD + size)
            buf[:LOG_OVERHEAD] = head
            if f.readinto(memoryview(buf)[LOG_OVERHEAD:]) != size:
                raise CorruptRecordError(f"staged file {path} ends in a partial batch")
            yield buf


def batch_fields(buf: bytearray | bytes | memoryview) -> tuple[int, int, int, int]:
    """(record count, stored CRC, codec, size) of a v2 batch buffer."""
    fields = HEADER.unpack_from(buf, 0)
    return fields[12], fields[4], fields[5] & 0x07, LOG_OVERHEAD + fields[1]


def _file_crc(path: Path) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = crc32c(chunk, crc)
    return crc


def _check_journal_files(data_dir: Path, journal: Mapping[str, Any]) -> None:
    """Before a replay appends anything: every staged file the journal names is inside the staging area and
    still what the commit checked (size, and the CRC-32C of the whole file where the journal records one)."""
    root = staging_root(data_dir).resolve()
    for entry in journal["partitions"]:
        for f in entry["files"]:
            path = (data_dir / f["path"]).resolve()
            if root not in path.parents:
                raise SinkError(
                    f"commit journal {journal['job_id']} names {f['path']}, outside the staging area"
                )
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                raise SinkError(
                    f"staged file {path} named by commit journal {journal['job_id']} is missing"
                ) from None
            if size != int(f["size"]):
                raise CorruptRecordError(
                    f"staged file {path} is {size} bytes, commit journal {journal['job_id']} recorded {f['size']}"
                )
            if "crc32c" in f and _file_crc(path) != int(f["crc32c"]):
                raise CorruptRecordError(
                    f"staged file {path} changed after commit journal {journal['job_id']} was written (CRC-32C)"
                )


# --- journal -----------------------------------------------------------------------------------------------


def write_journal(data_dir: Path, journal: Mapping[str, Any]) -> Path:
    """Write a commit journal durably (the commit point); its path."""
    jdir = journal_dir(data_dir)
    jdir.mkdir(parents=True, exist_ok=True)
    path = jdir / f"{journal['job_id']}.json"
    atomic_write(path, (json.dumps(journal, indent=1) + "\n").encode())
    fsync_dir(jdir.parent)  # .kafkalog-spark: the journal and staging directory entries
    fsync_dir(data_dir)  # the .kafkalog-spark entry itself
    return path


def _check_shape(path: Path, doc: Mapping[str, Any]) -> None:
    """A journal missing a field the replay reads is a :class:`KafkaError` before anything is replayed (never
    a ``KeyError`` half way): written atomically by this module, such a file was damaged by hand."""
    try:
        str(doc["job_id"])
        int(doc.get("created_ms", 0))
        for entry in doc["partitions"]:
            str(entry["topic"]), int(entry["partition"]), int(entry["base_offset"]), int(entry["records"])
            for f in entry["files"]:
                str(f["path"]), int(f["size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise KafkaError(f"malformed commit journal {path}: {type(exc).__name__}: {exc}") from None


def pending_journals(data_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """The pending journals of a data dir, oldest first; an unreadable one or one of another version is a
    :class:`KafkaError` (it is neither replayed nor quarantined: a newer version's must wait for it)."""
    jdir = journal_dir(data_dir)
    out: list[tuple[Path, dict[str, Any]]] = []
    if not jdir.is_dir():
        return out
    for path in jdir.glob("*.json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise KafkaError(f"unreadable commit journal {path}: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != JOURNAL_VERSION:
            version = doc.get("version") if isinstance(doc, dict) else doc
            raise KafkaError(f"commit journal {path} has unsupported version {version!r}")
        out.append((path, doc))
    out.sort(key=lambda item: (int(item[1].get("created_ms", 0)), item[0].name))
    return out


def _verified_prefix(
    manager: LogManager, topic: str, partition: int, base: int, leo: int, files: list[Path]
) -> int:
    """How many records of the staged batches are already in the log from ``base`` on (batch-wise match)."""
    log = manager.get_log(topic, partition)
    compare_crc = log.config.timestamp_type is TimestampType.CREATE_TIME
    offset = base
    for path in files:
        for buf in iter_staged_batches(path):
            if offset >= leo:
                return offset - base
            count, crc, codec, size = batch_fields(buf)
            found = manager.read(topic, partition, offset, max(size, 1 << 16), FetchIsolation.LOG_END)
            batch = next(iter(found.batches()), None)
            if batch is None or batch.base_offset != offset or (batch.count or 0) != count:
                return offset - base
            logged = HEADER.unpack_from(batch.to_bytes()[:RECORD_BATCH_OVERHEAD], 0)
            if compare_crc and (logged[5] & 0x07) == codec and logged[4] != crc:
                return offset - base
            offset += count
    return offset - base


def parallel(fn: Any, items: Sequence[Any]) -> list[Any]:
    """``[fn(item) for item in items]`` on up to 4 threads (partitions are independent; file I/O, CRC and the
    record kernels release the GIL); the first error is raised after every started call has finished."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(
        max_workers=min(_THREADS, len(items)), thread_name_prefix="kafkalog-commit"
    ) as pool:
        futures = [pool.submit(fn, item) for item in items]
        return [f.result() for f in futures]


def _apply_partition(
    manager: LogManager, data_dir: Path, job_id: str, entry: Mapping[str, Any]
) -> PartitionResult | None:
    topic, partition = entry["topic"], int(entry["partition"])
    base, total = int(entry["base_offset"]), int(entry["records"])
    files = [data_dir / f["path"] for f in entry["files"]]
    log = manager.get_log(topic, partition)
    leo = log.log_end_offset
    done = _verified_prefix(manager, topic, partition, base, leo, files) if leo > base else 0
    if leo < base:
        _log.warning("%s-%d ends at %d, below the journal's base offset %d", topic, partition, leo, base)
    first: int | None = base if done else None
    last = base + done - 1
    contiguous = leo == base + done or done == total
    seen = 0
    for path in files:
        for buf in iter_staged_batches(path):
            count = batch_fields(buf)[0]
            if seen + count <= done:
                seen += count
                continue
            info = manager.append(topic, partition, MemoryRecords(buf))
            seen += count
            if first is None:
                first = info.first_offset
            last = info.last_offset
    if not contiguous:
        _log.warning(
            "job %s: %s-%d was appended to by another writer before the journal was replayed; "
            "its remaining records start at %s instead of %d",
            job_id,
            topic,
            partition,
            first,
            base + done,
        )
    log.flush()
    if not total:
        return None
    assert first is not None
    return PartitionResult(topic, partition, first, last, total)


def apply_journal(manager: LogManager, data_dir: Path, journal: Mapping[str, Any]) -> list[PartitionResult]:
    """Append whatever of the journal's batches is not in the logs yet (partitions in parallel); flush."""
    job_id = str(journal["job_id"])
    results = parallel(lambda e: _apply_partition(manager, data_dir, job_id, e), journal["partitions"])
    return [r for r in results if r is not None]


def finish_journal(
    manager: LogManager,
    data_dir: Path,
    journal_path: Path,
    journal: Mapping[str, Any],
    results: list[PartitionResult],
) -> None:
    """A journal's last step: the sink marker (streaming), the journal deleted durably, its staging removed."""
    sink = journal.get("sink")
    if sink is not None:
        write_marker(data_dir, str(sink["id"]), int(sink["batch_id"]), str(journal["job_id"]), results)
    _unlink_durably(journal_path)
    remove_staging_dirs(data_dir, list(journal.get("cleanup", [])))


def failed_journal_dir(data_dir: str | Path) -> Path:
    """``journal/failed/``: journals whose replay could not complete (see :func:`replay_pending`)."""
    return journal_dir(data_dir) / "failed"


def _quarantine(
    manager: LogManager, data_dir: Path, path: Path, journal: Mapping[str, Any], error: str
) -> Path:
    ends: dict[str, dict[str, int]] = {}
    for entry in journal["partitions"]:
        topic, partition = str(entry["topic"]), int(entry["partition"])
        with contextlib.suppress(KafkaError):
            ends.setdefault(topic, {})[str(partition)] = manager.get_log(topic, partition).log_end_offset
    doc = {**journal, "error": error, "failed_ms": _now_ms(), "log_end_offsets": ends}
    fdir = failed_journal_dir(data_dir)
    fdir.mkdir(parents=True, exist_ok=True)
    target = fdir / path.name
    atomic_write(target, (json.dumps(doc, indent=1) + "\n").encode())
    _unlink_durably(path)
    return target


def _remove_temp_files(data_dir: Path) -> None:
    """Temp files of an atomic write a crash cut short (only ever written under the data dir's lock)."""
    for directory in (journal_dir(data_dir), sinks_dir(data_dir)):
        if directory.is_dir():
            for tmp in directory.glob("*.tmp"):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()


def replay_pending(manager: LogManager) -> list[str]:
    """Roll forward every pending commit journal in the manager's log dirs; the job ids replayed.

    Contract: needs the manager's lock (any :class:`LogManager` holds it); idempotent; journals are replayed
    oldest first, each one completely before the next. Before anything is appended, every staged file the
    journal names is checked against the journal (:func:`_check_journal_files`); which records are already in
    the log is decided batch by batch at ``[base_offset, log end)`` (record counts, and CRCs where the log
    keeps the staged bytes). A journal that can never complete (a staged file missing or changed, a topic
    deleted, a batch the log refuses: any :class:`~kafkalog.errors.KafkaError` but a storage error) is moved
    to ``journal/failed/<job>.json`` with the error and the partitions' log end offsets, logged as an error,
    and no longer blocks anything (docs/operations.md says what to do with it). An I/O error is raised and
    leaves the journal pending. Also removes the temp files of interrupted journal and marker writes.
    """
    done: list[str] = []
    for data_dir in manager.log_dirs:
        _remove_temp_files(data_dir)
        for path, journal in pending_journals(data_dir):
            _check_shape(path, journal)  # damaged by hand: raised as an unreadable journal is
            _log.info("replaying commit journal %s", path)
            try:
                _check_journal_files(data_dir, journal)
                results = apply_journal(manager, data_dir, journal)
            except KafkaStorageError:
                raise
            except KafkaError as exc:
                target = _quarantine(manager, data_dir, path, journal, f"{type(exc).__name__}: {exc}")
                _log.error(
                    "commit journal %s cannot be completed (%s): moved to %s; the job is incomplete "
                    "(docs/operations.md, Spark sink recovery)",
                    path,
                    exc,
                    target,
                )
                continue
            finish_journal(manager, data_dir, path, journal, results)
            done.append(str(journal["job_id"]))
    return done


# --- streaming sink markers --------------------------------------------------------------------------------


def _marker_path(data_dir: Path, sink_id: str) -> Path:
    return sinks_dir(data_dir) / f"{sink_id}.json"


def last_committed_batch(data_dir: str | Path, sink_id: str) -> int | None:
    """The last micro-batch id committed by a streaming sink, or None."""
    try:
        doc = json.loads(_marker_path(Path(data_dir), sink_id).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise KafkaError(f"unreadable sink marker for {sink_id!r}: {exc}") from None
    return int(doc["batch_id"])


def write_marker(
    data_dir: Path, sink_id: str, batch_id: int, job_id: str, results: list[PartitionResult]
) -> None:
    """Record a streaming sink's committed micro-batch (``sinks/<sink id>.json``; never moves backwards)."""
    previous = last_committed_batch(data_dir, sink_id)
    if previous is not None and previous >= batch_id:
        return
    offsets: dict[str, dict[str, list[int]]] = {}
    for r in results:
        offsets.setdefault(r.topic, {})[str(r.partition)] = [r.first_offset, r.last_offset]
    doc = {
        "version": 1,
        "sink_id": sink_id,
        "batch_id": batch_id,
        "job_id": job_id,
        "committed_ms": _now_ms(),
        "offsets": offsets,
    }
    sdir = sinks_dir(data_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    atomic_write(_marker_path(data_dir, sink_id), (json.dumps(doc, sort_keys=True) + "\n").encode())
