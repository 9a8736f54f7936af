"""Kafka's variable-length integers: protobuf zig-zag, then unsigned LEB128.

Format (``org.apache.kafka.common.utils.ByteUtils``): a signed value ``v`` is zig-zag mapped to
``(v << 1) ^ (v >> 31)`` (varint, int32) or ``(v << 1) ^ (v >> 63)`` (varlong, int64) and written 7 bits
at a time, least significant group first, with the high bit of each byte set when more bytes follow.
A varint takes at most 5 bytes and a varlong at most 10; a longer encoding, or one that runs past the
end of the buffer, is an :class:`~kafkalog.errors.InvalidRecordError`.

This module is the Python-side codec used by the record encoder and by header parsing; bulk decoding of
record bodies happens in :mod:`kafkalog.records._kernels`.
"""

from __future__ import annotations

from kafkalog.errors import InvalidRecordError

__all__ = [
    "SMALL_UVARINTS",
    "decode_varint",
    "decode_varlong",
    "encode_uvarint",
    "encode_varint",
    "encode_varlong",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1

# Encodings of the zig-zag values 0 .. 2**14 - 1 (one- and two-byte varints): the common case for
# lengths, offset deltas and small timestamp deltas, looked up instead of computed.
_SMALL: list[bytes] = []
for _zz in range(1 << 14):
    _SMALL.append(bytes((_zz,)) if _zz < 0x80 else bytes(((_zz & 0x7F) | 0x80, _zz >> 7)))
del _zz
#: The encodings of the zig-zag values ``0 .. 2**14 - 1``, indexable by the zig-zag value.
SMALL_UVARINTS: tuple[bytes, ...] = tuple(_SMALL)


def encode_uvarint(zz: int) -> bytes:
    """Unsigned LEB128 of an already zig-zag mapped value (:data:`SMALL_UVARINTS` holds the common ones)."""
    return _SMALL[zz] if zz < 16384 else _encode_unsigned(zz)


def _encode_unsigned(zz: int) -> bytes:
    out = bytearray()
    while zz >= 0x80:
        out.append((zz & 0x7F) | 0x80)
        zz >>= 7
    out.append(zz)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit integer as a zig-zag varint."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    zz = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return _SMALL[zz] if zz < 16384 else _encode_unsigned(zz)


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zig-zag varlong."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return _SMALL[zz] if zz < 16384 else _encode_unsigned(zz)


def size_of_varint(value: int) -> int:
    """Number of bytes :func:`encode_varint` writes for ``value``."""
    zz = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (zz.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """Number of bytes :func:`encode_varlong` writes for ``value``."""
    zz = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (zz.bit_length() + 6) // 7)


def _decode(
    buf: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int, what: str
) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise InvalidRecordError(f"{what} runs past the end of the buffer", position=start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise InvalidRecordError(f"{what} is longer than {max_bytes} bytes", position=start)
    return (result >> 1) ^ -(result & 1), pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zig-zag varint at ``buf[pos]``; return ``(value, next_position)``."""
    value, nxt = _decode(buf, pos, len(buf) if end is None else end, 5, "varint")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise InvalidRecordError("varint does not fit an int32", position=pos)
    return value, nxt


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode a zig-zag varlong at ``buf[pos]``; return ``(value, next_position)``."""
    value, nxt = _decode(buf, pos, len(buf) if end is None else end, 10, "varlong")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidRecordError("varlong does not fit an int64", position=pos)
    return value, nxt
