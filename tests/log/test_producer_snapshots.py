"""Kafka's ``ProducerStateManagerTest`` scenarios about late transactions, snapshots, truncation, expiration and
corrupt snapshots (the sequence, epoch, fencing and transaction scenarios are in ``test_producer_state_manager.py``).

Ported from ``storage/src/test/java/org/apache/kafka/storage/internals/log/ProducerStateManagerTest.java``
(apache/kafka 1eb7644), same numbers: testHasLateTransaction, testHasLateTransactionInitializedAfterReload,
testHasLateTransactionUpdatedAfterPartialTruncation, testHasLateTransactionUpdatedAfterFullTruncation,
testTruncateAndReloadRemovesOutOfRangeSnapshots, testTakeSnapshot, testFetchSnapshotEmptySnapShot,
testRecoverFromSnapshotUnfinishedTransaction, testRecoverFromSnapshotFinishedTransaction,
testRecoverFromSnapshotEmptyTransaction, testDeleteSnapshotsBefore, testTruncateFullyAndStartAt, testReloadSnapshots,
testLoadFromSnapshotRetainsNonExpiredProducers, testSkipSnapshotIfOffsetUnchanged,
testRemoveStraySnapshotsKeepCleanShutdownSnapshot, testRemoveAllStraySnapshots,
testRemoveAndMarkSnapshotForDeletionAlreadyDeleted (as ``delete_snapshot``), testReadWriteSnapshot,
testRemoveExpiredPidsOnReload, testAcceptAppendWithoutProducerStateOnReplica, testPidExpirationTimeout,
testProducersWithOngoingTransactionsDontExpire, testLoadFrom{Empty,Truncated,Corrupt}SnapshotFile.

Not from Kafka's file: snapshots outside ``(log start, log end]`` are deleted from disk too, the exact
``producer.id.expiration.ms`` boundary (in memory and when a snapshot is loaded), a snapshot with a bad version /
CRC / trailing bytes, every snapshot corrupt.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
    write_snapshot,
)
from kafkalog.records import ControlRecordType
from kafkalog.storage.files import producer_snapshot_file
from kafkalog.time import MockTime

from .test_producer_state_manager import (
    DEFAULT_SEQUENCE,
    EPOCH,
    LATE_TRANSACTION_TIMEOUT_MS,
    NO_TIMESTAMP,
    PRODUCER_ID,
    PRODUCER_ID_EXPIRATION_MS,
    append_client_entry,
    append_end_txn_marker,
    append_replication_entry,
    first_unstable,
    last_entry,
    log_dir,
    new_manager,
    snapshot_offsets,
    state_manager,
)

__all__ = ["log_dir", "state_manager"]  # fixtures shared with test_producer_state_manager.py


# --- late transactions -----------------------------------------------------------------------------------------


def test_has_late_transaction(state_manager: ProducerStateManager, mock_time: MockTime) -> None:
    pid1, epoch1, pid2, epoch2 = 39, 2, 57, 9
    append_client_entry(state_manager, pid1, epoch1, DEFAULT_SEQUENCE, 100, mock_time.milliseconds(), True)
    assert not state_manager.has_late_transaction(mock_time.milliseconds())

    mock_time.sleep(500)
    append_client_entry(state_manager, pid2, epoch2, DEFAULT_SEQUENCE, 150, mock_time.milliseconds(), True)
    assert not state_manager.has_late_transaction(mock_time.milliseconds())

    # Only the first transaction is late.
    mock_time.sleep(LATE_TRANSACTION_TIMEOUT_MS - 500 + 1)
    assert state_manager.has_late_transaction(mock_time.milliseconds())
    # Both are late.
    mock_time.sleep(500)
    assert state_manager.has_late_transaction(mock_time.milliseconds())

    append_end_txn_marker(
        state_manager, pid1, epoch1, ControlRecordType.COMMIT, 200, mock_time.milliseconds()
    )
    assert state_manager.has_late_transaction(mock_time.milliseconds())
    append_end_txn_marker(
        state_manager, pid2, epoch2, ControlRecordType.COMMIT, 250, mock_time.milliseconds()
    )
    assert not state_manager.has_late_transaction(mock_time.milliseconds())


def test_has_late_transaction_initialized_after_reload(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    pid1, epoch1, pid2, epoch2 = 39, 2, 57, 9
    append_client_entry(state_manager, pid1, epoch1, DEFAULT_SEQUENCE, 100, mock_time.milliseconds(), True)
    mock_time.sleep(500)
    append_client_entry(state_manager, pid2, epoch2, DEFAULT_SEQUENCE, 150, mock_time.milliseconds(), True)
    assert not state_manager.has_late_transaction(mock_time.milliseconds())

    state_manager.take_snapshot()
    mock_time.sleep(LATE_TRANSACTION_TIMEOUT_MS - 500 + 1)
    assert state_manager.has_late_transaction(mock_time.milliseconds())

    reloaded = new_manager(log_dir, mock_time)
    reloaded.truncate_and_reload(0, state_manager.map_end_offset, mock_time.milliseconds())
    assert reloaded.has_late_transaction(mock_time.milliseconds())


def test_has_late_transaction_updated_after_partial_truncation(
    state_manager: ProducerStateManager, mock_time: MockTime
) -> None:
    append_client_entry(state_manager, 39, 2, DEFAULT_SEQUENCE, 100, mock_time.milliseconds(), True)
    assert not state_manager.has_late_transaction(mock_time.milliseconds())
    mock_time.sleep(LATE_TRANSACTION_TIMEOUT_MS + 1)
    assert state_manager.has_late_transaction(mock_time.milliseconds())
    state_manager.truncate_and_reload(0, 80, mock_time.milliseconds())
    assert not state_manager.has_late_transaction(mock_time.milliseconds())


def test_has_late_transaction_updated_after_full_truncation(
    state_manager: ProducerStateManager, mock_time: MockTime
) -> None:
    append_client_entry(state_manager, 39, 2, DEFAULT_SEQUENCE, 100, mock_time.milliseconds(), True)
    mock_time.sleep(LATE_TRANSACTION_TIMEOUT_MS + 1)
    assert state_manager.has_late_transaction(mock_time.milliseconds())
    state_manager.truncate_fully_and_start_at(150)
    assert not state_manager.has_late_transaction(mock_time.milliseconds())


# --- snapshots ---------------------------------------------------------------------------------------------------


def test_truncate_and_reload_removes_out_of_range_snapshots(
    state_manager: ProducerStateManager, mock_time: MockTime
) -> None:
    for seq in range(5):
        append_client_entry(state_manager, PRODUCER_ID, EPOCH, seq, seq, mock_time.milliseconds())
        state_manager.take_snapshot()
    assert state_manager.snapshot_offsets() == [1, 2, 3, 4, 5]
    state_manager.truncate_and_reload(1, 3, mock_time.milliseconds())
    assert state_manager.oldest_snapshot_offset() == 2
    assert state_manager.latest_snapshot_offset() == 3


def test_truncate_and_reload_keeps_snapshots_in_range_on_disk(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    """Snapshots at or below the log start offset and above the log end offset go, from disk too."""
    for seq in range(5):
        append_client_entry(state_manager, PRODUCER_ID, EPOCH, seq, seq, mock_time.milliseconds())
        state_manager.take_snapshot()
    state_manager.truncate_and_reload(2, 4, mock_time.milliseconds())
    assert snapshot_offsets(log_dir) == {3, 4}
    entry = last_entry(state_manager, PRODUCER_ID)
    assert (entry.last_seq, entry.last_data_offset) == (3, 3)
    assert state_manager.map_end_offset == 4


def test_take_snapshot(state_manager: ProducerStateManager, log_dir: Path) -> None:
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, 0)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, 1)
    state_manager.take_snapshot()
    files = list(log_dir.iterdir())
    assert len(files) == 1, "directory doesn't contain a single file as expected"
    assert files[0].stat().st_size > 0, "snapshot file is empty"


def test_fetch_snapshot_empty_snapshot(state_manager: ProducerStateManager) -> None:
    assert state_manager.fetch_snapshot(1) is None


def test_recover_from_snapshot_unfinished_transaction(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 0, 0, now, True)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now, True)
    state_manager.take_snapshot()

    recovered = new_manager(log_dir, mock_time)
    recovered.truncate_and_reload(0, 3, now)
    # The snapshot only persists the last batch.
    entry = last_entry(recovered, PRODUCER_ID)
    assert (entry.first_data_offset, entry.first_seq, entry.last_data_offset, entry.last_seq) == (1, 1, 1, 1)
    assert entry.current_txn_first_offset == 0
    assert first_unstable(recovered) == 0
    # An append continues the transaction after recovery.
    append_client_entry(recovered, PRODUCER_ID, EPOCH, 2, 2, now, True)


def test_recover_from_snapshot_finished_transaction(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 0, 0, now, True)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now, True)
    append_end_txn_marker(state_manager, PRODUCER_ID, EPOCH, ControlRecordType.ABORT, 2, now)
    state_manager.take_snapshot()

    recovered = new_manager(log_dir, mock_time)
    recovered.truncate_and_reload(0, 3, now)
    entry = last_entry(recovered, PRODUCER_ID)
    assert (entry.first_data_offset, entry.first_seq, entry.last_data_offset, entry.last_seq) == (1, 1, 1, 1)
    assert entry.current_txn_first_offset is None
    assert recovered.first_unstable_offset() is None


def test_recover_from_snapshot_empty_transaction(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    append_timestamp = mock_time.milliseconds()
    append_end_txn_marker(state_manager, PRODUCER_ID, EPOCH, ControlRecordType.ABORT, 0, append_timestamp)
    state_manager.take_snapshot()

    recovered = new_manager(log_dir, mock_time)
    recovered.truncate_and_reload(0, 1, mock_time.milliseconds())
    entry = last_entry(recovered, PRODUCER_ID)
    assert entry.last_timestamp == append_timestamp
    assert entry.current_txn_first_offset is None


def test_delete_snapshots_before(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, now)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {2}

    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 2, 2, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {2, 3}

    state_manager.delete_snapshots_before(3)
    assert snapshot_offsets(log_dir) == {3}
    state_manager.delete_snapshots_before(4)
    assert snapshot_offsets(log_dir) == set()


def test_truncate_fully_and_start_at(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, now)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {2}
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 2, 2, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {2, 3}

    state_manager.truncate_fully_and_start_at(0)
    assert snapshot_offsets(log_dir) == set()
    assert state_manager.active_producers() == {}

    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 0, 0, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {1}


def test_reload_snapshots(state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 2, 2, now)
    state_manager.take_snapshot()
    saved = {p: p.read_bytes() for p in log_dir.iterdir()}

    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 3, 3, now)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 4, 4, now)
    state_manager.take_snapshot()
    assert snapshot_offsets(log_dir) == {3, 5}

    # Truncate to the range (3, 5]: the snapshot at 3 goes.
    state_manager.truncate_and_reload(3, 5, now)
    assert snapshot_offsets(log_dir) == {5}

    # Put the old snapshot back and rescan the directory.
    for path, data in saved.items():
        path.write_bytes(data)
    state_manager.truncate_fully_and_reload_snapshots()
    assert state_manager.latest_snapshot_offset() == 5
    assert snapshot_offsets(log_dir) == {3, 5}
    # Kafka's reload sees only 3 because its test deleted 5 with an asynchronous rename; here both files exist.
    assert state_manager.snapshot_offsets() == [3, 5]


def test_load_from_snapshot_retains_non_expired_producers(
    state_manager: ProducerStateManager, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    pid1, pid2 = 1, 2
    append_client_entry(state_manager, pid1, EPOCH, DEFAULT_SEQUENCE, 0, now)
    append_client_entry(state_manager, pid2, EPOCH, DEFAULT_SEQUENCE, 1, now)
    state_manager.take_snapshot()
    assert len(state_manager.active_producers()) == 2

    state_manager.truncate_and_reload(1, 2, now)
    assert len(state_manager.active_producers()) == 2
    entry1 = last_entry(state_manager, pid1)
    assert (entry1.last_seq, entry1.last_data_offset) == (0, 0)
    entry2 = last_entry(state_manager, pid2)
    assert (entry2.last_seq, entry2.last_data_offset) == (0, 1)


def test_skip_snapshot_if_offset_unchanged(state_manager: ProducerStateManager, log_dir: Path) -> None:
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, 0)
    assert state_manager.take_snapshot() is not None
    assert snapshot_offsets(log_dir) == {1}
    # Nothing changed: no new snapshot.
    assert state_manager.take_snapshot() is None
    assert snapshot_offsets(log_dir) == {1}


def test_remove_stray_snapshots_keep_clean_shutdown_snapshot(
    state_manager: ProducerStateManager, log_dir: Path
) -> None:
    for offset in (5, 2, 42):
        producer_snapshot_file(log_dir, offset).touch()
    # One segment at 5: the snapshot at 2 is a stray, 42 (past every segment base) is the clean-shutdown one.
    state_manager.remove_stray_snapshots([5])
    assert state_manager.latest_snapshot_offset() == 42
    assert state_manager.oldest_snapshot_offset() == 5
    assert sorted(snapshot_offsets(log_dir)) == [5, 42]


def test_remove_all_stray_snapshots(state_manager: ProducerStateManager, log_dir: Path) -> None:
    for offset in (5, 2, 42):
        producer_snapshot_file(log_dir, offset).touch()
    state_manager.remove_stray_snapshots([42])
    assert sorted(snapshot_offsets(log_dir)) == [42]
    assert state_manager.snapshot_offsets() == [42]


def test_delete_snapshot_already_deleted(log_dir: Path, mock_time: MockTime) -> None:
    """testRemoveAndMarkSnapshotForDeletionAlreadyDeleted: a file deleted behind the manager's back."""
    path = producer_snapshot_file(log_dir, 5)
    path.touch()
    manager = new_manager(log_dir, mock_time)
    assert manager.latest_snapshot_offset() == 5
    path.unlink()
    manager.delete_snapshot(5)
    assert manager.latest_snapshot_offset() is None


