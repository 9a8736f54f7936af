"""The logic of ``kafkalog dump`` for files made of record batches (``.log`` segments, KRaft ``.checkpoint``).

:class:`LogDump` walks a file batch by batch and yields *events*: one :class:`BatchEvent` per batch, with
``deep`` one :class:`RecordEvent` per record after it, at most one :class:`ErrorEvent`, and always a final
:class:`SummaryEvent`. ``event.to_dict()`` is the ``--json`` line of the event (keys in a fixed order;
:func:`json_line` formats it); :func:`text_batch_line` and :func:`text_record_line` give the text of
Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``). Nothing here touches click or a terminal.

Walking rules (:func:`kafkalog.records.framing.next_frame` with a file's rule, Kafka's
``FileLogInputStream``, so that this reads a file the way a broker does):

* 17 bytes or fewer left: the walk ends; leftover bytes are a **truncated** tail;
* a declared size below 14 (``RECORD_OVERHEAD_V0``) is a **corrupt_frame**;
* ``12 + size`` past the end of the file: a **truncated** tail;
* a magic of 2 or more is a v2 batch, below 2 (negative included) a legacy entry, as Kafka reads them;
* a batch whose CRC does not match is reported (``isValid`` false), then a **corrupt_batch** error; a v2
  batch smaller than its 61-byte header is a corrupt_batch without a batch event, and so is a legacy
  compressed wrapper with a bad CRC (its record count cannot be known);
* with ``deep``, a batch whose records do not decode is an **invalid_records** error (its record events are
  not emitted: records of a batch are buffered until the whole batch decoded). A legacy wrapper that does
  not decompress fails even without ``deep``: its record count needs its records; an uncompressed legacy
  entry whose key/value lengths are broken is reported from its fixed header fields, as Kafka reads them.

The first error ends the walk. ``validBytes`` of the summary is where the last accepted batch ends (the
longest valid prefix, the point where log recovery would truncate).

Memory: the file is read through one window of ``chunk_bytes`` (1 MiB) that moves forward; a batch larger
than the window gets a window of its own size. Nothing else grows with the file, so a multi-GiB segment
streams in constant memory (bounded by the largest batch and, with ``deep``, its decompressed records).
``max_bytes`` stops the walk at that many bytes from the start of the file, as Kafka's ``--max-bytes`` does;
a batch cut by that limit is not an error.

Virtual files (:func:`virtual_files`): within that context a path named there is not opened on disk but
through its opener, a :class:`~kafkalog.objstore.RandomAccessFile` (a ``.log`` in object storage, read by
ranged GETs through the storage seam), so ``dump URL`` streams a remote segment through the same walk in
the same bounded memory, with no local copy.
"""

from __future__ import annotations

import base64
import enum
import io
import json
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, Literal

from kafkalog.cli.dumptext import DECODERS, Decoder, log_dump_header, text_batch_line, text_record_line
from kafkalog.errors import KafkaError
from kafkalog.objstore.files import RandomAccessFile
from kafkalog.records import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Compression,
    DefaultRecordBatch,
    Header,
    LegacyRecordBatch,
    RecordBatch,
    RecordDetail,
    TimestampType,
)
from kafkalog.records.batch import MAGIC_V2
from kafkalog.records.compression import decompress
from kafkalog.records.framing import (
    HEADER_SIZE_UP_TO_MAGIC,
    CorruptFrame,
    PartialTail,
    frame_magic,
    is_v2_magic,
    next_frame,
)

__all__ = [
    "DECODERS",
    "DEFAULT_CHUNK_BYTES",
    "EXIT_CORRUPT",
    "EXIT_OK",
    "EXIT_TRUNCATED",
    "EXIT_UNREADABLE",
    "EXIT_UNSUPPORTED",
    "BatchEvent",
    "Decoder",
    "DumpEvent",
    "ErrorEvent",
    "ErrorKind",
    "LogDump",
    "RecordEvent",
    "StopReason",
    "SummaryEvent",
    "iter_log_events",
    "json_line",
    "log_dump_header",
    "text_batch_line",
    "text_record_line",
    "virtual_file",
    "virtual_files",
]

