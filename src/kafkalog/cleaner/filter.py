"""The log cleaner's record filter: which batches and records of a chunk survive, and how survivors are written.

This is Kafka's ``MemoryRecords.filterTo`` with the ``LogCleaner`` filter (``Cleaner.cleanInto``,
``CleanedTransactionMetadata``), over a chunk of whole batches read from a segment. Rules owned here:

* **Record retention.** A record survives if it is past the offset map's latest offset; otherwise it needs
  a key (keyless records are dropped and counted invalid), an offset at or after the one the map holds for
  its key, and a value — or, for a tombstone, a batch whose delete horizon is unset or not yet reached.
  Records of aborted transactions are dropped whatever their key; control records are kept until their
  marker may go (below).
* **Batch retention** (``checkBatchRetention``). The batch holding an active producer's last data offset
  (or, with no data, its last marker in the current epoch) is kept even if emptied, as is the batch ending
  exactly at the round's upper bound (KAFKA-17076); a batch of an aborted transaction otherwise goes
  without being read; a transaction marker goes once its transaction has no data left *and* its delete
  horizon has passed.
* **Writing survivors.** A batch whose records all survive and that needs no new delete horizon is copied
  byte for byte. Otherwise its retained records are re-written into one batch with the *original* base
  offset, last offset delta (so the last offset and sequence survive), producer id/epoch, base sequence,
  partition leader epoch, timestamp type and codec; ``baseTimestamp`` is the first retained record's
  timestamp, or the delete horizon when one is set (attribute bit ``0x40``): the first cleaning that keeps
  a tombstone, or a marker whose transaction is empty, sets it to ``now + delete.retention.ms``. Record
  timestamp deltas are re-based accordingly, the record attribute byte is written as 0 and key, value and
  headers are copied verbatim, exactly as Kafka's ``MemoryRecordsBuilder`` writes them. An emptied batch
  that must stay becomes a 61-byte header with 0 records (``DefaultRecordBatch.writeEmptyHeader``: no
  codec, base timestamp -1, the original max timestamp). Legacy (v0/v1) entries are filtered record by
  record with Kafka's legacy tombstone rule and re-written as v2 batches keeping their offsets (kafkalog
  writes no v0/v1).

Every batch read is CRC-checked first (a corrupt batch aborts the cleaning with
:class:`~kafkalog.errors.CorruptRecordError`); every record is parsed strictly inside its batch. The hot path
(uncompressed v2 batches) is one compiled pass per chunk; compressed batches are decompressed and
re-compressed (Kafka's default level for the codec) around the same compiled record filter
(:mod:`kafkalog.cleaner.kernels`). Transaction state comes from :mod:`kafkalog.cleaner.txn`.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt
from crc32c import crc32c

from kafkalog.cleaner.kernels import (
    F_DISCARD,
    F_MARKER_EMPTY_TXN,
    F_RETAIN_ALL,
    F_RETAIN_DELETES,
    F_RETAIN_EMPTY,
    F_SKIP,
    K_COPY,
    K_DROP,
    K_REWRITE,
    M_KIND,
    M_MAX_TS,
    M_POS,
    M_SIZE,
    N_STATS,
    S_BYTES_READ,
    S_ERR,
    S_ERR_POS,
    S_INVALID,
    S_KEPT,
    S_OUT,
    S_READ,
    SCRATCH_ROWS,
    filter_batches,
    filter_payload,
)
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.records import ControlRecordType, Record, RecordBatch, TimestampType, read_batch_at
from kafkalog.records.batch import HEADER, MAGIC_V2, RECORD_BATCH_OVERHEAD
from kafkalog.records.builder import MemoryRecordsBuilder
from kafkalog.records.compression import Compression, compress, decompress
from kafkalog.records.framing import ATTRIBUTES_OFFSET, CRC_OFFSET
from kafkalog.records.kernels import (
    ERR_COUNT_NEGATIVE,
    ERR_LEGACY_MAGIC,
    ERROR_MESSAGES,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_BASE_SEQUENCE,
    F_BASE_TIMESTAMP,
    F_LAST_OFFSET_DELTA,
    F_LEADER_EPOCH,
    F_MAX_TIMESTAMP,
    F_POS,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_RECORD_COUNT,
    F_SIZE,
    N_BATCH_FIELDS,
    OK,
    SCAN_END,
    SCAN_MORE,
    SCAN_PARTIAL,
    as_uint8,
    scan_batches,
    verify_crcs,
)

__all__ = [
    "ChunkOutput",
    "FilterParams",
    "LastRecord",
    "control_type",
    "filter_chunk",
    "finish_crc",
    "pack_header",
    "raise_record_error",
    "scratch_arrays",
]

_ATTR_CODEC: Final = 0x07
_ATTR_LAT: Final = 0x08
_ATTR_TXN: Final = 0x10
_ATTR_CONTROL: Final = 0x20
_ATTR_HORIZON: Final = 0x40


@dataclass(frozen=True)
class LastRecord:
    """An active producer's last data offset (None if it has none) and epoch (Kafka's ``LastRecord``)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass
