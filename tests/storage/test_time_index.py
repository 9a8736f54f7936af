"""Kafka's ``TimeIndexTest`` scenarios, with the same numbers, against :class:`kafkalog.storage.TimeIndex`.

Ported (``storage/src/test/java/org/apache/kafka/storage/internals/log/TimeIndexTest.java``):
testLookUp, testEntry, testEntryOverflow, testTruncate, testAppend, testSanityCheck, testIsFull, testLastEntry,
testResize, testEntrySize, testParseEntry.

Adapted: testSanityCheck corrupts ``lastEntry()``/``length()`` through a mock subclass. The subclass part is
kept (overriding ``last_entry``); the corrupt length is a real file one byte short, which kafkalog rejects
when it loads the file (its indexes are validated on load). testParseEntry reads the entry from the file's
bytes, since there is no mapped buffer to parse.

Added: KAFKA-19200 — an append with ``skip_full_check`` on a full file grows it by one entry instead of
failing (a deliberate kafkalog difference).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage import TimeIndex, TimestampOffset

MAX_ENTRIES = 30
BASE_OFFSET = 45


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[TimeIndex]:
    index = TimeIndex(tmp_path / "time.timeindex", BASE_OFFSET, MAX_ENTRIES * 12)
    yield index
    index.close()


def _append_entries(idx: TimeIndex, n: int) -> None:
    for i in range(1, n + 1):
        idx.maybe_append(i * 10, i * 10 + BASE_OFFSET)


def test_look_up(idx: TimeIndex) -> None:
    assert idx.lookup(100) == TimestampOffset(-1, BASE_OFFSET), "empty time index"
    _append_entries(idx, MAX_ENTRIES - 1)
    assert idx.lookup(9) == TimestampOffset(-1, BASE_OFFSET), "before the earliest entry"
    assert idx.lookup(25) == TimestampOffset(20, 65), "between two entries"
    assert idx.lookup(30) == TimestampOffset(30, 75), "exactly an entry's timestamp"


def test_entry(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    assert idx.entry(0) == TimestampOffset(10, 55)
    assert idx.entry(1) == TimestampOffset(20, 65)
    assert idx.entry(2) == TimestampOffset(30, 75)
    assert idx.entry(3) == TimestampOffset(40, 85)


def test_entry_overflow(idx: TimeIndex) -> None:
    with pytest.raises(ValueError):
        idx.entry(0)


def test_truncate(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate_to_entries(0)
    assert idx.entries == 0

    _append_entries(idx, MAX_ENTRIES - 1)
    idx.truncate_to(10 + BASE_OFFSET)
    assert idx.entries == 0


def test_append(idx: TimeIndex) -> None:
    _append_entries(idx, MAX_ENTRIES - 1)
    with pytest.raises(ValueError):
        idx.maybe_append(10000, 1000)  # full (the last slot is reserved)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10000, (MAX_ENTRIES - 2) * 10, skip_full_check=True)
    idx.maybe_append(10000, 1000, skip_full_check=True)
    assert idx.last_entry() == TimestampOffset(10000, 1000)


class _CorruptingTimeIndex(TimeIndex):
    """Kafka's ``MockTimeIndex``: a ``last_entry`` that can lie about its offset or timestamp."""

    corrupt_offset = False
    corrupt_timestamp = False
    first_entry = TimestampOffset(-1, -1)

    def last_entry(self) -> TimestampOffset:
        real = super().last_entry()
        offset = self.base_offset - 1 if self.corrupt_offset else real.offset
        timestamp = self.first_entry.timestamp - 1 if self.corrupt_timestamp else real.timestamp
        return TimestampOffset(timestamp, offset)


