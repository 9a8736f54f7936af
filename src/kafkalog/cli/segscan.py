"""Reading a partition directory's files for the tools, without the log layer: no lock, no writes, no recovery.

* :class:`BatchCursor` walks the batch headers of one ``.log`` forward (a shallow :class:`LogDump`, so CRCs are
  checked and memory stays constant) and answers "which batch starts at byte P" and "which batch is the first
  to end at or after offset O" for index entries that come in increasing order; a request that goes back
  restarts the walk, so a corrupt (unordered) index still gets right answers, only slower.
* :func:`iter_fixed_entries` reads a file of fixed-size entries in chunks (index files, the transaction index).
* :func:`control_type_at` reads the control type of the control batch at a position (COMMIT/ABORT markers).
* :func:`segment_bases` lists the segments of a partition directory by base offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kafkalog.cli.dumplog import BatchEvent, ErrorEvent, LogDump, SummaryEvent, virtual_file
from kafkalog.errors import KafkaError, NotRegularFileError
from kafkalog.records import ControlRecordType, DefaultRecordBatch
from kafkalog.storage.files import open_regular

__all__ = [
    "BatchCursor",
    "control_type_at",
    "iter_fixed_entries",
    "segment_bases",
    "stem_offset",
]

_CHUNK: Final = 1 << 20


def stem_offset(path: Path) -> int | None:
    """The offset a segment file name starts with (``00000000000000000042.index`` -> 42), or ``None``."""
    head = path.name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def segment_bases(directory: Path) -> list[int]:
    """Base offsets of the ``.log`` files of ``directory`` (no transient suffix), ascending."""
    out: list[int] = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(".log") and entry.is_file():
            head = name[: -len(".log")]
            if head.isdigit():
                out.append(int(head))
    return sorted(out)


class BatchCursor:
    """A restartable forward walk over the batches of a ``.log`` (see the module doc).

    ``error`` is the fault that ended the walk (``None`` if it reached the end); ``valid_bytes`` is where the
    last good batch ends once the walk is done. Use as a context manager.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current: BatchEvent | None = None
        self.previous: BatchEvent | None = None
        self.error: ErrorEvent | None = None
        self.valid_bytes = 0
        self.done = False
        self.restarts = 0
        self._dump: LogDump | None = None
        self._events: Iterator[object] | None = None
        self._open()

    def _open(self) -> None:
        self.close()
        self._dump = LogDump(self.path)
        self._events = self._dump.events()
        self.current = self.previous = None
        self.error = None
        self.done = False

    def close(self) -> None:
        """Closes the ``.log``."""
        if self._dump is not None:
            self._dump.close()
            self._dump = None

    def __enter__(self) -> BatchCursor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def file_bytes(self) -> int:
        """Size of the ``.log`` when the walk (last) started."""
        return 0 if self._dump is None else self._dump.file_bytes

    def _advance(self) -> bool:
        """Moves to the next batch; False at the end of the walk."""
        assert self._events is not None
        for event in self._events:
            if isinstance(event, BatchEvent):
                if not event.is_valid:  # a batch with a bad CRC ends the walk (an error event follows)
                    continue
                self.previous, self.current = self.current, event
                return True
            if isinstance(event, ErrorEvent):
                self.error = event
            elif isinstance(event, SummaryEvent):
                self.valid_bytes = event.valid_bytes
        self.done = True
        return False

    def _restart(self) -> None:
        self.restarts += 1
        self._open()

    def batch_at(self, position: int) -> BatchEvent | None:
        """The batch that starts at byte ``position``, or ``None`` when none does."""
        if self.current is not None and self.current.position > position:
            self._restart()
        while (self.current is None or self.current.position < position) and not self.done:
            self._advance()
        cur = self.current
        return cur if cur is not None and cur.position == position else None

    def batch_ending_at_or_after(self, offset: int) -> BatchEvent | None:
        """The first batch whose last offset is >= ``offset``, or ``None`` when the log ends first."""
        if self.previous is not None and self.previous.last_offset >= offset:
            self._restart()
        while (self.current is None or self.current.last_offset < offset) and not self.done:
            self._advance()
        cur = self.current
        return cur if cur is not None and cur.last_offset >= offset else None

    def finish(self) -> None:
        """Walks to the end (so ``error`` and ``valid_bytes`` are known)."""
        while not self.done:
            self._advance()


def iter_fixed_entries(path: Path, entry_size: int) -> Iterator[tuple[int, memoryview]]:
    """``(index, entry bytes)`` for every whole entry of ``path``, read in 1 MiB chunks.

    A symlink, FIFO or other file that is not regular has no entries (it is never followed or waited on;
    ``verify`` reports it)."""
    per_chunk = max(1, _CHUNK // entry_size) * entry_size
    n = 0
    try:
        fd = open_regular(path, os.O_RDONLY)
    except NotRegularFileError:
        return
    with open(fd, "rb") as f:
        while True:
            data = f.read(per_chunk)
            if not data:
                return
            view = memoryview(data)
            whole = len(data) - len(data) % entry_size
            for start in range(0, whole, entry_size):
                yield n, view[start : start + entry_size]
                n += 1
            if len(data) < per_chunk:
                return


def control_type_at(log: Path, position: int, size: int) -> ControlRecordType | None:
    """The control type of the control batch of ``size`` bytes at ``position`` in ``log`` (``None`` if it does
    not read: an empty (cleaned) control batch, a broken record)."""
    opener = virtual_file(log)
    if opener is not None:  # a .log in object storage (dump URL)
        remote = opener()
        try:
            data = remote.pread(size, position)
        finally:
            remote.close()
    else:
        with open(log, "rb") as f:
            f.seek(position)
            data = f.read(size)
    if len(data) < size:
        return None
    try:
        batch = DefaultRecordBatch(memoryview(data), 0)
        for detail in batch.record_details():
            return detail.control_type
    except (KafkaError, ValueError, IndexError, struct.error):
        return None
    return None
