"""RemoteLogManager against ``memory://``: copy after roll (in order, below the LSO and HW), reads of the remote
tier byte-identical to the local ones, transactions under read_committed, crash recovery without orphans, a
storage outage that pauses and resumes copying, and total retention over both tiers."""

from __future__ import annotations

import itertools
import threading
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.log.helpers import append_end_txn_marker, append_transactional

from kafkalog.errors import RemoteStorageError
from kafkalog.log import FetchIsolation, Log
from kafkalog.objstore.store import MemoryStore
from kafkalog.readonly import ReadOnlyDataDir
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.remote import RemoteLogSegmentMetadata, RemoteLogSegmentState
from kafkalog.storage.txn_index import AbortedTxn
from kafkalog.tiering import (
    QUOTA_WAIT_MS,
    AivenRemoteStorageManager,
    LogSegmentData,
    RemoteLogManager,
    RemoteLogManagerConfig,
    RsmConfig,
    TopicBasedRemoteLogMetadataManager,
)
from kafkalog.time import MockTime

from .conftest import SMALL, TOPIC_ID, MetadataLogs, reader_rows

S = RemoteLogSegmentState
_stores = itertools.count()


class FlakyStore(MemoryStore):
    """A MemoryStore that can be taken down (every request fails like an unreachable endpoint)."""

    def __init__(self) -> None:
        super().__init__(url=f"memory://flaky-{next(_stores)}")
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise RemoteStorageError(f"{self.url}: connection refused")

    def put(self, key: str, data: bytes) -> None:
        self._check()
        super().put(key, data)

    def get(self, key: str) -> bytes:
        self._check()
        return super().get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self._check()
        return super().get_range(key, start, end)

    def delete(self, key: str) -> None:
        self._check()
        super().delete(key)

    def keys(self) -> list[str]:
        return [o.key for o in self.list("", delimiter=False).objects]


@dataclass
class Tier:
    """One data directory with a tiered user log, its metadata topic, an RSM over ``store`` and an RLM."""

    data_dir: Path
    store: FlakyStore
    time: MockTime
    meta: MetadataLogs
    log: Log
    rlm: RemoteLogManager

    def close(self) -> None:
        self.log.close()
        self.meta.close()

    def objects_of_finished(self) -> set[str]:
        """The object keys the metadata says should exist (the FINISHED segments)."""
        rsm = self.rlm.rsm
        assert isinstance(rsm, AivenRemoteStorageManager)
        keys = set()
        for md in self.segments():
            assert md.state is S.COPY_SEGMENT_FINISHED
            stem = rsm.segment_key(md)
            keys |= {stem + ".log", stem + ".indexes", stem + ".rsm-manifest"}
        return keys

    def segments(self) -> list[RemoteLogSegmentMetadata]:
        from kafkalog.tiering.rlm import topic_id_partition

        return list(self.rlm.rlmm.list_remote_log_segments(topic_id_partition(self.log)))


def open_tier(
    data_dir: Path,
    store: FlakyStore,
    time: MockTime,
    config: dict[str, object] | None = None,
    rsm_factory: Callable[[FlakyStore], AivenRemoteStorageManager] | None = None,
    rlmm_class: type[TopicBasedRemoteLogMetadataManager] = TopicBasedRemoteLogMetadataManager,
    log_start_offset: int = 0,
    quota_wait: Callable[[int], object] | None = None,
) -> Tier:
    meta = MetadataLogs(data_dir)
    log = Log.open(
        data_dir / "orders-0",
        {**SMALL, "remote.storage.enable": "true", "retention.ms": -1, **(config or {})},
        log_start_offset=log_start_offset,
        time=time,
        topic_id=TOPIC_ID,
        remote_storage_system_enable=True,
    )
    log.hw_follows_leo = True
    rsm = (rsm_factory or (lambda s: AivenRemoteStorageManager(s, RsmConfig(chunk_size=512))))(store)
    rlmm = rlmm_class(meta, 3)
    rlm = RemoteLogManager(rsm, rlmm, RemoteLogManagerConfig(broker_id=7), time, quota_wait)
    rlm.start_partition(log)
    log.set_remote_log_reader(rlm.reader_for(log))
    return Tier(data_dir, store, time, meta, log, rlm)


@pytest.fixture
def tiers() -> Iterator[list[Tier]]:
    opened: list[Tier] = []
    yield opened
    for tier in opened:
        try:
            tier.close()
        except Exception:  # a test may have closed it
            pass


def _append(log: Log, n: int, start: int = 0, epoch: int = 0, ts: int = 1_000) -> None:
    for i in range(start, start + n):
        log.append([SimpleRecord(b"value-%04d" % i, b"k%d" % (i % 5), ts + i)], leader_epoch=epoch)


def _rolled_ends(log: Log) -> list[int]:
    return [nxt.base_offset - 1 for nxt in log.segments[1:]]


def _local_bytes(log: Log, start: int, end: int) -> bytes:
    out = b""
    offset = start
    while offset < end:
        info = log.read(offset, 1 << 20, FetchIsolation.HIGH_WATERMARK)
        data = bytes(info.records.buffer)
        batches = list(MemoryRecords(data).batches())
        assert batches
        out += data
        offset = batches[-1].last_offset + 1
    return out


