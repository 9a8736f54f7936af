from __future__ import annotations

import gzip
import os
import struct
import tracemalloc
from collections.abc import Callable

import cramjam
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import DecompressionBombError, RecordDecompressionError, UnsupportedCompressionTypeError
from kafkalog.records.compression import Compression, compress, decompress, decompressed_size_at_most


@given(st.sampled_from(list(Compression)), st.binary(max_size=200_000))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_bomb_is_refused_with_bounded_output(codec: Compression) -> None:
    payload = compress(codec, bytes(8 * 1024 * 1024))
    assert len(payload) < 1024 * 1024
    with pytest.raises(DecompressionBombError, match="max_decompressed_bytes"):
        decompress(codec, payload, 1024 * 1024, position=123)
    assert decompress(codec, payload, 8 * 1024 * 1024) == bytes(8 * 1024 * 1024)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_truncated_payload_raises(codec: Compression) -> None:
    data = os.urandom(50_000) * 3
    payload = compress(codec, data)
    for cut in (0, 1, 9, len(payload) // 2, len(payload) - 1):
        with pytest.raises(RecordDecompressionError):
            decompress(codec, payload[:cut], position=7)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_garbage_raises_typed_error(codec: Compression) -> None:
    with pytest.raises(RecordDecompressionError):
        decompress(codec, b"\x00\x01garbage-not-a-stream" * 3)


def test_snappy_writes_xerial_framing_and_reads_raw() -> None:
    data = os.urandom(100_000)
    framed = compress(Compression.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # 32 KiB input blocks, as snappy-java's SnappyOutputStream writes them.
    (first_block,) = struct.unpack_from(">i", framed, 16)
    assert bytes(cramjam.snappy.decompress_raw(framed[20 : 20 + first_block])) == data[: 32 * 1024]
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Compression.SNAPPY, raw) == data


def test_gzip_reads_concatenated_members_and_standard_streams() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_zstd_without_content_size_and_with_checksum() -> None:
    data = os.urandom(10_000) * 4
    frame = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(data)
    assert decompress(Compression.ZSTD, frame) == data


def test_lz4_legacy_header_checksum_is_repaired() -> None:
    data = b"kafka" * 1000
    frame = compress(Compression.LZ4, data)
    broken = frame[:6] + bytes((frame[6] ^ 0xFF,)) + frame[7:]
    with pytest.raises(RecordDecompressionError):
        decompress(Compression.LZ4, broken)
    assert decompress(Compression.LZ4, broken, legacy_magic=0) == data


def test_codec_names_and_ids() -> None:
    assert Compression.from_name("uncompressed") is Compression.NONE
    assert Compression.from_name("ZSTD") is Compression.ZSTD
    assert [c.kafka_name for c in Compression] == ["none", "gzip", "snappy", "lz4", "zstd"]
    with pytest.raises(UnsupportedCompressionTypeError):
        Compression.from_id(5)
    with pytest.raises(UnsupportedCompressionTypeError):
        Compression.from_name("brotli")
    with pytest.raises(UnsupportedCompressionTypeError):
        decompress(7, b"")


_MIB = 1024 * 1024


def _peak_of(fn: Callable[[], object]) -> int:
    """Peak bytes Python allocated while ``fn`` ran (its result dropped before measuring ends)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompression_holds_its_output_once(codec: Compression) -> None:
    """Issue #19 item 5: a bomb used to peak at twice the bound (the output copied into a second buffer);
    within and at the bound the output is held once, plus at most one 4 MiB piece (and the growth margin of
    the output buffer that tracemalloc counts, 1/8, which the kernel never backs with pages)."""
    payload = compress(codec, bytes(48 * _MIB))
    limit = 32 * _MIB

    def bomb() -> None:
        with pytest.raises(DecompressionBombError):
            decompress(codec, payload, limit)

    assert _peak_of(bomb) < limit * 1.25 + 5 * _MIB
    assert _peak_of(lambda: decompress(codec, payload, 64 * _MIB)) < 48 * _MIB * 1.25 + 5 * _MIB
    assert decompress(codec, payload, 48 * _MIB) == bytes(48 * _MIB)


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decompressed_size_at_most_is_exact_up_to_its_limit(codec: Compression) -> None:
    data = os.urandom(3000) * 100
    payload = compress(codec, data)
    assert decompressed_size_at_most(codec, payload, 1 << 20) == len(data)
    assert decompressed_size_at_most(codec, payload, len(data)) == len(data)
    assert decompressed_size_at_most(codec, payload, 1000) == 1001  # "more than the limit"
    assert decompressed_size_at_most(codec, compress(codec, bytes(64 * _MIB)), 1000) == 1001
    assert decompressed_size_at_most(codec, b"\x00\x01not a stream", 1000) <= 1000
    assert decompressed_size_at_most(Compression.NONE, data, 10) == 11


def test_gzip_bomb_in_one_member_and_across_members() -> None:
    one = compress(Compression.GZIP, bytes(5 * _MIB))
    with pytest.raises(DecompressionBombError):
        decompress(Compression.GZIP, one, 5 * _MIB - 1)
    assert decompress(Compression.GZIP, one + one, 10 * _MIB) == bytes(10 * _MIB)
    with pytest.raises(DecompressionBombError):
        decompress(Compression.GZIP, one + one, 10 * _MIB - 1)
    with pytest.raises(RecordDecompressionError, match="truncated"):
        decompress(Compression.GZIP, one[:-9], 10 * _MIB)
