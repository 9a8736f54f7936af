"""The writer process of the SIGKILL tests: opens a partition log and appends until it is killed.

Every record's value encodes its offset (:func:`expected_value`), so a reader can tell that a log is a prefix
of what was appended without knowing how many appends happened. The writer reports on its stdout, one line
per event (whole lines, written with one ``os.write`` each, so they survive the kill intact)::

    O <log end offset>        the log is open (after recovery)
    A <log end offset>        an append returned
    F <recovery point>        Log.flush() returned: everything below this offset is on disk
    E <message>               an error (the writer then exits with status 1)

Modes: ``plain`` (no producer id), ``idempotent`` (one producer whose sequence equals the offset: an append
fails if the producer state rebuilt at open is wrong), ``txn`` (two transactional producers interleaving data
and COMMIT/ABORT markers, continuing whatever transaction the rebuilt state says is open).

A Python start costs most of a second (numpy, numba), too much for hundreds of kills, so the tests run this
module as a **fork server** (``--serve``): it imports everything once, then for each job line (JSON) on its
stdin forks a writer, prints ``P <pid>``, and on the next stdin line (``kill``) sends that child SIGKILL,
reaps it and prints ``X <exit code>`` (-9 when the kill hit a running writer). Only the server ever signals a
writer, and only its own child before reaping it, so a pid can never be reused under it.

Run once without the server: ``python tests/crash/writer.py '<json job>'``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord

__all__ = ["IDEMPOTENT_PID", "TXN_PIDS", "TxnState", "append_one", "expected_value", "run_writer", "serve"]

IDEMPOTENT_PID = 1000
TXN_PIDS = (2000, 2001)


def expected_value(offset: int) -> bytes:
    """The value of the record at ``offset``: the offset, then filler whose length depends on it."""
    return b"%d|" % offset + bytes([65 + offset % 26]) * ((offset * 7919) % 61)


def _emit(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())


#: Record timestamps are derived from offsets (not the clock), so a seeded run writes the same structure every
#: time. The base is the start of the previous hour: recent enough for producer ids not to expire (one day).
TIMESTAMP_BASE = int(time.time()) // 3600 * 3_600_000 - 3_600_000


def record_timestamp(offset: int) -> int:
    """The timestamp of the record at ``offset``: rising, with small dips (so the time index skips some)."""
    return TIMESTAMP_BASE + 10 * offset - 7 * (offset % 3)


def _records(first: int, count: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(expected_value(o), b"k%d" % (o % 13), record_timestamp(o))
        for o in range(first, first + count)
    ]


class TxnState:
    """The transactional producers' next sequence and open transaction, as the log's producer state says."""

    def __init__(self, log: Log) -> None:
        self.next_seq: dict[int, int] = {}
        self.open: dict[int, bool] = {}
        for pid in TXN_PIDS:
            entry = log.producer_state.last_entry(pid)
            self.next_seq[pid] = 0 if entry is None or entry.last_seq < 0 else entry.last_seq + 1
            self.open[pid] = entry is not None and entry.current_txn_first_offset is not None


def append_one(log: Log, mode: str, rng: random.Random, epoch: int, txn: TxnState | None) -> None:
    offset = log.log_end_offset
    count = rng.randint(1, 8)
    now = record_timestamp(offset)
    if mode == "plain":
        batch = MemoryRecords.build(_records(offset, count), now_ms=now)
        log.append_as_leader(batch, epoch)
    elif mode == "idempotent":
        batch = MemoryRecords.build(
            _records(offset, count),
            producer_id=IDEMPOTENT_PID,
            producer_epoch=0,
            base_sequence=offset,
            now_ms=now,
        )
        log.append_as_leader(batch, epoch)
    elif mode == "txn":
        assert txn is not None
        pid = rng.choice(TXN_PIDS)
        if txn.open[pid] and rng.random() < 0.3:
            control = ControlRecordType.ABORT if rng.random() < 0.5 else ControlRecordType.COMMIT
            marker = MemoryRecords.end_transaction_marker(
                producer_id=pid, producer_epoch=0, control_type=control, coordinator_epoch=0, timestamp=now
            )
            log.append_as_leader(marker, epoch, AppendOrigin.COORDINATOR)
            txn.open[pid] = False
        else:
            batch = MemoryRecords.build(
                _records(offset, count),
                producer_id=pid,
                producer_epoch=0,
                base_sequence=txn.next_seq[pid],
                is_transactional=True,
                now_ms=now,
            )
            log.append_as_leader(batch, epoch)
            txn.next_seq[pid] += count
            txn.open[pid] = True
    else:
        raise ValueError(f"unknown mode {mode!r}")


def run_writer(job: dict[str, Any], out_fd: int) -> None:
    """Open the log of ``job["dir"]`` and append until killed (or ``max_seconds``); see the module doc.

    Job keys: ``dir``, ``config`` (LogConfig properties), ``recovery_point``, ``log_start_offset``, ``mode``,
    ``flush_every`` (0: never flush), ``seed``, ``leader_epoch``, ``max_seconds``.
    """
    rng = random.Random(job.get("seed", 0))
    config = LogConfig.from_props(job.get("config", {}))
    log = Log.open(
        Path(job["dir"]),
        config,
        log_start_offset=job.get("log_start_offset", 0),
        recovery_point=job.get("recovery_point", 0),
    )
    _emit(out_fd, f"O {log.log_end_offset}")
    mode = job.get("mode", "plain")
    flush_every = job.get("flush_every", 0)
    epoch = job.get("leader_epoch", 0)
    txn = TxnState(log) if mode == "txn" else None
    deadline = time.monotonic() + job.get("max_seconds", 30)
    appends = 0
    while time.monotonic() < deadline:
        append_one(log, mode, rng, epoch, txn)
        appends += 1
        _emit(out_fd, f"A {log.log_end_offset}")
        if flush_every and appends % flush_every == 0:
            log.flush()
            _emit(out_fd, f"F {log.recovery_point}")
    log.close()


def _child(job: dict[str, Any], out_fd: int) -> NoReturn:
    try:
        run_writer(job, out_fd)
    except BaseException:
        text = traceback.format_exc().replace("\n", "\\n")
        _emit(out_fd, f"E {text}")
        os._exit(1)
    os._exit(0)


def warm_up() -> None:
    """Run every code path a writer takes once, so forked writers inherit compiled kernels (numba compiles
    on first call, which would otherwise eat the first hundreds of milliseconds of every writer)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("plain", "idempotent", "txn"):
            directory = Path(tmp) / f"warmup{mode}-0"
            job = {"dir": str(directory), "config": {"segment.bytes": 4096, "index.interval.bytes": 256}}
            log = Log.open(directory, LogConfig.from_props(job["config"]))
            rng = random.Random(0)
            txn = TxnState(log) if mode == "txn" else None
            for _ in range(60):
                append_one(log, mode, rng, 0, txn)
            log.flush()
            log.close()
            Log.open(directory, LogConfig.from_props(job["config"]), last_shutdown_clean=False).close()


def serve(out_fd: int = 1) -> None:
    """The fork server (see the module doc): job line -> ``P <pid>``; ``kill`` line -> ``X <exit code>``."""
    warm_up()
    _emit(out_fd, "R")
    stdin = sys.stdin
    while True:
        line = stdin.readline()
        if not line or line.strip() == "quit":
            return
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(job, out_fd)
        _emit(out_fd, f"P {pid}")
        command = stdin.readline()
        if command.strip() == "kill":
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        _emit(out_fd, f"X {os.waitstatus_to_exitcode(status)}")
        if not command:
            return


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--serve"]:
        serve()
    else:
        run_writer(json.loads(argv[1]), 1)


if __name__ == "__main__":
    main(sys.argv)
