"""``kafkalog dump``: golden output, damaged files, options, exit codes, streaming.

The golden file is the five vectors of ``kafka-log.md`` §2.2 (v2 single record, v2 with a header, a COMMIT
marker, legacy v1 and v0) concatenated. Its expected JSON Lines below were checked against Kafka's own
reader (``tests/interop``); the text lines follow ``DumpLogSegments.scala``.
"""

from __future__ import annotations

import gzip
import json
import os
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner, Result
from crc32c import crc32c
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from rich.console import Console

from kafkalog.cli import cli
from kafkalog.cli.dump import DumpOutput, DumpSettings, dump_batch_file, file_suffix
from kafkalog.cli.dumplog import (
    DECODERS,
    BatchEvent,
    LogDump,
    RecordEvent,
    StopReason,
    SummaryEvent,
    iter_log_events,
    json_line,
    log_dump_header,
)
from kafkalog.records import Compression, ControlRecordType, MemoryRecords, SimpleRecord

TS = 1_700_000_000_000

GOLDEN_HEX = """
0000000000000000 00000039 00000000 02 965a94b1 0000 00000000 0000018bcfe56800 0000018bcfe56800
ffffffffffffffff ffff ffffffff 00000001 | 0e 00 00 00 01 02 61 00
0000000000000005 0000004b 00000007 02 8ee4dd0f 0000 00000001 0000018bcfe56800 0000018bcfe56803
ffffffffffffffff ffff ffffffff 00000002 | 14 00 00 00 04 6b31 04 7631 00 | 1c 00 06 02 04 6b32 04 7632 02 02 68 02 78
000000000000000a 00000042 00000000 02 8a773c25 0030 00000000 0000018bcfe56800 0000018bcfe56800
00000000000003e8 0003 ffffffff 00000001 | 20 00 00 00 08 0000 0001 0c 0000 00000005 00
0000000000000000 00000018 39268c33 01 00 0000018bcfe56800 00000001 6b 00000001 76
0000000000000000 00000010 1fecd70a 00 00 00000001 6b 00000001 76
"""
GOLDEN = bytes.fromhex("".join(GOLDEN_HEX.replace("|", "").split()))
SINGLE, TWO, COMMIT, V1, V0 = 69, 87, 78, 36, 28  # sizes of the five batches
SECOND = SINGLE  # position of the second batch
COMMIT_POS = SINGLE + TWO

GOLDEN_BATCHES = [
    '{"type":"batch","position":0,"baseOffset":0,"lastOffset":0,"magic":2,"crc":2522518705,"isValid":true,'
    '"compressionType":"none","timestampType":"CreateTime","baseTimestamp":1700000000000,'
    '"maxTimestamp":1700000000000,"producerId":-1,"producerEpoch":-1,"baseSequence":-1,"lastSequence":-1,'
    '"isTransactional":false,"isControlBatch":false,"partitionLeaderEpoch":0,"deleteHorizonMs":null,'
    '"recordCount":1,"sizeInBytes":69}',
    '{"type":"batch","position":69,"baseOffset":5,"lastOffset":6,"magic":2,"crc":2397363471,"isValid":true,'
    '"compressionType":"none","timestampType":"CreateTime","baseTimestamp":1700000000000,'
    '"maxTimestamp":1700000000003,"producerId":-1,"producerEpoch":-1,"baseSequence":-1,"lastSequence":-1,'
    '"isTransactional":false,"isControlBatch":false,"partitionLeaderEpoch":7,"deleteHorizonMs":null,'
    '"recordCount":2,"sizeInBytes":87}',
    '{"type":"batch","position":156,"baseOffset":10,"lastOffset":10,"magic":2,"crc":2323069989,"isValid":true,'
    '"compressionType":"none","timestampType":"CreateTime","baseTimestamp":1700000000000,'
    '"maxTimestamp":1700000000000,"producerId":1000,"producerEpoch":3,"baseSequence":-1,"lastSequence":-1,'
    '"isTransactional":true,"isControlBatch":true,"partitionLeaderEpoch":0,"deleteHorizonMs":null,'
    '"recordCount":1,"sizeInBytes":78}',
    '{"type":"batch","position":234,"baseOffset":0,"lastOffset":0,"magic":1,"crc":958827571,"isValid":true,'
    '"compressionType":"none","timestampType":"CreateTime","baseTimestamp":null,"maxTimestamp":1700000000000,'
    '"producerId":-1,"producerEpoch":-1,"baseSequence":-1,"lastSequence":-1,"isTransactional":false,'
    '"isControlBatch":false,"partitionLeaderEpoch":-1,"deleteHorizonMs":null,"recordCount":1,"sizeInBytes":36}',
    '{"type":"batch","position":270,"baseOffset":0,"lastOffset":0,"magic":0,"crc":535615242,"isValid":true,'
    '"compressionType":"none","timestampType":"NoTimestampType","baseTimestamp":null,"maxTimestamp":-1,'
    '"producerId":-1,"producerEpoch":-1,"baseSequence":-1,"lastSequence":-1,"isTransactional":false,'
    '"isControlBatch":false,"partitionLeaderEpoch":-1,"deleteHorizonMs":null,"recordCount":1,"sizeInBytes":28}',
]
GOLDEN_RECORDS = [
    [
        '{"type":"record","offset":0,"timestamp":1700000000000,"sequence":-1,"sizeInBytes":8,"key":null,'
        '"value":"YQ==","headers":[]}'
    ],
    [
        '{"type":"record","offset":5,"timestamp":1700000000000,"sequence":-1,"sizeInBytes":11,"key":"azE=",'
        '"value":"djE=","headers":[]}',
        '{"type":"record","offset":6,"timestamp":1700000000003,"sequence":-1,"sizeInBytes":15,"key":"azI=",'
        '"value":"djI=","headers":[{"key":"h","value":"eA=="}]}',
    ],
    [
        '{"type":"record","offset":10,"timestamp":1700000000000,"sequence":-1,"sizeInBytes":17,'
        '"key":"AAAAAQ==","value":"AAAAAAAF","headers":[],"controlType":"COMMIT","coordinatorEpoch":5}'
    ],
    [
        '{"type":"record","offset":0,"timestamp":1700000000000,"sequence":-1,"sizeInBytes":36,"key":"aw==",'
        '"value":"dg==","headers":[]}'
    ],
    [
        '{"type":"record","offset":0,"timestamp":-1,"sequence":-1,"sizeInBytes":28,"key":"aw==","value":"dg==",'
        '"headers":[]}'
    ],
]
GOLDEN_SUMMARY = '{"type":"summary","batches":5,"records":6,"validBytes":298,"fileBytes":298}'

