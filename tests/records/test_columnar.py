"""Tests of the columnar v2 decoder (``kafkalog.records.columnar``) and its kernels (``_kernels*``).

Reference data comes from three independent places: the golden vectors of kafka-log.md §2.2 (generated with
kafka-clients 3.9.1), kafka-python's pure-Python v2 codec (``DefaultRecordBatchBuilder`` to write,
``MemoryRecords`` to read), and a tiny test-local encoder for malformed records that no codec would write.
The fuzz tests assert the safety contract: corrupt input raises a kafkalog error or decodes a correct prefix,
never crashes, never raises anything else, and with CRC checks on never returns altered data.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import random
import struct
import threading
from collections.abc import Iterator
from typing import Any

import cramjam
import crc32c
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkalog.errors import (
    CorruptRecordError,
    DecompressionBombError,
    InvalidRecordError,
    KafkaError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from kafkalog.records import _kernels as K
from kafkalog.records._kernels_index import index_records
from kafkalog.records.columnar import (
    SCHEMA,
    SCHEMA_WITHOUT_HEADERS,
    BufferPool,
    decode_columnar,
    iter_columnar,
)

TS = 1_700_000_000_000
SAFE_ERRORS = (
    CorruptRecordError,
    InvalidRecordError,
    UnsupportedForMessageFormatError,
    UnsupportedCompressionTypeError,
)

# --- golden vectors (kafka-log.md §2.2) ---------------------------------------------------------------------

GOLDEN_ONE = bytes.fromhex(
    "0000000000000000 00000039 00000000 02 965a94b1 0000 00000000 0000018bcfe56800 0000018bcfe56800"
    "ffffffffffffffff ffff ffffffff 00000001 0e 00 00 00 01 02 61 00"
)
GOLDEN_TWO = bytes.fromhex(
    "0000000000000005 0000004b 00000007 02 8ee4dd0f 0000 00000001 0000018bcfe56800 0000018bcfe56803"
    "ffffffffffffffff ffff ffffffff 00000002 14 00 00 00 04 6b31 04 7631 00 1c 00 06 02 04 6b32 04 7632 02 02 68 02 78"
)
GOLDEN_COMMIT = bytes.fromhex(
    "000000000000000a 00000042 00000000 02 8a773c25 0030 00000000 0000018bcfe56800 0000018bcfe56800"
    "00000000000003e8 0003 ffffffff 00000001 20 00 00 00 08 0000 0001 0c 0000 00000005 00"
)
GOLDEN_V1 = bytes.fromhex("0000000000000000 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b 00000001 76")
GOLDEN_V0 = bytes.fromhex("0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76")


def rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return batch.to_pylist()


def test_golden_vector_sizes_and_crcs() -> None:
    assert (len(GOLDEN_ONE), len(GOLDEN_TWO), len(GOLDEN_COMMIT)) == (69, 87, 78)
    for vec in (GOLDEN_ONE, GOLDEN_TWO, GOLDEN_COMMIT):
        assert crc32c.crc32c(vec[21:]) == struct.unpack_from(">I", vec, 17)[0]


def test_golden_single_record() -> None:
    batch = decode_columnar(GOLDEN_ONE)
    assert batch.schema.equals(SCHEMA)
    assert rows(batch) == [
        {"offset": 0, "timestamp": TS, "timestampType": 0, "key": None, "value": b"a", "headers": None}
    ]


def test_golden_two_records_with_header() -> None:
    batch = decode_columnar(GOLDEN_TWO)
    batch.validate(full=True)
    assert rows(batch) == [
        {"offset": 5, "timestamp": TS, "timestampType": 0, "key": b"k1", "value": b"v1", "headers": None},
        {
            "offset": 6,
            "timestamp": TS + 3,
            "timestampType": 0,
            "key": b"k2",
            "value": b"v2",
            "headers": [{"key": "h", "value": b"x"}],
        },
    ]


def test_golden_control_batch_is_skipped_but_crc_checked() -> None:
    assert decode_columnar(GOLDEN_COMMIT).num_rows == 0
    concat = GOLDEN_ONE + GOLDEN_TWO + GOLDEN_COMMIT
    assert [r["offset"] for r in rows(decode_columnar(concat))] == [0, 5, 6]
    bad = bytearray(GOLDEN_COMMIT)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_columnar(bytes(bad))


@pytest.mark.parametrize("legacy", [GOLDEN_V1, GOLDEN_V0])
def test_golden_legacy_formats_are_reported(legacy: bytes) -> None:
    with pytest.raises(UnsupportedForMessageFormatError) as info:
        decode_columnar(GOLDEN_ONE + legacy)
    assert info.value.position == len(GOLDEN_ONE)
    assert "magic" in str(info.value)


def test_scan_batches_reads_every_header_field() -> None:
    buf = K.as_uint8(GOLDEN_TWO + GOLDEN_COMMIT)
    scan = K.scan_batches(buf)
    assert (scan.n, scan.next_pos, scan.code) == (2, len(buf), K.SCAN_END)
    fields = dict(zip(K.BATCH_FIELDS, scan.table[:, 0].tolist()))
    assert fields == {
        "pos": 0,
        "size": 87,
        "base_offset": 5,
        "partition_leader_epoch": 7,
        "crc": 0x8EE4DD0F,
        "attributes": 0,
        "last_offset_delta": 1,
        "base_timestamp": TS,
        "max_timestamp": TS + 3,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "record_count": 2,
    }
    control = dict(zip(K.BATCH_FIELDS, scan.table[:, 1].tolist()))
    assert (control["attributes"], control["producer_id"], control["producer_epoch"]) == (0x30, 1000, 3)
    bad, computed = K.verify_crcs(buf, scan.table, scan.n)
    assert bad == -1 and computed.tolist() == [0x8EE4DD0F, 0x8A773C25]


def test_index_records_contract() -> None:
    buf = K.as_uint8(GOLDEN_TWO)
    idx = index_records(buf, 61, len(GOLDEN_TWO), 2, base_offset=5, base_timestamp=TS)
    assert idx.offsets.tolist() == [5, 6] and idx.timestamps.tolist() == [TS, TS + 3]
    key = [bytes(GOLDEN_TWO[p : p + n]) for p, n in zip(idx.key_pos.tolist(), idx.key_len.tolist())]
    value = [bytes(GOLDEN_TWO[p : p + n]) for p, n in zip(idx.value_pos.tolist(), idx.value_len.tolist())]
    assert key == [b"k1", b"k2"] and value == [b"v1", b"v2"]
    assert idx.header_count.tolist() == [0, 1] and idx.header_start.tolist() == [0, 0]
    assert idx.record_pos.tolist() == [61, 72] and idx.record_size.tolist() == [11, 15]
    h = int(idx.header_start[1])
    hk, hkl = int(idx.header_key_pos[h]), int(idx.header_key_len[h])
    hv, hvl = int(idx.header_value_pos[h]), int(idx.header_value_len[h])
    assert (GOLDEN_TWO[hk : hk + hkl], GOLDEN_TWO[hv : hv + hvl]) == (b"h", b"x")
    lat = index_records(buf, 61, len(GOLDEN_TWO), 2, base_timestamp=TS, log_append_time=42)
    assert lat.timestamps.tolist() == [42, 42] and lat.offsets.tolist() == [0, 1]
    one = index_records(K.as_uint8(GOLDEN_ONE), 61, len(GOLDEN_ONE), 1)
    assert one.key_len.tolist() == [-1] and one.value_len.tolist() == [1]
    with pytest.raises(InvalidRecordError):
        index_records(buf, 61, len(GOLDEN_TWO), 1)  # count lies: bytes left over
    with pytest.raises(InvalidRecordError):
        index_records(buf, 61, len(GOLDEN_TWO), 3)  # count lies: records end early


def test_warm_up_loads_every_kernel() -> None:
    assert K.warm_up() >= 0.0
    assert K.NATIVE_CRC  # the crc32c extension exports its hardware routine on this platform


def test_index_records_many_headers_grows_header_arrays() -> None:
    recs = record(0, 0, b"k", b"v", [(f"h{i}", b"x") for i in range(50)])
    buf = K.as_uint8(recs)
    idx = index_records(buf, 0, len(recs), 1)
    assert idx.header_count.tolist() == [50] and len(idx.header_key_pos) == 50
    assert bytes(recs[idx.header_key_pos[49] : idx.header_key_pos[49] + idx.header_key_len[49]]) == b"h49"


# --- builders: kafka-python for valid batches, a tiny local encoder for malformed ones ----------------------


def kp_batch(
    records: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    *,
    base_offset: int = 0,
    codec: int = 0,
    log_append_time: int | None = None,
) -> bytes:
    """A v2 batch written by kafka-python; records are (offset_delta, timestamp, key, value, headers)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset_delta, ts, key, value, headers in records:
        builder.append(offset_delta, timestamp=ts, key=key, value=value, headers=headers)
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    if log_append_time is not None:  # as a broker does: set the attribute and maxTimestamp, re-CRC
        attrs = struct.unpack_from(">h", buf, 21)[0] | 0x08
        struct.pack_into(">h", buf, 21, attrs)
        struct.pack_into(">q", buf, 35, log_append_time)
        struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def kp_expected(data: bytes) -> list[dict[str, Any]]:
    """What kafka-python's reader sees, in the columnar row shape (control batches skipped)."""
    out: list[dict[str, Any]] = []
    mr = MemoryRecords(data)
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        if batch.is_control_batch:
            continue
        for r in batch:
            headers = [{"key": k, "value": v} for k, v in r.headers] or None
            out.append(
                {
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "timestampType": r.timestamp_type,
                    "key": r.key,
                    "value": r.value,
                    "headers": headers,
                }
            )
    return out


