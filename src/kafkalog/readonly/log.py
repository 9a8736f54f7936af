"""Read-only view of a Kafka data directory that a writer may be appending to at the same moment.

Spark executors and planners, ``kafkalog consume --follow``, ``info`` and ``verify`` read data directories
while a writer process (a ``LogManager`` holding ``<log_dir>/.lock``) appends, rolls and deletes segments.
This module is how they do it. Invariants it owns:

* **Never writes.** No lock is taken, no file is created, renamed, truncated or deleted, no recovery runs;
  every file is opened ``O_RDONLY``. (``Log.open`` is never called: it deletes the clean-shutdown marker.)
* **Regular files only, never a wait.** Files are opened with
  :func:`~kafkalog.storage.files.open_regular` (``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``): a segment,
  index or snapshot that is a symlink, FIFO, directory or device and a partition directory that is a symlink
  are :class:`~kafkalog.errors.NotRegularFileError`, a segment name above ``2**63 - 1`` is a
  :class:`~kafkalog.errors.KafkaStorageError`; both are raised when the directory is listed (checkpoints of
  the log dir that are not regular files are ignored, as unreadable).
* **Never shows a torn batch.** :attr:`ReadOnlyLog.log_end_offset` is the offset after the last complete,
  CRC-valid v2 batch of the last segment. It is found by scanning forward from the last offset-index entry
  that checks out, stopping at the first partial, zero-filled (preallocated) or CRC-invalid batch; the scan
  position is kept, so :meth:`ReadOnlyLog.refresh` only reads what was appended since. Readers never go
  past an offset their caller bounded them to (the LEO, the high watermark or the LSO seen earlier).
* **Damage is never the end of the data, except at the tail.** A writer completes and trims a segment
  before it creates the next one, so a partial, overlong or zero-filled batch in a *rolled* segment (one
  with a later segment) is damage, as is a bad frame anywhere: readers get every batch before it, then a
  :class:`~kafkalog.errors.CorruptRecordError` naming the file and byte, or (``on_damage``) a report of the
  offsets lost and the next segment. Only the last segment's partial or zero-filled tail ends the data.
* **Index files are hints.** The active segment's ``.index``/``.timeindex`` are preallocated (zero-filled
  tail) and lag the data while a writer is live. Only the longest prefix of strictly ordered entries that
  lie inside the ``.log`` is used, and every offset-index entry used is checked against the batch header it
  points to (its last offset must match); otherwise the reader falls back to an earlier entry or to a scan
  from the segment start. A ``.timeindex`` decides that a segment can be skipped for a timestamp lookup
  only when it is trimmed (its last slot is a real entry), which the writer does when it rolls the segment.
* **Retention under a reader.** An open descriptor keeps a deleted segment readable. A segment gone before
  it is opened (also looked for under its ``.deleted`` name) means its offsets are lost: an
  :class:`~kafkalog.errors.OffsetOutOfRangeError` or ``on_missing`` callback; never a crash.
* **A segment's data ends at the next segment's base offset**: batches of a rolled segment starting at or
  after it are the next segment's (an archived segment straddling the first local one, ``tiered_path``), so
  no offset is handed out twice.
* Legacy v0/v1 entries are read (CRC-checked) and handed out up-converted to v2 batches.
* **One reader, several byte sources.** Every file is reached through a
  :class:`~kafkalog.objstore.PartitionSource` (a local directory:
  :class:`~kafkalog.readonly.local.LocalPartitionSource`, which keeps the rules above; a copy in object
  storage; a tiered-storage archive; a local directory with its archive) and the log dir's checkpoints
  through a :class:`LogDirState`. A copy is read as the directory it was copied from (a torn last segment ends
  the data, as recovery would); an archive's segments are complete, so its log end is its last segment's end
  as its metadata says (:class:`SegmentMetadata`) and it has no checkpoint (log start: its first segment;
  high watermark: its log end).

Offsets, as Kafka defines them for a log directory:

* log start offset: ``max(<log_dir>/log-start-offset-checkpoint entry, first segment's base offset)``;
* high watermark: the log end offset when ``<log_dir>/kafkalog-topics.json`` says ``"hw_follows_leo": true``
  (single-replica store), else the ``replication-offset-checkpoint`` entry clamped to
  ``[log start, log end]``, else the log end offset; in every case no further than the ``base_offset`` of
  the oldest Spark sink job still pending on the partition (``.kafkalog-spark/journal/``, read consistently
  with the log end through :func:`kafkalog.datadir.read_pending_sink_bounds`), so a sink job appears to
  readers all at once, when its commit completes (not applied when the caller gives the high watermark);
* last stable offset: the first offset of the oldest transaction still open, or completed by a marker at
  or above the high watermark, else the high watermark. Open transactions come from the newest producer
  snapshot (``<offset>.snapshot``, read with :func:`~kafkalog.log.producer_state.read_snapshot`) plus a
  replay of the batch headers after it (incremental across refreshes). ABORT markers seen by the replay
  complement the ``.txnindex`` files, which a writer updates just after it appends the marker.

Objects here are not thread-safe; use one per thread. They pickle as their constructor arguments.
"""

from __future__ import annotations

import contextlib
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from kafkalog.datadir import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_archive_location,
    read_pending_sink_bounds,
    read_topics,
)
from kafkalog.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    InvalidConfigurationError,
    KafkaError,
    LogDirNotFoundError,
    OffsetOutOfRangeError,
    RemoteResourceNotFoundError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition, parse_topic_partition_name
from kafkalog.log.producer_state import parse_snapshot
from kafkalog.objstore import ObjectStore, PartitionSource, RandomAccessFile
from kafkalog.readonly.local import LocalPartitionSource
from kafkalog.readonly.state import LogDirState, NoLogDirState, RemoteLayout, SegmentMetadata
from kafkalog.records import MemoryRecords, read_batch_at
from kafkalog.records import kernels as K
from kafkalog.records.batch import DefaultRecordBatch
from kafkalog.records.control import ControlRecordType
from kafkalog.records.framing import LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET
from kafkalog.storage.files import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)
from kafkalog.storage.txn_index import AbortedTxn, collect_aborted_txns, parse_txn_index

if TYPE_CHECKING:
    from kafkalog.tiered.crypto import KeyRing

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "BatchChunk",
    "LocalLogDirState",
    "LogDirState",
    "NoLogDirState",
    "ReadOnlyDataDir",
    "ReadOnlyLog",
    "RemoteLayout",
    "SegmentInfo",
    "SegmentMetadata",
    "is_url",
    "local_path",
    "recorded_archive_url",
]

#: Bytes read at a time by :meth:`ReadOnlyLog.iter_batch_chunks` (grown for a larger batch).
DEFAULT_CHUNK_BYTES: Final = 16 << 20
_TAIL_CHUNK_BYTES: Final = 1 << 20
_MAX_TABLE_COLUMNS: Final = 65536
_PARTITION_DIR = re.compile(r"^.+-\d+$")
#: Files only a log dir holds (Kafka's, and kafkalog's own).
_DATA_DIR_FILES: Final = (
    ".lock",
    "kafkalog-topics.json",
    "meta.properties",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    ".kafkalog-spark",
)

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]
OnDamage = Callable[[int, int, CorruptRecordError], None]
"""Told of a damaged segment: ``(first offset lost, offset reading resumes at, the error)``."""


