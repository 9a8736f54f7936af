"""FileRecords: a ``.log`` segment file (or a slice of one) holding concatenated record batches.

The file is a plain concatenation of batches — no header, no footer (see :mod:`kafkalog.records`).
With ``preallocate`` a new file is extended to ``init_file_size`` up front (zero filled) while the
logical size stays at the bytes written; :meth:`FileRecords.trim` cuts the file back on roll and close. A
crash leaves the zero tail behind, which recovery reads as a corrupt frame and truncates.

Invariants:

* Reads never go past the logical end (``size_in_bytes``), so a reader never sees a half-written batch:
  the logical size moves only after the bytes are written.
* A slice is a view (file, start, end): nothing is read until its bytes are asked for. Slices share
  the parent's file descriptor; reads take no lock, yet a reader on another thread never reads from a
  closed or reused descriptor (it gets :class:`~kafkalog.errors.KafkaStorageError`, see ``_Channel``).
* Batch walks read the file in large chunks (:data:`READ_CHUNK`) and parse batches from memory.
* A segment file is at most ``2**31 - 1`` bytes (positions in the indexes are int32).
"""

from __future__ import annotations

import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

from kafkalog.errors import KafkaError, KafkaStorageError
from kafkalog.records import MemoryRecords, Record, RecordBatch, read_batch_at
from kafkalog.records.framing import (
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    SIZE_BELOW_OVERHEAD,
    CorruptFrame,
    PartialTail,
    next_frame,
)
from kafkalog.storage.files import open_regular, regular_size
from kafkalog.storage.types import LogOffsetPosition, TimestampAndOffset, TimestampOffset

__all__ = ["MAX_SEGMENT_SIZE", "READ_CHUNK", "FileRecords"]

_T = TypeVar("_T")

MAX_SEGMENT_SIZE: Final = 2**31 - 1
#: Bytes read at a time when walking batches.
READ_CHUNK: Final = 1 << 20
_OFFSET_SIZE_UNPACK = struct.Struct(">qi").unpack_from
_INT32_UNPACK = struct.Struct(">i").unpack_from
#: Bytes of a batch header needed to know its last offset (through lastOffsetDelta).
_HEADER_PREFIX: Final = LAST_OFFSET_DELTA_OFFSET + 4


_DEVNULL_FD = -1
_OPEN_LOCK = threading.Lock()


