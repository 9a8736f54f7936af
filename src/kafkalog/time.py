"""Clocks: :class:`Time` (the interface), :class:`SystemTime` and the deterministic :class:`MockTime`.

Everything in kafkalog that needs the time takes a ``Time`` so tests can drive it. Milliseconds are
wall-clock epoch milliseconds (Kafka's ``time.milliseconds()``); ``nanoseconds`` is monotonic.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable
from typing import Protocol

__all__ = ["SYSTEM_TIME", "MockTime", "SystemTime", "Time"]


class Time(Protocol):
    """A source of time (Kafka's ``org.apache.kafka.common.utils.Time``)."""

    def milliseconds(self) -> int:
        """Wall-clock time in epoch milliseconds."""
        ...

    def nanoseconds(self) -> int:
        """Monotonic time in nanoseconds."""
        ...

    def sleep(self, ms: float) -> None:
        """Sleep for ``ms`` milliseconds."""
        ...


class SystemTime:
    """The real clock."""

    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def sleep(self, ms: float) -> None:
        _time.sleep(ms / 1000.0)


SYSTEM_TIME = SystemTime()


class MockTime:
    """A clock that only moves when told to (``sleep`` advances it instantly)."""

    def __init__(self, ms: int = 1_700_000_000_000, auto_tick_ms: int = 0) -> None:
        self._lock = threading.Lock()
        self._ms = ms
        self._ns = 0
        self.auto_tick_ms = auto_tick_ms
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after every :meth:`sleep` (a MockScheduler runs its due tasks)."""
        self._listeners.append(listener)

    def milliseconds(self) -> int:
        with self._lock:
            self._ms += self.auto_tick_ms
            self._ns += self.auto_tick_ms * 1_000_000
            return self._ms

    def nanoseconds(self) -> int:
        with self._lock:
            return self._ns

    def sleep(self, ms: float) -> None:
        with self._lock:
            self._ms += int(ms)
            self._ns += int(ms * 1_000_000)
        for listener in list(self._listeners):
            listener()
