"""Review of tiering (issue #25): the read-only side (``ReadOnlyDataDir``: ``consume``/``info``/``verify`` and the
Spark source) reads a tiered data dir and its archive as one history: every offset once, whatever the archive
also holds (segments still local, the objects of a copy a crash cut before COPY_SEGMENT_FINISHED)."""

from __future__ import annotations

import time as wall
from pathlib import Path
from typing import Any

import pytest

from kafkalog.manager import LogManager
from kafkalog.readonly.log import ReadOnlyDataDir
from kafkalog.remote import RemoteLogSegmentId, RemoteLogSegmentMetadata, Uuid
from kafkalog.tiering import topic_id_partition
from kafkalog.time import MockTime

from .conftest import reader_rows, segment_data
from .tier_helpers import TIERED_TOPIC, produce


@pytest.mark.parametrize("local_retention", [False, True])
def test_the_read_only_side_reads_each_offset_once(
    tmp_path: Path, props: dict[str, Any], local_retention: bool
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic(
            "t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1 if local_retention else -2}
        )
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        # a copy a crash cut after its upload, before COPY_SEGMENT_FINISHED (cleaned up by the next pass)
        first, nxt = log.segments[0], log.segments[1]
        tier = mgr.remote_tier
        assert tier is not None
        orphan = RemoteLogSegmentMetadata(
            RemoteLogSegmentId(topic_id_partition(log), Uuid.random_uuid()),
            first.base_offset,
            nxt.base_offset - 1,
            first.largest_timestamp(),
            0,
            time.milliseconds(),
            first.size,
            ((0, 0),),
        )
        tier.rlm.rsm.copy_log_segment_data(orphan, segment_data(log, first, nxt.base_offset))
        mgr.delete_old_segments()
        end = log.log_end_offset
        assert end == 200
        assert (log.local_log_start_offset > 0) == local_retention
        rl = ReadOnlyDataDir(data, storage_options={}).log("t", 0)
        offsets = [o for o, _, _ in reader_rows(rl, 0, end)]
        assert offsets == list(range(end))
