"""Retention: ``retention.ms`` (record timestamps, file mtime without them), ``retention.bytes``, log start
offset breach (also on compacted topics, KAFKA-7400), never past the high watermark, deleting everything
(an empty active segment at the LEO remains), ``.deleted`` files removed after ``file.delete.delay.ms``.

Ported from Kafka (same numbers):

* UnifiedLogTest: testThatGarbageCollectingSegmentsDoesntChangeOffset, testDeleteOldSegments,
  testLogDeletionAfterClose, testLogDeletionAfterDeleteRecords, shouldDeleteSizeBasedSegments,
  shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize, shouldDeleteTimeBasedSegmentsReadyToBeDeleted,
  shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted, shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete,
  shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete,
  shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete (KAFKA-7400),
  shouldTruncateLeaderEpochsWhenDeletingSegments, shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments,
  testAsyncDelete, testSegmentDeletionWithHighWatermarkInitialization,
  testCannotDeleteSegmentsAtOrAboveHighWatermark, testCannotIncrementLogStartOffsetPastHighWatermark,
  testRetentionDeletesProducerStateSnapshots (both parameters), testRetentionIdempotency,
  testLogStartOffsetMovementDeletesSnapshots, testDeleteSnapshotsOnIncrementLogStartOffset,
  testProducerIdExpirationOnSegmentDeletion, testDeletableSegmentsFilter, testDeletableSegmentsIteration,
  testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment,
  testLastStableOffsetDoesNotExceedLogStartOffsetAfterSegmentDeletion, testNoOpWhenRemoteLogStorageIsDisabled.
* LocalLogTest: testRemoveAndDeleteSegmentsSync/Async, testDeleteSegmentFilesSync/Async,
  testLogDeleteSegmentsSuccess, testLogDeleteDirSuccessWhenEmptyAndFailureWhenNonEmpty, testCreateAndDeleteSegment.

Skipped (tiered storage, out of scope): every ``...WithRemoteStorage``/``localRetention*``/
``updateHighestOffsetInRemoteStorage`` test (shouldDeleteLocalLogSegmentsWhenPolicyIsEmpty*,
testActiveSegmentDeletionDueToRetentionTimeBreachWithRemoteStorage, testRetentionOnLocalLogDeletion*,
testIncrementLocalLogStartOffsetAfterLocalLogDeletion, testSegmentDeletionEnabledBeforeUploadToRemoteTier*);
testCompactionDeletesProducerStateSnapshots (needs the cleaner); testBackgroundDeletionWithIOException (the
directory is replaced by a file, kafkalog reports it the same way but through another engineer's code path).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError, OffsetOutOfRangeError
from kafkalog.log import LogConfig
from kafkalog.log.local_log import delete_segment_files
from kafkalog.log.retention import deletable_segments
from kafkalog.records import SimpleRecord
from kafkalog.storage import LogSegment
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    append_non_transactional,
    append_transactional,
    check_log_invariants,
    fetched_offsets,
    files_with_suffix,
    read_log,
    records,
    segment_bases,
    singleton_records,
    snapshot_offsets,
)

TEST_SIZE = 72  # singleton_records(b"test"): Kafka's 72-byte batch


def _fill(log, n: int, value: bytes = b"test", key: bytes | None = None, timestamp: int = -1) -> None:  # type: ignore[no-untyped-def]
    for _ in range(n):
        log.append_as_leader(singleton_records(value, key, timestamp=timestamp), 0)


@pytest.mark.parametrize("messages_to_append", [0, 1, 25])
def test_garbage_collecting_segments_does_not_change_offset(
    make_log: LogFactory, mock_time: MockTime, messages_to_append: int
) -> None:
    """testThatGarbageCollectingSegmentsDoesntChangeOffset: deleting everything keeps the LEO."""
    log = make_log(LogConfig(segment_bytes=100, retention_ms=0))
    for i in range(messages_to_append):
        log.append_as_leader(singleton_records(str(i).encode(), timestamp=mock_time.milliseconds() - 10), 0)
    curr = log.log_end_offset
    assert curr == messages_to_append
    log.update_high_watermark(curr)
    log.delete_old_segments()
    assert log.log_end_offset == curr
    assert log.num_log_segments == 1, "one (empty active) segment is left"
    assert log.active_segment.base_offset == curr and log.active_segment.size == 0
    assert log.log_start_offset == curr
    assert log.delete_old_segments() == 0
    info = log.append_as_leader(singleton_records(b"hello", timestamp=mock_time.milliseconds()), 0)
    assert info.first_offset == curr
    log.delete()


def test_delete_old_segments(make_log: LogFactory, mock_time: MockTime) -> None:
    """testDeleteOldSegments: only segments below the HW go; the epoch cache is truncated from the start."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, segment_index_bytes=1000, retention_ms=999))
    _fill(log, 100, timestamp=mock_time.milliseconds() - 1000)
    log.maybe_assign_epoch_start_offset(0, 40)
    log.maybe_assign_epoch_start_offset(1, 90)
    num_segments = log.num_log_segments
    log.delete_old_segments()
    assert log.num_log_segments == num_segments, "nothing is eligible without a high watermark"
    assert log.log_start_offset == 0
    for hw in range(25, 31):
        log.update_high_watermark(hw)
        log.delete_old_segments()
        assert log.log_start_offset <= hw
        for segment in log.segments:
            offsets = [r.offset for b in segment.batches() for r in b.records()]
            if offsets:
                assert offsets[-1] >= hw
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 1
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.epoch_entries] == [(1, 100)]

    _fill(log, 100, timestamp=mock_time.milliseconds() - 1000)
    log.delete()
    assert log.num_log_segments == 0
    assert log.delete_old_segments() == 0
    assert log.leader_epoch_cache.epoch_entries == []


