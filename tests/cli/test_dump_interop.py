"""``kafkalog dump --json`` against Apache Kafka's own reading of the same bytes.

The Java harness of ``tests/interop`` (``KafkaJava.dump_text``) reads a file with Kafka's ``FileRecords`` and prints
it in the JSON Lines format of ``kafkalog dump --json``; here both outputs must be equal line for line, with the same
exit code, for files written by kafkalog (every codec, headers, null keys and values, control markers, producer
fields, LogAppendTime, delete horizons), legacy v0/v1 entries written by kafka-python, and damaged copies of them.

Error messages are compared too where kafkalog words them as Kafka does (CRC mismatch, undersized frame, truncated
tail); record-level decode errors come from two different decoders, so their messages are masked.
A magic byte outside 0..2 is read as Kafka's ``FileLogInputStream`` reads it (2 and above: v2, the CRC does not cover
it; below 0: legacy), so those files are compared like any other.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from crc32c import crc32c
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.cli import cli
from kafkalog.records import Compression, MemoryRecords, MemoryRecordsBuilder, SimpleRecord

try:
    from interop.kafka_java import KafkaJava
except ImportError as exc:  # pragma: no cover - depends on the checkout
    pytest.skip(
        f"the Kafka interop harness (tests/interop) is not importable: {exc}", allow_module_level=True
    )

pytestmark = pytest.mark.interop

TS = 1_700_000_000_000


# --------------------------------------------------------------------------------------------------- helpers


def ours(path: Path, deep: bool) -> tuple[str, int]:
    """``kafkalog dump --json [--deep-iteration] path``: stdout and exit code."""
    args = ["dump", "--json", *(["--deep-iteration"] if deep else []), str(path)]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.stdout, result.exit_code


def assert_same(java: KafkaJava, path: Path, *, mask_messages: bool = False) -> list[str]:
    """Shallow and deep dumps agree with Kafka's, line for line; returns the deep lines."""
    lines: list[str] = []
    for deep in (False, True):
        theirs, their_code = java.dump_text(path, deep)
        mine, my_code = ours(path, deep)
        if mask_messages:
            theirs, mine = _mask(theirs), _mask(mine)
        else:
            theirs, mine = _mask(theirs, only="invalid_records"), _mask(mine, only="invalid_records")
        assert mine.splitlines() == theirs.splitlines(), f"deep={deep} file={path.name}"
        assert my_code == their_code, f"deep={deep} file={path.name}"
        lines = mine.splitlines()
    return lines


def _mask(text: str, only: str | None = None) -> str:
    """Replaces the message of error lines (of kind ``only``, or all) by ``...``."""
    out = []
    for line in text.splitlines():
        if line.startswith('{"type":"error"') and (only is None or f'"error":"{only}"' in line):
            line = line[: line.index(',"message":')] + ',"message":"..."}'
        out.append(line)
    return "".join(f"{line}\n" for line in out)


def v2(records: list[SimpleRecord], **options: Any) -> bytes:
    return MemoryRecords.build(records, now_ms=TS, **options).to_bytes()


def legacy(magic: int, codec: Compression, n: int, base: int) -> bytes:
    """A legacy entry from kafka-python's builder; a compressed wrapper gets the broker's wrapper offset."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i in range(n):
        offset = base + i if magic == 0 or codec is Compression.NONE else i
        builder.append(offset, TS + i, None if i == 1 else b"k%d" % i, None if i == 2 else b"v%d" % i)
    data = bytearray(builder.build())
    if codec is not Compression.NONE:
        data[0:8] = (base + n - 1).to_bytes(8, "big")
    return bytes(data)


def records(n: int, seed: int = 0) -> list[SimpleRecord]:
    """Records with null keys and values, empty values, binary and non-ASCII headers."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 7 == 6 else (b"" if i % 5 == 4 else rng.randbytes(rng.randrange(1, 300)))
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 2:
            headers = (("trace", rng.randbytes(8)), ("clé-✓", None), ("", b""))
        out.append(SimpleRecord(value, key, TS + rng.randrange(-5, 50), headers))
    return out


