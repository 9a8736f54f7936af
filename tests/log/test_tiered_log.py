"""The log layer of tiered storage (issue 25, KIP-405): the local log start offset, the highest offset in remote
storage, reads that fall through to a :class:`~kafkalog.log.tiers.RemoteLogReader`, local retention, the log
start offset over both tiers, ListOffsets' tiered sentinels, loading and truncation with a remote tier.

The remote tier is an in-memory fake reader (a dict of base offset -> batch bytes, filled from the log's own
batches before local retention deletes them), so these tests exercise the ``Log`` alone; the real
``RemoteLogManager`` and the archive are the tiering package's tests.

Ported from Kafka's ``UnifiedLogTest`` where a tiered case exists (named in each test's docstring).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigurationError, KafkaError, OffsetOutOfRangeError, RemoteStorageError
from kafkalog.log import FetchIsolation, Log, LogConfig
from kafkalog.log.tiers import RemoteLogReader
from kafkalog.log.types import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import check_log_invariants, fetched_offsets, fetched_records, records, segment_bases

TIERED = {"remote.storage.enable": True, "segment.bytes": 10 * 80, "retention.ms": 10_000_000}


@dataclass
class FakeRemote:
    """An in-memory remote tier: batch bytes by base offset (and each batch's last offset)."""

    batches: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    reads: list[tuple[int, int, int, bool, bool]] = field(default_factory=list)
    lookups: list[tuple[int, int]] = field(default_factory=list)
    fail: bool = False

    def copy_from(self, log: Log, upto: int) -> None:
        """What the RemoteLogManager would copy: every local batch below ``upto``; the log is told."""
        for segment in log.segments:
            for batch in segment.batches():
                if batch.last_offset < upto:
                    self.batches[batch.base_offset] = (batch.last_offset, bytes(batch.to_bytes()))
        log.update_highest_offset_in_remote_storage(max(last for last, _ in self.batches.values()))

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool, read_committed: bool
    ) -> FetchDataInfo | None:
        self.reads.append((fetch_offset, max_bytes, max_offset, min_one_message, read_committed))
        if self.fail:
            raise RemoteStorageError("the bucket is unreachable")
        if not any(b <= fetch_offset <= last for b, (last, _) in self.batches.items()):
            return None
        out = bytearray()
        for base in sorted(self.batches):
            last, data = self.batches[base]
            if last < fetch_offset:
                continue
            if base >= max_offset or ((out or not min_one_message) and len(out) + len(data) > max_bytes):
                break
            out += data
        return FetchDataInfo(LogOffsetMetadata(fetch_offset), MemoryRecords(bytes(out)))

    def find_offset_by_timestamp(self, target_timestamp: int, start_offset: int) -> TimestampAndOffset | None:
        self.lookups.append((target_timestamp, start_offset))
        if self.fail:
            raise RemoteStorageError("the bucket is unreachable")
        for base in sorted(self.batches):
            for batch in MemoryRecords(self.batches[base][1]).batches():
                for record in batch.records():
                    if record.offset >= start_offset and record.timestamp >= target_timestamp:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset, epoch if epoch >= 0 else None
                        )
        return None


def _append(log: Log, n: int, *, start_ts: int = 1000, epoch: int = 0) -> None:
    """``n`` single-record batches with timestamps ``start_ts + offset``; the high watermark follows."""
    for _ in range(n):
        offset = log.log_end_offset
        log.append_as_leader(
            records([SimpleRecord(b"v%d" % offset, None, start_ts + offset)], partition_leader_epoch=epoch),
            leader_epoch=epoch,
        )
    log.update_high_watermark(log.log_end_offset)


def _tiered_log(make_log: LogFactory, n: int = 30, **overrides: object) -> Log:
    log = make_log(LogConfig.from_props({**TIERED, **overrides}), remote_storage_system_enable=True)
    _append(log, n)
    return log


# --- the interface ----------------------------------------------------------------------------------------
def test_fake_reader_satisfies_protocol() -> None:
    assert isinstance(FakeRemote(), RemoteLogReader)


