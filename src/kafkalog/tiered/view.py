"""A tiered-storage archive's partition as a Kafka partition directory, and the choice of its segments.

Invariants owned here:

* **The file view.** Each chosen archived segment appears as ``<20-digit base>.log``, ``.index``,
  ``.timeindex`` and (when it has one) ``.txnindex``; its producer snapshot as ``<20-digit end + 1>.snapshot``
  (Kafka names a segment's snapshot by the *next* segment's base offset: ``RemoteLogManager.copyLogSegment``
  uploads ``fetchSnapshot(nextSegmentBaseOffset)`` and ``TierStateMachine`` restores it as
  ``producerSnapshotFile(dir, endOffset + 1)``); and ``leader-epoch-checkpoint`` is the newest chosen
  segment's leader-epoch blob (the leader's epoch cache up to that segment's end, in checkpoint format).
  File names sort as Kafka's do; the bytes are the original files' bytes.
* **The choice of segments** (a leader change can re-upload a range, KAFKA-15168): the leader-epoch lineage
  is the newest segment's epoch blob (the one ending highest; ties: the newest ``eventTimestampMs``); a
  segment is kept only if Kafka's ``RemoteLogManager.isRemoteSegmentWithinLeaderEpochs`` accepts it against
  that lineage (its epochs, with empty epochs filtered as ``buildFilteredLeaderEpochMap`` does, are
  the lineage's and end where the lineage says). Of the segments kept, a chain is taken from the lowest
  offset: at each step the segment starting exactly where the chain ends and reaching furthest (ties: newest
  upload), so a leader's superset re-upload replaces the smaller segment as Kafka's
  ``RemoteLogLeaderEpochState.handleSegmentWithCopySegmentFinishedState`` does; segments it makes redundant are
  reported as skipped. Where no segment continues the chain
  exactly, the one covering its end and reaching furthest is taken and the overlap (offsets present twice)
  is reported; a gap is reported too. ``strict`` makes each report an error.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from kafkalog.errors import RemoteStorageError
from kafkalog.log.checkpoint import EpochEntry, leader_epoch_checkpoint
from kafkalog.objstore.files import RandomAccessFile
from kafkalog.tiered.files import BytesFile

__all__ = [
    "ArchivePartitionSource",
    "ArchivedSegment",
    "GoneSegment",
    "PartKind",
    "Selection",
    "filtered_epochs",
    "is_within_lineage",
    "leave_out_leading_gone",
    "parse_epoch_blob",
    "place_gone",
    "select_segments",
    "warn_gone",
]

log = logging.getLogger(__name__)

PartKind = Literal["offset", "timestamp", "producer_snapshot", "leader_epoch", "transaction"]
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex|snapshot)$")
_SUFFIX_PART: Final[dict[str, PartKind]] = {
    "index": "offset",
    "timeindex": "timestamp",
    "txnindex": "transaction",
    "snapshot": "producer_snapshot",
}


class ArchivedSegment(ABC):
    """One archived segment: what planning knows of it, and how to read its files."""

    #: URLs of the segment's objects that are gone while its manifest remains (empty: the segment is whole).
    #: Such a segment stays in the plan so its offsets are data loss for readers, never silently absent.
    missing: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        base_offset: int,
        end_offset: int,
        max_timestamp_ms: int,
        size: int,
        segment_id: str,
        name: str,
        leader_epochs: Mapping[int, int],
        event_timestamp_ms: int | None,
        part_sizes: Mapping[PartKind, int | None],
    ) -> None:
        self.base_offset = base_offset
        #: Last offset of the segment (inclusive), as Kafka's ``RemoteLogSegmentMetadata.endOffset``.
        self.end_offset = end_offset
        self.max_timestamp_ms = max_timestamp_ms
        #: Size of the original ``.log`` file.
        self.size = size
        self.segment_id = segment_id
        #: The object (or object stem) errors name.
        self.name = name
        #: ``{epoch: start offset}`` of the epochs with records in this segment.
        self.leader_epochs = dict(sorted(leader_epochs.items()))
        self.event_timestamp_ms = event_timestamp_ms
        #: Original size of each part (None: the part is absent).
        self.part_sizes = dict(part_sizes)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_offset}-{self.end_offset}, {self.segment_id})"

    @abstractmethod
    def open_log(self) -> RandomAccessFile:
        """The segment's ``.log`` file."""

    @abstractmethod
    def read_part(self, kind: PartKind) -> bytes:
        """One of its small files, whole (decrypted)."""


