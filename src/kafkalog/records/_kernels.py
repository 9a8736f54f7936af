"""Numba kernels that parse Kafka RecordBatch v2 bytes: the single place that decodes v2 record bodies.

Everything here works on a 1-D ``np.uint8`` array (a zero-copy view of ``bytes``, ``bytearray``, ``mmap``,
``memoryview``) and never raises from compiled code: each kernel returns an error code (``ERR_*``) and the
byte position where the problem was found, and the typed Python wrappers (:func:`scan_batches`,
:func:`index_records`) or :mod:`kafkalog.records.columnar` turn that into
:class:`~kafkalog.errors.CorruptRecordError` / :class:`~kafkalog.errors.InvalidRecordError`.

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

* every read is bounds-checked against an explicit limit that the wrapper has checked against the array
  length; corrupt input yields an error code, never an out-of-bounds read or write;
* a record is parsed strictly inside its declared body: a field running past ``length`` is an error, and the
  fields must consume exactly ``length`` bytes;
* a batch's records must consume exactly ``[records_start, records_end)`` after ``recordCount`` records
  (fewer bytes → :data:`ERR_COUNT_TOO_MANY`, bytes left over → :data:`ERR_COUNT_TOO_FEW`);
* key/value/header-value lengths ``< 0`` are null (as Kafka reads them, normalised to ``-1``); header keys ``>= 0``; header count ``>= 0``
  and at most half the remaining body bytes; the record attributes byte is ignored as Kafka does;
* outputs are written only below the capacities of the arrays passed in (checked, :data:`ERR_CAPACITY`).

Speed notes (measured on the 2-core VM; ``bench/bench_columnar.py``):

* Parsers read input bytes through a raw address (``arr.ctypes.data``, the ``_load_u8`` intrinsic) rather
  than an array: passing arrays into numba helpers made numba emit atomic reference-count calls in the
  record loop (17% of the time, seen with ``perf``). The bounds discipline is the same: every read is at
  ``0 <= p < limit`` with ``limit <= len(buffer)`` checked by the wrapper.
* Field copies are ``llvm.memcpy`` on bounds-checked ranges; output stores use ``np.uint64`` subscripts
  (numba adds a negative-index wraparound select to signed subscripts).
* The decode kernel verifies each batch's CRC right before parsing it (one pass over memory instead of two)
  and prefetches the input :data:`PREFETCH_DISTANCE` bytes ahead, so the next batch's CRC reads from cache.
* What remains is latency-bound: each record field's position depends on the previous varint.

Compiled code is cached on disk (``cache=True``) next to this module's ``__pycache__``. On a read-only install
(e.g. a Spark executor's site-packages) set ``NUMBA_CACHE_DIR`` to a writable directory before import, or each
process pays the compile (see :func:`warm_up`).

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
from llvmlite import ir  # type: ignore[import-untyped]
from numba import njit, types
from numba.extending import intrinsic

__all__ = [
    "BATCH_FIELDS",
    "BATCH_HEADER_SIZE",
    "CORRUPT_CODES",
    "ERROR_MESSAGES",
    "NATIVE_CRC",
    "RecordIndex",
    "RecordStats",
    "ScanResult",
    "as_uint8",
    "index_records",
    "record_stats",
    "scan_batches",
    "verify_crcs",
    "warm_up",
]

U8Array = npt.NDArray[np.uint8]
I64Array = npt.NDArray[np.int64]

# --- batch header layout ------------------------------------------------------------------------------------

BATCH_HEADER_SIZE: Final = 61  # Kafka RECORD_BATCH_OVERHEAD
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # first byte covered by the CRC
MIN_FRAME_SIZE: Final = 14  # Kafka LegacyRecord.RECORD_OVERHEAD_V0: smallest batchLength of any format
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

    @njit(cache=True, nogil=True)
    def _crc32c_native(crc: Any, p: Any, n: Any) -> Any:
        return np.uint32(0)

# --- LLVM intrinsics -----------------------------------------------------------------------------------------

PREFETCH_DISTANCE: Final = 65536  # bytes ahead of the decode cursor: covers the next batch of up to 64 KiB

_I8P = ir.IntType(8).as_pointer()


def _address(builder: Any, value: Any) -> Any:
    return builder.inttoptr(value, _I8P)


def _load_u8_typer(typingctx: Any, mem: Any, i: Any) -> Any:
    """``*(uint8 *)(mem + i)``: no bounds check, callers check ``0 <= i < limit <= len``."""
    sig = types.uint8(types.uintp, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load(builder.gep(_address(builder, args[0]), [args[1]]))

    return sig, codegen


_load_u8: Any = intrinsic(_load_u8_typer)


def _memcpy_typer(typingctx: Any, dst: Any, src: Any, n: Any) -> Any:
    """``llvm.memcpy((void *)dst, (void *)src, n)`` on addresses: callers check both ranges first."""
    sig = types.void(types.uintp, types.uintp, types.intp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, _I8P, i64, ir.IntType(1)])
        fn = builder.module.declare_intrinsic("llvm.memcpy", [_I8P, _I8P, i64], fnty)
        dst_p, src_p = _address(builder, args[0]), _address(builder, args[1])
        builder.call(fn, [dst_p, src_p, args[2], ir.Constant(ir.IntType(1), 0)])
        return context.get_dummy_value()

    return sig, codegen


_memcpy: Any = intrinsic(_memcpy_typer)


def _prefetch_typer(typingctx: Any, mem: Any) -> Any:
    """``llvm.prefetch((void *)mem)`` for reading: a hint that never faults (callers stay in bounds anyway)."""
    sig = types.void(types.uintp)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [_I8P, i32, i32, i32])
        fn = builder.module.declare_intrinsic("llvm.prefetch", [_I8P], fnty)
        one, two, zero = ir.Constant(i32, 1), ir.Constant(i32, 2), ir.Constant(i32, 0)
        builder.call(fn, [_address(builder, args[0]), zero, two, one])
        return context.get_dummy_value()

    return sig, codegen


_prefetch: Any = intrinsic(_prefetch_typer)


# --- small helpers (inlined by LLVM) ----------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _at(mem: Any, p: Any) -> Any:
    """Byte ``p`` of the buffer at address ``mem`` (callers keep ``0 <= p`` below a checked limit)."""
    return _load_u8(mem, p)


@njit(cache=True, nogil=True)
def _be_u32(mem: Any, p: Any) -> Any:
    return (
        (np.int64(_at(mem, p)) << 24)
        | (np.int64(_at(mem, p + 1)) << 16)
        | (np.int64(_at(mem, p + 2)) << 8)
        | np.int64(_at(mem, p + 3))
    )


@njit(cache=True, nogil=True)
def _be_i32(mem: Any, p: Any) -> Any:
    v = _be_u32(mem, p)
    return v - ((v >> 31) << 32)


@njit(cache=True, nogil=True)
def _be_i16(mem: Any, p: Any) -> Any:
    v = (np.int64(_at(mem, p)) << 8) | np.int64(_at(mem, p + 1))
    return v - ((v >> 15) << 16)


@njit(cache=True, nogil=True)
def _be_i64(mem: Any, p: Any) -> Any:
    return (_be_u32(mem, p) << 32) | _be_u32(mem, p + 4)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True)
def _copy(dst: Any, d: Any, src: Any, s: Any, n: Any) -> None:
    """Copy ``n`` bytes from address ``src + s`` to ``dst + d`` (ranges checked by the caller, ``n >= 0``)."""
    _memcpy(dst + np.uint64(d), src + np.uint64(s), n)


# --- (a) batch-boundary scan --------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
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
        if end - pos <= MAGIC_OFFSET:  # Kafka needs HEADER_SIZE_UP_TO_MAGIC (17) bytes to frame a batch
            return n, pos, SCAN_PARTIAL
        batch_length = _be_i32(mem, pos + 8)
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
        last_offset_delta = _be_i32(mem, pos + 23)
        if base_offset + last_offset_delta >= skip_below:
            count = _be_i32(mem, pos + 57)
            table[F_POS, n] = pos
            table[F_SIZE, n] = size
            table[F_BASE_OFFSET, n] = base_offset
            table[F_LEADER_EPOCH, n] = _be_i32(mem, pos + 12)
            table[F_CRC, n] = _be_u32(mem, pos + CRC_OFFSET)
            table[F_ATTRIBUTES, n] = _be_i16(mem, pos + ATTRIBUTES_OFFSET)
            table[F_LAST_OFFSET_DELTA, n] = last_offset_delta
            table[F_BASE_TIMESTAMP, n] = _be_i64(mem, pos + 27)
            table[F_MAX_TIMESTAMP, n] = _be_i64(mem, pos + 35)
            table[F_PRODUCER_ID, n] = _be_i64(mem, pos + 43)
            table[F_PRODUCER_EPOCH, n] = _be_i16(mem, pos + 51)
            table[F_BASE_SEQUENCE, n] = _be_i32(mem, pos + 53)
            table[F_RECORD_COUNT, n] = count
            n += 1
            records += max(count, 0)
            nbytes += size
        pos += size


# --- CRC ------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _batch_crc(mem: Any, pos: Any, size: Any) -> Any:
    """CRC-32C of bytes ``[pos + 21, pos + size)`` at address ``mem``, by the crc32c library (range checked)."""
    p = mem + np.uint64(pos + ATTRIBUTES_OFFSET)
    n = np.uint64(size - ATTRIBUTES_OFFSET)
    return np.int64(_crc32c_native(np.uint32(0xFFFFFFFF), p, n) ^ np.uint32(0xFFFFFFFF))


@njit(cache=True, nogil=True)
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


# --- (b) record index of one batch ------------------------------------------------------------------------

# rows of the per-record index produced by _index_records
R_OFFSET: Final = 0
R_TIMESTAMP: Final = 1
R_KEY_POS: Final = 2
R_KEY_LEN: Final = 3
R_VALUE_POS: Final = 4
R_VALUE_LEN: Final = 5
R_HEADERS_POS: Final = 6
R_HEADER_COUNT: Final = 7
R_HEADER_START: Final = 8
R_POS: Final = 9
R_SIZE: Final = 10
N_RECORD_FIELDS: Final = 11
# rows of the flat header index
H_KEY_POS: Final = 0
H_KEY_LEN: Final = 1
H_VALUE_POS: Final = 2
H_VALUE_LEN: Final = 3
N_HEADER_FIELDS: Final = 4


@njit(cache=True, nogil=True)
def _index_records(
    src: Any,
    start: Any,
    end: Any,
    count: Any,
    base_offset: Any,
    base_timestamp: Any,
    log_append_time: Any,
    use_log_append_time: Any,
    rec: Any,
    hdr: Any,
) -> Any:
    """Index ``count`` records of ``src[start:end]`` into ``rec`` / ``hdr``; returns ``(n_headers, err, err_pos)``.

    ``rec`` is int64 ``(N_RECORD_FIELDS, >= count)``; ``hdr`` is int64 ``(N_HEADER_FIELDS, cap)``. When more
    than ``cap`` headers are present, parsing and validation go on without storing headers and the result is
    ``(total headers, ERR_CAPACITY, 0)`` so the caller can retry with a large enough ``hdr``.
    """
    if count < 0:
        return 0, ERR_COUNT_NEGATIVE, start
    mem = src.ctypes.data
    hcap = hdr.shape[1]
    nh = 0
    p = start
    for r in range(count):
        if p >= end:
            return nh, ERR_COUNT_TOO_MANY, p
        (err, err_pos, body_end, ts_delta, offset_delta, key_pos, key_len, value_pos, value_len, hc, q) = (
            _parse_record_prefix(mem, p, end)
        )
        if err != OK:
            return nh, err, err_pos
        rec[R_OFFSET, r] = base_offset + offset_delta
        rec[R_TIMESTAMP, r] = log_append_time if use_log_append_time else base_timestamp + ts_delta
        rec[R_KEY_POS, r] = key_pos
        rec[R_KEY_LEN, r] = key_len
        rec[R_VALUE_POS, r] = value_pos
        rec[R_VALUE_LEN, r] = value_len
        rec[R_HEADERS_POS, r] = q
        rec[R_HEADER_COUNT, r] = hc
        rec[R_HEADER_START, r] = nh
        rec[R_POS, r] = p
        rec[R_SIZE, r] = body_end - p
        for _ in range(hc):
            err, err_pos, hk_pos, hk_len, hv_pos, hv_len, q = _parse_header(mem, q, body_end)
            if err != OK:
                return nh, err, err_pos
            if nh < hcap:
                hdr[H_KEY_POS, nh] = hk_pos
                hdr[H_KEY_LEN, nh] = hk_len
                hdr[H_VALUE_POS, nh] = hv_pos
                hdr[H_VALUE_LEN, nh] = hv_len
            nh += 1
        if q != body_end:
            return nh, ERR_RECORD_SIZE_MISMATCH, p
        p = body_end
    if p != end:
        return nh, ERR_COUNT_TOO_FEW, p
    if nh > hcap:
        return nh, ERR_CAPACITY, 0
    return nh, OK, 0


# --- (c) fused index + copy into Arrow buffers ------------------------------------------------------------

# rows of the decode plan (one column per batch to decode)
P_SRC: Final = 0  # 0: records are in ``buf``; 1: in ``dbuf`` (decompressed)
P_START: Final = 1  # records section [start, end) in the source buffer
P_END: Final = 2
P_COUNT: Final = 3
P_BASE_OFFSET: Final = 4
P_BASE_TIMESTAMP: Final = 5
P_MAX_TIMESTAMP: Final = 6
P_ATTRIBUTES: Final = 7
P_BATCH_POS: Final = 8  # the batch frame in ``buf``
P_BATCH_SIZE: Final = 9
P_STORED_CRC: Final = 10
P_CHECK_CRC: Final = 11  # 1: verify the CRC of buf[pos + 21, pos + size) before decoding the batch
N_PLAN_FIELDS: Final = 12

# slots of the stats array filled by _decode_columns
S_ROWS: Final = 0
S_HEADERS: Final = 1
S_KEY_BYTES: Final = 2
S_VALUE_BYTES: Final = 3
S_HKEY_BYTES: Final = 4
S_HVALUE_BYTES: Final = 5
S_KEY_NULLS: Final = 6
S_VALUE_NULLS: Final = 7
S_HLIST_NULLS: Final = 8
S_HVALUE_NULLS: Final = 9
S_ERR_POS: Final = 10
S_ERR_BATCH: Final = 11
S_CRC_COMPUTED: Final = 12
N_STATS: Final = 13


@njit(cache=True, nogil=True)
def _set_bit(bitmap: Any, i: Any, valid: Any) -> None:
    """Arrow validity bit ``i`` (LSB first); a byte is cleared when its first bit is written."""
    byte = np.uint64(i >> 3)
    bit = np.uint8(1 << (i & 7))
    if (i & 7) == 0:
        bitmap[byte] = bit if valid else np.uint8(0)
    elif valid:
        bitmap[byte] |= bit


@njit(cache=True, nogil=True)
def _decode_columns(
    buf: Any,
    dbuf: Any,
    plan: Any,
    n_batches: Any,
    start_offset: Any,
    end_offset: Any,
    with_headers: Any,
    out_offset: Any,
    out_timestamp: Any,
    out_ts_type: Any,
    key_valid: Any,
    key_offsets: Any,
    key_data: Any,
    value_valid: Any,
    value_offsets: Any,
    value_data: Any,
    hl_valid: Any,
    hl_offsets: Any,
    hk_offsets: Any,
    hk_data: Any,
    hv_valid: Any,
    hv_offsets: Any,
    hv_data: Any,
    stats: Any,
) -> Any:
    """Decode the records of the planned batches straight into Arrow buffers; returns an ``ERR_*`` code.

    Batch by batch (while its bytes are in cache): verify the CRC when ``plan[P_CHECK_CRC]``, then parse
    its records. Rows are the records with ``start_offset <= offset < end_offset``, in batch order. Binary
    columns use int32 offsets (``*_offsets[0] = 0``) and LSB-first validity bitmaps; ``headers`` is a list
    (offsets into the flat header arrays, null when a record has no headers) of struct<key string, value
    binary>. Header bytes are always validated; they are copied only when ``with_headers``. Capacities are
    the array lengths; an overflow returns ERR_CAPACITY. On error ``stats[S_ERR_POS]`` is the position (in
    the batch's source buffer), ``stats[S_ERR_BATCH]`` the plan column, and for ERR_CRC
    ``stats[S_CRC_COMPUTED]`` the CRC computed.
    """
    buf_len = buf.shape[0]
    buf_mem = buf.ctypes.data
    dbuf_mem = dbuf.ctypes.data
    key_mem = key_data.ctypes.data
    value_mem = value_data.ctypes.data
    hk_mem = hk_data.ctypes.data
    hv_mem = hv_data.ctypes.data
    row_cap = out_offset.shape[0]
    key_cap = key_data.shape[0]
    value_cap = value_data.shape[0]
    hk_cap = hk_data.shape[0]
    hv_cap = hv_data.shape[0]
    h_cap = hk_offsets.shape[0] - 1
    row = 0
    nh = 0
    kd = 0
    vd = 0
    hkd = 0
    hvd = 0
    key_nulls = 0
    value_nulls = 0
    hl_nulls = 0
    hv_nulls = 0
    key_offsets[0] = 0
    value_offsets[0] = 0
    hl_offsets[0] = 0
    hk_offsets[0] = 0
    hv_offsets[0] = 0
    err = OK
    err_pos = 0
    b = 0
    while b < n_batches and err == OK:
        if plan[P_CHECK_CRC, b] != 0:
            crc = _batch_crc(buf_mem, plan[P_BATCH_POS, b], plan[P_BATCH_SIZE, b])
            if crc != plan[P_STORED_CRC, b]:
                err = ERR_CRC
                err_pos = plan[P_BATCH_POS, b]
                stats[S_CRC_COMPUTED] = crc
                break
        src = dbuf_mem if plan[P_SRC, b] != 0 else buf_mem
        p = plan[P_START, b]
        end = plan[P_END, b]
        count = plan[P_COUNT, b]
        base_offset = plan[P_BASE_OFFSET, b]
        base_ts = plan[P_BASE_TIMESTAMP, b]
        log_append = (plan[P_ATTRIBUTES, b] & ATTR_LOG_APPEND_TIME) != 0
        max_ts = plan[P_MAX_TIMESTAMP, b]
        ts_type = np.int32(1 if log_append else 0)
        if count < 0:
            err = ERR_COUNT_NEGATIVE
            err_pos = p
            break
        prefetch = plan[P_SRC, b] == 0
        for _ in range(count):
            if p >= end:
                err = ERR_COUNT_TOO_MANY
                err_pos = p
                break
            if prefetch and p + PREFETCH_DISTANCE + 64 < buf_len:
                _prefetch(buf_mem + np.uint64(p + PREFETCH_DISTANCE))
                _prefetch(buf_mem + np.uint64(p + PREFETCH_DISTANCE + 64))
            (
                err,
                err_pos,
                body_end,
                ts_delta,
                offset_delta,
                key_pos,
                key_len,
                value_pos,
                value_len,
                hc,
                q,
            ) = _parse_record_prefix(src, p, end)
            if err != OK:
                break
            offset = base_offset + offset_delta
            keep = offset >= start_offset and offset < end_offset
            if keep:
                if row >= row_cap or kd + key_len > key_cap or vd + value_len > value_cap:
                    err = ERR_CAPACITY
                    err_pos = p
                    break
                ru = np.uint64(row)
                out_offset[ru] = offset
                out_timestamp[ru] = max_ts if log_append else base_ts + ts_delta
                out_ts_type[ru] = ts_type
                if key_len >= 0:
                    _copy(key_mem, kd, src, key_pos, key_len)
                    kd += key_len
                else:
                    key_nulls += 1
                _set_bit(key_valid, row, key_len >= 0)
                key_offsets[ru + np.uint64(1)] = np.int32(kd)
                if value_len >= 0:
                    _copy(value_mem, vd, src, value_pos, value_len)
                    vd += value_len
                else:
                    value_nulls += 1
                _set_bit(value_valid, row, value_len >= 0)
                value_offsets[ru + np.uint64(1)] = np.int32(vd)
            copy_headers = keep and with_headers
            for _h in range(hc):
                err, err_pos, hk_pos, hk_len, hv_pos, hv_len, q = _parse_header(src, q, body_end)
                if err != OK:
                    break
                if copy_headers:
                    if nh >= h_cap or hkd + hk_len > hk_cap or hvd + hv_len > hv_cap:
                        err = ERR_CAPACITY
                        err_pos = q
                        break
                    _copy(hk_mem, hkd, src, hk_pos, hk_len)
                    hkd += hk_len
                    hu = np.uint64(nh)
                    hk_offsets[hu + np.uint64(1)] = np.int32(hkd)
                    if hv_len >= 0:
                        _copy(hv_mem, hvd, src, hv_pos, hv_len)
                        hvd += hv_len
                    else:
                        hv_nulls += 1
                    _set_bit(hv_valid, nh, hv_len >= 0)
                    hv_offsets[hu + np.uint64(1)] = np.int32(hvd)
                    nh += 1
            if err != OK:
                break
            if q != body_end:
                err = ERR_RECORD_SIZE_MISMATCH
                err_pos = p
                break
            if keep:
                if with_headers:
                    hl_offsets[np.uint64(row) + np.uint64(1)] = np.int32(nh)
                    if hc == 0:
                        hl_nulls += 1
                    _set_bit(hl_valid, row, hc > 0)
                row += 1
            p = body_end
        if err == OK and p != end:
            err = ERR_COUNT_TOO_FEW
            err_pos = p
        b += 1
    stats[S_ROWS] = row
    stats[S_HEADERS] = nh
    stats[S_KEY_BYTES] = kd
    stats[S_VALUE_BYTES] = vd
    stats[S_HKEY_BYTES] = hkd
    stats[S_HVALUE_BYTES] = hvd
    stats[S_KEY_NULLS] = key_nulls
    stats[S_VALUE_NULLS] = value_nulls
    stats[S_HLIST_NULLS] = hl_nulls
    stats[S_HVALUE_NULLS] = hv_nulls
    stats[S_ERR_POS] = err_pos
    stats[S_ERR_BATCH] = b if err == ERR_CRC else (b - 1 if err != OK else -1)
    return err


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

    Framing rules are Kafka's ``FileLogInputStream``: fewer than 17 bytes left, or a batch extending past
    ``end``, is a trailing partial batch (``SCAN_PARTIAL``, not an error); ``batchLength < 14`` →
    ``ERR_FRAME_SIZE``; magic 0/1 → ``ERR_LEGACY_MAGIC``; other magic → ``ERR_BAD_MAGIC``; v2 size < 61 →
    ``ERR_V2_SIZE``. ``table`` (int64, shape ``(N_BATCH_FIELDS, cap)``) may be passed for reuse.
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


class RecordIndex(NamedTuple):
    """Per-record positions of one batch's records, produced by :func:`index_records`.

    Arrays of length ``count`` (int64): ``offsets`` (base offset + offsetDelta), ``timestamps`` (base
    timestamp + delta, or the log-append time for every record), ``key_pos``/``key_len`` and
    ``value_pos``/``value_len`` (positions in the indexed buffer; length -1 = null), ``header_start`` (index
    of the record's first header in the flat header arrays; record ``i`` owns headers
    ``header_start[i] : header_start[i] + header_count[i]``), ``header_count``, ``record_pos`` (position of
    the record's length varint) and ``record_size`` (bytes including the length varint). Flat header arrays
    (length = total header count): ``header_key_pos``/``header_key_len`` (UTF-8 key, length >= 0) and
    ``header_value_pos``/``header_value_len`` (-1 = null).
    """

    offsets: I64Array
    timestamps: I64Array
    key_pos: I64Array
    key_len: I64Array
    value_pos: I64Array
    value_len: I64Array
    header_start: I64Array
    header_count: I64Array
    record_pos: I64Array
    record_size: I64Array
    header_key_pos: I64Array
    header_key_len: I64Array
    header_value_pos: I64Array
    header_value_len: I64Array


def index_records(
    buf: U8Array,
    records_start: int,
    records_end: int,
    count: int,
    *,
    base_offset: int = 0,
    base_timestamp: int = 0,
    log_append_time: int | None = None,
) -> RecordIndex:
    """Parse the ``count`` v2 records in ``buf[records_start:records_end]`` (one batch, uncompressed bytes).

    This is the one v2 record parser of kafkalog: the object-level ``RecordBatch.__iter__`` and the columnar
    decoder both use it (the columnar path through the fused kernel sharing the same parse functions). For a
    stored batch at ``pos`` the records are ``[pos + 61, pos + size)``; for a compressed batch pass the
    decompressed bytes with ``records_start=0``. ``log_append_time`` (the batch max timestamp of a
    LogAppendTime batch) replaces every record's timestamp. The record attributes byte is ignored.

    Raises :class:`~kafkalog.errors.InvalidRecordError` (with the byte position in ``buf``) when a record
    breaks the format: a varint past the record or too long, negative lengths other than -1, a negative
    header key length or header count, fields that do not fill the record length exactly, or a declared
    ``count`` that disagrees with the records present.
    """
    from kafkalog.errors import InvalidRecordError

    if not 0 <= records_start <= records_end <= buf.shape[0]:
        raise ValueError(
            f"invalid range [{records_start}, {records_end}) for a buffer of {buf.shape[0]} bytes"
        )
    if count < 0:
        raise InvalidRecordError(ERROR_MESSAGES[ERR_COUNT_NEGATIVE], position=records_start)
    if count > (records_end - records_start) // MIN_RECORD_SIZE:
        raise InvalidRecordError(
            f"record count {count} cannot fit in {records_end - records_start} bytes of records",
            position=records_start,
        )
    rec = np.empty((N_RECORD_FIELDS, count), np.int64)
    hdr = np.empty((N_HEADER_FIELDS, 2 * count), np.int64)
    args = (
        buf,
        records_start,
        records_end,
        count,
        base_offset,
        base_timestamp,
        0 if log_append_time is None else log_append_time,
        log_append_time is not None,
    )
    nh, err, err_pos = _index_records(*args, rec, hdr)
    if err == ERR_CAPACITY:  # more than two headers per record on average: size exactly and parse again
        hdr = np.empty((N_HEADER_FIELDS, nh), np.int64)
        nh, err, err_pos = _index_records(*args, rec, hdr)
    if err != OK:
        raise InvalidRecordError(ERROR_MESSAGES[int(err)], position=int(err_pos))
    return RecordIndex(
        offsets=rec[R_OFFSET],
        timestamps=rec[R_TIMESTAMP],
        key_pos=rec[R_KEY_POS],
        key_len=rec[R_KEY_LEN],
        value_pos=rec[R_VALUE_POS],
        value_len=rec[R_VALUE_LEN],
        header_start=rec[R_HEADER_START],
        header_count=rec[R_HEADER_COUNT],
        record_pos=rec[R_POS],
        record_size=rec[R_SIZE],
        header_key_pos=hdr[H_KEY_POS, :nh],
        header_key_len=hdr[H_KEY_LEN, :nh],
        header_value_pos=hdr[H_VALUE_POS, :nh],
        header_value_len=hdr[H_VALUE_LEN, :nh],
    )


# --- (c) record statistics of one batch, for the leader's validation -----------------------------------------


@njit(cache=True, nogil=True)
def _record_stats(src: Any, start: Any, end: Any, count: Any, base_timestamp: Any) -> Any:
    """Parse ``count`` records of ``src[start:end]`` under :func:`_index_records`' rules, storing nothing.

    Returns ``(err, err_pos, min_ts, max_ts, max_ts_all, null_keys, sequential)``: the smallest and largest
    record timestamp other than -1 (``INT64_MAX`` / ``INT64_MIN`` when there is none), the largest of all
    timestamps (``INT64_MIN`` for no records), the number of null keys, and whether every offset delta
    equals the record's index.
    """
    mem = src.ctypes.data
    p = start
    lo = _INT64_MAX
    hi = _INT64_MIN
    top = _INT64_MIN
    null_keys = 0
    sequential = True
    for r in range(count):
        if p >= end:
            return ERR_COUNT_TOO_MANY, p, lo, hi, top, null_keys, sequential
        (err, err_pos, body_end, ts_delta, offset_delta, _kp, key_len, _vp, _vl, hc, q) = (
            _parse_record_prefix(mem, p, end)
        )
        if err != OK:
            return err, err_pos, lo, hi, top, null_keys, sequential
        ts = base_timestamp + ts_delta
        if ts > top:
            top = ts
        if ts != -1:
            if ts < lo:
                lo = ts
            if ts > hi:
                hi = ts
        if key_len < 0:
            null_keys += 1
        if offset_delta != r:
            sequential = False
        for _ in range(hc):
            err, err_pos, _a, _b, _c, _d, q = _parse_header(mem, q, body_end)
            if err != OK:
                return err, err_pos, lo, hi, top, null_keys, sequential
        if q != body_end:
            return ERR_RECORD_SIZE_MISMATCH, p, lo, hi, top, null_keys, sequential
        p = body_end
    if p != end:
        return ERR_COUNT_TOO_FEW, p, lo, hi, top, null_keys, sequential
    return OK, 0, lo, hi, top, null_keys, sequential


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
    same parser and format rules as :func:`index_records`, keeping only what the leader's validation needs
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
    index_records(buf, BATCH_HEADER_SIZE, buf.shape[0], 1)
    record_stats(buf, BATCH_HEADER_SIZE, buf.shape[0], 1, 0)
    from kafkalog.records import columnar

    columnar.decode_columnar(golden)
    columnar.decode_columnar(golden, include_headers=False)
    return time.perf_counter() - t0