def test_without_remote_tier_local_log_start_follows_log_start(
    make_log: LogFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a remote tier the two start offsets are one, and the highest remote offset stays -1 (with
    Kafka's warning)."""
    log = make_log(LogConfig(segment_bytes=10 * 80, retention_ms=-1))
    _append(log, 30)
    assert not log.remote_log_enabled
    assert log.local_log_start_offset == log.log_start_offset == 0
    log.update_highest_offset_in_remote_storage(10)
    assert log.highest_offset_in_remote_storage == -1
    assert "since remote storage is not enabled" in caplog.text
    log.maybe_increment_log_start_offset(12)
    assert log.local_log_start_offset == log.log_start_offset == 12
    log.delete_old_segments()
    assert log.local_log_start_offset == log.log_start_offset == 12
    log.truncate_fully_and_start_at(40, 35)
    assert log.local_log_start_offset == log.log_start_offset == 35
    check_log_invariants(log)


def test_remote_log_enabled_needs_all_three(tmp_path: Path, mock_time: MockTime) -> None:
    """Kafka's isRemoteLogEnabled: the system gate, the topic config, and not an internal topic."""
    on = LogConfig.from_props({"remote.storage.enable": True})
    with Log.open(tmp_path / "t-0", on, time=mock_time, remote_storage_system_enable=True) as log:
        assert log.remote_log_enabled
    with Log.open(tmp_path / "t-1", LogConfig(), time=mock_time, remote_storage_system_enable=True) as log:
        assert not log.remote_log_enabled
    with Log.open(
        tmp_path / "__consumer_offsets-0", on, time=mock_time, remote_storage_system_enable=True
    ) as log:
        assert not log.remote_log_enabled


def test_update_highest_offset_in_remote_storage_only_grows(make_log: LogFactory) -> None:
    """UnifiedLogTest.testUpdateHighestOffsetInRemoteStorage... analogue: it never moves back."""
    log = _tiered_log(make_log)
    assert log.highest_offset_in_remote_storage == -1
    log.update_highest_offset_in_remote_storage(9)
    log.update_highest_offset_in_remote_storage(5)
    assert log.highest_offset_in_remote_storage == 9


def test_read_below_local_log_start_goes_to_the_reader(make_log: LogFactory) -> None:
    log = _tiered_log(make_log)
    remote = FakeRemote()
    remote.copy_from(log, 20)
    assert log.delete_old_segments() > 0
    local_start = log.local_log_start_offset
    assert 0 < local_start <= 20 and log.log_start_offset == 0
    with pytest.raises(
        OffsetOutOfRangeError, match=r"below the local log start offset .* no remote log reader"
    ):
        log.read(0, 1 << 20)  # no reader attached
    log.set_remote_log_reader(remote)
    info = log.read(3, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    assert fetched_offsets(info) == list(range(3, 20))
    assert remote.reads[-1] == (3, 1 << 20, log.high_watermark, True, False)
    check_log_invariants(log)


def test_maybe_increment_log_start_offset_below_and_above_local(make_log: LogFactory) -> None:
    """Below the local log start offset only the log start offset moves; above it, both."""
    log = _tiered_log(make_log)
    FakeRemote().copy_from(log, 20)
    log.delete_old_segments()
    local_start = log.local_log_start_offset
    assert log.maybe_increment_log_start_offset(5, "segment deletion")
    assert (log.log_start_offset, log.local_log_start_offset) == (5, local_start)
    assert log.maybe_increment_log_start_offset(local_start + 2)
    assert log.log_start_offset == log.local_log_start_offset == local_start + 2
    check_log_invariants(log)


# --- ported from UnifiedLogTest ---------------------------------------------------------------------------
def _one(ts: int, **kwargs: int) -> MemoryRecords:
    return records([SimpleRecord(b"a", None, ts)], **kwargs)  # type: ignore[arg-type]


def _remote_config(**props: object) -> LogConfig:
    return LogConfig.from_props({"remote.storage.enable": True, "file.delete.delay.ms": 0, **props})


def test_remote_log_enabled_never_on_compacted_topics(make_log: LogFactory, tmp_path: Path) -> None:
    """UnifiedLogTest.testEnableRemoteLogStorageOnCompactedTopics. Kafka's test builds a compacted tiered config
    unvalidated and sees remoteLogEnabled false; kafkalog validates every config a log opens with, so such a
    log is refused (Kafka's text), and nothing is created."""
    assert not make_log(LogConfig(), remote_storage_system_enable=True).remote_log_enabled
    assert make_log(_remote_config(), tmp_path / "b-0", remote_storage_system_enable=True).remote_log_enabled
    for policy in (("compact",), ("compact", "delete")):
        config = LogConfig(cleanup_policy=policy)
        object.__setattr__(config, "remote_storage_enable", True)
        with pytest.raises(InvalidConfigurationError, match="unsupported for the compacted topics"):
            make_log(config, tmp_path / f"c{len(policy)}-0", remote_storage_system_enable=True)
        assert not (tmp_path / f"c{len(policy)}-0").exists()


@pytest.mark.parametrize("topic", ["__remote_log_metadata", "__transaction_state", "__consumer_offsets"])
def test_remote_log_disabled_on_internal_topics(make_log: LogFactory, tmp_path: Path, topic: str) -> None:
    """UnifiedLogTest.testRemoteLogStorageIsDisabledOnInternalAndRemoteLogMetadataTopic."""
    log = make_log(_remote_config(), tmp_path / f"{topic}-0", remote_storage_system_enable=True)
    assert not log.remote_log_enabled


def test_no_op_when_remote_log_storage_is_disabled(make_log: LogFactory) -> None:
    """UnifiedLogTest.testNoOpWhenRemoteLogStorageIsDisabled."""
    log = make_log(LogConfig())
    for i in range(100):
        log.append_as_leader(_one(-1), leader_epoch=0)
        del i
    log.update_high_watermark(90)
    log.maybe_increment_log_start_offset(20, "segment deletion")
    assert log.log_start_offset == 20


def test_start_offsets_remote_log_storage_is_enabled(make_log: LogFactory) -> None:
    """UnifiedLogTest.testStartOffsetsRemoteLogStorageIsEnabled."""
    log = make_log(_remote_config(), remote_storage_system_enable=True)
    for _ in range(100):
        log.append_as_leader(_one(-1), leader_epoch=0)
    log.update_high_watermark(80)
    log.maybe_increment_log_start_offset(40, "segment deletion")
    assert log.log_start_offset == log.local_log_start_offset == 40
    log.truncate_fully_and_start_at(60, 40)
    assert (log.log_start_offset, log.local_log_start_offset) == (40, 60)
    check_log_invariants(log)


def test_active_segment_deletion_due_to_retention_time_breach_with_remote_storage(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """UnifiedLogTest.testActiveSegmentDeletionDueToRetentionTimeBreachWithRemoteStorage: a breaching active
    segment is rolled; once the remote tier holds it, it goes and only the local log start offset moves."""
    log = make_log(
        _remote_config(**{"index.interval.bytes": 1, "retention.ms": 3, "local.retention.ms": 1}),
        remote_storage_system_enable=True,
    )
    log.append_as_leader(_one(mock_time.milliseconds()), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    assert segment_bases(log) == [0]
    mock_time.sleep(2)
    assert log.delete_old_segments() == 0  # not copied: rolled only
    assert segment_bases(log) == [0, 1]
    log.update_highest_offset_in_remote_storage(1)
    log.delete_old_segments()
    assert segment_bases(log) == [1]
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (0, 1, 1)
    check_log_invariants(log)


def test_segment_deletion_before_upload_when_log_start_offset_moved_ahead(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """UnifiedLogTest.testSegmentDeletionEnabledBeforeUploadToRemoteTierWhenLogStartOffsetMovedAhead."""
    log = make_log(_remote_config(**{"retention.bytes": 1}), remote_storage_system_enable=True)
    for seq, epoch in enumerate((0, 0, 0, 1)):
        log.append_as_leader(_one(-1, producer_id=1, producer_epoch=0, sequence=seq), leader_epoch=epoch)
    log.roll()
    log.append_as_leader(_one(-1, producer_id=1, producer_epoch=0, sequence=4), leader_epoch=2)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segments) == 2
    log.update_highest_offset_in_remote_storage(-1)
    log.delete_old_segments()
    assert len(log.segments) == 2
    log.maybe_increment_log_start_offset(3, "segment deletion")  # Kafka's updateLogStartOffsetFromRemoteTier
    log.delete_old_segments()
    assert len(log.segments) == 2
    log.maybe_increment_log_start_offset(4, "segment deletion")
    log.delete_old_segments()  # below the log start offset: goes although the remote tier does not hold it
    assert segment_bases(log) == [4]
    log.maybe_increment_log_start_offset(5, "segment deletion")
    log.delete_old_segments()
    assert segment_bases(log) == [4]
    assert log.log_start_offset == log.log_end_offset == 5
    check_log_invariants(log)


@pytest.mark.parametrize("by", ["bytes", "ms"])
def test_local_retention_with_default_local_retention(
    make_log: LogFactory, mock_time: MockTime, by: str
) -> None:
    """UnifiedLogTest.testRetentionOnLocalLogDeletionWhenRemoteLogCopyEnabledAndDefaultLocalRetentionBytes /
    ...Ms: local.retention.* of -2 follows retention.*, and only the copied segments go."""
    size = _one(mock_time.milliseconds()).size_in_bytes
    limit = {"retention.bytes": 1} if by == "bytes" else {"retention.ms": 1000}
    log = make_log(_remote_config(**{"segment.bytes": size, **limit}), remote_storage_system_enable=True)
    for _ in range(6):
        log.append_as_leader(_one(mock_time.milliseconds()), leader_epoch=0)
    assert len(log.segments) == 6
    log.update_high_watermark(log.log_end_offset)
    log.update_highest_offset_in_remote_storage(1)
    mock_time.sleep(1001)
    log.delete_old_segments()
    assert len(log.segments) == 4
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 2)
    check_log_invariants(log)


def test_local_retention_when_remote_log_copy_disabled(make_log: LogFactory, mock_time: MockTime) -> None:
    """UnifiedLogTest.testRetentionOnLocalLogDeletionWhenRemoteLogCopyDisabled. kafkalog validates the
    copy-disabled configs as Kafka's broker does (local.retention.* must then follow retention.*), where
    Kafka's test builds them unvalidated: the copy-disabled steps use local.retention.* = -2."""
    size = _one(mock_time.milliseconds()).size_in_bytes
    props = {"segment.bytes": size, "local.retention.bytes": 1, "retention.bytes": size * 5}
    log = make_log(_remote_config(**props), remote_storage_system_enable=True)
    for _ in range(6):
        log.append_as_leader(_one(mock_time.milliseconds()), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()  # nothing copied: nothing goes
    assert len(log.segments) == 6
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 0)
    log.update_highest_offset_in_remote_storage(1)
    log.delete_old_segments()
    assert len(log.segments) == 4
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 2)
    # remote.log.copy.disable=true: retention.* decides (5 segments: nothing to delete)
    log.update_config(
        _remote_config(
            **{"segment.bytes": size, "retention.bytes": size * 5, "remote.log.copy.disable": True}
        )
    )
    log.delete_old_segments()
    assert len(log.segments) == 4
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 2)
    log.maybe_increment_log_start_offset(2, "segment deletion")  # the remote segments expired
    assert (log.log_start_offset, log.local_log_start_offset) == (2, 2)
    for _ in range(3):
        log.append_as_leader(_one(mock_time.milliseconds()), leader_epoch=0)
    assert len(log.segments) == 7
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()  # retention.bytes: 2 segments go, and the log start offset moves
    assert len(log.segments) == 5
    assert (log.log_start_offset, log.local_log_start_offset) == (4, 4)
    log.update_config(
        _remote_config(**{"segment.bytes": size, "retention.ms": 1000, "remote.log.copy.disable": True})
    )
    mock_time.sleep(10)
    log.delete_old_segments()
    assert len(log.segments) == 5
    mock_time.sleep(1000)
    log.delete_old_segments()
    assert len(log.segments) == 1
    assert (log.log_start_offset, log.local_log_start_offset) == (9, 9)
    check_log_invariants(log)


def _fifty_in_five_segments(make_log: LogFactory) -> Log:
    log = make_log(_remote_config(**{"local.retention.bytes": 1}), remote_storage_system_enable=True)
    for _ in range(50):
        info = log.append_as_leader(_one(-1), leader_epoch=0)
        if info.last_offset != 0 and info.last_offset % 10 == 0:
            log.roll()
    assert len(log.segments) == 5
    log.update_high_watermark(log.log_end_offset)
    log.update_highest_offset_in_remote_storage(30)
    log.delete_old_segments()
    return log


def test_increment_local_log_start_offset_after_local_log_deletion(make_log: LogFactory) -> None:
    """UnifiedLogTest.testIncrementLocalLogStartOffsetAfterLocalLogDeletion."""
    log = _fifty_in_five_segments(make_log)
    assert len(log.segments) == 2
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 31)
    check_log_invariants(log)


def test_convert_to_offset_metadata_does_not_throw(make_log: LogFactory) -> None:
    """UnifiedLogTest.testConvertToOffsetMetadataDoesNotThrowOffsetOutOfRangeError."""
    log = _fifty_in_five_segments(make_log)
    log.maybe_increment_log_start_offset(15, "segment deletion")
    assert log.log_start_offset == 15
    inside = log.convert_to_offset_metadata(35)
    assert (inside.message_offset, inside.segment_base_offset) == (35, 31)
    for offset in (29, log.log_end_offset + 1, 14):
        assert log.convert_to_offset_metadata(offset) == LogOffsetMetadata(offset)


# --- loading ----------------------------------------------------------------------------------------------
def _tiered_with_local_start(make_log: LogFactory, copied_upto: int = 20) -> tuple[Log, FakeRemote]:
    """30 records in segments of 10 (epochs 0, 1, 2 for offsets 0-9, 10-19, 20-29), the remote tier holding
    everything below ``copied_upto`` and local retention having deleted it."""
    log = make_log(LogConfig.from_props(TIERED), remote_storage_system_enable=True)
    for epoch in range(3):
        _append(log, 10, epoch=epoch)
    remote = FakeRemote()
    remote.copy_from(log, copied_upto)
    log.set_remote_log_reader(remote)
    log.delete_old_segments()
    return log, remote


def test_load_keeps_log_start_below_the_first_local_segment(make_log: LogFactory, log_dir: Path) -> None:
    """Kafka's LogLoader with remote storage: the checkpointed log start offset stays below the first local
    segment, the local log start offset is that segment's base, and the epoch cache keeps the remote range."""
    log, _ = _tiered_with_local_start(make_log)
    local_start = log.local_log_start_offset
    assert local_start == segment_bases(log)[0] > 0
    log.close()
    reopened = make_log(LogConfig.from_props(TIERED), log_start_offset=0, remote_storage_system_enable=True)
    assert (reopened.log_start_offset, reopened.local_log_start_offset) == (0, local_start)
    assert [e.epoch for e in reopened.leader_epoch_cache.epoch_entries] == [0, 1, 2]
    assert reopened.high_watermark >= local_start
    check_log_invariants(reopened)
    reopened.close()
    # Without the remote tier (the system gate off) the log start offset is raised to the first segment.
    plain = make_log(LogConfig(segment_bytes=10 * 80), log_start_offset=0)
    assert plain.log_start_offset == plain.local_log_start_offset == local_start
    check_log_invariants(plain)


# --- reads ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("isolation", "bound"),
    [
        (FetchIsolation.LOG_END, "log_end_offset"),
        (FetchIsolation.HIGH_WATERMARK, "high_watermark"),
        (FetchIsolation.TXN_COMMITTED, "last_stable_offset"),
    ],
)
def test_remote_read_bounded_by_the_isolation(
    make_log: LogFactory, isolation: FetchIsolation, bound: str
) -> None:
    """The reader gets the isolation's offset as ``max_offset`` (LEO, HW, LSO as message offsets) and
    ``read_committed`` for TXN_COMMITTED; only remote data comes back (the next fetch continues locally)."""
    log, remote = _tiered_with_local_start(make_log)
    log.update_high_watermark(25)
    info = log.read(2, 100, isolation, min_one_message=True)
    assert remote.reads[-1] == (2, 100, getattr(log, bound), True, isolation is FetchIsolation.TXN_COMMITTED)
    assert fetched_offsets(info)[0] == 2
    assert all(offset < getattr(log, bound) for offset in fetched_offsets(info))
    # the whole remote range, then the local log from where it stopped
    whole = log.read(0, 1 << 20, isolation)
    remote_offsets = fetched_offsets(whole)
    assert remote_offsets == list(range(remote_offsets[-1] + 1))
    rest = log.read(remote_offsets[-1] + 1, 1 << 20, isolation)
    assert fetched_offsets(rest)[0] == remote_offsets[-1] + 1 > log.local_log_start_offset


