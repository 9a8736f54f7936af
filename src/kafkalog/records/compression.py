"""Compression codecs of Kafka record batches, each through a well-kept library, with bounded output.

Codec ids (attribute bits 0-2 of a batch, ``org.apache.kafka.common.record.CompressionType``):

====  ======  =================================================================================
id    name    payload format as Kafka writes it
====  ======  =================================================================================
0     none    the records, uncompressed
1     gzip    a gzip stream (RFC 1952), ``zlib``
2     snappy  snappy-java's *xerial* stream: 16-byte header ``82 'SNAPPY' 00``, int32 version 1,
              int32 compatible version 1, then blocks of ``int32 BE length + raw snappy`` (32 KiB
              input per block); ``cramjam`` does the raw snappy. Raw (unframed) snappy is read too.
3     lz4     an LZ4 frame with independent 64 KiB blocks and no checksums (``lz4.frame``).
              Magic-0 messages carry Kafka's historically wrong header checksum; it is repaired
              before decoding.
4     zstd    a zstd frame (``zstandard``)
====  ======  =================================================================================

Invariant: :func:`decompress` never returns more than ``max_decompressed_bytes`` bytes and never holds
more than that bound plus one 4 MiB piece: output is produced in pieces appended to one buffer (snappy's
into a buffer of its known size), and that buffer is the result, never copied into another. A crafted
batch therefore cannot exhaust memory; a payload that would expand further raises
:class:`~kafkalog.errors.DecompressionBombError`, and a payload that is not valid for its codec raises
:class:`~kafkalog.errors.RecordDecompressionError`. :func:`decompressed_size_at_most` answers whether a
payload expands past a small limit at the cost of that limit, so a caller can choose where the real
decompression runs (the server keeps large ones off its event loop).
"""

from __future__ import annotations

import enum
import io
import struct
import threading
import zlib
from functools import cache
from typing import Final

import cramjam
import lz4.frame
import zstandard

from kafkalog.errors import (
    DecompressionBombError,
    RecordDecompressionError,
    UnsupportedCompressionTypeError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "Compression",
    "compress",
    "decompress",
    "decompressed_size_at_most",
]

#: Default bound on the decompressed size of one batch's records (256 MiB).
DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 256 * 1024 * 1024

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK: Final = 32 * 1024
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"


class Compression(enum.IntEnum):
    """A batch compression codec; the value is the id stored in the batch attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def kafka_name(self) -> str:
        """The name Kafka uses (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        return self.name.lower()

    @classmethod
    def from_id(cls, codec_id: int, *, position: int | None = None) -> Compression:
        """The codec with this attribute id, or :class:`UnsupportedCompressionTypeError`."""
        try:
            return cls(codec_id)
        except ValueError:
            raise UnsupportedCompressionTypeError(
                f"unknown compression type id {codec_id}", position=position
            ) from None

    @classmethod
    def from_name(cls, name: str | Compression) -> Compression:
        """Parse ``none``/``uncompressed``/``gzip``/``snappy``/``lz4``/``zstd`` (case-insensitive)."""
        if isinstance(name, Compression):
            return name
        key = name.strip().lower()
        if key == "uncompressed":
            key = "none"
        for codec in cls:
            if codec.kafka_name == key:
                return codec
        raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}")


# --- compression -------------------------------------------------------------------------------------------


