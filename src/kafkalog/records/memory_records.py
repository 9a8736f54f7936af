"""MemoryRecords: a buffer of concatenated batches, exactly the bytes of a ``.log`` file or a fetch.

Framing is :func:`kafkalog.records.framing.next_frame`'s (Kafka's ``FileLogInputStream`` /
``ByteBufferLogInputStream``): 17 bytes or fewer left, or an entry past the end, end the walk quietly (a
partial tail); ``size < 14`` is a :class:`~kafkalog.errors.CorruptRecordError`. A complete entry of magic
2 is a :class:`~kafkalog.records.batch.DefaultRecordBatch`, of magic 0/1 a
:class:`~kafkalog.records.legacy.LegacyRecordBatch`. Other magics depend on the reader, as in Kafka:
:class:`MemoryRecords` (a produce request, a fetch: Kafka's ``MemoryRecords``) raises
``CorruptRecordError('invalid magic found in record: N')``; a file's walk (``read_batch_at`` /
``iter_batches`` with ``known_magic_only=False``, which ``FileRecords`` uses) reads a magic above 2 as v2
and a negative one as legacy (v1 layout), so recovery keeps what Kafka's recovery keeps.

Invariant: nothing here copies the payload; ``MemoryRecords`` works over ``bytes``, ``bytearray``,
``memoryview`` and ``mmap`` alike. Mutation (offset assignment) needs a writable buffer.
"""

from __future__ import annotations

import mmap
import time
from collections.abc import Iterable, Iterator
from typing import ClassVar

from kafkalog.errors import CorruptRecordError
from kafkalog.records.batch import (
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    DefaultRecordBatch,
    RecordBatch,
)
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression
from kafkalog.records.control import ControlRecordType, EndTransactionMarker
from kafkalog.records.framing import MAGIC_OFFSET, CorruptFrame, next_frame
from kafkalog.records.legacy import LegacyRecordBatch
from kafkalog.records.record import Record, SimpleRecord, TimestampType

__all__ = ["Buffer", "MemoryRecords", "iter_batches", "read_batch_at", "records_of_bytearray"]

Buffer = bytes | bytearray | memoryview | mmap.mmap

_new = object.__new__


def _view(data: Buffer) -> memoryview:
    mv = memoryview(data)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def records_of_bytearray(buf: bytearray) -> MemoryRecords:
    """``MemoryRecords(buf)`` for a ``bytearray`` (always a 1-D byte view), without ``__init__``'s format
    check: the single-record append path makes one per call."""
    records: MemoryRecords = _new(MemoryRecords)
    records._buf = memoryview(buf)  # noqa: SLF001 -- its own class, built without __init__ on the hot path
    return records


def read_batch_at(
    buf: memoryview,
    offset: int,
    end: int | None = None,
    origin: int = 0,
    *,
    known_magic_only: bool = True,
) -> RecordBatch | None:
    """The batch that starts at ``buf[offset]``, or ``None`` if only a partial batch is left before ``end``.

    ``origin`` is the source position of ``buf[0]`` (e.g. the file position a chunk was read from); the
    batch's ``position`` and error positions are ``origin + offset``. Raises :class:`CorruptRecordError`
    for an impossible size, or (``known_magic_only``, Kafka's in-memory reader) a magic outside 0..2;
    ``known_magic_only=False`` is a file reader's rule (see the module docstring).
    """
    frame = next_frame(buf, offset, end, known_magic_only=known_magic_only)
    if type(frame) is not int:
        if isinstance(frame, CorruptFrame):
            raise frame.error(origin + offset)
        return None
    view = buf if end is None or end == len(buf) else buf[:end]
    magic = buf[offset + MAGIC_OFFSET]
    if magic == MAGIC_V2 or MAGIC_V2 < magic < 128:  # v2 from 2 on (signed; a file's rule), else legacy
        return DefaultRecordBatch(view, offset, origin + offset)
    return LegacyRecordBatch(view, offset, origin + offset)


