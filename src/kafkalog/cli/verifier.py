"""The checks of ``kafkalog verify``: every file of a partition directory against Kafka's on-disk invariants.

Read-only: files are opened for reading only, nothing is locked, created, renamed or repaired, so it can run
next to a writer. Memory stays bounded: ``.log`` files stream through :class:`~kafkalog.cli.dumplog.LogDump`
(shallow walk, CRC of every batch); index entries are kept as packed arrays.

A **fault** breaks an invariant (the exit code is 1); a **warning** is a state Kafka tolerates or repairs by
itself (leftover ``.cleaned``/``.swap``/``.deleted`` files, an untrimmed index of a rolled segment, a time
index without the segment's final entry, an orphan index). Per partition directory:

* **log**: every ``.log`` is a whole number of batches (no bad frame, no partial tail) with valid CRCs, except
  the active segment's zero-filled tail (``preallocate``: the file is extended up front while a writer has it);
  offsets strictly increase across batches and segments; each batch fits its segment (``base <= offset <=
  base + 2**31 - 1``).
* **.index**: length a multiple of 8; entries (up to the zero-filled preallocated tail) strictly increasing in
  offset and position; each entry ``(o, p)`` points at the start ``p`` of a batch, and ``o`` is in that batch
  or in a batch after it and before the next entry's position (a chunk appended at once).
* **.timeindex**: length a multiple of 12; timestamps strictly increasing and offsets non-decreasing
  (monotonic); each entry ``(t, o)`` names the last offset ``o`` of a batch whose max timestamp is ``t``, the
  largest timestamp up to there.
* **.txnindex**: whole 34-byte version-0 entries with increasing last offsets inside the segment; each entry
  at an ABORT marker of its producer; and, when the replay of the log knows every transaction (the log starts
  at offset 0 or a producer snapshot sits at its first segment), exactly the aborted transactions the replay
  finds, with Kafka's last stable offset.
* **leader-epoch-checkpoint**: parseable, strictly increasing, starting at or below the log end; every v2
  batch from the first entry on carries the epoch the cache gives its offset.
* **snapshots**: readable (version, CRC, length) and not past the log end offset.
* **partition.metadata**: parseable; the topic id matches ``kafkalog-topics.json``.
* **holes**: in a log that is not compacted, each segment starts at the offset after the previous segment's
  data; a segment missing or emptied in the middle is a fault (readers would skip its offsets). Compacted
  topics and partitions listed in ``cleaner-offset-checkpoint`` are not checked (the cleaner leaves gaps); a
  topic whose config is not known (no ``kafkalog-topics.json`` entry) gets a warning.

An index file of the active segment is preallocated and zero-filled after its entries: its entries end at the
first empty slot, slot 0 included (a writer puts the first entry in the file at once).

Every file named like a segment, index, snapshot or checkpoint must be a regular file: a symlink, FIFO,
directory or device in its place is a fault (``recover`` and ``LogManager.open`` refuse the partition), is
never followed or opened, and a segment or snapshot name whose offset is above ``2**63 - 1`` is a fault too.

Data directory: its checkpoint files parse, ``kafkalog-topics.json`` parses, and no log start offset checkpoint
lies past a partition's log end (the next open would delete every segment).
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from kafkalog.cli.dumplog import BatchEvent, ErrorEvent, LogDump, SummaryEvent
from kafkalog.cli.paths import Target, list_partition_dirs
from kafkalog.cli.segscan import control_type_at, iter_fixed_entries
from kafkalog.datadir import SINK_DIR, TOPICS_FILE, read_sink_dir_state, read_topics
from kafkalog.errors import CorruptSnapshotError, KafkaError
from kafkalog.log.checkpoint import (
    CheckpointError,
    EpochEntry,
    leader_epoch_checkpoint,
    offset_checkpoint,
    read_partition_metadata,
    topic_id_to_string,
)
from kafkalog.log.config import LogConfig
from kafkalog.log.names import TopicPartition
from kafkalog.log.producer_state import read_snapshot
from kafkalog.records import ControlRecordType
from kafkalog.storage.files import file_kind, is_segment_file_name, offset_from_file_name

__all__ = ["Finding", "PartitionReport", "VerifyReport", "log_bytes", "verify_partition_dir", "verify_target"]

_INT32_MAX: Final = 2**31 - 1
#: Findings of one level listed per file (the rest are counted).
MAX_FINDINGS_PER_FILE: Final = 20
_TRANSIENT: Final = (".deleted", ".cleaned", ".swap")
_KNOWN: Final = {"leader-epoch-checkpoint", "partition.metadata", ".kafka_cleanshutdown"}
_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_TXN_ENTRY: Final = struct.Struct(">hqqqq")
_DIR_CHECKPOINTS: Final = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)

Level = Literal["fault", "warning"]
Tick = Callable[[int], None]
"""Called with a number of ``.log`` bytes just checked (drives a progress bar)."""


@dataclass(frozen=True)
class Finding:
    """One fault or warning: its level, the file (relative to the verified path) and what is wrong."""

    level: Level
    file: str
    message: str

    def to_dict(self, partition: str | None) -> dict[str, object]:
        """The ``--json`` object (keys: type, partition, file, message)."""
        return {"type": self.level, "partition": partition, "file": self.file, "message": self.message}


@dataclass
class PartitionReport:
    """The result for one partition directory (``topic_partition`` None for the data directory itself).

    At most :data:`MAX_FINDINGS_PER_FILE` findings of one level are kept per file; :meth:`finish` adds one
    line counting the rest (a badly damaged index would otherwise list every entry).
    """

    path: Path | str  # a directory, or the URL of a partition in object storage
    topic_partition: TopicPartition | None
    segments: int = 0
    batches: int = 0
    bytes: int = 0
    log_end_offset: int | None = None
    findings: list[Finding] = field(default_factory=list)
    _counts: dict[tuple[Level, str], int] = field(default_factory=dict, repr=False)

    @property
    def faults(self) -> int:
        """Number of faults (including the ones not listed)."""
        return sum(n for (level, _), n in self._counts.items() if level == "fault")

    @property
    def warnings(self) -> int:
        """Number of warnings (including the ones not listed)."""
        return sum(n for (level, _), n in self._counts.items() if level == "warning")

    def add(self, level: Level, file: str, message: str) -> None:
        """Records a finding of ``level`` (at most ``MAX_FINDINGS_PER_FILE`` are listed per file and level)."""
        n = self._counts.get((level, file), 0) + 1
        self._counts[(level, file)] = n
        if n <= MAX_FINDINGS_PER_FILE:
            self.findings.append(Finding(level, file, message))

    def fault(self, file: str, message: str) -> None:
        """Records a fault."""
        self.add("fault", file, message)

    def warn(self, file: str, message: str) -> None:
        """Records a warning."""
        self.add("warning", file, message)

    def finish(self) -> None:
        """Adds the count of findings that were not listed."""
        for (level, file), n in sorted(self._counts.items()):
            if n > MAX_FINDINGS_PER_FILE:
                more = n - MAX_FINDINGS_PER_FILE
                plural = "faults" if level == "fault" else "warnings"
                self.findings.append(Finding(level, file, f"... and {more} more {plural} in this file"))


@dataclass
class VerifyReport:
    """The reports of a whole run, the data directory's own first when there is one."""

    parts: list[PartitionReport] = field(default_factory=list)

    @property
    def faults(self) -> int:
        """Faults over every partition."""
        return sum(p.faults for p in self.parts)

    @property
    def warnings(self) -> int:
        """Warnings over every partition."""
        return sum(p.warnings for p in self.parts)


