"""Making bytes and directory entries durable: the one implementation of ``fsync`` and atomic file replacement.

Invariants owned here:

* **An atomic write leaves the old file or the new one, never a mix**: :func:`atomic_write` writes
  ``<file>.tmp`` (created exclusively, so a link, FIFO or socket planted there is removed, never followed,
  written through or waited on; a directory there is refused with
  :class:`~kafkalog.errors.NotRegularFileError`), fsyncs it, renames it over the file (``os.replace``:
  a link at the target is replaced, never followed) and fsyncs the directory.
* **Errors are never swallowed**: an ``fsync`` that fails raises. The only error a caller may waive is a
  missing path, and only by passing ``missing_ok=True`` at the call site (a directory deleted concurrently
  has nothing left to make durable).
* Every call goes through the :mod:`os` module (``os.fsync``, ``os.replace``, ...) by attribute, so the
  crash and power-loss suites, which patch ``os.*`` by name, see every durability point.

The lowest layer with :mod:`kafkalog.errors` and :mod:`kafkalog.time`: it imports nothing else of kafkalog.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kafkalog.errors import NotRegularFileError

__all__ = ["atomic_write", "fsync_dir", "fsync_file"]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def fsync_dir(directory: str | os.PathLike[str], *, missing_ok: bool = False) -> None:
    """fsync a directory so the entries created, renamed or removed in it are durable.

    A missing directory raises ``FileNotFoundError`` unless ``missing_ok``; any other error always raises."""
    try:
        fd = os.open(directory, os.O_RDONLY | _O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str], *, missing_ok: bool = False) -> None:
    """fsync the regular file ``path`` (opened read-only, never through a link or into a FIFO).

    A missing file raises ``FileNotFoundError`` unless ``missing_ok``; anything but a regular file raises
    :class:`~kafkalog.errors.NotRegularFileError`; a failing fsync always raises."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    except OSError:
        _refuse_if_not_regular(path)
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFileError(f"refusing to fsync {os.fspath(path)}: not a regular file")
        os.fsync(fd)
    finally:
        os.close(fd)


def _refuse_if_not_regular(path: str | os.PathLike[str]) -> None:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(f"refusing {os.fspath(path)}: not a regular file") from None


def _create_temp(tmp: Path) -> int:
    """``tmp`` created afresh (``O_EXCL``: never opened through whatever was left at that name)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    try:
        return os.open(tmp, flags, 0o644)
    except FileExistsError:
        pass
    # A temp file of an earlier write a crash cut short, or something planted in its place. The temp file is
    # ours and disposable: its entry is removed (never what a link names) and the file created afresh; a
    # directory there stays an error.
    if stat.S_ISDIR(os.lstat(tmp).st_mode):
        raise NotRegularFileError(
            f"refusing {tmp}: it is a directory, not a regular file "
            "(kafkalog only reads and writes regular files inside the data directory)"
        )
    os.unlink(tmp)
    return os.open(tmp, flags, 0o644)


def atomic_write(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to ``path`` via ``<path>.tmp`` + fsync + rename + directory fsync (see the module doc).

    ``sync=False`` skips both fsyncs (the rename stays atomic, its durability is left to a later flush)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = _create_temp(tmp)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)  # replaces whatever ``path`` is (a link itself, never its target)
    if sync:
        fsync_dir(path.parent)
