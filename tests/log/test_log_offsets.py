"""Offsets: the high watermark (clamping, leader and follower update rules), the log start offset, the last
stable offset, lookups by timestamp (-1 latest, -2 earliest, -3 max timestamp, -4/-5/-6 without remote
storage), and flushing / the recovery point (``flush.messages``, roll-triggered flushes, truncation).

Ported from Kafka (same numbers):

* UnifiedLogTest: testHighWatermarkMaintenance, testMaybeUpdateHighWatermarkAsFollower,
  testFetchOffsetByTimestampIncludesLeaderEpoch, testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp,
  testFetchLatestTieredTimestampNoRemoteStorage, testFetchEarliestPendingUploadTimestampNoRemoteStorage,
  testFirstUnstableOffsetNoTransactionalData, testFirstUnstableOffsetWithTransactionalData,
  testLastStableOffsetWithMixedProducerData, testTransactionIndexUpdated (the LSO caching part),
  testLogRolls (recovery point after a roll).
* LocalLogTest: testLogFlush.

Not a single Kafka test, but Kafka's rules (``UnifiedLog.maybeIncrementHighWatermark``, ``append``'s
``flush.messages`` check, ``LocalLog.updateLogEndOffset``): a leader HW update that is equal but on a newer
segment, an HW past the LEO rejected, ``flush.messages``, the recovery point lowered by truncation and raised
by the log start offset, the recovery point after a clean reopen.

Skipped: testLogOffsetsListener / testUpdateLogOffsetsListener (no listener API); remote-storage variants
of the ListOffsets tests (testFetchOffsetByTimestampFromRemoteStorage, testFetchLatestTieredTimestampWithRemoteStorage,
testFetchEarliestPendingUploadTimestamp* with remote storage, testConvertToOffsetMetadataDoesNotThrowOffsetOutOfRangeError).
"""

from __future__ import annotations

import pytest

from kafkalog.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, LogConfig
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord, TimestampType
from kafkalog.storage import LogOffsetMetadata, TimestampAndOffset
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    append_end_txn_marker,
    append_non_transactional,
    append_transactional,
    assert_valid_log_offset_metadata,
    records,
    singleton_records,
)

EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


def _abc(offset: int, now: int) -> MemoryRecords:
    return records(
        [SimpleRecord(b"value", k, now) for k in (b"a", b"b", b"c")],
        base_offset=offset,
        partition_leader_epoch=0,
    )


