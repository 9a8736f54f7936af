"""Transactions and producer state through the whole ``Log``: Kafka's ``UnifiedLogTest`` / ``LogLoaderTest`` cases
that the other files of this directory do not port yet, same numbers, plus scenarios of ours.

Ported from ``core/src/test/scala/unit/kafka/log/UnifiedLogTest.scala`` (apache/kafka 1eb7644): testActiveProducers,
testOffsetFromProducerSnapshotFile, testInitializationOfProducerSnapshotsUpgradePath, testProducerExpireCheckAfterDelete,
testProducerIdMapOffsetUpdatedForNonIdempotentData, testRebuildProducerIdMapWithCompactedData,
testRebuildProducerStateWithEmptyCompactedBatch, testUpdateProducerIdMapWithCompactedData (the compacted batches are
built by hand: kafkalog has no ``MemoryRecords.filterTo`` yet), testLoadingLogDeletesProducerStateSnapshotsPastLogEndOffset,
testRebuildTransactionalState, testPeriodicProducerIdExpiration, testTransactionIndexUpdatedThroughReplication,
testZombieCoordinatorFencedEmptyTransaction, testEndTxnWithFencedProducerEpoch, testAppendToTransactionIndexFailure,
testAllowNonZeroSequenceOnFirstAppendNonZeroEpoch (without the verification guard).

Ours (the transactional half of issue #6): the last stable offset and first unstable offset across appends, rolls and
a reopen; ``read(..., TXN_COMMITTED)`` stopping at the LSO with the aborted transactions that overlap the fetch;
crash recovery rebuilding ``.txnindex`` files and producer state; the snapshot taken at a roll named after the new
segment's base and holding an open transaction; duplicates of transactional batches; the cached first-unstable-offset
metadata when the append that opens a transaction rolls the segment.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalog.errors import (
    InvalidProducerEpochError,
    KafkaStorageError,
    TransactionCoordinatorFencedError,
)
from kafkalog.log import FetchIsolation, Log, LogConfig, MockScheduler
from kafkalog.log.producer_state import read_snapshot
from kafkalog.readonly.committed import iter_committed
from kafkalog.records import (
    ControlRecordType,
    MemoryRecords,
    MemoryRecordsBuilder,
    SimpleRecord,
)
from kafkalog.storage import AbortedTxn
from kafkalog.storage.files import offset_from_file_name, producer_snapshot_file
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    append_end_txn_marker,
    append_non_transactional,
    append_transactional,
    assert_valid_log_offset_metadata,
    concat,
    fetched_records,
    records,
    snapshot_offsets,
)


def all_aborted(log: Log) -> list[AbortedTxn]:
    """``LogTestUtils.allAbortedTransactions``."""
    return [t for s in log.segments for t in s.txn_index.all_aborted_txns()]


def append_idempotent(
    log: Log, producer_id: int, producer_epoch: int, time: MockTime
) -> Callable[[int], None]:
    """``LogTestUtils.appendIdempotentAsLeader``."""
    sequence = 0

    def append(n: int) -> None:
        nonlocal sequence
        batch = records(
            [SimpleRecord(str(s).encode(), None, time.milliseconds()) for s in range(sequence, sequence + n)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            sequence=sequence,
        )
        log.append_as_leader(batch, 0)
        sequence += n

    return append


def marker_batch(
    producer_id: int,
    producer_epoch: int,
    offset: int,
    control: ControlRecordType,
    timestamp: int,
    coordinator_epoch: int = 0,
    leader_epoch: int = 0,
) -> MemoryRecords:
    """``appendEndTxnMarkerToBuffer``: a marker at an explicit offset (follower data)."""
    return MemoryRecords.end_transaction_marker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        control_type=control,
        coordinator_epoch=coordinator_epoch,
        base_offset=offset,
        timestamp=timestamp,
        partition_leader_epoch=leader_epoch,
    )


def transactional_to_buffer(
    producer_id: int, producer_epoch: int, leader_epoch: int = 0
) -> Callable[[int, int], MemoryRecords]:
    """``appendTransactionalToBuffer``: ``(offset, n)`` -> a transactional batch at ``offset``."""
    sequence = 0

    def build(offset: int, n: int) -> MemoryRecords:
        nonlocal sequence
        batch = records(
            [SimpleRecord(str(s).encode()) for s in range(sequence, sequence + n)],
            base_offset=offset,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            sequence=sequence,
            transactional=True,
            partition_leader_epoch=leader_epoch,
        )
        sequence += n
        return batch

    return build


def non_transactional_to_buffer(offset: int, n: int) -> MemoryRecords:
    """``appendNonTransactionalToBuffer``."""
    return records(
        [SimpleRecord(str(s).encode()) for s in range(n)], base_offset=offset, partition_leader_epoch=0
    )


def rewrite_batch(
    batch: MemoryRecords, *, last_offset_delta: int, drop_records: bool = False
) -> MemoryRecords:
    """What the cleaner's ``filterTo`` leaves: the batch keeps its last offset delta (and with it the producer's
    last sequence) after records were removed; ``drop_records`` empties it (``RETAIN_EMPTY``)."""
    data = bytearray(batch.to_bytes())
    data[23:27] = last_offset_delta.to_bytes(4, "big")
    if drop_records:
        del data[61:]
        data[8:12] = (61 - 12).to_bytes(4, "big")
        data[57:61] = (0).to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    return MemoryRecords(bytes(data))


def first_unstable(log: Log) -> int | None:
    return log.first_unstable_offset


# --- UnifiedLogTest --------------------------------------------------------------------------------------------


def test_active_producers(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(LogConfig(segment_bytes=1024 * 1024))

    def assert_producer_state(
        pid: int, epoch: int, last_sequence: int, txn_start: int | None, coordinator_epoch: int | None
    ) -> None:
        state = log.producer_state.active_producers()[pid]
        assert state.producer_epoch == epoch
        assert state.last_seq == last_sequence
        assert state.current_txn_first_offset == txn_start
        assert state.coordinator_epoch == (-1 if coordinator_epoch is None else coordinator_epoch)

    # Transactional producer (open transaction).
    producer1_epoch, pid1 = 5, 1
    append_transactional(log, pid1, producer1_epoch, mock_time)(5)
    assert_producer_state(pid1, producer1_epoch, 4, 0, None)
    # Transactional producer (closed transaction).
    coordinator_epoch = 15
    append_end_txn_marker(
        log, pid1, producer1_epoch, ControlRecordType.COMMIT, mock_time.milliseconds(), coordinator_epoch
    )
    assert_producer_state(pid1, producer1_epoch, 4, None, coordinator_epoch)
    # Idempotent producer.
    producer2_epoch, pid2 = 5, 2
    append_idempotent(log, pid2, producer2_epoch, mock_time)(3)
    assert_producer_state(pid2, producer2_epoch, 2, None, None)


def test_offset_from_producer_snapshot_file(tmp_path: Path) -> None:
    offset = 23423423
    assert offset_from_file_name(producer_snapshot_file(tmp_path, offset)) == offset


def test_initialization_of_producer_snapshots_upgrade_path(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    config = LogConfig(segment_bytes=64 * 10)
    log = make_log(config)
    assert log.producer_state.oldest_snapshot_offset() is None
    for i in range(101):
        log.append_as_leader(records([SimpleRecord(str(i).encode(), None, mock_time.milliseconds())]), 0)
    assert log.num_log_segments >= 2
    log_end_offset = log.log_end_offset
    log.close()

    def delete_snapshots() -> None:
        for p in log_dir.glob("*.snapshot"):
            p.unlink()

    delete_snapshots()
    # Reload after a clean shutdown: empty snapshots at the last two segment bases and the log end offset.
    log = make_log(config, recovery_point=log_end_offset)
    expected = [*[s.base_offset for s in log.segments][-2:], log.log_end_offset]
    assert snapshot_offsets(log_dir) == expected
    log.close()

    delete_snapshots()
    # Unclean shutdown, recovery point at the log end offset: the same.
    log = make_log(config, recovery_point=log_end_offset, last_shutdown_clean=False)
    assert snapshot_offsets(log_dir) == expected
    log.close()

    delete_snapshots()
    # Unclean shutdown, recovery point 0: a snapshot for each segment after the recovery point.
    log = make_log(config, recovery_point=0, last_shutdown_clean=False)
    expected = [*[s.base_offset for s in log.segments][1:], log.log_end_offset]
    assert snapshot_offsets(log_dir) == expected
    log.close()


def test_producer_expire_check_after_delete(make_log: LogFactory, scheduler: MockScheduler) -> None:
    log = make_log()
    assert "PeriodicProducerExpirationCheck" in scheduler.pending()
    log.delete()
    assert "PeriodicProducerExpirationCheck" not in scheduler.pending()


def test_producer_id_map_offset_updated_for_non_idempotent_data(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    log.append_as_leader(records([SimpleRecord(b"value", b"key", mock_time.milliseconds())]), 0)
    log.producer_state.take_snapshot()
    assert log.producer_state.latest_snapshot_offset() == 1


def _compacted_batch(ts: int) -> MemoryRecords:
    """The 4-record batch of Kafka's compaction tests at offset 23 after ``filterTo`` removed the keyed records."""
    builder = MemoryRecordsBuilder(
        base_offset=23, producer_id=1, producer_epoch=0, base_sequence=0, partition_leader_epoch=0
    )
    builder.append_with_offset(23, ts, None, b"a")
    builder.append_with_offset(25, ts, None, b"c")
    return rewrite_batch(builder.build(), last_offset_delta=3)


