"""The manager's use of a tiered log (issue 25): the log-start-offset checkpoint (Kafka's
``checkpointLogStartOffsetsInDir`` writes every log with a remote tier, whose log start offset may be below its
first local segment; the loader keeps it only if it was written) and the ``-future`` copy of alter-log-dirs."""

from __future__ import annotations

from pathlib import Path

from kafkalog.datadir import LOG_START_OFFSET_CHECKPOINT
from kafkalog.log import Log, LogConfig
from kafkalog.manager.dirs import CHECKPOINTS
from kafkalog.manager.moves import copy_into, open_future_log
from kafkalog.records import SimpleRecord


def test_tiered_log_start_offset_is_checkpointed_below_the_first_segment(tmp_path: Path) -> None:
    entry = CHECKPOINTS[LOG_START_OFFSET_CHECKPOINT]
    config = LogConfig.from_props({"remote.storage.enable": True, "segment.bytes": 200, "retention.ms": -1})
    with Log.open(tmp_path / "t-0", config, remote_storage_system_enable=True) as log:
        for i in range(10):
            log.append([SimpleRecord(b"v%d" % i)])
        log.update_high_watermark(log.log_end_offset)
        log.update_highest_offset_in_remote_storage(log.log_end_offset - 1)
        log.update_config({"local.retention.bytes": 1})
        assert log.delete_old_segments() > 0
        assert log.log_start_offset == 0 < log.segments[0].base_offset
        assert entry(log) == 0  # kept, so a reopen keeps the remote range
    with Log.open(tmp_path / "p-0", LogConfig(segment_bytes=200)) as plain:
        plain.append([SimpleRecord(b"v")])
        assert entry(plain) is None  # nothing to record: the log start offset is the first segment's base


def test_future_log_of_a_tiered_log_copies_only_the_local_segments(tmp_path: Path) -> None:
    """alter-log-dirs of a tiered partition: the ``-future`` log starts at the local log start offset with the
    log start offset below it and the highest offset in remote storage, reading nothing from the remote tier
    (the old copy read from the log start offset: OffsetOutOfRangeError without a reader, the whole remote
    range with one)."""
    config = LogConfig.from_props({"remote.storage.enable": True, "segment.bytes": 200, "retention.ms": -1})
    with Log.open(tmp_path / "a" / "t-0", config, remote_storage_system_enable=True) as source:
        for i in range(10):
            source.append([SimpleRecord(b"v%d" % i)])
        source.update_high_watermark(source.log_end_offset)
        source.update_highest_offset_in_remote_storage(source.log_end_offset - 2)
        source.update_config({"local.retention.bytes": 1})
        source.delete_old_segments()
        source.maybe_increment_log_start_offset(1, "segment deletion")
        local_start = source.local_log_start_offset
        assert 1 < local_start < source.log_end_offset
        target = open_future_log(
            source, source.topic_partition, tmp_path / "b", None, source.time, lambda *_: None
        )  # type: ignore[arg-type]
        with target:
            target.update_high_watermark(0)
            copy_into(source, target)
            assert (target.log_start_offset, target.local_log_start_offset, target.log_end_offset) == (
                1,
                local_start,
                source.log_end_offset,
            )
            assert target.segments[0].base_offset == local_start
            assert target.highest_offset_in_remote_storage == source.highest_offset_in_remote_storage
            assert (
                target.read(local_start, 1 << 20).records.to_bytes()
                == source.read(local_start, 1 << 20).records.to_bytes()
            )


def test_future_log_of_a_tiered_log_starts_over_past_the_remote_tier(tmp_path: Path) -> None:
    """A ``-future`` log that has learned the highest offset in remote storage and must start over (the current
    log was truncated below its end) starts past that offset: a truncation into the remote range is refused
    (the old copy truncated it fully to the local log start offset: OffsetOutOfRangeError)."""
    config = LogConfig.from_props({"remote.storage.enable": True, "segment.bytes": 200, "retention.ms": -1})
    with Log.open(tmp_path / "a" / "t-0", config, remote_storage_system_enable=True) as source:
        for i in range(10):
            source.append([SimpleRecord(b"v%d" % i)])
        source.update_high_watermark(source.log_end_offset)
        highest = source.log_end_offset - 4
        source.update_highest_offset_in_remote_storage(highest)
        assert source.local_log_start_offset == 0  # the copied segments are still local
        target = open_future_log(
            source, source.topic_partition, tmp_path / "b", None, source.time, lambda *_: None
        )  # type: ignore[arg-type]
        with target:
            target.update_high_watermark(0)
            copy_into(source, target)
            assert target.highest_offset_in_remote_storage == highest
            source.truncate_to(source.log_end_offset - 2)  # above the remote tier: allowed
            source.append([SimpleRecord(b"w")])
            copy_into(source, target)  # the future log is past the current log's end: it starts over
            assert (target.log_start_offset, target.local_log_start_offset, target.log_end_offset) == (
                0,
                highest + 1,
                source.log_end_offset,
            )

            def value(log: Log, offset: int) -> bytes | None:
                batch = next(iter(log.read(offset, 1 << 20).records.batches()))
                return next(r.value for r in batch if r.offset == offset)

            offsets = range(highest + 1, source.log_end_offset)
            assert [value(target, o) for o in offsets] == [value(source, o) for o in offsets] == [b"v7", b"w"]
