"""Kafka's ``FileRecordsTest`` scenarios, with the same numbers, against :class:`kafkalog.storage.FileRecords`.

Ported (``clients/src/test/java/org/apache/kafka/common/record/FileRecordsTest.java``, 3.9 and trunk):
testAppendProtectsFromOverflow, testOpenOversizeFile (with sparse files of 2**31 - 1 and 2**31 + 4 bytes instead
of a mocked channel size), testOutOfRangeSlice, testFileSize, testIterationOverPartialAndTruncation,
testSliceSizeLimitWithConcurrentWrite, testIterationDoesntChangePosition, testRead, testSearch,
testIteratorWithLimits, testTruncate, testTruncateNotCalledIfSizeIsSameAsTargetSize /
...IfSizeIsBiggerThanTargetSize / testTruncateIfSizeIsDifferentToTargetSize (``os.ftruncate`` is watched
instead of a mocked FileChannel, on a real 42-byte file), testPreallocateTrue, testPreallocateFalse,
testPreallocateClearShutdown, testSearchForTimestamp (magic 0, 1 and 2; the legacy entries are built with
kafka-python's encoder), testSliceForAlreadySlicedFileRecords, testSearchForOffsetFromPosition1..7 (trunk,
KAFKA-18989: real batches with the mocks' offset ranges instead of mocked batches; the mocks' "lastOffset() is
(not) called" checks are about Kafka's implementation and are not ported).

Skipped: testConversion, testFormatConversionWithPartialMessage, testDownconversionAfterMessageFormatDowngrade,
testFormatConversionWithNoMessages (down-conversion to magic 0/1 — kafkalog never writes legacy formats),
testBytesLengthOfWriteTo (``writeTo``/``transferTo`` into a network channel — no sendfile API here).

``LogOffsetPosition.offset`` is the batch's **last** offset, as in Kafka 3.9 (the reference snapshot);
trunk's KAFKA-17803 changed it to the base offset. The batches of these scenarios hold one record each, so the
numbers are the same either way, except in the KAFKA-18989 scenarios, where the expected offset is written as
the batch's last offset.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.errors import KafkaError
from kafkalog.records import MemoryRecords, MemoryRecordsBuilder, Record, RecordBatch
from kafkalog.storage import FileRecords, LogOffsetPosition, TimestampAndOffset

VALUES = [b"abcd", b"efgh", b"ijkl"]
TS = 1_700_000_000_000
MB = 1024 * 1024


def _append(fr: FileRecords, values: list[bytes]) -> None:
    """Kafka's helper: one single-record v2 batch per value, at offsets 0, 1, 2, ..."""
    for offset, value in enumerate(values):
        builder = MemoryRecordsBuilder(base_offset=offset)
        builder.append_with_offset(offset, TS, None, value)
        fr.append(builder.build())
    fr.flush()


def _values(records: FileRecords) -> list[bytes | None]:
    """The record values (``FileRecords.records()`` is typed as yielding ``object``)."""
    found = list(records.records())
    assert all(isinstance(r, Record) for r in found)
    return [r.value for r in found]  # type: ignore[attr-defined]


def _batches(records: FileRecords | MemoryRecords) -> list[bytes]:
    return [b.to_bytes() for b in records.batches()]


@pytest.fixture
def file_records(tmp_path: Path) -> Iterator[FileRecords]:
    fr = FileRecords.open(tmp_path / "records.log")
    _append(fr, VALUES)
    yield fr
    fr.close()


