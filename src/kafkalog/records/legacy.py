"""Legacy message formats, magic 0 and 1 (read-only): so that logs written by old Kafka versions load.

Byte layout of one log entry (big-endian; ``LegacyRecord`` / ``AbstractLegacyRecordBatch``)::

    offset int64 · size int32 · crc uint32 · magic int8 · attributes int8 · [timestamp int64, v1 only]
    · keyLength int32 (negative = null) · key · valueLength int32 · value

``size`` excludes the 12-byte offset+size prefix; the CRC is **CRC-32** (zlib), not CRC-32C, over
``magic .. end``. The record overhead is 14 bytes (v0) or 22 (v1). Attribute bits 0-2 are the codec,
bit 3 the timestamp type (v1).

A compressed entry is a *wrapper* whose value is the compressed concatenation of inner entries. The
wrapper's offset is the absolute offset of the **last** inner record. Inner offsets are absolute in v0,
and relative ``0 .. n-1`` in v1 (absolute = wrapper offset - last inner offset + inner offset). A v1
wrapper with LogAppendTime gives every inner v1 record the wrapper's timestamp. Inner entries must not be
compressed themselves.

Validity is Kafka's: an entry whose size is at least 14 and whose CRC matches is a valid batch (recovery,
``verify`` and ``ensure_valid`` keep it). Key and value lengths are followed only when records are read, so
broken key/value framing inside a CRC-valid entry fails the read of its records, never the frame, exactly
where Kafka's ``LegacyRecord.key()``/``value()`` fail.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records.batch import (
    LOG_OVERHEAD,
    MAGIC_V0,
    MAGIC_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RecordBatch,
    RecordDetail,
)
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, decompress
from kafkalog.records.framing import LENGTH_OFFSET, MAGIC_OFFSET, RECORD_OVERHEAD_V0
from kafkalog.records.record import NO_TIMESTAMP, Record, TimestampType

__all__ = ["RECORD_OVERHEAD_V0", "RECORD_OVERHEAD_V1", "LegacyRecordBatch", "record_overhead"]

RECORD_OVERHEAD_V1: Final = 22
_PREFIX: Final = struct.Struct(">qiIbb")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")


def record_overhead(magic: int) -> int:
    """Bytes of a legacy record besides key and value (excluding the 12-byte log overhead)."""
    return RECORD_OVERHEAD_V0 if magic == MAGIC_V0 else RECORD_OVERHEAD_V1


class _Entry:
    """One legacy entry's fixed header (a plain record or a compressed wrapper); key and value on demand.

    Like Kafka's ``LegacyRecord``, only the header is read up front: the key and value lengths are followed
    when :meth:`fields` is called (record iteration), so an entry whose CRC and size are good is a valid batch
    even if its key/value framing is broken; that fails the records, not the frame. A magic other than 0 has
    the v1 layout (``LegacyRecord`` tests ``magic == 0`` only), which matters for inner entries of a wrapper.
    """

    __slots__ = (
        "_buf",
        "_end",
        "_fields",
        "_origin",
        "attributes",
        "crc",
        "magic",
        "offset",
        "position",
        "size",
        "timestamp",
    )

    def __init__(self, buf: memoryview, pos: int, end: int, origin: int) -> None:
        if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise InvalidRecordError("legacy record is truncated", position=origin + pos)
        offset, size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
        if size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"legacy record size {size} is smaller than the minimum overhead {RECORD_OVERHEAD_V0}",
                position=origin + pos,
            )
        rec_end = pos + LOG_OVERHEAD + size
        if rec_end > end:
            raise InvalidRecordError("legacy record runs past the end of its buffer", position=origin + pos)
        self._buf = buf
        self._end = rec_end
        self._origin = origin
        self._fields: tuple[bytes | None, bytes | None] | None = None
        self.position = pos
        self.offset: int = offset
        self.size: int = size
        self.crc: int = crc
        self.magic: int = magic
        self.attributes: int = attributes
        # size >= 14 leaves room for the 8-byte timestamp after magic and attributes
        self.timestamp: int = NO_TIMESTAMP if magic == MAGIC_V0 else _INT64.unpack_from(buf, pos + 18)[0]

    def fields(self) -> tuple[bytes | None, bytes | None]:
        """``(key, value)``; a length past the record raises :class:`InvalidRecordError` (Kafka: on access)."""
        if self._fields is None:
            p = self.position + (18 if self.magic == MAGIC_V0 else 26)
            key, p = _read_bytes(self._buf, p, self._end, self._origin)
            value, _ = _read_bytes(self._buf, p, self._end, self._origin)
            # Like Kafka, bytes after the value inside the declared size are ignored.
            self._fields = (key, value)
        return self._fields


def _read_bytes(buf: memoryview, p: int, end: int, origin: int) -> tuple[bytes | None, int]:
    """A size-delimited field as Kafka's ``Utils.sizeDelimited`` reads it: any negative size is null."""
    if end - p < 4:
        raise InvalidRecordError("legacy record is truncated", position=origin + p)
    (n,) = _INT32.unpack_from(buf, p)
    p += 4
    if n < 0:
        return None, p
    if end - p < n:
        raise InvalidRecordError("legacy record field runs past the record", position=origin + p)
    return bytes(buf[p : p + n]), p + n


