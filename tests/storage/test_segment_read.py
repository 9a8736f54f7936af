"""The in-memory segment read (:mod:`kafkalog.storage.segment_read`) against the reference path.

``read_records`` must answer exactly as ``LogSegment.read`` followed by ``to_memory_records``: the same offset
metadata, the same bytes and the same ``first_entry_incomplete``, for every offset (in a batch, at its
boundaries, in a gap, past the end), every ``max_size`` (0, smaller than a header, smaller than a batch,
larger), every ``max_position`` (the end, None, mid-segment) and both ``min_one_message`` values. The
segments are random (hypothesis): batch sizes on both sides of the index interval, gaps, several batches
appended at once (one index entry for all of them), legacy entries. Then the cases of the fast path itself:
one ``pread`` per read when every batch has an index entry, and a segment closed (deleted) under a reader.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import KafkaStorageError
from kafkalog.records import MemoryRecords, MemoryRecordsBuilder
from kafkalog.storage import FetchDataInfo, FileRecords, LogSegment
from kafkalog.storage.segment import TO_SEGMENT_END
from kafkalog.storage.segment_read import SPECULATIVE_MAX, read_records

from .conftest import SegmentFactory, v1_records, v2_records

TS = 1_700_000_000_000


def _batch(base: int, count: int, value_size: int) -> bytes:
    builder = MemoryRecordsBuilder(base_offset=base)
    for i in range(count):
        builder.append_with_offset(base + i, TS + i, None, bytes([65 + (base + i) % 26]) * value_size)
    return builder.build().to_bytes()


# An append: a list of (count, value size, gap before) batches written with one ``LogSegment.append``.
appends_strategy = st.lists(
    st.lists(
        st.tuples(
            st.integers(1, 4), st.sampled_from([0, 10, 60, 200, 700]), st.sampled_from([0, 0, 0, 1, 5])
        ),
        min_size=1,
        max_size=3,
    ),
    min_size=0,
    max_size=12,
)


@contextmanager
def _segment(
    base_offset: int, interval: int, appends: list[list[tuple[int, int, int]]]
) -> Iterator[LogSegment]:
    directory = Path(tempfile.mkdtemp(prefix="kafkalog-segread-"))
    seg = LogSegment.open(directory, base_offset, index_interval_bytes=interval, max_index_size=4096)
    try:
        offset = base_offset
        for append in appends:
            data = b""
            for count, value_size, gap in append:
                offset += gap
                data += _batch(offset, count, value_size)
                offset += count
            seg.append(offset - 1, TS, offset - 1, MemoryRecords(data))
        yield seg
    finally:
        if not seg.log.closed:
            seg.close()
        shutil.rmtree(directory)


def _reference(
    seg: LogSegment, offset: int, max_size: int, max_position: int | None, min_one: bool
) -> FetchDataInfo | None:
    info = seg.read(offset, max_size, max_position, min_one)
    if info is None:
        return None
    records = info.records
    if isinstance(records, FileRecords):
        records = records.to_memory_records()
    return FetchDataInfo(info.fetch_offset_metadata, records, info.first_entry_incomplete, None)


def _same(got: FetchDataInfo | None, want: FetchDataInfo | None) -> None:
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got.fetch_offset_metadata == want.fetch_offset_metadata
    assert isinstance(got.records, MemoryRecords)
    assert bytes(got.records.buffer) == bytes(want.records.buffer)
    assert got.first_entry_incomplete == want.first_entry_incomplete
    assert got.aborted_transactions is None


def _check_all(seg: LogSegment, first: int, end_offset: int) -> None:
    sizes = sorted({b.size_in_bytes for b in seg.batches()})
    positions = [b.position for b in seg.batches()]
    max_sizes = {0, 1, 26, 27, 100, 1 << 20, *sizes, *(s - 1 for s in sizes), *(s + 1 for s in sizes)}
    max_positions: set[int | None] = {
        TO_SEGMENT_END,
        None,
        seg.size,
        *positions[:: max(1, len(positions) // 4)],
    }
    for offset in range(first, end_offset + 2):
        for max_size in max_sizes:
            for max_position in max_positions:
                for min_one in (False, True):
                    want = _reference(seg, offset, max_size, max_position, min_one)
                    got = read_records(seg, offset, max_size, max_position, min_one)
                    _same(got, want)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([0, 1000, 2**40]),
    st.sampled_from([0, 1, 100, 500, 4096]),
    appends_strategy,
)
def test_read_records_answers_like_read_then_to_memory(
    base_offset: int, interval: int, appends: list[list[tuple[int, int, int]]]
) -> None:
    with _segment(base_offset, interval, appends) as seg:
        last = max((b.last_offset for b in seg.batches()), default=base_offset)
        _check_all(seg, base_offset, last + 1)


def test_legacy_entries_take_the_reference_path(segments: SegmentFactory) -> None:
    seg = segments(40)
    seg.append(41, -1, -1, v1_records(40, "hello", "there"))
    seg.append(43, -1, -1, v1_records(42, "little", "bee"))
    seg.append(45, 450, 45, v2_records(44, "v2", "batch"))
    _check_all(seg, 40, 46)


def test_large_batches_read_in_one_pread(segments: SegmentFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches larger than the index interval each have an entry: one ``pread`` per read, header included."""
    seg = segments(0, index_interval_bytes=4096)
    offset = 0
    for _ in range(8):
        data = _batch(offset, 40, 400)
        seg.append(offset + 39, TS, offset + 39, MemoryRecords(data))
        offset += 40
    read_records(seg, 100, 1, TO_SEGMENT_END, True)  # load the index
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, pos: int) -> bytes:
        calls.append(n)
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", counting)
    batches = list(seg.batches())
    for batch in batches[1:]:  # the first batch has no index entry (the first append never adds one)
        for offset in (batch.base_offset, batch.base_offset + 17, batch.last_offset):
            calls.clear()
            info = read_records(seg, offset, 1, TO_SEGMENT_END, True)
            assert info is not None and info.records.size_in_bytes == batch.size_in_bytes
            assert info.fetch_offset_metadata.relative_position_in_segment == batch.position
            assert calls == [batch.size_in_bytes], offset
    # max_length smaller than the batch: the bytes asked for, the batch marked incomplete
    calls.clear()
    info = read_records(seg, batches[3].base_offset + 5, 100, TO_SEGMENT_END, False)
    assert info is not None and info.records.size_in_bytes == 100 and info.first_entry_incomplete
    assert calls == [100]
    # a 1 MiB fetch from a batch boundary reads from there to the end, in one read
    calls.clear()
    info = read_records(seg, batches[2].base_offset, 1 << 20, TO_SEGMENT_END, True)
    assert info is not None and info.records.size_in_bytes == seg.size - batches[2].position
    assert len(calls) == 2  # header first: more than SPECULATIVE_MAX is never read on a guess
    assert seg.size - batches[2].position <= SPECULATIVE_MAX or calls[0] == 27