def test_append_protects_from_overflow(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    with open(path, "wb") as f:
        f.truncate(2**31 - 1)  # sparse
    fr = FileRecords.open(path, file_already_exists=True)
    try:
        assert fr.size_in_bytes == 2**31 - 1
        with pytest.raises(ValueError):
            _append(fr, VALUES)
    finally:
        fr.close_handlers()


def test_open_oversize_file(tmp_path: Path) -> None:
    path = tmp_path / "oversize.log"
    with open(path, "wb") as f:
        f.truncate(2**31 - 1 + 5)
    with pytest.raises(KafkaError):
        FileRecords.open(path, file_already_exists=True)


def test_out_of_range_slice(file_records: FileRecords) -> None:
    with pytest.raises(ValueError):
        file_records.slice(file_records.size_in_bytes + 1, 15)


def test_file_size(file_records: FileRecords) -> None:
    assert file_records.path.stat().st_size == file_records.size_in_bytes
    for _ in range(20):
        file_records.append(MemoryRecords.build([b"abcd"], now_ms=TS))
        assert file_records.path.stat().st_size == file_records.size_in_bytes


def test_iteration_over_partial_and_truncation(file_records: FileRecords) -> None:
    """Zero bytes written past the batches (a torn write) never show up as records."""
    for size in (0, 2, 4, 5, 6):
        with open(file_records.path, "ab") as f:
            f.write(bytes(size))
        assert _values(file_records) == VALUES
        # Opened again, the file's length includes the zeros: the walk must still stop quietly.
        again = FileRecords.open(file_records.path, file_already_exists=True)
        try:
            assert _values(again) == VALUES
        finally:
            again.close_handlers()


def test_slice_size_limit_with_concurrent_write(tmp_path: Path) -> None:
    log = FileRecords.open(tmp_path / "concurrent.log")
    max_size = 16384
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while log.size_in_bytes < max_size:
                current = log.size_in_bytes
                assert log.slice(0, current).size_in_bytes == current
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def writer() -> None:
        while log.size_in_bytes < max_size:
            _append(log, VALUES)

    threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    log.close()
    assert not errors


def test_iteration_doesnt_change_position(file_records: FileRecords) -> None:
    """Reads are positional (``pread``): iterating changes neither the logical size nor where appends go."""
    size = file_records.size_in_bytes
    assert _values(file_records) == VALUES
    assert file_records.size_in_bytes == size
    file_records.append(MemoryRecords.build([b"mnop"], base_offset=3, now_ms=TS))
    assert _values(file_records) == [*VALUES, b"mnop"]
    assert file_records.path.stat().st_size == file_records.size_in_bytes


def test_read(file_records: FileRecords) -> None:
    size = file_records.size_in_bytes
    read = file_records.slice(0, size)
    assert read.size_in_bytes == size
    assert _batches(read) == _batches(file_records)

    items = list(read.batches())
    first = items[0]
    rest = [b.to_bytes() for b in items[1:]]

    # from the second message to the end
    read = file_records.slice(first.size_in_bytes, size - first.size_in_bytes)
    assert read.size_in_bytes == size - first.size_in_bytes
    assert _batches(read) == rest

    # size past the end of the file
    read = file_records.slice(first.size_in_bytes, size)
    assert read.size_in_bytes == size - first.size_in_bytes
    assert _batches(read) == rest

    # position + size overflows an int32
    read = file_records.slice(first.size_in_bytes, 2**31 - 1)
    assert read.size_in_bytes == size - first.size_in_bytes
    assert _batches(read) == rest

    # size past the end, on a slice of a slice
    read = file_records.slice(1, size - 1).slice(first.size_in_bytes - 1, size)
    assert read.size_in_bytes == size - first.size_in_bytes
    assert _batches(read) == rest

    # position + size overflows, on a slice of a slice
    read = file_records.slice(1, size - 1).slice(first.size_in_bytes - 1, 2**31 - 1)
    assert read.size_in_bytes == size - first.size_in_bytes
    assert _batches(read) == rest

    # a single message, starting from the second
    second = items[1]
    read = file_records.slice(first.size_in_bytes, second.size_in_bytes)
    assert read.size_in_bytes == second.size_in_bytes
    assert _batches(read) == [second.to_bytes()]


def test_search(file_records: FileRecords) -> None:
    file_records.append(MemoryRecords.build([b"test"], base_offset=50, now_ms=TS))
    batches = list(file_records.batches())
    position = 0

    size1 = batches[0].size_in_bytes
    assert file_records.search_for_offset_with_size(0, 0) == LogOffsetPosition(0, position, size1)
    position += size1

    size2 = batches[1].size_in_bytes
    assert file_records.search_for_offset_with_size(1, 0) == LogOffsetPosition(1, position, size2)
    assert file_records.search_for_offset_with_size(1, position) == LogOffsetPosition(1, position, size2)
    position += size2 + batches[2].size_in_bytes

    size4 = batches[3].size_in_bytes
    assert file_records.search_for_offset_with_size(3, position) == LogOffsetPosition(50, position, size4)
    assert file_records.search_for_offset_with_size(50, position) == LogOffsetPosition(50, position, size4)


def test_iterator_with_limits(file_records: FileRecords) -> None:
    batch = list(file_records.batches())[1]
    found = file_records.search_for_offset_with_size(1, 0)
    assert found is not None
    start = found.position
    size = batch.size_in_bytes
    assert _batches(file_records.slice(start, size)) == [batch.to_bytes()]
    assert _batches(file_records.slice(start, size - 1)) == []


def test_truncate(file_records: FileRecords) -> None:
    batch = next(file_records.batches())
    found = file_records.search_for_offset_with_size(1, 0)
    assert found is not None
    file_records.truncate_to(found.position)
    assert _batches(file_records) == [batch.to_bytes()]
    assert file_records.size_in_bytes == batch.size_in_bytes
    assert file_records.path.stat().st_size == batch.size_in_bytes


@pytest.fixture
def file_of_42_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FileRecords, list[int]]]:
    """Kafka's mocked channel of size 42, as a real file; every ``os.ftruncate`` length is recorded."""
    path = tmp_path / "fortytwo.log"
    path.write_bytes(bytes(42))
    fr = FileRecords.open(path, file_already_exists=True)
    calls: list[int] = []
    real = os.ftruncate

    def watched(fd: int, length: int) -> None:
        calls.append(length)
        real(fd, length)

    monkeypatch.setattr(os, "ftruncate", watched)
    yield fr, calls
    fr.close_handlers()


