"""``kafkalog info DIR --tree`` (:mod:`kafkalog.cli.layout`): every file of a directory with what it holds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.cli.common import EXIT_NOINPUT, EXIT_USAGE
from kafkalog.cli.layout import render_tree, write_example

from .helpers import run, run_process


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("layout") / "data"
    write_example(data)
    return data


def test_tree_describes_each_file(example: Path) -> None:
    result = run("info", example, "--tree")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{example}/"
    assert lines == render_tree(example)
    by_name = {
        line.split()[1]: line for line in lines[1:] if len(line.split()) > 1 and "/" not in line.split()[1]
    }
    assert "segment: offsets 0..19, 4 batches" in lines[lines.index("├── orders-0/") + 2]
    assert any("00000000000000000000.txnindex" in x and "1 aborted transaction" in x for x in lines)
    assert any(".snapshot" in x and "2 producers" in x for x in lines)
    assert by_name["recovery-point-offset-checkpoint"].endswith("2 entries: orders-0=45, orders-1=19")
    assert by_name["kafkalog-topics.json"].endswith("topics: orders (2 partitions)")
    assert lines[-1].startswith("└── replication-offset-checkpoint")


def test_tree_of_a_damaged_file_says_so(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_example(data)
    (data / "orders-1" / "00000000000000000019.snapshot").write_bytes(b"\x00\x01garbage")
    before = sorted((p.name, p.stat().st_size) for p in data.rglob("*"))
    result = run("info", data, "--tree")
    assert result.exit_code == 0
    line = next(x for x in result.stdout.splitlines() if "00000000000000000019.snapshot" in x)
    assert "unreadable:" in line
    assert sorted((p.name, p.stat().st_size) for p in data.rglob("*")) == before  # nothing written


def test_tree_refuses_other_views_and_missing_dirs(example: Path, tmp_path: Path) -> None:
    assert run("info", example, "--tree", "--json").exit_code == EXIT_USAGE
    assert run("info", example, "--tree", "--topic", "orders").exit_code == EXIT_USAGE
    assert run("info", tmp_path / "nope", "--tree").exit_code == EXIT_NOINPUT


def test_tree_never_opens_a_fifo_or_follows_a_link(tmp_path: Path) -> None:
    """A FIFO named like a file kafkalog reads would block a reader; a link may point out of the directory."""
    data = tmp_path / "data"
    write_example(data)
    os.mkfifo(data / "kafkalog-topics.json.fifo")
    os.replace(data / "kafkalog-topics.json.fifo", data / "orders-0" / "00000000000000000045.snapshot")
    os.mkfifo(data / "kafkalog-topics.json.tmp")
    (data / "kafkalog-topics.json").unlink()
    os.replace(data / "kafkalog-topics.json.tmp", data / "kafkalog-topics.json")
    (data / "orders-1" / "00000000000000000000.log").unlink()
    (data / "orders-1" / "00000000000000000000.log").symlink_to("/dev/zero")
    result = run_process("info", data, "--tree", timeout=60)  # a process: a blocked open would time out
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert any("00000000000000000045.snapshot" in x and "not a regular file" in x for x in lines)
    assert any("kafkalog-topics.json" in x and "not a regular file" in x for x in lines)
    assert any("00000000000000000000.log" in x and "symbolic link (not followed)" in x for x in lines)
