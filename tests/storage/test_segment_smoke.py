"""End-to-end smoke test of a segment: append, index, read, search, truncate, close, reopen, recover."""

from __future__ import annotations

from pathlib import Path

from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage import LogOffsetPosition, LogSegment, TimestampAndOffset
from kafkalog.time import MockTime

TS = 1_700_000_000_000


def _fill(seg: LogSegment, base: int, batches: int) -> int:
    off = base
    for i in range(batches):
        recs = MemoryRecords.build(
            [SimpleRecord(b"v%d-%d" % (i, j), b"k", TS + i) for j in range(3)], base_offset=off
        )
        seg.append(off + 2, TS + i, off + 2, recs)
        off += 3
    return off


def test_segment_round_trip(tmp_path: Path) -> None:
    time = MockTime()
    seg = LogSegment.open(tmp_path, 40, index_interval_bytes=1, max_index_size=1000, time=time)
    end = _fill(seg, 40, 10)
    assert end == 70 and seg.read_next_offset() == 70
    assert seg.offset_index.entries == 9 and seg.time_index.entries == 9
    assert seg.translate_offset(41) == LogOffsetPosition(42, 0, 97)
    assert seg.translate_offset(45) == LogOffsetPosition(45, 97, 97)
    assert seg.translate_offset(70) is None
    fetched = seg.read(45, 200)
    assert fetched is not None
    assert [b.base_offset for b in fetched.records.batches()] == [43, 46]
    assert seg.find_offset_by_timestamp(TS + 4) == TimestampAndOffset(TS + 4, 52, None)
    assert seg.find_offset_by_timestamp(TS + 100) is None
    assert seg.truncate_to(52) == 582
    assert seg.read_next_offset() == 52 and seg.max_timestamp_so_far == TS + 3
    seg.on_become_inactive_segment()
    seg.close()
    sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
    assert sizes == {
        "00000000000000000040.log": 388,
        "00000000000000000040.index": 24,
        "00000000000000000040.timeindex": 36,
    }
    again = LogSegment.open(
        tmp_path, 40, index_interval_bytes=1, max_index_size=1000, time=time, file_already_exists=True
    )
    assert again.read_next_offset() == 52
    assert again.max_timestamp_so_far == TS + 3
    assert again.recover() == 0
    assert again.offset_index.entries == 3
    again.close()
