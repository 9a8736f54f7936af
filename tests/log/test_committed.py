"""Unit tests of :mod:`kafkalog.readonly.committed`: a ``read_committed`` consumer's view of fetched batches.

Ported from Kafka's consumer ``FetcherTest`` (``clients/src/test/java/.../consumer/internals/FetcherTest.java``,
apache/kafka 1eb7644), same offsets and keys: testFetcherIgnoresControlRecords, testSkippingAbortedTransactions,
testReturnCommittedTransactions, testReadCommittedWithCommittedAndAbortedTransactions, testMultipleAbortMarkers,
testReadCommittedAbortMarkerWithNoData, testUpdatePositionWithLastRecordMissingFromBatch,
testUpdatePositionOnEmptyBatch, testReadCommittedWithCompactedTopic,
testConsumerPositionUpdatedWhenSkippingAbortedTransactions. (testReturnAbortedTransactionsInUncommittedMode is the
``HIGH_WATERMARK`` read: no helper involved.)

Ours: the aborted transactions are used in first-offset order whatever order they come in, a fetch that starts
inside an aborted transaction, non-transactional batches of an aborted producer id, ``start_offset`` / ``end_offset``
inside batches, several fetches (overlapping ones too), ``(producer_id, first_offset)`` pairs, CRC checks, and the
read-only path: the batches of the segment files and the entries of the ``.txnindex`` files of a directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalog.errors import CorruptRecordError
from kafkalog.log import LogConfig
from kafkalog.readonly.committed import CommittedRecords, Fetch, committed_records, iter_committed
from kafkalog.records import ControlRecordType, MemoryRecords, MemoryRecordsBuilder, SimpleRecord
from kafkalog.storage import AbortedTxn, FetchDataInfo, FileRecords, LogOffsetMetadata, TransactionIndex
from kafkalog.storage.files import offset_from_file_name
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import append_end_txn_marker, append_non_transactional, append_transactional, concat, records

NOW = 1_700_000_000_000


def txn_records(pid: int, base_offset: int, *keys: bytes, sequence: int | None = None) -> MemoryRecords:
    """FetcherTest's ``appendTransactionalRecords``: epoch 0, base sequence = base offset."""
    return records(
        [SimpleRecord(b"value", k, NOW) for k in keys],
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0,
        sequence=base_offset if sequence is None else sequence,
        transactional=True,
    )


def marker(pid: int, offset: int, control: ControlRecordType) -> MemoryRecords:
    """FetcherTest's ``commitTransaction`` / ``abortTransaction`` (partition leader epoch 0)."""
    return MemoryRecords.end_transaction_marker(
        producer_id=pid,
        producer_epoch=0,
        control_type=control,
        coordinator_epoch=0,
        base_offset=offset,
        timestamp=NOW,
        partition_leader_epoch=0,
    )


def commit(pid: int, offset: int) -> MemoryRecords:
    return marker(pid, offset, ControlRecordType.COMMIT)


def abort(pid: int, offset: int) -> MemoryRecords:
    return marker(pid, offset, ControlRecordType.ABORT)


def keys(fetch: CommittedRecords) -> list[bytes | None]:
    return [r.key for r in fetch]


# --- FetcherTest -------------------------------------------------------------------------------------------------


def test_fetcher_ignores_control_records() -> None:
    data = concat(
        records([SimpleRecord(None, b"key", 0)], producer_id=1, producer_epoch=0, sequence=0),
        abort(1, 1),
    )
    fetch = committed_records(data, None)
    got = list(fetch)
    assert [(r.offset, r.key) for r in got] == [(0, b"key")]
    assert fetch.next_offset == 2


def test_skipping_aborted_transactions() -> None:
    data = concat(txn_records(1, 0, b"key", b"key"), abort(1, 2))
    fetch = committed_records(data, [AbortedTxn(1, 0, 2, 3)])
    assert list(fetch) == []
    assert fetch.next_offset == 3  # the position still advances


def test_return_committed_transactions() -> None:
    data = concat(txn_records(1, 0, b"key", b"key"), commit(1, 2))
    assert len(list(committed_records(data, []))) == 2