def test_sanity_check(idx: TimeIndex, tmp_path: Path) -> None:
    idx.sanity_check()
    _append_entries(idx, 5)
    first_entry = idx.entry(0)
    idx.sanity_check()
    idx.trim_to_valid_size()
    idx.close()

    mock = _CorruptingTimeIndex(idx.path, BASE_OFFSET, MAX_ENTRIES * 12)
    mock.first_entry = first_entry
    try:
        mock.corrupt_offset = True
        with pytest.raises(CorruptIndexError):
            mock.sanity_check()
        mock.corrupt_offset = False

        mock.corrupt_timestamp = True
        with pytest.raises(CorruptIndexError):
            mock.sanity_check()
        mock.corrupt_timestamp = False

        mock.sanity_check()
    finally:
        mock.close()

    # The corrupt length: a real file one byte short of its five entries.
    short = tmp_path / "short.timeindex"
    short.write_bytes(idx.path.read_bytes()[:-1])
    assert short.stat().st_size == 5 * 12 - 1
    with pytest.raises(CorruptIndexError):
        TimeIndex(short, BASE_OFFSET, MAX_ENTRIES * 12).load()


def test_is_full(idx: TimeIndex) -> None:
    assert not idx.is_full()
    _append_entries(idx, MAX_ENTRIES - 1)
    assert idx.is_full()


def test_last_entry(idx: TimeIndex) -> None:
    assert idx.last_entry() == TimestampOffset(-1, BASE_OFFSET)
    idx.maybe_append(1, 1 + BASE_OFFSET)
    assert idx.last_entry() == TimestampOffset(1, BASE_OFFSET + 1)


def test_resize(idx: TimeIndex) -> None:
    assert idx.resize(MAX_ENTRIES * idx.ENTRY_SIZE) is False
    assert idx.resize(MAX_ENTRIES // 2 * idx.ENTRY_SIZE) is True
    assert idx.resize(MAX_ENTRIES * 2 * idx.ENTRY_SIZE) is True
    assert idx.max_entries == MAX_ENTRIES * 2


def test_entry_size(idx: TimeIndex) -> None:
    assert idx.ENTRY_SIZE == 12


def test_parse_entry(idx: TimeIndex) -> None:
    idx.maybe_append(1, 1 + BASE_OFFSET)
    timestamp, relative = struct.unpack_from(">qi", idx.path.read_bytes(), 0)
    assert TimestampOffset(timestamp, BASE_OFFSET + relative) == TimestampOffset(1, BASE_OFFSET + 1)


def test_equal_timestamp_is_ignored_and_smaller_is_refused(idx: TimeIndex) -> None:
    """TimeIndex.maybeAppend: an equal timestamp is skipped (roll/close re-append), a smaller one is a bug."""
    idx.maybe_append(10, 50)
    idx.maybe_append(10, 51)
    assert idx.entries == 1
    with pytest.raises(RuntimeError):
        idx.maybe_append(9, 52)
    assert idx.entries == 1


def test_skip_full_check_grows_a_full_file_kafka_19200(idx: TimeIndex) -> None:
    """KAFKA-19200: the roll/close entry on a full (e.g. never trimmed) file grows it instead of failing."""
    _append_entries(idx, MAX_ENTRIES - 1)
    idx.maybe_append(1000, 1000, skip_full_check=True)  # the reserved slot
    assert idx.entries == MAX_ENTRIES and idx.length == MAX_ENTRIES * 12
    idx.maybe_append(2000, 2000, skip_full_check=True)  # past the end of the file
    assert idx.entries == MAX_ENTRIES + 1
    assert idx.path.stat().st_size == (MAX_ENTRIES + 1) * 12
    assert idx.last_entry() == TimestampOffset(2000, 2000)
    idx.close()
    reopened = TimeIndex(idx.path, BASE_OFFSET)
    try:
        assert reopened.entries == MAX_ENTRIES + 1
        assert reopened.lookup(1500) == TimestampOffset(1000, 1000)
        assert reopened.lookup(2500) == TimestampOffset(2000, 2000)
    finally:
        reopened.close()
