"""Kafka's ``OffsetIndexTest`` scenarios, with the same numbers, against :class:`kafkalog.storage.OffsetIndex`.

Ported (``storage/src/test/java/org/apache/kafka/storage/internals/log/OffsetIndexTest.java``):
randomLookupTest, lookupExtremeCases, testEntry, testEntryOverflow, appendTooMany, appendOutOfOrder,
testFetchUpperBoundOffset, testReopen, truncate, testSanityLastOffsetEqualToBaseOffset.

Skipped: forceUnmapTest (Kafka maps the file; kafkalog keeps an in-memory mirror and never maps it, so there is
nothing to unmap — the nearest behaviour, that a closed index reloads on use, is tested instead).

Kafka's exception types map to: IllegalArgumentException -> ``ValueError``, InvalidOffsetException ->
:class:`~kafkalog.errors.InvalidOffsetError`.
"""

from __future__ import annotations

import random
import struct
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage import OffsetIndex, OffsetPosition

BASE_OFFSET = 45


@pytest.fixture
def index(tmp_path: Path) -> Iterator[OffsetIndex]:
    idx = OffsetIndex(tmp_path / "offset.index", BASE_OFFSET, 30 * 8)
    yield idx
    idx.close()


def _monotonic_seq(rng: random.Random, base: int, length: int) -> list[int]:
    seq = []
    last = base
    for _ in range(length):
        last += rng.randrange(15) + 1
        seq.append(last)
    return seq


@pytest.mark.parametrize("seed", range(5))
def test_random_lookup(index: OffsetIndex, seed: int) -> None:
    rng = random.Random(seed)
    assert index.lookup(92) == OffsetPosition(BASE_OFFSET, 0), "a missing value gives position 0"
    size = index.max_entries
    offsets = _monotonic_seq(rng, BASE_OFFSET + 1, size)
    positions = _monotonic_seq(rng, 0, size)
    for offset, position in zip(offsets, positions, strict=True):
        index.append(offset, position)
    for offset, position in zip(offsets, positions, strict=True):
        assert index.lookup(offset) == OffsetPosition(offset, position)
    # A missing offset finds the largest entry at or below it.
    candidates = list(range(BASE_OFFSET, offsets[-1]))
    rng.shuffle(candidates)
    for target in candidates[:30]:
        slot = bisect_right(offsets, target) - 1
        expected = (
            OffsetPosition(BASE_OFFSET, 0) if slot < 0 else OffsetPosition(offsets[slot], positions[slot])
        )
        assert index.lookup(target) == expected


def test_lookup_extreme_cases(index: OffsetIndex) -> None:
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0), "lookup on an empty file"
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    assert index.lookup(BASE_OFFSET) == OffsetPosition(BASE_OFFSET, 0)
    assert index.lookup(BASE_OFFSET + index.max_entries) == OffsetPosition(
        BASE_OFFSET + index.max_entries, index.max_entries - 1
    )


def test_entry(index: OffsetIndex) -> None:
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i, i)
    for i in range(index.max_entries):
        assert index.entry(i) == OffsetPosition(BASE_OFFSET + i, i)


def test_entry_overflow(index: OffsetIndex) -> None:
    with pytest.raises(ValueError):
        index.entry(0)


def test_append_too_many(index: OffsetIndex) -> None:
    assert index.max_entries == 30
    for i in range(index.max_entries):
        index.append(BASE_OFFSET + i + 1, i)
    with pytest.raises(ValueError) as exc:
        index.append(index.max_entries + 1, 1)
    assert type(exc.value) is ValueError, "a full index fails with IllegalArgumentException, nothing else"


def test_append_out_of_order(index: OffsetIndex) -> None:
    index.append(51, 0)
    with pytest.raises(InvalidOffsetError):
        index.append(50, 1)


def test_fetch_upper_bound_offset(index: OffsetIndex) -> None:
    first = OffsetPosition(BASE_OFFSET, 0)
    second = OffsetPosition(BASE_OFFSET + 1, 10)
    third = OffsetPosition(BASE_OFFSET + 2, 23)
    fourth = OffsetPosition(BASE_OFFSET + 3, 37)

    assert index.fetch_upper_bound_offset(first, 5) is None
    for entry in (first, second, third, fourth):
        index.append(entry.offset, entry.position)

    assert index.fetch_upper_bound_offset(first, 5) == second
    assert index.fetch_upper_bound_offset(first, 10) == second
    assert index.fetch_upper_bound_offset(first, 23) == third
    assert index.fetch_upper_bound_offset(first, 22) == third
    assert index.fetch_upper_bound_offset(second, 24) == fourth
    assert index.fetch_upper_bound_offset(fourth, 1) is None
    assert index.fetch_upper_bound_offset(first, 200) is None
    assert index.fetch_upper_bound_offset(second, 200) is None


