"""A full, independent check of a partition directory against Kafka's on-disk invariants.

:func:`verify_partition_dir` reads the files themselves (not through ``Log``) and reports every problem it
finds; :func:`assert_valid_partition_dir` fails with all of them. It is meant for a *closed* log (indexes
trimmed, a final time-index entry written) — the state after ``Log.close()``. What it checks:

* **Files**: no ``.deleted`` / ``.cleaned`` / ``.swap`` leftovers, no index without a matching
  ``.log`` (orphans), no file it does not know.
* **Batches**: every ``.log`` is a whole number of batches (no partial tail, no bad frame); every batch's
  CRC is valid; offsets strictly increase from batch to batch *across* segments; every batch fits its
  segment (``base <= offset <= base + 2**31 - 1``); a segment's base is above every offset before it.
* **Offset index** (``.index``): length a multiple of 8; entries strictly increasing in offset and position;
  every entry points at the start of a batch whose last offset equals the entry's offset (with
  ``exact_index_entries=False``: the offset is the last offset of a batch at or after that position and
  before the next entry — Kafka's rule when one append holds several batches, e.g. a split).
* **Time index** (``.timeindex``): length a multiple of 12; timestamps strictly increasing, offsets
  non-decreasing and inside the segment; each entry ``(t, o)`` names a batch ending at ``o`` whose max
  timestamp is ``t``, the largest so far; the last entry carries the segment's largest timestamp.
* **Transaction index** (``.txnindex``): whole 34-byte version-0 entries, increasing last offsets inside the
  segment; when the log starts at offset 0, exactly the aborted transactions that a replay of the log's
  batches finds, each in the segment of its ABORT marker with Kafka's last stable offset.
* **Leader epoch checkpoint**: well formed, epochs and start offsets strictly increasing, starts at or below
  the log end, and every v2 batch from the first entry on carries the epoch the cache gives its offset.
* **Producer snapshots**: version 1, CRC-32C valid, length matching the count, offset at or below the log end.
"""

from __future__ import annotations

import bisect
import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from kafkalog.errors import KafkaError
from kafkalog.records import ControlRecordType, RecordBatch, read_batch_at
from kafkalog.records.batch import MAGIC_V2

__all__ = [
    "BatchInfo",
    "Report",
    "SegmentInfo",
    "assert_valid_partition_dir",
    "iter_records",
    "verify_partition_dir",
]

INT32_MAX = 2**31 - 1
_TRANSIENT = (".deleted", ".cleaned", ".swap")
_KNOWN_FILES = {"leader-epoch-checkpoint", "partition.metadata", ".kafka_cleanshutdown"}