def test_log_deletion_after_close(make_log: LogFactory, mock_time: MockTime, log_dir: Path) -> None:
    """testLogDeletionAfterClose."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, segment_index_bytes=1000, retention_ms=999))
    _fill(log, 1, timestamp=mock_time.milliseconds() - 1000)
    assert log.num_log_segments == 1
    assert len(log.leader_epoch_cache.epoch_entries) == 1
    log.close()
    log.delete()
    assert log.num_log_segments == 0
    assert log.leader_epoch_cache.epoch_entries == []
    assert not log_dir.exists()


def test_log_deletion_after_delete_records(make_log: LogFactory) -> None:
    """testLogDeletionAfterDeleteRecords: the log start offset rule."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5))
    _fill(log, 15)
    assert log.num_log_segments == 3 and log.log_start_offset == 0
    log.update_high_watermark(log.log_end_offset)
    for start, segments in ((1, 3), (6, 2), (15, 1)):
        log.maybe_increment_log_start_offset(start)
        log.delete_old_segments()
        assert (log.num_log_segments, log.log_start_offset) == (segments, start)


def test_should_delete_size_based_segments(make_log: LogFactory) -> None:
    """shouldDeleteSizeBasedSegments: 15 x 72 bytes, retention.bytes 720 -> 2 segments remain."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_bytes=TEST_SIZE * 10))
    _fill(log, 15)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 2


def test_should_not_delete_size_based_segments_when_under_retention_size(make_log: LogFactory) -> None:
    """shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_bytes=TEST_SIZE * 15))
    _fill(log, 15)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 3