# --- high watermark ------------------------------------------------------------------------------------------
def test_high_watermark_maintenance(make_log: LogFactory, mock_time: MockTime) -> None:
    """testHighWatermarkMaintenance."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    now = mock_time.milliseconds()

    def assert_hw(offset: int) -> None:
        assert log.high_watermark == offset
        assert_valid_log_offset_metadata(log, log.fetch_offset_snapshot().high_watermark)

    assert_hw(0)
    log.append_as_leader(_abc(0, now), 0)
    assert_hw(0)  # appends don't move it
    log.maybe_increment_high_watermark(LogOffsetMetadata(1))
    assert_hw(1)
    log.update_high_watermark(5)  # clamped to the LEO
    assert_hw(3)
    log.append_as_follower(_abc(3, now))
    log.update_high_watermark(6)
    assert_hw(6)
    log.truncate_to(3)  # truncation pulls it back
    assert_hw(3)
    log.append_as_leader(_abc(0, now), 0)
    assert_hw(3)
    assert (log.log_end_offset, log.log_start_offset) == (6, 0)
    log.truncate_fully_and_start_at(4)
    assert (log.log_end_offset, log.log_start_offset) == (4, 4)
    assert_hw(4)


def test_maybe_update_high_watermark_as_follower(make_log: LogFactory) -> None:
    """testMaybeUpdateHighWatermarkAsFollower: 99 -> 99, 99 -> None, 100 -> 100, 100 -> None, 101 -> None."""
    log = make_log()
    for i in range(100):
        log.append_as_leader(singleton_records(b"test%d" % i), 0)
    assert log.maybe_update_high_watermark(99) == 99
    assert log.maybe_update_high_watermark(99) is None
    assert log.maybe_update_high_watermark(100) == 100
    assert log.maybe_update_high_watermark(100) is None
    assert log.maybe_update_high_watermark(101) is None  # bound by the log end offset
    assert log.high_watermark == 100


def test_update_high_watermark_clamps_to_log_start_offset(make_log: LogFactory) -> None:
    """``updateHighWatermark`` clamps to ``[log start offset, LEO]`` (also negative values)."""
    log = make_log()
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    log.update_high_watermark(8)
    log.maybe_increment_log_start_offset(5)
    assert log.update_high_watermark(2) == 5
    assert log.high_watermark == 5
    assert log.update_high_watermark(-3) == 5
    assert log.update_high_watermark(1000) == 10
    assert log.high_watermark_metadata == log.log_end_offset_metadata


def test_maybe_increment_high_watermark_rules(make_log: LogFactory) -> None:
    """Leader rule: move only if strictly larger, or equal but on a newer segment; never past the LEO."""
    log = make_log()
    batch = records([SimpleRecord(b"a"), SimpleRecord(b"b"), SimpleRecord(b"c")])
    log.append_as_leader(batch, 0)
    old_segment_meta = LogOffsetMetadata(3, 0, batch.size_in_bytes)
    with pytest.raises(ValueError):
        log.maybe_increment_high_watermark(LogOffsetMetadata(4))
    assert log.maybe_increment_high_watermark(LogOffsetMetadata(2)) == LogOffsetMetadata(0)
    assert log.maybe_increment_high_watermark(LogOffsetMetadata(1)) is None  # smaller: ignored
    assert log.high_watermark == 2
    assert log.maybe_increment_high_watermark(old_segment_meta) == LogOffsetMetadata(2)
    log.local_log.roll()  # the LEO metadata now names the new (empty) segment, the HW still the old one
    new_segment_meta = log.log_end_offset_metadata
    assert new_segment_meta == LogOffsetMetadata(3, 3, 0)
    assert log.maybe_increment_high_watermark(LogOffsetMetadata(3)) is None  # equal, offset only
    assert log.maybe_increment_high_watermark(new_segment_meta) == old_segment_meta  # equal, newer segment
    assert log.high_watermark_metadata == new_segment_meta
    assert log.maybe_increment_high_watermark(new_segment_meta) is None


def test_roll_moves_high_watermark_metadata_to_new_segment(make_log: LogFactory) -> None:
    """``Log.roll`` re-points an HW equal to the LEO at the new segment (updateHighWatermarkWithLogEndOffset)."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"a")]), 0)
    log.update_high_watermark(1)
    log.roll()
    assert log.high_watermark_metadata == LogOffsetMetadata(1, 1, 0)


# --- log start offset and last stable offset ----------------------------------------------------------------
def test_maybe_increment_log_start_offset_raises_recovery_point(make_log: LogFactory) -> None:
    log = make_log()
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    log.update_high_watermark(10)
    assert log.recovery_point == 0
    assert log.maybe_increment_log_start_offset(7)
    assert log.recovery_point == 7
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 7, 0)


def test_maybe_increment_log_start_offset_writes_the_epoch_checkpoint_outside_the_log_lock(
    make_log: LogFactory,
) -> None:
    """Moving the log start offset (retention, DeleteRecords, the remote tier's expiration) writes the truncated
    leader-epoch checkpoint (two fsyncs) after releasing the Log's lock, so an append never waits for it; the
    file is current when the call returns."""
    from kafkalog.log.checkpoint import leader_epoch_checkpoint

    log = make_log()
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), i // 4)  # epochs 0, 1, 2 at offsets 0, 4, 8
    log.update_high_watermark(10)
    cache = log.leader_epoch_cache
    under_lock: list[bool] = []
    flush = cache.flush

    def watched() -> None:
        under_lock.append(log.lock._is_owned())
        flush()

    cache.flush = watched  # type: ignore[method-assign]
    assert log.maybe_increment_log_start_offset(6)
    assert under_lock == [False]
    on_disk = leader_epoch_checkpoint(log.dir).read()
    assert [(e.epoch, e.start_offset) for e in on_disk] == [(1, 6), (2, 8)]
    assert [(e.epoch, e.start_offset) for e in cache.epoch_entries] == [(1, 6), (2, 8)]


