"""Golden bytes of the index files, hand-built files, corrupt files, and lazy loading.

What Kafka's classes read (``OffsetIndex``, ``TimeIndex``, ``TransactionIndex``/``AbortedTxn``; reference
§2.3-2.5, §2.8):

* ``.index``: 8-byte big-endian entries ``relativeOffset int32 · position int32``;
* ``.timeindex``: 12-byte entries ``timestamp int64 · relativeOffset int32``;
* ``.txnindex``: 34-byte entries ``version int16 (0) · producerId · firstOffset · lastOffset · lastStableOffset``
  (int64s), never preallocated;
* a new ``.index``/``.timeindex`` is created on first use at ``roundDown(segment.index.bytes, entry size)`` and
  trimmed to its entries on roll and close; an existing file's length defines its entries.

Corrupt files are where kafkalog deliberately differs: Kafka trusts every slot of an existing index file
(KAFKA-7283; the root of KAFKA-10207 and KAFKA-19200), kafkalog validates the file when it loads it and raises
:class:`~kafkalog.errors.CorruptIndexError`, and ``LogSegment`` then rebuilds the offset and time indexes from
the ``.log`` (which it never changes on that path).

Known divergence pinned here: Kafka's ``AbortedTxn.version()`` reads only byte 0 of the int16 version, so a
future entry written as int16 1 (``00 01``) would pass Kafka's check; kafkalog reads the int16 and refuses it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError, KafkaError
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage import (
    AbortedTxn,
    LogOffsetPosition,
    LogSegment,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampAndOffset,
    TimestampOffset,
    TransactionIndex,
    files,
)

from .conftest import OpenCounter, v1_records

OFFSET = struct.Struct(">ii")
TIME = struct.Struct(">qi")
TXN = struct.Struct(">hqqqq")
TS = 1_700_000_000_000
SEGMENT_INDEX_BYTES = 10 * 1024 * 1024


# --- layout of what kafkalog writes ----------------------------------------------------------------------------


def test_new_indexes_are_created_on_first_use_and_preallocated(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0)  # Kafka's default segment.index.bytes
    index_file = files.offset_index_file(tmp_path, 0)
    time_file = files.time_index_file(tmp_path, 0)
    assert not index_file.exists() and not time_file.exists()
    assert seg.offset_index.entries == 0
    assert index_file.stat().st_size == 10485760, "roundDown(10485760, 8): 1310720 slots"
    assert time_file.stat().st_size == 10485756, "roundDown(10485760, 12): 873813 slots"
    assert seg.offset_index.max_entries == 1310720
    assert seg.time_index.max_entries == 873813
    assert not files.transaction_index_file(tmp_path, 0).exists(), "the txn index is never preallocated"
    seg.close()
    assert index_file.stat().st_size == 0 and time_file.stat().st_size == 0, "trimmed on close"


@pytest.mark.parametrize(("size", "index_len", "time_len"), [(1001, 1000, 996), (1000, 1000, 996), (7, 0, 0)])
def test_preallocation_rounds_down_to_whole_entries(
    tmp_path: Path, size: int, index_len: int, time_len: int
) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0, size)
    tidx = TimeIndex(tmp_path / "a.timeindex", 0, size)
    idx.load()
    tidx.load()
    assert (idx.path.stat().st_size, tidx.path.stat().st_size) == (index_len, time_len)
    idx.close()
    tidx.close()


def test_offset_index_entries_are_big_endian_relative_offset_and_position(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "100.index", 100, 1000)
    idx.append(103, 4096)
    idx.append(110, 8192)
    idx.append(100 + 2**31 - 1, 2**31 - 1)  # the largest relative offset and position
    idx.flush()  # entries reach the file in batches (see storage/index.py)
    data = idx.path.read_bytes()
    assert len(data) == 1000
    assert data[:24] == bytes.fromhex(
        "00000003 00001000 0000000a 00002000 7fffffff 7fffffff".replace(" ", "")
    )
    assert data[24:] == bytes(1000 - 24)
    idx.close()
    entries = [OFFSET.pack(3, 4096), OFFSET.pack(10, 8192), OFFSET.pack(2**31 - 1, 2**31 - 1)]
    assert idx.path.read_bytes() == b"".join(entries)


def test_time_index_entries_are_big_endian_timestamp_and_relative_offset(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "100.timeindex", 100, 1200)
    idx.maybe_append(TS, 103)
    idx.maybe_append(TS + 1, 103)  # same offset, later timestamp
    idx.maybe_append(TS + 1, 104)  # same timestamp: ignored
    idx.close()
    assert idx.path.read_bytes() == bytes.fromhex(
        "0000018bcfe56800 00000003 0000018bcfe56801 00000003".replace(" ", "")
    )
    assert idx.path.read_bytes() == TIME.pack(TS, 3) + TIME.pack(TS + 1, 3)


def test_txn_index_entries_are_34_bytes_version_0(tmp_path: Path) -> None:
    idx = TransactionIndex(0, tmp_path / "0.txnindex")
    idx.append(AbortedTxn(983493, 137, 299, 200))
    idx.append(AbortedTxn(-1, 2**62, 2**62 + 1, 2**63 - 1))
    idx.close()
    data = idx.path.read_bytes()
    assert len(data) == 68
    assert data[:34] == bytes.fromhex(
        "0000 00000000000f01c5 0000000000000089 000000000000012b 00000000000000c8".replace(" ", "")
    )
    assert data[34:] == TXN.pack(0, -1, 2**62, 2**62 + 1, 2**63 - 1)


def test_segment_roll_trims_indexes_and_log(tmp_path: Path) -> None:
    seg = LogSegment.open(
        tmp_path, 0, index_interval_bytes=1, max_index_size=4096, init_file_size=1 << 20, preallocate=True
    )
    for i in range(5):
        seg.append(i, TS + i, i, MemoryRecords.build([SimpleRecord(b"v", None, TS + i)], base_offset=i))
    assert files.log_file(tmp_path, 0).stat().st_size == 1 << 20
    assert files.offset_index_file(tmp_path, 0).stat().st_size == 4096
    assert files.time_index_file(tmp_path, 0).stat().st_size == 4092
    seg.on_become_inactive_segment()
    size = seg.size
    assert files.log_file(tmp_path, 0).stat().st_size == size
    first = next(seg.batches()).size_in_bytes
    assert files.offset_index_file(tmp_path, 0).read_bytes() == b"".join(
        OFFSET.pack(i, i * first) for i in range(1, 5)
    )
    assert files.time_index_file(tmp_path, 0).read_bytes() == b"".join(
        TIME.pack(TS + i, i) for i in range(1, 5)
    )
    seg.close()


# --- hand-built files are read as Kafka reads them -------------------------------------------------------------


def test_hand_built_offset_index(tmp_path: Path) -> None:
    path = tmp_path / "500.index"
    path.write_bytes(OFFSET.pack(0, 0) + OFFSET.pack(7, 1000) + OFFSET.pack(20, 4000))
    idx = OffsetIndex(path, 500, SEGMENT_INDEX_BYTES)
    try:
        assert (idx.entries, idx.max_entries, idx.is_full()) == (3, 3, True), "the length defines the entries"
        assert idx.lookup(499) == OffsetPosition(500, 0)
        assert idx.lookup(506) == OffsetPosition(500, 0)
        assert idx.lookup(507) == OffsetPosition(507, 1000)
        assert idx.lookup(519) == OffsetPosition(507, 1000)
        assert idx.lookup(10**9) == OffsetPosition(520, 4000)
        assert idx.last_offset == 520
        idx.sanity_check()
    finally:
        idx.close()
    assert path.stat().st_size == 24, "loading and closing changes nothing"


def test_hand_built_time_index(tmp_path: Path) -> None:
    path = tmp_path / "500.timeindex"
    path.write_bytes(TIME.pack(TS, 3) + TIME.pack(TS + 50, 3) + TIME.pack(TS + 90, 12))
    idx = TimeIndex(path, 500, SEGMENT_INDEX_BYTES)
    try:
        assert idx.entries == 3
        assert idx.lookup(TS - 1) == TimestampOffset(-1, 500)
        assert idx.lookup(TS + 49) == TimestampOffset(TS, 503)
        assert idx.lookup(TS + 50) == TimestampOffset(TS + 50, 503)
        assert idx.last_entry() == TimestampOffset(TS + 90, 512)
        idx.sanity_check()
    finally:
        idx.close()


def test_hand_built_txn_index(tmp_path: Path) -> None:
    path = tmp_path / "100.txnindex"
    entries = [(0, 7, 100, 105, 100), (0, 8, 103, 110, 111)]
    path.write_bytes(b"".join(TXN.pack(*e) for e in entries) + b"\x00" * 20)  # plus a partial entry
    idx = TransactionIndex(100, path)
    assert idx.all_aborted_txns() == [AbortedTxn(7, 100, 105, 100), AbortedTxn(8, 103, 110, 111)]
    assert idx.collect_aborted_txns(106, 200).aborted_transactions == [AbortedTxn(8, 103, 110, 111)]
    idx.sanity_check()
    idx.append(AbortedTxn(9, 111, 120, 121))  # overwrites the partial tail, stays aligned
    idx.close()
    assert path.stat().st_size == 3 * 34
    assert TransactionIndex(100, path).all_aborted_txns()[-1] == AbortedTxn(9, 111, 120, 121)


def test_reexpanding_a_trimmed_index_keeps_its_entries(tmp_path: Path) -> None:
    """What the loader does to a reopened active segment: resize to segment.index.bytes, then append."""
    path = tmp_path / "0.index"
    path.write_bytes(OFFSET.pack(1, 0) + OFFSET.pack(4, 300) + OFFSET.pack(9, 700))
    idx = OffsetIndex(path, 0, 1000)
    assert idx.is_full()
    assert idx.resize(1000) is True
    assert (idx.entries, idx.max_entries) == (3, 125)
    idx.append(12, 900)
    idx.flush()
    assert path.read_bytes()[:32] == OFFSET.pack(1, 0) + OFFSET.pack(4, 300) + OFFSET.pack(
        9, 700
    ) + OFFSET.pack(12, 900)
    assert path.stat().st_size == 1000
    idx.close()
    assert path.stat().st_size == 32


def test_magic_0_data_leaves_the_time_index_empty(tmp_path: Path) -> None:
    """Reference §2.4: without timestamps (magic 0) no time index entry is ever written."""
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=1200)
    for offset in range(5):
        seg.append(offset, -1, -1, v1_records(offset, "x", magic=0))
    assert seg.offset_index.entries == 4
    assert seg.time_index.entries == 0
    assert seg.find_offset_by_timestamp(0) is None
    seg.close()
    assert files.time_index_file(tmp_path, 0).stat().st_size == 0
    again = _open(tmp_path, 0)
    assert again.recover() == 0
    assert again.time_index.entries == 0 and again.offset_index.entries == 4
    again.close()


# --- corrupt files are detected -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(OFFSET.pack(1, 0) + OFFSET.pack(5, 100) + bytes(8 * 10), id="zero-padded-tail"),
        pytest.param(bytes(8 * 4), id="all-zero-preallocated"),
        pytest.param(OFFSET.pack(1, 0) + OFFSET.pack(5, 100) + b"\x00\x01\x02", id="not-a-multiple-of-8"),
        pytest.param(OFFSET.pack(5, 0) + OFFSET.pack(3, 100), id="offsets-out-of-order"),
        pytest.param(OFFSET.pack(5, 0) + OFFSET.pack(5, 100), id="offsets-repeated"),
        pytest.param(OFFSET.pack(3, 100) + OFFSET.pack(5, 50), id="positions-out-of-order"),
        pytest.param(OFFSET.pack(-1, 0) + OFFSET.pack(5, 50), id="negative-first-offset"),
        pytest.param(OFFSET.pack(1, 0) + OFFSET.pack(-5, 50), id="negative-later-offset"),
        pytest.param(OFFSET.pack(1, -8), id="negative-position"),
    ],
)
def test_corrupt_offset_index_is_detected(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(data)
    idx = OffsetIndex(path, 0, 1000)
    with pytest.raises(CorruptIndexError):
        idx.load()
    assert not idx.is_loaded
    with pytest.raises(CorruptIndexError):
        idx.lookup(3)
    assert path.read_bytes() == data, "a failed load leaves the file alone"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(TIME.pack(TS, 1) + TIME.pack(TS + 5, 2) + bytes(12 * 3), id="zero-padded-tail"),
        pytest.param(bytes(12 * 3), id="all-zero-preallocated"),
        pytest.param(TIME.pack(TS, 1) + b"\x00" * 5, id="not-a-multiple-of-12"),
        pytest.param(TIME.pack(TS + 5, 1) + TIME.pack(TS, 2), id="timestamps-out-of-order"),
        pytest.param(TIME.pack(TS, 1) + TIME.pack(TS, 2), id="timestamps-repeated"),
        pytest.param(TIME.pack(TS, 5) + TIME.pack(TS + 5, 2), id="offsets-out-of-order"),
        pytest.param(TIME.pack(TS, -1), id="negative-offset"),
    ],
)
def test_corrupt_time_index_is_detected(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "0.timeindex"
    path.write_bytes(data)
    idx = TimeIndex(path, 0, 1200)
    with pytest.raises(CorruptIndexError):
        idx.load()
    with pytest.raises(CorruptIndexError):
        idx.last_entry()
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    "version_bytes",
    [pytest.param(b"\x00\x01", id="int16-version-1"), pytest.param(b"\x01\x00", id="byte0-version-1")],
)
def test_txn_index_with_an_unknown_version_is_refused(tmp_path: Path, version_bytes: bytes) -> None:
    path = tmp_path / "0.txnindex"
    good = TXN.pack(0, 7, 0, 10, 11)
    bad = version_bytes + TXN.pack(0, 8, 11, 20, 21)[2:]
    path.write_bytes(good + bad)
    idx = TransactionIndex(0, path)
    with pytest.raises(KafkaError):
        idx.all_aborted_txns()
    with pytest.raises(KafkaError):
        idx.collect_aborted_txns(0, 100)


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(TXN.pack(1, 7, 100, 110, 111), id="version-1"),
        pytest.param(TXN.pack(0, 7, 0, 99, 11), id="before-base"),
    ],
)
def test_segment_sanity_check_reports_a_bad_txn_index_as_corrupt(tmp_path: Path, entry: bytes) -> None:
    seg = LogSegment.open(tmp_path, 100)
    seg.offset_index.flush()  # the loader requires the .index file
    files.transaction_index_file(tmp_path, 100).write_bytes(entry)
    with pytest.raises(CorruptIndexError):
        seg.sanity_check()
    seg.close()


# --- LogSegment rebuilds a failed index from the .log ---------------------------------------------------------


def _write_segment(directory: Path, base: int = 1000, batches: int = 12) -> dict[str, bytes]:
    """A closed segment with index entries on both indexes; returns the bytes of its files."""
    seg = LogSegment.open(directory, base, index_interval_bytes=1, max_index_size=1200)
    offset = base
    for i in range(batches):
        n = 1 + i % 3
        ts = [TS + (i * 7) % 10 + j for j in range(n)]  # out-of-order batch timestamps
        seg.append(
            offset + n - 1,
            max(ts),
            offset + n - 1,
            MemoryRecords.build(
                [SimpleRecord(b"v%d" % k, None, t) for k, t in enumerate(ts)], base_offset=offset
            ),
        )
        offset += n + (i % 2)  # and offset gaps
    seg.close()
    return {p.suffix: p.read_bytes() for p in directory.iterdir()}


def _open(directory: Path, base: int = 1000) -> LogSegment:
    return LogSegment.open(
        directory, base, index_interval_bytes=1, max_index_size=1200, file_already_exists=True
    )


def _truth(
    directory: Path, base: int = 1000
) -> tuple[dict[int, LogOffsetPosition | None], dict[int, TimestampAndOffset | None], int]:
    """Answers of the intact segment: translate_offset and find_offset_by_timestamp, and the max timestamp."""
    seg = _open(directory, base)
    try:
        last = seg.read_next_offset()
        translated = {o: seg.translate_offset(o) for o in range(base - 1, last + 2)}
        by_time = {t: seg.find_offset_by_timestamp(t) for t in range(TS - 1, TS + 14)}
        return translated, by_time, seg.max_timestamp_so_far
    finally:
        seg.close()


CORRUPTIONS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "index-zero-tail": (".index", lambda d: d + bytes(8 * 5)),
    "index-not-multiple": (".index", lambda d: d + b"\x01"),
    "index-out-of-order": (".index", lambda d: d[8:16] + d[:8] + d[16:]),
    "index-negative-offset": (".index", lambda d: OFFSET.pack(-3, 0) + d[8:]),
    "timeindex-zero-tail": (".timeindex", lambda d: d + bytes(12 * 5)),
    "timeindex-not-multiple": (".timeindex", lambda d: d[:-1]),
    "timeindex-out-of-order": (".timeindex", lambda d: d[12:24] + d[:12] + d[24:]),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_segment_rebuilds_a_corrupt_index_on_first_use(tmp_path: Path, kind: str) -> None:
    original = _write_segment(tmp_path)
    expected_translate, expected_by_time, max_timestamp = _truth(tmp_path)
    assert max_timestamp == TS + 10
    suffix, corrupt = CORRUPTIONS[kind]
    corrupted = corrupt(original[suffix])
    assert corrupted != original[suffix]
    files_by_suffix = {p.suffix: p for p in tmp_path.iterdir()}
    files_by_suffix[suffix].write_bytes(corrupted)

    seg = _open(tmp_path)
    assert {o: seg.translate_offset(o) for o in expected_translate} == expected_translate
    assert {t: seg.find_offset_by_timestamp(t) for t in expected_by_time} == expected_by_time
    assert seg.max_timestamp_so_far == max_timestamp
    seg.close()
    now = {p.suffix: p.read_bytes() for p in tmp_path.iterdir()}
    assert now[".log"] == original[".log"], "the .log is never changed by an index rebuild"
    assert now == original, "rebuilt and trimmed, the indexes are byte for byte the ones the appends wrote"


def test_segment_with_corrupt_index_keeps_appending(tmp_path: Path) -> None:
    """KAFKA-12734: an active segment reopened with a broken index must not fail its next appends."""
    original = _write_segment(tmp_path)
    files.offset_index_file(tmp_path, 1000).write_bytes(original[".index"] + bytes(16))
    seg = _open(tmp_path)
    end = seg.read_next_offset()
    seg.append(end + 1, TS + 20, end + 1, MemoryRecords.build([b"x", b"y"], base_offset=end, now_ms=TS + 20))
    seg.append(end + 2, TS + 21, end + 2, MemoryRecords.build([b"z"], base_offset=end + 2, now_ms=TS + 21))
    assert files.log_file(tmp_path, 1000).read_bytes()[: len(original[".log"])] == original[".log"]
    batches = list(seg.batches())
    for b in batches:
        for o in range(b.base_offset, b.last_offset + 1):
            assert seg.translate_offset(o) == LogOffsetPosition(b.last_offset, b.position, b.size_in_bytes)
    found = seg.find_offset_by_timestamp(TS + 21)
    assert found is not None and found.offset == end + 2
    seg.close()


def test_untrimmed_time_index_does_not_fake_the_largest_timestamp_kafka_10207(tmp_path: Path) -> None:
    """A crash leaves the active segment's indexes preallocated; its zero tail must not read as timestamp 0."""
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=1, max_index_size=1200)
    for i in range(6):
        seg.append(i, TS + i, i, MemoryRecords.build([SimpleRecord(b"v", None, TS + i)], base_offset=i))
    seg.close_handlers()  # a crash: nothing trimmed
    assert files.time_index_file(tmp_path, 0).stat().st_size == 1200
    again = _open(tmp_path, 0)
    assert again.largest_timestamp() == TS + 5
    assert again.time_index.entries == 5
    again.close()


