"""RecordBatch v2: golden bytes from Kafka's own builder, header fields, CRC, mutation, bad input."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionTypeError
from kafkalog.records import (
    Compression,
    ControlRecordType,
    DefaultRecordBatch,
    EndTransactionMarker,
    Header,
    MemoryRecords,
    MemoryRecordsBuilder,
    Record,
    SimpleRecord,
    TimestampType,
)
from kafkalog.records.batch import increment_sequence

from .strategies import BASE_TS, codecs, record_lists

TS = 1_700_000_000_000
# Golden vectors produced with Apache Kafka's kafka-clients 3.9.1 (see shared/reference/kafka-log.md §2.2).
GOLDEN_ONE = bytes.fromhex(
    "0000000000000000000000390000000002965a94b10000000000000000018bcfe568000000018bcfe56800"
    "ffffffffffffffffffffffffffff000000010e0000000102610" + "0"
)
GOLDEN_TWO = bytes.fromhex(
    "0000000000000005 0000004b 00000007 02 8ee4dd0f 0000 00000001 0000018bcfe56800 0000018bcfe56803"
    " ffffffffffffffff ffff ffffffff 00000002 14 00 00 00 04 6b31 04 7631 00 1c 00 06 02 04 6b32 04 7632 02 02"
    " 68 02 78".replace(" ", "")
)
GOLDEN_COMMIT = bytes.fromhex(
    "000000000000000a 00000042 00000000 02 8a773c25 0030 00000000 0000018bcfe56800 0000018bcfe56800"
    " 00000000000003e8 0003 ffffffff 00000001 20 00 00 00 08 0000 0001 0c 0000 00000005 00".replace(" ", "")
)


def test_golden_single_record() -> None:
    built = MemoryRecords.build([SimpleRecord(b"a", None, TS)], partition_leader_epoch=0)
    assert built.to_bytes() == GOLDEN_ONE
    (batch,) = MemoryRecords(GOLDEN_ONE).batches()
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.size_in_bytes == 69
    assert batch.checksum == 0x965A94B1 == batch.compute_checksum()
    assert list(batch) == [Record(0, TS, None, b"a", ())]


def test_golden_two_records_with_header() -> None:
    built = MemoryRecords.build(
        [SimpleRecord(b"v1", b"k1", TS), SimpleRecord(b"v2", b"k2", TS + 3, (Header("h", b"x"),))],
        base_offset=5,
        partition_leader_epoch=7,
    )
    assert built.to_bytes() == GOLDEN_TWO
    (batch,) = built.batches()
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (5, 6, 7)
    assert (batch.base_timestamp, batch.max_timestamp) == (TS, TS + 3)
    assert batch.partition_leader_epoch == 7
    assert batch.count == 2
    assert list(batch)[1] == Record(6, TS + 3, b"k2", b"v2", (Header("h", b"x"),))


def test_golden_commit_marker() -> None:
    built = MemoryRecords.end_transaction_marker(
        producer_id=1000,
        producer_epoch=3,
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=5,
        base_offset=10,
        timestamp=TS,
        partition_leader_epoch=0,
    )
    assert built.to_bytes() == GOLDEN_COMMIT
    (batch,) = built.batches()
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.is_control_batch and batch.is_transactional
    assert batch.end_transaction_marker() == EndTransactionMarker(ControlRecordType.COMMIT, 5)
    (detail,) = batch.record_details()
    assert detail.control_type is ControlRecordType.COMMIT and detail.coordinator_epoch == 5
    assert detail.size_in_bytes == 17


@given(record_lists, codecs, st.integers(0, 2**40), st.sampled_from(list(TimestampType)[1:]), st.booleans())
def test_round_trip_every_field(
    records: list[SimpleRecord], codec: Compression, base: int, ts_type: TimestampType, idempotent: bool
) -> None:
    pid, epoch, seq = (77, 3, 2**31 - 5) if idempotent else (-1, -1, -1)
    built = MemoryRecords.build(
        records,
        compression=codec,
        base_offset=base,
        timestamp_type=ts_type,
        log_append_time=BASE_TS + 1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        partition_leader_epoch=9,
        now_ms=BASE_TS,
    )
    built.ensure_valid()
    (batch,) = built.batches()
    assert batch.compression is codec
    assert batch.timestamp_type is ts_type
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.last_sequence == (-1 if not idempotent else increment_sequence(seq, len(records) - 1))
    timestamps = [r.timestamp for r in records]
    expected_max = BASE_TS + 1 if ts_type is TimestampType.LOG_APPEND_TIME else max(timestamps)
    assert batch.max_timestamp == expected_max
    decoded = list(batch)
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    for rec, src in zip(decoded, records, strict=True):
        assert (rec.key, rec.value, rec.headers) == (src.key, src.value, src.headers)
        expected_ts = BASE_TS + 1 if ts_type is TimestampType.LOG_APPEND_TIME else src.timestamp
        assert rec.timestamp == expected_ts
    details = list(batch.record_details())
    assert sum(d.size_in_bytes for d in details) + 61 == batch.size_in_bytes or codec is not Compression.NONE


def test_sequence_wraps_like_kafka() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 5) == 3
    assert increment_sequence(10, 5) == 15


def test_offset_gaps_and_delete_horizon() -> None:
    builder = MemoryRecordsBuilder(base_offset=100, delete_horizon_ms=TS + 86_400_000)
    builder.append_with_offset(100, TS, b"a", b"1")
    builder.append_with_offset(105, TS + 1, b"b", None)
    (batch,) = builder.build().batches()
    assert batch.delete_horizon_ms == TS + 86_400_000 == batch.base_timestamp
    assert (batch.base_offset, batch.last_offset, batch.count) == (100, 105, 2)
    assert [(r.offset, r.timestamp, r.value) for r in batch] == [(100, TS, b"1"), (105, TS + 1, None)]


def test_builder_rejects_bad_input() -> None:
    builder = MemoryRecordsBuilder()
    builder.append(TS, None, b"x")
    with pytest.raises(ValueError, match="monotonically"):
        builder.append_with_offset(0, TS, None, b"y")
    with pytest.raises(ValueError, match="negative timestamp"):
        builder.append(-5, None, b"y")
    with pytest.raises(ValueError, match="null header key"):
        builder.append(TS, None, b"y", [(None, b"v")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="sequence"):
        MemoryRecords.build([b"v"], producer_id=5, producer_epoch=0)
    with pytest.raises(ValueError, match="producer id"):
        MemoryRecords.build([b"v"], is_transactional=True)
    with pytest.raises(ValueError, match="control"):
        MemoryRecordsBuilder(is_control_batch=True).append(TS, None, b"x")
    assert MemoryRecords.build([]) is MemoryRecords.EMPTY


def test_in_place_offset_assignment_keeps_crc() -> None:
    data = bytearray(MemoryRecords.build([b"a", b"b", b"c"], now_ms=TS).to_bytes())
    (batch,) = MemoryRecords(data).batches()
    assert isinstance(batch, DefaultRecordBatch)
    crc = batch.checksum
    batch.set_last_offset(1002)
    batch.set_partition_leader_epoch(4)
    assert batch.checksum == crc and batch.is_valid()
    batch.set_max_timestamp(TimestampType.CREATE_TIME, TS)  # unchanged: no CRC rewrite
    assert batch.checksum == crc
    batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, TS + 50)
    (again,) = MemoryRecords(data).batches()
    assert again.is_valid() and again.checksum != crc
    assert (again.base_offset, again.last_offset, again.partition_leader_epoch) == (1000, 1002, 4)
    assert [r.timestamp for r in again] == [TS + 50] * 3
    with pytest.raises(TypeError, match="read-only"):
        next(MemoryRecords(bytes(data)).batches()).set_partition_leader_epoch(1)  # type: ignore[attr-defined]


def _batch_bytes(n: int = 3, codec: Compression = Compression.NONE) -> bytes:
    return MemoryRecords.build(
        [SimpleRecord(b"v%d" % i, b"k", TS) for i in range(n)], compression=codec
    ).to_bytes()


def test_crc_mismatch_is_detected_with_position() -> None:
    data = bytearray(_batch_bytes() * 2)
    half = len(data) // 2
    data[half + 70] ^= 0x01
    batches = list(MemoryRecords(data).batches())
    assert batches[0].is_valid() and not batches[1].is_valid()
    with pytest.raises(CorruptRecordError, match=f"byte position {half}"):
        MemoryRecords(data).ensure_valid()
    assert MemoryRecords(data).valid_bytes() == half


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


def test_record_count_that_lies() -> None:
    data = _batch_bytes(3)
    for lie in (2, 4, 1000):
        (batch,) = MemoryRecords(_patch(data, 57, ">i", lie)).batches()
        with pytest.raises(InvalidRecordError):
            list(batch)
    (batch,) = MemoryRecords(_patch(data, 57, ">i", -1)).batches()
    with pytest.raises(InvalidRecordError, match="invalid record count -1"):
        list(batch)


def test_framing_errors() -> None:
    data = _batch_bytes()
    with pytest.raises(CorruptRecordError, match="smaller than minimum record overhead"):
        list(MemoryRecords(_patch(data, 8, ">i", 3)).batches())
    with pytest.raises(CorruptRecordError, match="invalid magic"):
        list(MemoryRecords(_patch(data, 16, ">b", 7)).batches())
    with pytest.raises(UnsupportedCompressionTypeError):
        _ = next(MemoryRecords(_patch(data, 21, ">h", 6)).batches()).compression
    # A huge declared length is a partial tail, not a crash: nothing is returned.
    assert list(MemoryRecords(_patch(data, 8, ">i", 2**31 - 1)).batches()) == []
    # Truncation anywhere yields a strict prefix of whole batches.
    two = data + data
    for cut in range(len(two)):
        got = list(MemoryRecords(two[:cut]).batches())
        assert len(got) == cut // len(data)


def test_partial_tail_and_slices() -> None:
    data = _batch_bytes() * 3
    recs = MemoryRecords(data + data[:30])
    assert recs.batch_count() == 3 and recs.record_count() == 9
    with pytest.raises(CorruptRecordError, match="trailing"):
        recs.ensure_valid()
    one = len(data) // 3
    assert recs.slice(one, one).batch_count() == 1
    assert recs.slice(one).size_in_bytes == len(data) + 30 - one
    with pytest.raises(ValueError):
        recs.slice(-1)


def test_works_over_memoryview_bytearray_and_mmap(tmp_path: pytest.TempPathFactory) -> None:
    import mmap
    from pathlib import Path

    data = _batch_bytes(5, Compression.ZSTD)
    path = Path(str(tmp_path)) / "x.log"
    path.write_bytes(data)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        from_mmap = [r.value for r in MemoryRecords(mm).records()]
        del f
    for buf in (data, bytearray(data), memoryview(data)):
        assert [r.value for r in MemoryRecords(buf).records()] == from_mmap


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_record_index_holds_the_decompressed_records_once(codec: Compression) -> None:
    """Issue #19 item 5: the validator's record index copied the decompressed records (twice the bound for
    a bomb); it now indexes the codec's own output."""
    size = 24 * 1024 * 1024
    built = MemoryRecords.build([SimpleRecord(bytes(size), key=b"k")], compression=codec)
    (batch,) = list(MemoryRecords(built.buffer).batches())
    assert isinstance(batch, DefaultRecordBatch)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        indexed = batch.record_index()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert indexed is not None and indexed[1].value_len.tolist() == [size]
    assert peak < size * 1.25 + 5 * 1024 * 1024  # held once (plus a 4 MiB piece and a growth margin)


