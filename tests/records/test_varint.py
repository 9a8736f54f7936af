from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import InvalidRecordError
from kafkalog.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(INT32)
def test_varint_round_trip(v: int) -> None:
    enc = encode_varint(v)
    assert len(enc) == size_of_varint(v) <= 5
    assert decode_varint(enc, 0) == (v, len(enc))


@given(INT64)
def test_varlong_round_trip(v: int) -> None:
    enc = encode_varlong(v)
    assert len(enc) == size_of_varlong(v) <= 10
    assert decode_varlong(enc, 0) == (v, len(enc))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-64, "7f"),
        (64, "8001"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_known_encodings(value: int, encoded: str) -> None:
    # Values from Kafka's ByteUtilsTest (zig-zag then LEB128).
    assert encode_varint(value).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded), 0)[0] == value


def test_truncated_and_overlong_varints_raise() -> None:
    with pytest.raises(InvalidRecordError, match="past the end"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(InvalidRecordError, match="longer than 5"):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0)
    with pytest.raises(InvalidRecordError, match="longer than 10"):
        decode_varlong(b"\xff" * 10 + b"\x01", 0)
    with pytest.raises(InvalidRecordError, match="int32"):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0)
    with pytest.raises(ValueError):
        encode_varint(2**31)