def _remote_bytes(
    tier: Tier, start: int, end: int, max_bytes: int = 1 << 20, committed: bool = False
) -> tuple[bytes, list[AbortedTxn]]:
    reader = tier.rlm.reader_for(tier.log)
    out = b""
    aborted: list[AbortedTxn] = []
    offset = start
    while offset < end:
        info = reader.read(offset, max_bytes, tier.log.high_watermark, True, committed)
        assert info is not None, offset
        data = bytes(info.records.buffer)
        batches = list(MemoryRecords(data).batches())
        assert batches, offset
        assert batches[0].last_offset >= offset
        out += data
        aborted += info.aborted_transactions or []
        offset = batches[-1].last_offset + 1
    return out, aborted


def test_copy_after_roll_reads_back_byte_identical(tmp_path: Path, tiers: list[Tier]) -> None:
    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime())
    tiers.append(tier)
    log = tier.log
    _append(log, 60, epoch=0)
    _append(log, 60, start=60, epoch=2)
    ends = _rolled_ends(log)
    assert len(ends) >= 5
    assert tier.rlm.copy_once(log) == len(ends)
    assert log.highest_offset_in_remote_storage == ends[-1]
    segs = tier.segments()
    assert [(m.start_offset, m.end_offset) for m in segs] == [
        (s.base_offset, e) for s, e in zip(log.segments, ends, strict=False)
    ]
    assert all(m.state is S.COPY_SEGMENT_FINISHED and m.broker_id == 7 for m in segs)
    assert {e for m in segs for e, _ in m.segment_leader_epochs} == {0, 2}
    assert set(tier.store.keys()) == tier.objects_of_finished()
    assert tier.rlm.copy_once(log) == 0  # nothing new rolled
    from kafkalog.tiering import IndexType

    rsm = tier.rlm.rsm
    for md in segs:  # each copy carries the producer snapshot taken at the roll, and the epoch lineage
        snapshot = log.dir / f"{md.end_offset + 1:020d}.snapshot"
        assert rsm.fetch_index(md, IndexType.PRODUCER_SNAPSHOT) == snapshot.read_bytes()
        assert rsm.fetch_index(md, IndexType.LEADER_EPOCH).startswith(b"0\n")
    metrics = tier.rlm.metrics(log.topic_partition)
    assert metrics["RemoteCopyRequestsPerSec"] == len(ends)
    assert metrics["RemoteCopyBytesPerSec"] == sum(m.segment_size_in_bytes for m in segs)
    assert metrics["RemoteLogMetadataCount"] == len(ends)
    assert metrics["RemoteCopyLagSegments"] == 0

    # the remote tier reads back what the local log reads, batch for batch, with any fetch size
    end = ends[-1] + 1
    local = _local_bytes(log, 0, end)
    assert _remote_bytes(tier, 0, end)[0] == local
    assert _remote_bytes(tier, 0, end, max_bytes=1)[0] == local  # min_one_message: one batch at a time
    reader = tier.rlm.reader_for(log)
    info = reader.read(17, 1 << 20, 20, True, False)  # bounded by max_offset (exclusive)
    assert info is not None
    assert [b.last_offset for b in MemoryRecords(bytes(info.records.buffer)).batches()] == [17, 18, 19]
    assert reader.read(end, 1 << 20, log.high_watermark, True, False) is None  # not remote
    found = reader.find_offset_by_timestamp(1_000 + 70, 0)
    assert found is not None and (found.offset, found.timestamp, found.leader_epoch) == (70, 1_070, 2)
    assert reader.find_offset_by_timestamp(1_000 + 30, 45) is not None
    assert reader.find_offset_by_timestamp(1_000 + 30, 45).offset == 45  # type: ignore[union-attr]

    from kafkalog.log.tiers import RemoteLogReader

    assert isinstance(reader, RemoteLogReader)
    # an archive the object-storage reader reads like a broker's
    from kafkalog.readonly import ReadOnlyLog

    archive = ReadOnlyDataDir(tier.store.url, layout="aiven", store=tier.store).log("orders", 0)
    assert reader_rows(archive) == reader_rows(ReadOnlyLog.open(log.dir), 0, end)
    # local retention deletes the copied segments; the Log reads them through the remote tier
    log.update_config({"local.retention.bytes": 1})
    log.delete_old_segments()
    assert log.local_log_start_offset == end and log.log_start_offset == 0
    assert _local_bytes(log, 0, end) == local
    assert tier.rlm.metrics()["RemoteFetchRequestsPerSec"] > 0


def test_copy_waits_for_the_last_stable_offset(tmp_path: Path, tiers: list[Tier]) -> None:
    time = MockTime()
    tier = open_tier(tmp_path / "data", FlakyStore(), time)
    tiers.append(tier)
    log = tier.log
    _append(log, 10)
    txn = append_transactional(log, 1000, 0, time)
    txn(1)  # an open transaction at offset 10: the LSO stays at 10
    _append(log, 80, start=11)
    assert log.last_stable_offset == 10
    copied = tier.rlm.copy_once(log)
    assert all(m.end_offset < 10 for m in tier.segments())
    assert copied == len([e for e in _rolled_ends(log) if e < 10])
    append_end_txn_marker(log, 1000, 0, ControlRecordType.COMMIT, time.milliseconds())
    assert tier.rlm.copy_once(log) > 0
    assert tier.segments()[-1].end_offset == _rolled_ends(log)[-1]


