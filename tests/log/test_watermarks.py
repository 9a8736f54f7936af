"""``Watermarks``: the one owner of log start offset, high watermark and first unstable offset, and its
``check()`` (which the stateful suites call after every step through ``check_log_invariants``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kafkalog.errors import RecordTooLargeError
from kafkalog.log import LogConfig
from kafkalog.log.watermarks import Watermarks
from kafkalog.storage import LogOffsetMetadata

from .conftest import LogFactory


class _ProducerState:
    """The part of a ProducerStateManager the watermarks talk to."""

    def __init__(self) -> None:
        self.fuo: LogOffsetMetadata | None = None
        self.hw_updates: list[int] = []

    @property
    def has_unresolved_transactions(self) -> bool:
        return self.fuo is not None

    def first_unstable_offset(self) -> LogOffsetMetadata | None:
        return self.fuo

    def on_high_watermark_updated(self, hw: int) -> None:
        self.hw_updates.append(hw)


def _watermarks(start: int = 0) -> tuple[Watermarks, _ProducerState]:
    ps = _ProducerState()
    state: Any = ps
    return Watermarks(start, state, logging.getLogger("test")), ps


def test_moving_the_log_start_offset_lifts_the_high_watermark() -> None:
    wm, ps = _watermarks()
    wm.set_high_watermark(LogOffsetMetadata(3))
    wm.set_log_start_offset(5)
    assert (wm.log_start_offset, wm.high_watermark) == (5, 5)
    assert ps.hw_updates == [3, 5]
    wm.check(log_end_offset=5)
    wm.set_log_start_offset(2)  # truncation moves it back; the high watermark stays
    assert (wm.log_start_offset, wm.high_watermark) == (2, 5)
    wm.check(log_end_offset=5)


def test_local_log_start_offset_between_log_start_and_log_end() -> None:
    """log start <= local log start <= LEO: the local one follows the log start offset by default (no remote
    tier), moves alone with a remote tier, is never set below the log start offset, and check() names a
    local log start offset past the log end."""
    wm, _ = _watermarks()
    wm.set_log_start_offset(3)
    assert (wm.log_start_offset, wm.local_log_start_offset) == (3, 3)
    wm.set_local_log_start_offset(7)
    assert (wm.log_start_offset, wm.local_log_start_offset) == (3, 7)
    wm.check(log_end_offset=7)
    with pytest.raises(AssertionError, match="local log start offset 7 <= log end offset 6"):
        wm.check(log_end_offset=6)
    with pytest.raises(ValueError, match="below the log start offset"):
        wm.set_local_log_start_offset(2)
    with pytest.raises(ValueError, match="below the log start offset"):
        wm.set_log_start_offset(5, 4)
    assert (wm.log_start_offset, wm.local_log_start_offset) == (3, 7)
    wm.set_log_start_offset(2, 4)  # a truncation moves both back
    assert (wm.log_start_offset, wm.local_log_start_offset) == (2, 4)


def test_last_stable_offset_is_min_of_first_unstable_offset_and_high_watermark() -> None:
    wm, ps = _watermarks(2)
    ps.fuo = LogOffsetMetadata(1)  # below the log start offset: clamped to it
    wm.set_high_watermark(LogOffsetMetadata(8))
    assert (wm.first_unstable_offset, wm.last_stable_offset) == (2, 2)
    ps.fuo = LogOffsetMetadata(6)
    wm.after_append(LogOffsetMetadata(10))
    assert (wm.first_unstable_offset, wm.last_stable_offset, wm.high_watermark) == (6, 6, 8)
    wm.check(log_end_offset=10)
    ps.fuo = None
    wm.after_append(LogOffsetMetadata(11))
    assert (wm.first_unstable_offset, wm.last_stable_offset) == (None, 8)
    wm.check(log_end_offset=11)


def test_a_high_watermark_that_follows_the_log_end_moves_with_every_append() -> None:
    wm, _ps = _watermarks()
    assert not wm.follows_log_end
    wm.set_follows_log_end(True, LogOffsetMetadata(4))
    assert wm.high_watermark == 4
    assert wm.after_append(LogOffsetMetadata(9)) == 0  # returns the log start offset
    assert wm.high_watermark == 9
    wm.check(log_end_offset=9)


def test_check_names_each_broken_rule() -> None:
    wm, ps = _watermarks()
    wm.set_high_watermark(LogOffsetMetadata(7))
    with pytest.raises(AssertionError, match="high watermark 7 <= log end offset 5"):
        wm.check(log_end_offset=5)
    wm.check(log_end_offset=7)
    ps.fuo = LogOffsetMetadata(3)  # the producer state moved, the cached first unstable offset did not
    with pytest.raises(AssertionError, match="last stable offset 7"):
        wm.check(log_end_offset=7)
    wm.update_first_unstable_offset()
    wm.check(log_end_offset=7)
    assert wm.last_stable_offset == 3
    with pytest.raises(ValueError, match="non-negative"):
        wm.set_high_watermark(LogOffsetMetadata(-1))


def test_a_log_keeps_its_watermarks_through_append_roll_truncation_and_retention(
    make_log: LogFactory,
) -> None:
    log = make_log(config=LogConfig(segment_bytes=300))
    for i in range(20):
        log.append([(None, b"%d" % i * 30)])
        log.check_watermarks()
    log.update_high_watermark(12)
    log.maybe_increment_log_start_offset(5)
    log.check_watermarks()
    log.delete_old_segments()
    log.check_watermarks()
    log.truncate_to(9)
    log.check_watermarks()
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (5, 9, 9)
    log.truncate_fully_and_start_at(30)
    log.check_watermarks()
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (30, 30, 30)


def test_update_config_replaces_what_appends_read(make_log: LogFactory) -> None:
    # The append settings are derived once per config (no check per append): update_config must replace them.
    log = make_log()
    settings = log.local_log.append_settings
    log.append([(None, b"x" * 200)])
    log.update_config({"max.message.bytes": 150})
    assert log.local_log.append_settings is not settings
    assert log.local_log.append_settings.max_message_bytes == 150
    with pytest.raises(RecordTooLargeError):
        log.append([(None, b"x" * 200)])
    assert log.log_end_offset == 1


class _LockTakenFirst:
    """The log's lock, where another writer gets in first once: ``before`` runs (holding the real lock) on the
    first acquisition after ``arm()``, as if that writer had taken the lock just before the caller."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.before: Any = None
        self._armed = False

    def arm(self, before: Any) -> None:
        self.before, self._armed = before, True

    def __enter__(self) -> None:
        self._lock.__enter__()
        if self._armed:
            self._armed = False
            self.before()

    def __exit__(self, *exc: object) -> None:
        self._lock.__exit__(*exc)


