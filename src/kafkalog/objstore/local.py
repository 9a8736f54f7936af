""":class:`LocalFileStore`: the :class:`~kafkalog.objstore.store.ObjectStore` over a local directory tree.

Invariant owned here: a key is a ``/``-separated path below the store's root and never leaves it (an empty,
absolute, ``.`` or ``..`` segment, or a symbolic link leading out of the root, is refused before any file is
touched), so reading or writing through this store never touches a file outside its root. Only regular
files are objects: a symbolic link is neither listed nor opened. ``put`` writes a temporary file beside the target and
renames it into place (a reader sees the old object or the new one); the file is fsynced before the
rename and its directory (and any directory it created) after, so an object is durable when ``put``
returns (the remote tier publishes COPY_SEGMENT_FINISHED then); ``delete`` fsyncs the directory after the
unlink, so a deletion is durable when it returns (DELETE_SEGMENT_FINISHED then: no object comes back as
an orphan after a power loss). It needs no extra package: plain
paths keep kafkalog's native readers, and this store exists so that code written against the seam also
runs on ``file://`` URLs and paths.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence

from kafkalog._durable import fsync_dir
from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore.keys import check_key, check_prefix
from kafkalog.objstore.store import ListResult, ObjectMeta, StoreStats


class LocalFileStore:
    """An :class:`~kafkalog.objstore.store.ObjectStore` over the files below ``root``. Thread-safe."""

    def __init__(self, root: str, *, url: str | None = None) -> None:
        self._root = os.path.abspath(root)
        self._url = url or "file://" + self._root
        self._stats = StoreStats()

    def __repr__(self) -> str:
        return f"LocalFileStore({self._url!r})"

    @property
    def url(self) -> str:
        return self._url

    @property
    def stats(self) -> StoreStats:
        return self._stats

    @property
    def root(self) -> str:
        """The directory this store's keys are below."""
        return self._root

    def _path(self, key: str, *, prefix: bool = False) -> str:
        if prefix:
            if key == "":
                return self._root
            key = check_prefix(self._url, key).rstrip("/")
        path = os.path.join(self._root, *check_key(self._url, key).split("/"))
        real, root = os.path.realpath(path), os.path.realpath(self._root)
        if real != root and not real.startswith(root + os.sep):
            raise RemoteStorageError(f"{self._url}: {key!r} leads outside the store through a symbolic link")
        return path

    def _check_root(self) -> None:
        if not os.path.isdir(self._root):
            raise RemoteResourceNotFoundError(f"{self._url}: the directory {self._root} does not exist")

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        self._stats.count_list()
        self._check_root()
        base = self._path(prefix, prefix=True)
        head = prefix if prefix.endswith("/") or not prefix else prefix + "/"
        if delimiter:
            prefixes: list[str] = []
            objects: list[ObjectMeta] = []
            try:
                entries = list(os.scandir(base))
            except (FileNotFoundError, NotADirectoryError):
                return ListResult([], [])
            except OSError as exc:
                raise RemoteStorageError(f"{self._url}: LIST {prefix!r}: {exc.strerror}") from None
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone since the scan
                if stat.S_ISDIR(st.st_mode):
                    prefixes.append(head + e.name + "/")
                elif stat.S_ISREG(st.st_mode):
                    objects.append(ObjectMeta(head + e.name, st.st_size, st.st_mtime_ns // 1_000_000))
            return ListResult(sorted(prefixes), sorted(objects, key=lambda m: m.key))
        found: list[ObjectMeta] = []
        for dirpath, _dirs, files in os.walk(base):
            rel = os.path.relpath(dirpath, self._root)
            key_dir = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name in files:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    found.append(ObjectMeta(key_dir + name, st.st_size, st.st_mtime_ns // 1_000_000))
        return ListResult([], sorted(found, key=lambda m: m.key))

    def _open(self, key: str, op: str) -> int:
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise RemoteResourceNotFoundError(f"{self._url}: {op} {key!r}: no such object") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symbolic link: not an object of this store (as a listing shows)
                raise RemoteResourceNotFoundError(f"{self._url}: {op} {key!r}: not a regular file") from None
            raise RemoteStorageError(f"{self._url}: {op} {key!r}: {exc.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise RemoteResourceNotFoundError(f"{self._url}: {op} {key!r}: not a regular file")
        return fd

    def head(self, key: str) -> ObjectMeta:
        fd = self._open(key, "HEAD")
        self._stats.count_head()
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return ObjectMeta(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def get(self, key: str) -> bytes:
        fd = self._open(key, "GET")
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0)
        finally:
            os.close(fd)
        self._stats.count_get(len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_ranges(key, [(start, end)])[0]

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        fd = self._open(key, "GET")
        try:
            size = os.fstat(fd).st_size
            out: list[bytes] = []
            for start, end in ranges:
                if not 0 <= start <= end <= size:
                    raise RemoteStorageError(
                        f"{self._url}: range [{start}, {end}) of {key!r} is outside the object ({size} bytes)"
                    )
                out.append(os.pread(fd, end - start, start) if end > start else b"")
        finally:
            os.close(fd)
        self._stats.count_get(sum(len(b) for b in out), len(ranges))
        return out

    def put(self, key: str, data: bytes) -> None:
        self.put_stream(key, (data,))

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        path = self._path(key)
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
            created = parent  # the new directories' own entries, up to the root
            while created != self._root and os.path.dirname(created) != created:
                created = os.path.dirname(created)
                fsync_dir(created)
        fd, tmp = tempfile.mkstemp(
            prefix=os.path.basename(path) + ".", suffix=".tmp", dir=os.path.dirname(path)
        )
        try:
            with os.fdopen(fd, "wb") as f:
                for chunk in chunks:
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            fsync_dir(os.path.dirname(path))  # durable on return: the RSM's copy is then FINISHED
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        fsync_dir(os.path.dirname(path))  # durable on return: the RSM's delete is then FINISHED
