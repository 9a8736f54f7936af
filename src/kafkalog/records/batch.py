"""RecordBatch v2 (magic 2): a zero-copy view over one batch, its header fields, CRC and records.

Byte layout (big-endian; ``org.apache.kafka.common.record.DefaultRecordBatch``, 61-byte header)::

    off size field
      0   8  baseOffset              int64
      8   4  batchLength             int32  bytes after this field (total size - 12)
     12   4  partitionLeaderEpoch    int32  not covered by the CRC
     16   1  magic                   int8   2
     17   4  crc                     uint32 CRC-32C of bytes [21, end)
     21   2  attributes              int16  bits 0-2 codec, bit 3 LogAppendTime, 0x10 transactional,
                                            0x20 control, 0x40 baseTimestamp holds the delete horizon
     23   4  lastOffsetDelta         int32
     27   8  baseTimestamp           int64
     35   8  maxTimestamp            int64
     43   8  producerId              int64
     51   2  producerEpoch           int16
     53   4  baseSequence            int32
     57   4  recordsCount            int32
     61   .  records (uncompressed, or one compressed blob)

Each record: ``length varint`` (body size) · ``attributes int8`` · ``timestampDelta varlong`` ·
``offsetDelta varint`` · ``keyLength varint`` (negative = null) · key · ``valueLength varint`` · value ·
``headerCount varint`` · headers (``keyLength varint`` >= 0 · UTF-8 key · ``valueLength varint`` · value).

Invariants: a :class:`DefaultRecordBatch` never copies the payload to read header fields; reading
records checks that exactly ``recordsCount`` records fill the records section (a lie either way is an
:class:`~kafkalog.errors.InvalidRecordError`); CRC problems are :class:`~kafkalog.errors.CorruptRecordError`.
The in-place mutators (``set_last_offset``, ``set_partition_leader_epoch``, ``set_max_timestamp``) are
what a leader uses to assign offsets without re-encoding; they keep the CRC right.
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Iterator
from typing import Final

from crc32c import crc32c

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records._kernels import as_uint8
from kafkalog.records._kernels_index import INDEX_BYTES_PER_RECORD, RecordIndex, index_records
from kafkalog.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    Compression,
    decompress,
    decompressed_size_at_most,
)
from kafkalog.records.control import ControlRecordType, EndTransactionMarker
from kafkalog.records.framing import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
)
from kafkalog.records.record import Header, Record, TimestampType
from kafkalog.records.utf8 import decode_utf8_as_java

__all__ = [
    "ATTRIBUTES_OFFSET",
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "CRC_OFFSET",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LAST_OFFSET_DELTA_OFFSET",
    "LENGTH_OFFSET",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_TIMESTAMP_OFFSET",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "DefaultRecordBatch",
    "RecordBatch",
    "RecordDetail",
    "increment_sequence",
]

MAGIC_V0: Final = 0
MAGIC_V1: Final = 1
MAGIC_V2: Final = 2
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
ATTR_DELETE_HORIZON: Final = 0x40

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_INT32_MAX: Final = (1 << 31) - 1


def _i64(value: int) -> int:
    """Java ``long`` arithmetic: wrap to a signed 64-bit value."""
    return ((value + 2**63) & 0xFFFFFFFFFFFFFFFF) - 2**63


def _i32(value: int) -> int:
    """Java ``int`` arithmetic: wrap to a signed 32-bit value."""
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: add, wrapping from ``2**31 - 1`` to 0.

    Computed with Java's 32-bit overflow, so damaged headers (e.g. a negative delta) give Kafka's answer.
    """
    if sequence > _i32(_INT32_MAX - increment):
        return _i32(_i32(increment - _i32(_INT32_MAX - sequence)) - 1)
    return _i32(sequence + increment)


