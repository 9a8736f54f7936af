"""Hostile input: random byte flips, truncations and arbitrary bytes never crash, hang or lie.

Every failure must be a typed :class:`kafkalog.errors.KafkaError`; a flip inside the CRC-covered range of
a v2 batch must make that batch invalid (CRC-32C detects every error burst of up to 32 bits).
"""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.errors import KafkaError
from kafkalog.records import Compression, Header, MemoryRecords, SimpleRecord

TS = 1_700_000_000_000
LIMIT = 1 << 20


def _corpus() -> list[bytes]:
    recs = [
        SimpleRecord(
            b"value-%d" % i * (i % 4),
            b"key-%d" % i if i % 3 else None,
            TS + i,
            (Header("h", b"x"),) * (i % 3),
        )
        for i in range(40)
    ]
    out = [MemoryRecords.build(recs, compression=c, base_offset=10).to_bytes() for c in Compression]
    out.append(
        MemoryRecords.build(
            recs[:3], producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True
        ).to_bytes()
    )
    out.append(
        MemoryRecords.end_transaction_marker(
            producer_id=9, producer_epoch=1, control_type="ABORT", coordinator_epoch=2
        ).to_bytes()
    )
    for magic in (0, 1):
        for codec in (0, 1, 3):
            b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
            for i in range(5):
                b.append(i, TS + i, b"k", b"v%d" % i)
            data = bytearray(b.build())
            if codec:
                data[0:8] = (4).to_bytes(8, "big")
            out.append(bytes(data))
    return out


CORPUS = _corpus()


def _exercise(buf: bytes | bytearray) -> None:
    """Read everything there is to read; only typed errors may escape."""
    try:
        recs = MemoryRecords(buf)
        for batch in recs.batches():
            batch.is_valid()
            _ = (batch.base_offset, batch.last_sequence, batch.max_timestamp, batch.count)
            try:
                for d in batch.record_details(LIMIT):
                    _ = (d.record.offset, d.sequence, d.size_in_bytes)
            except KafkaError:
                pass
        recs.valid_bytes()
    except KafkaError:
        pass


@given(
    st.sampled_from(range(len(CORPUS))),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_byte_flips_are_typed_errors_or_detected(index: int, flips: list[tuple[int, int]]) -> None:
    buf = bytearray(CORPUS[index] * 2)
    for pos, mask in flips:
        buf[pos % len(buf)] ^= mask
    _exercise(buf)


@given(st.sampled_from(range(len(CORPUS))), st.data())
def test_truncation_gives_a_prefix(index: int, data: st.DataObject) -> None:
    full = CORPUS[index] * 3
    cut = data.draw(st.integers(0, len(full)))
    ends = [b.position + b.size_in_bytes for b in MemoryRecords(full).batches()]
    batches = list(MemoryRecords(full[:cut]).batches())
    assert len(batches) == sum(1 for e in ends if e <= cut)
    for b in batches:
        b.ensure_valid()


@given(st.binary(max_size=400))
def test_arbitrary_bytes(blob: bytes) -> None:
    _exercise(blob)
    # With a plausible frame in front, the body is garbage: still typed errors only.
    _exercise(struct.pack(">qi", 0, len(blob) + 49) + bytes([0, 0, 0, 0, 2]) + blob)


def test_every_single_flip_in_crc_range_is_detected() -> None:
    rng = random.Random(1234)
    for data in CORPUS:
        if data[16] != 2:
            continue
        for _ in range(300):
            buf = bytearray(data)
            pos = rng.randrange(21, len(buf))
            buf[pos] ^= rng.randrange(1, 256)
            (batch,) = MemoryRecords(buf).batches()
            assert not batch.is_valid(), pos


@pytest.mark.slow
def test_many_random_flips() -> None:
    rng = random.Random(99)
    for _ in range(20_000):
        buf = bytearray(rng.choice(CORPUS) * 2)
        for _ in range(rng.randrange(1, 6)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        _exercise(buf)