def test_reopen(index: OffsetIndex) -> None:
    first = OffsetPosition(51, 0)
    sec = OffsetPosition(52, 1)
    index.append(*first)
    index.append(*sec)
    index.close()
    reopened = OffsetIndex(index.path, BASE_OFFSET)  # no max size: the trimmed file defines the capacity
    try:
        assert reopened.lookup(first.offset) == first
        assert reopened.lookup(sec.offset) == sec
        assert reopened.last_offset == sec.offset
        assert reopened.entries == 2
        with pytest.raises(ValueError) as exc:
            reopened.append(53, 1)
        assert type(exc.value) is ValueError
    finally:
        reopened.close()


def test_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "t.index", 0, 10 * 8)
    try:
        idx.truncate_to_entries(0)
        for i in range(1, 10):
            idx.append(i, i)

        # Check the last offset after various truncation points, and that appends still work.
        idx.truncate_to(12)
        assert idx.lookup(10) == OffsetPosition(9, 9), "truncating past the end changes nothing"
        assert idx.last_offset == 9

        idx.append(10, 10)
        idx.truncate_to(10)
        assert idx.lookup(10) == OffsetPosition(9, 9), "truncating at the end removes the last entry"
        assert idx.last_offset == 9
        idx.append(10, 10)

        idx.truncate_to(9)
        assert idx.lookup(10) == OffsetPosition(8, 8)
        assert idx.last_offset == 8
        idx.append(9, 9)

        idx.truncate_to(5)
        assert idx.lookup(10) == OffsetPosition(4, 4)
        assert idx.last_offset == 4
        idx.append(5, 5)

        idx.truncate_to_entries(0)
        assert idx.entries == 0, "full truncation leaves no entries"
        idx.append(0, 0)
    finally:
        idx.close()


def test_sanity_last_offset_equal_to_base_offset(tmp_path: Path) -> None:
    base = 20
    idx = OffsetIndex(tmp_path / "s.index", base, 10 * 8)
    try:
        idx.append(base, 0)
        idx.sanity_check()  # the boundary: a last offset equal to the base offset is not "less than" it
        assert (idx.entries, idx.last_offset, idx.lookup(base).position) == (1, base, 0)
    finally:
        idx.close()
    # One below the boundary: relative offset -1, the last offset is base - 1.
    (tmp_path / "b.index").write_bytes(struct.pack(">iI", -1, 0))
    later = OffsetIndex(tmp_path / "b.index", base, 10 * 8)
    try:
        with pytest.raises(CorruptIndexError, match="corrupt index"):
            later.sanity_check()
    finally:
        later.close()


def test_closed_index_reloads_on_use(index: OffsetIndex) -> None:
    """Stand-in for forceUnmapTest: a closed (trimmed) index is unloaded, and reloads on next use."""
    index.append(46, 7)
    index.close()
    assert not index.is_loaded
    assert index.path.stat().st_size == 8
    assert index.lookup(46) == OffsetPosition(46, 7)
    assert index.is_loaded


def test_lookup_on_a_large_index_matches_bisect(tmp_path: Path) -> None:
    """Kafka searches the last 8 KiB ("warm" entries) first; the answers must not depend on where they live."""
    rng = random.Random(7)
    n = 5000
    idx = OffsetIndex(tmp_path / "big.index", 1000, n * 8)
    try:
        offsets = _monotonic_seq(rng, 1000, n)
        positions = _monotonic_seq(rng, 0, n)
        for o, p in zip(offsets, positions, strict=True):
            idx.append(o, p)
        for target in [999, 1000, *rng.sample(range(1000, offsets[-1] + 20), 2000)]:
            slot = bisect_right(offsets, target) - 1
            expected = OffsetPosition(1000, 0) if slot < 0 else OffsetPosition(offsets[slot], positions[slot])
            assert idx.lookup(target) == expected
    finally:
        idx.close()