#: Opener of a file that is not on disk (:func:`virtual_files`).
FileOpener = Callable[[], RandomAccessFile]
_VIRTUAL: ContextVar[Mapping[str, FileOpener] | None] = ContextVar(
    "kafkalog_dump_virtual_files", default=None
)


@contextmanager
def virtual_files(files: Mapping[Path, FileOpener]) -> Iterator[None]:
    """Within the context, the dump's readers (:class:`LogDump`, the index checks) open each path of
    ``files`` through its opener instead of the disk."""
    token = _VIRTUAL.set({str(p): opener for p, opener in files.items()})
    try:
        yield
    finally:
        _VIRTUAL.reset(token)


def virtual_file(path: str | os.PathLike[str]) -> FileOpener | None:
    """The opener :func:`virtual_files` registered for ``path``, None for a file on disk."""
    files = _VIRTUAL.get()
    return None if files is None else files.get(os.fspath(path))


class _PositionalReader(io.RawIOBase):
    """A seekable binary stream over a :class:`~kafkalog.objstore.RandomAccessFile` (reads by position)."""

    def __init__(self, file: RandomAccessFile) -> None:
        super().__init__()
        self._f = file
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._f.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        data = self._f.pread(len(buffer), self._pos)
        n = len(data)
        memoryview(buffer).cast("B")[:n] = data
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


#: Exit codes of ``kafkalog dump``.
EXIT_OK: Final = 0
EXIT_UNREADABLE: Final = 1
EXIT_CORRUPT: Final = 2
EXIT_TRUNCATED: Final = 3
EXIT_UNSUPPORTED: Final = 64

#: Size of the read window (bytes read from the file at a time).
DEFAULT_CHUNK_BYTES: Final = 1 << 20

_RECORD_OVERHEAD_V1: Final = 22
_UINT32: Final = struct.Struct(">I")
_SIZE: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_CONTROL_KEY: Final = struct.Struct(">hh")
_LEGACY_ENTRY: Final = struct.Struct(">qiIbb")

ErrorKind = Literal["corrupt_frame", "corrupt_batch", "invalid_records", "truncated"]

#: Errors that mean "these bytes do not decode"; anything else is a bug and propagates.
_DECODE_ERRORS: Final = (KafkaError, ValueError, IndexError, struct.error, zlib.error)


