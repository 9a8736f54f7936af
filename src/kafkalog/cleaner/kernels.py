"""Compiled kernels of the log cleaner: parse, filter and re-encode v2 records, and fill the offset map.

They work on ``np.uint8`` views of segment bytes through raw addresses, as :mod:`kafkalog.records.kernels`
does (whose varint readers, header parser and ``memcpy`` they reuse, with the ``_prefetch`` of
:mod:`kafkalog.records.kernels`), never raise, and return an error code and a byte position instead
(``ERR_*`` of that module; ``ERR_CAPACITY`` when an output array is too small, which sizing by the callers
rules out). The rules they apply are documented in
:mod:`kafkalog.cleaner.filter`; the encodings they write are Kafka's:

* record: ``length varint · attributes int8 (0) · timestampDelta varlong · offsetDelta varint ·`` then the
  original bytes from the key length on (key, value, headers), so only the timestamp delta (re-based on the
  new base timestamp) and the length can change;
* batch header: the 61 bytes of ``DefaultRecordBatch`` with a zero CRC, which the caller fills in;
* varints are zig-zag LEB128 (``varint`` 32-bit, ``varlong`` 64-bit), big-endian header fields.

Every record the filter copies is parsed strictly inside its batch first (the length, key, value and header
fields must fill the record exactly); the offset map only reads each record's length, offset delta and key
(inside the record's bounds), since the filter pass validates the same records whole.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from numba import njit

from kafkalog.cleaner.offset_map import BYTES_PER_ENTRY, _get, _murmur, _put
from kafkalog.jit import CACHE
from kafkalog.records.framing import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    CRC_OFFSET,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_COUNT_OFFSET,
)
from kafkalog.records.kernels import (
    ERR_COUNT_NEGATIVE,
    ERR_COUNT_TOO_FEW,
    ERR_COUNT_TOO_MANY,
    ERR_HEADER_COUNT,
    ERR_KEY_LENGTH,
    ERR_RECORD_ATTRIBUTES_EOF,
    ERR_RECORD_SIZE,
    ERR_RECORD_SIZE_MISMATCH,
    ERR_VALUE_LENGTH,
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
    OK,
)
from kafkalog.records.kernels import copy_bytes as _copy
from kafkalog.records.kernels import parse_header as _parse_header
from kafkalog.records.kernels import prefetch as _prefetch
from kafkalog.records.kernels import read_varint as _read_varint
from kafkalog.records.kernels import read_varlong as _read_varlong

__all__ = [
    "F_DISCARD",
    "F_MARKER_EMPTY_TXN",
    "F_RETAIN_ALL",
    "F_RETAIN_DELETES",
    "F_RETAIN_EMPTY",
    "F_SKIP",
    "K_COPY",
    "K_DROP",
    "K_EMPTY",
    "K_REWRITE",
    "MS_ENTRIES",
    "MS_ERR",
    "MS_ERR_POS",
    "MS_FULL",
    "MS_GROW",
    "MS_GROW_AT",
    "MS_LATEST",
    "MS_MAX",
    "MS_NEXT",
    "MS_READ",
    "M_KIND",
    "M_MAX_TS",
    "M_POS",
    "M_SIZE",
    "N_MAP_STATE",
    "N_STATS",
    "SCRATCH_ROWS",
    "S_BYTES_READ",
    "S_ERR",
    "S_ERR_POS",
    "S_INVALID",
    "S_KEPT",
    "S_OUT",
    "S_READ",
    "filter_batches",
    "filter_payload",
    "map_batches",
]

# --- per-batch flags passed to the compiled filter -------------------------------------------------------------
F_DISCARD: Final = 1  # drop every record (aborted data, expired marker)
F_RETAIN_ALL: Final = 2  # keep every record (a marker that must stay)
F_RETAIN_EMPTY: Final = 4  # keep the header even if no record survives
F_RETAIN_DELETES: Final = 8  # tombstones may stay (no delete horizon, or not reached)
F_MARKER_EMPTY_TXN: Final = 16  # a marker whose transaction has no data left: set the delete horizon
F_SKIP: Final = 32  # BatchRetention.DELETE: drop without reading

# output batch kinds
K_DROP: Final = 0
K_COPY: Final = 1
K_REWRITE: Final = 2
K_EMPTY: Final = 3

# meta columns of the compiled filter's per-batch output
M_POS: Final = 0
M_SIZE: Final = 1
M_KIND: Final = 2
M_MAX_TS: Final = 3
# stats slots
S_READ: Final = 0
S_KEPT: Final = 1
S_INVALID: Final = 2
S_OUT: Final = 3
S_ERR: Final = 4
S_ERR_POS: Final = 5
S_BYTES_READ: Final = 6
N_STATS: Final = 7
# map-building state slots
MS_ENTRIES: Final = 0
MS_MAX: Final = 1
MS_LATEST: Final = 2
MS_READ: Final = 3
MS_FULL: Final = 4
MS_ERR: Final = 5
MS_ERR_POS: Final = 6
MS_GROW_AT: Final = 7  # entries above which the caller must grow the table first
MS_GROW: Final = 8  # set when the run stopped to let the table grow
MS_NEXT: Final = 9  # the batch to resume at after growing
N_MAP_STATE: Final = 10

_ATTR_CODEC: Final = 0x07
_ATTR_LAT: Final = 0x08
_ATTR_TXN: Final = 0x10
_ATTR_CONTROL: Final = 0x20
_ATTR_HORIZON: Final = 0x40
_ERR_CAPACITY: Final = 301
# record classes of the filter's first pass
_DROP: Final = 0
_KEEP: Final = 1
_INVALID: Final = 2
_LOOKUP: Final = 3
#: Rows of the filter's per-record scratch array (``scratch_rows(count)``).
SCRATCH_ROWS: Final = 6
_U64_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


# --- compiled record parsing, filtering and encoding -----------------------------------------------------------


@njit(cache=CACHE, nogil=True, inline="always")
def _parse_record(mem: Any, p: Any, limit: Any) -> Any:
    """One record at ``p``; returns ``(err, err_pos, body_end, ts_delta, offset_delta, kl_pos, key_pos,
    key_len, value_len)`` where ``kl_pos`` is where the key length starts (what is copied verbatim)."""
    body_len, q, err = _read_varint(mem, p, limit)
    if err != OK:
        return err, p, 0, 0, 0, 0, 0, 0, 0
    if body_len < 0 or body_len > limit - q:
        return ERR_RECORD_SIZE, p, 0, 0, 0, 0, 0, 0, 0
    body_end = q + body_len
    if q >= body_end:
        return ERR_RECORD_ATTRIBUTES_EOF, q, 0, 0, 0, 0, 0, 0, 0
    ts_delta, q2, err = _read_varlong(mem, q + 1, body_end)
    if err != OK:
        return err, q + 1, 0, 0, 0, 0, 0, 0, 0
    offset_delta, q, err = _read_varint(mem, q2, body_end)
    if err != OK:
        return err, q2, 0, 0, 0, 0, 0, 0, 0
    kl_pos = q
    key_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0
    if key_len < 0:
        key_len = -1
    if key_len > body_end - q2:
        return ERR_KEY_LENGTH, q, 0, 0, 0, 0, 0, 0, 0
    key_pos = q2
    q = q2 + max(key_len, 0)
    value_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0
    if value_len < 0:
        value_len = -1
    if value_len > body_end - q2:
        return ERR_VALUE_LENGTH, q, 0, 0, 0, 0, 0, 0, 0
    q = q2 + max(value_len, 0)
    header_count, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0, 0, 0, 0
    if header_count < 0 or header_count > (body_end - q2) >> 1:
        return ERR_HEADER_COUNT, q, 0, 0, 0, 0, 0, 0, 0
    q = q2
    for _ in range(header_count):
        err, err_pos, _kp, _kl, _vp, _vl, q = _parse_header(mem, q, body_end)
        if err != OK:
            return err, err_pos, 0, 0, 0, 0, 0, 0, 0
    if q != body_end:
        return ERR_RECORD_SIZE_MISMATCH, p, 0, 0, 0, 0, 0, 0, 0
    return OK, 0, body_end, ts_delta, offset_delta, kl_pos, key_pos, key_len, value_len


@njit(cache=CACHE, nogil=True, inline="always")
def _parse_key(mem: Any, p: Any, limit: Any) -> Any:
    """The offset delta and key of the record at ``p`` (for the offset map: the value and headers are not
    looked at here; the filter parses whole records). Returns ``(err, err_pos, body_end, offset_delta,
    key_pos, key_len)``; every field read lies inside the record's declared length."""
    body_len, q, err = _read_varint(mem, p, limit)
    if err != OK:
        return err, p, 0, 0, 0, 0
    if body_len < 0 or body_len > limit - q:
        return ERR_RECORD_SIZE, p, 0, 0, 0, 0
    body_end = q + body_len
    if q >= body_end:
        return ERR_RECORD_ATTRIBUTES_EOF, q, 0, 0, 0, 0
    _tsd, q2, err = _read_varlong(mem, q + 1, body_end)
    if err != OK:
        return err, q + 1, 0, 0, 0, 0
    offset_delta, q, err = _read_varint(mem, q2, body_end)
    if err != OK:
        return err, q2, 0, 0, 0, 0
    key_len, q2, err = _read_varint(mem, q, body_end)
    if err != OK:
        return err, q, 0, 0, 0, 0
    if key_len < 0:
        key_len = -1
    if key_len > body_end - q2:
        return ERR_KEY_LENGTH, q, 0, 0, 0, 0
    return OK, 0, body_end, offset_delta, q2, key_len