def varint(v: int) -> bytes:
    z = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(
    ts_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] = (),  # type: ignore[assignment]
    *,
    body_fix: int = 0,
) -> bytes:
    def blob(b: bytes | None) -> bytes:
        return varint(-1) if b is None else varint(len(b)) + b

    body = b"\x00" + varint(ts_delta) + varint(offset_delta) + blob(key) + blob(value) + varint(len(headers))
    for hk, hv in headers:
        body += blob(hk.encode()) + blob(hv)
    return varint(len(body) + body_fix) + body


def raw_batch(
    records_bytes: bytes,
    count: int,
    *,
    base_offset: int = 0,
    attrs: int = 0,
    base_ts: int = TS,
    max_ts: int = TS,
    magic: int = 2,
) -> bytes:
    """A v2 batch around arbitrary records bytes, with a correct CRC."""
    after_crc = (
        struct.pack(">hiqqqhii", attrs, max(count - 1, 0), base_ts, max_ts, -1, -1, -1, count) + records_bytes
    )
    head = struct.pack(">qiibI", base_offset, len(after_crc) + 9, 0, magic, crc32c.crc32c(after_crc))
    return head + after_crc


def xerial_snappy(payload: bytes, block: int = 1 << 15) -> bytes:
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(payload), block):
        c = bytes(cramjam.snappy.compress_raw(payload[i : i + block]))
        out += struct.pack(">i", len(c)) + c
    return bytes(out)