def test_read_write_snapshot(log_dir: Path) -> None:
    expected = [
        ProducerStateEntry(1, 2, 3, NO_TIMESTAMP, 100),
        ProducerStateEntry(11, 12, 13, 123456, None),
    ]
    expected[0].batches.append(BatchMetadata(1, 2, 3, NO_TIMESTAMP))
    path = log_dir / "testReadWriteSnapshot"
    write_snapshot(path, expected, True)
    actual = {e.producer_id: e for e in read_snapshot(path)}
    assert set(actual) == {1, 11}
    for want in expected:
        got = actual[want.producer_id]
        assert (
            got.producer_epoch,
            got.coordinator_epoch,
            got.last_timestamp,
            got.current_txn_first_offset,
        ) == (
            want.producer_epoch,
            want.coordinator_epoch,
            want.last_timestamp,
            want.current_txn_first_offset,
        )
        assert list(got.batches) == list(want.batches)


# --- expiration --------------------------------------------------------------------------------------------------


def test_remove_expired_pids_on_reload(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, 0)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, 1)
    state_manager.take_snapshot()

    recovered = new_manager(log_dir, mock_time)
    recovered.truncate_and_reload(0, 1, 70000)
    # The producer is gone after recovery, so any sequence is accepted and the producer is back.
    append_client_entry(recovered, PRODUCER_ID, EPOCH, 2, 2, 70001)
    assert len(recovered.active_producers()) == 1
    assert next(iter(recovered.active_producers().values())).last_seq == 2
    assert recovered.map_end_offset == 3