# --------------------------------------------------------------------------------------------------- helpers


@dataclass
class _Segment:
    base: int
    log: Path
    size: int
    next_offset: int = 0
    max_timestamp: int = -1
    batches: int = 0
    valid_end: int = 0
    zero_tail: bool = False
    gone: bool = False  # deleted by a live writer while it was being checked

    @property
    def damaged(self) -> bool:
        """Whether the walk stopped before the end of the ``.log`` (not at an active segment's preallocated
        zero-filled tail), or the segment went away meanwhile."""
        return (self.valid_end < self.size and not self.zero_tail) or self.gone


class _OffsetIndexCheck:
    """The used, monotonic prefix of a ``.index`` and a pointer that follows the batch walk."""

    def __init__(self, path: Path, seg: _Segment, is_active: bool, report: PartitionReport) -> None:
        self.name = path.name
        self.rel = array("q")
        self.pos = array("q")
        self.report = report
        size = path.stat().st_size
        if size % 8:
            report.fault(path.name, f"length {size} is not a multiple of 8")
        unused = 0
        for i, raw in iter_fixed_entries(path, 8):
            rel, pos = _OFFSET_ENTRY.unpack(raw)
            # an empty slot ends the entries: relative offset 0 after slot 0, and (0, 0) in slot 0 too, as no
            # entry ever points at position 0 (the first entry follows index.interval.bytes of data)
            if rel == 0 and (i > 0 or pos == 0):
                unused = size // 8 - i
                if _nonzero_after(path, i * 8):
                    report.fault(path.name, f"bytes after the end of the entries (slot {i} on) are not zero")
                break
            if self.rel and (rel <= self.rel[-1] or pos <= self.pos[-1]):
                report.fault(
                    path.name,
                    f"entry {i} (offset {seg.base + rel}, position {pos}) is not after entry {i - 1} "
                    f"(offset {seg.base + self.rel[-1]}, position {self.pos[-1]}); later entries are not checked",
                )
                break
            if rel < 0 or pos < 0:
                report.fault(path.name, f"entry {i} has a negative offset delta or position ({rel}, {pos})")
                break
            self.rel.append(rel)
            self.pos.append(pos)
        if unused and not is_active:
            report.warn(path.name, f"not trimmed: {unused} unused slots in a rolled segment's index")
        self.base = seg.base
        self.j = 0
        self.pending: int | None = None  # entry whose offset lies in a later batch of its chunk

    def on_batch(self, b: BatchEvent) -> None:
        n = len(self.pos)
        if self.pending is not None:
            offset = self.base + self.rel[self.pending]
            next_pos = self.pos[self.pending + 1] if self.pending + 1 < n else None
            if next_pos is not None and b.position >= next_pos:
                self._unresolved(self.pending)
                self.pending = None
            elif b.base_offset <= offset <= b.last_offset:
                self.pending = None
            elif b.base_offset > offset:
                self._unresolved(self.pending)
                self.pending = None
        while self.j < n and self.pos[self.j] < b.position:
            self.report.fault(
                self.name,
                f"entry {self.j} (offset {self.base + self.rel[self.j]}, position {self.pos[self.j]}) does not "
                "point at the start of a batch",
            )
            self.j += 1
        if self.j < n and self.pos[self.j] == b.position:
            offset = self.base + self.rel[self.j]
            if offset < b.base_offset:
                self.report.fault(
                    self.name,
                    f"entry {self.j} (offset {offset}, position {b.position}) points at a batch that starts at "
                    f"offset {b.base_offset}, after the indexed offset",
                )
            elif offset > b.last_offset:
                self.pending = self.j
            self.j += 1

    def _unresolved(self, k: int) -> None:
        self.report.fault(
            self.name,
            f"entry {k} (offset {self.base + self.rel[k]}, position {self.pos[k]}): no batch from that position "
            "on (before the next entry) holds the offset",
        )

    def finish(self, seg: _Segment) -> None:
        if self.pending is not None:
            self._unresolved(self.pending)
        rest = len(self.pos) - self.j
        if rest and seg.damaged:
            self.report.fault(
                self.name,
                f"{rest} entries from entry {self.j} (offset {self.base + self.rel[self.j]}, position "
                f"{self.pos[self.j]}) on point past the log's valid data, which ends at byte {seg.valid_end} "
                "(the damage reported for the .log)",
            )
            return
        for k in range(self.j, len(self.pos)):
            self.report.fault(
                self.name,
                f"entry {k} (offset {self.base + self.rel[k]}, position {self.pos[k]}) points past the end of the "
                f"log's data (byte {seg.valid_end})",
            )


