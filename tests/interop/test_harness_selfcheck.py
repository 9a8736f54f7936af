"""Self-checks of the Kafka interop harness (``kafka_java.py`` + ``java/KafkaInterop.java``).

These prove that the harness really drives Apache Kafka's own record code and reports it faithfully before other tests
rely on it: Kafka's writer reproduces the golden vectors of ``kafka-log.md`` §2.2 byte for byte, Kafka's reader dumps
them back with the expected fields, every codec round-trips, corruption and truncation are classified, and the JSON
output is formatted exactly like Python's ``json.dumps(obj, separators=(",", ":"))``.
"""

from __future__ import annotations

import json
import random
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from .kafka_java import EXIT_CORRUPT, EXIT_OK, EXIT_TRUNCATED, InteropError, KafkaJava, b64, unb64

pytestmark = pytest.mark.interop

TS = 1_700_000_000_000  # 0x18bcfe56800, the timestamp of the golden vectors

# kafka-log.md §2.2, "Golden vectors" (generated there with kafka-clients 3.9.1); spaces and '|' are cosmetic.
GOLDEN_HEX = {
    "v2-single": """
        0000000000000000 00000039 00000000 02 965a94b1 0000 00000000 0000018bcfe56800 0000018bcfe56800
        ffffffffffffffff ffff ffffffff 00000001 | 0e 00 00 00 01 02 61 00""",
    "v2-two-with-header": """
        0000000000000005 0000004b 00000007 02 8ee4dd0f 0000 00000001 0000018bcfe56800 0000018bcfe56803
        ffffffffffffffff ffff ffffffff 00000002 | 14 00 00 00 04 6b31 04 7631 00 | 1c 00 06 02 04 6b32 04 7632 02 02 68 02 78""",
    "commit-marker": """
        000000000000000a 00000042 00000000 02 8a773c25 0030 00000000 0000018bcfe56800 0000018bcfe56800
        00000000000003e8 0003 ffffffff 00000001 | 20 00 00 00 08 0000 0001 0c 0000 00000005 00""",
    "v1": "0000000000000000 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b 00000001 76",
    "v0": "0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76",
}

GOLDEN_SPECS: dict[str, dict[str, Any]] = {
    "v2-single": {
        "baseOffset": 0,
        "partitionLeaderEpoch": 0,
        "records": [{"timestamp": TS, "key": None, "value": b64("a")}],
    },
    "v2-two-with-header": {
        "baseOffset": 5,
        "partitionLeaderEpoch": 7,
        "records": [
            {"timestamp": TS, "key": b64("k1"), "value": b64("v1")},
            {
                "timestamp": TS + 3,
                "key": b64("k2"),
                "value": b64("v2"),
                "headers": [{"key": "h", "value": b64("x")}],
            },
        ],
    },
    "commit-marker": {
        "baseOffset": 10,
        "partitionLeaderEpoch": 0,
        "producerId": 1000,
        "producerEpoch": 3,
        "control": {"type": "COMMIT", "coordinatorEpoch": 5, "timestamp": TS},
    },
    "v1": {"magic": 1, "baseOffset": 0, "records": [{"timestamp": TS, "key": b64("k"), "value": b64("v")}]},
    "v0": {"magic": 0, "baseOffset": 0, "records": [{"timestamp": TS, "key": b64("k"), "value": b64("v")}]},
}