def recompress(batch: bytes, codec: int, compressed_records: bytes) -> bytes:
    """Replace an uncompressed batch's records by ``compressed_records``, set the codec, fix length and CRC."""
    head = bytearray(batch[:61])
    struct.pack_into(">h", head, 21, (struct.unpack_from(">h", head, 21)[0] & ~7) | codec)
    struct.pack_into(">i", head, 8, 61 + len(compressed_records) - 12)
    out = bytes(head) + compressed_records
    return out[:17] + struct.pack(">I", crc32c.crc32c(out[21:])) + out[21:]


def test_local_encoder_matches_golden() -> None:
    recs = record(0, 0, b"k1", b"v1") + record(3, 1, b"k2", b"v2", [("h", b"x")])
    assert recs == GOLDEN_TWO[61:]


# --- cross-check against kafka-python on generated data -----------------------------------------------------

blobs = st.one_of(st.none(), st.binary(max_size=40))
header_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6)
headers_st = st.lists(st.tuples(header_keys, blobs), max_size=3)


@st.composite
def batch_specs(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    deltas = list(np.cumsum(gaps) - gaps[0])
    ts0 = draw(st.integers(-(2**40), 2**45))
    records = [
        (int(d), ts0 + draw(st.integers(-(2**33), 2**33)), draw(blobs), draw(blobs), draw(headers_st))
        for d in deltas
    ]
    return {
        "records": records,
        "codec": draw(st.sampled_from([0, 0, 1, 3, 4])),
        "log_append_time": draw(st.one_of(st.none(), st.integers(0, 2**45))),
    }


def build_log(specs: list[dict[str, Any]], first_offset: int = 0) -> bytes:
    out = b""
    base = first_offset
    for spec in specs:
        out += kp_batch(
            spec["records"], base_offset=base, codec=spec["codec"], log_append_time=spec["log_append_time"]
        )
        base += spec["records"][-1][0] + 1 + 5  # leave an offset gap between batches too
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs(), min_size=1, max_size=5), st.integers(0, 2**40))
def test_matches_kafka_python(specs: list[dict[str, Any]], first_offset: int) -> None:
    data = build_log(specs, first_offset)
    expected = kp_expected(data)
    batch = decode_columnar(data)
    batch.validate(full=True)
    assert rows(batch) == expected
    no_headers = decode_columnar(data, include_headers=False)
    assert no_headers.schema.equals(SCHEMA_WITHOUT_HEADERS)
    assert rows(no_headers) == [{k: v for k, v in r.items() if k != "headers"} for r in expected]
    chunks = list(iter_columnar(data, target_rows=7))
    assert [r for c in chunks for r in rows(c)] == expected
    offsets = [r["offset"] for r in expected]
    lo, hi = offsets[len(offsets) // 3], offsets[-1]
    window = decode_columnar(data, start_offset=lo, end_offset=hi)
    assert rows(window) == [r for r in expected if lo <= r["offset"] < hi]


def test_snappy_xerial_and_raw() -> None:
    recs = [(i, TS + i, b"key%d" % i, b"value-%d" % i * 50, [("h", b"v")]) for i in range(300)]
    plain = kp_batch(recs, base_offset=100)
    expected = rows(decode_columnar(plain))
    framed = recompress(plain, 2, xerial_snappy(plain[61:], block=4096))
    assert rows(decode_columnar(framed)) == expected
    raw = recompress(plain, 2, bytes(cramjam.snappy.compress_raw(plain[61:])))
    assert rows(decode_columnar(raw)) == expected


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_compressed_codecs_match_uncompressed(codec: int) -> None:
    recs = [(i, TS + i, b"k", b"v" * 200, []) for i in range(100)]
    packed = kp_batch(recs, codec=codec)
    assert struct.unpack_from(">h", packed, 21)[0] & 7 == codec
    assert rows(decode_columnar(packed)) == rows(decode_columnar(kp_batch(recs)))


def test_decompression_bomb_is_bounded() -> None:
    recs = [(i, TS, None, bytes(10_000), []) for i in range(50)]
    packed = kp_batch(recs, codec=1)
    with pytest.raises(DecompressionBombError) as info:
        decode_columnar(packed, max_decompressed_bytes=100_000)
    assert info.value.position == 0
    assert decode_columnar(packed, max_decompressed_bytes=1_000_000).num_rows == 50


def test_unknown_codec() -> None:
    batch = recompress(kp_batch([(0, TS, b"k", b"v", [])]), 5, b"garbage")
    with pytest.raises(UnsupportedCompressionTypeError):
        decode_columnar(batch)


def test_corrupt_compressed_payload_raises_decompression_error() -> None:
    batch = recompress(kp_batch([(0, TS, b"k", b"v", [])]), 4, b"\x28\xb5\x2f\xfd garbage")
    with pytest.raises(CorruptRecordError):  # RecordDecompressionError is a CorruptRecordError
        decode_columnar(batch)


def test_log_append_time() -> None:
    data = kp_batch([(0, TS, b"a", b"1", []), (1, TS - 5, b"b", b"2", [])], log_append_time=TS + 1000)
    got = rows(decode_columnar(data))
    assert [(r["timestamp"], r["timestampType"]) for r in got] == [(TS + 1000, 1), (TS + 1000, 1)]
    assert got == kp_expected(data)


def test_extreme_varints() -> None:
    recs = record(-(2**63), 2**31 - 1, b"", b"") + record(2**63 - 1, -(2**31), None, None)
    data = raw_batch(recs, 2, base_offset=2**40, base_ts=0)
    got = rows(decode_columnar(data))
    assert [r["timestamp"] for r in got] == [-(2**63), 2**63 - 1]
    assert [r["offset"] for r in got] == [2**40 + 2**31 - 1, 2**40 - 2**31]
    assert [(r["key"], r["value"]) for r in got] == [(b"", b""), (None, None)]


def test_invalid_utf8_header_key_is_replaced_like_kafka() -> None:
    body = (
        b"\x00"
        + varint(0)
        + varint(0)
        + varint(-1)
        + varint(-1)
        + varint(1)
        + varint(2)
        + b"\xff\xfe"
        + varint(-1)
    )
    data = raw_batch(varint(len(body)) + body, 1)
    (row,) = rows(decode_columnar(data))
    assert row["headers"] == [{"key": "\ufffd\ufffd", "value": None}]


# --- framing, offsets, inputs ---------------------------------------------------------------------------------


def sample_log(batches: int = 6, per_batch: int = 5, headers: int = 1) -> bytes:
    specs = [
        {
            "records": [
                (i, TS + b * 10 + i, b"k%d" % i, b"v%d-%d" % (b, i), [("h", b"x")] * headers)
                for i in range(per_batch)
            ],
            "codec": 0,
            "log_append_time": None,
        }
        for b in range(batches)
    ]
    return build_log(specs)


def test_inputs_of_every_buffer_type(tmp_path: Any) -> None:
    data = sample_log()
    expected = rows(decode_columnar(data))
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert rows(decode_columnar(mm)) == expected
    for source in (
        bytearray(data),
        memoryview(data),
        np.frombuffer(data, np.uint8),
        np.frombuffer(data, np.uint8).copy(),
    ):
        assert rows(decode_columnar(source)) == expected


def test_offset_window_starts_at_containing_batch_and_stops_early() -> None:
    data = sample_log(batches=4, per_batch=5)  # bases 0, 10, 20, 30 (gaps of 5 between batches)
    got = rows(decode_columnar(data, start_offset=12, end_offset=22))
    assert [r["offset"] for r in got] == [12, 13, 14, 20, 21]
    corrupt_tail = data + b"\x00" * 12 + struct.pack(">i", 3) + b"\x02" * 8  # bad frame after the window
    assert [r["offset"] for r in rows(decode_columnar(corrupt_tail, end_offset=25))][-1] == 24
    with pytest.raises(CorruptRecordError):
        decode_columnar(corrupt_tail)


def test_partial_tail() -> None:
    data = sample_log(batches=3)
    full = rows(decode_columnar(data))
    cut = data[: len(data) - 7]
    assert rows(decode_columnar(cut)) == full[:10]
    assert rows(decode_columnar(data[:16])) == []
    with pytest.raises(CorruptRecordError, match="truncated") as info:
        decode_columnar(cut, allow_partial_tail=False)
    assert info.value.position == len(sample_log(batches=2))
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(iter_columnar(cut, allow_partial_tail=False))


def test_empty_input() -> None:
    assert decode_columnar(b"").num_rows == 0
    assert decode_columnar(b"", include_headers=False).schema.equals(SCHEMA_WITHOUT_HEADERS)
    assert list(iter_columnar(b"")) == []


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (struct.pack(">qi", 0, 13) + b"\x00" * 13, CorruptRecordError),  # batchLength < 14
        (struct.pack(">qii", 0, 40, 0) + b"\x02" + b"\x00" * 39, CorruptRecordError),  # v2 smaller than 61
        (struct.pack(">qii", 0, 40, 0) + b"\x07" + b"\x00" * 39, CorruptRecordError),  # unknown magic
        (struct.pack(">qii", 0, 40, 0) + b"\xfe" + b"\x00" * 39, CorruptRecordError),  # negative magic
        (GOLDEN_V1, UnsupportedForMessageFormatError),
    ],
)
def test_framing_errors(frame: bytes, error: type[Exception]) -> None:
    with pytest.raises(error) as info:
        decode_columnar(GOLDEN_TWO + frame)
    assert info.value.position == len(GOLDEN_TWO)  # type: ignore[attr-defined]


