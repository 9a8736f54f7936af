"""Deferred index writes (``kafkalog.storage.index``): appended entries wait in memory and reach the file in
one ``pwrite`` when :data:`~kafkalog.storage.index.PENDING_ENTRIES` are pending, or before anything that
syncs, resizes, truncates, renames, closes or exposes the file; the first entry of an empty index is written
at once.

Pinned here:

* lookups see an entry as soon as it is appended;
* after every one of those points the file's bytes are exactly what a write-through index (the previous
  implementation, and Kafka's mapping) leaves: a reference model packs entries with ``>ii`` / ``>qi``;
* a process that dies before a flush leaves an index file that lags its ``.log``: recovery (no clean-shutdown
  marker) rebuilds it, identical to the one the writer had in memory, and no record is lost; a read-only
  reader of the live directory only scans further.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.log import Log
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE
from kafkalog.readonly.log import ReadOnlyLog
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage import LogSegment, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset, files
from kafkalog.storage.index import PENDING_ENTRIES

OFFSET = struct.Struct(">ii")
TIME = struct.Struct(">qi")
BASE = 100
MAX_BYTES = 8 * 1200  # 1200 offset-index slots, 800 time-index slots: several pending rounds fit


def _offset_bytes(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(OFFSET.pack(o - BASE, p) for o, p in entries)


def _time_bytes(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(TIME.pack(t, o - BASE) for t, o in entries)


def _fill_offsets(idx: OffsetIndex, n: int, start: int = 0) -> list[tuple[int, int]]:
    entries = [(BASE + 3 * i + 1, 100 * i) for i in range(start, start + n)]
    for offset, position in entries:
        idx.append(offset, position)
    return entries


def _fill_times(idx: TimeIndex, n: int, start: int = 0) -> list[tuple[int, int]]:
    entries = [(1_000 + 10 * i, BASE + 3 * i) for i in range(start, start + n)]
    for timestamp, offset in entries:
        idx.maybe_append(timestamp, offset)
    return entries


@pytest.fixture
def oidx(tmp_path: Path) -> OffsetIndex:
    idx = OffsetIndex(tmp_path / f"{BASE:020d}.index", BASE, MAX_BYTES)
    idx.load()
    return idx


@pytest.fixture
def tidx(tmp_path: Path) -> TimeIndex:
    idx = TimeIndex(tmp_path / f"{BASE:020d}.timeindex", BASE, MAX_BYTES)
    idx.load()
    return idx


# --- deferral and lookups ---------------------------------------------------------------------------------


def test_entries_wait_in_memory_until_a_batch_is_full(oidx: OffsetIndex) -> None:
    first = _fill_offsets(oidx, 1)
    data = oidx.path.read_bytes()
    assert data == _offset_bytes(first) + bytes(MAX_BYTES - 8), "the first entry is written at once"
    entries = first + _fill_offsets(oidx, PENDING_ENTRIES, start=1)
    assert oidx.path.read_bytes() == data, "no write yet: PENDING_ENTRIES pending"
    more = _fill_offsets(oidx, 5, start=PENDING_ENTRIES + 1)
    data = oidx.path.read_bytes()
    written = 8 * (PENDING_ENTRIES + 1)
    assert data[:written] == _offset_bytes(entries), "one write of the full batch"
    assert data[written:] == bytes(MAX_BYTES - written), "the rest still pending"
    oidx.flush()
    assert oidx.path.read_bytes()[: written + 40] == _offset_bytes(entries + more)


def test_first_entry_of_an_empty_index_is_written_at_once(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    """A live file with entries never starts with an empty slot (readers take slot 0 as an entry)."""
    entries = _fill_offsets(oidx, 3)
    times = _fill_times(tidx, 3)
    assert oidx.path.read_bytes()[:24] == _offset_bytes(entries[:1]) + bytes(16)
    assert tidx.path.read_bytes()[:36] == _time_bytes(times[:1]) + bytes(24)
    oidx.truncate_to(BASE)  # empty again (the slots keep their bytes)
    again = _fill_offsets(oidx, 2, start=10)
    assert oidx.path.read_bytes()[:24] == _offset_bytes([again[0], entries[1], entries[2]])
    oidx.reset()
    bulk = [(BASE + 1 + i, 10 * i) for i in range(4)]
    oidx.append_many([o for o, _ in bulk], [p for _, p in bulk])
    assert oidx.path.read_bytes()[:40] == _offset_bytes(bulk) + bytes(8), "a first bulk append too"


def test_lookups_see_pending_entries_at_once(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    entries = _fill_offsets(oidx, 10)
    times = _fill_times(tidx, 10)
    assert oidx.path.read_bytes()[8:] == bytes(MAX_BYTES - 8), "only the first entry is written"
    assert tidx.path.read_bytes()[12:] == bytes(tidx.max_entries * 12 - 12)
    assert oidx.entries == 10 and oidx.last_offset == entries[-1][0]
    assert oidx.lookup(entries[4][0] + 1) == OffsetPosition(*entries[4])
    assert oidx.lookup_upper(entries[4][0] + 1) == OffsetPosition(*entries[5])
    assert oidx.entry(9) == OffsetPosition(*entries[9])
    assert oidx.fetch_upper_bound_offset(OffsetPosition(BASE, 0), 250) == OffsetPosition(*entries[3])
    assert oidx.bracket(entries[6][0]) == (entries[5][1], entries[6][1], entries[7][1] - entries[6][1])
    assert tidx.entries == 10 and tidx.last_entry() == TimestampOffset(*times[-1])
    assert tidx.lookup(times[3][0] + 5) == TimestampOffset(*times[3])
    assert tidx.entry(7) == TimestampOffset(*times[7])


@pytest.mark.parametrize(
    "count", [1, PENDING_ENTRIES - 1, PENDING_ENTRIES, PENDING_ENTRIES + 1, 3 * PENDING_ENTRIES + 7]
)
@pytest.mark.parametrize("point", ["flush", "close", "trim", "length", "size_in_bytes", "sanity_check"])
def test_sync_points_leave_write_through_bytes(
    oidx: OffsetIndex, tidx: TimeIndex, count: int, point: str
) -> None:
    entries = _fill_offsets(oidx, count)
    times = _fill_times(tidx, min(count, tidx.max_entries - 1))
    tlen = tidx.max_entries * 12
    for idx in (oidx, tidx):
        if point == "flush":
            idx.flush()
        elif point == "close":
            idx.close()
        elif point == "trim":
            idx.trim_to_valid_size()
        elif point == "length":
            _ = idx.length
        elif point == "size_in_bytes":
            _ = idx.size_in_bytes
        else:
            idx.sanity_check()
    odata, tdata = oidx.path.read_bytes(), tidx.path.read_bytes()
    if point in ("close", "trim"):
        assert odata == _offset_bytes(entries)
        assert tdata == _time_bytes(times)
    else:
        assert odata == _offset_bytes(entries) + bytes(MAX_BYTES - 8 * len(entries))
        assert tdata == _time_bytes(times) + bytes(tlen - 12 * len(times))


def test_bulk_appends_are_deferred_too(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    first = [(BASE + i + 1, 10 * i) for i in range(2)]
    oidx.append_many([o for o, _ in first], [p for _, p in first])
    assert oidx.path.read_bytes()[:24] == _offset_bytes(first) + bytes(8), "into an empty index: at once"
    few = [(BASE + i + 1, 10 * i) for i in range(2, 5)]
    oidx.append_many([o for o, _ in few], [p for _, p in few])
    assert oidx.path.read_bytes()[16:] == bytes(MAX_BYTES - 16), "pending"
    few = first + few
    many = [(BASE + 10 + i, 100 + 10 * i) for i in range(2 * PENDING_ENTRIES)]
    oidx.append_many([o for o, _ in many], [p for _, p in many])
    assert oidx.path.read_bytes()[: 8 * len(few + many)] == _offset_bytes(few + many), (
        "over the limit: written"
    )
    times = [(1_000 + i, BASE + i) for i in range(7)]
    tidx.append_many([t for t, _ in times], [o for _, o in times])
    assert oidx.lookup(BASE + 3) == OffsetPosition(BASE + 3, 20) and tidx.last_entry() == TimestampOffset(
        *times[-1]
    )
    tidx.close()
    assert tidx.path.read_bytes() == _time_bytes(times)


# --- truncation, resize, rename, reset, delete with pending entries ---------------------------------------


def test_truncate_to_with_pending_entries(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    written = _fill_offsets(oidx, PENDING_ENTRIES + 2)  # PENDING_ENTRIES + 1 written, 1 pending
    pending = _fill_offsets(oidx, 9, start=PENDING_ENTRIES + 2)
    everything = written + pending
    cut = everything[PENDING_ENTRIES + 4][0]  # inside the pending entries
    oidx.truncate_to(cut)
    kept = [e for e in everything if e[0] < cut]
    assert oidx.entries == len(kept) and oidx.last_offset == kept[-1][0]
    assert oidx.lookup(cut + 100) == OffsetPosition(*kept[-1])
    # As with write-through (and Kafka's mapping), the truncated slots keep their bytes until overwritten.
    data = oidx.path.read_bytes()
    assert data[: 8 * len(everything)] == _offset_bytes(everything)
    # New entries overwrite the truncated slots.
    fresh = [(cut + 1000 + i, 50_000 + i) for i in range(3)]
    for offset, position in fresh:
        oidx.append(offset, position)
    oidx.flush()
    data = oidx.path.read_bytes()
    assert data[: 8 * len(everything)] == _offset_bytes(kept + fresh + everything[len(kept) + 3 :])
    oidx.close()
    assert oidx.path.read_bytes() == _offset_bytes(kept + fresh)

    times = _fill_times(tidx, 20)
    tidx.truncate_to(times[12][1])
    assert tidx.entries == 12 and tidx.last_entry() == TimestampOffset(*times[11])
    assert tidx.path.read_bytes()[: 12 * 20] == _time_bytes(times)
    tidx.close()
    assert tidx.path.read_bytes() == _time_bytes(times[:12])


def test_truncate_to_everything_pending(oidx: OffsetIndex) -> None:
    entries = _fill_offsets(oidx, 10)
    oidx.truncate_to(BASE)
    assert oidx.entries == 0 and oidx.lookup(10**6) == OffsetPosition(BASE, 0)
    assert oidx.path.read_bytes()[:80] == _offset_bytes(entries)
    oidx.close()
    assert oidx.path.read_bytes() == b""


def test_resize_with_pending_entries(oidx: OffsetIndex) -> None:
    entries = _fill_offsets(oidx, 20)
    assert oidx.resize(MAX_BYTES + 80) is True
    assert oidx.path.read_bytes() == _offset_bytes(entries) + bytes(MAX_BYTES + 80 - 160)
    more = _fill_offsets(oidx, 5, start=20)
    assert oidx.resize(8 * 22 + 3) is True, "shrinks below the entries: they are cut"
    assert oidx.entries == 22 and oidx.max_entries == 22 and oidx.is_full()
    assert oidx.path.read_bytes() == _offset_bytes((entries + more)[:22])
    assert oidx.lookup(10**6) == OffsetPosition(*(entries + more)[21])
    assert oidx.resize(8 * 22) is False
    assert oidx.resize(MAX_BYTES) is True
    again = _fill_offsets(oidx, 3, start=40)
    oidx.trim_to_valid_size()
    assert oidx.path.read_bytes() == _offset_bytes((entries + more)[:22] + again)


def test_time_index_grows_for_the_reserved_entry_with_pending_entries(tmp_path: Path) -> None:
    """KAFKA-19200 (skip_full_check on a full file): the resize it does keeps the pending entries."""
    idx = TimeIndex(tmp_path / "0.timeindex", 0, 12 * 10)
    idx.load()
    times = [(1_000 + i, i) for i in range(9)]
    for timestamp, offset in times:
        idx.maybe_append(timestamp, offset)
    assert idx.is_full()
    idx.maybe_append(2_000, 20, skip_full_check=True)
    idx.maybe_append(3_000, 30, skip_full_check=True)  # beyond the file: it grows by one entry
    assert idx.entries == 11 and idx.length == 12 * 11
    assert idx.path.read_bytes() == _time_bytes([(t, o + BASE) for t, o in [*times, (2000, 20), (3000, 30)]])


def test_rename_with_pending_entries(oidx: OffsetIndex, tidx: TimeIndex, tmp_path: Path) -> None:
    entries = _fill_offsets(oidx, 7)
    times = _fill_times(tidx, 7)
    new_oi = tmp_path / (oidx.path.name + ".deleted")
    new_ti = tmp_path / (tidx.path.name + ".deleted")
    oidx.rename_to(new_oi)
    tidx.rename_to(new_ti)
    assert new_oi.read_bytes()[:56] == _offset_bytes(entries), "written before the rename"
    assert new_ti.read_bytes()[:84] == _time_bytes(times)
    more = _fill_offsets(oidx, 2, start=7)
    oidx.close()
    tidx.close()
    assert new_oi.read_bytes() == _offset_bytes(entries + more)
    assert new_ti.read_bytes() == _time_bytes(times)


def test_segment_suffix_change_with_pending_entries(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=0, max_index_size=4096)
    for offset in range(10):
        seg.append(offset, 1_000 + offset, offset, _batch(offset, 1_000 + offset))
    expected = [(seg.offset_index.entry(i).offset, seg.offset_index.entry(i).position) for i in range(9)]
    seg.change_file_suffixes("", ".deleted")
    index_file = files.offset_index_file(tmp_path, 0, ".deleted")
    assert index_file.read_bytes()[:72] == b"".join(OFFSET.pack(o, p) for o, p in expected)
    seg.close()
    assert index_file.read_bytes() == b"".join(OFFSET.pack(o, p) for o, p in expected)


def test_reset_and_delete_drop_pending_entries(oidx: OffsetIndex, tidx: TimeIndex) -> None:
    _fill_offsets(oidx, 10)
    oidx.reset()
    assert oidx.entries == 0 and oidx.path.read_bytes() == bytes(MAX_BYTES)
    entries = _fill_offsets(oidx, 3, start=50)
    oidx.close()
    assert oidx.path.read_bytes() == _offset_bytes(entries)
    _fill_times(tidx, 10)
    assert tidx.delete_if_exists() is True
    assert not tidx.path.exists()


def test_close_handler_writes_pending_entries(oidx: OffsetIndex) -> None:
    entries = _fill_offsets(oidx, 10)
    oidx.close_handler()
    assert oidx.path.read_bytes() == _offset_bytes(entries) + bytes(MAX_BYTES - 80), "not trimmed"


def test_flush_after_only_pending_appends_syncs(oidx: OffsetIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    oidx.flush()
    synced.clear()
    oidx.flush()
    assert synced == [], "nothing appended since the last fsync"
    _fill_offsets(oidx, 1)
    oidx.flush()
    assert len(synced) == 1


# --- a reference model: the write-through index, op by op -------------------------------------------------


class _WriteThrough:
    """The file a write-through offset index leaves (slot writes, ftruncate; truncation keeps slot bytes)."""

    def __init__(self, size: int) -> None:
        self.file = bytearray(size - size % 8)
        self.entries: list[tuple[int, int]] = []

    def append(self, offset: int, position: int) -> None:
        n = len(self.entries)
        self.file[8 * n : 8 * n + 8] = OFFSET.pack(offset - BASE, position)
        self.entries.append((offset, position))

    def truncate_to(self, offset: int) -> None:
        self.entries = [e for e in self.entries if e[0] < offset]

    def resize(self, size: int) -> None:
        size -= size % 8
        if size < len(self.file):
            del self.file[size:]
        else:
            self.file += bytes(size - len(self.file))
        del self.entries[size // 8 :]


_ops = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 2 * PENDING_ENTRIES + 10)),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("resize"), st.integers(0, MAX_BYTES + 100)),
    st.tuples(st.sampled_from(["trim", "flush", "length", "close_reopen"]), st.just(0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_ops, max_size=25))
def test_file_matches_write_through_after_every_sync_point(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.index"
        idx = OffsetIndex(path, BASE, MAX_BYTES)
        idx.load()
        model = _WriteThrough(MAX_BYTES)
        next_offset, next_position = BASE + 1, 0
        for op, arg in ops:
            if op == "append":
                for _ in range(min(arg, len(model.file) // 8 - len(model.entries))):
                    idx.append(next_offset, next_position)
                    model.append(next_offset, next_position)
                    next_offset += 2
                    next_position += 64
                continue  # not a sync point
            if op == "truncate":
                cut = model.entries[arg * len(model.entries) // 101][0] if model.entries else BASE
                idx.truncate_to(cut)
                model.truncate_to(cut)
            elif op == "resize":
                idx.resize(arg)
                model.resize(arg)
            elif op == "trim":
                idx.trim_to_valid_size()
                model.resize(8 * len(model.entries))
            elif op == "flush":
                idx.flush()
            elif op == "length":
                assert idx.length == len(model.file)
            else:  # a clean close and reopen, as a segment is closed and loaded again
                idx.close()
                model.resize(8 * len(model.entries))
                assert path.read_bytes() == bytes(model.file)
                idx = OffsetIndex(path, BASE, MAX_BYTES)
                idx.load()
                idx.resize(MAX_BYTES)
                model.resize(MAX_BYTES)
            assert path.read_bytes() == bytes(model.file), op
            assert idx.entries == len(model.entries)
        if model.entries:
            assert idx.lookup(10**9) == OffsetPosition(*model.entries[-1])
        idx.close()
        assert path.read_bytes() == _offset_bytes(model.entries)


# --- crash recovery ---------------------------------------------------------------------------------------


def _batch(offset: int, timestamp: int, size: int = 200) -> MemoryRecords:
    return MemoryRecords.build(
        [SimpleRecord(str(offset).encode().ljust(size, b"."), None, timestamp)], base_offset=offset
    )


_CONFIG = {"segment.bytes": 64 * 1024, "index.interval.bytes": 1, "segment.index.bytes": 64 * 1024}


def _index_entries(log: Log) -> list[tuple[int, list[tuple[int, int]], list[tuple[int, int]]]]:
    out = []
    for seg in log.segments:
        oi, ti = seg.offset_index, seg.time_index
        out.append(
            (
                seg.base_offset,
                [tuple(oi.entry(i)) for i in range(oi.entries)],
                [tuple(ti.entry(i)) for i in range(ti.entries)],
            )
        )
    return out  # type: ignore[return-value]


def _all_values(log: Log) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for batch in data.records.batches():
            for record in batch:
                if record.offset >= offset:
                    out.append((record.offset, record.value))
        offset = out[-1][0] + 1
    return out


def _append(log: Log, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        log.append_as_leader(_batch(0, 1_000_000 + i))


def test_crash_before_flush_loses_nothing_and_recovery_rebuilds_the_index(tmp_path: Path) -> None:
    live = tmp_path / "live" / "t-0"
    log = Log.open(live, _CONFIG)
    # ~270 bytes a batch, one index entry per batch after the first: a few rolled segments, then an active
    # segment whose last entries are pending.
    _append(log, 600)
    active = log.active_segment
    assert len(log.segments) >= 2
    expected_indexes = _index_entries(log)
    expected_values = _all_values(log)

    # What a SIGKILL leaves: the page cache (every pwrite), not the pending entries.
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(live, crashed)
    assert not (crashed / CLEAN_SHUTDOWN_FILE).exists()
    on_disk = (crashed / active.offset_index.path.name).read_bytes()
    n = active.offset_index.entries
    assert on_disk[: 8 * n] != b"".join(
        OFFSET.pack(o - active.base_offset, p) for o, p in expected_indexes[-1][1]
    ), "the copied index lags (this test must exercise a lagging file)"
    log.close()

    recovered = Log.open(crashed, _CONFIG, recovery_point=0)
    try:
        assert recovered.log_end_offset == 600
        assert _all_values(recovered) == expected_values
        assert _index_entries(recovered) == expected_indexes
    finally:
        recovered.close()
    # After a clean close the files are byte for byte those of the writer's clean close.
    for name in sorted(os.listdir(live)):
        if name.endswith((".index", ".timeindex", ".log")):
            assert (crashed / name).read_bytes() == (live / name).read_bytes(), name


def test_crash_with_recovery_point_in_the_active_segment(tmp_path: Path) -> None:
    """The recovery point passed the rolled segments (trimmed, flushed); the active one holds it: rebuilt."""
    live = tmp_path / "live" / "t-0"
    log = Log.open(live, _CONFIG)
    _append(log, 500)
    log.flush()  # the recovery point moves to the log end (inside the active segment)
    recovery_point = log.recovery_point
    _append(log, 40, start=500)  # pending again
    expected_indexes = _index_entries(log)
    expected_values = _all_values(log)
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(live, crashed)
    log.close()
    recovered = Log.open(crashed, _CONFIG, recovery_point=recovery_point)
    try:
        assert _all_values(recovered) == expected_values
        assert _index_entries(recovered) == expected_indexes
    finally:
        recovered.close()


def test_sigkill_before_flush(tmp_path: Path) -> None:
    """A real process death: the child appends and kills itself without flushing or closing."""
    directory = tmp_path / "t-0"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path[:0] = {sys.path!r}
        from kafkalog.log import Log
        from kafkalog.records import MemoryRecords, SimpleRecord
        log = Log.open({str(directory)!r}, {_CONFIG!r})
        for i in range(450):
            value = str(i).encode().ljust(200, b".")
            log.append_as_leader(MemoryRecords.build([SimpleRecord(value, None, 1_000_000 + i)]))
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    log = Log.open(directory, _CONFIG, recovery_point=0)
    try:
        assert log.log_end_offset == 450
        values = _all_values(log)
        assert values == [(i, str(i).encode().ljust(200, b".")) for i in range(450)]
        for seg in log.segments:
            oi = seg.offset_index
            for i in range(oi.entries):
                entry = oi.entry(i)
                batch = next(iter(seg.batches(entry.position)))
                assert batch.last_offset == entry.offset
    finally:
        log.close()


def test_read_only_reader_of_a_lagging_index(tmp_path: Path) -> None:
    """Another process's reader sees the lagging file: it scans from an earlier entry, never reads wrong data."""
    live = tmp_path / "t-0"
    log = Log.open(live, _CONFIG)
    try:
        _append(log, 300)
        active = log.active_segment
        oi = active.offset_index
        on_disk = active.offset_index.path.read_bytes()[: 8 * oi.entries]
        assert on_disk != b"".join(
            OFFSET.pack(e.offset - oi.base_offset, e.position) for e in map(oi.entry, range(oi.entries))
        ), "lags"
        reader = ReadOnlyLog.open(live, log_start_offset=0, high_watermark=None)
        assert reader.log_end_offset == log.log_end_offset
        expected = dict(_all_values(log))
        for start in (0, active.base_offset, log.log_end_offset - 3, log.log_end_offset - 1):
            records = reader.read(start, 1 << 16)
            got = [(r.offset, r.value) for b in records.batches() for r in b]
            assert got and got[0][0] <= start
            assert all(expected[o] == v for o, v in got)
    finally:
        log.close()


# --- threads ----------------------------------------------------------------------------------------------


def test_bracket_without_the_lock_during_appends_and_flushes(oidx: OffsetIndex) -> None:
    stop = threading.Event()
    errors: list[str] = []

    def search() -> None:
        while not stop.is_set():
            n = oidx.entries
            if n < 2:
                continue
            target = BASE + 3 * (n // 2) + 1
            found = oidx.bracket(target)
            if found is None or found[1] != 100 * (n // 2):
                errors.append(f"bracket({target}) = {found}")

    reader = threading.Thread(target=search)
    reader.start()
    try:
        for i in range(1000):
            oidx.append(BASE + 3 * i + 1, 100 * i)
            if i % 97 == 0:
                oidx.flush()
    finally:
        stop.set()
        reader.join()
    assert errors == []
    oidx.close()
    assert oidx.path.read_bytes() == _offset_bytes([(BASE + 3 * i + 1, 100 * i) for i in range(1000)])