def _nonzero_after(path: Path, start: int) -> bool:
    """Whether any byte of ``path`` from ``start`` on is not zero."""
    with open(path, "rb") as f:
        f.seek(start)
        while True:
            data = f.read(1 << 20)
            if not data:
                return False
            if data.count(0) != len(data):
                return True


class _TimeIndexCheck:
    """The used prefix of a ``.timeindex`` matched against the batch walk."""

    def __init__(self, path: Path, seg: _Segment, is_active: bool, report: PartitionReport) -> None:
        self.name = path.name
        self.ts = array("q")
        self.off = array("q")
        self.report = report
        size = path.stat().st_size
        if size % 12:
            report.fault(path.name, f"length {size} is not a multiple of 12")
        unused = 0
        self.broken = bool(size % 12)
        for i, raw in iter_fixed_entries(path, 12):
            ts, rel = _TIME_ENTRY.unpack(raw)
            if i > 0 and rel == 0:
                unused = size // 12 - i
                break
            if i == 0 and ts == 0 and rel == 0 and size > 12 and not _nonzero_after(path, 12):
                # a preallocated index with no entry yet (a writer puts its first entry in the file at once,
                # so a file with entries never starts with an empty slot); a trimmed file of one slot (0, 0)
                # holds a real entry, timestamp 0
                unused = size // 12
                break
            if self.ts and (ts <= self.ts[-1] or seg.base + rel < self.off[-1]):
                report.fault(
                    path.name,
                    f"entry {i} (timestamp {ts}, offset {seg.base + rel}) is not after entry {i - 1} (timestamp "
                    f"{self.ts[-1]}, offset {self.off[-1]}): the time index is not monotonic",
                )
                self.broken = True
                break
            self.ts.append(ts)
            self.off.append(seg.base + rel)
        if unused and not is_active:
            report.warn(path.name, f"not trimmed: {unused} unused slots in a rolled segment's time index")
        self.is_active = is_active
        self.k = 0
        self.running = -1

    def on_batch(self, b: BatchEvent) -> None:
        self.running = max(self.running, b.max_timestamp)
        n = len(self.off)
        while self.k < n and self.off[self.k] <= b.last_offset:
            ts, off = self.ts[self.k], self.off[self.k]
            where = f"entry {self.k} (timestamp {ts}, offset {off})"
            if off != b.last_offset:
                self.report.fault(self.name, f"{where}: offset {off} is not the last offset of a batch")
            elif ts != b.max_timestamp or ts != self.running:
                self.report.fault(
                    self.name,
                    f"{where}: the batch ending there has max timestamp {b.max_timestamp} and the largest "
                    f"timestamp up to there is {self.running}",
                )
            self.k += 1

    def finish(self, seg: _Segment) -> None:
        rest = len(self.off) - self.k
        if rest and seg.damaged:
            self.report.fault(
                self.name,
                f"{rest} entries from entry {self.k} (timestamp {self.ts[self.k]}, offset {self.off[self.k]}) on "
                f"are past the log's valid data, which ends before offset {seg.next_offset} (the damage reported "
                "for the .log)",
            )
            return
        for k in range(self.k, len(self.off)):
            self.report.fault(
                self.name,
                f"entry {k} (timestamp {self.ts[k]}, offset {self.off[k]}) is past the end of the segment's data "
                f"(next offset {seg.next_offset})",
            )
        final = self.ts[-1] if self.ts else None
        if (
            not (self.is_active or self.broken or seg.damaged)
            and seg.max_timestamp >= 0
            and final != seg.max_timestamp
        ):
            self.report.warn(
                self.name,
                f"last entry has timestamp {final}, the segment's largest timestamp is {seg.max_timestamp} (time "
                "lookups and retention use the last entry)",
            )