def test_read_committed_hides_aborted_data_from_remote_txn_indexes(tmp_path: Path, tiers: list[Tier]) -> None:
    time = MockTime()
    tier = open_tier(tmp_path / "data", FlakyStore(), time)
    tiers.append(tier)
    log = tier.log
    aborted_pids = []
    for round_ in range(6):
        pid = 2000 + round_
        txn = append_transactional(log, pid, 0, time)
        txn(3)
        _append(log, 4, start=100 * round_)
        txn(3)
        control = ControlRecordType.ABORT if round_ % 2 == 0 else ControlRecordType.COMMIT
        if control is ControlRecordType.ABORT:
            aborted_pids.append(pid)
        append_end_txn_marker(log, pid, 0, control, time.milliseconds())
    _append(log, 40, start=1000)
    assert tier.rlm.copy_once(log) > 0
    end = log.highest_offset_in_remote_storage + 1
    assert any(m.end_offset >= 30 for m in tier.segments())
    _, aborted = _remote_bytes(tier, 0, end, committed=True)
    expected = {(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, end)}
    assert {(t.producer_id, t.first_offset) for t in aborted} == expected
    assert {pid for pid, _ in expected} == set(aborted_pids)
    # the committed view through the reader is the local one: aborted records hidden
    from kafkalog.readonly import iter_committed

    reader = tier.rlm.reader_for(log)
    fetches = []
    offset = 0
    while offset < end:
        info = reader.read(offset, 700, log.last_stable_offset, True, True)
        assert info is not None
        fetches.append(info)
        offset = list(MemoryRecords(bytes(info.records.buffer)).batches())[-1].last_offset + 1
    remote = [(r.offset, r.value) for r in iter_committed(fetches, 0, end)]
    local_view = [(r.offset, r.value) for r in iter_committed(log, 0, end)]
    assert remote == local_view
    everything = [
        (r.offset, r.value)
        for b in MemoryRecords(_local_bytes(log, 0, end)).batches()
        if not b.is_control_batch
        for r in b
    ]
    assert len(remote) < len(everything)  # something was aborted and is hidden


class CrashAt(BaseException):
    """The process dies here (not an Exception: no pass catches it)."""


def _crashing_rsm(point: str) -> Callable[[FlakyStore], AivenRemoteStorageManager]:
    class Crashing(AivenRemoteStorageManager):
        def copy_log_segment_data(
            self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
        ) -> bytes | None:
            if point == "before-copy":
                raise CrashAt(point)
            if point == "mid-copy":
                self.store.put(self.segment_key(metadata) + ".log", b"partial")
                raise CrashAt(point)
            super().copy_log_segment_data(metadata, segment_data)
            raise CrashAt(point)

    return lambda store: Crashing(store, RsmConfig(chunk_size=512))


@pytest.mark.parametrize("point", ["before-copy", "mid-copy", "after-copy"])
def test_crash_between_started_and_finished_is_cleaned_up(
    tmp_path: Path, point: str, tiers: list[Tier]
) -> None:
    store = FlakyStore()
    time = MockTime()
    tier = open_tier(tmp_path / "data", store, time)
    tiers.append(tier)
    _append(tier.log, 40)
    first = tier.rlm.copy_once(tier.log)
    assert first > 0
    _append(tier.log, 40, start=40)
    tier.close()
    tiers.remove(tier)

    crashing = open_tier(tmp_path / "data", store, time, rsm_factory=_crashing_rsm(point))
    with pytest.raises(CrashAt):
        crashing.rlm.copy_once(crashing.log)
    stuck = [m for m in crashing.segments() if m.state is S.COPY_SEGMENT_STARTED]
    assert len(stuck) == 1
    # the files as the crash left them: reopen without closing (the logs are open, no clean shutdown)
    import shutil

    shutil.copytree(tmp_path / "data", tmp_path / "after")
    crashing.close()
    for marker in (tmp_path / "after").rglob(".kafka_cleanshutdown"):
        marker.unlink()

    restarted = open_tier(tmp_path / "after", store, time)
    tiers.append(restarted)
    assert not [m for m in restarted.segments() if m.state is not S.COPY_SEGMENT_FINISHED]
    assert set(store.keys()) == restarted.objects_of_finished()  # the stuck segment's objects are gone
    assert restarted.log.highest_offset_in_remote_storage == max(m.end_offset for m in restarted.segments())
    assert restarted.rlm.copy_once(restarted.log) > 0
    assert set(store.keys()) == restarted.objects_of_finished()
    ends = [m.end_offset for m in sorted(restarted.segments(), key=lambda m: m.start_offset)]
    assert ends == _rolled_ends(restarted.log)
    end = ends[-1] + 1
    assert _remote_bytes(restarted, 0, end)[0] == _local_bytes(restarted.log, 0, end)


