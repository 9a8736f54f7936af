"""``kafkalog consume`` over damaged data: a rolled segment's torn, overlong or bad batch is an error (exit 2)
after every record before it was printed, or with ``--skip-damaged`` a warning, the rest of that segment
skipped and exit 2; the last segment's torn tail (what a crash leaves) is the end of the data, exit 0. And
``--follow`` on a partition whose topic is deleted (and created again) stops with an error (exit 1)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from kafkalog.cli.common import EXIT_CORRUPT, EXIT_FAULT, CliError
from kafkalog.cli.consume import _PROPERTIES, Formatter, PartitionReader, _Output, _run
from kafkalog.cli.dumplog import DECODERS
from kafkalog.manager import LogManager
from kafkalog.readonly.log import ReadOnlyLog

from .helpers import ENV, Written, kafkalog_command, run, stop_with_ctrl_c, write_partition


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


def _follow(root: Path, topic: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*kafkalog_command(), "consume", str(root), topic, "--from-beginning", "--follow", "--poll-ms", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )


def test_follow_stops_when_the_topic_is_deleted_and_created_again(tmp_path: Path) -> None:
    """The new topic's offsets start again at 0: waiting for the old ones stalled silently."""
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("live", 1)
        mgr.produce("live", [(None, b"old-%d" % i) for i in range(5)])
    consumer = _follow(tmp_path, "live")
    try:
        assert consumer.stdout is not None
        assert [consumer.stdout.readline() for _ in range(5)] == [b"old-%d\n" % i for i in range(5)]
        with LogManager.open(tmp_path, background=False) as mgr:
            mgr.delete_topic("live")
            mgr.create_topic("live", 1)
            mgr.produce("live", [(None, b"new-0")])
        code = consumer.wait(timeout=60)  # generous: at most a poll (50 ms) once the topic is re-created
        out, err = consumer.communicate()
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert code == EXIT_FAULT
    # it polled while the directory was gone, or after it came back with a new topic id
    assert b"the topic was deleted" in err or b"deleted and created again" in err, err
    assert b"stopped following" in err
    assert out == b""  # nothing of the new topic passed off as the old one's


def test_follow_notices_a_deleted_or_replaced_partition_directory(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
        mgr.produce("t", [(None, b"x")])  # partition.metadata is written with the first append
        reader = PartitionReader(0, ReadOnlyLog.open(tmp_path / "t-0"), 0, False, 1 << 20)
        assert reader.replaced() is None
        mgr.delete_topic("t")
        assert "is gone: the topic was deleted" in (reader.replaced() or "")
        mgr.create_topic("t", 1)
        mgr.produce("t", [(None, b"y")])
        assert "deleted and created again (topic id" in (reader.replaced() or "")
    written = write_partition(tmp_path / "s-0", batches=3, transactions=False)  # no topic id
    reader = PartitionReader(0, ReadOnlyLog.open(written.path), 0, False, 1 << 20)
    assert reader.replaced() is None
    written.path.rename(tmp_path / "s-0.0123-delete")
    write_partition(tmp_path / "s-0", batches=2, transactions=False)
    assert "directory was replaced" in (reader.replaced() or "")


def test_a_hole_in_a_log_that_is_not_compacted_is_damage(tmp_path: Path) -> None:
    """A segment missing in the middle of a delete-policy log: its offsets were skipped silently."""
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("d", 1, {"segment.bytes": 1000})
        mgr.create_topic("c", 1, {"segment.bytes": 1000, "cleanup.policy": "compact"})
        for i in range(60):
            mgr.produce("d", [(b"k%d" % i, b"v" * 50)])
            mgr.produce("c", [(b"k%d" % i, b"v" * 50)])
    bases = {}
    for topic in "dc":
        segments = sorted((tmp_path / f"{topic}-0").glob("*.log"))
        assert len(segments) > 4
        for suffix in (".log", ".index", ".timeindex"):
            segments[2].with_suffix(suffix).unlink()
        bases[topic] = [int(p.stem) for p in segments]
    lo, hi = bases["d"][2], bases["d"][3]
    result = run("consume", tmp_path, "d", "--from-beginning", "--property", "print.offset=true")
    assert result.exit_code == EXIT_CORRUPT
    assert _offsets(result.stdout) == list(range(lo))
    assert f"offsets {lo}..{hi - 1} are missing" in result.stderr
    result = run(
        "consume", tmp_path, "d", "--from-beginning", "--property", "print.offset=true", "--skip-damaged"
    )
    assert result.exit_code == EXIT_CORRUPT
    assert _offsets(result.stdout) == [o for o in range(60) if not lo <= o < hi]
    assert f"offsets {lo}..{hi - 1} skipped" in result.stderr
    # the cleaner leaves such gaps in a compacted log: not damage there
    result = run("consume", tmp_path, "c", "--from-beginning", "--property", "print.offset=true")
    assert result.exit_code == 0, result.stderr
    lo, hi = bases["c"][2], bases["c"][3]
    assert _offsets(result.stdout) == [o for o in range(60) if not lo <= o < hi]


def test_a_topic_deleted_while_it_is_read_is_an_error(tmp_path: Path) -> None:
    """Without --follow: the reads of a deleted partition found nothing more and consume ended with exit 0."""
    written = write_partition(tmp_path / "t-0", batches=30, transactions=False)
    reader = PartitionReader(0, ReadOnlyLog.open(written.path), 0, False, 256)
    formatter = Formatter("t", dict(_PROPERTIES), DECODERS["utf8"], DECODERS["utf8"], False)
    out = _Output()
    first = next(reader.fetch())  # the reader has started (its offsets are loaded)
    assert first[0].offset == 0
    written.path.rename(tmp_path / "t-0.0123-delete")
    with pytest.raises(CliError, match="the topic was deleted"):
        _run([reader], formatter, out, None, False, 0.01)


def test_follow_picks_up_partitions_added_meanwhile(tmp_path: Path) -> None:
    """Records of a partition added while --follow ran were never shown (only the partitions found at the start
    were read)."""
    import queue
    import threading

    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("grow", 1)
        mgr.produce("grow", [(None, b"p0-%d" % i) for i in range(3)], partition=0)
    consumer = _follow(tmp_path, "grow")
    lines: queue.Queue[bytes] = queue.Queue()
    assert consumer.stdout is not None
    stdout = consumer.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    try:
        got = [lines.get(timeout=60) for _ in range(3)]
        with LogManager.open(tmp_path, background=False) as mgr:
            mgr.add_partitions("grow", 2)
            mgr.produce("grow", [(None, b"p1-%d" % i) for i in range(2)], partition=1)
        got += [lines.get(timeout=60) for _ in range(2)]  # generous: a poll is 50 ms
        assert stop_with_ctrl_c(consumer, 60) == 0
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert got == [b"p0-0\n", b"p0-1\n", b"p0-2\n", b"p1-0\n", b"p1-1\n"]