def compress(codec: Compression, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` the way Kafka's producer does for ``codec`` (``level`` None = Kafka's default)."""
    if codec is Compression.NONE:
        return bytes(data)
    if codec is Compression.GZIP:
        obj = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, 31)
        return obj.compress(data) + obj.flush()
    if codec is Compression.SNAPPY:
        view = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is Compression.LZ4:
        return bytes(
            lz4.frame.compress(
                bytes(data),
                compression_level=0 if level is None else level,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                block_checksum=False,
                store_size=False,
            )
        )
    if codec is Compression.ZSTD:
        return _zstd_compressor(3 if level is None else level).compress(data)
    raise UnsupportedCompressionTypeError(f"unknown compression type {codec!r}")


@cache
def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor(level=level)


# --- decompression -----------------------------------------------------------------------------------------

#: Output is produced in pieces of at most this size, so that a bounded decompression never holds more than
#: the bound plus one piece (a piece is appended to the result, then dropped).
_PIECE: Final = 4 * 1024 * 1024


def decompress(
    codec: Compression | int,
    data: bytes | bytearray | memoryview,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    *,
    position: int | None = None,
    legacy_magic: int | None = None,
) -> bytes | bytearray:
    """Decompress a batch payload, bounded by ``max_decompressed_bytes``.

    The result is held once: it is the buffer the codec wrote (``bytes`` or, for output built in pieces,
    ``bytearray``), never copied into another, so the peak is the bound plus at most one 4 MiB piece.
    ``position`` is only used in error messages (where the batch starts). ``legacy_magic=0`` enables the
    repair of the broken LZ4 header checksum that magic-0 messages carry.
    """
    codec = Compression.from_id(int(codec), position=position)
    try:
        if codec is Compression.NONE:
            if len(data) > max_decompressed_bytes:
                raise DecompressionBombError("payload larger than the bound", position=position)
            return bytes(data)
        if codec is Compression.GZIP:
            return _gunzip(data, max_decompressed_bytes, position)
        if codec is Compression.SNAPPY:
            return _unsnappy(data, max_decompressed_bytes, position)
        if codec is Compression.LZ4:
            return _unlz4(data, max_decompressed_bytes, position, legacy_magic == 0)
        return _unzstd(data, max_decompressed_bytes, position)
    except (RecordDecompressionError, UnsupportedCompressionTypeError):
        raise
    except Exception as exc:  # every codec library has its own error types
        raise RecordDecompressionError(
            f"cannot decompress {codec.kafka_name} payload: {exc}", position=position
        ) from exc


def decompressed_size_at_most(
    codec: Compression | int, data: bytes | bytearray | memoryview, limit: int
) -> int:
    """The payload's decompressed size if it is at most ``limit``, else ``limit + 1`` (meaning "more").

    Costs at most a decompression of ``limit`` bytes (the output is dropped), so a caller can decide where
    to run the real, bounded :func:`decompress` (the server keeps large ones off its event loop). A payload
    that is not valid for its codec answers the size decoded before the fault: decompressing it again fails
    at the same place, after as much work.
    """
    if int(codec) == Compression.NONE:
        return min(len(data), limit + 1)
    try:
        return len(decompress(codec, data, limit))
    except DecompressionBombError:
        return limit + 1
    except (RecordDecompressionError, UnsupportedCompressionTypeError):
        return 0


def _bomb(codec: str, limit: int, position: int | None) -> DecompressionBombError:
    return DecompressionBombError(
        f"{codec} payload expands past max_decompressed_bytes={limit}", position=position
    )


def _gunzip(data: bytes | bytearray | memoryview, limit: int, position: int | None) -> bytes | bytearray:
    out = bytearray()
    remaining: bytes | memoryview = memoryview(data)
    while True:
        d = zlib.decompressobj(31)
        pending = remaining
        while True:
            piece = d.decompress(pending, min(_PIECE, limit + 1 - len(out)))
            produced = len(piece)
            if not out and d.eof and not d.unused_data and produced <= limit:
                return piece  # the whole stream in one piece: no copy
            out += piece
            del piece
            if len(out) > limit:
                raise _bomb("gzip", limit, position)
            if d.eof:
                break
            pending = d.unconsumed_tail
            if not pending and not produced:  # all input read, nothing more comes out, no end
                raise RecordDecompressionError("gzip payload is truncated", position=position)
        remaining = d.unused_data
        # Java's GZIPInputStream reads concatenated members; trailing zero padding ends the stream.
        if not remaining or remaining.count(0) == len(remaining):
            return out


def _unsnappy(data: bytes | bytearray | memoryview, limit: int, position: int | None) -> bytearray:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        size = cramjam.snappy.decompress_raw_len(view)
        if size > limit:
            raise _bomb("snappy", limit, position)
        out = bytearray(size)
        _snappy_into(view, out, 0, size, position)
        return out
    if len(view) < 16:
        raise RecordDecompressionError("xerial snappy header is truncated", position=position)
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = 16
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise RecordDecompressionError("xerial snappy block length is truncated", position=position)
        (n,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise RecordDecompressionError(
                f"xerial snappy block of {n} bytes is truncated", position=position
            )
        block = view[pos : pos + n]
        pos += n
        size = cramjam.snappy.decompress_raw_len(block)
        total += size
        if total > limit:
            raise _bomb("snappy", limit, position)
        blocks.append((block, size))
    out = bytearray(total)  # every block's size is known: decompressed in place, no piece held twice
    at = 0
    for block, size in blocks:
        _snappy_into(block, out, at, size, position)
        at += size
    return out


def _snappy_into(block: memoryview, out: bytearray, at: int, size: int, position: int | None) -> None:
    if cramjam.snappy.decompress_raw_into(block, memoryview(out)[at : at + size]) != size:
        raise RecordDecompressionError("snappy block is shorter than its header says", position=position)


def _unlz4(
    data: bytes | bytearray | memoryview, limit: int, position: int | None, fix_header: bool
) -> bytes | bytearray:
    payload = bytes(data)
    if fix_header:
        payload = _repair_lz4_header_checksum(payload)
    d = lz4.frame.LZ4FrameDecompressor()
    out = bytearray()
    pending = payload
    while True:
        piece = d.decompress(pending, max_length=min(_PIECE, limit + 1 - len(out)))
        pending = b""
        if not out and d.eof and len(piece) <= limit:
            return bytes(piece)  # the whole frame in one piece (bytes already: no copy)
        out += piece
        del piece
        if len(out) > limit:
            raise _bomb("lz4", limit, position)
        if d.eof:
            return out
        if d.needs_input:
            raise RecordDecompressionError("lz4 frame is truncated", position=position)


def _repair_lz4_header_checksum(frame: bytes) -> bytes:
    """Replace the header checksum of a magic-0 LZ4 frame (Kafka hashed the wrong bytes before 0.10).

    The correct checksum for the frame's FLG/BD bytes is taken from a frame that ``lz4.frame`` writes
    with the same flags, so no hash is computed here.
    """
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        return frame
    flg, bd = frame[4], frame[5]
    if flg & 0x08:  # content size present: the descriptor is longer; leave it to the library
        return frame
    correct = _lz4_header_checksum(flg, bd)
    if correct is None:
        return frame
    return frame[:6] + bytes((correct,)) + frame[7:]


@cache
def _lz4_header_checksum(flg: int, bd: int) -> int | None:
    sizes = {
        4: lz4.frame.BLOCKSIZE_MAX64KB,
        5: lz4.frame.BLOCKSIZE_MAX256KB,
        6: lz4.frame.BLOCKSIZE_MAX1MB,
        7: lz4.frame.BLOCKSIZE_MAX4MB,
    }
    size = sizes.get((bd >> 4) & 7)
    if size is None:
        return None
    sample = lz4.frame.compress(
        b"",
        block_size=size,
        block_linked=not (flg & 0x20),
        block_checksum=bool(flg & 0x10),
        content_checksum=bool(flg & 0x04),
        store_size=False,
    )
    if sample[4] != flg or sample[5] != bd:
        return None
    return int(sample[6])


def _unzstd(data: bytes | bytearray | memoryview, limit: int, position: int | None) -> bytes | bytearray:
    payload = bytes(data)
    _check_zstd_frames_complete(payload, position)
    reader = _zstd_decompressor().stream_reader(io.BytesIO(payload), read_across_frames=True)
    first = reader.read(min(_PIECE, limit + 1))
    piece = reader.read(min(_PIECE, limit + 1 - len(first))) if first else b""
    if not piece:
        if len(first) > limit:
            raise _bomb("zstd", limit, position)
        return first  # the whole payload in one piece: no copy
    out = bytearray(first)
    del first
    while piece:
        out += piece
        del piece
        if len(out) > limit:
            raise _bomb("zstd", limit, position)
        piece = reader.read(min(_PIECE, limit + 1 - len(out)))
    return out


_ZSTD_LOCAL = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (building one costs ~0.1 ms, more than a 16 KiB batch's decompression; a
    decompressor is not safe to share between threads, and each use here reads its stream to the end)."""
    d: zstandard.ZstdDecompressor | None = getattr(_ZSTD_LOCAL, "d", None)
    if d is None:
        d = _ZSTD_LOCAL.d = zstandard.ZstdDecompressor()
    return d


def _check_zstd_frames_complete(payload: bytes, position: int | None) -> None:
    """Walk the zstd frame and block headers: a truncated payload is an error, not a short result.

    (``zstandard``'s bounded stream reader returns what it could decode from a truncated frame without
    complaint.) Only container headers are read here; the blocks are decoded by the library.
    """
    pos = 0
    end = len(payload)
    if end == 0:
        raise RecordDecompressionError("zstd payload is empty", position=position)
    while pos < end:
        if end - pos >= 8 and payload[pos + 1 : pos + 4] == b"\x2a\x4d\x18" and payload[pos] & 0xF0 == 0x50:
            (skip,) = struct.unpack_from("<I", payload, pos + 4)  # skippable frame
            pos += 8 + skip
            continue
        header = payload[pos:]
        params = zstandard.get_frame_parameters(header)
        pos += zstandard.frame_header_size(header)
        while True:
            if end - pos < 3:
                raise RecordDecompressionError("zstd frame is truncated", position=position)
            bh = payload[pos] | (payload[pos + 1] << 8) | (payload[pos + 2] << 16)
            pos += 3
            btype = (bh >> 1) & 3
            bsize = bh >> 3
            pos += 1 if btype == 1 else bsize
            if btype == 3:
                raise RecordDecompressionError("zstd block type is reserved", position=position)
            if bh & 1:
                break
        if params.has_checksum:
            pos += 4
        if pos > end:
            raise RecordDecompressionError("zstd frame is truncated", position=position)