def test_remote_read_out_of_range_and_errors(make_log: LogFactory) -> None:
    """Below the log start offset the reader is not asked; a reader with no segment for the offset, or no
    reader, is OffsetOutOfRangeError; a storage failure propagates as RemoteStorageError."""
    log, remote = _tiered_with_local_start(make_log)
    log.maybe_increment_log_start_offset(5, "client delete records")
    asked = len(remote.reads)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1 << 20)
    assert len(remote.reads) == asked
    assert fetched_offsets(log.read(5, 1 << 20))[0] == 5
    remote.batches = {b: v for b, v in remote.batches.items() if b >= 10}  # the reader lost 0..9
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1 << 20)
    remote.fail = True
    with pytest.raises(RemoteStorageError, match="unreachable"):
        log.read(5, 1 << 20)
    log.set_remote_log_reader(None)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1 << 20)
    assert fetched_offsets(log.read(log.local_log_start_offset, 1 << 20))[0] == log.local_log_start_offset
    check_log_invariants(log)


# --- ListOffsets ------------------------------------------------------------------------------------------
def test_fetch_latest_tiered_timestamp_no_remote_storage(make_log: LogFactory, mock_time: MockTime) -> None:
    """UnifiedLogTest.testFetchLatestTieredTimestampNoRemoteStorage (and -6 likewise, KIP-1023)."""
    log = make_log(LogConfig(segment_bytes=200, index_interval_bytes=1))
    unknown = TimestampAndOffset(-1, -1, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP) == unknown
    log.append_as_leader(_one(mock_time.milliseconds()), leader_epoch=0)
    log.append_as_leader(_one(mock_time.milliseconds() + 1), leader_epoch=0)
    assert log.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP) == unknown
    assert log.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == unknown
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)