GOLDEN_TEXT_BATCHES = [
    "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 0 CreateTime: 1700000000000 size: 69 magic: 2 compresscodec: none crc: 2522518705 isvalid: true",
    "baseOffset: 5 lastOffset: 6 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
    "partitionLeaderEpoch: 7 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
    "position: 69 CreateTime: 1700000000003 size: 87 magic: 2 compresscodec: none crc: 2397363471 isvalid: true",
    "baseOffset: 10 lastOffset: 10 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1000 producerEpoch: 3 "
    "partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty "
    "position: 156 CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 2323069989 isvalid: true",
    "offset: 0 position: 234 CreateTime: 1700000000000 size: 36 magic: 1 compresscodec: none crc: 958827571 "
    "isvalid: true",
    "offset: 0 position: 270 NoTimestampType: -1 size: 28 magic: 0 compresscodec: none crc: 535615242 "
    "isvalid: true",
]
GOLDEN_TEXT_RECORDS = [
    ["| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: [] payload: a"],
    [
        "| offset: 5 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [] "
        "key: k1 payload: v1",
        "| offset: 6 CreateTime: 1700000000003 keySize: 2 valueSize: 2 sequence: -1 headerKeys: [h] "
        "key: k2 payload: v2",
    ],
    [
        "| offset: 10 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
        "endTxnMarker: COMMIT coordinatorEpoch: 5"
    ],
    [
        "| offset: 0 CreateTime: 1700000000000 keySize: 1 valueSize: 1 isValid: true crc: 958827571 key: k payload: v"
    ],
    [
        "| offset: 0 NoTimestampType: -1 keySize: 1 valueSize: 1 isValid: true crc: 535615242 key: k payload: v"
    ],
]


# --------------------------------------------------------------------------------------------------- helpers


def run(*args: str | Path) -> Result:
    """``kafkalog dump ARGS`` through click's runner (stdout and stderr kept apart)."""
    return CliRunner().invoke(
        cli, ["dump", *(str(a) for a in args)], prog_name="kafkalog", catch_exceptions=False
    )


def json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def types(result: Result) -> list[str]:
    return [line["type"] for line in json_lines(result)]


def write(tmp_path: Path, data: bytes, name: str = "00000000000000000000.log") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def fix_v2_crc(batch: bytearray) -> bytearray:
    """Recomputes the CRC-32C of a v2 batch after an edit."""
    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return batch


def v2_batch(records: list[SimpleRecord] | None = None, base_offset: int = 0, **options: Any) -> bytes:
    recs = records or [SimpleRecord(b"value-%d" % i, b"key-%d" % i, TS + i) for i in range(3)]
    return MemoryRecords.build(recs, base_offset=base_offset, now_ms=TS, **options).to_bytes()