class GoneSegment(ArchivedSegment):
    """A segment the archive still claims (a manifest, or the index files of a ``LocalTieredStorage``
    fileset) whose data is gone (:attr:`~ArchivedSegment.missing`): kept in the plan so its offsets are data
    loss for readers; opening any of its files raises ``FileNotFoundError`` naming what is gone. An end offset
    below 0 is unknown until :func:`place_gone`."""

    def _gone(self) -> FileNotFoundError:
        what = ", ".join(self.missing)
        return FileNotFoundError(
            f"{self.name} remains but {what} {'is' if len(self.missing) == 1 else 'are'} gone: offsets "
            f"{self.base_offset}-{self.end_offset} are lost (a delete interrupted, or objects removed outside "
            "the tiered storage)"
        )

    def with_missing(self, missing: Sequence[str]) -> GoneSegment:
        """This segment with the URLs of what is gone set; returns itself."""
        self.missing = tuple(missing)
        return self

    def open_log(self) -> RandomAccessFile:
        raise self._gone()

    def read_part(self, kind: PartKind) -> bytes:
        raise self._gone()


def place_gone(gone: Sequence[GoneSegment], segments: Sequence[ArchivedSegment]) -> None:
    """Give a gone segment whose end offset is unknown the end its successor implies (the last: its base)."""
    bases = sorted({s.base_offset for s in (*gone, *segments)})
    for seg in gone:
        if seg.end_offset < 0:
            later = [b for b in bases if b > seg.base_offset]
            seg.end_offset = later[0] - 1 if later else seg.base_offset


def leave_out_leading_gone(selection: Selection, name: str) -> None:
    """Gone segments before the first readable chosen one are a retention delete in progress (Kafka deletes
    the oldest remote segments first, after moving the log start offset past them): left out, reported as
    skipped. Nothing readable at all (every segment gone) is data loss: they stay."""
    chosen = selection.chosen
    first = next((i for i, s in enumerate(chosen) if not s.missing), None)
    if not first:  # None: nothing readable; 0: the archive starts readable
        return
    for seg in chosen[:first]:
        why = (
            f"its {', '.join(seg.missing)} gone, before the first readable segment: a retention delete in "
            "progress or interrupted; the archive starts after it"
        )
        selection.skipped.append((seg, why))
        log.warning("%s: %r: %s", name, seg, why)
    selection.chosen = chosen[first:]


def warn_gone(selection: Selection, name: str) -> None:
    """One warning per chosen segment whose data is gone (its offsets are lost data)."""
    for seg in selection.chosen:
        if seg.missing:
            log.warning(
                "%s: offsets %d-%d are lost: %s remains but %s %s gone",
                name,
                seg.base_offset,
                seg.end_offset,
                seg.name,
                ", ".join(seg.missing),
                "is" if len(seg.missing) == 1 else "are",
            )


def parse_epoch_blob(data: bytes, name: str) -> list[EpochEntry]:
    """The entries of a leader-epoch blob (checkpoint-file content); corrupt content names ``name``."""
    checkpoint = leader_epoch_checkpoint(Path("."))
    try:
        return checkpoint.parse(data)
    except Exception as exc:  # CheckpointError: a KafkaError and an OSError
        detail = str(exc).replace(f" ({checkpoint.path})", "")
        raise RemoteStorageError(f"{name}: corrupt leader-epoch checkpoint: {detail}") from None


def filtered_epochs(epochs: Mapping[int, int]) -> dict[int, int]:
    """Kafka's ``buildFilteredLeaderEpochMap``: drop an epoch whose next epoch starts at the same offset."""
    items = sorted(epochs.items())
    return {e: o for i, (e, o) in enumerate(items) if i + 1 == len(items) or items[i + 1][1] != o}


def is_within_lineage(
    segment_epochs: Mapping[int, int], end_offset: int, log_end_offset: int, lineage: Mapping[int, int]
) -> bool:
    """Kafka's ``RemoteLogManager.isRemoteSegmentWithinLeaderEpochs`` (``lineage``: epoch -> start offset)."""
    seg = filtered_epochs(segment_epochs)
    if not seg or not lineage:
        return not seg  # a segment without epochs cannot be judged; one with epochs needs a lineage
    lineage_keys = sorted(lineage)
    seg_keys = sorted(seg)
    last = seg_keys[-1]
    if last < lineage_keys[0] or last > lineage_keys[-1]:
        return False
    first_candidates = [e for e in seg_keys if e >= lineage_keys[0]]
    if not first_candidates:
        return False
    first = first_candidates[0]

    def higher(keys: Sequence[int], mapping: Mapping[int, int], epoch: int) -> tuple[int, int] | None:
        for k in keys:
            if k > epoch:
                return (k, mapping[k])
        return None

    for epoch in seg_keys:
        offset = seg[epoch]
        if epoch < first:
            continue
        if epoch not in lineage:
            return False
        has_lower = any(k < epoch for k in lineage_keys)
        if epoch == first and has_lower and offset < lineage[epoch]:
            return False
        if epoch == last:
            nxt = higher(lineage_keys, lineage, epoch)
            if nxt is not None and end_offset > nxt[1] - 1:
                return False
        if epoch != last and higher(lineage_keys, lineage, epoch) != higher(seg_keys, seg, epoch):
            return False
    return end_offset < log_end_offset