class LegacyRecordBatch(RecordBatch):
    """One magic 0/1 log entry at ``position`` in ``buffer``: a single record or a compressed wrapper."""

    __slots__ = ("_buf", "_entry", "_inner", "_off", "position")

    def __init__(self, buffer: memoryview, offset: int = 0, position: int | None = None) -> None:
        """View the entry at ``buffer[offset:]``; ``position`` is where it lives in its source (a file)."""
        if position is None:
            position = offset
        (size,) = _INT32.unpack_from(buffer, offset + LENGTH_OFFSET)
        end = offset + LOG_OVERHEAD + size
        if size < 0 or end > len(buffer):
            raise CorruptRecordError("legacy record runs past the end of the buffer", position=position)
        self._buf = buffer
        self._off = offset
        self.position = position
        self._entry = _Entry(buffer, offset, end, position - offset)
        self._inner: tuple[int, list[_Entry]] | None = None

    @property
    def magic(self) -> int:
        return self._entry.magic

    @property
    def last_offset(self) -> int:
        return self._entry.offset

    @property
    def base_offset(self) -> int:
        if not self.is_compressed:
            return self._entry.offset
        base, entries = self._inner_entries(DEFAULT_MAX_DECOMPRESSED_BYTES)
        return base + entries[0].offset

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self._entry.size

    @property
    def checksum(self) -> int:
        return self._entry.crc

    @property
    def compression(self) -> Compression:
        return Compression.from_id(self._entry.attributes & 0x07, position=self.position)

    @property
    def timestamp_type(self) -> TimestampType:
        if self._entry.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self._entry.attributes & 0x08 else TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self._entry.timestamp

    @property
    def base_timestamp(self) -> None:
        return None

    @property
    def producer_id(self) -> int:
        return NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH

    @property
    def base_sequence(self) -> int:
        return NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return NO_SEQUENCE

    @property
    def is_transactional(self) -> bool:
        return False

    @property
    def is_control_batch(self) -> bool:
        return False

    @property
    def partition_leader_epoch(self) -> int:
        return NO_PARTITION_LEADER_EPOCH

    @property
    def delete_horizon_ms(self) -> None:
        return None

    @property
    def count(self) -> int | None:
        return None if self.is_compressed else 1

    @property
    def key(self) -> bytes | None:
        """The entry's own key (for a wrapper: normally null); raises if its length runs past the entry."""
        return self._entry.fields()[0]

    def to_bytes(self) -> bytes:
        return bytes(self._buf[self._off : self._off + self.size_in_bytes])

    def compute_checksum(self) -> int:
        return zlib.crc32(self._buf[self._off + MAGIC_OFFSET : self._off + self.size_in_bytes])

    def is_valid(self) -> bool:
        # Kafka's LegacyRecord.isValid: size >= 14 (checked when the entry was framed) and the CRC
        return self.compute_checksum() == self._entry.crc

    def ensure_valid(self) -> None:
        computed = self.compute_checksum()
        if computed != self._entry.crc:
            raise CorruptRecordError(
                f"record is corrupt (stored crc = {self._entry.crc}, computed crc = {computed})",
                position=self.position,
            )

    def record_count(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> int:
        """Records in the entry (a wrapper: its inner entries), framed but without reading keys and values.

        Like counting Kafka's ``AbstractLegacyRecordBatch`` iterator: a wrapper that does not decompress or
        frame raises, an inner record whose key/value lengths are broken does not (reading it does).
        """
        if not self.is_compressed:
            return 1
        return len(self._inner_entries(max_decompressed_bytes)[1])

    def record_details(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordDetail]:
        if not self.is_compressed:
            e = self._entry
            key, value = e.fields()
            yield RecordDetail(Record(e.offset, e.timestamp, key, value), NO_SEQUENCE, self.size_in_bytes)
            return
        base, entries = self._inner_entries(max_decompressed_bytes)
        wrapper = self._entry
        log_append = wrapper.magic == MAGIC_V1 and bool(wrapper.attributes & 0x08)
        for e in entries:
            # Kafka gives an inner entry the wrapper's LogAppendTime only when the inner entry is v1 itself.
            ts = wrapper.timestamp if log_append and e.magic == MAGIC_V1 else e.timestamp
            key, value = e.fields()
            yield RecordDetail(Record(base + e.offset, ts, key, value), NO_SEQUENCE, LOG_OVERHEAD + e.size)

    def _inner_entries(self, max_decompressed_bytes: int) -> tuple[int, list[_Entry]]:
        """``(offset base, inner entries)`` of a wrapper, framed as Kafka's ``DeepRecordsIterator`` frames them.

        Inner entries are read while at least the 12-byte offset+size prefix is left: a size below 14 is an
        error, a size past the payload's end (a partial entry) ends the wrapper quietly. An inner entry's magic
        is not checked against the wrapper's (Kafka's file reader passes ``ensureMatchingMagic = false``).
        """
        if self._inner is not None:
            return self._inner
        wrapper = self._entry
        _, wrapper_value = wrapper.fields()
        if wrapper_value is None:
            raise InvalidRecordError("compressed legacy wrapper has a null value", position=self.position)
        payload = memoryview(
            decompress(
                wrapper.attributes & 0x07,
                wrapper_value,
                max_decompressed_bytes,
                position=self.position,
                legacy_magic=wrapper.magic,
            )
        )
        entries: list[_Entry] = []
        pos = 0
        while len(payload) - pos >= LOG_OVERHEAD:
            (inner_size,) = _INT32.unpack_from(payload, pos + LENGTH_OFFSET)
            if inner_size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"record size {inner_size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})",
                    position=self.position,
                )
            if pos + LOG_OVERHEAD + inner_size > len(payload):
                break  # a partial inner entry ends the wrapper, as in Kafka
            entry = _Entry(payload, pos, len(payload), self.position)
            if entry.attributes & 0x07:
                raise InvalidRecordError("inner messages must not be compressed", position=self.position)
            entries.append(entry)
            pos += LOG_OVERHEAD + entry.size
        if not entries:
            raise InvalidRecordError(
                "found invalid compressed record set with no inner records", position=self.position
            )
        base = 0
        if wrapper.magic == MAGIC_V1:
            # A wrapper offset of 0 (as librdkafka writes) means the inner offsets are used as they are.
            base = 0 if wrapper.offset == 0 else wrapper.offset - entries[-1].offset
            if base < 0:
                raise InvalidRecordError(
                    f"found invalid wrapper offset in compressed v1 message set, wrapper offset "
                    f"'{wrapper.offset}' is less than the last inner record offset '{entries[-1].offset}'",
                    position=self.position,
                )
        self._inner = (base, entries)
        return self._inner
