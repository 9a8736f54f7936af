"""``kafkalog recover`` (truncation, deleted segments, rebuilt indexes, dry run, lock) and ``kafkalog retention``
(the dry-run plan is what the real run deletes)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kafkalog.manager import LogManager

from .helpers import (
    flip_byte,
    json_lines,
    offset_index_entries,
    run,
    run_process,
    tree_state,
    write_partition,
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("recover") / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("orders", 2, {"segment.bytes": 1500, "index.interval.bytes": 200})
        for i in range(120):
            mgr.produce("orders", [(b"k%d" % i, b"v" * 40)])
    return root


def copy_of(src: Path, tmp_path: Path) -> Path:
    target = tmp_path / src.name
    shutil.copytree(src, target)
    return target


def partition_result(stdout: str, partition: str) -> dict[str, object]:
    return next(o for o in json_lines(stdout) if o.get("partition") == partition and o["type"] == "partition")


def test_nothing_to_repair(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    result = run("recover", root)
    assert result.exit_code == 0, result.stderr
    assert "orders-0: nothing to repair" in result.stdout and "orders-1: nothing to repair" in result.stdout
    assert run("verify", root).exit_code == 0


def test_torn_tail_and_corrupt_segment_are_repaired(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    part = root / "orders-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 3
    size_before = {p.name: p.stat().st_size for p in logs}
    flip_byte(logs[1], 150)  # a bad CRC in the second segment: only that batch goes, later segments stay
    with logs[-1].open("ab") as f:
        f.write(b"\x00" * 40)
    result = run("recover", "--json", root)
    assert result.exit_code == 0, result.stderr
    obj = partition_result(result.stdout, "orders-0")
    truncated = obj["truncated"]
    assert isinstance(truncated, list)
    assert [t["baseOffset"] for t in truncated] == [int(logs[1].name[:20]), int(logs[-1].name[:20])]
    assert 0 < size_before[logs[1].name] - truncated[0]["sizeAfter"] < 200  # one batch
    assert obj["segmentsDeleted"] == []
    assert logs[-1].stat().st_size == size_before[logs[-1].name]  # the zero tail is gone
    assert obj["bytesTruncated"] == sum(size_before.values()) + 40 - sum(
        p.stat().st_size for p in part.glob("*.log")
    )
    assert obj["logEndOffsetAfter"] == obj["logEndOffsetBefore"]
    plan = obj["plan"]
    assert isinstance(plan, dict)
    assert [(s["file"], s["action"]) for s in plan["segments"]] == [
        (logs[1].name, "rewrite"),
        (logs[-1].name, "truncate"),
    ]
    assert partition_result(result.stdout, "orders-1")["bytesTruncated"] == 0
    summary = json_lines(result.stdout)[-1]
    assert summary["type"] == "summary" and summary["changed"] == 1 and summary["failed"] == 0
    assert run("verify", root).exit_code == 0
    assert (root / ".kafka_cleanshutdown").exists()


def test_truncate_after_damage_is_kafkas_rule(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    part = root / "orders-0"
    logs = sorted(part.glob("*.log"))
    size_before = {p.name: p.stat().st_size for p in logs}
    flip_byte(logs[1], 150)  # asked for: cut there, later segments go
    result = run("recover", "--json", "--truncate-after-damage", root)
    assert result.exit_code == 0, result.stderr
    obj = partition_result(result.stdout, "orders-0")
    truncated = obj["truncated"]
    assert isinstance(truncated, list) and truncated[0]["baseOffset"] == int(logs[1].name[:20])
    assert truncated[0]["sizeAfter"] < size_before[logs[1].name]
    deleted = obj["segmentsDeleted"]
    assert isinstance(deleted, list)
    assert [d["baseOffset"] for d in deleted] == [int(p.name[:20]) for p in logs[2:]]
    assert isinstance(obj["logEndOffsetAfter"], int) and obj["logEndOffsetAfter"] < obj["logEndOffsetBefore"]  # type: ignore[operator]
    assert run("verify", root).exit_code == 0


def test_dry_run_prints_the_plan_and_changes_nothing(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    flip_byte(sorted((root / "orders-1").glob("*.log"))[0], 100)
    before = tree_state(root)
    result = run("recover", "--dry-run", root)
    assert result.exit_code == 1
    assert "would repair" in result.stdout and "rewrite" in result.stdout
    assert tree_state(root) == before
    clean = copy_of(data, tmp_path / "clean")
    assert run("recover", "--dry-run", clean).exit_code == 0


def test_corrupt_index_is_rebuilt(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    index = root / "orders-1" / "00000000000000000000.index"
    good = index.read_bytes()
    assert offset_index_entries(index)
    index.write_bytes(good[:-8] + b"\x00\x00\x00\x01\x00\x00\x00\x05")
    assert run("verify", root).exit_code == 1
    result = run("recover", root / "orders-1")  # a partition directory inside a data directory
    assert result.exit_code == 0, result.stderr
    assert "rebuilt" in result.stdout and index.name in result.stdout
    assert index.read_bytes() == good
    assert run("verify", root).exit_code == 0


def test_standalone_partition_directory(tmp_path: Path) -> None:
    written = write_partition(tmp_path / "solo-0")
    log = written.path / f"{written.bases[-1]:020d}.log"
    with log.open("ab") as f:
        f.write(b"garbage after the last batch")
    result = run("recover", "--json", written.path)
    assert result.exit_code == 0
    obj = partition_result(result.stdout, "solo-0")
    assert obj["bytesTruncated"] == len(b"garbage after the last batch")
    assert obj["logEndOffsetAfter"] == written.log_end_offset
    assert (written.path / ".kafka_cleanshutdown").exists()  # a standalone log keeps its own marker
    assert run("verify", written.path).exit_code == 0


def test_recover_needs_the_lock(data: Path, tmp_path: Path) -> None:
    root = copy_of(data, tmp_path)
    with LogManager.open(root, background=False):
        proc = run_process("recover", root)
        assert proc.returncode == 75
        assert b"locked" in proc.stderr.lower() or b"lock" in proc.stderr
        assert run_process("recover", root / "orders-0").returncode == 75
        assert run_process("recover", "--dry-run", root).returncode == 0  # read-only
    assert run("recover", tmp_path / "missing").exit_code == 66


# --------------------------------------------------------------------------------------------------- retention


def test_retention_dry_run_is_what_happens(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("sized", 1, {"segment.bytes": 1000, "retention.bytes": 2500})
        mgr.create_topic("timed", 1, {"segment.bytes": 1000, "retention.ms": 3_600_000})
        mgr.create_topic("kept", 1, {"segment.bytes": 1000})
        for _ in range(60):
            mgr.produce("sized", [(None, b"s" * 60)])
            mgr.produce("kept", [(None, b"k" * 60)])
        old = int((time.time() - 7200) * 1000)
        from kafkalog.records import SimpleRecord

        for i in range(30):
            mgr.produce("timed", [SimpleRecord(b"t" * 60, None, old + i)])
    before = tree_state(root)
    dry = run("retention", root, "--dry-run", "--json")
    assert dry.exit_code == 0
    assert tree_state(root) == before  # the dry run changed nothing
    plan = json_lines(dry.stdout)
    planned = sorted((o["partition"], o["baseOffset"], o["rule"]) for o in plan if o["type"] == "segment")
    assert {p for p, _, _ in planned} == {"sized-0", "timed-0"}
    assert {r for p, _, r in planned if p == "timed-0"} == {"retention_ms"}
    assert {r for p, _, r in planned if p == "sized-0"} == {"retention_bytes"}
    text = run("retention", root, "--dry-run")
    assert "[retention_bytes]" in text.stdout and "kept-0: nothing to delete" in text.stdout
    assert "1 segments" not in text.stdout  # counts in the right number

    done = run("retention", root, "--json")
    assert done.exit_code == 0, done.stderr
    actual = sorted(
        (o["partition"], o["baseOffset"], o["rule"])
        for o in json_lines(done.stdout)
        if o["type"] == "segment"
    )
    assert actual == planned
    timed = next(
        o for o in json_lines(done.stdout) if o["type"] == "partition" and o["partition"] == "timed-0"
    )
    assert timed["rolled"] is True and timed["logStartOffsetAfter"] == 30
    assert json_lines(run("retention", root, "--dry-run", "--json").stdout)[-1]["segmentsDeleted"] == 0
    assert run("verify", root).exit_code == 0


def test_retention_of_one_topic_and_log_start_offset_rule(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("a", 1, {"segment.bytes": 1000})
        mgr.create_topic("b", 1, {"segment.bytes": 1000, "retention.bytes": 1})
        for _i in range(40):
            mgr.produce("a", [(None, b"a" * 60)])
            mgr.produce("b", [(None, b"b" * 60)])
        log = mgr.get_log("a", 0)
        log.maybe_increment_log_start_offset(25, "test")
    plan = json_lines(run("retention", root, "a", "--dry-run", "--json").stdout)
    segs = [o for o in plan if o["type"] == "segment"]
    assert segs and all(o["partition"] == "a-0" and o["rule"] == "log_start_offset" for o in segs)
    result = run("retention", root, "a")
    assert result.exit_code == 0
    assert "log start offset" in result.stdout
    assert len(list((root / "b-0").glob("*.log"))) > 1  # topic b was not touched
    assert run("retention", root, "nope").exit_code == 66


def test_retention_needs_the_lock(tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
        assert run_process("retention", tmp_path).returncode == 75
        assert run_process("retention", tmp_path, "--dry-run").returncode == 0


def test_retention_says_one_segment(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("small", 1)
        mgr.produce("small", [(None, b"x")])
    text = run("retention", root, "--dry-run")
    assert text.exit_code == 0
    assert "small-0: nothing to delete (1 segment)" in text.stdout
    assert "Dry run: 0 segments (0 bytes) would be deleted." in text.stdout
