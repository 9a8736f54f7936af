"""The plan of ``kafkalog recover``: what a repair will remove or rewrite, worked out before anything changes.

The rule (docs/operations.md §4.4). ``recover`` is an operator's tool, not a broker restart: it loses only the
damage, never intact data around it.

* Every segment is walked batch by batch with the checks of the loader's recovery (framing, CRC-32C, a record
  count of at most ``lastOffsetDelta + 1``, offsets at or above the segment's base offset and growing from batch
  to batch), plus one the loader cannot make: on a topic that ``kafkalog-topics.json`` knows is not compacted
  (``exact_counts``), a batch holds exactly ``lastOffsetDelta + 1`` records (a forged ``lastOffsetDelta`` with a
  recomputed CRC would otherwise move the log end offset by up to 2**31). A batch that fails is
  **damage**; the walk resynchronises at the next position where a batch passes every check (first the end of
  the damaged batch's own frame, then every position whose magic byte is 2), so one bad batch costs that batch.
  A batch ending at or past the next segment's base offset is damage; when batches go backwards only because
  the batch before them lies wholly above them, that batch (its base offset jumped up) is the damage.
* ``keep`` (the default): each damaged byte range is removed and everything else stays. Damage at the end of a
  segment truncates it; damage before intact batches **rewrites** the segment without the damaged bytes (same
  name, a ``.cleaned`` copy renamed over the ``.log``: a crash leaves the old or the new file); a segment with
  no valid batch left is deleted. Later segments are kept. The offsets of the damage become a gap, as
  compaction leaves (consumers skip it).
* **No hole between segments** (``keep`` only). Readers and ``verify`` take offsets missing between two
  segments of a log that is not compacted for a segment lost in the middle (``consume`` exits 2). So where the
  plan leaves a kept segment whose base offset is above the previous kept segment's next offset -- because the
  segment before it is deleted or lost its end, or, on a topic known not to be compacted, wherever -- a
  ``move`` step sets its base offset to that next offset: the ``.log`` and ``.txnindex`` are renamed to the
  new 20-digit name and the ``.index``/``.timeindex`` deleted (the load rebuilds them). A base offset below
  the first batch is what compaction leaves and what the loader accepts, so the lost offsets become a gap
  inside the segment. An empty segment in the middle is deleted there instead. Not moved, and said in the
  plan's ``notes``: a segment whose last offset would then not fit the int32 relative offsets, and every
  segment while an interrupted swap is pending (the load decides what a ``.swap`` replaces; a later run moves
  them). Crash safety: the moves come after a directory fsync (truncations are fsynced), and each move
  deletes the old indexes, renames the ``.log`` (one atomic step), then the ``.txnindex``; a crash between
  two steps leaves a directory the load reads (an orphaned ``.txnindex`` is deleted and rebuilt by the
  recovery of the segment, which has no ``.index``), and a later ``recover`` does the moves left.
* ``truncate`` (``--truncate-after-damage``, Kafka's rule for unflushed data): the first damaged segment is
  truncated at the damage and every later segment is deleted.
* A batch whose partition leader epoch (outside the CRC) is above a later batch's -- no leader writes that --
  gets the smallest epoch found after it (only that header field changes). ``leader-epoch-checkpoint`` that
  does not parse, or whose entries are negative or not strictly increasing, or after such a fix, is rewritten
  from the leader epochs in the batches (as segment recovery replays them), truncated to the log start offset.
* A ``partition.metadata`` that does not parse is rewritten with the topic id of ``kafkalog-topics.json``, or
  removed when no topic id is known there.
* The ``.log.swap`` of an interrupted swap is walked the same way (the load reads it to complete the swap and
  fails on a bad batch): its damage is removed, the whole file when nothing in it is valid.
* A ``log-start-offset-checkpoint`` entry past the log end the plan leaves (the load would delete every
  segment: "segment files were deleted from the file system") is dropped from the data directory's checkpoint.
* A partition that cannot be repaired without a decision (a readable ``partition.metadata`` whose topic id
  differs from ``kafkalog-topics.json``, an unreadable file; a ``kafkalog-topics.json`` that does not parse, set
  by :func:`kafkalog.cli.recover.plan_target`) gets an ``error`` and no action; the command then changes
  nothing at all.

:func:`plan_partition` only reads (no lock needed: ``--dry-run`` prints it); :func:`apply_plan` does exactly
what the plan lists, in its order (segments, moves last among them; leader epochs, named by the segment's
base offset after the plan; small files). Index files of every changed segment are deleted so the load that
follows rebuilds them.
"""

from __future__ import annotations

import bisect
import os
import struct
import uuid
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import numpy as np

