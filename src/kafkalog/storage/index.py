"""Offset and time indexes of a segment: ``.index`` and ``.timeindex``, byte for byte as Kafka writes them.

``.index`` (``OffsetIndex``): 8-byte big-endian entries ``relativeOffset int32 · position int32``. An entry
``(o, p)`` means: the batch that starts at byte ``p`` of the ``.log`` ends at offset ``base + o``. Entries
are sparse (about one per ``index.interval.bytes`` of appended data) with strictly increasing offsets.

``.timeindex`` (``TimeIndex``): 12-byte big-endian entries ``timestamp int64 · relativeOffset int32``. An
entry ``(t, o)`` means: the largest timestamp seen up to offset ``base + o`` is ``t``. Timestamps strictly
increase; offsets never decrease. The last slot is reserved for the entry appended at roll/close, so the
index is "full" one entry early.

Both files are preallocated to ``segment.index.bytes`` (rounded down to whole entries) while their segment
is active and trimmed to their entries on roll/close. An existing file's length defines its entry count,
as in Kafka. No checksum: the file is trusted only after a check. Unlike Kafka (which maps the file and
trusts every slot, the root of KAFKA-10207/KAFKA-19200), an index is validated when it is loaded (lengths a
multiple of the entry size, offsets within the segment, entries strictly ordered); a failed check raises
:class:`~kafkalog.errors.CorruptIndexError` and the segment rebuilds the index from its ``.log``.

Implementation: the file is read once, lazily (a segment that is never read never opens its indexes),
into a native-endian in-memory mirror that serves every lookup (binary search). Kafka maps the file
instead; in Python a mapped file cannot be resized while a reader holds a view of it, and a concurrent
truncation would make a reader fault, so the mirror is both safer and faster. Lookups take the index lock,
except :meth:`OffsetIndex.bracket` (once per ``Log.read``), which searches the mirror without it and
retries under it if the mirror shrank meanwhile.

Writes are deferred, as Kafka's are (it stores entries into the mapping, no system call; the kernel writes
the pages back when it likes). An appended entry goes to the mirror, which is always complete, and to a
small pending buffer that reaches the file in one ``pwrite`` when it holds :data:`PENDING_ENTRIES` entries,
and before anything that changes, syncs, renames or exposes the file: :meth:`~AbstractIndex.flush` (before
the ``fsync``), :meth:`~AbstractIndex.resize` and :meth:`~AbstractIndex.trim_to_valid_size`, truncation
(:meth:`~AbstractIndex.truncate_to_entries`, ``truncate_to``), :meth:`~AbstractIndex.close` and
:meth:`~AbstractIndex.close_handler`, :meth:`~AbstractIndex.rename_to`,
:attr:`~AbstractIndex.length`, :attr:`~AbstractIndex.size_in_bytes` and ``sanity_check``.
:meth:`~AbstractIndex.reset` and :meth:`~AbstractIndex.delete_if_exists` drop it (the file is emptied or
removed). After each of those points the file's bytes are exactly those of a write-through index. The
first entry of an empty index is written at once (one ``pwrite`` per segment): a file with entries then
never begins with an empty slot, which readers of a live directory (Kafka's and kafkalog's ``dump``,
``kafkalog verify``) cannot tell from an entry ``(base offset, 0)``.

Invariant: the file holds every entry appended up to the last of those points (or the last full buffer);
the entries after it are in memory only and are missing from the file if the process dies. That is safe:
only an untrimmed index has pending entries (every trim writes them first), and a segment's indexes are
trimmed when it stops being the active segment (roll, close). The active segment holds the recovery point or
starts after it (the recovery point never passes the log end offset), and after an unclean shutdown the
loader rebuilds the indexes of every segment from the one holding the recovery point on, from their
``.log`` (``kafkalog.log.loader``, as Kafka's ``LogLoader.recoverLog``). An untrimmed index of an older
segment (one rebuilt after it failed its load check) ends in zero-filled slots, which fail that check again
after a crash, as they do without deferral. A power failure loses what was never fsynced, as before:
:meth:`~AbstractIndex.flush` writes the pending entries before its fsync. Readers in other processes
(:mod:`kafkalog.log.readonly`) take index files as hints checked against the ``.log``, so a lagging file
only makes them scan from an earlier entry.
"""

from __future__ import annotations

import abc
import itertools
import logging
import os
import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path
from typing import Final