# --------------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class BatchEvent:
    """One batch as the dump reports it (field order is the ``--json`` key order)."""

    position: int
    base_offset: int
    last_offset: int
    magic: int
    crc: int
    is_valid: bool
    compression_type: str
    timestamp_type: str
    base_timestamp: int | None
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control_batch: bool
    partition_leader_epoch: int
    delete_horizon_ms: int | None
    record_count: int
    size_in_bytes: int

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object of the batch."""
        return {
            "type": "batch",
            "position": self.position,
            "baseOffset": self.base_offset,
            "lastOffset": self.last_offset,
            "magic": self.magic,
            "crc": self.crc,
            "isValid": self.is_valid,
            "compressionType": self.compression_type,
            "timestampType": self.timestamp_type,
            "baseTimestamp": self.base_timestamp,
            "maxTimestamp": self.max_timestamp,
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "baseSequence": self.base_sequence,
            "lastSequence": self.last_sequence,
            "isTransactional": self.is_transactional,
            "isControlBatch": self.is_control_batch,
            "partitionLeaderEpoch": self.partition_leader_epoch,
            "deleteHorizonMs": self.delete_horizon_ms,
            "recordCount": self.record_count,
            "sizeInBytes": self.size_in_bytes,
        }


@dataclass(slots=True)  # not frozen: one is built per record, and a frozen __init__ costs 5x more
class RecordEvent:
    """One record of the batch event before it.

    ``control_type`` / ``control_type_id`` are set for records of control batches, ``coordinator_epoch`` for
    COMMIT/ABORT markers. ``legacy_crc`` / ``legacy_crc_valid`` are the record's own CRC and whether it
    matches, for magic 0/1 records when :class:`LogDump` was asked for them (text output prints them).
    """

    offset: int
    timestamp: int
    sequence: int
    size_in_bytes: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    control_type: str | None = None
    control_type_id: int | None = None
    coordinator_epoch: int | None = None
    legacy_crc: int | None = None
    legacy_crc_valid: bool | None = None

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object of the record (key, value and header values in base64)."""
        out: dict[str, object] = {
            "type": "record",
            "offset": self.offset,
            "timestamp": self.timestamp,
            "sequence": self.sequence,
            "sizeInBytes": self.size_in_bytes,
            "key": _b64(self.key),
            "value": _b64(self.value),
            "headers": [{"key": h.key, "value": _b64(h.value)} for h in self.headers],
        }
        if self.control_type is not None:
            out["controlType"] = self.control_type
            if self.coordinator_epoch is not None:
                out["coordinatorEpoch"] = self.coordinator_epoch
        return out


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The fault that ended the walk: its kind, the position of the batch (or tail) and a message."""

    kind: ErrorKind
    position: int
    message: str

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object of the error."""
        return {"type": "error", "error": self.kind, "position": self.position, "message": self.message}

    @property
    def exit_code(self) -> int:
        """``EXIT_TRUNCATED`` for a truncated tail, ``EXIT_CORRUPT`` otherwise."""
        return EXIT_TRUNCATED if self.kind == "truncated" else EXIT_CORRUPT


class StopReason(enum.Enum):
    """Why the walk ended."""

    END = "end"
    """Every byte was read."""
    MAX_BYTES = "max_bytes"
    """The ``max_bytes`` limit was reached before the end of the file."""
    ERROR = "error"
    """An :class:`ErrorEvent` was emitted."""


@dataclass(frozen=True, slots=True)
class SummaryEvent:
    """The last event: accepted batches and records, the valid prefix, the file size and why the walk stopped.

    ``records`` counts decoded records with ``deep``, and the batches' ``recordCount`` otherwise.
    """

    batches: int
    records: int
    valid_bytes: int
    file_bytes: int
    stop: StopReason
    exit_code: int

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object of the summary."""
        return {
            "type": "summary",
            "batches": self.batches,
            "records": self.records,
            "validBytes": self.valid_bytes,
            "fileBytes": self.file_bytes,
        }


DumpEvent = BatchEvent | RecordEvent | ErrorEvent | SummaryEvent


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


_JSON: Final = json.JSONEncoder(separators=(",", ":"))  # json.dumps would build one per call


def json_line(event: DumpEvent) -> str:
    """The ``--json`` line of ``event``, without the newline: exactly
    ``json.dumps(event.to_dict(), separators=(",", ":"))`` (ASCII only)."""
    return _JSON.encode(event.to_dict())


# --------------------------------------------------------------------------------------------------- reading


class _Window:
    """Forward-moving reads of ``file[0:limit]`` through one bounded buffer (no mmap: a file truncated
    under us ends the walk instead of killing the process with SIGBUS)."""

    __slots__ = ("_chunk", "_data", "_file", "_limit", "start")

    def __init__(self, file: BinaryIO, limit: int, chunk_bytes: int) -> None:
        self._file = file
        self._limit = limit
        self._chunk = max(chunk_bytes, RECORD_BATCH_OVERHEAD)
        self._data = memoryview(b"")
        self.start = 0
        """File position of the window's first byte (exception positions are relative to it)."""

    def get(self, position: int, size: int) -> tuple[memoryview, int] | None:
        """A buffer holding ``file[position:position + size]`` and the index of ``position`` in it.

        ``None`` if the file (or the limit) ends first.
        """
        if position >= self.start and position + size <= self.start + len(self._data):
            return self._data, position - self.start
        if position + size > self._limit:
            return None
        data = _read_at(self._file, position, min(max(size, self._chunk), self._limit - position))
        self._data = memoryview(data)
        self.start = position
        if len(data) < size:  # the file shrank while we read it
            return None
        return self._data, 0