@pytest.mark.parametrize("tiered", [False, True])
def test_fetch_offset_by_timestamp_from_remote_storage(
    make_log: LogFactory, mock_time: MockTime, tiered: bool
) -> None:
    """UnifiedLogTest.testFetchOffsetByTimestampFromRemoteStorage / testFetchLatestTieredTimestampWithRemoteStorage:
    offset 0 (epoch 0) is in the remote tier, offset 1 (epoch 1) local."""
    log = make_log(
        _remote_config(**{"segment.bytes": 200, "index.interval.bytes": 1}), remote_storage_system_enable=True
    )
    remote = FakeRemote()
    log.set_remote_log_reader(remote)
    assert log.fetch_offset_by_timestamp(0) is None  # empty: the reader is not asked
    assert remote.lookups == []
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 0, None)
    first = mock_time.milliseconds()
    log.append_as_leader(_one(first, partition_leader_epoch=0), leader_epoch=0)
    log.append_as_leader(_one(first + 1, partition_leader_epoch=1), leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    remote.batches = {0: (0, log.read(0, 1 << 20).records.to_bytes()[: _one(first).size_in_bytes])}
    log.maybe_increment_local_log_start_offset(
        1, "segment deletion"
    )  # Kafka's test sets _localLogStartOffset
    if tiered:
        log.update_highest_offset_in_remote_storage(0)
    assert log.fetch_offset_by_timestamp(first) == TimestampAndOffset(first, 0, 0)
    assert remote.lookups[-1] == (first, 0)
    assert log.fetch_offset_by_timestamp(first + 1) == TimestampAndOffset(
        first + 1, 1, 1
    )  # remote, then local
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(EARLIEST_LOCAL_TIMESTAMP) == TimestampAndOffset(-1, 1, 1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 2, 1)
    latest_tiered = TimestampAndOffset(-1, 0, 0) if tiered else TimestampAndOffset(-1, -1, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIERED_TIMESTAMP) == latest_tiered
    # -6: the first offset not copied; unknown (-1) while the log does not know what was copied
    pending = TimestampAndOffset(-1, 1, 1) if tiered else TimestampAndOffset(-1, -1, -1)
    assert log.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == pending
    log.maybe_assign_epoch_start_offset(2, 2)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 2, 2)
    remote.fail = True
    with pytest.raises(RemoteStorageError):
        log.fetch_offset_by_timestamp(first)
    log.set_remote_log_reader(None)
    with pytest.raises(KafkaError, match="no remote log reader"):
        log.fetch_offset_by_timestamp(first)


