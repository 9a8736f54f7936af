"""Which files a flush fsyncs: the active segment's offset and time indexes wait for the roll or the close.

Recovery after an unclean shutdown rebuilds the indexes of the segment holding the recovery point and of
every later one, so a flush that moves the recovery point within the active segment fsyncs its ``.log`` (and
transaction index) only; a segment the recovery point passes entirely is flushed whole, and a clean close
fsyncs everything before it writes the clean-shutdown marker.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.time import MockTime

from .helpers import open_log

NOW = 1_700_000_000_000


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """File-name suffix -> fsync count, from every module that calls ``os.fsync``."""
    counts: Counter[str] = Counter()
    real = os.fsync

    def counting(fd: Any) -> None:
        name = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else str(fd)
        counts[Path(name).suffix or Path(name).name] += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return counts


def _open(directory: Path, **props: Any) -> Log:
    clock = MockTime(NOW)
    return open_log(directory, LogConfig.from_props(props), time=clock, scheduler=MockScheduler(clock))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name file descriptors")
def test_flush_messages_1_fsyncs_the_log_not_the_active_indexes(tmp_path: Path, fsyncs: Counter[str]) -> None:
    log = _open(tmp_path / "t-0", **{"flush.messages": 1, "index.interval.bytes": 1})
    for i in range(20):
        log.append([(b"k", b"v%d" % i)])
    assert log.local_log.active_segment.offset_index.entries > 10
    assert fsyncs[".log"] == 20
    assert fsyncs[".index"] == fsyncs[".timeindex"] == 0
    assert log.recovery_point == 20
    log.close()
    assert fsyncs[".index"] >= 1 and fsyncs[".timeindex"] >= 1  # the clean close flushes them


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name file descriptors")
def test_a_segment_the_recovery_point_passes_is_flushed_whole(tmp_path: Path, fsyncs: Counter[str]) -> None:
    log = _open(tmp_path / "t-0", **{"index.interval.bytes": 1})
    for i in range(5):
        log.append([(b"k", b"v%d" % i)])
    log.flush()
    assert fsyncs[".index"] == 0
    log.roll()
    log.flush()  # the recovery point moves past the first segment: now it is flushed whole
    assert fsyncs[".index"] >= 1 and fsyncs[".timeindex"] >= 1
    log.close()


def test_a_crash_after_flushes_recovers_the_active_segments_indexes(tmp_path: Path) -> None:
    log = _open(tmp_path / "live" / "t-0", **{"flush.messages": 1, "index.interval.bytes": 1})
    for i in range(30):
        log.append([(b"k", b"v%d" % i)])
    live_entries = log.local_log.active_segment.offset_index.entries
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(log.dir, crashed)  # as on disk now: no clean-shutdown marker
    log.close()
    clock = MockTime(NOW)
    reopened = Log.open(
        crashed,
        LogConfig.from_props({"index.interval.bytes": 1}),
        recovery_point=log.recovery_point,
        scheduler=MockScheduler(clock),
        time=clock,
    )
    assert reopened.log_end_offset == 30
    assert reopened.local_log.active_segment.offset_index.entries == live_entries
    assert [r.value for r in reopened.read(0, 1 << 20).records.records()] == [b"v%d" % i for i in range(30)]
    reopened.close()