def _read_at(file: BinaryIO, position: int, size: int) -> bytes:
    """Up to ``size`` bytes from ``position`` (fewer only at the end of the file)."""
    file.seek(position)
    first = file.read(size)
    if len(first) == size or not first:
        return first
    parts = [first]
    remaining = size - len(first)
    while remaining > 0:
        more = file.read(remaining)
        if not more:
            break
        parts.append(more)
        remaining -= len(more)
    return b"".join(parts)


def _message(exc: BaseException, shift: int) -> str:
    """``str(exc)``, with a kafkalog error's buffer-relative position turned into a file position."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, KafkaError) and exc.position is not None and shift:
        suffix = f" (at byte position {exc.position})"
        if text.endswith(suffix):
            text = f"{text[: -len(suffix)]} (at byte position {exc.position + shift})"
    return text


class LogDump:
    """A dump of one file of record batches; use as a context manager and iterate :meth:`events`.

    Opening raises ``OSError`` for a missing, unreadable or non-regular file, before any event.

    ``deep`` decodes every record; ``max_bytes`` reads at most that many bytes from the start;
    ``legacy_record_checksums`` also checks the own CRC of each magic 0/1 record (for text output; it
    decompresses legacy wrappers a second time); ``max_decompressed_bytes`` bounds one batch's records.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        deep: bool = False,
        max_bytes: int | None = None,
        legacy_record_checksums: bool = False,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, not {max_bytes}")
        self.path = Path(path)
        self.deep = deep
        self.max_bytes = max_bytes
        self.legacy_record_checksums = legacy_record_checksums
        self.max_decompressed_bytes = max_decompressed_bytes
        opener = virtual_file(self.path)
        if opener is not None:
            remote = opener()
            size = remote.size
            self._file: BinaryIO = _PositionalReader(remote)  # type: ignore[assignment]
        else:
            # O_NONBLOCK: a FIFO is refused by the fstat below instead of blocking the open (no effect on a
            # file).
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
            self._file = open(fd, "rb", buffering=0)  # noqa: SIM115 - closed by close()
            try:
                st = os.fstat(self._file.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(f"not a regular file ({stat.filemode(st.st_mode)})")
            except BaseException:
                self._file.close()
                raise
            size = st.st_size
        self.file_bytes: int = size
        """Size of the file when it was opened."""
        self.limit: int = self.file_bytes if max_bytes is None else min(max_bytes, self.file_bytes)
        """Bytes the walk may read."""
        self.position = 0
        """Where the walk is (for progress displays)."""
        self._window = _Window(self._file, self.limit, chunk_bytes)

    def close(self) -> None:
        """Closes the file."""
        self._file.close()

    def __enter__(self) -> LogDump:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the walk -----------------------------------------------------------------------------------------
    def events(self) -> Iterator[DumpEvent]:
        """Batch, record and error events, then the summary (see the module doc)."""
        batches = records = 0
        pos = 0
        error: ErrorEvent | None = None
        while True:
            self.position = pos
            step = self._next_batch(pos)
            if step is None:  # no complete batch starts here: the end, a partial tail or the limit
                break
            yield from step.events
            if step.error is not None:
                error = step.error
                break
            batches += 1
            records += step.records
            pos += step.size
        self.position = pos
        stop = StopReason.END
        if error is not None:
            stop = StopReason.ERROR
        elif self.limit < self.file_bytes:
            stop = StopReason.MAX_BYTES
        elif pos < self.file_bytes:
            error = ErrorEvent(
                "truncated",
                pos,
                f"{self.file_bytes - pos} trailing bytes at position {pos} do not form a complete batch",
            )
            stop = StopReason.ERROR
            yield error
        yield SummaryEvent(
            batches=batches,
            records=records,
            valid_bytes=pos,
            file_bytes=self.file_bytes,
            stop=stop,
            exit_code=EXIT_OK if error is None else error.exit_code,
        )

    def _next_batch(self, pos: int) -> _Step | None:
        """The events of the batch at ``pos``, or ``None`` when no complete batch starts there."""
        remaining = self.limit - pos
        if remaining <= HEADER_SIZE_UP_TO_MAGIC:
            return None
        got = self._window.get(pos, HEADER_SIZE_UP_TO_MAGIC + 1)
        if got is None:
            return None
        buf, rel = got
        frame = next_frame(buf, rel, rel + remaining)
        if isinstance(frame, PartialTail):
            return None
        if isinstance(frame, CorruptFrame):
            return _Step.failed(
                "corrupt_frame", pos, f"{frame.reason[0].upper()}{frame.reason[1:]} in file {self.path}."
            )
        total, magic = frame, frame_magic(buf, rel)
        if is_v2_magic(magic) and total < RECORD_BATCH_OVERHEAD:
            return _Step.failed(
                "corrupt_batch",
                pos,
                f"Record batch is corrupt (the size {total} is smaller than the minimum allowed overhead "
                f"{RECORD_BATCH_OVERHEAD})",
            )
        got = self._window.get(pos, total)
        if got is None:
            return None
        buf, rel = got
        return self._batch_step(buf, rel, pos, total, magic)

    def _batch_step(self, buf: memoryview, rel: int, pos: int, total: int, magic: int) -> _Step:
        """Reads the complete batch at ``buf[rel:rel + total]`` (file position ``pos``)."""
        shift = self._window.start
        batch: RecordBatch
        try:
            batch = DefaultRecordBatch(buf, rel) if magic >= MAGIC_V2 else LegacyRecordBatch(buf, rel)
        except _DECODE_ERRORS as exc:
            if magic >= MAGIC_V2:  # not expected: the frame was checked
                return _Step.failed("corrupt_batch", pos, _message(exc, shift))
            return self._broken_legacy_step(buf, rel, pos, total, _message(exc, shift))
        try:
            valid = batch.is_valid()
        except _DECODE_ERRORS as exc:
            return _Step.failed("corrupt_batch", pos, _message(exc, shift))
        try:
            event = _batch_event(batch, pos, valid, self.max_decompressed_bytes)
        except _DECODE_ERRORS as exc:
            if valid:
                return _Step.failed("invalid_records", pos, _message(exc, shift))
            return _Step.failed("corrupt_batch", pos, _crc_message(batch))
        if not valid:
            return _Step([event], total, 0, ErrorEvent("corrupt_batch", pos, _crc_message(batch)))
        if not self.deep:
            return _Step([event], total, event.record_count)
        try:
            records = self._record_events(batch)
        except _DECODE_ERRORS as exc:
            return _Step([event], total, 0, ErrorEvent("invalid_records", pos, _message(exc, shift)))
        return _Step([event, *records], total, len(records))

    def _broken_legacy_step(self, buf: memoryview, rel: int, pos: int, total: int, message: str) -> _Step:
        """A legacy entry that ``LegacyRecordBatch`` cannot frame (its key/value framing is read lazily, on record
        iteration, as Kafka reads it; this is for a header the constructor rejects).

        Kafka reads the fixed header fields lazily, so an uncompressed entry still gets its batch line: with a bad
        CRC it is a corrupt batch; with a good one it passes a shallow dump and fails deep iteration.
        """
        stored, computed = _legacy_checksums(buf, rel, total)
        valid = stored == computed
        event = _raw_legacy_event(buf, rel, pos, total, valid)
        if event is None:
            if valid:
                return _Step.failed("invalid_records", pos, message)
            return _Step.failed("corrupt_batch", pos, _crc_text(stored, computed))
        if not valid:
            return _Step([event], total, 0, ErrorEvent("corrupt_batch", pos, _crc_text(stored, computed)))
        if not self.deep:
            return _Step([event], total, event.record_count)
        return _Step([event], total, 0, ErrorEvent("invalid_records", pos, message))

    def _record_events(self, batch: RecordBatch) -> list[RecordEvent]:
        details = list(batch.record_details(self.max_decompressed_bytes))
        checksums: list[tuple[int, bool]] | None = None
        if self.legacy_record_checksums and isinstance(batch, LegacyRecordBatch):
            checksums = _legacy_record_checksums(batch, len(details), self.max_decompressed_bytes)
        if checksums is None:
            return [_record_event(detail, None, None) for detail in details]
        return [_record_event(d, crc, ok) for d, (crc, ok) in zip(details, checksums, strict=True)]


class _Step:
    """What one batch produced: its events (the error, if any, last), its size and its record count."""

    __slots__ = ("error", "events", "records", "size")

    def __init__(
        self, events: list[DumpEvent], size: int, records: int, error: ErrorEvent | None = None
    ) -> None:
        self.events = events if error is None else [*events, error]
        self.size = size
        self.records = records
        self.error = error

    @classmethod
    def failed(cls, kind: ErrorKind, position: int, message: str) -> _Step:
        """A batch that produced nothing but an error."""
        return cls([], 0, 0, ErrorEvent(kind, position, message))


def _legacy_checksums(buf: memoryview, rel: int, total: int) -> tuple[int, int]:
    """Stored and computed CRC-32 of the legacy entry at ``buf[rel:rel + total]``."""
    (stored,) = _UINT32.unpack_from(buf, rel + 12)
    return stored, zlib.crc32(buf[rel + 16 : rel + total])


def _raw_legacy_event(buf: memoryview, rel: int, pos: int, total: int, valid: bool) -> BatchEvent | None:
    """The batch event of an uncompressed legacy entry from its fixed-position fields only, or ``None`` when
    even those cannot be read (a compressed wrapper, a v1 entry too short for its timestamp)."""
    offset, _, crc, magic, attributes = _LEGACY_ENTRY.unpack_from(buf, rel)
    if attributes & 0x07:
        return None
    if magic != 0:  # LegacyRecord: any magic but 0 has the v1 layout
        if total < LOG_OVERHEAD + _RECORD_OVERHEAD_V1:
            return None
        (max_timestamp,) = _INT64.unpack_from(buf, rel + 18)
        timestamp_type = TimestampType.LOG_APPEND_TIME if attributes & 0x08 else TimestampType.CREATE_TIME
    else:
        max_timestamp, timestamp_type = NO_TIMESTAMP, TimestampType.NO_TIMESTAMP_TYPE
    return BatchEvent(
        position=pos,
        base_offset=offset,
        last_offset=offset,
        magic=magic,
        crc=crc,
        is_valid=valid,
        compression_type=Compression.NONE.kafka_name,
        timestamp_type=timestamp_type.kafka_name,
        base_timestamp=None,
        max_timestamp=max_timestamp,
        producer_id=NO_PRODUCER_ID,
        producer_epoch=NO_PRODUCER_EPOCH,
        base_sequence=NO_SEQUENCE,
        last_sequence=NO_SEQUENCE,
        is_transactional=False,
        is_control_batch=False,
        partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms=None,
        record_count=1,
        size_in_bytes=total,
    )


def _crc_text(stored: int, computed: int) -> str:
    """Kafka's ``ensureValid`` message for a CRC mismatch (the same text for v2 and legacy)."""
    return f"Record is corrupt (stored crc = {stored}, computed crc = {computed})"


def _crc_message(batch: RecordBatch) -> str:
    """The CRC mismatch message of ``batch``."""
    try:
        computed = batch.compute_checksum()
    except _DECODE_ERRORS as exc:
        return str(exc)
    return _crc_text(batch.checksum, computed)


def _batch_event(batch: RecordBatch, position: int, valid: bool, max_decompressed_bytes: int) -> BatchEvent:
    """The batch event; raises a decode error when a field cannot be read (a legacy wrapper that does not
    decompress, an unknown codec)."""
    if isinstance(batch, DefaultRecordBatch):
        record_count = batch.count
    elif valid and isinstance(batch, LegacyRecordBatch):
        # counted as Kafka's iterator counts: inner entries framed, keys and values not read
        record_count = batch.record_count(max_decompressed_bytes)
    elif valid:
        record_count = sum(1 for _ in batch.record_details(max_decompressed_bytes))
    elif not batch.is_compressed:
        record_count = 1
    else:
        raise ValueError("corrupt compressed legacy wrapper")
    return BatchEvent(
        position=position,
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        magic=batch.magic,
        crc=batch.checksum,
        is_valid=valid,
        compression_type=batch.compression.kafka_name,
        timestamp_type=batch.timestamp_type.kafka_name,
        base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        last_sequence=batch.last_sequence,
        is_transactional=batch.is_transactional,
        is_control_batch=batch.is_control_batch,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=batch.delete_horizon_ms,
        record_count=record_count,
        size_in_bytes=batch.size_in_bytes,
    )


def _record_event(detail: RecordDetail, crc: int | None, crc_ok: bool | None) -> RecordEvent:
    rec = detail.record
    ctype = detail.control_type
    type_id: int | None = None
    if ctype is not None and rec.key is not None:
        type_id = _CONTROL_KEY.unpack_from(rec.key)[1]
    return RecordEvent(
        offset=rec.offset,
        timestamp=rec.timestamp,
        sequence=detail.sequence,
        size_in_bytes=detail.size_in_bytes,
        key=rec.key,
        value=rec.value,
        headers=rec.headers,
        control_type=None if ctype is None else ctype.name,
        control_type_id=type_id,
        coordinator_epoch=detail.coordinator_epoch,
        legacy_crc=crc,
        legacy_crc_valid=crc_ok,
    )


def _legacy_record_checksums(
    batch: LegacyRecordBatch, count: int, max_decompressed_bytes: int
) -> list[tuple[int, bool]] | None:
    """``(stored crc, matches)`` of each record of a legacy entry (for a wrapper: of each inner record).

    ``None`` when the inner entries cannot be walked (they did decode once, so this is not expected).
    """
    if not batch.is_compressed:
        return [(batch.checksum, True)] * count
    raw = memoryview(batch.to_bytes())
    try:
        _, _, _, magic, attributes = _LEGACY_ENTRY.unpack_from(raw, 0)
        p = 18 + (8 if magic != 0 else 0)
        (key_len,) = _SIZE.unpack_from(raw, p)
        p += 4 + max(key_len, 0)
        (value_len,) = _SIZE.unpack_from(raw, p)
        p += 4
        if value_len < 0 or p + value_len > len(raw):
            return None
        payload = memoryview(
            decompress(
                attributes & 0x07,
                raw[p : p + value_len],
                max_decompressed_bytes,
                position=batch.position,
                legacy_magic=magic,
            )
        )
        out: list[tuple[int, bool]] = []
        q = 0
        while q + LOG_OVERHEAD + 4 <= len(payload):
            _, size, crc, _, _ = _LEGACY_ENTRY.unpack_from(payload, q)
            end = q + LOG_OVERHEAD + size
            if size < 4 or end > len(payload):
                return None
            out.append((crc, zlib.crc32(payload[q + 16 : end]) == crc))
            q = end
    except _DECODE_ERRORS:
        return None
    return out if len(out) == count else None


def iter_log_events(
    path: str | os.PathLike[str],
    *,
    deep: bool = False,
    max_bytes: int | None = None,
    legacy_record_checksums: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> Iterator[DumpEvent]:
    """The events of ``path`` (see :class:`LogDump` for the options); the file is closed at the end."""
    with LogDump(
        path,
        deep=deep,
        max_bytes=max_bytes,
        legacy_record_checksums=legacy_record_checksums,
        chunk_bytes=chunk_bytes,
        max_decompressed_bytes=max_decompressed_bytes,
    ) as dump:
        yield from dump.events()