def test_earliest_pending_upload_before_anything_is_copied(make_log: LogFactory) -> None:
    """KIP-1023: nothing copied and nothing deleted locally: -6 is the earliest offset (with its epoch)."""
    log = _tiered_log(make_log, 5)
    assert log.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == TimestampAndOffset(-1, 0, 0)
    log.update_highest_offset_in_remote_storage(2)
    assert log.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == TimestampAndOffset(-1, 3, 0)
    log.maybe_increment_log_start_offset(4, "client delete records")
    assert log.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == TimestampAndOffset(-1, 4, 0)


# --- the log start offset over both tiers: DeleteRecords, epochs, producers -------------------------------
def test_delete_records_above_local_log_start_deletes_local_segments(make_log: LogFactory) -> None:
    """DeleteRecords past the local log start offset moves both; the log-start-offset rule then deletes the
    local segments below it even if the remote tier does not hold them (nothing copied here)."""
    log = _tiered_log(make_log, **{"retention.ms": -1})
    bases = segment_bases(log)
    assert log.maybe_increment_log_start_offset(bases[1] + 1, "client delete records")
    assert log.log_start_offset == log.local_log_start_offset == bases[1] + 1
    log.delete_old_segments()
    assert segment_bases(log) == bases[1:]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[1], 1 << 20)
    check_log_invariants(log)