@njit(cache=CACHE, nogil=True, inline="always")
def _uvarint_size(u: Any) -> Any:
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(cache=CACHE, nogil=True, inline="always")
def _put_uvarint(out: Any, o: Any, u: Any) -> Any:
    while u >= np.uint64(0x80):
        out[o] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        o += 1
    out[o] = np.uint8(u)
    return o + 1


@njit(cache=CACHE, nogil=True, inline="always")
def _zigzag32(v: Any) -> Any:
    return np.uint64(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


@njit(cache=CACHE, nogil=True, inline="always")
def _zigzag64(v: Any) -> Any:
    sign = _U64_ALL if v < 0 else np.uint64(0)
    return (np.uint64(v) << np.uint64(1)) ^ sign


@njit(cache=CACHE, nogil=True, inline="always")
def _put_be(out: Any, o: Any, v: Any, width: Any) -> None:
    for i in range(width):
        out[o + i] = np.uint8((v >> (8 * (width - 1 - i))) & 0xFF)


@njit(cache=CACHE, nogil=True)
def _decide(
    mem: Any,
    start: Any,
    end: Any,
    count: Any,
    base_offset: Any,
    base_ts: Any,
    lat_ts: Any,
    use_lat: Any,
    flags: Any,
    table: Any,
    map_latest: Any,
    scratch: Any,
    hashes: Any,
) -> Any:
    """Apply the record rules to ``count`` records in ``[start, end)``; kept records go to ``scratch`` rows
    ``(timestamp, offset delta, kl_pos, body_end)``. Returns ``(err, err_pos, kept, invalid, has_tombstone,
    first_ts, max_ts)``.

    Two passes: the first parses every record and, for those that need the map, hashes the key and
    prefetches its first probe; the second decides in order (the map lookups then mostly hit the cache).
    """
    rows = np.uint64(table.shape[0])
    tmem = table.ctypes.data
    discard = (flags & F_DISCARD) != 0
    retain_all = (flags & F_RETAIN_ALL) != 0
    retain_deletes = (flags & F_RETAIN_DELETES) != 0
    p = start
    for r in range(count):
        if p >= end:
            return ERR_COUNT_TOO_MANY, p, 0, 0, False, 0, 0
        err, err_pos, body_end, tsd, od, kl_pos, key_pos, key_len, value_len = _parse_record(mem, p, end)
        if err != OK:
            return err, err_pos, 0, 0, False, 0, 0
        scratch[0, r] = lat_ts if use_lat else base_ts + tsd
        scratch[1, r] = od
        scratch[2, r] = kl_pos
        scratch[3, r] = body_end
        scratch[5, r] = value_len
        if discard:
            scratch[4, r] = _DROP
        elif retain_all or base_offset + od > map_latest:
            scratch[4, r] = _KEEP
        elif key_len < 0:
            scratch[4, r] = _INVALID
        else:
            scratch[4, r] = _LOOKUP
            h1, h2 = _murmur(mem, key_pos, key_len)
            hashes[0, r] = h1
            hashes[1, r] = h2
            _prefetch(tmem + (h1 % rows) * np.uint64(BYTES_PER_ENTRY))
        p = body_end
    if p != end:
        return ERR_COUNT_TOO_FEW, p, 0, 0, False, 0, 0
    kept = 0
    invalid = 0
    tombstone = False
    first_ts = np.int64(0)
    max_ts = np.int64(-1)
    for r in range(count):
        cls = scratch[4, r]
        if cls == _DROP:
            continue
        if cls == _INVALID:
            invalid += 1
            continue
        if cls == _LOOKUP:
            found = _get(table, hashes[0, r], hashes[1, r])
            if base_offset + scratch[1, r] < found or (scratch[5, r] < 0 and not retain_deletes):
                continue
        ts = scratch[0, r]
        if kept == 0:
            first_ts = ts
        if ts > max_ts:
            max_ts = ts
        if scratch[5, r] < 0:
            tombstone = True
        if kept != r:
            scratch[0, kept] = ts
            scratch[1, kept] = scratch[1, r]
            scratch[2, kept] = scratch[2, r]
            scratch[3, kept] = scratch[3, r]
        kept += 1
    return OK, 0, kept, invalid, tombstone, first_ts, max_ts


@njit(cache=CACHE, nogil=True)
def _encode(mem: Any, scratch: Any, kept: Any, new_base_ts: Any, out: Any, o: Any) -> Any:
    """Write the kept records at ``out[o:]`` re-based on ``new_base_ts``; returns the end (or -1: no room)."""
    dst = out.ctypes.data
    cap = out.shape[0]
    for i in range(kept):
        zt = _zigzag64(scratch[0, i] - new_base_ts)
        zo = _zigzag32(scratch[1, i])
        kl_pos = scratch[2, i]
        rest = scratch[3, i] - kl_pos
        body = 1 + _uvarint_size(zt) + _uvarint_size(zo) + rest
        zb = _zigzag32(np.int64(body))
        if o + _uvarint_size(zb) + body > cap:
            return -1
        o = _put_uvarint(out, o, zb)
        out[o] = 0
        o = _put_uvarint(out, o + 1, zt)
        o = _put_uvarint(out, o, zo)
        _copy(dst, o, mem, kl_pos, rest)
        o += rest
    return o


@njit(cache=CACHE, nogil=True)
def _plan(
    kept: Any, count: Any, tombstone: Any, flags: Any, attrs: Any, base_ts: Any, new_horizon: Any
) -> Any:
    """``(kind, new attributes, new base timestamp)`` for a filtered v2 batch (the filterTo decision)."""
    has_horizon = (attrs & _ATTR_HORIZON) != 0
    need_horizon = (tombstone or (flags & F_MARKER_EMPTY_TXN) != 0) and not has_horizon
    if kept > 0 and kept == count and not need_horizon:
        return K_COPY, attrs, base_ts
    if kept > 0:
        horizon = new_horizon if need_horizon else (base_ts if has_horizon else np.int64(-1))
        if horizon >= 0:
            return K_REWRITE, attrs | _ATTR_HORIZON, horizon
        return K_REWRITE, attrs & ~_ATTR_HORIZON, np.int64(-2)  # -2: first kept timestamp
    if flags & F_RETAIN_EMPTY:
        return K_EMPTY, attrs & (_ATTR_LAT | _ATTR_TXN | _ATTR_CONTROL), np.int64(-1)
    return K_DROP, attrs, base_ts


@njit(cache=CACHE, nogil=True)
def _write_header(
    out: Any,
    h: Any,
    size: Any,
    base_offset: Any,
    ple: Any,
    attrs: Any,
    lod: Any,
    base_ts: Any,
    max_ts: Any,
    pid: Any,
    epoch: Any,
    seq: Any,
    count: Any,
) -> None:
    """The 61-byte v2 header at ``out[h:]`` with a zero CRC (filled in afterwards)."""
    _put_be(out, h + BASE_OFFSET_OFFSET, base_offset, 8)
    _put_be(out, h + LENGTH_OFFSET, size - LOG_OVERHEAD, 4)
    _put_be(out, h + PARTITION_LEADER_EPOCH_OFFSET, ple, 4)
    out[h + MAGIC_OFFSET] = 2
    _put_be(out, h + CRC_OFFSET, 0, 4)
    _put_be(out, h + ATTRIBUTES_OFFSET, attrs, 2)
    _put_be(out, h + LAST_OFFSET_DELTA_OFFSET, lod, 4)
    _put_be(out, h + BASE_TIMESTAMP_OFFSET, base_ts, 8)
    _put_be(out, h + MAX_TIMESTAMP_OFFSET, max_ts, 8)
    _put_be(out, h + PRODUCER_ID_OFFSET, pid, 8)
    _put_be(out, h + PRODUCER_EPOCH_OFFSET, epoch, 2)
    _put_be(out, h + BASE_SEQUENCE_OFFSET, seq, 4)
    _put_be(out, h + RECORDS_COUNT_OFFSET, count, 4)


@njit(cache=CACHE, nogil=True)
def filter_batches(
    buf: Any,
    table: Any,
    sel: Any,
    flags: Any,
    new_horizon: Any,
    map_table: Any,
    map_latest: Any,
    out: Any,
    meta: Any,
    scratch: Any,
    hashes: Any,
    stats: Any,
) -> None:
    """Filter the uncompressed v2 batches ``table[:, sel]`` of ``buf`` into ``out`` (contiguous, in order);
    ``scratch`` (int64, :data:`SCRATCH_ROWS` rows) and ``hashes`` (uint64, 2 rows) hold a batch's records."""
    mem = buf.ctypes.data
    dst = out.ctypes.data
    cap = out.shape[0]
    o = 0
    for j in range(sel.shape[0]):
        b = sel[j]
        pos = table[F_POS, b]
        size = table[F_SIZE, b]
        fl = flags[j]
        meta[j, M_KIND] = K_DROP
        stats[S_BYTES_READ] += size
        if fl & F_SKIP:
            continue
        count = table[F_RECORD_COUNT, b]
        if count < 0:
            stats[S_ERR] = ERR_COUNT_NEGATIVE
            stats[S_ERR_POS] = pos
            return
        attrs = table[F_ATTRIBUTES, b]
        base = table[F_BASE_OFFSET, b]
        base_ts = table[F_BASE_TIMESTAMP, b]
        max_ts = table[F_MAX_TIMESTAMP, b]
        use_lat = (attrs & _ATTR_LAT) != 0
        err, err_pos, kept, invalid, tomb, first_ts, kept_max = _decide(
            mem,
            pos + RECORD_BATCH_OVERHEAD,
            pos + size,
            count,
            base,
            base_ts,
            max_ts,
            use_lat,
            fl,
            map_table,
            map_latest,
            scratch,
            hashes,
        )
        if err != OK:
            stats[S_ERR] = err
            stats[S_ERR_POS] = err_pos
            return
        stats[S_READ] += count
        stats[S_INVALID] += invalid
        stats[S_KEPT] += kept
        kind, new_attrs, new_base = _plan(kept, count, tomb, fl, attrs, base_ts, new_horizon)
        if kind == K_DROP:
            continue
        if kind == K_COPY:
            if o + size > cap:
                stats[S_ERR] = _ERR_CAPACITY
                return
            _copy(dst, o, mem, pos, size)
            meta[j, M_POS] = o
            meta[j, M_SIZE] = size
            meta[j, M_KIND] = K_COPY
            meta[j, M_MAX_TS] = max_ts
            o += size
            continue
        if o + RECORD_BATCH_OVERHEAD > cap:
            stats[S_ERR] = _ERR_CAPACITY
            return
        h = o
        if kind == K_EMPTY:
            o = h + RECORD_BATCH_OVERHEAD
            out_max = max_ts
            out_base = np.int64(-1)
        else:
            out_base = first_ts if new_base == -2 else new_base
            o = _encode(mem, scratch, kept, out_base, out, h + RECORD_BATCH_OVERHEAD)
            if o < 0:
                stats[S_ERR] = _ERR_CAPACITY
                return
            out_max = max_ts if use_lat else kept_max
        _write_header(
            out,
            h,
            o - h,
            base,
            table[F_LEADER_EPOCH, b],
            new_attrs,
            table[F_LAST_OFFSET_DELTA, b],
            out_base,
            out_max,
            table[F_PRODUCER_ID, b],
            table[F_PRODUCER_EPOCH, b],
            table[F_BASE_SEQUENCE, b],
            kept,
        )
        meta[j, M_POS] = h
        meta[j, M_SIZE] = o - h
        meta[j, M_KIND] = kind
        meta[j, M_MAX_TS] = out_max
    stats[S_OUT] = o


@njit(cache=CACHE, nogil=True)
def filter_payload(
    payload: Any,
    count: Any,
    base: Any,
    base_ts: Any,
    max_ts: Any,
    attrs: Any,
    fl: Any,
    new_horizon: Any,
    map_table: Any,
    map_latest: Any,
    out: Any,
    scratch: Any,
    hashes: Any,
    res: Any,
) -> None:
    """The filter for one decompressed records section; re-written records (if any) go to ``out[0:]``.

    ``res`` = ``(err, err_pos, kind, kept, invalid, new attributes, new base timestamp, max timestamp, length)``.
    """
    mem = payload.ctypes.data
    use_lat = (attrs & _ATTR_LAT) != 0
    err, err_pos, kept, invalid, tomb, first_ts, kept_max = _decide(
        mem,
        0,
        payload.shape[0],
        count,
        base,
        base_ts,
        max_ts,
        use_lat,
        fl,
        map_table,
        map_latest,
        scratch,
        hashes,
    )
    res[0] = err
    res[1] = err_pos
    if err != OK:
        return
    kind, new_attrs, new_base = _plan(kept, count, tomb, fl, attrs, base_ts, new_horizon)
    res[2] = kind
    res[3] = kept
    res[4] = invalid
    res[5] = new_attrs
    res[7] = max_ts
    res[8] = 0
    if kind == K_REWRITE:
        out_base = first_ts if new_base == -2 else new_base
        end = _encode(mem, scratch, kept, out_base, out, 0)
        if end < 0:
            res[0] = _ERR_CAPACITY
            return
        res[6] = out_base
        res[7] = max_ts if use_lat else kept_max
        res[8] = end
    else:
        res[6] = new_base


@njit(cache=CACHE, nogil=True)
def map_batches(
    buf: Any,
    starts: Any,
    ends: Any,
    counts: Any,
    bases: Any,
    lasts: Any,
    start_offset: Any,
    map_table: Any,
    scratch: Any,
    hashes: Any,
    state: Any,
) -> None:
    """Put the keys of records at or after ``start_offset`` into the map while it has room (Kafka's
    ``buildOffsetMapForSegment`` over one run of batches); ``state`` carries entries, max entries, the
    latest offset, records read and the full / error flags. Before a batch that could take the table past
    ``state[MS_GROW_AT]`` entries the run stops with ``MS_GROW`` set and ``MS_NEXT`` = that batch.

    Per batch, a first pass parses the records, hashes the keys to put and prefetches their first probe;
    the second puts them in offset order (so the latest offset of a key wins, and "full" stops at the
    same record as a one-pass walk). ``scratch`` (int64, >= 1 row) and ``hashes`` (uint64, 2 rows) are
    sized to the largest batch."""
    mem = buf.ctypes.data
    rows = np.uint64(map_table.shape[0])
    tmem = map_table.ctypes.data
    entries = state[MS_ENTRIES]
    max_entries = state[MS_MAX]
    grow_at = state[MS_GROW_AT]
    for b in range(starts.shape[0]):
        p = starts[b]
        end = ends[b]
        base = bases[b]
        count = counts[b]
        if entries + count > grow_at and entries < max_entries:
            state[MS_GROW] = 1
            state[MS_NEXT] = b
            state[MS_ENTRIES] = entries
            return
        if count < 0:
            state[MS_ERR] = ERR_COUNT_NEGATIVE
            state[MS_ERR_POS] = p
            state[MS_ENTRIES] = entries
            return
        for r in range(count):
            if p >= end:
                state[MS_ERR] = ERR_COUNT_TOO_MANY
                state[MS_ERR_POS] = p
                state[MS_ENTRIES] = entries
                return
            err, err_pos, body_end, od, key_pos, key_len = _parse_key(mem, p, end)
            if err != OK:
                state[MS_ERR] = err
                state[MS_ERR_POS] = err_pos
                state[MS_ENTRIES] = entries
                return
            offset = base + od
            if key_len >= 0 and offset >= start_offset:
                h1, h2 = _murmur(mem, key_pos, key_len)
                hashes[0, r] = h1
                hashes[1, r] = h2
                scratch[0, r] = offset
                _prefetch(tmem + (h1 % rows) * np.uint64(BYTES_PER_ENTRY))
            else:
                scratch[0, r] = -1
            p = body_end
        if p != end:
            state[MS_ERR] = ERR_COUNT_TOO_FEW
            state[MS_ERR_POS] = p
            state[MS_ENTRIES] = entries
            return
        for r in range(count):
            offset = scratch[0, r]
            if offset >= 0:
                if entries >= max_entries:
                    state[MS_FULL] = 1
                    state[MS_ENTRIES] = entries
                    return
                added = _put(map_table, hashes[0, r], hashes[1, r], offset)
                if added < 0:
                    state[MS_FULL] = 1
                    state[MS_ENTRIES] = entries
                    return
                entries += added
                state[MS_LATEST] = offset
            state[MS_READ] += 1
        if lasts[b] >= start_offset:
            state[MS_LATEST] = lasts[b]
    state[MS_ENTRIES] = entries
