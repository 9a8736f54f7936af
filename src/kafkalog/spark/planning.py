"""Splitting per-partition offset ranges into Spark input partitions (pure functions, no Spark).

Mirrors ``KafkaOffsetRangeCalculator`` of Spark's Kafka source:

* empty (``end <= start``) ranges are dropped;
* without ``minPartitions`` (or with no more than there are ranges) and without ``maxRecordsPerPartition``,
  one Kafka partition range is one Spark partition;
* with ``minPartitions`` above the number of ranges, each range gets
  ``max(round(size / total * minPartitions), 1)`` parts, where ranges that get 1 part are left out of the
  proportional math of the others (Kafka's "unsplit ranges"); the count is approximate, like Kafka's;
* with ``maxRecordsPerPartition``, a range gets at least ``ceil(size / maxRecordsPerPartition)`` parts.

Parts are even in offsets (the last takes the rounding), then each cut moves to a segment boundary (the
base offset of a segment) when one lies within a quarter of a part of it and the parts still respect
``maxRecordsPerPartition``: a Spark task then reads whole segment files, and no two tasks read the same
segment's bytes. Offsets are counted, not records (compaction and markers leave gaps), exactly as Kafka.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["OffsetRange", "part_counts", "split_range", "split_ranges"]


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Number of offsets (not records) in the range."""
        return self.end - self.start


def part_counts(
    ranges: Sequence[OffsetRange], min_partitions: int | None, max_records_per_partition: int | None
) -> list[int]:
    """How many parts each (non-empty) range of ``ranges`` is split into (see the module doc)."""
    counts = [1] * len(ranges)
    if min_partitions is not None and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)

        def share(size: int, of: int, parts: int) -> int:
            return max(math.floor(size / of * parts + 0.5), 1) if of > 0 else 1  # Scala's math.round

        unsplit = [share(r.size, total, min_partitions) == 1 for r in ranges]
        split_total = total - sum(r.size for r, u in zip(ranges, unsplit) if u)
        split_min = max(min_partitions - sum(unsplit), 1)
        counts = [1 if u else share(r.size, split_total, split_min) for r, u in zip(ranges, unsplit)]
    if max_records_per_partition is not None:
        counts = [max(c, math.ceil(r.size / max_records_per_partition)) for r, c in zip(ranges, counts)]
    return counts


def split_range(
    rng: OffsetRange, parts: int, boundaries: Sequence[int] = (), max_records: int | None = None
) -> list[OffsetRange]:
    """``rng`` in ``parts`` pieces, cuts snapped to nearby ``boundaries`` (sorted segment base offsets)."""
    if parts <= 1 or rng.size <= 1:
        return [rng]
    cuts: list[int] = []
    remaining = rng.size
    at = rng.start
    for part in range(parts - 1):
        step = remaining // (parts - part)
        remaining -= step
        at += step
        cuts.append(at)
    tolerance = rng.size // parts // 4
    if boundaries and tolerance > 0:
        snapped: list[int] = []
        for i, cut in enumerate(cuts):
            lo = snapped[-1] if snapped else rng.start
            hi = cuts[i + 1] if i + 1 < len(cuts) else rng.end
            j = bisect.bisect_left(boundaries, cut)
            near = [b for b in boundaries[max(0, j - 1) : j + 1] if lo < b < hi and abs(b - cut) <= tolerance]
            best = min(near, key=lambda b: abs(b - cut)) if near else cut
            if max_records is not None and (best - lo > max_records or hi - best > max_records):
                best = cut
            snapped.append(best)
        cuts = snapped
    edges = [rng.start, *cuts, rng.end]
    return [OffsetRange(rng.topic, rng.partition, a, b) for a, b in itertools.pairwise(edges) if b > a]


def split_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    boundaries: Mapping[tuple[str, int], Sequence[int]] | None = None,
) -> list[OffsetRange]:
    """The Spark input partitions for ``ranges`` (see the module doc), in input order."""
    live = [r for r in ranges if r.size > 0]
    counts = part_counts(live, min_partitions, max_records_per_partition)
    out: list[OffsetRange] = []
    for rng, parts in zip(live, counts):
        bounds = (boundaries or {}).get((rng.topic, rng.partition), ())
        out.extend(split_range(rng, parts, bounds, max_records_per_partition))
    return out
