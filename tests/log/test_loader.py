"""Loading a partition directory: Apache Kafka's ``LogLoaderTest`` ported, plus kafkalog's own load rules.

The ports keep Kafka's names (``test_<kafka name in snake case>``), numbers and comments where they apply
(``core/src/test/scala/unit/kafka/log/LogLoaderTest.scala``, now
``storage/src/test/java/org/apache/kafka/storage/internals/log/LogLoaderTest.java``). Left out: the
LogManager error-channel half of ``testLogRecoveryIsCalledUponBrokerCrash`` (kafkalog has no LogManager yet;
the clean-shutdown half is ported), the remote-storage case of ``testLogStartOffsetWhenRemoteStorageIsEnabled``
(tiered storage is not supported), and ``testOverCompactedLogRecoveryMultiRecordV1`` (kafkalog does not write
magic-1 batches).

Kafka's ``createLog`` defaults to ``lastShutdownClean = true``; :func:`create_log` does the same.
"""

from __future__ import annotations

import logging
import os
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crash.faults import append_bytes, fast_tmp_dir, initialize_log_dir_with_overflowed_segment
from crash.verify import assert_valid_partition_dir
from kafkalog.errors import KafkaStorageError, LogSegmentOffsetOverflowError
from kafkalog.log import AppendOrigin, Log, LogConfig, MockScheduler, ProducerStateManager
from kafkalog.log import loader as loader_module
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE, EpochEntry, write_clean_shutdown
from kafkalog.log.names import TopicPartition
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage import LogSegment, OffsetIndex
from kafkalog.storage.files import offset_index_file, producer_snapshot_file, time_index_file
from kafkalog.storage.txn_index import AbortedTxn
from kafkalog.time import MockTime

INT_MAX = 2**31 - 1
NO_TIMESTAMP = -1
PRODUCER_ID_EXPIRATION_MS = 86_400_000


def log_config(
    *,
    segment_bytes: int = 1024**3,
    retention_ms: int = 7 * 24 * 3600 * 1000,
    retention_bytes: int = -1,
    max_message_bytes: int = 1024 * 1024 + 12,
    index_interval_bytes: int = 4096,
    segment_index_bytes: int = 10 * 1024 * 1024,
    file_delete_delay_ms: int = 60_000,
    preallocate: bool = False,
) -> LogConfig:
    """Kafka's ``LogTestUtils.createLogConfig`` (same defaults)."""
    return LogConfig(
        segment_bytes=segment_bytes,
        retention_ms=retention_ms,
        retention_bytes=retention_bytes,
        max_message_bytes=max_message_bytes,
        index_interval_bytes=index_interval_bytes,
        segment_index_bytes=segment_index_bytes,
        file_delete_delay_ms=file_delete_delay_ms,
        preallocate=preallocate,
    )


@dataclass
class Env:
    """Kafka's test fixture: a partition directory, a MockTime and its scheduler, the logs to close."""

    log_dir: Path
    time: MockTime
    scheduler: MockScheduler
    logs: list[Log] = field(default_factory=list)

    def create_log(
        self,
        config: LogConfig,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        last_shutdown_clean: bool = True,
        directory: Path | None = None,
    ) -> Log:
        log = Log.open(
            directory or self.log_dir,
            config,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            scheduler=self.scheduler,
            time=self.time,
            last_shutdown_clean=last_shutdown_clean,
        )
        self.logs.append(log)
        return log

    def records(
        self,
        *values: bytes,
        timestamp: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        sequence: int = -1,
        base_offset: int = 0,
        leader_epoch: int = -1,
        compression: str = "none",
    ) -> MemoryRecords:
        """Kafka's ``TestUtils.records`` / ``singletonRecords``."""
        ts = self.time.milliseconds() if timestamp is None else timestamp
        return MemoryRecords.build(
            [SimpleRecord(v, None, ts) for v in values],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=sequence,
            base_offset=base_offset,
            partition_leader_epoch=leader_epoch,
            compression=compression,
            now_ms=self.time.milliseconds(),
        )


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when available: many of Kafka's scenarios fsync a lot, which only costs time."""
    with fast_tmp_dir(tmp_path) as directory:
        yield directory


@pytest.fixture
def env(work_dir: Path) -> Iterator[Env]:
    time = MockTime()
    e = Env(work_dir / "kafka-0", time, MockScheduler(time))
    yield e
    for log in e.logs:
        if not log.closed:
            try:
                log.close()
            except Exception:
                log.close_handlers()


def keys_in_log(log: Log) -> list[int]:
    """Kafka's ``LogTestUtils.keysInLog``."""
    return [
        int(r.key)
        for s in log.segments
        for b in s.batches()
        if not b.is_control_batch
        for r in b.records()
        if r.value is not None and r.key is not None
    ]


def has_offset_overflow(log: Log) -> bool:
    return first_overflow_segment(log) is not None


def first_overflow_segment(log: Log) -> LogSegment | None:
    """Kafka's ``LogTestUtils.firstOverflowSegment``."""
    for segment in log.segments:
        for batch in segment.batches():
            if batch.last_offset > segment.base_offset + INT_MAX or batch.base_offset < segment.base_offset:
                return segment
    return None


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


def all_aborted_transactions(log: Log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.all_aborted_txns()]


def active_producers_with_last_sequence(log: Log) -> dict[int, int]:
    return {pid: e.last_seq for pid, e in log.producer_state.active_producers().items()}


@dataclass
class Calls:
    """Which segments were read (``LogSegment.read``) and recovered (``LogSegment.recover``)."""

    reads: set[int] = field(default_factory=set)
    recovered: list[int] = field(default_factory=list)
    rebuilt: list[int] = field(default_factory=list)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    seen = Calls()
    real_read, real_recover, real_rebuild = LogSegment.read, LogSegment.recover, LogSegment.rebuild_indexes

    def read(self: LogSegment, *args: Any, **kwargs: Any) -> Any:
        seen.reads.add(self.base_offset)
        return real_read(self, *args, **kwargs)

    def recover(self: LogSegment, *args: Any, **kwargs: Any) -> int:
        seen.recovered.append(self.base_offset)
        return real_recover(self, *args, **kwargs)

    def rebuild(self: LogSegment) -> int:
        seen.rebuilt.append(self.base_offset)
        return real_rebuild(self)

    monkeypatch.setattr(LogSegment, "read", read)
    monkeypatch.setattr(LogSegment, "recover", recover)
    monkeypatch.setattr(LogSegment, "rebuild_indexes", rebuild)
    return seen


def append_transactional(env: Env, log: Log, producer_id: int, epoch: int, transactional: bool = True) -> Any:
    """Kafka's ``LogTestUtils.appendTransactionalAsLeader`` / ``appendIdempotentAsLeader``: a closure
    appending ``n`` records with consecutive sequences."""
    sequence = 0

    def append(n: int) -> None:
        nonlocal sequence
        records = MemoryRecords.build(
            [SimpleRecord(b"%d" % s, None, env.time.milliseconds()) for s in range(sequence, sequence + n)],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=transactional,
            now_ms=env.time.milliseconds(),
        )
        log.append_as_leader(records, 0)
        sequence += n

    return append


def append_non_transactional(log: Log, n: int) -> None:
    """Kafka's ``LogTestUtils.appendNonTransactionalAsLeader`` (records without timestamp)."""
    log.append_as_leader(
        MemoryRecords.build([SimpleRecord(b"%d" % s, None, NO_TIMESTAMP) for s in range(n)]), 0
    )


def append_end_txn_marker(
    log: Log,
    producer_id: int,
    epoch: int,
    control: ControlRecordType,
    timestamp: int,
    coordinator_epoch: int = 0,
) -> None:
    """Kafka's ``LogTestUtils.appendEndTxnMarkerAsLeader`` (origin COORDINATOR, leader epoch 0)."""
    marker = MemoryRecords.end_transaction_marker(
        producer_id=producer_id,
        producer_epoch=epoch,
        control_type=control,
        coordinator_epoch=coordinator_epoch,
        timestamp=timestamp,
        partition_leader_epoch=0,
    )
    log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)


