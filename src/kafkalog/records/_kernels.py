"""Numba kernels that parse Kafka RecordBatch v2 bytes: the format, its error codes and the one record parser.

This module owns the byte format below, the ``ERR_*`` codes, the bounds discipline, the record parsers
(``_parse_record_prefix``, ``_parse_header``), the batch-frame scan (:func:`scan_batches`), the CRC check
(:func:`verify_crcs`) and the leader's record walk (:func:`record_stats`). Built on those parsers:
:mod:`kafkalog.records._kernels_index` (:func:`~kafkalog.records._kernels_index.index_records`, per-record
positions of one batch), :mod:`kafkalog.records._kernels_columnar` (the fused decode into Arrow buffers)
and :mod:`kafkalog.cleaner.kernels`.

Everything here works on a 1-D ``np.uint8`` array (a zero-copy view of ``bytes``, ``bytearray``, ``mmap``,
``memoryview``; :func:`as_uint8`) and never raises from compiled code: each kernel returns an error code
(``ERR_*``) and the byte position where the problem was found, and the typed Python wrappers (here and in
the modules above) turn that into :class:`~kafkalog.errors.CorruptRecordError` /
:class:`~kafkalog.errors.InvalidRecordError`.

Format (Kafka ``DefaultRecordBatch`` / ``DefaultRecord``, all integers big-endian)::

    batch  = baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 (=2) | crc u32
             | attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64
             | producerId i64 | producerEpoch i16 | baseSequence i32 | recordCount i32 | records...
             (61 header bytes; total size = batchLength + 12; CRC-32C covers [21, size))
    record = length varint | attributes i8 (ignored) | timestampDelta varlong | offsetDelta varint
             | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
             | headerCount varint | headers: (keyLength varint >= 0 | key utf-8 | valueLength varint | value)*

``varint``/``varlong`` are protobuf zig-zag LEB128 of at most 5 / 10 bytes; as in Kafka's ``ByteUtils``, bits
beyond 32 (64) in the last byte are dropped.

Invariants every kernel keeps (the reason this module exists):

* every read is at ``0 <= p < limit`` for a limit that the wrapper has checked against the array length:
  the strict parsers check each byte, the optimistic record parser of :func:`_record_stats` reads unchecked
  only inside a window it has checked as a whole; corrupt input yields an error code, never an out-of-bounds
  read or write;
* a record is parsed strictly inside its declared body: a field running past ``length`` is an error, and the
  fields must consume exactly ``length`` bytes;
* a batch's records must consume exactly ``[records_start, records_end)`` after ``recordCount`` records
  (fewer bytes → :data:`ERR_COUNT_TOO_MANY`, bytes left over → :data:`ERR_COUNT_TOO_FEW`);
* key/value/header-value lengths ``< 0`` are null (as Kafka reads them, normalised to ``-1``); header keys ``>= 0``; header count ``>= 0``
  and at most half the remaining body bytes; the record attributes byte is ignored as Kafka does;
* errors (code and position) come from the strict parsers only: a fast path may decline a record, never
  judge it;
* outputs are written only below the capacities of the arrays passed in (checked, :data:`ERR_CAPACITY`).

Speed notes (measured on the 2-core VM):

* Parsers read input bytes through a raw address (``arr.ctypes.data``) with the intrinsics of
  :mod:`kafkalog.records._intrinsics`, and copy fields with ``llvm.memcpy`` on checked ranges.
* :func:`_record_stats` (the leader's validation of every append) parses the common record (varints of at
  most 3 bytes) without per-byte checks and hands anything else to the strict parser (its gain, and why
  its varints are not decoded branch-free: docs/benchmarks.md, "Design measurements"): predicted branches
  let the CPU run ahead to the next record, whose position depends only on the length varint.

Compiled code is cached on disk (``cache=CACHE``) outside the package, where :mod:`kafkalog.jit` chooses
(``NUMBA_CACHE_DIR``, else a per-user cache directory, else a private temporary one, else no cache); without
a cache each process pays the compile (see :func:`warm_up`). Numba validates a cached function against its
own source file only, so ``_kernels_index``, ``_kernels_columnar`` and ``kafkalog.cleaner.kernels``,
which compile these parsers in, keep stale machine code after an edit here until their cache files
(``*.nbi`` / ``*.nbc`` under ``python -m kafkalog.jit``'s directory) are deleted (``make numba-cache``).

CRC-32C: :func:`verify_crcs` calls the ``crc32c`` package's own exported C routine (hardware SSE4.2 / ARMv8
when the package reports ``hardware_based``) from compiled code, so there is one CRC implementation (the
library's) and no per-batch Python call. If the symbol is not found, :data:`NATIVE_CRC` is False and callers
must use ``crc32c.crc32c`` per batch from Python.
"""