def test_retention_writes_the_epoch_checkpoint_after_releasing_the_log_lock(make_log: LogFactory) -> None:
    """A retention pass holds the Log's lock while it deletes segments and moves the log start offset, but
    writes the truncated leader-epoch checkpoint only once it has released it (appends never wait for those
    fsyncs); the file is current when the pass returns."""
    from kafkalog.log.checkpoint import leader_epoch_checkpoint

    log = make_log(LogConfig(segment_bytes=300, retention_bytes=700, file_delete_delay_ms=60_000))
    for i in range(30):
        log.append_as_leader(singleton_records(b"value-%02d" % i), i // 10)  # epochs 0, 1, 2
    log.update_high_watermark(log.log_end_offset)
    cache = log.leader_epoch_cache
    under_lock: list[bool] = []
    flush = cache.flush

    def watched() -> None:
        under_lock.append(log.lock._is_owned())
        flush()

    cache.flush = watched  # type: ignore[method-assign]
    assert log.delete_old_segments() > 0
    start = log.log_start_offset
    assert start > 0
    assert under_lock and not any(under_lock)
    expected = [(e.epoch, e.start_offset) for e in cache.epoch_entries]
    assert expected[0][1] == start
    assert [(e.epoch, e.start_offset) for e in leader_epoch_checkpoint(log.dir).read()] == expected


def test_first_unstable_offset_no_transactional_data(make_log: LogFactory) -> None:
    """testFirstUnstableOffsetNoTransactionalData."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    log.append_as_leader(records([SimpleRecord(b"foo"), SimpleRecord(b"bar"), SimpleRecord(b"baz")]), 0)
    assert log.first_unstable_offset is None


def test_first_unstable_offset_with_transactional_data(make_log: LogFactory, mock_time: MockTime) -> None:
    """testFirstUnstableOffsetWithTransactionalData: the FUO only clears once the HW passes the marker."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    txn = records(
        [SimpleRecord(b"foo"), SimpleRecord(b"bar"), SimpleRecord(b"baz")],
        producer_id=137,
        producer_epoch=5,
        sequence=0,
        transactional=True,
    )
    first = log.append_as_leader(txn, 0)
    assert log.first_unstable_offset == first.first_offset
    log.append_as_leader(
        records([SimpleRecord(b"blah")], producer_id=137, producer_epoch=5, sequence=3, transactional=True), 0
    )
    assert log.first_unstable_offset == first.first_offset
    commit = append_end_txn_marker(log, 137, 5, ControlRecordType.COMMIT, mock_time.milliseconds())
    assert log.first_unstable_offset == first.first_offset
    log.update_high_watermark(commit.last_offset + 1)
    assert log.first_unstable_offset is None


def test_last_stable_offset_with_mixed_producer_data(make_log: LogFactory, mock_time: MockTime) -> None:
    """testLastStableOffsetWithMixedProducerData."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))

    def txn(pid: int, *values: bytes) -> MemoryRecords:
        return records(
            [SimpleRecord(v) for v in values],
            producer_id=pid,
            producer_epoch=5,
            sequence=0,
            transactional=True,
        )

    first = log.append_as_leader(txn(137, b"a", b"b", b"c"), 0)
    assert log.first_unstable_offset == first.first_offset
    log.append_as_leader(records([SimpleRecord(b"g"), SimpleRecord(b"h"), SimpleRecord(b"i")]), 0)
    second = log.append_as_leader(txn(983, b"d", b"e", b"f"), 0)
    assert log.first_unstable_offset == first.first_offset
    abort = append_end_txn_marker(log, 137, 5, ControlRecordType.ABORT, mock_time.milliseconds())
    log.update_high_watermark(abort.last_offset + 1)
    assert log.first_unstable_offset == second.first_offset
    commit = append_end_txn_marker(log, 983, 5, ControlRecordType.COMMIT, mock_time.milliseconds())
    log.update_high_watermark(commit.last_offset + 1)
    assert log.first_unstable_offset is None


def test_transaction_index_updated(make_log: LogFactory, mock_time: MockTime) -> None:
    """testTransactionIndexUpdated: aborted transactions in the txn index, FUO metadata cached."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    pid1, pid2, pid3, pid4 = (append_transactional(log, pid, 0, mock_time) for pid in (1, 2, 3, 4))

    def marker(pid: int, control: ControlRecordType) -> None:
        append_end_txn_marker(log, pid, 0, control, mock_time.milliseconds())

    pid1(5)
    append_non_transactional(log, 3)
    pid2(2)
    pid1(4)
    pid3(3)
    append_non_transactional(log, 2)
    pid1(10)
    marker(1, ControlRecordType.ABORT)  # 30
    pid2(6)
    pid4(3)
    append_non_transactional(log, 10)
    pid3(9)
    marker(3, ControlRecordType.COMMIT)  # 59
    pid4(8)
    pid2(7)
    marker(2, ControlRecordType.ABORT)  # 75
    append_non_transactional(log, 10)
    pid4(4)
    marker(4, ControlRecordType.COMMIT)  # 90
    aborted = [tuple(t) for s in log.segments for t in s.txn_index.all_aborted_txns()]
    assert [(t[0], t[1], t[2], t[3]) for t in aborted] == [(1, 0, 29, 8), (2, 8, 74, 36)]

    def assert_cached_fuo(expected: int) -> None:
        fuo = log.producer_state.first_unstable_offset()
        assert fuo is not None and fuo.message_offset == expected
        assert not fuo.message_offset_only
        assert_valid_log_offset_metadata(log, fuo)

    log.update_high_watermark(30)
    assert_cached_fuo(8)
    log.update_high_watermark(75)
    assert_cached_fuo(36)
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None