def test_storage_outage_pauses_copying_and_it_resumes(
    tmp_path: Path, tiers: list[Tier], caplog: pytest.LogCaptureFixture
) -> None:
    store = FlakyStore()
    tier = open_tier(tmp_path / "data", store, MockTime())
    tiers.append(tier)
    log = tier.log
    _append(log, 40)
    assert tier.rlm.copy_once(log) > 0
    store.down = True
    _append(log, 60, start=40)  # the log keeps appending locally
    with caplog.at_level("WARNING", logger="kafkalog.tiering.rlm"):
        assert tier.rlm.copy_once(log) == 0
        assert tier.rlm.copy_once(log) == 0
    assert [r.message for r in caplog.records].count(caplog.records[0].message) >= 1
    assert (
        len([r for r in caplog.records if "retrying in the next pass" in r.message]) == 2
    )  # one line a pass
    metrics = tier.rlm.metrics()
    assert metrics["FailedRemoteCopyRequestsPerSec"] == 2
    assert metrics["RemoteCopyLagSegments"] > 0
    assert not log.local_log.offline
    store.down = False
    assert tier.rlm.copy_once(log) > 0
    assert [m.end_offset for m in sorted(tier.segments(), key=lambda m: m.start_offset)] == _rolled_ends(log)
    assert set(store.keys()) == tier.objects_of_finished()
    assert tier.rlm.metrics()["RemoteCopyLagSegments"] == 0


def _by_start(segs: Sequence[RemoteLogSegmentMetadata]) -> list[tuple[int, int]]:
    return sorted((m.start_offset, m.end_offset) for m in segs)


def test_total_retention_by_size_time_and_log_start(tmp_path: Path, tiers: list[Tier]) -> None:
    time = MockTime()
    store = FlakyStore()
    tier = open_tier(tmp_path / "data", store, time)
    tiers.append(tier)
    log = tier.log
    _append(log, 120, ts=time.milliseconds())
    assert tier.rlm.copy_once(log) > 0
    before = _by_start(tier.segments())
    assert tier.rlm.expire_once(log) == 0  # retention.ms -1, retention.bytes -1

    # log start offset (DeleteRecords): segments entirely below it go
    log.maybe_increment_log_start_offset(before[1][1] + 1, "client delete records")
    assert tier.rlm.expire_once(log) == 2
    assert _by_start(tier.segments()) == before[2:]
    assert set(store.keys()) == tier.objects_of_finished()

    # retention.bytes over local-only + remote: the oldest remote segments go, the log start offset follows
    total_local_only = sum(
        s.size for s in log.segments if s.base_offset >= log.highest_offset_in_remote_storage
    )
    remote = sum(m.segment_size_in_bytes for m in tier.segments())
    keep = total_local_only + remote - tier.segments()[0].segment_size_in_bytes
    log.update_config({"retention.bytes": keep})
    assert tier.rlm.expire_once(log) == 1
    assert _by_start(tier.segments()) == before[3:]
    assert log.log_start_offset == before[2][1] + 1

    # retention.ms: every segment older than it
    log.update_config({"retention.bytes": -1, "retention.ms": 1_000})
    time.sleep(2_000)
    deleted = tier.rlm.expire_once(log)
    assert deleted == len(before) - 3
    assert tier.segments() == []
    assert log.log_start_offset == before[-1][1] + 1
    assert store.keys() == []
    assert tier.rlm.metrics()["RemoteDeleteRequestsPerSec"] == len(before)
    assert tier.rlm.metrics()["RemoteLogSizeBytes"] == 0


def test_stop_partition_with_delete_removes_remote_data(tmp_path: Path, tiers: list[Tier]) -> None:
    store = FlakyStore()
    tier = open_tier(tmp_path / "data", store, MockTime())
    tiers.append(tier)
    _append(tier.log, 60)
    assert tier.rlm.copy_once(tier.log) > 0
    assert store.keys()
    from kafkalog.remote import RemotePartitionDeleteState
    from kafkalog.tiering.rlm import topic_id_partition

    tip = topic_id_partition(tier.log)
    rlmm = tier.rlm.rlmm
    tier.rlm.stop_partition(tier.log.topic_partition, delete=True)
    assert store.keys() == []
    with pytest.raises(RemoteStorageError):
        tier.rlm.reader_for(tier.log)  # no longer managed
    assert tier.rlm.copy_once(tier.log) == 0
    # the topic records it: the partition's delete events, and a fresh replay finds no segment
    part = rlmm.metadata_partition(tip)
    meta_log = tier.meta(part)
    from kafkalog.remote import RemotePartitionDeleteMetadata, deserialize

    events = [
        deserialize(r.value)
        for batch in meta_log.read(0, 1 << 20).records.batches()
        for r in batch
        if r.value is not None
    ]
    assert [e.state for e in events if isinstance(e, RemotePartitionDeleteMetadata)] == [
        RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
        RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
        RemotePartitionDeleteState.DELETE_PARTITION_FINISHED,
    ]
    tier.meta.close()
    again = TopicBasedRemoteLogMetadataManager(MetadataLogs(tmp_path / "data"), 3)
    assert list(again.list_remote_log_segments(tip)) == []