def legacy(magic: int, codec: Compression, n: int, base: int = 0) -> bytes:
    """A legacy entry built by kafka-python (a wrapper holding ``n`` records when compressed)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i in range(n):
        offset = base + i if magic == 0 or codec is Compression.NONE else i
        builder.append(offset, TS + i, b"k%d" % i, b"v%d" % i)
    data = bytearray(builder.build())
    if codec is not Compression.NONE:
        data[0:8] = (base + n - 1).to_bytes(8, "big")  # the broker sets the wrapper offset to the last one
    return bytes(data)


def control_batch(type_id: int) -> bytes:
    """The golden COMMIT marker with its control type replaced by ``type_id``."""
    batch = bytearray(GOLDEN[COMMIT_POS : COMMIT_POS + COMMIT])
    batch[68:70] = struct.pack(">h", type_id)
    return bytes(fix_v2_crc(batch))


# --------------------------------------------------------------------------------------------------- golden


def test_golden_json_shallow(tmp_path: Path) -> None:
    result = run("--json", write(tmp_path, GOLDEN))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [*GOLDEN_BATCHES, GOLDEN_SUMMARY]
    assert result.stderr == ""


def test_golden_json_deep(tmp_path: Path) -> None:
    result = run("--json", "--deep-iteration", write(tmp_path, GOLDEN))
    assert result.exit_code == 0, result.stderr
    expected = [line for b, recs in zip(GOLDEN_BATCHES, GOLDEN_RECORDS) for line in (b, *recs)]
    assert result.stdout.splitlines() == [*expected, GOLDEN_SUMMARY]


def test_json_lines_are_python_json_dumps(tmp_path: Path) -> None:
    """Compact separators, key order and ASCII escaping are exactly ``json.dumps``'s."""
    headers = (("clé ✓", "ü\x00\x7f".encode()), ('q"\\\n', None))
    data = v2_batch([SimpleRecord("välue".encode(), None, TS, headers)])
    result = run("--json", "--deep-iteration", write(tmp_path, data))
    assert result.exit_code == 0
    raw = result.stdout_bytes
    assert raw.isascii()
    for line in result.stdout.splitlines():
        assert line == json.dumps(json.loads(line), separators=(",", ":"))
    record = json_lines(result)[1]
    assert [h["key"] for h in record["headers"]] == ["clé ✓", 'q"\\\n']
    assert record["headers"][1]["value"] is None
    assert record["key"] is None


def test_golden_text(tmp_path: Path) -> None:
    path = write(tmp_path, GOLDEN, "00000000000000000042.log")
    result = run("--print-data-log", path)
    assert result.exit_code == 0, result.stderr
    expected = [line for b, recs in zip(GOLDEN_TEXT_BATCHES, GOLDEN_TEXT_RECORDS) for line in (b, *recs)]
    assert result.stdout.splitlines() == [f"Dumping {path}", "Log starting offset: 42", *expected]
    # Offsets 0, 5-6, 10, 0, 0 are not consecutive: reported on stderr as DumpLogSegments does.
    assert f"Non-consecutive offsets in {path.absolute()}" in result.stderr
    assert "  0 is followed by 5" in result.stderr
    assert "  6 is followed by 10" in result.stderr


def test_text_shallow_has_no_record_lines(tmp_path: Path) -> None:
    result = run(write(tmp_path, GOLDEN))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2:] == GOLDEN_TEXT_BATCHES
    assert result.stderr == ""


def test_text_deep_without_data(tmp_path: Path) -> None:
    result = run("--deep-iteration", write(tmp_path, GOLDEN[:SINGLE]))
    assert result.stdout.splitlines()[3] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []"
    )


def test_skip_record_metadata(tmp_path: Path) -> None:
    path = write(tmp_path, GOLDEN[: SECOND + TWO])

    def record_lines(result: Result) -> list[str]:
        return [line for line in result.stdout.splitlines()[2:] if not line.startswith("baseOffset: ")]

    result = run("--print-data-log", "--skip-record-metadata", path)
    # Kafka's quirks: "| " only before a key; a record without key starts with " payload:".
    assert record_lines(result) == [" payload: a", "| key: k1 payload: v1", "| key: k2 payload: v2"]
    assert record_lines(run("--deep-iteration", "--skip-record-metadata", path)) == ["", "", ""]


def test_text_output_is_utf8_bytes(tmp_path: Path) -> None:
    data = v2_batch([SimpleRecord("välue ✓".encode(), b"\xff\xfe", TS)])
    result = run("--print-data-log", write(tmp_path, data))
    assert result.stdout_bytes.splitlines()[-1].endswith("key: \ufffd\ufffd payload: välue ✓".encode())


# --------------------------------------------------------------------------------------------------- batch kinds


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec(tmp_path: Path, codec: Compression) -> None:
    recs = [SimpleRecord(b"v" * i, None if i % 2 else b"k%d" % i, TS + i, (("h", b"x"),)) for i in range(50)]
    path = write(tmp_path, v2_batch(recs, base_offset=100, compression=codec) + v2_batch(base_offset=150))
    result = run("--json", "--deep-iteration", path)
    assert result.exit_code == 0, result.stderr
    lines = json_lines(result)
    assert lines[0]["compressionType"] == codec.kafka_name
    assert lines[0]["recordCount"] == 50
    records = [line for line in lines if line["type"] == "record"]
    assert [r["offset"] for r in records] == [*range(100, 150), 150, 151, 152]
    assert records[3]["key"] is None and records[4]["key"] == "azQ="
    assert lines[-1] == {
        "type": "summary",
        "batches": 2,
        "records": 53,
        "validBytes": path.stat().st_size,
        "fileBytes": path.stat().st_size,
    }


def test_producer_fields_and_sequence_wrap(tmp_path: Path) -> None:
    data = v2_batch(producer_id=77, producer_epoch=2, base_sequence=2**31 - 2)
    result = run("--json", "--deep-iteration", write(tmp_path, data))
    batch, *records, _ = json_lines(result)
    assert (batch["producerId"], batch["producerEpoch"]) == (77, 2)
    assert (batch["baseSequence"], batch["lastSequence"]) == (2**31 - 2, 0)
    assert [r["sequence"] for r in records] == [2**31 - 2, 2**31 - 1, 0]