@dataclass
class Selection:
    """The segments chosen for a partition and what was left out, with why."""

    chosen: list[ArchivedSegment]
    #: ``(segment, reason)`` for each segment left out (outside the lineage, redundant).
    skipped: list[tuple[ArchivedSegment, str]] = field(default_factory=list)
    #: Offsets present in two chosen segments: ``(first offset, last offset)``.
    overlaps: list[tuple[int, int]] = field(default_factory=list)
    #: Offsets no chosen segment holds between the first and the last: ``(first offset, last offset)``.
    gaps: list[tuple[int, int]] = field(default_factory=list)


def _newest_key(seg: ArchivedSegment) -> tuple[int, int, int]:
    return (seg.end_offset, seg.event_timestamp_ms or -1, max(seg.leader_epochs, default=-1))


def select_segments(
    segments: Sequence[ArchivedSegment], lineage: Mapping[int, int] | None, name: str, *, strict: bool = False
) -> Selection:
    """Choose the segments to read (see the module docstring); ``lineage`` None: no lineage filter."""
    sel = Selection([])
    if not segments:
        return sel
    log_end_offset = max(s.end_offset for s in segments) + 1
    valid: list[ArchivedSegment] = []
    for seg in segments:
        # a lost segment (its data gone, see ``missing``) stays a candidate: judged by lineage it could be left
        # out as newer than every readable segment's epochs, and its lost offsets would vanish unreported
        if (
            lineage is not None
            and not seg.missing
            and not is_within_lineage(seg.leader_epochs, seg.end_offset, log_end_offset, lineage)
        ):
            sel.skipped.append((seg, "outside the leader-epoch lineage of the newest segment"))
        else:
            valid.append(seg)
    ordered = sorted(valid, key=lambda s: (s.base_offset, -s.end_offset, -(s.event_timestamp_ms or -1)))

    def rank(s: ArchivedSegment) -> tuple[int, int]:
        return (s.end_offset, s.event_timestamp_ms or -1)

    # One pass in offset order (n log n): ``pending`` holds the segments starting before the chain's end that
    # were not chosen (usually none), the only candidates for an overlapping continuation.
    i, n = 0, len(ordered)
    nxt = ordered[0].base_offset if ordered else 0
    pending: list[ArchivedSegment] = []
    last: ArchivedSegment | None = None
    while True:
        group: list[ArchivedSegment] = []
        while i < n and ordered[i].base_offset <= nxt:
            (group if ordered[i].base_offset == nxt else pending).append(ordered[i])
            i += 1
        still: list[ArchivedSegment] = []
        for s in pending:
            if s.end_offset < nxt:
                held = last.segment_id if last is not None else "?"
                sel.skipped.append((s, f"its offsets are held by segment {held}"))
            else:
                still.append(s)
        pending = still
        if group:
            pick = max(group, key=rank)
            pending.extend(s for s in group if s is not pick)
        elif pending:
            pick = max(pending, key=rank)
            pending.remove(pick)
            sel.overlaps.append((pick.base_offset, nxt - 1))
        elif i < n:
            if sel.chosen:
                sel.gaps.append((nxt, ordered[i].base_offset - 1))
            nxt = ordered[i].base_offset
            continue
        else:
            break
        sel.chosen.append(pick)
        last = pick
        nxt = pick.end_offset + 1
    problems = [f"{seg!r}: {why}" for seg, why in sel.skipped]
    problems += [f"offsets {a}-{b} are in two segments" for a, b in sel.overlaps]
    problems += [f"offsets {a}-{b} are in no segment" for a, b in sel.gaps]
    for problem in problems:
        log.warning("%s: %s", name, problem)
    if strict and problems:
        raise RemoteStorageError(f"{name}: {'; '.join(problems)} (strict=True)")
    return sel


