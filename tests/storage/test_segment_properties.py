"""Property tests of a segment against a model of its batches (hypothesis).

A segment is built from random appends: batch sizes, per-record timestamps (out of order, repeated, some
without a timestamp), offset gaps between batches (as after compaction), and index intervals including 0 and 1
(an index entry on every append after the first). The model is the plain list of appended batches; every
answer of the segment is checked against a linear scan of it:

* ``translate_offset(o)`` is the batch holding ``o``, or the next batch after a gap, or None past the end;
* ``read(o, ...)`` starts with that batch;
* ``find_offset_by_timestamp(t, start)`` is the first record at or after ``start`` whose timestamp is >= ``t``;
* ``truncate_to(o)`` keeps exactly the batches wholly before ``o`` (indexes, max timestamp and next offset
  follow);
* closing, reopening and recovering reproduces the index files byte for byte, and recovery truncates nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kafkalog.records import MemoryRecords, MemoryRecordsBuilder
from kafkalog.storage import FileRecords, LogOffsetPosition, LogSegment, files

TS = 1_700_000_000_000


@dataclass(frozen=True)
class Batch:
    base: int
    timestamps: tuple[int, ...]

    @property
    def last(self) -> int:
        return self.base + len(self.timestamps) - 1

    @property
    def max_timestamp(self) -> int:
        return max(self.timestamps)

    def build(self) -> MemoryRecords:
        builder = MemoryRecordsBuilder(base_offset=self.base)
        for i, ts in enumerate(self.timestamps):
            builder.append_with_offset(self.base + i, ts, None, b"v%d" % (self.base + i))
        return builder.build()


@dataclass(frozen=True)
class Scenario:
    base_offset: int
    interval: int
    batches: tuple[Batch, ...]

    @property
    def end(self) -> int:
        """The next offset (the base offset for an empty segment)."""
        return self.batches[-1].last + 1 if self.batches else self.base_offset


timestamp = st.one_of(st.integers(TS, TS + 40), st.just(-1))


@st.composite
def scenarios(draw: st.DrawFn, max_batches: int = 25) -> Scenario:
    base_offset = draw(st.sampled_from([0, 1000, 2**40]))
    interval = draw(st.sampled_from([0, 1, 50, 100, 250, 4096]))
    batches = []
    offset = base_offset + draw(st.integers(0, 3))
    for _ in range(draw(st.integers(0, max_batches))):
        count = draw(st.integers(1, 5))
        batches.append(Batch(offset, tuple(draw(st.lists(timestamp, min_size=count, max_size=count)))))
        offset += count + draw(st.sampled_from([0, 0, 0, 1, 2, 7]))
    return Scenario(base_offset, interval, tuple(batches))


@contextmanager
def built(scenario: Scenario) -> Iterator[tuple[Path, LogSegment]]:
    """The scenario appended to a new segment in a fresh directory (hypothesis re-runs the test body)."""
    directory = Path(tempfile.mkdtemp(prefix="kafkalog-prop-"))
    seg = LogSegment.open(
        directory, scenario.base_offset, index_interval_bytes=scenario.interval, max_index_size=4096
    )
    try:
        for batch in scenario.batches:
            seg.append(batch.last, batch.max_timestamp, batch.last, batch.build())
        yield directory, seg
    finally:
        if not seg.log.closed:
            seg.close()
        shutil.rmtree(directory)


def _expected_positions(seg: LogSegment, scenario: Scenario) -> list[LogOffsetPosition]:
    batches = list(seg.batches())
    assert [(b.base_offset, b.last_offset) for b in batches] == [(b.base, b.last) for b in scenario.batches]
    return [LogOffsetPosition(b.last_offset, b.position, b.size_in_bytes) for b in batches]


def _holding_or_next(scenario: Scenario, offset: int) -> int | None:
    """Index of the batch holding ``offset``, or of the first batch after it."""
    for i, batch in enumerate(scenario.batches):
        if batch.last >= offset:
            return i
    return None


def _max_timestamp_and_offset(batches: tuple[Batch, ...] | list[Batch], base_offset: int) -> tuple[int, int]:
    """The largest timestamp and the last offset of the first batch that reached it ((-1, base) if none)."""
    best = (-1, base_offset)
    for batch in batches:
        if batch.max_timestamp > best[0]:
            best = (batch.max_timestamp, batch.last)
    return best


def _first_at_or_after(scenario: Scenario, target: int, start: int) -> tuple[int, int] | None:
    for batch in scenario.batches:
        for i, ts in enumerate(batch.timestamps):
            if batch.base + i >= start and ts >= target:
                return ts, batch.base + i
    return None


@given(scenarios())
def test_every_offset_translates_and_reads_from_its_batch(scenario: Scenario) -> None:
    with built(scenario) as (_, seg):
        expected = _expected_positions(seg, scenario)
        for offset in range(scenario.base_offset, scenario.end + 2):
            slot = _holding_or_next(scenario, offset)
            want = None if slot is None else expected[slot]
            assert seg.translate_offset(offset) == want, offset
            fetched = seg.read(offset, 1 << 20)
            if want is None:
                assert fetched is None
                continue
            assert fetched is not None
            assert fetched.fetch_offset_metadata.relative_position_in_segment == want.position
            assert isinstance(fetched.records, FileRecords) and fetched.records.start == want.position
            assert next(fetched.records.batches()).last_offset == want.offset
            # a read of one byte still returns the whole first batch with min_one_message
            one = seg.read(offset, 1, min_one_message=True)
            assert one is not None and one.records.size_in_bytes == want.size
            assert not one.first_entry_incomplete
        assert seg.read_next_offset() == scenario.end


@given(scenarios(), st.data())
def test_find_offset_by_timestamp_agrees_with_a_linear_scan(scenario: Scenario, data: st.DataObject) -> None:
    with built(scenario) as (_, seg):
        targets = sorted(
            {t + d for b in scenario.batches for t in b.timestamps if t >= 0 for d in (-1, 0, 1)}
        )
        targets += [TS - 5, TS + 100]
        starts = [
            scenario.base_offset,
            *data.draw(st.lists(st.integers(scenario.base_offset, scenario.end + 1), max_size=3)),
        ]
        for start in starts:
            for target in targets:
                found = seg.find_offset_by_timestamp(target, start)
                got = None if found is None else (found.timestamp, found.offset)
                assert got == _first_at_or_after(scenario, target, start), (target, start)
        expected = _max_timestamp_and_offset(scenario.batches, scenario.base_offset)
        assert seg.max_timestamp_and_offset_so_far == expected


@given(scenarios(), st.data())
def test_truncate_keeps_exactly_the_batches_wholly_before(scenario: Scenario, data: st.DataObject) -> None:
    with built(scenario) as (_, seg):
        offset = data.draw(st.integers(scenario.base_offset, scenario.end + 2), label="truncate_to")
        kept = [b for b in scenario.batches if b.last < offset]
        removed_bytes = sum(b.build().size_in_bytes for b in scenario.batches if b.last >= offset)
        assert seg.truncate_to(offset) == removed_bytes
        assert [(b.base_offset, b.last_offset) for b in seg.batches()] == [(b.base, b.last) for b in kept]
        assert seg.read_next_offset() == (kept[-1].last + 1 if kept else scenario.base_offset)
        assert seg.offset_index.entries == 0 or seg.offset_index.last_offset < offset
        assert seg.time_index.entries == 0 or seg.time_index.last_entry().offset < offset
        assert seg.max_timestamp_and_offset_so_far == _max_timestamp_and_offset(kept, scenario.base_offset)
        assert not seg.offset_index.is_full() and not seg.time_index.is_full()
        # the truncated segment answers like one that only ever had the kept batches
        truncated = Scenario(scenario.base_offset, scenario.interval, tuple(kept))
        expected = _expected_positions(seg, truncated)
        for o in range(scenario.base_offset, offset + 2):
            slot = _holding_or_next(truncated, o)
            assert seg.translate_offset(o) == (None if slot is None else expected[slot])
        # and appends continue where it left off
        if kept:
            seg.append(kept[-1].last + 1, TS, kept[-1].last + 1, Batch(kept[-1].last + 1, (TS,)).build())
            assert seg.read_next_offset() == kept[-1].last + 2


@given(scenarios())
def test_close_reopen_recover_reproduces_the_index_files(scenario: Scenario) -> None:
    with built(scenario) as (directory, seg):
        translations = {o: seg.translate_offset(o) for o in range(scenario.base_offset, scenario.end + 1)}
        seg.close()
        index_file = files.offset_index_file(directory, scenario.base_offset)
        time_file = files.time_index_file(directory, scenario.base_offset)
        written = (index_file.read_bytes(), time_file.read_bytes())
        log_bytes = files.log_file(directory, scenario.base_offset).read_bytes()

        reopened = LogSegment.open(
            directory,
            scenario.base_offset,
            index_interval_bytes=scenario.interval,
            max_index_size=4096,
            file_already_exists=True,
        )
        try:
            # the trimmed files read back as they were written
            assert {o: reopened.translate_offset(o) for o in translations} == translations
            expected_max = _max_timestamp_and_offset(scenario.batches, scenario.base_offset)
            assert reopened.max_timestamp_and_offset_so_far == expected_max
            assert reopened.recover() == 0
            assert (index_file.read_bytes(), time_file.read_bytes()) == written
            assert files.log_file(directory, scenario.base_offset).read_bytes() == log_bytes
            assert {o: reopened.translate_offset(o) for o in translations} == translations
        finally:
            reopened.close()
        assert (index_file.read_bytes(), time_file.read_bytes()) == written
