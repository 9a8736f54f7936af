"""The fused decode kernel of :mod:`kafkalog.records.columnar`: v2 batches straight into Arrow buffers.

Formats it owns: the decode plan that ``columnar.py`` builds from a batch scan (int64
``(N_PLAN_FIELDS, n_batches)``, one column per batch, rows ``P_*``: where the records section is, in the
stored or the decompressed buffer, and the batch fields the rows need), the stats slots ``S_*`` it reports
sizes and errors in, and the Arrow buffers it fills: int64 offsets and timestamps, int32 timestamp types,
binary key/value columns (int32 offsets starting at 0, LSB-first validity bitmaps) and the headers list of
struct<key string, value binary> (null when a record has none). Records are parsed by the strict parsers
of :mod:`kafkalog.records._kernels`, so rules, error codes and positions are those of ``index_records``;
every output write is checked against its array's capacity (``ERR_CAPACITY``).

Speed notes (measured on the 2-core VM; ``bench/bench_columnar.py``):

* Each batch's CRC is verified right before its records are parsed (one pass over memory instead of two),
  and the input is prefetched :data:`PREFETCH_DISTANCE` bytes ahead, so the next batch's CRC reads from cache.
* Output stores use ``np.uint64`` subscripts (numba adds a negative-index wraparound select to signed
  subscripts).
* What remains is latency-bound: each record field's position depends on the previous varint.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from numba import njit

from kafkalog.jit import CACHE
from kafkalog.records._intrinsics import _prefetch
from kafkalog.records._kernels import (
    ATTR_LOG_APPEND_TIME,
    ERR_CAPACITY,
    ERR_COUNT_NEGATIVE,
    ERR_COUNT_TOO_FEW,
    ERR_COUNT_TOO_MANY,
    ERR_CRC,
    ERR_RECORD_SIZE_MISMATCH,
    OK,
    _batch_crc,
    _copy,
    _parse_header,
    _parse_record_prefix,
)

PREFETCH_DISTANCE: Final = 65536  # bytes ahead of the decode cursor: covers the next batch of up to 64 KiB

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


@njit(cache=CACHE, nogil=True)
def _set_bit(bitmap: Any, i: Any, valid: Any) -> None:
    """Arrow validity bit ``i`` (LSB first); a byte is cleared when its first bit is written."""
    byte = np.uint64(i >> 3)
    bit = np.uint8(1 << (i & 7))
    if (i & 7) == 0:
        bitmap[byte] = bit if valid else np.uint8(0)
    elif valid:
        bitmap[byte] |= bit


@njit(cache=CACHE, nogil=True)
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
