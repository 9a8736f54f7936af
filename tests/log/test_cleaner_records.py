"""What the cleaner writes, byte by byte: re-written batches equal Kafka's builder output for the retained
records (base offset and last offset kept), delete horizons (attribute bit and base timestamp), empty batches,
LogAppendTime batches, every codec, headers, and legacy v0/v1 entries."""

from __future__ import annotations

import struct

import pytest

from kafkalog.cleaner.cleaner import CleanerStats
from kafkalog.cleaner.offset_map import SkimpyOffsetMap, hash_key, murmur3_128
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.log import Log, LogConfig
from kafkalog.records import (
    Compression,
    DefaultRecordBatch,
    Header,
    MemoryRecordsBuilder,
    SimpleRecord,
    TimestampType,
)
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import legacy_records, records
from .test_cleaner_helpers import LONG_MAX, config, fake_map, ltc, make_cleaner

TS = 1_700_000_000_000


def batches(log: Log) -> list[DefaultRecordBatch]:
    out = [b for s in log.segments for b in s.batches()]
    assert all(isinstance(b, DefaultRecordBatch) for b in out)
    return out  # type: ignore[return-value]


def expected_rewrite(
    original: DefaultRecordBatch,
    keep: list[int],
    horizon: int | None = None,
    codec: Compression | None = None,
) -> bytes:
    """Kafka's ``buildRetainedRecordsInto``: the retained records through the builder, with the original
    batch's base offset, producer fields, epoch and timestamp type, then ``overrideLastOffset``."""
    recs = [r for r in original.records() if r.offset in keep]
    lat = original.timestamp_type is TimestampType.LOG_APPEND_TIME
    builder = MemoryRecordsBuilder(
        base_offset=original.base_offset,
        compression=original.compression if codec is None else codec,
        timestamp_type=original.timestamp_type,
        log_append_time=original.max_timestamp if lat else -1,
        producer_id=original.producer_id,
        producer_epoch=original.producer_epoch,
        base_sequence=original.base_sequence,
        is_transactional=original.is_transactional,
        partition_leader_epoch=original.partition_leader_epoch,
        delete_horizon_ms=horizon,
    )
    for r in recs:
        builder.append_with_offset(r.offset, r.timestamp, r.key, r.value, r.headers)
    data = bytearray(builder.build().buffer)
    struct.pack_into(">i", data, 23, original.last_offset_delta)  # overrideLastOffset
    struct.pack_into(">I", data, 17, 0)
    from crc32c import crc32c

    struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:]))
    return bytes(data)


def clean_all(log: Log, keys_gone: list[bytes], now: int = 0) -> None:
    log.roll()
    offset_map = fake_map([])
    for k in keys_gone:
        offset_map.put(k, LONG_MAX)
    segments = log.segments[:-1]
    make_cleaner(1 << 10).clean_segments(
        log, segments, offset_map, now, CleanerStats(), CleanedTransactionMetadata(), -1, log.log_end_offset
    )


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.kafka_name)
def test_rewritten_batch_equals_kafkas_builder_output(make_log: LogFactory, codec: Compression) -> None:
    log = make_log(config(segment_bytes=1 << 20))
    items = [
        SimpleRecord(b"v%d" % i, b"k%d" % i, TS + 7 * i, (Header("h", b"x" * i), Header("n", None)))
        for i in range(10)
    ]
    log.append_as_leader(records(items, codec=codec, partition_leader_epoch=3), 5)
    original = batches(log)[0]
    clean_all(log, [b"k0", b"k3", b"k9"])
    (cleaned,) = batches(log)[:1]
    cleaned.ensure_valid()
    assert (cleaned.base_offset, cleaned.last_offset) == (0, 9)
    assert [r.offset for r in cleaned.records()] == [1, 2, 4, 5, 6, 7, 8]
    if codec is Compression.NONE:
        assert cleaned.to_bytes() == expected_rewrite(original, [1, 2, 4, 5, 6, 7, 8])
    else:
        # compressed payloads depend on the codec library; the decoded batch must be Kafka's
        ref = DefaultRecordBatch(memoryview(expected_rewrite(original, [1, 2, 4, 5, 6, 7, 8])))
        assert list(cleaned.records()) == list(ref.records())
        assert cleaned.attributes == ref.attributes
        assert (cleaned.base_timestamp, cleaned.max_timestamp, cleaned.count) == (
            ref.base_timestamp,
            ref.max_timestamp,
            ref.count,
        )


def test_untouched_batches_are_copied_byte_for_byte(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=1 << 20))
    for codec in Compression:
        log.append(
            [SimpleRecord(b"v", b"%s-%d" % (codec.kafka_name.encode(), i), TS) for i in range(5)],
            compression=codec,
        )
    before = [b.to_bytes() for b in batches(log)]
    clean_all(log, [])
    assert [b.to_bytes() for b in batches(log)] == before