from kafkalog._durable import fsync_dir
from kafkalog.datadir import LOG_START_OFFSET_CHECKPOINT, read_topics
from kafkalog.errors import CorruptRecordError, InvalidRecordError, KafkaError
from kafkalog.log.checkpoint import (
    PARTITION_METADATA_FILE,
    CheckpointError,
    EpochEntry,
    leader_epoch_checkpoint,
    offset_checkpoint,
    read_partition_metadata,
    topic_id_from_string,
    topic_id_to_string,
    write_partition_metadata,
)
from kafkalog.log.loader import check_partition_dir
from kafkalog.log.names import TopicPartition
from kafkalog.records import RecordBatch, read_batch_at
from kafkalog.records.batch import LOG_OVERHEAD, MAGIC_V2, RECORD_BATCH_OVERHEAD
from kafkalog.storage.files import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from kafkalog.storage.segment import check_batch_offsets

__all__ = [
    "Damage",
    "EpochFix",
    "FileAction",
    "Mode",
    "PartitionPlan",
    "SegmentPlan",
    "apply_plan",
    "plan_partition",
]

Mode = Literal["keep", "truncate"]
_CHUNK: Final = 1 << 20
_INT32_MAX: Final = 2**31 - 1
_INDEX_SUFFIXES: Final = (".index", ".timeindex", ".txnindex")
_BASE_AND_LENGTH: Final = struct.Struct(">qi")
#: Byte position of ``partitionLeaderEpoch`` in a v2 batch (after baseOffset and batchLength; outside the CRC).
_EPOCH_FIELD: Final = 12


@dataclass(frozen=True)
class Damage:
    """One damaged byte range ``[start, end)`` of a segment and the offsets it held (inferred from the valid
    batches around it: ``last_offset`` None when nothing valid follows in the segment)."""

    start: int
    end: int
    first_offset: int
    last_offset: int | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "start": self.start,
            "end": self.end,
            "bytes": self.end - self.start,
            "firstOffset": self.first_offset,
            "lastOffset": self.last_offset,
            "reason": self.reason,
        }


SegmentAction = Literal["truncate", "rewrite", "delete", "move"]


@dataclass
class SegmentPlan:
    """What happens to one ``.log``: ``truncate`` (keep its first ``size_after`` bytes), ``rewrite`` (keep
    the ``kept`` byte ranges), ``delete``, ``move`` (its base offset goes down to ``new_base_offset``: the
    ``.log`` and ``.txnindex`` are renamed, its other indexes deleted; a step after the segment's own
    repair); ``removed`` lists the damage (empty for a segment deleted only because it comes after the
    damage in ``truncate`` mode, and for a move)."""

    base_offset: int
    size_before: int
    action: SegmentAction
    kept: list[tuple[int, int]]
    removed: list[Damage]
    suffix: str = ""
    """``.swap`` for the new segment of an interrupted swap (the load completes the swap with what is kept)."""
    new_base_offset: int | None = None
    """The base offset a ``move`` gives the segment (the previous kept segment's next offset)."""
    reason: str = ""
    """Why, for a step that removes no damage (an empty segment in the middle deleted)."""

    @property
    def file(self) -> str:
        """The ``.log`` file name."""
        return f"{self.base_offset:020d}.log{self.suffix}"

    @property
    def size_after(self) -> int:
        """Bytes left in the ``.log``."""
        return sum(end - start for start, end in self.kept)

    @property
    def new_file(self) -> str | None:
        """The ``.log`` file name after a ``move`` (None for other actions)."""
        return None if self.new_base_offset is None else f"{self.new_base_offset:020d}.log"

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object (a ``move`` adds ``newBaseOffset`` and ``newFile``)."""
        out: dict[str, object] = {
            "file": self.file,
            "baseOffset": self.base_offset,
            "action": self.action,
            "sizeBefore": self.size_before,
            "sizeAfter": self.size_after,
            "removed": [d.to_dict() for d in self.removed],
        }
        if self.reason:
            out["reason"] = self.reason
        if self.new_base_offset is not None:
            out["newBaseOffset"] = self.new_base_offset
            out["newFile"] = self.new_file
        return out


@dataclass
class FileAction:
    """A small file rewritten (``content`` given) or removed, and why."""

    name: str
    action: Literal["rewrite", "remove"]
    reason: str
    content: list[EpochEntry] | uuid.UUID | None = None

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        out: dict[str, object] = {"file": self.name, "action": self.action, "reason": self.reason}
        if isinstance(self.content, list):
            out["entries"] = [[e.epoch, e.start_offset] for e in self.content]
        elif isinstance(self.content, uuid.UUID):
            out["topicId"] = topic_id_to_string(self.content)
        return out


@dataclass
class PartitionPlan:
    """Every action of one partition directory, or the error that stops the whole run."""

    topic_partition: TopicPartition
    path: Path
    mode: Mode
    data_dir: Path | None = None
    segments: list[SegmentPlan] = field(default_factory=list)
    epoch_fixes: list[EpochFix] = field(default_factory=list)
    files: list[FileAction] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    """What the plan leaves as it is although the rule would change it, and why (nothing is done for them)."""

    @property
    def empty(self) -> bool:
        """Whether there is nothing to do."""
        return not self.segments and not self.files and not self.epoch_fixes

    @property
    def moves(self) -> dict[int, int]:
        """Base offsets the plan moves: old -> new."""
        return {s.base_offset: s.new_base_offset for s in self.segments if s.new_base_offset is not None}

    @property
    def bytes_removed(self) -> int:
        """``.log`` bytes the plan removes."""
        return sum(s.size_before - s.size_after for s in self.segments)

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object (``segments``, ``files``, ``error``)."""
        return {
            "mode": self.mode,
            "segments": [s.to_dict() for s in self.segments],
            "leaderEpochs": [f.to_dict() for f in self.epoch_fixes],
            "files": [f.to_dict() for f in self.files],
            "bytesRemoved": self.bytes_removed,
            "notes": self.notes,
            "error": self.error,
        }

    def describe(self) -> list[str]:
        """One line per action (the text output of both the dry run and the real run)."""
        lines = []
        for s in self.segments:
            for d in s.removed:
                offsets = f"offsets {d.first_offset}..{'' if d.last_offset is None else d.last_offset}"
                lines.append(
                    f"{s.file}: remove bytes {d.start}..{d.end} ({d.end - d.start} B, {offsets}): {d.reason}"
                )
            if s.action == "delete":
                lines.append(
                    f"{s.file}: delete segment ({s.size_before} B){': ' if s.reason else ''}{s.reason}"
                )
            elif s.action == "move":
                assert s.new_base_offset is not None
                lines.append(
                    f"{s.file}: move to {s.new_file} (offsets {s.new_base_offset}..{s.base_offset - 1} become a "
                    "gap inside the segment, as compaction leaves, instead of a hole between segments)"
                )
            else:
                lines.append(f"{s.file}: {s.action} {s.size_before} -> {s.size_after} B")
        for e in self.epoch_fixes:
            lines.append(
                f"{e.base_offset:020d}.log: set the leader epoch of {len(e.positions)} batches (offsets "
                f"{e.first_offset}..{e.last_offset}) from {e.from_epoch} to {e.to_epoch}: later batches carry "
                f"epoch {e.to_epoch} (epochs never go back)"
            )
        for f in self.files:
            lines.append(f"{f.name}: {f.action} ({f.reason})")
        lines.extend(f"note: {n}" for n in self.notes)
        return lines


