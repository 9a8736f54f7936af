"""Idempotent and transactional producer state (Kafka's ``ProducerStateManager`` and friends).

Per producer id the log remembers: epoch, coordinator epoch, last timestamp, the first offset of its open
transaction, and the last 5 batches it wrote (sequence range and offsets), which is what duplicate detection
uses. Open transactions are kept ordered by first offset (``ongoing``); completed ones stay ``unreplicated``
until the high watermark passes their marker. The first unstable offset is the smallest of both; the last
stable offset (LSO) of the log is ``min(first unstable offset, high watermark)``.

Snapshot file ``<offset>.snapshot`` (named by the exclusive end offset of the state it holds), big-endian::

    version int16 = 1 · crc uint32 (CRC-32C of bytes [6, end)) · count int32 ·
    count x (producerId int64 · epoch int16 · lastSequence int32 · lastOffset int64 · offsetDelta int32 ·
             timestamp int64 · coordinatorEpoch int32 · currentTxnFirstOffset int64)        (46 bytes each)

Only the last batch of each producer survives a snapshot. ``lastOffset < 0`` means no batch metadata;
``currentTxnFirstOffset = -1`` means no open transaction. A bad version, a short file or a CRC mismatch is
:class:`~kafkalog.errors.CorruptSnapshotError`; the loader then deletes it and tries an older one.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from crc32c import crc32c

from kafkalog.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkalog.log.types import AppendOrigin
from kafkalog.records import ControlRecordType, EndTransactionMarker, RecordBatch
from kafkalog.records.batch import NO_PRODUCER_EPOCH, NO_SEQUENCE
from kafkalog.storage.files import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    check_regular,
    offset_from_file_name,
    open_regular,
    producer_snapshot_file,
    read_regular,
)
from kafkalog.storage.types import LogOffsetMetadata
from kafkalog.time import Time

__all__ = [
    "BatchMetadata",
    "CompletedTxn",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "TxnMetadata",
    "parse_snapshot",
    "read_snapshot",
    "write_snapshot",
]

_log = logging.getLogger("kafkalog.log.producer_state")
NUM_BATCHES_TO_RETAIN: Final = 5
_INT32_MAX: Final = 2**31 - 1
_SNAP_HEADER = struct.Struct(">hIi")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION: Final = 1


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """A batch a producer wrote: last sequence, last offset, offset delta, timestamp."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        """The batch's first sequence."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """The batch's first offset."""
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """What the log remembers about one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        """Whether no batch is remembered."""
        return not self.batches

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest remembered batch (``NO_SEQUENCE`` if none)."""
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest remembered batch (``NO_SEQUENCE`` if none)."""
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        """First offset of the oldest remembered batch (-1 if none)."""
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        """Last offset of the newest remembered batch (-1 if none)."""
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        """Offset delta of the newest remembered batch (0 if none)."""
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch forgets the remembered batches."""
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        """Remember a batch (keeping the last 5)."""
        self.maybe_update_producer_epoch(epoch)
        self._add(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def _add(self, batch: BatchMetadata) -> None:
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(batch)

    def update(self, other: ProducerStateEntry) -> None:
        """Merge the state an append produced into this entry."""
        self.maybe_update_producer_epoch(other.producer_epoch)
        for b in other.batches:
            self._add(b)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def find_duplicate_batch(self, batch: RecordBatch) -> BatchMetadata | None:
        """The remembered batch with the same epoch and exact sequence range, if any."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this sequence range, if any."""
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy_without_batches(self) -> ProducerStateEntry:
        """The same producer, epochs, timestamp and open transaction, with no batch remembered."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )


@dataclass
class TxnMetadata:
    """An open (or completed but unreplicated) transaction."""

    producer_id: int
    first_offset: LogOffsetMetadata
    last_offset: int | None = None


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction that a COMMIT/ABORT marker completed."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerAppendInfo:
    """Validates one append's batches for a producer and accumulates the state change (no mutation)."""

    def __init__(
        self, topic_partition: str, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin
    ) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.copy_without_batches()
        self.started_transactions: list[TxnMetadata] = []

    def append(
        self, batch: RecordBatch, first_offset_metadata: LogOffsetMetadata | None = None
    ) -> CompletedTxn | None:
        """Apply a batch; a control batch may complete a transaction."""
        if batch.is_control_batch:
            for record in batch.records():
                marker = EndTransactionMarker.deserialize(record.key, record.value)
                return self.append_end_txn_marker(
                    marker, batch.producer_epoch, batch.base_offset, record.timestamp
                )
            return None  # a control batch emptied by the cleaner
        first = first_offset_metadata or LogOffsetMetadata(batch.base_offset)
        self.append_data_batch(
            batch.producer_epoch,
            batch.base_sequence,
            batch.last_sequence,
            batch.max_timestamp,
            first,
            batch.last_offset,
            batch.is_transactional,
        )
        return None

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        last_timestamp: int,
        first_offset_metadata: LogOffsetMetadata,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        """Check and remember a data batch: epoch, sequence (client appends) and transaction state."""
        first_offset = first_offset_metadata.message_offset
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        txn_first = self.updated.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"expected transactional write from producer {self.producer_id} at offset {first_offset_metadata} "
                f"in partition {self.topic_partition}"
            )
        if txn_first is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset_metadata))

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"epoch of producer {self.producer_id} at offset {offset} in {self.topic_partition} is {epoch}, "
                f"which is smaller than the last seen epoch {self.updated.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                _log.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {self.producer_id} at offset {offset} in "
                    f"partition {self.topic_partition}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)"
                )
            return
        if not self.updated.is_empty:
            current_last = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last = self.current.last_seq
        else:
            current_last = NO_SEQUENCE
        # With no known epoch (state lost to retention or DeleteRecords) any sequence is accepted.
        if not (self.current.producer_epoch == NO_PRODUCER_EPOCH or _in_sequence(current_last, first_seq)):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {self.producer_id} at offset {offset} in partition "
                f"{self.topic_partition}: {first_seq} (incoming seq. number), {current_last} (current end sequence number)"
            )

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """Check and apply a COMMIT/ABORT marker; returns the transaction it completes (None if none was open)."""
        self._check_producer_epoch(epoch, offset)
        if self.updated.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"invalid coordinator epoch for producerId {self.producer_id} at offset {offset} in partition "
                f"{self.topic_partition}: {marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)"
            )
            if self.origin is AppendOrigin.REPLICATION:
                _log.info(message)
            else:
                raise TransactionCoordinatorFencedError(message)
        completed = None
        if self.updated.current_txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id,
                self.updated.current_txn_first_offset,
                offset,
                marker.control_type is ControlRecordType.ABORT,
            )
        self.updated.maybe_update_producer_epoch(epoch)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = timestamp
        return completed