def test_iter_yields_prefix_before_error() -> None:
    good = sample_log(batches=4)
    data = good + struct.pack(">qi", 0, 3) + b"\x00" * 8
    got: list[dict[str, Any]] = []
    with pytest.raises(CorruptRecordError):
        for chunk in iter_columnar(data, target_rows=5):
            got.extend(rows(chunk))
    assert got == rows(decode_columnar(good))


def test_iter_chunks_are_bounded() -> None:
    data = sample_log(batches=20, per_batch=7)
    chunks = list(iter_columnar(data, target_rows=15))
    assert all(c.num_rows <= 15 + 7 for c in chunks) and len(chunks) > 5
    assert sum(c.num_rows for c in chunks) == 140
    small = list(iter_columnar(data, target_bytes=1))
    assert [c.num_rows for c in small] == [7] * 20


# --- malformed records (CRC correct, structure broken) ------------------------------------------------------

GOOD_REC = record(0, 0, b"k", b"v")


def _body(*parts: bytes) -> bytes:
    body = b"".join(parts)
    return varint(len(body)) + body


MALFORMED = {
    "key past record": _body(b"\x00", varint(0), varint(0), varint(50), b"ab", varint(-1), varint(0)),
    "header count -1": _body(b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(-1)),
    "header count too big": _body(
        b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(9), b"\x00\x00"
    ),
    "header key -1": _body(
        b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(1), varint(-1), varint(-1)
    ),
    "body longer than fields": record(0, 0, b"k", b"v", body_fix=+1) + b"\x00",
    "body shorter than fields": record(0, 0, b"k", b"v", body_fix=-1),
    "varint of 6 bytes": _body(
        b"\x00", varint(0), b"\x80\x80\x80\x80\x80\x00", varint(-1), varint(-1), varint(0)
    ),
    "varlong of 11 bytes": _body(
        b"\x00", b"\x80" * 10 + b"\x00", varint(0), varint(-1), varint(-1), varint(0)
    ),
    "varint cut by record end": _body(b"\x00", varint(0), varint(0), varint(-1), b"\x80"),
    "empty body": _body(),
    "negative record length": varint(-5) + b"\x00" * 6,
    "record length past batch": varint(1000) + b"\x00" * 6,
}