class SegmentInfo(NamedTuple):
    """A segment as listed: base offset, ``.log`` size when listed, path of the ``.log`` file (for a source
    that is not a local directory: its name under the source's name)."""

    base_offset: int
    size_bytes: int
    path: Path


class BatchChunk(NamedTuple):
    """Complete v2 batches read from one segment, valid only until the iterator that yielded it advances.

    ``data`` starts at a batch boundary and holds exactly the batches of ``table`` (a scan table of
    :mod:`kafkalog.records.kernels`: ``table[K.F_X, i]`` is field X of batch ``i``, ``F_POS`` relative to
    ``data``). Bytes are not CRC-checked here (the columnar decoder checks them).
    """

    data: U8Array
    table: I64Array
    segment_base_offset: int
    file_position: int


# --- small readers ------------------------------------------------------------------------------------------


def _pread_into(file: RandomAccessFile, buf: U8Array, n: int, position: int) -> int:
    """Fill ``buf[:n]`` from ``position``; returns the bytes read (fewer at end of file). A file with a
    ``readinto(view, position)`` (a local descriptor) fills the buffer without a copy."""
    readinto = getattr(file, "readinto", None)
    if readinto is not None:
        got: int = readinto(memoryview(buf)[:n], position)  # type: ignore[arg-type]
        return got
    data = file.pread(n, position)
    got = len(data)
    buf[:got] = np.frombuffer(data, np.uint8)
    return got


def _prefetched(
    source: PartitionSource, current: RandomAccessFile, seg: SegmentInfo, k: int
) -> tuple[int, RandomAccessFile] | None:
    """The next segment's file of a scan, opened now and told to start fetching its first bytes, when the
    current one is a remote file that can (``prefetch``: a ranged or chunked object, whose first read
    would otherwise wait for a whole round trip at each segment start); None for local files."""
    if getattr(current, "prefetch", None) is None:
        return None
    try:
        upcoming = source.open(seg.path.name)
    except FileNotFoundError:
        return None  # the scan reports it when it gets there
    prefetch = getattr(upcoming, "prefetch", None)
    if prefetch is not None:
        prefetch(0)
    return k, upcoming


def _read_small(source: PartitionSource, name: str) -> bytes:
    try:
        return source.read(name)
    except FileNotFoundError:
        return b""


def _sibling(seg: SegmentInfo, suffix: str) -> str:
    """The name of ``seg``'s file with ``suffix`` (``.index``, ``.timeindex``, ``.txnindex``)."""
    return seg.path.name[: -len(LOG_FILE_SUFFIX)] + suffix


def _offset_index_hints(data: bytes, base_offset: int, log_size: int) -> tuple[I64Array, I64Array]:
    """(absolute offsets, positions) of the trustworthy prefix of a ``.index`` file (see module doc)."""
    n = len(data) // 8
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    raw = np.frombuffer(data, ">i4", count=2 * n).reshape(n, 2).astype(np.int64)
    rel, pos = raw[:, 0], raw[:, 1]
    ok = (rel >= 0) & (pos >= 0) & (pos < log_size)
    ok[1:] &= (rel[1:] > rel[:-1]) & (pos[1:] > pos[:-1])
    bad = np.flatnonzero(~ok)
    keep = int(bad[0]) if bad.shape[0] else n
    return rel[:keep] + base_offset, pos[:keep]


def _time_index_hints(data: bytes, base_offset: int) -> tuple[I64Array, I64Array, bool]:
    """(timestamps, absolute offsets, trimmed) of the trustworthy prefix of a ``.timeindex`` file."""
    n = len(data) // 12
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), False
    raw = np.frombuffer(data[: 12 * n], np.dtype([("ts", ">i8"), ("rel", ">i4")]))
    ts = raw["ts"].astype(np.int64)
    rel = raw["rel"].astype(np.int64)
    ok = rel >= 0
    ok[1:] &= (ts[1:] > ts[:-1]) & (rel[1:] >= rel[:-1])
    bad = np.flatnonzero(~ok)
    keep = int(bad[0]) if bad.shape[0] else n
    trimmed = keep == n and len(data) == 12 * n and ts[-1] != 0
    return ts[:keep], rel[:keep] + base_offset, trimmed


def _header_offsets(file: RandomAccessFile, position: int) -> tuple[int, int] | None:
    """(base offset, last offset) of the v2 batch whose header is at ``position``, or None if there is none."""
    head = file.pread(LOG_OVERHEAD + 15, position)
    if len(head) < 27 or head[MAGIC_OFFSET] != 2:
        return None
    base = int.from_bytes(head[0:8], "big", signed=True)
    return base, base + int.from_bytes(head[23:27], "big", signed=True)


def _header_last_offset(file: RandomAccessFile, position: int) -> int | None:
    """The last offset of the v2 batch whose header is at ``position``, or None if there is none."""
    offsets = _header_offsets(file, position)
    return None if offsets is None else offsets[1]


def _ignore_missing(first: int, last: int) -> None:
    """An ``on_missing`` callback that ignores the gap."""


def _ignore_damage(first: int, last: int, error: CorruptRecordError) -> None:
    """An ``on_damage`` callback that skips the damaged segment silently."""


def _load_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return dict(offset_checkpoint(path).read())
    except (KafkaError, OSError, ValueError):
        return {}


def _hw_follows_leo(log_dir: Path) -> bool:
    """Whether the log dir's ``kafkalog-topics.json`` says the high watermark follows the log end offset."""
    try:
        document = read_topics(log_dir)
    except (KafkaError, OSError):
        return False
    return document is not None and document.hw_follows_leo


_T = TypeVar("_T")


