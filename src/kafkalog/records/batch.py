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
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, decompress
from kafkalog.records.control import ControlRecordType, EndTransactionMarker
from kafkalog.records.record import Header, Record, TimestampType
from kafkalog.records.varint import decode_varint, decode_varlong

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LOG_OVERHEAD",
    "MAGIC_V0",
    "MAGIC_V1",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "RECORD_BATCH_OVERHEAD",
    "DefaultRecordBatch",
    "RecordBatch",
    "RecordDetail",
    "increment_sequence",
]

LOG_OVERHEAD: Final = 12
HEADER_SIZE_UP_TO_MAGIC: Final = 17
RECORD_BATCH_OVERHEAD: Final = 61
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
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21
_MAX_TIMESTAMP_OFFSET: Final = 35
_PLE_OFFSET: Final = 12
_INT32_MAX: Final = (1 << 31) - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: add, wrapping from ``2**31 - 1`` to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


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
    """A view of one magic-2 batch at ``position`` in ``buffer`` (no copy; header parsed once)."""

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_buf",
        "_count",
        "_crc",
        "_last_offset_delta",
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
        if magic != MAGIC_V2:
            raise CorruptRecordError(f"not a magic 2 batch (magic {magic})", position=position)
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
        return MAGIC_V2

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def last_offset_delta(self) -> int:
        """``lastOffset - baseOffset`` as stored (kept by compaction)."""
        return self._last_offset_delta

    @property
    def last_offset(self) -> int:
        return self._base_offset + self._last_offset_delta

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
        return crc32c(self._buf[self._off + _ATTRIBUTES_OFFSET : self._off + self._size])

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

    def record_details(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordDetail]:
        count = self._count
        if count < 0:
            raise InvalidRecordError(
                f"found invalid record count {count} in magic v2 batch", position=self.position
            )
        if count == 0:
            return
        payload = self.records_payload(max_decompressed_bytes)
        base_offset = self._base_offset
        base_ts = self._base_timestamp
        log_append_time = self._max_timestamp if self._attributes & ATTR_TIMESTAMP_TYPE else None
        base_seq = self._base_sequence
        control = bool(self._attributes & ATTR_CONTROL)
        payload_origin = self.position + RECORD_BATCH_OVERHEAD if not self.is_compressed else self.position
        for offset_delta, ts_delta, key, value, headers, size in _decode_records(
            payload, count, payload_origin
        ):
            ts = log_append_time if log_append_time is not None else base_ts + ts_delta
            record = Record(base_offset + offset_delta, ts, key, value, headers)
            seq = NO_SEQUENCE if base_seq == NO_SEQUENCE else increment_sequence(base_seq, offset_delta)
            if control:
                ctype = ControlRecordType.parse(key)
                epoch = None
                if ctype in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    epoch = EndTransactionMarker.deserialize(key, value).coordinator_epoch
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
        struct.pack_into(">i", self._writable(), self._off + _PLE_OFFSET, epoch)
        self._ple = epoch

    def set_max_timestamp(self, timestamp_type: TimestampType, max_timestamp: int) -> None:
        """Set the timestamp type bit and the max timestamp, recomputing the CRC only if either changes."""
        if self.timestamp_type is timestamp_type and self._max_timestamp == max_timestamp:
            return
        buf = self._writable()
        attrs = self._attributes & ~ATTR_TIMESTAMP_TYPE
        if timestamp_type is TimestampType.LOG_APPEND_TIME:
            attrs |= ATTR_TIMESTAMP_TYPE
        struct.pack_into(">h", buf, self._off + _ATTRIBUTES_OFFSET, attrs)
        struct.pack_into(">q", buf, self._off + _MAX_TIMESTAMP_OFFSET, max_timestamp)
        self._attributes = attrs
        self._max_timestamp = max_timestamp
        crc = self.compute_checksum()
        struct.pack_into(">I", buf, self._off + _CRC_OFFSET, crc)
        self._crc = crc


def _decode_records(
    payload: memoryview, count: int, origin: int
) -> Iterator[tuple[int, int, bytes | None, bytes | None, tuple[Header, ...], int]]:
    """Decode exactly ``count`` records filling ``payload``.

    Yields ``(offset_delta, timestamp_delta, key, value, headers, size_in_bytes)``. ``origin`` is the
    buffer position of ``payload[0]`` (for error messages).
    """
    end = len(payload)
    pos = 0
    for _ in range(count):
        start = pos
        if pos >= end:
            raise InvalidRecordError(
                "record count is larger than the records in the batch", position=origin + pos
            )
        body, pos = decode_varint(payload, pos, end)
        body_start = pos
        if body < 0 or body > end - pos:
            raise InvalidRecordError(
                f"invalid record size: expected {body} bytes in record payload, but the batch has only "
                f"{end - pos} remaining bytes",
                position=origin + start,
            )
        rec_end = pos + body
        try:
            pos += 1  # attributes: unused
            ts_delta, pos = decode_varlong(payload, pos, rec_end)
            offset_delta, pos = decode_varint(payload, pos, rec_end)
            klen, pos = decode_varint(payload, pos, rec_end)
            key = None
            if klen >= 0:
                if pos + klen > rec_end:
                    raise InvalidRecordError("record key runs past the record", position=origin + pos)
                key = bytes(payload[pos : pos + klen])
                pos += klen
            vlen, pos = decode_varint(payload, pos, rec_end)
            value = None
            if vlen >= 0:
                if pos + vlen > rec_end:
                    raise InvalidRecordError("record value runs past the record", position=origin + pos)
                value = bytes(payload[pos : pos + vlen])
                pos += vlen
            nheaders, pos = decode_varint(payload, pos, rec_end)
            if nheaders < 0:
                raise InvalidRecordError(
                    f"found invalid number of record headers {nheaders}", position=origin + pos
                )
            if nheaders > rec_end - pos:
                raise InvalidRecordError(
                    f"found invalid number of record headers {nheaders}", position=origin + pos
                )
            headers: tuple[Header, ...] = ()
            if nheaders:
                hs = []
                for _h in range(nheaders):
                    hklen, pos = decode_varint(payload, pos, rec_end)
                    if hklen < 0:
                        raise InvalidRecordError("invalid negative header key size", position=origin + pos)
                    if pos + hklen > rec_end:
                        raise InvalidRecordError("header key runs past the record", position=origin + pos)
                    hkey = bytes(payload[pos : pos + hklen]).decode("utf-8", "replace")
                    pos += hklen
                    hvlen, pos = decode_varint(payload, pos, rec_end)
                    hval = None
                    if hvlen >= 0:
                        if pos + hvlen > rec_end:
                            raise InvalidRecordError(
                                "header value runs past the record", position=origin + pos
                            )
                        hval = bytes(payload[pos : pos + hvlen])
                        pos += hvlen
                    hs.append(Header(hkey, hval))
                headers = tuple(hs)
        except InvalidRecordError as exc:
            if "runs past the end" in str(exc):
                raise InvalidRecordError("found invalid record structure", position=origin + start) from exc
            raise
        if pos != rec_end:
            raise InvalidRecordError(
                f"invalid record size: expected to read {body} bytes in record payload, but instead read "
                f"{pos - body_start}",
                position=origin + start,
            )
        yield offset_delta, ts_delta, key, value, headers, pos - start
    if pos != end:
        raise InvalidRecordError(
            "incorrect declared batch size, records still remaining in the batch", position=origin + pos
        )
