"""Segment rolling: by size, by time (record timestamps, wall clock without them, jitter), by full indexes,
by relative-offset overflow, and explicit rolls.

Ported from Kafka (``UnifiedLogTest``, ``LocalLogTest``, ``LogLoaderTest``), same numbers:

* UnifiedLogTest: testTimeBasedLogRollDuringAppend, testTimeBasedLogRollJitter, testSizeBasedLogRoll,
  testRollSegmentThatAlreadyExists (KAFKA-6388, index resized to 0), testLogRolls, testAppendInfoFirstOffset,
  testLogRollAfterLogHandlerClosed, testFlushingEmptyActiveSegments, testLogSegmentsCallCorrect,
  testHighWatermarkMetadataUpdatedAfterSegmentRoll, testProducerSnapshotAfterSegmentRollOnAppend (roll part),
  testTakeSnapshotOnRollAndDeleteSnapshotOnRecoveryPointCheckpoint.
* LocalLogTest: testRollEmptyActiveSegment, testRollSegmentThatAlreadyExists, testNewSegmentsAfterRoll,
  testRollSegmentErrorWhenNextOffsetIsIllegal, testNonActiveSegmentsFrom.
* LogLoaderTest: testOverCompactedLogRecovery, testOverCompactedLogRecoveryMultiRecord,
  testOverCompactedLogRecoveryMultiRecordV1 (the roll-on-offset-overflow half; KAFKA-4451 heuristic).

Not from Kafka: rolls because the time index or the offset index is full (``segment.index.bytes`` small),
and ``segment.ms`` capped by ``max.compaction.lag.ms`` on compacted topics.

Skipped: testRecoveryPointNotIncrementedOnProducerStateSnapshotFlushFailure (needs a Mockito spy on the
snapshot flush); roll tests that involve remote storage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaError, KafkaStorageError
from kafkalog.log import FetchIsolation, Log, LogConfig
from kafkalog.records import Compression, MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    INT32_MAX,
    NO_TIMESTAMP,
    check_log_invariants,
    fetched_offsets,
    files_with_suffix,
    legacy_records,
    read_log,
    records,
    segment_bases,
    singleton_records,
    snapshot_offsets,
)


# --- time ----------------------------------------------------------------------------------------------------
def test_time_based_log_roll_during_append(make_log: LogFactory, mock_time: MockTime) -> None:
    """testTimeBasedLogRollDuringAppend: wall clock without timestamps, record time with them."""
    log = make_log(LogConfig(segment_ms=1 * 60 * 60))
    segment_ms = log.config.segment_ms
    assert log.num_log_segments == 1, "Log begins with a single empty segment."
    # Without timestamps the wall clock decides.
    mock_time.sleep(segment_ms + 1)
    log.append_as_leader(singleton_records(b"test"), 0)
    assert log.num_log_segments == 1, "Log doesn't roll if doing so creates an empty segment."
    log.append_as_leader(singleton_records(b"test"), 0)
    assert log.num_log_segments == 2, "Log rolls on this append since time has expired."
    for num_segments in range(3, 5):
        mock_time.sleep(segment_ms + 1)
        log.append_as_leader(singleton_records(b"test"), 0)
        assert log.num_log_segments == num_segments

    # A record with a timestamp appended to a segment whose first batch has none: still wall clock.
    timestamp = mock_time.milliseconds() + segment_ms + 1
    log.append_as_leader(singleton_records(b"test", timestamp=timestamp), 0)
    assert log.num_log_segments == 4, "the roll is based on the wall clock"

    mock_time.sleep(segment_ms + 1)
    log.append_as_leader(singleton_records(b"test", timestamp=timestamp), 0)
    assert log.num_log_segments == 5, "A new segment should have been rolled out"

    # Now the first batch of the active segment has a timestamp: the wall clock no longer matters.
    mock_time.sleep(segment_ms + 1)
    log.append_as_leader(singleton_records(b"test", timestamp=timestamp), 0)
    assert log.num_log_segments == 5, "the roll depends on the timestamp of the first message"

    log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.num_log_segments == 6, "the timestamp in the message makes the segment expire"

    num_segments = log.num_log_segments
    mock_time.sleep(segment_ms + 1)
    log.append_as_leader(MemoryRecords.EMPTY, 0)
    assert log.num_log_segments == num_segments, "an empty append never rolls"


def test_time_based_log_roll_jitter(make_log: LogFactory, mock_time: MockTime) -> None:
    """testTimeBasedLogRollJitter."""
    max_jitter = 20 * 60
    log = make_log(LogConfig(segment_ms=1 * 60 * 60, segment_jitter_ms=max_jitter))
    assert log.num_log_segments == 1
    log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    mock_time.sleep(log.config.segment_ms - max_jitter)
    log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.num_log_segments == 1, "no roll earlier than the maximum jitter"
    assert 0 <= log.active_segment.roll_jitter_ms < max_jitter
    mock_time.sleep(max_jitter - log.active_segment.roll_jitter_ms + 1)
    log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.num_log_segments == 2, "roll after segment.ms adjusted by the random jitter"


def test_compacted_topic_rolls_by_max_compaction_lag(make_log: LogFactory, mock_time: MockTime) -> None:
    """``segment.ms`` is capped by ``max.compaction.lag.ms`` on compacted topics (UnifiedLog.maxSegmentMs)."""
    log = make_log(LogConfig(cleanup_policy="compact", segment_ms=10_000, max_compaction_lag_ms=1000))
    now = mock_time.milliseconds()
    log.append_as_leader(singleton_records(b"v", b"k", timestamp=now), 0)
    log.append_as_leader(singleton_records(b"v", b"k", timestamp=now + 1000), 0)
    assert log.num_log_segments == 1
    log.append_as_leader(singleton_records(b"v", b"k", timestamp=now + 1001), 0)
    assert segment_bases(log) == [0, 2]


def test_out_of_order_timestamps_do_not_roll_backwards(make_log: LogFactory, mock_time: MockTime) -> None:
    """An append whose timestamps are older than the segment's first batch never rolls by time."""
    log = make_log(LogConfig(segment_ms=1000))
    now = mock_time.milliseconds()
    log.append_as_leader(singleton_records(b"a", timestamp=now), 0)
    log.append_as_leader(singleton_records(b"b", timestamp=now - 5000), 0)
    mock_time.sleep(10_000)
    log.append_as_leader(singleton_records(b"c", timestamp=now + 1000), 0)
    assert log.num_log_segments == 1
    log.append_as_leader(singleton_records(b"d", timestamp=now + 1001), 0)
    assert segment_bases(log) == [0, 3]


