"""Filter pushdown of batch reads: which of Spark's pushed filters the reader handles, and how they prune the plan.

Pure functions over pyspark's ``pyspark.sql.datasource.Filter`` dataclasses (no session needed). Spark
offers the top-level AND-ed conjuncts of a query's ``WHERE`` (``EqualTo``, ``EqualNullSafe``,
``GreaterThan``, ``GreaterThanOrEqual``, ``LessThan``, ``LessThanOrEqual``, ``In``, ``IsNull``,
``IsNotNull``, ``Not``, ``StringStartsWith``, ``StringEndsWith``, ``StringContains``) and re-evaluates the
ones the reader returns.

Invariant: a filter reported as handled is applied exactly (no row failing it is ever returned); a filter
used only for pruning stays with Spark, which evaluates it again on every row read. Filters follow SQL's
three-valued logic: a ``NULL`` literal makes a comparison unknown, ``NOT`` unknown is unknown, and a row is
kept only when the filter is true (the ``topic``, ``partition``, ``offset`` and ``timestamp`` columns are
never null).

* ``topic`` and ``partition``: handled; a Kafka partition is read only if every such filter is true for it.
* ``offset``: handled; each partition's offset range is cut to the offsets the filters accept (a set of
  half-open ranges). A filter accepting more than :data:`MAX_OFFSET_RANGES` separate ranges (a long ``IN``)
  only prunes, by its hull, and stays with Spark.
* ``timestamp``: prunes only. A lower bound (``>=``, ``>``, ``=``, ``<=>``, ``IN``, ``NOT <``, ``NOT <=``)
  moves each partition's start to an offset below which every record is older, found from the time indexes
  without reading records (segments whose largest timestamp is below the bound are skipped, then the time
  index entry before it is taken, as Kafka's ``offsetsForTimes`` starts its scan). Upper bounds prune
  nothing: a segment's smallest timestamp is not indexed and timestamps need not grow with offsets.
* anything else (``key``, ``value``, ``headers``, ``timestampType``, literals of another type): left to Spark.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from kafkalog.spark.offsets import TP
from kafkalog.spark.planning import OffsetRange

__all__ = ["MAX_OFFSET_RANGES", "PushedFilters", "group_pieces", "prune_ranges", "push_filters"]

#: Most separate offset ranges a handled ``offset`` filter may accept (each becomes at least one task).
MAX_OFFSET_RANGES: Final = 64

_MIN: Final = -(1 << 63)
_MAX: Final = 1 << 63  # exclusive
_ALL: Final[tuple[tuple[int, int], ...]] = ((_MIN, _MAX),)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

Ranges = tuple[tuple[int, int], ...]
"""Sorted, disjoint, non-adjacent half-open ranges ``[lo, hi)`` of offsets."""


class _NotPushable(Exception):
    """Internal: the filter (or a part of it) is not one this module evaluates."""


# --- offset range sets --------------------------------------------------------------------------------------


def _normalize(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted((max(lo, _MIN), min(hi, _MAX)) for lo, hi in ranges):
        if hi <= lo:
            continue
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _complement(a: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    at = _MIN
    for lo, hi in a:
        if lo > at:
            out.append((at, lo))
        at = hi
    if at < _MAX:
        out.append((at, _MAX))
    return tuple(out)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _offset_truth(f: Filter) -> tuple[Ranges, Ranges]:
    """``(offsets where f is true, offsets where f is false)``; the rest are unknown (NULL)."""
    if isinstance(f, Not):
        true, false = _offset_truth(f.child)
        return false, true
    if isinstance(f, IsNull):
        return (), _ALL
    if isinstance(f, IsNotNull):
        return _ALL, ()
    if isinstance(f, In):
        if not all(v is None or _is_int(v) for v in f.value):
            raise _NotPushable
        points = _normalize((v, v + 1) for v in f.value if v is not None)
        return points, (() if None in f.value else _complement(points))
    if not isinstance(
        f, EqualTo | EqualNullSafe | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual
    ):
        raise _NotPushable
    v = f.value
    if v is None:
        return ((), _ALL) if isinstance(f, EqualNullSafe) else ((), ())
    if not _is_int(v):
        raise _NotPushable
    if isinstance(f, EqualTo | EqualNullSafe):
        true = _normalize([(v, v + 1)])
    elif isinstance(f, GreaterThan):
        true = _normalize([(v + 1, _MAX)])
    elif isinstance(f, GreaterThanOrEqual):
        true = _normalize([(v, _MAX)])
    elif isinstance(f, LessThan):
        true = _normalize([(_MIN, v)])
    else:
        true = _normalize([(_MIN, v + 1)])
    return true, _complement(true)


# --- topic / partition: three-valued evaluation of one value ------------------------------------------------


def _truth(f: Filter, value: str | int) -> bool | None:
    """Whether ``f`` holds for a row whose column is ``value`` (``None``: unknown, the row is not kept)."""
    if isinstance(f, Not):
        inner = _truth(f.child, value)
        return None if inner is None else not inner
    if isinstance(f, IsNull):
        return False
    if isinstance(f, IsNotNull):
        return True

    def same_type(literal: Any) -> bool:
        return isinstance(literal, str) if isinstance(value, str) else _is_int(literal)

    if isinstance(f, In):
        if not all(v is None or same_type(v) for v in f.value):
            raise _NotPushable
        if value in [v for v in f.value if v is not None]:
            return True
        return None if None in f.value else False
    if not isinstance(
        f,
        EqualTo
        | EqualNullSafe
        | GreaterThan
        | GreaterThanOrEqual
        | LessThan
        | LessThanOrEqual
        | StringStartsWith
        | StringEndsWith
        | StringContains,
    ):
        raise _NotPushable
    literal: Any = f.value
    if literal is None:
        return False if isinstance(f, EqualNullSafe) else None
    if not same_type(literal):
        raise _NotPushable
    if isinstance(f, EqualTo | EqualNullSafe):
        return bool(value == literal)
    if isinstance(f, StringStartsWith | StringEndsWith | StringContains):
        if not isinstance(value, str):
            raise _NotPushable
        if isinstance(f, StringStartsWith):
            return value.startswith(literal)
        return value.endswith(literal) if isinstance(f, StringEndsWith) else literal in value
    # str order is code-point order, which is Spark's UTF-8 binary order
    ordered: Any = value
    if isinstance(f, GreaterThan):
        return bool(ordered > literal)
    if isinstance(f, GreaterThanOrEqual):
        return bool(ordered >= literal)
    if isinstance(f, LessThan):
        return bool(ordered < literal)
    return bool(ordered <= literal)


# --- timestamp: lower bounds ---------------------------------------------------------------------------------


def _micros(value: Any) -> int | None:
    """A ``TimestampType`` literal (an aware ``datetime``) in microseconds since the epoch."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def _ceil_ms(micros: int) -> int:
    return -(-micros // 1000)


def _timestamp_floor(f: Filter) -> int | None:
    """A timestamp in ms that every record passing ``f`` has at least (``None``: no such bound known)."""
    child = f.child if isinstance(f, Not) else None
    if isinstance(child, Not):
        return _timestamp_floor(child.child)
    literal = getattr(f if child is None else child, "value", None)
    if isinstance(child, LessThan) or isinstance(f, GreaterThanOrEqual | EqualTo | EqualNullSafe):
        us = _micros(literal)
        return None if us is None else _ceil_ms(us)  # ts_ms * 1000 >= us
    if isinstance(child, LessThanOrEqual) or isinstance(f, GreaterThan):
        us = _micros(literal)
        return None if us is None else us // 1000 + 1  # ts_ms * 1000 > us
    if isinstance(f, In):
        bounds = [_micros(v) for v in f.value if v is not None]
        if not bounds or any(b is None for b in bounds):
            return None
        return _ceil_ms(min(b for b in bounds if b is not None))
    return None


# --- the pushed plan -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushedFilters:
    """What the reader applies: handled ``topic``/``partition`` filters, the accepted ``offsets`` (``None``:
    all) and a ``min_timestamp_ms`` lower bound for pruning (``None``: none). Picklable."""

    topic: tuple[Filter, ...] = ()
    partition: tuple[Filter, ...] = ()
    offsets: Ranges | None = None
    min_timestamp_ms: int | None = None

    def keeps(self, tp: TP) -> bool:
        """Whether the handled ``topic`` and ``partition`` filters are all true for partition ``tp``."""
        return all(_truth(f, tp[0]) is True for f in self.topic) and all(
            _truth(f, tp[1]) is True for f in self.partition
        )

    def cut(self, rng: OffsetRange) -> list[OffsetRange]:
        """``rng`` restricted to the accepted offsets (in offset order; empty pieces dropped)."""
        if self.offsets is None:
            return [rng] if rng.size > 0 else []
        pieces = _intersect(self.offsets, ((rng.start, rng.end),)) if rng.size > 0 else ()
        return [OffsetRange(rng.topic, rng.partition, lo, hi) for lo, hi in pieces]


def _column(f: Filter) -> str | None:
    target = f.child if isinstance(f, Not) else f
    while isinstance(target, Not):
        target = target.child
    path: tuple[str, ...] = getattr(target, "attribute", ())
    return path[0] if len(path) == 1 else None


def push_filters(filters: Sequence[Filter]) -> tuple[PushedFilters, list[Filter]]:
    """The plan for ``filters`` (AND-ed), and the filters Spark must still evaluate (the same objects, in
    their order): everything but the handled ``topic``, ``partition`` and ``offset`` filters."""
    topic: list[Filter] = []
    partition: list[Filter] = []
    exact: Ranges | None = None
    hull: Ranges = _ALL
    floor: int | None = None
    rest: list[Filter] = []
    for f in filters:
        column = _column(f)
        try:
            if column in ("topic", "partition"):
                _truth(f, "" if column == "topic" else 0)  # raises _NotPushable for what it cannot evaluate
                (topic if column == "topic" else partition).append(f)
                continue
            if column == "offset":
                true, _ = _offset_truth(f)
                if len(true) <= MAX_OFFSET_RANGES:
                    exact = true if exact is None else _intersect(exact, true)
                    continue
                hull = _intersect(hull, ((true[0][0], true[-1][1]),))
            elif column == "timestamp":
                bound = _timestamp_floor(f)
                if bound is not None:
                    floor = bound if floor is None else max(floor, bound)
        except _NotPushable:
            pass
        rest.append(f)
    offsets = None
    if exact is not None or hull != _ALL:
        offsets = _intersect(_ALL if exact is None else exact, hull)
    return PushedFilters(tuple(topic), tuple(partition), offsets, floor), rest


def prune_ranges(
    ranges: Sequence[OffsetRange],
    pushed: PushedFilters,
    offset_for_timestamp: Callable[[TP, int], int | None],
) -> list[OffsetRange]:
    """``ranges`` (one or more per partition) cut to what ``pushed`` lets through: partitions dropped, offsets
    cut, starts moved up to ``offset_for_timestamp(tp, min_timestamp_ms)``, an offset below which every
    record is older (``None``: no record is that new)."""
    out: list[OffsetRange] = []
    first: dict[TP, int | None] = {}
    for rng in ranges:
        tp = (rng.topic, rng.partition)
        if not pushed.keeps(tp):
            continue
        for piece in pushed.cut(rng):
            if pushed.min_timestamp_ms is not None:
                if tp not in first:
                    first[tp] = offset_for_timestamp(tp, pushed.min_timestamp_ms)
                start = first[tp]
                if start is None or start >= piece.end:
                    continue
                piece = OffsetRange(piece.topic, piece.partition, max(piece.start, start), piece.end)
            out.append(piece)
    return out


def group_pieces(pieces: Sequence[OffsetRange]) -> tuple[list[OffsetRange], dict[TP, list[tuple[int, int]]]]:
    """Per partition (first-seen order) the hull of its ``pieces``, and the pieces themselves as ``[lo, hi)``:
    one partition stays one range to split (and one task), reading only its pieces."""
    grouped: dict[TP, list[tuple[int, int]]] = {}
    for piece in pieces:
        grouped.setdefault((piece.topic, piece.partition), []).append((piece.start, piece.end))
    hulls = [OffsetRange(tp[0], tp[1], spans[0][0], spans[-1][1]) for tp, spans in grouped.items()]
    return hulls, grouped
