"""``kafkalog compact``: a data directory's compacted topics, a lone partition directory (--force), JSON."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kafkalog.cli.main import cli
from kafkalog.manager import LogManager
from kafkalog.records import SimpleRecord


def make_data_dir(path: Path) -> None:
    with LogManager.open(path, background=False) as m:
        m.create_topic("users", 1, {"cleanup.policy": "compact", "segment.bytes": 2048})
        m.create_topic("events", 1, {"segment.bytes": 2048})
        for i in range(300):
            m.produce("users", [SimpleRecord(b"v%d" % i, b"k%d" % (i % 7))])
            m.produce("events", [SimpleRecord(b"e%d" % i, b"k%d" % (i % 7))])


def test_compact_data_dir(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    result = CliRunner().invoke(cli, ["compact", str(tmp_path), "--roll", "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert (
        result.stderr.strip()
        == "1 topic not compacted: cleanup.policy has no 'compact' (name a topic to see its policy; --force compacts it once)"
    )
    assert [line["partition"] for line in lines if line["type"] == "partition"] == ["users-0"]
    assert lines[0]["endOffset"] == 300 and lines[0]["bytesAfter"] < lines[0]["bytesBefore"]
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == "0\n1\nusers 0 300\n"
    with LogManager.open(tmp_path, background=False) as m:
        log = m.get_log("users", 0)
        latest = {r.key: r.value for s in log.segments for b in s.batches() for r in b.records()}
        assert latest == {b"k%d" % (i % 7): b"v%d" % i for i in range(293, 300)}
    again = CliRunner().invoke(cli, ["compact", str(tmp_path)])
    assert again.exit_code == 0 and "nothing cleanable" in again.output


def test_compact_partition_dir_needs_force(tmp_path: Path) -> None:
    make_data_dir(tmp_path / "data")
    lone = tmp_path / "events-0"
    (tmp_path / "data" / "events-0").rename(lone)
    skipped = CliRunner().invoke(cli, ["compact", str(lone)])
    assert "0 partitions compacted" in skipped.stdout
    assert "topic events not compacted: its cleanup.policy is delete" in skipped.stderr
    assert "--force" in skipped.stderr
    result = CliRunner().invoke(cli, ["compact", str(lone), "--force", "--roll"])
    assert result.exit_code == 0 and "1 partition compacted" in result.output
    assert "1 round," in result.output and "not compacted" not in result.stderr


def test_compact_data_dir_says_why_a_topic_is_skipped(tmp_path: Path) -> None:
    make_data_dir(tmp_path)
    result = CliRunner().invoke(cli, ["compact", str(tmp_path), "events"])
    assert result.exit_code == 0
    assert "0 partitions compacted" in result.stdout
    assert "topic events not compacted: its cleanup.policy is delete" in result.stderr