# --------------------------------------------------------------------------------------------------- planning


class _Reader:
    """Positioned reads of one ``.log`` (read-only descriptor)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self.size = os.fstat(self.fd).st_size

    def read(self, position: int, size: int) -> bytes:
        out = bytearray()
        while len(out) < size:
            got = os.pread(self.fd, size - len(out), position + len(out))
            if not got:
                break
            out += got
        return bytes(out)

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class _Run:
    """Consecutive v2 batches of one segment with the same partition leader epoch: positions and offsets."""

    epoch: int
    positions: array[int] = field(default_factory=lambda: array("q"))
    bases: array[int] = field(default_factory=lambda: array("q"))
    lasts: array[int] = field(default_factory=lambda: array("q"))

    def before(self, position: int) -> _Run:
        """The batches of this run that start before ``position``."""
        n = bisect.bisect_left(self.positions, position)
        return _Run(self.epoch, self.positions[:n], self.bases[:n], self.lasts[:n])


@dataclass
class EpochFix:
    """Batches whose partition leader epoch (a header field outside the CRC) is set to ``to_epoch``: they carry
    an epoch above a later batch's, which no leader writes (positions are in the ``.log`` after the plan)."""

    base_offset: int
    positions: list[int]
    from_epoch: int
    to_epoch: int
    first_offset: int
    last_offset: int

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "file": f"{self.base_offset:020d}.log",
            "batches": len(self.positions),
            "firstOffset": self.first_offset,
            "lastOffset": self.last_offset,
            "fromEpoch": self.from_epoch,
            "toEpoch": self.to_epoch,
        }


def _moved(position: int, kept: list[tuple[int, int]]) -> int:
    """Where the byte at ``position`` (inside a kept range) lands once only the kept ranges are left."""
    done = 0
    for start, end in kept:
        if start <= position < end:
            return done + position - start
        done += end - start
    raise ValueError(f"position {position} is not kept")


