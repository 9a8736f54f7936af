"""Differential tests of the leader's record walk, ``_kernels._record_stats``.

``_record_stats`` parses each record with an optimistic unchecked prefix parser and falls back to the strict
``_parse_record_prefix`` / ``_parse_header`` for anything unusual. Its results must be exactly those of the
plain strict walk for every input: the same tuple, error code and error position included. The reference
here is that strict walk, copied verbatim from before the fast path existed. Inputs come from a test-local
record encoder that can write what no codec would (padded or over-long varints, wrong lengths, negative
lengths, arbitrary offset deltas), from ``MemoryRecords.build``, and from corrupting both; runs with the
records ending at an inaccessible page show the fast path never reads past ``end``.
"""

from __future__ import annotations

import ctypes
import itertools
import mmap
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from kafkalog.records import Header, MemoryRecords, SimpleRecord
from kafkalog.records._kernels import (
    ERR_COUNT_TOO_FEW,
    ERR_COUNT_TOO_MANY,
    ERR_RECORD_SIZE_MISMATCH,
    OK,
    _fast_record_prefix,
    _parse_header,
    _parse_record_prefix,
    _record_stats,
    as_uint8,
)

from .strategies import BASE_TS

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


@njit(nogil=True)
def reference_record_stats(src: Any, start: Any, end: Any, count: Any, base_timestamp: Any) -> Any:
    """The strict walk ``_record_stats`` was before its fast path (verbatim)."""
    mem = src.ctypes.data
    p = start
    lo = _INT64_MAX
    hi = _INT64_MIN
    top = _INT64_MIN
    null_keys = 0
    sequential = True
    for r in range(count):
        if p >= end:
            return ERR_COUNT_TOO_MANY, p, lo, hi, top, null_keys, sequential
        (err, err_pos, body_end, ts_delta, offset_delta, _kp, key_len, _vp, _vl, hc, q) = (
            _parse_record_prefix(mem, p, end)
        )
        if err != OK:
            return err, err_pos, lo, hi, top, null_keys, sequential
        ts = base_timestamp + ts_delta
        if ts > top:
            top = ts
        if ts != -1:
            if ts < lo:
                lo = ts
            if ts > hi:
                hi = ts
        if key_len < 0:
            null_keys += 1
        if offset_delta != r:
            sequential = False
        for _ in range(hc):
            err, err_pos, _a, _b, _c, _d, q = _parse_header(mem, q, body_end)
            if err != OK:
                return err, err_pos, lo, hi, top, null_keys, sequential
        if q != body_end:
            return ERR_RECORD_SIZE_MISMATCH, p, lo, hi, top, null_keys, sequential
        p = body_end
    if p != end:
        return ERR_COUNT_TOO_FEW, p, lo, hi, top, null_keys, sequential
    return OK, 0, lo, hi, top, null_keys, sequential


@njit(nogil=True)
def _both_prefixes(src: Any, p: Any, limit: Any) -> Any:
    mem = src.ctypes.data
    return _fast_record_prefix(mem, p, limit), _parse_record_prefix(mem, p, limit)


def _typed(t: tuple[Any, ...]) -> list[tuple[type, Any]]:
    return [(type(x), x) for x in t]


def check(buf: np.ndarray, start: int, end: int, count: int, base_ts: int) -> tuple[Any, ...]:
    """Both walks agree on ``buf[start:end]``; returns the result."""
    got = _record_stats(buf, start, end, count, base_ts)
    want = reference_record_stats(buf, start, end, count, base_ts)
    assert _typed(got) == _typed(want), (start, end, count, base_ts)
    return tuple(got)


# --- a test-local encoder that also writes what no codec would ----------------------------------------------


def uvarint(z: int, pad: int = 0) -> bytes:
    """LEB128 of ``z >= 0`` with ``pad`` extra (non-minimal, still valid) zero groups."""
    groups = []
    while True:
        groups.append(z & 0x7F)
        z >>= 7
        if not z:
            break
    groups += [0] * pad
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


def varint(v: int, pad: int = 0) -> bytes:
    return uvarint(((v << 1) ^ (v >> 63)) & (2**64 - 1), pad)


