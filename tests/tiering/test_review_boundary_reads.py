"""Review of tiering (issue #25): a fetch at every offset from the log start to the log end of a tiered log whose
local retention deleted part of the copied range returns each record once, and under read_committed hides the
aborted transactions whose data and abort marker sit in different tiers (transactions spanning segments)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.log.helpers import append_end_txn_marker, append_transactional

from kafkalog.log import FetchIsolation, Log
from kafkalog.objstore.store import MemoryStore
from kafkalog.readonly import iter_committed
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage.types import TimestampAndOffset
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
def tiered(tmp_path: Path) -> Iterator[tuple[Log, RemoteLogManager, MockTime]]:
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
    rsm = AivenRemoteStorageManager(MemoryStore(url="memory://review-boundary"), RsmConfig(chunk_size=512))
    rlm = RemoteLogManager(rsm, TopicBasedRemoteLogMetadataManager(meta, 3), RemoteLogManagerConfig(), time)
    rlm.start_partition(log)
    log.set_remote_log_reader(rlm.reader_for(log))
    yield log, rlm, time
    log.close()
    meta.close()


def _workload(log: Log, time: MockTime) -> None:
    """Plain batches interleaved with long transactions: each spans several segments, half are aborted."""
    n = 0
    for round_ in range(4):
        pid = 500 + round_
        txn = append_transactional(log, pid, 0, time)
        for _ in range(6):
            txn(2)
            log.append([SimpleRecord(b"plain-%d" % n, None, time.milliseconds())])
            n += 1
        control = ControlRecordType.ABORT if round_ % 2 == 0 else ControlRecordType.COMMIT
        append_end_txn_marker(log, pid, 0, control, time.milliseconds())
    log.append([SimpleRecord(b"tail-%d" % i, None, time.milliseconds()) for i in range(3)])


def test_every_offset_reads_the_same_across_the_boundary(
    tiered: tuple[Log, RemoteLogManager, MockTime],
) -> None:
    log, rlm, time = tiered
    _workload(log, time)
    log.roll()
    end = log.log_end_offset
    committed = [(r.offset, r.value) for r in iter_committed(log, 0, end)]
    everything: list[tuple[int, bytes | None]] = []
    offset = 0
    while offset < end:
        info = log.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        batches = list(MemoryRecords(bytes(info.records.buffer)).batches())
        everything += [(r.offset, r.value) for b in batches if not b.is_control_batch for r in b]
        offset = batches[-1].last_offset + 1
    assert len(committed) < len(everything)  # aborted records exist
    assert rlm.copy_once(log) > 0
    segments = len(log.segments)
    log.update_config({"local.retention.bytes": sum(s.size for s in log.segments[segments // 2 :])})
    log.delete_old_segments()
    assert 0 < log.local_log_start_offset < end  # the boundary is in the middle
    assert log.segments[0].base_offset == log.local_log_start_offset > 20

    for start in range(end):
        got = [(r.offset, r.value) for r in iter_committed(log, start, end, max_fetch_bytes=300)]
        assert got == [c for c in committed if c[0] >= start], start
        seen: list[tuple[int, bytes | None]] = []
        offset = start
        while offset < end:
            info = log.read(offset, 300, FetchIsolation.HIGH_WATERMARK)
            batches = list(MemoryRecords(bytes(info.records.buffer)).batches())
            assert batches, offset
            seen += [
                (r.offset, r.value)
                for b in batches
                if not b.is_control_batch
                for r in b
                if r.offset >= offset
            ]
            offset = batches[-1].last_offset + 1
        assert seen == [e for e in everything if e[0] >= start], start


def test_list_offsets_by_timestamp_is_the_same_across_the_boundary(
    tiered: tuple[Log, RemoteLogManager, MockTime],
) -> None:
    """Every target timestamp finds the same offset after local retention moved half the log to the remote tier
    (timestamps not monotonic: a late record in an early segment holds the largest one so far)."""
    log, rlm, _ = tiered
    stamps = [10_000 + 10 * i for i in range(120)]
    stamps[7] = 10_000 + 10 * 100  # out of order: the first segment's max timestamp is a later one's
    for i, ts in enumerate(stamps):
        log.append([SimpleRecord(b"v%d" % i, None, ts)])
    log.roll()
    targets = sorted({*stamps, *(t + 1 for t in stamps), 0, 99_999})
    before = {t: log.fetch_offset_by_timestamp(t) for t in targets}
    assert rlm.copy_once(log) > 0
    log.update_config({"local.retention.bytes": sum(s.size for s in log.segments[len(log.segments) // 2 :])})
    log.delete_old_segments()
    assert log.local_log_start_offset > 20
    after = {t: log.fetch_offset_by_timestamp(t) for t in targets}
    wrong = {t: (_key(before[t]), _key(after[t])) for t in targets if _key(before[t]) != _key(after[t])}
    assert wrong == {}


def _key(found: TimestampAndOffset | None) -> tuple[int, int] | None:
    return None if found is None else (found.timestamp, found.offset)