# Expected dump of each golden vector: (subset of the batch line, subsets of the record lines).
GOLDEN_DUMP: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "v2-single": (
        {
            "baseOffset": 0,
            "lastOffset": 0,
            "magic": 2,
            "crc": 0x965A94B1,
            "compressionType": "none",
            "timestampType": "CreateTime",
            "baseTimestamp": TS,
            "maxTimestamp": TS,
            "producerId": -1,
            "producerEpoch": -1,
            "baseSequence": -1,
            "lastSequence": -1,
            "isTransactional": False,
            "isControlBatch": False,
            "partitionLeaderEpoch": 0,
            "deleteHorizonMs": None,
            "recordCount": 1,
            "sizeInBytes": 69,
        },
        [
            {
                "offset": 0,
                "timestamp": TS,
                "sequence": -1,
                "sizeInBytes": 8,
                "key": None,
                "value": b64("a"),
                "headers": [],
            }
        ],
    ),
    "v2-two-with-header": (
        {
            "baseOffset": 5,
            "lastOffset": 6,
            "crc": 0x8EE4DD0F,
            "baseTimestamp": TS,
            "maxTimestamp": TS + 3,
            "partitionLeaderEpoch": 7,
            "recordCount": 2,
            "sizeInBytes": 87,
        },
        [
            {
                "offset": 5,
                "timestamp": TS,
                "sizeInBytes": 11,
                "key": b64("k1"),
                "value": b64("v1"),
                "headers": [],
            },
            {
                "offset": 6,
                "timestamp": TS + 3,
                "sizeInBytes": 15,
                "key": b64("k2"),
                "value": b64("v2"),
                "headers": [{"key": "h", "value": b64("x")}],
            },
        ],
    ),
    "commit-marker": (
        {
            "baseOffset": 10,
            "lastOffset": 10,
            "crc": 0x8A773C25,
            "producerId": 1000,
            "producerEpoch": 3,
            "baseSequence": -1,
            "isTransactional": True,
            "isControlBatch": True,
            "recordCount": 1,
            "sizeInBytes": 78,
        },
        [
            {
                "offset": 10,
                "timestamp": TS,
                "sizeInBytes": 17,
                "key": b64(bytes.fromhex("00000001")),
                "value": b64(bytes.fromhex("000000000005")),
                "controlType": "COMMIT",
                "coordinatorEpoch": 5,
            }
        ],
    ),
    "v1": (
        {
            "baseOffset": 0,
            "lastOffset": 0,
            "magic": 1,
            "crc": 0x39268C33,
            "timestampType": "CreateTime",
            "baseTimestamp": None,
            "maxTimestamp": TS,
            "partitionLeaderEpoch": -1,
            "recordCount": 1,
            "sizeInBytes": 36,
        },
        [
            {
                "offset": 0,
                "timestamp": TS,
                "sequence": -1,
                "sizeInBytes": 36,
                "key": b64("k"),
                "value": b64("v"),
            }
        ],
    ),
    "v0": (
        {
            "magic": 0,
            "crc": 0x1FECD70A,
            "timestampType": "NoTimestampType",
            "baseTimestamp": None,
            "maxTimestamp": -1,
            "recordCount": 1,
            "sizeInBytes": 28,
        },
        [{"offset": 0, "timestamp": -1, "sizeInBytes": 28, "key": b64("k"), "value": b64("v")}],
    ),
}

BATCH_KEYS = [
    "type",
    "position",
    "baseOffset",
    "lastOffset",
    "magic",
    "crc",
    "isValid",
    "compressionType",
    "timestampType",
    "baseTimestamp",
    "maxTimestamp",
    "producerId",
    "producerEpoch",
    "baseSequence",
    "lastSequence",
    "isTransactional",
    "isControlBatch",
    "partitionLeaderEpoch",
    "deleteHorizonMs",
    "recordCount",
    "sizeInBytes",
]
RECORD_KEYS = ["type", "offset", "timestamp", "sequence", "sizeInBytes", "key", "value", "headers"]
SUMMARY_KEYS = ["type", "batches", "records", "validBytes", "fileBytes"]
ERROR_KEYS = ["type", "error", "position", "message"]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def golden_bytes(name: str) -> bytes:
    return bytes.fromhex(re.sub(r"[\s|]", "", GOLDEN_HEX[name]))