# --- size ----------------------------------------------------------------------------------------------------
def test_size_based_log_roll(make_log: LogFactory, mock_time: MockTime) -> None:
    """testSizeBasedLogRoll: segment.bytes = 10 * (72 - 1) holds 9 batches of 72 bytes."""
    set_size = singleton_records(b"test", timestamp=mock_time.milliseconds()).size_in_bytes
    assert set_size == 72
    msg_per_seg = 10
    log = make_log(LogConfig(segment_bytes=msg_per_seg * (set_size - 1)))
    assert log.num_log_segments == 1
    for _ in range(msg_per_seg + 1):
        log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.num_log_segments == 2
    assert segment_bases(log) == [0, 9]


def test_log_rolls(make_log: LogFactory, mock_time: MockTime) -> None:
    """testLogRolls: 100 messages in 100-byte segments read back one by one; rolling flushed the log."""
    log = make_log(LogConfig(segment_bytes=100))
    sets = [singleton_records(str(i).encode(), timestamp=mock_time.milliseconds()) for i in range(100)]
    for batch in sets:
        log.append_as_leader(batch, 0)
    log.flush()
    offset = 0
    for i in range(100):
        info = read_log(log, offset, 1024 * 1024)
        head = next(iter(info.records.batches()))
        assert head.last_offset == offset
        expected = next(iter(sets[i].records()))
        actual = next(iter(head.records()))
        assert (actual.key, actual.value, actual.timestamp) == (
            expected.key,
            expected.value,
            expected.timestamp,
        )
        offset = head.last_offset + 1
    assert fetched_offsets(read_log(log, 100, 1024 * 1024)) == []
    assert log.num_log_segments == 100
    # The roll schedules "flush-log"; Kafka's MockScheduler (like ours) runs a due task when scheduled.
    assert log.recovery_point >= log.active_segment.base_offset


