"""The pure-Python small-batch builder: byte-identical to ``MemoryRecords.build`` or ``None``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.records import Compression, Header, MemoryRecords, SimpleRecord, TimestampType
from kafkalog.records.batch import DefaultRecordBatch
from kafkalog.records.simple import MAX_PLAIN_BATCH_RECORDS, build_plain_batch

NOW = 1_700_000_000_000
SIZES = [0, 1, 63, 64, 127, 128, 8191, 8192, 100_000]


def _check(items: list[Any], now_ms: int = NOW) -> bytearray:
    """Build both ways, compare bytes and the returned summary, decode and validate the batch."""
    got = build_plain_batch(items, now_ms)
    assert got is not None
    buf, count, min_ts, max_ts, null_keys = got
    assert isinstance(buf, bytearray)
    expected = MemoryRecords.build(items, compression=Compression.NONE, now_ms=now_ms)
    assert bytes(buf) == bytes(expected.buffer)

    batches = list(MemoryRecords(buf).batches())
    assert len(batches) == 1
    batch = batches[0]
    assert isinstance(batch, DefaultRecordBatch)
    assert batch.is_valid()
    batch.ensure_valid()
    assert batch.size_in_bytes == len(buf)
    assert batch.base_offset == 0
    assert batch.last_offset == len(items) - 1
    assert batch.count == count == len(items)
    assert batch.compression is Compression.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert batch.producer_id == -1 and batch.producer_epoch == -1 and batch.base_sequence == -1
    assert batch.partition_leader_epoch == -1

    records = list(batch.records())
    timestamps = [r.timestamp for r in records]
    assert min_ts == min(timestamps)
    assert max_ts == max(timestamps) == batch.max_timestamp
    assert batch.base_timestamp == timestamps[0]
    assert null_keys == sum(r.key is None for r in records)
    assert [r.offset for r in records] == list(range(len(items)))
    return buf


# --- byte equality for fixed shapes -------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_one_value_of_each_size(size: int) -> None:
    _check([b"v" * size])


@pytest.mark.parametrize("size", SIZES)
def test_keys_and_values_of_each_size(size: int) -> None:
    _check([(b"k" * size, b"v" * size)])
    _check([(b"k" * size, None), (None, b"v" * size), SimpleRecord(b"v" * size, b"k" * size)])


@pytest.mark.parametrize("n", [1, 2, 8, MAX_PLAIN_BATCH_RECORDS])
def test_value_only_lists(n: int) -> None:
    _check([bytes([i]) * (i * 10) for i in range(n)])
    _check([b"x" * 100] * n)


def test_hundred_byte_value() -> None:
    buf = _check([b"x" * 100])
    # header · length varint (2 bytes) · attributes, timestampDelta, offsetDelta, keyLength -1 · valueLength
    # varint (2 bytes) · value · headerCount
    assert len(buf) == 61 + 2 + 4 + 2 + 100 + 1


def test_keys_none_values_and_empty() -> None:
    _check([(b"key", b"value")])
    _check([(None, None)])
    _check([(b"", b"")])
    _check([(b"k", None), (b"", b"v"), (None, b""), b"", b"plain"])
    _check([SimpleRecord(None), SimpleRecord(b"", b""), SimpleRecord(b"v", None), SimpleRecord(None, b"k")])


def test_simple_records_with_timestamps() -> None:
    _check([SimpleRecord(b"a", timestamp=5)])
    _check([SimpleRecord(b"a", timestamp=0)])
    _check([SimpleRecord(b"a", timestamp=0), SimpleRecord(b"b", timestamp=0)])
    _check([SimpleRecord(b"a", timestamp=0), SimpleRecord(b"b")])  # huge positive delta to now
    _check([SimpleRecord(b"a"), SimpleRecord(b"b", timestamp=0)])  # huge negative delta
    # decreasing timestamps: negative deltas, max is the first, min the last
    _check([SimpleRecord(b"v", timestamp=NOW + 100 - i * 37) for i in range(MAX_PLAIN_BATCH_RECORDS)])
    # deltas around the one/two/three-byte zig-zag boundaries (63/64, 8191/8192) in both directions
    _check([SimpleRecord(b"v", timestamp=NOW + d) for d in (0, 63, 64, -64, -65, 8191, 8192, -8192, -8193)])
    _check([SimpleRecord(b"v", timestamp=(1 << 63) - 1), SimpleRecord(b"w", timestamp=0)])


def test_mixed_items() -> None:
    _check(
        [
            b"plain",
            (b"k", b"v"),
            SimpleRecord(b"sv", b"sk", NOW - 5),
            SimpleRecord(None, b"tomb"),
            (None, b"v2"),
            SimpleRecord(b"late", timestamp=NOW + 10_000),
        ]
    )


def test_empty_headers_are_in_the_subset() -> None:
    _check([SimpleRecord(b"v", b"k", NOW, ())])


def test_now_ms_zero() -> None:
    _check([b"v"], now_ms=0)
    _check([b"v", b"w"], now_ms=0)


# --- hypothesis: random lists in the subset -----------------------------------------------------------------
_data = st.one_of(st.none(), st.binary(max_size=200))
_items = st.one_of(
    st.binary(max_size=300),
    st.tuples(_data, _data),
    st.builds(
        SimpleRecord,
        _data,
        _data,
        st.one_of(st.none(), st.integers(0, 2 * NOW), st.integers(NOW - 20_000, NOW + 20_000)),
        st.just(()),
    ),
)


@given(st.lists(_items, min_size=1, max_size=MAX_PLAIN_BATCH_RECORDS), st.integers(0, 2 * NOW))
def test_random_lists_match_memory_records_build(items: list[Any], now_ms: int) -> None:
    _check(items, now_ms)


# --- outside the fast subset -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "items",
    [
        [],
        [b"v"] * (MAX_PLAIN_BATCH_RECORDS + 1),
        [SimpleRecord(b"v", headers=(Header("h", b"x"),))],
        [b"ok", SimpleRecord(b"v", headers=(("h", None),))],
        [memoryview(b"v")],
        [bytearray(b"v")],
        [b"ok", (b"k", bytearray(b"v"))],
        [(memoryview(b"k"), b"v")],
        [SimpleRecord(memoryview(b"v"))],  # type: ignore[arg-type]
        [SimpleRecord(b"v", timestamp=-1)],
        [SimpleRecord(b"v", timestamp=-5)],
        [b"ok", SimpleRecord(b"v", timestamp=-1)],
        [1],
        [b"ok", 1],
        ["text"],
        [(b"k", b"v", b"extra")],
        [[b"k", b"v"]],
    ],
    ids=lambda items: repr(items)[:40],
)
def test_outside_subset_returns_none(items: list[Any]) -> None:
    assert build_plain_batch(items, NOW) is None


def test_negative_now_returns_none() -> None:
    assert build_plain_batch([b"v"], -1) is None
    assert build_plain_batch([b"v", b"w"], -5) is None


def test_seventeen_items_still_build_through_memory_records() -> None:
    items = [b"v"] * (MAX_PLAIN_BATCH_RECORDS + 1)
    assert build_plain_batch(items, NOW) is None
    assert MemoryRecords.build(items, now_ms=NOW).record_count() == MAX_PLAIN_BATCH_RECORDS + 1