def test_log_start_offset_in_the_remote_range_moves_epochs_and_producers(make_log: LogFactory) -> None:
    """Local retention keeps the epochs and producers of the remote range; moving the log start offset into
    that range (DeleteRecords, or the RemoteLogManager's total retention) truncates the epoch cache from the
    start and tells the producer state (which keeps its producer ids until they expire), as Kafka's does, and
    leaves the local log start offset where it is."""
    log = make_log(LogConfig.from_props(TIERED), remote_storage_system_enable=True)
    for seq in range(5):  # producer 7: offsets 0-4 only
        log.append_as_leader(_one(1000, producer_id=7, producer_epoch=0, sequence=seq), leader_epoch=0)
    _append(log, 5, epoch=0)
    _append(log, 10, epoch=1)
    _append(log, 10, epoch=2)
    remote = FakeRemote()
    remote.copy_from(log, 20)
    log.delete_old_segments()
    local_start = log.local_log_start_offset
    assert local_start > 5
    assert [e.epoch for e in log.leader_epoch_cache.epoch_entries] == [0, 1, 2]
    assert 7 in log.producer_state.active_producers()
    assert log.maybe_increment_log_start_offset(10, "segment deletion")
    assert (log.log_start_offset, log.local_log_start_offset) == (10, local_start)
    entries = log.leader_epoch_cache.epoch_entries
    assert [(e.epoch, e.start_offset) for e in entries] == [(1, 10), (2, 20)]
    assert (
        7 in log.producer_state.active_producers()
    )  # as Kafka's: producer ids expire, they are not truncated
    assert log.producer_state.map_end_offset >= 10
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 10, 1)
    assert not log.maybe_increment_log_start_offset(9, "segment deletion")
    check_log_invariants(log)


