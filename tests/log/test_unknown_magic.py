"""A CRC-valid batch whose magic byte is above 2 or negative, in a log: each reader does what Kafka's does.

Kafka's file reader (``FileLogInputStream``) frames a magic >= 2 as a v2 batch and one below 2 as legacy, and
``ensureValid`` checks only size and CRC (the v2 CRC does not cover the magic), so Kafka's recovery keeps such a
batch and a broker serves its bytes; a consumer's in-memory reader (``ByteBufferLogInputStream``) refuses it
with ``CorruptRecordException('Invalid magic found in record')``, and so does the cleaner's read buffer (the
partition is then marked uncleanable). kafkalog: recovery and the loader keep it, ``Log.read`` serves it, the
read-only view ends where the writer's log ends and raises ``CorruptRecordError`` when the batch is read,
``MemoryRecords`` raises it, and the cleaner raises it without touching the segment.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from kafkalog.cleaner.cleaner import CleanerStats
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.errors import CorruptRecordError
from kafkalog.log import Log, LogConfig
from kafkalog.readonly.log import ReadOnlyLog
from kafkalog.records import SimpleRecord

from .test_cleaner_helpers import fake_map, make_cleaner

INT_MAX = 2**31 - 1


def log_with_magic(
    directory: Path,
    magic: int,
    *,
    compact: bool = False,
    force_recovery: bool = True,
    sizes: tuple[int, ...] = (1, 1, 1),
) -> tuple[bytes, int]:
    """Batches of ``sizes`` records (three of one by default), the second's magic byte set to ``magic`` after the log closed;
    with ``force_recovery`` the indexes, snapshots and clean-shutdown marker removed so that the next open
    recovers the segment. Returns the segment's bytes and the second batch's position."""
    props = {"cleanup.policy": "compact"} if compact else {}
    with Log.open(directory, LogConfig.from_props(props)) as log:
        for size in sizes:
            n = log.log_end_offset
            log.append([SimpleRecord(b"v%d" % i, key=b"k%d" % i) for i in range(n, n + size)])
    segment = directory / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = struct.unpack_from(">i", data, 8)[0] + 12
    data[second + 16] = magic & 0xFF
    segment.write_bytes(bytes(data))
    if force_recovery:
        for path in directory.iterdir():
            if path.suffix in (".index", ".timeindex", ".snapshot"):
                path.unlink()
        (directory.parent / ".kafka_cleanshutdown").unlink(missing_ok=True)
    return bytes(data), second


@pytest.mark.parametrize("magic", [3, 127])
def test_recovery_keeps_a_magic_above_2_and_readers_fail_typed_at_it(tmp_path: Path, magic: int) -> None:
    directory = tmp_path / "t-0"
    data, second = log_with_magic(directory, magic)
    with Log.open(directory, LogConfig.from_props({})) as log:
        assert log.log_end_offset == 3
        assert (directory / "00000000000000000000.log").read_bytes() == data  # nothing truncated
        fetched = log.read(0, 1 << 20)
        assert bytes(fetched.records.buffer) == data  # a broker serves the bytes, as Kafka's does
        with pytest.raises(CorruptRecordError, match=f"invalid magic found in record: {magic}") as info:
            list(fetched.records.batches())  # what a consumer does with them
        assert info.value.position == second
    reader = ReadOnlyLog.open(directory)
    assert reader.log_end_offset == 3  # the writer's end, not the unknown batch's position
    chunks = reader.iter_batch_chunks(0, 3)
    first = next(chunks)
    assert int(first.table[2, 0]) == 0  # the batch before it is read
    with pytest.raises(CorruptRecordError) as info:
        next(chunks)
    assert info.value.position == second


def test_recovery_keeps_a_crc_valid_legacy_entry_with_a_negative_magic(tmp_path: Path) -> None:
    """A v1 entry whose magic byte is -1 with its CRC-32 fixed: Kafka reads it as legacy (v1 layout), valid."""
    directory = tmp_path / "t-0"
    with Log.open(directory, LogConfig.from_props({})) as log:
        log.append([SimpleRecord(b"a", key=b"k")])
    segment = directory / "00000000000000000000.log"
    first = segment.read_bytes()
    body = bytes((0xFF, 0)) + struct.pack(">q", 1_700_000_000_000) + struct.pack(">i", 1) + b"k"
    body += struct.pack(">i", 1) + b"v"
    entry = struct.pack(">qiI", 1, len(body) + 4, zlib.crc32(body)) + body
    segment.write_bytes(first + entry)
    for path in directory.iterdir():
        if path.suffix in (".index", ".timeindex", ".snapshot"):
            path.unlink()
    with Log.open(directory, LogConfig.from_props({})) as log:
        assert log.log_end_offset == 2
        assert segment.read_bytes() == first + entry
        batches = list(log.segments[0].log.batches())
        assert [b.magic for b in batches] == [2, -1]
        assert [(r.key, r.value) for r in batches[1].records()] == [(b"k", b"v")]


def test_the_cleaner_refuses_a_magic_above_2_and_leaves_the_segment_alone(tmp_path: Path) -> None:
    """Kafka's cleaner reads segments through ``MemoryRecords`` (invalid magic: CorruptRecordException, the
    partition marked uncleanable); kafkalog's raises ``CorruptRecordError`` and writes nothing."""
    directory = tmp_path / "t-0"
    data, second = log_with_magic(directory, 3, compact=True)
    with Log.open(directory, LogConfig.from_props({"cleanup.policy": "compact"})) as log:
        log.roll()
        head = log.segments[0]
        cleaner = make_cleaner(INT_MAX)
        with pytest.raises(CorruptRecordError) as info:
            cleaner.clean_segments(
                log,
                [head],
                fake_map([0]),
                0,
                CleanerStats(),
                CleanedTransactionMetadata(),
                -1,
                head.read_next_offset(),
            )
        assert info.value.position == second
        assert head.log.path.read_bytes() == data
        assert not list(directory.glob("*.cleaned"))