class LocalLogDirState:
    """The checkpoints and sink journal of a local log dir, read afresh at each refresh (see the module doc)."""

    __slots__ = ("path",)

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __reduce__(self) -> tuple[type[LocalLogDirState], tuple[Path]]:
        return type(self), (self.path,)

    def look(self, tp: TopicPartition, read: Callable[[], _T]) -> tuple[_T, int | None]:
        """``read()`` with the pending sink jobs' bound (:func:`~kafkalog.datadir.read_pending_sink_bounds`)."""
        value, pending = read_pending_sink_bounds(self.path, read)
        return value, pending.get((tp.topic, tp.partition))

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The ``log-start-offset-checkpoint`` entry (0 if none or unreadable)."""
        return _load_checkpoint(self.path / LOG_START_OFFSET_CHECKPOINT).get(tp, 0)

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """None when ``hw_follows_leo``, else the ``replication-offset-checkpoint`` entry (None if none)."""
        if _hw_follows_leo(self.path):
            return None
        return _load_checkpoint(self.path / REPLICATION_OFFSET_CHECKPOINT).get(tp)


class _TxnState:
    """Producer transactions replayed from a snapshot up to ``position`` (the next offset to replay)."""

    __slots__ = ("aborted", "completed", "ongoing", "position")

    def __init__(self, snapshot_offset: int, ongoing: dict[int, int]) -> None:
        self.position = snapshot_offset
        self.ongoing = ongoing  # producer id -> first offset of its open transaction
        self.completed: list[tuple[int, int]] = []  # (first offset, marker offset), markers maybe >= HW
        self.aborted: list[AbortedTxn] = []


# --- one partition ------------------------------------------------------------------------------------------


class ReadOnlyLog:
    """Read-only view of one partition directory ``<topic>-<n>`` (see the module doc for the rules).

    ``directory`` is a local partition directory (its log dir, the parent, has the checkpoints), or any
    :class:`~kafkalog.objstore.PartitionSource` (a copy in object storage, a tiered-storage archive, a
    union of both) with its ``topic_partition`` (default: parsed from the source's name) and the
    ``log_dir`` state of its checkpoints (default: none, as in an archive).
    """

    def __init__(
        self,
        directory: Path | str | PartitionSource,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        *,
        topic_partition: TopicPartition | None = None,
        log_dir: LogDirState | None = None,
    ) -> None:
        if isinstance(directory, (str, Path)):
            self.dir = Path(directory)
            self.source: PartitionSource = LocalPartitionSource(self.dir)
            self._local = True
            self._log_dir: LogDirState = LocalLogDirState(self.dir.parent) if log_dir is None else log_dir
        else:
            self.source = directory
            self.dir = Path(directory.name)  # for messages and the default topic-partition only
            self._local = False
            self._log_dir = NoLogDirState() if log_dir is None else log_dir
        self.topic_partition = (
            parse_topic_partition_name(self.dir) if topic_partition is None else topic_partition
        )
        self._given_log_start = log_start_offset
        self._given_hw = high_watermark
        self._segments: list[SegmentInfo] = []
        self._tail: tuple[int, int, int] | None = None  # (segment base, verified position, next offset)
        self._log_start = 0
        self._leo = 0
        self._hw = 0
        self._txn: _TxnState | None = None
        self._lso: int | None = None
        self._loaded = False

    @classmethod
    def open(
        cls, partition_dir: Path | str, log_start_offset: int | None = None, high_watermark: int | None = None
    ) -> ReadOnlyLog:
        """A view of ``partition_dir``; offsets are read on first use (``None``: from the parent dir)."""
        return cls(partition_dir, log_start_offset, high_watermark)

    def __reduce__(self) -> tuple[object, ...]:
        if (
            self._local
            and isinstance(self._log_dir, LocalLogDirState)
            and self._log_dir.path == self.dir.parent
        ):
            return type(self), (self.dir, self._given_log_start, self._given_hw)
        return _rebuild, (
            self.source,
            self._given_log_start,
            self._given_hw,
            self.topic_partition,
            self._log_dir,
        )

    def __repr__(self) -> str:
        return f"ReadOnlyLog({self.source.name!r})"

    def restricted(self, start_offset: int, end_offset: int) -> ReadOnlyLog | None:
        """A view of the same partition whose source holds only the planned segments with offsets
        ``[start_offset, end_offset)`` (a tiered-storage archive: its listing and manifests already read),
        to pickle to an executor that then reads them with no listing or manifest request; None when the
        source has no planned state to carry (a local directory, a log-dir copy)."""
        clip = getattr(self.source, "within", None)
        if clip is None:
            return None
        return ReadOnlyLog(
            clip(start_offset, end_offset),
            self._given_log_start,
            self._given_hw,
            topic_partition=self.topic_partition,
            log_dir=self._log_dir,
        )

    @property
    def name(self) -> str:
        """What errors call the partition: its directory or its source's URL (never a credential)."""
        return self.source.name

    @property
    def is_local(self) -> bool:
        """Whether the partition is a local directory (``dir``), not object storage."""
        return self._local

    # --- listing and offsets ------------------------------------------------------------------------------
    def list_segments(self) -> list[SegmentInfo]:
        """The ``.log`` files now in the partition, by base offset (cheap: one listing)."""
        found: list[SegmentInfo] = []
        fast = getattr(self.source, "list_segment_files", None)
        if fast is not None:  # a local directory: only the .log entries are looked at
            found = [SegmentInfo(base, size, Path(path)) for base, size, path in fast()]
            found.sort()
            return found
        files = self.source.list_files()
        base_path = self.dir
        for name in files:
            if not name.endswith(LOG_FILE_SUFFIX):
                continue
            try:
                base = offset_from_file_name(name)  # KafkaStorageError above int64
            except ValueError:
                continue
            found.append(SegmentInfo(base, files[name], base_path / name))
        found.sort()
        return found

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.refresh()

    @property
    def segments(self) -> list[SegmentInfo]:
        """Segments as of the last :meth:`refresh`: ``(base_offset, size_bytes, path)``."""
        self._ensure_loaded()
        return list(self._segments)

    @property
    def log_start_offset(self) -> int:
        """First offset readers may ask for."""
        self._ensure_loaded()
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset after the last complete, CRC-valid batch."""
        self._ensure_loaded()
        return self._leo

    @property
    def high_watermark(self) -> int:
        """The offset up to which data is committed (``read_uncommitted`` readers stop here)."""
        self._ensure_loaded()
        return self._hw

    @property
    def tail_position(self) -> tuple[int, int] | None:
        """(base offset of the last segment, byte where its complete, CRC-valid data ends) as of the last
        refresh; None without segments. Below the segment's size: a torn or preallocated tail."""
        self._ensure_loaded()
        return None if self._tail is None else (self._tail[0], self._tail[1])

    @property
    def last_stable_offset(self) -> int:
        """The offset ``read_committed`` readers stop at (computed on first use after a refresh)."""
        self._ensure_loaded()
        if self._lso is None:
            state = self._txn_state()
            unstable = [*state.ongoing.values(), *(f for f, last in state.completed if last >= self._hw)]
            lso = min([self._hw, *unstable])
            self._lso = max(self._log_start, lso)
        return self._lso

    def refresh(self) -> None:
        """Re-read the directory: new segments, new appends, segments deleted by retention, checkpoints."""
        self._loaded = True

        def look() -> tuple[list[SegmentInfo], int]:
            self._segments = self.list_segments()
            return self._segments, self._scan_tail()

        tp = self.topic_partition
        if self._given_hw is None:  # the view stops before a Spark sink job that is still being appended
            (_, self._leo), sink_bound = self._log_dir.look(tp, look)
        else:
            _, self._leo = look()
            sink_bound = None
        first_base = self._segments[0].base_offset if self._segments else self._leo
        start = self._given_log_start
        if start is None:
            start = self._log_dir.log_start_offset(tp)
        self._log_start = min(max(start, first_base), self._leo)
        hw = self._given_hw
        if hw is None:
            hw = self._log_dir.high_watermark(tp)
        self._hw = self._leo if hw is None else min(max(hw, self._log_start), self._leo)
        if sink_bound is not None:
            self._hw = max(self._log_start, min(self._hw, sink_bound))
        self._lso = None

    def _scan_tail(self) -> int:
        """The log end offset: continue the last verified scan, or start one from the best index hint."""
        if not self._segments:
            self._tail = None
            return self._given_log_start or 0
        seg = self._segments[-1]
        known = getattr(self.source, "segment_end_offset", None)
        end = None if known is None else known(seg.base_offset)
        if end is not None:  # a complete, archived segment: its end is in its metadata
            self._tail = (seg.base_offset, seg.size_bytes, end + 1)
            return int(end) + 1
        try:
            file = self.source.open(seg.path.name)
        except FileNotFoundError:
            self._tail = None
            return seg.base_offset
        try:
            size = file.size
            tail = self._tail
            if tail is not None and tail[0] == seg.base_offset and tail[1] <= size:
                pos, next_offset = tail[1], tail[2]
            else:
                pos, next_offset = self._tail_start(file, seg, size)
            pos, next_offset = _valid_end(file, size, pos, next_offset)
        finally:
            file.close()
        self._tail = (seg.base_offset, pos, next_offset)
        return next_offset

    def _tail_start(self, file: RandomAccessFile, seg: SegmentInfo, size: int) -> tuple[int, int]:
        """(position, next offset) of the last verified offset-index entry, else the segment start."""
        offsets, positions = _offset_index_hints(
            _read_small(self.source, _sibling(seg, INDEX_FILE_SUFFIX)), seg.base_offset, size
        )
        for i in range(offsets.shape[0] - 1, max(-1, offsets.shape[0] - 4), -1):
            header = _header_offsets(file, int(positions[i]))
            if header is not None and header[1] == int(offsets[i]):
                # the scan verifies the batch there; if it is torn, the log ends before it: at its base offset
                return int(positions[i]), header[0]
        return 0, seg.base_offset

    def _segment_index_for(self, offset: int, segments: list[SegmentInfo]) -> int:
        """Index of the segment that would hold ``offset`` (the last with base <= offset; 0 if none)."""
        return max(0, bisect_right([s.base_offset for s in segments], offset) - 1)

    def _start_position(self, file: RandomAccessFile, seg: SegmentInfo, size: int, offset: int) -> int:
        """A verified file position at or before the batch holding ``offset`` (offset-index hint, or 0)."""
        if offset <= seg.base_offset:
            return 0
        offsets, positions = _offset_index_hints(
            _read_small(self.source, _sibling(seg, INDEX_FILE_SUFFIX)), seg.base_offset, size
        )
        i = int(np.searchsorted(offsets, offset, side="right")) - 1
        for j in range(i, max(-1, i - 3), -1):
            if _header_last_offset(file, int(positions[j])) == int(offsets[j]):
                return int(positions[j])
        return 0

    # --- reading ------------------------------------------------------------------------------------------
    def iter_batch_chunks(
        self,
        start_offset: int,
        end_offset: int,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        on_missing: Callable[[int, int], None] | None = None,
        on_damage: OnDamage | None = None,
        on_gap: Callable[[int, int], None] | None = None,
    ) -> Iterator[BatchChunk]:
        """Complete batches that hold offsets in ``[start_offset, end_offset)``, read in large chunks.

        The caller bounds ``end_offset`` (by an offset it saw earlier: LEO, HW or LSO), so no batch past it
        is looked at. Offsets that should be there but are not (segments deleted by retention, a log
        shorter than ``end_offset``) are reported as ``on_missing(from, to)``; without a callback they raise
        :class:`OffsetOutOfRangeError`. In the last segment a partial or zero-filled (preallocated) tail ends
        the data (what a writer in progress or a crash leaves); in a rolled segment (one with a later
        segment) it is damage, like any other framing damage: the batches before it are yielded, then
        :class:`CorruptRecordError` is raised, or with ``on_damage`` the rest of that segment is skipped:
        ``on_damage(from, to, error)`` gets the offsets lost (up to the next segment's base offset) and the
        iteration goes on with the next segment. Offsets between the end of a segment's data and the next
        segment's base offset are ``on_gap(from, to)`` (normal in a compacted log; a hole, a segment missing
        or emptied, in any other; ignored without a callback). Legacy v0/v1 entries (CRC-checked) are
        up-converted to v2 batches (``MemoryRecords.up_convert``: offsets and timestamps kept).
        """
        if end_offset <= start_offset:
            return

        def missing(lo: int, hi: int) -> None:
            if on_missing is None:
                raise OffsetOutOfRangeError(
                    f"offsets [{lo}, {hi}) of partition {self.topic_partition} are no longer available"
                )
            on_missing(lo, hi)

        segments = self.list_segments()
        if not segments or segments[0].base_offset > start_offset:
            hi = min(end_offset, segments[0].base_offset) if segments else end_offset
            missing(start_offset, hi)
            start_offset = hi
        covered = start_offset  # every offset below this was yielded or is known to be absent
        buf = np.empty(max(chunk_bytes, K.BATCH_HEADER_SIZE), np.uint8)
        table = np.empty((K.N_BATCH_FIELDS, min(_MAX_TABLE_COLUMNS, buf.shape[0] // 61 + 1)), np.int64)
        first = self._segment_index_for(start_offset, segments)
        upcoming: tuple[int, RandomAccessFile] | None = None  # the next segment's file, prefetching
        try:
            for k in range(first, len(segments)):
                seg = segments[k]
                if seg.base_offset >= end_offset:
                    return
                try:
                    if upcoming is not None and upcoming[0] == k:
                        file, upcoming = upcoming[1], None
                    else:
                        file = self.source.open(seg.path.name)
                except FileNotFoundError:
                    upper = segments[k + 1].base_offset if k + 1 < len(segments) else end_offset
                    if covered < min(upper, end_offset):
                        missing(covered, min(upper, end_offset))
                    covered = max(covered, min(upper, end_offset))
                    continue
                rolled = k + 1 < len(segments)  # a later segment exists: this one was complete when rolled
                if upcoming is None and rolled and segments[k + 1].base_offset < end_offset:
                    upcoming = _prefetched(self.source, file, segments[k + 1], k + 1)
                # A segment's data ends where the next segment begins: an archived segment that straddles the first
                # local offset (the uploading leader rolled elsewhere) is read only below it, never twice.
                stop = min(segments[k + 1].base_offset, end_offset) if rolled else end_offset
                clipped = False
                try:
                    size = file.size
                    pos = self._start_position(file, seg, size, start_offset) if k == first else 0
                    while pos < size and not clipped:
                        want = min(buf.shape[0], size - pos)
                        n = _pread_into(file, buf, want, pos)
                        if n < want:  # the file shrank (a preallocated segment trimmed when it rolled)
                            size = pos + n
                        view = buf[:n]
                        scan_pos = 0
                        while True:
                            scan = K.scan_batches(
                                view, scan_pos, n, skip_below=start_offset, stop_offset=stop, table=table
                            )
                            if scan.n:
                                t = table[:, : scan.n]
                                lo = int(t[K.F_POS, 0])
                                hi = int(t[K.F_POS, -1] + t[K.F_SIZE, -1])
                                covered = max(
                                    covered, int(t[K.F_BASE_OFFSET, -1] + t[K.F_LAST_OFFSET_DELTA, -1]) + 1
                                )
                                t[K.F_POS] -= lo
                                yield BatchChunk(view[lo:hi], t, seg.base_offset, pos + lo)
                            scan_pos = scan.next_pos
                            if scan.code != K.SCAN_MORE:
                                break
                        code = scan.code
                        if code == K.SCAN_STOP_OFFSET:
                            if stop >= end_offset:
                                return
                            clipped = True  # the rest of this segment is the next one's offsets
                        elif code == K.SCAN_END:
                            pos += n
                        elif code == K.SCAN_PARTIAL:
                            if pos + n >= size:
                                if rolled:
                                    raise _torn_rolled_segment(seg.path, pos + scan_pos, size)
                                break  # a partial tail: the end of this segment's complete data
                            if scan_pos == 0:  # one batch larger than the buffer
                                buf = _grown(buf, view, size - pos)
                            pos += scan_pos
                        elif _is_zero_tail(view, scan_pos, code):
                            if rolled:
                                raise _torn_rolled_segment(seg.path, pos + scan_pos, size)
                            break
                        elif code == K.ERR_LEGACY_MAGIC:
                            stop = _legacy_end(view, scan_pos, pos)
                            if stop == scan_pos:  # a legacy entry cut by the end of the buffer
                                if pos + n >= size:
                                    if rolled:
                                        raise _torn_rolled_segment(seg.path, pos + scan_pos, size)
                                    break
                                if scan_pos == 0:
                                    buf = _grown(buf, view, size - pos)
                                pos += scan_pos
                                continue
                            legacy, stopped = _up_converted(view[scan_pos:stop], start_offset, end_offset)
                            if legacy is not None:
                                t = legacy.table
                                covered = max(
                                    covered, int(t[K.F_BASE_OFFSET, -1] + t[K.F_LAST_OFFSET_DELTA, -1]) + 1
                                )
                                yield BatchChunk(legacy.data, t, seg.base_offset, pos + scan_pos)
                            if stopped:
                                return
                            pos += stop
                        else:
                            raise CorruptRecordError(
                                f"{K.ERROR_MESSAGES.get(code, f'error code {code}')} in {seg.path}",
                                position=pos + scan_pos,
                            )
                except CorruptRecordError as exc:
                    if on_damage is None:
                        raise
                    upper = min(segments[k + 1].base_offset, end_offset) if rolled else end_offset
                    on_damage(covered, max(covered, upper), exc)
                    if not rolled:
                        return
                    covered = max(covered, upper)
                finally:
                    file.close()
                if k + 1 < len(segments):
                    upper = min(segments[k + 1].base_offset, end_offset)
                    if on_gap is not None and covered < upper:
                        on_gap(covered, upper)
                    covered = max(covered, upper)
        finally:
            if upcoming is not None:
                upcoming[1].close()
        if covered < end_offset:
            missing(covered, end_offset)

    def read(
        self,
        start_offset: int,
        max_bytes: int = 1 << 20,
        end_offset: int | None = None,
        *,
        on_damage: OnDamage | None = None,
        on_gap: Callable[[int, int], None] | None = None,
    ) -> MemoryRecords:
        """Whole batches from the one holding ``start_offset``: at most ``max_bytes`` (at least one batch),
        none starting at or after ``end_offset`` (default: the log end offset). Data of one segment only.

        Raises :class:`OffsetOutOfRangeError` outside ``[log_start_offset, log_end_offset]`` or when the
        segment is deleted before it can be opened. Damage (:meth:`iter_batch_chunks`) ends the read after
        the whole batches before it, which are returned; a read that starts at the damage raises
        :class:`CorruptRecordError`, unless ``on_damage`` is given (then the damaged rest of the segment is
        skipped, as :meth:`iter_batch_chunks` does). ``on_gap`` as in :meth:`iter_batch_chunks`.
        """
        self._ensure_loaded()
        upper = self._leo if end_offset is None else min(end_offset, self._leo)
        if start_offset < self._log_start or start_offset > self._leo:
            raise OffsetOutOfRangeError(
                f"received request for offset {start_offset} for partition {self.topic_partition}, but the log "
                f"holds offsets [{self._log_start}, {self._leo})"
            )
        parts: list[bytes] = []
        total = 0
        segment: int | None = None
        chunk_bytes = max(64 << 10, min(max_bytes, 8 << 20))
        chunks = self.iter_batch_chunks(
            start_offset, upper, chunk_bytes=chunk_bytes, on_damage=on_damage, on_gap=on_gap
        )
        try:
            for chunk in chunks:
                if segment is not None and chunk.segment_base_offset != segment:
                    break
                segment = chunk.segment_base_offset
                ends = np.cumsum(chunk.table[K.F_SIZE])
                fit = int(np.searchsorted(ends, max_bytes - total, side="right"))
                if total == 0:
                    fit = max(fit, 1)
                if fit:
                    nbytes = int(ends[fit - 1])
                    parts.append(chunk.data[:nbytes].tobytes())
                    total += nbytes
                if fit < ends.shape[0]:
                    break
        except CorruptRecordError:
            if not parts:
                raise  # the damage is where this read starts
        return MemoryRecords(b"".join(parts))

    def offset_for_timestamp(self, timestamp: int, *, upper_offset: int | None = None) -> int | None:
        """The earliest offset whose record timestamp is >= ``timestamp`` (Kafka's ``offsetsForTimes``):
        first record in log order at or after the log start offset; ``None`` if no record below
        ``upper_offset`` (default: the log end offset) has one."""
        upper = self._timestamp_upper(upper_offset)
        for seg, nxt, from_offset in self._timestamp_candidates(timestamp, upper):
            found = self._search_timestamp(seg, timestamp, from_offset, min(upper, nxt or upper))
            if found is not None:
                return found
        return None

    def offset_hint_for_timestamp(self, timestamp: int, *, upper_offset: int | None = None) -> int:
        """An offset at or before :meth:`offset_for_timestamp`'s answer found from the time indexes alone (no
        record is read): every record below it has a smaller timestamp. Rolled segments whose largest
        timestamp (last time-index entry) is below ``timestamp`` are skipped; in the next segment it is the
        offset of the last time-index entry below ``timestamp`` (the largest timestamp so far there), else the
        segment's base offset. At most ``upper_offset`` (default: the log end offset), which also stands for
        "none"."""
        upper = self._timestamp_upper(upper_offset)
        for _seg, _nxt, from_offset in self._timestamp_candidates(timestamp, upper):
            return min(upper, from_offset)
        return upper

    def _timestamp_upper(self, upper_offset: int | None) -> int:
        self._ensure_loaded()
        return self._leo if upper_offset is None else min(upper_offset, self._leo)

    def _timestamp_candidates(
        self, timestamp: int, upper: int
    ) -> Iterator[tuple[SegmentInfo, int | None, int]]:
        """The segments that may hold the first record with a timestamp >= ``timestamp``, in log order, each
        with the next segment's base offset (None for the last) and the offset to search from: the last
        time-index entry below ``timestamp`` (every record before it is older), else the segment's base offset,
        never below the log start offset. Rolled segments whose largest timestamp (their last time-index
        entry) is below ``timestamp`` are passed over; the walk ends at ``upper``."""
        segments = self._segments
        max_timestamp = getattr(self.source, "segment_max_timestamp", None)
        for k, seg in enumerate(segments):
            nxt = segments[k + 1].base_offset if k + 1 < len(segments) else None
            if nxt is not None and nxt <= self._log_start:
                continue
            if seg.base_offset >= upper:
                return
            known = None if max_timestamp is None else max_timestamp(seg.base_offset)
            if nxt is not None and known is not None and known < timestamp:
                continue  # its metadata says every record is older (no index read)
            ts, offsets, trimmed = _time_index_hints(
                _read_small(self.source, _sibling(seg, TIME_INDEX_FILE_SUFFIX)), seg.base_offset
            )
            if nxt is not None and trimmed and ts.shape[0] and int(ts[-1]) < timestamp:
                continue  # a rolled segment's last time-index entry is its largest timestamp
            i = int(np.searchsorted(ts, timestamp, side="left")) - 1
            yield seg, nxt, max(self._log_start, int(offsets[i]) if i >= 0 else seg.base_offset)

    def _search_timestamp(self, seg: SegmentInfo, timestamp: int, from_offset: int, upper: int) -> int | None:
        """First record of ``seg`` in ``[from_offset, upper)`` with a timestamp >= ``timestamp``."""
        if from_offset >= upper:
            return None
        for chunk in self.iter_batch_chunks(
            from_offset, upper, on_missing=_ignore_missing, on_damage=_ignore_damage
        ):
            if chunk.segment_base_offset != seg.base_offset:
                return None
            t = chunk.table
            data_batches = (t[K.F_ATTRIBUTES] & K.ATTR_CONTROL) == 0
            for i in np.flatnonzero(data_batches & (t[K.F_MAX_TIMESTAMP] >= timestamp)).tolist():
                batch = DefaultRecordBatch(memoryview(chunk.data), int(t[K.F_POS, i]))  # type: ignore[arg-type]
                for record in batch.records():
                    if from_offset <= record.offset < upper and record.timestamp >= timestamp:
                        return int(record.offset)
        return None

    # --- transactions -------------------------------------------------------------------------------------
    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, end_offset)`` (``.txnindex`` files plus markers
        the replay saw), sorted by first offset."""
        self._ensure_loaded()
        found: dict[tuple[int, int], AbortedTxn] = {}
        segments = self._segments
        for seg in segments[self._segment_index_for(start_offset, segments) :]:
            name = _sibling(seg, TXN_INDEX_FILE_SUFFIX)
            try:
                entries = parse_txn_index(_read_small(self.source, name), f"{self.source.name}/{name}")
            except KafkaError:
                continue
            result = collect_aborted_txns(entries, start_offset, end_offset)
            for txn in result.aborted_transactions:
                found[(txn.producer_id, txn.last_offset)] = txn
            if result.is_complete:
                break
        for txn in self._txn_state().aborted:
            if txn.last_offset >= start_offset and txn.first_offset < end_offset:
                found.setdefault((txn.producer_id, txn.last_offset), txn)
        return sorted(found.values(), key=lambda t: (t.first_offset, t.last_offset))

    def _txn_state(self) -> _TxnState:
        """Transactions as of the log end offset: newest usable snapshot plus an incremental replay."""
        state = self._txn
        if state is None or state.position > self._leo or state.position < self._log_start:
            state = self._snapshot_state()
        if state.position < self._leo:
            self._replay(state, self._leo)
        state.completed = [(f, last) for f, last in state.completed if last >= self._hw]
        self._txn = state
        return state

    def _snapshot_state(self) -> _TxnState:
        snapshots: list[tuple[int, str]] = []
        for name in self.source.list_files():
            if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    snapshots.append((offset_from_file_name(name), name))
                except (ValueError, KafkaError):
                    continue
        first_base = self._segments[0].base_offset if self._segments else 0
        for offset, name in sorted(snapshots, reverse=True):
            if offset > self._leo or offset < first_base:
                continue
            try:
                entries = parse_snapshot(self.source.read(name), f"{self.source.name}/{name}")
            except (CorruptSnapshotError, OSError):
                continue
            ongoing = {
                e.producer_id: e.current_txn_first_offset
                for e in entries
                if e.current_txn_first_offset is not None
            }
            return _TxnState(offset, ongoing)
        return _TxnState(first_base, {})

    def _replay(self, state: _TxnState, end_offset: int) -> None:
        """Advance ``state`` over the transactional batches in ``[state.position, end_offset)``."""
        # a damaged segment is the readers' error to report; the replay goes on after it
        for chunk in self.iter_batch_chunks(
            state.position, end_offset, on_missing=_ignore_missing, on_damage=_ignore_damage
        ):
            t = chunk.table
            txn = np.flatnonzero((t[K.F_ATTRIBUTES] & K.ATTR_TRANSACTIONAL) != 0)
            for i in txn.tolist():
                pid = int(t[K.F_PRODUCER_ID, i])
                base = int(t[K.F_BASE_OFFSET, i])
                if base < state.position:
                    continue
                if not int(t[K.F_ATTRIBUTES, i]) & K.ATTR_CONTROL:
                    state.ongoing.setdefault(pid, base)
                    continue
                batch = DefaultRecordBatch(memoryview(chunk.data), int(t[K.F_POS, i]))  # type: ignore[arg-type]
                marker = batch.end_transaction_marker()
                if marker is None:
                    continue
                first = state.ongoing.pop(pid, base)
                state.completed.append((first, base))
                if marker.control_type is ControlRecordType.ABORT:
                    state.aborted.append(AbortedTxn(pid, first, base, -1))
        state.position = end_offset
        state.aborted = [t for t in state.aborted if t.last_offset >= self._log_start]


def _rebuild(
    source: PartitionSource,
    log_start_offset: int | None,
    high_watermark: int | None,
    topic_partition: TopicPartition,
    log_dir: LogDirState,
) -> ReadOnlyLog:
    """Unpickle a :class:`ReadOnlyLog` of a source other than a local directory."""
    return ReadOnlyLog(
        source, log_start_offset, high_watermark, topic_partition=topic_partition, log_dir=log_dir
    )


def _grown(buf: U8Array, view: U8Array, remaining: int) -> U8Array:
    """A buffer for the batch at ``view[0]`` that does not fit ``buf``: its size, at most ``remaining``."""
    need = int.from_bytes(view[LENGTH_OFFSET:LOG_OVERHEAD].tobytes(), "big", signed=True) + LOG_OVERHEAD
    return np.empty(min(max(need, 2 * buf.shape[0]), remaining), np.uint8)


def _legacy_end(view: U8Array, pos: int, file_pos: int) -> int:
    """End of the run of complete, CRC-valid legacy (v0/v1) entries at ``view[pos]``."""
    mv = memoryview(view)  # type: ignore[arg-type]
    while True:
        batch = read_batch_at(mv, pos, len(mv), origin=file_pos)
        if batch is None or batch.magic >= 2:
            return pos
        if not batch.is_valid():
            raise CorruptRecordError("legacy record CRC mismatch", position=file_pos + pos)
        pos += batch.size_in_bytes


def _up_converted(data: U8Array, start_offset: int, end_offset: int) -> tuple[BatchChunk | None, bool]:
    """Legacy entries as v2 batches (offsets, timestamps kept; ``MemoryRecords.up_convert``) with their scan
    table, restricted to ``[start_offset, end_offset)`` (``None`` when nothing is in range), and whether the
    scan stopped at ``end_offset``."""
    converted = K.as_uint8(MemoryRecords(data.tobytes()).up_convert().buffer)
    scan = K.scan_batches(
        converted,
        max_batches=converted.shape[0] // K.BATCH_HEADER_SIZE + 1,
        skip_below=start_offset,
        stop_offset=end_offset,
    )
    stopped = scan.code == K.SCAN_STOP_OFFSET
    if scan.n == 0:
        return None, stopped
    t = scan.table[:, : scan.n]
    lo = int(t[K.F_POS, 0])
    hi = int(t[K.F_POS, -1] + t[K.F_SIZE, -1])
    t[K.F_POS] -= lo
    return BatchChunk(converted[lo:hi], t, 0, 0), stopped


def _torn_rolled_segment(path: Path, position: int, size: int) -> CorruptRecordError:
    """The error for a rolled segment whose data stops before its end (a writer trims and completes a segment
    before it starts the next one, so only damage leaves a partial, overlong or zero-filled batch there)."""
    return CorruptRecordError(
        f"the batch at byte {position} of the rolled segment {path} is partial, overlong or zero-filled (the "
        f"file has {size} bytes): the segment is damaged",
        position=position,
    )


def _is_zero_tail(view: U8Array, pos: int, code: int) -> bool:
    """Whether the frame error at ``pos`` is a zero-filled (preallocated, never written) region."""
    return code == K.ERR_FRAME_SIZE and not view[pos : pos + LOG_OVERHEAD].any()


def _valid_end(file: RandomAccessFile, size: int, pos: int, next_offset: int) -> tuple[int, int]:
    """Walk complete, CRC-valid batches from ``pos``; returns (end position, next offset after them)."""
    buf = np.empty(_TAIL_CHUNK_BYTES, np.uint8)
    while pos < size:
        want = min(buf.shape[0], size - pos)
        n = _pread_into(file, buf, want, pos)
        if n < want:  # the file shrank (a preallocated segment trimmed when it rolled)
            size = pos + n
        view = buf[:n]
        scan_pos = 0
        while True:
            scan = K.scan_batches(view, scan_pos, n)
            if scan.n:
                bad, _ = K.verify_crcs(view, scan.table, scan.n)
                good = scan.n if bad < 0 else bad
                if good:
                    t = scan.table
                    next_offset = int(t[K.F_BASE_OFFSET, good - 1] + t[K.F_LAST_OFFSET_DELTA, good - 1]) + 1
                if bad >= 0:
                    return pos + int(scan.table[K.F_POS, bad]), next_offset
            scan_pos = scan.next_pos
            if scan.code != K.SCAN_MORE:
                break
        if scan.code == K.SCAN_END:
            pos += n
        elif scan.code == K.SCAN_PARTIAL and pos + n < size:
            if scan_pos == 0:
                buf = _grown(buf, view, size - pos)
            pos += scan_pos
        elif scan.code in (K.ERR_LEGACY_MAGIC, K.ERR_BAD_MAGIC):  # a file's rule frames any magic
            return _valid_end_legacy(file, size, pos + scan_pos, next_offset)
        else:
            return pos + scan_pos, next_offset
    return pos, next_offset


def _valid_end_legacy(file: RandomAccessFile, size: int, pos: int, next_offset: int) -> tuple[int, int]:
    """:func:`_valid_end` for segments holding legacy v0/v1 entries, or a batch whose magic is above 2 or
    negative, which a file reader frames as Kafka's recovery does (batch objects, CRC-checked): the log's
    end is the writer's; reading such a batch raises, as a Kafka consumer does."""
    data = memoryview(file.pread(size - pos, pos))
    off = 0
    while True:
        try:
            batch = read_batch_at(data, off, len(data), known_magic_only=False)
        except CorruptRecordError:
            batch = None
        if batch is None or not batch.is_valid():
            return pos + off, next_offset
        next_offset = batch.last_offset + 1
        off += batch.size_in_bytes


# --- a data directory ---------------------------------------------------------------------------------------


def is_url(path: object) -> bool:
    """Whether a data-directory argument is a URL (``s3://``, ``gs://``, ``memory://``, ...), not a path."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path: Path | str) -> Path:
    """A plain path, or the path of a ``file://`` URL."""
    text = os.fspath(path)
    return Path(text[len("file://") :] if text.startswith("file://") else text)


class ReadOnlyDataDir:
    """One Kafka log dir (``<topic>-<n>`` partition dirs + checkpoints), read without a lock or writes.

    ``path`` is a local directory (or a ``file://`` URL), read natively; or an object-storage URL, opened
    with ``storage_options`` (Hadoop S3A names, see :func:`kafkalog.objstore.open_store`), or any
    :class:`RemoteLayout` given as ``layout`` (a copy of a log dir, a tiered-storage archive). A directory or
    prefix that does not exist is an error (:class:`~kafkalog.errors.LogDirNotFoundError`,
    :class:`~kafkalog.errors.RemoteResourceNotFoundError`) when its partitions are listed, never an empty
    data directory. Its ``repr`` never shows a storage option.

    ``tiered_path`` (a URL, or a :class:`RemoteLayout`) is the tiered-storage archive of the local directory
    ``path``: each partition is read as its archived (older) and local (recent) segments together. Without
    one, a local data dir whose manager tiers its logs names its archive itself
    (``kafkalog-tiered-storage.json``, :func:`kafkalog.datadir.read_archive_location`: URL, layout and key
    prefix, never a credential) and that archive is read with ``storage_options``, the topics' current ids
    choosing among a recreated topic's incarnations; ``recorded_archive=False`` reads the local files only.
    ``key_ring``
    (``{kekId: PEM text or path}``) decrypts an encrypted Aiven archive; ``strict`` makes an archive's orphans,
    overlaps and gaps errors instead of warnings.
    """

    def __init__(
        self,
        path: Path | str,
        storage_options: Mapping[str, str] | None = None,
        *,
        layout: str | RemoteLayout | None = None,
        tiered_path: str | RemoteLayout | None = None,
        key_ring: KeyRing | Mapping[str, Any] | None = None,
        strict: bool = False,
        store: ObjectStore | None = None,
        recorded_archive: bool = True,
    ) -> None:
        self.url = os.fspath(path)
        self.storage_options = dict(storage_options or {})
        self._archive: RemoteLayout | None = None
        if layout is not None and not isinstance(layout, str):
            self._layout: RemoteLayout | None = layout
        elif store is not None or is_url(self.url):
            self._layout = _open_layout(self.url, self.storage_options, layout, store, key_ring, strict)
        else:
            self._layout = None
        if tiered_path is not None:
            if self._layout is not None:
                raise InvalidConfigurationError(
                    f"tieredPath is read beside a local data directory, and {self.url} is not one"
                )
            if isinstance(tiered_path, str):
                self._archive = _open_layout(tiered_path, self.storage_options, None, None, key_ring, strict)
            else:
                self._archive = tiered_path
        self.path = local_path(path) if self._layout is None else Path(self.url)
        if self._layout is None and self._archive is None and recorded_archive:
            self._archive = _recorded_archive(self.path, self.storage_options, key_ring, strict)
        self._checked = False

    def __repr__(self) -> str:
        return f"ReadOnlyDataDir({self.url!r})"

    @property
    def layout(self) -> RemoteLayout | None:
        """The object-storage layout read (None for a local directory)."""
        return self._layout

    @property
    def is_remote(self) -> bool:
        """Whether the data is in object storage (not a local directory)."""
        return self._layout is not None

    def _check_exists(self) -> None:
        if self._checked:
            return
        layout = self._layout
        if layout is None:
            if not self.path.is_dir():
                raise LogDirNotFoundError(
                    f"kafkalog data directory {self.path} does not exist or is not a directory"
                    + ("" if self.path.exists() else " (no such path)")
                )
        elif layout.is_empty():
            raise RemoteResourceNotFoundError(
                f"{layout.name}: nothing is stored under this prefix (check the bucket and prefix of the URL, "
                "and the endpoint and credentials in the storage options)"
            )
        self._checked = True

    def partition_dirs(self) -> dict[TopicPartition, Path]:
        """Live partition directories of a local data dir (``-delete``/``-future``/``-stray`` and foreign names
        ignored); for object storage, each partition's name as a path (for messages only)."""
        self._check_exists()
        if self._layout is not None:
            return {tp: Path(name) for tp, name in self._layout.partitions().items()}
        found: dict[TopicPartition, Path] = {}
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError as exc:
            raise LogDirNotFoundError(f"kafkalog data directory {self.path} does not exist") from exc
        for entry in entries:
            name = entry.name
            if not _PARTITION_DIR.match(name) or "." in name.rsplit("-", 1)[1] or not entry.is_dir():
                continue
            try:
                tp = parse_topic_partition_name(name)
            except KafkaError:
                continue
            found[tp] = Path(entry.path)
        return found

    def refresh(self) -> None:
        """Look for new partitions at the next listing (an archive caches its listing; a local directory and a
        log-dir copy are listed afresh every time)."""
        refresh = getattr(self._layout, "refresh", None) or getattr(self._archive, "refresh", None)
        if refresh is not None:
            refresh()

    def refresh_partition(self, topic: str, partition: int) -> bool:
        """Whether an archived partition changed since it was planned (then :meth:`log` plans it again)."""
        layout = self._layout if self._layout is not None else self._archive
        refresh = getattr(layout, "refresh_partition", None)
        return bool(refresh(TopicPartition(topic, partition))) if refresh is not None else False

    def is_data_dir(self) -> bool:
        """Whether the local directory looks like a Kafka log dir: a partition directory in it, or one of a log
        dir's own files (``.lock``, ``kafkalog-topics.json``, ``meta.properties``, a checkpoint). A directory
        that is neither (empty, a partition directory itself, a parent of the log dir) is the wrong path.
        Always true for object storage (its prefix was checked when opened)."""
        if self._layout is not None:
            return True
        if self.partition_dirs():
            return True
        return any((self.path / name).exists() for name in _DATA_DIR_FILES)

    def partition_names(self) -> dict[TopicPartition, str]:
        """Every partition -> its directory path or URL (with a ``tiered_path``: the local directory's path,
        also for a partition that is only in the archive)."""
        if self._layout is not None:
            self._check_exists()
            return self._layout.partitions()
        names = {tp: str(path) for tp, path in self.partition_dirs().items()}
        if self._archive is not None:
            for tp in self._archive.partitions():
                names.setdefault(tp, str(self.path / f"{tp.topic}-{tp.partition}"))
        return names

    def topics(self) -> list[str]:
        """Topics with at least one partition, sorted."""
        return sorted({tp.topic for tp in self.partition_names()})

    def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic``, sorted (:class:`UnknownTopicOrPartitionError` if none)."""
        parts = sorted(tp.partition for tp in self.partition_names() if tp.topic == topic)
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist in {self.url}")
        return parts

    def _tiered_log(self, tp: TopicPartition, directory: Path, check: bool) -> ReadOnlyLog:
        """A partition's local directory and its archive as one log (:class:`~kafkalog.readonly.remote.TieredUnionSource`)."""
        from kafkalog.readonly.remote import TieredUnionSource, archive_source

        assert self._archive is not None
        archived = archive_source(self._archive, tp)
        if check and archived is None and not directory.is_dir():
            self._check_exists()
            raise UnknownTopicOrPartitionError(f"partition {tp} does not exist in {self.path} or its archive")
        source = TieredUnionSource(LocalPartitionSource(directory), archived)
        return ReadOnlyLog(source, topic_partition=tp, log_dir=LocalLogDirState(self.path))

    def log(self, topic: str, partition: int, *, check: bool = True) -> ReadOnlyLog:
        """The read-only view of one partition (:class:`UnknownTopicOrPartitionError` if absent; with
        ``check=False`` an object-storage partition is not looked up first: a Spark executor's view of a
        partition the driver listed)."""
        tp = TopicPartition(topic, partition)
        layout = self._layout
        if layout is not None:
            if check and tp not in self.partition_names():
                raise UnknownTopicOrPartitionError(f"partition {tp} does not exist in {self.url}")
            return ReadOnlyLog(layout.source(tp), topic_partition=tp, log_dir=layout.log_dir_state())
        directory = self.path / f"{topic}-{partition}"
        if self._archive is not None:
            return self._tiered_log(tp, directory, check)
        if not directory.is_dir():
            self._check_exists()
            raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist in {self.path}")
        return ReadOnlyLog.open(directory)


def recorded_archive_url(path: Path | str) -> str | None:
    """The URL of the archive a local data dir records (``kafkalog-tiered-storage.json``), None without one."""
    if is_url(path):
        return None
    location = read_archive_location(local_path(path))
    return None if location is None else location.url


def _recorded_archive(
    path: Path, storage_options: Mapping[str, str], key_ring: KeyRing | Mapping[str, Any] | None, strict: bool
) -> RemoteLayout | None:
    """The archive the data dir at ``path`` records, opened (no I/O yet); None without one."""
    location = read_archive_location(path)
    if location is None:
        return None
    from kafkalog.readonly.remote import open_layout

    topic_ids: dict[str, str] = {}
    with contextlib.suppress(KafkaError, OSError):
        doc = read_topics(path)
        if doc is not None:
            topic_ids = {name: meta.topic_id for name, meta in doc.topics.items() if meta.topic_id}
    return open_layout(
        location.url,
        storage_options,
        layout=location.layout,
        key_ring=key_ring,
        strict=strict,
        prefix=location.key_prefix,
        topic_ids=topic_ids or None,
    )


def _open_layout(
    url: str,
    storage_options: Mapping[str, str],
    layout: str | None,
    store: ObjectStore | None,
    key_ring: KeyRing | Mapping[str, Any] | None,
    strict: bool,
) -> RemoteLayout:
    """The layout of the data at ``url`` (a log-dir copy or a tiered-storage archive, detected by its keys)."""
    from kafkalog.readonly.remote import open_layout  # the object-storage layer, imported when used

    return open_layout(url, storage_options, layout=layout, store=store, key_ring=key_ring, strict=strict)