def test_read_committed_with_committed_and_aborted_transactions() -> None:
    pid1, pid2 = 1, 2
    data = concat(
        txn_records(pid1, 0, b"commit1-1", b"commit1-2"),
        txn_records(pid2, 2, b"abort2-1"),
        commit(pid1, 3),
        txn_records(pid2, 4, b"abort2-2"),
        abort(pid2, 5),
        txn_records(pid1, 6, b"abort1-1"),
        txn_records(pid2, 7, b"commit2-1"),
        txn_records(pid1, 8, b"abort1-2"),
        abort(pid1, 9),
        commit(pid2, 10),
    )
    aborted = [(pid2, 2), (pid1, 6)]
    assert keys(committed_records(data, aborted)) == [b"commit1-1", b"commit1-2", b"commit2-1"]


def test_multiple_abort_markers() -> None:
    data = concat(
        txn_records(1, 0, b"abort1-1", b"abort1-2"),
        abort(1, 2),
        abort(1, 3),  # a duplicate abort: ignored
        txn_records(1, 4, b"commit1-1", b"commit1-2"),
        commit(1, 6),
    )
    assert keys(committed_records(data, [(1, 0)])) == [b"commit1-1", b"commit1-2"]


def test_read_committed_abort_marker_with_no_data() -> None:
    data = concat(
        abort(1, 5),
        txn_records(1, 6, b"6", b"7", b"8"),
        commit(1, 9),
    )
    # The aborted transaction begins at an offset no longer in the log.
    assert [r.offset for r in committed_records(data, [(1, 0)])] == [6, 7, 8]


def test_update_position_with_last_record_missing_from_batch() -> None:
    builder = MemoryRecordsBuilder(base_offset=0)
    for i in range(3):
        builder.append_with_offset(i, NOW, str(i).encode(), b"v")
    # The fourth record (offset 3, no key) was removed by compaction; the batch keeps last offset delta 3.
    data = bytearray(builder.build().to_bytes())
    data[23:27] = (3).to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    fetch = committed_records(MemoryRecords(bytes(data)))
    assert keys(fetch) == [b"0", b"1", b"2"]
    assert fetch.next_offset == 4  # the next batch


def test_update_position_on_empty_batch() -> None:
    base_offset, last_offset = 37, 54
    one = records(
        [SimpleRecord(b"x", None, NOW)], base_offset=base_offset, producer_id=1, producer_epoch=0, sequence=1
    )
    data = bytearray(one.to_bytes())
    del data[61:]  # DefaultRecordBatch.writeEmptyHeader: a header and no records
    data[8:12] = (61 - 12).to_bytes(4, "big")
    data[12:16] = (7).to_bytes(4, "big")
    data[23:27] = (last_offset - base_offset).to_bytes(4, "big")
    data[57:61] = (0).to_bytes(4, "big")
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    fetch = committed_records(MemoryRecords(bytes(data)), start_offset=0)
    assert list(fetch) == []
    assert fetch.next_offset == last_offset + 1


def test_read_committed_with_compacted_topic() -> None:
    pid1, pid2, pid3 = 1, 2, 3
    data = concat(
        txn_records(pid3, 3, b"3", b"4"),
        txn_records(pid2, 15, b"15", b"16", b"17"),
        txn_records(pid1, 22, b"22", b"23"),
        abort(pid2, 28),
        txn_records(pid3, 30, b"30", b"31", b"32"),
        commit(pid3, 35),
        txn_records(pid1, 39, b"39", b"40"),
        # The transaction of pid1 is aborted, but its marker is not in this fetch.
    )
    aborted = [AbortedTxn(pid2, 6, 28, 0), AbortedTxn(pid1, 0, 50, 0)]  # first offsets no longer in the log
    assert [r.offset for r in committed_records(data, aborted)] == [3, 4, 30, 31, 32]


def test_consumer_position_updated_when_skipping_aborted_transactions() -> None:
    data = concat(txn_records(1, 0, b"abort1-1", b"abort1-2"), abort(1, 2))
    fetch = committed_records(data, [(1, 0)])
    assert list(fetch) == []
    assert fetch.next_offset == 3


# --- ours -------------------------------------------------------------------------------------------------------