@dataclass(frozen=True)
class Rec:
    """One record to encode; ``*_len`` override the written length (None: the real one, -1 for null)."""

    ts: int | None = 0  # timestamp delta; None: the delta that makes the timestamp -1
    offset_delta: int | None = None  # None: the record's index
    key: bytes | None = None
    value: bytes | None = b""
    headers: tuple[tuple[bytes, bytes | None], ...] = ()
    attributes: int = 0
    key_null: int = -1  # length written for a null key (any negative reads as null)
    value_null: int = -1
    pads: tuple[int, ...] = (0, 0, 0, 0, 0, 0)  # length, ts, offset, key len, value len, header count
    body_fix: int = 0  # added to the written record length
    header_count_fix: int = 0


def encode_record(rec: Rec, index: int, base_ts: int) -> bytes:
    pl, pt, po, pk, pv, ph = rec.pads
    ts = -1 - base_ts if rec.ts is None else rec.ts
    od = index if rec.offset_delta is None else rec.offset_delta
    key = varint(rec.key_null, pk) if rec.key is None else varint(len(rec.key), pk) + rec.key
    value = varint(rec.value_null, pv) if rec.value is None else varint(len(rec.value), pv) + rec.value
    headers = b"".join(
        varint(len(k)) + k + (varint(-1) if v is None else varint(len(v)) + v) for k, v in rec.headers
    )
    body = (
        bytes([rec.attributes])
        + varint(ts, pt)
        + varint(od, po)
        + key
        + value
        + varint(len(rec.headers) + rec.header_count_fix, ph)
        + headers
    )
    return varint(len(body) + rec.body_fix, pl) + body


def encode(recs: list[Rec], base_ts: int) -> bytes:
    return b"".join(encode_record(r, i, base_ts) for i, r in enumerate(recs))


# --- strategies ---------------------------------------------------------------------------------------------

small = st.binary(max_size=40)
big = st.integers(8 * 1024 + 1, 24 * 1024).map(lambda n: bytes([n % 251]) * n)
values = st.one_of(small, st.none(), big, st.integers(100, 3000).map(lambda n: b"v" * n))
keys = st.one_of(st.none(), small, st.integers(100, 400).map(lambda n: b"k" * n))
ts_deltas = st.one_of(
    st.integers(-200, 200),
    st.integers(-(1 << 22), 1 << 22),
    st.none(),
    st.integers(-(1 << 62), 1 << 62),
)
offset_deltas = st.one_of(
    st.none(), st.integers(-3, 1 << 16), st.integers(-(1 << 31), (1 << 31) - 1), st.integers(1 << 31, 1 << 34)
)
pads = st.one_of(st.just((0,) * 6), st.tuples(*[st.sampled_from([0, 0, 0, 1, 2, 4, 6])] * 6))
fixes = st.sampled_from([0, 0, 0, 0, 0, 0, 1, -1, 2, -3, 100])
recs = st.builds(
    Rec,
    ts=ts_deltas,
    offset_delta=offset_deltas,
    key=keys,
    value=values,
    headers=st.lists(st.tuples(st.binary(max_size=8), st.one_of(st.none(), small)), max_size=3).map(tuple),
    attributes=st.integers(0, 255),
    key_null=st.sampled_from([-1, -1, -2, -(1 << 31)]),
    value_null=st.sampled_from([-1, -1, -7]),
    pads=pads,
    body_fix=fixes,
    header_count_fix=fixes,
)
plain_recs = st.builds(  # what producers write: sequential offsets, no oddities
    Rec, ts=st.integers(-300, 1 << 20), key=keys, value=values, headers=st.just(())
)
base_timestamps = st.one_of(st.just(BASE_TS), st.integers(-(1 << 40), 1 << 40), st.just(0), st.just(-1))


# --- corruption and layouts ---------------------------------------------------------------------------------


def variants(records: bytes, count: int, rnd: random.Random) -> list[tuple[bytes, int]]:
    """The records as they are, then truncated, with bytes flipped, inserted, deleted, or a wrong count."""
    out = [(records, count)]
    n = len(records)
    for _ in range(3):
        data = bytearray(records)
        kind = rnd.randrange(5)
        if kind == 0:
            del data[rnd.randint(0, n) :]
        elif kind == 1:
            for _ in range(rnd.randint(1, 4)):
                if data:
                    data[rnd.randrange(len(data))] = rnd.choice(
                        [0, 1, 2, 0x7F, 0x80, 0xFF, rnd.randrange(256)]
                    )
        elif kind == 2:
            at = rnd.randint(0, n)
            data[at:at] = bytes([rnd.choice([0xFF, 0x80, 0x81])]) * rnd.randint(1, 11)
        elif kind == 3 and n:
            at = rnd.randrange(n)
            del data[at : at + rnd.randint(1, 4)]
        out.append((bytes(data), count + rnd.choice([0, 0, 1, -1, 2])))
    out.append((records, rnd.choice([0, -1, count - 1, count + 1, count + 5, 2**31 - 1])))
    return out