def test_stop_partition_with_delete_while_storage_is_down_stops_and_deletes_later(
    tmp_path: Path, tiers: list[Tier]
) -> None:
    from kafkalog.remote import RemotePartitionDeleteState
    from kafkalog.tiering.rlm import topic_id_partition

    store = FlakyStore()
    tier = open_tier(tmp_path / "data", store, MockTime())
    tiers.append(tier)
    _append(tier.log, 60)
    copied = tier.rlm.copy_once(tier.log)
    assert copied > 0
    tip = topic_id_partition(tier.log)
    objects = store.keys()
    store.down = True
    tier.rlm.stop_partition(tier.log.topic_partition, delete=True)  # Kafka's: logged and counted, not raised
    assert tier.rlm.pending_partition_deletes() == [tier.log.topic_partition]
    with pytest.raises(RemoteStorageError):
        tier.rlm.reader_for(tier.log)  # stopped all the same
    assert tier.rlm.metrics()["FailedRemoteDeleteRequestsPerSec"] == 1
    assert store.keys() == objects
    # what it must delete is durable: every segment DELETE_SEGMENT_STARTED, the partition delete STARTED
    rlmm = tier.rlm.rlmm
    assert {m.state for m in rlmm.list_remote_log_segments(tip)} == {S.DELETE_SEGMENT_STARTED}
    marked = rlmm.remote_partition_delete_metadata(tip)
    assert marked is not None and marked.state is RemotePartitionDeleteState.DELETE_PARTITION_STARTED
    assert tier.rlm.expire_once(tier.log) == 0  # the next expiration pass retries: still down
    assert tier.rlm.pending_partition_deletes() == [tier.log.topic_partition]
    store.down = False
    assert tier.rlm.expire_once(tier.log) == 0  # (any log's pass) now it goes through
    assert tier.rlm.pending_partition_deletes() == []
    assert store.keys() == []
    tier.meta.close()
    again = TopicBasedRemoteLogMetadataManager(MetadataLogs(tmp_path / "data"), 3)
    assert list(again.list_remote_log_segments(tip)) == []
    assert again.remote_partition_delete_metadata(tip) is None  # DELETE_PARTITION_FINISHED


@pytest.mark.parametrize("point", ["after-delete-started", "after-objects"])
def test_crash_during_expiry_is_finished_on_restart(tmp_path: Path, point: str, tiers: list[Tier]) -> None:
    store = FlakyStore()
    time = MockTime()
    tier = open_tier(tmp_path / "data", store, time)
    tiers.append(tier)
    _append(tier.log, 80)
    assert tier.rlm.copy_once(tier.log) > 2
    segs = sorted(tier.segments(), key=lambda m: m.start_offset)
    tier.log.maybe_increment_log_start_offset(segs[1].end_offset + 1, "client delete records")
    tier.close()
    tiers.remove(tier)

    class CrashingDelete(AivenRemoteStorageManager):
        def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
            if point == "after-objects":
                super().delete_log_segment_data(metadata)
            raise CrashAt(point)

    crashing = open_tier(
        tmp_path / "data", store, time, rsm_factory=lambda s: CrashingDelete(s, RsmConfig(chunk_size=512))
    )
    crashing.log.maybe_increment_log_start_offset(segs[1].end_offset + 1, "client delete records")
    with pytest.raises(CrashAt):
        crashing.rlm.expire_once(crashing.log)
    assert [m.state for m in crashing.segments()].count(S.DELETE_SEGMENT_STARTED) == 1
    crashing.close()

    restarted = open_tier(tmp_path / "data", store, time)
    tiers.append(restarted)
    restarted.log.maybe_increment_log_start_offset(segs[1].end_offset + 1, "client delete records")
    # the half-done delete was finished when the partition started; the log start offset expires the other
    assert all(m.state is S.COPY_SEGMENT_FINISHED for m in restarted.segments())
    assert restarted.rlm.expire_once(restarted.log) == 1
    assert _by_start(restarted.segments()) == _by_start(segs[2:])
    assert set(store.keys()) == restarted.objects_of_finished()


def test_a_read_racing_expiry_is_out_of_range_not_a_storage_error(tmp_path: Path, tiers: list[Tier]) -> None:
    from kafkalog.errors import OffsetOutOfRangeError
    from kafkalog.tiering import IndexType

    holder: dict[str, Tier] = {}

    class ExpiresFirst(AivenRemoteStorageManager):
        """The segment is expired between the reader's metadata lookup and its first fetch."""

        armed = False

        def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
            if type(self).armed:
                type(self).armed = False
                tier = holder["tier"]
                tier.log.maybe_increment_log_start_offset(metadata.end_offset + 1, "client delete records")
                assert tier.rlm.expire_once(tier.log) >= 1
            return super().fetch_index(metadata, index_type)

    tier = open_tier(
        tmp_path / "data", FlakyStore(), MockTime(), rsm_factory=lambda s: ExpiresFirst(s, RsmConfig())
    )
    tiers.append(tier)
    holder["tier"] = tier
    _append(tier.log, 60)
    assert tier.rlm.copy_once(tier.log) > 1
    reader = tier.rlm.reader_for(tier.log)
    ExpiresFirst.armed = True
    assert reader.read(0, 1 << 20, tier.log.high_watermark, True, False) is None
    tier.log.update_config({"local.retention.bytes": 1})
    tier.log.delete_old_segments()
    with pytest.raises(OffsetOutOfRangeError):
        tier.log.read(0)
    assert tier.log.read(tier.log.log_start_offset).records.size_in_bytes > 0