def test_tombstone_gets_delete_horizon_then_goes(make_log: LogFactory, mock_time: MockTime) -> None:
    cfg = config(segment_bytes=1 << 20, delete_retention_ms=1000)
    log = make_log(cfg)
    log.append_as_leader(records([SimpleRecord(b"a", b"k1", TS), SimpleRecord(None, b"k2", TS + 5)]), 0)
    log.append_as_leader(records([SimpleRecord(b"b", b"k3", TS + 9)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    cleaner = make_cleaner(1 << 10)
    now = TS + 100
    cleaner.do_clean(ltc(log, 0), now)
    first = batches(log)[0]
    assert first.attributes & 0x40, "delete horizon bit"
    assert first.delete_horizon_ms == first.base_timestamp == now + 1000
    assert [(r.offset, r.timestamp, r.value) for r in first.records()] == [(0, TS, b"a"), (1, TS + 5, None)]
    assert first.max_timestamp == TS + 5
    # before the horizon the tombstone stays (and the batch is copied as it is)
    before = first.to_bytes()
    cleaner.do_clean(ltc(log, 0), now + 999)
    assert batches(log)[0].to_bytes() == before
    # at the horizon it goes; the horizon stays on the batch
    cleaner.do_clean(ltc(log, 0), now + 1000)
    first = batches(log)[0]
    assert [(r.offset, r.value) for r in first.records()] == [(0, b"a")]
    assert first.delete_horizon_ms == now + 1000
    assert (first.base_offset, first.last_offset) == (0, 1)


def test_empty_batch_header(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=1 << 20))
    log.append_as_leader(
        records([SimpleRecord(b"v", b"k", TS)], producer_id=7, producer_epoch=2, sequence=4), 9
    )
    log.append_as_leader(records([SimpleRecord(b"v", b"other", TS + 1)]), 9)
    clean_all(log, [b"k"])
    empty = batches(log)[0]
    empty.ensure_valid()
    assert empty.size_in_bytes == 61 and empty.count == 0
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (7, 2, 4)
    assert (empty.base_offset, empty.last_offset, empty.partition_leader_epoch) == (0, 0, 9)
    assert (empty.base_timestamp, empty.max_timestamp, empty.compression) == (-1, TS, Compression.NONE)


def test_log_append_time_batch(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=1 << 20, message_timestamp_type="LogAppendTime"))
    log.append([SimpleRecord(b"v%d" % i, b"k%d" % i, TS + i) for i in range(4)])
    original = batches(log)[0]
    assert original.timestamp_type is TimestampType.LOG_APPEND_TIME
    clean_all(log, [b"k0"])
    cleaned = batches(log)[0]
    assert cleaned.to_bytes() == expected_rewrite(original, [1, 2, 3])
    assert {r.timestamp for r in cleaned.records()} == {original.max_timestamp}


def test_legacy_entries(make_log: LogFactory) -> None:
    """v0/v1 entries: kept whole when nothing goes, else the survivors as a v2 batch with their offsets."""
    log = make_log(config(segment_bytes=1 << 20))
    log.append_as_follower(legacy_records(1, [(b"a", b"1"), (b"b", b"2")], base_offset=0, timestamp=TS))
    log.append_as_follower(legacy_records(0, [(b"c", b"3")], base_offset=2))
    log.append_as_follower(
        legacy_records(1, [(b"d", b"4"), (b"e", None)], base_offset=3, codec=1, timestamp=TS)
    )
    before = [b.to_bytes() for b in log.segments[0].batches()]
    clean_all(log, [b"a", b"d"])
    out = [b for s in log.segments for b in s.batches()]
    assert [(r.offset, r.key, r.value) for b in out for r in b.records()] == [
        (1, b"b", b"2"),
        (2, b"c", b"3"),
        (4, b"e", None),
    ]
    # uncompressed legacy entries are single records: the surviving ones are copied as they are
    assert [b.to_bytes() for b in out[:2]] == before[1:3]
    # the compressed wrapper lost a record: its survivors are re-written as a v2 batch at their offsets
    assert out[2].magic == 2 and (out[2].base_offset, out[2].last_offset) == (4, 4)


def test_corrupt_batch_aborts_cleaning(make_log: LogFactory) -> None:
    from kafkalog.errors import CorruptRecordError

    log = make_log(config(segment_bytes=1 << 20))
    log.append([SimpleRecord(b"value", b"k%d" % i, TS) for i in range(3)])
    log.roll()
    path = log.segments[0].log.path
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        make_cleaner(1 << 10).clean(ltc(log, 0))
    assert not list(log.dir.glob("*.cleaned"))


def test_offset_map_basics() -> None:
    """Kafka's ``OffsetMapTest``: put/get, overwrite, clear, a full map refuses new keys."""
    m = SkimpyOffsetMap(24 * 1000)
    assert m.slots == 1000
    for i in range(500):
        m.put(b"%d" % i, i)
    for i in range(500):
        assert m.get(b"%d" % i) == i
    m.put(b"7", 1234)
    assert m.get(b"7") == 1234 and m.size == 500 and m.latest_offset == 1234
    m.clear()
    assert m.size == 0 and m.latest_offset == -1 and m.get(b"7") == -1
    small = SkimpyOffsetMap(slots=4)
    for i in range(4):
        small.put(b"%d" % i, i)
    assert [small.get(b"%d" % i) for i in range(4)] == [0, 1, 2, 3]
    assert small.get(b"absent") == -1
    with pytest.raises(ValueError):  # Kafka refuses any put into a full map
        small.put(b"2", 22)
    assert small.get(b"2") == 2
    grown = SkimpyOffsetMap(24 * 200_000)
    for i in range(50_000):
        grown.put(b"%d" % i, i)
    assert grown.rows < grown.slots and all(grown.get(b"%d" % i) == i for i in range(0, 50_000, 97))


def test_murmur3_reference() -> None:
    """MurmurHash3_x64_128 of ``hello`` (seed 0), as published, and the key digest is the same hash."""
    assert murmur3_128(b"hello") == (0xCBD8A7B341BD9B02, 0x5B1E906A48AE1D19)
    assert murmur3_128(b"") == (0, 0)
    assert hash_key(b"hello") == murmur3_128(b"hello")
    assert len({murmur3_128(b"%d" % i) for i in range(10_000)}) == 10_000


def test_kafka_log_config_rejects_nothing_new() -> None:
    assert LogConfig(cleanup_policy=("compact", "delete")).compact