def iter_batches(
    buf: memoryview,
    start: int = 0,
    end: int | None = None,
    origin: int = 0,
    *,
    known_magic_only: bool = True,
) -> Iterator[RecordBatch]:
    """Walk the batches of ``buf[start:end]``; stops quietly at a partial tail (see module doc)."""
    end = len(buf) if end is None else end
    pos = start
    while True:
        batch = read_batch_at(buf, pos, end, origin, known_magic_only=known_magic_only)
        if batch is None:
            return
        yield batch
        pos += batch.size_in_bytes


class MemoryRecords:
    """Concatenated record batches in memory (or in an ``mmap``): iterate, validate, count, slice, build."""

    __slots__ = ("_buf",)

    EMPTY: ClassVar[MemoryRecords]

    def __init__(self, data: Buffer = b"") -> None:
        self._buf = _view(data)

    # --- basic access -------------------------------------------------------------------------------------
    @property
    def buffer(self) -> memoryview:
        """The underlying bytes (a view, never a copy)."""
        return self._buf

    @property
    def size_in_bytes(self) -> int:
        """Number of bytes, including any partial tail."""
        return len(self._buf)

    def __bytes__(self) -> bytes:
        return bytes(self._buf)

    def to_bytes(self) -> bytes:
        """A copy of the bytes."""
        return bytes(self._buf)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryRecords) and self._buf == other._buf

    def __hash__(self) -> int:
        return hash(bytes(self._buf))

    def __repr__(self) -> str:
        return f"MemoryRecords(size_in_bytes={len(self._buf)})"

    def slice(self, position: int, size: int | None = None) -> MemoryRecords:
        """A view of ``size`` bytes from ``position`` (clamped to the end)."""
        if position < 0 or position > len(self._buf):
            raise ValueError(f"invalid slice position {position} for {len(self._buf)} bytes")
        end = len(self._buf) if size is None else min(len(self._buf), position + size)
        if end < position:
            raise ValueError(f"invalid slice size {size}")
        return MemoryRecords(self._buf[position:end])

    # --- batches and records ------------------------------------------------------------------------------
    def batches(self) -> Iterator[RecordBatch]:
        """Every complete batch, in order (a partial trailing batch is not returned)."""
        return iter_batches(self._buf)

    def first_batch(self) -> RecordBatch | None:
        """The first complete batch, if any."""
        return read_batch_at(self._buf, 0)

    def records(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        """Every record of every batch (control records included)."""
        for batch in self.batches():
            yield from batch.records(max_decompressed_bytes)

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def batch_count(self) -> int:
        """Number of complete batches."""
        return sum(1 for _ in self.batches())

    def record_count(self) -> int:
        """Number of records (decompresses only legacy wrappers, whose header has no count)."""
        total = 0
        for batch in self.batches():
            n = batch.count
            total += n if n is not None else sum(1 for _ in batch.record_details())
        return total

    def valid_bytes(self) -> int:
        """Where the longest prefix of complete, CRC-valid batches ends."""
        pos = 0
        try:
            for batch in self.batches():
                if not batch.is_valid():
                    break
                pos += batch.size_in_bytes
        except CorruptRecordError:
            pass
        return pos

    def ensure_valid(self) -> None:
        """Check every batch's framing and CRC and that no partial batch trails; raise on the first fault."""
        pos = 0
        for batch in self.batches():
            batch.ensure_valid()
            pos += batch.size_in_bytes
        if pos != len(self._buf):
            raise CorruptRecordError(
                f"{len(self._buf) - pos} trailing bytes do not form a complete batch", position=pos
            )

    def validate_deep(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> int:
        """:meth:`ensure_valid` plus decoding every record; return the record count."""
        self.ensure_valid()
        return sum(1 for _ in self.records(max_decompressed_bytes))

    # --- construction -------------------------------------------------------------------------------------
    @classmethod
    def readable(cls, data: Buffer) -> MemoryRecords:
        """Kafka's ``MemoryRecords.readableRecords``: wrap existing bytes."""
        return cls(data)

    @classmethod
    def build(
        cls,
        records: Iterable[SimpleRecord | Record | bytes | tuple[bytes | None, bytes | None]],
        *,
        compression: Compression | str = Compression.NONE,
        compression_level: int | None = None,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        timestamp_type: TimestampType | str = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
        now_ms: int | None = None,
    ) -> MemoryRecords:
        """One v2 batch holding ``records`` at offsets ``base_offset, base_offset + 1, ...``.

        Each item is a :class:`SimpleRecord`, a :class:`Record` (its offset is ignored), a ``(key, value)``
        pair, or plain ``bytes`` (a value without key). A missing timestamp means ``now_ms`` (default: the
        current time). With ``LogAppendTime`` the batch's max timestamp is ``log_append_time`` (default
        ``now_ms``). Returns :attr:`EMPTY` for no records.
        """
        from kafkalog.records.builder import MemoryRecordsBuilder

        now = int(time.time() * 1000) if now_ms is None else now_ms
        ts_type = (
            TimestampType.from_name(timestamp_type) if isinstance(timestamp_type, str) else timestamp_type
        )
        builder = MemoryRecordsBuilder(
            base_offset=base_offset,
            compression=Compression.from_name(compression),
            compression_level=compression_level,
            timestamp_type=ts_type,
            log_append_time=(now if log_append_time is None else log_append_time)
            if ts_type is TimestampType.LOG_APPEND_TIME
            else -1,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
            partition_leader_epoch=partition_leader_epoch,
            delete_horizon_ms=delete_horizon_ms,
        )
        builder.append_many(records, now_ms=now)
        return builder.build()

    def up_convert(self, compression: Compression | str | None = None) -> MemoryRecords:
        """The same records as magic-2 batches: each legacy (v0/v1) entry becomes one v2 batch keeping its
        offsets (gaps included), timestamps and timestamp type; v2 batches are kept as they are.

        ``compression`` None keeps each entry's codec. v0 records have no timestamp (-1 in v2 too).
        """
        from kafkalog.records.builder import MemoryRecordsBuilder

        out = bytearray()
        for batch in self.batches():
            if batch.magic >= MAGIC_V2:
                out += batch.to_bytes()
                continue
            records = list(batch.records())
            if not records:
                continue
            codec = batch.compression if compression is None else Compression.from_name(compression)
            ts_type = batch.timestamp_type
            if ts_type is TimestampType.NO_TIMESTAMP_TYPE:
                ts_type = TimestampType.CREATE_TIME
            builder = MemoryRecordsBuilder(
                base_offset=records[0].offset,
                compression=codec,
                timestamp_type=ts_type,
                log_append_time=batch.max_timestamp,
            )
            for r in records:
                builder.append_with_offset(r.offset, r.timestamp, r.key, r.value)
            out += builder.build().buffer
        return MemoryRecords(bytes(out))

    @classmethod
    def end_transaction_marker(
        cls,
        *,
        producer_id: int,
        producer_epoch: int,
        control_type: ControlRecordType | str,
        coordinator_epoch: int,
        base_offset: int = 0,
        timestamp: int | None = None,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> MemoryRecords:
        """A control batch with one COMMIT or ABORT marker (Kafka's ``withEndTransactionMarker``)."""
        from kafkalog.records.builder import MemoryRecordsBuilder

        ctype = ControlRecordType[control_type.upper()] if isinstance(control_type, str) else control_type
        if ctype not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"an end transaction marker is COMMIT or ABORT, not {ctype.name}")
        builder = MemoryRecordsBuilder(
            base_offset=base_offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,
            is_control_batch=True,
            partition_leader_epoch=partition_leader_epoch,
        )
        ts = int(time.time() * 1000) if timestamp is None else timestamp
        builder.append_end_txn_marker(ts, EndTransactionMarker(ctype, coordinator_epoch))
        return builder.build()


MemoryRecords.EMPTY = MemoryRecords(b"")
