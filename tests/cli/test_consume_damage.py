"""``kafkalog consume`` over damaged data: a rolled segment's torn, overlong or bad batch is an error (exit 2)
after every record before it was printed, or with ``--skip-damaged`` a warning, the rest of that segment
skipped and exit 2; the last segment's torn tail (what a crash leaves) is the end of the data, exit 0."""

from __future__ import annotations

import struct
from pathlib import Path

from kafkalog.cli.common import EXIT_CORRUPT

from .helpers import Written, run, write_partition


def _write(root: Path) -> Written:
    written = write_partition(root / "t-0", batches=60, transactions=False)
    assert len(written.bases) >= 4
    return written


def _offsets(stdout: str) -> list[int]:
    return [int(line.split("\t", 1)[0].removeprefix("Offset:")) for line in stdout.splitlines()]


def _consume(root: Path, *args: str) -> tuple[int, list[int], str]:
    result = run("consume", root, "t", "--from-beginning", "--property", "print.offset=true", *args)
    return result.exit_code, _offsets(result.stdout), result.stderr


def _segment(written: Written, k: int) -> Path:
    return written.path / f"{written.bases[k]:020d}.log"


def _batch_positions(path: Path) -> list[tuple[int, int]]:
    """``(position, base offset)`` of every batch of a ``.log``."""
    data = path.read_bytes()
    found, pos = [], 0
    while pos + 12 <= len(data):
        found.append((pos, struct.unpack_from(">q", data, pos)[0]))
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return found


def test_torn_batch_in_a_rolled_segment_is_an_error(tmp_path: Path) -> None:
    written = _write(tmp_path)
    seg = _segment(written, 1)
    seg.write_bytes(seg.read_bytes()[:-10])  # the segment's last batch loses its end
    last_pos, last_base = _batch_positions(seg)[-1]
    code, offsets, err = _consume(tmp_path)
    assert code == EXIT_CORRUPT
    assert offsets == list(range(last_base))  # every record before the damage, nothing after
    assert seg.name in err and f"byte {last_pos}" in err and "damaged" in err


def test_overlong_batch_in_a_rolled_segment_is_an_error(tmp_path: Path) -> None:
    written = _write(tmp_path)
    seg = _segment(written, 0)
    pos, base = _batch_positions(seg)[5]
    data = bytearray(seg.read_bytes())
    struct.pack_into(">i", data, pos + 8, 100_000)  # a length running past the end of the file
    seg.write_bytes(bytes(data))
    code, offsets, err = _consume(tmp_path, "--max-messages", "50")
    assert code == EXIT_CORRUPT
    assert offsets == list(range(base))
    assert seg.name in err


def test_bad_frame_prints_the_records_before_it(tmp_path: Path) -> None:
    written = _write(tmp_path)
    seg = _segment(written, 0)
    pos, base = _batch_positions(seg)[5]
    data = bytearray(seg.read_bytes())
    data[pos + 16] = 7  # unknown magic
    seg.write_bytes(bytes(data))
    code, offsets, err = _consume(tmp_path, "--max-messages", "50")
    assert code == EXIT_CORRUPT
    assert offsets == list(range(base))
    assert f"damaged data at offset {base}" in err


def test_skip_damaged_warns_and_goes_on(tmp_path: Path) -> None:
    written = _write(tmp_path)
    torn = _segment(written, 1)
    torn.write_bytes(torn.read_bytes()[:-10])
    torn_base = _batch_positions(torn)[-1][1]
    bad = _segment(written, 2)
    pos, bad_base = _batch_positions(bad)[2]
    data = bytearray(bad.read_bytes())
    data[pos + 40] ^= 0xFF  # a CRC mismatch, whole frames
    bad.write_bytes(bytes(data))
    code, offsets, err = _consume(tmp_path, "--skip-damaged")
    assert code == EXIT_CORRUPT
    lost = set(range(torn_base, written.bases[2])) | set(range(bad_base, written.bases[3]))
    assert offsets == [o for o in range(written.log_end_offset) if o not in lost]
    assert f"offsets {torn_base}..{written.bases[2] - 1} skipped" in err
    assert f"offsets {bad_base}..{written.bases[3] - 1} skipped" in err


def test_torn_tail_of_the_last_segment_is_the_end_of_the_data(tmp_path: Path) -> None:
    written = _write(tmp_path)
    seg = written.path / f"{written.bases[-1]:020d}.log"
    seg.write_bytes(seg.read_bytes()[:-10])  # what a crash in the middle of an append leaves
    last_base = _batch_positions(seg)[-1][1]
    code, offsets, err = _consume(tmp_path)
    assert code == 0, err
    assert offsets == list(range(last_base))
