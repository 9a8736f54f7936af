"""Kafka's ``LogCleanerTest`` (3.9), the transaction half, ported with the same numbers: aborted data removed
regardless of keys, markers kept until their transaction is empty and their delete horizon has passed, the
transaction index kept right, producers' last batches (emptied if need be) retained, multi-pass cleaning."""

from __future__ import annotations

from kafkalog.cleaner.cleaner import CleanerStats
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.log import AppendOrigin, Log
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage.txn_index import AbortedTxn
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import records
from .test_cleaner_helpers import (
    INT_MAX,
    LARGE_TIMESTAMP,
    LONG_MAX,
    append_idempotent,
    batch_base_offsets,
    config,
    keys_in_log,
    last_offsets_per_batch,
    last_sequences,
    ltc,
    make_cleaner,
    marker,
    offsets_in_log,
    record,
    two_pass_clean,
)

COMMIT = ControlRecordType.COMMIT
ABORT = ControlRecordType.ABORT


def all_aborted(log: Log) -> list[AbortedTxn]:
    return log.collect_aborted_transactions(0, log.log_end_offset)


def test_multi_pass_segment_cleaning_with_aborted_transactions(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    delete_retention_ms = 50_000
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(delete_retention_ms=delete_retention_ms))
    p1 = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p2 = append_idempotent(log, 2, 0, mock_time, transactional=True)

    def end(pid: int, control: ControlRecordType) -> None:
        batch = MemoryRecords.end_transaction_marker(
            producer_id=pid,
            producer_epoch=0,
            control_type=control,
            coordinator_epoch=0,
            timestamp=mock_time.milliseconds(),
        )
        log.append_as_leader(batch, 0, AppendOrigin.REPLICATION)

    p1([1, 2])  # [0, 1]
    p2([2, 3])  # [2, 3]
    p1([3, 4])  # [4, 5]
    end(1, COMMIT)  # 6
    end(2, COMMIT)  # 7
    p1([2, 3])  # [8, 9]
    end(1, ABORT)  # 10
    p2([4, 5])  # [11, 12]
    p1([5, 6])  # [13, 14]
    end(1, COMMIT)  # 15
    end(2, ABORT)  # 16
    p2([6, 7])  # [17, 18]
    end(2, COMMIT)  # 19
    log.roll()
    assert log.log_end_offset == 20
    expected = [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]
    assert all(p.current_txn_first_offset is None for p in log.producer_state.active_producers().values())
    assert all_aborted(log) == expected

    dirty = 0

    def clean() -> None:
        nonlocal dirty
        offset_map = SkimpyOffsetMap(slots=4)
        segments = log.local_log.segments.values(0, log.active_segment.base_offset)
        stats = CleanerStats(mock_time)
        cleaner.build_offset_map(log, dirty, log.active_segment.base_offset, offset_map, stats)
        cleaner.clean_segments(
            log,
            segments,
            offset_map,
            mock_time.milliseconds(),
            stats,
            CleanedTransactionMetadata(),
            LONG_MAX,
            segments[-1].read_next_offset(),
        )
        dirty = offset_map.latest_offset + 1

    clean()
    assert dirty == 4
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(log) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert all_aborted(log) == expected

    clean()
    assert dirty == 14
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets_in_log(log) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert all_aborted(log) == []

    mock_time.sleep(delete_retention_ms)
    clean()
    assert dirty == 20
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert offsets_in_log(log) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert all_aborted(log) == []


def test_basic_transaction_aware_cleaning(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=2048))
    p1 = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p2 = append_idempotent(log, 2, 0, mock_time, transactional=True)
    p1([1, 2])
    p2([2, 3])
    p1([3, 4])
    marker(log, 1, 0, ABORT, mock_time)
    marker(log, 2, 0, COMMIT, mock_time)
    p1([2])
    marker(log, 1, 0, COMMIT, mock_time)
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert keys_in_log(log) == [3, 2]
    assert offsets_in_log(log) == [3, 6, 7, 8, 9]
    assert log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset) == aborted