def assert_subset(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    mismatches = {
        key: (actual.get(key, "<missing>"), value)
        for key, value in expected.items()
        if actual.get(key) != value
    }
    assert not mismatches, f"(actual, expected) mismatches: {mismatches}\nline: {actual}"


def split_dump(
    lines: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Batch lines, record lines and the summary of a dump (asserting the summary is last and unique)."""
    assert lines and lines[-1]["type"] == "summary"
    assert [line["type"] for line in lines[:-1]].count("summary") == 0
    batches = [line for line in lines if line["type"] == "batch"]
    records = [line for line in lines if line["type"] == "record"]
    return batches, records, lines[-1]


def crc32c_of(data: bytes) -> int:
    value: int = crc32c(data)  # a kafkalog dependency: never a reason to skip
    return value


# --------------------------------------------------------------------------------------------------- basics


def test_kafka_clients_version(kafka_java: KafkaJava) -> None:
    """The jar's kafka-version.properties and the running JVM's AppInfoParser agree."""
    assert re.fullmatch(r"\d+\.\d+\.\d+(-\w+)?", kafka_java.kafka_clients_version)
    info = kafka_java.java_version()
    assert info["version"] == kafka_java.kafka_clients_version
    assert re.fullmatch(r"[0-9a-f]{16}", info["commitId"])


@pytest.mark.parametrize("name", list(GOLDEN_SPECS))
def test_golden_vector_bytes(kafka_java: KafkaJava, tmp_path: Path, name: str) -> None:
    """Kafka's MemoryRecordsBuilder reproduces the golden vectors of kafka-log.md §2.2 exactly."""
    data = kafka_java.write({"batches": [GOLDEN_SPECS[name]]}, tmp_path / "golden.log")
    assert data.hex() == golden_bytes(name).hex()


@pytest.mark.parametrize("name", list(GOLDEN_SPECS))
def test_golden_vector_dump(kafka_java: KafkaJava, tmp_path: Path, name: str) -> None:
    """Kafka's FileRecords reads the golden vectors back with the documented fields."""
    path = tmp_path / "golden.log"
    path.write_bytes(golden_bytes(name))
    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_OK
    expected_batch, expected_records = GOLDEN_DUMP[name]
    batches, records, summary = split_dump(lines)
    assert len(batches) == 1
    assert list(batches[0]) == BATCH_KEYS
    assert batches[0]["position"] == 0
    assert batches[0]["isValid"] is True
    assert_subset(batches[0], expected_batch)
    assert len(records) == len(expected_records)
    for record, expected in zip(records, expected_records, strict=True):
        extra = ["controlType", "coordinatorEpoch"] if "controlType" in expected else []
        assert list(record) == RECORD_KEYS + extra
        assert_subset(record, expected)
    assert summary == {
        "type": "summary",
        "batches": 1,
        "records": len(expected_records),
        "validBytes": len(golden_bytes(name)),
        "fileBytes": len(golden_bytes(name)),
    }
    assert list(summary) == SUMMARY_KEYS


def test_golden_vectors_in_one_file(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Several batches (mixed magic) are concatenated without framing; positions and the summary add up."""
    names = list(GOLDEN_SPECS)
    data = kafka_java.write({"batches": [GOLDEN_SPECS[name] for name in names]}, tmp_path / "all.log")
    expected = b"".join(golden_bytes(name) for name in names)
    assert data == expected

    lines, code = kafka_java.dump(tmp_path / "all.log", deep=False)
    assert code == EXIT_OK
    batches, records, summary = split_dump(lines)
    assert records == []  # no record lines without --deep
    positions = [0]
    for name in names[:-1]:
        positions.append(positions[-1] + len(golden_bytes(name)))
    assert [batch["position"] for batch in batches] == positions
    assert [batch["magic"] for batch in batches] == [2, 2, 2, 1, 0]
    assert summary == {
        "type": "summary",
        "batches": 5,
        "records": 6,
        "validBytes": len(expected),
        "fileBytes": len(expected),
    }
    assert kafka_java.validate(tmp_path / "all.log") == {
        "valid": True,
        "batches": 5,
        "validBytes": len(expected),
        "fileBytes": len(expected),
    }


# --------------------------------------------------------------------------------------------------- codecs


def sample_records(with_headers: bool) -> list[dict[str, Any]]:
    rng = random.Random(7)
    compressible = b"kafkalog " * 400
    records: list[dict[str, Any]] = [
        {"timestamp": TS, "key": b64("key-0"), "value": b64(compressible)},
        {"timestamp": TS - 5, "key": None, "value": b64(b"")},  # timestamps may go backwards: negative delta
        {"timestamp": TS + 10, "key": b64(b""), "value": None},  # empty key, tombstone
        {"timestamp": TS + 11, "key": b64(bytes(range(256))), "value": b64(rng.randbytes(300))},
    ]
    if with_headers:
        records[0]["headers"] = [{"key": "trace", "value": b64("abc")}, {"key": "empty", "value": None}]
        records[3]["headers"] = [{"key": "ünïcode ✓", "value": b64(b"")}]
    return records


@pytest.mark.parametrize(
    ("magic", "codec"),
    [(2, codec) for codec in CODECS]
    + [(magic, codec) for magic in (1, 0) for codec in CODECS if codec != "zstd"],
)
def test_codec_round_trip(kafka_java: KafkaJava, tmp_path: Path, magic: int, codec: str) -> None:
    """Every codec written by Kafka is read back by Kafka with identical records."""
    records = sample_records(with_headers=magic == 2)
    spec = {"batches": [{"magic": magic, "compression": codec, "baseOffset": 100, "records": records}]}
    path = tmp_path / f"{codec}.log"
    data = kafka_java.write(spec, path)
    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_OK
    batches, dumped, summary = split_dump(lines)

    # Uncompressed legacy data has one entry per record; everything else is a single batch/wrapper.
    expected_batches = len(records) if magic < 2 and codec == "none" else 1
    assert len(batches) == expected_batches
    assert {batch["compressionType"] for batch in batches} == {codec}
    assert all(batch["isValid"] and batch["magic"] == magic for batch in batches)
    assert sum(batch["recordCount"] for batch in batches) == len(records)
    assert batches[0]["baseOffset"] == 100
    assert batches[-1]["lastOffset"] == 100 + len(records) - 1
    assert summary["records"] == len(records)
    assert summary["validBytes"] == summary["fileBytes"] == len(data)

    assert [r["offset"] for r in dumped] == list(range(100, 100 + len(records)))
    assert [r["key"] for r in dumped] == [r["key"] for r in records]
    assert [r["value"] for r in dumped] == [r["value"] for r in records]
    assert [r["headers"] for r in dumped] == [r.get("headers", []) for r in records]
    expected_ts = [r["timestamp"] for r in records] if magic > 0 else [-1] * len(records)
    assert [r["timestamp"] for r in dumped] == expected_ts
    if codec != "none":
        uncompressed = sum(len(unb64(r["value"]) or b"") for r in records)
        assert len(data) < uncompressed, "the repetitive value should compress"
    assert kafka_java.validate(path)["valid"] is True


@pytest.mark.parametrize(
    ("codec", "level"), [("gzip", 1), ("gzip", 9), ("lz4", 17), ("zstd", 1), ("zstd", 19)]
)
def test_compression_levels(kafka_java: KafkaJava, tmp_path: Path, codec: str, level: int) -> None:
    """Explicit codec levels are accepted and still round-trip."""
    records = sample_records(with_headers=True)
    spec = {"batches": [{"compression": codec, "compressionLevel": level, "records": records}]}
    kafka_java.write(spec, tmp_path / "level.log")
    lines, code = kafka_java.dump(tmp_path / "level.log")
    assert code == EXIT_OK
    assert [r["value"] for r in split_dump(lines)[1]] == [r["value"] for r in records]


def test_legacy_compressed_wrapper_offsets(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """A compressed v1 wrapper carries the last inner offset; the batch's baseOffset is the first inner one."""
    records = [{"timestamp": TS + i, "key": None, "value": b64(f"v{i}")} for i in range(3)]
    spec = {"batches": [{"magic": 1, "compression": "gzip", "baseOffset": 40, "records": records}]}
    data = kafka_java.write(spec, tmp_path / "v1.log")
    assert struct.unpack(">q", data[:8])[0] == 42  # wrapper offset on disk
    lines, _ = kafka_java.dump(tmp_path / "v1.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(batches[0], {"baseOffset": 40, "lastOffset": 42, "recordCount": 3, "maxTimestamp": TS + 2})
    assert [r["offset"] for r in dumped] == [40, 41, 42]


# --------------------------------------------------------------------------------------------------- batch attributes


def test_log_append_time(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """With LogAppendTime the batch max timestamp is the append time and every record reads as that time."""
    records = [{"timestamp": TS + i, "key": None, "value": b64("x")} for i in range(3)]
    spec = {"batches": [{"timestampType": "LogAppendTime", "logAppendTime": TS + 999, "records": records}]}
    data = kafka_java.write(spec, tmp_path / "lat.log")
    assert struct.unpack(">h", data[21:23])[0] & 0x08  # attribute bit 3
    lines, _ = kafka_java.dump(tmp_path / "lat.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(
        batches[0], {"timestampType": "LogAppendTime", "maxTimestamp": TS + 999, "baseTimestamp": TS}
    )
    assert [r["timestamp"] for r in dumped] == [TS + 999] * 3


def test_transactional_producer_batch(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Producer fields are stored as given; record sequences are baseSequence + offsetDelta."""
    records = [{"timestamp": TS, "key": None, "value": b64("x")} for _ in range(3)]
    spec = {
        "batches": [
            {
                "baseOffset": 7,
                "producerId": 42,
                "producerEpoch": 1,
                "baseSequence": 10,
                "isTransactional": True,
                "records": records,
            }
        ]
    }
    data = kafka_java.write(spec, tmp_path / "txn.log")
    assert data[21:23] == b"\x00\x10"
    lines, _ = kafka_java.dump(tmp_path / "txn.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(
        batches[0],
        {
            "producerId": 42,
            "producerEpoch": 1,
            "baseSequence": 10,
            "lastSequence": 12,
            "isTransactional": True,
        },
    )
    assert [r["sequence"] for r in dumped] == [10, 11, 12]


def test_sequence_wraps_at_int_max(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Sequence numbers wrap from Int.MAX to 0."""
    records = [{"timestamp": TS, "key": None, "value": b64("x")} for _ in range(3)]
    spec = {"batches": [{"producerId": 1, "producerEpoch": 0, "baseSequence": 2**31 - 2, "records": records}]}
    kafka_java.write(spec, tmp_path / "wrap.log")
    lines, _ = kafka_java.dump(tmp_path / "wrap.log")
    batches, dumped, _ = split_dump(lines)
    assert batches[0]["lastSequence"] == 0
    assert [r["sequence"] for r in dumped] == [2**31 - 2, 2**31 - 1, 0]


def test_abort_marker(kafka_java: KafkaJava, tmp_path: Path) -> None:
    spec = {
        "batches": [
            {
                "baseOffset": 3,
                "producerId": 9,
                "producerEpoch": 2,
                "control": {"type": "ABORT", "coordinatorEpoch": 77, "timestamp": TS},
            }
        ]
    }
    data = kafka_java.write(spec, tmp_path / "abort.log")
    assert data[21:23] == b"\x00\x30"
    lines, _ = kafka_java.dump(tmp_path / "abort.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(batches[0], {"isControlBatch": True, "isTransactional": True, "producerId": 9})
    assert_subset(
        dumped[0], {"controlType": "ABORT", "coordinatorEpoch": 77, "key": b64(b"\x00\x00\x00\x00")}
    )


def test_delete_horizon(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """deleteHorizonMs sets attribute bit 6 and replaces baseTimestamp; record timestamps stay correct."""
    horizon = TS + 86_400_000
    records = [
        {"timestamp": TS, "key": b64("k"), "value": None},
        {"timestamp": TS + 1, "key": b64("j"), "value": None},
    ]
    data = kafka_java.write(
        {"batches": [{"deleteHorizonMs": horizon, "records": records}]}, tmp_path / "dh.log"
    )
    assert struct.unpack(">h", data[21:23])[0] == 0x40
    assert struct.unpack(">q", data[27:35])[0] == horizon
    lines, _ = kafka_java.dump(tmp_path / "dh.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(batches[0], {"deleteHorizonMs": horizon, "baseTimestamp": horizon, "maxTimestamp": TS + 1})
    assert [r["timestamp"] for r in dumped] == [TS, TS + 1]


def test_offset_gaps_and_last_offset_override(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Compacted-style batch: explicit offsets leave gaps and lastOffset keeps the original last offset."""
    records = [
        {"offset": 3, "timestamp": TS, "key": b64("a"), "value": b64("1")},
        {"offset": 7, "timestamp": TS, "key": b64("b"), "value": b64("2")},
    ]
    spec = {
        "batches": [
            {
                "baseOffset": 0,
                "lastOffset": 9,
                "producerId": 5,
                "producerEpoch": 0,
                "baseSequence": 0,
                "records": records,
            }
        ]
    }
    data = kafka_java.write(spec, tmp_path / "gaps.log")
    assert struct.unpack(">i", data[23:27])[0] == 9  # lastOffsetDelta
    lines, _ = kafka_java.dump(tmp_path / "gaps.log")
    batches, dumped, _ = split_dump(lines)
    assert_subset(batches[0], {"baseOffset": 0, "lastOffset": 9, "recordCount": 2, "lastSequence": 9})
    assert [r["offset"] for r in dumped] == [3, 7]
    assert [r["sequence"] for r in dumped] == [3, 7]


def test_empty_batch(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """A batch with no records (what the cleaner leaves to keep producer state) is a bare 61-byte header."""
    spec = {
        "batches": [
            {
                "baseOffset": 20,
                "lastOffset": 24,
                "producerId": 11,
                "producerEpoch": 0,
                "baseSequence": 5,
                "maxTimestamp": TS,
                "records": [],
            }
        ]
    }
    data = kafka_java.write(spec, tmp_path / "empty.log")
    assert len(data) == 61
    lines, code = kafka_java.dump(tmp_path / "empty.log")
    assert code == EXIT_OK
    batches, dumped, summary = split_dump(lines)
    assert_subset(
        batches[0],
        {
            "baseOffset": 20,
            "lastOffset": 24,
            "recordCount": 0,
            "lastSequence": 9,
            "maxTimestamp": TS,
            "sizeInBytes": 61,
        },
    )
    assert dumped == []
    assert summary["records"] == 0


# --------------------------------------------------------------------------------------------------- output format


def test_json_lines_match_python_json_dumps(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Every line equals Python's json.dumps(obj, separators=(",", ":")), also for escapes and non-ASCII."""
    awkward = 'q"b\\s/\n\r\t\b\f\x00\x01\x1f\x7f é ✓ 😀 \u2028'
    records = [
        {
            "timestamp": TS,
            "key": b64("k"),
            "value": b64("v"),
            "headers": [{"key": awkward, "value": b64(awkward)}],
        }
    ]
    kafka_java.write({"batches": [{"records": records}]}, tmp_path / "fmt.log")
    text, code = kafka_java.dump_text(tmp_path / "fmt.log", deep=True)
    assert code == EXIT_OK
    assert text.endswith("\n")
    assert text.isascii()
    lines = text.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line == json.dumps(json.loads(line), separators=(",", ":"))
    header = json.loads(lines[1])["headers"][0]
    assert header["key"] == awkward
    assert unb64(header["value"]) == awkward.encode()


# --------------------------------------------------------------------------------------------------- damaged files


def two_batch_file(kafka_java: KafkaJava, path: Path) -> tuple[bytes, int]:
    """Writes two v2 batches; returns the bytes and the position of the second batch."""
    first = {"baseOffset": 0, "records": [{"timestamp": TS, "key": None, "value": b64("first")}]}
    second = {
        "baseOffset": 1,
        "records": [{"timestamp": TS, "key": None, "value": b64(f"second-{i}")} for i in range(3)],
    }
    data = kafka_java.write({"batches": [first, second]}, path)
    return data, struct.unpack(">i", data[8:12])[0] + 12


def test_crc_mismatch_is_corrupt_batch(kafka_java: KafkaJava, tmp_path: Path) -> None:
    path = tmp_path / "crc.log"
    data, second = two_batch_file(kafka_java, path)
    damaged = bytearray(data)
    damaged[-2] ^= 0xFF  # inside the last record of the second batch
    path.write_bytes(bytes(damaged))

    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_CORRUPT
    types = [line["type"] for line in lines]
    assert types == ["batch", "record", "batch", "error", "summary"]
    assert_subset(lines[2], {"position": second, "isValid": False, "recordCount": 3})
    assert list(lines[3]) == ERROR_KEYS
    assert_subset(lines[3], {"error": "corrupt_batch", "position": second})
    assert "corrupt" in lines[3]["message"].lower()
    assert lines[-1] == {
        "type": "summary",
        "batches": 1,
        "records": 1,
        "validBytes": second,
        "fileBytes": len(data),
    }

    result = kafka_java.validate(path)
    assert result["valid"] is False
    assert result["position"] == second


def test_partition_leader_epoch_is_outside_the_crc(kafka_java: KafkaJava, tmp_path: Path) -> None:
    path = tmp_path / "ple.log"
    data, _ = two_batch_file(kafka_java, path)
    path.write_bytes(data[:12] + struct.pack(">i", 12345) + data[16:])
    lines, code = kafka_java.dump(path, deep=False)
    assert code == EXIT_OK
    assert_subset(lines[0], {"isValid": True, "partitionLeaderEpoch": 12345})


@pytest.mark.parametrize("cut", [1, 17, 30, 60])
def test_partial_trailing_batch_is_truncated(kafka_java: KafkaJava, tmp_path: Path, cut: int) -> None:
    """FileRecords stops silently at a partial batch; the dump reports the leftover bytes as truncated."""
    path = tmp_path / "cut.log"
    data, second = two_batch_file(kafka_java, path)
    path.write_bytes(data[: second + cut])
    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_TRUNCATED
    assert [line["type"] for line in lines] == ["batch", "record", "error", "summary"]
    assert_subset(lines[2], {"error": "truncated", "position": second})
    assert lines[-1] == {
        "type": "summary",
        "batches": 1,
        "records": 1,
        "validBytes": second,
        "fileBytes": second + cut,
    }
    # Kafka's own validation ignores the partial tail (recovery truncates it).
    assert kafka_java.validate(path) == {
        "valid": True,
        "batches": 1,
        "validBytes": second,
        "fileBytes": second + cut,
    }


@pytest.mark.parametrize(
    ("padding", "error", "code"), [(17, "truncated", EXIT_TRUNCATED), (18, "corrupt_frame", EXIT_CORRUPT)]
)
def test_trailing_zero_padding(
    kafka_java: KafkaJava, tmp_path: Path, padding: int, error: str, code: int
) -> None:
    """FileLogInputStream stops when <= 17 bytes remain; 18+ zero bytes are read as a frame of size 0 and throw."""
    path = tmp_path / "padded.log"
    path.write_bytes(golden_bytes("v2-single") + bytes(padding))
    lines, exit_code = kafka_java.dump(path, deep=False)
    assert exit_code == code
    assert [line["type"] for line in lines] == ["batch", "error", "summary"]
    assert_subset(lines[1], {"error": error, "position": 69})
    assert lines[-1]["validBytes"] == 69


def test_magic_byte_is_outside_the_crc(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """Kafka's file reader takes any magic >= 2 as a v2 batch and the CRC does not cover it: magic 3 reads as valid."""
    path = tmp_path / "magic3.log"
    data = bytearray(golden_bytes("v2-two-with-header"))
    data[16] = 3
    path.write_bytes(bytes(data))
    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_OK
    assert_subset(lines[0], {"magic": 3, "isValid": True, "recordCount": 2})
    assert kafka_java.validate(path)["valid"] is True


def test_undersized_frame_is_corrupt_frame(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """A declared batch length below 14 (the v0 record overhead) makes FileRecords throw CorruptRecordException."""
    path = tmp_path / "frame.log"
    data, second = two_batch_file(kafka_java, path)
    path.write_bytes(data[:second] + struct.pack(">qi", 1, 13) + bytes(20))
    lines, code = kafka_java.dump(path, deep=False)
    assert code == EXIT_CORRUPT
    assert [line["type"] for line in lines] == ["batch", "error", "summary"]
    assert_subset(lines[1], {"error": "corrupt_frame", "position": second})
    assert "13" in lines[1]["message"]
    assert kafka_java.validate(path)["valid"] is False


def test_bad_record_count_is_invalid_records(kafka_java: KafkaJava, tmp_path: Path) -> None:
    """A batch with a valid CRC whose recordsCount lies fails only on deep iteration."""
    path = tmp_path / "count.log"
    data, second = two_batch_file(kafka_java, path)
    batch = bytearray(data[second:])
    batch[57:61] = struct.pack(">i", 4)  # says 4 records, holds 3
    batch[17:21] = struct.pack(">I", crc32c_of(bytes(batch[21:])))
    path.write_bytes(data[:second] + bytes(batch))

    lines, code = kafka_java.dump(path, deep=False)
    assert code == EXIT_OK
    assert lines[-1]["records"] == 1 + 4  # header counts are trusted without --deep

    lines, code = kafka_java.dump(path, deep=True)
    assert code == EXIT_CORRUPT
    assert [line["type"] for line in lines] == ["batch", "record", "batch", "error", "summary"]
    assert_subset(lines[2], {"isValid": True, "recordCount": 4})
    assert_subset(lines[3], {"error": "invalid_records", "position": second})
    assert lines[-1]["validBytes"] == second


# --------------------------------------------------------------------------------------------------- other commands


def test_murmur2_matches_kafka_test_vectors_and_kafka_python(kafka_java: KafkaJava) -> None:
    # Expected signed values from Kafka's UtilsTest.testMurmur2, made positive like the default partitioner.
    known = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    rng = random.Random(3)
    extra = [b"", b"\n", b"\x00" * 3, *(rng.randbytes(rng.randrange(1, 40)) for _ in range(50))]
    keys = [*known, *extra]
    values = kafka_java.murmur2(keys)
    assert values[: len(known)] == [v & 0x7FFFFFFF for v in known.values()]
    assert all(0 <= v <= 0x7FFFFFFF for v in values)
    # kafka-python is in the test extra: its murmur2 is checked too, never silently left out
    from kafka.partitioner.default import murmur2 as python_murmur2

    assert values == [python_murmur2(key) & 0x7FFFFFFF for key in keys]


def test_errors_are_reported_and_the_jvm_survives(kafka_java: KafkaJava, tmp_path: Path) -> None:
    with pytest.raises(InteropError, match="unknown field 'valu'"):
        kafka_java.write({"batches": [{"records": [{"valu": b64("x")}]}]}, tmp_path / "bad.log")
    with pytest.raises(InteropError, match="records are not supported for magic 1"):
        spec = {
            "magic": 1,
            "producerId": 1,
            "control": {"type": "COMMIT", "coordinatorEpoch": 0, "timestamp": TS},
        }
        kafka_java.write({"batches": [spec]}, tmp_path / "bad.log")
    code, _, stderr = kafka_java.run_command(["no-such-command"])
    assert code == 64
    assert "unknown command" in stderr
    # Still serving.
    assert kafka_java.write({"batches": [GOLDEN_SPECS["v0"]]}, tmp_path / "ok.log") == golden_bytes("v0")


def test_benchmark_commands(kafka_java: KafkaJava, tmp_path: Path) -> None:
    path = tmp_path / "bench.log"
    appended = kafka_java.bench_append(path, 16 * 1024, 1024 * 1024)
    assert appended["bytes"] >= 1024 * 1024
    assert appended["bytes"] == appended["batches"] * appended["batchBytes"] == path.stat().st_size
    assert 0 < appended["seconds"] <= appended["secondsWithFlush"]
    iterated = kafka_java.bench_iterate(path)
    assert iterated["records"] == appended["batches"] * appended["recordsPerBatch"]
    assert iterated["bytes"] == appended["bytes"]
    assert iterated["seconds"] > 0


def test_validating_benchmark_append_writes_a_log_with_assigned_offsets(
    kafka_java: KafkaJava, tmp_path: Path
) -> None:
    from kafkalog.records import MemoryRecords

    path = tmp_path / "validated.log"
    appended = kafka_java.bench_append(path, 16 * 1024, 256 * 1024, validate=True)
    assert appended["bytes"] == appended["batches"] * appended["batchBytes"] == path.stat().st_size
    batches = list(MemoryRecords(path.read_bytes()).batches())
    assert len(batches) == appended["batches"]
    per_batch = appended["recordsPerBatch"]
    assert [b.base_offset for b in batches] == [i * per_batch for i in range(len(batches))]
    assert all(b.partition_leader_epoch == 0 and b.is_valid() for b in batches)
    assert kafka_java.run_command(["bench-append", str(path), "1024", "1024", "--bogus"])[0] == 64


#: The referee: every interop claim in this suite is "equal to kafka-clients 3.9.1".
KAFKA_CLIENTS_VERSION = "3.9.1"


def test_the_referee_is_kafka_clients_3_9_1(kafka_java: KafkaJava) -> None:
    """The jar on the harness's classpath, and the classes the running JVM loaded, are exactly kafka-clients
    3.9.1 (a different jar would silently change what "agrees with Kafka" means)."""
    assert kafka_java.kafka_clients_version == KAFKA_CLIENTS_VERSION
    assert kafka_java.java_version()["version"] == KAFKA_CLIENTS_VERSION
    assert "kafka-clients.jar" in kafka_java.classpath
