"""Kafka source offsets: the JSON forms Spark's Kafka source uses, their resolution, and rate limiting.

Formats (``JsonUtils`` of Spark's Kafka connector):

* partition offsets ``{"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}``: -2 = earliest, -1 = latest;
  as a streaming offset the value is the **next** offset to read (``KafkaConsumer.position()``);
* partition timestamps ``{"topicA": {"0": 1700000000000}}`` (ms);
* assignments ``{"topicA": [0, 1], "topicB": [2, 4]}``.

Spark compares streaming offsets as JSON text, so :func:`to_json_offsets` always emits topics sorted and
partitions numerically sorted: the same offsets always serialize to the same string.

Resolution rules mirrored from ``KafkaOffsetReaderAdmin``: specific offsets must name exactly the
partitions being read; -2/-1 become the partition's earliest/latest offset; a timestamp becomes the first
offset whose record timestamp is at or after it (no match: an error or latest for starting offsets, per
``startingOffsetsByTimestampStrategy``; latest for ending offsets). Specific offsets are kept as given:
whether they still exist is a data-loss question answered by the planner.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

__all__ = [
    "EARLIEST",
    "EARLIEST_OFFSET",
    "LATEST",
    "LATEST_OFFSET",
    "TP",
    "EarliestOffsets",
    "LatestOffsets",
    "OffsetSpec",
    "PartitionBounds",
    "SpecificOffsets",
    "SpecificTimestamps",
    "from_json_offsets",
    "parse_assign",
    "parse_offset_spec",
    "rate_limit",
    "resolve_offsets",
    "to_json_offsets",
    "total_new_offsets",
]

#: A topic partition as ``(topic, partition)``.
TP = tuple[str, int]
EARLIEST_OFFSET: Final = -2
LATEST_OFFSET: Final = -1

_OFFSETS_EXAMPLE: Final = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE: Final = (
    '{"topicA": {"0": 123456789, "1": 123456789},"topicB": {"0": 123456789, "1": 123456789}}'
)
_ASSIGN_EXAMPLE: Final = '{"topicA":[0,1],"topicB":[0,1]}'


@dataclass(frozen=True)
class EarliestOffsets:
    """``earliest``: every partition from its log start offset."""


@dataclass(frozen=True)
class LatestOffsets:
    """``latest``: every partition from (or up to) its latest offset."""


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per partition (-2 earliest, -1 latest)."""

    offsets: dict[TP, int]


@dataclass(frozen=True)
class SpecificTimestamps:
    """A timestamp per partition, or one ``global_timestamp`` for every partition."""

    timestamps: dict[TP, int] = field(default_factory=dict)
    global_timestamp: int | None = None


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | SpecificTimestamps
EARLIEST: Final = EarliestOffsets()
LATEST: Final = LatestOffsets()


class PartitionBounds(NamedTuple):
    """What a partition holds now: ``earliest`` (log start) and ``latest`` (HW or LSO) offsets."""

    earliest: int
    latest: int


# --- JSON ---------------------------------------------------------------------------------------------------


def _load(text: str, example: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"Expected e.g. {example}, got {text}") from None


def _partition_map(text: str, example: str) -> dict[TP, int]:
    parsed = _load(text, example)
    if not isinstance(parsed, dict):
        raise ValueError(f"Expected e.g. {example}, got {text}")
    out: dict[TP, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ValueError(f"Expected e.g. {example}, got {text}")
        for partition, value in parts.items():
            try:
                p = int(partition)
            except ValueError:
                raise ValueError(f"Expected e.g. {example}, got {text}") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Expected e.g. {example}, got {text}")
            out[(str(topic), p)] = value
    return out


def parse_offset_spec(text: str, *, timestamps: bool = False) -> OffsetSpec:
    """``earliest``, ``latest`` or partition JSON (offsets, or timestamps with ``timestamps=True``)."""
    if timestamps:
        return SpecificTimestamps(_partition_map(text.strip(), _TIMESTAMPS_EXAMPLE))
    word = text.strip().lower()
    if word == "earliest":
        return EARLIEST
    if word == "latest":
        return LATEST
    return SpecificOffsets(_partition_map(text.strip(), _OFFSETS_EXAMPLE))


def parse_assign(text: str) -> list[TP]:
    """``{"topicA": [0, 1]}`` as a list of topic partitions (order kept)."""
    parsed = _load(text, _ASSIGN_EXAMPLE)
    if not isinstance(parsed, dict):
        raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
    out: list[TP] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in parts
        ):
            raise ValueError(f"Expected e.g. {_ASSIGN_EXAMPLE}, got {text}")
        out.extend((str(topic), p) for p in parts)
    return out