@dataclass(frozen=True)
class BatchInfo:
    """What the checks need of one batch."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    magic: int
    partition_leader_epoch: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    control_type: ControlRecordType | None


@dataclass
class SegmentInfo:
    """One segment as found on disk."""

    base_offset: int
    size: int
    batches: list[BatchInfo] = field(default_factory=list)

    @property
    def next_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.base_offset


@dataclass
class Report:
    """The segments found and every problem, in the order found."""

    directory: Path
    segments: list[SegmentInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset if self.segments else 0

    @property
    def first_offset(self) -> int | None:
        for seg in self.segments:
            if seg.batches:
                return seg.batches[0].base_offset
        return None

    def problem(self, text: str) -> None:
        self.problems.append(text)


def _digits(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _batch_info(batch: RecordBatch) -> BatchInfo:
    control_type = None
    if batch.magic >= MAGIC_V2 and batch.is_control_batch:
        try:
            marker = batch.end_transaction_marker()  # type: ignore[attr-defined]
            control_type = None if marker is None else marker.control_type
        except KafkaError:
            control_type = None
    return BatchInfo(
        batch.position,
        batch.size_in_bytes,
        batch.base_offset,
        batch.last_offset,
        batch.max_timestamp,
        batch.magic,
        batch.partition_leader_epoch if batch.magic >= MAGIC_V2 else -1,
        batch.producer_id if batch.magic >= MAGIC_V2 else -1,
        batch.magic >= MAGIC_V2 and batch.is_transactional,
        batch.magic >= MAGIC_V2 and batch.is_control_batch,
        control_type,
    )


def _scan_log(path: Path, base: int, report: Report) -> SegmentInfo:
    data = memoryview(path.read_bytes())
    seg = SegmentInfo(base, len(data))
    pos = 0
    while pos < len(data):
        try:
            batch = read_batch_at(data, pos, len(data))
        except KafkaError as exc:
            report.problem(f"{path.name}: bad frame at byte {pos}: {exc}")
            break
        if batch is None:
            report.problem(f"{path.name}: partial batch at the tail ({len(data) - pos} bytes from {pos})")
            break
        try:
            batch.ensure_valid()
        except KafkaError as exc:
            report.problem(f"{path.name}: batch at byte {pos} (offsets {batch.base_offset}..): {exc}")
        seg.batches.append(_batch_info(batch))
        pos += batch.size_in_bytes
    return seg


def _check_offset_index(path: Path, seg: SegmentInfo, report: Report, exact: bool) -> None:
    data = path.read_bytes()
    if len(data) % 8:
        report.problem(f"{path.name}: length {len(data)} is not a multiple of 8")
    starts = {b.position: b for b in seg.batches}
    positions = [b.position for b in seg.batches]
    entries = [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]
    prev: tuple[int, int] | None = None
    for n, (rel, pos) in enumerate(entries):
        offset = seg.base_offset + rel
        where = f"{path.name}: entry {n} (offset {offset}, position {pos})"
        if prev is not None and (rel <= prev[0] or pos <= prev[1]):
            report.problem(f"{where} is not after the previous entry {prev}")
        prev = (rel, pos)
        if rel < 0 or pos < 0 or pos >= seg.size:
            report.problem(f"{where} is outside the segment (size {seg.size})")
            continue
        batch = starts.get(pos)
        if batch is None:
            report.problem(f"{where} does not point at the start of a batch")
            continue
        if exact:
            if batch.last_offset != offset:
                report.problem(f"{where} points at a batch whose last offset is {batch.last_offset}")
        else:
            limit = entries[n + 1][1] if n + 1 < len(entries) else seg.size
            i = bisect.bisect_left(positions, pos)
            ok = (
                any(b.last_offset == offset for b in seg.batches[i:] if b.position < limit)
                and batch.last_offset <= offset
            )
            if not ok:
                report.problem(f"{where} is not the last offset of a batch in [{pos}, {limit})")


def _check_time_index(path: Path, seg: SegmentInfo, report: Report, check_final: bool) -> None:
    data = path.read_bytes()
    if len(data) % 12:
        report.problem(f"{path.name}: length {len(data)} is not a multiple of 12")
    entries = [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]
    by_last = {b.last_offset: b for b in seg.batches}
    running: list[tuple[int, int]] = []  # (last offset, max timestamp so far)
    best = -1
    for b in seg.batches:
        best = max(best, b.max_timestamp)
        running.append((b.last_offset, best))
    lasts = [r[0] for r in running]
    prev: tuple[int, int] | None = None
    for n, (ts, rel) in enumerate(entries):
        offset = seg.base_offset + rel
        where = f"{path.name}: entry {n} (timestamp {ts}, offset {offset})"
        if prev is not None and (ts <= prev[0] or rel < prev[1]):
            report.problem(f"{where} is not after the previous entry {prev} (not monotonic)")
        prev = (ts, rel)
        if rel < 0 or offset >= seg.next_offset:
            report.problem(f"{where} is outside the segment [{seg.base_offset}, {seg.next_offset})")
            continue
        batch = by_last.get(offset)
        if batch is None:
            report.problem(f"{where} does not name the last offset of a batch")
            continue
        if batch.magic >= MAGIC_V2 and batch.max_timestamp != ts:
            report.problem(f"{where}: the batch ending there has max timestamp {batch.max_timestamp}")
        i = bisect.bisect_left(lasts, offset)
        if running[i][1] != ts:
            report.problem(f"{where}: the largest timestamp up to there is {running[i][1]}")
    largest = max((b.max_timestamp for b in seg.batches), default=-1)
    if check_final and largest >= 0 and any(b.magic >= 1 for b in seg.batches):
        last_ts = entries[-1][0] if entries else -1
        if last_ts != largest:
            report.problem(
                f"{path.name}: last entry has timestamp {last_ts}, the segment's largest timestamp is {largest}"
            )


def _expected_aborted(report: Report) -> dict[int, list[tuple[int, int, int, int]]]:
    """Replay the batches: aborted transactions (pid, first, last, lso) per segment of their marker."""
    ongoing: dict[int, int] = {}
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    for seg in report.segments:
        for b in seg.batches:
            if b.magic < MAGIC_V2 or b.producer_id < 0:
                continue
            if b.is_control:
                first = ongoing.get(b.producer_id)
                if first is None:
                    continue
                if b.control_type is ControlRecordType.ABORT:
                    others = [f for p, f in ongoing.items() if p != b.producer_id]
                    lso = min(others) if others else b.last_offset + 1
                    out.setdefault(seg.base_offset, []).append((b.producer_id, first, b.last_offset, lso))
                del ongoing[b.producer_id]
            elif b.is_transactional:
                ongoing.setdefault(b.producer_id, b.base_offset)
    return out


def _check_txn_index(path: Path, seg: SegmentInfo, report: Report) -> list[tuple[int, int, int, int]]:
    data = path.read_bytes()
    if len(data) % 34:
        report.problem(f"{path.name}: length {len(data)} is not a multiple of 34")
    found = []
    prev_last = None
    for i in range(0, len(data) - len(data) % 34, 34):
        version, pid, first, last, lso = struct.unpack_from(">hqqqq", data, i)
        where = f"{path.name}: entry {i // 34} (pid {pid}, {first}..{last}, lso {lso})"
        if version != 0:
            report.problem(f"{where} has version {version}")
        if prev_last is not None and last <= prev_last:
            report.problem(f"{where} does not come after last offset {prev_last}")
        if not seg.base_offset <= last < seg.next_offset or first > last:
            report.problem(f"{where} is outside the segment [{seg.base_offset}, {seg.next_offset})")
        prev_last = last
        found.append((pid, first, last, lso))
    return found


def _check_epochs(path: Path, report: Report) -> None:
    lines = path.read_text("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        if int(lines[0]) != 0 or int(lines[1]) != len(lines) - 2:
            report.problem(f"{path.name}: bad version or count: {lines[:2]}")
        entries = [(int(a), int(b)) for a, b in (line.split() for line in lines[2:])]
    except (ValueError, IndexError):
        report.problem(f"{path.name}: malformed: {lines!r}")
        return
    for (e0, o0), (e1, o1) in itertools.pairwise(entries):
        if e1 <= e0 or o1 <= o0:
            report.problem(f"{path.name}: entries ({e0}, {o0}) and ({e1}, {o1}) are not increasing")
    if entries and entries[-1][1] > report.log_end_offset:
        report.problem(
            f"{path.name}: last entry {entries[-1]} starts past the log end {report.log_end_offset}"
        )
    if not entries:
        return
    starts = [o for _, o in entries]
    for seg in report.segments:
        for b in seg.batches:
            if b.magic < MAGIC_V2 or b.partition_leader_epoch < 0 or b.base_offset < starts[0]:
                continue
            epoch = entries[bisect.bisect_right(starts, b.base_offset) - 1][0]
            if epoch != b.partition_leader_epoch:
                report.problem(
                    f"{path.name}: batch at offset {b.base_offset} has leader epoch {b.partition_leader_epoch}, "
                    f"the cache says {epoch}"
                )


def _check_snapshot(path: Path, report: Report) -> None:
    data = path.read_bytes()
    offset = _digits(path.name)
    if len(data) < 10:
        report.problem(f"{path.name}: {len(data)} bytes is too short for a producer snapshot")
        return
    version, crc, count = struct.unpack_from(">hIi", data)
    if version != 1:
        report.problem(f"{path.name}: version {version}")
    if crc32c(data[6:]) != crc:
        report.problem(f"{path.name}: CRC mismatch")
    if count < 0 or len(data) != 10 + 46 * count:
        report.problem(f"{path.name}: {len(data)} bytes for {count} entries")
    if offset is not None and offset > report.log_end_offset:
        report.problem(f"{path.name}: snapshot past the log end offset {report.log_end_offset}")


def verify_partition_dir(
    directory: Path,
    *,
    exact_index_entries: bool = True,
    allow_transient_files: bool = False,
    check_time_index_final: bool = True,
    check_txn_index: bool = True,
    check_epochs: bool = True,
    check_snapshots: bool = True,
) -> Report:
    """Check every file of a closed partition directory; see the module doc for what is checked."""
    directory = Path(directory)
    report = Report(directory)
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    logs = sorted((_digits(n), n) for n in names if n.endswith(".log") and _digits(n) is not None)
    bases = {b for b, _ in logs}
    for name in names:
        if name.endswith(_TRANSIENT):
            if not allow_transient_files:
                report.problem(f"{name}: leftover transient file")
        elif name.endswith((".index", ".timeindex", ".txnindex")):
            if _digits(name) not in bases:
                report.problem(f"{name}: index without a .log (orphan)")
        elif name.endswith(".tmp"):
            report.notes.append(f"{name}: checkpoint temp file (a crash during an atomic write)")
        elif not (name.endswith((".log", ".snapshot")) or name in _KNOWN_FILES):
            report.problem(f"{name}: unknown file")
    prev_last: int | None = None
    for base, name in logs:
        assert base is not None
        seg = _scan_log(directory / name, base, report)
        report.segments.append(seg)
        if prev_last is not None and base <= prev_last:
            report.problem(f"{name}: base offset {base} is not above the previous offset {prev_last}")
        for b in seg.batches:
            where = f"{name}: batch at byte {b.position} (offsets {b.base_offset}..{b.last_offset})"
            if b.base_offset < base or b.last_offset - base > INT32_MAX:
                report.problem(f"{where} does not fit the segment's base offset {base}")
            if prev_last is not None and b.base_offset <= prev_last:
                report.problem(f"{where} does not come after offset {prev_last}")
            if b.last_offset < b.base_offset:
                report.problem(f"{where} has its last offset before its base offset")
            prev_last = b.last_offset
        for suffix, check in ((".index", "offset"), (".timeindex", "time")):
            path = directory / f"{base:020d}{suffix}"
            if not path.exists():
                if seg.batches:
                    report.problem(f"{path.name}: missing for a segment with {len(seg.batches)} batches")
                continue
            if check == "offset":
                _check_offset_index(path, seg, report, exact_index_entries)
            else:
                _check_time_index(path, seg, report, check_time_index_final)
    if check_txn_index:
        expected = _expected_aborted(report)
        exact = bool(report.segments) and report.segments[0].base_offset == 0
        for seg in report.segments:
            path = directory / f"{seg.base_offset:020d}.txnindex"
            found = _check_txn_index(path, seg, report) if path.exists() else []
            want = expected.get(seg.base_offset, [])
            if exact and found != want:
                report.problem(
                    f"{seg.base_offset:020d}.txnindex: aborted transactions {found}, a replay of the log gives {want}"
                )
    epochs = directory / "leader-epoch-checkpoint"
    if check_epochs and epochs.exists():
        _check_epochs(epochs, report)
    if check_snapshots:
        for name in names:
            if name.endswith(".snapshot"):
                _check_snapshot(directory / name, report)
    return report


def assert_valid_partition_dir(directory: Path, **kwargs: bool) -> Report:
    """:func:`verify_partition_dir`, failing with every problem found."""
    report = verify_partition_dir(directory, **kwargs)
    if report.problems:
        listing = "\n  ".join(report.problems[:50])
        more = f"\n  ... and {len(report.problems) - 50} more" if len(report.problems) > 50 else ""
        raise AssertionError(f"partition directory {directory} is not valid:\n  {listing}{more}")
    return report


def iter_records(directory: Path) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every data record of every segment, in order (control batches skipped)."""
    for path in sorted(Path(directory).glob("*.log")):
        data = memoryview(path.read_bytes())
        pos = 0
        while True:
            batch = read_batch_at(data, pos, len(data))
            if batch is None:
                break
            if not (batch.magic >= MAGIC_V2 and batch.is_control_batch):
                for record in batch.records():
                    yield record.offset, record.key, record.value
            pos += batch.size_in_bytes