class _Walk:
    """The batch walk of one segment with the loader's checks (see the module doc)."""

    def __init__(
        self, reader: _Reader, base: int, exact_counts: bool, path: Path, limit: int | None = None
    ) -> None:
        self.r = reader
        self.base = base
        self.exact = exact_counts
        self.path = path
        self.limit = limit
        self.previous_last = base - 1
        self.runs: list[_Run] = []
        #: The batch accepted last since the start or the last damage: position, size, base, last offset, and
        #: the previous last offset before it (so a batch whose base offset jumped up can be taken back).
        self.prev: tuple[int, int, int, int, int] | None = None
        self._buf = b""
        self._start = 0

    def check(self, batch: RecordBatch) -> None:
        """Raises CorruptRecordError/InvalidRecordError unless ``batch`` passes the recovery checks (and ends
        before the next segment's base offset, ``limit``)."""
        batch.ensure_valid()
        check_batch_offsets(batch, self.base, self.previous_last, self.exact, self.path)
        if self.limit is not None and batch.last_offset >= self.limit:
            raise CorruptRecordError(
                f"batch [{batch.base_offset}, {batch.last_offset}] runs into the next segment, which starts at "
                f"offset {self.limit}",
                position=batch.position,
            )

    def accept(self, batch: RecordBatch) -> None:
        """Moves past a valid batch (and notes its leader epoch in the runs of equal epochs)."""
        self.prev = (
            batch.position,
            batch.size_in_bytes,
            batch.base_offset,
            batch.last_offset,
            self.previous_last,
        )
        self.previous_last = batch.last_offset
        if batch.magic >= MAGIC_V2:
            ple = batch.partition_leader_epoch
            if not self.runs or self.runs[-1].epoch != ple:
                self.runs.append(_Run(ple))
            run = self.runs[-1]
            run.positions.append(batch.position)
            run.bases.append(batch.base_offset)
            run.lasts.append(batch.last_offset)

    def _window(self, position: int, size: int) -> tuple[memoryview, int]:
        """The file's bytes from ``position`` (at least ``size`` of them unless the file ends first), read a
        chunk at a time: the view and the index of ``position`` in it."""
        end = min(position + size, self.r.size)
        if not (self._start <= position and end <= self._start + len(self._buf)):
            self._buf = self.r.read(position, max(_CHUNK, end - position))
            self._start = position
        return memoryview(self._buf), position - self._start

    def batch_at(self, position: int) -> RecordBatch | None:
        """The whole batch at ``position`` (None at a partial tail); raises on an impossible frame."""
        view, off = self._window(position, LOG_OVERHEAD + 5)
        if len(view) - off < LOG_OVERHEAD + 5:
            return None
        _, length = _BASE_AND_LENGTH.unpack_from(view, off)
        if length < 0 or position + LOG_OVERHEAD + length > self.r.size:
            view, off = self._window(position, RECORD_BATCH_OVERHEAD)
            end = min(len(view), off + RECORD_BATCH_OVERHEAD)
        else:
            view, off = self._window(position, LOG_OVERHEAD + length)
            end = off + LOG_OVERHEAD + length
        return read_batch_at(view, off, end, origin=position - off, known_magic_only=False)  # a file's rule

    def valid_at(self, position: int) -> RecordBatch | None:
        """The batch at ``position`` if it passes every check, else None."""
        try:
            batch = self.batch_at(position)
            if batch is None:
                return None
            self.check(batch)
            if batch.last_offset - self.base > _INT32_MAX:
                return None
            return batch
        except (CorruptRecordError, InvalidRecordError, ValueError):
            return None

    def resync(self, damaged: int) -> int | None:
        """The first position after ``damaged`` where a valid batch starts (None: none in the segment)."""
        head = self.r.read(damaged, LOG_OVERHEAD)
        if len(head) == LOG_OVERHEAD:
            length = int(_BASE_AND_LENGTH.unpack_from(head)[1])
            skip = damaged + LOG_OVERHEAD + length
            if length >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD and skip < self.r.size and self.valid_at(skip):
                return skip
        position = damaged + 1
        low = max(self.base, self.previous_last + 1)
        while position + RECORD_BATCH_OVERHEAD <= self.r.size:
            chunk = self.r.read(position, _CHUNK + RECORD_BATCH_OVERHEAD)
            arr = np.frombuffer(chunk, np.uint8)
            n = len(arr) - RECORD_BATCH_OVERHEAD + 1
            if n <= 0:
                break
            candidates = np.flatnonzero(arr[16 : 16 + n] == MAGIC_V2)
            for i in candidates.tolist():
                at = position + i
                base, length = _BASE_AND_LENGTH.unpack_from(chunk, i)
                if base < low or length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
                    continue
                if at + LOG_OVERHEAD + length > self.r.size:
                    continue
                if self.valid_at(at) is not None:
                    return at
            position += min(n, _CHUNK)
        return None

    def take_back(self, batch: RecordBatch) -> Damage | None:
        """When ``batch`` goes backwards only because the batch before it lies wholly above it and it fits
        after the one before that, the earlier batch is the damaged one (its base offset, outside the CRC, jumped
        up): it is taken back and returned as damage, and ``batch`` is accepted. Else None (nothing changes)."""
        if self.prev is None or batch.magic < MAGIC_V2:
            return None
        position, size, base, last, before = self.prev
        if not (base > batch.last_offset and batch.base_offset > before):
            return None
        self.previous_last = before
        try:
            self.check(batch)
        except (CorruptRecordError, InvalidRecordError):
            self.previous_last = last
            return None
        run = self.runs[-1]
        for column in (run.positions, run.bases, run.lasts):
            column.pop()
        if not run.positions:
            self.runs.pop()
        reason = f"batch [{base}, {last}] lies above the batches after it: its base offset (outside the CRC) is damaged"
        damage = Damage(position, position + size, before + 1, batch.base_offset - 1, reason)
        self.accept(batch)
        return damage

    def run(self) -> tuple[list[tuple[int, int]], list[Damage]]:
        """Kept byte ranges and damaged ones of the whole segment."""
        kept: list[tuple[int, int]] = []
        damages: list[Damage] = []
        position, kept_start = 0, 0
        size = self.r.size
        while position < size:
            reason: str | None = None
            batch: RecordBatch | None = None
            try:
                batch = self.batch_at(position)
                if batch is None:
                    reason = f"partial batch: {size - position} bytes left at the end of the file"
                else:
                    self.check(batch)
            except (CorruptRecordError, InvalidRecordError) as exc:
                reason = str(exc)
            if reason is None and batch is not None:
                self.accept(batch)
                position += batch.size_in_bytes
                continue
            taken = None if batch is None else self.take_back(batch)
            if taken is not None and batch is not None:
                if taken.start > kept_start:
                    kept.append((kept_start, taken.start))
                damages.append(taken)
                kept_start = taken.end
                position += batch.size_in_bytes
                continue
            self.prev = None
            if position > kept_start:
                kept.append((kept_start, position))
            after = self.resync(position)
            nxt = None if after is None else self.valid_at(after)
            damages.append(
                Damage(
                    position,
                    size if after is None else after,
                    self.previous_last + 1,
                    None if nxt is None else nxt.base_offset - 1,
                    reason or "damaged batch",
                )
            )
            if after is None:
                return kept, damages
            position = kept_start = after
        if position > kept_start:
            kept.append((kept_start, position))
        return kept, damages


