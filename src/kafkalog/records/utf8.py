"""Header keys decoded from UTF-8 exactly as Kafka decodes them, malformed bytes included.

Format: a v2 header key is ``keyLength`` bytes that ought to be UTF-8. Kafka reads them with
``Utils.utf8(buffer, length)``, that is Java's ``new String(bytes, off, len, UTF_8)``, which never fails: each
malformed subsequence becomes one U+FFFD. Valid UTF-8 decodes the same in Java and in Python (both refuse
overlong forms, encoded surrogates and code points above U+10FFFF), so :func:`decode_utf8_as_java` takes
Python's strict decoder first and pays for the byte walk below only when the bytes are malformed.

Invariant owned here: where the bytes are malformed, the result is the one Java's decoder gives, character
for character. Java's rules differ from Python's ``errors="replace"`` in where a malformed subsequence ends:

- an encoded surrogate (``ED A0..BF xx``) is one malformed character of three bytes in Java, three of one
  byte each in Python;
- a truncated sequence at the end of the key is one U+FFFD and ends the key: the bytes after its lead are
  dropped, even when they would begin a new sequence (``F0 9F`` at the end: one U+FFFD);
- a complete four-byte form that is not a supplementary code point, or a three-byte form whose second byte
  is wrong, is replaced over the bytes JDK's ``malformed3``/``malformed4`` count (1 to 3).

The tests compare this function with Kafka's own reading of forged batches (``tests/interop``).
"""

from __future__ import annotations

__all__ = ["decode_utf8_as_java"]

_REPLACEMENT = "\ufffd"


def _continuation(b: int) -> bool:
    return b & 0xC0 == 0x80


def _bad_second_of_three(b1: int, b2: int) -> bool:
    """``b2`` cannot follow ``b1`` in a three-byte form (``String.isMalformed3_2``)."""
    return (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _continuation(b2)


def _bad_second_of_four(b1: int, b2: int) -> bool:
    """``b2`` cannot follow ``b1`` in a four-byte form (``String.isMalformed4_2``, leads above F4 included)."""
    return (
        b1 > 0xF4
        or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
        or (b1 == 0xF4 and b2 & 0xF0 != 0x80)
        or not _continuation(b2)
    )


def _decode_malformed(data: bytes) -> str:
    """Java's replacing UTF-8 decode, byte by byte (only reached for malformed input)."""
    out: list[str] = []
    end = len(data)
    i = 0
    while i < end:
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:  # two bytes
            if i == end:
                out.append(_REPLACEMENT)
                break
            b2 = data[i]
            if _continuation(b2):
                out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                i += 1
            else:
                out.append(_REPLACEMENT)  # b2 is read again as a lead
        elif 0xE0 <= b1 <= 0xEF:  # three bytes
            if i + 1 < end:
                b2, b3 = data[i], data[i + 1]
                if _bad_second_of_three(b1, b2) or not _continuation(b3):
                    out.append(_REPLACEMENT)
                    i += 0 if _bad_second_of_three(b1, b2) else 1  # String.malformed3: 1 or 2 bytes
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(_REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                    i += 2
                continue
            out.append(_REPLACEMENT)
            if i < end and _bad_second_of_three(b1, data[i]):
                continue  # the second byte is read again as a lead
            break  # a truncated form ends the key
        elif 0xF0 <= b1 <= 0xF7:  # four bytes
            if i + 2 < end:
                b2, b3, b4 = data[i], data[i + 1], data[i + 2]
                c = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if _continuation(b2) and _continuation(b3) and _continuation(b4) and 0x10000 <= c <= 0x10FFFF:
                    out.append(chr(c))
                    i += 3
                else:
                    out.append(_REPLACEMENT)
                    # String.malformed4: the lead alone, with the second byte, or with the second and third
                    i += 0 if _bad_second_of_four(b1, b2) else (1 if not _continuation(b3) else 2)
                continue
            out.append(_REPLACEMENT)
            if (i < end and _bad_second_of_four(b1, data[i])) or b1 > 0xF4:
                continue
            i += 1  # the second byte (if any) goes with the lead
            if i < end and not _continuation(data[i]):
                continue  # the third byte is read again as a lead
            break  # a truncated form ends the key
        else:  # a continuation byte, C0, C1 or F8..FF as a lead
            out.append(_REPLACEMENT)
    return "".join(out)


def decode_utf8_as_java(data: bytes) -> str:
    """``data`` decoded as Kafka's ``Utils.utf8`` (Java's replacing UTF-8 decoder) decodes it."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_malformed(data)
