"""Kafka's ``LogSegmentTest`` scenarios, with the same numbers, against :class:`kafkalog.storage.LogSegment`.

Segments are made as Kafka's ``LogTestUtils.createSegment`` makes them (index interval 10 bytes, offset index
of 1000 bytes, time index of 1500, no jitter). Kafka's ``v1Records`` are magic-1 entries (one per record, 39
bytes for ``"hello"``, timestamp offset*10), built with kafka-python's encoder since kafkalog only reads
legacy formats; that keeps Kafka's byte positions (e.g. 39 below).

Ported (``storage/src/test/java/org/apache/kafka/storage/internals/log/LogSegmentTest.java`` and its Scala
predecessor ``core/src/test/scala/unit/kafka/log/LogSegmentTest.scala``):
testAppendForLogSegmentOffsetOverflowException (7 cases), testReadOnEmptySegment, testReadBeforeFirstOffset,
testReadFromMiddleOfBatch (see the note below), testReadAfterLast, testReadFromGap, testReadWhenNoMaxPosition
(see the note), testTruncate, testTruncateEmptySegment, testReloadLargestTimestampAndNextOffsetAfterTruncation,
testTruncateFull, testFindOffsetByTimestamp, testNextOffsetCalculation, testChangeFileSuffixes,
testRecoveryFixesCorruptIndex, testRecoverTransactionIndex, testRecoveryRebuildsEpochCache,
testRecoveryFixesCorruptTimeIndex, testRecoveryWithCorruptMessage, testCreateWithInitFileSizeAppendMessage,
testCreateWithInitFileSizeClearShutdown, shouldTruncateEvenIfOffsetPointsToAGapInTheLog, testAppendFromFile,
testGetFirstBatchTimestamp, testDeleteIfExistsWithGetParentIsNull (as: deleting a segment whose index files
were never created does not fail).

Notes on differences:

* testReadFromMiddleOfBatch: trunk (KAFKA-17803, merged after the 3.9 reference snapshot) returns the batch's
  base offset (50) as ``fetchOffsetMetadata.messageOffset`` for a read at 52; kafkalog follows the snapshot
  and returns the requested offset (52), with the batch's position. The test pins the snapshot behaviour.
* testReadWhenNoMaxPosition: Kafka's empty ``Optional`` max position is kafkalog's ``max_position=None``
  (no records, but the offset metadata); Kafka's two-argument ``read`` (up to the segment's end) is
  ``TO_SEGMENT_END``, the default. Both are checked with Kafka's numbers.
* testRecoverTransactionIndex / testRecoveryRebuildsEpochCache use kafkalog's own ``ProducerStateManager`` and
  ``LeaderEpochFileCache`` (``kafkalog.log``), as Kafka's test uses Kafka's; Kafka's public
  ``loadProducerEntry`` is the private ``_load_entry`` here.
* testAppendForLogSegmentOffsetOverflowException with base offset -2**31: kafkalog refuses to *name* a file
  after a negative offset, so that segment's files get plain names.

Skipped: testMaxOffset (the Scala-era ``maxOffset`` read parameter no longer exists in Kafka), the channel
``position()`` assertions of the preallocation tests (Java FileChannel state; kafkalog writes with ``pwrite``).
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from pathlib import Path

import pytest

from kafkalog.errors import LogSegmentOffsetOverflowError
from kafkalog.log.leader_epoch import LeaderEpochFileCache
from kafkalog.log.producer_state import BatchMetadata, ProducerStateEntry
from kafkalog.records import ControlRecordType, MemoryRecords, Record, SimpleRecord
from kafkalog.storage import (
    FileRecords,
    LogOffsetMetadata,
    LogSegment,
    OffsetIndex,
    RollParams,
    TimeIndex,
    TransactionIndex,
    files,
)
from kafkalog.storage.segment import TO_SEGMENT_END
from kafkalog.time import MockTime

from .conftest import (
    INT32_MAX,
    NO_TIMESTAMP,
    SegmentFactory,
    end_txn_marker,
    new_producer_state_manager,
    v1_records,
    v2_records,
    write_nonsense,
)


def _records(data: MemoryRecords | FileRecords | None) -> list[Record]:
    assert data is not None
    return list(data.records())  # type: ignore[arg-type]


def _read_records(seg: LogSegment, offset: int, max_size: int, **kw: object) -> list[Record]:
    fetched = seg.read(offset, max_size, **kw)  # type: ignore[arg-type]
    assert fetched is not None
    return _records(fetched.records)


@pytest.mark.parametrize(
    ("base_offset", "largest_offset"),
    [
        (0, -(2**31)),
        (0, 2**31),
        (1, 0),
        (100, 10),
        (2**31, 0),
        (-(2**31), 0),
        (2**31, 2**32),
    ],
)
def test_append_for_log_segment_offset_overflow(
    tmp_path: Path, base_offset: int, largest_offset: int
) -> None:
    seg = LogSegment(
        FileRecords.open(tmp_path / "seg.log"),
        OffsetIndex(tmp_path / "seg.index", base_offset, 1000),
        TimeIndex(tmp_path / "seg.timeindex", base_offset, 1500),
        TransactionIndex(base_offset, tmp_path / "seg.txnindex"),
        base_offset,
        10,
    )
    try:
        with pytest.raises(LogSegmentOffsetOverflowError):
            seg.append(largest_offset, 1_700_000_000_000, largest_offset, v1_records(0, "hello"))
        assert seg.size == 0, "nothing is written"
    finally:
        seg.close()


def test_read_on_empty_segment(segments: SegmentFactory) -> None:
    seg = segments(40)
    assert seg.read(40, 300) is None


def test_read_before_first_offset(segments: SegmentFactory) -> None:
    seg = segments(40)
    ms = v1_records(50, "hello", "there", "little", "bee")
    seg.append(53, NO_TIMESTAMP, -1, ms)
    assert _read_records(seg, 41, 300) == list(ms.records())


def test_read_from_middle_of_batch(segments: SegmentFactory) -> None:
    seg = segments(40)
    ms = v2_records(50, "hello", "there", "little", "bee")
    seg.append(53, NO_TIMESTAMP, -1, ms)
    fetched = seg.read(52, 300)
    assert fetched is not None
    # Kafka 3.9 (the reference): the requested offset; trunk (KAFKA-17803): the batch base offset, 50.
    assert fetched.fetch_offset_metadata == LogOffsetMetadata(52, 40, 0)
    assert [b.base_offset for b in fetched.records.batches()] == [50]


def test_read_after_last(segments: SegmentFactory) -> None:
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, v1_records(50, "hello", "there"))
    assert seg.read(52, 200) is None


def test_read_from_gap(segments: SegmentFactory) -> None:
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, v1_records(50, "hello", "there"))
    ms2 = v1_records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert _read_records(seg, 55, 200) == list(ms2.records())


@pytest.mark.parametrize("min_one_message", [True, False])
def test_read_when_no_max_position(segments: SegmentFactory, min_one_message: bool) -> None:
    seg = segments(40)
    seg.append(51, NO_TIMESTAMP, -1, v1_records(50, "hello", "there"))
    expected = {
        48: LogOffsetMetadata(48, 40, 0),
        50: LogOffsetMetadata(50, 40, 0),
        51: LogOffsetMetadata(51, 40, 39),
    }
    for offset, metadata in expected.items():
        # max position unknown (Kafka's empty Optional, kafkalog's None): no records, but the offset's metadata
        unknown = seg.read(offset, 1, None, min_one_message)
        assert unknown is not None
        assert unknown.fetch_offset_metadata == metadata
        assert _records(unknown.records) == []
        # up to the segment's end instead: one byte, or the whole first batch with min_one_message
        bounded = seg.read(offset, 1, TO_SEGMENT_END, min_one_message)
        assert bounded is not None
        assert bounded.fetch_offset_metadata == metadata
        assert len(_records(bounded.records)) == (1 if min_one_message else 0)
        assert bounded.first_entry_incomplete is not min_one_message
    for offset in (52, 53):  # at and beyond the log end offset
        assert seg.read(offset, 1, None, min_one_message) is None
        assert seg.read(offset, 1, TO_SEGMENT_END, min_one_message) is None


def test_truncate(segments: SegmentFactory) -> None:
    seg = segments(40)
    offset = 40
    for _ in range(30):
        ms1 = v1_records(offset, "hello")
        seg.append(offset, NO_TIMESTAMP, -1, ms1)
        ms2 = v1_records(offset + 1, "hello")
        seg.append(offset + 1, NO_TIMESTAMP, -1, ms2)

        assert _read_records(seg, offset, 10000) == [next(ms1.records()), next(ms2.records())]

        seg.truncate_to(offset + 1)  # drop the second
        assert _read_records(seg, offset, 10000) == list(ms1.records())
        offset += 1


def test_truncate_empty_segment(segments: SegmentFactory, tmp_path: Path) -> None:
    """A follower truncating to an empty segment must get index room back, or it would roll at once (KAFKA-6492)."""
    max_segment_ms = 300000
    time = MockTime()
    seg = segments(0, time=time)
    assert seg.time_index.entries == 0  # force loading the indexes before closing
    assert seg.offset_index.entries == 0
    seg.close()
    assert files.time_index_file(tmp_path, 0).stat().st_size == 0
    assert files.offset_index_file(tmp_path, 0).stat().st_size == 0

    reopened = segments(0, time=time)
    assert reopened.time_index.size_in_bytes == 0
    assert reopened.offset_index.size_in_bytes == 0

    time.sleep(500)
    reopened.truncate_to(57)
    assert reopened.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 0
    assert not reopened.time_index.is_full()
    assert not reopened.offset_index.is_full()

    params = RollParams(max_segment_ms, INT32_MAX, NO_TIMESTAMP, 100, 1024, time.milliseconds())
    assert not reopened.should_roll(params)

    # Not rolled even past max_segment_ms (the segment is empty) ...
    time.sleep(max_segment_ms + 1)
    assert reopened.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == max_segment_ms + 1
    params = RollParams(max_segment_ms, INT32_MAX, NO_TIMESTAMP, 100, 1024, time.milliseconds())
    assert not reopened.should_roll(params)

    # ... but rolled when the next offset does not fit.
    params = RollParams(max_segment_ms, INT32_MAX, NO_TIMESTAMP, INT32_MAX + 200, 1024, time.milliseconds())
    assert reopened.should_roll(params)


def test_reload_largest_timestamp_and_next_offset_after_truncation(segments: SegmentFactory) -> None:
    num_messages = 30
    seg = segments(40, 2 * v1_records(0, "hello").size_in_bytes - 1)
    offset = 40
    for _ in range(num_messages):
        seg.append(offset, offset, offset, v1_records(offset, "hello"))
        offset += 1
    assert seg.read_next_offset() == offset

    assert seg.time_index.entries == num_messages // 2 - 1

    seg.truncate_to(41)
    assert seg.time_index.entries == 0
    assert seg.largest_timestamp() == 400, "the batch left (offset 40) carries 40*10"
    assert seg.read_next_offset() == 41


def test_truncate_full(segments: SegmentFactory) -> None:
    time = MockTime()
    seg = segments(40, time=time)
    seg.append(41, NO_TIMESTAMP, -1, v1_records(40, "hello", "there"))

    time.sleep(500)
    assert seg.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 500

    seg.truncate_to(0)
    assert seg.time_waited_for_roll(time.milliseconds(), NO_TIMESTAMP) == 0, "an emptied segment is new again"
    assert not seg.time_index.is_full()
    assert not seg.offset_index.is_full()
    assert seg.read(0, 1024) is None

    seg.append(41, NO_TIMESTAMP, -1, v1_records(40, "hello", "there"))
    assert seg.read_next_offset() == 42


def test_find_offset_by_timestamp(segments: SegmentFactory) -> None:
    message_size = v1_records(0, "msg00").size_in_bytes
    seg = segments(40, message_size * 2 - 1)
    for i in range(40, 50):
        seg.append(i, i * 10, i, v1_records(i, f"msg{i}"))

    def found(ts: int) -> int | None:
        result = seg.find_offset_by_timestamp(ts, 0)
        return None if result is None else result.offset

    assert seg.largest_timestamp() == 490
    assert found(420) == 42, "an indexed timestamp"
    assert found(421) == 43
    assert found(430) == 43, "an un-indexed timestamp"
    assert found(431) == 44
    assert found(491) is None, "beyond the last timestamp"
    assert found(401) == 41, "before the first indexed timestamp"
    assert found(399) == 40, "before the first timestamp"


def test_next_offset_calculation(segments: SegmentFactory) -> None:
    seg = segments(40)
    assert seg.read_next_offset() == 40
    seg.append(52, NO_TIMESTAMP, -1, v1_records(50, "hello", "there", "you"))
    assert seg.read_next_offset() == 53


def test_change_file_suffixes(segments: SegmentFactory, tmp_path: Path) -> None:
    seg = segments(40)
    index = files.offset_index_file(tmp_path, 40)
    time_index = files.time_index_file(tmp_path, 40)
    log = seg.log.path
    assert not index.exists() and not time_index.exists(), "index files are not created eagerly"

    seg.change_file_suffixes("", ".deleted")
    deleted_index = files.offset_index_file(tmp_path, 40, ".deleted")
    deleted_time_index = files.time_index_file(tmp_path, 40, ".deleted")
    assert not deleted_index.exists() and not deleted_time_index.exists(), "renaming creates no file"
    assert seg.log.path == Path(str(log) + ".deleted")
    assert seg.has_suffix(".deleted")
    assert seg.log.path.exists()

    assert seg.offset_index.path == deleted_index
    assert deleted_index.exists(), "created lazily on first access"
    assert seg.time_index.path == deleted_time_index
    assert deleted_time_index.exists()


def test_recovery_fixes_corrupt_index(segments: SegmentFactory) -> None:
    seg = segments(0)
    for i in range(100):
        seg.append(i, NO_TIMESTAMP, -1, v1_records(i, str(i)))
    index_file = seg.offset_index.path
    write_nonsense(index_file, 5, index_file.stat().st_size)
    seg.recover(new_producer_state_manager(segments.dir))
    for i in range(100):
        records = _read_records(seg, i, 1, max_position=seg.size, min_one_message=True)
        assert records[0].offset == i


def test_recovery_keeps_crc_valid_legacy_entry_with_broken_key_length(segments: SegmentFactory) -> None:
    """Not a port: Kafka's recovery (``ensureValid``: size and CRC) keeps a v1 entry whose key length is
    forged (CRC recomputed); so does kafkalog's, although reading that record fails."""
    seg = segments(0)
    seg.append(0, 0, 0, v1_records(0, "hello"))
    forged = bytearray(v1_records(1, "there").buffer)
    forged[26:30] = (2).to_bytes(4, "big")  # key length 2 where the key is null
    forged[12:16] = zlib.crc32(forged[16:]).to_bytes(4, "big")
    seg.append(1, 10, 1, MemoryRecords(bytes(forged)))
    seg.append(2, 20, 2, v1_records(2, "bee"))
    size = seg.size
    assert seg.recover(new_producer_state_manager(segments.dir)) == 0
    assert seg.size == size
    assert seg.read_next_offset() == 3


