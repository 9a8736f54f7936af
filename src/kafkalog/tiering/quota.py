"""Kafka's ``RLMQuotaManager``: the broker-wide rate quota of remote copies
(``remote.log.manager.copy.max.bytes.per.second``).

Invariant owned here: the rate is Kafka's sampled ``Rate`` — bytes recorded in the last ``num_windows``
samples of ``window_size_ms`` each, divided by the time they span (at least ``num_windows - 1`` whole
windows, so one burst after a quiet spell is not measured over a few milliseconds); the quota is violated
when that rate is *above* the bound, and the throttle time is Kafka's ``QuotaUtils.throttleTime``:
``(rate - bound) / bound x the measured span``, the time after which the rate falls back to the bound if
nothing more is recorded. Callers record a segment's bytes before copying it (Kafka's order), so
concurrent copiers never overshoot together. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import deque

from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["RLMQuotaManager"]


class RLMQuotaManager:
    """A byte-rate quota over sampled windows (see the module docstring)."""

    def __init__(
        self,
        quota_bytes_per_second: int,
        num_windows: int,
        window_size_seconds: int,
        time: Time | None = None,
    ) -> None:
        self.time = time or SYSTEM_TIME
        self._lock = threading.Lock()
        #: ``[window start ms, bytes]`` of each live sample, oldest first
        self._samples: deque[list[int]] = deque()
        self.quota_bytes_per_second = quota_bytes_per_second
        self.num_windows = num_windows
        self.window_size_ms = window_size_seconds * 1000

    def __repr__(self) -> str:
        return f"RLMQuotaManager({self.quota_bytes_per_second} B/s over {self.num_windows} x {self.window_size_ms} ms)"

    def update_quota(self, quota_bytes_per_second: int, num_windows: int, window_size_seconds: int) -> None:
        """Kafka's ``updateQuota`` (a dynamic config change); what was recorded stays."""
        with self._lock:
            self.quota_bytes_per_second = quota_bytes_per_second
            self.num_windows = num_windows
            self.window_size_ms = window_size_seconds * 1000

    def _purge(self, now: int) -> None:
        horizon = now - self.num_windows * self.window_size_ms
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.popleft()

    def record(self, value: int) -> None:
        """Count ``value`` bytes now."""
        now = self.time.milliseconds()
        with self._lock:
            self._purge(now)
            if not self._samples or now >= self._samples[-1][0] + self.window_size_ms:
                self._samples.append([now, 0])
            self._samples[-1][1] += value

    def _measure(self, now: int) -> tuple[float, int]:
        """``(rate in bytes/s, span ms)`` now."""
        self._purge(now)
        total = sum(n for _, n in self._samples)
        oldest = self._samples[0][0] if self._samples else now
        span = now - oldest
        full = span // self.window_size_ms
        if full < self.num_windows - 1:
            span += (self.num_windows - 1 - full) * self.window_size_ms
        span = max(span, 1)
        return total * 1000 / span, span

    def rate(self) -> float:
        """The measured rate in bytes per second."""
        with self._lock:
            return self._measure(self.time.milliseconds())[0]

    def get_throttle_time_ms(self) -> int:
        """Kafka's ``getThrottleTimeMs``: 0 while the rate is within the quota, else how long until it is."""
        with self._lock:
            rate, span = self._measure(self.time.milliseconds())
            bound = self.quota_bytes_per_second
            if rate <= bound:
                return 0
            return max(1, round((rate - bound) / bound * span))