class FilterParams:
    """What the cleaning filter needs for one group of segments."""

    offset_map: SkimpyOffsetMap
    current_time: int
    delete_retention_ms: int
    last_records: dict[int, LastRecord]
    upper_bound_offset: int
    retain_legacy_deletes: bool = True
    max_decompressed_bytes: int = 256 * 1024 * 1024
    #: The producers' last data offsets, sorted (derived from ``last_records``: the vectorised retention check).
    last_data_offsets: npt.NDArray[np.int64] = field(init=False)

    def __post_init__(self) -> None:
        offsets = [r.last_data_offset for r in self.last_records.values() if r.last_data_offset is not None]
        self.last_data_offsets = np.array(sorted(offsets), np.int64)

    @property
    def new_horizon(self) -> int:
        """The delete horizon a batch gets when the cleaner first keeps one of its tombstones."""
        return min(self.current_time + self.delete_retention_ms, 2**63 - 1)

    def is_last_of_producer(self, producer_id: int, last_offset: int, control: bool, epoch: int) -> bool:
        """Kafka's ``isBatchLastRecordOfProducer``."""
        last = self.last_records.get(producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None:
            return last_offset == last.last_data_offset
        return control and epoch == last.producer_epoch


@dataclass
class ChunkOutput:
    """The filtered bytes of one chunk and one row per output batch."""

    data: bytes | bytearray | memoryview
    last_offsets: list[int]
    max_timestamps: list[int]
    sizes: list[int]
    bytes_read: int = 0
    messages_read: int = 0
    messages_retained: int = 0
    invalid_messages: int = 0


class _Scratch:
    """Reusable arrays of the compiled filter (grown on demand)."""

    def __init__(self) -> None:
        self.records = np.empty((SCRATCH_ROWS, 1024), np.int64)
        self.hashes = np.empty((2, 1024), np.uint64)
        self.table = np.empty((N_BATCH_FIELDS, 4096), np.int64)

    def records_for(self, count: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
        """Per-record scratch rows and hash rows for batches of up to ``count`` records."""
        if self.records.shape[1] < count:
            size = max(count, 2 * self.records.shape[1])
            self.records = np.empty((SCRATCH_ROWS, size), np.int64)
            self.hashes = np.empty((2, size), np.uint64)
        return self.records, self.hashes


_LOCAL = threading.local()


def scratch_arrays() -> _Scratch:
    """This thread's scratch arrays (cleaner threads run in parallel)."""
    s: _Scratch | None = getattr(_LOCAL, "scratch", None)
    if s is None:
        s = _LOCAL.scratch = _Scratch()
    return s


def raise_record_error(code: int, position: int, origin: int) -> None:
    """Raise a compiled kernel's error ``code`` at ``origin + position`` as Kafka's exception type: a broken
    frame or checksum is :class:`CorruptRecordError`, a malformed record :class:`InvalidRecordError`."""
    message = ERROR_MESSAGES.get(code, f"error {code}")
    if code == ERR_COUNT_NEGATIVE or code >= 200:
        raise InvalidRecordError(message, position=origin + position)
    raise CorruptRecordError(message, position=origin + position)


def control_type(batch: RecordBatch) -> ControlRecordType | None:
    """The type of a control batch's (first) record, None for an emptied control batch."""
    for record in batch.records():
        return ControlRecordType.parse(record.key)
    return None


def pack_header(
    size: int,
    base_offset: int,
    ple: int,
    attrs: int,
    lod: int,
    base_ts: int,
    max_ts: int,
    pid: int,
    epoch: int,
    seq: int,
    count: int,
) -> bytearray:
    """A 61-byte v2 batch header (magic 2, zero CRC: see :func:`finish_crc`) for a batch of ``size`` bytes."""
    buf = bytearray(RECORD_BATCH_OVERHEAD)
    HEADER.pack_into(
        buf, 0, base_offset, size - 12, ple, MAGIC_V2, 0, attrs, lod, base_ts, max_ts, pid, epoch, seq, count
    )
    return buf


def finish_crc(buf: bytearray | memoryview | npt.NDArray[np.uint8], pos: int, size: int) -> None:
    """Write the CRC-32C of bytes ``[pos + ATTRIBUTES_OFFSET, pos + size)`` into the batch header at ``buf[pos:]``."""
    view = memoryview(buf)  # type: ignore[arg-type]
    crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
    struct.pack_into(">I", view, pos + CRC_OFFSET, crc)


# --- the per-chunk filter -------------------------------------------------------------------------------------


def _batch_flags(
    t: npt.NDArray[np.int64],
    n: int,
    params: FilterParams,
    txn: CleanedTransactionMetadata,
    chunk: bytes,
    origin: int,
) -> npt.NDArray[np.int64]:
    """Per-batch flags (``checkBatchRetention`` + the tombstone rule) for ``t[:, :n]``, walking the
    transactional and control batches through ``txn`` in order."""
    attrs = t[F_ATTRIBUTES, :n]
    last = t[F_BASE_OFFSET, :n] + t[F_LAST_OFFSET_DELTA, :n]
    pids = t[F_PRODUCER_ID, :n]
    flags = np.zeros(n, np.int64)
    no_horizon = (attrs & _ATTR_HORIZON) == 0
    flags[no_horizon | (params.current_time < t[F_BASE_TIMESTAMP, :n])] |= F_RETAIN_DELETES
    retain_empty = last + 1 == params.upper_bound_offset
    if params.last_records:
        hits = (pids >= 0) & np.isin(last, params.last_data_offsets)
        for i in np.flatnonzero(hits).tolist():
            if not params.is_last_of_producer(int(pids[i]), int(last[i]), False, int(t[F_PRODUCER_EPOCH, i])):
                hits[i] = False
        retain_empty = retain_empty | hits
    flags[retain_empty] |= F_RETAIN_EMPTY
    special = (attrs & (_ATTR_TXN | _ATTR_CONTROL)) != 0
    if special.any():
        view = memoryview(chunk)
        for i in np.flatnonzero(special).tolist():
            a = int(attrs[i])
            pid = int(pids[i])
            lo = int(last[i])
            fl = int(flags[i]) & F_RETAIN_DELETES
            if a & _ATTR_CONTROL:
                batch = read_batch_at(view, int(t[F_POS, i]), origin=origin)
                assert batch is not None
                can_discard = txn.on_control_batch_read(pid, lo, control_type(batch))
                horizon_passed = (a & _ATTR_HORIZON) != 0 and int(
                    t[F_BASE_TIMESTAMP, i]
                ) <= params.current_time
                discard = can_discard and horizon_passed
                last_of_producer = params.is_last_of_producer(pid, lo, True, int(t[F_PRODUCER_EPOCH, i]))
            else:
                can_discard = txn.on_batch_read(pid, lo, True)
                discard = can_discard
                last_of_producer = params.is_last_of_producer(pid, lo, False, int(t[F_PRODUCER_EPOCH, i]))
            if (pid >= 0 and last_of_producer) or lo + 1 == params.upper_bound_offset:
                fl |= F_RETAIN_EMPTY
            elif discard:
                fl |= F_SKIP
            if discard:
                fl |= F_DISCARD
            elif a & _ATTR_CONTROL:
                fl |= F_RETAIN_ALL
            if can_discard and a & _ATTR_CONTROL:
                fl |= F_MARKER_EMPTY_TXN
            flags[i] = fl
    if n:
        txn.consume_up_to(int(last[-1]))
    return flags


def _filter_compressed(
    chunk: bytes,
    t: npt.NDArray[np.int64],
    i: int,
    fl: int,
    params: FilterParams,
    out: ChunkOutput,
    origin: int,
) -> None:
    pos, size = int(t[F_POS, i]), int(t[F_SIZE, i])
    out.bytes_read += size
    if fl & F_SKIP:
        return
    attrs = int(t[F_ATTRIBUTES, i])
    codec = Compression.from_id(attrs & _ATTR_CODEC, position=origin + pos)
    count = int(t[F_RECORD_COUNT, i])
    if count < 0:
        raise_record_error(ERR_COUNT_NEGATIVE, pos, origin)
    payload = decompress(
        codec,
        memoryview(chunk)[pos + RECORD_BATCH_OVERHEAD : pos + size],
        params.max_decompressed_bytes,
        position=origin + pos,
    )
    records = as_uint8(payload)
    scratch, hashes = scratch_arrays().records_for(count)
    rewritten = np.empty(len(payload) + 10 * count + 16, np.uint8)
    res = np.zeros(9, np.int64)
    base, base_ts, max_ts = int(t[F_BASE_OFFSET, i]), int(t[F_BASE_TIMESTAMP, i]), int(t[F_MAX_TIMESTAMP, i])
    filter_payload(
        records,
        count,
        base,
        base_ts,
        max_ts,
        attrs,
        fl,
        params.new_horizon,
        params.offset_map.table(),
        params.offset_map.latest_offset,
        rewritten,
        scratch,
        hashes,
        res,
    )
    err, _err_pos, kind, kept, invalid, new_attrs, new_base, out_max, length = (int(x) for x in res)
    if err != OK:
        raise InvalidRecordError(
            f"{ERROR_MESSAGES.get(err, err)} in the compressed batch at {origin + pos}", position=origin + pos
        )
    out.messages_read += count
    out.messages_retained += kept
    out.invalid_messages += invalid
    last_offset = base + int(t[F_LAST_OFFSET_DELTA, i])
    if kind == K_DROP:
        return
    if kind == K_COPY:
        piece: bytes | bytearray = chunk[pos : pos + size]
        out_max = max_ts
    else:
        body = b""
        if kind == K_REWRITE:
            body = compress(codec, rewritten[:length].tobytes())
        else:
            new_attrs = attrs & (_ATTR_LAT | _ATTR_TXN | _ATTR_CONTROL)
            new_base, kept, out_max = -1, 0, max_ts
        header = pack_header(
            RECORD_BATCH_OVERHEAD + len(body),
            base,
            int(t[F_LEADER_EPOCH, i]),
            new_attrs,
            int(t[F_LAST_OFFSET_DELTA, i]),
            new_base,
            out_max,
            int(t[F_PRODUCER_ID, i]),
            int(t[F_PRODUCER_EPOCH, i]),
            int(t[F_BASE_SEQUENCE, i]),
            kept,
        )
        piece = header + body
        finish_crc(piece, 0, len(piece))
    _add_piece(out, piece, [last_offset], [out_max], [len(piece)])


def _add_piece(
    out: ChunkOutput,
    data: bytes | bytearray | memoryview,
    lasts: list[int],
    max_ts: list[int],
    sizes: list[int],
) -> None:
    if not sizes:
        return
    if not out.sizes:
        out.data = data
    else:
        if not isinstance(out.data, bytearray):
            out.data = bytearray(out.data)
        out.data += data
    out.last_offsets.extend(lasts)
    out.max_timestamps.extend(max_ts)
    out.sizes.extend(sizes)


def _filter_uncompressed(
    buf: npt.NDArray[np.uint8],
    t: npt.NDArray[np.int64],
    sel: npt.NDArray[np.int64],
    flags: npt.NDArray[np.int64],
    params: FilterParams,
    out: ChunkOutput,
    origin: int,
) -> None:
    if sel.shape[0] == 0:
        return
    counts = np.maximum(t[F_RECORD_COUNT, sel], 0)
    capacity = int(t[F_SIZE, sel].sum() + 10 * counts.sum() + 64)
    result = np.empty(capacity, np.uint8)
    meta = np.zeros((sel.shape[0], 4), np.int64)
    stats = np.zeros(N_STATS, np.int64)
    scratch, hashes = scratch_arrays().records_for(int(counts.max()))
    filter_batches(
        buf,
        t,
        sel,
        flags,
        params.new_horizon,
        params.offset_map.table(),
        params.offset_map.latest_offset,
        result,
        meta,
        scratch,
        hashes,
        stats,
    )
    if stats[S_ERR] != OK:
        raise_record_error(int(stats[S_ERR]), int(stats[S_ERR_POS]), origin)
    out.bytes_read += int(stats[S_BYTES_READ])
    out.messages_read += int(stats[S_READ])
    out.messages_retained += int(stats[S_KEPT])
    out.invalid_messages += int(stats[S_INVALID])
    kinds = meta[:, M_KIND]
    keep = np.flatnonzero(kinds != K_DROP)
    if keep.shape[0] == 0:
        return
    needs_crc = np.flatnonzero(kinds >= K_REWRITE)
    for j in needs_crc.tolist():
        finish_crc(result, int(meta[j, M_POS]), int(meta[j, M_SIZE]))
    rows = sel[keep]
    lasts = (t[F_BASE_OFFSET, rows] + t[F_LAST_OFFSET_DELTA, rows]).tolist()
    end = int(stats[S_OUT])
    _add_piece(out, result[:end].data, lasts, meta[keep, M_MAX_TS].tolist(), meta[keep, M_SIZE].tolist())


def _filter_v2(
    chunk: bytes,
    buf: npt.NDArray[np.uint8],
    t: npt.NDArray[np.int64],
    n: int,
    params: FilterParams,
    txn: CleanedTransactionMetadata,
    out: ChunkOutput,
    origin: int,
) -> None:
    bad, _ = verify_crcs(buf, t, n)
    if bad >= 0:
        raise CorruptRecordError(
            "record batch is corrupt (CRC mismatch) in a segment being cleaned",
            position=origin + int(t[F_POS, bad]),
        )
    flags = _batch_flags(t, n, params, txn, chunk, origin)
    compressed = (t[F_ATTRIBUTES, :n] & _ATTR_CODEC) != 0
    if not compressed.any():
        _filter_uncompressed(buf, t, np.arange(n, dtype=np.int64), flags, params, out, origin)
        return
    start = 0
    for i in np.flatnonzero(compressed).tolist():
        if i > start:
            _filter_uncompressed(
                buf, t, np.arange(start, i, dtype=np.int64), flags[start:i], params, out, origin
            )
        _filter_compressed(chunk, t, i, int(flags[i]), params, out, origin)
        start = i + 1
    if start < n:
        _filter_uncompressed(buf, t, np.arange(start, n, dtype=np.int64), flags[start:n], params, out, origin)


def _filter_legacy(batch: RecordBatch, params: FilterParams, out: ChunkOutput) -> None:
    """A v0/v1 entry: Kafka's record rules with the legacy tombstone rule; survivors re-written as v2."""
    out.bytes_read += batch.size_in_bytes
    records: list[Record] = list(batch.records(params.max_decompressed_bytes))
    latest = params.offset_map.latest_offset
    kept: list[Record] = []
    for record in records:
        if record.offset > latest:
            kept.append(record)
        elif record.key is None:
            out.invalid_messages += 1
        elif record.offset >= params.offset_map.get(record.key) and (
            record.value is not None or params.retain_legacy_deletes
        ):
            kept.append(record)
    out.messages_read += len(records)
    out.messages_retained += len(kept)
    if not kept:
        return
    if len(kept) == len(records):
        data: bytes | bytearray | memoryview = batch.to_bytes()
        max_ts = batch.max_timestamp
    else:
        builder = MemoryRecordsBuilder(
            base_offset=kept[0].offset,
            compression=batch.compression,
            timestamp_type=batch.timestamp_type
            if batch.timestamp_type is not TimestampType.NO_TIMESTAMP_TYPE
            else TimestampType.CREATE_TIME,
            log_append_time=batch.max_timestamp,
        )
        for record in kept:
            builder.append_with_offset(record.offset, record.timestamp, record.key, record.value)
        data = builder.build().buffer
        max_ts = max(r.timestamp for r in kept)
    _add_piece(
        out,
        data,
        [batch.last_offset if len(kept) == len(records) else kept[-1].offset],
        [max_ts],
        [len(data)],
    )


def filter_chunk(
    chunk: bytes, params: FilterParams, txn: CleanedTransactionMetadata, origin: int = 0
) -> ChunkOutput:
    """Filter the complete batches at the start of ``chunk`` (the bytes of a segment from file position
    ``origin``); :attr:`ChunkOutput.bytes_read` is where the first incomplete batch starts (0 if none)."""
    out = ChunkOutput(b"", [], [], [])
    buf = as_uint8(chunk)
    table = scratch_arrays().table
    pos = 0
    end = len(chunk)
    while pos < end:
        scan = scan_batches(buf, pos, end, table=table)
        if scan.n:
            _filter_v2(chunk, buf, scan.table, scan.n, params, txn, out, origin)
        if scan.code == SCAN_MORE:
            pos = scan.next_pos
            continue
        if scan.code == ERR_LEGACY_MAGIC:
            batch = read_batch_at(memoryview(chunk), scan.next_pos, end, origin)
            if batch is None:
                break
            batch.ensure_valid()
            _filter_legacy(batch, params, out)
            pos = scan.next_pos + batch.size_in_bytes
            continue
        if scan.code in (SCAN_END, SCAN_PARTIAL):
            break
        raise CorruptRecordError(
            ERROR_MESSAGES.get(scan.code, "corrupt batch"), position=origin + scan.next_pos
        )
    return out
