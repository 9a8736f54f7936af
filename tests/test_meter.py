"""kafkalog.meter: Kafka's (Yammer) meter: count, mean rate and 1/5/15-minute moving averages."""

from __future__ import annotations

import math

import pytest

from kafkalog.meter import METER_ATTRIBUTES, Meter, combined
from kafkalog.time import MockTime


def test_meter_rates_follow_yammers_moving_averages() -> None:
    time = MockTime()
    meter = Meter(time)
    assert meter.snapshot().count == 0 and meter.snapshot().one_minute_rate == 0
    meter.mark(500)
    time.sleep(5_000)  # the first tick takes the instant rate: 500 / 5 s
    first = meter.snapshot()
    assert first.count == 500
    assert first.one_minute_rate == first.five_minute_rate == first.fifteen_minute_rate == pytest.approx(100)
    assert first.mean_rate == pytest.approx(100)
    time.sleep(60_000)  # a quiet minute: 12 ticks of 0 decay each average by exp(-minutes)
    quiet = meter.snapshot()
    assert quiet.one_minute_rate == pytest.approx(100 * math.exp(-1))
    assert quiet.five_minute_rate == pytest.approx(100 * math.exp(-1 / 5))
    assert quiet.fifteen_minute_rate == pytest.approx(100 * math.exp(-1 / 15))
    assert quiet.mean_rate == pytest.approx(500 / 65)
    assert list(quiet.attributes()) == list(METER_ATTRIBUTES)
    assert quiet.attributes()["Count"] == 500
    other = Meter(time)
    other.mark(7)
    both = combined([quiet, other.snapshot()])
    assert both.count == 507 and both.one_minute_rate == pytest.approx(quiet.one_minute_rate)