def test_aborted_transactions_are_used_in_first_offset_order() -> None:
    """The list comes from several .txnindex files, ordered by marker: it must be taken by first offset."""
    data = concat(
        txn_records(1, 0, b"a0", b"a1"),  # aborted, first offset 0 (its marker is at 9)
        txn_records(2, 2, b"b2"),  # aborted, first offset 2 (its marker is at 4: listed first)
        records([SimpleRecord(b"v", b"plain3", NOW)], base_offset=3),
        abort(2, 4),
        txn_records(2, 5, b"b5"),  # committed
        commit(2, 6),
        txn_records(1, 7, b"a7", b"a8"),
        abort(1, 9),
    )
    aborted = [AbortedTxn(2, 2, 4, 5), AbortedTxn(1, 0, 9, 10)]
    assert keys(committed_records(data, aborted)) == [b"plain3", b"b5"]
    assert keys(committed_records(data, list(reversed(aborted)))) == [b"plain3", b"b5"]


def test_fetch_starting_inside_an_aborted_transaction() -> None:
    data = concat(txn_records(1, 5, b"a5", b"a6"), commit(2, 7), txn_records(1, 8, b"a8"), abort(1, 9))
    # The broker reports the transaction that started at 0, before this fetch (offset 5).
    assert keys(committed_records(data, [(1, 0)], start_offset=5)) == []
    # Without it the batches look committed: the aborted list is what tells them apart.
    assert keys(committed_records(data, [], start_offset=5)) == [b"a5", b"a6", b"a8"]


def test_non_transactional_batch_of_an_aborted_producer_is_returned() -> None:
    data = concat(
        txn_records(1, 0, b"t0"),
        records(
            [SimpleRecord(b"v", b"idem1", NOW)], base_offset=1, producer_id=1, producer_epoch=0, sequence=1
        ),
        abort(1, 2),
    )
    assert keys(committed_records(data, [(1, 0)])) == [b"idem1"]


def test_aborted_transaction_whose_marker_is_past_the_fetch() -> None:
    data = concat(txn_records(1, 0, b"t0"), records([SimpleRecord(b"v", b"p1", NOW)], base_offset=1))
    assert keys(committed_records(data, [(1, 0)])) == [b"p1"]


def test_other_control_records_are_skipped() -> None:
    builder = MemoryRecordsBuilder(
        base_offset=1, producer_id=1, producer_epoch=0, is_transactional=True, is_control_batch=True
    )
    builder.append_with_offset(
        1, NOW, ControlRecordType.LEADER_CHANGE.record_key(), b"\x00\x00", _control=True
    )
    data = concat(records([SimpleRecord(b"v", b"p0", NOW)], base_offset=0), builder.build())
    fetch = committed_records(data, [])
    assert keys(fetch) == [b"p0"]
    assert fetch.next_offset == 2


def test_start_and_end_inside_batches() -> None:
    data = concat(
        records([SimpleRecord(b"v", b"%d" % i, NOW) for i in range(4)], base_offset=0),
        records([SimpleRecord(b"v", b"%d" % i, NOW) for i in range(4, 8)], base_offset=4),
    )
    fetch = committed_records(data, None, start_offset=2, end_offset=6)
    assert [r.offset for r in fetch] == [2, 3, 4, 5]
    assert fetch.next_offset == 6
    assert list(fetch) == []  # exhausted
    fetch = committed_records(data, None, start_offset=2, end_offset=4)
    assert [r.offset for r in fetch] == [2, 3]
    assert fetch.next_offset == 4


def test_several_fetches_each_with_its_aborted_list() -> None:
    first = concat(txn_records(1, 0, b"a0"), records([SimpleRecord(b"v", b"p1", NOW)], base_offset=1))
    second = concat(
        txn_records(1, 2, b"a2"), abort(1, 3), records([SimpleRecord(b"v", b"p4", NOW)], base_offset=4)
    )
    overlapping = concat(records([SimpleRecord(b"v", b"p4", NOW)], base_offset=4), commit(2, 5))
    fetches = [
        Fetch(first, [(1, 0)]),
        FetchDataInfo(LogOffsetMetadata(2), second, aborted_transactions=[AbortedTxn(1, 0, 3, 4)]),
        Fetch(overlapping, []),  # starts at a batch already returned: not returned twice
    ]
    assert [r.key for r in iter_committed(fetches)] == [b"p1", b"p4"]
    assert [r.key for r in iter_committed(fetches, 0, 2)] == [b"p1"]
    assert [r.key for r in iter_committed(Fetch(second, [(1, 0)]), 2)] == [b"p4"]


