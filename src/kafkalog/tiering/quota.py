"""Kafka's ``RLMQuotaManager``: the broker-wide rate quotas of remote copies
(``remote.log.manager.copy.max.bytes.per.second``) and of remote reads serving fetches
(``remote.log.manager.fetch.max.bytes.per.second``), and Kafka's ``RLMQuotaMetrics`` throttle-time sensor.

Invariant owned here: the rate is Kafka's sampled ``Rate`` — bytes recorded in the last ``num_windows``
samples of ``window_size_ms`` each, divided by the time they span (at least ``num_windows - 1`` whole
windows, so one burst after a quiet spell is not measured over a few milliseconds); the quota is violated
when that rate is *above* the bound, and the throttle time is Kafka's ``QuotaUtils.throttleTime``:
``(rate - bound) / bound x the measured span``, the time after which the rate falls back to the bound if
nothing more is recorded. Copiers record a segment's bytes before copying it (Kafka's order), so
concurrent copiers never overshoot together; remote fetch reads record the bytes they returned after the
read (Kafka's ``RemoteLogReader``), and a fetch finding the quota exceeded skips its remote read.

:class:`ThrottleTimeSensor` is Kafka's ``remote-fetch-throttle-time`` sensor: the average and maximum of the
throttle times recorded in its last two 30-second samples (Kafka's default ``MetricConfig``), and a count
since it was made. Thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections import deque

from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["THROTTLE_SAMPLES", "THROTTLE_SAMPLE_WINDOW_MS", "RLMQuotaManager", "ThrottleTimeSensor"]


#: Kafka's default ``MetricConfig``: samples kept by a sensor and the span of each.
THROTTLE_SAMPLES = 2
THROTTLE_SAMPLE_WINDOW_MS = 30_000


class ThrottleTimeSensor:
    """Kafka's ``RLMQuotaMetrics`` sensor (``remote-fetch-throttle-time-avg`` / ``-max``): throttle times in ms
    over the last :data:`THROTTLE_SAMPLES` samples of :data:`THROTTLE_SAMPLE_WINDOW_MS` (0 when none)."""

    def __init__(self, time: Time | None = None) -> None:
        self.time = time or SYSTEM_TIME
        self._lock = threading.Lock()
        #: ``[window start ms, count, total, max]`` of each live sample, oldest first
        self._samples: deque[list[int]] = deque()
        #: throttle times recorded since the sensor was made
        self.count = 0

    def record(self, value_ms: int) -> None:
        """Count one throttle of ``value_ms``."""
        now = self.time.milliseconds()
        with self._lock:
            self._purge(now)
            if not self._samples or now >= self._samples[-1][0] + THROTTLE_SAMPLE_WINDOW_MS:
                self._samples.append([now, 0, 0, 0])
            sample = self._samples[-1]
            sample[1] += 1
            sample[2] += value_ms
            sample[3] = max(sample[3], value_ms)
            self.count += 1

    def _purge(self, now: int) -> None:
        horizon = now - THROTTLE_SAMPLES * THROTTLE_SAMPLE_WINDOW_MS
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.popleft()

    def avg(self) -> float:
        """The average throttle time of the live samples (0.0 when none)."""
        with self._lock:
            self._purge(self.time.milliseconds())
            n = sum(s[1] for s in self._samples)
            return sum(s[2] for s in self._samples) / n if n else 0.0

    def max(self) -> int:
        """The longest throttle time of the live samples (0 when none)."""
        with self._lock:
            self._purge(self.time.milliseconds())
            return max((s[3] for s in self._samples), default=0)


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
        """Kafka's ``getThrottleTimeMs``: 0 while the rate is within the quota, else how long until it is (rounded
        as Java's ``Math.round``: 0 when that is under half a millisecond)."""
        with self._lock:
            rate, span = self._measure(self.time.milliseconds())
            bound = self.quota_bytes_per_second
            if rate <= bound:
                return 0
            # Java's Math.round (half up), as Kafka's: 0 when the rate is above the bound by a hair
            return math.floor((rate - bound) / bound * span + 0.5)
