"""Per-record index of one v2 batch: :func:`index_records`, the record parser behind ``RecordBatch.__iter__``.

For the ``count`` records of one batch's uncompressed records section it returns, per record, the absolute
offset and timestamp, key/value positions and lengths (-1 = null), header ranges and the record's own
position and size, as a :class:`RecordIndex` of int64 arrays; or it raises
:class:`~kafkalog.errors.InvalidRecordError` with the error position of the strict parser. The byte format,
its rules and the error codes are :mod:`kafkalog.records._kernels`'s, whose parsers the kernel compiles in.

Layout: :func:`_index_records` fills rows ``R_*`` of an int64 ``(N_RECORD_FIELDS, count)`` table and rows
``H_*`` of a flat int64 ``(N_HEADER_FIELDS, cap)`` header table; record ``i`` owns headers
``header_start[i] : header_start[i] + header_count[i]``. Header rows are sized for two headers per record;
with more, the kernel counts without storing them (:data:`~kafkalog.records._kernels.ERR_CAPACITY`) and the
wrapper parses again at the exact size.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

import numpy as np
from numba import njit

from kafkalog.jit import CACHE
from kafkalog.records._kernels import (
    ERR_CAPACITY,
    ERR_COUNT_NEGATIVE,
    ERR_COUNT_TOO_FEW,
    ERR_COUNT_TOO_MANY,
    ERR_RECORD_SIZE_MISMATCH,
    ERROR_MESSAGES,
    MIN_RECORD_SIZE,
    OK,
    I64Array,
    U8Array,
    _parse_header,
    _parse_record_prefix,
)

__all__ = ["INDEX_BYTES_PER_RECORD", "RecordIndex", "index_records"]

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
#: Bytes of :class:`RecordIndex` per record (its per-record int64 arrays).
INDEX_BYTES_PER_RECORD: Final = N_RECORD_FIELDS * 8


@njit(cache=CACHE, nogil=True)
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


# --- typed Python wrapper -----------------------------------------------------------------------------------


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
    max_index_bytes: int | None = None,
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
    ``count`` that disagrees with the records present. ``max_index_bytes`` bounds the index's arrays (the
    records' and, separately, the headers': ``INDEX_BYTES_PER_RECORD`` per record, 32 bytes per header): a
    7-byte record costs 88 bytes of index, so without a bound 256 MiB of tiny records would index into ~3 GB;
    past it, :class:`~kafkalog.errors.InvalidRecordError`.
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
    if max_index_bytes is not None and count * INDEX_BYTES_PER_RECORD > max_index_bytes:
        raise InvalidRecordError(
            f"a batch of {count} records needs {count * INDEX_BYTES_PER_RECORD} bytes of record index, more "
            f"than the bound of {max_index_bytes}",
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
        if max_index_bytes is not None and nh * N_HEADER_FIELDS * 8 > max_index_bytes:
            raise InvalidRecordError(
                f"a batch of {nh} headers needs {nh * N_HEADER_FIELDS * 8} bytes of header index, more than "
                f"the bound of {max_index_bytes}",
                position=records_start,
            )
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
