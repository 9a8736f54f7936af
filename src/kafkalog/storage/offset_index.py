"""The offset index of a segment: the ``.index`` file, byte for byte as Kafka writes it.

``.index`` (``OffsetIndex``): 8-byte big-endian entries ``relativeOffset int32 · position int32``. An entry
``(o, p)`` means: the batch that starts at byte ``p`` of the ``.log`` ends at offset ``base + o``. Entries
are sparse (about one per ``index.interval.bytes`` of appended data) with strictly increasing offsets.

The file's life (lazy load, validation, preallocation, deferred writes) is
:class:`~kafkalog.storage.index.AbstractIndex`'s.
"""

from __future__ import annotations

import itertools
import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import Final

import numpy as np

from kafkalog.errors import CorruptIndexError, InvalidOffsetError
from kafkalog.storage.index import AbstractIndex
from kafkalog.storage.types import OffsetPosition

__all__ = ["OFFSET_ENTRY_SIZE", "OffsetIndex"]

OFFSET_ENTRY_SIZE: Final = 8
_INT32_MAX: Final = 2**31 - 1
_OFFSET_ENTRY = struct.Struct(">ii")


class OffsetIndex(AbstractIndex):
    """The ``.index`` file: offset -> byte position of the batch that holds it (largest lower bound)."""

    ENTRY_SIZE = OFFSET_ENTRY_SIZE

    def _clear_mirror(self) -> None:
        self._rel = array("i")
        self._pos = array("i")

    def _fill_mirror(self, data: bytes) -> None:
        pairs = np.frombuffer(data, dtype=">i4").astype(np.int32)
        self._rel = array("i", pairs[0::2].tobytes())
        self._pos = array("i", pairs[1::2].tobytes())

    def _truncate_mirror(self, entries: int) -> None:
        del self._rel[entries:]
        del self._pos[entries:]

    def _check_order(self) -> None:
        n = self._entries
        if n == 0:
            return
        rel = np.frombuffer(self._rel, dtype=np.int32, count=n)
        pos = np.frombuffer(self._pos, dtype=np.int32, count=n)
        if rel[0] < 0 or pos[0] < 0:
            raise CorruptIndexError(
                f"corrupt index found, index file ({self._file}) has a negative first entry"
            )
        if n > 1 and (np.any(np.diff(rel) <= 0) or np.any(np.diff(pos) < 0)):
            bad = int(np.argmax((np.diff(rel) <= 0) | (np.diff(pos) < 0))) + 1
            raise CorruptIndexError(
                f"corrupt index found, index file ({self._file}) has entry {bad} out of order "
                f"(offset {self.base_offset + int(rel[bad])}, position {int(pos[bad])} after offset "
                f"{self.base_offset + int(rel[bad - 1])}, position {int(pos[bad - 1])})"
            )

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when empty."""
        with self._lock:
            self._ensure()
            return self.base_offset + self._rel[self._entries - 1] if self._entries else self.base_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry with offset <= ``target_offset``, or ``(base_offset, 0)``."""
        with self._lock:
            self._ensure()
            n = self._entries
            rel = target_offset - self.base_offset
            if n == 0 or rel < self._rel[0]:
                return OffsetPosition(self.base_offset, 0)
            slot = bisect_right(self._rel, rel, 0, n) - 1
            return OffsetPosition(self.base_offset + self._rel[slot], self._pos[slot])

    def lookup_upper(self, target_offset: int) -> OffsetPosition | None:
        """The first entry with offset >= ``target_offset`` (smallest upper bound), if any."""
        with self._lock:
            self._ensure()
            slot = bisect_left(self._rel, target_offset - self.base_offset, 0, self._entries)
            if slot >= self._entries:
                return None
            return OffsetPosition(self.base_offset + self._rel[slot], self._pos[slot])

    def bracket(self, target_offset: int) -> tuple[int, int, int] | None:
        """Positions around ``target_offset``, from one search (the single-read path of a segment read).

        Returns ``(lower, upper, span)``: ``lower`` is the position of the last entry with an offset below
        ``target_offset`` (0 if none), ``upper`` the position of the first entry with an offset >= it (the
        batch there ends at that offset; -1 if none), ``span`` the bytes from ``upper`` to the next entry's
        position (-1 if none): the size of the batch at ``upper`` when every batch has an entry. None when
        the index is not loaded: this never loads it (the segment does, repairing a corrupt file, and not
        after its files were deleted).

        The search takes no lock: the entry count is read before the arrays (an append grows the arrays
        first), a concurrent truncation or close shows as an ``IndexError`` (the search is then repeated
        under the lock), and the caller checks the batch header it finds at these positions.
        """
        if self._loaded:
            try:
                return self._bracket(target_offset)
            except IndexError:
                pass
        with self._lock:
            return self._bracket(target_offset) if self._loaded else None

    def _bracket(self, target_offset: int) -> tuple[int, int, int]:
        n = self._entries
        positions = self._pos
        slot = bisect_left(self._rel, target_offset - self.base_offset, 0, n)
        lower = positions[slot - 1] if slot else 0
        if slot >= n:
            return lower, -1, -1
        upper = positions[slot]
        return lower, upper, (positions[slot + 1] - upper if slot + 1 < n else -1)

    def entry(self, n: int) -> OffsetPosition:
        """The ``n``-th entry."""
        with self._lock:
            self._ensure()
            if n < 0 or n >= self._entries:
                raise ValueError(
                    f"attempt to fetch the {n}th entry from index {self._file}, which has size {self._entries}"
                )
            return OffsetPosition(self.base_offset + self._rel[n], self._pos[n])

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry whose position is >= ``fetch_offset.position + fetch_size`` (if any)."""
        with self._lock:
            self._ensure()
            target = fetch_offset.position + fetch_size
            slot = bisect_left(self._pos, target, 0, self._entries)
            if slot >= self._entries:
                return None
            return OffsetPosition(self.base_offset + self._rel[slot], self._pos[slot])

    def append(self, offset: int, position: int) -> None:
        """Add an entry; the offset must be larger than the last one and the index must not be full.

        The entry is in the mirror at once and reaches the file with the pending ones (see the module doc).
        """
        with self._lock:
            if not self._loaded:
                self.load()
            n = self._entries
            if n >= self._max_entries:
                raise ValueError(f"attempt to append to a full index (size = {n})")
            rels = self._rel
            rel = offset - self.base_offset
            if n and rel <= rels[n - 1]:
                raise InvalidOffsetError(
                    f"attempt to append an offset ({offset}) to position {n} no larger than the last "
                    f"offset appended ({self.base_offset + rels[n - 1]}) to {self._file}"
                )
            if rel < 0 or rel > _INT32_MAX:
                self.relative_offset(offset)  # raises IndexOffsetOverflowError
            entry = _OFFSET_ENTRY.pack(rel, position)
            pending = self._pending
            if n and len(pending) < self._pending_limit:  # _write_entry's usual case, inlined (hot path)
                pending += entry
                self._dirty = True
            else:
                self._write_entry(n, entry)
            # Arrays before the count: the lock-free ``bracket`` reads the count first.
            rels.append(rel)
            self._pos.append(position)
            self._entries = n + 1

    def append_many(self, offsets: list[int], positions: list[int]) -> None:
        """:meth:`append` each ``(offset, position)`` in order, as one pending write (recovery's bulk path).

        Entries that do not all fit, or are not strictly increasing, go through :meth:`append` one by one
        (which raises at the first bad one, after appending the ones before it).
        """
        with self._lock:
            self._ensure()
            n = len(offsets)
            rel = [o - self.base_offset for o in offsets]
            last = self._rel[self._entries - 1] if self._entries else -1
            if (
                n == 0
                or self._entries + n > self._max_entries
                or rel[0] <= last
                or rel[-1] > _INT32_MAX
                or any(b <= a for a, b in itertools.pairwise(rel))
            ):
                for offset, position in zip(offsets, positions):
                    self.append(offset, position)
                return
            pairs = np.empty((n, 2), dtype=">i4")
            pairs[:, 0] = rel
            pairs[:, 1] = positions
            self._rel.extend(rel)
            self._pos.extend(positions)
            self._queue_many(pairs.tobytes(), n)

    def sanity_check(self) -> None:
        with self._lock:
            self._ensure()
            if self._entries and self.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"corrupt index found, index file ({self._file}) has non-zero size but the last offset is "
                    f"{self.last_offset} which is less than the base offset {self.base_offset}"
                )
            super().sanity_check()
