"""End-to-end smoke test of a Log: append, roll, read, timestamp lookup, truncate, close, reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import FetchIsolation, Log, LogConfig, MockScheduler
from kafkalog.records import SimpleRecord
from kafkalog.time import MockTime


def test_log_round_trip(tmp_path: Path) -> None:
    time = MockTime()
    scheduler = MockScheduler(time)
    config = LogConfig(segment_bytes=2000, file_delete_delay_ms=1000)
    log = Log.open(tmp_path / "topic-0", config, scheduler=scheduler, time=time)
    for i in range(50):
        info = log.append([SimpleRecord(b"value-%d" % i, b"key-%d" % i, time.milliseconds() + i)])
        assert (info.first_offset, info.last_offset) == (i, i)
    assert [s.base_offset for s in log.segments] == [0, 24, 48]
    assert log.high_watermark == 0
    log.update_high_watermark(log.log_end_offset)
    fetched = log.read(10, 500, FetchIsolation.HIGH_WATERMARK)
    values = [r.value for b in fetched.records.batches() for r in b]
    assert values[0] == b"value-10"
    found = log.fetch_offset_by_timestamp(time.milliseconds() + 30)
    assert found is not None and found.offset == 30
    assert log.truncate_to(45)
    assert (log.log_end_offset, log.high_watermark) == (45, 45)
    log.flush()
    log.close()
    again = Log.open(
        tmp_path / "topic-0", config, recovery_point=log.recovery_point, scheduler=scheduler, time=time
    )
    assert again.log_end_offset == 45 and again.num_log_segments == 2
    assert [r.offset for b in again.read(0, 10**6).records.batches() for r in b] == list(range(24))
    again.close()


def test_a_log_refused_at_open_releases_its_segments(tmp_path: Path) -> None:
    import uuid

    from kafkalog.errors import InconsistentTopicIdError

    directory = tmp_path / "t-0"
    with Log.open(directory, topic_id=uuid.uuid4()) as log:
        log.append([(None, b"v")])
    with pytest.raises(InconsistentTopicIdError):
        Log.open(directory, topic_id=uuid.uuid4())
    index = directory / "00000000000000000000.index"
    assert index.stat().st_size < 1024  # trimmed again by close, not left preallocated (10 MiB)
    with Log.open(directory) as log:
        assert log.log_end_offset == 1