# --- lazy loading ---------------------------------------------------------------------------------------------


def test_opening_a_segment_opens_no_index_file(tmp_path: Path, open_calls: OpenCounter) -> None:
    _write_segment(tmp_path)
    # A txn index that would fail if it were read: proves it is not read either.
    files.transaction_index_file(tmp_path, 1000).write_bytes(TXN.pack(1, 7, 1000, 1001, 1002))
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    open_calls.paths.clear()

    seg = _open(tmp_path)
    assert open_calls.names() == [], "opening a segment only stats the .log"
    # Private attributes: the public properties would load the indexes.
    assert not seg._offset_index.is_loaded and not seg._time_index.is_loaded
    # Metadata that needs no index: still nothing opened.
    assert seg.size > 0 and seg.base_offset == 1000 and seg.has_suffix("")
    repr(seg)
    assert len(open_calls.paths) == 0

    fetched = seg.read(1003, 100)
    assert fetched is not None
    assert sorted(open_calls.names()) == sorted(
        [
            files.log_file(tmp_path, 1000).name,
            files.offset_index_file(tmp_path, 1000).name,
            files.time_index_file(tmp_path, 1000).name,
        ]
    ), "the first read opens the .log and loads both indexes, once"
    seg.read(1005, 100)
    assert len(open_calls.paths) == 3
    seg.close()
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}


def test_closing_renaming_and_deleting_never_load_indexes(tmp_path: Path, open_calls: OpenCounter) -> None:
    original = _write_segment(tmp_path)
    open_calls.paths.clear()
    seg = _open(tmp_path)
    seg.change_file_suffixes("", ".deleted")
    seg.close()
    assert open_calls.names() == [], "closing a segment that was never read opens nothing"
    assert files.offset_index_file(tmp_path, 1000, ".deleted").read_bytes() == original[".index"]
    assert files.time_index_file(tmp_path, 1000, ".deleted").read_bytes() == original[".timeindex"]
    again = LogSegment.open(tmp_path, 1000, file_already_exists=True, file_suffix=".deleted")
    again.delete_if_exists()
    assert list(tmp_path.iterdir()) == []
    assert len(open_calls.paths) == 0


def test_segment_open_does_not_create_index_files(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 7)
    assert sorted(os.listdir(tmp_path)) == [files.log_file(tmp_path, 7).name]
    seg.close()
    assert sorted(os.listdir(tmp_path)) == [files.log_file(tmp_path, 7).name]
