"""File descriptors are released when a log or a segment is let go, without waiting for the cyclic GC.

A closed log whose scheduler outlives it (the server's, a LogManager's) used to stay reachable through its
cancelled producer-expiry task for up to ``producer.id.expiration.check.interval.ms`` (10 minutes), and the
index files of a segment whose delayed deletion never ran kept their descriptors forever (seen as thousands
of ``*.deleted (deleted)`` descriptors after the stateful test).
"""

from __future__ import annotations

import gc
import os
import threading
import time as _time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.log.scheduler import KafkaScheduler
from kafkalog.storage.offset_index import OffsetIndex
from kafkalog.storage.time_index import TimeIndex
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex
from kafkalog.time import MockTime


def _fds_under(directory: Path) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            out.append(target)
    return out


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    """Only reference counting frees objects here: what the test checks must not depend on a GC pass."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")


def test_a_closed_log_is_freed_while_its_scheduler_lives_on(tmp_path: Path, no_cyclic_gc: None) -> None:
    scheduler = KafkaScheduler()
    scheduler.startup()
    try:
        log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1024), scheduler=scheduler)
        for _ in range(60):
            log.append([os.urandom(100)])
        assert log.num_log_segments > 3
        log.read(0, 1 << 20)
        assert _fds_under(tmp_path)
        log.close()
        ref = weakref.ref(log)
        del log
        deadline = _time.monotonic() + 10
        while ref() is not None and _time.monotonic() < deadline:  # the roll's flush-log tasks run first
            _time.sleep(0.01)
        assert ref() is None, "the scheduler still holds the closed log"
        assert _fds_under(tmp_path) == []
    finally:
        scheduler.shutdown()


def test_segments_whose_deletion_never_ran_release_their_files(tmp_path: Path, no_cyclic_gc: None) -> None:
    time = MockTime()
    scheduler = MockScheduler(time)
    config = LogConfig(segment_bytes=1024, retention_bytes=2048, file_delete_delay_ms=60_000)
    log = Log.open(tmp_path / "t-0", config, scheduler=scheduler, time=time)
    for _ in range(80):
        log.append([os.urandom(100)])
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    assert any(name.endswith(".deleted") for name in os.listdir(tmp_path / "t-0"))
    log.close()  # before the delete-file tasks are due: they hold the renamed segments
    assert any(path.endswith(".deleted") for path in _fds_under(tmp_path))
    scheduler.shutdown()  # drops the pending delete-file tasks, as a process shutting down does
    del log
    assert _fds_under(tmp_path) == []


@pytest.mark.parametrize("kind", ["offset", "time", "txn"])
def test_an_index_dropped_without_close_closes_its_descriptor(
    tmp_path: Path, kind: str, no_cyclic_gc: None
) -> None:
    path = tmp_path / f"00000000000000000000.{kind}"
    index: OffsetIndex | TimeIndex | TransactionIndex
    if kind == "offset":
        index = OffsetIndex(path, 0, 4096)
        index.append(5, 100)
    elif kind == "time":
        index = TimeIndex(path, 0, 4096)
        index.maybe_append(1000, 5)
    else:
        index = TransactionIndex(0, path)
        index.append(AbortedTxn(producer_id=1, first_offset=0, last_offset=5, last_stable_offset=6))
    assert _fds_under(tmp_path) == [str(path)]
    os.unlink(path)
    del index
    assert _fds_under(tmp_path) == []


def test_a_log_left_offline_in_a_with_block_lets_go_of_its_files(tmp_path: Path) -> None:
    # ``__exit__`` used to flush before ``close()``: on an offline log the flush raised and the log stayed open
    # with every descriptor held.
    directory = tmp_path / "t-0"
    with Log.open(directory, LogConfig(segment_bytes=1024)) as log:
        for i in range(20):
            log.append([(None, b"v%d" % i * 20)])
        assert _fds_under(directory)
        log.local_log.offline = True  # as an I/O error leaves it
    assert log.closed
    assert _fds_under(directory) == []


def test_leaving_a_with_block_costs_what_close_costs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ``__exit__`` used to flush and then ``close()``, which flushes again: a second fsync round.
    real_fsync = os.fsync
    me = threading.get_ident()
    counts: dict[str, int] = {}
    counting: list[str] = []

    def counting_fsync(fd: int) -> None:
        if counting and threading.get_ident() == me:  # not another test's background flush
            counts[counting[0]] = counts.get(counting[0], 0) + 1
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    for name in ("close", "with"):
        log = Log.open(tmp_path / f"{name}-0", LogConfig(segment_bytes=1 << 20))
        log.append([(None, b"v" * 100)] * 10)
        counting.append(name)
        if name == "with":
            with log:
                pass
        else:
            log.close()
        counting.clear()
        assert log.closed
    assert counts["close"] > 0
    assert counts["with"] == counts["close"]
