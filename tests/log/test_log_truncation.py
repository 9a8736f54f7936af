"""Truncation: ``truncate_to`` inside segments and below the first one (-> ``truncate_fully_and_start_at``),
to the LEO (no-op), batches straddling the target dropped whole, and what truncation does to the high
watermark, the log start offset, the leader-epoch cache, producer state and the indexes.

Ported from Kafka (same numbers):

* UnifiedLogTest: testTruncateTo, testIndexResizingAtTruncation, testTruncateFullyAndStart,
  testTruncateBelowFirstUnstableOffset, testTruncateFullyAndStartBelowFirstUnstableOffset,
  testTruncateToEndOffsetClearsEpochCache, shouldTruncateLeaderEpochCheckpointFileWhenTruncatingLog,
  testProducerIdMapTruncateTo, testProducerIdMapTruncateToWithNoSnapshots,
  testProducerIdMapTruncateFullyAndStartAt, testLogReinitializeAfterManualDelete.
* LocalLogTest: testTruncateTo, testTruncateFullyAndStartAt.

Skipped: testRebuildProducerIdMapWithCompactedData / testRebuildProducerStateWithEmptyCompactedBatch (need
``MemoryRecords.filterTo``, the cleaner's filter, not part of this layer yet); testStartOffsetsRemoteLogStorageIsEnabled
(tiered storage).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import LogConfig
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    check_log_invariants,
    fetched_offsets,
    fetched_records,
    read_log,
    records,
    segment_bases,
    singleton_records,
)


def test_truncate_to(make_log: LogFactory, mock_time: MockTime) -> None:
    """testTruncateTo."""
    set_size = singleton_records(b"test", timestamp=mock_time.milliseconds()).size_in_bytes
    msg_per_seg = 10
    log = make_log(LogConfig(segment_bytes=msg_per_seg * set_size))

    def fill() -> None:
        for _ in range(msg_per_seg):
            log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)

    fill()
    assert log.num_log_segments == 1
    assert log.log_end_offset == msg_per_seg
    last_offset, size = log.log_end_offset, log.size
    assert not log.truncate_to(log.log_end_offset)  # keep the entire log
    assert (log.log_end_offset, log.size) == (last_offset, size)
    assert not log.truncate_to(log.log_end_offset + 1)  # beyond the end: no-op
    assert (log.log_end_offset, log.size) == (last_offset, size)
    assert log.truncate_to(msg_per_seg // 2)
    assert log.log_end_offset == msg_per_seg // 2 and log.size < size
    log.truncate_to(0)
    assert (log.log_end_offset, log.size) == (0, 0)

    fill()
    assert (log.log_end_offset, log.size) == (last_offset, size)
    log.truncate_fully_and_start_at(log.log_end_offset - (msg_per_seg - 1))
    assert (log.log_end_offset, log.size) == (last_offset - (msg_per_seg - 1), 0)

    fill()
    assert log.log_end_offset > msg_per_seg
    assert log.size == size
    log.truncate_to(0)  # below the first segment's base: truncate fully
    assert (log.log_end_offset, log.size) == (0, 0)
    assert log.log_start_offset == 0
    check_log_invariants(log)


def test_truncate_to_negative_offset_is_rejected(make_log: LogFactory) -> None:
    log = make_log()
    with pytest.raises(ValueError):
        log.truncate_to(-1)


def test_index_resizing_at_truncation(make_log: LogFactory, mock_time: MockTime) -> None:
    """testIndexResizingAtTruncation: truncating gives the last segment its full index size back."""
    set_size = singleton_records(b"test", timestamp=mock_time.milliseconds()).size_in_bytes
    msg_per_seg = 10
    log = make_log(LogConfig(segment_bytes=msg_per_seg * set_size, index_interval_bytes=set_size - 1))

    def fill() -> None:
        for i in range(1, msg_per_seg + 1):
            log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds() + i), 0)

    fill()
    assert log.num_log_segments == 1
    mock_time.sleep(msg_per_seg)
    fill()
    assert log.num_log_segments == 2
    expected_entries = msg_per_seg - 1
    first = log.segments[0]
    assert first.offset_index.max_entries == expected_entries
    assert first.time_index.max_entries == expected_entries
    log.truncate_to(0)
    assert log.num_log_segments == 1
    first = log.segments[0]
    assert first.offset_index.max_entries == log.config.segment_index_bytes // 8
    assert first.time_index.max_entries == log.config.segment_index_bytes // 12
    mock_time.sleep(msg_per_seg)
    fill()
    assert log.num_log_segments == 1


def test_truncate_straddling_batch_is_dropped_whole(make_log: LogFactory) -> None:
    """Gotcha 11: a batch straddling the target goes entirely; the LEO becomes the target (as in Kafka)."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"%d" % i) for i in range(3)]), 0)  # 0..2
    log.append_as_leader(records([SimpleRecord(b"%d" % i) for i in range(5)]), 0)  # 3..7
    size_first = next(iter(log.active_segment.batches())).size_in_bytes
    assert log.truncate_to(5)
    assert log.log_end_offset == 5
    assert log.active_segment.size == size_first
    assert fetched_offsets(read_log(log, 0, 10_000)) == [0, 1, 2]
    info = log.append_as_leader(singleton_records(b"next"), 0)
    assert info.first_offset == 5
    assert fetched_offsets(read_log(log, 0, 10_000)) == [0, 1, 2, 5]