def _log_files(path: Path, suffix: str = "") -> list[tuple[int, Path]]:
    """The ``<20 digits>.log<suffix>`` files of ``path`` by base offset."""
    out = []
    tail = ".log" + suffix
    for entry in os.scandir(path):
        name = entry.name
        stem = name[: -len(tail)]
        if name.endswith(tail) and len(stem) == 20 and stem.isdigit() and entry.is_file():
            out.append((int(stem), Path(entry.path)))
    return sorted(out)


def _plan_swaps(plan: PartitionPlan, exact_counts: bool) -> None:
    """Damage in the ``.log.swap`` of an interrupted swap (the load reads it to complete the swap, and fails on
    a bad batch): removed as in a segment, the whole file when nothing in it is valid."""
    for base, log_path in _log_files(plan.path, SWAP_FILE_SUFFIX):
        reader = _Reader(log_path)
        try:
            kept, damages = _Walk(reader, base, exact_counts, log_path).run()
            if not damages:
                continue
            action: Literal["truncate", "rewrite", "delete"] = "rewrite"
            if not kept:
                action = "delete"
            elif len(kept) == 1 and kept[0][0] == 0:
                action = "truncate"
            plan.segments.append(SegmentPlan(base, reader.size, action, kept, damages, SWAP_FILE_SUFFIX))
        finally:
            reader.close()


@dataclass
class _Left:
    """A segment the plan keeps: its base offset, last offset (``base - 1`` when it holds no batch), size
    after the plan, and whether its last bytes are kept (False: damage at its end was cut off)."""

    base: int
    last: int
    size: int
    tail_kept: bool