def mixed_transactions(env: Env, log: Log) -> None:
    """The transaction history shared by Kafka's three transaction-index recovery tests."""
    epoch = 0
    pid1, pid2, pid3, pid4 = 1, 2, 3, 4
    append_pid1 = append_transactional(env, log, pid1, epoch)
    append_pid2 = append_transactional(env, log, pid2, epoch)
    append_pid3 = append_transactional(env, log, pid3, epoch)
    append_pid4 = append_transactional(env, log, pid4, epoch)
    now = env.time.milliseconds
    # mix transactional and non-transactional data
    append_pid1(5)  # nextOffset: 5
    append_non_transactional(log, 3)  # 8
    append_pid2(2)  # 10
    append_pid1(4)  # 14
    append_pid3(3)  # 17
    append_non_transactional(log, 2)  # 19
    append_pid1(10)  # 29
    append_end_txn_marker(log, pid1, epoch, ControlRecordType.ABORT, now())  # 30
    append_pid2(6)  # 36
    append_pid4(3)  # 39
    append_non_transactional(log, 10)  # 49
    append_pid3(9)  # 58
    append_end_txn_marker(log, pid3, epoch, ControlRecordType.COMMIT, now())  # 59
    append_pid4(8)  # 67
    append_pid2(7)  # 74
    append_end_txn_marker(log, pid2, epoch, ControlRecordType.ABORT, now())  # 75
    append_non_transactional(log, 10)  # 85
    append_pid4(4)  # 89
    append_end_txn_marker(log, pid4, epoch, ControlRecordType.COMMIT, now())  # 90


EXPECTED_ABORTED = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]


# --- clean shutdown ---------------------------------------------------------------------------------------------


def test_log_recovery_is_called_upon_broker_crash(
    env: Env, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean-shutdown half of Kafka's test: the marker is consumed at load, and a load that fails
    (KAFKA-10471) leaves the next load unclean."""
    config = log_config(segment_bytes=1000)
    log = env.create_log(config)
    for _ in range(30):
        log.append_as_leader(env.records(b"test"), 0)
    log.close()
    marker = env.log_dir / CLEAN_SHUTDOWN_FILE

    # Load logs after a clean shutdown
    write_clean_shutdown(env.log_dir, 0)
    log = Log.open(env.log_dir, config, recovery_point=0, scheduler=env.scheduler, time=env.time)
    assert log.had_clean_shutdown, "Unexpected value intercepted for clean shutdown flag"
    assert not marker.exists(), "Clean shutdown file must not exist after loadLogs has completed"
    assert calls.recovered == []
    log.close()
    assert marker.exists(), "a clean close of a fully loaded standalone log writes the marker"
    marker.unlink()  # as if the process had died instead of closing
    # Load logs without clean shutdown file
    log = Log.open(env.log_dir, config, recovery_point=0, scheduler=env.scheduler, time=env.time)
    assert not log.had_clean_shutdown, "Unexpected value intercepted for clean shutdown flag"
    assert not marker.exists()
    assert calls.recovered, "an unclean load recovers from the recovery point"
    log.close()

    # Create clean shutdown file and then simulate error while loading logs such that log loading does not complete.
    write_clean_shutdown(env.log_dir, 0)

    def failing_load(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Simulated Runtime error")

    monkeypatch.setattr("kafkalog.log.log.load_log", failing_load)
    with pytest.raises(RuntimeError):
        Log.open(env.log_dir, config, scheduler=env.scheduler, time=env.time)
    assert not marker.exists(), "Clean shutdown file must not have existed"
    monkeypatch.undo()

    # LogManager must understand that log had unclean shutdown the last time.
    log = Log.open(env.log_dir, config, recovery_point=0, scheduler=env.scheduler, time=env.time)
    env.logs.append(log)
    assert not log.had_clean_shutdown, "Unexpected value for clean shutdown flag"
    assert log.log_end_offset == 30


def test_clean_shutdown_file(env: Env, calls: Calls) -> None:
    # append some messages to create some segments
    config = log_config(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    # create a log and write some messages to it
    log = env.create_log(config)
    for _ in range(100):
        log.append_as_leader(env.records(b"test"), 0)
    log.close()
    # check if recovery was attempted. Even if the recovery point is 0L, recovery should not be attempted as the
    # clean shutdown file exists.
    recovery_point = log.log_end_offset
    log = env.create_log(config)
    assert log.log_end_offset == recovery_point
    assert calls.recovered == []
    assert log.recovery_point == log.log_end_offset


# --- producer state ---------------------------------------------------------------------------------------------


def test_producer_snapshots_recovery_after_unclean_shutdown(env: Env, calls: Calls) -> None:
    config = log_config(segment_bytes=640)
    log = env.create_log(config)
    assert log.producer_state.oldest_snapshot_offset() is None
    for i in range(101):
        log.append_as_leader(env.records(str(i).encode()), 0)
    assert log.num_log_segments >= 5
    segment_offsets = [s.base_offset for s in log.segments]
    active_segment_offset = segment_offsets[-1]
    # We want the recovery point to be past the segment offset and before the last 2 segments including a gap of
    # 1 segment. We collect the data before closing the log.
    offset_for_segment_after_recovery_point = segment_offsets[-3]
    offset_for_recovery_point_segment = segment_offsets[-4]
    seg_offsets_before_recovery = {o for o in segment_offsets if o < offset_for_recovery_point_segment}
    seg_offsets_after_recovery = {o for o in segment_offsets if o >= offset_for_recovery_point_segment}
    recovery_point = offset_for_recovery_point_segment + 1
    assert recovery_point < offset_for_segment_after_recovery_point
    log.close()

    expected_snapshot_offsets = {*segment_offsets[-4:], log.log_end_offset}

    # Retain snapshots for the last 2 segments
    log.producer_state.delete_snapshots_before(segment_offsets[-2])
    calls.reads.clear()
    log = env.create_log(config, recovery_point=offset_for_recovery_point_segment, last_shutdown_clean=False)
    # We will reload all segments because the recovery point is behind the producer snapshot files (pre KAFKA-5829
    # behaviour). (Kafka also reads the active segment; kafkalog does not need to.)
    assert calls.reads - {active_segment_offset} == seg_offsets_before_recovery
    assert set(calls.recovered) == seg_offsets_after_recovery
    assert set(snapshot_offsets(env.log_dir)) == expected_snapshot_offsets
    log.close()
    calls.reads.clear()
    calls.recovered.clear()

    # Only delete snapshots before the base offset of the recovery point segment (post KAFKA-5829 behaviour) to
    # avoid reading all segments
    log.producer_state.delete_snapshots_before(offset_for_recovery_point_segment)
    log = env.create_log(config, recovery_point=recovery_point, last_shutdown_clean=False)
    assert calls.reads - {active_segment_offset} == set()
    assert set(calls.recovered) == seg_offsets_after_recovery
    assert set(snapshot_offsets(env.log_dir)) == expected_snapshot_offsets
    log.close()


class SpyProducerState(ProducerStateManager):
    """Records the calls Kafka's mock-based tests verify."""

    calls: list[tuple[str, tuple[Any, ...]]]

    def _record(self, name: str, *args: Any) -> None:
        if not hasattr(self, "calls"):
            self.calls = []
        self.calls.append((name, args))

    def update_map_end_offset(self, offset: int) -> None:
        self._record("update_map_end_offset", offset)
        super().update_map_end_offset(offset)

    def take_snapshot(self, sync: bool = True) -> Path | None:
        self._record("take_snapshot")
        return super().take_snapshot(sync)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now: int) -> None:
        self._record("truncate_and_reload", log_start_offset, log_end_offset)
        super().truncate_and_reload(log_start_offset, log_end_offset, now)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        self._record("remove_stray_snapshots")
        super().remove_stray_snapshots(segment_base_offsets)

    def count(self, name: str, *args: Any) -> int:
        return sum(1 for n, a in getattr(self, "calls", []) if n == name and (not args or a == args))


def _open_with_spy(env: Env, config: LogConfig, clean: bool, monkeypatch: pytest.MonkeyPatch) -> Log:
    monkeypatch.setattr("kafkalog.log.log.ProducerStateManager", SpyProducerState)
    log = env.create_log(config, last_shutdown_clean=clean)
    monkeypatch.undo()
    return log


