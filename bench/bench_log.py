"""``Log`` benchmarks (issue #4): appends and reads through the partition log, against same-run baselines.

* ``Log.append_as_leader`` of pre-built uncompressed batches (100-byte values, no keys; every batch is
  validated and gets offsets assigned in place) vs raw ``os.write`` of the same bytes into a new file, page
  cache only on both sides: target **>= 0.8x** for ~1 MiB batches, **>= 0.5x** for ~16 KiB batches. The
  batch copies are made before the timed window (an append rewrites its batch's offsets in place). When Java
  and Kafka's jars are available (``tests/interop/kafka_java.py``), the same shape of append is also timed
  with Kafka's own ``FileRecords.append`` (harness command ``bench-append``, one fresh JVM per run, JIT
  warm-up included; informational, no target), alone and after our harness's validation loop on
  kafka-clients classes (not Kafka's ``LogValidator``, which is not in the jar). ``KAFKALOG_BENCH_JAVA=0``
  skips it.
* ``Log.append`` of one 100-byte record per call: target **>= 100k records/s and faster than SQLite**
  (WAL, ``synchronous=NORMAL``, one transaction per row) in the same run; also, informational, against
  LMDB (one write transaction per ``put(append=True)``, ``sync=False``: committed, not fsynced, like
  ``Log.append``), the other store a Python user would pick for this; with ``flush.messages=1``:
  target **>= 0.8x** of a raw 100-byte ``write`` + ``fsync`` per record.
* Reads of a log of ~16 KiB batches (1 GiB; 256 MiB with ``--quick``): the whole log through ``Log.read``
  (1 MiB ``max_length``, high-watermark isolation, the next offset taken from the last complete batch) vs a
  raw sequential read of the same ``.log`` files: target **>= 0.5x**; random single-batch reads by offset
  (``max_length=1``, ``min_one_message``) vs a raw ``os.pread`` of one batch at a random batch position:
  target **>= 100k reads/s**.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from bench.bench_baselines import (
    GIB,
    KIB,
    MIB,
    bench_tmpdir,
    fsync_append_ops_s,
    lmdb_append_ops_s,
    raw_read_gib_s,
    sqlite_insert_rows_s,
)
from bench.harness import Row, compare, comparison_row, load_kafka_java, log, rate, runs_for
from kafkalog.log import FetchIsolation, Log, LogConfig
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.records.kernels import F_BASE_OFFSET, F_LAST_OFFSET_DELTA, as_uint8, scan_batches

__all__ = [
    "append_batches_gib_s",
    "append_records_s",
    "batch_of",
    "random_batch_reads",
    "raw_batch_preads",
    "raw_write_same_gib_s",
    "read_whole_log",
    "run",
]

AREA = "log"
JAVA_ENV = "KAFKALOG_BENCH_JAVA"
VALUE_SIZE = 100


@contextlib.contextmanager
def _scratch(tmp: Path) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="log-", dir=tmp))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def batch_of(size: int, *, key_size: int = 0, seed: int = 5) -> bytes:
    """An uncompressed v2 batch of about ``size`` bytes: 100-byte random values, timestamps 1 ms apart
    ending now (so the topic's timestamp checks accept it), optional random keys."""
    now = int(time.time() * 1000)
    n = max(1, (size - 61) // (VALUE_SIZE + key_size + 8))
    while True:
        rng = random.Random(seed)
        records = [
            SimpleRecord(
                rng.randbytes(VALUE_SIZE), rng.randbytes(key_size) if key_size else None, now - n + i
            )
            for i in range(n)
        ]
        data = MemoryRecords.build(records).to_bytes()
        if len(data) <= size or n == 1:
            return data
        n = max(1, n * size // len(data) - 1)


def _count(batch: bytes) -> int:
    return sum(b.count or 0 for b in MemoryRecords(batch).batches())


# ----------------------------------------------------------------------------------------------------- appends


def append_batches_gib_s(template: bytes, total: int, tmp: Path) -> float:
    """GiB/s of ``Log.append_as_leader`` of ``total // len(template)`` copies of ``template`` into a new log
    (copies made, log opened and closed outside the timed window; nothing is fsynced)."""
    copies = [bytearray(template) for _ in range(max(1, total // len(template)))]
    with _scratch(tmp) as scratch:
        target = Log.open(scratch / "bench-0", LogConfig())
        append = target.append_as_leader
        gc.collect()
        start = time.perf_counter()
        for buf in copies:
            append(MemoryRecords(buf))
        elapsed = time.perf_counter() - start
        if target.log_end_offset <= 0:
            raise AssertionError("nothing appended")
        target.close_handlers()
    return len(copies) * len(template) / elapsed / GIB


def raw_write_same_gib_s(template: bytes, total: int, tmp: Path) -> float:
    """GiB/s of ``os.write`` of ``total // len(template)`` copies of ``template`` into a new file (no fsync).

    The copies are distinct buffers made before the timed window, as for :func:`append_batches_gib_s`, so
    both sides read the same amount of memory (one reused buffer would stay in the CPU cache)."""
    copies = [bytearray(template) for _ in range(max(1, total // len(template)))]
    with _scratch(tmp) as scratch:
        fd = os.open(scratch / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write = os.write
            gc.collect()
            start = time.perf_counter()
            for buf in copies:
                write(fd, buf)
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
    return len(copies) * len(template) / elapsed / GIB


def append_records_s(n: int, tmp: Path, props: dict[str, Any] | None = None) -> float:
    """Records/s of ``Log.append([value])``, one 100-byte record per call, into a new log."""
    value = os.urandom(VALUE_SIZE)
    one = [value]
    with _scratch(tmp) as scratch:
        target = Log.open(scratch / "bench-0", LogConfig.from_props(props or {}))
        append = target.append
        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            append(one)
        elapsed = time.perf_counter() - start
        if target.log_end_offset != n:
            raise AssertionError(f"log end offset {target.log_end_offset}, expected {n}")
        target.close_handlers()
    return n / elapsed


def java_append_rows(sizes: list[tuple[str, int]], total: int, tmp: Path, runs: int) -> list[Row]:
    """``Log.append_as_leader`` vs Kafka's Java ``FileRecords.append`` (``bench-append``), if Java is there."""
    if os.environ.get(JAVA_ENV, "1").strip().lower() in ("0", "no", "false", "off"):
        log(f"{AREA}: Java comparison skipped ({JAVA_ENV}=0)")
        return []
    try:
        kafka_java = load_kafka_java()
        if kafka_java is None:
            log(f"{AREA}: Java comparison skipped (tests/interop/kafka_java.py not found)")
            return []
        harness: Any = kafka_java.KafkaJava.locate()
    except Exception as exc:  # Java missing, jars missing, compile error: the rows are optional
        log(f"{AREA}: Java comparison skipped ({type(exc).__name__}: {exc})")
        return []
    rows: list[Row] = []
    try:
        for label, size in sizes:
            template = batch_of(size)

            def java_gib_s(size: int = size, validate: bool = False) -> float:
                with _scratch(tmp) as scratch:
                    result = harness.bench_append(
                        scratch / "00000000000000000000.log", size, total, validate=validate
                    )
                return float(result["bytes"]) / float(result["seconds"]) / GIB

            try:
                plain = compare(
                    partial(append_batches_gib_s, template, total, tmp), java_gib_s, runs=runs, warmup=0
                )
                validating = compare(
                    partial(append_batches_gib_s, template, total, tmp),
                    partial(java_gib_s, validate=True),
                    runs=runs,
                    warmup=0,
                )
            except Exception as exc:
                log(f"{AREA}: Java comparison failed ({type(exc).__name__}: {exc})")
                return rows
            common = (
                f"Informational, no target; {runs} runs of {total // MIB} MiB. Java builds a batch of ~{label} "
                "(100-byte values, no keys) with MemoryRecordsBuilder in a fresh JVM with default flags (JIT "
                "warm-up included), page cache only."
            )
            rows.append(
                comparison_row(
                    AREA,
                    f"Log.append_as_leader, {label} uncompressed batches (Kafka Java reference)",
                    "GiB/s",
                    plain,
                    f"Kafka {harness.kafka_clients_version} FileRecords.append (Java)",
                    note=f"{common} FileRecords.append writes the bytes and nothing else; "
                    "Log.append_as_leader also validates the batch and assigns offsets, maintains the indexes "
                    "and producer state.",
                )
            )
            rows.append(
                comparison_row(
                    AREA,
                    f"Log.append_as_leader, {label} uncompressed batches (Java harness validation loop reference)",
                    "GiB/s",
                    validating,
                    f"our Java harness's validation loop on kafka-clients {harness.kafka_clients_version} "
                    "classes + FileRecords.append (not Kafka's LogValidator)",
                    note=f"{common} Before each FileRecords.append, the project's Java harness "
                    "(tests/interop/java/KafkaInterop.java) runs its own loop over kafka-clients' classes, "
                    "modelled on the uncompressed v2 path of Kafka's LogValidator (which is in Kafka's "
                    "storage module, not in the kafka-clients jar, and is not what is measured here): "
                    "ensureValid (CRC), a walk over every record (DefaultRecord.readFrom checks each record's "
                    "framing) for the max timestamp, then offsets, leader epoch and max timestamp set in "
                    "place; each append gets its own copy of the batch, made before the timed loop, as "
                    "kafkalog's side does. No indexes or producer state on the Java side.",
                )
            )
    finally:
        harness.close()
    return rows


# ------------------------------------------------------------------------------------------------------ reads


def build_read_log(directory: Path, total: int) -> tuple[Log, list[int], list[int]]:
    """A log of ~``total`` bytes of ~16 KiB batches (16-byte keys); returns it (high watermark at its end),
    the first offset of every batch and every batch's size."""
    template = batch_of(16 * KIB, key_size=16)
    target = Log.open(directory / "read-0", LogConfig())
    firsts: list[int] = []
    for _ in range(max(1, total // len(template))):
        info = target.append_as_leader(MemoryRecords(bytearray(template)))
        firsts.append(info.first_offset)
    target.update_high_watermark(target.log_end_offset)
    return target, firsts, [len(template)] * len(firsts)


def read_whole_log(target: Log, end_offset: int) -> int:
    """Read the log from offset 0 through ``Log.read`` (1 MiB max); returns the bytes of complete batches."""
    offset = 0
    total = 0
    read = target.read
    while offset < end_offset:
        data = read(offset, MIB, FetchIsolation.HIGH_WATERMARK).records.buffer
        scan = scan_batches(as_uint8(data), max_batches=1 << 12)
        if scan.n == 0:
            break
        total += scan.next_pos  # bytes of the complete batches (a cut batch is read again next time)
        last = scan.n - 1
        offset = int(scan.table[F_BASE_OFFSET, last] + scan.table[F_LAST_OFFSET_DELTA, last]) + 1
    return total


def random_batch_reads(target: Log, offsets: list[int]) -> int:
    """``Log.read(offset, 1, min_one_message=True)`` (exactly one batch) for each offset; returns bytes read."""
    read = target.read
    isolation = FetchIsolation.HIGH_WATERMARK
    total = 0
    for offset in offsets:
        total += read(offset, 1, isolation, True).records.size_in_bytes
    return total


def raw_batch_preads(paths: list[Path], positions: list[tuple[int, int, int]]) -> int:
    """One ``os.pread`` of a whole batch per ``(file index, position, size)``; returns bytes read."""
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    try:
        total = 0
        pread = os.pread
        for i, pos, size in positions:
            total += len(pread(fds[i], size, pos))
        return total
    finally:
        for fd in fds:
            os.close(fd)


def _raw_read_files_gib_s(paths: list[Path]) -> float:
    seconds = 0.0
    total = 0
    for path in paths:
        size = path.stat().st_size
        if size:
            seconds += size / GIB / raw_read_gib_s(path)
            total += size
    return total / seconds / GIB


def read_rows(tmp: Path, total: int, lookups: int, runs: int, quick: bool) -> list[Row]:
    """Sequential whole-log reads and random single-batch reads."""
    target, firsts, sizes = build_read_log(tmp, total)
    try:
        files = sorted(p for p in target.dir.iterdir() if p.name.endswith(".log"))
        size = sum(p.stat().st_size for p in files)
        end = target.log_end_offset
        log(f"{AREA}: read log of {size / MIB:.0f} MiB, {len(firsts)} batches in {len(files)} segment(s)")
        if read_whole_log(target, end) != size:
            raise AssertionError("the whole-log read did not see every byte")
        gib = size / GIB
        sequential = compare(
            rate(lambda: read_whole_log(target, end), gib), lambda: _raw_read_files_gib_s(files), runs=runs
        )
        size_text = f"{size / MIB:.0f} MiB" if quick else f"{size / GIB:.2f} GiB"
        rows = [
            comparison_row(
                AREA,
                f"read the whole log through Log.read (1 MiB max_length), {size_text} of 16 KiB batches",
                "GiB/s",
                sequential,
                "raw sequential read of the same .log files (1 MiB readinto)",
                target=">= 0.5x",
                note="High-watermark isolation; each read returns the bytes in memory (one pread); the bench "
                "finds the next offset from the last complete batch (batch-header scan kernel). Warm page "
                "cache on both sides.",
            )
        ]
        rng = random.Random(13)
        picks = [rng.randrange(len(firsts)) for _ in range(lookups)]
        per_batch = end // len(firsts)
        offsets = [firsts[i] + rng.randrange(per_batch) for i in picks]
        where = _batch_positions(target, files, firsts, sizes)
        positions = [where[i] for i in picks]
        if random_batch_reads(target, offsets[:100]) != sum(sizes[i] for i in picks[:100]):
            raise AssertionError("a single-batch read did not return exactly one batch")
        random_reads = compare(
            rate(lambda: random_batch_reads(target, offsets), lookups),
            rate(lambda: raw_batch_preads(files, positions), lookups),
            runs=runs,
        )
        rows.append(
            comparison_row(
                AREA,
                "random single-batch reads by offset (Log.read, max_length=1, min_one_message)",
                "reads/s",
                random_reads,
                "one raw os.pread of a whole batch at a random batch position",
                target=">= 100k reads/s",
                note=f"{lookups:,} random offsets per run over {len(firsts):,} batches of "
                f"{sizes[0] / KIB:.1f} KiB; each read finds the segment (lock-free bisect), looks the offset up "
                "in the offset index and reads the batch with its header in one pread (the bytes to the next "
                "index entry), returning it in memory.",
            )
        )
        return rows
    finally:
        target.close_handlers()


def _batch_positions(
    target: Log, files: list[Path], firsts: list[int], sizes: list[int]
) -> list[tuple[int, int, int]]:
    """``(file index, byte position, size)`` of every batch (batches are laid out in append order)."""
    bases = [seg.base_offset for seg in target.segments]
    index_of = {seg.base_offset: files.index(seg.log.path) for seg in target.segments}
    out = []
    segment = -1
    position = 0
    for first, size in zip(firsts, sizes):
        while segment + 1 < len(bases) and bases[segment + 1] <= first:
            segment += 1
            position = 0
        out.append((index_of[bases[segment]], position, size))
        position += size
    return out


# -------------------------------------------------------------------------------------------------------- run


def run(quick: bool) -> list[Row]:
    """The issue-#4 rows (see the module doc)."""
    runs = runs_for(quick)
    java_runs = 3 if quick else 5
    append_total = 128 * MIB if quick else 512 * MIB
    rows: list[Row] = []
    with bench_tmpdir("kafkalog-bench-log-") as tmp:
        for label, size, target in (("1 MiB", MIB, ">= 0.8x"), ("16 KiB", 16 * KIB, ">= 0.5x")):
            template = batch_of(size)
            result = compare(
                partial(append_batches_gib_s, template, append_total, tmp),
                partial(raw_write_same_gib_s, template, append_total, tmp),
                runs=runs,
            )
            rows.append(
                comparison_row(
                    AREA,
                    f"Log.append_as_leader, {label} uncompressed batches (pre-built)",
                    "GiB/s",
                    result,
                    "raw os.write of the same bytes (the same batch copies) into a new file",
                    target=target,
                    note=f"{append_total // MIB} MiB per run, batches of {len(template):,} bytes "
                    f"({_count(template):,} records of 100-byte values, no keys); "
                    "page cache only, nothing fsynced, files deleted after each run.",
                )
            )
            log(f"{AREA}: append {label}: {rows[-1].value:.3g} vs {rows[-1].baseline_value:.3g} GiB/s")
        rows += java_append_rows([("1 MiB", MIB), ("16 KiB", 16 * KIB)], append_total, tmp, java_runs)

        n = 20_000 if quick else 100_000
        result = compare(
            lambda: append_records_s(n, tmp),
            lambda: sqlite_insert_rows_s(n, tmp, synchronous="NORMAL", txn_per_row=True),
            runs=runs,
        )
        rows.append(
            comparison_row(
                AREA,
                "Log.append of single 100-byte records (one record per call)",
                "records/s",
                result,
                "SQLite WAL synchronous=NORMAL, one transaction per 100 B row",
                target=">= 100k records/s and > 1x",
                note=f"{n:,} appends per run into a new log; each call builds a one-record batch, validates "
                "it, assigns its offset and writes it (page cache only).",
            )
        )
        result = compare(
            lambda: append_records_s(n, tmp), lambda: lmdb_append_ops_s(n, tmp, sync=False), runs=runs
        )
        rows.append(
            comparison_row(
                AREA,
                "Log.append of single 100-byte records (one record per call), vs LMDB",
                "records/s",
                result,
                "LMDB, one write transaction per put(append=True) of 100 B, sync=False",
                note=f"Informational, no target. {n:,} appends (puts) per run into a new log (environment); "
                "neither side fsyncs (LMDB sync=False still commits each transaction).",
            )
        )
        durable = 200 if quick else 500
        result = compare(
            lambda: append_records_s(durable, tmp, {"flush.messages": 1}),
            lambda: fsync_append_ops_s(durable, tmp),
            runs=runs,
        )
        rows.append(
            comparison_row(
                AREA,
                "Log.append of single 100-byte records with flush.messages=1",
                "records/s",
                result,
                "100 B write + fsync each (O_APPEND)",
                target=">= 0.8x",
                note=f"{durable} appends per run; the log fsyncs after every append (its .log, and an index only "
                "when an entry was added). VM with a host write-back cache: fsync returns when the host has "
                "the data.",
            )
        )
        rows += read_rows(tmp, 256 * MIB if quick else GIB, 20_000 if quick else 100_000, runs, quick)
    for row in rows:
        log(
            f"{AREA}: {row.name}: {row.value:.4g} {row.unit} ratio {row.ratio} target {row.target}: {row.passed}"
        )
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
