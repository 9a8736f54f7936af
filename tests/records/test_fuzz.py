"""Hostile input: random byte flips, truncations and arbitrary bytes never crash, hang or lie.

Every failure must be a typed :class:`kafkalog.errors.KafkaError`; a flip inside the CRC-covered range of
a v2 batch must make that batch invalid (CRC-32C detects every error burst of up to 32 bits).
"""

from __future__ import annotations

import random
import struct
from typing import NamedTuple

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


class Reading(NamedTuple):
    """What reading a buffer found: the frames walked, whether they were all CRC-valid and decodable."""

    #: (position, size) of each batch ``batches()`` returned, in order.
    frames: list[tuple[int, int]]
    #: A typed error was raised while framing (``batches()``).
    frame_error: bool
    #: Some batch failed its CRC, or its fields or records did not decode (typed error).
    bad_batch: bool
    valid_bytes: int
    #: Records of the fully readable batches: (offset, timestamp, key, value, headers).
    records: list[tuple[object, ...]]


def _exercise(buf: bytes | bytearray) -> Reading:
    """Read everything there is to read; only typed errors may escape. Checks the walk's invariants:
    batches tile the buffer from 0 without overlap, and ``valid_bytes`` ends where the valid prefix ends."""
    frames: list[tuple[int, int]] = []
    frame_error = bad_batch = False
    records: list[tuple[object, ...]] = []
    recs = MemoryRecords(buf)
    prefix_valid = True
    prefix_end = 0
    try:
        for batch in recs.batches():
            frames.append((batch.position, batch.size_in_bytes))
            valid = batch.is_valid()
            bad_batch |= not valid
            if prefix_valid and valid:
                prefix_end = batch.position + batch.size_in_bytes
            prefix_valid &= valid
            try:
                _ = (batch.base_offset, batch.last_sequence, batch.max_timestamp, batch.count)
                for d in batch.record_details(LIMIT):
                    r = d.record
                    records.append((r.offset, r.timestamp, r.key, r.value, r.headers))
            except KafkaError:
                bad_batch = True
    except KafkaError:
        frame_error = True
    ends = [0] + [pos + size for pos, size in frames]
    assert [pos for pos, _ in frames] == ends[:-1], "batches must tile the buffer from 0"
    assert ends[-1] <= len(buf)
    valid_bytes = recs.valid_bytes()
    assert valid_bytes == prefix_end
    return Reading(frames, frame_error, bad_batch, valid_bytes, records)


def _uncovered(data: bytes) -> set[int]:
    """Byte positions of ``data`` (undamaged) that no CRC covers: a v2 batch's base offset, length, leader epoch,
    magic and CRC (0..20); a legacy entry's offset, size and CRC (0..15)."""
    out: set[int] = set()
    for batch in MemoryRecords(data).batches():
        out.update(batch.position + i for i in range(21 if batch.magic == 2 else 16))
    return out


def _assert_detected(original: bytes, buf: bytearray) -> None:
    """Damage is a typed error or detected: some batch fails its CRC or framing, or the valid prefix stops
    short. Only changes confined to bytes no CRC covers can go unseen, and then, if the framing held, the records
    read are the original ones apart from their offsets."""
    reading = _exercise(buf)
    changed = {i for i in range(len(buf)) if buf[i] != original[i]}
    detected = reading.frame_error or reading.bad_batch or reading.valid_bytes < len(buf)
    if not changed:
        assert not detected and reading == _exercise(original)
    elif not detected:
        assert changed <= _uncovered(original), sorted(changed - _uncovered(original))
        clean = _exercise(original)
        if reading.frames == clean.frames:
            assert [r[1:] for r in reading.records] == [r[1:] for r in clean.records]


@given(
    st.sampled_from(range(len(CORPUS))),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_byte_flips_are_typed_errors_or_detected(index: int, flips: list[tuple[int, int]]) -> None:
    """Flips are typed errors or detected (``_assert_detected``)."""
    original = CORPUS[index] * 2
    buf = bytearray(original)
    for pos, mask in flips:
        buf[pos % len(buf)] ^= mask
    _assert_detected(original, buf)


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
    """Arbitrary bytes: typed errors only, and a walk that keeps its invariants (see ``_exercise``)."""
    _exercise(blob)
    # With a plausible frame in front, the body is garbage: still typed errors only, and the frame (a v2 header
    # of random bytes, or less than a header) is never accepted as a valid batch.
    framed = struct.pack(">qi", 0, len(blob) + 5) + bytes([0, 0, 0, 0, 2]) + blob
    reading = _exercise(framed)
    assert reading.valid_bytes == 0
    assert reading.frame_error or reading.bad_batch or not reading.frames


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
        original = rng.choice(CORPUS) * 2
        buf = bytearray(original)
        for _ in range(rng.randrange(1, 6)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        _assert_detected(original, buf)
