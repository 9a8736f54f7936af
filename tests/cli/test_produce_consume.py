"""``kafkalog produce`` and ``kafkalog consume``: round trips, Kafka's partitioner and formatter, transactions,
and ``consume --follow`` reading while another process produces into the same data directory."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from kafkalog.log import AppendOrigin
from kafkalog.manager import LogManager
from kafkalog.partitioner import partition_for_key
from kafkalog.records import Compression, MemoryRecords, SimpleRecord

from .helpers import ENV, json_lines, kafkalog_command, run, run_process, stop_with_ctrl_c


def produce(root: Path, topic: str, lines: str, *args: str) -> None:
    result = run("produce", root, topic, *args, input=lines)
    assert result.exit_code == 0, result.stderr


def consume(root: Path, topic: str, *args: str) -> list[str]:
    result = run("consume", root, topic, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout.splitlines()


def test_lines_round_trip(tmp_path: Path) -> None:
    values = [f"line {i} é" for i in range(50)]
    produce(tmp_path, "t", "\n".join(values) + "\n", "--create", "--partitions", "1")
    assert consume(tmp_path, "t", "--from-beginning") == values
    assert consume(tmp_path, "t", "--offset", "45") == values[45:]
    assert consume(tmp_path, "t", "--from-beginning", "--max-messages", "3") == values[:3]
    assert consume(tmp_path, "t") == []  # the default is latest, as Kafka's console consumer


def test_keys_are_placed_by_kafkas_partitioner(tmp_path: Path) -> None:
    keys = [f"user-{i}" for i in range(40)]
    lines = "".join(f"{k}:{k.upper()}\n" for k in keys)
    produce(
        tmp_path, "t", lines, "--create", "--partitions", "4", "--property", "parse.key=true,key.separator=:"
    )
    out = consume(tmp_path, "t", "--from-beginning", "--property", "print.key=true,print.partition=true")
    seen = {}
    for line in out:
        partition, key, value = line.split("\t")
        assert value == key.upper()
        seen[key] = int(partition.removeprefix("Partition:"))
    assert seen == {k: partition_for_key(k.encode(), 4) for k in keys}


def test_formatter_properties(tmp_path: Path) -> None:
    rec = {"key": "k", "value": "v", "headers": {"a": "1", "b": None}, "timestamp": 1_700_000_000_123}
    produce(
        tmp_path,
        "t",
        json.dumps(rec) + "\n" + json.dumps({"value": None}) + "\n",
        "--format",
        "json",
        "--create",
    )
    out = consume(
        tmp_path,
        "t",
        "--from-beginning",
        "--property",
        "print.timestamp=true,print.offset=true,print.headers=true,print.key=true,key.separator=|",
    )
    assert out == ["CreateTime:1700000000123|Offset:0|a:1,b:null|k|v", out[1]]
    assert out[1].endswith("|NO_HEADERS|null|null")
    assert consume(tmp_path, "t", "--from-beginning", "--property", "print.value=false,print.key=true") == [
        "k",
        "null",
    ]


def test_json_round_trip(tmp_path: Path) -> None:
    records = [
        {"key": "a", "value": "plain", "headers": {"h": "x"}, "partition": 1, "timestamp": 1_700_000_000_000},
        {"key": None, "value": {"nested": [1, 2]}, "partition": 0},
    ]
    produce(
        tmp_path,
        "t",
        "\n".join(json.dumps(r) for r in records) + "\n\n",
        "--format",
        "json",
        "--create",
        "--partitions",
        "2",
    )
    out = json_lines("\n".join(consume(tmp_path, "t", "--from-beginning", "--format", "json")))
    by_partition = {o["partition"]: o for o in out}
    assert by_partition[1] == {
        "topic": "t",
        "partition": 1,
        "offset": 0,
        "timestamp": 1_700_000_000_000,
        "timestampType": "CreateTime",
        "key": "a",
        "value": "plain",
        "headers": {"h": "x"},
    }
    assert by_partition[0]["value"] == '{"nested":[1,2]}' and by_partition[0]["key"] is None
    parsed = json_lines(
        "\n".join(
            consume(
                tmp_path,
                "t",
                "--partition",
                "0",
                "--offset",
                "0",
                "--format",
                "json",
                "--value-decoder",
                "json",
            )
        )
    )
    assert parsed[0]["value"] == {"nested": [1, 2]}
    # consume --format json | produce --format json copies a topic
    copy = "\n".join(consume(tmp_path, "t", "--from-beginning", "--format", "json"))
    produce(tmp_path, "copy", copy + "\n", "--format", "json", "--create", "--partitions", "2")
    again = json_lines("\n".join(consume(tmp_path, "copy", "--from-beginning", "--format", "json")))

    def strip(objs: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return sorted(
            (o["partition"], o["offset"], o["key"], o["value"], json.dumps(o["headers"]))
            for o in objs  # type: ignore[misc]
        )

    assert strip(again) == strip(out)


def test_whole_files_compression_and_fixed_partition(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 100)
    data = tmp_path / "data"
    result = run(
        "produce",
        data,
        "files",
        blob,
        "--format",
        "file",
        "--key",
        "b",
        "--create",
        "--partitions",
        "3",
        "--partition",
        "2",
        "--compression",
        "zstd",
        "--print-offsets",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "partition: 2 baseOffset: 0 lastOffset: 0 count: 1"
    out = consume(data, "files", "--from-beginning", "--value-decoder", "hex")
    assert out == [blob.read_bytes().hex()]
    dumped = run("dump", "--json", data / "files-2" / "00000000000000000000.log")
    assert json_lines(dumped.stdout)[0]["compressionType"] == "zstd"


def test_batching_and_acks_all(tmp_path: Path) -> None:
    lines = "".join(f"v{i}\n" for i in range(25))
    result = run(
        "produce",
        tmp_path,
        "t",
        "--create",
        "--batch-size",
        "10",
        "--acks",
        "all",
        "--print-offsets",
        input=lines,
    )
    assert result.exit_code == 0
    assert [line.split()[-1] for line in result.stdout.splitlines()] == ["10", "10", "5"]
    with LogManager.open(tmp_path, background=False) as mgr:
        log = mgr.get_log("t", 0)
        assert log.log_end_offset == 25


def test_bad_input_and_usage(tmp_path: Path) -> None:
    result = run("produce", tmp_path, "t", "--create", "--parse-key", input="a\tb\nno separator\n")
    assert result.exit_code == 1
    assert "<stdin> line 2: no key separator (a tab" in result.stderr and "Traceback" not in result.stderr
    assert "b'" not in result.stderr  # never a bytes repr
    assert "produced 1 record in 1 batch to t" in result.stderr
    assert consume(tmp_path, "t", "--from-beginning") == ["b"]  # what came before the bad line was written
    skipped = run("produce", tmp_path, "t", "--parse-key", "--ignore-error", input="x\ty\nbad\n")
    assert skipped.exit_code == 0 and "skipped" in skipped.stderr
    assert run("produce", tmp_path, "t", "--format", "json", input="[1]\n").exit_code == 1
    far = run("produce", tmp_path, "t", "--format", "json", input='{"value": "x", "partition": 5}\n')
    assert far.exit_code == 1 and "partition 5 does not exist" in far.stderr and "Traceback" not in far.stderr
    assert run("produce", tmp_path, "nope", input="x\n").exit_code == 1
    assert run("produce", tmp_path, "t", "--partition", "7", input="x\n").exit_code == 64
    assert run("produce", tmp_path, "t", "--partitions", "2", input="x\n").exit_code == 64
    assert run("produce", tmp_path, "bad/topic", "--create", input="x\n").exit_code == 64
    assert run("produce", tmp_path, "t", tmp_path / "missing.txt").exit_code == 66
    assert run("consume", tmp_path, "nope", "--from-beginning").exit_code == 66
    assert run("consume", tmp_path, "t", "--partition", "9").exit_code == 66
    assert run("consume", tmp_path, "t", "--offset", "soon").exit_code == 64
    assert run("consume", tmp_path, "t", "--from-beginning", "--offset", "3").exit_code == 64
    assert run("consume", tmp_path, "t", "--property", "print.colour=true").exit_code == 64
    assert run("consume", tmp_path / "missing", "t").exit_code == 66


def test_timestamp_start(tmp_path: Path) -> None:
    recs = [json.dumps({"value": f"v{i}", "timestamp": 1_000_000 + i * 10}) for i in range(10)]
    produce(tmp_path, "t", "\n".join(recs) + "\n", "--format", "json", "--create", "--batch-size", "3")
    assert consume(tmp_path, "t", "--timestamp", "1000045") == [f"v{i}" for i in range(5, 10)]
    assert consume(tmp_path, "t", "--timestamp", "9000000") == []


def test_read_committed_skips_aborted_transactions(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
        mgr.produce("t", [(None, b"before")])
        for pid, outcome in ((7, "ABORT"), (8, "COMMIT")):
            batch = MemoryRecords.build(
                [SimpleRecord(b"%s-%d" % (outcome.encode(), i)) for i in range(2)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )
            mgr.append("t", 0, batch)
            marker = MemoryRecords.end_transaction_marker(
                producer_id=pid, producer_epoch=0, control_type=outcome, coordinator_epoch=1
            )
            mgr.append("t", 0, marker, origin=AppendOrigin.COORDINATOR)
        open_txn = MemoryRecords.build(
            [SimpleRecord(b"open")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
        )
        mgr.append("t", 0, open_txn)
        mgr.produce("t", [(None, b"after")])
    uncommitted = consume(tmp_path, "t", "--from-beginning")
    assert uncommitted == ["before", "ABORT-0", "ABORT-1", "COMMIT-0", "COMMIT-1", "open", "after"]
    committed = consume(tmp_path, "t", "--from-beginning", "--isolation-level", "read_committed")
    assert committed == ["before", "COMMIT-0", "COMMIT-1"]  # stops at the open transaction (the LSO)


# --------------------------------------------------------------------------------------------------- processes


def test_subprocess_round_trip_and_exit_codes(tmp_path: Path) -> None:
    lines = b"".join(b"k%d\tv%d\n" % (i, i) for i in range(100))
    proc = run_process("produce", tmp_path, "t", "--create", "--partitions", "3", "--parse-key", input=lines)
    assert proc.returncode == 0, proc.stderr
    assert b"produced 100 records" in proc.stderr
    proc = run_process("consume", tmp_path, "t", "--from-beginning", "--property", "print.key=true")
    assert proc.returncode == 0
    got = sorted(proc.stdout.decode().splitlines())
    assert got == sorted(f"k{i}\tv{i}" for i in range(100))


def test_produce_while_the_dir_is_locked_exits_75(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
        proc = run_process("produce", tmp_path, "t", input=b"x\n")
        assert proc.returncode == 75
        assert b"another kafkalog process" in proc.stderr and b"Traceback" not in proc.stderr
        # readers need no lock
        mgr.produce("t", [(None, b"visible")])
        mgr.flush()
        reader = run_process("consume", tmp_path, "t", "--from-beginning")
        assert reader.returncode == 0 and reader.stdout.decode().splitlines() == ["visible"]


def _read_lines(proc: subprocess.Popen[bytes], n: int, timeout: float) -> list[str]:
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and buf.count(b"\n") < n:
        chunk = proc.stdout.read()
        if chunk:
            buf += chunk
        else:
            time.sleep(0.05)
    return buf.decode().splitlines()


@pytest.mark.timeout(180)
def test_follow_while_a_producer_process_writes(tmp_path: Path) -> None:
    """consume --follow (a process, no lock) sees every record a producer process appends, in order, while the
    producer holds the directory's lock; Ctrl-C ends it with exit 0."""
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("live", 1, {"segment.bytes": 4096})
    consumer = subprocess.Popen(
        [
            *kafkalog_command(),
            "consume",
            str(tmp_path),
            "live",
            "--from-beginning",
            "--follow",
            "--poll-ms",
            "50",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    producer = subprocess.Popen(
        [*kafkalog_command(), "produce", str(tmp_path), "live", "--batch-size", "7", "--linger-ms", "10"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert producer.stdin is not None
    try:
        expected = []
        for burst in range(6):
            lines = [f"record-{burst}-{i}-" + "x" * 50 for i in range(20)]
            producer.stdin.write("".join(f"{line}\n" for line in lines).encode())
            producer.stdin.flush()
            expected.extend(lines)
            time.sleep(0.3)
        producer.stdin.close()
        assert producer.wait(timeout=60) == 0, producer.stderr.read() if producer.stderr else b""
        got = _read_lines(consumer, len(expected), timeout=60)
        assert got == expected
        assert len(list((tmp_path / "live-0").glob("*.log"))) > 1  # it followed across segment rolls
        assert stop_with_ctrl_c(consumer, 60) == 0
        assert consumer.stderr is not None and b"Traceback" not in consumer.stderr.read()
    finally:
        for p in (consumer, producer):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_codecs_are_accepted(tmp_path: Path) -> None:
    for codec in Compression:
        topic = f"c-{codec.kafka_name}"
        produce(tmp_path, topic, "a\nb\n", "--create", "--compression", codec.kafka_name)
        assert consume(tmp_path, topic, "--from-beginning") == ["a", "b"]