@dataclass
class _TxnReplay:
    """Transactions seen by the walk: open ones, ABORT markers by offset, and the aborts expected per segment."""

    complete: bool
    ongoing: dict[int, int] = field(default_factory=dict)
    markers: dict[int, int] = field(default_factory=dict)  # ABORT marker offset -> producer id
    expected: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)

    def on_batch(self, seg: _Segment, b: BatchEvent) -> None:
        if b.magic < 2 or b.producer_id < 0:
            return
        if b.is_control_batch:
            control = control_type_at(seg.log, b.position, b.size_in_bytes)
            first = self.ongoing.pop(b.producer_id, None)
            if control is ControlRecordType.ABORT:
                self.markers[b.last_offset] = b.producer_id
                if first is not None:
                    lso = min(self.ongoing.values(), default=b.last_offset + 1)
                    self.expected.setdefault(seg.base, []).append((b.producer_id, first, b.last_offset, lso))
        elif b.is_transactional:
            self.ongoing.setdefault(b.producer_id, b.base_offset)


# --------------------------------------------------------------------------------------------------- partition


def _is_regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (by ``lstat``: a link is never followed)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _owned(name: str) -> bool:
    """Whether ``name`` is spelled like a file kafkalog keeps in a partition directory."""
    return name in _KNOWN or is_segment_file_name(name)


