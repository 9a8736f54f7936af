"""Legacy magic 0/1 entries, read through batches built by kafka-python's independent legacy builder."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records import Compression, LegacyRecordBatch, MemoryRecords, Record, TimestampType

TS = 1_700_000_000_000
V1 = bytes.fromhex(
    "0000000000000000000000183926 8c3301000000018bcfe56800000000016b0000000176".replace(" ", "")
)
V0 = bytes.fromhex("0000000000000000000000101fecd70a0000000000016b0000000176")
# kafka-python supports gzip, lz4 and zstd for legacy wrappers here (snappy needs python-snappy).
CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4]


def _legacy(magic: int, codec: Compression, n: int, base: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i in range(n):
        builder.append(
            base + i if magic == 0 or codec is Compression.NONE else i, TS + i, b"k%d" % i, b"v%d" % i
        )
    data = bytearray(builder.build())
    if codec is not Compression.NONE:
        # A producer leaves the wrapper offset at 0; the broker sets it to the last inner offset.
        data[0:8] = (base + n - 1).to_bytes(8, "big")
    return bytes(data)


def test_golden_v1_and_v0() -> None:
    b1, b0 = MemoryRecords(V1 + V0).batches()
    assert isinstance(b1, LegacyRecordBatch) and isinstance(b0, LegacyRecordBatch)
    b1.ensure_valid()
    b0.ensure_valid()
    assert (b1.magic, b1.size_in_bytes, b1.timestamp_type, b1.max_timestamp) == (
        1,
        36,
        TimestampType.CREATE_TIME,
        TS,
    )
    assert (b0.magic, b0.size_in_bytes, b0.timestamp_type, b0.max_timestamp) == (
        0,
        28,
        TimestampType.NO_TIMESTAMP_TYPE,
        -1,
    )
    assert list(b1) == [Record(0, TS, b"k", b"v")]
    assert list(b0) == [Record(0, -1, b"k", b"v")]
    assert (b1.producer_id, b1.base_sequence, b1.last_sequence, b1.partition_leader_epoch) == (-1, -1, -1, -1)
    assert b1.count == 1 and b1.base_timestamp is None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_wrappers_and_offsets(magic: int, codec: Compression) -> None:
    data = _legacy(magic, codec, 5)
    batches = list(MemoryRecords(data).batches())
    records = [r for b in batches for r in b]
    assert [r.value for r in records] == [b"v%d" % i for i in range(5)]
    assert [r.offset for r in records] == list(range(5))
    if magic == 1:
        assert [r.timestamp for r in records] == [TS + i for i in range(5)]
    for b in batches:
        b.ensure_valid()
    if codec is not Compression.NONE:
        (wrapper,) = batches
        assert wrapper.compression is codec and wrapper.count is None
        assert (wrapper.base_offset, wrapper.last_offset) == (0, 4)


def test_v1_wrapper_offset_is_last_inner_offset() -> None:
    # Rewrite the wrapper offset as a broker does: inner relative offsets 0..4 -> absolute 100..104.
    data = bytearray(_legacy(1, Compression.GZIP, 5))
    data[0:8] = (104).to_bytes(8, "big")
    (wrapper,) = MemoryRecords(data).batches()
    assert [r.offset for r in wrapper] == [100, 101, 102, 103, 104]
    assert wrapper.base_offset == 100
    data[0:8] = (2).to_bytes(8, "big")
    with pytest.raises(InvalidRecordError, match="less than the last inner record offset"):
        list(next(MemoryRecords(data).batches()))


def test_legacy_crc_is_crc32() -> None:
    data = bytearray(V1)
    data[-1] ^= 1
    (b,) = MemoryRecords(data).batches()
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match="crc"):
        b.ensure_valid()


def test_legacy_truncated_fields() -> None:
    """A value length past the end fails the record, not the frame (Kafka's ``LegacyRecord.value()``)."""
    data = bytearray(V1)
    data[30:34] = (50).to_bytes(4, "big")  # value length past the end
    (b,) = MemoryRecords(data).batches()
    with pytest.raises(InvalidRecordError):
        list(b.record_details())


def _with_key_length(key_length: int) -> bytes:
    """The v1 entry ``V1`` (key 'k', value 'v') with its key length (bytes 26..29) replaced, CRC recomputed."""
    data = bytearray(V1)
    data[26:30] = key_length.to_bytes(4, "big", signed=True)
    data[12:16] = zlib.crc32(data[16:]).to_bytes(4, "big")
    return bytes(data)


@pytest.mark.parametrize("key_length", [-2, 0, 2])
def test_crc_valid_entry_with_broken_key_length_is_a_valid_batch(key_length: int) -> None:
    """Kafka's ``ensureValid`` checks the size and the CRC only: such an entry is valid (recovery keeps it);
    reading its record fails as ``LegacyRecord.value()`` does (the value length lands on the wrong bytes)."""
    (b,) = MemoryRecords(_with_key_length(key_length)).batches()
    assert b.is_valid()
    b.ensure_valid()
    MemoryRecords(_with_key_length(key_length)).ensure_valid()
    assert (b.base_offset, b.last_offset, b.max_timestamp, b.record_count()) == (0, 0, 1_700_000_000_000, 1)
    with pytest.raises(InvalidRecordError, match="past the record"):
        list(b.record_details())


def test_v1_entry_shorter_than_v1_overhead_is_valid_but_unreadable() -> None:
    """Size 14..21 is enough for Kafka's frame and ``isValid`` (RECORD_OVERHEAD_V0), not for a v1 key length."""
    body = bytes((1, 0)) + struct.pack(">q", TS)  # magic, attributes, timestamp: no room for the lengths
    data = struct.pack(">qiI", 7, 4 + len(body), zlib.crc32(body)) + body
    (b,) = MemoryRecords(data).batches()
    assert b.is_valid() and (b.last_offset, b.max_timestamp) == (7, TS)
    with pytest.raises(InvalidRecordError):
        list(b.record_details())


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS)
def test_up_convert_to_v2_keeps_offsets_and_timestamps(magic: int, codec: Compression) -> None:
    legacy = MemoryRecords(_legacy(magic, codec, 5, base=40) + V1)
    converted = legacy.up_convert()
    converted.ensure_valid()
    assert all(b.magic == 2 for b in converted.batches())
    assert [(r.offset, r.timestamp, r.key, r.value) for r in converted.records()] == [
        (r.offset, r.timestamp, r.key, r.value) for r in legacy.records()
    ]
    again = legacy.up_convert(compression="zstd")
    assert {b.compression for b in again.batches()} == {Compression.ZSTD}
    assert list(again.records()) == list(converted.records())