def test_local_retention_needs_the_copy_and_moves_only_the_local_start(make_log: LogFactory) -> None:
    """local.retention.bytes decides with a remote tier (retention.bytes is the RemoteLogManager's), and
    only segments whose last offset the remote tier holds go."""
    log = _tiered_log(make_log, 40, **{"retention.ms": -1, "retention.bytes": -1, "local.retention.bytes": 1})
    bases = segment_bases(log)
    assert log.delete_old_segments() == 0  # nothing copied
    log.update_highest_offset_in_remote_storage(bases[2] - 2)  # the second segment is not complete remotely
    assert log.delete_old_segments() == 1
    assert (log.log_start_offset, log.local_log_start_offset) == (0, bases[1])
    log.update_highest_offset_in_remote_storage(log.log_end_offset - 1)
    log.delete_old_segments()  # everything copied: local.retention.bytes keeps the last segment only
    assert len(log.segments) == 1
    assert (log.log_start_offset, log.local_log_start_offset) == (0, segment_bases(log)[0])
    check_log_invariants(log)


# --- truncation -------------------------------------------------------------------------------------------
def test_truncate_into_the_remote_tier_is_refused(make_log: LogFactory) -> None:
    """Kafka's truncateTo below the first local segment truncates fully and keeps the highest offset in remote
    storage (a new leader epoch separates the lineages). kafkalog has no replication and no epoch bump, so
    local retention would take the offsets appended again for copied ones: a truncation at or below that
    offset is refused (OffsetOutOfRangeError) and changes nothing; just above it is allowed."""
    log, _ = _tiered_with_local_start(make_log)
    highest = log.highest_offset_in_remote_storage
    state = (log.log_start_offset, log.local_log_start_offset, log.log_end_offset, segment_bases(log))
    for target in (log.local_log_start_offset - 3, highest):
        with pytest.raises(OffsetOutOfRangeError, match=f"offsets up to {highest} are in remote storage"):
            log.truncate_to(target)
        with pytest.raises(OffsetOutOfRangeError, match=f"offsets up to {highest} are in remote storage"):
            log.truncate_fully_and_start_at(target, 0)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset, segment_bases(log)) == state
    assert log.highest_offset_in_remote_storage == highest
    assert log.truncate_to(highest + 1)
    assert (log.log_start_offset, log.log_end_offset) == (0, highest + 1)
    check_log_invariants(log)


def test_truncate_to_keeps_local_log_start_at_or_below_log_end(make_log: LogFactory) -> None:
    """A local log start offset moved inside the first local segment (DeleteRecords) follows a truncation
    below it, as the log start offset does, so log start <= local log start <= LEO holds."""
    log, _ = _tiered_with_local_start(make_log, copied_upto=12)
    first = segment_bases(log)[0]
    assert log.highest_offset_in_remote_storage < first + 2  # the truncation stays above the remote tier
    log.maybe_increment_log_start_offset(first + 5, "client delete records")
    assert log.local_log_start_offset == first + 5
    log.truncate_to(first + 2)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (
        first + 2,
        first + 2,
        first + 2,
    )
    check_log_invariants(log)


def test_truncate_fully_and_start_at_with_remote_tier(make_log: LogFactory) -> None:
    """A follower building its remote aux state (Kafka's truncateFullyAndStartAt(next, Some(leader's log
    start))): the local log starts at the new offset, the log start offset below it."""
    log, remote = _tiered_with_local_start(make_log)
    log.truncate_fully_and_start_at(40, 3)
    assert (log.log_start_offset, log.local_log_start_offset, log.log_end_offset) == (3, 40, 40)
    assert fetched_offsets(log.read(3, 1 << 20))[0] == 3  # the remote tier still serves 3..
    assert remote.reads
    check_log_invariants(log)