def _classify_files(directory: Path, report: PartitionReport) -> tuple[list[_Segment], list[str]]:
    if not stat.S_ISDIR(os.lstat(directory).st_mode):
        report.fault(".", f"the partition directory is a {file_kind(os.lstat(directory).st_mode)} (refused)")
    names = []
    for e in os.scandir(directory):
        if e.is_file(follow_symlinks=False):
            names.append(e.name)
        elif _owned(e.name):
            kind = file_kind(e.stat(follow_symlinks=False).st_mode)
            report.fault(e.name, f"is a {kind}, not a regular file (recover and LogManager.open refuse it)")
    names.sort()
    segments = []
    for name in list(names):
        if is_segment_file_name(name) and name[:1].isdigit():
            try:
                offset_from_file_name(name)
            except KafkaError as exc:
                report.fault(name, f"not a segment of any log: {exc}")
                names.remove(name)
                continue
            except ValueError:
                pass
        if name.endswith(".log") and name[:-4].isascii() and name[:-4].isdigit():
            path = directory / name
            segments.append(_Segment(int(name[:-4]), path, path.stat().st_size))
    bases = {s.base for s in segments}
    for name in names:
        head = name.split(".", 1)[0]
        if name.endswith(_TRANSIENT):
            report.warn(
                name, "leftover file of an interrupted delete, clean or swap (the next open finishes it)"
            )
        elif name.endswith((".index", ".timeindex", ".txnindex")):
            if not head.isdigit() or int(head) not in bases:
                report.warn(name, "index without a .log (orphan; the next open deletes it)")
        elif name.endswith(".tmp"):
            report.warn(name, "temporary file of an interrupted checkpoint write")
        elif not (name.endswith((".log", ".snapshot")) or name in _KNOWN):
            report.warn(name, "unknown file")
    return sorted(segments, key=lambda s: s.base), names


def verify_partition_dir(
    directory: Path,
    topic_partition: TopicPartition | None = None,
    *,
    expected_topic_id: str | None = None,
    tick: Tick | None = None,
    holes: Level | None = "fault",
) -> PartitionReport:
    """Checks one partition directory (see the module doc); ``tick`` gets the ``.log`` bytes as they pass.

    ``holes``: what offsets missing between segments are (a segment deleted or emptied in the middle of the
    log): a fault for a log never compacted, a warning when that is not known, ``None`` (not checked) for a
    compacted log, where the cleaner leaves such gaps.
    """
    report = PartitionReport(directory, topic_partition)
    segments, names = _classify_files(directory, report)
    report.segments = len(segments)
    epochs = _read_epochs(directory, report)
    replay = _TxnReplay(complete=bool(segments) and segments[0].base == 0)
    if segments and not replay.complete:
        snap = directory / f"{segments[0].base:020d}.snapshot"
        try:
            entries = read_snapshot(snap) if _is_regular(snap) else None
        except (CorruptSnapshotError, OSError):
            entries = None
        if entries is not None:
            replay.complete = True
            replay.ongoing = {
                e.producer_id: e.current_txn_first_offset
                for e in entries
                if e.current_txn_first_offset is not None
            }
    prev_last: int | None = None
    for n, seg in enumerate(segments):
        is_active = n == len(segments) - 1
        if prev_last is not None and seg.base <= prev_last:
            report.fault(seg.log.name, f"base offset {seg.base} is not above the previous offset {prev_last}")
        if n and holes is not None:
            _check_hole(segments[n - 1], seg, holes, report)
        try:
            prev_last = _walk_segment(directory, seg, is_active, prev_last, epochs, replay, report, tick)
        except FileNotFoundError:  # retention or the cleaner of a live writer removed it meanwhile
            seg.valid_end, seg.batches, seg.gone = 0, 0, True
            report.warn(
                seg.log.name, "deleted while it was being checked (a live writer's retention or cleaner)"
            )
    report.log_end_offset = segments[-1].next_offset if segments else None
    for seg in segments:
        report.bytes += seg.size
        report.batches += seg.batches
        if not seg.gone:
            _check_txn_index(directory / f"{seg.base:020d}.txnindex", seg, replay, report)
    if epochs and report.log_end_offset is not None and epochs[-1].start_offset > report.log_end_offset:
        report.fault(
            "leader-epoch-checkpoint",
            f"last entry (epoch {epochs[-1].epoch}, start offset {epochs[-1].start_offset}) starts past the log "
            f"end offset {report.log_end_offset}",
        )
    _check_snapshots(directory, names, report)
    _check_partition_metadata(directory, expected_topic_id, report)
    report.finish()
    return report


