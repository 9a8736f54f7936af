"""LogSegments: the segments of one log, ordered by base offset (Kafka's ``LogSegments``).

Invariant: keys are base offsets, strictly increasing; the last segment is the active one. Every method is
thread-safe; methods that return several segments return a snapshot list, so a reader can walk it while
the writer adds or removes segments. :meth:`LogSegments.floor_segment` (once per read) takes no lock: it
searches an immutable ``(base offsets, segments)`` snapshot that every change drops (under the lock) and
the next lookup rebuilds.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from pathlib import Path

from kafkalog.storage import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """An ordered map ``base offset -> LogSegment``."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._map: dict[int, LogSegment] = {}
        self._keys: list[int] = []
        self._snapshot: tuple[list[int], list[LogSegment]] | None = None

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add ``segment``, replacing (and returning) one with the same base offset."""
        with self._lock:
            old = self._map.get(segment.base_offset)
            if old is None:
                insort(self._keys, segment.base_offset)
            self._map[segment.base_offset] = segment
            self._snapshot = None
            return old

    def remove(self, base_offset: int) -> None:
        """Remove the segment at ``base_offset`` (if any)."""
        with self._lock:
            if self._map.pop(base_offset, None) is not None:
                del self._keys[bisect_left(self._keys, base_offset)]
                self._snapshot = None

    def clear(self) -> None:
        """Forget every segment (files untouched)."""
        with self._lock:
            self._map.clear()
            self._keys.clear()
            self._snapshot = None

    def close(self) -> None:
        """Close every segment."""
        for segment in self.values():
            segment.close()

    def close_handlers(self) -> None:
        """Close every segment's file handles without flushing."""
        for segment in self.values():
            segment.close_handlers()

    def update_parent_dir(self, directory: Path) -> None:
        """Point every segment at a renamed directory."""
        for segment in self.values():
            segment.update_parent_dir(directory)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_empty(self) -> bool:
        """Whether there is no segment."""
        return not self._keys

    @property
    def number_of_segments(self) -> int:
        """How many segments."""
        return len(self._keys)

    def base_offsets(self) -> list[int]:
        """Base offsets, ascending."""
        with self._lock:
            return list(self._keys)

    def contains(self, base_offset: int) -> bool:
        """Whether a segment has this base offset."""
        return base_offset in self._map

    def get(self, base_offset: int) -> LogSegment | None:
        """The segment with this base offset."""
        return self._map.get(base_offset)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[LogSegment]:
        """All segments, or those that may hold offsets in ``[from_offset, to_offset)``."""
        with self._lock:
            if from_offset is None:
                return [self._map[k] for k in self._keys]
            assert to_offset is not None
            if from_offset == to_offset:
                return []
            if to_offset < from_offset:
                raise ValueError(
                    f"invalid log segment range: requested segments from offset {from_offset} which "
                    f"is greater than limit offset {to_offset}"
                )
            lo = max(bisect_right(self._keys, from_offset) - 1, 0)
            hi = bisect_left(self._keys, to_offset)
            return [self._map[k] for k in self._keys[lo:hi]]

    def non_active_log_segments_from(self, from_offset: int) -> list[LogSegment]:
        """Segments from the one holding ``from_offset`` up to, not including, the active segment."""
        with self._lock:
            active = self.active_segment
            if active is None or from_offset > active.base_offset:
                return []
            return self.values(from_offset, active.base_offset)

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset`` (lock-free: see the module doc)."""
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._take_snapshot()
        i = bisect_right(snapshot[0], offset) - 1
        return snapshot[1][i] if i >= 0 else None

    def _take_snapshot(self) -> tuple[list[int], list[LogSegment]]:
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None:
                keys = list(self._keys)
                snapshot = self._snapshot = (keys, [self._map[k] for k in keys])
            return snapshot

    def lower_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset < ``offset``."""
        with self._lock:
            i = bisect_left(self._keys, offset) - 1
            return self._map[self._keys[i]] if i >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The segment with the smallest base offset > ``offset``."""
        with self._lock:
            i = bisect_right(self._keys, offset)
            return self._map[self._keys[i]] if i < len(self._keys) else None

    def higher_segments(self, offset: int) -> list[LogSegment]:
        """Segments with base offsets > ``offset``."""
        with self._lock:
            return [self._map[k] for k in self._keys[bisect_right(self._keys, offset) :]]

    @property
    def first_segment(self) -> LogSegment | None:
        """The oldest segment."""
        with self._lock:
            return self._map[self._keys[0]] if self._keys else None

    @property
    def last_segment(self) -> LogSegment | None:
        """The newest segment (lock-free, from the same snapshot as :meth:`floor_segment`)."""
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._take_snapshot()
        segments = snapshot[1]
        return segments[-1] if segments else None

    #: The segment appends go to: the newest (the same property object as :attr:`last_segment`).
    active_segment = last_segment

    def size_in_bytes(self) -> int:
        """Total bytes of all segments."""
        return sum(s.size for s in self.values())

    def filter(self, predicate: Callable[[LogSegment], bool]) -> list[LogSegment]:
        """Segments matching ``predicate``, ascending."""
        return [s for s in self.values() if predicate(s)]