def kitchen_sink() -> list[bytes]:
    """Batches covering what kafkalog writes and what a log holds (each item one batch)."""
    batches: list[bytes] = []
    offset = 0
    for codec in Compression:
        batches.append(v2(records(40, seed=int(codec)), base_offset=offset, compression=codec))
        offset += 40
    batches.append(
        v2(records(5), base_offset=offset, producer_id=4242, producer_epoch=7, base_sequence=2**31 - 3)
    )
    offset += 5
    batches.append(
        v2(
            records(3),
            base_offset=offset,
            producer_id=99,
            producer_epoch=1,
            base_sequence=0,
            is_transactional=True,
            partition_leader_epoch=12,
        )
    )
    offset += 3
    for i, marker in enumerate(("COMMIT", "ABORT")):
        batches.append(
            MemoryRecords.end_transaction_marker(
                producer_id=99,
                producer_epoch=1,
                control_type=marker,
                coordinator_epoch=3 + i,
                base_offset=offset,
                timestamp=TS,
                partition_leader_epoch=12,
            ).to_bytes()
        )
        offset += 1
    batches.append(
        v2(records(4), base_offset=offset, timestamp_type="LogAppendTime", log_append_time=TS + 1000)
    )
    offset += 4
    batches.append(v2(records(4), base_offset=offset, delete_horizon_ms=TS + 86_400_000))
    offset += 4
    gaps = MemoryRecordsBuilder(base_offset=offset, compression=Compression.LZ4)
    for delta in (0, 3, 4, 10):  # a compacted batch: offset gaps
        gaps.append_with_offset(offset + delta, TS + delta, b"k%d" % delta, b"v")
    batches.append(gaps.build().to_bytes())
    offset += 11
    for magic in (0, 1):
        for codec in (Compression.NONE, Compression.GZIP, Compression.LZ4):
            n = 1 if codec is Compression.NONE else 4
            batches.append(legacy(magic, codec, n, base=offset))
            offset += n
    return batches


@pytest.fixture
def java(request: pytest.FixtureRequest) -> KafkaJava:
    """The session's ``kafka_java`` fixture (tests/conftest.py: one JVM; it skips without Java or the jars)."""
    try:
        harness: KafkaJava = request.getfixturevalue("kafka_java")
    except pytest.FixtureLookupError:
        pytest.skip("no `kafka_java` fixture is defined (expected in tests/conftest.py)")
    return harness


@pytest.fixture(scope="module")
def sink() -> list[bytes]:
    return kitchen_sink()


def positions(batches: list[bytes]) -> list[int]:
    out, pos = [], 0
    for batch in batches:
        out.append(pos)
        pos += len(batch)
    return out


# --------------------------------------------------------------------------------------------------- good files


def test_kitchen_sink(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(sink))
    lines = assert_same(java, path)
    assert lines[-1].startswith(f'{{"type":"summary","batches":{len(sink)},')


@pytest.mark.parametrize("index", range(len(kitchen_sink())))
def test_each_batch_alone(java: KafkaJava, tmp_path: Path, sink: list[bytes], index: int) -> None:
    path = tmp_path / f"batch-{index}.log"
    path.write_bytes(sink[index])
    assert_same(java, path)


def test_files_kafka_writes(java: KafkaJava, tmp_path: Path) -> None:
    """What kafkalog's writers cannot make: legacy snappy wrappers and a cleaner's empty batch."""
    recs = [{"timestamp": TS + i, "key": None, "value": "dmFsdWU="} for i in range(3)]
    spec = {
        "batches": [
            {"magic": 0, "compression": "snappy", "baseOffset": 0, "records": recs},
            {"magic": 1, "compression": "snappy", "baseOffset": 3, "records": recs},
            {
                "baseOffset": 6,
                "lastOffset": 9,
                "producerId": 5,
                "producerEpoch": 0,
                "baseSequence": 0,
                "records": [],
            },
            {"baseOffset": 10, "compression": "snappy", "records": recs},
        ]
    }
    path = tmp_path / "kafka.log"
    java.write(spec, path)
    assert_same(java, path)


# --------------------------------------------------------------------------------------------------- damaged files