def test_from_config_builds_the_remote_tier(tmp_path: Path) -> None:
    meta = MetadataLogs(tmp_path / "data")
    config = RemoteLogManagerConfig.from_props(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.metadata.topic.num.partitions": "4",
            "rsm.config.storage.url": str(tmp_path / "bucket"),
            "rsm.config.key.prefix": "k/",
        }
    )
    rlm = RemoteLogManager.from_config(config, meta, MockTime())
    log = Log.open(
        tmp_path / "data" / "orders-0",
        {**SMALL, "remote.storage.enable": "true"},
        topic_id=TOPIC_ID,
        remote_storage_system_enable=True,
    )
    try:
        log.hw_follows_leo = True
        rlm.start_partition(log)
        _append(log, 40)
        assert rlm.copy_once(log) > 0
        assert rlm.rlmm.partitioner.num_metadata_topic_partitions == 4
        assert any((tmp_path / "bucket" / "k").rglob("*.rsm-manifest"))
    finally:
        rlm.close()
        log.close()
        meta.close()


def test_reads_race_copy_local_retention_and_expiry(tmp_path: Path, tiers: list[Tier]) -> None:
    import random
    import threading

    from kafkalog.errors import OffsetOutOfRangeError

    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime(), {"local.retention.bytes": 1})
    tiers.append(tier)
    log = tier.log
    values: dict[int, bytes] = {}
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for round_ in range(25):
                for _ in range(12):
                    value = b"value-%05d" % len(values)
                    info = log.append([SimpleRecord(value, None, 1_000)])
                    with lock:
                        values[info.first_offset] = value
                tier.rlm.copy_once(log)
                log.delete_old_segments()
                if round_ % 5 == 4:
                    log.update_config({"retention.bytes": 3000})
                    tier.rlm.expire_once(log)
                    log.update_config({"retention.bytes": -1})
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        rng = random.Random(7)
        reads = 0
        try:
            while not done.is_set() or reads < 50:
                start, hw = log.log_start_offset, log.high_watermark
                if hw <= start:
                    continue
                offset = rng.randrange(start, hw)
                try:
                    info = log.read(offset, 500, FetchIsolation.HIGH_WATERMARK)
                except OffsetOutOfRangeError:
                    assert offset < log.log_start_offset  # expired meanwhile, never a hole above it
                    continue
                records = [r for b in info.records.batches() for r in b if r.offset >= offset]
                assert records and records[0].offset == offset
                with lock:
                    assert all(r.value == values[r.offset] for r in records)
                reads += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert set(tier.store.keys()) == tier.objects_of_finished()
    assert log.log_start_offset > 0  # expiry ran


def test_an_abort_marker_still_local_hides_remote_data(tmp_path: Path, tiers: list[Tier]) -> None:
    from kafkalog.readonly import iter_committed

    time = MockTime()
    tier = open_tier(tmp_path / "data", FlakyStore(), time)
    tiers.append(tier)
    log = tier.log
    txn = append_transactional(log, 4242, 0, time)
    txn(2)  # offsets 0-1: the transaction starts in what will be a remote segment
    _append(log, 70, start=2)
    assert log.num_log_segments > 3
    append_end_txn_marker(log, 4242, 0, ControlRecordType.ABORT, time.milliseconds())  # in the active segment
    assert tier.rlm.copy_once(log) > 0
    end = log.highest_offset_in_remote_storage + 1
    info = tier.rlm.reader_for(log).read(0, 1 << 20, log.last_stable_offset, True, True)
    assert info is not None and info.aborted_transactions
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(4242, 0)]
    offsets = [r.offset for r in iter_committed([info], 0, end)]
    assert offsets and offsets[0] == 2  # the aborted records are hidden


def test_the_index_cache_is_bounded_in_bytes(tmp_path: Path, tiers: list[Tier]) -> None:
    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime())
    tiers.append(tier)
    _append(tier.log, 120)
    assert tier.rlm.copy_once(tier.log) >= 4
    segs = sorted(tier.segments(), key=lambda m: m.start_offset)
    cache = tier.rlm.index_cache
    one = cache.get(segs[0]).size_in_bytes
    cache.max_bytes = 2 * one + one // 2  # room for two segments' indexes
    for md in segs:
        cache.get(md)
    assert len(cache) == 2 and cache.size_in_bytes <= cache.max_bytes
    misses = cache.misses
    cache.get(segs[-1])  # the newest are kept
    assert cache.misses == misses
    cache.get(segs[0])  # the oldest was evicted: fetched again
    assert cache.misses == misses + 1
    cache.max_bytes = 1  # smaller than one entry: the entry just fetched is still kept
    cache.get(segs[1])
    assert len(cache) == 1


def test_copy_quota_waits_within_the_pass_as_kafka(tmp_path: Path, tiers: list[Tier]) -> None:
    time = MockTime()
    waits: list[int] = []

    def wait(ms: int) -> None:
        waits.append(ms)
        time.sleep(ms)

    tier = open_tier(tmp_path / "data", FlakyStore(), time, quota_wait=wait)
    tiers.append(tier)
    rate = 1000
    tier.rlm.config = RemoteLogManagerConfig(
        broker_id=7,
        remote_log_manager_copy_max_bytes_per_second=rate,
        remote_log_manager_copy_quota_window_num=2,
        remote_log_manager_copy_quota_window_size_seconds=1,
    )
    _append(tier.log, 120)
    rolled = len(_rolled_ends(tier.log))
    sizes = [s.size for s in tier.log.segments[:-1]]
    assert rolled >= 6 and sum(sizes) > 4 * rate
    start = time.milliseconds()
    # one pass copies everything, waiting for the quota between segments (it used to stop at the quota)
    assert tier.rlm.copy_once(tier.log) == rolled
    elapsed = time.milliseconds() - start
    assert tier.log.highest_offset_in_remote_storage == _rolled_ends(tier.log)[-1]
    assert tier.rlm.metrics()["FailedRemoteCopyRequestsPerSec"] == 0
    assert waits and max(waits) <= QUOTA_WAIT_MS
    # Kafka's remote-copy-throttle-time sensor: one record per wait, of the throttle time then
    metrics = tier.rlm.read_metrics()
    assert metrics["remote-copy-throttle-count"] == len(waits)
    assert metrics["remote-copy-throttle-time-max"] >= max(waits) > 0
    assert metrics["remote-fetch-throttle-count"] == 0
    # paced at the rate: at most rate x (elapsed + the 2 s window) bytes, plus the segment recorded last
    assert (sum(sizes) - max(sizes)) * 1000 / rate - 2_000 <= elapsed <= sum(sizes) * 1000 / rate + 2_000