def test_truncate_not_called_if_size_is_same_as_target_size(
    file_of_42_bytes: tuple[FileRecords, list[int]],
) -> None:
    fr, calls = file_of_42_bytes
    assert fr.truncate_to(42) == 0
    assert calls == []


def test_truncate_not_called_if_size_is_bigger_than_target_size(
    file_of_42_bytes: tuple[FileRecords, list[int]],
) -> None:
    fr, calls = file_of_42_bytes
    with pytest.raises(KafkaError):
        fr.truncate_to(43)
    assert calls == []


def test_truncate_if_size_is_different_to_target_size(
    file_of_42_bytes: tuple[FileRecords, list[int]],
) -> None:
    fr, calls = file_of_42_bytes
    assert fr.truncate_to(23) == 42 - 23
    assert calls == [23]
    assert fr.path.stat().st_size == 23


def test_preallocate_true(tmp_path: Path) -> None:
    path = tmp_path / "pre.log"
    fr = FileRecords.open(path, file_already_exists=False, init_file_size=MB, preallocate=True)
    try:
        assert fr.size_in_bytes == 0
        assert path.stat().st_size == MB
    finally:
        fr.close_handlers()


def test_preallocate_false(tmp_path: Path) -> None:
    path = tmp_path / "nopre.log"
    fr = FileRecords.open(path, file_already_exists=False, init_file_size=MB, preallocate=False)
    try:
        assert fr.size_in_bytes == 0
        assert path.stat().st_size == 0
    finally:
        fr.close()


def test_preallocate_clear_shutdown(tmp_path: Path, file_records: FileRecords) -> None:
    path = tmp_path / "pre.log"
    fr = FileRecords.open(path, file_already_exists=False, init_file_size=MB, preallocate=True)
    _append(fr, VALUES)
    old_size = fr.size_in_bytes
    assert old_size == file_records.size_in_bytes
    assert path.stat().st_size == MB
    fr.close()

    reopened = FileRecords.open(path, file_already_exists=True, init_file_size=MB, preallocate=True)
    try:
        assert reopened.size_in_bytes == old_size
        assert path.stat().st_size == old_size
        assert _values(reopened) == VALUES
    finally:
        reopened.close()


def _append_with_offset_and_timestamp(
    fr: FileRecords, magic: int, timestamp: int, offset: int, epoch: int
) -> None:
    if magic == 2:
        builder = MemoryRecordsBuilder(base_offset=offset, partition_leader_epoch=epoch)
        builder.append_with_offset(offset, timestamp, b"", b"")
        fr.append(builder.build())
    else:
        legacy = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 10)
        legacy.append(offset, timestamp if magic == 1 else None, b"", b"")
        fr.append(MemoryRecords(bytes(legacy.build())))


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_search_for_timestamp(tmp_path: Path, magic: int) -> None:
    fr = FileRecords.open(tmp_path / "ts.log", file_already_exists=False, init_file_size=MB, preallocate=True)
    try:
        _append_with_offset_and_timestamp(fr, magic, 10, 5, 0)
        _append_with_offset_and_timestamp(fr, magic, 11, 6, 1)

        def expected(ts: int, offset: int, epoch: int) -> TimestampAndOffset | None:
            if magic == 0:
                return None  # no timestamps in magic 0
            return TimestampAndOffset(ts, offset, epoch if magic >= 2 else None)

        assert fr.search_for_timestamp(9, 0, 0) == expected(10, 5, 0)
        assert fr.search_for_timestamp(10, 0, 0) == expected(10, 5, 0)
        assert fr.search_for_timestamp(11, 0, 0) == expected(11, 6, 1)
        assert fr.search_for_timestamp(12, 0, 0) is None
    finally:
        fr.close()