# --- lookups by timestamp ------------------------------------------------------------------------------------
def test_fetch_offset_by_timestamp_includes_leader_epoch(make_log: LogFactory, mock_time: MockTime) -> None:
    """testFetchOffsetByTimestampIncludesLeaderEpoch."""
    log = make_log(LogConfig(segment_bytes=200, index_interval_bytes=1))
    assert log.fetch_offset_by_timestamp(0) is None
    first_ts = mock_time.milliseconds()
    log.append_as_leader(singleton_records(bytes(10), timestamp=first_ts), 0)
    second_ts = first_ts + 1
    log.append_as_leader(singleton_records(bytes(10), timestamp=second_ts), 1)
    assert log.fetch_offset_by_timestamp(first_ts) == TimestampAndOffset(first_ts, 0, 0)
    assert log.fetch_offset_by_timestamp(second_ts) == TimestampAndOffset(second_ts, 1, 1)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 2, 1)
    # The cache may be updated directly after a leader change: latest reflects the new epoch.
    log.maybe_assign_epoch_start_offset(2, 2)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 2, 2)


def test_fetch_offset_by_timestamp_with_max_timestamp(make_log: LogFactory, mock_time: MockTime) -> None:
    """testFetchOffsetByTimestampWithMaxTimestampIncludesTimestamp."""
    log = make_log(LogConfig(segment_bytes=200, index_interval_bytes=1))
    assert log.fetch_offset_by_timestamp(0) is None
    first_ts = mock_time.milliseconds()
    log.append_as_leader(singleton_records(bytes(10), timestamp=first_ts), 0)
    log.append_as_leader(singleton_records(bytes(10), timestamp=first_ts + 1), 0)
    log.append_as_leader(singleton_records(bytes(10), timestamp=first_ts), 0)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(first_ts + 1, 1, 0)


@pytest.mark.parametrize("sentinel", [LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP])
def test_fetch_tiered_sentinels_without_remote_storage(
    make_log: LogFactory, mock_time: MockTime, sentinel: int
) -> None:
    """testFetchLatestTieredTimestampNoRemoteStorage / testFetchEarliestPendingUploadTimestampNoRemoteStorage."""
    log = make_log(LogConfig(segment_bytes=200, index_interval_bytes=1))
    assert log.fetch_offset_by_timestamp(sentinel) == TimestampAndOffset(-1, -1, -1)
    log.append_as_leader(singleton_records(bytes(10), timestamp=mock_time.milliseconds()), 0)
    log.append_as_leader(singleton_records(bytes(10), timestamp=mock_time.milliseconds() + 1), 0)
    assert log.fetch_offset_by_timestamp(sentinel) == TimestampAndOffset(-1, -1, -1)


