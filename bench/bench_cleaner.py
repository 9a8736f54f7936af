"""Log compaction benchmark (issue #11): the log cleaner against raw I/O of the same bytes.

* A compacted partition of 1 GiB (256 MiB with ``--quick``) of ~16 KiB uncompressed batches (140 records:
  16-byte keys, 100-byte values) in which 10% of the records' keys are distinct (every key written ten
  times, in random order). Each run cleans a fresh copy of it (the copy is not timed; it leaves the bytes
  in the page cache, as the same-run baseline has them) with ``LogCleaner.clean_log``: offset map, groups,
  ``.cleaned`` segments (fsynced), swap. Target: >= 30% of the baseline's throughput.
* Baseline, same run, interleaved: a raw sequential read of every segment file and a write of the same
  bytes to a new file (1 MiB chunks, fsync at the end) — what copying the log costs without looking at it.
* Peak memory of one cleaning (resident set sampled every 5 ms, above the resident set before it) against
  the configured ``log.cleaner.dedupe.buffer.size`` (128 MiB, Kafka's default).
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

from bench.bench_baselines import GIB, MIB, bench_tmpdir
from bench.harness import Row, Stats, compare, comparison_row, log, runs_for, single_row
from kafkalog.cleaner.service import LogCleaner
from kafkalog.log import Log, LogConfig
from kafkalog.records import DefaultRecordBatch, MemoryRecords, SimpleRecord

AREA = "cleaner"
TS = 1_700_000_000_000
RECORDS_PER_BATCH = 140
DUPLICATES = 10  # every key is written this many times: 10% of the records have distinct keys
BUFFER = 128 * MIB
CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=256 * MIB, segment_index_bytes=10 * MIB)


def build_log(directory: Path, total: int) -> tuple[int, int]:
    """A closed partition of about ``total`` bytes (see the module doc); returns (records, distinct keys)."""
    rng = random.Random(11)
    value = rng.randbytes(100)
    template = MemoryRecords.build([SimpleRecord(value, b"k" * 16, TS)] * RECORDS_PER_BATCH).to_bytes()
    batches = total // len(template)
    distinct = batches * RECORDS_PER_BATCH // DUPLICATES
    templates: list[bytes] = []
    keys = list(range(distinct))
    rng.shuffle(keys)
    for start in range(0, distinct, RECORDS_PER_BATCH):
        chunk = keys[start : start + RECORDS_PER_BATCH]
        recs = [SimpleRecord(value, b"key-%012d" % k, TS + i) for i, k in enumerate(chunk)]
        templates.append(MemoryRecords.build(recs).to_bytes())
    order = [i for _ in range(DUPLICATES) for i in range(len(templates))]
    rng.shuffle(order)
    log_ = Log.open(directory, CONFIG, last_shutdown_clean=True)
    offset = 0
    group: list[bytes] = []
    for i in order:
        data = bytearray(templates[i])
        batch = next(MemoryRecords(data).batches())
        assert isinstance(batch, DefaultRecordBatch)
        batch.set_last_offset(offset + batch.last_offset_delta)
        offset = batch.last_offset + 1
        group.append(bytes(data))
        if len(group) == 64:
            log_.append_as_follower(MemoryRecords(b"".join(group)))
            group.clear()
    if group:
        log_.append_as_follower(MemoryRecords(b"".join(group)))
    log_.roll()
    log_.close()
    return offset, distinct


def _copy_dir(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)


def _raw_copy_gib_s(src: Path, out_dir: Path) -> float:
    """Read every ``.log`` of ``src`` and write its bytes to ``out_dir`` (1 MiB chunks, fsync): GiB/s."""
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    buf = bytearray(MIB)
    view = memoryview(buf)
    total = 0
    start = time.perf_counter()
    for path in sorted(src.glob("*.log")):
        fd = os.open(out_dir / path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    os.write(fd, view[:n])
                    total += n
            os.fsync(fd)
        finally:
            os.close(fd)
    elapsed = time.perf_counter() - start
    return total / elapsed / GIB


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _PeakRss:
    """Samples the resident set size every 5 ms while in the ``with`` block."""

    def __init__(self) -> None:
        self.base = _rss()
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss())

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())


def run(quick: bool) -> list[Row]:
    runs = runs_for(quick)
    size = 256 * MIB if quick else GIB
    rows: list[Row] = []
    with bench_tmpdir("kafkalog-bench-cleaner-") as tmp:
        template = tmp / "template" / "compact-0"
        records, distinct = build_log(template, size)
        nbytes = sum(p.stat().st_size for p in template.glob("*.log"))
        log(f"{AREA}: built {nbytes / MIB:.0f} MiB, {records:,} records, {distinct:,} distinct keys")
        cleaner = LogCleaner({"log.cleaner.dedupe.buffer.size": BUFFER})
        work = tmp / "work" / "compact-0"
        results: list[tuple[int, int]] = []

        def clean_once() -> float:
            _copy_dir(template, work)
            (work.parent / "cleaner-offset-checkpoint").unlink(missing_ok=True)
            log_ = Log.open(work, CONFIG, last_shutdown_clean=True)
            log_.update_high_watermark(log_.log_end_offset)
            start = time.perf_counter()
            rounds = cleaner.clean_log(log_)
            elapsed = time.perf_counter() - start
            results.append((len(rounds), log_.size))
            log_.close()
            return nbytes / elapsed / GIB

        result = compare(clean_once, lambda: _raw_copy_gib_s(template, tmp / "raw"), runs=runs)
        cleaned_rounds, cleaned_size = results[-1]
        label = f"{nbytes / GIB:.2f} GiB" if nbytes >= GIB // 2 else f"{nbytes / MIB:.0f} MiB (quick)"
        rows.append(
            comparison_row(
                AREA,
                f"compact {label}, 10% distinct keys (LogCleaner.clean_log)",
                "GiB/s",
                result,
                "raw read + write (+fsync) of the same segment bytes",
                target=">= 0.3x",
                note=(
                    f"{cleaned_rounds} round(s), {nbytes / MIB:.0f} MiB -> {cleaned_size / MIB:.1f} MiB; offset map "
                    f"{BUFFER // MIB} MiB; uncompressed ~16 KiB batches; the copy of the input is not timed"
                ),
            )
        )
        fresh = LogCleaner({"log.cleaner.dedupe.buffer.size": BUFFER})
        _copy_dir(template, work)
        (work.parent / "cleaner-offset-checkpoint").unlink(missing_ok=True)
        log_ = Log.open(work, CONFIG, last_shutdown_clean=True)
        log_.update_high_watermark(log_.log_end_offset)
        with _PeakRss() as peak:
            fresh.clean_log(log_)
        log_.close()
        extra = (peak.peak - peak.base) / MIB
        rows.append(
            single_row(
                AREA,
                "peak memory of one cleaning (resident set above the one before it)",
                "MiB",
                Stats.of([extra]),
                note=f"configured log.cleaner.dedupe.buffer.size {BUFFER // MIB} MiB "
                f"({extra / (BUFFER / MIB):.2f}x); I/O chunks {fresh.config.read_buffer_size // 1024} KiB",
            )
        )
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