def _plan_moves(plan: PartitionPlan, left: list[_Left | None], holes_are_damage: bool) -> None:
    """Adds a ``move`` for every kept segment whose base offset is above the previous kept segment's next
    offset, where the plan made that hole (the segment before it in the directory is deleted or lost its end)
    or, with ``holes_are_damage`` (a topic known not to be compacted), wherever it is: readers and ``verify``
    take a hole between segments of a log that is not compacted for a segment missing in the middle, while a
    gap inside a segment is what compaction leaves. The segment's base offset goes down to that next offset,
    unless its offsets would then not fit the int32 relative offsets (a note instead), or an interrupted swap
    is pending (the load decides which segments it replaces: a note instead). An empty segment (no batch) in
    the middle is deleted there (it holds nothing, and leaves a hole after it)."""
    deleted_swaps = {s.base_offset for s in plan.segments if s.suffix and s.action == "delete"}
    swaps = [b for b, _ in _log_files(plan.path, SWAP_FILE_SUFFIX) if b not in deleted_swaps]
    previous: _Left | None = None
    previous_next = 0
    made = False  # whether the plan removed what lay between ``previous`` and the segment at hand
    last = max((i for i, seg in enumerate(left) if seg is not None), default=-1)
    for i, seg in enumerate(left):
        if seg is None:
            made = previous is not None
            continue
        closing = previous is not None and (made or holes_are_damage)
        hole = closing and seg.base > previous_next
        next_offset = seg.last + 1
        if closing and seg.last < seg.base and i < last:  # empty: a hole after it (and maybe one before)
            plan.segments.append(
                SegmentPlan(seg.base, seg.size, "delete", [], [], reason="empty, in the middle of the log")
            )
            made = True
            continue
        if hole:
            what = (
                f"{seg.base:020d}.log: offsets {previous_next}..{seg.base - 1} stay a hole between segments"
            )
            if swaps:
                plan.notes.append(
                    f"{what}: not moved down while the interrupted swap {swaps[0]:020d}.log.swap is pending "
                    "(the load completes it; run recover again)"
                )
            elif seg.last - previous_next > _INT32_MAX:
                plan.notes.append(
                    f"{what}: moving its base offset down to {previous_next} would put its last offset "
                    f"{seg.last} past the int32 relative offsets of a segment"
                )
            else:
                plan.segments.append(
                    SegmentPlan(
                        seg.base, seg.size, "move", [(0, seg.size)], [], new_base_offset=previous_next
                    )
                )
                next_offset = max(next_offset, previous_next)
        else:
            next_offset = max(next_offset, seg.base)
        previous, previous_next, made = seg, next_offset, not seg.tail_kept


def _epoch_problem(path: Path) -> str | None:
    """Why the partition's ``leader-epoch-checkpoint`` must be rebuilt (None: it is sound or absent)."""
    try:
        entries = leader_epoch_checkpoint(path).read()
    except (CheckpointError, OSError, ValueError) as exc:
        return f"not parseable: {exc}"
    for i, e in enumerate(entries):
        if e.epoch < 0 or e.start_offset < 0:
            return f"negative entry {e!r}"
        if i and (e.epoch <= entries[i - 1].epoch or e.start_offset <= entries[i - 1].start_offset):
            return f"entries {entries[i - 1]!r} and {e!r} are not increasing"
    return None


def _truncated_from_start(entries: list[EpochEntry], start: int) -> list[EpochEntry]:
    """As the loader's ``truncate_from_start``: the last entry at or before ``start`` moves to ``start``."""
    removed = [e for e in entries if e.start_offset <= start]
    if not removed:
        return entries
    return [EpochEntry(removed[-1].epoch, start), *(e for e in entries if e.start_offset > start)]


