"""Storage benchmarks (issues #3 and #5): offset lookups, segment reads and opening a large log.

* ``translate_offset`` on a full segment (1 GiB; 256 MiB with ``--quick``) of ~16 KiB batches, random
  offsets: target >= 200k lookups/s. Same-run baseline: one raw ``os.pread`` of 8 KiB at a random batch
  position (the I/O a lookup cannot avoid).
* Sequential reading of the segment through ``LogSegment.read`` (1 MiB reads, the bytes of each returned
  view read, the next offset taken from the last complete batch): target >= 50% of a raw sequential read of
  the same file in the same run.
* ``Log.open`` of a cleanly shut down log with 10,000 segments (2,000 with ``--quick``): target < 1 s, with
  no index of a non-active segment loaded.
"""

from __future__ import annotations

import os
import random
import struct
import time
from pathlib import Path

from bench.bench_baselines import GIB, MIB, bench_tmpdir, raw_read_gib_s
from bench.harness import Row, Stats, compare, comparison_row, log, rate, runs_for, single_row
from kafkalog.log import Log, LogConfig
from kafkalog.log.checkpoint import write_clean_shutdown
from kafkalog.records import DefaultRecordBatch, MemoryRecords, SimpleRecord
from kafkalog.records.kernels import F_BASE_OFFSET, F_LAST_OFFSET_DELTA, as_uint8, scan_batches
from kafkalog.storage import LogSegment

AREA = "storage"
TS = 1_700_000_000_000
RECORDS_PER_BATCH = 140  # 16-byte keys, 100-byte values: ~16 KiB batches


def _template() -> bytes:
    rng = random.Random(7)
    recs = [SimpleRecord(rng.randbytes(100), rng.randbytes(16), TS + i) for i in range(RECORDS_PER_BATCH)]
    return MemoryRecords.build(recs).to_bytes()


def build_segment(directory: Path, total: int) -> tuple[LogSegment, int, list[int]]:
    """A segment of ~``total`` bytes of identical ~16 KiB batches; returns it, its next offset, batch positions."""
    template = _template()
    seg = LogSegment.open(directory, 0, index_interval_bytes=4096, max_index_size=10 * MIB)
    offset = 0
    positions = []
    while seg.size + len(template) <= total:
        data = bytearray(template)
        batch = next(MemoryRecords(data).batches())
        assert isinstance(batch, DefaultRecordBatch)
        batch.set_last_offset(offset + RECORDS_PER_BATCH - 1)
        positions.append(seg.size)
        last = offset + RECORDS_PER_BATCH - 1
        seg.append(last, TS + RECORDS_PER_BATCH, last, MemoryRecords(data))
        offset += RECORDS_PER_BATCH
    return seg, offset, positions


def lookups(seg: LogSegment, offsets: list[int]) -> int:
    translate = seg.translate_offset
    found = 0
    for o in offsets:
        if translate(o) is not None:
            found += 1
    return found


def raw_preads(path: Path, positions: list[int]) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        n = 0
        for p in positions:
            n += len(os.pread(fd, 8192, p))
        return n
    finally:
        os.close(fd)


def read_through_segment(seg: LogSegment, end_offset: int) -> int:
    """Read the whole segment through ``LogSegment.read`` in 1 MiB views; returns the bytes read."""
    offset = 0
    total = 0
    while offset < end_offset:
        info = seg.read(offset, MIB)
        if info is None:
            break
        data = info.records.read(0, info.records.size_in_bytes)  # type: ignore[union-attr]
        scan = scan_batches(as_uint8(data), max_batches=1 << 12)
        if scan.n == 0:
            break
        total += scan.next_pos  # bytes of the complete batches (a cut batch is read again next time)
        last = scan.n - 1
        offset = int(scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]) + 1
    return total


def build_clean_log(directory: Path, segments: int) -> Path:
    """A cleanly shut down partition directory of ``segments`` one-batch segments (files written directly)."""
    part = directory / "many-0"
    part.mkdir()
    template = bytearray(MemoryRecords.build([SimpleRecord(b"v" * 100, b"k" * 16, TS)]).to_bytes())
    batch = next(MemoryRecords(template).batches())
    assert isinstance(batch, DefaultRecordBatch)
    for i in range(segments):
        batch.set_last_offset(i)
        name = f"{i:020d}"
        (part / f"{name}.log").write_bytes(template)
        (part / f"{name}.index").write_bytes(b"")
        (part / f"{name}.timeindex").write_bytes(struct.pack(">qi", TS, 0))
    write_clean_shutdown(part)
    return part


def open_log_seconds(part: Path, segments: int) -> tuple[float, int]:
    start = time.perf_counter()
    log_ = Log.open(part, LogConfig(), recovery_point=segments, last_shutdown_clean=True)
    elapsed = time.perf_counter() - start
    loaded = sum(1 for s in log_.segments[:-1] if s._offset_index.is_loaded or s._time_index.is_loaded)
    assert log_.log_end_offset == segments, log_.log_end_offset
    log_.close_handlers()
    return elapsed, loaded


def run(quick: bool) -> list[Row]:
    runs = runs_for(quick)
    rows: list[Row] = []
    size = 256 * MIB if quick else GIB
    with bench_tmpdir("kafkalog-bench-storage-") as tmp:
        seg_dir = tmp / "seg"
        seg_dir.mkdir()
        seg, end_offset, positions = build_segment(seg_dir, size)
        log(f"{AREA}: built a {seg.size / MIB:.0f} MiB segment of {len(positions)} batches")
        rng = random.Random(11)
        n = 20_000 if quick else 100_000
        targets = [rng.randrange(end_offset) for _ in range(n)]
        pos_sample = [rng.choice(positions) for _ in range(n)]
        assert lookups(seg, targets[:1000]) == 1000
        result = compare(
            rate(lambda: lookups(seg, targets), n),
            rate(lambda: raw_preads(seg.log.path, pos_sample), n),
            runs=runs,
        )
        rows.append(
            comparison_row(
                AREA,
                f"translate_offset on a full {seg.size / MIB:.0f} MiB segment (random offsets)",
                "lookups/s",
                result,
                "one raw os.pread of 8 KiB at a random batch position",
                target=">= 200k lookups/s",
                note="offset index lookup (binary search of the in-memory mirror) + batch-header walk of one 8 KiB read",
            )
        )
        gib = seg.size / GIB
        assert read_through_segment(seg, end_offset) == seg.size
        result = compare(
            rate(lambda: read_through_segment(seg, end_offset), gib),
            lambda: raw_read_gib_s(seg.log.path),
            runs=runs,
        )
        rows.append(
            comparison_row(
                AREA,
                "sequential read through LogSegment.read (1 MiB views, bytes read)",
                "GiB/s",
                result,
                "raw sequential read of the same .log (1 MiB readinto)",
                target=">= 0.5x",
                note="each read returns a file slice (a view); the bench reads its bytes and finds the next offset",
            )
        )
        seg.close()
        count = 2_000 if quick else 10_000
        part = build_clean_log(tmp, count)
        samples = []
        loaded = 0
        for _ in range(max(3, runs // 2)):
            seconds, loaded = open_log_seconds(part, count)
            samples.append(seconds)
            write_clean_shutdown(part)  # consumed by the open
        rows.append(
            single_row(
                AREA,
                f"Log.open of a cleanly shut down log with {count:,} segments",
                "s",
                Stats.of(samples),
                target="< 1 s",
                note=f"{loaded} non-active segment indexes loaded (should be 0)",
            )
        )
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