def test_log_append_time_and_delete_horizon(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        v2_batch(timestamp_type="LogAppendTime", log_append_time=TS + 99)
        + v2_batch(base_offset=3, delete_horizon_ms=TS + 5),
    )
    first, *records, second, _, _, _, _ = json_lines(run("--json", "--deep-iteration", path))
    assert (first["timestampType"], first["maxTimestamp"]) == ("LogAppendTime", TS + 99)
    assert {r["timestamp"] for r in records} == {TS + 99}
    assert (second["baseTimestamp"], second["deleteHorizonMs"]) == (TS + 5, TS + 5)
    text = run(path).stdout.splitlines()
    assert " LogAppendTime: 1700000000099 " in text[2]
    assert f" deleteHorizonMs: OptionalLong[{TS + 5}] " in text[3]


@pytest.mark.parametrize(
    ("type_id", "json_type", "text"),
    [
        (0, "ABORT", "endTxnMarker: ABORT coordinatorEpoch: 5"),
        (2, "LEADER_CHANGE", "controlType: LEADER_CHANGE(2)"),
        (99, "UNKNOWN", "controlType: UNKNOWN(99)"),
    ],
)
def test_control_records(tmp_path: Path, type_id: int, json_type: str, text: str) -> None:
    path = write(tmp_path, control_batch(type_id))
    record = json_lines(run("--json", "--deep-iteration", path))[1]
    assert record["controlType"] == json_type
    assert ("coordinatorEpoch" in record) == (json_type == "ABORT")
    lines = run("--print-data-log", path).stdout.splitlines()
    assert lines[-1].endswith(f"headerKeys: [] {text}")  # control records print no key/payload


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4])
def test_legacy_entries(tmp_path: Path, magic: int, codec: Compression) -> None:
    n = 1 if codec is Compression.NONE else 4
    path = write(tmp_path, legacy(magic, codec, n, base=10))
    lines = json_lines(run("--json", "--deep-iteration", path))
    batch, records = lines[0], lines[1:-1]
    assert (batch["magic"], batch["compressionType"], batch["recordCount"]) == (magic, codec.kafka_name, n)
    assert (batch["baseOffset"], batch["lastOffset"], batch["baseTimestamp"]) == (10, 10 + n - 1, None)
    assert [r["offset"] for r in records] == list(range(10, 10 + n))
    assert lines[-1]["records"] == n
    assert (
        json_lines(run("--json", path))[-1]["records"] == n
    )  # shallow: the wrapper is decompressed to count

    text = run("--deep-iteration", path).stdout.splitlines()
    assert text[2].startswith(f"offset: {10 + n - 1} position: 0 ")
    # Each (inner) record's own CRC, checked: "isValid: true crc: N" (Kafka prints a stray "}" after N).
    crcs = [int(line.rsplit("crc: ", 1)[1]) for line in text[3:]]
    assert len(crcs) == n and all("isValid: true" in line for line in text[3:])
    if codec is Compression.NONE:
        assert crcs == [batch["crc"]]
    else:
        assert batch["crc"] not in crcs


# --------------------------------------------------------------------------------------------------- damage


def test_corrupt_crc(tmp_path: Path) -> None:
    data = bytearray(GOLDEN)
    data[SECOND + 70] ^= 0x01  # a record byte of the second batch
    path = write(tmp_path, bytes(data))
    result = run("--json", "--deep-iteration", path)
    assert result.exit_code == 2
    assert types(result) == ["batch", "record", "batch", "error", "summary"]
    lines = json_lines(result)
    assert (lines[2]["isValid"], lines[2]["crc"]) == (False, 0x8EE4DD0F)
    computed = crc32c(bytes(data[SECOND + 21 : SECOND + TWO]))
    assert lines[3] == {
        "type": "error",
        "error": "corrupt_batch",
        "position": SECOND,
        "message": f"Record is corrupt (stored crc = {0x8EE4DD0F}, computed crc = {computed})",
    }
    assert lines[4] == {"type": "summary", "batches": 1, "records": 1, "validBytes": SECOND, "fileBytes": 298}
    assert "corrupt batch at byte 69" in result.stderr

    text = run(path)
    assert text.exit_code == 2
    assert text.stdout.splitlines()[-1].endswith("crc: 2397363471 isvalid: false")
    assert "Traceback" not in text.stderr


def test_corrupt_legacy_entry(tmp_path: Path) -> None:
    data = bytearray(GOLDEN[COMMIT_POS + COMMIT :])  # v1 then v0
    data[V1 - 1] ^= 0x01  # the v1 value byte
    lines = json_lines(run("--json", write(tmp_path, bytes(data))))
    assert [line["type"] for line in lines] == ["batch", "error", "summary"]
    assert (lines[0]["isValid"], lines[0]["magic"], lines[1]["error"]) == (False, 1, "corrupt_batch")
    assert lines[1]["message"].startswith("Record is corrupt (stored crc = 958827571, computed crc = ")


