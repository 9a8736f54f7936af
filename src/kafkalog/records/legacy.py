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
wrapper with LogAppendTime gives every inner record the wrapper's timestamp. Inner entries must not be
compressed themselves.
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
from kafkalog.records.record import NO_TIMESTAMP, Record, TimestampType

__all__ = ["RECORD_OVERHEAD_V0", "RECORD_OVERHEAD_V1", "LegacyRecordBatch", "record_overhead"]

RECORD_OVERHEAD_V0: Final = 14
RECORD_OVERHEAD_V1: Final = 22
_PREFIX: Final = struct.Struct(">qiIbb")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")


def record_overhead(magic: int) -> int:
    """Bytes of a legacy record besides key and value (excluding the 12-byte log overhead)."""
    return RECORD_OVERHEAD_V0 if magic == MAGIC_V0 else RECORD_OVERHEAD_V1


class _Entry:
    """One parsed legacy entry (a plain record or a compressed wrapper)."""

    __slots__ = ("attributes", "crc", "key", "magic", "offset", "position", "size", "timestamp", "value")

    def __init__(self, buf: memoryview, pos: int, end: int, origin: int) -> None:
        if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise InvalidRecordError("legacy record is truncated", position=origin + pos)
        offset, size, crc, magic, attributes = _PREFIX.unpack_from(buf, pos)
        if magic not in (MAGIC_V0, MAGIC_V1):
            raise CorruptRecordError(f"invalid magic {magic} in legacy record", position=origin + pos)
        if size < record_overhead(magic):
            raise CorruptRecordError(
                f"legacy record size {size} is smaller than the minimum overhead {record_overhead(magic)}",
                position=origin + pos,
            )
        rec_end = pos + LOG_OVERHEAD + size
        if rec_end > end:
            raise InvalidRecordError("legacy record runs past the end of its buffer", position=origin + pos)
        p = pos + 18
        timestamp = NO_TIMESTAMP
        if magic == MAGIC_V1:
            (timestamp,) = _INT64.unpack_from(buf, p)
            p += 8
        key, p = _read_bytes(buf, p, rec_end, origin)
        value, p = _read_bytes(buf, p, rec_end, origin)
        # Like Kafka, bytes after the value inside the declared size are ignored.
        self.position = pos
        self.offset: int = offset
        self.size: int = size
        self.crc: int = crc
        self.magic: int = magic
        self.attributes: int = attributes
        self.timestamp: int = timestamp
        self.key = key
        self.value = value


def _read_bytes(buf: memoryview, p: int, end: int, origin: int) -> tuple[bytes | None, int]:
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
        (size,) = _INT32.unpack_from(buffer, offset + 8)
        end = offset + LOG_OVERHEAD + size
        if size < 0 or end > len(buffer):
            raise CorruptRecordError("legacy record runs past the end of the buffer", position=position)
        self._buf = buffer
        self._off = offset
        self.position = position
        self._entry = _Entry(buffer, offset, end, position - offset)
        self._inner: list[RecordDetail] | None = None

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
        inner = self._inner_details(DEFAULT_MAX_DECOMPRESSED_BYTES)
        return inner[0].record.offset if inner else self._entry.offset

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
        """The entry's own key (for a wrapper: normally null)."""
        return self._entry.key

    def to_bytes(self) -> bytes:
        return bytes(self._buf[self._off : self._off + self.size_in_bytes])

    def compute_checksum(self) -> int:
        return zlib.crc32(self._buf[self._off + 16 : self._off + self.size_in_bytes])

    def is_valid(self) -> bool:
        return (
            self._entry.size >= record_overhead(self._entry.magic)
            and self.compute_checksum() == self._entry.crc
        )

    def ensure_valid(self) -> None:
        computed = self.compute_checksum()
        if computed != self._entry.crc:
            raise CorruptRecordError(
                f"record is corrupt (stored crc = {self._entry.crc}, computed crc = {computed})",
                position=self.position,
            )

    def record_details(
        self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    ) -> Iterator[RecordDetail]:
        if not self.is_compressed:
            e = self._entry
            yield RecordDetail(Record(e.offset, e.timestamp, e.key, e.value), NO_SEQUENCE, self.size_in_bytes)
            return
        yield from self._inner_details(max_decompressed_bytes)

    def _inner_details(self, max_decompressed_bytes: int) -> list[RecordDetail]:
        if self._inner is not None:
            return self._inner
        wrapper = self._entry
        if wrapper.value is None:
            raise InvalidRecordError("compressed legacy wrapper has a null value", position=self.position)
        payload = memoryview(
            decompress(
                wrapper.attributes & 0x07,
                wrapper.value,
                max_decompressed_bytes,
                position=self.position,
                legacy_magic=wrapper.magic,
            )
        )
        entries: list[_Entry] = []
        pos = 0
        while len(payload) - pos >= LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            (inner_size,) = _INT32.unpack_from(payload, pos + 8)
            if inner_size < 0 or pos + LOG_OVERHEAD + inner_size > len(payload):
                break  # a partial inner entry ends the wrapper, as in Kafka
            entry = _Entry(payload, pos, len(payload), self.position)
            if entry.attributes & 0x07:
                raise InvalidRecordError("inner messages must not be compressed", position=self.position)
            entries.append(entry)
            pos += LOG_OVERHEAD + entry.size
        details: list[RecordDetail] = []
        if not entries:
            raise InvalidRecordError(
                "found invalid compressed record set with no inner records", position=self.position
            )
        log_append = wrapper.magic == MAGIC_V1 and bool(wrapper.attributes & 0x08)
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
        for e in entries:
            ts = wrapper.timestamp if log_append else e.timestamp
            details.append(
                RecordDetail(Record(base + e.offset, ts, e.key, e.value), NO_SEQUENCE, LOG_OVERHEAD + e.size)
            )
        self._inner = details
        return details
