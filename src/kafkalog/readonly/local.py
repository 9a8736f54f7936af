"""A local partition directory as a :class:`~kafkalog.objstore.PartitionSource`: the read-only reader's native
byte source (descriptors and ``pread``, no copy on the hot path).

Invariants owned here (those of the read-only reader for local directories):

* **Never writes, never waits, regular files only.** Every file is opened ``O_RDONLY`` through
  :func:`~kafkalog.storage.files.open_regular` (``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``). Listing a
  partition directory that is a symlink, or one holding a ``.log`` entry that is not a regular file, raises
  :class:`~kafkalog.errors.NotRegularFileError`; a ``.log`` name above ``2**63 - 1`` raises
  :class:`~kafkalog.errors.KafkaStorageError`. Other non-regular entries are refused when opened.
* **Retention under a reader.** :meth:`LocalPartitionSource.open` also looks for a segment under its
  ``.deleted`` name (a writer renames before it deletes); an open :class:`LocalFile` keeps a deleted file
  readable.
* A directory that does not exist lists as empty (a partition deleted under a reader has no segments).
* Listing is one ``scandir``: sizes are ``lstat``-ed when asked for (``.log`` files always are, to check
  them), so a reader that wants only segment sizes pays one ``lstat`` per segment.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from kafkalog.errors import NotRegularFileError
from kafkalog.storage.files import (
    DELETED_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    file_kind,
    offset_from_file_name,
    open_regular,
    read_regular,
)

__all__ = ["LocalFile", "LocalPartitionSource"]


class LocalFile:
    """A read-only descriptor of a regular file (a :class:`~kafkalog.objstore.RandomAccessFile`) that can also
    read straight into a caller's buffer (:meth:`readinto`)."""

    __slots__ = ("_fd", "_name", "_size")

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        self._name = name
        self._size = os.fstat(fd).st_size

    def __repr__(self) -> str:
        return f"LocalFile({self._name!r})"

    @property
    def name(self) -> str:
        """The file's path."""
        return self._name

    @property
    def size(self) -> int:
        """The size when the file was opened."""
        return self._size

    def fileno(self) -> int:
        """The descriptor."""
        return self._fd

    def pread(self, n: int, position: int) -> bytes:
        """Up to ``n`` bytes from ``position`` (fewer only at the end of the file)."""
        return os.pread(self._fd, n, position)

    def readinto(self, view: memoryview, position: int) -> int:
        """Fill ``view`` from ``position``; returns the bytes read (fewer at the end of the file)."""
        n = len(view)
        got = 0
        while got < n:
            k = os.preadv(self._fd, [view[got:]], position + got)
            if k <= 0:
                break
            got += k
        return got

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LocalFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Listing(Mapping[str, int]):
    """File name -> size of one ``scandir``; sizes of other than ``.log`` files are ``lstat``-ed on demand."""

    __slots__ = ("_entries", "_sizes")

    def __init__(self, entries: dict[str, os.DirEntry[str]], sizes: dict[str, int]) -> None:
        self._entries = entries
        self._sizes = sizes

    def __getitem__(self, name: str) -> int:
        size = self._sizes.get(name)
        if size is None:
            size = self._sizes[name] = self._entries[name].stat(follow_symlinks=False).st_size
        return size

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


class LocalPartitionSource:
    """One partition directory on a local (or shared POSIX) filesystem, read without writes or locks."""

    __slots__ = ("_prefix", "directory")

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self._prefix = os.path.join(self.directory, "")  # names are joined as strings (the hot path)

    def __repr__(self) -> str:
        return f"LocalPartitionSource({str(self.directory)!r})"

    def __reduce__(self) -> tuple[type[LocalPartitionSource], tuple[Path]]:
        return type(self), (self.directory,)

    @property
    def name(self) -> str:
        """The directory's path."""
        return str(self.directory)

    def _scan(self) -> list[os.DirEntry[str]]:
        try:
            mode = os.lstat(self.directory).st_mode
            scanned = list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        if stat.S_ISLNK(mode):
            raise NotRegularFileError(
                f"refusing partition directory {self.directory}: it is a {file_kind(mode)}, not a directory"
            )
        return scanned

    @staticmethod
    def _segment(entry: os.DirEntry[str]) -> tuple[int, int] | None:
        """(base offset, size) of a ``.log`` entry named as a segment; None if it is not one or is gone."""
        try:
            base = offset_from_file_name(entry.name)  # KafkaStorageError above int64
        except ValueError:
            return None
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(
                f"refusing {entry.path}: it is a {file_kind(st.st_mode)}, not a regular file "
                "(kafkalog only reads and writes regular files inside the data directory)"
            )
        return base, st.st_size

    def list_files(self) -> Mapping[str, int]:
        """The directory's files (see the module doc for what is refused); empty if it does not exist."""
        entries: dict[str, os.DirEntry[str]] = {}
        sizes: dict[str, int] = {}
        for entry in self._scan():
            name = entry.name
            if name.endswith(LOG_FILE_SUFFIX):
                segment = self._segment(entry)
                if segment is None:
                    continue
                sizes[name] = segment[1]
            entries[name] = entry
        return _Listing(entries, sizes)

    def list_segment_files(self) -> list[tuple[int, int, str]]:
        """(base offset, size, path) of every segment (``.log``) file: :meth:`list_files` restricted to the
        segments, at the cost of one ``scandir`` and one ``lstat`` per segment (the reader's hot listing)."""
        found: list[tuple[int, int, str]] = []
        for entry in self._scan():
            if entry.name.endswith(LOG_FILE_SUFFIX):
                segment = self._segment(entry)
                if segment is not None:
                    found.append((segment[0], segment[1], entry.path))
        return found

    def open(self, name: str) -> LocalFile:
        """Open ``name`` read-only (also under its ``.deleted`` name); ``FileNotFoundError`` if neither exists."""
        path = self._prefix + name
        try:
            fd = open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            path += DELETED_FILE_SUFFIX
            fd = open_regular(path, os.O_RDONLY)
        return LocalFile(fd, path)

    def read(self, name: str) -> bytes:
        """The whole file ``name`` (``FileNotFoundError`` if missing, ``NotRegularFileError`` if not regular)."""
        return read_regular(self._prefix + name)
