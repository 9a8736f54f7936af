"""The record kernels' public surface: what packages above ``records`` may use of the numba code.

The kernels live in private modules (:mod:`kafkalog.records._kernels`, ``_encode``, ``_intrinsics``), whose
names may change with the code; this module is the contract other packages (``storage``, ``log``, the
cleaner, the read-only view, Spark) and the benchmarks import from:

* the batch-frame scan and CRC check: :func:`scan_batches` (framing of
  :func:`kafkalog.records.framing.next_frame`, ``known_magic_only``, inlined), :class:`ScanResult` and its
  table rows ``F_*`` (:data:`BATCH_FIELDS`), the stop reasons ``SCAN_*``, :func:`verify_crcs`;
* the error codes ``ERR_*`` with :data:`ERROR_MESSAGES` and :data:`CORRUPT_CODES`;
* :func:`as_uint8` (the zero-copy byte view every kernel takes), :func:`record_stats`, :func:`warm_up`;
* compiled building blocks for kernels compiled in other packages (call them from ``@njit`` code only,
  under the bounds rules of :mod:`kafkalog.records._kernels`): :func:`load_u8`, :func:`copy_bytes`,
  :func:`prefetch`, :func:`read_varint`, :func:`read_varlong`, :func:`parse_header`,
  :func:`record_stats_kernel` (the compiled walk behind :func:`record_stats`, for a caller that has checked
  its range), :func:`record_body_sizes_kernel` / :func:`write_records_kernel` (the builder's two record-encoding passes).

Numba validates a cached function against its own source file only: a kernel compiled elsewhere from these
building blocks keeps stale machine code after an edit of ``_kernels.py`` until its cache is deleted
(``make numba-cache``).
"""

from __future__ import annotations

from typing import Any, Final

from kafkalog.records._encode import _body_sizes, _write
from kafkalog.records._intrinsics import _prefetch
from kafkalog.records._kernels import (
    ATTR_CODEC_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    BATCH_FIELDS,
    BATCH_HEADER_SIZE,
    CORRUPT_CODES,
    ERR_BAD_MAGIC,
    ERR_CAPACITY,
    ERR_COUNT_NEGATIVE,
    ERR_COUNT_TOO_FEW,
    ERR_COUNT_TOO_MANY,
    ERR_CRC,
    ERR_FRAME_SIZE,
    ERR_HEADER_COUNT,
    ERR_HEADER_KEY_LENGTH,
    ERR_HEADER_VALUE_LENGTH,
    ERR_KEY_LENGTH,
    ERR_LEGACY_MAGIC,
    ERR_RECORD_ATTRIBUTES_EOF,
    ERR_RECORD_SIZE,
    ERR_RECORD_SIZE_MISMATCH,
    ERR_V2_SIZE,
    ERR_VALUE_LENGTH,
    ERR_VARINT_EOF,
    ERR_VARINT_TOO_LONG,
    ERROR_MESSAGES,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_BASE_SEQUENCE,
    F_BASE_TIMESTAMP,
    F_CRC,
    F_LAST_OFFSET_DELTA,
    F_LEADER_EPOCH,
    F_MAX_TIMESTAMP,
    F_POS,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_RECORD_COUNT,
    F_SIZE,
    MIN_RECORD_SIZE,
    N_BATCH_FIELDS,
    NATIVE_CRC,
    OK,
    SCAN_END,
    SCAN_MORE,
    SCAN_PARTIAL,
    SCAN_STOP_OFFSET,
    RecordStats,
    ScanResult,
    _at,
    _copy,
    _parse_header,
    _read_varint,
    _read_varlong,
    _record_stats,
    as_uint8,
    record_stats,
    scan_batches,
    verify_crcs,
    warm_up,
)

__all__ = [
    "ATTR_CODEC_MASK",
    "ATTR_CONTROL",
    "ATTR_LOG_APPEND_TIME",
    "ATTR_TRANSACTIONAL",
    "BATCH_FIELDS",
    "BATCH_HEADER_SIZE",
    "CORRUPT_CODES",
    "ERROR_MESSAGES",
    "ERR_BAD_MAGIC",
    "ERR_CAPACITY",
    "ERR_COUNT_NEGATIVE",
    "ERR_COUNT_TOO_FEW",
    "ERR_COUNT_TOO_MANY",
    "ERR_CRC",
    "ERR_FRAME_SIZE",
    "ERR_HEADER_COUNT",
    "ERR_HEADER_KEY_LENGTH",
    "ERR_HEADER_VALUE_LENGTH",
    "ERR_KEY_LENGTH",
    "ERR_LEGACY_MAGIC",
    "ERR_RECORD_ATTRIBUTES_EOF",
    "ERR_RECORD_SIZE",
    "ERR_RECORD_SIZE_MISMATCH",
    "ERR_V2_SIZE",
    "ERR_VALUE_LENGTH",
    "ERR_VARINT_EOF",
    "ERR_VARINT_TOO_LONG",
    "F_ATTRIBUTES",
    "F_BASE_OFFSET",
    "F_BASE_SEQUENCE",
    "F_BASE_TIMESTAMP",
    "F_CRC",
    "F_LAST_OFFSET_DELTA",
    "F_LEADER_EPOCH",
    "F_MAX_TIMESTAMP",
    "F_POS",
    "F_PRODUCER_EPOCH",
    "F_PRODUCER_ID",
    "F_RECORD_COUNT",
    "F_SIZE",
    "MIN_RECORD_SIZE",
    "NATIVE_CRC",
    "N_BATCH_FIELDS",
    "OK",
    "SCAN_END",
    "SCAN_MORE",
    "SCAN_PARTIAL",
    "SCAN_STOP_OFFSET",
    "RecordStats",
    "ScanResult",
    "as_uint8",
    "copy_bytes",
    "load_u8",
    "parse_header",
    "prefetch",
    "read_varint",
    "read_varlong",
    "record_body_sizes_kernel",
    "record_stats",
    "record_stats_kernel",
    "scan_batches",
    "verify_crcs",
    "warm_up",
    "write_records_kernel",
]

#: ``load_u8(mem, p)``: byte ``p`` at address ``mem`` (compiled code; the caller keeps ``p`` in bounds).
load_u8: Final[Any] = _at
#: ``copy_bytes(dst, d, src, s, n)``: ``llvm.memcpy`` of ``n`` bytes between checked ranges of two addresses.
copy_bytes: Final[Any] = _copy
#: ``prefetch(address)``: a cache prefetch hint.
prefetch: Final[Any] = _prefetch
#: ``read_varint(mem, p, limit) -> (value, next_p, err)``: a zig-zag varint read strictly below ``limit``.
read_varint: Final[Any] = _read_varint
#: ``read_varlong(mem, p, limit) -> (value, next_p, err)``: a zig-zag varlong read strictly below ``limit``.
read_varlong: Final[Any] = _read_varlong
#: ``parse_header(mem, p, body_end)``: one record header, ``(err, err_pos, key_pos, key_len, value_pos,
#: value_len, next_p)``.
parse_header: Final[Any] = _parse_header
#: The compiled walk of :func:`record_stats` (arguments as there, range already checked by the caller).
record_stats_kernel: Final[Any] = _record_stats
#: The builder's first pass: the encoded size of each record body.
record_body_sizes_kernel: Final[Any] = _body_sizes
#: The builder's second pass: write the record bodies.
write_records_kernel: Final[Any] = _write
