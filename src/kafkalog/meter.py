"""Kafka's meters (the Yammer ``Meter`` behind every ``*PerSec`` MBean): a count and its rates.

Invariant owned here: a :class:`Meter` reports what Kafka's JMX attributes of a meter report — ``Count``
(events since creation), ``MeanRate`` (count / seconds since creation) and ``OneMinuteRate``,
``FiveMinuteRate``, ``FifteenMinuteRate``: exponentially weighted moving averages of the per-second rate,
ticked every :data:`TICK_INTERVAL_MS` with Yammer's ``alpha = 1 - exp(-5 s / 60 s / minutes)`` (the first tick
takes the instant rate). Ticks happen lazily when the meter is marked or read, so a meter costs nothing
between uses, and the clock is a :class:`~kafkalog.time.Time` (tests use a mock one). Thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["METER_ATTRIBUTES", "TICK_INTERVAL_MS", "ZERO", "Meter", "MeterSnapshot", "combined"]

#: How often the moving averages take a sample (Yammer's ``TICK_INTERVAL``).
TICK_INTERVAL_MS: Final = 5_000
_ALPHAS: Final = tuple(1 - math.exp(-TICK_INTERVAL_MS / 60_000 / minutes) for minutes in (1, 5, 15))


@dataclass(frozen=True)
class MeterSnapshot:
    """A meter's values at one moment (rates per second)."""

    count: int
    mean_rate: float
    one_minute_rate: float
    five_minute_rate: float
    fifteen_minute_rate: float

    def attributes(self) -> dict[str, float]:
        """The values under Kafka's JMX attribute names (``Count``, ``MeanRate``, ``OneMinuteRate``, ...)."""
        values = (
            self.count,
            self.mean_rate,
            self.one_minute_rate,
            self.five_minute_rate,
            self.fifteen_minute_rate,
        )
        return dict(zip(METER_ATTRIBUTES, values, strict=True))


#: Kafka's JMX attribute names of a meter, in :class:`MeterSnapshot` order.
METER_ATTRIBUTES: Final = ("Count", "MeanRate", "OneMinuteRate", "FiveMinuteRate", "FifteenMinuteRate")
#: A meter that never counted anything.
ZERO: Final = MeterSnapshot(0, 0.0, 0.0, 0.0, 0.0)


def combined(snapshots: Iterable[MeterSnapshot]) -> MeterSnapshot:
    """The field-wise sum of meters' snapshots (a topic's meter from its partitions')."""
    total = ZERO
    for s in snapshots:
        total = MeterSnapshot(
            total.count + s.count,
            total.mean_rate + s.mean_rate,
            total.one_minute_rate + s.one_minute_rate,
            total.five_minute_rate + s.five_minute_rate,
            total.fifteen_minute_rate + s.fifteen_minute_rate,
        )
    return total


class Meter:
    """A count and its mean and 1/5/15-minute rates (see the module docstring)."""

    def __init__(self, time: Time | None = None) -> None:
        self._time = time or SYSTEM_TIME
        self._lock = threading.Lock()
        self._start = self._time.milliseconds()
        self._last_tick = self._start
        self._count = 0
        self._uncounted = 0
        self._rates = [0.0, 0.0, 0.0]
        self._initialized = False

    def __repr__(self) -> str:
        s = self.snapshot()
        return f"Meter(count={s.count}, one_minute_rate={s.one_minute_rate:.3f}/s)"

    def _tick_if_necessary(self, now: int) -> None:
        age = now - self._last_tick
        if age < TICK_INTERVAL_MS:
            return
        ticks = age // TICK_INTERVAL_MS
        self._last_tick = now - age % TICK_INTERVAL_MS
        for _ in range(min(ticks, 10_000)):  # after ~14 h idle every average is 0 to double precision
            instant = self._uncounted * 1000 / TICK_INTERVAL_MS
            self._uncounted = 0
            if self._initialized:
                for i, alpha in enumerate(_ALPHAS):
                    self._rates[i] += alpha * (instant - self._rates[i])
            else:
                self._rates = [instant, instant, instant]
                self._initialized = True

    def mark(self, n: int = 1) -> None:
        """Count ``n`` events now."""
        with self._lock:
            self._tick_if_necessary(self._time.milliseconds())
            self._count += n
            self._uncounted += n

    @property
    def count(self) -> int:
        """Events since the meter was created."""
        return self._count

    def snapshot(self) -> MeterSnapshot:
        """Count and rates now."""
        with self._lock:
            now = self._time.milliseconds()
            self._tick_if_necessary(now)
            elapsed = (now - self._start) / 1000
            mean = self._count / elapsed if self._count and elapsed > 0 else 0.0
            return MeterSnapshot(self._count, mean, *self._rates)
