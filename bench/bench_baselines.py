"""Baselines for the append and read benchmarks: what the machine and the usual Python peers do.

Each measurement is a plain function doing **one run** and returning its figure, so that later benchmarks
(``Log`` append/read) can call the same function in the same run and report a ratio against it, e.g.::

    from bench.bench_baselines import raw_write_gib_s
    baseline = lambda: raw_write_gib_s(16 * KIB, 256 * MIB, tmpdir)

Every function works in a fresh subdirectory of ``tmpdir`` that it removes before returning. :func:`run`
reports them all as rows without a ratio (they *are* the baselines). Figures on this VM: see
``/work/shared/reference/limits-and-peers.md`` §4.3 and §2.1 for what to expect.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import crc32c

from bench.harness import Row, log, runs_for, sample, single_row

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "bench_tmpdir",
    "fsync_append_ops_s",
    "lmdb_append_ops_s",
    "make_file",
    "persistqueue_put_ops_s",
    "persistqueue_sqlite_put_ops_s",
    "raw_read_crc_gib_s",
    "raw_read_gib_s",
    "raw_write_gib_s",
    "run",
    "sqlite_insert_rows_s",
]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
AREA = "baselines"
#: Where temporary files go (``/tmp`` is ext4 on the reference machine; tmpfs would flatter fsync).
TMP_ROOT_ENV = "KAFKALOG_BENCH_TMP"


@contextlib.contextmanager
def bench_tmpdir(prefix: str = "kafkalog-bench-") -> Iterator[Path]:
    """A temporary directory under ``$KAFKALOG_BENCH_TMP`` (default ``/tmp``), removed afterwards."""
    root = os.environ.get(TMP_ROOT_ENV) or ("/tmp" if os.path.isdir("/tmp") else None)
    with tempfile.TemporaryDirectory(prefix=prefix, dir=root) as path:
        yield Path(path)


@contextlib.contextmanager
def _scratch(tmpdir: Path | str, prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=tmpdir))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _payload(size: int) -> bytes:
    return os.urandom(size)


# ------------------------------------------------------------------------------------------------ raw file


def raw_write_gib_s(chunk: int, total: int, tmpdir: Path | str, *, fsync: bool = False) -> float:
    """GiB/s of ``os.write`` of one reused ``chunk``-byte buffer until ``total`` bytes, into a new file.

    Page cache only unless ``fsync``, in which case the final ``os.fsync`` is inside the timed window.
    Opening the file is not timed.
    """
    data = _payload(chunk)
    count = max(1, total // chunk)
    with _scratch(tmpdir, "write-") as scratch:
        fd = os.open(scratch / "data.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write = os.write
            start = time.perf_counter()
            for _ in range(count):
                write(fd, data)
            if fsync:
                os.fsync(fd)
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
    return count * chunk / elapsed / GIB


def fsync_append_ops_s(n: int, tmpdir: Path | str, size: int = 100, *, datasync: bool = False) -> float:
    """Appends per second when each ``size``-byte ``os.write`` (``O_APPEND``) is followed by ``fsync``
    (``fdatasync`` if ``datasync``): the durable-per-record ceiling of this disk."""
    data = _payload(size)
    sync = os.fdatasync if datasync else os.fsync
    with _scratch(tmpdir, "fsync-") as scratch:
        fd = os.open(scratch / "data.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            start = time.perf_counter()
            for _ in range(n):
                os.write(fd, data)
                sync(fd)
            elapsed = time.perf_counter() - start
        finally:
            os.close(fd)
    return n / elapsed


def make_file(path: Path | str, total: int, chunk: int = MIB) -> Path:
    """Write ``total`` random-ish bytes to ``path`` (for the read baselines); returns the path."""
    path = Path(path)
    data = _payload(chunk)
    with open(path, "wb") as f:
        for _ in range(max(1, total // chunk)):
            f.write(data)
    return path


def raw_read_gib_s(path: Path | str, chunk: int = MIB) -> float:
    """GiB/s of a sequential ``readinto`` of the whole file into one preallocated ``chunk``-byte buffer
    (warm page cache after the first call)."""
    buf = bytearray(chunk)
    total = 0
    with open(path, "rb", buffering=0) as f:
        readinto = f.readinto
        start = time.perf_counter()
        while n := readinto(buf):
            total += n
        elapsed = time.perf_counter() - start
    return total / elapsed / GIB


def raw_read_crc_gib_s(path: Path | str, chunk: int = MIB, piece: int | None = None) -> float:
    """Like :func:`raw_read_gib_s` plus ``crc32c.crc32c`` over what was read, per ``piece`` bytes (default:
    the whole chunk) - the floor for "read a segment and check every batch's CRC"."""
    buf = bytearray(chunk)
    view = memoryview(buf)
    step = piece or chunk
    crc = crc32c.crc32c
    total = 0
    with open(path, "rb", buffering=0) as f:
        readinto = f.readinto
        start = time.perf_counter()
        while n := readinto(buf):
            total += n
            if step >= n:
                crc(view[:n])
            else:
                for p in range(0, n, step):
                    crc(view[p : min(p + step, n)])
        elapsed = time.perf_counter() - start
    return total / elapsed / GIB


# ---------------------------------------------------------------------------------------------------- SQLite


def sqlite_insert_rows_s(
    n: int, tmpdir: Path | str, *, synchronous: str = "NORMAL", txn_per_row: bool, size: int = 100
) -> float:
    """Rows per second inserted into ``log(offset INTEGER PRIMARY KEY, value BLOB)`` in WAL mode.

    ``txn_per_row``: each insert commits on its own (autocommit); otherwise one ``executemany`` in one
    transaction. ``synchronous`` is ``NORMAL`` (no fsync per commit in WAL) or ``FULL`` (fsync per commit).
    Creating the database is not timed.
    """
    value = _payload(size)
    with _scratch(tmpdir, "sqlite-") as scratch:
        conn = sqlite3.connect(scratch / "log.db", isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            conn.execute("CREATE TABLE log (offset INTEGER PRIMARY KEY, value BLOB NOT NULL)")
            insert = "INSERT INTO log (offset, value) VALUES (?, ?)"
            start = time.perf_counter()
            if txn_per_row:
                execute = conn.execute
                for i in range(n):
                    execute(insert, (i, value))
            else:
                conn.execute("BEGIN")
                conn.executemany(insert, ((i, value) for i in range(n)))
                conn.execute("COMMIT")
            elapsed = time.perf_counter() - start
        finally:
            conn.close()
    return n / elapsed


# ------------------------------------------------------------------------------------------------------ LMDB


def lmdb_append_ops_s(
    n: int, tmpdir: Path | str, *, sync: bool, txn_per_put: bool = True, size: int = 100
) -> float:
    """Puts per second into LMDB with 8-byte big-endian offset keys and ``put(append=True)``.

    ``sync``: fsync on each commit (LMDB's default); ``txn_per_put``: one write transaction per put,
    otherwise all puts in one transaction.
    """
    import lmdb

    value = _payload(size)
    keys = [i.to_bytes(8, "big") for i in range(n)]
    with _scratch(tmpdir, "lmdb-") as scratch:
        env = lmdb.open(str(scratch), map_size=max(64 * MIB, 4 * n * (size + 64)), sync=sync)
        try:
            start = time.perf_counter()
            if txn_per_put:
                for key in keys:
                    with env.begin(write=True) as txn:
                        txn.put(key, value, append=True)
            else:
                with env.begin(write=True) as txn:
                    put = txn.put
                    for key in keys:
                        put(key, value, append=True)
            elapsed = time.perf_counter() - start
        finally:
            env.close()
    return n / elapsed


# ---------------------------------------------------------------------------------------------- persist-queue


def persistqueue_put_ops_s(n: int, tmpdir: Path | str, size: int = 100) -> float:
    """Puts per second into persist-queue's file ``Queue`` (pickle; flush and info-file rename per put)."""
    import persistqueue

    value = _payload(size)
    with _scratch(tmpdir, "pq-") as scratch:
        queue = persistqueue.Queue(str(scratch / "q"), tempdir=str(scratch))
        start = time.perf_counter()
        for _ in range(n):
            queue.put(value)
        elapsed = time.perf_counter() - start
        del queue
    return n / elapsed


def persistqueue_sqlite_put_ops_s(n: int, tmpdir: Path | str, size: int = 100) -> float:
    """Puts per second into persist-queue's ``SQLiteQueue`` (``auto_commit=True``: a commit per put)."""
    import persistqueue

    value = _payload(size)
    with _scratch(tmpdir, "pqs-") as scratch:
        queue = persistqueue.SQLiteQueue(str(scratch), auto_commit=True)
        start = time.perf_counter()
        for _ in range(n):
            queue.put(value)
        elapsed = time.perf_counter() - start
        del queue
    return n / elapsed


# ------------------------------------------------------------------------------------------------------- run


def run(quick: bool) -> list[Row]:
    """Every baseline as a :class:`Row` (no ratio). Sizes: ``quick`` keeps the area to about 30 s."""
    runs = runs_for(quick)
    write_total = 128 * MIB if quick else 512 * MIB
    read_total = 256 * MIB if quick else GIB
    durable = 200 if quick else 500  # items for fsync-per-item measurements (~150 us each when quiet)
    fast = 5_000 if quick else 20_000  # items for per-item non-durable measurements
    bulk = 50_000 if quick else 200_000  # items for one-transaction measurements
    rows: list[Row] = []

    def measure(name: str, unit: str, fn: Callable[[], float], note: str = "") -> None:
        stats = sample(fn, runs=runs, warmup=1)
        rows.append(single_row(AREA, name, unit, stats, note=note))
        log(f"{AREA}: {name}: {stats.median:.4g} {unit} ({stats.min:.4g}–{stats.max:.4g})")

    with bench_tmpdir() as tmp:
        for chunk, label in ((MIB, "1 MiB"), (16 * KIB, "16 KiB"), (KIB, "1 KiB")):
            measure(
                f"os.write {label} chunks (page cache, no fsync)",
                "GiB/s",
                partial(raw_write_gib_s, chunk, write_total, tmp),
                note=f"{write_total // MIB} MiB per run into a new file" if chunk == MIB else "",
            )
        measure(
            "os.write 1 MiB chunks + fsync at the end",
            "GiB/s",
            lambda: raw_write_gib_s(MIB, write_total, tmp, fsync=True),
        )
        measure(
            "100 B append + fsync each (O_APPEND)",
            "ops/s",
            lambda: fsync_append_ops_s(durable, tmp),
            note="VM with a host write-back cache: fsync returns when the host has the data",
        )
        data = make_file(tmp / "read.bin", read_total)
        measure(
            "sequential read, 1 MiB readinto (warm cache)",
            "GiB/s",
            lambda: raw_read_gib_s(data),
            note=f"{read_total // MIB} MiB file, read whole per run",
        )
        measure("sequential read + crc32c per 1 MiB chunk", "GiB/s", lambda: raw_read_crc_gib_s(data))
        measure(
            "sequential read + crc32c per 16 KiB piece",
            "GiB/s",
            lambda: raw_read_crc_gib_s(data, piece=16 * KIB),
        )
        data.unlink()
        for sync in ("NORMAL", "FULL"):
            measure(
                f"SQLite WAL synchronous={sync}, one txn per 100 B row",
                "rows/s",
                partial(
                    sqlite_insert_rows_s,
                    durable if sync == "FULL" else fast,
                    tmp,
                    synchronous=sync,
                    txn_per_row=True,
                ),
            )
            measure(
                f"SQLite WAL synchronous={sync}, one txn for all rows (executemany)",
                "rows/s",
                partial(sqlite_insert_rows_s, bulk, tmp, synchronous=sync, txn_per_row=False),
            )
        measure("LMDB append, txn per put, sync", "ops/s", lambda: lmdb_append_ops_s(durable, tmp, sync=True))
        measure(
            "LMDB append, txn per put, no sync", "ops/s", lambda: lmdb_append_ops_s(fast, tmp, sync=False)
        )
        measure(
            "LMDB append, one txn for all puts, sync",
            "ops/s",
            lambda: lmdb_append_ops_s(bulk, tmp, sync=True, txn_per_put=False),
        )
        measure(
            "persist-queue file Queue.put (100 B)",
            "ops/s",
            lambda: persistqueue_put_ops_s(durable, tmp),
            note="flush + info-file rename per put; fsync only when a 100-item chunk fills",
        )
        measure(
            "persist-queue SQLiteQueue.put (100 B, auto_commit)",
            "ops/s",
            lambda: persistqueue_sqlite_put_ops_s(durable, tmp),
        )
    return rows