def test_recover_transaction_index(segments: SegmentFactory) -> None:
    seg = segments(100)
    epoch, leader_epoch, sequence = 0, 15, 100
    pid1, pid2 = 5, 10

    def txn_records(offset: int, pid: int) -> MemoryRecords:
        return MemoryRecords.build(
            [SimpleRecord(b"a", None, NO_TIMESTAMP), SimpleRecord(b"b", None, NO_TIMESTAMP)],
            base_offset=offset,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=True,
            partition_leader_epoch=leader_epoch,
        )

    seg.append(101, NO_TIMESTAMP, 100, txn_records(100, pid1))
    seg.append(103, NO_TIMESTAMP, 102, txn_records(102, pid2))
    seg.append(
        105,
        NO_TIMESTAMP,
        104,
        MemoryRecords.build(
            [SimpleRecord(b"a", None, NO_TIMESTAMP), SimpleRecord(b"b", None, NO_TIMESTAMP)],
            base_offset=104,
            partition_leader_epoch=leader_epoch,
        ),
    )
    # pid2 aborts while pid1's transaction (from 100) is open: LSO 100
    seg.append(106, NO_TIMESTAMP, 106, end_txn_marker(ControlRecordType.ABORT, pid2, epoch, 106))
    seg.append(107, NO_TIMESTAMP, 107, end_txn_marker(ControlRecordType.COMMIT, pid1, epoch, 107))

    state = new_producer_state_manager(segments.dir)
    seg.recover(state)
    assert state.map_end_offset == 108
    (aborted,) = seg.txn_index.all_aborted_txns()
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset, aborted.last_stable_offset) == (
        pid2,
        102,
        106,
        100,
    )

    # Again, as if pid2's transaction had begun in an earlier segment, at 75.
    state = new_producer_state_manager(segments.dir)
    # Kafka's loadProducerEntry; kafkalog keeps it private (the loader uses it for snapshots).
    state._load_entry(
        ProducerStateEntry(pid2, epoch, 0, NO_TIMESTAMP, 75, deque([BatchMetadata(10, 10, 5, NO_TIMESTAMP)]))
    )
    seg.recover(state)
    assert state.map_end_offset == 108
    (aborted,) = seg.txn_index.all_aborted_txns()
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset, aborted.last_stable_offset) == (
        pid2,
        75,
        106,
        100,
    )