from __future__ import annotations

import platform
from typing import Any, Final, NamedTuple

import crc32c
import numpy as np
import numpy.typing as npt
from numba import njit, types

from kafkalog.jit import CACHE
from kafkalog.records._intrinsics import _load_u8, _memcpy
from kafkalog.records.framing import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    RECORDS_COUNT_OFFSET,
)

__all__ = [
    "BATCH_FIELDS",
    "BATCH_HEADER_SIZE",
    "CORRUPT_CODES",
    "ERROR_MESSAGES",
    "NATIVE_CRC",
    "RecordStats",
    "ScanResult",
    "as_uint8",
    "record_stats",
    "scan_batches",
    "verify_crcs",
    "warm_up",
]

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]

# --- batch header layout ------------------------------------------------------------------------------------

# (offsets and sizes: kafkalog.records.framing, Kafka's DefaultRecordBatch constants)
BATCH_HEADER_SIZE: Final = RECORD_BATCH_OVERHEAD
MIN_FRAME_SIZE: Final = RECORD_OVERHEAD_V0  # smallest batchLength of any format
# smallest record: length, attributes, tsDelta, offsetDelta, keyLen, valueLen, headerCount of 1 byte each
MIN_RECORD_SIZE: Final = 7

# Rows of the scan table (``table[F_X, i]`` is field X of batch i); all int64.
F_POS: Final = 0  # position of the batch in the buffer
F_SIZE: Final = 1  # total size in bytes (batchLength + 12)
F_BASE_OFFSET: Final = 2
F_LEADER_EPOCH: Final = 3
F_CRC: Final = 4  # stored CRC, unsigned
F_ATTRIBUTES: Final = 5
F_LAST_OFFSET_DELTA: Final = 6
F_BASE_TIMESTAMP: Final = 7
F_MAX_TIMESTAMP: Final = 8
F_PRODUCER_ID: Final = 9
F_PRODUCER_EPOCH: Final = 10
F_BASE_SEQUENCE: Final = 11
F_RECORD_COUNT: Final = 12
N_BATCH_FIELDS: Final = 13
BATCH_FIELDS: Final = (
    "pos",
    "size",
    "base_offset",
    "partition_leader_epoch",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)

ATTR_CODEC_MASK: Final = 0x07
ATTR_LOG_APPEND_TIME: Final = 0x08
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20

# --- status and error codes ---------------------------------------------------------------------------------

# scan_batches stop reasons (not errors)
SCAN_MORE: Final = 0  # a limit (table, records, bytes) was reached; call again from ``next_pos``
SCAN_END: Final = 1  # reached ``end`` exactly
SCAN_PARTIAL: Final = 2  # the bytes from ``next_pos`` to ``end`` are a trailing partial batch
SCAN_STOP_OFFSET: Final = 3  # the batch at ``next_pos`` starts at or after ``stop_offset``

OK: Final = 0
ERR_FRAME_SIZE: Final = 101  # batchLength < 14
ERR_V2_SIZE: Final = 102  # magic 2 but total size < 61
ERR_LEGACY_MAGIC: Final = 103  # magic 0 or 1: not a v2 batch (caller falls back or raises)
ERR_BAD_MAGIC: Final = 104  # magic outside 0..2
ERR_CRC: Final = 105
ERR_COUNT_NEGATIVE: Final = 201
ERR_VARINT_EOF: Final = 202
ERR_VARINT_TOO_LONG: Final = 203
ERR_RECORD_SIZE: Final = 204  # length varint negative or past the end of the records
ERR_KEY_LENGTH: Final = 205
ERR_VALUE_LENGTH: Final = 206
ERR_HEADER_COUNT: Final = 207
ERR_HEADER_KEY_LENGTH: Final = 208
ERR_HEADER_VALUE_LENGTH: Final = 209
ERR_RECORD_SIZE_MISMATCH: Final = 210
ERR_COUNT_TOO_FEW: Final = 211  # bytes remain after recordCount records
ERR_COUNT_TOO_MANY: Final = 212  # records end before recordCount records
ERR_RECORD_ATTRIBUTES_EOF: Final = 213
# output arrays too small: a caller bug, never caused by the data when sized as documented
ERR_CAPACITY: Final = 301