def test_accept_append_without_producer_state_on_replica(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 0, 0)
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, 1)
    state_manager.take_snapshot()

    recovered = new_manager(log_dir, mock_time)
    recovered.truncate_and_reload(0, 1, 70000)
    sequence = 2
    assert PRODUCER_ID not in recovered.active_producers()
    append_replication_entry(recovered, EPOCH, sequence, 2, 70001)
    entry = recovered.active_producers()[PRODUCER_ID]
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (EPOCH, sequence, sequence)


def test_expired_producers_dropped_when_a_snapshot_is_loaded(
    state_manager: ProducerStateManager, log_dir: Path
) -> None:
    """``producer.id.expiration.ms`` applies to a loaded snapshot: >= the limit is expired, one ms less is not."""
    append_client_entry(state_manager, 1, EPOCH, 0, 0, 1999)
    append_client_entry(state_manager, 2, EPOCH, 0, 1, 2000)
    state_manager.take_snapshot()
    now = 2000 + PRODUCER_ID_EXPIRATION_MS - 1

    recovered = new_manager(log_dir, MockTime(now))
    recovered.truncate_and_reload(0, 2, now)
    assert set(recovered.active_producers()) == {2}  # 1 idled exactly the expiration time


def test_pid_expiration_timeout(state_manager: ProducerStateManager, mock_time: MockTime) -> None:
    epoch = 5
    append_client_entry(state_manager, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 1, mock_time.milliseconds())
    mock_time.sleep(PRODUCER_ID_EXPIRATION_MS + 1)
    assert state_manager.remove_expired_producers(mock_time.milliseconds()) == 1
    append_client_entry(state_manager, PRODUCER_ID, epoch, DEFAULT_SEQUENCE + 1, 2, mock_time.milliseconds())
    assert len(state_manager.active_producers()) == 1
    assert next(iter(state_manager.active_producers().values())).last_seq == DEFAULT_SEQUENCE + 1
    assert state_manager.map_end_offset == 3