def test_update_high_watermark_clamps_under_the_lock(make_log: LogFactory) -> None:
    # update_high_watermark used to clamp to the log start offset before taking the lock: a log start offset
    # moved by another writer in between (DeleteRecords) left the high watermark below it.
    log = make_log()
    for i in range(10):
        log.append([(None, b"%d" % i)])
    log.update_high_watermark(10)
    lock = _LockTakenFirst(log.lock)
    log.lock = lock  # type: ignore[assignment]
    lock.arm(lambda: log.maybe_increment_log_start_offset(5))
    assert log.update_high_watermark(3) == 5
    assert (log.log_start_offset, log.high_watermark) == (5, 5)
    log.check_watermarks()


def test_maybe_increment_high_watermark_checks_the_log_end_under_the_lock(make_log: LogFactory) -> None:
    # It compared with the log end offset before taking the lock: a truncation in between let the high
    # watermark pass the new log end offset.
    log = make_log()
    for i in range(10):
        log.append([(None, b"%d" % i)])
    lock = _LockTakenFirst(log.lock)
    log.lock = lock  # type: ignore[assignment]
    lock.arm(lambda: log.truncate_to(5))
    with pytest.raises(ValueError, match="exceeds current log end offset"):
        log.maybe_increment_high_watermark(8)
    assert (log.high_watermark, log.log_end_offset) == (0, 5)
    log.check_watermarks()