def test_slice_for_already_sliced_file_records(tmp_path: Path) -> None:
    values = [b"abcd", b"efgh", b"ijkl", b"mnopqr", b"stuv"]
    fr = FileRecords.open(tmp_path / "five.log")
    try:
        _append(fr, values)
        items = list(fr.slice(0, fr.size_in_bytes).batches())

        # From the fourth message to the end.
        position = sum(items[i].size_in_bytes for i in range(3))
        sliced = fr.slice(position, fr.size_in_bytes - position)
        assert sliced.size_in_bytes == fr.size_in_bytes - position
        assert _batches(sliced) == [b.to_bytes() for b in items[3:]]

        # Slicing the slice from its second message: fewer bytes are left in it than the first cut moved.
        position = items[3].size_in_bytes
        final = sliced.slice(position, sliced.size_in_bytes - position)
        assert final.size_in_bytes == sliced.size_in_bytes - position
        assert _batches(final) == [b.to_bytes() for b in items[4:]]
        assert _values(final) == [b"stuv"]
    finally:
        fr.close()


# --- KAFKA-18989: which batch searchForOffsetFromPosition returns ---------------------------------------------


def _file_with_batches(
    tmp_path: Path, ranges: list[tuple[int, int]]
) -> tuple[FileRecords, list[RecordBatch]]:
    fr = FileRecords.open(tmp_path / "ranges.log")
    for base, last in ranges:
        builder = MemoryRecordsBuilder(base_offset=base)
        for offset in range(base, last + 1):
            builder.append_with_offset(offset, TS, None, b"v")
        fr.append(builder.build())
    return fr, list(fr.batches())


def _position_of(batch: RecordBatch) -> LogOffsetPosition:
    return LogOffsetPosition(batch.last_offset, batch.position, batch.size_in_bytes)


@pytest.mark.parametrize("base_offset", [5, 10])
def test_search_for_offset_from_position_1(tmp_path: Path, base_offset: int) -> None:
    """The target is at or below the first batch's base offset: the first batch."""
    fr, (batch,) = _file_with_batches(tmp_path, [(base_offset, base_offset)])
    assert fr.search_for_offset_with_size(5, 0) == _position_of(batch)
    fr.close()


def test_search_for_offset_from_position_2(tmp_path: Path) -> None:
    """The target is the last offset of the first batch."""
    fr, (batch,) = _file_with_batches(tmp_path, [(3, 5)])
    assert fr.search_for_offset_with_size(5, 0) == _position_of(batch)
    fr.close()


def test_search_for_offset_from_position_3(tmp_path: Path) -> None:
    """The target is the last offset of the last batch."""
    fr, (_, current) = _file_with_batches(tmp_path, [(5, 12), (15, 20)])
    assert fr.search_for_offset_with_size(20, 0) == _position_of(current)
    fr.close()


def test_search_for_offset_from_position_4(tmp_path: Path) -> None:
    """The target is inside the previous batch."""
    fr, (prev, _) = _file_with_batches(tmp_path, [(5, 12), (15, 20)])
    assert fr.search_for_offset_with_size(10, 0) == _position_of(prev)
    fr.close()


def test_search_for_offset_from_position_5(tmp_path: Path) -> None:
    """No batch reaches the target."""
    fr, _ = _file_with_batches(tmp_path, [(5, 7), (8, 9)])
    assert fr.search_for_offset_with_size(10, 0) is None
    fr.close()


@pytest.mark.parametrize("base_offset", [8, 10])
def test_search_for_offset_from_position_6(tmp_path: Path, base_offset: int) -> None:
    """The target is below or at the base offset of the last batch, which ends after it."""
    fr, (_, last) = _file_with_batches(tmp_path, [(5, 7), (base_offset, 12)])
    assert fr.search_for_offset_with_size(10, 0) == _position_of(last)
    fr.close()


def test_search_for_offset_from_position_7(tmp_path: Path) -> None:
    """The target falls in the gap between two batches: the later one."""
    fr, (_, second) = _file_with_batches(tmp_path, [(5, 10), (15, 20)])
    assert fr.search_for_offset_with_size(13, 0) == _position_of(second)
    fr.close()


# --- more of the file contract -------------------------------------------------------------------------------


def test_largest_timestamp_after(tmp_path: Path) -> None:
    fr = FileRecords.open(tmp_path / "largest.log")
    try:
        for offset, ts in [(0, 100), (1, 300), (2, 200), (3, 300)]:
            builder = MemoryRecordsBuilder(base_offset=offset)
            builder.append_with_offset(offset, ts, None, b"v")
            fr.append(builder.build())
        positions = [b.position for b in fr.batches()]
        assert fr.largest_timestamp_after(0) == (300, 1), "the first batch holding the max wins"
        assert fr.largest_timestamp_after(positions[2]) == (300, 3)
        assert fr.largest_timestamp_after(fr.size_in_bytes) == (-1, -1)
    finally:
        fr.close()