def test_append_info_first_offset(make_log: LogFactory, mock_time: MockTime) -> None:
    """testAppendInfoFirstOffset."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    simple = [SimpleRecord(b"value", k, mock_time.milliseconds()) for k in (b"a", b"b", b"c")]
    assert log.append_as_leader(records(simple), 0).first_offset == 0
    assert log.append_as_leader(records(simple), 0).first_offset == 3
    log.roll()
    assert log.append_as_leader(records(simple), 0).first_offset == 6


# --- explicit roll -------------------------------------------------------------------------------------------
def test_roll_segment_that_already_exists(make_log: LogFactory, mock_time: MockTime) -> None:
    """testRollSegmentThatAlreadyExists (KAFKA-6388): rolling an empty active segment at its own base."""
    log = make_log(LogConfig(segment_ms=1 * 60 * 60))
    assert log.num_log_segments == 1
    log.roll(0)
    assert log.num_log_segments == 1, "rolling an empty segment onto its base offset recreates it"

    now = mock_time.milliseconds()
    log.append_as_follower(
        records([SimpleRecord(b"v1", b"k1", now)], base_offset=0, partition_leader_epoch=0)
    )
    assert log.num_log_segments == 1 and log.active_segment.base_offset == 0
    log.append_as_follower(
        records([SimpleRecord(b"v2", b"k2", now + 10)], base_offset=1, partition_leader_epoch=0)
    )
    assert log.log_end_offset == 2
    assert next(iter(read_log(log, 0, 1).records.batches())).last_offset == 0
    assert next(iter(read_log(log, 1, 1).records.batches())).last_offset == 1

    log.roll()
    assert log.active_segment.base_offset == 2, "base offset of the new active segment is the LEO"
    assert log.num_log_segments == 2

    # An offset index resized to nothing looks full: the next append rolls the empty segment onto itself.
    log.active_segment.offset_index.resize(0)
    log.append_as_follower(
        records([SimpleRecord(b"v3", b"k3", now + 12)], base_offset=2, partition_leader_epoch=0)
    )
    assert log.active_segment.offset_index.max_entries > 1
    assert next(iter(read_log(log, 2, 1).records.batches())).last_offset == 2
    assert log.num_log_segments == 2


def test_local_log_roll_empty_active_segment(make_log: LogFactory, log_dir: Path) -> None:
    """LocalLogTest.testRollEmptyActiveSegment: the old empty segment is replaced and renamed ``.deleted``."""
    log = make_log(LogConfig(file_delete_delay_ms=60_000))
    old = log.active_segment
    log.local_log.roll(0)
    assert log.num_log_segments == 1
    assert log.active_segment is not old
    assert old.has_suffix(".deleted")
    assert any(log_dir.iterdir())


def test_local_log_new_segments_after_roll(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testNewSegmentsAfterRoll: the new base is ``max(expected, LEO)``."""
    log = make_log()
    local = log.local_log
    seg = local.roll(0)
    assert (seg.base_offset, log.num_log_segments, log.log_end_offset) == (0, 1, 0)
    log.append_as_leader(records([SimpleRecord(b"v1", b"k1", mock_time.milliseconds())]), 0)
    seg = local.roll(0)
    assert (seg.base_offset, log.num_log_segments, log.log_end_offset) == (1, 2, 1)
    log.append_as_leader(records([SimpleRecord(b"v2", b"k2", mock_time.milliseconds())]), 0)
    seg = local.roll(1)
    assert (seg.base_offset, log.num_log_segments, log.log_end_offset) == (2, 3, 2)


