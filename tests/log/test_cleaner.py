"""Kafka's ``LogCleanerTest`` (core/src/test/scala/unit/kafka/log/LogCleanerTest.scala, 3.9) ported with the
same numbers: cleaning segments, key retention, tombstones with delete horizons, producer last-batch retention,
partial cleaning in rounds, segment groups and offset overflow, offset gaps, buffer growth, corruption (the
transaction tests are in ``test_cleaner_transactions.py``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkalog.cleaner.cleaner import CleanerStats
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.errors import CorruptRecordError, LogCleaningAbortedError
from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.log.names import TopicPartition
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import singleton_records
from .test_cleaner_helpers import (
    BIG,
    INT_MAX,
    LONG_MAX,
    append_idempotent,
    config,
    fake_map,
    key,
    keys_in_log,
    last_offsets_per_batch,
    last_sequences,
    ltc,
    make_cleaner,
    message_with_offset,
    offsets_in_log,
    record,
    tombstone_record,
    unkeyed_count,
    unkeyed_record,
)


def test_clean_segments(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024))
    while log.num_log_segments < 4:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    assert keys_in_log(log) == list(range(log.log_end_offset))
    keys = [1, 3, 5, 7, 9]
    offset_map = fake_map(keys)
    segments = log.segments[:3]
    stats = CleanerStats()
    expected_bytes_read = sum(s.size for s in segments)
    should_remain = [k for k in keys_in_log(log) if k not in keys]
    cleaner.clean_segments(
        log, segments, offset_map, 0, stats, CleanedTransactionMetadata(), -1, segments[-1].read_next_offset()
    )
    assert keys_in_log(log) == should_remain
    assert stats.bytes_read == expected_bytes_read


def test_clean_segments_with_concurrent_segment_deletion(make_log: LogFactory) -> None:
    """Retention deletes the segments being cleaned right before the swap: the swap is abandoned (the old
    segments are renamed ``.deleted`` exactly once, by retention) and the log keeps its remaining segment."""
    log = make_log(config(segment_bytes=1024, cleanup_policy=("compact", "delete")))
    while log.num_log_segments < 3:
        log.append_as_leader(record(0, log.log_end_offset), 0)
        log.roll()
    first_log_file = log.segments[0].log
    expected = first_log_file.path.with_name(first_log_file.path.name + ".deleted")
    offset_map = SkimpyOffsetMap(slots=BIG)
    cleaner = make_cleaner(INT_MAX)
    segments = log.local_log.segments.values(0, log.active_segment.base_offset)
    stats = CleanerStats()
    cleaner.build_offset_map(log, 0, log.active_segment.base_offset, offset_map, stats)

    def delete() -> None:
        log.update_high_watermark(log.active_segment.base_offset)
        log.maybe_increment_log_start_offset(log.active_segment.base_offset)
        log.delete_old_segments()

    thread = threading.Thread(target=delete)
    thread.start()
    thread.join()
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean_segments(
            log,
            segments,
            offset_map,
            0,
            stats,
            CleanedTransactionMetadata(),
            -1,
            segments[-1].read_next_offset(),
        )
    assert first_log_file.path == expected
    assert log.num_log_segments == 1
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))


def test_size_trimmed_for_preallocated_and_compacted_topic(make_log: LogFactory) -> None:
    cleaner = make_cleaner(2)
    log = make_log(config(segment_bytes=1024, preallocate=True))
    for k in (0, 1, 0, 1, 0):
        log.append_as_leader(record(k, k), 0)
    log.roll()
    cleaner.clean(ltc(log, 2))
    assert log.segments[0].log.path.stat().st_size < 1024


def test_duplicate_check_after_cleaning(make_log: LogFactory, mock_time: MockTime, log_dir: Path) -> None:
    cleaner = make_cleaner(INT_MAX)
    cfg = config(segment_bytes=2048)
    log = make_log(cfg)
    pid1, pid2, pid3, pid4 = 1, 2, 3, 4
    p1 = append_idempotent(log, pid1, 0, mock_time)
    p2 = append_idempotent(log, pid2, 0, mock_time)
    p3 = append_idempotent(log, pid3, 0, mock_time)
    p1([1, 2, 3])
    p2([3, 1, 4])
    p3([1, 4])
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert last_offsets_per_batch(log) == [2, 5, 7]
    assert last_sequences(log) == {pid1: 2, pid2: 2, pid3: 1}
    assert keys_in_log(log) == [2, 3, 1, 4]
    assert offsets_in_log(log) == [1, 3, 6, 7]

    log.close()
    log = make_log(cfg, recovery_point=0)
    # duplicates of the producers' last batches are still detected after a reload
    info = append_idempotent(log, pid1, 0, mock_time)([1, 2, 3])
    assert (info.first_offset, info.last_offset) == (0, 2)
    info = append_idempotent(log, pid3, 0, mock_time)([1, 4])
    assert (info.first_offset, info.last_offset) == (6, 7)
    info = append_idempotent(log, pid2, 0, mock_time)([3, 1, 4])
    assert (info.first_offset, info.last_offset) == (3, 5)

    append_idempotent(log, pid4, 0, mock_time)([2])
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert last_sequences(log) == {pid1: 2, pid2: 2, pid3: 1, pid4: 0}
    assert last_offsets_per_batch(log) == [2, 5, 7, 8]
    assert keys_in_log(log) == [3, 1, 4, 2]
    assert offsets_in_log(log) == [3, 6, 7, 8]

    log.close()
    log = make_log(cfg, recovery_point=0)
    info = append_idempotent(log, pid1, 0, mock_time)([1, 2, 3])
    assert (info.first_offset, info.last_offset) == (0, 2)


def large_log(make_log: LogFactory, size: int) -> Log:
    log = make_log(config(segment_bytes=size * 16, max_message_bytes=size * 2))
    while log.num_log_segments < 2:
        log.append_as_leader(record(log.log_end_offset, bytes(size)), 0)
    assert keys_in_log(log) == list(range(log.log_end_offset))
    return log


def test_large_message(make_log: LogFactory) -> None:
    log = large_log(make_log, 1024 * 1024)
    cleaner = make_cleaner(INT_MAX, max_message_size=1024)
    offset_map = fake_map([1, 3, 5, 7, 9])
    head = log.segments[0]
    cleaner.clean_segments(
        log, [head], offset_map, 0, CleanerStats(), CleanedTransactionMetadata(), -1, head.read_next_offset()
    )
    assert keys_in_log(log) == [k for k in range(log.log_end_offset) if k not in (1, 3, 5, 7, 9)]


def test_message_larger_than_max_message_size(make_log: LogFactory) -> None:
    log = large_log(make_log, 1024 * 1024)
    log.update_config({"max.message.bytes": 512 * 1024})
    cleaner = make_cleaner(INT_MAX, max_message_size=1024)
    offset_map = fake_map([1, 3, 5, 7, 9])
    head = log.segments[0]
    cleaner.clean_segments(
        log, [head], offset_map, 0, CleanerStats(), CleanedTransactionMetadata(), -1, head.read_next_offset()
    )
    assert keys_in_log(log) == [k for k in range(log.log_end_offset) if k not in (1, 3, 5, 7, 9)]


def test_message_larger_than_max_message_size_with_corrupt_header(make_log: LogFactory) -> None:
    log = large_log(make_log, 1024 * 1024)
    log.update_config({"max.message.bytes": 512 * 1024})
    head = log.segments[0]
    with open(head.log.path, "r+b") as f:
        f.seek(16)  # MAGIC_OFFSET
        f.write(b"\xff")
    cleaner = make_cleaner(INT_MAX, max_message_size=1024)
    with pytest.raises(CorruptRecordError):
        cleaner.clean_segments(
            log,
            [head],
            fake_map([1, 3]),
            0,
            CleanerStats(),
            CleanedTransactionMetadata(),
            -1,
            head.read_next_offset(),
        )


def test_corrupt_message_size_larger_than_bytes_available(make_log: LogFactory) -> None:
    log = large_log(make_log, 1024 * 1024)
    head = log.segments[0]
    upper = head.read_next_offset()
    head.log.truncate_to(1024)
    cleaner = make_cleaner(INT_MAX, max_message_size=1024)
    with pytest.raises(CorruptRecordError):
        cleaner.clean_segments(
            log, [head], fake_map([1, 3]), 0, CleanerStats(), CleanedTransactionMetadata(), -1, upper
        )


def test_cleaning_with_deletes(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024))
    while log.num_log_segments < 2:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    leo = log.log_end_offset
    for k in range(0, leo, 2):
        log.append_as_leader(tombstone_record(k), 0)
    while log.num_log_segments < 4:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    cleaner.clean(ltc(log, 0))
    keys = set(keys_in_log(log))
    assert not any(k in keys for k in range(0, leo, 2))


def test_log_cleaner_stats(make_log: LogFactory) -> None:
    cleaner = make_cleaner(4)  # load factor 0.75: 3 keys fit
    log = make_log(config(segment_bytes=1024))
    for k in (0, 1, 0, 1, 0):
        log.append_as_leader(record(k, k), 0)
    log.roll()
    initial = log.size
    end, stats = cleaner.clean(ltc(log, 2))
    assert end == 5
    assert stats.messages_read == 5
    assert stats.bytes_read == initial
    assert stats.messages_written == 2
    assert stats.bytes_written == log.size
    assert stats.invalid_messages_read == 0
    assert stats.end_time >= stats.start_time


def test_log_cleaner_retains_producer_last_sequence(make_log: LogFactory) -> None:
    cleaner = make_cleaner(10)
    log = make_log(config(segment_bytes=1024))
    log.append_as_leader(record(0, 0), 0)
    log.append_as_leader(record(0, 1, producer_id=1, producer_epoch=0, sequence=0), 0)
    log.append_as_leader(record(0, 2, producer_id=2, producer_epoch=0, sequence=0), 0)
    log.append_as_leader(record(0, 3, producer_id=3, producer_epoch=0, sequence=0), 0)
    log.append_as_leader(record(1, 1, producer_id=2, producer_epoch=0, sequence=1), 0)
    log.roll()
    cleaner.clean(ltc(log, 0))
    assert last_offsets_per_batch(log) == [1, 3, 4]
    assert last_sequences(log) == {1: 0, 2: 1, 3: 0}
    assert keys_in_log(log) == [0, 1]
    assert offsets_in_log(log) == [3, 4]


def test_partial_segment_clean(make_log: LogFactory) -> None:
    cleaner = make_cleaner(2)  # load factor 0.75: 1 key fits
    log = make_log(config(segment_bytes=1024))
    for k in (0, 1, 0, 1, 0):
        log.append_as_leader(record(k, k), 0)
    log.roll()
    cleaner.clean(ltc(log, 2))
    assert keys_in_log(log) == [1, 0, 1, 0]
    assert offsets_in_log(log) == [1, 2, 3, 4]
    cleaner.clean(ltc(log, 3))
    assert keys_in_log(log) == [0, 1, 0]
    assert offsets_in_log(log) == [2, 3, 4]
    cleaner.clean(ltc(log, 4))
    assert keys_in_log(log) == [1, 0]
    assert offsets_in_log(log) == [3, 4]


def test_cleaning_with_uncleanable_section(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024))
    n, num_cleanable, num_total = 10, 2, 7
    while log.num_log_segments <= num_cleanable:
        log.append_as_leader(record(log.log_end_offset % n, log.log_end_offset), 0)
    first_uncleanable = log.log_end_offset + 1
    while log.num_log_segments < num_total - 1:
        log.append_as_leader(record(log.log_end_offset % n, log.log_end_offset), 0)

    def distinct_values() -> list[int]:
        return [len({r.value for b in s.batches() for r in b.records()}) for s in log.segments]

    before = distinct_values()
    assert all(v > n for v in before[:-1])
    cleaner.clean(ltc(log, 0, first_uncleanable))
    after = distinct_values()
    assert all(a < b for b, a in list(zip(before, after))[:num_cleanable])
    assert all(a == b for b, a in list(zip(before, after))[num_cleanable:num_total])


def test_log_to_clean(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=100))
    for _ in range(6):
        log.append_as_leader(singleton_records(bytes(25), b"1"), 0)
    cleanable = ltc(log, log.active_segment.base_offset, log.active_segment.base_offset)
    assert cleanable.total_bytes == log.size - log.active_segment.size


def test_log_to_clean_with_uncleanable_section(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=100))
    for _ in range(6):
        log.append_as_leader(singleton_records(bytes(25), b"1"), 0)
    segs = log.segments
    cleanable = ltc(log, segs[2].base_offset, segs[4].base_offset)
    clean_size = sum(s.size for s in segs[:2])
    cleanable_size = sum(s.size for s in segs[2:4])
    assert cleanable.clean_bytes == clean_size
    assert cleanable.cleanable_bytes == cleanable_size
    assert cleanable.total_bytes == clean_size + cleanable_size
    assert cleanable.cleanable_ratio == pytest.approx(cleanable_size / (clean_size + cleanable_size))


def test_cleaning_with_unkeyed_messages(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024, cleanup_policy=("delete",)))
    while log.num_log_segments < 2:
        log.append_as_leader(unkeyed_record(log.log_end_offset), 0)
    invalid = unkeyed_count(log)
    with_unkeyed = log.size
    while log.num_log_segments < 3:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    expected = log.size - with_unkeyed
    _, stats = cleaner.clean(ltc(log, 0))
    assert unkeyed_count(log) == 0
    # Kafka leaves the emptied first segment behind (0 bytes); kafkalog keeps its last batch as a 61-byte
    # empty batch instead, so the segment holding the log start offset is never empty.
    assert log.size == expected + 61
    assert [list(b.records()) for b in log.segments[0].batches()] == [[]]
    assert stats.invalid_messages_read == invalid


def test_clean_segments_with_abort(make_log: LogFactory) -> None:
    def abort(tp: TopicPartition) -> None:
        raise LogCleaningAbortedError("aborted")

    cleaner = make_cleaner(INT_MAX, check_done=abort)
    log = make_log(config(segment_bytes=1024))
    while log.num_log_segments < 4:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    offset_map = fake_map(keys_in_log(log))
    segments = log.segments[:3]
    with pytest.raises(LogCleaningAbortedError):
        cleaner.clean_segments(
            log,
            segments,
            offset_map,
            0,
            CleanerStats(),
            CleanedTransactionMetadata(),
            -1,
            segments[-1].read_next_offset(),
        )
    assert not list(log.dir.glob("*.cleaned"))


def test_clean_segments_retaining_last_empty_batch(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=1024))
    while log.num_log_segments < 4:
        log.append_as_leader(record(log.log_end_offset, log.log_end_offset), 0)
    keys = keys_in_log(log)
    assert keys == list(range(log.log_end_offset))
    offset_map = fake_map(keys)
    segments = log.segments[:3]
    cleaner.clean_segments(
        log,
        segments,
        offset_map,
        0,
        CleanerStats(),
        CleanedTransactionMetadata(),
        -1,
        segments[-1].read_next_offset(),
    )
    assert log.num_log_segments == 2
    batches = list(log.segments[0].batches())
    assert len(batches) == 1, "one batch should be retained in the cleaned segment"
    assert batches[0].last_offset == log.segments[-1].base_offset - 1
    assert list(batches[0].records()) == []


def check_order(groups: list[list[object]]) -> None:
    bases = [s.base_offset for g in groups for s in g]  # type: ignore[attr-defined]
    assert bases == sorted(bases)


def test_segment_grouping(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=300, index_interval_bytes=1))
    while log.num_log_segments < 10:
        log.append_as_leader(singleton_records(b"hello", b"hello"), 0)
    segs = log.segments
    groups = cleaner.group_segments_by_size(segs, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 1 and len(groups[0]) == log.num_log_segments
    check_order(groups)  # type: ignore[arg-type]
    groups = cleaner.group_segments_by_size(segs, 1, INT_MAX, log.log_end_offset)
    assert len(groups) == log.num_log_segments and all(len(g) == 1 for g in groups)
    groups = cleaner.group_segments_by_size(segs, INT_MAX, 1, log.log_end_offset)
    assert len(groups) == log.num_log_segments and all(len(g) == 1 for g in groups)
    group_size = 3
    log_size = sum(s.size for s in segs[:group_size]) + 1
    groups = cleaner.group_segments_by_size(segs, log_size, INT_MAX, log.log_end_offset)
    check_order(groups)  # type: ignore[arg-type]
    assert all(len(g) == group_size for g in groups[:-1])
    index_size = sum(s.offset_index.size_in_bytes for s in segs[:group_size]) + 1
    groups = cleaner.group_segments_by_size(segs, INT_MAX, index_size, log.log_end_offset)
    check_order(groups)  # type: ignore[arg-type]
    assert all(len(g) == group_size for g in groups[:-1])


def test_segment_grouping_with_sparse_offsets_and_empty_segments(make_log: LogFactory) -> None:
    """Kafka keeps the two emptied segments and merges them on the next cleaning (KAFKA-12889); kafkalog
    never leaves an empty segment: they are removed by the first cleaning already."""
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config())
    k, v = b"key", b"val"
    for i in range(3):
        log.append_as_leader(singleton_records(v, k), 0)
        log.append_as_follower(message_with_offset(k, v, (i + 1) * (INT_MAX + 1) - 1))
        assert log.num_log_segments == i + 1
    log.append_as_leader(singleton_records(v, k), 0)
    first_uncleanable = log.log_end_offset - 1
    assert log.num_log_segments == 4
    groups = cleaner.group_segments_by_size(log.segments, INT_MAX, INT_MAX, first_uncleanable)
    assert len(groups) == 3
    cleaner.clean(ltc(log, 0, first_uncleanable))
    # the first segment holds the log start offset: it keeps its last batch, emptied; the next one goes
    assert log.num_log_segments == 3
    assert [len(list(s.batches())) for s in log.segments[:2]] == [1, 1]
    assert [list(b.records()) for b in log.segments[0].batches()] == [[]]
    assert all(s.size > 0 for s in log.segments[:-1])
    cleaner.clean(ltc(log, 0, first_uncleanable))
    assert log.num_log_segments == 3


def test_segment_grouping_with_sparse_offsets(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=400, index_interval_bytes=1))
    while log.num_log_segments == 1:
        log.append_as_leader(singleton_records(b"hello", b"hello"), 0)
    log.append_as_follower(message_with_offset(b"hello", b"hello", INT_MAX - 1))
    log.append_as_leader(singleton_records(b"hello", b"hello"), 0)
    assert log.active_segment.offset_index.last_offset == INT_MAX
    groups = cleaner.group_segments_by_size(log.segments, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 1
    log.append_as_leader(singleton_records(b"hello", b"hello"), 0)
    groups = cleaner.group_segments_by_size(log.segments, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 2
    check_order(groups)  # type: ignore[arg-type]
    while log.num_log_segments < 4:
        log.append_as_leader(singleton_records(b"hello", b"hello"), 0)
    groups = cleaner.group_segments_by_size(log.segments, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == log.num_log_segments - 1
    for g in groups:
        assert g[-1].offset_index.last_offset - g[0].base_offset <= INT_MAX
    check_order(groups)  # type: ignore[arg-type]


def test_segment_grouping_following_load_of_zero_index(make_log: LogFactory) -> None:
    cleaner = make_cleaner(INT_MAX)
    log = make_log(config(segment_bytes=400, index_interval_bytes=400))
    log.append_as_follower(message_with_offset(b"hello", b"hello", 0))
    log.append_as_follower(message_with_offset(b"hello", b"hello", 1))
    log.roll(INT_MAX // 2)
    log.append_as_follower(message_with_offset(b"hello", b"hello", INT_MAX // 2))
    log.append_as_follower(message_with_offset(b"hello", b"hello", INT_MAX + 1))
    assert log.log_end_offset - 1 - log.log_start_offset > INT_MAX
    assert log.segments[-1].offset_index.last_offset - log.log_start_offset <= INT_MAX
    groups = cleaner.group_segments_by_size(log.segments, INT_MAX, INT_MAX, log.log_end_offset)
    assert len(groups) == 2
    for g in groups:
        assert g[-1].read_next_offset() - 1 - g[0].base_offset <= INT_MAX
    check_order(groups)  # type: ignore[arg-type]


def test_build_offset_map(make_log: LogFactory) -> None:
    offset_map = SkimpyOffsetMap(slots=1000)
    log = make_log(LogConfig(segment_bytes=1024, segment_index_bytes=1024, cleanup_policy=("compact",)))
    cleaner = make_cleaner(INT_MAX)
    for i in range(500):
        log.append_as_leader(record(i, i), 0)
    segments = log.segments

    def check_range(start: int, end: int) -> None:
        stats = CleanerStats()
        cleaner.build_offset_map(log, start, end, offset_map, stats)
        assert offset_map.latest_offset + 1 == end
        assert offset_map.size == end - start
        for i in range(start, end):
            assert offset_map.get(key(i)) == i
        assert offset_map.get(key(start - 1)) == -1
        assert offset_map.get(key(end)) == -1
        assert stats.map_messages_read == end - start

    check_range(0, segments[1].base_offset)
    check_range(segments[1].base_offset, segments[3].base_offset)
    check_range(segments[3].base_offset, log.log_end_offset)


def test_build_offset_map_fake_large(make_log: LogFactory) -> None:
    offset_map = SkimpyOffsetMap(slots=1000)
    log = make_log(LogConfig(segment_bytes=120, segment_index_bytes=120, cleanup_policy=("compact",)))
    cleaner = make_cleaner(INT_MAX)
    offset_end = 7206178
    for k, offset in zip((0, 1), (0, offset_end), strict=True):
        log.append_as_follower(message_with_offset(k, k, offset))
    cleaner.build_offset_map(log, 0, offset_end + 1, offset_map, CleanerStats())
    assert offset_map.latest_offset == offset_end
    assert offset_map.size == 2
    assert offset_map.get(key(0)) == 0
    assert offset_map.get(key(1)) == offset_end


def test_build_partial_offset_map(make_log: LogFactory) -> None:
    log = make_log(config(segment_bytes=1024 * 1024))
    cleaner = make_cleaner(3)  # load factor 0.75: 2 keys fit
    offset_map = cleaner.offset_map
    for i in range(5):
        log.append_as_leader(record(i, i), 0)
    log.roll()
    stats = CleanerStats()
    cleaner.build_offset_map(log, 2, INT_MAX, offset_map, stats)
    assert offset_map.size == 2
    assert offset_map.get(key(0)) == -1
    assert offset_map.get(key(2)) == 2
    assert offset_map.get(key(3)) == 3
    assert offset_map.get(key(4)) == -1
    assert stats.map_messages_read == 4


def test_clean_tombstone(make_log: LogFactory, mock_time: MockTime) -> None:
    cfg = LogConfig(message_timestamp_after_max_ms=LONG_MAX)  # Kafka 3.9's default
    log = make_log(cfg)
    cleaner = make_cleaner(10, time=mock_time)
    log.append_as_leader(
        singleton_records(b"0", b"0", timestamp=mock_time.milliseconds() + cfg.delete_retention_ms + 10_000),
        0,
    )
    log.roll()
    cleaner.clean(ltc(log, 0))
    log.append_as_leader(
        singleton_records(None, b"0", timestamp=mock_time.milliseconds() - cfg.delete_retention_ms - 10_000),
        0,
    )
    log.roll()
    cleaner.clean(ltc(log, 1))
    assert next(iter(log.segments[0].batches())).last_offset == 1, "the tombstone should be retained"
    log.append_as_leader(singleton_records(b"1", b"1", timestamp=mock_time.milliseconds()), 0)
    log.roll()
    cleaner.clean(ltc(log, 2))
    assert next(iter(log.segments[0].batches())).last_offset == 1, "the tombstone should be retained"


@pytest.mark.parametrize("gaps", [[(0, 10, 11)], [(0, 10, 15), (15, 25, 30)]], ids=["one-gap", "two-gaps"])
def test_cleaning_beyond_missing_offsets(
    make_log: LogFactory, tmp_path: Path, gaps: list[tuple[int, int, int]]
) -> None:
    cfg = LogConfig(segment_bytes=1024 * 1024, cleanup_policy=("compact",))
    cleaner = make_cleaner(INT_MAX)
    log = make_log(cfg, directory=tmp_path / f"gaps{len(gaps)}-0")
    for start, end, roll_at in gaps:
        for i in range(start, end):
            log.append_as_follower(message_with_offset(i, i, i))
        log.roll(roll_at)
    log.append_as_follower(message_with_offset(1015, 1015, gaps[-1][2]))
    next_dirty, _ = cleaner.clean(ltc(log, 0, need_now=True))
    assert next_dirty == log.active_segment.base_offset, "cleaning point should pass offset gaps"


def test_segment_with_offset_overflow(tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler) -> None:
    from crash.faults import initialize_log_dir_with_overflowed_segment

    directory = tmp_path / "overflow-0"
    initialize_log_dir_with_overflowed_segment(directory)
    cfg = config(index_interval_bytes=1, file_delete_delay_ms=1000)
    log = Log.open(
        directory, cfg, recovery_point=LONG_MAX, scheduler=scheduler, time=mock_time, last_shutdown_clean=True
    )
    try:
        overflowed = next(
            s
            for s in log.segments
            if any(not s.can_convert_to_relative_offset(b.last_offset) for b in s.batches())
        )
        n_segments = log.num_log_segments
        all_keys = keys_in_log(log)
        offset_map = SkimpyOffsetMap(slots=BIG)
        expected = []
        for i in range(1, len(all_keys), 2):
            expected.append(all_keys[i - 1])
            offset_map.put(key(all_keys[i]), LONG_MAX)
        cleaner = make_cleaner(INT_MAX)
        with pytest.raises(LogCleaningAbortedError):
            cleaner.clean_segments(
                log,
                [overflowed],
                offset_map,
                0,
                CleanerStats(),
                CleanedTransactionMetadata(),
                -1,
                overflowed.read_next_offset(),
            )
        assert log.num_log_segments == n_segments + 1
        assert keys_in_log(log) == all_keys
        upper = log.segments[-1].read_next_offset()
        for segment in log.segments:
            cleaner.clean_segments(
                log, [segment], offset_map, 0, CleanerStats(), CleanedTransactionMetadata(), -1, upper
            )
        assert keys_in_log(log) == expected
    finally:
        log.close()
