"""The aborted-transaction index of a segment: ``.txnindex`` (Kafka's ``TransactionIndex``).

34-byte big-endian entries, one per **aborted** transaction whose ABORT marker is in this segment,
appended in strictly increasing ``lastOffset`` order, never preallocated::

    version int16 (0) · producerId int64 · firstOffset int64 · lastOffset int64 · lastStableOffset int64

``lastOffset`` is the marker's offset; ``lastStableOffset`` is the log's LSO when the marker was written
(the first offset of the earliest other open transaction, else ``lastOffset + 1``). A trailing partial
entry (< 34 bytes) is ignored, as Kafka's iterator does; an entry with a version other than 0 is an error.

The file is created on the first append; it is read once, lazily, and kept in memory (it is small).
"""

from __future__ import annotations

import os
import struct
import threading
from bisect import bisect_left
from pathlib import Path
from typing import Final, NamedTuple

from kafkalog.errors import CorruptIndexError, KafkaError
from kafkalog.storage.files import open_regular, read_regular
from kafkalog.storage.index import OwnsDescriptor

__all__ = [
    "ABORTED_TXN_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "collect_aborted_txns",
    "parse_txn_index",
]

ABORTED_TXN_SIZE: Final = 34
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer, offset range and the LSO when it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = 0

    def to_bytes(self) -> bytes:
        """The 34-byte entry."""
        return _ENTRY.pack(
            self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, offset: int = 0) -> AbortedTxn:
        """Parse the entry at ``data[offset:]``."""
        version, pid, first, last, lso = _ENTRY.unpack_from(data, offset)
        return cls(pid, first, last, lso, version)


def parse_txn_index(data: bytes, name: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes (a trailing partial entry ignored); ``name`` is what the
    :class:`KafkaError` for an unknown entry version calls the file."""
    entries: list[AbortedTxn] = []
    for pos in range(0, len(data) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
        txn = AbortedTxn.from_bytes(data, pos)
        if txn.version != 0:
            raise KafkaError(
                f"unexpected aborted transaction version {txn.version} in transaction index {name}, "
                "current version is 0"
            )
        entries.append(txn)
    return entries


def collect_aborted_txns(
    entries: list[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """Entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``; the search is
    complete (later segments need not be searched) once an entry's LSO reaches the upper bound."""
    found: list[AbortedTxn] = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)


class TxnIndexSearchResult(NamedTuple):
    """Aborted transactions overlapping a fetch, and whether the search could stop in this segment."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex(OwnsDescriptor):
    """Aborted transactions of one segment, in marker-offset order."""

    def __init__(self, start_offset: int, path: Path | str) -> None:
        self.start_offset = start_offset
        self._file = os.fspath(path)
        self._path_obj: Path | None = path if isinstance(path, Path) else None
        self._lock = threading.RLock()
        self._entries: list[AbortedTxn] | None = None
        self._fd = -1
        self._dirty = False

    @property
    def path(self) -> Path:
        """The index file's current path (the ``Path`` object is made on first use)."""
        path = self._path_obj
        if path is None:
            path = self._path_obj = Path(self._file)
        return path

    def _set_path(self, path: Path | str) -> None:
        self._file = os.fspath(path)
        self._path_obj = path if isinstance(path, Path) else None

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = read_regular(self._file)
            except FileNotFoundError:
                data = b""
            self._entries = parse_txn_index(data, self._file)
        return self._entries

    def _ensure_fd(self) -> int:
        if self._fd < 0:
            self._fd = open_regular(self._file, os.O_RDWR | os.O_CREAT)
            self._dirty = True  # possibly a new file
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction (its last offset must exceed every earlier one)."""
        with self._lock:
            entries = self._load()
            if entries and txn.last_offset <= entries[-1].last_offset:
                raise ValueError(
                    f"the last offset of appended transactions must increase sequentially, but {txn.last_offset} "
                    f"is not greater than current last offset {entries[-1].last_offset} of index {self._file}"
                )
            fd = self._ensure_fd()
            os.pwrite(fd, txn.to_bytes(), len(entries) * ABORTED_TXN_SIZE)
            self._dirty = True
            entries.append(txn)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry."""
        with self._lock:
            return list(self._load())

    @property
    def is_empty(self) -> bool:
        """Whether there is no entry."""
        with self._lock:
            return not self._load()

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``.

        The search is complete (later segments need not be searched) once an entry's LSO reaches the upper
        bound.
        """
        with self._lock:
            return collect_aborted_txns(self._load(), fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose last offset is >= ``offset``."""
        with self._lock:
            entries = self._load()
            keep = bisect_left([t.last_offset for t in entries], offset)
            if keep < len(entries):
                del entries[keep:]
                if self._truncate_file(keep * ABORTED_TXN_SIZE):
                    self._dirty = True

    def _truncate_file(self, size: int) -> bool:
        """Cut the file to ``size`` bytes through a descriptor (never through a link); False if it is missing."""
        if self._fd >= 0:
            os.ftruncate(self._fd, size)
            return True
        try:
            fd = open_regular(self._file, os.O_WRONLY)
        except FileNotFoundError:
            return False
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        return True

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds the index)."""
        with self._lock:
            self._entries = []
            if self._truncate_file(0):
                self._dirty = True

    def flush(self) -> None:
        """fsync the file if it is open and changed since its last fsync."""
        with self._lock:
            if self._fd >= 0 and self._dirty:
                os.fsync(self._fd)
                self._dirty = False

    def close(self) -> None:
        """Close the file descriptor."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            self._dirty = False

    def delete_if_exists(self) -> bool:
        """Close and delete the file; returns whether it existed."""
        with self._lock:
            self.close()
            self._entries = None
            try:
                os.unlink(self._file)
                return True
            except FileNotFoundError:
                return False

    def rename_to(self, path: Path) -> None:
        """Rename the file if it exists."""
        with self._lock:
            try:
                os.replace(self._file, path)
            except FileNotFoundError:
                pass
            self._set_path(path)

    def update_parent_dir(self, parent: Path) -> None:
        """Point at the file's new location after its directory was renamed."""
        with self._lock:
            self._set_path(os.path.join(parent, os.path.basename(self._file)))

    def sanity_check(self) -> None:
        """Every entry's last offset must be at or after the segment's base offset (CorruptIndexError)."""
        with self._lock:
            try:
                entries = self._load()
            except CorruptIndexError:
                raise
            except KafkaError as exc:
                raise CorruptIndexError(str(exc)) from exc
            for txn in entries:
                if txn.last_offset < self.start_offset:
                    raise CorruptIndexError(
                        f"last offset of aborted transaction {txn} in index {self._file} is less than start offset "
                        f"{self.start_offset}"
                    )
