"""The time index of a segment: the ``.timeindex`` file, byte for byte as Kafka writes it.

``.timeindex`` (``TimeIndex``): 12-byte big-endian entries ``timestamp int64 · relativeOffset int32``. An
entry ``(t, o)`` means: the largest timestamp seen up to offset ``base + o`` is ``t``. Timestamps strictly
increase; offsets never decrease. The last slot is reserved for the entry appended at roll/close, so the
index is "full" one entry early.

The file's life (lazy load, validation, preallocation, deferred writes) is
:class:`~kafkalog.storage.index.AbstractIndex`'s.
"""

from __future__ import annotations

import itertools
import struct
from array import array
from bisect import bisect_right
from typing import Final

import numpy as np

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage.index import AbstractIndex
from kafkalog.storage.types import TimestampOffset

__all__ = ["TIME_ENTRY_SIZE", "TimeIndex"]

TIME_ENTRY_SIZE: Final = 12
_INT32_MAX: Final = 2**31 - 1
_TIME_ENTRY = struct.Struct(">qi")


class TimeIndex(AbstractIndex):
    """The ``.timeindex`` file: timestamp -> the first offset whose batch may hold a record that late."""

    ENTRY_SIZE = TIME_ENTRY_SIZE

    def _clear_mirror(self) -> None:
        self._ts = array("q")
        self._rel = array("i")

    def _fill_mirror(self, data: bytes) -> None:
        rows = np.frombuffer(data, dtype=np.dtype([("ts", ">i8"), ("off", ">i4")]))
        self._ts = array("q", rows["ts"].astype(np.int64).tobytes())
        self._rel = array("i", rows["off"].astype(np.int32).tobytes())

    def _truncate_mirror(self, entries: int) -> None:
        del self._ts[entries:]
        del self._rel[entries:]

    def _check_order(self) -> None:
        n = self._entries
        if n == 0:
            return
        ts = np.frombuffer(self._ts, dtype=np.int64, count=n)
        rel = np.frombuffer(self._rel, dtype=np.int32, count=n)
        if rel[0] < 0:
            raise CorruptIndexError(
                f"corrupt time index found, time index file ({self._file}) has a negative offset"
            )
        if n > 1 and (np.any(np.diff(ts) <= 0) or np.any(np.diff(rel) < 0)):
            bad = int(np.argmax((np.diff(ts) <= 0) | (np.diff(rel) < 0))) + 1
            raise CorruptIndexError(
                f"corrupt time index found, time index file ({self._file}) has entry {bad} out of order "
                f"(timestamp {int(ts[bad])}, offset {self.base_offset + int(rel[bad])} after timestamp "
                f"{int(ts[bad - 1])}, offset {self.base_offset + int(rel[bad - 1])})"
            )

    def is_full(self) -> bool:
        """Full one entry early: the last slot is kept for the entry written at roll/close (no lock once
        loaded)."""
        if not self._loaded:
            with self._lock:
                self._ensure()
        return self._entries >= self._max_entries - 1

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        with self._lock:
            self._ensure()
            if not self._entries:
                return TimestampOffset(-1, self.base_offset)
            return TimestampOffset(
                self._ts[self._entries - 1], self.base_offset + self._rel[self._entries - 1]
            )

    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry."""
        with self._lock:
            self._ensure()
            if n < 0 or n >= self._entries:
                raise ValueError(
                    f"attempt to fetch the {n}th entry from time index {self._file}, which has size {self._entries}"
                )
            return TimestampOffset(self._ts[n], self.base_offset + self._rel[n])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= ``target_timestamp``, or ``(-1, base_offset)``."""
        with self._lock:
            self._ensure()
            n = self._entries
            if n == 0 or target_timestamp < self._ts[0]:
                return TimestampOffset(-1, self.base_offset)
            slot = bisect_right(self._ts, target_timestamp, 0, n) - 1
            return TimestampOffset(self._ts[slot], self.base_offset + self._rel[slot])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if the timestamp is larger than the last one.

        The entry is in the mirror at once and reaches the file with the pending ones (see the module doc).
        """
        with self._lock:
            if not self._loaded:
                self.load()
            n = self._entries
            if not skip_full_check and n >= self._max_entries - 1:
                raise ValueError(f"attempt to append to a full time index (size = {n})")
            if n:
                last_timestamp = self._ts[n - 1]
                last_offset = self.base_offset + self._rel[n - 1]
                if offset < last_offset:
                    raise InvalidOffsetError(
                        f"attempt to append an offset ({offset}) to slot {n} no larger than the last offset "
                        f"appended ({last_offset}) to {self._file}"
                    )
                if timestamp < last_timestamp:
                    raise RuntimeError(
                        f"attempt to append a timestamp ({timestamp}) to slot {n} no larger than the last "
                        f"timestamp appended ({last_timestamp}) to {self._file}"
                    )
            else:
                last_timestamp = -1
            if timestamp > last_timestamp:
                rel = offset - self.base_offset
                if rel < 0 or rel > _INT32_MAX:
                    self.relative_offset(offset)  # raises IndexOffsetOverflowError
                entry = _TIME_ENTRY.pack(timestamp, rel)
                pending = self._pending
                if (
                    n and n < self._max_entries and len(pending) < self._pending_limit
                ):  # see OffsetIndex.append
                    pending += entry
                    self._dirty = True
                else:
                    self._write_entry(n, entry)
                self._ts.append(timestamp)
                self._rel.append(rel)
                self._entries = n + 1

    def append_many(self, timestamps: list[int], offsets: list[int]) -> None:
        """:meth:`maybe_append` each ``(timestamp, offset)`` in order, as one pending write (recovery's bulk
        path).

        Entries that do not all fit, or whose timestamps do not strictly increase (or offsets decrease), go
        through :meth:`maybe_append` one by one (which skips or raises exactly as it does alone).
        """
        with self._lock:
            self._ensure()
            n = len(timestamps)
            rel = [o - self.base_offset for o in offsets]
            last = self.last_entry()
            if (
                n == 0
                or self._entries + n > self._max_entries - 1
                or timestamps[0] <= last.timestamp
                or offsets[0] < last.offset
                or rel[0] < 0
                or rel[-1] > _INT32_MAX
                or any(b <= a for a, b in itertools.pairwise(timestamps))
                or any(b < a for a, b in itertools.pairwise(rel))
            ):
                for timestamp, offset in zip(timestamps, offsets):
                    self.maybe_append(timestamp, offset)
                return
            rows = np.empty(n, dtype=np.dtype([("ts", ">i8"), ("off", ">i4")]))
            rows["ts"] = timestamps
            rows["off"] = rel
            self._ts.extend(timestamps)
            self._rel.extend(rel)
            self._queue_many(rows.tobytes(), n)

    def sanity_check(self) -> None:
        with self._lock:
            self._ensure()
            if self._entries:
                last = self.last_entry()
                if last.timestamp < self._ts[0]:
                    raise CorruptIndexError(
                        f"corrupt time index found, time index file ({self._file}) has non-zero size but the last "
                        f"timestamp is {last.timestamp} which is less than the first timestamp {self._ts[0]}"
                    )
                if last.offset < self.base_offset:
                    raise CorruptIndexError(
                        f"corrupt time index found, time index file ({self._file}) has non-zero size but the last "
                        f"offset is {last.offset} which is less than the first offset {self.base_offset}"
                    )
            super().sanity_check()
