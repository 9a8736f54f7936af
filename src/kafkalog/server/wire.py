"""Kafka's primitive wire types for the coordinators' record formats (keys and values of internal topics).

The request/response schemas come from kafka-python; the *record* schemas of ``__consumer_offsets`` and
``__transaction_state`` (Kafka's ``OffsetCommitKey``, ``GroupMetadataValue``, ``TransactionLogValue``...)
are not shipped by any client, so their encoders are written by hand over these primitives: big-endian
ints, int16-length strings (-1 = null), int32-length bytes, int32-count arrays, and for flexible versions
unsigned-varint compact strings/bytes/arrays and tagged-field sections (read and skipped).

Owned here: :class:`Writer`, :class:`Reader` and :class:`RecordFormatError` (any malformed record). Nothing
here knows a schema.
"""

from __future__ import annotations

import struct

from kafkalog.errors import KafkaError

__all__ = ["Reader", "RecordFormatError", "Writer"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(KafkaError, ValueError):
    """A coordinator record (key or value) that does not decode."""


class Writer:
    """Appends Kafka primitives to a buffer."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> Writer:
        """Append an int8."""
        self.buf += _I8.pack(v)
        return self

    def int16(self, v: int) -> Writer:
        """Append an int16."""
        self.buf += _I16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        """Append an int32."""
        self.buf += _I32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        """Append an int64."""
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> Writer:
        """Append an int16-length string (None: length -1)."""
        if v is None:
            return self.int16(-1)
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is too long")
        self.int16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> Writer:
        """Append int32-length bytes (None: length -1)."""
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.buf += v
        return self

    def to_bytes(self) -> bytes:
        """The bytes written."""
        return bytes(self.buf)


class Reader:
    """Reads Kafka primitives from bytes; every shortfall is a :class:`RecordFormatError`."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"record truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        """Read an int8."""
        return int(_I8.unpack(self._take(1))[0])

    def int16(self) -> int:
        """Read an int16."""
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        """Read an int32."""
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        """Read an int64."""
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        """Read an unsigned varint."""
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def _text(self, n: int) -> str:
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"invalid UTF-8 string: {exc}") from None

    def string(self, flexible: bool = False) -> str | None:
        """Read a string (int16 length, or compact when ``flexible``); None for null."""
        n = self.uvarint() - 1 if flexible else self.int16()
        return None if n < 0 else self._text(n)

    def bytes_(self, flexible: bool = False) -> bytes | None:
        """Read bytes (int32 length, or compact when ``flexible``); None for null."""
        n = self.uvarint() - 1 if flexible else self.int32()
        return None if n < 0 else self._take(n)

    def array_length(self, flexible: bool = False) -> int:
        """Read an array's element count (-1 for null)."""
        return self.uvarint() - 1 if flexible else self.int32()

    def tagged_fields(self) -> dict[int, bytes]:
        """Read a tagged-field section (tag -> raw bytes)."""
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._take(self.uvarint())
        return out

    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self.data) - self.pos