def plan_partition(
    tp: TopicPartition,
    path: Path,
    *,
    data_dir: Path | None,
    exact_counts: bool,
    log_start_offset: int,
    mode: Mode = "keep",
    on_bytes: Callable[[int], None] | None = None,
) -> PartitionPlan:
    """What :func:`apply_plan` will do to ``path`` (read-only; see the module doc for the rule); ``on_bytes`` is
    called with each ``.log`` file's size once it has been walked (a progress bar)."""
    plan = PartitionPlan(tp, path, mode, data_dir)
    try:
        check_partition_dir(
            path
        )  # a symlink, FIFO or directory where a file belongs: refused before any read
    except KafkaError as exc:
        plan.error = str(exc)
        return plan
    try:
        _plan_metadata(plan, data_dir)
        if plan.error is not None:
            return plan
        runs: list[tuple[int, _Run]] = []  # (segment base offset, run) in log order, kept batches only
        left: list[_Left | None] = []  # per .log in name order: what the plan leaves of it (None: deleted)
        stop = False
        end: int | None = None  # the log end offset after the plan (None: no segment left)
        files = _log_files(path)
        for i, (base, log_path) in enumerate(files):
            limit = files[i + 1][0] if i + 1 < len(files) else None
            reader = _Reader(log_path)
            try:
                if stop:  # truncate mode: everything after the first damage goes
                    plan.segments.append(SegmentPlan(base, reader.size, "delete", [], []))
                    continue
                walk = _Walk(reader, base, exact_counts, log_path, limit)
                kept, damages = walk.run()
                found = walk.runs
                if damages and mode == "truncate":
                    found = [r.before(damages[0].start) for r in found]
                runs.extend((base, r) for r in found if len(r.positions))
                if not damages:
                    end = walk.previous_last + 1
                    left.append(_Left(base, walk.previous_last, reader.size, tail_kept=True))
                    continue
                if mode == "truncate":
                    kept, damages, stop = kept[:1] if kept and kept[0][0] == 0 else [], damages[:1], True
                if kept:
                    end = damages[0].first_offset if mode == "truncate" else walk.previous_last + 1
                if not kept:
                    action: SegmentAction = "delete"
                elif len(kept) == 1 and kept[0][0] == 0:
                    action = "truncate"
                else:
                    action = "rewrite"
                segment = SegmentPlan(base, reader.size, action, kept, damages)
                plan.segments.append(segment)
                tail_kept = bool(kept) and kept[-1][1] == reader.size
                left.append(_Left(base, walk.previous_last, segment.size_after, tail_kept) if kept else None)
            finally:
                reader.close()
                if on_bytes is not None:
                    on_bytes(reader.size)
        _plan_swaps(plan, exact_counts)
        if mode == "keep":
            _plan_moves(plan, left, exact_counts)
        if end is not None and log_start_offset > end and data_dir is not None:
            reason = (
                f"entry {log_start_offset} lies past the log end {end}, which would make the load delete every "
                "segment; dropped (the log starts at its first segment)"
            )
            plan.files.append(FileAction(LOG_START_OFFSET_CHECKPOINT, "rewrite", reason))
            log_start_offset = 0
        moved = plan.moves
        epochs = _plan_epoch_fixes(plan, [(moved.get(base, base), run) for base, run in runs])
        problem = _epoch_problem(path)
        if problem is None and plan.epoch_fixes:
            problem = "batches with a leader epoch above a later batch's were set back"
        if problem is not None:
            entries = _truncated_from_start(epochs, log_start_offset)
            plan.files.append(
                FileAction(
                    "leader-epoch-checkpoint", "rewrite", f"{problem}; rebuilt from the batches", entries
                )
            )
    except OSError as exc:
        plan.segments, plan.files = [], []
        plan.error = f"cannot read {path}: {exc}"
    return plan


def _plan_epoch_fixes(plan: PartitionPlan, runs: list[tuple[int, _Run]]) -> list[EpochEntry]:
    """Adds the leader-epoch fixes to ``plan`` (a run whose epoch is above a later run's takes the smallest
    epoch after it; batches without an epoch, -1, are left alone) and returns the epoch entries the batches
    then give, as segment recovery replays them."""
    moves = plan.moves
    kept = {  # runs name the segment by its base offset after the plan (a move does not change positions)
        moves.get(s.base_offset, s.base_offset): s.kept
        for s in plan.segments
        if s.action != "move" and not s.suffix
    }
    target: dict[int, int] = {}
    low: int | None = None
    for i in range(len(runs) - 1, -1, -1):
        epoch = runs[i][1].epoch
        if epoch < 0:
            continue
        if low is not None and epoch > low:
            target[i] = low
        else:
            low = epoch
    entries: list[EpochEntry] = []
    for i, (base, run) in enumerate(runs):
        epoch = target.get(i, run.epoch)
        if i in target:
            ranges = kept.get(base)
            positions = [p if ranges is None else _moved(p, ranges) for p in run.positions]
            plan.epoch_fixes.append(EpochFix(base, positions, run.epoch, epoch, run.bases[0], run.lasts[-1]))
        if epoch >= 0 and (not entries or epoch > entries[-1].epoch):
            entries.append(EpochEntry(epoch, run.bases[0]))
    return entries


def _plan_metadata(plan: PartitionPlan, data_dir: Path | None) -> None:
    known: uuid.UUID | None = None
    if data_dir is not None:
        try:
            doc = read_topics(data_dir)
        except (KafkaError, OSError):
            doc = None
        meta = None if doc is None else doc.topics.get(plan.topic_partition.topic)
        if meta is not None and meta.topic_id is not None:
            known = topic_id_from_string(meta.topic_id)
    try:
        stored = read_partition_metadata(plan.path)
    except (KafkaError, ValueError, UnicodeDecodeError) as exc:
        if known is not None:
            reason = f"not parseable ({exc}); topic id {topic_id_to_string(known)} from kafkalog-topics.json"
            plan.files.append(FileAction(PARTITION_METADATA_FILE, "rewrite", reason, known))
        else:
            reason = f"not parseable ({exc}); no topic id known in kafkalog-topics.json"
            plan.files.append(FileAction(PARTITION_METADATA_FILE, "remove", reason))
        return
    if stored is not None and known is not None and stored != known:
        plan.error = (
            f"{PARTITION_METADATA_FILE} holds topic id {topic_id_to_string(stored)} but kafkalog-topics.json says "
            f"{topic_id_to_string(known)} for topic {plan.topic_partition.topic!r}: move the partition directory "
            "away or fix one of the two (recover does not guess)"
        )