ERROR_MESSAGES: Final[dict[int, str]] = {
    ERR_FRAME_SIZE: "batch size smaller than the minimum record overhead (14)",
    ERR_V2_SIZE: "v2 batch size smaller than the batch header (61 bytes)",
    ERR_LEGACY_MAGIC: "legacy (magic 0/1) message set",
    ERR_BAD_MAGIC: "invalid magic byte",
    ERR_CRC: "batch CRC mismatch",
    ERR_COUNT_NEGATIVE: "negative record count",
    ERR_VARINT_EOF: "varint runs past the end of the record",
    ERR_VARINT_TOO_LONG: "varint longer than 5 bytes / varlong longer than 10 bytes",
    ERR_RECORD_SIZE: "record length negative or past the end of the batch",
    ERR_KEY_LENGTH: "invalid key length (past the end of the record)",
    ERR_VALUE_LENGTH: "invalid value length (past the end of the record)",
    ERR_HEADER_COUNT: "invalid header count (negative, or more headers than bytes left in the record)",
    ERR_HEADER_KEY_LENGTH: "invalid header key length (negative, or past the end of the record)",
    ERR_HEADER_VALUE_LENGTH: "invalid header value length (past the end of the record)",
    ERR_RECORD_SIZE_MISMATCH: "record fields do not fill the declared record length",
    ERR_COUNT_TOO_FEW: "bytes left in the batch after its declared record count",
    ERR_COUNT_TOO_MANY: "batch records end before its declared record count",
    ERR_RECORD_ATTRIBUTES_EOF: "record ends before its attributes byte",
    ERR_CAPACITY: "output buffers too small (internal error)",
}

#: codes that mean a broken frame or checksum (CorruptRecordError); the rest are InvalidRecordError
CORRUPT_CODES: Final = frozenset({ERR_FRAME_SIZE, ERR_V2_SIZE, ERR_BAD_MAGIC, ERR_CRC})

# --- native CRC-32C from the crc32c package ---------------------------------------------------------------


def _find_native_crc() -> tuple[str, bool]:
    """Return (symbol, found) of the crc32c extension's exported ``uint32 f(uint32 crc, u8* p, size_t n)``.

    The symbol is resolved by name at link time (``llvmlite`` ``load_library_permanently``), so cached
    machine code keeps working in later processes. The extension's module init has already prepared the
    tables the hardware routine uses (it runs when ``crc32c`` is imported).
    """
    import llvmlite.binding as llvm  # type: ignore[import-untyped]
    from crc32c import _crc32c as ext

    machine = platform.machine().lower()
    if crc32c.hardware_based and machine in ("x86_64", "amd64"):
        symbol = "_crc32c_hw_adler"
    elif crc32c.hardware_based and machine in ("aarch64", "arm64"):
        symbol = "_crc32c_hw_arm64"
    else:
        symbol = "_crc32c_sw_slicing_by_8"
    try:
        llvm.load_library_permanently(ext.__file__)
        found = llvm.address_of_symbol(symbol) is not None
    except (OSError, RuntimeError, AttributeError):
        found = False
    return symbol, found


_CRC_SYMBOL, NATIVE_CRC = _find_native_crc()
if NATIVE_CRC:
    _crc32c_native: Any = types.ExternalFunction(
        _CRC_SYMBOL, types.uint32(types.uint32, types.voidptr, types.uintp)
    )
else:  # pragma: no cover - only without the crc32c extension's symbols; callers then never ask kernels for CRCs

    @njit(cache=CACHE, nogil=True)
    def _crc32c_native(crc: Any, p: Any, n: Any) -> Any:
        return np.uint32(0)

# --- small helpers (inlined by LLVM) ----------------------------------------------------------------------


@njit(cache=CACHE, nogil=True)
def _at(mem: Any, p: Any) -> Any:
    """Byte ``p`` of the buffer at address ``mem`` (callers keep ``0 <= p`` below a checked limit)."""
    return _load_u8(mem, p)


@njit(cache=CACHE, nogil=True)
def _be_u32(mem: Any, p: Any) -> Any:
    return (
        (np.int64(_at(mem, p)) << 24)
        | (np.int64(_at(mem, p + 1)) << 16)
        | (np.int64(_at(mem, p + 2)) << 8)
        | np.int64(_at(mem, p + 3))
    )


@njit(cache=CACHE, nogil=True)
def _be_i32(mem: Any, p: Any) -> Any:
    v = _be_u32(mem, p)
    return v - ((v >> 31) << 32)


@njit(cache=CACHE, nogil=True)
def _be_i16(mem: Any, p: Any) -> Any:
    v = (np.int64(_at(mem, p)) << 8) | np.int64(_at(mem, p + 1))
    return v - ((v >> 15) << 16)


@njit(cache=CACHE, nogil=True)
def _be_i64(mem: Any, p: Any) -> Any:
    return (_be_u32(mem, p) << 32) | _be_u32(mem, p + 4)