class GuardedBuffer:
    """Bytes placed right before an inaccessible page: any read past their end faults."""

    PAGE = mmap.PAGESIZE

    def __init__(self, capacity: int) -> None:
        self.data_pages = (capacity + self.PAGE - 1) // self.PAGE
        self.mm = mmap.mmap(-1, (self.data_pages + 1) * self.PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        assert libc.mprotect(base + self.data_pages * self.PAGE, self.PAGE, 0) == 0  # PROT_NONE

    def place(self, data: bytes) -> np.ndarray:
        end = self.data_pages * self.PAGE
        assert len(data) <= end
        self.mm[end - len(data) : end] = data
        return as_uint8(memoryview(self.mm)[end - len(data) : end])


_GUARDED: list[GuardedBuffer] = []


def guarded() -> GuardedBuffer:
    if not _GUARDED:
        _GUARDED.append(GuardedBuffer(2 << 20))
    return _GUARDED[0]


def check_layouts(records: bytes, count: int, base_ts: int, rnd: random.Random) -> tuple[Any, ...]:
    """Compare in a buffer with bytes before and after ``[start, end)``, and ending at a guard page."""
    head, tail = rnd.randbytes(rnd.randint(0, 5)), rnd.randbytes(rnd.randint(1, 20))
    buf = as_uint8(head + records + tail)
    got = check(buf, len(head), len(head) + len(records), count, base_ts)
    view = guarded().place(records)
    moved = check(view, 0, len(records), count, base_ts)
    shift = len(head)
    assert moved[0] == got[0] and moved[2:] == got[2:]
    assert moved[1] == (got[1] - shift if got[0] != OK else 0)
    return got


# --- tests --------------------------------------------------------------------------------------------------


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(recs, max_size=12), base_timestamps, st.randoms(use_true_random=False))
def test_odd_records_and_corruptions_match_the_strict_walk(
    records: list[Rec], base_ts: int, rnd: random.Random
) -> None:
    data = encode(records, base_ts)
    for corrupt, count in variants(data, len(records), rnd):
        check_layouts(corrupt, count, base_ts, rnd)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(plain_recs, min_size=1, max_size=40), base_timestamps, st.randoms(use_true_random=False))
def test_plain_records_and_corruptions_match_the_strict_walk(
    records: list[Rec], base_ts: int, rnd: random.Random
) -> None:
    data = encode(records, base_ts)
    assert check_layouts(data, len(records), base_ts, rnd)[0] == OK
    for corrupt, count in variants(data, len(records), rnd):
        check_layouts(corrupt, count, base_ts, rnd)