def test_local_log_roll_error_when_next_offset_is_illegal(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testRollSegmentErrorWhenNextOffsetIsIllegal."""
    log = make_log()
    kvs = [
        SimpleRecord(v, k, mock_time.milliseconds())
        for k, v in ((b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3"))
    ]
    log.append_as_leader(records(kvs), 0)
    assert log.log_end_offset == 3
    log.local_log.roll(0)
    assert log.active_segment.base_offset == 3
    log.local_log.update_log_end_offset(1)  # deliberately inconsistent
    with pytest.raises(KafkaError):
        log.local_log.roll(0)


def test_log_roll_after_log_handler_closed(make_log: LogFactory) -> None:
    """testLogRollAfterLogHandlerClosed."""
    log = make_log()
    log.close_handlers()
    with pytest.raises(KafkaStorageError):
        log.roll(1)


def test_flushing_empty_active_segments(make_log: LogFactory, log_dir: Path, mock_time: MockTime) -> None:
    """testFlushingEmptyActiveSegments: flush(include_offset) materialises the empty segment's index files."""
    log = make_log()
    log.append_as_leader(singleton_records(b"Test", timestamp=mock_time.milliseconds()), 0)
    log.roll()
    assert len(files_with_suffix(log_dir, ".log")) == 2
    assert len(files_with_suffix(log_dir, ".index")) == 1
    assert log.active_segment.size == 0
    log.flush(include_offset=True)
    assert len(files_with_suffix(log_dir, ".log")) == 2
    assert len(files_with_suffix(log_dir, ".index")) == 2


def test_high_watermark_metadata_updated_after_segment_roll(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """testHighWatermarkMetadataUpdatedAfterSegmentRoll."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    batch = records([SimpleRecord(b"value", k, mock_time.milliseconds()) for k in (b"a", b"b", b"c")])

    def assert_fetch(fetch_offset: int, size: int, offsets: list[int]) -> None:
        info = log.read(fetch_offset, 2048, FetchIsolation.HIGH_WATERMARK, False)
        assert info.records.size_in_bytes == size
        assert fetched_offsets(info) == offsets

    log.append_as_leader(batch, 0)
    assert_fetch(0, 0, [])
    log.maybe_increment_high_watermark(log.log_end_offset_metadata)
    assert_fetch(0, batch.size_in_bytes, [0, 1, 2])
    log.roll()
    assert_fetch(0, batch.size_in_bytes, [0, 1, 2])
    log.append_as_leader(batch, 0)
    assert_fetch(3, 0, [])


def test_log_segments_call_correct(make_log: LogFactory, mock_time: MockTime) -> None:
    """testLogSegmentsCallCorrect: ``segments.values(from, to)`` covers ``[from, to)``."""
    set_size = singleton_records(b"test", timestamp=mock_time.milliseconds()).size_in_bytes
    log = make_log(LogConfig(segment_bytes=10 * set_size))
    for _ in range(2 * 10 + 2):
        log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.num_log_segments == 3

    def bases(start: int, end: int) -> list[int]:
        return [s.base_offset for s in log.local_log.segments.values(start, end)]

    assert bases(10, 10) == [] and bases(15, 15) == []
    assert bases(0, 21) == [0, 10, 20]
    assert bases(1, 5) == [0]
    assert bases(13, 21) == [10, 20]
    assert bases(13, 17) == [10]
    with pytest.raises(ValueError):
        log.local_log.segments.values(10, 0)


def test_non_active_segments_from(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testNonActiveSegmentsFrom."""
    log = make_log()
    for i in range(5):
        log.append_as_leader(
            records([SimpleRecord(str(i).encode(), str(i).encode(), mock_time.milliseconds())]), 0
        )
        log.roll()
    assert log.active_segment.base_offset == 5

    def bases(start: int) -> list[int]:
        return [s.base_offset for s in log.local_log.segments.non_active_log_segments_from(start)]

    assert bases(0) == [0, 1, 2, 3, 4]
    assert bases(5) == []
    assert bases(2) == [2, 3, 4]
    assert bases(6) == []


def test_snapshots_on_roll(make_log: LogFactory, log_dir: Path) -> None:
    """testTakeSnapshotOnRollAndDeleteSnapshotOnRecoveryPointCheckpoint: a producer snapshot per roll."""
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    log.append_as_leader(singleton_records(b"a"), 0)
    log.roll(1)
    assert snapshot_offsets(log_dir) == [1]
    log.append_as_leader(singleton_records(b"b"), 0)
    log.roll(2)
    assert snapshot_offsets(log_dir) == [1, 2]
    log.append_as_leader(singleton_records(b"c"), 0)
    log.roll(3)
    assert snapshot_offsets(log_dir) == [1, 2, 3]
    log.append_as_leader(singleton_records(b"baz"), 0)
    log.flush_up_to_offset_exclusive(4)
    assert log.producer_state.latest_snapshot_offset() == 3
    assert log.producer_state.oldest_snapshot_offset() == 1


def test_producer_snapshot_after_segment_roll_on_append(make_log: LogFactory, mock_time: MockTime) -> None:
    """testProducerSnapshotAfterSegmentRollOnAppend."""
    log = make_log(LogConfig(segment_bytes=1024))

    def batch(seq: int) -> MemoryRecords:
        return records(
            [SimpleRecord(bytes(512), None, mock_time.milliseconds())],
            producer_id=1,
            producer_epoch=0,
            sequence=seq,
        )

    log.append_as_leader(batch(0), 0)
    log.append_as_leader(batch(1), 0)  # overflows the segment: rolls
    assert log.num_log_segments == 2 and log.active_segment.base_offset == 1
    assert log.producer_state.latest_snapshot_offset() == 1
    log.truncate_to(1)  # reload producer state from the snapshot
    assert log.num_log_segments == 2 and log.active_segment.base_offset == 1
    assert not list(log.active_segment.batches())
    assert log.producer_state.latest_snapshot_offset() == 1
    entry = log.producer_state.last_entry(1)
    assert entry is not None and (entry.first_data_offset, entry.last_data_offset) == (0, 0)


# --- full indexes --------------------------------------------------------------------------------------------
def test_roll_when_time_index_is_full(make_log: LogFactory, mock_time: MockTime) -> None:
    """``segment.index.bytes`` = 24: 3 offset entries, 2 time entries (the last is reserved) -> full at 1."""
    log = make_log(LogConfig(segment_index_bytes=24, index_interval_bytes=1))
    now = mock_time.milliseconds()
    for i in range(3):
        log.append_as_leader(singleton_records(b"x", timestamp=now + i), 0)
    # 1st append: no index entry; 2nd: entries (1 offset, 1 time) -> time index full; 3rd append rolls.
    assert segment_bases(log) == [0, 2]
    first = log.segments[0]
    assert (first.offset_index.entries, first.time_index.entries) == (1, 1)
    for i in range(3, 6):
        log.append_as_leader(singleton_records(b"x", timestamp=now + i), 0)
    assert segment_bases(log) == [0, 2, 4]
    assert fetched_offsets(read_log(log, 0, 10**6)) == [0, 1]
    assert [r.offset for s in log.segments for b in s.batches() for r in b.records()] == list(range(6))


def test_roll_when_offset_index_is_full(make_log: LogFactory) -> None:
    """``segment.index.bytes`` = 36: 4 offset entries; records without timestamps add no time entries."""
    log = make_log(LogConfig(segment_index_bytes=36, index_interval_bytes=1))
    for _ in range(11):
        log.append_as_leader(singleton_records(b"x", timestamp=NO_TIMESTAMP), 0)
    # 1st append: no entry; appends 2..5 fill the 4 offset entries; the 6th rolls.
    assert segment_bases(log) == [0, 5, 10]
    first = log.segments[0]
    assert (first.offset_index.entries, first.time_index.entries) == (4, 0)
    assert log.log_end_offset == 11


def test_roll_when_time_index_has_no_room(make_log: LogFactory) -> None:
    """``segment.index.bytes`` < 24: the time index holds at most one (reserved) entry and is always full, so
    every append rolls, except onto an empty segment, which is replaced at its own base (KAFKA-6388)."""
    log = make_log(LogConfig(segment_index_bytes=16, index_interval_bytes=1))
    for _ in range(7):
        log.append_as_leader(singleton_records(b"x", timestamp=NO_TIMESTAMP), 0)
    assert log.segments[0].time_index.max_entries <= 1
    assert segment_bases(log) == list(range(7))
    assert log.log_end_offset == 7
    check_log_invariants(log)


# --- offset overflow -----------------------------------------------------------------------------------------
def test_roll_on_offset_overflow(make_log: LogFactory, log_dir: Path) -> None:
    """LogLoaderTest.testOverCompactedLogRecovery: an offset past base + Int.MAX rolls to the batch's base."""
    log = make_log(LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024))

    def batch(offset: int, key: bytes, value: bytes) -> MemoryRecords:
        return records([SimpleRecord(value, key)], base_offset=offset, partition_leader_epoch=0)

    log.append_as_follower(batch(0, b"k1", b"v1"))
    assert log.active_segment.base_offset == 0
    log.append_as_follower(batch(INT32_MAX + 2, b"k3", b"v3"))
    assert log.active_segment.base_offset == INT32_MAX + 2
    assert (log_dir / f"{INT32_MAX + 2:020d}.snapshot").exists()
    log.append_as_follower(batch(INT32_MAX + 3, b"k4", b"v4"))
    log.append_as_follower(batch(INT32_MAX + 4, b"k5", b"v5"))
    assert log.active_segment.base_offset == INT32_MAX + 2
    log.close()
    assert len(files_with_suffix(log_dir, ".index")) == 2


def test_roll_on_offset_overflow_multi_record(make_log: LogFactory) -> None:
    """testOverCompactedLogRecoveryMultiRecord: gzip batches of two records."""
    log = make_log(LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024))

    def batch(offset: int, *kvs: tuple[bytes, bytes]) -> MemoryRecords:
        return records(
            [SimpleRecord(v, k) for k, v in kvs],
            base_offset=offset,
            codec=Compression.GZIP,
            partition_leader_epoch=0,
        )

    log.append_as_follower(records([SimpleRecord(b"v1", b"k1")], partition_leader_epoch=0))
    log.append_as_follower(batch(INT32_MAX + 2, (b"k3", b"v3"), (b"k4", b"v4")))
    assert log.active_segment.base_offset == INT32_MAX + 2
    log.append_as_follower(batch(INT32_MAX + 4, (b"k5", b"v5"), (b"k6", b"v6")))
    log.append_as_follower(batch(INT32_MAX + 6, (b"k7", b"v7"), (b"k8", b"v8")))
    assert log.active_segment.base_offset == INT32_MAX + 2
    assert segment_bases(log) == [0, INT32_MAX + 2]