def test_clean_with_transactions_spanning_segments(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024))
    p1 = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p2 = append_idempotent(log, 2, 0, mock_time, transactional=True)
    p3 = append_idempotent(log, 3, 0, mock_time, transactional=True)
    p1([1, 2])
    p3([2, 3])
    p2([3, 4])
    log.roll()
    p2([5, 6])
    p3([6, 7])
    p1([7, 8])
    marker(log, 2, 0, ABORT, mock_time)
    p3([8, 9])
    marker(log, 3, 0, COMMIT, mock_time)
    p1([9, 10])
    marker(log, 1, 0, ABORT, mock_time)
    # the LSO is past every marker; only the first segment is cleanable
    dirty = cleaner.clean(ltc(log, 0))[0]
    assert keys_in_log(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    log.roll()
    p2([11])
    p1([12])
    cleaner.clean(ltc(log, dirty))
    assert keys_in_log(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=256))
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([1])
    p([2, 3])
    marker(log, 1, 0, COMMIT, mock_time)
    p([2])
    marker(log, 1, 0, COMMIT, mock_time)
    log.roll()
    dirty = cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [1, 3, 2]
    assert offsets_in_log(log) == [0, 2, 3, 4, 5]
    p([1, 3])
    marker(log, 1, 0, COMMIT, mock_time)
    log.roll()
    dirty = cleaner.do_clean(ltc(log, dirty), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    dirty = cleaner.do_clean(ltc(log, dirty), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    dirty = cleaner.do_clean(ltc(log, dirty), LONG_MAX)[0]
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX, max_message_size=100)
    log = make_log(config(max_message_bytes=100, segment_bytes=1000))
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([1])
    marker(log, 1, 0, ABORT, mock_time)
    p([2])
    p([2])
    marker(log, 1, 0, COMMIT, mock_time)
    log.roll()
    cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [1, 3, 4]
    two_pass_clean(cleaner, ltc(log, 0), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2]
    assert offsets_in_log(log) == [3, 4]


def test_commit_marker_retention_with_empty_batch(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=256))
    producer1 = append_idempotent(log, 1, 0, mock_time, transactional=True)
    producer2 = append_idempotent(log, 2, 0, mock_time, transactional=True)
    producer1([2, 3])  # 0, 1
    log.roll()
    producer2([2, 3])  # 2, 3
    marker(log, 2, 0, COMMIT, mock_time)  # 4
    log.roll()
    log.append_as_leader(record(2, 2), 0)  # 5
    log.append_as_leader(record(3, 3), 0)  # 6
    marker(log, 1, 0, COMMIT, mock_time)  # 7
    log.roll()
    dirty = cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    dirty = cleaner.do_clean(ltc(log, dirty), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    producer2([1])  # 8
    marker(log, 2, 0, COMMIT, mock_time)  # 9
    log.roll()
    dirty = cleaner.do_clean(ltc(log, dirty), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 4, 5, 6, 7, 8, 9]
    dirty = two_pass_clean(cleaner, ltc(log, dirty), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 5, 6, 7, 8, 9]


def test_clean_empty_control_batch(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=256))
    marker(log, 1, 0, COMMIT, mock_time)  # 0
    log.append_as_leader(record(2, 2), 0)  # 1
    log.append_as_leader(record(3, 3), 0)  # 2
    log.roll()
    dirty = two_pass_clean(cleaner, ltc(log, 0), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_per_batch(log) == [0, 1, 2]
    dirty = cleaner.do_clean(ltc(log, dirty), LONG_MAX)[0]
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_per_batch(log) == [0, 1, 2]


def test_committed_transaction_spanning_segments(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=128))
    append_idempotent(log, 1, 0, mock_time, transactional=True)([1])
    log.roll()
    marker(log, 1, 0, COMMIT, mock_time)
    log.roll()
    two_pass_clean(cleaner, ltc(log, 0), LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [0, 1]
    assert last_offsets_per_batch(log) == [0, 1]


def test_aborted_transaction_spanning_segments(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=128))
    append_idempotent(log, 1, 0, mock_time, transactional=True)([1])
    log.roll()
    marker(log, 1, 0, ABORT, mock_time)
    log.roll()
    cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [1]
    assert last_offsets_per_batch(log) == [0, 1]
    cleaner.do_clean(ltc(log, 0), LONG_MAX)
    assert offsets_in_log(log) == [1]
    assert last_offsets_per_batch(log) == [0, 1]


