"""``kafkalog topics`` (through the LogManager) and ``kafkalog info`` (read-only), plus the top-level command."""

from __future__ import annotations

from pathlib import Path

from kafkalog.datadir import read_topics
from kafkalog.manager import LogManager

from .helpers import json_lines, run, run_process, tree_state, write_partition


def test_topic_lifecycle(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = run(
        "topics",
        data,
        "--create",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=86400000,segment.bytes=1048576",
    )
    assert result.exit_code == 0 and result.stdout.strip() == "Created topic orders."
    assert run("topics", data, "--create", "orders").exit_code == 1
    assert run("topics", data, "--create", "orders", "--if-not-exists").exit_code == 0
    assert (
        run("topics", data, "--create", "events", "--config", "cleanup.policy=compact,delete").exit_code == 0
    )
    assert run("topics", data).stdout.splitlines() == ["events", "orders"]
    assert run("topics", data, "--list").stdout.splitlines() == ["events", "orders"]
    doc = read_topics(data)
    assert doc is not None
    assert doc.topics["orders"].partitions == 3
    assert doc.topics["orders"].config == {"retention.ms": 86400000, "segment.bytes": 1048576}
    assert doc.topics["events"].config == {"cleanup.policy": "compact,delete"}

    described = run("topics", data, "--describe", "orders").stdout.splitlines()
    assert described[0].startswith("Topic: orders\tTopicId: ")
    assert described[0].endswith(
        "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=86400000,segment.bytes=1048576"
    )
    assert described[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLogStartOffset: 0\tLogEndOffset: 0\tHighWatermark: 0\tSize: 0\tSegments: 1"
        for p in range(3)
    ]
    assert len(run("topics", data, "--describe").stdout.splitlines()) == 1 + 1 + 3 + 1

    result = run(
        "topics",
        data,
        "--alter",
        "orders",
        "--config",
        "retention.bytes=1000",
        "--delete-config",
        "retention.ms",
        "--partitions",
        "5",
    )
    assert result.exit_code == 0, result.stderr
    obj = json_lines(run("topics", data, "--describe", "orders", "--json").stdout)[0]
    assert obj["partitionCount"] == 5 and obj["config"] == {"retention.bytes": 1000, "segment.bytes": 1048576}
    assert [p["partition"] for p in obj["partitions"]] == [0, 1, 2, 3, 4]

    assert run("topics", data, "--delete", "orders").stdout.strip() == "Deleted topic orders."
    assert not [p for p in data.iterdir() if p.name.startswith("orders")]  # removed at once, not just renamed
    assert run("topics", data, "--delete", "orders").exit_code == 1
    assert run("topics", data, "--delete", "orders", "--if-exists").exit_code == 0
    assert run("topics", data, "--alter", "orders", "--config", "retention.ms=1").exit_code == 1
    assert run("topics", data).stdout.splitlines() == ["events"]


def test_topics_usage_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    run("topics", data, "--create", "t")
    for args in (
        ["--create", "x", "--config", "no.such.config=1"],
        ["--create", "x", "--config", "retention.ms=soon"],
        ["--create", "x", "--config", "novalue"],
        ["--create", "bad/name"],
        ["--create", "x", "--partitions", "0"],
        ["--create", "x", "--delete", "t"],
        ["--alter", "t"],
        ["--config", "retention.ms=1"],
        ["--delete-config", "retention.ms"],
    ):
        result = run("topics", data, *args)
        assert result.exit_code == 64, (args, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr
    assert run("topics", tmp_path / "missing").exit_code == 66
    assert run("topics", data, "--describe", "nope").exit_code == 1


def test_topics_while_locked(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 2)
        proc = run_process("topics", tmp_path, "--create", "u")
        assert proc.returncode == 75
        listing = run_process("topics", tmp_path, "--describe")  # read-only: no lock needed
        assert listing.returncode == 0 and b"Topic: t\t" in listing.stdout


def test_info_of_a_data_directory(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("orders", 2, {"segment.bytes": 1500})
        for i in range(60):
            mgr.produce("orders", [(b"k%d" % i, b"v" * 30)])
    write_partition(tmp_path / "txn-0")
    before = tree_state(tmp_path)
    result = run("info", tmp_path)
    assert result.exit_code == 0, result.stderr
    assert "orders-0" in result.stdout and "txn-0" in result.stdout and "segment.bytes=1500" in result.stdout
    objs = json_lines(run("info", tmp_path, "--json").stdout)
    assert tree_state(tmp_path) == before  # read-only
    topics = [o for o in objs if o["type"] == "topic"]
    assert topics[0]["topic"] == "orders" and topics[0]["config"] == {"segment.bytes": 1500}
    parts = {f"{o['topic']}-{o['partition']}": o for o in objs if o["type"] == "partition"}
    with LogManager.open(tmp_path, background=False) as mgr:
        for tp, log in mgr.all_logs().items():
            p = parts[str(tp)]
            assert p["logEndOffset"] == log.log_end_offset
            assert p["logStartOffset"] == log.log_start_offset
            assert [s["baseOffset"] for s in p["segments"]] == [s.base_offset for s in log.segments]
            assert p["sizeBytes"] == log.size
    txn = parts["txn-0"]
    assert {pr["producerId"] for pr in txn["producers"]} >= {50}
    assert txn["leaderEpochs"] == [{"epoch": 0, "startOffset": 0}]
    assert objs[-1] == {
        "type": "summary",
        "topics": 2,
        "partitions": 3,
        "segments": objs[-1]["segments"],
        "sizeBytes": objs[-1]["sizeBytes"],
    }
    verbose = run("info", tmp_path, "--topic", "txn", "-v")
    assert (
        "txn-0: segments" in verbose.stdout
        and "producers" in verbose.stdout
        and "orders-0" not in verbose.stdout
    )


def test_info_of_a_partition_with_an_open_transaction(tmp_path: Path) -> None:
    from kafkalog.log import Log
    from kafkalog.records import MemoryRecords, SimpleRecord

    path = tmp_path / "t-0"
    log = Log.open(path)
    log.append([SimpleRecord(b"a")])
    log.append_as_leader(
        MemoryRecords.build(
            [SimpleRecord(b"tx")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True
        )
    )
    log.append([SimpleRecord(b"b")])
    log.close()
    obj = next(o for o in json_lines(run("info", path, "--json").stdout) if o["type"] == "partition")
    assert (obj["logEndOffset"], obj["highWatermark"], obj["lastStableOffset"]) == (3, 3, 1)
    assert obj["producers"][0]["currentTxnFirstOffset"] == 1
    text = run("info", path)  # a partition directory shows its details
    assert "t-0: segments" in text.stdout and "open txn from" in text.stdout


def test_info_bad_paths(tmp_path: Path) -> None:
    assert run("info", tmp_path / "missing").exit_code == 66
    assert run("info", tmp_path, "--topic", "nope").exit_code == 66


def test_top_level_help_and_errors() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for code in (
        "0    success",
        "1    faults found",
        "64   usage error",
        "66   no such file",
        "75   log directory locked",
    ):
        assert code in result.stdout
    for command in ("consume", "dump", "info", "produce", "recover", "retention", "topics", "verify"):
        assert f"  {command} " in result.stdout
        sub = run(command, "--help")
        assert sub.exit_code == 0 and "Examples:" in sub.stdout and "Exit codes" in sub.stdout
        assert max(len(line) for line in sub.stdout.splitlines()) <= 80
    assert run("no-such-command").exit_code == 64
    assert run("--no-such-option").exit_code == 64
    version = run_process("--version")
    assert version.returncode == 0 and version.stdout.startswith(b"kafkalog, version")