def test_truncate_inside_earlier_segment_drops_later_segments(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """LocalLogTest.testTruncateTo: 12 records rolled every 3; truncating to 7 keeps [0, 3, 6]."""
    log = make_log()
    for offset in range(12):
        log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
        if offset % 3 == 2:
            log.local_log.roll(0)
    assert log.num_log_segments == 5 and log.log_end_offset == 12
    expected = log.local_log.segments.values(9, log.log_end_offset + 1)
    deleted = log.local_log.truncate_to(7)
    assert deleted == expected
    assert segment_bases(log) == [0, 3, 6]
    assert log.recovery_point == 0
    assert log.log_end_offset == 7
    info = log.local_log.read(6, log.active_segment.size, False, log.log_end_offset_metadata, False)
    assert [(r.key, r.value) for r in fetched_records(info)] == [(None, b"a")]
    log.append_as_follower(records([SimpleRecord(b"a", None, mock_time.milliseconds())], base_offset=7))
    assert log.log_end_offset == 8


def test_local_log_truncate_fully_and_start_at(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testTruncateFullyAndStartAt."""
    log = make_log()
    for offset in range(13):
        log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
        if offset < 8 and offset % 2 != 0:
            log.local_log.roll(0)
    assert log.num_log_segments == 5
    assert log.active_segment.base_offset != 10
    expected = log.segments
    deleted = log.local_log.truncate_fully_and_start_at(10)
    assert deleted == expected
    assert segment_bases(log) == [10]
    assert log.recovery_point == 0
    assert log.log_end_offset == 10
    info = log.local_log.read(10, log.active_segment.size, False, log.log_end_offset_metadata, False)
    assert fetched_offsets(info) == []


def _txn_log_reopened(make_log: LogFactory, log_dir: Path):  # type: ignore[no-untyped-def]
    config = LogConfig(segment_bytes=1024 * 1024)
    log = make_log(config)
    log.append_as_leader(records([SimpleRecord(b"0"), SimpleRecord(b"1"), SimpleRecord(b"2")]), 0)
    log.append_as_leader(
        records(
            [SimpleRecord(b"3"), SimpleRecord(b"4")],
            producer_id=17,
            producer_epoch=10,
            sequence=0,
            transactional=True,
        ),
        0,
    )
    assert log.first_unstable_offset == 3
    log.close()  # reopen: the first unstable offset's segment position is unknown
    reopened = make_log(config, recovery_point=log.log_end_offset)
    fuo = reopened.producer_state.first_unstable_offset()
    assert fuo is not None and fuo.message_offset == 3
    return reopened


def test_truncate_below_first_unstable_offset(make_log: LogFactory, log_dir: Path) -> None:
    """testTruncateBelowFirstUnstableOffset."""
    log = _txn_log_reopened(make_log, log_dir)
    log.truncate_to(0)
    assert log.first_unstable_offset is None
    assert log.producer_state.active_producers() == {}


def test_truncate_fully_and_start_below_first_unstable_offset(make_log: LogFactory, log_dir: Path) -> None:
    """testTruncateFullyAndStartBelowFirstUnstableOffset."""
    log = _txn_log_reopened(make_log, log_dir)
    log.truncate_fully_and_start_at(0)
    assert log.first_unstable_offset is None
    assert log.producer_state.active_producers() == {}


def test_truncate_fully_and_start(make_log: LogFactory, log_dir: Path) -> None:
    """testTruncateFullyAndStart: an explicit log start offset below the new start."""
    log = _txn_log_reopened(make_log, log_dir)
    log.truncate_fully_and_start_at(2, 1)
    assert log.first_unstable_offset is None
    assert log.producer_state.active_producers() == {}
    assert (log.log_start_offset, log.log_end_offset) == (1, 2)


def test_truncate_to_end_offset_clears_epoch_cache(make_log: LogFactory) -> None:
    """testTruncateToEndOffsetClearsEpochCache: truncating at/after the LEO drops an epoch starting at it."""
    log = make_log()
    log.append_as_follower(
        records([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=27, partition_leader_epoch=19)
    )
    assert tuple(log.leader_epoch_cache.latest_entry or ()) == (19, 27)
    assert log.log_end_offset == 29
    for epoch, truncation in ((20, log.log_end_offset), (24, log.log_end_offset + 1)):
        log.maybe_assign_epoch_start_offset(epoch, log.log_end_offset)
        assert tuple(log.leader_epoch_cache.latest_entry or ()) == (epoch, 29)
        log.truncate_to(truncation)
        assert tuple(log.leader_epoch_cache.latest_entry or ()) == (19, 27)
        assert log.log_end_offset == 29


def test_truncate_leader_epoch_checkpoint_when_truncating_log(make_log: LogFactory) -> None:
    """shouldTruncateLeaderEpochCheckpointFileWhenTruncatingLog."""

    def batch(offset: int, epoch: int) -> MemoryRecords:
        return records([SimpleRecord(b"value")], base_offset=offset, partition_leader_epoch=epoch)

    log = make_log(LogConfig(segment_bytes=10 * batch(0, 0).size_in_bytes))
    cache = log.leader_epoch_cache

    def append(epoch: int, start: int, count: int) -> None:
        for i in range(count):
            log.append_as_follower(batch(start + i, epoch))

    append(0, 0, 10)
    append(1, 10, 6)
    append(2, 16, 4)
    assert log.num_log_segments == 2 and log.log_end_offset == 20
    log.truncate_to(log.log_end_offset)
    assert len(cache.epoch_entries) == 3
    log.truncate_to(11)
    assert len(cache.epoch_entries) == 2
    log.truncate_to(10)
    assert len(cache.epoch_entries) == 1
    log.truncate_to(0)
    assert len(cache.epoch_entries) == 0


def test_producer_id_map_truncate_to(make_log: LogFactory) -> None:
    """testProducerIdMapTruncateTo: truncation reloads the newest snapshot at or below the target."""
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    log.append_as_leader(records([SimpleRecord(b"a")]), 0)
    log.append_as_leader(records([SimpleRecord(b"b")]), 0)
    log.producer_state.take_snapshot()
    log.append_as_leader(records([SimpleRecord(b"c")]), 0)
    log.producer_state.take_snapshot()
    for target, snapshot in ((2, 2), (1, 1), (0, None)):
        log.truncate_to(target)
        assert log.producer_state.latest_snapshot_offset() == snapshot
        assert log.producer_state.map_end_offset == target


def test_producer_id_map_truncate_to_with_no_snapshots(make_log: LogFactory, log_dir: Path) -> None:
    """testProducerIdMapTruncateToWithNoSnapshots: producer state is rebuilt from the log."""
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    log.append_as_leader(records([SimpleRecord(b"a")], producer_id=1, producer_epoch=0, sequence=0), 0)
    log.append_as_leader(records([SimpleRecord(b"b")], producer_id=1, producer_epoch=0, sequence=1), 0)
    for snapshot in log_dir.glob("*.snapshot"):
        snapshot.unlink()
    log.truncate_to(1)
    active = log.producer_state.active_producers()
    assert len(active) == 1
    assert active[1].last_seq == 0


def test_producer_id_map_truncate_fully_and_start_at(make_log: LogFactory) -> None:
    """testProducerIdMapTruncateFullyAndStartAt."""
    first = singleton_records(b"foo")
    log = make_log(LogConfig(segment_bytes=first.size_in_bytes, retention_bytes=first.size_in_bytes * 2))
    log.append_as_leader(first, 0)
    log.producer_state.take_snapshot()
    log.append_as_leader(singleton_records(b"bar"), 0)
    log.append_as_leader(singleton_records(b"baz"), 0)
    log.producer_state.take_snapshot()
    assert log.num_log_segments == 3
    assert log.producer_state.map_end_offset == 3
    assert log.producer_state.latest_snapshot_offset() == 3
    log.truncate_fully_and_start_at(29)
    assert log.num_log_segments == 1
    assert log.producer_state.latest_snapshot_offset() is None
    assert log.producer_state.map_end_offset == 29


def test_truncation_moves_log_start_offset_down(make_log: LogFactory) -> None:
    """``truncate_to`` sets the log start offset to ``min(target, log start offset)``."""
    log = make_log(LogConfig(segment_bytes=200))
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    log.update_high_watermark(10)
    log.maybe_increment_log_start_offset(6)
    log.truncate_to(4)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (4, 4, 4)
    check_log_invariants(log)


def test_log_reinitialize_after_manual_delete(make_log: LogFactory) -> None:
    """testLogReinitializeAfterManualDelete: no data but a non-zero start offset."""
    log = make_log(LogConfig(), log_start_offset=500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)


def test_truncate_then_reopen(make_log: LogFactory, mock_time: MockTime) -> None:
    """A truncated log reopens with the same offsets and contents."""
    config = LogConfig(segment_bytes=300, index_interval_bytes=1)
    log = make_log(config)
    for i in range(20):
        log.append_as_leader(singleton_records(b"v%d" % i, timestamp=mock_time.milliseconds() + i), 0)
    log.truncate_to(9)
    log.flush()
    bases = segment_bases(log)
    log.close()
    again = make_log(config, recovery_point=9)
    assert segment_bases(again) == bases and again.log_end_offset == 9
    assert [r.offset for s in again.segments for b in s.batches() for r in b.records()] == list(range(9))
    check_log_invariants(again)
