"""The mechanics shared by a segment's fixed-width index files (``AbstractIndex``), as Kafka writes them.

The entry formats are owned by :mod:`kafkalog.storage.offset_index` (``.index``) and
:mod:`kafkalog.storage.time_index` (``.timeindex``).

Index files are preallocated to ``segment.index.bytes`` (rounded down to whole entries) while their segment
is active and trimmed to their entries on roll/close. An existing file's length defines its entry count,
as in Kafka. No checksum: the file is trusted only after a check. Unlike Kafka (which maps the file and
trusts every slot, the root of KAFKA-10207/KAFKA-19200), an index is validated when it is loaded (lengths a
multiple of the entry size, offsets within the segment, entries strictly ordered); a failed check raises
:class:`~kafkalog.errors.CorruptIndexError` and the segment rebuilds the index from its ``.log``.

Implementation: the file is read once, lazily (a segment that is never read never opens its indexes),
into a native-endian in-memory mirror that serves every lookup (binary search). Kafka maps the file
instead; in Python a mapped file cannot be resized while a reader holds a view of it, and a concurrent
truncation would make a reader fault, so the mirror is both safer and faster. Lookups take the index lock,
except :meth:`~kafkalog.storage.offset_index.OffsetIndex.bracket` (once per ``Log.read``), which searches
the mirror without it and retries under it if the mirror shrank meanwhile.

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
(:mod:`kafkalog.readonly.log`) take index files as hints checked against the ``.log``, so a lagging file
only makes them scan from an earlier entry.
"""

from __future__ import annotations

import abc
import logging
import os
import threading
from array import array
from bisect import bisect_left
from collections.abc import Callable
from pathlib import Path
from typing import Final

from kafkalog.errors import CorruptIndexError, IndexOffsetOverflowError
from kafkalog.storage.files import open_regular

__all__ = ["PENDING_ENTRIES", "AbstractIndex", "OwnsDescriptor"]

_INT32_MAX: Final = 2**31 - 1
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
    #: Every entry's offset relative to the base offset, in order (part of each subclass's mirror).
    _rel: array[int]

    def __init__(
        self, path: Path | str, base_offset: int, max_index_size: int = -1, writable: bool = True
    ) -> None:
        self._clear_mirror()
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
                fd = open_regular(self._file, os.O_RDWR if self._writable else os.O_RDONLY)
            except FileNotFoundError:
                if not self._writable:
                    raise
                existed = False
                fd = open_regular(self._file, os.O_RDWR | os.O_CREAT)
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

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with an offset >= ``offset``."""
        with self._lock:
            self._ensure()
            rel = offset - self.base_offset
            keep = bisect_left(self._rel, rel, 0, self._entries) if rel >= 0 else 0
            self.truncate_to_entries(keep)

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
                self._fd = open_regular(self._file, flags)
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

    def _queue_many(self, data: bytes, n: int) -> None:
        """Count ``n`` entries just added to the mirror, encoded in ``data``, and queue them as one pending
        write (the bulk path of ``append_many``; call with the lock held). Written at once when they are the
        index's first entries (see the module doc) or fill the buffer."""
        first = self._entries == 0
        self._pending += data
        self._dirty = True
        self._entries += n  # after the mirror's arrays: the lock-free ``bracket`` reads the count first
        if first or len(self._pending) >= self._pending_limit:
            self._write_pending()

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
