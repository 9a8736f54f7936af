"""Review of tiering (issue #25): a truncation of a tiered log below its highest offset in remote storage.

``Log.truncate_to`` keeps ``highest_offset_in_remote_storage`` (as Kafka's ``UnifiedLog`` does); in kafkalog, which
has no replication and so no new leader epoch to separate the lineages, local retention then treats the offsets
re-appended after the truncation as already copied: it deletes local segments the remote tier never received, and
reads of their offsets fall through to the remote copy of the truncated records. A truncation of a tiered log
is therefore refused at or below that offset (``OffsetOutOfRangeError``, nothing changes, after a restart too)
and allowed above it."""

from __future__ import annotations

import time as wall
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import OffsetOutOfRangeError
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


def _files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.dir.iterdir()) if p.is_file()}


def test_local_retention_never_deletes_what_was_appended_after_a_truncation_below_the_remote_tier(
    tiered: tuple[Log, RemoteLogManager],
) -> None:
    log, rlm = tiered
    _append(log, b"old", 0, 120)
    assert rlm.copy_once(log) > 0
    highest = log.highest_offset_in_remote_storage
    target = highest // 2
    assert target > log.segments[0].base_offset  # a truncation inside the local segments: no full truncation
    before = _files(log)

    with pytest.raises(OffsetOutOfRangeError, match=f"offsets up to {highest} are in remote storage"):
        log.truncate_to(target)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(highest)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_fully_and_start_at(target, 0)
    assert _files(log) == before  # nothing changed on disk
    assert (log.log_end_offset, log.highest_offset_in_remote_storage) == (120, highest)

    target = highest + 1  # above the remote tier: allowed
    assert target < log.log_end_offset
    assert log.truncate_to(target)
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


def test_a_truncation_into_the_remote_tier_is_refused_after_a_restart(tmp_path: Path) -> None:
    """The highest offset in remote storage comes back from ``__remote_log_metadata`` when the partition
    starts again, and with it the refusal (lowering it in memory would not survive a restart)."""
    data = tmp_path / "data"
    store = MemoryStore(url="memory://review-truncation-restart")
    config = {**SMALL, "remote.storage.enable": "true", "retention.ms": -1}

    def open_tiered(meta: MetadataLogs) -> tuple[Log, RemoteLogManager]:
        log = Log.open(
            data / "orders-0", config, time=MockTime(), topic_id=TOPIC_ID, remote_storage_system_enable=True
        )
        log.hw_follows_leo = True
        rsm = AivenRemoteStorageManager(store, RsmConfig(chunk_size=512))
        rlm = RemoteLogManager(
            rsm, TopicBasedRemoteLogMetadataManager(meta, 3), RemoteLogManagerConfig(), MockTime()
        )
        rlm.start_partition(log)
        log.set_remote_log_reader(rlm.reader_for(log))
        return log, rlm

    meta = MetadataLogs(data)
    log, rlm = open_tiered(meta)
    _append(log, b"old", 0, 120)
    assert rlm.copy_once(log) > 0
    highest = log.highest_offset_in_remote_storage
    log.close()
    meta.close()

    meta = MetadataLogs(data)
    log, rlm = open_tiered(meta)
    try:
        assert log.highest_offset_in_remote_storage == highest
        before = _files(log)
        with pytest.raises(OffsetOutOfRangeError):
            log.truncate_to(highest // 2)
        assert _files(log) == before
        assert _values(log) == {i: b"old-%04d" % i for i in range(120)}
    finally:
        log.close()
        meta.close()


def test_a_tail_recovery_truncated_below_the_remote_tier_is_never_appended_again(tmp_path: Path) -> None:
    """Recovery truncated a tail the remote tier already holds (a power loss before the copied segment was
    flushed, ``recover --truncate-after-damage``; here a truncation with tiering off): the manager's start
    begins the local log again just above the highest remote offset, so new records never reuse copied
    offsets (before, they did, and local retention deleted them as copied)."""
    from kafkalog.manager import LogManager
    from kafkalog.objstore.open import forget_memory_store

    from .tier_helpers import TIERED_TOPIC, produce, read_all

    name = f"review-trunc-{tmp_path.name}"
    props = {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": 3_600_000,
        "remote.log.metadata.topic.num.partitions": 1,
        "rsm.config.storage.url": f"memory://{name}",
        "rsm.config.chunk.size": 4096,
    }
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    try:
        with LogManager.open(data, config=dict(props), time=time) as mgr:
            (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
            produce(log, 200)
            assert mgr.copy_remote_segments() > 0
            highest = log.highest_offset_in_remote_storage
            old = dict(read_all(log, 0))
            log_dir = log.dir
        untiered = {k: v for k, v in TIERED_TOPIC.items() if k != "remote.storage.enable"}
        with Log.open(log_dir, untiered, time=time) as plain:  # tiering off: the tail is lost locally
            plain.truncate_to(highest // 2)
        with LogManager.open(data, config=dict(props), time=time) as mgr:
            log = mgr.get_log("t", 0)
            assert log.log_end_offset == highest + 1
            assert dict(read_all(log, 0)) == {o: v for o, v in old.items() if o <= highest}
            for i in range(50):
                log.append_as_leader(MemoryRecords.build([SimpleRecord(b"new%d" % i, b"k")]), 0)
            mgr.copy_remote_segments()
            mgr.alter_topic_config("t", {"local.retention.bytes": 1})
            mgr.delete_old_segments()
            expected = {o: v for o, v in old.items() if o <= highest}
            expected |= {highest + 1 + i: b"new%d" % i for i in range(50)}
            assert dict(read_all(log, 0)) == expected
    finally:
        forget_memory_store(name)