# --------------------------------------------------------------------------------------------------- applying


def _remove_indexes(path: Path, base: int, swap: str = "") -> None:
    for suffix in _INDEX_SUFFIXES:
        (path / f"{base:020d}{suffix}{swap}").unlink(missing_ok=True)


def _rewrite(log_path: Path, kept: list[tuple[int, int]]) -> None:
    """A copy of the kept ranges as ``<log>.cleaned``, fsynced, then renamed over the ``.log``."""
    tmp = log_path.with_name(log_path.name + CLEANED_FILE_SUFFIX)
    src = os.open(log_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        with open(tmp, "wb") as out:
            for start, end in kept:
                position = start
                while position < end:
                    data = os.pread(src, min(_CHUNK, end - position), position)
                    if not data:
                        raise OSError(f"{log_path} ended at byte {position} while copying")
                    out.write(data)
                    position += len(data)
            out.flush()
            os.fsync(out.fileno())
    finally:
        os.close(src)
    os.replace(tmp, log_path)


def _truncate(log_path: Path, size: int) -> None:
    """Truncates the ``.log`` to ``size`` bytes, durably (a later ``move`` must not outlive it in a crash)."""
    fd = os.open(log_path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _move(path: Path, base: int, new_base: int) -> None:
    """Gives the segment ``base`` the base offset ``new_base`` (below it). Every state a crash can leave is a
    directory the load reads: the old ``.index``/``.timeindex`` go first (rebuilt by the load, which recovers
    a segment without them); then the ``.log`` is renamed (one atomic step: before it the segment has its old
    name, after it the new one, and the old ``.txnindex`` left behind is an orphan the load deletes, the
    segment's recovery rebuilding it); then the ``.txnindex``."""
    target = path / f"{new_base:020d}.log"
    if target.exists():
        raise KafkaError(f"cannot move {base:020d}.log to {target.name}: the file exists")
    for suffix in (".index", ".timeindex"):
        (path / f"{base:020d}{suffix}").unlink(missing_ok=True)
    for suffix in _INDEX_SUFFIXES:  # leftovers of a segment once named so: never attach them to this one
        (path / f"{new_base:020d}{suffix}").unlink(missing_ok=True)
    os.rename(path / f"{base:020d}.log", target)
    txn = path / f"{base:020d}.txnindex"
    if txn.exists():
        os.rename(txn, path / f"{new_base:020d}.txnindex")


def apply_plan(plan: PartitionPlan) -> None:
    """Does what ``plan`` lists, in order: segments (truncate / rewrite / delete, with their index files),
    the moves of base offsets (after a directory fsync, so no move is durable before the repair of the
    segments before it), then the small files. Each step is crash-safe on its own (a rewrite goes through a
    ``.cleaned`` copy, a truncation is fsynced, a move is ordered as :func:`_move` says)."""
    if plan.error is not None:
        raise KafkaError(plan.error)
    path = plan.path
    synced = False
    for s in plan.segments:
        log_path = path / s.file
        if s.action == "move":
            assert s.new_base_offset is not None
            if not synced:
                fsync_dir(path)
                synced = True
            _move(path, s.base_offset, s.new_base_offset)
            continue
        if s.action == "delete":
            log_path.unlink(missing_ok=True)
        elif s.action == "truncate":
            _truncate(log_path, s.size_after)
        else:
            _rewrite(log_path, s.kept)
        _remove_indexes(path, s.base_offset, s.suffix)
    for e in plan.epoch_fixes:
        fd = os.open(path / f"{e.base_offset:020d}.log", os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            epoch = struct.pack(">i", e.to_epoch)
            for position in e.positions:
                os.pwrite(fd, epoch, position + _EPOCH_FIELD)
            os.fsync(fd)
        finally:
            os.close(fd)
    for f in plan.files:
        target = path / f.name
        if f.name == LOG_START_OFFSET_CHECKPOINT:  # the data directory's: this partition's entry goes
            assert plan.data_dir is not None
            checkpoint = offset_checkpoint(plan.data_dir / LOG_START_OFFSET_CHECKPOINT)
            checkpoint.write([e for e in checkpoint.read() if e[0] != plan.topic_partition])
        elif f.action == "remove":
            target.unlink(missing_ok=True)
        elif isinstance(f.content, uuid.UUID):
            write_partition_metadata(path, f.content)
        elif isinstance(f.content, list):
            leader_epoch_checkpoint(path).write(f.content)
    if plan.segments or plan.files:
        fsync_dir(path)