@pytest.mark.parametrize("repair_crc", [False, True])
def test_legacy_entry_with_broken_lengths(tmp_path: Path, repair_crc: bool) -> None:
    """A v0 entry whose key length runs past it still gets its batch line, from the fixed header fields."""
    entry = bytearray(GOLDEN[-V0:])
    entry[18:22] = struct.pack(">i", 1000)
    if repair_crc:
        entry[12:16] = struct.pack(">I", zlib.crc32(bytes(entry[16:])))
    path = write(tmp_path, bytes(entry) + GOLDEN[:SINGLE])
    shallow, deep = run("--json", path), run("--json", "--deep-iteration", path)
    expected_batch = json.loads(GOLDEN_BATCHES[4]) | {"position": 0, "isValid": repair_crc}
    expected_batch["crc"] = struct.unpack(">I", entry[12:16])[0]
    assert json_lines(deep)[0] == expected_batch
    if repair_crc:  # what Kafka does: the fields it reads lazily are fine until records are decoded
        assert (shallow.exit_code, types(shallow)) == (0, ["batch", "batch", "summary"])
        assert (deep.exit_code, types(deep)) == (2, ["batch", "error", "summary"])
        assert json_lines(deep)[1]["error"] == "invalid_records"
    else:
        assert (shallow.exit_code, types(shallow)) == (2, ["batch", "error", "summary"])
        assert json_lines(shallow)[1]["error"] == "corrupt_batch"


def test_corrupt_compressed_legacy_wrapper_has_no_batch_line(tmp_path: Path) -> None:
    data = bytearray(legacy(1, Compression.GZIP, 3))
    data[-5] ^= 0xFF
    result = run("--json", write(tmp_path, bytes(data)))
    assert result.exit_code == 2
    assert types(result) == ["error", "summary"]
    assert json_lines(result)[0]["error"] == "corrupt_batch"


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (
            struct.pack(">qi", 1, 13) + bytes(20),
            "Found record size 13 smaller than minimum record overhead (14)",
        ),
        (struct.pack(">qi", 1, -7) + bytes(20), "Found record size -7 smaller than minimum record overhead"),
    ],
    ids=["size-13", "size-negative"],
)
def test_bad_frame(tmp_path: Path, tail: bytes, message: str) -> None:
    path = write(tmp_path, GOLDEN[:SECOND] + tail)
    result = run("--json", path)
    assert result.exit_code == 2
    lines = json_lines(result)
    assert [line["type"] for line in lines] == ["batch", "error", "summary"]
    assert (lines[1]["error"], lines[1]["position"]) == ("corrupt_frame", SECOND)
    assert lines[1]["message"].startswith(message)
    assert str(path) in lines[1]["message"]
    assert lines[2]["validBytes"] == SECOND


def test_v2_batch_smaller_than_its_header(tmp_path: Path) -> None:
    tail = struct.pack(">qiib", 1, 40, 0, 2) + bytes(40)
    result = run("--json", write(tmp_path, GOLDEN[:SECOND] + tail))
    assert result.exit_code == 2
    assert json_lines(result)[1] == {
        "type": "error",
        "error": "corrupt_batch",
        "position": SECOND,
        "message": "Record batch is corrupt (the size 52 is smaller than the minimum allowed overhead 61)",
    }


@pytest.mark.parametrize("cut", [1, 17, 18, 30, 60, TWO - 1])
def test_truncated_tail(tmp_path: Path, cut: int) -> None:
    path = write(tmp_path, GOLDEN[: SECOND + cut])
    result = run("--json", "--deep-iteration", path)
    assert result.exit_code == 3
    lines = json_lines(result)
    assert [line["type"] for line in lines] == ["batch", "record", "error", "summary"]
    assert lines[2] == {
        "type": "error",
        "error": "truncated",
        "position": SECOND,
        "message": f"{cut} trailing bytes at position {SECOND} do not form a complete batch",
    }
    assert lines[3] == {
        "type": "summary",
        "batches": 1,
        "records": 1,
        "validBytes": SECOND,
        "fileBytes": SECOND + cut,
    }

    text = run(path)
    assert text.exit_code == 3
    assert text.stdout.splitlines()[-1] == f"Found {cut} invalid bytes at the end of {path.name}"
    assert "truncated tail at byte 69" in text.stderr


@pytest.mark.parametrize(("padding", "error", "code"), [(17, "truncated", 3), (18, "corrupt_frame", 2)])
def test_zero_padding(tmp_path: Path, padding: int, error: str, code: int) -> None:
    """Kafka's reader stops when 17 bytes or fewer remain; 18 zero bytes read as a frame of size 0."""
    result = run("--json", write(tmp_path, GOLDEN[:SINGLE] + bytes(padding)))
    assert result.exit_code == code
    assert json_lines(result)[1]["error"] == error


def test_invalid_records_only_with_deep_iteration(tmp_path: Path) -> None:
    second = bytearray(GOLDEN[SECOND : SECOND + TWO])
    second[57:61] = struct.pack(">i", 3)  # says 3 records, holds 2
    path = write(tmp_path, GOLDEN[:SECOND] + bytes(fix_v2_crc(second)) + GOLDEN[SECOND + TWO :])

    shallow = run("--json", path)
    assert shallow.exit_code == 0
    assert json_lines(shallow)[-1]["records"] == 1 + 3 + 1 + 1 + 1  # header counts are trusted

    deep = run("--json", "--deep-iteration", path)
    assert deep.exit_code == 2
    lines = json_lines(deep)
    # The bad batch's line is printed, none of its records.
    assert [line["type"] for line in lines] == ["batch", "record", "batch", "error", "summary"]
    assert (lines[2]["isValid"], lines[2]["recordCount"]) == (True, 3)
    assert (lines[3]["error"], lines[3]["position"]) == ("invalid_records", SECOND)
    assert lines[4]["validBytes"] == SECOND