def test_recovery_rebuilds_epoch_cache(segments: SegmentFactory) -> None:
    seg = segments(0)
    cache = LeaderEpochFileCache(None)  # in memory: no checkpoint file
    for offset, epoch in [(104, 0), (106, 1), (108, 1), (110, 2)]:
        seg.append(
            offset + 1,
            NO_TIMESTAMP,
            offset,
            MemoryRecords.build(
                [SimpleRecord(b"a", None, NO_TIMESTAMP), SimpleRecord(b"b", None, NO_TIMESTAMP)],
                base_offset=offset,
                partition_leader_epoch=epoch,
            ),
        )
    seg.recover(new_producer_state_manager(segments.dir), cache)
    assert cache.epoch_entries == [(0, 104), (1, 106), (2, 110)]


def test_recovery_fixes_corrupt_time_index(segments: SegmentFactory) -> None:
    seg = segments(0)
    for i in range(100):
        seg.append(i, i * 10, i, v1_records(i, str(i)))
    time_index_file = seg.time_index.path
    write_nonsense(time_index_file, 5, time_index_file.stat().st_size)
    seg.recover(new_producer_state_manager(segments.dir))
    for i in range(100):
        found = seg.find_offset_by_timestamp(i * 10, 0)
        assert found is not None and found.offset == i
        if i < 99:
            found = seg.find_offset_by_timestamp(i * 10 + 1, 0)
            assert found is not None and found.offset == i + 1