def test_update_producer_id_map_with_compacted_data(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    log.append_as_follower(_compacted_batch(mock_time.milliseconds()))
    assert log.producer_state.active_producers()[1].last_seq == 3


def test_rebuild_producer_id_map_with_compacted_data(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    base_offset = 23
    log.append_as_follower(_compacted_batch(mock_time.milliseconds()))
    # More data, then truncate to force a rebuild of the producer state.
    more = records(
        [
            SimpleRecord(b"e", None, mock_time.milliseconds()),
            SimpleRecord(b"f", None, mock_time.milliseconds()),
        ],
        base_offset=base_offset + 4,
        partition_leader_epoch=0,
    )
    log.append_as_follower(more)
    log.truncate_to(base_offset + 4)
    assert log.producer_state.active_producers()[1].last_seq == 3


def test_rebuild_producer_state_with_empty_compacted_batch(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    base_offset = 23
    ts = mock_time.milliseconds()
    full = records(
        [SimpleRecord(b"a", b"key", ts), SimpleRecord(b"b", b"key", ts)],
        base_offset=base_offset,
        producer_id=1,
        producer_epoch=0,
        sequence=0,
        partition_leader_epoch=0,
    )
    log.append_as_follower(rewrite_batch(full, last_offset_delta=1, drop_records=True))
    more = records(
        [SimpleRecord(b"e", None, ts), SimpleRecord(b"f", None, ts)],
        base_offset=base_offset + 2,
        partition_leader_epoch=0,
    )
    log.append_as_follower(more)
    log.truncate_to(base_offset + 2)
    assert log.producer_state.active_producers()[1].last_seq == 1


def test_loading_log_deletes_producer_state_snapshots_past_log_end_offset(
    make_log: LogFactory, log_dir: Path
) -> None:
    log_dir.mkdir(parents=True)
    producer_snapshot_file(log_dir, 42).touch()
    make_log(LogConfig(segment_bytes=2048 * 5, retention_bytes=-1, file_delete_delay_ms=0))
    assert snapshot_offsets(log_dir) == [], "snapshots past the log end offset must be cleaned up"


def test_rebuild_transactional_state(make_log: LogFactory, mock_time: MockTime) -> None:
    config = LogConfig(segment_bytes=1024 * 1024 * 5)
    log = make_log(config)
    pid, epoch = 137, 5
    log.append_as_leader(
        MemoryRecords.build(
            [SimpleRecord(b"foo"), SimpleRecord(b"bar"), SimpleRecord(b"baz")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            is_transactional=True,
        ),
        0,
    )
    abort = append_end_txn_marker(log, pid, epoch, ControlRecordType.ABORT, mock_time.milliseconds())
    log.update_high_watermark(abort.last_offset + 1)
    assert first_unstable(log) is None
    log.close()

    reopened = make_log(config, last_shutdown_clean=False)
    reopened.update_high_watermark(abort.last_offset + 1)
    assert first_unstable(reopened) is None


def test_periodic_producer_id_expiration(make_log: LogFactory, mock_time: MockTime) -> None:
    check_interval = 100
    log = make_log(
        LogConfig(
            segment_bytes=2048 * 5,
            producer_id_expiration_ms=200,
            producer_id_expiration_check_interval_ms=check_interval,
        )
    )
    pid = 23
    log.append_as_leader(
        records(
            [SimpleRecord(b"foo", None, mock_time.milliseconds())],
            producer_id=pid,
            producer_epoch=0,
            sequence=0,
        ),
        0,
    )
    assert set(log.producer_state.active_producers()) == {pid}
    mock_time.sleep(check_interval)
    assert set(log.producer_state.active_producers()) == {pid}
    mock_time.sleep(check_interval)
    assert set(log.producer_state.active_producers()) == set()


def _assert_cached_first_unstable_offset(log: Log, expected: int) -> None:
    fuo = log.producer_state.first_unstable_offset()
    assert fuo is not None and fuo.message_offset == expected
    assert not fuo.message_offset_only
    assert_valid_log_offset_metadata(log, fuo)


def test_transaction_index_updated_through_replication(make_log: LogFactory, mock_time: MockTime) -> None:
    epoch = 0
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    pid1, pid2, pid3, pid4 = 1, 2, 3, 4
    append1, append2, append3, append4 = (transactional_to_buffer(p, epoch) for p in (pid1, pid2, pid3, pid4))
    ts = mock_time.milliseconds()
    buffer = concat(
        append1(0, 5),
        non_transactional_to_buffer(5, 3),
        append2(8, 2),
        append1(10, 4),
        append3(14, 3),
        non_transactional_to_buffer(17, 2),
        append1(19, 10),
        marker_batch(pid1, epoch, 29, ControlRecordType.ABORT, ts),
        append2(30, 6),
        append4(36, 3),
        non_transactional_to_buffer(39, 10),
        append3(49, 9),
        marker_batch(pid3, epoch, 58, ControlRecordType.COMMIT, ts),
        append4(59, 8),
        append2(67, 7),
        marker_batch(pid2, epoch, 74, ControlRecordType.ABORT, ts),
        non_transactional_to_buffer(75, 10),
        append4(85, 4),
        marker_batch(pid4, epoch, 89, ControlRecordType.COMMIT, ts),
    )
    log.append_as_follower(buffer)
    assert all_aborted(log) == [AbortedTxn(pid1, 0, 29, 8), AbortedTxn(pid2, 8, 74, 36)]

    log.update_high_watermark(30)
    _assert_cached_first_unstable_offset(log, 8)
    log.update_high_watermark(75)
    _assert_cached_first_unstable_offset(log, 36)
    log.update_high_watermark(log.log_end_offset)
    assert first_unstable(log) is None


def test_zombie_coordinator_fenced_empty_transaction(make_log: LogFactory, mock_time: MockTime) -> None:
    pid, epoch = 1, 0
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    append = transactional_to_buffer(pid, epoch, leader_epoch=1)
    log.append_as_follower(
        concat(
            append(0, 10),
            marker_batch(pid, epoch, 10, ControlRecordType.COMMIT, mock_time.milliseconds(), 0, 1),
        )
    )
    now = mock_time.milliseconds()
    append_end_txn_marker(log, pid, epoch, ControlRecordType.ABORT, now, coordinator_epoch=2, leader_epoch=1)
    append_end_txn_marker(log, pid, epoch, ControlRecordType.ABORT, now, coordinator_epoch=2, leader_epoch=1)
    with pytest.raises(TransactionCoordinatorFencedError):
        append_end_txn_marker(
            log, pid, epoch, ControlRecordType.ABORT, now, coordinator_epoch=1, leader_epoch=1
        )


def test_end_txn_with_fenced_producer_epoch(make_log: LogFactory, mock_time: MockTime) -> None:
    pid, epoch = 1, 5
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    append_end_txn_marker(
        log, pid, epoch, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1
    )
    leo = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        append_end_txn_marker(
            log, pid, epoch - 1, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1
        )
    assert log.log_end_offset == leo


def test_append_to_transaction_index_failure(make_log: LogFactory, mock_time: MockTime) -> None:
    pid, epoch = 1, 0
    config = LogConfig(segment_bytes=1024 * 1024 * 5)
    log = make_log(config)
    append_transactional(log, pid, epoch, mock_time)(10)

    # Kafka's hack: point the index at a directory so that the write to it fails.
    log.active_segment.txn_index.rename_to(log.dir)

    # The marker reaches the log, the index write fails.
    with pytest.raises(KafkaStorageError):
        append_end_txn_marker(
            log, pid, epoch, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1
        )
    assert log.log_end_offset == 11
    assert log.last_stable_offset == 0

    # The directory is offline now: the retry writes nothing.
    with pytest.raises(KafkaStorageError):
        append_end_txn_marker(
            log, pid, epoch, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1
        )
    assert log.log_end_offset == 11
    assert log.last_stable_offset == 0

    # The first unstable offset does not move with the high watermark.
    log.update_high_watermark(12)
    assert log.last_stable_offset == 0

    with pytest.raises(KafkaStorageError):
        log.close()
    reopened = make_log(config, last_shutdown_clean=False)
    assert reopened.log_end_offset == 11
    assert len(reopened.active_segment.txn_index.all_aborted_txns()) == 1
    reopened.update_high_watermark(12)
    assert first_unstable(reopened) is None


def test_allow_non_zero_sequence_on_first_append_non_zero_epoch(make_log: LogFactory) -> None:
    log = make_log(LogConfig(segment_bytes=2048 * 5))
    info = log.append_as_leader(
        MemoryRecords.build(
            [SimpleRecord(b"1"), SimpleRecord(b"2")],
            producer_id=23,
            producer_epoch=1,
            base_sequence=3,
            is_transactional=True,
        ),
        0,
    )
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert log.producer_state.active_producers()[23].last_seq == 4


# --- ours: LSO, read_committed, recovery, snapshots --------------------------------------------------------------


def test_last_stable_offset_across_appends_rolls_and_reopen(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    config = LogConfig(segment_bytes=300)
    log = make_log(config)
    p1 = append_transactional(log, 1, 0, mock_time)
    p2 = append_transactional(log, 2, 0, mock_time)
    now = mock_time.milliseconds

    p1(3)  # 0..2
    append_non_transactional(log, 2)  # 3..4
    p2(2)  # 5..6
    assert (first_unstable(log), log.last_stable_offset) == (0, 0)  # HW 0
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    append_end_txn_marker(log, 1, 0, ControlRecordType.COMMIT, now())  # 7
    # The marker is past the high watermark: the transaction is complete but still unstable.
    assert (first_unstable(log), log.last_stable_offset) == (0, 0)
    log.update_high_watermark(7)
    assert (first_unstable(log), log.last_stable_offset) == (0, 0)
    log.update_high_watermark(8)
    assert (first_unstable(log), log.last_stable_offset) == (5, 5)
    p1(4)  # 8..11, a new transaction of producer 1
    append_non_transactional(log, 3)  # 12..14
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 5
    append_end_txn_marker(log, 2, 0, ControlRecordType.ABORT, now())  # 15
    log.update_high_watermark(log.log_end_offset)
    assert (first_unstable(log), log.last_stable_offset) == (8, 8)
    assert log.num_log_segments > 1
    assert all_aborted(log) == [AbortedTxn(2, 5, 15, 8)]

    # A clean reopen keeps the open transaction of producer 1 (snapshot at the log end offset).
    log.close()
    log = make_log(config)
    assert (first_unstable(log), log.last_stable_offset) == (8, log.log_start_offset)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 8
    append_end_txn_marker(log, 1, 0, ControlRecordType.COMMIT, now())  # 16
    log.update_high_watermark(log.log_end_offset)
    assert (first_unstable(log), log.last_stable_offset) == (None, 17)


def _mixed_log(log: Log, time: MockTime) -> None:
    """pid 1 aborted around pid 2 committed, non-transactional data in between; pid 3 left open."""
    p1 = append_transactional(log, 1, 0, time)
    p2 = append_transactional(log, 2, 0, time)
    p3 = append_transactional(log, 3, 0, time)
    p1(2)  # 0..1
    append_non_transactional(log, 1)  # 2
    p2(2)  # 3..4
    p1(2)  # 5..6
    append_end_txn_marker(log, 1, 0, ControlRecordType.ABORT, time.milliseconds())  # 7
    append_non_transactional(log, 2)  # 8..9
    p2(1)  # 10
    append_end_txn_marker(log, 2, 0, ControlRecordType.COMMIT, time.milliseconds())  # 11
    p1(2)  # 12..13
    append_end_txn_marker(log, 1, 0, ControlRecordType.ABORT, time.milliseconds())  # 14
    append_non_transactional(log, 1)  # 15
    p3(2)  # 16..17 (open)
    append_non_transactional(log, 1)  # 18


MIXED_ABORTED = [AbortedTxn(1, 0, 7, 3), AbortedTxn(1, 12, 14, 15)]
MIXED_COMMITTED_BELOW_16 = [2, 3, 4, 8, 9, 10, 15]


def test_read_committed_stops_at_lso_and_reports_aborted_transactions(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    _mixed_log(log, mock_time)
    assert all_aborted(log) == MIXED_ABORTED
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 16

    info = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    offsets = [r.offset for r in fetched_records(info)]
    assert offsets == list(range(16))  # every batch below the LSO, markers included, nothing at or past it
    assert info.aborted_transactions == MIXED_ABORTED

    # A fetch that starts after the first aborted transaction's marker only gets the second one.
    info = log.read(8, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert next(r.offset for r in fetched_records(info)) == 8
    assert info.aborted_transactions == [MIXED_ABORTED[1]]
    # ... and one that starts inside the first aborted transaction gets both.
    info = log.read(5, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert info.aborted_transactions == MIXED_ABORTED
    # At the LSO there is nothing to read.
    info = log.read(16, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert list(info.records.batches()) == []
    # A high-watermark read is not bounded by the LSO and reports no aborted transactions.
    info = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    assert [r.offset for r in fetched_records(info)][-1] == 18
    assert info.aborted_transactions is None

    assert [r.offset for r in iter_committed(log)] == MIXED_COMMITTED_BELOW_16
    # Small fetches (one batch each) give the same records.
    assert [r.offset for r in iter_committed(log, max_fetch_bytes=1)] == MIXED_COMMITTED_BELOW_16
    assert [r.offset for r in iter_committed(log, 5, 12)] == [8, 9, 10]

    # Once producer 3 commits the rest is visible.
    append_end_txn_marker(log, 3, 0, ControlRecordType.COMMIT, mock_time.milliseconds())
    log.update_high_watermark(log.log_end_offset)
    assert [r.offset for r in iter_committed(log)] == [*MIXED_COMMITTED_BELOW_16, 16, 17, 18]


def test_crash_recovery_rebuilds_txn_index_and_producer_state(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    config = LogConfig(segment_bytes=200)
    log = make_log(config)
    _mixed_log(log, mock_time)
    assert log.num_log_segments > 3
    aborted = all_aborted(log)
    assert aborted == MIXED_ABORTED
    producers = {
        pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.current_txn_first_offset)
        for pid, e in log.producer_state.active_producers().items()
    }
    log.update_high_watermark(log.log_end_offset)
    lso, leo = log.last_stable_offset, log.log_end_offset
    committed = [r.offset for r in iter_committed(log)]

    # A crash (no close): copy the directory while the log is open, then lose every derived file.
    crashed = log_dir.parent / "crashed-1"
    shutil.copytree(log_dir, crashed)
    log.close()
    for p in crashed.iterdir():
        if p.suffix in (".txnindex", ".snapshot", ".index", ".timeindex"):
            p.unlink()
    recovered = make_log(config, directory=crashed, last_shutdown_clean=False)
    assert all_aborted(recovered) == aborted
    assert {
        pid: (e.producer_epoch, e.last_seq, e.last_data_offset, e.current_txn_first_offset)
        for pid, e in recovered.producer_state.active_producers().items()
    } == producers
    assert recovered.log_end_offset == leo
    assert first_unstable(recovered) == 16
    recovered.update_high_watermark(recovered.log_end_offset)
    assert recovered.last_stable_offset == lso
    assert [r.offset for r in iter_committed(recovered)] == committed
    # The recovered producer state goes on where it left: pid 3 continues its transaction at sequence 2.
    batch = records(
        [SimpleRecord(b"2", None, mock_time.milliseconds())],
        producer_id=3,
        producer_epoch=0,
        sequence=2,
        transactional=True,
    )
    info = recovered.append_as_leader(batch, 0)
    assert info.first_offset == leo


def test_snapshot_at_roll_holds_open_transaction(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    config = LogConfig(segment_bytes=1024 * 1024)
    log = make_log(config)
    append_transactional(log, 7, 1, mock_time)(3)  # 0..2, open
    append_non_transactional(log, 2)  # 3..4
    new_segment = log.roll()
    assert new_segment.base_offset == 5
    assert snapshot_offsets(log_dir) == [5]
    rows = {e.producer_id: e for e in read_snapshot(producer_snapshot_file(log_dir, 5))}
    assert rows[7].current_txn_first_offset == 0
    assert (rows[7].last_seq, rows[7].last_data_offset) == (2, 2)

    # Append after the roll, then crash: the reload starts from the roll's snapshot and replays the new segment.
    append_end_txn_marker(log, 7, 1, ControlRecordType.ABORT, mock_time.milliseconds())  # 5
    append_transactional(log, 8, 0, mock_time)(2)  # 6..7
    crashed = log_dir.parent / "crashed-1"
    shutil.copytree(log_dir, crashed)
    log.close()
    assert snapshot_offsets(crashed) == [5]
    recovered = make_log(config, directory=crashed, recovery_point=5, last_shutdown_clean=False)
    assert first_unstable(recovered) == 6
    assert all_aborted(recovered) == [AbortedTxn(7, 0, 5, 6)]
    assert recovered.producer_state.active_producers()[7].current_txn_first_offset is None


def test_roll_snapshot_named_after_new_segment_base_on_append(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    """A size roll during a transactional append: the snapshot is named after the new base, taken before the append."""
    log = make_log(LogConfig(segment_bytes=1024))
    append = append_transactional(log, 4, 0, mock_time)
    big = [SimpleRecord(bytes(512), None, mock_time.milliseconds())]
    log.append_as_leader(records(big, producer_id=4, producer_epoch=0, sequence=0, transactional=True), 0)
    log.append_as_leader(records(big, producer_id=4, producer_epoch=0, sequence=1, transactional=True), 0)
    del append
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert snapshot_offsets(log_dir) == [1]
    (row,) = read_snapshot(producer_snapshot_file(log_dir, 1))
    assert (row.producer_id, row.last_seq, row.last_data_offset, row.current_txn_first_offset) == (4, 0, 0, 0)


def test_first_unstable_offset_metadata_after_roll_on_append(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """The append that opens a transaction rolls: the cached first-offset metadata names the new segment
    (Kafka rolls before it analyses the producer state; fixed in 8998038, found by this test)."""
    log = make_log(LogConfig(segment_bytes=1024))
    log.append_as_leader(records([SimpleRecord(bytes(600), None, mock_time.milliseconds())]), 0)
    batch = records(
        [SimpleRecord(bytes(600), None, mock_time.milliseconds())],
        producer_id=4,
        producer_epoch=0,
        sequence=0,
        transactional=True,
    )
    log.append_as_leader(batch, 0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    fuo = log.producer_state.first_unstable_offset()
    assert fuo is not None
    assert (fuo.message_offset, fuo.segment_base_offset, fuo.relative_position_in_segment) == (1, 1, 0)
    assert_valid_log_offset_metadata(log, fuo)


def test_transactional_duplicates_return_original_offsets(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    config = LogConfig(segment_bytes=1024 * 1024)
    log = make_log(config)
    ts = mock_time.milliseconds()

    def txn_batch(seq: int, n: int) -> MemoryRecords:
        return records(
            [SimpleRecord(b"%d" % s, None, ts) for s in range(seq, seq + n)],
            producer_id=9,
            producer_epoch=2,
            sequence=seq,
            transactional=True,
        )

    first = log.append_as_leader(txn_batch(0, 2), 0)  # 0..1
    append_non_transactional(log, 1)  # 2
    second = log.append_as_leader(txn_batch(2, 3), 0)  # 3..5
    leo = log.log_end_offset
    for batch, original in ((txn_batch(0, 2), first), (txn_batch(2, 3), second)):
        dup = log.append_as_leader(batch, 0)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (original.first_offset, original.last_offset)
    assert log.log_end_offset == leo
    # After a commit the retried batch is still a duplicate (same epoch), not a new transaction.
    append_end_txn_marker(log, 9, 2, ControlRecordType.COMMIT, ts)
    dup = log.append_as_leader(txn_batch(2, 3), 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 5)
    assert log.producer_state.active_producers()[9].current_txn_first_offset is None
    # After a clean reopen only the last batch is remembered.
    log.close()
    log = make_log(config)
    dup = log.append_as_leader(txn_batch(2, 3), 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 5)
    log.update_high_watermark(log.log_end_offset)
    assert [r.value for r in iter_committed(log)] == [b"0", b"1", b"0", b"2", b"3", b"4"]