@njit(cache=CACHE, nogil=True)
def _read_varint(mem: Any, p: Any, limit: Any) -> Any:
    """Zig-zag varint (int32) at ``p``; returns (value, next_p, err). Reads only below ``limit``."""
    if p >= limit:
        return 0, p, ERR_VARINT_EOF
    b = np.int64(_at(mem, p))
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1, OK
    raw = b & 0x7F
    shift = 7
    q = p + 1
    while True:
        if q >= limit:
            return 0, q, ERR_VARINT_EOF
        b = np.int64(_at(mem, q))
        q += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            return 0, q, ERR_VARINT_TOO_LONG
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), q, OK


@njit(cache=CACHE, nogil=True)
def _read_varlong(mem: Any, p: Any, limit: Any) -> Any:
    """Zig-zag varlong (int64) at ``p``; returns (value, next_p, err). Reads only below ``limit``."""
    if p >= limit:
        return 0, p, ERR_VARINT_EOF
    b = np.int64(_at(mem, p))
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1, OK
    raw = b & 0x7F
    shift = 7
    q = p + 1
    while True:
        if q >= limit:
            return 0, q, ERR_VARINT_EOF
        b = np.int64(_at(mem, q))
        q += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            return 0, q, ERR_VARINT_TOO_LONG
    # logical shift right of the 64-bit pattern, then un-zig-zag
    return ((raw >> 1) & 0x7FFFFFFFFFFFFFFF) ^ -(raw & 1), q, OK