def test_verify_and_recover_keep_it_and_consume_fails_typed_at_it(tmp_path: Path) -> None:
    """``verify`` says what recovery does (no fault: Kafka's recovery keeps the batch), ``recover`` finds no damage,
    ``consume`` prints the records before the batch and fails there (exit 2), as a Kafka consumer does."""
    from click.testing import CliRunner

    from kafkalog.cli import cli

    directory = tmp_path / "t-0"
    data, _ = log_with_magic(directory, 3, force_recovery=False)
    runner = CliRunner()
    verify = runner.invoke(cli, ["verify", str(directory)])
    assert verify.exit_code == 0 and "t-0: ok" in verify.stdout, verify.stdout
    recover = runner.invoke(cli, ["recover", "--dry-run", str(directory)])
    assert recover.exit_code == 0 and "no damage" in recover.stdout, recover.stdout
    consume = runner.invoke(cli, ["consume", str(tmp_path), "t", "--from-beginning"])
    assert consume.exit_code == 2
    assert consume.stdout.splitlines()[0] == "v0"
    assert "damaged data at offset 1" in consume.output
    assert (directory / "00000000000000000000.log").read_bytes() == data


@pytest.mark.parametrize("force_recovery", [False, True], ids=["clean", "recovered"])
def test_an_offset_inside_a_magic_3_batch_is_found_in_it(tmp_path: Path, force_recovery: bool) -> None:
    """The offset search reads the last offset of a magic-3 batch from its v2 header (it took the base offset,
    as for a legacy entry, and skipped the batch's other offsets)."""
    directory = tmp_path / "t-0"
    data, second = log_with_magic(directory, 3, sizes=(1, 3, 1), force_recovery=force_recovery)
    with Log.open(directory, LogConfig.from_props({})) as log:
        assert log.log_end_offset == 5
        for offset in (1, 2, 3):
            assert bytes(log.read(offset, 1 << 20).records.buffer) == data[second:], offset