def _check_hole(prev: _Segment, seg: _Segment, level: Level, report: PartitionReport) -> None:
    """Offsets between the end of ``prev``'s data and ``seg``'s base offset (``prev`` walked already)."""
    if prev.damaged or seg.base <= prev.next_offset:
        return  # damage is reported for prev's .log; overlaps are reported by the walk
    what = (
        f"the previous segment {prev.log.name} is empty"
        if prev.batches == 0
        else f"the previous segment {prev.log.name} ends at offset {prev.next_offset - 1}"
    )
    message = (
        f"offsets {prev.next_offset}..{seg.base - 1} are missing: {what} and this one starts at {seg.base} (a "
        "segment deleted or emptied in the middle of the log; readers skip the hole, and recover cannot bring "
        "those offsets back)"
    )
    if level == "warning":
        message += "; a fault unless the topic is or was compacted (its config is not known here)"
    report.add(level, seg.log.name, message)


def _read_epochs(directory: Path, report: PartitionReport) -> list[EpochEntry]:
    if not (directory / "leader-epoch-checkpoint").exists():
        return []
    try:
        entries = leader_epoch_checkpoint(directory).read()
    except (CheckpointError, OSError, UnicodeDecodeError) as exc:
        report.fault("leader-epoch-checkpoint", f"not parseable: {exc}")
        return []
    for a, b in itertools.pairwise(entries):
        if b.epoch <= a.epoch or b.start_offset <= a.start_offset:
            report.fault("leader-epoch-checkpoint", f"entries {tuple(a)} and {tuple(b)} are not increasing")
            return []
    return entries


def _walk_segment(
    directory: Path,
    seg: _Segment,
    is_active: bool,
    prev_last: int | None,
    epochs: list[EpochEntry],
    replay: _TxnReplay,
    report: PartitionReport,
    tick: Tick | None,
) -> int | None:
    """Walks one ``.log`` with its indexes; returns the last offset seen."""
    stem = f"{seg.base:020d}"
    index, tindex = directory / f"{stem}.index", directory / f"{stem}.timeindex"
    offset_check = _OffsetIndexCheck(index, seg, is_active, report) if _is_regular(index) else None
    time_check = _TimeIndexCheck(tindex, seg, is_active, report) if _is_regular(tindex) else None
    checks: list[_OffsetIndexCheck | _TimeIndexCheck] = [
        c for c in (offset_check, time_check) if c is not None
    ]
    starts = [e.start_offset for e in epochs]
    seg.next_offset = seg.base
    shown = 0
    with LogDump(seg.log) as dump:
        for event in dump.events():
            if isinstance(event, BatchEvent):
                if not event.is_valid:
                    continue  # the error event follows
                b = event
                where = f"batch at byte {b.position} (offsets {b.base_offset}..{b.last_offset})"
                if b.base_offset < seg.base or b.last_offset - seg.base > _INT32_MAX:
                    report.fault(seg.log.name, f"{where} does not fit the segment's base offset {seg.base}")
                if prev_last is not None and b.base_offset <= prev_last:
                    report.fault(seg.log.name, f"{where} does not come after offset {prev_last}")
                if b.last_offset < b.base_offset:
                    report.fault(seg.log.name, f"{where} has its last offset before its base offset")
                prev_last = b.last_offset
                seg.next_offset = b.last_offset + 1
                seg.max_timestamp = max(seg.max_timestamp, b.max_timestamp)
                seg.batches += 1
                for check in checks:
                    check.on_batch(b)
                replay.on_batch(seg, b)
                if starts and b.magic >= 2 and b.partition_leader_epoch >= 0 and b.base_offset >= starts[0]:
                    entry = epochs[_floor(starts, b.base_offset)]
                    if entry.epoch != b.partition_leader_epoch:
                        report.fault(
                            "leader-epoch-checkpoint",
                            f"the batch at offset {b.base_offset} has leader epoch {b.partition_leader_epoch}, "
                            f"the checkpoint gives epoch {entry.epoch}",
                        )
                if tick is not None and b.position - shown >= 1 << 20:
                    tick(b.position - shown)
                    shown = b.position
            elif isinstance(event, ErrorEvent):
                if (
                    is_active
                    and event.kind != "invalid_records"
                    and not _nonzero_after(seg.log, event.position)
                ):
                    seg.zero_tail = (
                        True  # preallocated (file.preallocate) and not written yet: the end of data
                    )
                    continue
                kind = {"truncated": "truncated tail", "invalid_records": "invalid records"}.get(
                    event.kind, "corrupt batch"
                )
                report.fault(seg.log.name, f"{kind} at byte {event.position}: {event.message}")
            elif isinstance(event, SummaryEvent):
                seg.valid_end = event.valid_bytes
    if tick is not None:
        tick(seg.size - shown)
    if offset_check is not None:
        offset_check.finish(seg)
    elif seg.batches and not os.path.lexists(index):
        report.fault(f"{stem}.index", f"missing for a segment with {seg.batches} batches")
    if time_check is not None:
        time_check.finish(seg)
    elif seg.batches and not os.path.lexists(tindex):
        report.fault(f"{stem}.timeindex", f"missing for a segment with {seg.batches} batches")
    return prev_last


