"""Fixtures of the partition-log tests: a ``MockTime`` with its ``MockScheduler`` and a log factory.

``make_log(config=..., **kwargs)`` opens a log in ``log_dir`` (``test_topic-1``, as in Kafka's tests) on the
test's mock clock and scheduler; every log it opened is closed at teardown (if the test did not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.time import MockTime

from .helpers import open_log

LogFactory = Callable[..., Log]


@pytest.fixture
def mock_time() -> MockTime:
    """Starts at the real wall-clock time, like Kafka's ``MockTime()``: retention falls back to file
    modification times for records without timestamps, and those are real."""
    return MockTime(time.time_ns() // 1_000_000)


@pytest.fixture
def scheduler(mock_time: MockTime) -> MockScheduler:
    return MockScheduler(mock_time)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "test_topic-1"


@pytest.fixture
def make_log(log_dir: Path, mock_time: MockTime, scheduler: MockScheduler) -> Iterator[LogFactory]:
    opened: list[Log] = []

    def factory(
        config: LogConfig | dict[str, Any] | None = None, directory: Path | None = None, **kwargs: Any
    ) -> Log:
        log = open_log(directory or log_dir, config, time=mock_time, scheduler=scheduler, **kwargs)
        opened.append(log)
        return log

    yield factory
    for log in opened:
        if not log.closed:
            try:
                log.close()
            except Exception:
                pass