def test_abort_marker_removal(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=256))
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([1])
    p([2, 3])
    marker(log, 1, 0, ABORT, mock_time)
    p([3])
    marker(log, 1, 0, COMMIT, mock_time)
    log.roll()
    dirty = cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)[0]
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [3, 4, 5]
    two_pass_clean(cleaner, ltc(log, dirty), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=2048))
    append_idempotent(log, 1, 0, mock_time, transactional=True, origin=AppendOrigin.REPLICATION)([1])
    marker(log, 1, 0, COMMIT, mock_time)
    append_idempotent(log, 1, 0, mock_time, transactional=True, origin=AppendOrigin.REPLICATION)([2])
    marker(log, 1, 0, COMMIT, mock_time)
    log.append_as_leader(record(1, 1), 0)
    log.append_as_leader(record(2, 1), 0)
    log.roll()
    cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [1, 3, 4, 5]
    assert last_offsets_per_batch(log) == [1, 2, 3, 4, 5]
    two_pass_clean(cleaner, ltc(log, 0), LARGE_TIMESTAMP)
    assert offsets_in_log(log) == [3, 4, 5]
    assert last_offsets_per_batch(log) == [2, 3, 4, 5]


def test_abort_marker_retention_with_empty_batch(make_log: LogFactory, mock_time: MockTime) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=256))
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([2, 3])  # last offset 1
    marker(log, 1, 0, ABORT, mock_time)
    log.roll()

    def assert_indexed() -> None:
        txns = log.collect_aborted_transactions(0, 100)
        assert len(txns) == 1
        assert (txns[0].producer_id, txns[0].first_offset, txns[0].last_offset) == (1, 0, 2)

    assert_indexed()
    dirty = cleaner.do_clean(ltc(log, 0), LARGE_TIMESTAMP)[0]
    assert_indexed()
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [2]
    assert last_offsets_per_batch(log) == [1, 2]
    dirty = two_pass_clean(cleaner, ltc(log, dirty), LARGE_TIMESTAMP)
    assert_indexed()
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [2]
    assert last_offsets_per_batch(log) == [1, 2]
    p([1])
    log.roll()
    dirty = cleaner.do_clean(ltc(log, dirty), LARGE_TIMESTAMP)[0]
    assert_indexed()
    assert keys_in_log(log) == [1]
    assert offsets_in_log(log) == [2, 3]
    assert last_offsets_per_batch(log) == [2, 3]
    dirty = two_pass_clean(cleaner, ltc(log, dirty), LARGE_TIMESTAMP)
    assert keys_in_log(log) == [1]
    assert offsets_in_log(log) == [3]
    assert last_offsets_per_batch(log) == [3]
    assert log.collect_aborted_transactions(0, 100) == []


def test_log_cleaner_retains_last_sequence_even_if_transaction_aborted(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    cleaner = make_cleaner(10)
    log = make_log(config(segment_bytes=1024))
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([1])
    p([2, 3])
    marker(log, 1, 0, ABORT, mock_time)
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert last_offsets_per_batch(log) == [2, 3]
    assert last_sequences(log) == {1: 2}
    assert keys_in_log(log) == []
    assert offsets_in_log(log) == [3]
    p([1, 5])
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert last_offsets_per_batch(log) == [3, 5]
    assert last_sequences(log) == {1: 4}
    assert keys_in_log(log) == [1, 5]
    assert offsets_in_log(log) == [3, 4, 5]


def test_cleaning_with_keys_conflicting_with_txn_marker_keys(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    cleaner = make_cleaner(10)
    log = make_log(config(segment_bytes=1024))
    append_idempotent(log, 1, 0, mock_time, transactional=True, leader_epoch=5)([1])
    marker(log, 1, 0, COMMIT, mock_time, leader_epoch=5)
    conflicting = records(
        [SimpleRecord(b"foo", COMMIT.record_key(), mock_time.milliseconds())],
        producer_id=2,
        producer_epoch=0,
        sequence=0,
        transactional=True,
    )
    log.append_as_leader(conflicting, 5)
    marker(log, 2, 0, COMMIT, mock_time, leader_epoch=5)
    log.roll()
    assert offsets_in_log(log) == [0, 1, 2, 3]
    cleaner.clean(ltc(log, 0))
    assert last_offsets_per_batch(log) == [0, 1, 2, 3]
    assert offsets_in_log(log) == [0, 1, 2, 3]
