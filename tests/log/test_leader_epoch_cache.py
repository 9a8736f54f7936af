"""Kafka's ``LeaderEpochFileCacheTest`` scenarios, same numbers, against :class:`LeaderEpochFileCache`.

Ported from ``core/src/test/scala/unit/kafka/server/epoch/LeaderEpochFileCacheTest.scala`` (apache/kafka
1eb7644), every test: testPreviousEpoch, shouldAddEpochAndMessageOffsetToCache,
shouldReturnLogEndOffsetIfLatestEpochRequested, shouldReturnUndefinedOffsetIfUndefinedEpochRequested,
shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned, shouldEnforceMonotonicallyIncreasingStartOffsets,
shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned, shouldReturnUnsupportedIfNoEpochRecorded,
shouldReturnUnsupportedIfNoEpochRecordedAndUndefinedEpochRequested, shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch,
shouldTruncateIfMatchingEpochButEarlierStartingOffset, shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch,
shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested, shouldNotUpdateEpochAndStartOffsetIfItDidNotChange,
shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked, shouldSupportEpochsThatDoNotStartFromZero,
shouldPersistEpochsBetweenInstances, shouldEnforceMonotonicallyIncreasingEpochs, shouldEnforceOffsetsIncreaseMonotonically,
shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes, shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages,
shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries, shouldPreserveResetOffsetOnClearEarliestIfOneExists,
shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs, shouldNotClearAnythingIfOffsetToEarly,
shouldNotClearAnythingIfOffsetToFirstOffset, shouldRetainLatestEpochOnClearAllEarliest,
shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest(2), shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset,
shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest, shouldClearAllEntries,
shouldNotResetEpochHistoryHeadIfUndefinedPassed, shouldNotResetEpochHistoryTailIfUndefinedPassed,
shouldFetchLatestEpochOfEmptyCache, shouldFetchEndOffsetOfEmptyCache, shouldClearEarliestOnEmptyCache,
shouldClearLatestOnEmptyCache, testFindPreviousEpoch, testFindPreviousEntry, testFindNextEpoch, testGetEpochEntry,
shouldFetchEpochForGivenOffset, shouldWriteCheckpointOnTruncation.

Also ``LeaderEpochCheckpointFileWithFailureHandlerTest`` (shouldPersistAndOverwriteAndReloadFile,
shouldRetainValuesEvenIfCheckpointIsRecreated), ``RemoteLogManagerTest.testGetLeaderEpochCheckpoint``'s
``epochEntriesInRange`` numbers, and (not from Kafka) the checkpoint's atomic write: a crash before the rename
leaves the old file, a stale ``.tmp`` is ignored, invalid assignments are rejected and change nothing.

Kafka flushes truncations asynchronously; kafkalog writes every change synchronously (see the module doc), so
"the file after truncation" is checked right away.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.log.checkpoint import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    CheckpointError,
    CheckpointFile,
    EpochEntry,
    leader_epoch_checkpoint,
)
from kafkalog.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def checkpoint(tmp_path: Path) -> CheckpointFile[EpochEntry]:
    return leader_epoch_checkpoint(tmp_path)


@pytest.fixture
def cache(checkpoint: CheckpointFile[EpochEntry]) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(checkpoint, "[LeaderEpochCache TestTopic-5] ")


def entries(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(e, o) for e, o in pairs]


def test_previous_epoch(cache: LeaderEpochFileCache) -> None:
    assert cache.previous_epoch() is None
    cache.assign(2, 10)
    assert cache.previous_epoch() is None
    cache.assign(4, 15)
    assert cache.previous_epoch() == 2
    cache.assign(10, 20)
    assert cache.previous_epoch() == 4
    cache.truncate_from_end(18)
    assert cache.previous_epoch() == 2


def test_should_add_epoch_and_message_offset_to_cache(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 10)
    log_end_offset = 11
    assert cache.latest_epoch == 2
    assert cache.epoch_entries[0] == EpochEntry(2, 10)
    assert cache.end_offset_for(2, log_end_offset) == (2, log_end_offset)


def test_should_return_log_end_offset_if_latest_epoch_requested(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 11)
    cache.assign(2, 12)
    log_end_offset = 14
    assert cache.end_offset_for(2, log_end_offset) == (2, log_end_offset)


def test_should_return_undefined_offset_if_undefined_epoch_requested(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 11)
    cache.assign(3, 12)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED


def test_should_not_overwrite_log_end_offset_once_assigned(cache: LeaderEpochFileCache) -> None:
    log_end_offset = 9
    cache.assign(2, log_end_offset)
    cache.assign(2, 10)
    assert cache.epoch_entries[0].start_offset == log_end_offset
    assert cache.epoch_entries == entries((2, 9))


def test_should_enforce_monotonically_increasing_start_offsets(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.epoch_entries == entries((3, 9))


def test_should_not_overwrite_offset_once_assigned(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    cache.assign(2, 10)
    assert cache.epoch_entries[0].start_offset == 6


def test_should_return_unsupported_if_no_epoch_recorded(cache: LeaderEpochFileCache) -> None:
    assert cache.end_offset_for(0, 0) == UNDEFINED


def test_should_return_unsupported_if_no_epoch_recorded_and_undefined_epoch_requested(
    cache: LeaderEpochFileCache,
) -> None:
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED


def test_should_return_first_epoch_if_requested_epoch_less_than_first_epoch(
    cache: LeaderEpochFileCache,
) -> None:
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_should_truncate_if_matching_epoch_but_earlier_starting_offset(cache: LeaderEpochFileCache) -> None:
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    # Epoch 7 starts at an earlier offset.
    cache.assign(7, 12)
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)
    assert cache.epoch_entries == entries((5, 11), (7, 12))


def test_should_get_first_offset_of_subsequent_epoch_when_offset_requested_for_previous_epoch(
    cache: LeaderEpochFileCache,
) -> None:
    cache.assign(1, 11)
    cache.assign(1, 12)
    cache.assign(2, 13)
    cache.assign(2, 14)
    cache.assign(3, 15)
    cache.assign(3, 16)
    assert cache.end_offset_for(2, 17) == (2, 15)


def test_should_return_next_available_epoch_if_there_is_no_exact_epoch(cache: LeaderEpochFileCache) -> None:
    cache.assign(0, 10)
    cache.assign(2, 13)
    cache.assign(4, 17)
    assert cache.end_offset_for(1, 0) == (0, 13)
    assert cache.end_offset_for(2, 0) == (2, 17)
    assert cache.end_offset_for(3, 0) == (2, 17)


def test_should_not_update_epoch_and_start_offset_if_it_did_not_change(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    cache.assign(2, 7)
    assert cache.epoch_entries == entries((2, 6))


def test_should_return_invalid_offset_if_epoch_not_tracked(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 100)
    assert cache.end_offset_for(3, 100) == UNDEFINED


def test_should_support_epochs_that_do_not_start_from_zero(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    log_end_offset = 7
    assert cache.end_offset_for(2, log_end_offset) == (2, log_end_offset)
    assert cache.epoch_entries == entries((2, 6))


def test_should_persist_epochs_between_instances(tmp_path: Path) -> None:
    directory = tmp_path / "persist-0"
    directory.mkdir()
    cache = LeaderEpochFileCache.for_directory(directory)
    cache.assign(2, 6)
    cache2 = LeaderEpochFileCache(leader_epoch_checkpoint(directory))
    assert cache2.epoch_entries == entries((2, 6))


def test_should_enforce_monotonically_increasing_epochs(cache: LeaderEpochFileCache) -> None:
    cache.assign(1, 5)
    cache.assign(2, 6)
    # An epoch in the past with a later offset truncates the later epochs.
    cache.assign(1, 7)
    log_end_offset = 8
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, log_end_offset) == (1, 8)
    assert cache.end_offset_for(2, log_end_offset) == UNDEFINED
    assert cache.epoch_entries[0] == EpochEntry(1, 7)


def test_should_enforce_offsets_increase_monotonically(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert cache.epoch_entries[0] == EpochEntry(3, 5)
    assert cache.epoch_entries == entries((3, 5))


def test_should_increase_and_track_epochs_as_leaders_change_many_times(cache: LeaderEpochFileCache) -> None:
    log_end_offset = 0
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, log_end_offset) == (1, 0)
    assert cache.end_offset_for(0, log_end_offset) == (0, 0)

    log_end_offset = 5
    assert cache.end_offset_for(1, log_end_offset) == (1, 5)
    assert cache.end_offset_for(0, log_end_offset) == (0, 0)

    cache.assign(2, 5)
    log_end_offset = 10
    assert cache.end_offset_for(2, log_end_offset) == (2, 10)
    assert cache.end_offset_for(1, log_end_offset) == (1, 5)
    assert cache.end_offset_for(0, log_end_offset) == (0, 0)


def test_should_increase_and_track_epochs_as_follower_receives_many_messages(
    cache: LeaderEpochFileCache,
) -> None:
    for offset in range(3):
        cache.assign(0, offset)
    log_end_offset = 3
    assert cache.latest_epoch == 0
    assert cache.end_offset_for(0, log_end_offset) == (0, log_end_offset)

    for offset in range(3, 6):
        cache.assign(1, offset)
    log_end_offset = 6
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, log_end_offset) == (1, log_end_offset)

    for offset in range(6, 9):
        cache.assign(2, offset)
    log_end_offset = 9
    assert cache.latest_epoch == 2
    assert cache.end_offset_for(2, log_end_offset) == (2, log_end_offset)
    # Older epochs end where the next one starts.
    assert cache.end_offset_for(0, log_end_offset) == (0, 3)
    assert cache.end_offset_for(1, log_end_offset) == (1, 6)


@pytest.fixture
def three_epochs(cache: LeaderEpochFileCache) -> LeaderEpochFileCache:
    cache.assign(2, 6)
    cache.assign(3, 8)
    cache.assign(4, 11)
    return cache


def test_should_drop_entries_on_epoch_boundary_when_removing_latest_entries(
    three_epochs: LeaderEpochFileCache,
) -> None:
    three_epochs.truncate_from_end(8)
    assert three_epochs.epoch_entries == entries((2, 6))


def test_should_preserve_reset_offset_on_clear_earliest_if_one_exists(
    three_epochs: LeaderEpochFileCache,
) -> None:
    three_epochs.truncate_from_start(8)
    assert three_epochs.epoch_entries == entries((3, 8), (4, 11))


def test_should_update_saved_offset_when_offset_to_clear_to_is_between_epochs(
    three_epochs: LeaderEpochFileCache,
) -> None:
    """shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs / shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest."""
    three_epochs.truncate_from_start(9)
    assert three_epochs.epoch_entries == entries((3, 9), (4, 11))


@pytest.mark.parametrize("offset", [1, 6])
def test_should_not_clear_anything_if_offset_too_early_or_first(
    three_epochs: LeaderEpochFileCache, offset: int
) -> None:
    """shouldNotClearAnythingIfOffsetToEarly (1) / shouldNotClearAnythingIfOffsetToFirstOffset (6)."""
    three_epochs.truncate_from_start(offset)
    assert three_epochs.epoch_entries == entries((2, 6), (3, 8), (4, 11))


def test_should_retain_latest_epoch_on_clear_all_earliest(three_epochs: LeaderEpochFileCache) -> None:
    three_epochs.truncate_from_start(11)
    assert three_epochs.epoch_entries == entries((4, 11))


def test_should_update_offset_between_epoch_boundaries_on_clear_earliest2(
    cache: LeaderEpochFileCache,
) -> None:
    cache.assign(0, 0)
    cache.assign(1, 7)
    cache.assign(2, 10)
    cache.truncate_from_start(5)
    assert cache.epoch_entries == entries((0, 5), (1, 7), (2, 10))


def test_should_retain_latest_epoch_on_clear_all_earliest_and_update_its_offset(
    three_epochs: LeaderEpochFileCache,
) -> None:
    three_epochs.truncate_from_start(15)
    assert three_epochs.epoch_entries == entries((4, 15))


def test_should_drop_entries_between_epoch_boundary_when_removing_newest(
    three_epochs: LeaderEpochFileCache,
) -> None:
    three_epochs.truncate_from_end(9)
    assert three_epochs.latest_epoch == 3
    assert three_epochs.epoch_entries == entries((2, 6), (3, 8))


def test_should_clear_all_entries(
    three_epochs: LeaderEpochFileCache, checkpoint: CheckpointFile[EpochEntry]
) -> None:
    three_epochs.clear_and_flush()
    assert three_epochs.epoch_entries == []
    assert checkpoint.read() == []


def test_should_not_reset_epoch_history_head_if_undefined_passed(three_epochs: LeaderEpochFileCache) -> None:
    three_epochs.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    assert len(three_epochs.epoch_entries) == 3


def test_should_not_reset_epoch_history_tail_if_undefined_passed(three_epochs: LeaderEpochFileCache) -> None:
    three_epochs.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert len(three_epochs.epoch_entries) == 3


def test_empty_cache(cache: LeaderEpochFileCache) -> None:
    """shouldFetchLatestEpochOfEmptyCache, shouldFetchEndOffsetOfEmptyCache, shouldClear{Earliest,Latest}OnEmptyCache."""
    assert cache.latest_epoch is None
    assert cache.end_offset_for(7, 0) == UNDEFINED
    cache.truncate_from_start(7)
    cache.truncate_from_end(7)
    assert cache.epoch_entries == []


def test_find_previous_epoch(cache: LeaderEpochFileCache) -> None:
    assert cache.previous_epoch(2) is None
    cache.assign(2, 10)
    assert cache.previous_epoch(2) is None
    cache.assign(4, 15)
    assert cache.previous_epoch(4) == 2
    cache.assign(10, 20)
    assert cache.previous_epoch(10) == 4
    cache.truncate_from_end(18)
    latest = cache.latest_epoch
    assert latest is not None
    assert cache.previous_epoch(latest) == 2


def test_find_previous_entry(cache: LeaderEpochFileCache) -> None:
    assert cache.previous_entry(2) is None
    cache.assign(2, 10)
    assert cache.previous_entry(2) is None
    cache.assign(4, 15)
    assert cache.previous_entry(4) == EpochEntry(2, 10)
    cache.assign(10, 20)
    assert cache.previous_entry(10) == EpochEntry(4, 15)
    cache.truncate_from_end(18)
    latest = cache.latest_epoch
    assert latest is not None
    assert cache.previous_entry(latest) == EpochEntry(2, 10)


def test_find_next_epoch(cache: LeaderEpochFileCache) -> None:
    cache.assign(0, 0)
    cache.assign(1, 100)
    cache.assign(2, 200)
    assert cache.next_epoch(-1) == 0
    assert cache.next_epoch(0) == 1
    assert cache.next_epoch(1) == 2
    assert cache.next_epoch(2) is None
    assert cache.next_epoch(100) is None


def test_get_epoch_entry(cache: LeaderEpochFileCache) -> None:
    cache.assign(2, 100)
    cache.assign(3, 500)
    cache.assign(5, 1000)
    assert cache.epoch_entry(2) == EpochEntry(2, 100)
    assert cache.epoch_entry(3) == EpochEntry(3, 500)
    assert cache.epoch_entry(5) == EpochEntry(5, 1000)
    assert cache.epoch_entry(4) is None


def test_should_fetch_epoch_for_given_offset(cache: LeaderEpochFileCache) -> None:
    cache.assign(0, 10)
    cache.assign(1, 20)
    cache.assign(5, 30)
    assert cache.epoch_for_offset(25) == 1
    assert cache.epoch_for_offset(20) == 1
    assert cache.epoch_for_offset(30) == 5
    assert cache.epoch_for_offset(50) == 5
    assert cache.epoch_for_offset(5) is None


def test_should_write_checkpoint_on_truncation(
    three_epochs: LeaderEpochFileCache, checkpoint: CheckpointFile[EpochEntry]
) -> None:
    three_epochs.truncate_from_end(11)
    three_epochs.truncate_from_start(8)
    assert checkpoint.read() == entries((3, 8))


def test_epoch_entries_in_range(cache: LeaderEpochFileCache) -> None:
    """RemoteLogManagerTest.testGetLeaderEpochCheckpoint, plus Kafka's start adjustment in the middle of an epoch."""
    cache.assign(0, 0)
    cache.assign(1, 100)
    cache.assign(2, 200)
    assert cache.epoch_entries_in_range(0, 300) == entries((0, 0), (1, 100), (2, 200))
    assert cache.epoch_entries_in_range(100, 200) == entries((1, 100))
    assert cache.epoch_entries_in_range(150, 250) == entries((1, 150), (2, 200))
    assert cache.epoch_entries_in_range(-1, 150) == entries((0, 0), (1, 100))
    assert cache.epoch_entries_in_range(250, 300) == entries((2, 250))
    # The cache itself is untouched.
    assert cache.epoch_entries == entries((0, 0), (1, 100), (2, 200))