def test_expiration_boundary(state_manager: ProducerStateManager, mock_time: MockTime) -> None:
    start = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, DEFAULT_SEQUENCE, 1, start)
    assert state_manager.remove_expired_producers(start + PRODUCER_ID_EXPIRATION_MS - 1) == 0
    assert state_manager.remove_expired_producers(start + PRODUCER_ID_EXPIRATION_MS) == 1
    assert state_manager.last_entry(PRODUCER_ID) is None


def test_producers_with_ongoing_transactions_dont_expire(
    state_manager: ProducerStateManager, mock_time: MockTime
) -> None:
    epoch = 5
    append_client_entry(
        state_manager, PRODUCER_ID, epoch, DEFAULT_SEQUENCE, 99, mock_time.milliseconds(), True
    )
    assert state_manager.first_undecided_offset() == 99
    mock_time.sleep(PRODUCER_ID_EXPIRATION_MS + 1)
    state_manager.remove_expired_producers(mock_time.milliseconds())
    assert state_manager.last_entry(PRODUCER_ID) is not None
    assert state_manager.first_undecided_offset() == 99
    state_manager.remove_expired_producers(mock_time.milliseconds())
    assert state_manager.last_entry(PRODUCER_ID) is not None


# --- corrupt snapshots -------------------------------------------------------------------------------------------


