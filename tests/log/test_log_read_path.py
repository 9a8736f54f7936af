"""``Log.read``'s in-memory path (``LocalLog.read(..., in_memory=True)``) against the file-slice path.

Every read through ``Log.read`` must equal ``LocalLog.read`` (file slices) read into memory: same metadata,
bytes and flags, for every offset of a log of several segments (batch boundaries, the middle of a batch, the
log end offset, the high watermark and last stable offset bounds), for small and large ``max_length`` and
both ``min_one_message`` values. Then the lifecycle cases: a segment deleted between the segment lookup and
the read gives :class:`OffsetOutOfRangeError` and leaves the directory online, while an I/O error on a live
segment still takes it offline; and ``LogSegments.floor_segment``'s lock-free snapshot follows every change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, OffsetOutOfRangeError
from kafkalog.log import FetchIsolation, Log, LogConfig
from kafkalog.log.segments import LogSegments
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage import FetchDataInfo, FileRecords, LogSegment
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import append_end_txn_marker, append_transactional, records


def _reference(
    log: Log, offset: int, max_length: int, isolation: FetchIsolation, min_one: bool
) -> FetchDataInfo:
    """What ``Log.read`` returned before the in-memory path: file slices, read afterwards."""
    if isolation is FetchIsolation.LOG_END:
        max_meta = log.log_end_offset_metadata
    elif isolation is FetchIsolation.HIGH_WATERMARK:
        max_meta = log._fetch_hw_metadata()
    else:
        max_meta = log._fetch_lso_metadata()
    info = log.local_log.read(
        offset, max_length, min_one, max_meta, isolation is FetchIsolation.TXN_COMMITTED
    )
    data = info.records.to_memory_records() if isinstance(info.records, FileRecords) else info.records
    return FetchDataInfo(
        info.fetch_offset_metadata, data, info.first_entry_incomplete, info.aborted_transactions
    )


def _assert_same(got: FetchDataInfo, want: FetchDataInfo) -> None:
    assert got.fetch_offset_metadata == want.fetch_offset_metadata
    assert isinstance(got.records, MemoryRecords)
    assert bytes(got.records.buffer) == bytes(want.records.buffer)
    assert got.first_entry_incomplete == want.first_entry_incomplete
    assert got.aborted_transactions == want.aborted_transactions


def _batch(n: int, value_size: int) -> MemoryRecords:
    return records([SimpleRecord(b"v" * value_size, b"k%d" % i, 1000 + i) for i in range(n)])


def test_log_read_equals_slices_read_into_memory(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(LogConfig(segment_bytes=3000, index_interval_bytes=200))
    aborted = append_transactional(log, 7, 0, mock_time)
    for i in range(40):
        log.append_as_leader(_batch(1 + i % 4, 40 + 37 * (i % 5)), 0)
        if i % 9 == 0:
            aborted(2)
    append_end_txn_marker(log, 7, 0, ControlRecordType.ABORT, mock_time.milliseconds())
    append_transactional(log, 8, 0, mock_time)(3)  # an open transaction: the LSO stays behind it
    for _ in range(5):
        log.append_as_leader(_batch(2, 300), 0)
    log.update_high_watermark(log.log_end_offset - 4)
    assert log.num_log_segments > 3
    assert log.last_stable_offset < log.high_watermark < log.log_end_offset
    batches = [b for s in log.segments for b in s.batches()]
    sizes = sorted({b.size_in_bytes for b in batches})
    for offset in range(log.log_start_offset, log.log_end_offset + 1):
        for isolation in FetchIsolation:
            for max_length in (0, 1, 60, sizes[len(sizes) // 2], 1 << 20):
                for min_one in (True, False):
                    want = _reference(log, offset, max_length, isolation, min_one)
                    _assert_same(log.read(offset, max_length, isolation, min_one), want)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)


def test_single_batch_reads_at_boundaries(make_log: LogFactory) -> None:
    """A 10-record batch of ~2 KiB read from its first offset, its middle, its last offset; at the log end;
    ``max_length`` below the batch size with and without ``min_one_message``."""
    log = make_log(LogConfig(index_interval_bytes=100))
    for _ in range(6):
        log.append_as_leader(_batch(10, 200), 0)
    log.update_high_watermark(log.log_end_offset)
    batches = list(log.active_segment.batches())
    third = batches[2]
    for offset in (third.base_offset, third.base_offset + 5, third.last_offset):
        info = log.read(offset, 1, FetchIsolation.HIGH_WATERMARK, True)
        assert bytes(info.records.buffer) == bytes(
            log.active_segment.log.read(third.position, third.size_in_bytes)
        )
        assert info.fetch_offset_metadata.message_offset == offset
        assert info.fetch_offset_metadata.relative_position_in_segment == third.position
        assert not info.first_entry_incomplete
        cut = log.read(offset, 100, FetchIsolation.HIGH_WATERMARK, False)
        assert cut.records.size_in_bytes == 100 and cut.first_entry_incomplete
        nothing = log.read(offset, 0, FetchIsolation.HIGH_WATERMARK, False)
        assert nothing.records.size_in_bytes == 0 and not nothing.first_entry_incomplete
    at_end = log.read(log.log_end_offset, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    assert at_end.records.size_in_bytes == 0
    assert at_end.fetch_offset_metadata == log.log_end_offset_metadata
    everything = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, False)
    assert everything.records.size_in_bytes == log.active_segment.size


def _three_segments(make_log: LogFactory) -> tuple[Log, LogSegment]:
    log = make_log(LogConfig(segment_bytes=1500, index_interval_bytes=1))
    while log.num_log_segments < 3:
        log.append_as_leader(_batch(3, 100), 0)
    return log, log.segments[0]


def test_segment_deleted_between_lookup_and_read_is_out_of_range(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, first = _three_segments(make_log)
    segments = log.local_log.segments
    real_floor = segments.floor_segment

    def floor_then_delete(offset: int) -> LogSegment | None:
        found = real_floor(offset)
        if found is first and segments.contains(first.base_offset):
            # retention (file.delete.delay.ms elapsed at once) runs between the reader's lookup and its read
            log.local_log.remove_and_delete_segments([first], False, "test")
        return found

    monkeypatch.setattr(segments, "floor_segment", floor_then_delete)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1, FetchIsolation.LOG_END, True)
    assert not log.local_log.offline
    assert log.read(log.segments[0].base_offset, 1, FetchIsolation.LOG_END, True).records.size_in_bytes > 0


def test_io_error_of_a_removed_segment_is_out_of_range_and_of_a_live_one_goes_offline(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, first = _three_segments(make_log)

    def vanished(position: int, size: int) -> bytes:
        raise FileNotFoundError(2, "No such file or directory", str(first.log.path))

    monkeypatch.setattr(first.log, "read_at", vanished)
    monkeypatch.setattr(first.log, "read", vanished)
    log.local_log.segments.remove(first.base_offset)  # renamed and unlinked by retention, still open here
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 1, FetchIsolation.LOG_END, True)
    assert not log.local_log.offline

    live = log.segments[0]
    monkeypatch.setattr(live.log, "read_at", vanished)
    monkeypatch.setattr(live.log, "read", vanished)
    with pytest.raises(KafkaStorageError):
        log.read(live.base_offset, 1, FetchIsolation.LOG_END, True)
    assert log.local_log.offline


def test_floor_segment_snapshot_follows_changes(tmp_path: Path) -> None:
    segments = LogSegments()
    assert segments.floor_segment(5) is None
    made = [LogSegment.open(tmp_path, base) for base in (0, 10, 20)]
    try:
        for seg in made:
            segments.add(seg)
            assert segments.floor_segment(seg.base_offset + 3) is seg
        assert segments.floor_segment(15) is made[1]
        segments.remove(10)
        assert segments.floor_segment(15) is made[0]
        replacement = LogSegment.open(tmp_path, 5)
        made.append(replacement)
        segments.add(replacement)
        assert segments.floor_segment(15) is replacement
        assert segments.floor_segment(4) is made[0]
        segments.clear()
        assert segments.floor_segment(25) is None
    finally:
        for seg in made:
            seg.close()