def test_crc_mismatch_in_each_batch(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    data = b"".join(sink)
    for i, (pos, batch) in enumerate(zip(positions(sink), sink)):
        damaged = bytearray(data)
        damaged[pos + len(batch) - 1] ^= 0x5A  # last byte: record data or compressed payload
        path = tmp_path / f"crc-{i}.log"
        path.write_bytes(bytes(damaged))
        lines = assert_same(java, path)
        assert '"error":"corrupt_batch"' in lines[-2]


def test_truncated_copies(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    data = b"".join(sink)
    cuts = sorted({min(p + d, len(data) - 1) for p in positions(sink) for d in (1, 16, 17, 18, 40, 61)})
    for cut in cuts:
        path = tmp_path / f"cut-{cut}.log"
        path.write_bytes(data[:cut])
        assert_same(java, path)


@pytest.mark.parametrize("size", [-1, 0, 13])
def test_undersized_frame(java: KafkaJava, tmp_path: Path, sink: list[bytes], size: int) -> None:
    head = b"".join(sink[:3])
    path = tmp_path / "frame.log"
    path.write_bytes(head + struct.pack(">qi", 120, size) + bytes(40))
    lines = assert_same(java, path)
    assert '"error":"corrupt_frame"' in lines[-2]


@pytest.mark.parametrize("padding", [1, 17, 18, 100])
def test_zero_padding(java: KafkaJava, tmp_path: Path, sink: list[bytes], padding: int) -> None:
    """A preallocated segment after a crash: the valid batches, then zeros."""
    path = tmp_path / "padded.log"
    path.write_bytes(b"".join(sink[:2]) + bytes(padding))
    assert_same(java, path)


def test_record_count_lies(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    for lie in (-1, 0, 39, 41):
        batch = bytearray(sink[0])
        batch[57:61] = struct.pack(">i", lie)
        batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
        path = tmp_path / f"count{lie}.log"
        path.write_bytes(bytes(batch) + sink[1])
        assert_same(java, path)


def test_random_byte_flips(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    """Single-byte damage in the v2 batches: half in the 21 header bytes before the CRC-covered part (offset, length,
    leader epoch, CRC: framing damage), half anywhere; never the magic byte (the magic test below)."""
    v2_batches = sink[: len(Compression) + 6]
    data = b"".join(v2_batches)
    starts = positions(v2_batches)
    rng = random.Random(20240611)
    for i in range(200):
        if i % 2:
            where = rng.randrange(len(data))
        else:
            where = rng.choice(starts) + rng.choice([b for b in range(21) if b != 16])
        if where - 16 in starts:
            continue
        damaged = bytearray(data)
        damaged[where] ^= rng.randrange(1, 256)
        path = tmp_path / f"flip-{i}.log"
        path.write_bytes(bytes(damaged))
        assert_same(java, path, mask_messages=True)


def test_damaged_records_with_repaired_crc(java: KafkaJava, tmp_path: Path, sink: list[bytes]) -> None:
    """Record sections (plain and compressed) damaged behind a correct CRC: both decoders must agree."""
    rng = random.Random(7)
    for i in range(150):
        batch = bytearray(rng.choice(sink[: len(Compression)]))
        for _ in range(rng.randrange(1, 4)):
            batch[rng.randrange(61, len(batch))] = rng.randrange(256)
        batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
        path = tmp_path / f"records-{i}.log"
        path.write_bytes(bytes(batch))
        assert_same(java, path)


@pytest.mark.parametrize("repair_crc", [False, True], ids=["bad-crc", "crc-repaired"])
def test_damaged_legacy_entries(java: KafkaJava, tmp_path: Path, sink: list[bytes], repair_crc: bool) -> None:
    """Every byte of each legacy entry after its magic (attributes, timestamp, key/value lengths and bytes) damaged
    in turn; for compressed wrappers, the bytes up to the start of the compressed value.

    A value length turned negative behind a repaired CRC leaves the value's bytes unread: both read a null value.
    """
    legacy_entries = sink[-6:]
    follower = sink[0]
    for n, entry in enumerate(legacy_entries):
        magic, compressed = entry[16], entry[17] & 0x07 != 0
        key_at = 18 + (8 if magic == 1 else 0)
        value_length_at = key_at + 4 + max(0, struct.unpack_from(">i", entry, key_at)[0])
        for where in range(17, key_at + 8 if compressed else len(entry)):
            damaged = bytearray(entry)
            damaged[where] ^= 0xFF
            if repair_crc:
                damaged[12:16] = struct.pack(">I", zlib.crc32(bytes(damaged[16:])))
            path = tmp_path / f"legacy-{n}-{where}.log"
            path.write_bytes(bytes(damaged) + follower)
            if repair_crc and not compressed and where == value_length_at:
                # A value length turned negative behind a repaired CRC: both read a null value.
                theirs, their_code = java.dump_text(path, True)
                assert their_code == 0 and '"value":null' in theirs.splitlines()[1]
            assert_same(java, path)


@pytest.mark.parametrize("magic", [3, 127, -1, -128])
def test_magic_outside_0_to_2_reads_as_kafka_reads_it(
    java: KafkaJava, tmp_path: Path, sink: list[bytes], magic: int
) -> None:
    """Kafka's file reader takes a magic of 3 or more for v2 (valid: the CRC does not cover the magic) and a negative
    one for a legacy entry (here a CRC mismatch); ``kafkalog dump`` prints the same lines (it reported a corrupt
    frame before)."""
    batch = bytearray(sink[0])
    batch[16] = magic & 0xFF
    path = tmp_path / "magic.log"
    path.write_bytes(bytes(batch) + sink[1])
    lines = assert_same(java, path)
    assert any(f'"magic":{magic},' in line for line in lines), lines