def test_roll_on_offset_overflow_legacy_v1(make_log: LogFactory, log_dir: Path) -> None:
    """testOverCompactedLogRecoveryMultiRecordV1: without a known first offset the roll base is
    ``max(lastOffset - Int.MAX, LEO)`` (KAFKA-4451)."""
    log = make_log(LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024))
    gzip = 1
    log.append_as_follower(legacy_records(1, [(b"k1", b"v1")]))
    log.append_as_follower(
        legacy_records(1, [(b"k3", b"v3"), (b"k4", b"v4")], base_offset=INT32_MAX + 2, codec=gzip)
    )
    # max(1, (Int.MAX + 3) - Int.MAX) = 3
    assert log.active_segment.base_offset == 3
    assert (log_dir / f"{3:020d}.snapshot").exists()
    log.append_as_follower(
        legacy_records(1, [(b"k5", b"v5"), (b"k6", b"v6")], base_offset=INT32_MAX + 4, codec=gzip)
    )
    # max(Int.MAX + 4, (Int.MAX + 5) - Int.MAX) = Int.MAX + 4
    assert log.active_segment.base_offset == INT32_MAX + 4
    log.append_as_follower(
        legacy_records(1, [(b"k7", b"v7"), (b"k8", b"v8")], base_offset=INT32_MAX + 6, codec=gzip)
    )
    assert log.active_segment.base_offset == INT32_MAX + 4
    log.close()
    assert len(files_with_suffix(log_dir, ".index")) == 3


def test_reopen_keeps_segments(make_log: LogFactory, log_dir: Path, mock_time: MockTime) -> None:
    """A clean close and reopen keeps every segment, offset and byte."""
    log = make_log(LogConfig(segment_bytes=200))
    for i in range(20):
        log.append_as_leader(singleton_records(str(i).encode(), timestamp=mock_time.milliseconds()), 0)
    bases, leo = segment_bases(log), log.log_end_offset
    log.close()
    again: Log = make_log(LogConfig(segment_bytes=200), recovery_point=leo)
    assert segment_bases(again) == bases and again.log_end_offset == leo
    assert fetched_offsets(read_log(again, 0, 10**6))[:1] == [0]