def test_a_segment_closed_under_a_reader_is_a_storage_error(tmp_path: Path) -> None:
    """A deleted segment raises KafkaStorageError (``Log.read`` turns it into OffsetOutOfRangeError) and its
    index files are not created again by the read."""
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=1)
    for i in range(5):
        seg.append(i, TS, i, MemoryRecords(_batch(i, 1, 50)))
    assert read_records(seg, 3, 1, TO_SEGMENT_END, True) is not None
    seg.delete_if_exists()
    with pytest.raises(KafkaStorageError):
        read_records(seg, 3, 1, TO_SEGMENT_END, True)
    assert list(tmp_path.iterdir()) == []

    never_read = LogSegment.open(tmp_path, 10, index_interval_bytes=1)
    never_read.append(10, TS, 10, MemoryRecords(_batch(10, 1, 50)))
    never_read.close()
    reopened = LogSegment.open(tmp_path, 10, file_already_exists=True)
    reopened.delete_if_exists()
    with pytest.raises(KafkaStorageError):
        read_records(reopened, 10, 1, TO_SEGMENT_END, True)
    assert list(tmp_path.iterdir()) == []


def test_sparse_index_and_unloaded_index(tmp_path: Path) -> None:
    """Entries further apart than SPECULATIVE_MAX (a large ``index.interval.bytes``), and the first read of a
    reopened segment (its index not loaded yet), answer like the reference path."""
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=SPECULATIVE_MAX * 2)
    offset = 0
    while seg.size < SPECULATIVE_MAX * 5:
        seg.append(offset + 9, TS, offset + 9, MemoryRecords(_batch(offset, 10, 90)))
        offset += 10
    seg.close()
    reopened = LogSegment.open(
        tmp_path, 0, index_interval_bytes=SPECULATIVE_MAX * 2, file_already_exists=True
    )
    try:
        assert not reopened.indexes_loaded
        probes = [0, 1, 9, 10, offset // 3, offset // 2 + 5, offset - 11, offset - 1, offset, offset + 1]
        for i, probe in enumerate(probes):
            for max_size, min_one in ((1, True), (1, False), (1 << 20, False), (300, True)):
                want = _reference(reopened, probe, max_size, TO_SEGMENT_END, min_one)
                if i == 0 and max_size == 1 and min_one:
                    reopened.close()  # unload: the fast path must load the index itself
                    reopened = LogSegment.open(
                        tmp_path, 0, index_interval_bytes=SPECULATIVE_MAX * 2, file_already_exists=True
                    )
                _same(read_records(reopened, probe, max_size, TO_SEGMENT_END, min_one), want)
        assert reopened.offset_index.entries >= 2
    finally:
        reopened.close()
