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
* Legacy v0/v1 entries are read (CRC-checked) and handed out up-converted to v2 batches.

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

import os
import re
import stat
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from kafkalog.datadir import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_pending_sink_bounds,
    read_topics,
)
from kafkalog.errors import (
    CorruptRecordError,
    CorruptSnapshotError,
    KafkaError,
    NotRegularFileError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition, parse_topic_partition_name
from kafkalog.log.producer_state import read_snapshot
from kafkalog.records import MemoryRecords, read_batch_at
from kafkalog.records import _kernels as K
from kafkalog.records.batch import DefaultRecordBatch
from kafkalog.records.control import ControlRecordType
from kafkalog.storage.files import (
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    file_kind,
    offset_from_file_name,
    open_regular,
    read_regular,
)
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "BatchChunk",
    "ReadOnlyDataDir",
    "ReadOnlyLog",
    "SegmentInfo",
]

#: Bytes read at a time by :meth:`ReadOnlyLog.iter_batch_chunks` (grown for a larger batch).
DEFAULT_CHUNK_BYTES: Final = 16 << 20
_TAIL_CHUNK_BYTES: Final = 1 << 20
_MAX_TABLE_COLUMNS: Final = 65536
_PARTITION_DIR = re.compile(r"^.+-\d+$")

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]
OnDamage = Callable[[int, int, CorruptRecordError], None]
"""Told of a damaged segment: ``(first offset lost, offset reading resumes at, the error)``."""


class SegmentInfo(NamedTuple):
    """A segment as listed: base offset, ``.log`` size when listed, path of the ``.log`` file."""

    base_offset: int
    size_bytes: int
    path: Path


class BatchChunk(NamedTuple):
    """Complete v2 batches read from one segment, valid only until the iterator that yielded it advances.

    ``data`` starts at a batch boundary and holds exactly the batches of ``table`` (a scan table of
    :mod:`kafkalog.records._kernels`: ``table[K.F_X, i]`` is field X of batch ``i``, ``F_POS`` relative to
    ``data``). Bytes are not CRC-checked here (the columnar decoder checks them).
    """

    data: U8Array
    table: I64Array
    segment_base_offset: int
    file_position: int


# --- small readers ------------------------------------------------------------------------------------------


def _open_segment(path: Path) -> int:
    """A read-only descriptor of a ``.log`` file, also found under its ``.deleted`` name (FileNotFoundError)."""
    try:
        return open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return open_regular(path.with_name(path.name + DELETED_FILE_SUFFIX), os.O_RDONLY)


def _pread_into(fd: int, buf: U8Array, n: int, position: int) -> int:
    """Fill ``buf[:n]`` from ``position``; returns the bytes read (fewer at end of file)."""
    view = memoryview(buf)[:n]  # type: ignore[arg-type]
    got = 0
    while got < n:
        k = os.preadv(fd, [view[got:]], position + got)
        if k <= 0:
            break
        got += k
    return got


def _read_small(path: Path) -> bytes:
    try:
        return read_regular(path)
    except FileNotFoundError:
        return b""


def _offset_index_hints(path: Path, base_offset: int, log_size: int) -> tuple[I64Array, I64Array]:
    """(absolute offsets, positions) of the trustworthy prefix of a ``.index`` file (see module doc)."""
    data = _read_small(path)
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


def _time_index_hints(path: Path, base_offset: int) -> tuple[I64Array, I64Array, bool]:
    """(timestamps, absolute offsets, trimmed) of the trustworthy prefix of a ``.timeindex`` file."""
    data = _read_small(path)
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


def _header_offsets(fd: int, position: int) -> tuple[int, int] | None:
    """(base offset, last offset) of the v2 batch whose header is at ``position``, or None if there is none."""
    head = os.pread(fd, K.LOG_OVERHEAD + 15, position)
    if len(head) < 27 or head[K.MAGIC_OFFSET] != 2:
        return None
    base = int.from_bytes(head[0:8], "big", signed=True)
    return base, base + int.from_bytes(head[23:27], "big", signed=True)