def test_record_index_is_bounded_like_the_decompressed_records() -> None:
    """Issue #19 item 5, the same class: a 7-byte record costs 88 bytes of index, so ~300 KB of gzip expanding
    to 256 MiB of tiny records indexed into ~2.9 GB (40 s). The index is bounded by max_decompressed_bytes,
    and a batch whose count alone breaks the bound is refused before anything is decompressed."""
    n = 5000
    built = MemoryRecords.build([SimpleRecord(b"", key=None)] * n, compression=Compression.GZIP)
    (batch,) = list(MemoryRecords(built.buffer).batches())
    assert isinstance(batch, DefaultRecordBatch)
    indexed = batch.record_index(n * 88)
    assert indexed is not None and len(indexed[1].offsets) == n
    with pytest.raises(InvalidRecordError, match="record index"):
        batch.record_index(n * 88 - 1)


def test_header_index_is_bounded() -> None:
    record = SimpleRecord(b"v", key=b"k", headers=[Header("h", None)] * 1000)
    (batch,) = list(MemoryRecords.build([record]).batches())
    assert isinstance(batch, DefaultRecordBatch)
    assert len(next(iter(batch.records(1000 * 32))).headers) == 1000
    with pytest.raises(InvalidRecordError, match="header index"):
        batch.record_index(1000 * 32 - 1)