import numpy as np

from kafkalog.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from kafkalog.storage.types import OffsetPosition, TimestampOffset

__all__ = [
    "OFFSET_ENTRY_SIZE",
    "PENDING_ENTRIES",
    "TIME_ENTRY_SIZE",
    "AbstractIndex",
    "OffsetIndex",
    "OwnsDescriptor",
    "TimeIndex",
]

OFFSET_ENTRY_SIZE: Final = 8
TIME_ENTRY_SIZE: Final = 12
_INT32_MAX: Final = 2**31 - 1
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
#: Appended entries held in memory before they are written to the file in one ``pwrite`` (1 KiB of
#: ``.index``, 1.5 KiB of ``.timeindex``); see the module doc for the other points that write them.
PENDING_ENTRIES: Final = 128

_log = logging.getLogger("kafkalog.storage.index")


def _round_down(value: int, factor: int) -> int:
    return factor * (value // factor)


class OwnsDescriptor:
    """Closes ``self._fd`` (when >= 0) if the object is collected without being closed.

    For the index files: an index dropped without ``close()`` (a segment whose delayed deletion never ran, its
    log closed first or its scheduler dropped) must not keep its descriptor, whose file may already be
    unlinked. Entries not yet written are lost as in a crash, which recovery rebuilds."""

    _fd: int

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # ``os.close`` bound at definition: at interpreter exit the module's globals may already be gone
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            try:
                _close(fd)
            except OSError:
                pass


class AbstractIndex(OwnsDescriptor, abc.ABC):
    """Common mechanics of the fixed-width index files (Kafka's ``AbstractIndex`` + ``LazyIndex``)."""

    ENTRY_SIZE: int

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self._file = os.fspath(path)
        self._path_obj: Path | None = path if isinstance(path, Path) else None
        self.base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._lock = threading.RLock()
        self._loaded = False
        self._dirty = False
        self._fd = -1
        self._entries = 0
        self._max_entries = 0
        self._length = 0
        #: Encoded entries not yet in the file: slots ``[entries - len(pending) / ENTRY_SIZE, entries)``.
        self._pending = bytearray()
        self._pending_limit = PENDING_ENTRIES * self.ENTRY_SIZE

    # --- lifecycle ----------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The index file's current path (the ``Path`` object is made on first use: opening a segment only
        remembers a string)."""
        path = self._path_obj
        if path is None:
            path = self._path_obj = Path(self._file)
        return path

    @property
    def file_name(self) -> str:
        """The index file's name (no directory)."""
        return os.path.basename(self._file)

    @property
    def is_loaded(self) -> bool:
        """Whether the file has been opened (lazy loading)."""
        return self._loaded

    @property
    def max_index_size(self) -> int:
        """The preallocation size (``segment.index.bytes``)."""
        return self._max_index_size

    def load(self) -> None:
        """Open the file and read it into memory (creating and preallocating it if missing)."""
        with self._lock:
            if self._loaded:
                return
            # Open without O_CREAT first: an existing file (the common case) costs no extra ``stat``.
            existed = True
            try:
                fd = os.open(self._file, (os.O_RDWR if self._writable else os.O_RDONLY) | _O_CLOEXEC)
            except FileNotFoundError:
                if not self._writable:
                    raise
                existed = False
                fd = os.open(self._file, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
            try:
                if not existed:
                    length = _round_down(max(self._max_index_size, 0), self.ENTRY_SIZE)
                    os.ftruncate(fd, length)
                    self._clear_mirror()
                    entries = 0
                else:
                    length = os.fstat(fd).st_size
                    data = os.pread(fd, length, 0) if length else b""
                    entries = length // self.ENTRY_SIZE
                    self._fill_mirror(data[: entries * self.ENTRY_SIZE])
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            self._length = length
            self._entries = entries
            self._max_entries = length // self.ENTRY_SIZE
            self._loaded = True
            # The first flush after a load always syncs (a previous process may have left unsynced pages).
            self._dirty = True
            try:
                self._validate_on_load(length)
            except CorruptIndexError:
                self.close_handler()
                raise

    def _validate_on_load(self, length: int) -> None:
        if length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"index file {self.file_name} is corrupt, found {length} bytes which is not a multiple of "
                f"{self.ENTRY_SIZE}"
            )
        self._check_order()

    @abc.abstractmethod
    def _clear_mirror(self) -> None: ...
    @abc.abstractmethod
    def _fill_mirror(self, data: bytes) -> None: ...
    @abc.abstractmethod
    def _truncate_mirror(self, entries: int) -> None: ...
    @abc.abstractmethod
    def _check_order(self) -> None:
        """Raise CorruptIndexError unless the loaded entries are ordered and within the segment."""

    def _ensure(self) -> None:
        if not self._loaded:
            self.load()

    @property
    def entries(self) -> int:
        """Number of entries."""
        with self._lock:
            self._ensure()
            return self._entries

    @property
    def max_entries(self) -> int:
        """Entries the file has room for."""
        with self._lock:
            self._ensure()
            return self._max_entries

    @property
    def length(self) -> int:
        """The file's length in bytes (pending entries are written first)."""
        with self._lock:
            self._ensure()
            self._write_pending()
            return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes of entries (``entries * entry size``; pending entries are written first)."""
        with self._lock:
            self._ensure()
            self._write_pending()
            return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        """Whether no more entries fit (no lock once loaded: the append path asks on every append)."""
        if not self._loaded:
            with self._lock:
                self._ensure()
        return self._entries >= self._max_entries

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, which must fit an int32."""
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise IndexOffsetOverflowError(
                f"integer overflow for offset: {offset} ({self.file_name}, base offset {self.base_offset})"
            )
        return rel

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` is representable relative to the base offset."""
        rel = offset - self.base_offset
        return 0 <= rel <= _INT32_MAX

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; False if unchanged.

        Pending entries are written first (those beyond the new size are then cut with the file)."""
        with self._lock:
            self._ensure()
            self._write_pending()
            rounded = _round_down(new_size, self.ENTRY_SIZE)
            if self._length == rounded:
                return False
            os.ftruncate(self._fd, rounded)
            self._dirty = True
            self._length = rounded
            self._max_entries = rounded // self.ENTRY_SIZE
            if self._entries > self._max_entries:
                self._entries = self._max_entries
                self._truncate_mirror(self._entries)
            return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to exactly its entries."""
        with self._lock:
            self._ensure()
            self.resize(self._entries * self.ENTRY_SIZE)

    def truncate_to_entries(self, entries: int) -> None:
        """Keep only the first ``entries`` entries.

        As in Kafka, the slots after them keep their bytes until overwritten or trimmed: pending entries are
        written first, so the file is what a write-through index leaves."""
        with self._lock:
            self._ensure()
            self._write_pending()
            if entries < self._entries:
                self._entries = entries
                self._truncate_mirror(entries)

    def reset(self) -> None:
        """Drop every entry and preallocate again, without reading the old contents (used by recovery)."""
        with self._lock:
            if not self._loaded:
                flags = os.O_RDWR | os.O_CREAT
                self._fd = os.open(self._file, flags | _O_CLOEXEC, 0o644)
                self._loaded = True
            self._pending.clear()  # the file is emptied: nothing to write
            os.ftruncate(self._fd, 0)
            self._dirty = True
            self._clear_mirror()
            self._entries = 0
            self._length = 0
            self._max_entries = 0
            self.resize(self._max_index_size)

    def flush(self) -> None:
        """Write the pending entries and fsync the file (it is created first if it was never loaded).

        The fsync is skipped when nothing was appended or resized since the last fsync of this descriptor
        (Kafka's ``force()`` of a clean mapping is just as cheap): with ``flush.messages=1`` the indexes then
        cost an fsync only when an entry was appended.
        """
        with self._lock:
            self._ensure()
            self._write_pending()
            if self._dirty:
                os.fsync(self._fd)
                self._dirty = False

    def close_handler(self) -> None:
        """Write the pending entries and close the file descriptor; the index loads again if used later.

        Used when a directory goes offline, so a failed write is logged, not raised: the entries are lost
        with the descriptor and the file is left as a crash leaves it (recovery rebuilds it).
        """
        with self._lock:
            if self._fd >= 0:
                try:
                    self._write_pending()
                except OSError as exc:
                    _log.warning("Could not write the pending entries of index %s: %s", self._file, exc)
                    self._pending.clear()
                os.close(self._fd)
            self._pending.clear()
            self._fd = -1
            self._loaded = False
            self._dirty = False
            self._clear_mirror()

    def close(self) -> None:
        """Trim to the entries and close (a never-loaded index is left untouched)."""
        with self._lock:
            if self._loaded:
                self.trim_to_valid_size()
            self.close_handler()

    def delete_if_exists(self) -> bool:
        """Close and delete the file (pending entries are dropped); returns whether it existed."""
        with self._lock:
            self._pending.clear()
            self.close_handler()
            try:
                os.unlink(self._file)
                return True
            except FileNotFoundError:
                return False

    def rename_to(self, path: Path) -> None:
        """Rename the file (works whether or not it is loaded); pending entries are written first."""
        with self._lock:
            self._write_pending()
            try:
                os.replace(self._file, path)
            except FileNotFoundError:
                if self._loaded:
                    raise
            self._set_path(path)

    def update_parent_dir(self, parent: Path) -> None:
        """Point at the file's new location after its directory was renamed."""
        with self._lock:
            self._set_path(os.path.join(parent, self.file_name))

    def _set_path(self, path: Path | str) -> None:
        self._file = os.fspath(path)
        self._path_obj = path if isinstance(path, Path) else None

    def _write_entry(self, slot: int, data: bytes) -> None:
        """Queue ``data`` for ``slot`` (== the entry count: the caller adds it to the mirror right after)."""
        if slot >= self._max_entries:
            # Only reachable with skip_full_check: grow by one entry rather than fail (cf. KAFKA-19200).
            self.resize((slot + 1) * self.ENTRY_SIZE)
        if slot == 0:
            os.pwrite(self._fd, data, 0)  # the first entry at once (see the module doc)
        else:
            pending = self._pending
            if len(pending) >= self._pending_limit:
                self._write_pending()  # before the new entry: if it fails, the index is as it was
            pending += data
        self._dirty = True

    def _write_pending(self) -> None:
        """Write the pending entries to their slots (call with the lock held)."""
        pending = self._pending
        if not pending:
            return
        position = self._entries * self.ENTRY_SIZE - len(pending)
        written = os.pwrite(self._fd, pending, position)
        while written < len(pending):  # a regular file takes it all unless the disk fails (which raises)
            written += os.pwrite(self._fd, pending[written:], position + written)
        pending.clear()

    def sanity_check(self) -> None:
        """Full check: length, ordering and bounds of every entry (raises CorruptIndexError)."""
        with self._lock:
            self._ensure()
            self._write_pending()
            self._validate_on_load(self._length)

    def __repr__(self) -> str:
        state = f"entries={self._entries}" if self._loaded else "not loaded"
        return f"{type(self).__name__}({self.file_name}, base={self.base_offset}, {state})"


class OffsetIndex(AbstractIndex):
    """The ``.index`` file: offset -> byte position of the batch that holds it (largest lower bound)."""

    ENTRY_SIZE = OFFSET_ENTRY_SIZE

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self._clear_mirror()
        super().__init__(path, base_offset, max_index_size, writable)

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
            first = self._entries == 0
            self._pending += pairs.tobytes()
            self._dirty = True
            self._rel.extend(rel)
            self._pos.extend(positions)
            self._entries += n
            if first or len(self._pending) >= self._pending_limit:
                self._write_pending()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with an offset >= ``offset``."""
        with self._lock:
            self._ensure()
            rel = offset - self.base_offset
            keep = bisect_left(self._rel, rel, 0, self._entries) if rel >= 0 else 0
            self.truncate_to_entries(keep)

    def sanity_check(self) -> None:
        with self._lock:
            self._ensure()
            if self._entries and self.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"corrupt index found, index file ({self._file}) has non-zero size but the last offset is "
                    f"{self.last_offset} which is less than the base offset {self.base_offset}"
                )
            super().sanity_check()


class TimeIndex(AbstractIndex):
    """The ``.timeindex`` file: timestamp -> the first offset whose batch may hold a record that late."""

    ENTRY_SIZE = TIME_ENTRY_SIZE

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self._clear_mirror()
        super().__init__(path, base_offset, max_index_size, writable)

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
            first = self._entries == 0
            self._pending += rows.tobytes()
            self._dirty = True
            self._ts.extend(timestamps)
            self._rel.extend(rel)
            self._entries += n
            if first or len(self._pending) >= self._pending_limit:
                self._write_pending()

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with an offset >= ``offset``."""
        with self._lock:
            self._ensure()
            rel = offset - self.base_offset
            keep = bisect_left(self._rel, rel, 0, self._entries) if rel >= 0 else 0
            self.truncate_to_entries(keep)

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