class ArchivePartitionSource:
    """A :class:`~kafkalog.objstore.files.PartitionSource` over the chosen segments of an archive."""

    def __init__(
        self,
        name: str,
        selection: Selection,
        orphans: Sequence[str] = (),
        listed: tuple[tuple[str, int], ...] | None = None,
    ) -> None:
        self._name = name
        self.selection = selection
        #: Keys of objects left out because their segment is incomplete (no manifest, missing files).
        self.orphans = list(orphans)
        #: ``(key, size)`` of every object the planning LIST found (None for a task's clipped view), so a
        #: stream can tell whether the partition changed since without listing it twice.
        self.listed = listed
        self._by_base = {s.base_offset: s for s in selection.chosen}
        self._by_snapshot = {s.end_offset + 1: s for s in selection.chosen}
        self._checkpoint: bytes | None = None

    def __repr__(self) -> str:
        return f"ArchivePartitionSource({self._name!r}, {len(self._by_base)} segments)"

    @property
    def name(self) -> str:
        return self._name

    @property
    def segments(self) -> list[ArchivedSegment]:
        """The chosen segments in offset order (base/end offset and max timestamp for pruning)."""
        return list(self.selection.chosen)

    def within(self, start: int, end: int) -> ArchivePartitionSource:
        """This partition with only the chosen segments holding offsets ``[start, end)`` (what a Spark task
        carries to an executor: planned state, no listing or manifest to read again there). The
        leader-epoch checkpoint is the whole partition's (read now if it was not yet)."""
        checkpoint = self._leader_epoch_checkpoint()
        chosen = [s for s in self.selection.chosen if s.end_offset >= start and s.base_offset < end]
        if not chosen and self.selection.chosen:  # nothing there: keep the segment at the range's end
            later = [s for s in self.selection.chosen if s.base_offset >= start]
            chosen = [later[0] if later else self.selection.chosen[-1]]
        clipped = ArchivePartitionSource(self._name, Selection(chosen))
        clipped._checkpoint = checkpoint
        return clipped

    def _leader_epoch_checkpoint(self) -> bytes:
        if self._checkpoint is None:
            readable = [s for s in self.selection.chosen if not s.missing]
            self._checkpoint = readable[-1].read_part("leader_epoch") if readable else b""
        return self._checkpoint

    @property
    def lost(self) -> list[ArchivedSegment]:
        """The chosen segments whose data is gone while their manifests remain (their offsets are lost)."""
        return [s for s in self.selection.chosen if s.missing]

    def missing_objects(self, start: int, end: int) -> list[str]:
        """The URLs of the gone objects of the segments holding offsets ``[start, end)`` (for data-loss
        messages)."""
        return [
            url
            for s in self.selection.chosen
            if s.missing and s.base_offset < end and s.end_offset >= start
            for url in s.missing
        ]

    def list_files(self) -> dict[str, int]:
        files: dict[str, int] = {}
        for seg in self.selection.chosen:
            stem = f"{seg.base_offset:020d}"
            files[f"{stem}.log"] = seg.size
            files[f"{stem}.index"] = seg.part_sizes.get("offset") or 0
            files[f"{stem}.timeindex"] = seg.part_sizes.get("timestamp") or 0
            txn = seg.part_sizes.get("transaction")
            if txn:
                files[f"{stem}.txnindex"] = txn
            snapshot = seg.part_sizes.get("producer_snapshot")
            if snapshot:  # Kafka always uploads one; an empty part is no snapshot file
                files[f"{seg.end_offset + 1:020d}.snapshot"] = snapshot
        if self.selection.chosen:
            files[LEADER_EPOCH_CHECKPOINT] = len(self._leader_epoch_checkpoint())
        return files

    def open(self, name: str) -> RandomAccessFile:
        label = f"{self._name}/{name}"
        if name == LEADER_EPOCH_CHECKPOINT and self.selection.chosen:
            return BytesFile(label, self._leader_epoch_checkpoint())
        match = _FILE.match(name)
        if match is None:
            raise FileNotFoundError(f"{label}: no such file in the archive")
        offset, suffix = int(match.group(1)), match.group(2)
        seg = (self._by_snapshot if suffix == "snapshot" else self._by_base).get(offset)
        if seg is None:
            raise FileNotFoundError(f"{label}: no such file in the archive")
        if suffix == "log":
            return seg.open_log()
        kind = _SUFFIX_PART[suffix]
        if seg.part_sizes.get(kind) is None:
            raise FileNotFoundError(f"{label}: no such file in the archive")
        return BytesFile(label, seg.read_part(kind))

    def read(self, name: str) -> bytes:
        f = self.open(name)
        try:
            return f.pread(f.size, 0)
        finally:
            f.close()