#: Negative lengths other than -1: Kafka's DefaultRecord reads any negative length as null, and so do we.
NEGATIVE_AS_NULL = {
    "key length -2": _body(b"\x00", varint(0), varint(0), varint(-2), varint(-1), varint(0)),
    "value length -3": _body(b"\x00", varint(0), varint(0), varint(-1), varint(-3), varint(0)),
    "header value -2": _body(
        b"\x00", varint(0), varint(0), varint(-1), varint(-1), varint(1), varint(0), varint(-2)
    ),
}


@pytest.mark.parametrize("name", sorted(NEGATIVE_AS_NULL))
def test_negative_lengths_read_as_null(name: str) -> None:
    data = GOLDEN_ONE + raw_batch(GOOD_REC + NEGATIVE_AS_NULL[name], 2, base_offset=1)
    table = decode_columnar(data)
    assert table.num_rows == 3
    row = table.slice(2, 1).to_pylist()[0]
    assert row["key"] is None and row["value"] is None
    if name.startswith("header"):
        assert row["headers"] == [{"key": "", "value": None}]


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_records_raise_invalid_record(name: str) -> None:
    data = GOLDEN_ONE + raw_batch(GOOD_REC + MALFORMED[name], 2, base_offset=1)
    with pytest.raises(InvalidRecordError) as info:
        decode_columnar(data)
    assert info.value.position is not None and len(GOLDEN_ONE) <= info.value.position <= len(data)
    buf = K.as_uint8(data)
    with pytest.raises(InvalidRecordError):
        index_records(buf, len(GOLDEN_ONE) + 61, len(data), 2)