def test_turning_remote_storage_off_moves_log_start_to_local(make_log: LogFactory) -> None:
    """remote.storage.enable=false needs remote.log.delete.on.disable=true (Kafka's check, nothing changes
    otherwise); then the remote range is gone for the log and its log start offset is the local one."""
    log, _ = _tiered_with_local_start(make_log)
    local_start = log.local_log_start_offset
    with pytest.raises(InvalidConfigurationError, match="without deleting remote data"):
        log.update_config({"remote.storage.enable": False})
    assert log.remote_log_enabled and log.log_start_offset == 0
    log.update_config({"remote.storage.enable": False, "remote.log.delete.on.disable": True})
    assert not log.remote_log_enabled
    assert log.log_start_offset == log.local_log_start_offset == local_start
    assert log.leader_epoch_cache.earliest_entry is not None
    assert log.leader_epoch_cache.earliest_entry.start_offset == local_start
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)
    check_log_invariants(log)


def test_local_log_start_offset_never_past_the_log_end(make_log: LogFactory) -> None:
    log = _tiered_log(make_log, 5)
    with pytest.raises(OffsetOutOfRangeError, match="larger than the log end offset 5"):
        log.maybe_increment_local_log_start_offset(6, "segment deletion")
    assert log.local_log_start_offset == 0
    assert log.maybe_increment_local_log_start_offset(5, "segment deletion")
    assert not log.maybe_increment_local_log_start_offset(4, "segment deletion")
    assert (log.log_start_offset, log.local_log_start_offset) == (0, 5)
    check_log_invariants(log)


@pytest.mark.parametrize("seed", range(3))
def test_random_operations_keep_one_history(make_log: LogFactory, seed: int) -> None:
    """Appends, copies, local retention, DeleteRecords and total retention in random order: the invariants
    hold after every step and every offset in [log start, LEO) reads back its own record, from whichever tier
    holds it; below the log start offset reads are out of range."""
    rng = random.Random(seed)
    log = make_log(
        LogConfig.from_props({**TIERED, "retention.ms": -1, "local.retention.bytes": 1}),
        remote_storage_system_enable=True,
    )
    remote = FakeRemote()
    log.set_remote_log_reader(remote)
    for _ in range(60):
        op = rng.random()
        if op < 0.4:
            _append(log, rng.randint(1, 8))
        elif op < 0.6 and len(log.segments) > 1:
            remote.copy_from(log, segment_bases(log)[rng.randint(1, len(log.segments) - 1)])
        elif op < 0.8:
            log.delete_old_segments()
        elif log.high_watermark > log.log_start_offset:
            log.maybe_increment_log_start_offset(
                rng.randint(log.log_start_offset, log.high_watermark), "client delete records"
            )
        check_log_invariants(log)
        assert segment_bases(log)[0] <= log.local_log_start_offset
        for offset in range(log.log_start_offset, log.log_end_offset):
            records_read = fetched_records(log.read(offset, 200))
            found = {r.offset: r.value for r in records_read}
            assert found[offset] == b"v%d" % offset, (offset, log)
        if log.log_start_offset > 0:
            with pytest.raises(OffsetOutOfRangeError):
                log.read(log.log_start_offset - 1, 200)
    assert remote.reads, "the run never read from the remote tier"
    assert log.log_start_offset < log.local_log_start_offset or remote.batches


@pytest.mark.parametrize("delay_ms", [0, 60_000])
def test_local_retention_under_a_reader_sends_it_to_the_remote_tier(
    make_log: LogFactory, monkeypatch: pytest.MonkeyPatch, delay_ms: int
) -> None:
    """A read that passed the local log start offset check just before local retention deleted its segment
    reads the remote tier (which holds it: that is why it could go) instead of answering out of range."""
    log = _tiered_log(make_log, 30, **{"file.delete.delay.ms": delay_ms})
    remote = FakeRemote()
    remote.copy_from(log, 20)
    log.set_remote_log_reader(remote)
    assert log.local_log_start_offset == 0
    local_read = log.local_log.read

    def retention_first(*args: object, **kwargs: object) -> FetchDataInfo:
        monkeypatch.setattr(log.local_log, "read", local_read)
        assert log.delete_old_segments() > 0
        return local_read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(log.local_log, "read", retention_first)
    info = log.read(3, 1 << 20)
    assert log.local_log_start_offset > 3
    assert fetched_offsets(info)[0] == 3
    assert remote.reads and remote.reads[-1][0] == 3