def _floor(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts)
    while lo < hi:
        mid = (lo + hi) // 2
        if starts[mid] <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _check_txn_index(path: Path, seg: _Segment, replay: _TxnReplay, report: PartitionReport) -> None:
    found: list[tuple[int, int, int, int]] = []
    if _is_regular(path):
        size = path.stat().st_size
        if size % 34:
            report.fault(path.name, f"length {size} is not a multiple of 34 (a partial entry at the end)")
        prev: int | None = None
        for i, raw in iter_fixed_entries(path, 34):
            version, pid, first, last, lso = _TXN_ENTRY.unpack(raw)
            where = f"entry {i} (producer {pid}, offsets {first}..{last}, lastStableOffset {lso})"
            if version != 0:
                report.fault(path.name, f"{where} has version {version}")
            if prev is not None and last <= prev:
                report.fault(path.name, f"{where} does not come after last offset {prev}")
            if not seg.base <= last < seg.next_offset or first > last:
                report.fault(path.name, f"{where} is outside the segment [{seg.base}, {seg.next_offset})")
            elif replay.markers.get(last) != pid:
                report.fault(path.name, f"{where}: no ABORT marker of producer {pid} at offset {last}")
            prev = last
            found.append((pid, first, last, lso))
    if replay.complete:
        want = replay.expected.get(seg.base, [])
        for txn in want:
            if txn not in found:
                pid, first, last, lso = txn
                report.fault(
                    path.name,
                    f"the aborted transaction of producer {pid} (offsets {first}..{last}, lastStableOffset {lso}) "
                    "is missing: read_committed consumers would see its records",
                )
        for txn in found:
            if txn not in want and replay.markers.get(txn[2]) == txn[0]:
                report.fault(
                    path.name, f"entry {txn} does not match the log's transactions (expected {want})"
                )


def _check_snapshots(directory: Path, names: list[str], report: PartitionReport) -> None:
    end = report.log_end_offset
    for name in names:
        if not name.endswith(".snapshot") or not name[: -len(".snapshot")].isdigit():
            continue
        offset = int(name[: -len(".snapshot")])
        try:
            entries = read_snapshot(directory / name)
        except (CorruptSnapshotError, OSError) as exc:
            report.fault(name, f"not readable: {exc}")
            continue
        if end is not None and offset > end:
            report.fault(name, f"snapshot at offset {offset} is past the log end offset {end}")
        for e in entries:
            if e.batches and e.batches[-1].last_offset >= offset:
                report.fault(
                    name, f"producer {e.producer_id} has last offset {e.batches[-1].last_offset} >= {offset}"
                )


def _check_partition_metadata(directory: Path, expected: str | None, report: PartitionReport) -> None:
    try:
        topic_id = read_partition_metadata(directory)
    except (KafkaError, OSError, UnicodeDecodeError) as exc:
        report.fault("partition.metadata", f"not parseable: {exc}")
        return
    if topic_id is not None and expected is not None and topic_id_to_string(topic_id) != expected:
        report.fault(
            "partition.metadata",
            f"topic id {topic_id_to_string(topic_id)} differs from {expected} in {TOPICS_FILE} (the log will not open)",
        )


# --------------------------------------------------------------------------------------------------- data dir