@pytest.mark.parametrize(
    ("count", "extra"),
    [
        (1, GOOD_REC),
        (3, b""),
        (-1, b""),
        (2**31 - 1, b""),
    ],  # bytes left over; too few records; negative; bomb
)
def test_record_count_lies(count: int, extra: bytes) -> None:
    data = raw_batch(GOOD_REC + GOOD_REC + extra, count)
    with pytest.raises(InvalidRecordError):
        decode_columnar(data)
    with pytest.raises(InvalidRecordError):
        list(iter_columnar(data))


def test_record_attributes_are_ignored() -> None:
    rec = bytearray(GOOD_REC)
    rec[1] = 0xFF
    assert rows(decode_columnar(raw_batch(bytes(rec), 1))) == rows(decode_columnar(raw_batch(GOOD_REC, 1)))


# --- corruption fuzz -----------------------------------------------------------------------------------------


def _decode_or_error(data: Any, **kw: Any) -> list[dict[str, Any]] | KafkaError:
    try:
        batch = decode_columnar(data, **kw)
    except SAFE_ERRORS as exc:
        return exc
    batch.validate(full=True)
    return rows(batch)


def _batch_starts(data: bytes) -> list[int]:
    scan = K.scan_batches(K.as_uint8(data))
    return scan.table[K.F_POS, : scan.n].tolist()


