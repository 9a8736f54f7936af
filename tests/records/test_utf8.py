"""kafkalog.records.utf8: Java's replacing UTF-8 decoder, as Kafka reads header keys (and dump prints text).

Kafka's own reading of the same bytes is checked in ``tests/interop/test_records_interop.py``
(``test_header_keys_decode_as_kafka_exhaustively``); these tests pin the rules without Java.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.records.utf8 import _decode_malformed, decode_utf8_as_java

R = "\ufffd"


@given(st.text(alphabet=st.characters(codec="utf-8")))
def test_well_formed_text_round_trips(text: str) -> None:
    assert decode_utf8_as_java(text.encode()) == text
    # the byte walk taken for malformed input decodes the well-formed parts the same way
    assert _decode_malformed(text.encode()) == text
    assert _decode_malformed(text.encode() + b"\xff") == text + R


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # an encoded surrogate is one malformed character of three bytes (Python: three of one byte)
        (b"\xed\xa0\x80", R),
        (b"a\xed\xbf\xbfz", f"a{R}z"),
        (b"\xed\xa0\x80\xed\xb0\x80", R + R),  # a CESU-8 pair: two
        # a truncated form at the end is one U+FFFD and ends the key
        (b"\xed\xa0", R),
        (b"\xe2\x82", R),
        (b"\xf0\x9f\x98", R),
        (b"\xf0\x9f", R),
        (b"\xc3", R),
        # a truncated form whose next byte cannot continue it: that byte is read again
        (b"\xe2(", R + "("),
        (b"\xf0(", R + "("),
        (b"\xf0\x9f(", R + "("),
        (b"\xc3(", R + "("),
        # complete forms that are malformed: replaced over malformed3 / malformed4's length
        (b"\xe0\x80\xaf", R * 3),  # overlong: 1, then two lone continuations
        (b"\xe2\x82(", R + "("),
        (b"\xf4\x90\x80\x80", R * 4),  # above U+10FFFF: 1 + 3 continuations
        (b"\xf0\x80\x80\x80", R * 4),  # overlong
        (b"\xf5\x80\x80\x80", R * 4),
        (b"\xf0\x9f\x98(", R + "("),  # malformed4 = 3: lead and two continuations
        (b"\xf0\x9f((", R + "(("),  # malformed4 = 2
        # bytes that never lead
        (b"\x80", R),
        (b"\xc0\xaf", R * 2),
        (b"\xf8\x88\x80\x80\x80", R * 5),
        (b"\xff", R),
        # valid edges
        (b"\xed\x9f\xbf", "\ud7ff"),
        (b"\xee\x80\x80", "\ue000"),
        (b"\xef\xbf\xbe", "\ufffe"),
        (b"\xf4\x8f\xbf\xbf", "\U0010ffff"),
        (b"a\xffb\xc3\xa9\xe2\x82z", f"a{R}b\xe9{R}z"),
    ],
)
def test_malformed_bytes_are_replaced_where_java_replaces_them(data: bytes, expected: str) -> None:
    assert decode_utf8_as_java(data) == expected