@pytest.mark.parametrize("seed", range(10))
def test_recovery_with_corrupt_message(segments: SegmentFactory, seed: int) -> None:
    rng = random.Random(seed)
    messages = 20
    seg = segments(0)
    for i in range(messages):
        seg.append(i, NO_TIMESTAMP, -1, v1_records(i, str(i)))
    corrupt_from = rng.randrange(messages)
    found = seg.log.search_for_offset_with_size(corrupt_from, 0)
    assert found is not None
    position = found.position + rng.randrange(15)  # somewhere in the chosen record, to the end
    write_nonsense(seg.log.path, position, seg.log.path.stat().st_size - position, seed=seed)
    seg.recover(new_producer_state_manager(segments.dir))
    assert [b.last_offset for b in seg.log.batches()] == list(range(corrupt_from))
    seg.delete_if_exists()


def test_create_with_init_file_size_append_message(tmp_path: Path, segments: SegmentFactory) -> None:
    seg = segments.track(
        LogSegment.open(
            tmp_path,
            40,
            index_interval_bytes=10,
            max_index_size=1000,
            init_file_size=512 * 1024 * 1024,
            preallocate=True,
        )
    )
    seg.append(51, NO_TIMESTAMP, -1, v1_records(50, "hello", "there"))
    ms2 = v1_records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert _read_records(seg, 55, 200) == list(ms2.records())


