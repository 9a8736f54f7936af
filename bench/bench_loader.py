"""Loader benchmarks (issue #5): opening a cleanly shut down log, and recovering an unflushed one.

* ``Log.open`` of a cleanly shut down partition with **10,000 segments** (both modes): target **< 1 s**.
  A separate, untimed run counts the file operations of the open (``os.open`` / ``open`` / ``os.stat`` /
  ``os.access`` wrapped): no index file of a non-active segment may be opened (the bench fails if one is);
  the active segment's indexes are opened, as in Kafka. The directory listing (``os.scandir``, the floor of
  any open) is timed in the same run for reference.
* Recovery: ``Log.open`` with recovery point 0 and no clean-shutdown marker over **1 GiB** (256 MiB with
  ``--quick``) of ~16 KiB uncompressed batches written through ``Log.append_as_leader`` (so every batch's
  CRC is checked, the indexes are rebuilt and producer state is replayed): target **>= 0.5x** of a raw
  sequential read + CRC-32C (``crc32c`` per 16 KiB piece, i.e. per batch) of the same ``.log`` files in the
  same run (``bench_baselines.raw_read_crc_gib_s``). Both read from a warm page cache.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import os
import random
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_baselines import GIB, KIB, MIB, bench_tmpdir, raw_read_crc_gib_s
from bench.harness import Row, Stats, compare, comparison_row, log, runs_for, single_row
from kafkalog.log import Log, LogConfig
from kafkalog.log.checkpoint import write_clean_shutdown
from kafkalog.records import DefaultRecordBatch, MemoryRecords, SimpleRecord

__all__ = [
    "FileOps",
    "build_clean_log",
    "build_unflushed_log",
    "count_file_ops",
    "open_clean_seconds",
    "raw_read_crc_files_gib_s",
    "recover_gib_s",
    "run",
]

AREA = "loader"
TS = 1_700_000_000_000
SEGMENTS = 10_000
RECORDS_PER_BATCH = 140  # 16-byte keys, 100-byte values: ~16 KiB batches
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


# ------------------------------------------------------------------------------------------------ clean open


def build_clean_log(directory: Path, segments: int) -> Path:
    """A partition directory of ``segments`` one-batch segments, then opened and closed once by ``Log`` so
    that it is exactly what a clean shutdown leaves (trimmed indexes, producer snapshots, the marker)."""
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
    Log.open(part, LogConfig()).close()  # a standalone log writes the clean-shutdown marker on close
    return part


@dataclass
class FileOps:
    """File operations seen by :func:`count_file_ops` on files under one directory."""

    opens: Counter[str] = field(default_factory=Counter)  # by suffix (``.log``, ``.index`` ...)
    stats: int = 0
    accesses: int = 0
    index_bases: set[str] = field(default_factory=set)  # base names (20 digits) whose index files opened


@contextlib.contextmanager
def count_file_ops(directory: Path) -> Iterator[FileOps]:
    """Count ``os.open``, builtin ``open``, ``os.stat`` and ``os.access`` calls on files under ``directory``
    (by path or relative to a directory descriptor) while the context runs."""
    root = os.fspath(directory) + os.sep
    ops = FileOps()
    real_open, real_builtin_open, real_stat, real_access = os.open, builtins.open, os.stat, os.access

    def name_of(path: Any, dir_fd: Any = None) -> str | None:
        if isinstance(path, int):
            return None
        text = os.fsdecode(path)
        return os.path.basename(text) if dir_fd is not None or text.startswith(root) else None

    def note_open(name: str | None) -> None:
        if name is not None:
            ops.opens["." + name.split(".", 1)[1] if "." in name else name] += 1
            if name.endswith(INDEX_SUFFIXES):
                ops.index_bases.add(name.split(".", 1)[0])

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> int:
        note_open(name_of(path, kwargs.get("dir_fd")))
        return real_open(path, *args, **kwargs)

    def counting_builtin_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        note_open(name_of(file))
        return real_builtin_open(file, *args, **kwargs)

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if name_of(path, kwargs.get("dir_fd")) is not None:
            ops.stats += 1
        return real_stat(path, *args, **kwargs)

    def counting_access(path: Any, *args: Any, **kwargs: Any) -> bool:
        if name_of(path, kwargs.get("dir_fd")) is not None:
            ops.accesses += 1
        return real_access(path, *args, **kwargs)

    os.open = counting_open
    builtins.open = counting_builtin_open
    os.stat = counting_stat
    os.access = counting_access
    try:
        yield ops
    finally:
        os.open, builtins.open, os.stat, os.access = real_open, real_builtin_open, real_stat, real_access


def open_clean_seconds(part: Path, segments: int) -> float:
    """Seconds of one ``Log.open`` of the clean log (the clean close afterwards, which writes the marker
    again, is not timed)."""
    gc.collect()
    start = time.perf_counter()
    opened = Log.open(part, LogConfig())
    elapsed = time.perf_counter() - start
    if opened.log_end_offset != segments or not opened.had_clean_shutdown:
        raise AssertionError(
            f"unexpected open: LEO {opened.log_end_offset}, clean {opened.had_clean_shutdown}"
        )
    opened.close()
    return elapsed


def listing_seconds(part: Path) -> float:
    """Seconds of one ``os.scandir`` listing of the directory (names and ``is_file``, sorted)."""
    start = time.perf_counter()
    with os.scandir(part) as entries:
        names = sorted(e.name for e in entries if e.is_file())
    elapsed = time.perf_counter() - start
    assert names
    return elapsed


def clean_open_row(tmp: Path, runs: int) -> Row:
    """The 10,000-segment clean open, with the file-operation count as a check."""
    part = build_clean_log(tmp, SEGMENTS)
    active = f"{SEGMENTS - 1:020d}"
    with count_file_ops(part) as ops:
        opened = Log.open(part, LogConfig())
    loaded = sum(1 for s in opened.segments[:-1] if s.indexes_loaded)
    opened.close()
    if ops.index_bases - {active} or loaded:
        raise AssertionError(
            f"a clean open opened index files of non-active segments: {sorted(ops.index_bases - {active})[:5]} "
            f"({loaded} non-active segments have loaded indexes)"
        )
    opens = ", ".join(f"{suffix} {n}" for suffix, n in sorted(ops.opens.items()))
    samples = [open_clean_seconds(part, SEGMENTS) for _ in range(runs)]
    listing = Stats.of(listing_seconds(part) for _ in range(runs))
    stats = Stats.of(samples)
    log(f"{AREA}: clean open of {SEGMENTS:,} segments: {stats.median:.3f} s (listing {listing.median:.3f} s)")
    return single_row(
        AREA,
        f"Log.open of a cleanly shut down log with {SEGMENTS:,} segments",
        "s",
        stats,
        target="< 1 s",
        note=f"Index files opened: only the active segment's (0 of {SEGMENTS - 1:,} non-active segments; "
        f"checked in a separate counting run, which fails the bench otherwise). File operations of one open "
        f"under the directory: opens by suffix: {opens or 'none'}; stat {ops.stats} (one per .log, for its "
        f"size); access {ops.accesses} (Kafka's canRead check of every file). Same-run reference: os.scandir "
        f"listing of the {3 * SEGMENTS:,}-file directory {listing.median * 1000:.0f} ms (median).",
    )


# --------------------------------------------------------------------------------------------------- recovery


def _template() -> bytes:
    rng = random.Random(7)
    recs = [SimpleRecord(rng.randbytes(100), rng.randbytes(16), TS + i) for i in range(RECORDS_PER_BATCH)]
    return MemoryRecords.build(recs).to_bytes()


def build_unflushed_log(directory: Path, total: int) -> tuple[Path, int]:
    """A partition of ~``total`` bytes of ~16 KiB batches appended through ``Log.append_as_leader``, left
    without a clean shutdown (handles closed, nothing flushed by us); returns it and its log end offset."""
    part = directory / "unflushed-0"
    template = _template()
    opened = Log.open(part, LogConfig())
    count = max(1, total // len(template))
    for _ in range(count):
        opened.append_as_leader(MemoryRecords(bytearray(template)))
    end = opened.log_end_offset
    opened.close_handlers()
    (part / ".kafka_cleanshutdown").unlink(missing_ok=True)
    return part, end


def _log_files(part: Path) -> list[Path]:
    return sorted(p for p in part.iterdir() if p.name.endswith(".log"))


def recover_gib_s(part: Path, end_offset: int) -> float:
    """GiB/s of one ``Log.open`` that recovers every segment (recovery point 0, no marker). Producer snapshots
    written by the previous run are removed first (untimed) so that every run does the same work."""
    for path in part.iterdir():
        if path.name.endswith(".snapshot"):
            path.unlink()
    size = sum(p.stat().st_size for p in _log_files(part))
    gc.collect()
    start = time.perf_counter()
    opened = Log.open(part, LogConfig(), recovery_point=0, last_shutdown_clean=False)
    elapsed = time.perf_counter() - start
    if opened.log_end_offset != end_offset:
        raise AssertionError(f"recovery lost data: LEO {opened.log_end_offset}, expected {end_offset}")
    opened.close_handlers()
    return size / elapsed / GIB


def raw_read_crc_files_gib_s(paths: list[Path], piece: int) -> float:
    """GiB/s of :func:`raw_read_crc_gib_s` over several files (total bytes / total time)."""
    seconds = 0.0
    total = 0
    for path in paths:
        size = path.stat().st_size
        if size == 0:
            continue
        seconds += size / GIB / raw_read_crc_gib_s(path, piece=piece)
        total += size
    return total / seconds / GIB


def recovery_row(tmp: Path, total: int, runs: int, quick: bool) -> Row:
    """Recovery of ``total`` bytes of unflushed 16 KiB batches vs raw read + CRC of the same files."""
    part, end = build_unflushed_log(tmp, total)
    files = _log_files(part)
    size = sum(p.stat().st_size for p in files)
    batch = len(_template())
    log(
        f"{AREA}: built {size / MIB:.0f} MiB of unflushed {batch / KIB:.1f} KiB batches in {len(files)} segment(s)"
    )
    ours: Callable[[], float] = lambda: recover_gib_s(part, end)  # noqa: E731
    baseline: Callable[[], float] = lambda: raw_read_crc_files_gib_s(files, piece=batch)  # noqa: E731
    result = compare(ours, baseline, runs=runs)
    size_text = f"{size / MIB:.0f} MiB" if size < GIB else f"{size / GIB:.2f} GiB"
    return comparison_row(
        AREA,
        f"recovery of {size_text} of unflushed 16 KiB batches (Log.open, recovery point 0)",
        "GiB/s",
        result,
        f"raw sequential read + crc32c per {batch / KIB:.1f} KiB piece of the same .log files",
        target=">= 0.5x",
        note=("--quick: 256 MiB instead of the 1 GiB of the target. " if quick else "")
        + f"{size / MIB:.0f} MiB in {len(files)} segment(s), {end:,} records; every batch's CRC checked, both "
        "indexes rebuilt, producer state replayed; producer snapshots of the previous run removed before each "
        "run. Warm page cache on both sides.",
    )


# ------------------------------------------------------------------------------------------------------- run


def run(quick: bool) -> list[Row]:
    """The issue-#5 loader rows (see the module doc)."""
    runs = runs_for(quick)
    rows: list[Row] = []
    with bench_tmpdir("kafkalog-bench-loader-") as tmp:
        rows.append(clean_open_row(tmp, runs))
        rows.append(recovery_row(tmp, 256 * MIB if quick else GIB, runs, quick))
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