def _devnull_fd() -> int:
    global _DEVNULL_FD
    if _DEVNULL_FD < 0:
        _DEVNULL_FD = os.open(os.devnull, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    return _DEVNULL_FD


class _Channel:
    """A file descriptor shared by a file and its slices.

    Reads take no lock. ``close`` atomically points the descriptor at ``/dev/null`` (``dup2``) instead of
    closing it, so a read in flight on another thread finishes on the old file or sees end-of-file, and the
    descriptor number is never reused while anyone may still hold it; the number itself is released when the
    last file or slice using it is garbage collected. Every operation checks the closed flag before and after
    its system call, so nothing read from a closed file is ever returned (:class:`KafkaStorageError`).
    """

    __slots__ = ("__weakref__", "_closed", "_fd", "path", "writable")

    def __init__(self, path: Path, fd: int, writable: bool) -> None:
        self.path = path
        self._fd = fd
        self.writable = writable
        self._closed = False
        weakref.finalize(self, os.close, fd)

    def _closed_error(self) -> KafkaStorageError:
        return KafkaStorageError(f"file {self.path} is closed")

    def pread(self, size: int, position: int) -> bytes:
        # The offset-lookup hot path: the checks of ``_call`` are inlined here on purpose.
        if self._closed:
            raise self._closed_error()
        try:
            data = os.pread(self._fd, size, position)
            if len(data) < size and data:
                chunks = [data]
                size -= len(data)
                position += len(data)
                while size > 0:
                    more = os.pread(self._fd, size, position)
                    if not more:
                        break
                    chunks.append(more)
                    size -= len(more)
                    position += len(more)
                data = b"".join(chunks)
        except OSError:
            if self._closed:
                raise self._closed_error() from None
            raise
        if self._closed:
            raise self._closed_error()
        return data

    def pwrite(self, data: memoryview, position: int) -> None:
        # The append hot path: one system call for the usual whole write, ``_call``'s checks inlined.
        if self._closed:
            raise self._closed_error()
        try:
            n = os.pwrite(self._fd, data, position)
            if n < len(data):
                view = memoryview(data)[n:]
                position += n
                while view:
                    n = os.pwrite(self._fd, view, position)
                    view = view[n:]
                    position += n
        except OSError:
            if self._closed:
                raise self._closed_error() from None
            raise
        if self._closed:
            raise self._closed_error()

    def _call(self, fn: Callable[[int], _T]) -> _T:
        if self._closed:
            raise self._closed_error()
        try:
            result = fn(self._fd)
        except OSError:
            if self._closed:
                raise self._closed_error() from None
            raise
        if self._closed:
            raise self._closed_error()
        return result

    def file_size(self) -> int:
        return self._call(lambda fd: os.fstat(fd).st_size)

    def truncate(self, size: int) -> None:
        self._call(lambda fd: os.ftruncate(fd, size))

    def fsync(self) -> None:
        self._call(os.fsync)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        os.dup2(_devnull_fd(), self._fd)


class FileRecords:
    """Record batches in a file: append, slice, walk, search, truncate (Kafka's ``FileRecords``)."""

    def __init__(
        self,
        path: Path,
        channel: _Channel | None,
        start: int,
        end: int | None,
        is_slice: bool,
        *,
        size: int | None = None,
        mutable: bool = True,
    ) -> None:
        self._path = path
        self._channel = channel
        self._mutable = mutable
        self._closed = False
        self._start = start
        self._is_slice = is_slice
        if is_slice:
            assert end is not None
            self._size = end - start
        else:
            if size is None:
                size = self._chan().file_size()
            if size > MAX_SEGMENT_SIZE:
                raise KafkaError(
                    f"the size of segment {path} ({size}) is larger than the maximum allowed segment size"
                )
            self._size = size - start if end is None else min(size, end) - start

    def _chan(self) -> _Channel:
        """The descriptor, opened on first use (an existing file costs one ``stat`` until it is read)."""
        channel = self._channel
        if channel is None:
            with _OPEN_LOCK:
                channel = self._channel
                if channel is None:
                    if self._closed:
                        raise KafkaStorageError(f"file {self._path} is closed")
                    flags = os.O_RDWR if self._mutable else os.O_RDONLY
                    fd = open_regular(self._path, flags)
                    channel = self._channel = _Channel(self._path, fd, self._mutable)
        return channel

    # --- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        mutable: bool = True,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
    ) -> FileRecords:
        """Open (or create) a ``.log`` file. A new preallocated file is extended to ``init_file_size``.

        An existing file is only ``stat``-ed; its descriptor is opened when it is first read or written.
        """
        path = Path(path)
        if file_already_exists:
            return cls(path, None, 0, None, is_slice=False, size=regular_size(path), mutable=mutable)
        flags = (os.O_RDWR | os.O_CREAT) if mutable else os.O_RDONLY
        fd = open_regular(path, flags)
        channel = _Channel(path, fd, mutable)
        try:
            if preallocate and not file_already_exists and mutable:
                os.ftruncate(fd, init_file_size)
                return cls(path, channel, 0, 0, is_slice=False, mutable=mutable)._as_empty_preallocated()  # noqa: SLF001 -- own class
            return cls(path, channel, 0, None, is_slice=False, mutable=mutable)
        except BaseException:
            channel.close()
            raise

    def _as_empty_preallocated(self) -> FileRecords:
        self._size = 0
        return self

    # --- properties ---------------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The file's current path."""
        return self._path

    @property
    def size_in_bytes(self) -> int:
        """Logical size: bytes of batches (for a slice, the slice's size)."""
        return self._size

    @property
    def is_slice(self) -> bool:
        """Whether this is a view of part of a file."""
        return self._is_slice

    @property
    def start(self) -> int:
        """File position where this view starts (0 for the whole file)."""
        return self._start

    def __repr__(self) -> str:
        return f"FileRecords(path={str(self._path)!r}, start={self._start}, size={self._size})"

    # --- writing ------------------------------------------------------------------------------------------
    def append(self, records: MemoryRecords) -> int:
        """Write the batches at the end; returns the bytes written."""
        if self._is_slice:
            raise ValueError("cannot append to a slice")
        data = records.buffer
        n = len(data)
        if n > MAX_SEGMENT_SIZE - self._size:
            raise ValueError(
                f"append of size {n} bytes is too large for segment with current file position at {self._size}"
            )
        channel = self._channel
        if channel is None:
            channel = self._chan()
        channel.pwrite(data, self._size)
        self._size += n
        return n

    def flush(self) -> None:
        """fsync the file."""
        self._chan().fsync()

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; returns how many bytes were removed."""
        if self._is_slice:
            raise ValueError("cannot truncate a slice")
        original = self._size
        if target_size > original or target_size < 0:
            raise KafkaError(
                f"attempt to truncate log segment {self._path} to {target_size} bytes failed, "
                f"size of this log segment is {original} bytes"
            )
        channel = self._chan()
        if target_size < channel.file_size():
            channel.truncate(target_size)
        self._size = target_size
        return original - target_size

    def trim(self) -> None:
        """Cut a preallocated file back to its logical size."""
        self.truncate_to(self._size)

    def close(self) -> None:
        """Flush, trim and close (Kafka's ``close``); a file never opened has nothing to flush."""
        if self.closed:
            return
        channel = self._channel
        if channel is not None and channel.writable and not self._is_slice:
            self.flush()
            self.trim()
        self.close_handlers()

    def close_handlers(self) -> None:
        """Close the file descriptor without flushing (the directory went offline)."""
        with _OPEN_LOCK:
            self._closed = True
            if self._channel is not None:
                self._channel.close()

    def delete(self) -> bool:
        """Close and delete the file; returns whether it existed."""
        self.close_handlers()
        try:
            self._path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: Path) -> None:
        """Rename the file (open readers keep working: the descriptor survives the rename).

        Under the lock of the lazy open, so a first reader cannot open the old name after it is gone."""
        with _OPEN_LOCK:
            os.replace(self._path, path)
            self._path = path
            if self._channel is not None:
                self._channel.path = path

    def update_parent_dir(self, parent: Path) -> None:
        """Point at the file's new location after its directory was renamed."""
        with _OPEN_LOCK:
            self._path = parent / self._path.name
            if self._channel is not None:
                self._channel.path = self._path

    @property
    def closed(self) -> bool:
        """Whether the file is closed."""
        return self._closed or (self._channel is not None and self._channel.closed)

    # --- reading ------------------------------------------------------------------------------------------
    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (relative to this view), clamped to its end."""
        if position < 0 or size < 0:
            raise ValueError(f"invalid read of {size} bytes at position {position}")
        size = min(size, self._size - position)
        if size <= 0:
            return b""
        return self._chan().pread(size, self._start + position)

    def read_at(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (relative to this view) with no clamping: the caller keeps within
        ``size_in_bytes`` (fewer bytes come back only if the file was cut meanwhile)."""
        channel = self._channel
        if channel is None:
            channel = self._chan()
        return channel.pread(size, self._start + position)

    def slice(self, position: int, size: int) -> FileRecords:
        """A view of ``size`` bytes from ``position`` (clamped to the end); nothing is read now."""
        current = self._size
        if position < 0:
            raise ValueError(f"invalid position: {position} in read from {self}")
        if position > current:
            raise ValueError(f"slice from position {position} exceeds end position of {self}")
        if size < 0:
            raise ValueError(f"invalid size: {size} in read from {self}")
        end = min(position + size, current)
        return FileRecords(self._path, self._chan(), self._start + position, self._start + end, is_slice=True)

    def to_memory_records(self) -> MemoryRecords:
        """All bytes of this file or slice, read into memory (one ``pread``)."""
        return MemoryRecords(self.read(0, self._size))

    @property
    def buffer(self) -> memoryview:
        """The bytes, read into memory (for uniform handling with :class:`MemoryRecords`)."""
        return self.to_memory_records().buffer

    def batches(self, start_position: int = 0) -> Iterator[RecordBatch]:
        """Walk the complete batches from ``start_position``; batch ``position`` is relative to this view.

        The walk ends quietly at a partial trailing batch; an impossible frame raises
        :class:`CorruptRecordError`.
        """
        pos = start_position
        end = self._size
        while pos < end:
            want = min(READ_CHUNK, end - pos)
            chunk = memoryview(self.read(pos, want))
            off = 0
            progressed = False
            while True:
                batch = read_batch_at(chunk, off, len(chunk), origin=pos, known_magic_only=False)
                if batch is None:
                    break
                progressed = True
                yield batch
                off += batch.size_in_bytes
            if not progressed:
                # The batch at ``pos`` is larger than the chunk, or only a partial tail is left.
                need = self._next_batch_size(pos)
                if need is None or need > end - pos:
                    return
                chunk = memoryview(self.read(pos, need))
                batch = read_batch_at(chunk, 0, len(chunk), origin=pos, known_magic_only=False)
                if batch is None:
                    return
                yield batch
                off = batch.size_in_bytes
            pos += off

    def records(self) -> Iterator[Record]:
        """Every record of every batch (see :meth:`MemoryRecords.records`)."""
        for batch in self.batches():
            yield from batch.records()

    def _next_batch_size(self, position: int) -> int | None:
        """Size of the batch at ``position`` (with the 12-byte prefix), or None at a partial tail."""
        if self._size - position <= HEADER_SIZE_UP_TO_MAGIC:
            return None
        frame = next_frame(self.read(position, HEADER_SIZE_UP_TO_MAGIC + 1), 0, self._size - position)
        if isinstance(frame, CorruptFrame):
            raise frame.error(self._start + position, f" in file {self._path}")
        return None if isinstance(frame, PartialTail) else frame

    # --- searches -----------------------------------------------------------------------------------------
    def batch_range_at(self, position: int) -> tuple[int, int, int] | None:
        """``(base offset, last offset, size)`` of the v2 batch at ``position`` from one small read, or None
        when there is no complete v2 batch header there (legacy entries need their payload for a base offset)."""
        remaining = self._size - position
        if remaining < _HEADER_PREFIX or position < 0:
            return None
        head = self._chan().pread(_HEADER_PREFIX, self._start + position)
        # next_frame inlined (every offset lookup calls this once; three calls cost the lookup ~6%): a frame
        # next_frame would call a complete v2 batch (size >= RECORD_OVERHEAD_V0, inside the file, magic 2..127)
        if len(head) < _HEADER_PREFIX or not 2 <= head[MAGIC_OFFSET] < 128:
            return None
        base, size = _OFFSET_SIZE_UNPACK(head, 0)
        total = size + LOG_OVERHEAD
        if size < RECORD_OVERHEAD_V0 or total > remaining or total < _HEADER_PREFIX:
            return None
        return base, base + _INT32_UNPACK(head, LAST_OFFSET_DELTA_OFFSET)[0], total

    def search_for_offset_with_size(
        self, target_offset: int, starting_position: int
    ) -> LogOffsetPosition | None:
        """The first batch from ``starting_position`` whose last offset is >= ``target_offset``.

        Only batch headers are parsed (offset, size, magic, last offset delta): a 4 KiB read covers an index
        interval of small batches; after a large batch only the next header is read. This is the hot path of
        every offset lookup, hence the plain loop.
        """
        pread = self._chan().pread
        base_pos = self._start
        end = self._size
        pos = starting_position
        chunk = b""
        chunk_pos = pos
        chunk_len = 0
        read_size = 4096
        magic_at, delta_at = MAGIC_OFFSET, LAST_OFFSET_DELTA_OFFSET  # locals: this loop runs per batch
        while True:
            remaining = end - pos
            if remaining <= HEADER_SIZE_UP_TO_MAGIC:
                return None
            rel = pos - chunk_pos
            need = _HEADER_PREFIX if remaining > _HEADER_PREFIX else remaining
            if chunk_len - rel < need:
                chunk = pread(read_size if read_size < remaining else remaining, base_pos + pos)
                chunk_pos = pos
                chunk_len = len(chunk)
                rel = 0
                read_size = 512
                if chunk_len < need:
                    return None
            # next_frame inlined (a function call per batch costs this loop a third of its time); the two
            # agree on every input: tests/storage/test_file_records.py::test_offset_search_frames_as_next_frame
            last, size = _OFFSET_SIZE_UNPACK(chunk, rel)
            if size < RECORD_OVERHEAD_V0:
                raise CorruptFrame(
                    f"found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})",
                    SIZE_BELOW_OVERHEAD,
                ).error(base_pos + pos, f" in file {self._path}")
            total = size + LOG_OVERHEAD
            if total > remaining:
                return None
            if 2 <= chunk[rel + magic_at] < 128 and total >= _HEADER_PREFIX:  # v2 (FileLogInputStream: >= 2)
                last += _INT32_UNPACK(chunk, rel + delta_at)[0]
            if last >= target_offset:
                return LogOffsetPosition(last, pos, total)
            pos += total

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``target_timestamp``."""
        for batch in self.batches(starting_position):
            if batch.max_timestamp >= target_timestamp:
                for record in batch.records():
                    if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                        epoch = batch.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset, epoch if epoch >= 0 else None
                        )
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampOffset:
        """The largest batch max timestamp from ``starting_position`` on, and its batch's last offset."""
        max_ts = -1
        offset = -1
        for batch in self.batches(starting_position):
            if batch.max_timestamp > max_ts:
                max_ts = batch.max_timestamp
                offset = batch.last_offset
        return TimestampOffset(max_ts, offset)