def test_copy_quota_wait_ends_when_the_manager_closes(tmp_path: Path, tiers: list[Tier]) -> None:
    import threading

    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime())
    tiers.append(tier)
    tier.rlm.config = RemoteLogManagerConfig(broker_id=7, remote_log_manager_copy_max_bytes_per_second=1)
    _append(tier.log, 40)
    assert len(_rolled_ends(tier.log)) >= 2
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(tier.rlm.copy_once(tier.log)), daemon=True)
    thread.start()
    for _ in range(2_000):  # the first segment is copied, then the pass waits (1 B/s: for hours)
        if tier.log.highest_offset_in_remote_storage >= 0:
            break
        thread.join(0.01)
    assert tier.log.highest_offset_in_remote_storage == _rolled_ends(tier.log)[0]
    assert thread.is_alive()
    tier.rlm.close()
    thread.join(10)
    assert not thread.is_alive() and results == [1]


def test_passes_on_other_threads_take_turns(tmp_path: Path, tiers: list[Tier]) -> None:
    import threading

    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime())
    tiers.append(tier)
    _append(tier.log, 40)
    results: list[int] = []

    def on_a_thread(step: Callable[[Log], int]) -> None:
        t = threading.Thread(target=lambda: results.append(step(tier.log)), daemon=True)
        t.start()
        t.join(timeout=60)
        assert not t.is_alive(), step  # a pass left the partition's pass lock held

    on_a_thread(tier.rlm.expire_once)
    on_a_thread(tier.rlm.copy_once)
    on_a_thread(tier.rlm.cleanup_incomplete)
    on_a_thread(tier.rlm.expire_once)
    assert results[1] > 0


def test_remote_metrics_are_meters_with_rates(tmp_path: Path, tiers: list[Tier]) -> None:
    from kafkalog.meter import TICK_INTERVAL_MS

    time = MockTime()
    tier = open_tier(tmp_path / "data", FlakyStore(), time)
    tiers.append(tier)
    _append(tier.log, 60)
    copied_bytes = sum(s.size for s in tier.log.segments[:-1])
    assert tier.rlm.copy_once(tier.log) > 0
    time.sleep(TICK_INTERVAL_MS)
    meters = tier.rlm.meters()
    copy = meters["RemoteCopyBytesPerSec"]
    assert copy.count == copied_bytes
    assert copy.one_minute_rate == pytest.approx(copied_bytes * 1000 / TICK_INTERVAL_MS)
    assert copy.mean_rate > 0
    assert tier.rlm.meters(tier.log.topic_partition)["RemoteCopyBytesPerSec"] == copy
    assert tier.rlm.metrics()["RemoteCopyBytesPerSec"] == copied_bytes  # a meter's count
    time.sleep(10 * 60_000)  # ten quiet minutes: the one-minute rate decays to nothing, the count stays
    later = tier.rlm.meters()["RemoteCopyBytesPerSec"]
    assert later.count == copied_bytes and later.one_minute_rate < copy.one_minute_rate * 1e-4
    assert 0 < later.fifteen_minute_rate < copy.fifteen_minute_rate


def test_remote_meters_render_for_prometheus_as_kafkas_jmx_attributes(
    tmp_path: Path, tiers: list[Tier]
) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from kafkalog.meter import TICK_INTERVAL_MS
    from kafkalog.metrics import register_remote_prometheus

    time = MockTime()
    tier = open_tier(tmp_path / "data", FlakyStore(), time)
    tiers.append(tier)
    _append(tier.log, 60)
    assert tier.rlm.copy_once(tier.log) > 0
    time.sleep(TICK_INTERVAL_MS)
    registry = prometheus_client.CollectorRegistry()
    register_remote_prometheus(tier.rlm, registry)
    text = prometheus_client.generate_latest(registry).decode()
    copy = tier.rlm.meters(tier.log.topic_partition)["RemoteCopyBytesPerSec"]
    labels = '{partition="0",topic="orders"}'
    assert f"kafka_server_brokertopicmetrics_remotecopybytespersec_count{labels} {float(copy.count)}" in text
    assert f"kafka_server_brokertopicmetrics_remotecopybytespersec_oneminuterate{labels} " in text
    assert f"kafka_server_brokertopicmetrics_remotecopylagsegments{labels} 0.0" in text