# --- the checkpoint file -----------------------------------------------------------------------------------------


def test_should_persist_and_overwrite_and_reload_file(checkpoint: CheckpointFile[EpochEntry]) -> None:
    epochs = entries((0, 1), (1, 2), (2, 3))
    checkpoint.write(epochs)
    assert checkpoint.read() == epochs
    epochs2 = entries((3, 4), (4, 5))
    checkpoint.write(epochs2)
    assert checkpoint.read() == epochs2


def test_should_retain_values_even_if_checkpoint_is_recreated(tmp_path: Path) -> None:
    epochs = entries((0, 1), (1, 2), (2, 3))
    leader_epoch_checkpoint(tmp_path).write(epochs)
    assert leader_epoch_checkpoint(tmp_path).read() == epochs


def test_every_change_is_persisted_and_reloads(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.for_directory(tmp_path)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    cache.assign(2, 6)
    assert path.read_text() == "0\n1\n2 6\n"
    cache.assign(3, 8)
    cache.assign(4, 11)
    assert path.read_text() == "0\n3\n2 6\n3 8\n4 11\n"
    cache.truncate_from_end(11)
    assert path.read_text() == "0\n2\n2 6\n3 8\n"
    cache.truncate_from_start(7)
    assert path.read_text() == "0\n2\n2 7\n3 8\n"
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == entries((2, 7), (3, 8))
    cache.clear_and_flush()
    assert path.read_text() == "0\n0\n"
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == []


def test_checkpoint_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The new content goes to ``<file>.tmp`` first; a crash before the rename leaves the old file whole."""
    cache = LeaderEpochFileCache.for_directory(tmp_path)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    cache.assign(2, 6)
    before = path.read_bytes()
    inode = path.stat().st_ino

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        cache.assign(3, 8)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert path.stat().st_ino == inode
    # The half-done temporary file is not read: a reload sees the old content.
    assert (tmp_path / (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp")).exists()
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == entries((2, 6))

    # The next write replaces the file (a new inode: rename, not an in-place rewrite).
    cache.assign(4, 11)
    assert path.stat().st_ino != inode
    assert leader_epoch_checkpoint(tmp_path).read() == entries((2, 6), (3, 8), (4, 11))


def test_stale_tmp_file_is_ignored(tmp_path: Path) -> None:
    (tmp_path / (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp")).write_text("garbage")
    cache = LeaderEpochFileCache.for_directory(tmp_path)
    assert cache.epoch_entries == []
    cache.assign(1, 0)
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == entries((1, 0))


@pytest.mark.parametrize(
    "text",
    ["1\n1\n2 6\n", "0\n2\n2 6\n", "0\n1\n2\n", "0\n1\n2 6 7\n", "0\nx\n", "zero\n"],
    ids=["version", "count", "short-line", "long-line", "bad-count", "bad-version"],
)
def test_malformed_checkpoint_is_rejected(tmp_path: Path, text: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text(text)
    with pytest.raises(CheckpointError):
        LeaderEpochFileCache.for_directory(tmp_path)


def test_version_only_checkpoint_is_empty(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n")
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == []


def test_missing_or_empty_checkpoint_is_empty(tmp_path: Path) -> None:
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == []
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("")
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == []


def test_load_repairs_a_non_monotonic_file(tmp_path: Path) -> None:
    """Loading assigns entry by entry (Kafka's constructor does ``checkpoint.read().forEach(this::assign)``)."""
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n3\n1 5\n3 4\n2 9\n")
    assert LeaderEpochFileCache.for_directory(tmp_path).epoch_entries == entries((2, 9))


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1)])
def test_invalid_assignment_is_rejected(cache: LeaderEpochFileCache, epoch: int, offset: int) -> None:
    cache.assign(1, 5)
    with pytest.raises(ValueError):
        cache.assign(epoch, offset)
    assert cache.epoch_entries == entries((1, 5))


def test_flush_skips_a_vanished_directory(tmp_path: Path) -> None:
    """Kafka's ``writeIfDirExists``: after the directory is renamed away the write is skipped."""
    directory = tmp_path / "gone-0"
    directory.mkdir()
    cache = LeaderEpochFileCache.for_directory(directory)
    cache.assign(1, 0)
    (directory / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    directory.rmdir()
    cache.truncate_from_end(0)
    assert not directory.exists()
    assert cache.epoch_entries == []


def test_with_directory_keeps_entries(tmp_path: Path) -> None:
    first = tmp_path / "a-0"
    second = tmp_path / "b-0"
    first.mkdir()
    second.mkdir()
    cache = LeaderEpochFileCache.for_directory(first)
    cache.assign(1, 0)
    cache.assign(2, 10)
    moved = cache.with_directory(second)
    assert moved.epoch_entries == entries((1, 0), (2, 10))
    moved.assign(3, 20)
    assert leader_epoch_checkpoint(second).read() == entries((1, 0), (2, 10), (3, 20))
    assert leader_epoch_checkpoint(first).read() == entries((1, 0), (2, 10))


def test_checkpoint_error_is_an_oserror() -> None:
    assert issubclass(CheckpointError, OSError)