def to_json_offsets(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """The streaming offset dict in canonical order (topics sorted, partitions numerically sorted)."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return out


def from_json_offsets(data: Mapping[str, Any] | str | None) -> dict[TP, int]:
    """Inverse of :func:`to_json_offsets` (accepts the dict Spark passes back, or its JSON text)."""
    if data is None:
        return {}
    if isinstance(data, str):
        return _partition_map(data, _OFFSETS_EXAMPLE)
    return {(str(t), int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


# --- resolution ---------------------------------------------------------------------------------------------


def _check_all_partitions(given: Iterable[TP], partitions: Sequence[TP], what: str) -> None:
    if set(given) != set(partitions):
        specified = ", ".join(f"{t}-{p}" for t, p in sorted(given))
        assigned = ", ".join(f"{t}-{p}" for t, p in sorted(partitions))
        raise ValueError(
            f"If {what} contains specific offsets, you must specify all TopicPartitions.\n"
            f"Use -1 for latest, -2 for earliest.\nSpecified: Set({specified}) Assigned: Set({assigned})"
        )


def resolve_offsets(
    spec: OffsetSpec,
    partitions: Sequence[TP],
    bounds: Callable[[TP], PartitionBounds],
    offset_for_timestamp: Callable[[TP, int], int | None],
    *,
    starting: bool,
    no_match_latest: bool = False,
) -> dict[TP, int]:
    """Concrete offsets for ``partitions`` (see the module doc); ``starting`` picks the option's rules."""
    name = "startingOffsets" if starting else "endingOffsets"
    if isinstance(spec, EarliestOffsets):
        return {tp: bounds(tp).earliest for tp in partitions}
    if isinstance(spec, LatestOffsets):
        return {tp: bounds(tp).latest for tp in partitions}
    if isinstance(spec, SpecificOffsets):
        _check_all_partitions(spec.offsets, partitions, name)
        out: dict[TP, int] = {}
        for tp in partitions:
            value = spec.offsets[tp]
            if value == EARLIEST_OFFSET:
                value = bounds(tp).earliest
            elif value == LATEST_OFFSET:
                value = bounds(tp).latest
            out[tp] = value
        return out
    if spec.global_timestamp is None:
        _check_all_partitions(spec.timestamps, partitions, f"{name}ByTimestamp")
    result: dict[TP, int] = {}
    for tp in partitions:
        ts = spec.global_timestamp if spec.global_timestamp is not None else spec.timestamps[tp]
        if ts == EARLIEST_OFFSET:
            result[tp] = bounds(tp).earliest
            continue
        found = None if ts == LATEST_OFFSET else offset_for_timestamp(tp, ts)
        if found is None:
            if starting and not no_match_latest and ts != LATEST_OFFSET:
                raise ValueError(
                    f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and timestamp {ts}."
                )
            found = bounds(tp).latest
        result[tp] = found
    return result


# --- streaming rate limits ----------------------------------------------------------------------------------


def rate_limit(
    limit: int, start: Mapping[TP, int], latest: Mapping[TP, int], earliest: Callable[[TP], int]
) -> dict[TP, int]:
    """Kafka's ``rateLimit``: spread ``limit`` offsets over the partitions in proportion to what each has
    pending (a share below 1 rounds up, others down), never past ``latest``. Partitions missing from
    ``start`` (new ones) start at ``earliest(tp)``."""
    sizes: dict[TP, int] = {}
    begins: dict[TP, int] = {}
    for tp, end in latest.items():
        begin = start[tp] if tp in start else earliest(tp)
        begins[tp] = begin
        if end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out: dict[TP, int] = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begins[tp] + share)
    return out


def total_new_offsets(start: Mapping[TP, int], latest: Mapping[TP, int]) -> int:
    """Offsets pending between ``start`` and ``latest`` (new partitions count from 0, as Kafka's
    ``delayBatch`` does)."""
    return sum(end - start.get(tp, 0) for tp, end in latest.items())