def test_error_positions_are_file_positions(tmp_path: Path) -> None:
    """Record-level messages name file positions even when the read window starts mid-file."""
    good = v2_batch()
    bad = bytearray(v2_batch(base_offset=3))
    bad[61] = 0x7E  # the first record's length varint: far more than the batch holds
    path = write(tmp_path, good + bytes(fix_v2_crc(bad)))
    for chunk in (61, 1 << 20):
        events = list(iter_log_events(path, deep=True, chunk_bytes=chunk))
        error = events[-2].to_dict()
        assert (error["error"], error["position"]) == ("invalid_records", len(good))
        assert str(error["message"]).endswith(f"(at byte position {len(good) + 61})")


@pytest.mark.parametrize("chunk", [61, 100, 4096])
def test_small_read_windows_give_the_same_events(tmp_path: Path, chunk: int) -> None:
    big = v2_batch([SimpleRecord(b"x" * 5000, None, TS)])  # larger than the window
    data = GOLDEN[: SECOND + TWO] + big + v2_batch(compression="zstd") + GOLDEN[SECOND + TWO :] + b"tail"
    path = write(tmp_path, data)
    expected = [json_line(e) for e in iter_log_events(path, deep=True)]
    assert [json_line(e) for e in iter_log_events(path, deep=True, chunk_bytes=chunk)] == expected
    assert json.loads(expected[-2])["error"] == "truncated"