def test_every_single_byte_flip_is_detected_or_harmless() -> None:
    data = sample_log(batches=3, per_batch=3) + kp_batch(
        [(0, TS, b"z", b"z" * 300, [])], base_offset=99, codec=1
    )
    original = rows(decode_columnar(data))
    starts = [*_batch_starts(data), len(data)]
    for pos in range(len(data)):
        b = max(i for i, s in enumerate(starts) if s <= pos)
        rel = pos - starts[b]
        corrupt = bytearray(data)
        corrupt[pos] ^= 0x5A
        got = _decode_or_error(bytes(corrupt))
        if rel >= 17:  # CRC field or CRC-covered bytes: must be caught by the CRC
            assert isinstance(got, CorruptRecordError) and "CRC" in str(got), (pos, got)
        elif 12 <= rel < 16:  # partitionLeaderEpoch: not in the output
            assert got == original, pos
        elif rel == 16:  # magic
            assert isinstance(got, KafkaError), pos
        elif 8 <= rel < 12:  # batchLength: an error or a strict prefix
            assert isinstance(got, KafkaError) or got == original[: len(got)], pos
        else:  # baseOffset is not covered by any checksum in Kafka: only this batch's offsets move
            assert isinstance(got, list) and len(got) == len(original), pos
            moved = [i for i, (g, o) in enumerate(zip(got, original)) if g["offset"] != o["offset"]]
            assert moved and all({**g, "offset": 0} == {**o, "offset": 0} for g, o in zip(got, original)), pos


def _mutations(data: bytes, rnd: random.Random) -> Iterator[tuple[bytes, bool]]:
    """Random byte overwrites, sometimes followed by a truncation; yields (bytes, truncated)."""
    for _ in range(rnd.randint(1, 4)):
        buf = bytearray(data)
        for _ in range(rnd.randint(1, 6)):
            buf[rnd.randrange(len(buf))] = rnd.randrange(256)
        truncated = rnd.random() < 0.3
        if truncated:
            del buf[rnd.randrange(len(buf)) :]
        yield bytes(buf), truncated


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs(), min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_fuzz_with_crc_never_returns_wrong_data(specs: list[dict[str, Any]], rnd: random.Random) -> None:
    data = build_log(specs)
    original = [{**r, "offset": 0} for r in rows(decode_columnar(data))]
    starts = _batch_starts(data)
    for corrupt, truncated in _mutations(data, rnd):
        got = _decode_or_error(corrupt)
        changed = [i for i in range(len(corrupt)) if corrupt[i] != data[i]]
        only_checked = all(i - max(s for s in starts if s <= i) >= 17 for i in changed)
        if changed and only_checked and not truncated:  # every change is in a CRC or CRC-covered byte
            assert isinstance(got, CorruptRecordError), got
        if isinstance(
            got, list
        ):  # unchecked bytes (baseOffset, length, epoch) may move offsets or cut the log
            assert [{**r, "offset": 0} for r in got] == original[: len(got)]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_specs(), min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_fuzz_without_crc_is_memory_safe(specs: list[dict[str, Any]], rnd: random.Random) -> None:
    data = build_log(specs)
    for corrupt, _ in _mutations(data, rnd):
        for kw in ({"verify_crc": False}, {"verify_crc": False, "include_headers": False}):
            got = _decode_or_error(corrupt, **kw)  # anything but a kafkalog error or valid Arrow data fails
            assert isinstance(got, (list, KafkaError))