@njit(cache=CACHE, nogil=True, inline="always")
def _parse_record_prefix(mem: Any, p: Any, limit: Any) -> Any:
    """Parse one record up to (and including) its header count.

    Returns ``(err, err_pos, body_end, ts_delta, offset_delta, key_pos, key_len, value_pos, value_len,
    header_count, next_p)``; ``next_p`` is the position of the first header (or of ``body_end`` when there
    are none). Every field is read strictly below ``body_end`` (itself checked against ``limit``).
    """
    body_len, q, err = _read_varint(mem, p, limit)
    if err != OK:
        return err, p, 0, 0, 0, 0, 0, 0, 0, 0, q
    if body_len < 0 or body_len > limit - q:
        return ERR_RECORD_SIZE, p, 0, 0, 0, 0, 0, 0, 0, 0, q
    body_end = q + body_len
    if q >= body_end:
        return ERR_RECORD_ATTRIBUTES_EOF, q, 0, 0, 0, 0, 0, 0, 0, 0, q
    q += 1  # attributes: ignored, as in Kafka
    ts_delta, q2, err = _read_varlong(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    offset_delta, q, err = _read_varint(mem, q2, body_end)
    if err != OK:
        return err, q2, 0, 0, 0, 0, 0, 0, 0, 0, q
    key_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    if key_len < 0:
        key_len = -1  # Kafka reads any negative length as null
    if key_len > body_end - q2:
        return ERR_KEY_LENGTH, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    key_pos = q2
    q = q2 + max(key_len, 0)
    value_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    if value_len < 0:
        value_len = -1  # Kafka reads any negative length as null
    if value_len > body_end - q2:
        return ERR_VALUE_LENGTH, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    value_pos = q2
    q = q2 + max(value_len, 0)
    header_count, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    if header_count < 0 or header_count > (body_end - q2) >> 1:
        return ERR_HEADER_COUNT, q, 0, 0, 0, 0, 0, 0, 0, 0, q2
    return (
        OK,
        0,
        body_end,
        ts_delta,
        offset_delta,
        key_pos,
        key_len,
        value_pos,
        value_len,
        header_count,
        q2,
    )


@njit(cache=CACHE, nogil=True, inline="always")
def _parse_header(mem: Any, p: Any, body_end: Any) -> Any:
    """Parse one header; returns ``(err, err_pos, key_pos, key_len, value_pos, value_len, next_p)``."""
    key_len, q, err = _read_varint(mem, p, body_end)
    if err != OK:
        return err, p, 0, 0, 0, 0, q
    if key_len < 0 or key_len > body_end - q:
        return ERR_HEADER_KEY_LENGTH, p, 0, 0, 0, 0, q
    key_pos = q
    q += key_len
    value_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, q2
    if value_len < 0:
        value_len = -1  # Kafka reads any negative length as null
    if value_len > body_end - q2:
        return ERR_HEADER_VALUE_LENGTH, q, 0, 0, 0, 0, q2
    return OK, 0, key_pos, key_len, q2, value_len, q2 + max(value_len, 0)


@njit(cache=CACHE, nogil=True)
def _copy(dst: Any, d: Any, src: Any, s: Any, n: Any) -> None:
    """Copy ``n`` bytes from address ``src + s`` to ``dst + d`` (ranges checked by the caller, ``n >= 0``)."""
    _memcpy(dst + np.uint64(d), src + np.uint64(s), n)


# --- batch-boundary scan --------------------------------------------------------------------------------------


@njit(cache=CACHE, nogil=True)
def _scan_batches(
    buf: Any,
    start: Any,
    end: Any,
    table: Any,
    max_records: Any,
    max_bytes: Any,
    skip_below: Any,
    stop_offset: Any,
) -> Any:
    """Walk batch frames in ``buf[start:end]`` and fill ``table[:, i]`` for each v2 batch kept.

    Batches whose last offset (``baseOffset + lastOffsetDelta``) is below ``skip_below`` are framed and
    checked but not recorded. Stops before a batch with ``baseOffset >= stop_offset``. Returns
    ``(n, next_pos, code)``: ``code`` is a ``SCAN_*`` reason or an ``ERR_*`` at ``next_pos``. Stops with
    SCAN_MORE once the table is full or the recorded record counts / batch bytes reach ``max_records`` /
    ``max_bytes`` (at least one batch is always recorded). The CRC is not checked here.
    """
    mem = buf.ctypes.data
    cap = table.shape[1]
    n = 0
    pos = start
    records = 0
    nbytes = 0
    while True:
        if pos == end:
            return n, pos, SCAN_END
        if n >= cap or (n > 0 and (records >= max_records or nbytes >= max_bytes)):
            return n, pos, SCAN_MORE
        # the framing rule of kafkalog.records.framing.next_frame (known_magic_only), inlined; the two are
        # pinned to the same verdicts by tests/records/test_framing.py
        if end - pos <= HEADER_SIZE_UP_TO_MAGIC:  # Kafka's FileLogInputStream: position >= end - 17
            return n, pos, SCAN_PARTIAL
        batch_length = _be_i32(mem, pos + LENGTH_OFFSET)
        if batch_length < MIN_FRAME_SIZE:
            return n, pos, ERR_FRAME_SIZE
        size = batch_length + LOG_OVERHEAD
        if size > end - pos:
            return n, pos, SCAN_PARTIAL
        magic = np.int64(_at(mem, pos + MAGIC_OFFSET))
        if magic == 0 or magic == 1:
            return n, pos, ERR_LEGACY_MAGIC
        if magic != 2:
            return n, pos, ERR_BAD_MAGIC
        if size < BATCH_HEADER_SIZE:
            return n, pos, ERR_V2_SIZE
        base_offset = _be_i64(mem, pos)
        if base_offset >= stop_offset:
            return n, pos, SCAN_STOP_OFFSET
        last_offset_delta = _be_i32(mem, pos + LAST_OFFSET_DELTA_OFFSET)
        if base_offset + last_offset_delta >= skip_below:
            count = _be_i32(mem, pos + RECORDS_COUNT_OFFSET)
            table[F_POS, n] = pos
            table[F_SIZE, n] = size
            table[F_BASE_OFFSET, n] = base_offset
            table[F_LEADER_EPOCH, n] = _be_i32(mem, pos + PARTITION_LEADER_EPOCH_OFFSET)
            table[F_CRC, n] = _be_u32(mem, pos + CRC_OFFSET)
            table[F_ATTRIBUTES, n] = _be_i16(mem, pos + ATTRIBUTES_OFFSET)
            table[F_LAST_OFFSET_DELTA, n] = last_offset_delta
            table[F_BASE_TIMESTAMP, n] = _be_i64(mem, pos + BASE_TIMESTAMP_OFFSET)
            table[F_MAX_TIMESTAMP, n] = _be_i64(mem, pos + MAX_TIMESTAMP_OFFSET)
            table[F_PRODUCER_ID, n] = _be_i64(mem, pos + PRODUCER_ID_OFFSET)
            table[F_PRODUCER_EPOCH, n] = _be_i16(mem, pos + PRODUCER_EPOCH_OFFSET)
            table[F_BASE_SEQUENCE, n] = _be_i32(mem, pos + BASE_SEQUENCE_OFFSET)
            table[F_RECORD_COUNT, n] = count
            n += 1
            records += max(count, 0)
            nbytes += size
        pos += size


# --- CRC ------------------------------------------------------------------------------------------------------


@njit(cache=CACHE, nogil=True)
def _batch_crc(mem: Any, pos: Any, size: Any) -> Any:
    """CRC-32C of bytes ``[pos + 21, pos + size)`` at address ``mem``, by the crc32c library (range checked)."""
    p = mem + np.uint64(pos + ATTRIBUTES_OFFSET)
    n = np.uint64(size - ATTRIBUTES_OFFSET)
    return np.int64(_crc32c_native(np.uint32(0xFFFFFFFF), p, n) ^ np.uint32(0xFFFFFFFF))


@njit(cache=CACHE, nogil=True)
def _verify_crcs(buf: Any, table: Any, n: Any, computed: Any) -> Any:
    """CRC-32C of ``[pos + 21, pos + size)`` for batches ``0..n-1`` into ``computed``; first mismatch or -1."""
    mem = buf.ctypes.data
    bad = -1
    for i in range(n):
        c = _batch_crc(mem, table[F_POS, i], table[F_SIZE, i])
        computed[i] = c
        if bad < 0 and c != table[F_CRC, i]:
            bad = i
    return bad


# --- record statistics of one batch, for the leader's validation ---------------------------------------------

# bytes an optimistic record prefix may read from its first byte: length, timestampDelta, offsetDelta and
# keyLength varints of up to 3 bytes each, and the attributes byte between them (never read)
_FAST_PREFIX_READ: Final = 13
_FAST_VARINT_READ: Final = 3


@njit(cache=CACHE, nogil=True, inline="always")
def _varint3(mem: Any, p: Any) -> Any:
    """Zig-zag varint of 1 to 3 bytes at ``p``, no bounds check (the caller keeps ``p + 3 <= limit``).

    Returns ``(value, next_p)``; ``next_p == p`` when the varint is longer than 3 bytes (the caller then
    parses the record with the strict reader). Values of at most 3 bytes decode the same as a varint or a
    varlong, so this serves both.
    """
    b = np.int64(_at(mem, p))
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    raw = b & 0x7F
    b = np.int64(_at(mem, p + 1))
    if b < 0x80:
        raw |= b << 7
        return (raw >> 1) ^ -(raw & 1), p + 2
    raw |= (b & 0x7F) << 7
    b = np.int64(_at(mem, p + 2))
    if b < 0x80:
        raw |= b << 14
        return (raw >> 1) ^ -(raw & 1), p + 3
    return 0, p


@njit(cache=CACHE, nogil=True, inline="always")
def _fast_record_prefix(mem: Any, p: Any, limit: Any) -> Any:
    """Optimistic :func:`_parse_record_prefix` for the common record: varints of at most 3 bytes (the header
    count: 1 byte), every field inside the record. Returns ``(ok, body_end, ts_delta, offset_delta, key_len,
    header_count, next_p)``; when ``ok`` these are exactly what :func:`_parse_record_prefix` returns for the
    same bytes. Anything else (too few bytes left, a longer varint, a field past the record, a bad length or
    header count) gives ``ok = False`` and the caller parses the record with the strict parser, which alone
    decides errors and their positions.

    Memory safety: varints are read unchecked only while ``p + 13 <= limit`` (length, timestamp delta, offset
    delta, key length) and ``q + 3 <= limit`` (value length); the header count byte is read below
    ``body_end <= limit``. Positions only grow, so the single check that the header count byte lies inside
    the record also proves every earlier field did (and rejects a negative record length).
    """
    if p + _FAST_PREFIX_READ > limit:
        return False, 0, 0, 0, 0, 0, p
    body_len, q = _varint3(mem, p)
    if q == p or body_len > limit - q:
        return False, 0, 0, 0, 0, 0, p
    body_end = q + body_len
    ts_delta, q2 = _varint3(mem, q + 1)  # after the attributes byte: ignored, as in Kafka
    offset_delta, q3 = _varint3(mem, q2)
    key_len, q4 = _varint3(mem, q3)
    if q4 == q3:  # a varint longer than 3 bytes (one that fails leaves the next at its bytes, failing too)
        return False, 0, 0, 0, 0, 0, p
    key_len = max(key_len, -1)  # Kafka reads any negative length as null
    q = q4 + max(key_len, 0)
    if q + _FAST_VARINT_READ > limit:
        return False, 0, 0, 0, 0, 0, p
    value_len, q2 = _varint3(mem, q)
    if q2 == q:
        return False, 0, 0, 0, 0, 0, p
    q = q2 + max(value_len, 0)
    if q >= body_end:  # a field runs past the record, or no byte is left for the header count
        return False, 0, 0, 0, 0, 0, p
    h = np.int64(_at(mem, q))
    q += 1
    if h == 0 and q == body_end:  # the common record: no headers
        return True, body_end, ts_delta, offset_delta, key_len, 0, q
    header_count = (h >> 1) ^ -(h & 1)
    if h >= 0x80 or header_count < 0 or header_count > (body_end - q) >> 1:
        return False, 0, 0, 0, 0, 0, p
    return True, body_end, ts_delta, offset_delta, key_len, header_count, q


@njit(cache=CACHE, nogil=True)
def _record_stats(src: Any, start: Any, end: Any, count: Any, base_timestamp: Any) -> Any:
    """Parse ``count`` records of ``src[start:end]`` under the strict parsers' rules, storing nothing.

    Returns ``(err, err_pos, min_ts, max_ts, max_ts_all, null_keys, sequential)``: the smallest and largest
    record timestamp other than -1 (``INT64_MAX`` / ``INT64_MIN`` when there is none), the largest of all
    timestamps (``INT64_MIN`` for no records), the number of null keys, and whether every offset delta
    equals the record's index.

    A hot loop takes the records that :func:`_fast_record_prefix` accepts and that are valid (headers by the
    strict :func:`_parse_header`, fields filling the record). Any other record is parsed again below with
    the checks and stats updates in the order of the plain strict walk, its prefix by the strict
    :func:`_parse_record_prefix` unless the optimistic parser accepted it, so every result, error code and
    position included, is the strict walk's (``tests/records/test_record_stats.py`` compares the two).
    """
    mem = src.ctypes.data
    p = start
    lo = _INT64_MAX
    hi = _INT64_MIN
    top = _INT64_MIN
    null_keys = 0
    sequential = True
    r = 0
    while True:
        # hot loop: records whose prefix the optimistic parser accepts and that are valid
        while r < count and p < end:
            ok, body_end, ts_delta, offset_delta, key_len, hc, q = _fast_record_prefix(mem, p, end)
            if not ok:
                break
            for _ in range(hc):
                err, _e, _a, _b, _c, _d, q = _parse_header(mem, q, body_end)
                if err != OK:
                    q = -1
                    break
            if q != body_end:  # the strict pass below reports the error
                break
            ts = base_timestamp + ts_delta
            top = max(top, ts)
            if ts != -1:
                lo = min(lo, ts)
                hi = max(hi, ts)
            null_keys += key_len < 0
            sequential &= offset_delta == r
            p = body_end
            r += 1
        if r >= count:
            break
        # one record the hot loop declined: strict parse, the strict parser's errors
        if p >= end:
            return ERR_COUNT_TOO_MANY, p, lo, hi, top, null_keys, sequential
        ok, body_end, ts_delta, offset_delta, key_len, hc, q = _fast_record_prefix(mem, p, end)
        if not ok:
            (err, err_pos, body_end, ts_delta, offset_delta, _kp, key_len, _vp, _vl, hc, q) = (
                _parse_record_prefix(mem, p, end)
            )
            if err != OK:
                return err, err_pos, lo, hi, top, null_keys, sequential
        ts = base_timestamp + ts_delta
        top = max(top, ts)
        if ts != -1:
            lo = min(lo, ts)
            hi = max(hi, ts)
        null_keys += key_len < 0
        sequential &= offset_delta == r
        for _ in range(hc):
            err, err_pos, _a, _b, _c, _d, q = _parse_header(mem, q, body_end)
            if err != OK:
                return err, err_pos, lo, hi, top, null_keys, sequential
        if q != body_end:
            return ERR_RECORD_SIZE_MISMATCH, p, lo, hi, top, null_keys, sequential
        p = body_end
        r += 1
    if p != end:
        return ERR_COUNT_TOO_FEW, p, lo, hi, top, null_keys, sequential
    return OK, 0, lo, hi, top, null_keys, sequential


# --- typed Python wrappers ----------------------------------------------------------------------------------


def as_uint8(data: Any) -> U8Array:
    """Zero-copy, read-only 1-D ``np.uint8`` view of a bytes-like object (bytes, bytearray, memoryview, mmap,
    ndarray).

    The view is always marked read-only so every kernel is compiled for one array type (numba specialises
    on writability). A non-contiguous input raises ``TypeError`` (no silent copy of a possibly huge buffer).
    """
    if isinstance(data, np.ndarray):
        if not data.flags.c_contiguous:
            raise TypeError("ndarray input must be C-contiguous")
        arr = data.reshape(-1).view(np.uint8)
    else:
        arr = np.frombuffer(data, dtype=np.uint8)
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


class ScanResult(NamedTuple):
    """Result of :func:`scan_batches`.

    ``table[F_X, :n]`` holds field ``X`` (see :data:`BATCH_FIELDS`) of the ``n`` batches recorded; ``code`` is
    a ``SCAN_*`` stop reason, or an ``ERR_*`` framing error for the batch at ``next_pos``.
    """

    table: I64Array
    n: int
    next_pos: int
    code: int


_INT64_MAX: Final = (1 << 63) - 1
_INT64_MIN: Final = -(1 << 63)


def scan_batches(
    buf: U8Array,
    start: int = 0,
    end: int | None = None,
    *,
    max_batches: int = 4096,
    max_records: int = _INT64_MAX,
    max_bytes: int = _INT64_MAX,
    skip_below: int = _INT64_MIN,
    stop_offset: int = _INT64_MAX,
    table: I64Array | None = None,
) -> ScanResult:
    """Shallow walk over batch frames of ``buf[start:end]`` (no CRC, records untouched).

    Framing is :func:`kafkalog.records.framing.next_frame` with ``known_magic_only`` (inlined): 17 bytes or
    fewer left, or a batch extending past ``end``, is a trailing partial batch (``SCAN_PARTIAL``, not an
    error); ``batchLength < 14`` → ``ERR_FRAME_SIZE``; magic 0/1 → ``ERR_LEGACY_MAGIC``; other magic →
    ``ERR_BAD_MAGIC`` (a file reader that frames a magic above 2 as v2 takes such a batch through
    ``read_batch_at``); v2 size < 61 → ``ERR_V2_SIZE``. ``table`` (int64, shape ``(N_BATCH_FIELDS, cap)``) may be passed for reuse.
    """
    if end is None:
        end = buf.shape[0]
    if not 0 <= start <= end <= buf.shape[0]:
        raise ValueError(f"invalid range [{start}, {end}) for a buffer of {buf.shape[0]} bytes")
    if table is None:
        table = np.empty((N_BATCH_FIELDS, max_batches), np.int64)
    n, next_pos, code = _scan_batches(buf, start, end, table, max_records, max_bytes, skip_below, stop_offset)
    return ScanResult(table, int(n), int(next_pos), int(code))


def verify_crcs(buf: U8Array, table: I64Array, n: int) -> tuple[int, npt.NDArray[np.uint32]]:
    """CRC-32C of batches ``table[:, :n]`` (from ``crc32c``); returns (index of the first mismatch or -1, CRCs).

    Calls the ``crc32c`` library from compiled code when :data:`NATIVE_CRC`, else ``crc32c.crc32c`` per batch.
    """
    computed = np.empty(n, np.uint32)
    if n == 0:
        return -1, computed
    if NATIVE_CRC:
        return int(_verify_crcs(buf, table, n, computed)), computed
    mv = buf.data
    bad = -1
    for i, (pos, size, stored) in enumerate(
        zip(table[F_POS, :n].tolist(), table[F_SIZE, :n].tolist(), table[F_CRC, :n].tolist())
    ):
        c = crc32c.crc32c(mv[pos + ATTRIBUTES_OFFSET : pos + size])
        computed[i] = c
        if bad < 0 and c != stored:
            bad = i
    return bad, computed


class RecordStats(NamedTuple):
    """Result of :func:`record_stats` (see :func:`_record_stats`); ``err`` is ``OK`` (0) or an ``ERR_*`` code."""

    err: int
    err_pos: int
    min_timestamp: int
    max_timestamp: int
    max_timestamp_all: int
    null_keys: int
    sequential: bool


def record_stats(
    buf: U8Array, records_start: int, records_end: int, count: int, base_timestamp: int
) -> RecordStats:
    """Walk the ``count`` v2 records of one uncompressed batch's ``buf[records_start:records_end]`` with the
    same format rules as :func:`~kafkalog.records._kernels_index.index_records`, keeping only what the leader's validation needs
    (no per-record arrays): timestamp bounds, null keys, offset deltas. Never raises for bad records: a
    non-zero ``err`` says the records break the format (``index_records`` raises the detailed error)."""
    if not 0 <= records_start <= records_end <= buf.shape[0]:
        raise ValueError(
            f"invalid range [{records_start}, {records_end}) for a buffer of {buf.shape[0]} bytes"
        )
    if count < 0:
        return RecordStats(ERR_COUNT_NEGATIVE, records_start, _INT64_MAX, _INT64_MIN, _INT64_MIN, 0, True)
    return RecordStats(*_record_stats(buf, records_start, records_end, count, base_timestamp))


def warm_up() -> float:
    """Compile (or load from the on-disk cache) every kernel for the array types kafkalog uses; returns seconds.

    Spark executors can call this once per Python worker so the first task does not pay for it.
    """
    import time

    t0 = time.perf_counter()
    golden = bytes.fromhex(  # kafka-log.md §2.2: base 0, one record key=null value="a"
        "0000000000000000 00000039 00000000 02 965a94b1 0000 00000000 0000018bcfe56800 0000018bcfe56800"
        "ffffffffffffffff ffff ffffffff 00000001 0e 00 00 00 01 02 61 00"
    )
    buf = as_uint8(golden)
    scan = scan_batches(buf)
    verify_crcs(buf, scan.table, scan.n)
    record_stats(buf, BATCH_HEADER_SIZE, buf.shape[0], 1, 0)
    from kafkalog.records import columnar
    from kafkalog.records._kernels_index import index_records

    index_records(buf, BATCH_HEADER_SIZE, buf.shape[0], 1)

    columnar.decode_columnar(golden)
    columnar.decode_columnar(golden, include_headers=False)
    return time.perf_counter() - t0