def test_fetch_offset_by_timestamp_across_segments(make_log: LogFactory, mock_time: MockTime) -> None:
    """The first offset with a timestamp >= the target, across segments and inside a batch; None past the max."""
    log = make_log(LogConfig(segment_bytes=300, index_interval_bytes=1))
    base = mock_time.milliseconds()
    for i in range(10):  # offsets 2i, 2i+1 with timestamps base + 10*i, base + 10*i + 5
        log.append_as_leader(
            records([SimpleRecord(b"a", None, base + 10 * i), SimpleRecord(b"b", None, base + 10 * i + 5)]), 0
        )
    assert log.num_log_segments > 2
    assert log.fetch_offset_by_timestamp(base - 100) == TimestampAndOffset(base, 0, 0)
    assert log.fetch_offset_by_timestamp(base + 42) == TimestampAndOffset(base + 45, 9, 0)
    assert log.fetch_offset_by_timestamp(base + 95) == TimestampAndOffset(base + 95, 19, 0)
    assert log.fetch_offset_by_timestamp(base + 96) is None
    # Lookups never return offsets below the log start offset.
    log.update_high_watermark(20)
    log.maybe_increment_log_start_offset(5)
    assert log.fetch_offset_by_timestamp(base).offset == 5  # type: ignore[union-attr]


def test_fetch_offset_by_timestamp_log_append_time(make_log: LogFactory, mock_time: MockTime) -> None:
    """On a LogAppendTime topic lookups use the broker's append time."""
    log = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    t0 = mock_time.milliseconds()
    log.append_as_leader(records([SimpleRecord(b"a", None, 5), SimpleRecord(b"b", None, 7)]), 0)
    mock_time.sleep(100)
    log.append_as_leader(records([SimpleRecord(b"c", None, 1)]), 0)
    assert log.fetch_offset_by_timestamp(t0 + 1) == TimestampAndOffset(t0 + 100, 2, 0)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(t0 + 100, 2, 0)
    batch = next(iter(log.read(0, 10_000).records.batches()))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME and batch.max_timestamp == t0


# --- flush and recovery point --------------------------------------------------------------------------------
def test_local_log_flush(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testLogFlush."""
    log = make_log()
    assert log.recovery_point == 0
    assert log.last_flush_time == mock_time.milliseconds()
    log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
    mock_time.sleep(1)
    new_segment = log.local_log.roll(0)
    log.local_log.flush(new_segment.base_offset)
    log.local_log.mark_flushed(new_segment.base_offset)
    assert log.recovery_point == 1
    assert log.last_flush_time == mock_time.milliseconds()


def test_flush_messages(make_log: LogFactory) -> None:
    """``flush.messages``: an append flushes once LEO - recovery point reaches it."""
    log = make_log(LogConfig(flush_messages=3))
    log.append_as_leader(singleton_records(b"1"), 0)
    log.append_as_leader(singleton_records(b"2"), 0)
    assert log.recovery_point == 0
    log.append_as_leader(singleton_records(b"3"), 0)
    assert log.recovery_point == 3
    log.append_as_leader(records([SimpleRecord(b"%d" % i) for i in range(5)]), 0)
    assert log.recovery_point == 8


def test_flush_never_lowers_recovery_point(make_log: LogFactory) -> None:
    log = make_log()
    for i in range(5):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    log.flush()
    assert log.recovery_point == 5
    log.flush(2)
    assert log.recovery_point == 5
    log.truncate_to(3)  # truncation lowers it to the LEO (LocalLog.updateLogEndOffset)
    assert log.recovery_point == 3


def test_roll_flushes_up_to_new_segment(make_log: LogFactory) -> None:
    """testLogRolls: the roll's flush-log task advances the recovery point to the new segment's base."""
    log = make_log(LogConfig(segment_bytes=100))
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    assert log.num_log_segments == 10
    assert log.recovery_point == log.active_segment.base_offset == 9


def test_recovery_point_after_clean_reopen(make_log: LogFactory) -> None:
    """After a clean shutdown of a non-empty log the recovery point is the LEO (LogLoader)."""
    config = LogConfig(segment_bytes=300)
    log = make_log(config)
    for i in range(10):
        log.append_as_leader(singleton_records(b"%d" % i), 0)
    log.close()
    again = make_log(config, recovery_point=0)
    assert again.recovery_point == again.log_end_offset == 10
    assert again.high_watermark == again.log_start_offset == 0  # the HW is not persisted by the log