def test_fuzz_record_bytes_without_crc() -> None:
    """Random bytes as records (CRC recomputed, so the record parser itself must catch everything)."""
    rnd = random.Random(7)
    seeds = [
        GOOD_REC * 3,
        record(5, 1, b"key", b"value", [("a", b"b"), ("c", None)]) * 2,
        *MALFORMED.values(),
    ]
    for i in range(3000):
        base = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(0, 4)):
            if base:
                base[rnd.randrange(len(base))] = rnd.randrange(256)
        if rnd.random() < 0.2:
            base = bytearray(rnd.randbytes(rnd.randint(0, 40)))
        data = raw_batch(bytes(base), rnd.randint(0, 4), base_offset=i)
        got = _decode_or_error(data)
        assert isinstance(got, (list, KafkaError))
        try:
            index_records(K.as_uint8(data), 61, len(data), struct.unpack_from(">i", data, 57)[0])
        except InvalidRecordError:
            pass


class GuardedBuffer:
    """Bytes placed right before an inaccessible page (and after another): any read outside them faults."""

    PAGE = mmap.PAGESIZE

    def __init__(self, capacity: int) -> None:
        self.data_pages = (capacity + self.PAGE - 1) // self.PAGE
        self.mm = mmap.mmap(-1, (self.data_pages + 2) * self.PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        for page in (0, self.data_pages + 1):
            assert libc.mprotect(base + page * self.PAGE, self.PAGE, 0) == 0  # PROT_NONE

    def place(self, data: bytes) -> memoryview:
        end = (self.data_pages + 1) * self.PAGE
        self.mm[end - len(data) : end] = data
        return memoryview(self.mm)[end - len(data) : end]


def test_guard_pages_catch_any_out_of_bounds_read() -> None:
    """Corrupt inputs end exactly at an inaccessible page: a read past the end would crash the test run."""
    guarded = GuardedBuffer(1 << 16)
    rnd = random.Random(3)
    data = sample_log(batches=3, per_batch=4) + kp_batch([(0, TS, b"k", b"v" * 50, [("h", None)])], codec=4)
    for i in range(2000):
        corrupt = bytearray(data[: rnd.randint(0, len(data))] if i % 3 == 0 else data)
        for _ in range(rnd.randint(0, 5)):
            if corrupt:
                corrupt[rnd.randrange(len(corrupt))] = rnd.randrange(256)
        view = guarded.place(bytes(corrupt))
        for verify in (True, False):
            got = _decode_or_error(view, verify_crc=verify)  # type: ignore[arg-type]
            assert isinstance(got, (list, KafkaError))
        del view


# --- memory: the pool never recycles memory that Arrow still uses -------------------------------------------


def test_pool_reuses_only_released_buffers() -> None:
    pool = BufferPool(min_pooled_bytes=0)
    a_data = sample_log(batches=8, per_batch=20)
    b_data = build_log(
        [
            {
                "records": [(i, TS, b"other", b"O" * 30, [("q", None)]) for i in range(160)],
                "codec": 0,
                "log_append_time": None,
            }
        ]
    )
    a = decode_columnar(a_data, pool=pool)
    a_rows = rows(a)
    for _ in range(3):
        b = decode_columnar(b_data, pool=pool)  # must not write into a's buffers
        assert rows(a) == a_rows
    misses = pool.misses
    del b
    gc.collect()
    decode_columnar(b_data, pool=pool)
    assert pool.hits > 0 and pool.misses == misses  # b's released buffers were reused
    values = a.column("value")
    del a
    gc.collect()
    for _ in range(3):
        decode_columnar(b_data, pool=pool)
    assert values.to_pylist() == [r["value"] for r in a_rows]  # a column outlives its batch safely


def test_no_pool_and_threads() -> None:
    data = sample_log(batches=30, per_batch=10)
    expected = rows(decode_columnar(data, pool=None))
    results: list[list[dict[str, Any]]] = []

    def work() -> None:
        for _ in range(5):
            results.append([r for c in iter_columnar(data, target_rows=25) for r in rows(c)])

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 15 and all(r == expected for r in results)


def test_crc_fallback_path_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the native symbol, CRCs are computed per batch with crc32c.crc32c from Python."""
    data = sample_log(batches=4) + GOLDEN_COMMIT
    expected = rows(decode_columnar(data))
    monkeypatch.setattr(K, "NATIVE_CRC", False)
    assert rows(decode_columnar(data)) == expected
    bad = bytearray(data)
    bad[100] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        decode_columnar(bytes(bad))
