"""RLMQuotaManager: Kafka's sampled rate (at least num - 1 whole windows) and QuotaUtils.throttleTime."""

from __future__ import annotations

from kafkalog.tiering import RLMQuotaManager
from kafkalog.time import MockTime


def test_rate_and_throttle_time_are_kafkas() -> None:
    time = MockTime()
    quota = RLMQuotaManager(1_000, 11, 1, time)
    assert quota.get_throttle_time_ms() == 0
    quota.record(10_000)  # measured over the minimum span of 10 windows: 1,000 B/s, at the bound
    assert quota.rate() == 1_000 and quota.get_throttle_time_ms() == 0
    quota.record(5_000)  # 1,500 B/s: (1500 - 1000) / 1000 x 10 s
    assert quota.get_throttle_time_ms() == 5_000
    time.sleep(5_000)  # the span is still the 10 s minimum
    assert quota.get_throttle_time_ms() == 5_000
    time.sleep(6_000)  # 11 s after the samples: they expire
    assert quota.rate() == 0 and quota.get_throttle_time_ms() == 0
    quota.update_quota(10, 2, 1)
    quota.record(30)  # 30 B over the 1 s minimum span: 2 x the bound, throttled for 1 s
    assert quota.get_throttle_time_ms() == 2_000