class RecordDetail:
    """A record together with what ``kafka-dump-log`` prints about it (sequence, size, control info)."""

    __slots__ = ("control_type", "coordinator_epoch", "record", "sequence", "size_in_bytes")

    def __init__(
        self,
        record: Record,
        sequence: int,
        size_in_bytes: int,
        control_type: ControlRecordType | None = None,
        coordinator_epoch: int | None = None,
    ) -> None:
        self.record = record
        self.sequence = sequence
        self.size_in_bytes = size_in_bytes
        self.control_type = control_type
        self.coordinator_epoch = coordinator_epoch


class RecordBatch(abc.ABC):
    """What every batch in a log offers, whatever its magic (Kafka's ``RecordBatch`` interface).

    ``position`` is where the batch starts in the buffer it was read from.
    """

    __slots__ = ()

    position: int

    @property
    @abc.abstractmethod
    def magic(self) -> int: ...
    @property
    @abc.abstractmethod
    def base_offset(self) -> int: ...
    @property
    @abc.abstractmethod
    def last_offset(self) -> int: ...
    @property
    @abc.abstractmethod
    def size_in_bytes(self) -> int: ...
    @property
    @abc.abstractmethod
    def checksum(self) -> int: ...
    @property
    @abc.abstractmethod
    def compression(self) -> Compression: ...
    @property
    @abc.abstractmethod
    def timestamp_type(self) -> TimestampType: ...
    @property
    @abc.abstractmethod
    def max_timestamp(self) -> int: ...
    @property
    @abc.abstractmethod
    def base_timestamp(self) -> int | None: ...
    @property
    @abc.abstractmethod
    def producer_id(self) -> int: ...
    @property
    @abc.abstractmethod
    def producer_epoch(self) -> int: ...
    @property
    @abc.abstractmethod
    def base_sequence(self) -> int: ...
    @property
    @abc.abstractmethod
    def last_sequence(self) -> int: ...
    @property
    @abc.abstractmethod
    def is_transactional(self) -> bool: ...
    @property
    @abc.abstractmethod
    def is_control_batch(self) -> bool: ...
    @property
    @abc.abstractmethod
    def partition_leader_epoch(self) -> int: ...
    @property
    @abc.abstractmethod
    def delete_horizon_ms(self) -> int | None: ...
    @property
    @abc.abstractmethod
    def count(self) -> int | None:
        """Number of records, when the header says it without decoding (``None`` for legacy wrappers)."""

    @abc.abstractmethod
    def compute_checksum(self) -> int: ...
    @abc.abstractmethod
    def is_valid(self) -> bool: ...
    @abc.abstractmethod
    def ensure_valid(self) -> None: ...
    @abc.abstractmethod
    def to_bytes(self) -> bytes: ...
    @abc.abstractmethod
    def record_details(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordDetail]:
        """Every record with its sequence, encoded size and control information."""

    def records(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        """Every record of the batch (decompressing if needed)."""
        for detail in self.record_details(max_decompressed_bytes):
            yield detail.record

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    @property
    def next_offset(self) -> int:
        """The offset after this batch's last offset."""
        return self.last_offset + 1

    @property
    def is_compressed(self) -> bool:
        """Whether the payload is compressed."""
        return self.compression is not Compression.NONE

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(magic={self.magic}, offsets=[{self.base_offset}, {self.last_offset}], "
            f"size={self.size_in_bytes}, compression={self.compression.kafka_name}, position={self.position})"
        )


class DefaultRecordBatch(RecordBatch):
    """A view of one magic-2 batch at ``position`` in ``buffer`` (no copy; header parsed once).

    As Kafka's ``DefaultRecordBatch``, a magic above 2 is read with the v2 layout (a file reader frames it
    so, :mod:`kafkalog.records.framing`) and reported by :attr:`magic`."""

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_buf",
        "_count",
        "_crc",
        "_last_offset_delta",
        "_magic",
        "_max_timestamp",
        "_off",
        "_ple",
        "_producer_epoch",
        "_producer_id",
        "_size",
        "position",
    )

    _base_offset: int
    _ple: int
    _crc: int
    _attributes: int
    _last_offset_delta: int
    _base_timestamp: int
    _max_timestamp: int
    _producer_id: int
    _producer_epoch: int
    _base_sequence: int
    _count: int
    _magic: int
    _size: int

    def __init__(self, buffer: memoryview, offset: int = 0, position: int | None = None) -> None:
        """View the batch at ``buffer[offset:]``; ``position`` is where it lives in its source (a file)."""
        if position is None:
            position = offset
        if len(buffer) - offset < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt: {len(buffer) - offset} bytes is less than the "
                f"{RECORD_BATCH_OVERHEAD}-byte batch header",
                position=position,
            )
        (
            self._base_offset,
            length,
            self._ple,
            magic,
            self._crc,
            self._attributes,
            self._last_offset_delta,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            self._count,
        ) = HEADER.unpack_from(buffer, offset)
        if magic < MAGIC_V2:  # any magic from 2 on has the v2 layout (Kafka's FileLogInputStream)
            raise CorruptRecordError(f"not a magic 2 batch (magic {magic})", position=position)
        self._magic = magic
        self._size = length + LOG_OVERHEAD
        if self._size > len(buffer) - offset:
            raise CorruptRecordError(
                f"record batch declares {self._size} bytes but only {len(buffer) - offset} remain",
                position=position,
            )
        self._buf = buffer
        self._off = offset
        self.position = position

    # --- header fields ------------------------------------------------------------------------------------
    @property
    def magic(self) -> int:
        """The magic byte: 2, or above 2 for a batch a file reader frames as v2 (the CRC does not cover it)."""
        return self._magic

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset_delta(self) -> int:
        """``lastOffset - baseOffset`` as stored (kept by compaction)."""
        return self._last_offset_delta

    @property
    def last_offset(self) -> int:
        return _i64(self._base_offset + self._last_offset_delta)

    @property
    def size_in_bytes(self) -> int:
        return self._size

    @property
    def checksum(self) -> int:
        return self._crc

    @property
    def attributes(self) -> int:
        """The raw attributes field."""
        return self._attributes

    @property
    def compression(self) -> Compression:
        return Compression.from_id(self._attributes & ATTR_COMPRESSION_MASK, position=self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        if self._attributes & ATTR_TIMESTAMP_TYPE:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def base_timestamp(self) -> int:
        return self._base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def last_sequence(self) -> int:
        if self._base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self._base_sequence, self._last_offset_delta)

    @property
    def is_transactional(self) -> bool:
        return bool(self._attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control_batch(self) -> bool:
        return bool(self._attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        """Whether the batch was written by an idempotent or transactional producer."""
        return self._producer_id != NO_PRODUCER_ID

    @property
    def partition_leader_epoch(self) -> int:
        return self._ple

    @property
    def delete_horizon_ms(self) -> int | None:
        if self._attributes & ATTR_DELETE_HORIZON:
            return self._base_timestamp
        return None

    @property
    def count(self) -> int:
        return self._count

    def buffer(self) -> memoryview:
        """The batch's bytes, as a view."""
        return self._buf[self._off : self._off + self._size]

    def to_bytes(self) -> bytes:
        return bytes(self.buffer())

    # --- validity -----------------------------------------------------------------------------------------
    def compute_checksum(self) -> int:
        return crc32c(self._buf[self._off + ATTRIBUTES_OFFSET : self._off + self._size])

    def is_valid(self) -> bool:
        return self._size >= RECORD_BATCH_OVERHEAD and self._crc == self.compute_checksum()

    def ensure_valid(self) -> None:
        if self._size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (the size {self._size} is smaller than the minimum allowed "
                f"overhead {RECORD_BATCH_OVERHEAD})",
                position=self.position,
            )
        computed = self.compute_checksum()
        if computed != self._crc:
            raise CorruptRecordError(
                f"record batch is corrupt (stored crc = 0x{self._crc:08x}, computed crc = 0x{computed:08x})",
                position=self.position,
            )

    # --- records ------------------------------------------------------------------------------------------
    def records_payload(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> memoryview:
        """The records section, decompressed if needed (a view for uncompressed batches)."""
        start = self._off + RECORD_BATCH_OVERHEAD
        end = self._off + self._size
        codec = self._attributes & ATTR_COMPRESSION_MASK
        if codec == 0:
            return self._buf[start:end]
        return memoryview(
            decompress(codec, self._buf[start:end], max_decompressed_bytes, position=self.position)
        )

    def decompressed_size_at_most(self, limit: int) -> int:
        """The records section's size once decompressed if it is at most ``limit``, else ``limit + 1``; costs
        at most a decompression of ``limit`` bytes (see :func:`~kafkalog.records.compression.decompressed_size_at_most`)."""
        start = self._off + RECORD_BATCH_OVERHEAD
        end = self._off + self._size
        if end < start:
            return 0
        return decompressed_size_at_most(
            self._attributes & ATTR_COMPRESSION_MASK, self._buf[start:end], limit
        )

    def record_index(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> tuple[bytes | bytearray | memoryview, RecordIndex] | None:
        """The records' bytes (decompressed if needed) and their index from the single v2 record parser (the
        numba kernel): absolute offsets, timestamps as Kafka reads them, key/value/header positions and
        lengths, as arrays. None for a batch with no records. Used by ``records()`` and by the log's
        validator, which needs timestamps and key lengths without building ``Record`` objects."""
        count = self._count
        if count < 0:
            raise InvalidRecordError(
                f"found invalid record count {count} in magic v2 batch", position=self.position
            )
        if count == 0:
            return None
        if count * INDEX_BYTES_PER_RECORD > max_decompressed_bytes:  # before decompressing anything
            raise InvalidRecordError(
                f"a batch of {count} records needs {count * INDEX_BYTES_PER_RECORD} bytes of record index, "
                f"more than max_decompressed_bytes={max_decompressed_bytes}",
                position=self.position,
            )
        if self._size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"record batch is corrupt (the size {self._size} is smaller than the minimum allowed overhead "
                f"{RECORD_BATCH_OVERHEAD})",
                position=self.position,
            )
        lat = self._max_timestamp if self._attributes & ATTR_TIMESTAMP_TYPE else None
        payload: bytes | bytearray | memoryview
        codec = self._attributes & ATTR_COMPRESSION_MASK
        if codec:  # the decompressed records as the codec wrote them: never copied (a bomb is held once)
            payload = decompress(
                codec,
                self._buf[self._off + RECORD_BATCH_OVERHEAD : self._off + self._size],
                max_decompressed_bytes,
                position=self.position,
            )
            start, end, origin = 0, len(payload), self.position
        else:
            payload = bytes(self._buf[self._off : self._off + self._size])
            start, end, origin = RECORD_BATCH_OVERHEAD, self._size, self.position
        try:
            idx = index_records(
                as_uint8(payload),
                start,
                end,
                count,
                base_offset=self._base_offset,
                base_timestamp=self._base_timestamp,
                log_append_time=lat,
                max_index_bytes=max_decompressed_bytes,
            )
        except InvalidRecordError as exc:
            pos = exc.position
            message = str(exc).split(" (at byte position")[0]
            raise InvalidRecordError(message, position=None if pos is None else origin + pos) from None
        return payload, idx

    def records(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        indexed = self.record_index(max_decompressed_bytes)
        if indexed is None:
            return iter(())
        payload, idx = indexed
        return iter(_build_records(payload, idx))

    def record_details(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordDetail]:
        indexed = self.record_index(max_decompressed_bytes)
        if indexed is None:
            return
        payload, idx = indexed
        records = _build_records(payload, idx)
        base = self._base_offset
        base_seq = self._base_sequence
        control = bool(self._attributes & ATTR_CONTROL)
        for record, size in zip(records, idx.record_size.tolist(), strict=True):
            delta = _i64(record.offset - base)
            seq = increment_sequence(base_seq, delta) if base_seq >= 0 else NO_SEQUENCE
            if control:
                ctype = ControlRecordType.parse(record.key)
                epoch = None
                if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    epoch = EndTransactionMarker.deserialize(record.key, record.value).coordinator_epoch
                yield RecordDetail(record, seq, size, ctype, epoch)
            else:
                yield RecordDetail(record, seq, size)

    def end_transaction_marker(self) -> EndTransactionMarker | None:
        """The COMMIT/ABORT marker of a control batch, or ``None`` for other batches."""
        if not self.is_control_batch:
            return None
        for detail in self.record_details():
            rec = detail.record
            if detail.control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                return EndTransactionMarker.deserialize(rec.key, rec.value)
            return None
        return None

    # --- in-place mutation (leader offset assignment) ------------------------------------------------------
    def _writable(self) -> memoryview:
        if self._buf.readonly:
            raise TypeError("batch buffer is read-only; build MemoryRecords over a bytearray to mutate it")
        return self._buf

    def set_last_offset(self, last_offset: int) -> None:
        """Rewrite the base offset so that the batch ends at ``last_offset`` (CRC unaffected)."""
        base = last_offset - self._last_offset_delta
        struct.pack_into(">q", self._writable(), self._off, base)
        self._base_offset = base

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Rewrite the partition leader epoch (outside the CRC)."""
        struct.pack_into(">i", self._writable(), self._off + PARTITION_LEADER_EPOCH_OFFSET, epoch)
        self._ple = epoch

    def set_max_timestamp(self, timestamp_type: TimestampType, max_timestamp: int) -> None:
        """Set the timestamp type bit and the max timestamp, recomputing the CRC only if either changes."""
        if self.timestamp_type is timestamp_type and self._max_timestamp == max_timestamp:
            return
        buf = self._writable()
        attrs = self._attributes & ~ATTR_TIMESTAMP_TYPE
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            attrs |= ATTR_TIMESTAMP_TYPE
        struct.pack_into(">h", buf, self._off + ATTRIBUTES_OFFSET, attrs)
        struct.pack_into(">q", buf, self._off + MAX_TIMESTAMP_OFFSET, max_timestamp)
        self._attributes = attrs
        self._max_timestamp = max_timestamp
        crc = self.compute_checksum()
        struct.pack_into(">I", buf, self._off + CRC_OFFSET, crc)
        self._crc = crc


def _build_records(payload: bytes | bytearray | memoryview, idx: RecordIndex) -> list[Record]:
    """``Record`` objects from the kernel's index (keys, values and headers are sliced out as bytes)."""
    data = payload if isinstance(payload, bytes) else bytes(payload)
    offsets = idx.offsets.tolist()
    timestamps = idx.timestamps.tolist()
    key_pos = idx.key_pos.tolist()
    key_len = idx.key_len.tolist()
    value_pos = idx.value_pos.tolist()
    value_len = idx.value_len.tolist()
    rows = zip(offsets, timestamps, key_pos, key_len, value_pos, value_len, strict=True)
    if not len(idx.header_key_pos):
        return [
            Record(o, t, None if kl < 0 else data[kp : kp + kl], None if vl < 0 else data[vp : vp + vl])
            for o, t, kp, kl, vp, vl in rows
        ]
    h_start = idx.header_start.tolist()
    h_count = idx.header_count.tolist()
    names: dict[bytes, str] = {}
    all_headers = []
    for kp, kl, vp, vl in zip(
        idx.header_key_pos.tolist(),
        idx.header_key_len.tolist(),
        idx.header_value_pos.tolist(),
        idx.header_value_len.tolist(),
        strict=True,
    ):
        raw = data[kp : kp + kl]
        name = names.get(raw)
        if name is None:
            name = names[raw] = decode_utf8_as_java(raw)
        all_headers.append(Header(name, None if vl < 0 else data[vp : vp + vl]))
    return [
        Record(
            o,
            t,
            None if kl < 0 else data[kp : kp + kl],
            None if vl < 0 else data[vp : vp + vl],
            tuple(all_headers[hs : hs + hc]) if hc else (),
        )
        for (o, t, kp, kl, vp, vl), hs, hc in zip(rows, h_start, h_count, strict=True)
    ]