def test_create_with_init_file_size_clear_shutdown(tmp_path: Path, segments: SegmentFactory) -> None:
    init = 512 * 1024 * 1024
    seg = LogSegment.open(
        tmp_path, 40, index_interval_bytes=10, max_index_size=1000, init_file_size=init, preallocate=True
    )
    seg.append(51, NO_TIMESTAMP, -1, v1_records(50, "hello", "there"))
    ms2 = v1_records(60, "alpha", "beta")
    seg.append(61, NO_TIMESTAMP, -1, ms2)
    assert _read_records(seg, 55, 200) == list(ms2.records())
    old_size = seg.log.size_in_bytes
    assert seg.log.path.stat().st_size == init
    seg.close()
    assert seg.log.path.stat().st_size == old_size, "trimmed on close"

    reopened = segments.track(
        LogSegment.open(
            tmp_path,
            40,
            index_interval_bytes=10,
            max_index_size=1000,
            file_already_exists=True,
            init_file_size=init,
            preallocate=True,
        )
    )
    assert _read_records(reopened, 55, 200) == list(ms2.records())
    assert reopened.log.size_in_bytes == old_size
    assert reopened.log.path.stat().st_size == old_size


def test_should_truncate_even_if_offset_points_to_a_gap_in_the_log(segments: SegmentFactory) -> None:
    seg = segments(40)
    offset = 40
    # Two messages with a gap between them (the middle compacted away).
    seg.append(offset, NO_TIMESTAMP, -1, v2_records(offset, "first message", timestamp=offset * 1000))
    seg.append(offset + 3, NO_TIMESTAMP, -1, v2_records(offset + 3, "message after gap", timestamp=43000))
    seg.truncate_to(offset + 1)  # no batch holds 41: the one after the gap goes
    fetched = seg.read(offset, 10000)
    assert fetched is not None
    assert [b.base_offset for b in fetched.records.batches()] == [offset]


