"""Helpers of the command-line tests: running ``kafkalog`` (in process and as a real process) and writing
partition directories with :class:`kafkalog.log.Log` directly, so the tests know what every file holds."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kafkalog.cli import cli
from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import MemoryRecords, SimpleRecord

TS = 1_700_000_000_000
#: ``PYTHONFAULTHANDLER``: a process made to abort (:func:`stop_with_ctrl_c`) prints every thread's stack.
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}


def stop_with_ctrl_c(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Ctrl-C (SIGINT) for ``proc``, then its exit status. A process still running ``timeout`` s later is made
    to print every thread's stack (SIGABRT, faulthandler) and the test fails with that, so a hang says where
    it hung instead of only that it timed out."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read() if proc.stderr is not None else b""
        pytest.fail(
            f"still running {timeout} s after SIGINT; its threads:\n{err.decode(errors='replace')[-8000:]}"
        )


def run(*args: str | Path, input: bytes | str | None = None) -> Result:
    """``kafkalog ARGS`` through click's runner (stdout and stderr kept apart)."""
    return CliRunner().invoke(
        cli, [str(a) for a in args], input=input, prog_name="kafkalog", catch_exceptions=False
    )


def kafkalog_command() -> list[str]:
    """The console script of this venv, or ``python -m kafkalog.cli``."""
    script = Path(sys.executable).parent / "kafkalog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kafkalog.cli"]


def run_process(
    *args: str | Path, input: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """``kafkalog ARGS`` as a real process."""
    return subprocess.run(
        [*kafkalog_command(), *(str(a) for a in args)],
        input=input,
        capture_output=True,
        timeout=timeout,
        check=False,
        env=ENV,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` parsed as JSON."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass
class Written:
    """What :func:`write_partition` appended: data records by offset, aborted offsets, segment bases."""

    path: Path
    values: dict[int, bytes] = field(default_factory=dict)
    keys: dict[int, bytes | None] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    markers: list[tuple[int, str]] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    log_end_offset: int = 0


def write_partition(
    path: Path,
    *,
    batches: int = 40,
    per_batch: int = 3,
    segment_bytes: int = 1500,
    index_interval: int = 256,
    transactions: bool = True,
    close: bool = True,
    config: dict[str, Any] | None = None,
) -> Written:
    """A partition directory written with :class:`Log`: plain batches with increasing timestamps, an idempotent
    producer, and (``transactions``) a committed and an aborted transaction with their markers."""
    props = {"segment.bytes": segment_bytes, "index.interval.bytes": index_interval, **(config or {})}
    written = Written(path)
    log = Log.open(path, LogConfig.from_props(props))
    try:
        for b in range(batches):
            recs = [
                SimpleRecord(b"value-%d-%d" % (b, i), b"key-%d" % (i % 4), TS + b * 10 + i)
                for i in range(per_batch)
            ]
            info = log.append(recs)
            for i, r in enumerate(recs):
                written.values[info.first_offset + i] = r.value or b""
                written.keys[info.first_offset + i] = r.key
            if b == batches // 3:
                idem = MemoryRecords.build(
                    [SimpleRecord(b"idem-%d" % i, None, TS + b * 10) for i in range(2)],
                    producer_id=50,
                    producer_epoch=1,
                    base_sequence=0,
                    now_ms=TS,
                )
                info = log.append_as_leader(idem)
                for i in range(2):
                    written.values[info.first_offset + i] = b"idem-%d" % i
                    written.keys[info.first_offset + i] = None
            if transactions and b in (batches // 2, batches // 2 + 2):
                pid = 100 + b
                commit = b == batches // 2
                tx = MemoryRecords.build(
                    [SimpleRecord(b"tx-%d-%d" % (b, i), b"tk", TS + b * 10) for i in range(2)],
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=0,
                    is_transactional=True,
                    now_ms=TS,
                )
                info = log.append_as_leader(tx)
                for i in range(2):
                    offset = info.first_offset + i
                    written.values[offset] = b"tx-%d-%d" % (b, i)
                    written.keys[offset] = b"tk"
                    if not commit:
                        written.aborted.add(offset)
                marker = MemoryRecords.end_transaction_marker(
                    producer_id=pid,
                    producer_epoch=0,
                    control_type="COMMIT" if commit else "ABORT",
                    coordinator_epoch=3,
                    timestamp=TS + b * 10,
                )
                info = log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
                written.markers.append((info.first_offset, "COMMIT" if commit else "ABORT"))
        written.bases = [s.base_offset for s in log.segments]
        written.log_end_offset = log.log_end_offset
    finally:
        if close:
            log.close()
    return written


def offset_index_entries(path: Path) -> list[tuple[int, int]]:
    """``(relative offset, position)`` of every 8-byte slot of an ``.index``."""
    data = path.read_bytes()
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]


def time_index_entries(path: Path) -> list[tuple[int, int]]:
    """``(timestamp, relative offset)`` of every 12-byte slot of a ``.timeindex``."""
    data = path.read_bytes()
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]


def txn_index_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    """``(version, pid, first, last, lso)`` of every 34-byte entry of a ``.txnindex``."""
    data = path.read_bytes()
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data) - len(data) % 34, 34)]


def flip_byte(path: Path, position: int) -> None:
    """Inverts one byte of a file."""
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def tree_state(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """``(size, mtime_ns, content)`` of every file under ``root`` (to prove a command wrote nothing)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, p.read_bytes())
    return out
