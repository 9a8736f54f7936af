"""Running out of descriptors (EMFILE, ENFILE) or memory is no disk fault: the failed operation raises the
retriable ``ResourceExhaustedError``, the log dir stays online and the next operation succeeds once
descriptors are free (issue #19, item 3). ``os.open`` and ``open`` are patched by name to fail for files in
the data directory only."""

from __future__ import annotations

import builtins
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.datadir import read_topics
from kafkalog.errors import KafkaStorageError, ResourceExhaustedError
from kafkalog.log import FetchIsolation, MockScheduler
from kafkalog.manager import LogManager
from kafkalog.records import SimpleRecord
from kafkalog.time import MockTime


class _Exhaustion:
    """While ``on``, opening any file under ``root`` fails with ``code``."""

    def __init__(self, root: Path, code: int) -> None:
        self.root = str(root)
        self.code = code
        self.on = False
        self.failed = 0

    def check(self, path: Any) -> None:
        if self.on and os.fspath(path).startswith(self.root):
            self.failed += 1
            raise OSError(self.code, os.strerror(self.code), os.fspath(path))


@pytest.fixture(params=[errno.EMFILE, errno.ENFILE])
def exhaustion(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[_Exhaustion]:
    state = _Exhaustion(tmp_path, int(request.param))
    real_os_open, real_open = os.open, builtins.open

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        state.check(path)
        return real_os_open(path, *args, **kwargs)

    def open_(file: Any, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(file, int):
            state.check(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", open_)
    yield state
    state.on = False


def _manager(path: Path) -> LogManager:
    time = MockTime()
    return LogManager.open(path, scheduler=MockScheduler(time), time=time)


def _values(manager: LogManager) -> list[bytes]:
    log = manager.get_log("t", 0)
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, FetchIsolation.LOG_END)
        batches = list(info.records.batches())
        for batch in batches:
            out.extend(r.value or b"" for r in batch)
        offset = batches[-1].last_offset + 1
    return out


def test_a_roll_that_cannot_open_its_segment_leaves_the_dir_online(
    tmp_path: Path, exhaustion: _Exhaustion
) -> None:
    with _manager(tmp_path / "data") as manager:
        manager.create_topic("t", 1, {"segment.bytes": 2048})
        log = manager.get_log("t", 0)
        expected = [f"v{i}".encode() * 20 for i in range(5)]
        for value in expected:
            log.append([SimpleRecord(value)])
        log.append([SimpleRecord(b"x" * 1500)])  # the next 1500 bytes do not fit: that append rolls
        expected.append(b"x" * 1500)
        segments = log.num_log_segments

        exhaustion.on = True
        with pytest.raises(ResourceExhaustedError) as raised:
            log.append([SimpleRecord(b"y" * 1500)])  # must roll: opening the new segment fails
        assert isinstance(raised.value, KafkaStorageError)
        assert raised.value.errno == exhaustion.code
        assert exhaustion.failed >= 1
        manager.checkpoint()  # the checkpoint files cannot be opened either
        assert manager.offline_dirs == []
        assert log.num_log_segments == segments

        exhaustion.on = False  # descriptors are free again: the same append succeeds
        log.append([SimpleRecord(b"y" * 1500)])
        expected.append(b"y" * 1500)
        assert log.num_log_segments == segments + 1
        assert _values(manager) == expected
        manager.checkpoint()
        assert manager.offline_dirs == []


def test_a_read_that_cannot_open_a_segment_is_retriable_not_out_of_range(
    tmp_path: Path, exhaustion: _Exhaustion
) -> None:
    with _manager(tmp_path / "data") as manager:
        manager.create_topic("t", 1, {"segment.bytes": 1024})
        log = manager.get_log("t", 0)
        expected = [bytes([65 + i % 26]) * 300 for i in range(12)]
        for value in expected:
            log.append([SimpleRecord(value)])
        assert log.num_log_segments > 2
    with _manager(tmp_path / "data") as manager:  # reopened: old segments open their files on first read
        log = manager.get_log("t", 0)
        exhaustion.on = True
        with pytest.raises(ResourceExhaustedError):
            log.read(0, 1 << 20, FetchIsolation.LOG_END)
        assert manager.offline_dirs == []
        exhaustion.on = False
        assert _values(manager) == expected


def test_a_topic_created_without_descriptors_is_usable_once_they_are_free(
    tmp_path: Path, exhaustion: _Exhaustion
) -> None:
    """A topic whose partitions cannot be opened is created whole or not at all (issue #19 item 1): a typed,
    retriable error, the dir stays online, nothing of the topic is left registered or on disk, and the same
    call succeeds once descriptors are free."""
    with _manager(tmp_path / "data") as manager:
        exhaustion.on = True
        with pytest.raises(ResourceExhaustedError):
            manager.create_topic("t", 2, {"retention.ms": 12345})
        assert manager.offline_dirs == []
        exhaustion.on = False
        assert "t" not in manager.topics()
        assert not list((tmp_path / "data").glob("t-*"))
        manager.create_topic("t", 2, {"retention.ms": 12345})
        manager.get_log("t", 1).append([SimpleRecord(b"late")])
        manager.checkpoint_recovery_points()
        document = read_topics(tmp_path / "data")
        assert document is not None and "t" in document.topics
    with _manager(tmp_path / "data") as manager:
        assert manager.topic_config("t").retention_ms == 12345
        assert _values(manager) == []
        assert manager.get_log("t", 1).log_end_offset == 1
