"""The log-start-offset checkpoint of a tiered log (issue 25): Kafka's ``checkpointLogStartOffsetsInDir``
writes every log with a remote tier, whose log start offset may be below its first local segment (the
loader keeps it only if it was written)."""

from __future__ import annotations

from pathlib import Path

from kafkalog.datadir import LOG_START_OFFSET_CHECKPOINT
from kafkalog.log import Log, LogConfig
from kafkalog.manager.dirs import CHECKPOINTS
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
