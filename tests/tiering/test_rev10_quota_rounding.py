"""Review of tiering (issue #25, rev10): the throttle time of the remote fetch (and copy) quota is Kafka's
``QuotaUtils.throttleTime``, ``Math.round`` of the exact time: a rate above the bound by so little that the
time rounds to 0 ms is not throttled (Kafka's ``ReplicaManager`` skips a remote read only when it is > 0),
and halves round up. Before, it was at least 1 ms (a remote read skipped where Kafka reads) and Python's
``round`` (half to even: 2.5 ms gave 2)."""

from __future__ import annotations

from kafkalog.tiering import RLMQuotaManager
from kafkalog.time import MockTime


def test_a_rate_above_the_bound_by_less_than_half_a_millisecond_of_throttle_is_not_throttled() -> None:
    quota = RLMQuotaManager(1_000_000, 11, 1, MockTime())
    quota.record(10_000_001)  # 1,000,000.1 B/s over the 10 s minimum span: 0.001 ms of throttle
    assert quota.rate() > quota.quota_bytes_per_second
    assert quota.get_throttle_time_ms() == 0


def test_the_throttle_time_rounds_half_up_as_javas_math_round() -> None:
    half = RLMQuotaManager(10_000, 11, 1, MockTime())
    half.record(100_005)  # 10,000.5 B/s over the 10 s minimum span: (0.5 / 10,000) x 10 s = 0.5 ms exactly
    assert half.get_throttle_time_ms() == 1
    quota = RLMQuotaManager(2_000, 11, 1, MockTime())
    quota.record(20_005)  # 2,000.5 B/s: (0.5 / 2,000) x 10 s = 2.5 ms exactly
    assert quota.get_throttle_time_ms() == 3
