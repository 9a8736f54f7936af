"""Review of tiering (issue #25): a truncation of a tiered log below its highest offset in remote storage.

``Log.truncate_to`` keeps ``highest_offset_in_remote_storage`` (as Kafka's ``UnifiedLog`` does); in kafkalog, which
has no replication and so no new leader epoch to separate the lineages, local retention then treats the offsets
re-appended after the truncation as already copied: it deletes local segments the remote tier never received, and
reads of their offsets fall through to the remote copy of the truncated records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.log import FetchIsolation, Log
from kafkalog.objstore.store import MemoryStore
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.tiering import (
    AivenRemoteStorageManager,
    RemoteLogManager,
    RemoteLogManagerConfig,
    RsmConfig,
    TopicBasedRemoteLogMetadataManager,
)
from kafkalog.time import MockTime

from .conftest import SMALL, TOPIC_ID, MetadataLogs


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[tuple[Log, RemoteLogManager]]:
    data = tmp_path / "data"
    meta = MetadataLogs(data)
    time = MockTime()
    log = Log.open(
        data / "orders-0",
        {**SMALL, "remote.storage.enable": "true", "retention.ms": -1},
        time=time,
        topic_id=TOPIC_ID,
        remote_storage_system_enable=True,
    )
    log.hw_follows_leo = True
    rsm = AivenRemoteStorageManager(MemoryStore(url="memory://review-truncation"), RsmConfig(chunk_size=512))
    rlm = RemoteLogManager(rsm, TopicBasedRemoteLogMetadataManager(meta, 3), RemoteLogManagerConfig(), time)
    rlm.start_partition(log)
    log.set_remote_log_reader(rlm.reader_for(log))
    yield log, rlm
    log.close()
    meta.close()


def _append(log: Log, prefix: bytes, start: int, n: int) -> None:
    for i in range(start, start + n):
        log.append([SimpleRecord(prefix + b"-%04d" % i, None, 1_000 + i)], leader_epoch=0)


def _values(log: Log) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    offset = log.log_start_offset
    while offset < log.high_watermark:
        info = log.read(offset, 1 << 16, FetchIsolation.HIGH_WATERMARK)
        batches = list(MemoryRecords(bytes(info.records.buffer)).batches())
        assert batches, offset
        for batch in batches:
            for record in batch:
                if record.offset >= offset:
                    out[record.offset] = record.value
            offset = batch.last_offset + 1
    return out


def test_local_retention_never_deletes_what_was_appended_after_a_truncation_below_the_remote_tier(
    tiered: tuple[Log, RemoteLogManager],
) -> None:
    log, rlm = tiered
    _append(log, b"old", 0, 120)
    assert rlm.copy_once(log) > 0
    highest = log.highest_offset_in_remote_storage
    target = highest // 2
    assert target > log.segments[0].base_offset  # a truncation inside the local segments: no full truncation

    log.truncate_to(target)
    _append(log, b"new", target, 120)
    rlm.copy_once(log)  # the copy task runs as it would in the background
    log.update_config({"local.retention.bytes": 1})
    log.delete_old_segments()  # local retention
    rlm.copy_once(log)

    values = _values(log)
    expected = {i: b"old-%04d" % i for i in range(target)} | {
        i: b"new-%04d" % i for i in range(target, target + 120)
    }
    wrong = sorted(o for o, v in expected.items() if values.get(o) != v)
    assert wrong == [], f"{len(wrong)} offsets read wrong or lost, first {wrong[:3]}"
