"""File names of a partition directory, as Kafka's ``LogFileUtils`` and ``LocalLog`` spell them.

* A segment's files are named after its base offset, formatted with at least 20 digits, zero padded:
  ``00000000000000000000.log``, ``.index``, ``.timeindex``, ``.txnindex``, and producer-state snapshots
  ``<offset>.snapshot`` (named by the exclusive end offset of the state they hold).
* Transient suffixes are appended to the full name: ``.deleted`` (scheduled for deletion), ``.cleaned``
  (output of cleaning or splitting), ``.swap`` (being swapped in), e.g. ``00000000000000000000.log.swap``.
* :func:`offset_from_file_name` parses the digits before the first ``.``: ASCII digits only, and the offset
  must fit Kafka's int64 (a name above ``2**63 - 1`` is not a segment of any log:
  :class:`~kafkalog.errors.KafkaStorageError`, as Kafka's ``Long.parseLong`` fails the log's load).

**Only regular files.** Every file of a partition or data directory is a regular file in that directory.
:func:`open_regular` is how kafkalog opens one: never through a symbolic link (``O_NOFOLLOW``: a link planted
in the data directory cannot make a write, truncation or read land outside it), never blocking on a FIFO
(``O_NONBLOCK``, which a regular file ignores), and anything that ``fstat`` says is not a regular file
(FIFO, directory, device, socket) is closed again at once. A refusal is a
:class:`~kafkalog.errors.NotRegularFileError` (a ``KafkaStorageError``) naming the file and what it is. :func:`check_regular` is the
same test by ``lstat`` for a path about to be listed, renamed or deleted.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

from kafkalog.errors import KafkaStorageError, NotRegularFileError

__all__ = [
    "CLEANED_FILE_SUFFIX",
    "DELETED_FILE_SUFFIX",
    "INDEX_FILE_SUFFIX",
    "LOG_FILE_SUFFIX",
    "MAX_FILE_NAME_OFFSET",
    "PRODUCER_SNAPSHOT_FILE_SUFFIX",
    "SWAP_FILE_SUFFIX",
    "TIME_INDEX_FILE_SUFFIX",
    "TXN_INDEX_FILE_SUFFIX",
    "check_regular",
    "file_kind",
    "filename_prefix_from_offset",
    "is_index_file",
    "is_log_file",
    "is_segment_file_name",
    "log_file",
    "offset_from_file_name",
    "offset_index_file",
    "open_regular",
    "producer_snapshot_file",
    "read_regular",
    "regular_size",
    "time_index_file",
    "transaction_index_file",
]

LOG_FILE_SUFFIX: Final = ".log"
INDEX_FILE_SUFFIX: Final = ".index"
TIME_INDEX_FILE_SUFFIX: Final = ".timeindex"
TXN_INDEX_FILE_SUFFIX: Final = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX: Final = ".snapshot"
DELETED_FILE_SUFFIX: Final = ".deleted"
CLEANED_FILE_SUFFIX: Final = ".cleaned"
SWAP_FILE_SUFFIX: Final = ".swap"
#: The largest offset a file name may carry (Kafka's offsets are Java longs).
MAX_FILE_NAME_OFFSET: Final = 2**63 - 1
_O_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)


def filename_prefix_from_offset(offset: int) -> str:
    """The file name prefix of a segment or snapshot at ``offset`` (20 digits, zero padded)."""
    if offset < 0:
        raise ValueError(f"negative offset {offset}")
    return f"{offset:020d}"


def _file(directory: Path | str, offset: int, suffix: str, extra: str) -> Path:
    name = filename_prefix_from_offset(offset) + suffix + extra
    # ``Path / name`` parses only the name; ``Path(directory)`` would parse the whole directory again.
    return (directory if isinstance(directory, Path) else Path(directory)) / name


def log_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.log[suffix]``."""
    return _file(directory, offset, LOG_FILE_SUFFIX, suffix)


def offset_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.index[suffix]``."""
    return _file(directory, offset, INDEX_FILE_SUFFIX, suffix)


def time_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.timeindex[suffix]``."""
    return _file(directory, offset, TIME_INDEX_FILE_SUFFIX, suffix)