def test_append_from_file(tmp_path: Path, segments: SegmentFactory) -> None:
    def records_of_size(offset: int, size: int) -> MemoryRecords:
        return MemoryRecords.build([SimpleRecord(bytes(size), None, NO_TIMESTAMP)], base_offset=offset)

    source_dir = tmp_path / "source"
    source_dir.mkdir()
    source = FileRecords.open(files.log_file(source_dir, 0))
    # One file whose offsets span more than 2**31 - 1.
    source.append(records_of_size(0, 1024))
    source.append(records_of_size(500, 1024 * 1024 + 1))
    size_before_overflow = source.size_in_bytes
    source.append(records_of_size(INT32_MAX + 5, 1024))
    size_after_overflow = source.size_in_bytes

    seg = segments(0)
    appended = seg.append_from_file(source, 0)
    assert appended == size_before_overflow
    assert seg.size == size_before_overflow

    overflow_seg = segments(INT32_MAX)
    appended = overflow_seg.append_from_file(source, size_before_overflow)
    assert appended == size_after_overflow - size_before_overflow
    assert overflow_seg.size == appended
    source.close()


def test_get_first_batch_timestamp(segments: SegmentFactory) -> None:
    seg = segments(1)
    assert seg.get_first_batch_timestamp() == 2**63 - 1
    # The record has no timestamp: the answer is the append's largest timestamp (the rolling timestamp).
    seg.append(1, 1000, 1, MemoryRecords.build([SimpleRecord(b"one", None, NO_TIMESTAMP)], base_offset=1))
    assert seg.get_first_batch_timestamp() == 1000


def test_get_first_batch_timestamp_after_reopen(tmp_path: Path, segments: SegmentFactory) -> None:
    """After a reopen the rolling timestamp is the first batch's max timestamp; none (-1) means Long.MAX."""
    seg = segments(1)
    seg.append(1, 1000, 1, MemoryRecords.build([SimpleRecord(b"one", None, NO_TIMESTAMP)], base_offset=1))
    seg.close()
    assert segments(1).get_first_batch_timestamp() == 2**63 - 1
    other = segments(10)
    other.append(10, 777, 10, v2_records(10, "x", timestamp=777))
    other.close()
    assert segments(10).get_first_batch_timestamp() == 777


def test_delete_if_exists_without_index_files(segments: SegmentFactory, tmp_path: Path) -> None:
    """Stand-in for testDeleteIfExistsWithGetParentIsNull: missing index files do not make deletion fail."""
    seg = segments(0)
    seg.append(0, NO_TIMESTAMP, -1, v1_records(0, "hello"))
    seg.delete_if_exists()
    assert seg.deleted
    assert list(tmp_path.iterdir()) == []


def test_first_append_after_create_truncate_or_recover_adds_no_index_entry(segments: SegmentFactory) -> None:
    """Reference §8.2: with index.interval.bytes 0 every append is indexed except the first one."""
    seg = segments(0, index_interval_bytes=0)
    sizes = []
    for offset in range(4):
        ms = v2_records(offset, "v", timestamp=1000 + offset)
        sizes.append(ms.size_in_bytes)
        seg.append(offset, 1000 + offset, offset, ms)
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [
        (1, sizes[0]),
        (2, sizes[0] + sizes[1]),
        (3, sizes[0] + sizes[1] + sizes[2]),
    ]
    assert [seg.time_index.entry(i) for i in range(seg.time_index.entries)] == [
        (1001, 1),
        (1002, 2),
        (1003, 3),
    ]

    seg.truncate_to(2)  # the byte counter starts over: the next append is not indexed
    seg.append(2, 1002, 2, v2_records(2, "v", timestamp=1002))
    assert seg.offset_index.entries == 1
    seg.append(3, 1003, 3, v2_records(3, "v", timestamp=1003))
    assert seg.offset_index.entries == 2

    seg.recover(
        new_producer_state_manager(segments.dir)
    )  # recovery applies the same rule to the batches it scans
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == [
        (1, sizes[0]),
        (2, sizes[0] + sizes[1]),
        (3, sizes[0] + sizes[1] + sizes[2]),
    ]