_simple_records = st.builds(
    SimpleRecord,
    st.one_of(st.none(), small, big),
    st.one_of(st.none(), small),
    st.one_of(st.just(-1), st.integers(BASE_TS - (1 << 30), BASE_TS + (1 << 30)), st.integers(0, 1 << 45)),
    st.lists(st.builds(Header, st.text(max_size=6), st.one_of(st.none(), small)), max_size=2).map(tuple),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(_simple_records, min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_built_batches_and_corruptions_match_the_strict_walk(
    records: list[SimpleRecord], rnd: random.Random
) -> None:
    data = MemoryRecords.build(records, base_offset=rnd.randrange(1 << 40)).to_bytes()
    batch = next(MemoryRecords(data).batches())
    assert batch.base_timestamp is not None and batch.count == len(records)
    got = check(as_uint8(data), 61, len(data), len(records), batch.base_timestamp)
    assert got[0] == OK and got[5] == sum(r.key is None for r in records) and got[6]
    real = [r.timestamp for r in records if r.timestamp != -1]
    assert (got[2], got[3]) == ((min(real), max(real)) if real else (_INT64_MAX, _INT64_MIN))
    for corrupt, count in variants(data[61:], len(records), rnd):
        check_layouts(corrupt, count, batch.base_timestamp, rnd)


def _mixed_records() -> list[Rec]:
    out = [
        Rec(ts=i * 37 - 100, key=b"k%d" % i if i % 3 else None, value=b"v" * (i * 7 % 150)) for i in range(20)
    ]
    out += [
        Rec(ts=5, value=None, headers=((b"h", b"x"), (b"", None))),
        Rec(ts=70000, offset_delta=3, key=b"", value=b"y" * 200),
        Rec(ts=None, value=b"z" * 20),
        Rec(ts=1 << 40, value=b"w", pads=(0, 0, 1, 0, 0, 0)),
        Rec(ts=9, value=b"a" * 9000),
        Rec(ts=-1 << 20, value=b"b", pads=(2, 0, 0, 1, 1, 0)),
        Rec(ts=3, value=b""),
    ]
    return out


def test_every_byte_value_truncation_and_count() -> None:
    """Exhaustive over a small mixed batch: each byte set to telling values, each end, each count."""
    recs = _mixed_records()
    data = encode(recs, BASE_TS)
    n = len(recs)
    buf = as_uint8(data + b"\x02" * 8)
    assert check(buf, 0, len(data), n, BASE_TS)[0] == OK
    for end in range(len(data) + 1):
        check(buf, 0, end, n, BASE_TS)
        check(guarded().place(data[:end]), 0, end, n, BASE_TS)
    for count in (-5, -1, 0, 1, n - 1, n + 1, n + 100):
        check(buf, 0, len(data), count, BASE_TS)
    for pos in range(len(data)):
        for value in {0x00, 0x01, 0x02, 0x7E, 0x7F, 0x80, 0x81, 0xFF, data[pos] ^ 0x01, data[pos] ^ 0x40}:
            corrupt = bytearray(data)
            corrupt[pos] = value
            check(as_uint8(bytes(corrupt) + b"\x02" * 8), 0, len(data), n, BASE_TS)
            check(guarded().place(bytes(corrupt)), 0, len(data), n, BASE_TS)


def test_short_tails_never_read_past_the_end() -> None:
    """Every short tail over telling bytes after a good record, ending at a guard page (a read past the
    end faults): this is where an optimistic parser would overrun."""
    good = encode([Rec(ts=1, key=b"k", value=b"v" * 20)], BASE_TS)
    alphabet = (0x00, 0x02, 0x04, 0x7F, 0x80, 0xFF)
    for tail in itertools.chain.from_iterable(itertools.product(alphabet, repeat=k) for k in range(7)):
        data = good + bytes(tail)
        for count in (1, 2, 3):
            check(guarded().place(data), 0, len(data), count, BASE_TS)


def test_benchmark_shaped_batch() -> None:
    """About 1 MiB of 100-byte values timestamped 1 ms apart (3-byte deltas), whole and corrupted."""
    rnd = random.Random(11)
    n = 9000
    records = [SimpleRecord(rnd.randbytes(100), None, BASE_TS + i) for i in range(n)]
    data = MemoryRecords.build(records).to_bytes()
    got = check(as_uint8(data), 61, len(data), n, BASE_TS)
    assert got == (OK, 0, BASE_TS, BASE_TS + n - 1, BASE_TS + n - 1, n, True)
    for corrupt, count in variants(data[61:], n, rnd) + variants(data[61:], n, rnd):
        check_layouts(corrupt, count, BASE_TS, rnd)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.lists(recs, min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_fast_prefix_agrees_with_the_strict_prefix_whenever_it_accepts(
    records: list[Rec], rnd: random.Random
) -> None:
    """The invariant the walk relies on, checked directly: an accepted fast parse is the strict parse."""
    data = encode(records, BASE_TS)
    for corrupt, _count in variants(data, len(records), rnd):
        buf = as_uint8(corrupt + bytes(16))
        for limit in {len(corrupt), rnd.randint(0, len(corrupt))}:
            fast, strict = _both_prefixes(buf, 0, limit)
            ok, body_end, ts_delta, offset_delta, key_len, hc, q = fast
            if ok:
                assert strict[0] == OK
                assert (body_end, ts_delta, offset_delta, key_len, hc, q) == (
                    strict[2],
                    strict[3],
                    strict[4],
                    strict[6],
                    strict[9],
                    strict[10],
                )