def test_io_error_mid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalog.cli.dumplog as dumplog

    path = write(tmp_path, GOLDEN)

    def failing_read(file: Any, position: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(dumplog, "_read_at", failing_read)
    result = run("--json", path)
    assert result.exit_code == 1
    assert "read failed at byte 0: Input/output error" in result.stderr


def test_stdout_write_error(tmp_path: Path) -> None:
    """A full disk behind stdout is reported as such (exit 1), not as a read error of the segment."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [*kafkalog_command(), "dump", "--deep-iteration", str(write(tmp_path, GOLDEN * 200))],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 1
    assert b"cannot write the dump to stdout: No space left on device" in proc.stderr
    assert b"Traceback" not in proc.stderr and b"Exception ignored" not in proc.stderr


# --------------------------------------------------------------------------------------------------- options


def test_max_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, GOLDEN)
    result = run("--json", "--max-bytes", str(SECOND + 10), path)
    assert result.exit_code == 0  # a batch cut by the limit is not an error
    assert result.stdout.splitlines() == [
        GOLDEN_BATCHES[0],
        '{"type":"summary","batches":1,"records":1,"validBytes":69,"fileBytes":298}',
    ]
    assert run("--json", "--max-bytes", str(SECOND + TWO), path).stdout.splitlines()[:2] == GOLDEN_BATCHES[:2]
    zero = run("--json", "--max-bytes", "0", path)
    assert (zero.exit_code, types(zero)) == (0, ["summary"])
    assert run("--json", "--max-bytes", "1000", path).stdout.splitlines() == [*GOLDEN_BATCHES, GOLDEN_SUMMARY]


def test_max_bytes_past_a_truncated_end_still_reports_it(tmp_path: Path) -> None:
    result = run("--json", "--max-bytes", "1000", write(tmp_path, GOLDEN[:100]))
    assert result.exit_code == 3


def test_max_bytes_reads_no_further(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalog.cli.dumplog as dumplog

    path = write(tmp_path, GOLDEN * 100)
    reads: list[tuple[int, int]] = []
    real = dumplog._read_at

    def spy(file: Any, position: int, size: int) -> bytes:
        reads.append((position, size))
        return real(file, position, size)

    monkeypatch.setattr(dumplog, "_read_at", spy)
    events = list(iter_log_events(path, max_bytes=1000))
    summary = events[-1]
    assert isinstance(summary, SummaryEvent) and summary.stop is StopReason.MAX_BYTES
    assert max(p + s for p, s in reads) <= 1000


@pytest.mark.parametrize(
    ("decoder", "key", "value"),
    [
        ("utf8", "k\ufffd\n", '{"a": [1, 2]}'),
        ("bytes", "k\\xff\\n", '{"a": [1, 2]}'),
        ("hex", "6bff0a", "7b2261223a205b312c20325d7d"),
        ("json", "k\\xff\\n", '{"a":[1,2]}'),
    ],
)
def test_decoders(tmp_path: Path, decoder: str, key: str, value: str) -> None:
    path = write(tmp_path, v2_batch([SimpleRecord(b'{"a": [1, 2]}', b"k\xff\n", TS)]))
    result = run("--key-decoder", decoder, "--value-decoder", decoder, path)  # decoders imply the data
    assert result.exit_code == 0
    assert result.stdout_bytes.decode().endswith(f"key: {key} payload: {value}\n")


def test_decoder_functions() -> None:
    assert DECODERS["bytes"](b"a\\b\x00\t\x7f\x80") == "a\\\\b\\x00\\t\\x7f\\x80"
    assert DECODERS["json"](b' {"k": "\xc3\xa9"} ') == '{"k":"é"}'
    assert DECODERS["json"](b"not json") == "not json"
    assert DECODERS["json"](b"[" * 100_000) == "[" * 100_000  # too deep: kept as bytes, no crash


def test_decoders_do_not_change_json_output(tmp_path: Path) -> None:
    path = write(tmp_path, GOLDEN)
    assert (
        run("--json", "--value-decoder", "hex", path).stdout == run("--json", "--deep-iteration", path).stdout
    )


def test_index_options_are_accepted(tmp_path: Path) -> None:
    result = run("--verify-index-only", "--index-sanity-check", write(tmp_path, GOLDEN))
    assert result.exit_code == 0


# --------------------------------------------------------------------------------------------------- files, exit codes


def test_missing_file(tmp_path: Path) -> None:
    result = run(tmp_path / "nope.log")
    assert result.exit_code == 66  # EX_NOINPUT
    assert result.stdout == ""
    assert "nope.log: No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_directory_and_unreadable_file(tmp_path: Path) -> None:
    assert run(tmp_path).exit_code == 66
    path = write(tmp_path, GOLDEN)
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as a user that reads any file")
        result = run(path)
        assert result.exit_code == 66
        assert "Permission denied" in result.stderr
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize(
    "name",
    [
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "00000000000000000000.txnindex",
        "00000000000000000000.index.deleted",
    ],
)
def test_index_types_are_supported(tmp_path: Path, name: str) -> None:
    """Index files dump now (tests/cli/test_dump_files.py has the details); no log next to them is a note."""
    result = run(write(tmp_path, bytes(0), name))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("Dumping ")


def test_unknown_file_type(tmp_path: Path) -> None:
    result = run(write(tmp_path, GOLDEN, "segment.bin"))
    assert result.exit_code == 64  # a file type dump cannot take is a usage error
    assert "unknown file type" in result.stderr


@pytest.mark.parametrize(
    ("name", "header"),
    [
        ("00000000000000001234.log", "Log starting offset: 1234"),
        ("00000000000000001234.log.deleted", "Log starting offset: 1234"),
        ("00000000000000001234.log.swap", "Log starting offset: 1234"),
        ("00000000000000000100-0000000003.checkpoint", "Snapshot end offset: 100, epoch: 3"),
        ("bootstrap.checkpoint", "KRaft bootstrap snapshot"),
        ("copy.log", None),
    ],
)
def test_file_names(tmp_path: Path, name: str, header: str | None) -> None:
    path = write(tmp_path, GOLDEN, name)
    assert log_dump_header(path) == header
    lines = run(path).stdout.splitlines()
    assert lines[0] == f"Dumping {path}"
    assert lines[1:] == ([header] if header else []) + GOLDEN_TEXT_BATCHES


def test_file_suffix() -> None:
    assert file_suffix(Path("0.log.cleaned")) == ".log"
    assert file_suffix(Path("x/0.timeindex")) == ".timeindex"
    assert file_suffix(Path(".deleted")) == ""
    assert file_suffix(Path("leader-epoch-checkpoint")) == ""


def test_several_files_exit_with_the_worst_code(tmp_path: Path) -> None:
    good = write(tmp_path, GOLDEN, "00000000000000000000.log")
    cut = write(tmp_path, GOLDEN[:100], "00000000000000000010.log")
    result = run("--json", good, cut, tmp_path / "missing.log")
    assert result.exit_code == 66  # the highest code: a missing file (66) over a truncated tail (3)
    assert run(good, cut).exit_code == 3
    assert types(result) == ["batch"] * 5 + ["summary", "batch", "error", "summary"]
    assert run(good, tmp_path / "missing.log").exit_code == 66
    assert run(good, write(tmp_path, b"", "x.bin")).exit_code == 64
    text = run(good, cut).stdout.splitlines()
    assert text.count(f"Dumping {good}") == 1 and text.count(f"Dumping {cut}") == 1


def test_empty_file(tmp_path: Path) -> None:
    result = run("--json", write(tmp_path, b""))
    assert result.exit_code == 0
    assert json_lines(result) == [
        {"type": "summary", "batches": 0, "records": 0, "validBytes": 0, "fileBytes": 0}
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus", "x.log"],
        ["--max-bytes", "abc", "x.log"],
        ["--max-bytes", "-1", "x.log"],
        [],
        ["--key-decoder", "rot13", "x.log"],
    ],
    ids=["unknown-option", "max-bytes-text", "max-bytes-negative", "no-file", "bad-decoder"],
)
def test_usage_errors_exit_64(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 64  # EX_USAGE
    assert "Usage: kafkalog dump" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_text() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for option in (
        "--deep-iteration",
        "--print-data-log",
        "--max-bytes N",
        "--skip-record-metadata",
        "--key-decoder [bytes|hex|json|utf8]",
        "--value-decoder",
        "--json",
        "--verify-index-only",
        "--index-sanity-check",
    ):
        assert option in result.stdout
    assert "Exit codes" in result.stdout
    assert "  3   a truncated tail" in result.stdout  # the \b block keeps its layout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "dump" in CliRunner().invoke(cli, ["--help"]).stdout


# --------------------------------------------------------------------------------------------------- real processes


def kafkalog_command() -> list[str]:
    script = Path(sys.executable).parent / "kafkalog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "kafkalog.cli"]


def test_subprocess_console_script(tmp_path: Path) -> None:
    path = write(tmp_path, GOLDEN[:100])
    proc = subprocess.run(
        [*kafkalog_command(), "dump", "--json", "--deep-iteration", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3
    assert proc.stdout.decode().splitlines()[:2] == [GOLDEN_BATCHES[0], GOLDEN_RECORDS[0][0]]
    assert b"truncated tail" in proc.stderr and b"Traceback" not in proc.stderr


def test_subprocess_python_m(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kafkalog.cli", "dump", str(write(tmp_path, GOLDEN))],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.decode().splitlines()[2:] == GOLDEN_TEXT_BATCHES


def test_subprocess_closed_pipe(tmp_path: Path) -> None:
    """``kafkalog dump big.log | head -1``: exits 141 quietly instead of a BrokenPipeError traceback."""
    path = write(tmp_path, GOLDEN * 20_000)  # ~6 MB of output
    proc = subprocess.Popen(
        [*kafkalog_command(), "dump", "--deep-iteration", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"Dumping ")
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert b"Traceback" not in stderr and b"Exception ignored" not in stderr


# --------------------------------------------------------------------------------------------------- streaming


def write_big(path: Path, target_bytes: int) -> tuple[int, int]:
    """Repeats one ~1 MiB batch (offsets renumbered) up to ``target_bytes``; returns (batches, records)."""
    recs = [SimpleRecord(b"v" * 1000, b"k%d" % i, TS) for i in range(1000)]
    batch = bytearray(MemoryRecords.build(recs, now_ms=TS).to_bytes())
    n = max(1, target_bytes // len(batch))
    with path.open("wb") as f:
        for i in range(n):
            batch[0:8] = (i * 1000).to_bytes(8, "big")  # the base offset is outside the CRC
            f.write(batch)
    return n, n * 1000


def test_streams_in_constant_memory(tmp_path: Path) -> None:
    """A 256 MiB segment dumps with a few MiB of Python memory: the file is never read whole."""
    path = tmp_path / "00000000000000000000.log"
    batches, records = write_big(path, 256 << 20)
    size = path.stat().st_size
    start = time.monotonic()
    tracemalloc.start()
    try:
        n = 0
        with LogDump(path) as dump:
            for event in dump.events():
                n += len(json_line(event))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(event, SummaryEvent)
    assert (event.batches, event.records, event.valid_bytes, event.exit_code) == (batches, records, size, 0)
    assert peak < 8 << 20, f"peak {peak} bytes for a {size}-byte file"
    assert time.monotonic() - start < 10


def test_deep_iteration_memory_is_bounded_by_one_batch(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    _, records = write_big(path, 24 << 20)
    tracemalloc.start()
    try:
        count = 0
        for event in iter_log_events(path, deep=True):
            count += isinstance(event, RecordEvent)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == records
    assert peak < 12 << 20, f"peak {peak} bytes for a {path.stat().st_size}-byte file"


def test_progress_bar_does_not_change_stdout(tmp_path: Path) -> None:
    """The progress bar (stderr) is driven per event; stdout is the same with or without it."""

    class Forced(DumpOutput):
        def wants_progress(self, size: int) -> bool:
            return True

    path = tmp_path / "00000000000000000000.log"
    write_big(path, 12 << 20)
    outputs, drawn = [], []
    for cls in (DumpOutput, Forced):
        stdout, stderr = BytesIO(), Console(file=StringIO(), force_terminal=True)
        code = dump_batch_file(path, DumpSettings(), cls(stdout, stderr))
        assert code == 0
        outputs.append(stdout.getvalue())
        drawn.append(cast(StringIO, stderr.file).getvalue())
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b"\n") == 14  # "Dumping ..." and 13 batches
    assert drawn[0] == "" and path.name in drawn[1]


# --------------------------------------------------------------------------------------------------- events API


def test_events_api(tmp_path: Path) -> None:
    events = list(iter_log_events(write(tmp_path, GOLDEN), deep=True))
    batches = [e for e in events if isinstance(e, BatchEvent)]
    assert [b.to_dict() for b in batches] == [json.loads(line) for line in GOLDEN_BATCHES]
    marker = next(e for e in events if isinstance(e, RecordEvent) and e.control_type)
    assert (marker.control_type, marker.control_type_id, marker.coordinator_epoch) == ("COMMIT", 1, 5)
    assert ControlRecordType.COMMIT.name == marker.control_type
    summary = events[-1]
    assert isinstance(summary, SummaryEvent)
    assert (summary.stop, summary.exit_code) == (StopReason.END, 0)
    with pytest.raises(ValueError, match="max_bytes"):
        LogDump(tmp_path / "00000000000000000000.log", max_bytes=-1)


def test_legacy_inner_crc_mismatch_is_shown(tmp_path: Path) -> None:
    """A wrapper whose CRC is right but whose inner record's CRC is not: text output says isValid false."""
    inner = bytearray(legacy(1, Compression.NONE, 1))
    inner[-1] ^= 0x01  # inner record value; its CRC is now wrong
    value = gzip.compress(bytes(inner))
    body = struct.pack(">bbq", 1, 1, TS) + struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    entry = struct.pack(">qiI", 0, 4 + len(body), zlib.crc32(body)) + body
    path = write(tmp_path, entry)
    result = run("--deep-iteration", path)
    assert result.exit_code == 0
    assert " isValid: false crc: " in result.stdout.splitlines()[-1]