def _header_last_offset(fd: int, position: int) -> int | None:
    """The last offset of the v2 batch whose header is at ``position``, or None if there is none."""
    offsets = _header_offsets(fd, position)
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
    """Read-only view of one partition directory ``<topic>-<n>`` (see the module doc for the rules)."""

    def __init__(
        self, directory: Path | str, log_start_offset: int | None = None, high_watermark: int | None = None
    ) -> None:
        self.dir = Path(directory)
        self.topic_partition = parse_topic_partition_name(self.dir)
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

    def __reduce__(self) -> tuple[type[ReadOnlyLog], tuple[Path, int | None, int | None]]:
        return type(self), (self.dir, self._given_log_start, self._given_hw)

    def __repr__(self) -> str:
        return f"ReadOnlyLog({str(self.dir)!r})"

    # --- listing and offsets ------------------------------------------------------------------------------
    def list_segments(self) -> list[SegmentInfo]:
        """The ``.log`` files now in the directory, by base offset (cheap: one directory scan)."""
        found: list[SegmentInfo] = []
        try:
            mode = os.lstat(self.dir).st_mode
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return found
        if stat.S_ISLNK(mode):
            raise NotRegularFileError(
                f"refusing partition directory {self.dir}: it is a {file_kind(mode)}, not a directory"
            )
        for entry in entries:
            name = entry.name
            if not name.endswith(LOG_FILE_SUFFIX):
                continue
            try:
                base = offset_from_file_name(name)  # KafkaStorageError above int64
            except ValueError:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                raise NotRegularFileError(
                    f"refusing {entry.path}: it is a {file_kind(st.st_mode)}, not a regular file (kafkalog only "
                    "reads and writes regular files inside the data directory)"
                )
            found.append(SegmentInfo(base, st.st_size, Path(entry.path)))
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

        if self._given_hw is None:  # the view stops before a Spark sink job that is still being appended
            (_, self._leo), pending = read_pending_sink_bounds(self.dir.parent, look)
            sink_bound = pending.get((self.topic_partition.topic, self.topic_partition.partition))
        else:
            _, self._leo = look()
            sink_bound = None
        first_base = self._segments[0].base_offset if self._segments else self._leo
        log_dir = self.dir.parent
        start = self._given_log_start
        if start is None:
            start = _load_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT).get(self.topic_partition, 0)
        self._log_start = min(max(start, first_base), self._leo)
        hw = self._given_hw
        if hw is None and not _hw_follows_leo(log_dir):
            hw = _load_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT).get(self.topic_partition)
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
        try:
            fd = _open_segment(seg.path)
        except FileNotFoundError:
            self._tail = None
            return seg.base_offset
        try:
            size = os.fstat(fd).st_size
            tail = self._tail
            if tail is not None and tail[0] == seg.base_offset and tail[1] <= size:
                pos, next_offset = tail[1], tail[2]
            else:
                pos, next_offset = self._tail_start(fd, seg, size)
            pos, next_offset = _valid_end(fd, size, pos, next_offset)
        finally:
            os.close(fd)
        self._tail = (seg.base_offset, pos, next_offset)
        return next_offset

    def _tail_start(self, fd: int, seg: SegmentInfo, size: int) -> tuple[int, int]:
        """(position, next offset) of the last verified offset-index entry, else the segment start."""
        offsets, positions = _offset_index_hints(
            seg.path.with_suffix(INDEX_FILE_SUFFIX), seg.base_offset, size
        )
        for i in range(offsets.shape[0] - 1, max(-1, offsets.shape[0] - 4), -1):
            header = _header_offsets(fd, int(positions[i]))
            if header is not None and header[1] == int(offsets[i]):
                # the scan verifies the batch there; if it is torn, the log ends before it: at its base offset
                return int(positions[i]), header[0]
        return 0, seg.base_offset

    def _segment_index_for(self, offset: int, segments: list[SegmentInfo]) -> int:
        """Index of the segment that would hold ``offset`` (the last with base <= offset; 0 if none)."""
        return max(0, bisect_right([s.base_offset for s in segments], offset) - 1)

    def _start_position(self, fd: int, seg: SegmentInfo, size: int, offset: int) -> int:
        """A verified file position at or before the batch holding ``offset`` (offset-index hint, or 0)."""
        if offset <= seg.base_offset:
            return 0
        offsets, positions = _offset_index_hints(
            seg.path.with_suffix(INDEX_FILE_SUFFIX), seg.base_offset, size
        )
        i = int(np.searchsorted(offsets, offset, side="right")) - 1
        for j in range(i, max(-1, i - 3), -1):
            if _header_last_offset(fd, int(positions[j])) == int(offsets[j]):
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
        for k in range(first, len(segments)):
            seg = segments[k]
            if seg.base_offset >= end_offset:
                return
            try:
                fd = _open_segment(seg.path)
            except FileNotFoundError:
                upper = segments[k + 1].base_offset if k + 1 < len(segments) else end_offset
                if covered < min(upper, end_offset):
                    missing(covered, min(upper, end_offset))
                covered = max(covered, min(upper, end_offset))
                continue
            rolled = k + 1 < len(segments)  # a later segment exists: this one was complete when rolled
            try:
                size = os.fstat(fd).st_size
                pos = self._start_position(fd, seg, size, start_offset) if k == first else 0
                while pos < size:
                    want = min(buf.shape[0], size - pos)
                    n = _pread_into(fd, buf, want, pos)
                    if n < want:  # the file shrank (a preallocated segment trimmed when it rolled)
                        size = pos + n
                    view = buf[:n]
                    scan_pos = 0
                    while True:
                        scan = K.scan_batches(
                            view, scan_pos, n, skip_below=start_offset, stop_offset=end_offset, table=table
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
                        return
                    if code == K.SCAN_END:
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
                os.close(fd)
            if k + 1 < len(segments):
                upper = min(segments[k + 1].base_offset, end_offset)
                if on_gap is not None and covered < upper:
                    on_gap(covered, upper)
                covered = max(covered, upper)
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
        for k, seg in enumerate(segments):
            nxt = segments[k + 1].base_offset if k + 1 < len(segments) else None
            if nxt is not None and nxt <= self._log_start:
                continue
            if seg.base_offset >= upper:
                return
            ts, offsets, trimmed = _time_index_hints(
                seg.path.with_suffix(TIME_INDEX_FILE_SUFFIX), seg.base_offset
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
            index = TransactionIndex(seg.base_offset, seg.path.with_suffix(TXN_INDEX_FILE_SUFFIX))
            try:
                result = index.collect_aborted_txns(start_offset, end_offset)
            except KafkaError:
                continue
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
        snapshots: list[int] = []
        try:
            for entry in os.scandir(self.dir):
                name = entry.name
                if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                    try:
                        snapshots.append(offset_from_file_name(name))
                    except ValueError:
                        continue
        except FileNotFoundError:
            pass
        first_base = self._segments[0].base_offset if self._segments else 0
        for offset in sorted(snapshots, reverse=True):
            if offset > self._leo or offset < first_base:
                continue
            try:
                entries = read_snapshot(self.dir / f"{offset:020d}{PRODUCER_SNAPSHOT_FILE_SUFFIX}")
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


def _grown(buf: U8Array, view: U8Array, remaining: int) -> U8Array:
    """A buffer for the batch at ``view[0]`` that does not fit ``buf``: its size, at most ``remaining``."""
    need = int.from_bytes(view[8:12].tobytes(), "big", signed=True) + K.LOG_OVERHEAD
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
    return code == K.ERR_FRAME_SIZE and not view[pos : pos + K.LOG_OVERHEAD].any()


def _valid_end(fd: int, size: int, pos: int, next_offset: int) -> tuple[int, int]:
    """Walk complete, CRC-valid batches from ``pos``; returns (end position, next offset after them)."""
    buf = np.empty(_TAIL_CHUNK_BYTES, np.uint8)
    while pos < size:
        want = min(buf.shape[0], size - pos)
        n = _pread_into(fd, buf, want, pos)
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
        elif scan.code == K.ERR_LEGACY_MAGIC:
            return _valid_end_legacy(fd, size, pos + scan_pos, next_offset)
        else:
            return pos + scan_pos, next_offset
    return pos, next_offset


def _valid_end_legacy(fd: int, size: int, pos: int, next_offset: int) -> tuple[int, int]:
    """:func:`_valid_end` for segments holding legacy v0/v1 entries (batch objects, CRC-checked)."""
    data = memoryview(os.pread(fd, size - pos, pos))
    off = 0
    while True:
        try:
            batch = read_batch_at(data, off, len(data))
        except CorruptRecordError:
            batch = None
        if batch is None or not batch.is_valid():
            return pos + off, next_offset
        next_offset = batch.last_offset + 1
        off += batch.size_in_bytes


# --- a data directory ---------------------------------------------------------------------------------------


class ReadOnlyDataDir:
    """One Kafka log dir (``<topic>-<n>`` partition dirs + checkpoints), read without a lock or writes."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ReadOnlyDataDir({str(self.path)!r})"

    def partition_dirs(self) -> dict[TopicPartition, Path]:
        """Live partition directories (``-delete``/``-future``/``-stray`` and foreign names ignored)."""
        found: dict[TopicPartition, Path] = {}
        try:
            entries = list(os.scandir(self.path))
        except FileNotFoundError:
            return found
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

    def topics(self) -> list[str]:
        """Topics with at least one partition directory, sorted."""
        return sorted({tp.topic for tp in self.partition_dirs()})

    def partitions(self, topic: str) -> list[int]:
        """Partition numbers of ``topic``, sorted (:class:`UnknownTopicOrPartitionError` if none)."""
        parts = sorted(tp.partition for tp in self.partition_dirs() if tp.topic == topic)
        if not parts:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist in {self.path}")
        return parts

    def log(self, topic: str, partition: int) -> ReadOnlyLog:
        """The read-only view of one partition (:class:`UnknownTopicOrPartitionError` if absent)."""
        directory = self.path / f"{topic}-{partition}"
        if not directory.is_dir():
            raise UnknownTopicOrPartitionError(f"partition {topic}-{partition} does not exist in {self.path}")
        return ReadOnlyLog.open(directory)