# --- snapshots ---------------------------------------------------------------------------------------------


def write_snapshot(path: Path, entries: list[ProducerStateEntry], sync: bool = True) -> None:
    """Write a producer snapshot file (a fresh name each time, so no partial overwrite)."""
    body = bytearray(_SNAP_HEADER.size + _SNAP_ENTRY.size * len(entries))
    pos = _SNAP_HEADER.size
    for e in entries:
        _SNAP_ENTRY.pack_into(
            body,
            pos,
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        pos += _SNAP_ENTRY.size
    struct.pack_into(">i", body, 6, len(entries))
    crc = crc32c(memoryview(body)[6:])
    struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, crc)
    fd = open_regular(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, body)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """Read a producer snapshot file (raises :class:`CorruptSnapshotError`)."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise CorruptSnapshotError(f"snapshot file {path} does not exist") from None
    return parse_snapshot(data, path)


def parse_snapshot(data: bytes, path: Path | str) -> list[ProducerStateEntry]:
    """The entries of a producer snapshot file's bytes (``path`` names it in errors; raises
    :class:`CorruptSnapshotError`)."""
    if len(data) < _SNAP_HEADER.size:
        raise CorruptSnapshotError(f"snapshot file {path} is too short ({len(data)} bytes)")
    version, crc, count = _SNAP_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    computed = crc32c(memoryview(data)[6:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    if count < 0 or len(data) != _SNAP_HEADER.size + count * _SNAP_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot file {path} has {len(data)} bytes for {count} entries")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(
            data, _SNAP_HEADER.size + i * _SNAP_ENTRY.size
        )
        entry = ProducerStateEntry(pid, epoch, coord, ts, None if txn_first < 0 else txn_first)
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        out.append(entry)
    return out


class ProducerStateManager:
    """Producer ids, their last batches, open transactions and snapshots of a partition's log."""

    def __init__(
        self,
        topic_partition: str,
        log_dir: Path,
        max_transaction_timeout_ms: int = 900_000,
        producer_id_expiration_ms: int = 86_400_000,
        time: Time | None = None,
    ) -> None:
        from kafkalog.time import SYSTEM_TIME

        self.topic_partition = topic_partition
        self.log_dir = Path(log_dir)
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._time = time or SYSTEM_TIME
        self._lock = threading.RLock()
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._snapshots: dict[int, Path] = self._load_snapshots()
        self.last_map_offset = 0
        self.last_snap_offset = 0

    # --- snapshots ----------------------------------------------------------------------------------------
    def _load_snapshots(self) -> dict[int, Path]:
        found: dict[int, Path] = {}
        if self.log_dir.is_dir():
            for p in self.log_dir.iterdir():
                if p.name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX) and check_regular(p):
                    try:
                        found[offset_from_file_name(p.name)] = p
                    except ValueError:
                        continue
        return dict(sorted(found.items()))

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files, ascending."""
        with self._lock:
            return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        """Offset of the newest snapshot file."""
        with self._lock:
            return max(self._snapshots) if self._snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        """Offset of the oldest snapshot file."""
        with self._lock:
            return min(self._snapshots) if self._snapshots else None

    def fetch_snapshot(self, offset: int) -> Path | None:
        """The snapshot file at exactly ``offset``."""
        return self._snapshots.get(offset)

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write a snapshot at the map end offset, if it is newer than the last one."""
        with self._lock:
            if self.last_map_offset <= self.last_snap_offset:
                return None
            path = producer_snapshot_file(self.log_dir, self.last_map_offset)
            write_snapshot(path, list(self.producers.values()), sync)
            _log.info(
                "[ProducerStateManager partition=%s] Wrote producer snapshot at offset %d with %d producer ids",
                self.topic_partition,
                self.last_map_offset,
                len(self.producers),
            )
            self._snapshots[self.last_map_offset] = path
            self._snapshots = dict(sorted(self._snapshots.items()))
            self.last_snap_offset = self.last_map_offset
            return path

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshot files below ``offset``."""
        with self._lock:
            for o in [o for o in self._snapshots if o < offset]:
                self._remove_and_delete_snapshot(o)

    def delete_snapshot(self, offset: int) -> None:
        """Delete the snapshot at ``offset`` (if any)."""
        with self._lock:
            self._remove_and_delete_snapshot(offset)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Keep snapshots at segment bases and only the newest other one, if it is past the last base."""
        with self._lock:
            self._snapshots = self._load_snapshots()
            bases = set(segment_base_offsets)
            strays = [o for o in self._snapshots if o not in bases]
            for o in strays[:-1]:
                self._remove_and_delete_snapshot(o)
            if strays and segment_base_offsets and strays[-1] < max(segment_base_offsets):
                self._remove_and_delete_snapshot(strays[-1])

    def update_parent_dir(self, log_dir: Path) -> None:
        """Follow a directory rename."""
        with self._lock:
            self.log_dir = log_dir
            self._snapshots = {o: log_dir / p.name for o, p in self._snapshots.items()}

    # --- loading and truncation ---------------------------------------------------------------------------
    def _is_expired(self, now: int, entry: ProducerStateEntry) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self.last_snap_offset = log_start_offset
                self.last_map_offset = log_start_offset
                return
            path = self._snapshots[latest]
            try:
                _log.info("Loading producer state from snapshot file '%s'", path)
                for entry in read_snapshot(path):
                    if not self._is_expired(now, entry):
                        self._load_entry(entry)
                self.last_snap_offset = latest
                self.last_map_offset = latest
                return
            except CorruptSnapshotError as exc:
                _log.warning("Failed to load producer snapshot from '%s': %s", path, exc)
                self._remove_and_delete_snapshot(latest)

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            off = entry.current_txn_first_offset
            self._ongoing[off] = TxnMetadata(entry.producer_id, LogOffsetMetadata(off))
            self._ongoing = dict(sorted(self._ongoing.items()))

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now: int) -> None:
        """Drop snapshots outside ``(log_start_offset, log_end_offset]`` and reload from the newest if needed."""
        with self._lock:
            for o in list(self._snapshots):
                if o > log_end_offset or o <= log_start_offset:
                    self._remove_and_delete_snapshot(o)
            if log_end_offset != self.last_map_offset:
                self._clear()
                self._load_from_snapshot(log_start_offset, now)
            else:
                self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, delete every snapshot, and start the map at ``offset``."""
        with self._lock:
            self._clear()
            for o in list(self._snapshots):
                self._remove_and_delete_snapshot(o)
            self.last_snap_offset = 0
            self.last_map_offset = offset

    def truncate_fully_and_reload_snapshots(self) -> None:
        """Forget in-memory state and rescan the snapshot files."""
        with self._lock:
            self._clear()
            self._snapshots = self._load_snapshots()
            self.last_snap_offset = 0
            self.last_map_offset = 0

    # --- appends ------------------------------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """What is remembered about ``producer_id``."""
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """Start validating an append for ``producer_id`` (the state is not changed yet)."""
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        """Apply an append's accumulated state change."""
        with self._lock:
            current = self.producers.get(info.producer_id)
            if current is not None:
                current.update(info.updated)
            else:
                entry = ProducerStateEntry(info.producer_id)
                entry.update(info.updated)
                self.producers[info.producer_id] = entry
            for txn in info.started_transactions:
                self._ongoing[txn.first_offset.message_offset] = txn
            if info.started_transactions:
                self._ongoing = dict(sorted(self._ongoing.items()))

    def update_from_batch(self, batch: RecordBatch) -> CompletedTxn | None:
        """Replay one batch as a follower would (recovery and rebuilds); returns a completed transaction."""
        if batch.producer_id < 0:
            return None
        info = self.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
        completed = info.append(batch)
        self.update(info)
        return completed

    def update_map_end_offset(self, offset: int) -> None:
        """Set the (exclusive) offset up to which the state reflects the log."""
        self.last_map_offset = offset

    @property
    def map_end_offset(self) -> int:
        """The (exclusive) offset up to which the state reflects the log."""
        return self.last_map_offset

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done: the first open transaction of another producer, else after it."""
        with self._lock:
            for first, txn in self._ongoing.items():
                if txn.producer_id != completed.producer_id:
                    return first
            return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Move a transaction from open to completed-but-unreplicated."""
        with self._lock:
            txn = self._ongoing.pop(completed.first_offset, None)
            if txn is None:
                raise ValueError(
                    f"attempted to complete transaction {completed} on partition {self.topic_partition} which was not started"
                )
            txn.last_offset = completed.last_offset
            self._unreplicated[completed.first_offset] = txn
            self._unreplicated = dict(sorted(self._unreplicated.items()))

    @property
    def has_unresolved_transactions(self) -> bool:
        """Whether any transaction is open or completed but not yet below the high watermark (without
        either, the first unstable offset is None and a high watermark move changes nothing here)."""
        return bool(self._ongoing or self._unreplicated)

    def first_unstable_offset(self) -> LogOffsetMetadata | None:
        """The first offset of the oldest open or unreplicated transaction."""
        with self._lock:
            candidates = [
                next(iter(d.values())).first_offset for d in (self._unreplicated, self._ongoing) if d
            ]
            if not candidates:
                return None
            return min(candidates, key=lambda m: m.message_offset)

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction."""
        with self._lock:
            return next(iter(self._ongoing)) if self._ongoing else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high watermark."""
        self._remove_unreplicated(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget completed transactions below the new log start offset; lift the map end offset to it."""
        with self._lock:
            self._remove_unreplicated(log_start_offset)
            if self.last_map_offset < log_start_offset:
                self.last_map_offset = log_start_offset
            latest = self.latest_snapshot_offset()
            self.last_snap_offset = latest if latest is not None else log_start_offset

    def _remove_unreplicated(self, offset: int) -> None:
        with self._lock:
            for first in [
                f
                for f, t in self._unreplicated.items()
                if t.last_offset is not None and t.last_offset < offset
            ]:
                del self._unreplicated[first]

    def remove_expired_producers(self, now: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` with no open transaction; returns how many."""
        with self._lock:
            expired = [pid for pid, e in self.producers.items() if self._is_expired(now, e)]
            for pid in expired:
                del self.producers[pid]
            return len(expired)

    def has_late_transaction(self, now: int) -> bool:
        """Whether the oldest open transaction has run longer than the max timeout plus five minutes."""
        with self._lock:
            for txn in self._ongoing.values():
                entry = self.producers.get(txn.producer_id)
                if entry is not None and entry.last_timestamp > 0:
                    return now - entry.last_timestamp > self.max_transaction_timeout_ms + 5 * 60_000
                return False
            return False

    @property
    def is_empty(self) -> bool:
        """No producer and no unreplicated transaction."""
        return not self.producers and not self._unreplicated

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        """Every remembered producer (a copy of the map)."""
        with self._lock:
            return dict(self.producers)

    def ongoing_transactions(self) -> list[TxnMetadata]:
        """Open transactions, by first offset."""
        with self._lock:
            return list(self._ongoing.values())