def test_skip_loading_if_empty_producer_state_before_truncation(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _open_with_spy(env, LogConfig(), False, monkeypatch)
    psm = log.producer_state
    assert isinstance(psm, SpyProducerState)
    assert psm.count("update_map_end_offset", 0) >= 1
    assert psm.count("remove_stray_snapshots") == 1
    assert psm.count("take_snapshot") >= 1
    assert psm.count("truncate_and_reload", 0, 0) == 1

    # Append some messages
    psm.calls.clear()
    log.append_as_leader(env.records(b"a"), 0)
    log.append_as_leader(env.records(b"b"), 0)
    assert psm.count("update_map_end_offset", 1) == 1
    assert psm.count("update_map_end_offset", 2) == 1

    # Now truncate
    psm.calls.clear()
    log.truncate_to(1)
    assert psm.count("truncate_and_reload", 0, 1) == 1
    assert psm.count("update_map_end_offset", 1) == 1
    assert psm.count("take_snapshot") >= 1


def test_skip_truncate_and_reload_if_new_message_format_and_clean_shutdown(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _open_with_spy(env, LogConfig(), True, monkeypatch)
    psm = log.producer_state
    assert isinstance(psm, SpyProducerState)
    assert psm.count("remove_stray_snapshots") == 1
    assert psm.count("update_map_end_offset", 0) == 2
    assert psm.count("take_snapshot") == 2
    assert psm.count("truncate_and_reload") == 0
    assert psm.is_empty


def test_recover_after_non_monotonic_coordinator_epoch_write(env: Env) -> None:
    # Due to KAFKA-9144, we may encounter a coordinator epoch which goes backwards.
    # This test case verifies that recovery logic relaxes validation in this case and
    # just takes the latest write.
    producer_id = 1
    coordinator_epoch = 5
    config = log_config(segment_bytes=1024 * 1024 * 5)
    log = env.create_log(config)
    epoch = 0
    first_append_timestamp = env.time.milliseconds()
    append_end_txn_marker(
        log, producer_id, epoch, ControlRecordType.ABORT, first_append_timestamp, coordinator_epoch
    )
    entry = log.producer_state.last_entry(producer_id)
    assert entry is not None and entry.last_timestamp == first_append_timestamp

    env.time.sleep(PRODUCER_ID_EXPIRATION_MS)
    assert log.producer_state.last_entry(producer_id) is None

    second_append_timestamp = env.time.milliseconds()
    append_end_txn_marker(
        log, producer_id, epoch, ControlRecordType.ABORT, second_append_timestamp, coordinator_epoch - 1
    )
    log.close()

    # Force recovery by setting the recoveryPoint to the log start
    log = env.create_log(config, recovery_point=0, last_shutdown_clean=False)
    entry = log.producer_state.last_entry(producer_id)
    assert entry is not None and entry.last_timestamp == second_append_timestamp
    log.close()


def test_load_producers_after_delete_records_mid_segment(env: Env) -> None:
    config = log_config(segment_bytes=2048 * 5)
    log = env.create_log(config)
    pid1, pid2, epoch = 1, 2, 0
    log.append_as_leader(env.records(b"a", producer_id=pid1, producer_epoch=epoch, sequence=0), 0)
    log.append_as_leader(env.records(b"b", producer_id=pid2, producer_epoch=epoch, sequence=0), 0)
    assert len(log.producer_state.active_producers()) == 2

    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(1)

    # Deleting records should not remove producer state
    assert len(log.producer_state.active_producers()) == 2
    retained = active_producers_with_last_sequence(log).get(pid2)
    assert retained == 0
    log.close()

    # Because the log start offset did not advance, producer snapshots will still be present and the state will be
    # rebuilt
    reloaded = env.create_log(config, log_start_offset=1, last_shutdown_clean=False)
    assert len(reloaded.producer_state.active_producers()) == 2
    assert active_producers_with_last_sequence(reloaded).get(pid2) == retained


def test_loading_log_keeps_largest_stray_producer_state_snapshot(env: Env) -> None:
    config = log_config(
        segment_bytes=2048 * 5, retention_bytes=0, retention_ms=1000 * 60, file_delete_delay_ms=0
    )
    log = env.create_log(config)
    pid1, epoch = 1, 0
    log.append_as_leader(env.records(b"a", producer_id=pid1, producer_epoch=epoch, sequence=0), 0)
    log.roll()
    log.append_as_leader(env.records(b"b", producer_id=pid1, producer_epoch=epoch, sequence=1), 0)
    log.roll()
    log.append_as_leader(env.records(b"c", producer_id=pid1, producer_epoch=epoch, sequence=2), 0)
    log.append_as_leader(env.records(b"d", producer_id=pid1, producer_epoch=epoch, sequence=3), 0)

    # Close the log, we should now have 3 segments
    log.close()
    assert log.num_log_segments == 3
    # We expect 3 snapshot files, two of which are for the first two segments, the last was written out during log
    # closing.
    assert snapshot_offsets(env.log_dir) == [1, 2, 4]
    # Inject a stray snapshot file within the bounds of the log at offset 3, it should be cleaned up after loading
    # the log
    producer_snapshot_file(env.log_dir, 3).touch()
    assert snapshot_offsets(env.log_dir) == [1, 2, 3, 4]

    env.create_log(config, last_shutdown_clean=False)
    # We should clean up the stray producer state snapshot file, but keep the largest snapshot file (4)
    assert snapshot_offsets(env.log_dir) == [1, 2, 4]


def test_load_producers_after_delete_records_on_segment(env: Env) -> None:
    config = log_config(segment_bytes=2048 * 5)
    log = env.create_log(config)
    pid1, pid2, epoch = 1, 2, 0
    log.append_as_leader(env.records(b"a", producer_id=pid1, producer_epoch=epoch, sequence=0), 0)
    log.roll()
    log.append_as_leader(env.records(b"b", producer_id=pid2, producer_epoch=epoch, sequence=0), 0)
    assert log.num_log_segments == 2
    assert len(log.producer_state.active_producers()) == 2

    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(1)
    log.delete_old_segments()

    # Deleting records should not remove producer state
    assert log.num_log_segments == 1
    assert len(log.producer_state.active_producers()) == 2
    retained = active_producers_with_last_sequence(log).get(pid2)
    assert retained == 0
    log.close()

    # After reloading log, producer state should not be regenerated
    reloaded = env.create_log(config, log_start_offset=1, last_shutdown_clean=False)
    assert len(reloaded.producer_state.active_producers()) == 1
    assert active_producers_with_last_sequence(reloaded).get(pid2) == retained


# --- recovery and indexes ----------------------------------------------------------------------------------------


def test_log_recovers_to_correct_offset(env: Env) -> None:
    """Append a bunch of messages to a log and then re-open it both with and without recovery and check that the
    log re-initializes correctly."""
    num_messages, message_size = 100, 100
    config = log_config(
        segment_bytes=7 * message_size, index_interval_bytes=3 * message_size, segment_index_bytes=4096
    )
    log = env.create_log(config)
    rng = random.Random(0)
    for i in range(num_messages):
        log.append_as_leader(
            env.records(rng.randbytes(message_size), timestamp=env.time.milliseconds() + i * 10), 0
        )
    assert log.log_end_offset == num_messages
    active = log.active_segment
    last_index_offset = active.offset_index.last_offset
    num_index_entries = active.offset_index.entries
    last_offset = log.log_end_offset
    # After segment is closed, the last entry in the time index should be (largest timestamp -> last offset).
    last_time_index_offset = log.log_end_offset - 1
    last_time_index_timestamp = active.largest_timestamp()
    # Depending on when the last time index entry is inserted, an entry may or may not be inserted into the time
    # index.
    num_time_index_entries = active.time_index.entries + (
        0 if active.time_index.last_entry().offset == log.log_end_offset - 1 else 1
    )
    log.close()

    def verify_recovered_log(log: Log, expected_recovery_point: int) -> None:
        assert log.recovery_point == expected_recovery_point, "Unexpected recovery point"
        assert log.log_end_offset == num_messages
        active = log.active_segment
        assert active.offset_index.last_offset == last_index_offset
        assert active.offset_index.entries == num_index_entries
        assert active.time_index.last_entry().timestamp == last_time_index_timestamp
        assert active.time_index.last_entry().offset == last_time_index_offset
        assert active.time_index.entries == num_time_index_entries

    log = env.create_log(config, recovery_point=last_offset, last_shutdown_clean=False)
    verify_recovered_log(log, last_offset)
    log.close()

    # test recovery case
    recovery_point = 10
    log = env.create_log(config, recovery_point=recovery_point, last_shutdown_clean=False)
    # the recovery point should not be updated after unclean shutdown until the log is flushed
    verify_recovered_log(log, recovery_point)
    log.flush()
    verify_recovered_log(log, last_offset)
    log.close()


def _two_hundred_small_messages(env: Env) -> tuple[LogConfig, Log]:
    config = log_config(segment_bytes=200, index_interval_bytes=1)
    log = env.create_log(config)
    rng = random.Random(1)
    for i in range(200):
        log.append_as_leader(env.records(rng.randbytes(10), timestamp=env.time.milliseconds() + i * 10), 0)
    return config, log


def _check_every_offset_readable(env: Env, log: Log, num_messages: int) -> None:
    for i in range(num_messages):
        batch = next(iter(log.read(i, 100).records.batches()))
        assert batch.last_offset == i
        found = log.fetch_offset_by_timestamp(env.time.milliseconds() + i * 10)
        assert found is not None
        assert found.offset == (log.segments[0].base_offset if i == 0 else i)


def test_index_rebuild(env: Env) -> None:
    """If we manually delete an index segment it is rebuilt when the log is re-opened."""
    config, log = _two_hundred_small_messages(env)
    index_files = [s.offset_index.path for s in log.segments]
    time_index_files = [s.time_index.path for s in log.segments]
    log.close()
    # delete all the index files
    for path in index_files + time_index_files:
        path.unlink()
    # reopen the log
    log = env.create_log(config, last_shutdown_clean=False)
    assert log.log_end_offset == 200
    assert log.segments[0].offset_index.entries > 0, "The index should have been rebuilt"
    assert log.segments[0].time_index.entries > 0, "The time index should have been rebuilt"
    _check_every_offset_readable(env, log, 200)
    log.close()
    assert_valid_partition_dir(env.log_dir)


def test_corrupt_index_rebuild(env: Env) -> None:
    """If we have corrupted an index segment it is rebuilt when the log is re-opened."""
    config, log = _two_hundred_small_messages(env)
    index_files = [s.offset_index.path for s in log.segments]
    time_index_files = [s.time_index.path for s in log.segments]
    log.close()
    # corrupt all the index files
    for path in index_files + time_index_files:
        path.write_bytes(b"  ")
    # reopen the log with recovery point=0 so that the segment recovery can be triggered
    log = env.create_log(config, last_shutdown_clean=False)
    assert log.log_end_offset == 200
    _check_every_offset_readable(env, log, 200)
    log.close()
    assert_valid_partition_dir(env.log_dir)


def test_bogus_index_segments_are_removed(env: Env) -> None:
    """When we open a log any index segments without an associated log segment should be deleted."""
    bogus_index1 = offset_index_file(env.log_dir, 0)
    bogus_time_index1 = time_index_file(env.log_dir, 0)
    bogus_index2 = offset_index_file(env.log_dir, 5)
    bogus_time_index2 = time_index_file(env.log_dir, 5)
    # The files remain absent until we first access it because we are doing lazy loading for time index and offset
    # index files but in this test case we need to create these files in order to test we will remove them.
    env.log_dir.mkdir(parents=True)
    bogus_index2.touch()
    bogus_time_index2.touch()

    record_size = env.records(b"test").size_in_bytes
    config = log_config(segment_bytes=record_size * 5, segment_index_bytes=1000, index_interval_bytes=1)
    log = env.create_log(config)
    # Force the segment to access the index files because we are doing index lazy loading.
    assert log.segments[0].offset_index.entries == 0
    assert log.segments[0].time_index.entries == 0
    assert bogus_index1.stat().st_size > 0, (
        "The first index file should have been replaced with a larger file"
    )
    assert bogus_time_index1.stat().st_size > 0
    assert not bogus_index2.exists(), "The second index file should have been deleted."
    assert not bogus_time_index2.exists(), "The second time index file should have been deleted."
    # check that we can append to the log
    for _ in range(10):
        log.append_as_leader(env.records(b"test"), 0)
    log.delete()


def test_reopen_then_truncate(env: Env) -> None:
    """Verify that truncation works correctly after re-opening the log."""
    record_size = env.records(b"test").size_in_bytes
    config = log_config(segment_bytes=record_size * 5, segment_index_bytes=1000, index_interval_bytes=10000)
    log = env.create_log(config)
    # add enough messages to roll over several segments then close and re-open and attempt to truncate
    for _ in range(100):
        log.append_as_leader(env.records(b"test"), 0)
    log.close()
    log = env.create_log(config, last_shutdown_clean=False)
    log.truncate_to(3)
    assert log.num_log_segments == 1, "All but one segment should be deleted."
    assert log.log_end_offset == 3


def test_open_deletes_obsolete_files(env: Env) -> None:
    """Any files ending in .deleted should be removed when the log is re-opened."""
    record_size = env.records(b"test").size_in_bytes
    config = log_config(segment_bytes=record_size * 5, segment_index_bytes=1000, retention_ms=999)
    log = env.create_log(config)
    # append some messages to create some segments
    for _ in range(100):
        log.append_as_leader(env.records(b"test", timestamp=env.time.milliseconds() - 1000), 0)
    # expire all segments
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments()
    log.close()
    assert any(p.name.endswith(".deleted") for p in env.log_dir.iterdir())
    log = env.create_log(config, last_shutdown_clean=False)
    assert log.num_log_segments == 1, "The deleted segments should be gone."
    assert not any(p.name.endswith(".deleted") for p in env.log_dir.iterdir())


def test_corrupt_log(env: Env, work_dir: Path) -> None:
    # append some messages to create some segments
    config = log_config(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    recovery_point = 50
    rng = random.Random(7)
    for iteration in range(10):
        # create a log and write some messages to it
        directory = work_dir / f"corrupt{iteration}-0"
        log = env.create_log(config, directory=directory)
        num_messages = 50 + rng.randrange(50)
        for _ in range(num_messages):
            log.append_as_leader(env.records(b"test"), 0)
        records = [
            (r.key, r.value, r.timestamp) for s in log.segments for b in s.batches() for r in b.records()
        ]
        log.close()
        # corrupt index and log by appending random bytes
        append_bytes(log.active_segment.offset_index.path, rng.randbytes(rng.randrange(1024) + 1))
        append_bytes(log.active_segment.log.path, rng.randbytes(rng.randrange(1024) + 1))
        # attempt recovery
        log = env.create_log(
            config,
            log_start_offset=0,
            recovery_point=recovery_point,
            last_shutdown_clean=False,
            directory=directory,
        )
        assert log.log_end_offset == num_messages
        recovered = [
            (r.key, r.value, r.timestamp) for s in log.segments for b in s.batches() for r in b.records()
        ]
        assert recovered == records
        log.close()
        assert_valid_partition_dir(directory)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_over_compacted_log_recovery(env: Env, compression: str) -> None:
    """``testOverCompactedLogRecovery`` (uncompressed, one record per batch) and ``...MultiRecord`` (gzip,
    two records per batch)."""
    config = log_config(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024)
    log = env.create_log(config)
    per_batch = 1 if compression == "none" else 2

    def batch(offset: int, first_key: int) -> MemoryRecords:
        return MemoryRecords.build(
            [(b"k%d" % (first_key + i), b"v%d" % (first_key + i)) for i in range(per_batch)],
            base_offset=offset,
            compression=compression,
            partition_leader_epoch=0,
            now_ms=env.time.milliseconds(),
        )

    set1 = batch(0, 1)
    set2 = batch(INT_MAX + 2, 3)
    set3 = batch(INT_MAX + 2 + per_batch, 5)
    set4 = batch(INT_MAX + 2 + 2 * per_batch, 7)
    # Writes into an empty log with baseOffset 0
    log.append_as_follower(set1)
    assert log.active_segment.base_offset == 0
    # This write will roll the segment, yielding a new segment with base offset = max(1, Integer.MAX_VALUE+2) =
    # Integer.MAX_VALUE+2
    log.append_as_follower(set2)
    assert log.active_segment.base_offset == INT_MAX + 2
    assert producer_snapshot_file(env.log_dir, INT_MAX + 2).exists()
    # This will go into the existing log
    log.append_as_follower(set3)
    assert log.active_segment.base_offset == INT_MAX + 2
    # This will go into the existing log
    log.append_as_follower(set4)
    assert log.active_segment.base_offset == INT_MAX + 2
    log.close()
    index_files = [p for p in env.log_dir.iterdir() if ".index" in p.name]
    assert len(index_files) == 2
    for path in index_files:
        index = OffsetIndex(path, int(path.name.replace(".index", "")))
        assert index.last_offset >= 0
        index.close()
    assert_valid_partition_dir(env.log_dir)


# --- offset overflow (KAFKA-6264) --------------------------------------------------------------------------------


def create_log_with_offset_overflow(env: Env, config: LogConfig) -> tuple[Log, LogSegment]:
    initialize_log_dir_with_overflowed_segment(env.log_dir)
    log = env.create_log(config, recovery_point=2**63 - 1)
    segment = first_overflow_segment(log)
    assert segment is not None, "Failed to create log with a segment which has overflowed offsets"
    return log, segment


def recover_and_check(env: Env, config: LogConfig, expected_keys: list[int]) -> Log:
    """Kafka's ``LogTestUtils.recoverAndCheck``: recover, and check that the keys are as expected and that every
    temporary file has been deleted."""
    recovered = env.create_log(config, last_shutdown_clean=False)
    env.time.sleep(config.file_delete_delay_ms + 1)
    for path in env.log_dir.iterdir():
        assert not path.name.endswith(".deleted"), "Unexpected .deleted file after recovery"
        assert not path.name.endswith(".cleaned"), "Unexpected .cleaned file after recovery"
        assert not path.name.endswith(".swap"), "Unexpected .swap file after recovery"
    assert keys_in_log(recovered) == expected_keys
    assert not has_offset_overflow(recovered)
    return recovered


def _rename_deleted_back(log_dir: Path) -> None:
    for path in log_dir.iterdir():
        if path.name.endswith(".deleted"):
            os.replace(path, path.with_name(path.name[: -len(".deleted")]))


def _overflow_config() -> LogConfig:
    return log_config(index_interval_bytes=1, file_delete_delay_ms=1000)


def test_recovery_of_segment_with_offset_overflow(env: Env) -> None:
    config = _overflow_config()
    log, _ = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    # Run recovery on the log. This should split the segment underneath. Ignore .deleted files as we could have
    # still have them lying around after the split.
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    # Running split again would throw an error
    for segment in recovered.segments:
        with pytest.raises(ValueError):
            log.split_overflowed_segment(segment)
    recovered.close()
    assert_valid_partition_dir(env.log_dir, exact_index_entries=False)


def test_overflowed_segment_with_missing_index_is_split_at_load(env: Env, calls: Calls) -> None:
    """A segment below the recovery point with no index is recovered while the files are loaded; when its offsets
    overflow, that recovery fails with the overflow and the load splits it and starts again (Kafka's
    ``retryOnOffsetOverflow`` around ``loadSegmentFiles``)."""
    config = _overflow_config()
    initialize_log_dir_with_overflowed_segment(env.log_dir)
    expected = env.create_log(config, recovery_point=2**63 - 1)
    expected_keys = keys_in_log(expected)
    expected.close_handlers()
    for path in list(env.log_dir.glob("*.index")) + list(env.log_dir.glob("*.timeindex")):
        path.unlink()
    log = env.create_log(config, recovery_point=2**63 - 1, last_shutdown_clean=True)
    env.time.sleep(config.file_delete_delay_ms + 1)
    assert keys_in_log(log) == expected_keys
    assert not has_offset_overflow(log)
    assert log.num_log_segments == 4
    log.close()
    assert_valid_partition_dir(env.log_dir, exact_index_entries=False)


def test_recovery_after_crash_during_split_phase1(env: Env) -> None:
    config = _overflow_config()
    log, segment_with_overflow = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    num_segments_initial = log.num_log_segments
    # Split the segment
    new_segments = log.split_overflowed_segment(segment_with_overflow)
    # Simulate recovery just after .cleaned file is created, before rename to .swap. On recovery, existing split
    # operation is aborted but the recovery process itself kicks off split which should complete.
    for segment in reversed(new_segments):
        segment.change_file_suffixes("", ".cleaned")
        segment.truncate_to(0)
    _rename_deleted_back(env.log_dir)
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    assert recovered.num_log_segments == num_segments_initial + 1
    recovered.close()


def test_recovery_after_crash_during_split_phase2(env: Env) -> None:
    config = _overflow_config()
    log, segment_with_overflow = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    num_segments_initial = log.num_log_segments
    # Split the segment
    new_segments = log.split_overflowed_segment(segment_with_overflow)
    # Simulate recovery just after one of the new segments has been renamed to .swap. On recovery, existing split
    # operation is aborted but the recovery process itself kicks off split which should complete.
    for segment in reversed(new_segments):
        if segment is not new_segments[-1]:
            segment.change_file_suffixes("", ".cleaned")
        else:
            segment.change_file_suffixes("", ".swap")
        segment.truncate_to(0)
    _rename_deleted_back(env.log_dir)
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    assert recovered.num_log_segments == num_segments_initial + 1
    recovered.close()


def test_recovery_after_crash_during_split_phase3(env: Env) -> None:
    config = _overflow_config()
    log, segment_with_overflow = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    num_segments_initial = log.num_log_segments
    # Split the segment
    new_segments = log.split_overflowed_segment(segment_with_overflow)
    # Simulate recovery right after all new segments have been renamed to .swap. On recovery, existing split
    # operation is completed and the old segment must be deleted.
    for segment in reversed(new_segments):
        segment.change_file_suffixes("", ".swap")
    _rename_deleted_back(env.log_dir)
    # Truncate the old segment
    segment_with_overflow.truncate_to(0)
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    assert recovered.num_log_segments == num_segments_initial + 1
    recovered.close()


def test_recovery_after_crash_during_split_phase4(env: Env) -> None:
    config = _overflow_config()
    log, segment_with_overflow = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    num_segments_initial = log.num_log_segments
    # Split the segment
    new_segments = log.split_overflowed_segment(segment_with_overflow)
    # Simulate recovery right after all new segments have been renamed to .swap and old segment has been deleted. On
    # recovery, existing split operation is completed.
    for segment in reversed(new_segments):
        segment.change_file_suffixes("", ".swap")
    for path in env.log_dir.iterdir():
        if path.name.endswith(".deleted"):
            path.unlink()
    # Truncate the old segment
    segment_with_overflow.truncate_to(0)
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    assert recovered.num_log_segments == num_segments_initial + 1
    recovered.close()


def test_recovery_after_crash_during_split_phase5(env: Env) -> None:
    config = _overflow_config()
    log, segment_with_overflow = create_log_with_offset_overflow(env, config)
    expected_keys = keys_in_log(log)
    num_segments_initial = log.num_log_segments
    # Split the segment
    new_segments = log.split_overflowed_segment(segment_with_overflow)
    # Simulate recovery right after one of the new segment has been renamed to .swap and the other to .log. On
    # recovery, existing split operation is completed.
    new_segments[-1].change_file_suffixes("", ".swap")
    # Truncate the old segment
    segment_with_overflow.truncate_to(0)
    recovered = recover_and_check(env, config, expected_keys)
    assert keys_in_log(recovered) == expected_keys
    assert recovered.num_log_segments == num_segments_initial + 1
    recovered.close()


# --- leader epochs and transactions ------------------------------------------------------------------------------


def test_log_recovers_for_leader_epoch(env: Env) -> None:
    """Append a bunch of messages to a log and then re-open it with recovery and check that the leader epochs are
    recovered properly."""
    log = env.create_log(LogConfig())
    cache = log.leader_epoch_cache
    for offset, epoch in ((0, 1), (1, 2), (2, 2), (3, 3)):
        log.append_as_follower(
            env.records(b"random", base_offset=offset, leader_epoch=epoch, timestamp=NO_TIMESTAMP)
        )
    assert cache.epoch_entries == [EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3)]
    # deliberately remove some of the epoch entries
    cache.truncate_from_end(2)
    assert cache.epoch_entries != [EpochEntry(1, 0), EpochEntry(2, 1), EpochEntry(3, 3)]
    log.close()
    # reopen the log and recover from the beginning
    recovered = env.create_log(LogConfig(), last_shutdown_clean=False)
    # epoch entries should be recovered
    assert recovered.leader_epoch_cache.epoch_entries == [
        EpochEntry(1, 0),
        EpochEntry(2, 1),
        EpochEntry(3, 3),
    ]
    recovered.close()


def test_full_transaction_index_recovery(env: Env) -> None:
    config = log_config(segment_bytes=128 * 5)
    log = env.create_log(config)
    mixed_transactions(env, log)
    # delete all the offset and transaction index files to force recovery
    for segment in log.segments:
        segment.offset_index.delete_if_exists()
        segment.txn_index.delete_if_exists()
    log.close()
    reloaded = env.create_log(log_config(segment_bytes=1024 * 5), last_shutdown_clean=False)
    assert all_aborted_transactions(reloaded) == EXPECTED_ABORTED
    reloaded.close()
    assert_valid_partition_dir(env.log_dir)


def test_recover_only_last_segment(env: Env, calls: Calls) -> None:
    config = log_config(segment_bytes=128 * 5)
    log = env.create_log(config)
    mixed_transactions(env, log)
    # delete the last offset and transaction index files to force recovery
    last_segment = log.segments[-1]
    recovery_point = last_segment.base_offset
    last_segment.offset_index.delete_if_exists()
    last_segment.txn_index.delete_if_exists()
    log.close()
    reloaded = env.create_log(
        log_config(segment_bytes=1024 * 5), recovery_point=recovery_point, last_shutdown_clean=False
    )
    assert all_aborted_transactions(reloaded) == EXPECTED_ABORTED
    # (Kafka recovers it twice: for the missing index, then as the segment at the recovery point)
    assert calls.recovered == [recovery_point]
    reloaded.close()
    assert_valid_partition_dir(env.log_dir)


def test_recover_last_segment_with_no_snapshots(env: Env) -> None:
    config = log_config(segment_bytes=128 * 5)
    log = env.create_log(config)
    mixed_transactions(env, log)
    for path in env.log_dir.glob("*.snapshot"):
        path.unlink()
    # delete the last offset and transaction index files to force recovery. this should force us to rebuild the
    # producer state from the start of the log
    last_segment = log.segments[-1]
    recovery_point = last_segment.base_offset
    last_segment.offset_index.delete_if_exists()
    last_segment.txn_index.delete_if_exists()
    log.close()
    reloaded = env.create_log(
        log_config(segment_bytes=1024 * 5), recovery_point=recovery_point, last_shutdown_clean=False
    )
    assert all_aborted_transactions(reloaded) == EXPECTED_ABORTED
    reloaded.close()


# --- log start offset --------------------------------------------------------------------------------------------


def test_log_end_less_than_start_after_reopen(env: Env) -> None:
    config = log_config()
    log = env.create_log(config)
    for i in range(5):
        log.append_as_leader(env.records(str(i).encode()), 0)
        log.roll()
    assert log.num_log_segments == 6
    # Increment the log start offset
    start_offset = 4
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(start_offset)
    assert log.log_end_offset > log.log_start_offset
    # Append garbage to a segment below the current log start offset
    segment_to_force_truncation = log.segments[1]
    log.close()
    segment_to_force_truncation.log.path.write_bytes(b"corruptRecord")
    # Reopen the log. This will cause truncate the segment to which we appended garbage and delete all other
    # segments. All remaining segments will be lower than the current log start offset, which will force deletion
    # of all segments and recreation of a single, active segment starting at logStartOffset.
    log = env.create_log(config, log_start_offset=start_offset, last_shutdown_clean=False)
    # Wait for segment deletions (if any) to complete.
    env.time.sleep(config.file_delete_delay_ms)
    assert log.num_log_segments == 1
    assert log.log_start_offset == start_offset
    assert log.log_end_offset == start_offset
    # Validate that the remaining segment matches our expectations
    only_segment = log.segments[0]
    assert only_segment.base_offset == start_offset
    assert only_segment.log.path.exists()
    assert only_segment.offset_index.path.exists()
    assert only_segment.time_index.path.exists()


def test_corrupted_log_recovery_does_not_delete_producer_state_snapshots_post_recovery(env: Env) -> None:
    config = log_config()
    log = env.create_log(config)
    # Create segments: [0-0], [1-1], [2-2], [3-3], [4-4], [5-5], [6-6], [7-7], [8-8], [9-]
    for i in range(9):
        log.append_as_leader(env.records(str(i).encode()), 0)
        log.roll()
    assert log.num_log_segments == 10
    assert log.log_start_offset == 0
    assert log.active_segment.base_offset == 9
    assert log.log_end_offset == 9
    for offset in range(1, 10):
        path = log.producer_state.fetch_snapshot(offset)
        assert path is not None and path.exists()

    # Increment the log start offset to 4.
    new_log_start_offset = 4
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(new_log_start_offset)
    assert log.log_start_offset == 4
    assert log.log_end_offset == 9

    # Append garbage to a segment at baseOffset 1, which is below the current log start offset 4.
    segment_to_force_truncation = log.segments[1]
    assert segment_to_force_truncation.base_offset == 1
    log.close()
    segment_to_force_truncation.log.path.write_bytes(b"corruptRecord")

    # Reopen the log. This will do the following:
    # - Truncate the segment above to which we appended garbage and will schedule async deletion of all other
    #   segments from base offsets 2 to 9.
    # - The remaining segments at base offsets 0 and 1 will be lower than the current logStartOffset 4.
    #   This will cause async deletion of both remaining segments. Finally a single, active segment is created
    #   starting at logStartOffset 4.
    log = env.create_log(config, log_start_offset=new_log_start_offset, last_shutdown_clean=False)
    assert log.num_log_segments == 1
    assert log.log_start_offset == 4
    assert log.active_segment.base_offset == 4
    assert log.log_end_offset == 4
    offsets_with_snapshot_files = [o for o in range(1, 5) if producer_snapshot_file(env.log_dir, o).exists()]
    in_memory = [o for o in range(1, 5) if log.producer_state.fetch_snapshot(o) is not None]
    assert offsets_with_snapshot_files == [], "Found offsets with producer state snapshot files"
    assert in_memory == [], "Found in-memory producer state snapshot files"

    # Append records, roll the segments and check that the producer state snapshots are defined.
    for i in range(5):
        log.append_as_leader(env.records(str(i).encode()), 0)
        log.roll()
    assert log.active_segment.base_offset == 9
    assert log.log_end_offset == 9
    for offset in range(5, 10):
        path = log.producer_state.fetch_snapshot(offset)
        assert path is not None and path.exists()

    # Wait for all async segment deletions scheduled during Log recovery to complete.
    env.time.sleep(config.file_delete_delay_ms)
    assert log.log_start_offset == new_log_start_offset
    assert log.log_end_offset == 9
    missing = [
        o for o in range(5, 10) if (p := log.producer_state.fetch_snapshot(o)) is None or not p.exists()
    ]
    assert missing == [], "Found offsets with missing producer state snapshot files"
    assert not any(p.name.endswith(".deleted") for p in env.log_dir.iterdir())


def test_recover_with_empty_active_segment(env: Env) -> None:
    num_messages, message_size = 100, 100
    config = log_config(
        segment_bytes=7 * message_size, index_interval_bytes=3 * message_size, segment_index_bytes=4096
    )
    log = env.create_log(config)
    rng = random.Random(3)
    for i in range(num_messages):
        log.append_as_leader(
            env.records(rng.randbytes(message_size), timestamp=env.time.milliseconds() + i * 10), 0
        )
    assert log.log_end_offset == num_messages
    log.roll()
    log.flush()
    with pytest.raises(FileNotFoundError):
        log.active_segment.sanity_check(True)
    last_offset = log.log_end_offset
    log.close_handlers()

    log2 = env.create_log(config, recovery_point=last_offset, last_shutdown_clean=False)
    assert log2.recovery_point == last_offset, "Unexpected recovery point"
    assert log2.log_end_offset == num_messages
    assert log2.active_segment.time_index.entries == 0
    # this should not throw because the LogLoader created the empty active log index file during recovery
    log2.active_segment.sanity_check(True)

    for i in range(num_messages):
        log2.append_as_leader(
            env.records(rng.randbytes(message_size), timestamp=env.time.milliseconds() + i * 10), 0
        )
    log2.roll()
    with pytest.raises(FileNotFoundError):
        log2.active_segment.sanity_check(True)
    log2.flush(include_offset=True)
    # this should not throw because we flushed the active segment which created the empty log index file
    log2.active_segment.sanity_check(True)
    last_offset = log2.log_end_offset

    log3 = env.create_log(config, recovery_point=last_offset, last_shutdown_clean=False)
    assert log3.recovery_point == last_offset
    assert log3.log_end_offset == 2 * num_messages
    assert log3.active_segment.time_index.entries == 0
    log3.active_segment.sanity_check(True)
    log3.close()


def test_log_start_offset_when_remote_storage_is_not_enabled(env: Env) -> None:
    """``testLogStartOffsetWhenRemoteStorageIsEnabled(false, 5)``: the loaded log start offset is the first
    segment's base when the checkpoint is behind it."""
    config = log_config()
    log = env.create_log(config)
    for i in range(9):
        log.append_as_leader(env.records(str(i).encode()), 0)
        log.roll()
    log.maybe_increment_high_watermark(9)
    log.maybe_increment_log_start_offset(5, "segment deletion")
    log.delete_old_segments()
    assert log.segments[0].base_offset == 5
    log.close()
    loaded = loader_module.load_log(
        env.log_dir,
        TopicPartition("kafka", 0),
        config,
        scheduler=env.scheduler,
        time=env.time,
        had_clean_shutdown=True,
        log_start_offset_checkpoint=0,
        recovery_point_checkpoint=0,
        leader_epoch_cache=None,
        producer_state=ProducerStateManager("kafka-0", env.log_dir, time=env.time),
    )
    assert loaded.log_start_offset == 5
    loaded.segments.close()


# --- kafkalog's own load rules -----------------------------------------------------------------------------------


def _write_some_segments(env: Env, config: LogConfig, n: int = 60) -> Log:
    log = env.create_log(config)
    for i in range(n):
        log.append_as_leader(env.records(b"value-%d" % i, timestamp=env.time.milliseconds() + i), 0)
    return log


def test_clean_reopen_scans_no_segment(env: Env, calls: Calls, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log written and cleanly closed (with the clean-shutdown marker a LogManager writes) reopens without
    recovering or rebuilding any segment, and without loading any index but the active segment's."""
    config = log_config(segment_bytes=1000, index_interval_bytes=100)
    log = _write_some_segments(env, config)
    segments_before = log.num_log_segments
    assert segments_before > 3
    log.flush(include_offset=True)
    log.close()
    write_clean_shutdown(env.log_dir)
    loaded_indexes: list[str] = []
    real_load = OffsetIndex.load

    def load(self: Any) -> None:
        loaded_indexes.append(self.path.name)
        real_load(self)

    monkeypatch.setattr("kafkalog.storage.index.AbstractIndex.load", load)
    log = Log.open(env.log_dir, config, scheduler=env.scheduler, time=env.time)
    env.logs.append(log)
    assert log.had_clean_shutdown
    assert calls.recovered == [] and calls.rebuilt == []
    active = f"{log.active_segment.base_offset:020d}"
    assert all(name.startswith(active) for name in loaded_indexes), loaded_indexes
    assert log.num_log_segments == segments_before
    assert log.recovery_point == log.log_end_offset == 60


def test_close_then_open_scans_no_segment(env: Env, calls: Calls) -> None:
    """A standalone log (opened without ``last_shutdown_clean``) writes its own clean-shutdown marker on close."""
    config = log_config(segment_bytes=1000, index_interval_bytes=100)
    log = Log.open(env.log_dir, config, scheduler=env.scheduler, time=env.time)
    for i in range(60):
        log.append_as_leader(env.records(b"value-%d" % i, timestamp=env.time.milliseconds() + i), 0)
    log.close()
    assert (env.log_dir / CLEAN_SHUTDOWN_FILE).exists()
    log = Log.open(
        env.log_dir, config, recovery_point=log.recovery_point, scheduler=env.scheduler, time=env.time
    )
    env.logs.append(log)
    assert calls.recovered == []


def test_clean_shutdown_marker_is_deleted_when_read(
    env: Env, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KAFKA-10471: the marker is gone before loading starts, so a crash during the load makes the next load
    unclean even though the marker had been written."""
    config = log_config(segment_bytes=1000)
    log = _write_some_segments(env, config)
    log.close()
    write_clean_shutdown(env.log_dir)
    marker = env.log_dir / CLEAN_SHUTDOWN_FILE
    seen: list[bool] = []
    real_load = loader_module.load_log

    def crashing_load(*args: Any, **kwargs: Any) -> Any:
        seen.append(marker.exists())
        raise KeyboardInterrupt("crash during load")

    monkeypatch.setattr("kafkalog.log.log.load_log", crashing_load)
    with pytest.raises(KeyboardInterrupt):
        Log.open(env.log_dir, config, scheduler=env.scheduler, time=env.time)
    assert seen == [False], "the marker must be deleted before the load starts"
    monkeypatch.setattr("kafkalog.log.log.load_log", real_load)
    log = Log.open(env.log_dir, config, recovery_point=0, scheduler=env.scheduler, time=env.time)
    env.logs.append(log)
    assert not log.had_clean_shutdown
    assert calls.recovered, "a load after a crash during loading must recover"


def test_delete_directory_loads_without_recovery(env: Env, calls: Calls, work_dir: Path) -> None:
    """A ``-delete`` directory (asynchronously being deleted) is loaded as it is: no recovery, even of a corrupt
    tail, and an empty one gets a segment at 0."""
    config = log_config(segment_bytes=1000)
    log = _write_some_segments(env, config)
    log.close()
    last = log.segments[-1].log.path
    append_bytes(last, b"\x00" * 100)
    size = last.stat().st_size
    delete_dir = work_dir / f"kafka-0.{uuid.uuid4().hex}-delete"
    os.replace(env.log_dir, delete_dir)
    log = env.create_log(config, last_shutdown_clean=False, directory=delete_dir)
    assert calls.recovered == []
    assert (delete_dir / last.name).stat().st_size == size, "the zero tail must not have been truncated"
    assert (log.recovery_point, log.log_end_offset) == (0, 0)
    log.close()
    empty = work_dir / f"other-0.{uuid.uuid4().hex}-delete"
    log = env.create_log(config, last_shutdown_clean=False, directory=empty)
    assert [s.base_offset for s in log.segments] == [0]
    assert calls.recovered == []


def test_completed_load_log_line(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    config = log_config(segment_bytes=1000)
    log = _write_some_segments(env, config)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(3)
    log.close()
    caplog.set_level(logging.INFO, logger="kafkalog.log")
    log = env.create_log(config, log_start_offset=3, last_shutdown_clean=False)
    lines = [r.getMessage() for r in caplog.records if "Completed load of log" in r.getMessage()]
    assert len(lines) == 1
    match = re.fullmatch(
        r"\[Log partition=kafka-0, dir=(.+)\] Completed load of log with (\d+) segments, log start offset (\d+) and "
        r"log end offset (\d+) in (\d+) ms",
        lines[0],
    )
    assert match is not None, lines[0]
    assert match.group(1) == str(env.log_dir.parent)
    assert int(match.group(2)) == log.num_log_segments
    assert (int(match.group(3)), int(match.group(4))) == (3, 60)


def test_split_refuses_a_segment_without_overflow(env: Env) -> None:
    """Kafka's ``splitOverflowedSegment`` requires ``segment.hasOverflow()`` (IllegalArgumentException)."""
    log = _write_some_segments(env, log_config(segment_bytes=1000))
    for segment in log.segments:
        with pytest.raises(ValueError, match="overflow"):
            log.split_overflowed_segment(segment)


def test_an_emptied_time_index_of_a_clean_segment_still_gives_its_largest_timestamp(tmp_path: Path) -> None:
    """A well-formed but empty ``.timeindex`` beside a non-empty ``.log`` (cut by a crash after a clean
    marker, or records without timestamps) passes the structure check; the segment's largest timestamp is
    then read from its batches instead of reading -1 (retention by time and ListOffsets -3 depend on it)."""
    directory = tmp_path / "emptied-0"
    clock = MockTime(1_700_000_000_000)
    config = LogConfig.from_props({"segment.bytes": 1024})
    log = Log.open(directory, config, time=clock, scheduler=MockScheduler(clock))
    for i in range(40):
        log.append([SimpleRecord(b"v" * 50, None, 1_700_000_000_000 + i * 10)])
    expected = [(s.base_offset, s.max_timestamp_so_far) for s in log.segments[:-1]]
    log.close()
    assert len(expected) > 2
    for base, _ in expected:
        with open(time_index_file(directory, base), "r+b") as f:
            f.truncate(0)
    log = Log.open(directory, config, time=clock, scheduler=MockScheduler(clock))
    try:
        got = [(s.base_offset, s.max_timestamp_so_far) for s in log.segments[:-1]]
        assert got == expected
        assert log.fetch_offset_by_timestamp(-3) is not None
        assert log.fetch_offset_by_timestamp(-3).timestamp == 1_700_000_000_390  # type: ignore[union-attr]
    finally:
        log.close()


def _flip_base_offset(directory: Path, batch: int, byte: int, mask: int) -> tuple[Path, bytes]:
    """Three one-record batches after an unclean shutdown, with one byte of batch ``batch``'s base offset
    flipped (the base offset is outside the CRC); returns the segment and its damaged bytes."""
    with Log.open(directory, LogConfig.from_props({})) as log:
        for i in range(3):
            log.append([SimpleRecord(b"v%d" % i, key=b"k")])
    (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    segment = directory / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    position = 0
    for _ in range(batch):
        position += 12 + int.from_bytes(data[position + 8 : position + 12], "big")
    data[position + byte] ^= mask
    segment.write_bytes(bytes(data))
    return segment, bytes(data)


@pytest.mark.parametrize("batch", [0, 1])  # a last batch moved up by 2**32 is split off, as Kafka does
def test_damaged_base_offset_past_the_int32_range_is_a_typed_load_failure(tmp_path: Path, batch: int) -> None:
    """Not a port. One flipped bit raises a batch's base offset by 2**32: its offsets leave the segment's int32
    range, which looks like a legacy overflow, but the segment does not overflow, so there is nothing to split.
    Kafka fails its ``require(hasOverflow)`` (IllegalArgumentException); kafkalog raised a bare ``ValueError``;
    now ``KafkaStorageError``, and nothing changes on disk (``kafkalog recover`` removes that one batch)."""
    directory = tmp_path / "t-0"
    segment, data = _flip_base_offset(directory, batch, 3, 0x01)  # base offset + 2**32
    with pytest.raises(KafkaStorageError, match="does not overflow") as excinfo:
        Log.open(directory, LogConfig.from_props({}))
    assert isinstance(excinfo.value.__cause__, LogSegmentOffsetOverflowError)
    assert segment.read_bytes() == data


@pytest.mark.parametrize("batch", [0, 1, 2])
def test_damaged_base_offset_below_the_segment_is_truncated(tmp_path: Path, batch: int) -> None:
    """Not a port. One flipped sign bit makes a batch's base offset ``-2**63 + n``, below the segment's base
    offset: crash recovery treats it as it treats offsets that go backwards (damage outside the CRC) and
    truncates the segment at that batch; it raised a bare ``ValueError`` before."""
    directory = tmp_path / "t-0"
    _flip_base_offset(directory, batch, 0, 0x80)
    with Log.open(directory, LogConfig.from_props({})) as log:
        assert log.log_end_offset == batch
    assert_valid_partition_dir(directory)


# --- kafkalog: damaged base offsets and lastOffsetDelta (issue #19) -----------------------------------------


def _forge(
    path: Path, position: int, *, base: int | None = None, last_offset_delta: int | None = None
) -> None:
    """Rewrite the header of the batch at ``position`` (recomputing its CRC when a CRC-covered field changes)."""
    import struct

    from crc32c import crc32c

    data = bytearray(path.read_bytes())
    if base is not None:
        struct.pack_into(">q", data, position, base)  # outside the CRC
    if last_offset_delta is not None:
        size = struct.unpack_from(">i", data, position + 8)[0] + 12
        struct.pack_into(">i", data, position + 23, last_offset_delta)
        struct.pack_into(">I", data, position + 17, crc32c(bytes(data[position + 21 : position + size])))
    path.write_bytes(bytes(data))


def _three_batches(directory: Path, config: dict[str, Any] | None = None) -> tuple[Path, int]:
    """Three batches of 10 records in one segment; returns the ``.log`` and the batch size."""
    with Log.open(directory, config or {}) as log:
        for b in range(3):
            log.append([SimpleRecord(b"v%d" % i, b"k%02d" % (b * 10 + i)) for i in range(10)])
    seg = directory / "00000000000000000000.log"
    return seg, seg.stat().st_size // 3


def test_a_batch_with_more_records_than_its_offset_range_is_kept_as_kafka_keeps_it(tmp_path: Path) -> None:
    """Not a port. A CRC-valid batch whose ``lastOffsetDelta`` is below its record count: Kafka's
    ``LogSegment.recover`` checks CRC and size only (the count is read when records are iterated), so it keeps
    the batch, and so does kafkalog's crash recovery (recovery never truncates what Kafka's keeps: issue #21).
    ``kafkalog recover`` is the operator's repair that removes it (tests/cli/test_recover_repairs.py)."""
    seg, size = _three_batches(tmp_path / "t-0")
    _forge(seg, 2 * size, last_offset_delta=3)  # CRC recomputed: only the count tells
    with Log.open(tmp_path / "t-0", last_shutdown_clean=False) as log:
        assert log.log_end_offset == 24
    assert seg.stat().st_size == 3 * size


def test_a_batch_whose_last_offset_is_below_its_first_is_damage(tmp_path: Path) -> None:
    """Not a port. ``lastOffsetDelta`` -1 (CRC recomputed): the batch's offsets run backwards, which crash
    recovery treats as damage outside the CRC and truncates."""
    seg, size = _three_batches(tmp_path / "t-0")
    _forge(seg, 2 * size, last_offset_delta=-1)
    with Log.open(tmp_path / "t-0", last_shutdown_clean=False) as log:
        assert log.log_end_offset == 20
    assert seg.stat().st_size == 2 * size


@pytest.mark.parametrize("policy", ["compact", "delete"])
def test_a_batch_with_fewer_records_than_its_offset_range_is_kept(tmp_path: Path, policy: str) -> None:
    """The cleaner keeps a batch's last offset when it removes records, and a topic's policy can change (or be
    unknown, in a Kafka data dir): crash recovery keeps such a batch whatever the config says (``kafkalog
    recover`` is stricter where ``kafkalog-topics.json`` knows the topic is not compacted)."""
    seg, size = _three_batches(tmp_path / "t-0", {"cleanup.policy": policy})
    _forge(seg, 2 * size, last_offset_delta=14)
    with Log.open(tmp_path / "t-0", {"cleanup.policy": policy}, last_shutdown_clean=False) as log:
        assert log.log_end_offset == 35
    assert seg.stat().st_size == 3 * size


@pytest.mark.parametrize("base", [-7, 5], ids=["negative", "backwards"])
def test_a_base_offset_below_the_segment_or_going_backwards_is_truncated(tmp_path: Path, base: int) -> None:
    directory = tmp_path / "t-0"
    with Log.open(directory, {"segment.bytes": 700}) as log:
        for _ in range(6):
            log.append([SimpleRecord(b"v%d" % i, b"k%d" % i) for i in range(10)])
    second = sorted(directory.glob("*.log"))[1]
    size = second.stat().st_size // 2
    _forge(second, size, base=base)  # outside the CRC: once a failed "split" of the whole partition
    with Log.open(directory, {"segment.bytes": 700}, last_shutdown_clean=False) as log:
        assert log.log_end_offset == int(second.name[:20]) + 10
    assert_valid_partition_dir(directory)


# --- kafkalog: load progress (issue #23: `kafkalog recover` draws a bar from it) -----------------------------


def _segments_of_five(directory: Path) -> list[int]:
    """Five segments of one 10-record batch each; returns each ``.log``'s size."""
    with Log.open(directory, {"segment.bytes": 400}) as log:
        for b in range(5):
            log.append([SimpleRecord(b"v" * 20, b"k%02d" % (b * 10 + i)) for i in range(10)])
    sizes = [p.stat().st_size for p in sorted(directory.glob("*.log"))]
    assert len(sizes) == 5
    return sizes


@pytest.mark.parametrize(
    ("recovery_point", "clean"), [(0, False), (30, False), (0, True)], ids=["all", "from-30", "clean"]
)
def test_load_progress_reports_every_log_byte(tmp_path: Path, recovery_point: int, clean: bool) -> None:
    """Each segment the loader scans is reported (its size) once scanned, the rest in one call at the end:
    the calls add up to the ``.log`` bytes, whatever is scanned."""
    directory = tmp_path / "t-0"
    sizes = _segments_of_five(directory)
    calls: list[int] = []
    with Log.open(
        directory,
        {"segment.bytes": 400},
        recovery_point=recovery_point,
        last_shutdown_clean=clean,
        load_progress=calls.append,
    ) as log:
        assert log.log_end_offset == 50
    assert sum(calls) == sum(sizes)
    if clean:
        assert calls == [sum(sizes)]  # nothing scanned: one call
    else:
        # one call per scanned segment, in order, then one for the segments below the recovery point (if any)
        first = recovery_point // 10
        assert calls == sizes[first:] + ([sum(sizes[:first])] if first else [])


def test_load_progress_counts_the_segments_a_truncation_deletes(tmp_path: Path) -> None:
    """A torn batch in the second segment truncates it and deletes the later segments: their bytes are
    reported at the end, so the total still matches what was found."""
    directory = tmp_path / "t-0"
    sizes = _segments_of_five(directory)
    second = sorted(directory.glob("*.log"))[1]
    with second.open("r+b") as f:
        f.truncate(sizes[1] - 5)
    sizes[1] -= 5
    calls: list[int] = []
    with Log.open(
        directory, {"segment.bytes": 400}, last_shutdown_clean=False, load_progress=calls.append
    ) as log:
        assert log.log_end_offset == 10
    assert calls[:2] == sizes[:2]
    assert sum(calls) == sum(sizes)