def test_crc_is_checked() -> None:
    data = bytearray(records([SimpleRecord(b"value", b"k", NOW)]).to_bytes())
    data[-2] ^= 0x01  # the last byte of the value (the very last one is the header count)
    with pytest.raises(CorruptRecordError):
        list(committed_records(MemoryRecords(bytes(data))))
    assert [r.value for r in committed_records(MemoryRecords(bytes(data)), check_crcs=False)] == [b"valud"]


# --- a read-only reader: segment files and .txnindex entries ------------------------------------------------------


def test_read_committed_from_segment_files_offline(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    log = make_log(LogConfig(segment_bytes=200))
    p1 = append_transactional(log, 1, 0, mock_time)
    p2 = append_transactional(log, 2, 0, mock_time)
    p1(2)  # 0..1
    append_non_transactional(log, 1)  # 2
    p2(2)  # 3..4
    p1(2)  # 5..6
    append_end_txn_marker(log, 1, 0, ControlRecordType.ABORT, mock_time.milliseconds())  # 7
    append_non_transactional(log, 2)  # 8..9
    append_end_txn_marker(log, 2, 0, ControlRecordType.COMMIT, mock_time.milliseconds())  # 10
    p1(2)  # 11..12 (open)
    append_non_transactional(log, 1)  # 13
    log.update_high_watermark(log.log_end_offset)
    lso = log.last_stable_offset
    assert lso == 11
    expected = [(r.offset, r.value) for r in iter_committed(log)]
    assert [o for o, _ in expected] == [2, 3, 4, 8, 9]
    assert log.num_log_segments > 2
    log.close()

    data = b""
    aborted: list[AbortedTxn] = []
    for path in sorted(log_dir.glob("*.log")):
        file_records = FileRecords.open(path, mutable=False, file_already_exists=True)
        try:
            data += file_records.to_memory_records().to_bytes()
        finally:
            file_records.close()
        index = TransactionIndex(offset_from_file_name(path), path.with_suffix(".txnindex"))
        aborted.extend(index.all_aborted_txns())
        index.close()
    assert aborted == [AbortedTxn(1, 0, 7, 3)]
    got = [(r.offset, r.value) for r in iter_committed(Fetch(MemoryRecords(data), aborted), 0, lso)]
    assert got == expected
    # Without the LSO bound the open transaction looks committed (documented).
    assert [r.offset for r in iter_committed(Fetch(MemoryRecords(data), aborted))] == [
        2,
        3,
        4,
        8,
        9,
        11,
        12,
        13,
    ]


def test_read_committed_through_the_read_only_view(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    """``ReadOnlyLog`` (a reader beside a live writer) supplies the fetches: batches up to its LSO plus the aborted
    transactions overlapping them."""
    from kafkalog.readonly import log as readonly  # part of kafkalog: never a reason to skip

    log = make_log(LogConfig(segment_bytes=200))
    p1 = append_transactional(log, 1, 0, mock_time)
    p2 = append_transactional(log, 2, 0, mock_time)
    p1(2)  # 0..1
    p2(1)  # 2
    append_non_transactional(log, 2)  # 3..4
    append_end_txn_marker(log, 1, 0, ControlRecordType.ABORT, mock_time.milliseconds())  # 5
    append_end_txn_marker(log, 2, 0, ControlRecordType.COMMIT, mock_time.milliseconds())  # 6
    p1(1)  # 7 (open)
    append_non_transactional(log, 1)  # 8
    log.update_high_watermark(log.log_end_offset)
    expected = [(r.offset, r.value) for r in iter_committed(log)]
    assert [o for o, _ in expected] == [2, 3, 4]
    log.flush()

    view = readonly.ReadOnlyLog.open(log_dir, high_watermark=log.log_end_offset)
    lso = view.last_stable_offset
    assert lso == log.last_stable_offset == 7

    def fetches() -> Iterator[Fetch]:
        position = view.log_start_offset
        while position < lso:
            data = view.read(position, 150, end_offset=lso)
            batches = list(data.batches())
            if not batches:
                return
            yield Fetch(data, view.aborted_transactions(position, lso))
            position = batches[-1].next_offset

    assert [(r.offset, r.value) for r in iter_committed(fetches(), view.log_start_offset, lso)] == expected
