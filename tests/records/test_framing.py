"""The one framing rule (``kafkalog.records.framing.next_frame``) and the copies that must agree with it.

The numba scan (``scan_batches``) keeps an inlined copy of the rule for speed; hypothesis pins it to
``next_frame(known_magic_only=True)`` verdict for verdict over random buffers. ``read_batch_at`` (both
readers' rules) is ``next_frame`` plus the batch classes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import CorruptRecordError
from kafkalog.records import MemoryRecords, SimpleRecord, iter_batches, read_batch_at
from kafkalog.records.framing import (
    PARTIAL_TAIL,
    SIZE_BELOW_OVERHEAD,
    UNKNOWN_MAGIC,
    CorruptFrame,
    PartialTail,
    frame_magic,
    next_frame,
)
from kafkalog.records.kernels import (
    ERR_BAD_MAGIC,
    ERR_FRAME_SIZE,
    ERR_LEGACY_MAGIC,
    ERR_V2_SIZE,
    SCAN_END,
    SCAN_PARTIAL,
    as_uint8,
    scan_batches,
)


def entry(size: int, magic: int, total: int | None = None) -> bytes:
    """An entry header declaring ``size`` with ``magic``, padded with zeros to ``total`` bytes."""
    head = struct.pack(">qiib", 7, size, -1, magic)
    return head + bytes((12 + size if total is None else total) - len(head))


@pytest.mark.parametrize(
    ("data", "file_verdict", "memory_verdict"),
    [
        (b"", PARTIAL_TAIL, PARTIAL_TAIL),
        (bytes(17), PARTIAL_TAIL, PARTIAL_TAIL),  # 17 bytes or fewer: quiet, whatever they say
        (entry(0, 2, 17), PARTIAL_TAIL, PARTIAL_TAIL),
        (entry(13, 2, 18), CorruptFrame("", SIZE_BELOW_OVERHEAD), CorruptFrame("", SIZE_BELOW_OVERHEAD)),
        (entry(100, 2, 40), PARTIAL_TAIL, PARTIAL_TAIL),  # past the end
        (entry(14, 0), 26, 26),
        (entry(49, 2), 61, 61),
        (entry(49, 3), 61, CorruptFrame("", UNKNOWN_MAGIC)),
        (entry(49, 127), 61, CorruptFrame("", UNKNOWN_MAGIC)),
        (entry(49, -1), 61, CorruptFrame("", UNKNOWN_MAGIC)),
        (entry(49, -128), 61, CorruptFrame("", UNKNOWN_MAGIC)),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_next_frame_verdicts(data: bytes, file_verdict: object, memory_verdict: object) -> None:
    for known_magic_only, want in ((False, file_verdict), (True, memory_verdict)):
        got = next_frame(data, 0, known_magic_only=known_magic_only)
        if isinstance(want, CorruptFrame):
            assert isinstance(got, CorruptFrame) and got.code == want.code, (known_magic_only, got)
        else:
            assert got == want and type(got) is type(want), (known_magic_only, got)


@pytest.mark.parametrize("magic", [-128, -1, 0, 1, 2, 3, 127])
def test_frame_magic_is_signed(magic: int) -> None:
    assert frame_magic(entry(49, magic), 0) == magic


def test_corrupt_frame_messages_are_kafkas() -> None:
    size = next_frame(entry(13, 2, 18), 0)
    magic = next_frame(entry(49, -3), 0, known_magic_only=True)
    assert isinstance(size, CorruptFrame) and isinstance(magic, CorruptFrame)
    assert size.reason == "found record size 13 smaller than minimum record overhead (14)"
    assert magic.reason == "invalid magic found in record: -3"
    error = magic.error(40)
    assert isinstance(error, CorruptRecordError) and error.position == 40


def _kernel_verdict(data: bytes, pos: int) -> object:
    """The scan kernel's verdict on the entry at ``pos``, in ``next_frame``'s terms (known magic only)."""
    scan = scan_batches(as_uint8(data), pos, max_batches=1)
    if scan.n == 1:
        return ("frame", int(scan.table[1, 0]), 2)
    assert scan.next_pos == pos, scan
    if scan.code in (SCAN_PARTIAL, SCAN_END):
        return "partial"
    if scan.code == ERR_FRAME_SIZE:
        return ("corrupt", SIZE_BELOW_OVERHEAD)
    if scan.code == ERR_BAD_MAGIC:
        return ("corrupt", UNKNOWN_MAGIC)
    assert scan.code in (ERR_LEGACY_MAGIC, ERR_V2_SIZE), scan  # framed, then declined by the v2-only scan
    (size,) = struct.unpack_from(">i", data, pos + 8)
    magic = struct.unpack_from(">b", data, pos + 16)[0]
    return ("frame", size + 12, magic)


def _rule_verdict(data: bytes, pos: int) -> object:
    frame = next_frame(data, pos, known_magic_only=True)
    if isinstance(frame, PartialTail):
        return "partial"
    if isinstance(frame, CorruptFrame):
        return ("corrupt", frame.code)
    return ("frame", frame, frame_magic(data, pos))


_SIZES = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-2, 80))
_MAGICS = st.one_of(st.integers(-128, 127), st.sampled_from([-1, 0, 1, 2, 3]))


@settings(max_examples=600, deadline=None)
@given(
    prefix=st.integers(0, 3),
    size=_SIZES,
    magic=_MAGICS,
    length=st.integers(0, 100),
    noise=st.binary(max_size=8),
)
def test_kernel_and_next_frame_agree(prefix: int, size: int, magic: int, length: int, noise: bytes) -> None:
    """Every verdict of the inlined copy in ``scan_batches`` is ``next_frame``'s (partial tails of 0..17
    bytes and past the end, sizes below 14, each magic, v2 batches too small for their header)."""
    data = (bytes(prefix) + struct.pack(">qiib", 0, size, 0, magic) + noise + bytes(100))[: prefix + length]
    assert _kernel_verdict(data, prefix) == _rule_verdict(data, prefix)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 20))
def test_kernel_and_next_frame_agree_on_random_bytes(data: bytes, pos: int) -> None:
    pos = min(pos, len(data))
    assert _kernel_verdict(data, pos) == _rule_verdict(data, pos)


def two_batches_second_magic(magic: int) -> tuple[bytes, int]:
    data = bytearray(MemoryRecords.build([SimpleRecord(b"a")]).to_bytes() * 2)
    second = len(data) // 2
    data[second + 16] = magic & 0xFF
    return bytes(data), second


@pytest.mark.parametrize("magic", [3, 127])
def test_a_file_reader_frames_a_magic_above_2_as_v2_and_memory_records_refuse_it(magic: int) -> None:
    data, second = two_batches_second_magic(magic)
    batches = list(iter_batches(memoryview(data), known_magic_only=False))
    assert [b.magic for b in batches] == [2, magic]
    assert batches[1].is_valid()  # the v2 CRC does not cover the magic
    assert [r.value for r in batches[1].records()] == [b"a"]
    with pytest.raises(CorruptRecordError, match=f"invalid magic found in record: {magic}") as info:
        list(MemoryRecords(data).batches())
    assert info.value.position == second


def test_read_batch_at_refuses_unknown_magic_in_memory() -> None:
    data, second = two_batches_second_magic(3)
    with pytest.raises(CorruptRecordError):
        read_batch_at(memoryview(data), second)
