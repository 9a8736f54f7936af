"""Numba kernel that writes v2 record bodies: the single encoder of records for batches kafkalog builds.

Byte format of each record (``DefaultRecord.writeTo``)::

    length varint · attributes int8 (0) · timestampDelta varlong · offsetDelta varint ·
    keyLength varint (-1 = null) · key · valueLength varint (-1 = null) · value ·
    headerCount varint · (keyLength varint · UTF-8 key · valueLength varint (-1 = null) · value)*

Varints are protobuf zig-zag LEB128. Python gathers the fields into flat arrays (concatenated key, value and
header bytes plus lengths, -1 for null); :func:`encode_records` sizes every record in one pass and writes
them into one buffer in a second, so there is no per-record Python work beyond collecting the fields.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from kafkalog.jit import CACHE

__all__ = ["encode_records"]

I64 = npt.NDArray[np.int64]


@njit(cache=CACHE, nogil=True)
def _zz32(v: Any) -> Any:
    return np.uint64(np.uint32((np.int64(v) << 1) ^ (np.int64(v) >> 31)))


@njit(cache=CACHE, nogil=True)
def _zz64(v: Any) -> Any:
    x = np.int64(v)
    return np.uint64((x << np.int64(1)) ^ (x >> np.int64(63)))


@njit(cache=CACHE, nogil=True)
def _uvarint_size(u: Any) -> Any:
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(cache=CACHE, nogil=True)
def _put_uvarint(out: Any, p: Any, u: Any) -> Any:
    while u >= np.uint64(0x80):
        out[p] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        p += 1
    out[p] = np.uint8(u)
    return p + 1


@njit(cache=CACHE, nogil=True)
def _copy(out: Any, p: Any, src: Any, s: Any, n: Any) -> None:
    for i in range(np.uint64(n)):
        out[np.uint64(p) + i] = src[np.uint64(s) + i]


@njit(cache=CACHE, nogil=True)
def _body_sizes(
    ts_delta: Any,
    off_delta: Any,
    k_len: Any,
    v_len: Any,
    h_start: Any,
    h_count: Any,
    hk_len: Any,
    hv_len: Any,
    sizes: Any,
) -> Any:
    total = 0
    for i in range(ts_delta.shape[0]):
        b = 1 + _uvarint_size(_zz64(ts_delta[i])) + _uvarint_size(_zz32(off_delta[i]))
        b += _uvarint_size(_zz32(k_len[i])) + max(k_len[i], 0)
        b += _uvarint_size(_zz32(v_len[i])) + max(v_len[i], 0)
        b += _uvarint_size(_zz32(h_count[i]))
        for j in range(h_start[i], h_start[i] + h_count[i]):
            b += _uvarint_size(_zz32(hk_len[j])) + hk_len[j]
            b += _uvarint_size(_zz32(hv_len[j])) + max(hv_len[j], 0)
        sizes[i] = b
        total += _uvarint_size(_zz32(b)) + b
    return total


@njit(cache=CACHE, nogil=True)
def _write(
    out: Any,
    ts_delta: Any,
    off_delta: Any,
    k_data: Any,
    k_pos: Any,
    k_len: Any,
    v_data: Any,
    v_pos: Any,
    v_len: Any,
    h_start: Any,
    h_count: Any,
    hk_data: Any,
    hk_pos: Any,
    hk_len: Any,
    hv_data: Any,
    hv_pos: Any,
    hv_len: Any,
    sizes: Any,
) -> Any:
    p = 0
    for i in range(ts_delta.shape[0]):
        p = _put_uvarint(out, p, _zz32(sizes[i]))
        out[p] = 0
        p += 1
        p = _put_uvarint(out, p, _zz64(ts_delta[i]))
        p = _put_uvarint(out, p, _zz32(off_delta[i]))
        p = _put_uvarint(out, p, _zz32(k_len[i]))
        if k_len[i] > 0:
            _copy(out, p, k_data, k_pos[i], k_len[i])
            p += k_len[i]
        p = _put_uvarint(out, p, _zz32(v_len[i]))
        if v_len[i] > 0:
            _copy(out, p, v_data, v_pos[i], v_len[i])
            p += v_len[i]
        p = _put_uvarint(out, p, _zz32(h_count[i]))
        for j in range(h_start[i], h_start[i] + h_count[i]):
            p = _put_uvarint(out, p, _zz32(hk_len[j]))
            _copy(out, p, hk_data, hk_pos[j], hk_len[j])
            p += hk_len[j]
            p = _put_uvarint(out, p, _zz32(hv_len[j]))
            if hv_len[j] > 0:
                _copy(out, p, hv_data, hv_pos[j], hv_len[j])
                p += hv_len[j]
    return p


def _flat(items: list[bytes | None]) -> tuple[npt.NDArray[np.uint8], I64, I64]:
    """Concatenated bytes, start positions and lengths (-1 for None) of a list of optional byte strings."""
    lens = np.fromiter((-1 if x is None else len(x) for x in items), dtype=np.int64, count=len(items))
    data = b"".join([x for x in items if x])
    pos = np.zeros(len(items), dtype=np.int64)
    if len(items) > 1:
        np.cumsum(np.maximum(lens[:-1], 0), out=pos[1:])
    return np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, np.uint8), pos, lens


_EMPTY_U8 = np.zeros(1, np.uint8)
_EMPTY_I64 = np.zeros(0, np.int64)


def encode_records(
    timestamp_deltas: list[int],
    offset_deltas: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[tuple[tuple[str, bytes | None], ...]] | None = None,
) -> bytes:
    """The concatenated encoded records (each with its length prefix)."""
    n = len(values)
    ts = np.asarray(timestamp_deltas, dtype=np.int64)
    offs = np.asarray(offset_deltas, dtype=np.int64)
    k_data, k_pos, k_len = _flat(keys)
    v_data, v_pos, v_len = _flat(values)
    if headers is not None and any(headers):
        h_count = np.fromiter((len(h) for h in headers), dtype=np.int64, count=n)
        h_start = np.zeros(n, dtype=np.int64)
        if n > 1:
            np.cumsum(h_count[:-1], out=h_start[1:])
        flat = [h for hs in headers for h in hs]
        for h in flat:
            if h[0] is None:
                raise ValueError("invalid null header key found in headers")
        hk_data, hk_pos, hk_len = _flat([h[0].encode("utf-8") for h in flat])
        hv_data, hv_pos, hv_len = _flat([h[1] for h in flat])
    else:
        h_count = np.zeros(n, dtype=np.int64)
        h_start = h_count
        hk_data = hv_data = _EMPTY_U8
        hk_pos = hk_len = hv_pos = hv_len = _EMPTY_I64
    sizes = np.empty(n, dtype=np.int64)
    total = _body_sizes(ts, offs, k_len, v_len, h_start, h_count, hk_len, hv_len, sizes)
    out = np.empty(total, dtype=np.uint8)
    written = _write(
        out,
        ts,
        offs,
        k_data,
        k_pos,
        k_len,
        v_data,
        v_pos,
        v_len,
        h_start,
        h_count,
        hk_data,
        hk_pos,
        hk_len,
        hv_data,
        hv_pos,
        hv_len,
        sizes,
    )
    assert written == total
    return out.tobytes()