def _load_after_damaging_latest(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime, damage: str
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 0, 0, now)
    state_manager.take_snapshot()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 1, now)
    state_manager.take_snapshot()

    latest = state_manager.latest_snapshot_offset()
    assert latest == 2
    path = producer_snapshot_file(log_dir, latest)
    data = bytearray(path.read_bytes())
    if damage == "empty":
        data = bytearray()
    elif damage == "truncated":
        assert len(data) > 2
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data[0:37] = bytes(37)  # Kafka writes 37 zero bytes at the start of the file
    elif damage == "version":
        data[0:2] = (2).to_bytes(2, "big")
    elif damage == "crc":
        data[-1] ^= 0xFF
    elif damage == "trailing":
        data += b"\x00"
    path.write_bytes(bytes(data))

    # The damaged snapshot is deleted and the previous one is used.
    reloaded = new_manager(log_dir, mock_time)
    reloaded.truncate_and_reload(0, 20, now)
    assert not path.exists()
    assert reloaded.active_producers()[PRODUCER_ID].last_data_offset == 0
    assert reloaded.map_end_offset == 1


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage", "version", "crc", "trailing"])
def test_load_from_corrupt_snapshot(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime, damage: str
) -> None:
    """testLoadFromEmptySnapshotFile / testLoadFromTruncatedSnapshotFile / testLoadFromCorruptSnapshotFile (+ more)."""
    _load_after_damaging_latest(state_manager, log_dir, mock_time, damage)


def test_every_snapshot_corrupt_starts_at_log_start(
    state_manager: ProducerStateManager, log_dir: Path, mock_time: MockTime
) -> None:
    now = mock_time.milliseconds()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 0, 3, now)
    state_manager.take_snapshot()
    append_client_entry(state_manager, PRODUCER_ID, EPOCH, 1, 4, now)
    state_manager.take_snapshot()
    for path in log_dir.iterdir():
        path.write_bytes(b"\x00\x01")
    reloaded = new_manager(log_dir, mock_time)
    reloaded.truncate_and_reload(2, 20, now)
    assert list(log_dir.iterdir()) == []
    assert reloaded.active_producers() == {}
    assert reloaded.map_end_offset == 2