def test_slice_is_a_view_until_read(file_records: FileRecords) -> None:
    """Records appended after a slice was taken are not part of it; the slice reads the file lazily."""
    view = file_records.slice(0, 2**31 - 1)
    size = view.size_in_bytes
    file_records.append(MemoryRecords.build([b"late"], base_offset=3, now_ms=TS))
    assert view.size_in_bytes == size
    assert _values(view) == VALUES
    assert isinstance(next(iter(view.records())), Record)


def _reference_search(data: bytes, target: int) -> LogOffsetPosition | str | None:
    """``search_for_offset_with_size`` from position 0 written with ``next_frame``, the one framing rule (a file's
    rule: magic >= 2 is v2); ``"corrupt@N"`` where it must raise."""
    import struct

    from kafkalog.records.framing import CorruptFrame, frame_magic, is_v2_magic, next_frame

    pos = 0
    while True:
        frame = next_frame(data, pos)
        if isinstance(frame, CorruptFrame):
            return f"corrupt@{pos}"
        if not isinstance(frame, int):
            return None
        last = struct.unpack_from(">q", data, pos)[0]
        if is_v2_magic(frame_magic(data, pos)) and frame >= 27:
            last += struct.unpack_from(">i", data, pos + 23)[0]
        if last >= target:
            return LogOffsetPosition(last, pos, frame)
        pos += frame


_ENTRY = st.tuples(
    st.integers(-3, 40),  # base offset
    st.one_of(st.integers(-2, 70), st.sampled_from([-(2**31), 2**31 - 1])),  # batchLength
    st.sampled_from([-128, -1, 0, 1, 2, 3, 127]),  # magic
    st.integers(-2, 3),  # lastOffsetDelta
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_ENTRY, max_size=6), tail=st.binary(max_size=30), target=st.integers(-3, 45))
def test_offset_search_frames_as_next_frame(
    tmp_path: Path, entries: list[tuple[int, int, int, int]], tail: bytes, target: int
) -> None:
    """The offset search keeps an inlined copy of ``next_frame`` (it runs per batch); on any file, valid or not
    (sizes below 14, past the end, every kind of magic, partial tails), it answers as the rule does."""
    import struct

    data = b"".join(
        struct.pack(">qiibIhi", base, length, -1, magic, 0, 0, delta)
        + bytes(max(0, min(length, 70) + 12 - 27))
        for base, length, magic, delta in entries
    )
    data += tail
    path = tmp_path / "search.log"
    path.write_bytes(data)
    records = FileRecords.open(path, file_already_exists=True, mutable=False)
    try:
        want = _reference_search(data, target)
        if isinstance(want, str):
            with pytest.raises(KafkaError) as info:
                records.search_for_offset_with_size(target, 0)
            assert f"corrupt@{info.value.position}" == want
        else:
            assert records.search_for_offset_with_size(target, 0) == want
    finally:
        records.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(_ENTRY, min_size=1, max_size=4), tail=st.binary(max_size=30), cut=st.integers(0, 400))
def test_batch_range_at_frames_as_next_frame(
    tmp_path: Path, entries: list[tuple[int, int, int, int]], tail: bytes, cut: int
) -> None:
    """``batch_range_at`` (every offset lookup calls it) keeps an inlined copy of ``next_frame``: at any
    position of any file it gives a range exactly when the rule frames a complete v2 batch there."""
    import struct

    from kafkalog.records.framing import LAST_OFFSET_DELTA_OFFSET, frame_magic, is_v2_magic, next_frame

    data = b"".join(
        struct.pack(">qiibIhi", base, length, -1, magic, 0, 0, delta)
        + bytes(max(0, min(length, 70) + 12 - 27))
        for base, length, magic, delta in entries
    )
    data = (data + tail)[: max(cut, 0)] if cut < len(data) + len(tail) else data + tail
    path = tmp_path / "range.log"
    path.write_bytes(data)
    records = FileRecords.open(path, file_already_exists=True, mutable=False)
    try:
        for position in range(len(data) + 1):
            got = records.batch_range_at(position)
            want = None
            if len(data) - position >= 27:
                frame = next_frame(data, position, len(data))
                if type(frame) is int and frame >= 27 and is_v2_magic(frame_magic(data, position)):
                    base = struct.unpack_from(">q", data, position)[0]
                    last = base + struct.unpack_from(">i", data, position + LAST_OFFSET_DELTA_OFFSET)[0]
                    want = (base, last, frame)
            assert got == want, position
    finally:
        records.close()
