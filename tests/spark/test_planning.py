"""Planning of the ``kafkalog`` source: splitting offset ranges (``KafkaOffsetRangeCalculatorSuite``'s cases),
snapping cuts to segment boundaries, and Kafka's ``maxOffsetsPerTrigger`` rate limit (pure: no Spark)."""

from __future__ import annotations

import pytest

from kafkalog.spark.offsets import rate_limit, total_new_offsets
from kafkalog.spark.planning import OffsetRange, part_counts, split_range, split_ranges


def r(tp: str, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp, 0, start, end)


def test_one_to_one_without_min_partitions() -> None:
    ranges = [r("t1", 1, 2), r("t2", 1, 2), r("t3", 1, 2)]
    assert split_ranges(ranges) == ranges
    assert split_ranges(ranges, min_partitions=3) == ranges
    assert split_ranges([r("t1", 5, 5), r("t2", 5, 4), r("t3", 0, 9)]) == [
        r("t3", 0, 9)
    ]  # empty/invalid dropped


@pytest.mark.parametrize(
    ("min_partitions", "ranges", "expected"),
    [
        (4, [r("t1", 1, 5)], [r("t1", 1, 2), r("t1", 2, 3), r("t1", 3, 4), r("t1", 4, 5)]),
        (3, [r("t1", 1, 5), r("t2", 1, 21)], [r("t1", 1, 5), r("t2", 1, 11), r("t2", 11, 21)]),
        (3, [r("t1", 1, 2), r("t2", 1, 1001)], [r("t1", 1, 2), r("t2", 1, 501), r("t2", 501, 1001)]),
        (
            4,
            [r("t1", 1, 1), r("t2", 1, 21)],
            [r("t2", 1, 6), r("t2", 6, 11), r("t2", 11, 16), r("t2", 16, 21)],
        ),
        (
            6,
            [r("t1", 0, 10), r("t2", 0, 10), r("t3", 0, 1)],
            [
                r("t1", 0, 3),
                r("t1", 3, 6),
                r("t1", 6, 10),
                r("t2", 0, 3),
                r("t2", 3, 6),
                r("t2", 6, 10),
                r("t3", 0, 1),
            ],
        ),
    ],
)
def test_min_partitions_as_kafka_splits(
    min_partitions: int, ranges: list[OffsetRange], expected: list[OffsetRange]
) -> None:
    assert split_ranges(ranges, min_partitions=min_partitions) == expected


def test_max_records_per_partition() -> None:
    assert part_counts([r("t", 0, 100), r("u", 0, 10)], None, 30) == [4, 1]
    parts = split_ranges([r("t", 0, 100), r("u", 0, 10)], max_records_per_partition=30)
    assert [(p.start, p.end) for p in parts] == [(0, 25), (25, 50), (50, 75), (75, 100), (0, 10)]
    assert part_counts([r("t", 0, 100)], 8, 30) == [8]  # the larger requirement wins
    assert part_counts([r("t", 0, 100)], 2, 60) == [2]


def test_cuts_snap_to_segment_boundaries() -> None:
    rng = r("t", 0, 1000)
    assert [(p.start, p.end) for p in split_range(rng, 4, [0, 240, 480, 790])] == [
        (0, 240),
        (240, 480),
        (480, 790),
        (790, 1000),
    ]
    # too far from the even cut (more than a quarter of a part): keep the even cut
    assert [(p.start, p.end) for p in split_range(rng, 2, [0, 300])] == [(0, 500), (500, 1000)]
    # a snap that would break maxRecordsPerPartition is not taken
    assert [(p.start, p.end) for p in split_range(rng, 2, [0, 450], max_records=500)] == [
        (0, 500),
        (500, 1000),
    ]
    parts = split_ranges([rng], min_partitions=4, boundaries={("t", 0): [0, 251, 499, 760]})
    assert [(p.start, p.end) for p in parts] == [(0, 251), (251, 499), (499, 760), (760, 1000)]
    assert sum(p.size for p in parts) == 1000


def test_rate_limit_is_kafkas_proportional_split() -> None:
    latest = {("o", 0): 1010, ("o", 1): 1000}
    assert rate_limit(500, {("o", 0): 0, ("o", 1): 0}, latest, lambda tp: 0) == {("o", 0): 251, ("o", 1): 248}
    # a share below one offset rounds up, so small partitions are never starved
    assert rate_limit(10, {("a", 0): 0, ("b", 0): 0}, {("a", 0): 1000, ("b", 0): 1}, lambda tp: 0) == {
        ("a", 0): 9,
        ("b", 0): 1,
    }
    # never past the latest offset; partitions without new data keep their latest offset
    assert rate_limit(1000, {("a", 0): 5, ("b", 0): 7}, {("a", 0): 10, ("b", 0): 7}, lambda tp: 0) == {
        ("a", 0): 10,
        ("b", 0): 7,
    }
    # a new partition counts from its earliest offset
    assert rate_limit(10, {("a", 0): 0}, {("a", 0): 10, ("b", 0): 110}, lambda tp: 100) == {
        ("a", 0): 5,
        ("b", 0): 105,
    }
    # nothing pending: the latest offsets as they are
    assert rate_limit(10, {("a", 0): 10}, {("a", 0): 10}, lambda tp: 0) == {("a", 0): 10}


def test_total_new_offsets_counts_new_partitions_from_zero() -> None:
    assert total_new_offsets({("a", 0): 5}, {("a", 0): 9, ("b", 0): 3}) == 7
