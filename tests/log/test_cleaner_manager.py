"""Kafka's ``LogCleanerManagerTest`` / ``LogCleanerIntegrationTest`` basics: what is cleanable (dirty ratio,
compaction lags, LSO and HW bounds), the ``cleaner-offset-checkpoint`` file, cleaning states, the background
cleaner on a scheduler and its synchronous entry points, and the I/O throttle."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkalog.cleaner.cleaner import Throttler
from kafkalog.cleaner.manager import (
    CleanerConfig,
    LogCleanerManager,
    cleanable_offsets,
    max_compaction_delay,
)
from kafkalog.cleaner.service import LogCleaner
from kafkalog.errors import InvalidConfigurationError, KafkaError, LogCleaningAbortedError
from kafkalog.log import KafkaScheduler, Log, LogConfig, MockScheduler
from kafkalog.log.names import TopicPartition
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import records
from .test_cleaner_helpers import append_idempotent, keys_in_log, marker, record

TS = 1_700_000_000_000
COMPACT = LogConfig(segment_bytes=1024, segment_index_bytes=1024, cleanup_policy=("compact",))
SMALL = {"log.cleaner.dedupe.buffer.size": 1 << 20, "log.cleaner.backoff.ms": 100}


def fill(log: Log, segments: int, keys: int = 5, ts: int | None = None) -> None:
    """Append keyed records (``keys`` distinct keys) until the log has ``segments`` segments."""
    while log.num_log_segments < segments:
        n = log.log_end_offset
        stamp = TS + n if ts is None else ts
        log.append_as_leader(records([SimpleRecord(b"value-%d" % n, b"%d" % (n % keys), stamp)]), 0)
    log.update_high_watermark(log.log_end_offset)


def latest_values(log: Log) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for s in log.segments:
        for b in s.batches():
            for r in b.records():
                out[r.key] = r.value
    return out


def test_checkpoint_file_is_kafkas_text_format(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(COMPACT)
    fill(log, 4)
    before = latest_values(log)
    results = LogCleaner(SMALL).clean_log(log)
    assert results and results[-1].end_offset == log.active_segment.base_offset
    text = (log_dir.parent / "cleaner-offset-checkpoint").read_text()
    assert text == f"0\n1\ntest_topic 1 {log.active_segment.base_offset}\n"
    assert latest_values(log) == before
    # a second clean has nothing left to do
    assert LogCleaner(SMALL).clean_log(log) == []


def test_standalone_clean_keeps_other_partitions_checkpoints(make_log: LogFactory, tmp_path: Path) -> None:
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n1\nother 3 42\n")
    log = make_log(COMPACT)
    fill(log, 3)
    LogCleaner(SMALL).clean_log(log)
    lines = (tmp_path / "cleaner-offset-checkpoint").read_text().splitlines()
    assert lines[:2] == ["0", "2"] and "other 3 42" in lines


def test_cleanable_offsets_reset_invalid_checkpoints(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(COMPACT)
    fill(log, 3)
    log.maybe_increment_log_start_offset(2)
    now = mock_time.milliseconds()
    below = cleanable_offsets(log, 1, now)
    assert (below.first_dirty_offset, below.force_update_checkpoint) == (2, True)
    above = cleanable_offsets(log, log.log_end_offset + 1, now)
    assert (above.first_dirty_offset, above.force_update_checkpoint) == (2, True)
    ok = cleanable_offsets(log, 5, now)
    assert (ok.first_dirty_offset, ok.first_uncleanable_dirty_offset, ok.force_update_checkpoint) == (
        5,
        log.active_segment.base_offset,
        False,
    )


def test_never_cleans_past_high_watermark_or_lso(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(COMPACT)
    fill(log, 3)
    log.update_high_watermark(5)
    assert cleanable_offsets(log, 0, mock_time.milliseconds()).first_uncleanable_dirty_offset == 5
    log.update_high_watermark(log.log_end_offset)
    append_idempotent(log, 9, 0, mock_time, transactional=True)([1])  # an open transaction
    open_at = log.log_end_offset - 1
    fill(log, log.num_log_segments + 2)
    assert log.last_stable_offset == open_at
    offsets = cleanable_offsets(log, 0, mock_time.milliseconds())
    assert offsets.first_uncleanable_dirty_offset == open_at
    results = LogCleaner(SMALL).clean_log(log)
    # the segment holding the first unstable offset, and everything after it, is left alone
    segment_of_lso = log.local_log.segments.floor_segment(open_at)
    assert segment_of_lso is not None and results[-1].end_offset == segment_of_lso.base_offset


def test_min_compaction_lag(make_log: LogFactory, mock_time: MockTime) -> None:
    lag = 60_000
    log = make_log(COMPACT.replace(min_compaction_lag_ms=lag))
    now = mock_time.milliseconds()
    fill(log, 2, ts=now - 2 * lag)  # old enough
    old_end = log.active_segment.base_offset
    fill(log, 4, ts=now)  # too young
    assert cleanable_offsets(log, 0, now).first_uncleanable_dirty_offset == old_end
    assert (
        cleanable_offsets(log, 0, now + 2 * lag).first_uncleanable_dirty_offset
        == log.active_segment.base_offset
    )


def test_dirtiest_log_is_chosen_above_the_ratio(tmp_path: Path, mock_time: MockTime) -> None:
    scheduler = MockScheduler(mock_time)
    logs = {}
    for name, keys in (("a-0", 200), ("b-0", 2)):
        log = Log.open(
            tmp_path / name, COMPACT, scheduler=scheduler, time=mock_time, last_shutdown_clean=True
        )
        fill(log, 4, keys=keys)
        logs[log.topic_partition] = log
    manager = LogCleanerManager([tmp_path], lambda: logs, mock_time)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.cleanable_ratio == 1.0
    assert manager.cleaning_state(ltc.topic_partition) == "in-progress"
    other = manager.grab_filthiest_compacted_log()
    assert other is not None and other.topic_partition != ltc.topic_partition
    assert manager.grab_filthiest_compacted_log() is None  # both in progress
    manager.done_cleaning(ltc.topic_partition, tmp_path, ltc.first_uncleanable_offset)
    manager.done_cleaning(other.topic_partition, tmp_path, other.first_uncleanable_offset)
    # fully cleaned logs are below the dirty ratio now
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.dirtiest_log_cleanable_ratio == 0.0
    for log in logs.values():
        log.close()


def test_max_compaction_lag_forces_cleaning(
    make_log: LogFactory, mock_time: MockTime, tmp_path: Path
) -> None:
    lag = 100_000
    log = make_log(COMPACT.replace(max_compaction_lag_ms=lag, min_cleanable_dirty_ratio=1.0))
    now = mock_time.milliseconds()
    fill(log, 3, ts=now - 2 * lag)
    assert max_compaction_delay(log, 0, now) == lag
    manager = LogCleanerManager([tmp_path], lambda: {log.topic_partition: log}, mock_time)
    ltc = manager.grab_filthiest_compacted_log()
    assert ltc is not None and ltc.need_compaction_now


def test_non_compacted_and_uncleanable_logs_are_skipped(
    make_log: LogFactory, mock_time: MockTime, tmp_path: Path
) -> None:
    log = make_log(COMPACT.replace(cleanup_policy=("delete",)))
    fill(log, 3)
    manager = LogCleanerManager([tmp_path], lambda: {log.topic_partition: log}, mock_time)
    assert manager.grab_filthiest_compacted_log() is None
    log.update_config(COMPACT)
    manager.mark_partition_uncleanable(tmp_path, log.topic_partition)
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.uncleanable_partitions(tmp_path) == {log.topic_partition}


def test_cleaning_states() -> None:
    manager = LogCleanerManager()
    tp = TopicPartition("t", 0)
    manager.abort_and_pause_cleaning(tp)
    assert manager.cleaning_state(tp) == "paused(1)"
    manager.abort_and_pause_cleaning(tp)
    assert manager.cleaning_state(tp) == "paused(2)"
    assert not manager.start_cleaning(tp)
    manager.resume_cleaning([tp])
    manager.resume_cleaning([tp])
    assert manager.cleaning_state(tp) is None
    with pytest.raises(KafkaError):
        manager.resume_cleaning([tp])
    assert manager.start_cleaning(tp)
    with pytest.raises(KafkaError):  # nobody is cleaning to acknowledge the abort
        manager.abort_and_pause_cleaning(tp, timeout_s=0.05)
    assert manager.cleaning_state(tp) == "aborted"
    with pytest.raises(LogCleaningAbortedError):
        manager.check_cleaning_aborted(tp)
    manager.done_cleaning(tp, Path("/nonexistent"), 10)
    assert manager.cleaning_state(tp) == "paused(1)"


def test_abort_stops_a_cleaning_in_progress(make_log: LogFactory) -> None:
    log = make_log(COMPACT)
    fill(log, 5)
    before = [s.log.path.read_bytes() for s in log.segments]
    cleaner = LogCleaner(SMALL)
    calls = 0

    def abort_midway(tp: TopicPartition) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            cleaner.manager._in_progress[tp] = "aborted"  # what abort_and_pause_cleaning does
        cleaner.manager.check_cleaning_aborted(tp)

    cleaner._sync_cleaner = cleaner._new_cleaner(-1, abort_midway)
    assert cleaner.clean_log(log) == []
    assert cleaner.manager.cleaning_state(log.topic_partition) == "paused(1)"
    assert [s.log.path.read_bytes() for s in log.segments] == before
    assert not list(log.dir.glob("*.cleaned"))


def test_truncation_while_cleaning_aborts_the_swap(make_log: LogFactory) -> None:
    log = make_log(COMPACT)
    fill(log, 5)
    cleaner = LogCleaner(SMALL)
    truncated = False

    def truncate_once(tp: TopicPartition) -> None:
        nonlocal truncated
        if not truncated and log.log_end_offset > 3:
            truncated = True
            log.truncate_to(3)  # a follower truncation under the cleaner
            log.append_as_leader(record(99, 99), 0)

    cleaner._sync_cleaner = cleaner._new_cleaner(-1, truncate_once)
    log.update_high_watermark(log.log_end_offset)
    assert cleaner.clean_log(log) == []
    assert keys_in_log(log) == [0, 1, 2, 99]
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))


def test_background_cleaner_on_a_mock_scheduler(tmp_path: Path, mock_time: MockTime) -> None:
    scheduler = MockScheduler(mock_time)
    log = Log.open(tmp_path / "bg-0", COMPACT, scheduler=scheduler, time=mock_time, last_shutdown_clean=True)
    fill(log, 4)
    before = latest_values(log)
    size = log.size
    cleaner = LogCleaner(SMALL, [tmp_path], lambda: {log.topic_partition: log}, mock_time)
    cleaner.startup(scheduler)  # the first run is due now
    assert log.size < size and latest_values(log) == before
    checkpoint = cleaner.manager.all_cleaner_checkpoints()[log.topic_partition]
    assert checkpoint == log.active_segment.base_offset
    fill(log, 7)
    mock_time.sleep(100)  # the backoff: the task runs again
    assert cleaner.manager.all_cleaner_checkpoints()[log.topic_partition] == log.active_segment.base_offset
    metrics = cleaner.metrics()
    assert metrics["DeadThreadCount"] == 0 and metrics["cleaner-recopy-percent"] < 100
    cleaner.shutdown()
    assert scheduler.pending() == [n for n in scheduler.pending() if not n.startswith("kafka-log-cleaner")]
    log.close()


def test_background_cleaner_threads(tmp_path: Path) -> None:
    scheduler = KafkaScheduler(1).startup()
    log = Log.open(tmp_path / "threads-0", COMPACT, scheduler=scheduler, last_shutdown_clean=True)
    try:
        fill(log, 6)
        before = latest_values(log)
        size = log.size
        target = log.active_segment.base_offset
        cleaner = LogCleaner(
            {**SMALL, "log.cleaner.threads": 2}, [tmp_path], lambda: {log.topic_partition: log}
        )
        cleaner.startup()
        try:
            assert cleaner.await_cleaned(log.topic_partition, target, 20_000)
        finally:
            cleaner.shutdown()
        assert latest_values(log) == before and log.size < size
    finally:
        log.close()
        scheduler.shutdown()


def test_clean_once_and_compacted_log_retention(tmp_path: Path, mock_time: MockTime) -> None:
    """``clean_once`` cleans every dirty log, then applies the log-start-offset rule to compacted logs
    (KAFKA-7400)."""
    scheduler = MockScheduler(mock_time)
    log = Log.open(
        tmp_path / "once-0", COMPACT, scheduler=scheduler, time=mock_time, last_shutdown_clean=True
    )
    fill(log, 5)
    cleaner = LogCleaner(SMALL, [tmp_path], lambda: {log.topic_partition: log}, mock_time)
    results = cleaner.clean_once()
    assert len(results) == 1 and results[0].topic_partition == log.topic_partition
    assert cleaner.clean_once() == []
    segments = log.num_log_segments
    log.maybe_increment_log_start_offset(log.active_segment.base_offset)
    cleaner.clean_once()
    assert log.num_log_segments < segments
    log.close()


def test_clean_log_requires_compaction(make_log: LogFactory) -> None:
    log = make_log(COMPACT.replace(cleanup_policy=("delete",)))
    with pytest.raises(InvalidConfigurationError):
        LogCleaner(SMALL).clean_log(log)


def test_transactional_log_compacts_to_committed_values(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(COMPACT)
    p = append_idempotent(log, 1, 0, mock_time, transactional=True)
    p([11, 12])
    marker(log, 1, 0, ControlRecordType.ABORT, mock_time)
    p([12, 13])
    marker(log, 1, 0, ControlRecordType.COMMIT, mock_time)
    fill(log, 3)
    LogCleaner(SMALL).clean_log(log)
    keys = keys_in_log(log)
    assert 11 not in keys and keys.count(12) == 1 and keys.count(13) == 1


def test_cleaner_config() -> None:
    cfg = CleanerConfig.from_props(
        {
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": 1 << 20,
            "log.cleaner.io.buffer.load.factor": "0.5",
            "log.cleaner.io.max.bytes.per.second": "1e6",
            "log.cleaner.enable": "false",
        }
    )
    assert (cfg.num_threads, cfg.dedupe_buffer_size, cfg.dedupe_buffer_load_factor) == (2, 1 << 20, 0.5)
    assert cfg.max_io_bytes_per_second == 1e6 and not cfg.enable_cleaner
    with pytest.raises(InvalidConfigurationError):
        CleanerConfig.from_props({"log.cleaner.nope": 1})
    with pytest.raises(InvalidConfigurationError):
        CleanerConfig(num_threads=0)


def test_throttler_sleeps_off_the_excess() -> None:
    clock = MockTime()
    throttler = Throttler(1000.0, check_interval_ms=100, time=clock)
    throttler.maybe_throttle(10)
    clock.sleep(200)
    throttler.maybe_throttle(1990)  # 2000 bytes in 200 ms = 10 kB/s: 1.8 s too fast
    assert throttler.total_sleep_ms == pytest.approx(1800, rel=1e-6)
    unlimited = Throttler(float("inf"), time=clock)
    unlimited.maybe_throttle(1 << 30)
    assert unlimited.total_sleep_ms == 0


def test_throttled_cleaning_takes_its_time(make_log: LogFactory) -> None:
    log = make_log(COMPACT)
    fill(log, 4)
    cleaner = LogCleaner({**SMALL, "log.cleaner.io.max.bytes.per.second": 20_000})
    cleaner.throttler.check_interval_ms = 1
    start = time.monotonic()
    cleaner.clean_log(log)
    assert time.monotonic() - start > 0.1
    assert cleaner.throttler.total_sleep_ms > 0


def test_compressed_and_idempotent_log(make_log: LogFactory, mock_time: MockTime) -> None:
    log = make_log(COMPACT.replace(segment_bytes=4096))
    for i in range(60):
        batch = MemoryRecords.build(
            [SimpleRecord(b"v%d-%d" % (i, j), b"k%d" % ((i + j) % 7), TS + i) for j in range(5)],
            compression="zstd" if i % 2 else "lz4",
            producer_id=5,
            producer_epoch=0,
            base_sequence=5 * i,
        )
        log.append_as_leader(batch, 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = latest_values(log)
    LogCleaner(SMALL).clean_log(log)
    assert latest_values(log) == before
    # the producer's last batch (offsets 295..299) is still whole: its sequence survives
    last = [b for s in log.segments for b in s.batches()][-1]
    assert (last.base_offset, last.last_offset, last.last_sequence) == (295, 299, 299)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_replaced_segments_release_their_descriptors(make_log: LogFactory) -> None:
    """Replaced segments are unlinked without closing their descriptors (a reader may hold them); the
    descriptors go when the segments are no longer referenced."""
    import gc
    import os

    log = make_log(COMPACT.replace(file_delete_delay_ms=0))

    def deleted_open_files() -> int:
        count = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            count += target.startswith(str(log.dir)) and target.endswith("(deleted)")
        return count

    cleaner = LogCleaner(SMALL)
    for _ in range(4):
        fill(log, log.num_log_segments + 4)
        cleaner.clean_log(log)
    gc.collect()
    assert deleted_open_files() == 0