def transaction_index_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.txnindex[suffix]``."""
    return _file(directory, offset, TXN_INDEX_FILE_SUFFIX, suffix)


def producer_snapshot_file(directory: Path | str, offset: int, suffix: str = "") -> Path:
    """``<dir>/<offset>.snapshot[suffix]``."""
    return _file(directory, offset, PRODUCER_SNAPSHOT_FILE_SUFFIX, suffix)


def offset_from_file_name(name: str | Path) -> int:
    """The offset encoded in a segment or snapshot file name (the ASCII digits before the first ``.``).

    ``ValueError`` if there are no such digits (not a segment file name); :class:`KafkaStorageError` if they
    name an offset above ``2**63 - 1`` (a damaged directory: no log can hold that segment).
    """
    base = os.path.basename(os.fspath(name))
    digits = base.split(".", 1)[0]
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"not a segment file name: {base!r}")
    offset = int(digits)
    if offset > MAX_FILE_NAME_OFFSET:
        raise KafkaStorageError(
            f"file name {base!r} holds offset {digits}, above the largest offset {MAX_FILE_NAME_OFFSET}"
        )
    return offset


def is_index_file(path: str | Path) -> bool:
    """Whether ``path`` is an offset, time or transaction index (no transient suffix)."""
    name = str(path)
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


def is_segment_file_name(name: str) -> bool:
    """Whether ``name`` is spelled like a file of a segment or a producer snapshot: ``.log``, an index or
    ``.snapshot``, possibly with one transient suffix (``.deleted``, ``.cleaned``, ``.swap``)."""
    if name.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)):
        name = name[: name.rindex(".")]
    return name.endswith(
        (
            LOG_FILE_SUFFIX,
            INDEX_FILE_SUFFIX,
            TIME_INDEX_FILE_SUFFIX,
            TXN_INDEX_FILE_SUFFIX,
            PRODUCER_SNAPSHOT_FILE_SUFFIX,
        )
    )


def is_log_file(path: str | Path) -> bool:
    """Whether ``path`` is a ``.log`` segment file (no transient suffix)."""
    return str(path).endswith(LOG_FILE_SUFFIX)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words ("regular file", "symbolic link", "FIFO", "directory", ...)."""
    for test, kind in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "special file"


def _refused(path: str | os.PathLike[str], mode: int) -> NotRegularFileError:
    return NotRegularFileError(
        f"refusing {os.fspath(path)}: it is a {file_kind(mode)}, not a regular file "
        "(kafkalog only reads and writes regular files inside the data directory)"
    )


def check_regular(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` exists as a regular file (by ``lstat``: a link is not followed).

    False if nothing is there; :class:`KafkaStorageError` if something other than a regular file is.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise _refused(path, st.st_mode)
    return True


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` for a regular file only (see the module doc); returns the descriptor.

    ``O_NOFOLLOW``, ``O_NONBLOCK`` and ``O_CLOEXEC`` are added. A missing file raises ``FileNotFoundError``
    as ``os.open`` does (unless ``O_CREAT``); anything but a regular file raises :class:`KafkaStorageError`.
    """
    try:
        fd = os.open(path, flags | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, mode)
    except OSError as exc:
        # ELOOP: a symlink (O_NOFOLLOW); EISDIR: a directory opened for writing; ENXIO: a FIFO without a
        # reader opened for writing, or a device without its hardware. Say what is there instead.
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK, errno.ENOTDIR):
            try:
                st = os.lstat(path)
            except OSError:
                raise exc from None
            if not stat.S_ISREG(st.st_mode):
                raise _refused(path, st.st_mode) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refused(path, st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def regular_size(path: str | os.PathLike[str]) -> int:
    """The size of the regular file ``path`` by ``lstat`` (a link is refused, not followed)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _refused(path, st.st_mode)
    return st.st_size


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole content of the regular file ``path`` (``FileNotFoundError`` if missing; see :func:`open_regular`)."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
