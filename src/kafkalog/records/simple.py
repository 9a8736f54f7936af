"""Pure-Python fast path for small uncompressed batches: :func:`build_plain_batch`.

The byte format it owns is Kafka's RecordBatch v2 (magic 2), uncompressed, as documented in
:mod:`kafkalog.records.batch`: a 61-byte big-endian header (baseOffset 0 · batchLength · partitionLeaderEpoch
-1 · magic 2 · CRC-32C of bytes [21, end) · attributes 0 (no codec, CreateTime, not transactional, not
control) · lastOffsetDelta n-1 · baseTimestamp = first record's timestamp · maxTimestamp = largest record
timestamp · producerId -1 · producerEpoch -1 · baseSequence -1 · recordsCount n), then the records, each
``length varint · attributes 0 · timestampDelta varlong · offsetDelta varint · keyLength varint (-1 =
null) · key · valueLength varint (-1 = null) · value · headerCount varint (0)``, with Kafka's zig-zag
varints (:mod:`kafkalog.records.varint`).

The output is byte-identical to ``MemoryRecords.build(items, compression=Compression.NONE, now_ms=now_ms)``
(the numba encoder in :mod:`kafkalog.records._encode`); for a handful of small records building it with
``struct`` and ``crc32c`` directly avoids the numpy/numba call overhead. Anything outside the fast subset
returns ``None`` so the caller falls back to ``MemoryRecords.build`` (which also raises the proper errors).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from crc32c import crc32c

from kafkalog.records.record import SimpleRecord
from kafkalog.records.varint import SMALL_UVARINTS, encode_uvarint

__all__ = ["MAX_PLAIN_BATCH_RECORDS", "build_plain_batch"]

#: Largest item count :func:`build_plain_batch` handles; bigger lists are faster through the numba encoder.
MAX_PLAIN_BATCH_RECORDS: Final = 16

_INT64_MAX: Final = (1 << 63) - 1
_INT32_MAX: Final = (1 << 31) - 1

# Header bytes [0, 21): baseOffset, batchLength, partitionLeaderEpoch, magic, crc.
_HEAD: Final = struct.Struct(">qiibI")
# Header bytes [21, 61): attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId,
# producerEpoch, baseSequence, recordsCount (all covered by the CRC).
_TAIL: Final = struct.Struct(">hiqqqhii")
_pack_head = _HEAD.pack
_pack_tail = _TAIL.pack

# Encodings of the zig-zag values 0 .. 2**14 - 1 (one- and two-byte varints), and any other.
_SMALL: Final = SMALL_UVARINTS
_uvarint = encode_uvarint


# attributes 0 · timestampDelta 0 · offsetDelta i · keyLength -1: the start of value-only record i.
_VALUE_ONLY_PREFIX: Final[tuple[bytes, ...]] = tuple(
    b"\x00\x00" + _SMALL[i << 1] + b"\x01" for i in range(MAX_PLAIN_BATCH_RECORDS)
)


def _single_value(value: bytes, now_ms: int) -> bytearray:
    """One value-only record timestamped ``now_ms``: the ``Log.append([value])`` hot path."""
    vlen = len(value)
    vb = _SMALL[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
    body = 5 + len(vb) + vlen  # attributes · timestampDelta · offsetDelta · keyLength · vb · value · headers
    tail = b"".join(
        (
            _pack_tail(0, 0, now_ms, now_ms, -1, -1, -1, 1),
            _SMALL[body << 1] if body < 8192 else _uvarint(body << 1),
            b"\x00\x00\x00\x01",
            vb,
            value,
            b"\x00",
        )
    )
    buf = bytearray(_pack_head(0, len(tail) + 9, -1, 2, crc32c(tail)))
    buf += tail
    return buf


def _values_only(items: list[bytes], now_ms: int) -> bytearray:
    """Value-only records, all timestamped ``now_ms``."""
    small = _SMALL
    parts = [_pack_tail(0, len(items) - 1, now_ms, now_ms, -1, -1, -1, len(items))]
    extend = parts.extend
    for prefix, value in zip(_VALUE_ONLY_PREFIX, items):
        vlen = len(value)
        vb = small[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
        body = 5 + len(vb) + vlen
        extend((small[body << 1] if body < 8192 else _uvarint(body << 1), prefix, vb, value, b"\x00"))
    tail = b"".join(parts)
    buf = bytearray(_pack_head(0, len(tail) + 9, -1, 2, crc32c(tail)))
    buf += tail
    return buf


def _general(items: list[Any], now_ms: int) -> tuple[bytearray, int, int, int] | None:
    """Any mix of items in the fast subset: ``(buffer, min_timestamp, max_timestamp, null_keys)``."""
    small = _SMALL
    parts: list[bytes] = [b""]  # parts[0] becomes the header tail once the timestamps are known
    extend = parts.extend
    first_ts = lo = hi = now_ms
    null_keys = 0
    ts: Any
    for i, item in enumerate(items):
        kind = type(item)
        if kind is bytes:
            key, value, ts = None, item, now_ms
        elif kind is SimpleRecord:
            value, key, ts, headers = item
            if headers:
                return None
            if ts is None:
                ts = now_ms
            elif type(ts) is not int or not 0 <= ts <= _INT64_MAX:
                return None
        elif kind is tuple and len(item) == 2:
            key, value = item
            ts = now_ms
        else:
            return None
        if i == 0:
            first_ts = lo = hi = ts
            tsb = b"\x00"
        elif ts == first_ts:
            tsb = b"\x00"
        else:
            if ts < lo:
                lo = ts
            elif ts > hi:
                hi = ts
            zz = (ts - first_ts) << 1  # zig-zag of the delta (|delta| < 2**63)
            if zz < 0:
                zz = ~zz
            tsb = small[zz] if zz < 16384 else _uvarint(zz)
        # attributes 0 · timestampDelta · offsetDelta (i < 16: one byte) · keyLength
        if key is None:
            null_keys += 1
            head = b"\x00" + tsb + small[i << 1] + b"\x01"
            key = b""
        elif type(key) is bytes:
            klen = len(key)
            head = b"\x00" + tsb + small[i << 1] + (small[klen << 1] if klen < 8192 else _uvarint(klen << 1))
        else:
            return None
        if value is None:
            vb = b"\x01"
            value = b""
        elif type(value) is bytes:
            vlen = len(value)
            vb = small[vlen << 1] if vlen < 8192 else _uvarint(vlen << 1)
        else:
            return None
        body = len(head) + len(key) + len(vb) + len(value) + 1  # + headerCount 0
        extend((small[body << 1] if body < 8192 else _uvarint(body << 1), head, key, vb, value, b"\x00"))
    parts[0] = _pack_tail(0, len(items) - 1, first_ts, hi, -1, -1, -1, len(items))
    tail = b"".join(parts)
    buf = bytearray(_pack_head(0, len(tail) + 9, -1, 2, crc32c(tail)))
    buf += tail
    return buf, lo, hi, null_keys


def build_plain_batch(items: list[Any], now_ms: int) -> tuple[bytearray, int, int, int, int] | None:
    """One uncompressed v2 batch of ``items``, or ``None`` when an item is outside the fast subset.

    The batch has base offset 0, no producer id (pid -1, epoch -1, sequence -1), partition leader epoch
    -1, CreateTime and is not transactional; it is byte-identical to
    ``MemoryRecords.build(items, compression=Compression.NONE, now_ms=now_ms).buffer``.

    The fast subset is 1 to :data:`MAX_PLAIN_BATCH_RECORDS` items, each one of: ``bytes`` (a value
    without key, timestamped ``now_ms``); a :class:`SimpleRecord` without headers whose key and value are
    ``bytes`` or ``None`` and whose timestamp is ``None`` (``now_ms``) or an ``int >= 0``; a ``(key,
    value)`` tuple of ``bytes`` or ``None`` (timestamped ``now_ms``). Anything else (``bytearray`` or
    ``memoryview`` data, headers, negative timestamps, other types, more items, a batch over 2 GiB)
    returns ``None``; the caller then uses ``MemoryRecords.build``, which also raises the proper errors.

    Returns ``(buffer, record_count, min_timestamp, max_timestamp, null_keys)``: the batch bytes, the
    number of records, the smallest and largest record timestamps, and the number of ``None`` keys.
    """
    n = len(items)
    if not 0 < n <= MAX_PLAIN_BATCH_RECORDS or type(now_ms) is not int or not 0 <= now_ms <= _INT64_MAX:
        return None
    if n == 1 and type(items[0]) is bytes:
        buf = _single_value(items[0], now_ms)
        lo = hi = now_ms
        null_keys = 1
    else:
        for item in items:
            if type(item) is not bytes:
                general = _general(items, now_ms)
                if general is None:
                    return None
                buf, lo, hi, null_keys = general
                break
        else:
            buf = _values_only(items, now_ms)
            lo = hi = now_ms
            null_keys = n
    if len(buf) - 12 > _INT32_MAX:  # batchLength is an int32 (this also bounds every varint to int32)
        return None
    return buf, n, lo, hi, null_keys