def test_should_delete_time_based_segments_ready_to_be_deleted(make_log: LogFactory) -> None:
    """shouldDeleteTimeBasedSegmentsReadyToBeDeleted: record timestamp 10, retention.ms 10000."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_ms=10000))
    _fill(log, 15, timestamp=10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 1


def test_should_not_delete_time_based_segments_when_none_ready(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_ms=10_000_000))
    _fill(log, 15, timestamp=mock_time.milliseconds())
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 3


def test_time_retention_uses_record_timestamps_not_mtime(make_log: LogFactory, mock_time: MockTime) -> None:
    """Gotcha 4: an old file with fresh record timestamps stays; a fresh file with old timestamps goes."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_ms=10_000))
    _fill(log, 5, timestamp=mock_time.milliseconds())  # segment 0: fresh records
    _fill(log, 5, timestamp=mock_time.milliseconds())
    log.segments[0].set_last_modified(mock_time.milliseconds() - 1_000_000)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    mock_time.sleep(10_001)
    assert log.delete_old_segments() == 2


def test_time_retention_falls_back_to_mtime_without_timestamps(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """Without record timestamps, ``largest_timestamp`` is the file's modification time."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_ms=10_000))
    _fill(log, 15)  # NO_TIMESTAMP records
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 0
    log.segments[0].set_last_modified(mock_time.milliseconds() - 20_000)
    assert log.delete_old_segments() == 1
    assert segment_bases(log) == [5, 10] and log.log_start_offset == 5


def test_should_not_delete_segments_when_policy_does_not_include_delete(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete."""
    log = make_log(
        LogConfig(segment_bytes=TEST_SIZE * 5 + 5 * 4, retention_ms=10000, cleanup_policy="compact")
    )
    _fill(log, 15, key=b"test", timestamp=10)
    log.segments[0].set_last_modified(mock_time.milliseconds() - 20000)
    segments = log.num_log_segments
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == segments


def test_should_delete_segments_when_policy_is_compact_and_delete(make_log: LogFactory) -> None:
    """shouldDeleteSegmentsReadyToBeDeletedWhenCleanupPolicyIsCompactAndDelete."""
    size = singleton_records(b"test", b"test", timestamp=10).size_in_bytes
    log = make_log(LogConfig(segment_bytes=size * 5, retention_ms=10000, cleanup_policy="compact,delete"))
    _fill(log, 15, key=b"test", timestamp=10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 1


def test_should_delete_start_offset_breached_segments_when_policy_does_not_include_delete(
    make_log: LogFactory,
) -> None:
    """shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete (KAFKA-7400)."""
    size = singleton_records(b"test", b"test", timestamp=10).size_in_bytes
    records_per_segment = 5
    log = make_log(
        LogConfig(segment_bytes=size * records_per_segment, retention_ms=10000, cleanup_policy="compact")
    )
    _fill(log, 15, key=b"test", timestamp=10)
    assert log.num_log_segments == 3
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(records_per_segment)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 2
    assert log.segments[0].base_offset <= log.log_start_offset
    assert all(s.base_offset > log.log_start_offset for s in log.segments[1:])


def test_should_truncate_leader_epochs_when_deleting_segments(make_log: LogFactory) -> None:
    """shouldTruncateLeaderEpochsWhenDeletingSegments."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_bytes=TEST_SIZE * 10))
    _fill(log, 15)
    cache = log.leader_epoch_cache
    cache.assign(0, 0)
    cache.assign(1, 5)
    cache.assign(2, 10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert [(e.epoch, e.start_offset) for e in cache.epoch_entries] == [(1, 5), (2, 10)]


def test_should_update_offset_for_leader_epochs_when_deleting_segments(make_log: LogFactory) -> None:
    """shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 5, retention_bytes=TEST_SIZE * 10))
    _fill(log, 15)
    cache = log.leader_epoch_cache
    cache.assign(0, 0)
    cache.assign(1, 7)
    cache.assign(2, 10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert [(e.epoch, e.start_offset) for e in cache.epoch_entries] == [(0, 5), (1, 7), (2, 10)]


def test_async_delete(make_log: LogFactory, mock_time: MockTime, log_dir: Path) -> None:
    """testAsyncDelete: files renamed ``.deleted`` at once, unlinked after file.delete.delay.ms."""
    async_delete_ms = 1000
    log = make_log(
        LogConfig(
            segment_bytes=TEST_SIZE * 5,
            segment_index_bytes=1000,
            index_interval_bytes=10000,
            retention_ms=999,
            file_delete_delay_ms=async_delete_ms,
        )
    )
    _fill(log, 100, timestamp=mock_time.milliseconds() - 1000)
    segments = log.segments
    for segment in segments:
        segment.offset_index  # noqa: B018 - materialise the lazily created index file
    old_files = [s.log.path for s in segments] + [s.offset_index.path for s in segments]
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 1
    assert all(s.log.path.name.endswith(".deleted") for s in segments)
    assert all(s.offset_index.path.name.endswith(".deleted") for s in segments)
    assert all(s.log.path.exists() and s.offset_index.path.exists() for s in segments)
    assert not any(f.exists() for f in old_files)
    deleted_files = [s.log.path for s in segments] + [s.offset_index.path for s in segments]
    mock_time.sleep(async_delete_ms - 1)
    assert all(f.exists() for f in deleted_files)
    mock_time.sleep(2)
    assert not any(f.exists() for f in deleted_files)
    assert files_with_suffix(log_dir, ".deleted") == []


def test_segment_deletion_with_high_watermark_initialization(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """testSegmentDeletionWithHighWatermarkInitialization."""
    log = make_log(LogConfig(segment_bytes=512, segment_index_bytes=1000, retention_ms=999))
    expired = mock_time.milliseconds() - 1000
    for i in range(100):
        log.append_as_leader(singleton_records(b"test%d" % i, timestamp=expired), 0)
    assert log.update_high_watermark(25) == 25
    initial = log.num_log_segments
    log.delete_old_segments()
    assert log.num_log_segments < initial
    assert log.log_start_offset <= 25


def test_cannot_delete_segments_at_or_above_high_watermark(make_log: LogFactory, mock_time: MockTime) -> None:
    """testCannotDeleteSegmentsAtOrAboveHighWatermark."""
    log = make_log(LogConfig(segment_bytes=512, segment_index_bytes=1000, retention_ms=999))
    expired = mock_time.milliseconds() - 1000
    for i in range(100):
        log.append_as_leader(singleton_records(b"test%d" % i, timestamp=expired), 0)
    assert log.num_log_segments > 5
    assert (log.high_watermark, log.log_start_offset, log.log_end_offset) == (0, 0, 100)
    for hw in range(101):
        log.update_high_watermark(hw)
        assert log.high_watermark == hw
        log.delete_old_segments()
        assert log.log_start_offset <= hw
        first, *rest = log.segments
        assert log.log_start_offset <= first.base_offset <= hw
        assert all(s.base_offset > hw and s.base_offset >= log.log_start_offset for s in rest)
        check_log_invariants(log)
    assert log.log_start_offset == 100
    assert log.num_log_segments == 1
    assert log.active_segment.size == 0


def test_cannot_increment_log_start_offset_past_high_watermark(make_log: LogFactory) -> None:
    """testCannotIncrementLogStartOffsetPastHighWatermark."""
    log = make_log(LogConfig(segment_bytes=512, segment_index_bytes=1000, retention_ms=999))
    for i in range(100):
        log.append_as_leader(singleton_records(b"test%d" % i), 0)
    log.update_high_watermark(25)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(26)


def test_increment_log_start_offset(make_log: LogFactory) -> None:
    """testNoOpWhenRemoteLogStorageIsDisabled: the log start offset moves; segments stay until retention."""
    log = make_log()
    for i in range(100):
        log.append_as_leader(singleton_records(b"test%d" % i), 0)
    log.update_high_watermark(90)
    log.maybe_increment_log_start_offset(20, "segment deletion")
    assert log.log_start_offset == 20
    assert log.recovery_point >= 20 and log.high_watermark == 90
    assert not log.maybe_increment_log_start_offset(10)
    assert log.log_start_offset == 20


@pytest.mark.parametrize("create_empty_active_segment", [True, False])
def test_retention_deletes_producer_state_snapshots(
    make_log: LogFactory, mock_time: MockTime, log_dir: Path, create_empty_active_segment: bool
) -> None:
    """testRetentionDeletesProducerStateSnapshots."""
    log = make_log(
        LogConfig(segment_bytes=2048 * 5, retention_bytes=0, retention_ms=1000 * 60, file_delete_delay_ms=0)
    )
    for seq, value in enumerate((b"a", b"b", b"c")):
        if seq:
            log.roll()
        log.append_as_leader(records([SimpleRecord(value)], producer_id=1, producer_epoch=0, sequence=seq), 0)
    if create_empty_active_segment:
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert len(snapshot_offsets(log_dir)) == (3 if create_empty_active_segment else 2)
    mock_time.sleep(1000 * 60 + 1)
    log.delete_old_segments()
    mock_time.sleep(1)
    assert len(snapshot_offsets(log_dir)) == 1, "a single producer state snapshot remains"
    assert log.log_start_offset == 3


def test_retention_idempotency(make_log: LogFactory, mock_time: MockTime) -> None:
    """testRetentionIdempotency: the log start offset rule unblocks the time rule."""
    log = make_log(
        LogConfig(segment_bytes=2048 * 5, retention_bytes=-1, retention_ms=900, file_delete_delay_ms=0)
    )
    now = mock_time.milliseconds()
    log.append_as_leader(records([SimpleRecord(b"a", None, now + 100)]), 0)
    log.roll()
    log.append_as_leader(records([SimpleRecord(b"b", None, now)]), 0)
    log.roll()
    log.append_as_leader(records([SimpleRecord(b"c", None, now + 100)]), 0)
    mock_time.sleep(901)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(1)
    assert log.delete_old_segments() == 2
    assert log.delete_old_segments() == 0


def test_log_start_offset_movement_deletes_snapshots(
    make_log: LogFactory, mock_time: MockTime, log_dir: Path
) -> None:
    """testLogStartOffsetMovementDeletesSnapshots."""
    log = make_log(LogConfig(segment_bytes=2048 * 5, retention_bytes=-1, file_delete_delay_ms=0))
    for seq, value in enumerate((b"a", b"b", b"c")):
        if seq:
            log.roll()
        log.append_as_leader(records([SimpleRecord(value)], producer_id=1, producer_epoch=0, sequence=seq), 0)
    log.update_high_watermark(log.log_end_offset)
    assert len(snapshot_offsets(log_dir)) == 2
    log.maybe_increment_log_start_offset(log.log_end_offset - 1)
    log.delete_old_segments()
    mock_time.sleep(1)
    assert len(snapshot_offsets(log_dir)) == 1


def test_delete_snapshots_on_increment_log_start_offset(
    make_log: LogFactory, mock_time: MockTime, log_dir: Path
) -> None:
    """testDeleteSnapshotsOnIncrementLogStartOffset: producer state stays, snapshots go."""
    config = LogConfig(segment_bytes=2048 * 5)
    log = make_log(config)
    now = mock_time.milliseconds()
    log.append_as_leader(
        records([SimpleRecord(b"a", None, now)], producer_id=1, producer_epoch=0, sequence=0), 0
    )
    log.roll()
    log.append_as_leader(
        records([SimpleRecord(b"b", None, now)], producer_id=2, producer_epoch=0, sequence=0), 0
    )
    log.roll()
    assert len(log.producer_state.active_producers()) == 2
    assert len(snapshot_offsets(log_dir)) == 2
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(2)
    log.delete_old_segments()
    mock_time.sleep(config.file_delete_delay_ms + 1000)
    active = log.producer_state.active_producers()
    assert len(active) == 2
    assert len(snapshot_offsets(log_dir)) == 1
    assert active[2].last_seq == 0


def test_producer_id_expiration_on_segment_deletion(make_log: LogFactory) -> None:
    """testProducerIdExpirationOnSegmentDeletion: deleting a segment keeps producer state."""
    first = records([SimpleRecord(b"foo")], producer_id=1, producer_epoch=0, sequence=0)
    log = make_log(LogConfig(segment_bytes=first.size_in_bytes, retention_bytes=first.size_in_bytes * 2))
    log.append_as_leader(first, 0)
    log.append_as_leader(records([SimpleRecord(b"bar")], producer_id=2, producer_epoch=0, sequence=0), 0)
    log.append_as_leader(records([SimpleRecord(b"baz")], producer_id=2, producer_epoch=0, sequence=1), 0)
    assert log.num_log_segments == 3
    assert set(log.producer_state.active_producers()) == {1, 2}
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 2
    assert set(log.producer_state.active_producers()) == {1, 2}


def _nine_rolled_segments(make_log: LogFactory, mock_time: MockTime):  # type: ignore[no-untyped-def]
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    for _ in range(9):
        log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
        log.roll()
    log.maybe_increment_high_watermark(log.log_end_offset_metadata)
    assert log.num_log_segments == 10
    return log


def test_deletable_segments_filter(make_log: LogFactory, mock_time: MockTime) -> None:
    """testDeletableSegmentsFilter: the empty active segment is never deletable; a non-empty one is."""
    log = _nine_rolled_segments(make_log, mock_time)
    non_active = log.local_log.segments.non_active_log_segments_from(0)
    assert deletable_segments(log, lambda s, _n: s.base_offset <= 5) == [
        s for s in non_active if s.base_offset <= 5
    ]
    assert len(deletable_segments(log, lambda s, _n: s.base_offset <= 5)) == 6
    assert deletable_segments(log, lambda s, _n: True) == non_active
    assert len(non_active) == 9
    log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
    log.maybe_increment_high_watermark(log.log_end_offset_metadata)
    assert deletable_segments(log, lambda s, _n: True) == log.segments
    assert len(log.segments) == 10


def test_deletable_segments_iteration(make_log: LogFactory, mock_time: MockTime) -> None:
    """testDeletableSegmentsIteration: the predicate sees each segment with its successor."""
    log = _nine_rolled_segments(make_log, mock_time)
    seen: list[tuple[int, int | None]] = []

    def predicate(segment: LogSegment, nxt: LogSegment | None) -> bool:
        seen.append((segment.base_offset, None if nxt is None else nxt.base_offset))
        return True

    result = deletable_segments(log, predicate)
    assert result == log.local_log.segments.non_active_log_segments_from(0)
    assert seen == [(i, i + 1) for i in range(9)]


def _transactional_log_with_two_segments(make_log: LogFactory, mock_time: MockTime):  # type: ignore[no-untyped-def]
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    append = append_transactional(log, 1, 0, mock_time)
    append(5)
    append_non_transactional(log, 3)
    assert log.log_end_offset == 8
    log.roll()
    assert log.num_log_segments == 2
    append(5)
    assert log.first_unstable_offset == 0
    return log


def test_last_stable_offset_does_not_exceed_log_start_offset_mid_segment(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """testLastStableOffsetDoesNotExceedLogStartOffsetMidSegment."""
    log = _transactional_log_with_two_segments(make_log, mock_time)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(5)
    assert log.first_unstable_offset == 5


def test_last_stable_offset_does_not_exceed_log_start_offset_after_segment_deletion(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """testLastStableOffsetDoesNotExceedLogStartOffsetAfterSegmentDeletion."""
    log = _transactional_log_with_two_segments(make_log, mock_time)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(8)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    assert log.num_log_segments == 1
    assert log.first_unstable_offset == 8


def test_delete_everything_keeps_empty_active_segment_and_reads(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """Gotcha 5: a fully expired log keeps one empty active segment at the LEO; reads below it fail."""
    log = make_log(LogConfig(segment_bytes=TEST_SIZE * 3, retention_ms=1000, file_delete_delay_ms=500))
    _fill(log, 10, timestamp=mock_time.milliseconds())
    log.update_high_watermark(10)
    mock_time.sleep(1001)
    assert log.delete_old_segments() == 4
    assert segment_bases(log) == [10] and log.log_start_offset == 10 and log.log_end_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        read_log(log, 9, 1000)
    assert fetched_offsets(read_log(log, 10, 1000)) == []
    check_log_invariants(log)


# --- LocalLog deletion mechanics (LocalLogTest) --------------------------------------------------------------
def _ten_segments(make_log: LogFactory, mock_time: MockTime):  # type: ignore[no-untyped-def]
    log = make_log()
    for _ in range(9):
        log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
        log.local_log.roll(0)
    assert log.num_log_segments == 10
    return log


@pytest.mark.parametrize("async_delete", [False, True])
def test_remove_and_delete_segments(make_log: LogFactory, mock_time: MockTime, async_delete: bool) -> None:
    """LocalLogTest.testRemoveAndDeleteSegmentsSync/Async."""
    log = _ten_segments(make_log, mock_time)
    to_delete = log.segments
    log.local_log.remove_and_delete_segments(to_delete, async_delete, "test")
    if async_delete:
        assert not any(s.deleted for s in to_delete)
        mock_time.sleep(log.config.file_delete_delay_ms + 1)
    assert log.local_log.segments.is_empty
    assert all(s.deleted for s in to_delete)


@pytest.mark.parametrize("async_delete", [False, True])
def test_delete_segment_files(make_log: LogFactory, mock_time: MockTime, async_delete: bool) -> None:
    """LocalLogTest.testDeleteSegmentFilesSync/Async."""
    log = _ten_segments(make_log, mock_time)
    to_delete = log.segments
    delete_segment_files(to_delete, async_delete, log.dir, log.local_log.scheduler, log.config)
    if async_delete:
        assert all(not s.deleted and s.has_suffix(".deleted") for s in to_delete)
        mock_time.sleep(log.config.file_delete_delay_ms + 1)
    assert all(s.deleted for s in to_delete)


def test_local_log_delete_segments_success(make_log: LogFactory, mock_time: MockTime, log_dir: Path) -> None:
    """LocalLogTest.testLogDeleteSegmentsSuccess."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
    log.local_log.roll(0)
    assert log.num_log_segments == 2
    before = log.segments
    deleted = log.local_log.delete_all_segments()
    assert log.local_log.segments.is_empty
    assert deleted == before
    with pytest.raises(KafkaStorageError):
        log.local_log.check_if_closed()
    assert log_dir.exists()


def test_local_log_delete_dir_only_when_empty(
    make_log: LogFactory, mock_time: MockTime, log_dir: Path
) -> None:
    """LocalLogTest.testLogDeleteDirSuccessWhenEmptyAndFailureWhenNonEmpty."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
    log.local_log.roll(0)
    with pytest.raises(RuntimeError):
        log.local_log.delete_empty_dir()
    assert log_dir.exists()
    log.local_log.delete_all_segments()
    log.local_log.delete_empty_dir()
    assert not log_dir.exists()


def test_create_and_delete_segment(make_log: LogFactory, mock_time: MockTime) -> None:
    """LocalLogTest.testCreateAndDeleteSegment."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"a", None, mock_time.milliseconds())]), 0)
    old = log.active_segment
    new_offset = old.base_offset + 1
    new = log.local_log.create_and_delete_segment(new_offset, old, True)
    log.local_log.update_log_end_offset(new_offset)
    assert log.num_log_segments == 1
    assert log.active_segment is new and new is not old
    assert old.has_suffix(".deleted")
    assert new.base_offset == new_offset
    assert log.recovery_point == 0
    assert log.log_end_offset == new_offset
    info = log.local_log.read(new_offset, 1000, False, log.log_end_offset_metadata, False)
    assert fetched_offsets(info) == []