def test_retention_bytes_never_deletes_a_later_epochs_segment_before_an_earlier_kept_one(
    tmp_path: Path, tiers: list[Tier]
) -> None:
    from kafkalog.tiering.rlm import topic_id_partition

    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime())
    tiers.append(tier)
    tier.log.append([SimpleRecord(b"x" * 930, None, 1_000)], leader_epoch=0)  # epoch 0: one big segment
    tier.log.roll()
    _append(tier.log, 60, start=1, epoch=1)
    tier.rlm.copy_once(tier.log)
    tip = topic_id_partition(tier.log)
    segs = sorted(tier.rlm.rlmm.list_remote_log_segments(tip), key=lambda m: m.start_offset)
    first_of_epoch_1 = next(m for m in segs if m.segment_leader_epochs[0][0] == 1)
    assert (
        segs[0].segment_leader_epochs[0][0] == 0
        and first_of_epoch_1.segment_size_in_bytes < segs[0].segment_size_in_bytes
    )
    total = sum(m.segment_size_in_bytes for m in segs) + tier.log.segments[-1].size
    # over the limit by less than the oldest segment but by at least the first segment of epoch 1: Kafka keeps
    # the oldest and stops there (it deleted the epoch-1 segment, leaving a hole between the tiers' segments)
    excess = (
        first_of_epoch_1.segment_size_in_bytes
        + (segs[0].segment_size_in_bytes - first_of_epoch_1.segment_size_in_bytes) // 2
    )
    tier.log.update_config({"retention.bytes": total - excess})
    assert tier.rlm.expire_once(tier.log) == 0
    after = sorted(tier.rlm.rlmm.list_remote_log_segments(tip), key=lambda m: m.start_offset)
    assert [m.start_offset for m in after] == [m.start_offset for m in segs]
    assert tier.log.log_start_offset == 0


def test_appends_go_on_while_a_copy_uploads_and_the_copy_holds_the_log_lock_for_no_io(
    tmp_path: Path, tiers: list[Tier]
) -> None:
    """The appender never waits for a copy: the pass holds the Log's lock only for field updates, never while
    the RSM uploads or while the metadata records (or the segment) are fsynced."""
    uploading, release = threading.Event(), threading.Event()
    held: list[str] = []
    logs: list[Log] = []

    class Blocking(AivenRemoteStorageManager):
        def copy_log_segment_data(
            self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
        ) -> bytes | None:
            if logs[0].lock._is_owned():
                held.append("upload")
            uploading.set()
            release.wait(60)
            return super().copy_log_segment_data(metadata, segment_data)

    tier = open_tier(tmp_path / "data", FlakyStore(), MockTime(), rsm_factory=lambda s: Blocking(s))
    tiers.append(tier)
    logs.append(tier.log)

    def watched(what: str, flush: Callable[..., None]) -> Callable[..., None]:
        def run(*args: object, **kwargs: object) -> None:
            if tier.log.lock._is_owned():
                held.append(what)
            flush(*args, **kwargs)

        return run

    for p in range(3):
        meta_log = tier.meta(p)
        meta_log.flush = watched(f"metadata fsync {p}", meta_log.flush)  # type: ignore[method-assign]
    tier.log.flush = watched("segment fsync", tier.log.flush)  # type: ignore[method-assign]
    _append(tier.log, 40)
    copied: list[int] = []
    copier = threading.Thread(target=lambda: copied.append(tier.rlm.copy_once(tier.log)))
    copier.start()
    try:
        assert uploading.wait(60)
        appended = threading.Event()

        def append_more() -> None:
            _append(tier.log, 5, start=40)
            appended.set()

        appender = threading.Thread(target=append_more)
        appender.start()
        assert appended.wait(60), "an append waited for the copy's upload"
        appender.join()
    finally:
        release.set()
        copier.join(60)
    assert copied and copied[0] > 0
    assert held == []
    assert tier.log.log_end_offset == 45


def test_a_fall_through_read_holds_the_fetched_bytes_and_the_batches_returned_once(
    tmp_path: Path, tiers: list[Tier]
) -> None:
    """A read of the remote tier copies no more than it must (each copy a stretch of GIL held while
    appends wait): the fetched range as the store returned it, and the returned batches as one bytes."""
    tier = open_tier(
        tmp_path / "data",
        FlakyStore(),
        MockTime(),
        config={"segment.bytes": 8 << 20, "index.interval.bytes": 4096},
    )
    tiers.append(tier)
    value = b"v" * 10_000
    for i in range(300):  # ~3 MiB in one segment
        tier.log.append([SimpleRecord(value, b"k", 1_000 + i)], leader_epoch=0)
    tier.log.roll()
    assert tier.rlm.copy_once(tier.log) == 1
    max_bytes = 1 << 20
    tier.rlm.read(tier.log, 0, max_bytes, 10**9, True, False)  # the manifest and the index cache warmed
    tracemalloc.start()
    try:
        info = tier.rlm.read(tier.log, 0, max_bytes, 10**9, True, False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info is not None
    returned = len(bytes(info.records.buffer))  # type: ignore[union-attr]
    assert max_bytes - 20_000 < returned <= max_bytes
    # the GET's buffer (max_bytes plus an index interval and a header) and the batches returned: not a second
    # copy of the window, nor an intermediate slice
    assert peak < max_bytes + 64 * 1024 + returned + 64 * 1024, peak