def _check_data_dir(data_dir: Path, parts: list[PartitionReport]) -> tuple[PartitionReport, dict[str, str]]:
    report = PartitionReport(data_dir, None)
    topic_ids: dict[str, str] = {}
    for name in (".lock", ".kafka_cleanshutdown"):
        path = data_dir / name
        if os.path.lexists(path) and not _is_regular(path):
            kind = file_kind(os.lstat(path).st_mode)
            report.fault(
                name, f"is a {kind}, not a regular file (LogManager.open and every writer refuse the dir)"
            )
    try:
        doc = read_topics(data_dir)
    except (KafkaError, OSError, UnicodeDecodeError) as exc:
        report.fault(TOPICS_FILE, str(exc))
        doc = None
    if doc is not None:
        topic_ids = {name: meta.topic_id for name, meta in doc.topics.items() if meta.topic_id is not None}
    for name in _DIR_CHECKPOINTS:
        path = data_dir / name
        if not path.exists():
            continue
        try:
            entries = offset_checkpoint(path).read()
        except (CheckpointError, OSError, UnicodeDecodeError) as exc:
            report.fault(name, f"not parseable: {exc}")
            continue
        if name != "log-start-offset-checkpoint":
            continue
        ends = {p.topic_partition: p.log_end_offset for p in parts}
        for tp, offset in entries:
            end = ends.get(tp)
            if end is not None and offset > end:
                report.fault(
                    name,
                    f"{tp}: log start offset {offset} is past the log end offset {end} (the next open deletes "
                    "every segment)",
                )
    return report, topic_ids


def _check_sink_journals(data_dir: Path, own: PartitionReport) -> None:
    """A failed Spark sink journal is a fault (a job is partly in the log); a pending one a warning (readers
    stop at its base offsets until a writer completes it)."""
    sink = read_sink_dir_state(data_dir)
    if sink is None:
        return
    for job in sink.failed_journals:
        own.fault(
            f"{SINK_DIR}/journal/failed/{job}.json",
            "a Spark sink job could not complete: part of its records are in the log (docs/operations.md §6.1)",
        )
    for job in sink.pending_journals:
        own.warn(
            f"{SINK_DIR}/journal/{job}.json",
            "a Spark sink job is pending (committing, or cut by a crash): readers stop at its base offsets "
            "until a writer completes it",
        )


def verify_target(target: Target, tick: Tick | None = None) -> VerifyReport:
    """Verifies a resolved path: every partition directory, then the data directory's own files."""
    result = VerifyReport()
    topic_ids: dict[str, str] = {}
    compacted: dict[str, bool] = {}
    cleaned: set[TopicPartition] = set()
    if target.data_dir is not None:
        try:
            doc = read_topics(target.data_dir)
            if doc is not None:
                topic_ids = {n: m.topic_id for n, m in doc.topics.items() if m.topic_id is not None}
                compacted = {n: LogConfig.from_props(m.config).compact for n, m in doc.topics.items()}
        except (KafkaError, OSError, UnicodeDecodeError, ValueError):
            pass
        try:  # a partition the cleaner ever compacted keeps its gaps after a switch to cleanup.policy=delete
            cleaned = {
                tp for tp, _ in offset_checkpoint(target.data_dir / "cleaner-offset-checkpoint").read()
            }
        except (CheckpointError, OSError, UnicodeDecodeError):
            pass
    for tp, path in target.partitions:
        known = compacted.get(tp.topic)
        holes: Level | None = "warning" if known is None else None if known or tp in cleaned else "fault"
        result.parts.append(
            verify_partition_dir(path, tp, expected_topic_id=topic_ids.get(tp.topic), tick=tick, holes=holes)
        )
    if target.is_data_dir and target.data_dir is not None:
        own, _ = _check_data_dir(target.data_dir, result.parts)
        for other in target.other_dirs:
            own.warn(other.name, "partition directory pending deletion, moving or set aside (not checked)")
        _check_sink_journals(target.data_dir, own)
        own.finish()
        result.parts.insert(0, own)
    return result


def log_bytes(target: Target) -> int:
    """Total size of the ``.log`` files to check (for the progress bar)."""
    return _dirs_log_bytes(path for _, path in target.partitions)


def data_dir_log_bytes(data_dir: Path) -> int:
    """Total size of the ``.log`` files a :class:`~kafkalog.manager.LogManager` loads from ``data_dir``: every
    partition directory's, ``-delete``/``-future`` ones included (for a load's progress bar)."""
    live, other = list_partition_dirs(data_dir)
    return _dirs_log_bytes([*(path for _, path in live), *other])


def _dirs_log_bytes(dirs: Iterable[Path]) -> int:
    total = 0
    for path in dirs:
        for entry in os.scandir(path):
            if entry.name.endswith(".log") and entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total
