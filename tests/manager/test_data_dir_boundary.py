"""The data directory is the boundary (issue #19, items 8-10): loading refuses links, FIFOs and names out of
range before it changes anything, writes never go through a link, and checkpoints that are not UTF-8 are
unreadable checkpoints, not crashes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from kafkalog.errors import KafkaError, KafkaStorageError
from kafkalog.log import Log, LogConfig
from kafkalog.log.checkpoint import CheckpointError, atomic_write, leader_epoch_checkpoint, offset_checkpoint
from kafkalog.manager import LogManager

CONFIG = {"segment.bytes": 400}


def _fill(mgr: LogManager, n: int = 30) -> None:
    mgr.create_topic("t", 1, CONFIG)
    for i in range(n):
        mgr.produce("t", [(b"k", b"value-%03d" % i)])


def _files(directory: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(directory.iterdir()):
        out[p.name] = (
            f"-> {os.readlink(p)}" if p.is_symlink() else (p.read_bytes() if p.is_file() else "other")
        )
    return out


@pytest.fixture
def unclean(tmp_path: Path) -> Path:
    """A data dir of one partition with several segments, shut down without the clean-shutdown marker."""
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as mgr:
        _fill(mgr)
    (data / ".kafka_cleanshutdown").unlink()
    assert len(list((data / "t-0").glob("*.log"))) >= 3
    return data


def test_symlinked_segment_is_refused_and_its_target_untouched(unclean: Path, tmp_path: Path) -> None:
    """Item 8: recovery after an unclean shutdown followed a symlinked segment and truncated its target."""
    part = unclean / "t-0"
    last = sorted(part.glob("*.log"))[-1]
    target = tmp_path / "system-file"
    target.write_bytes(last.read_bytes() + b"not a batch: recovery would cut this tail")
    last.unlink()
    last.symlink_to(target)
    before, target_bytes = _files(part), target.read_bytes()
    with LogManager.open(unclean, background=False) as mgr:
        assert len(mgr.load_failures) == 1
        error = mgr.load_failures[0].error
        assert isinstance(error, KafkaStorageError) and "symbolic link" in str(error)
        with pytest.raises(KafkaStorageError, match="failed to load"):
            mgr.get_or_create_log("t", 0)
    assert target.read_bytes() == target_bytes
    assert _files(part) == before
    with pytest.raises(KafkaStorageError, match="symbolic link"):
        Log.open(part, LogConfig.from_props(CONFIG), last_shutdown_clean=False)
    assert target.read_bytes() == target_bytes


def test_symlinked_partition_directory_is_refused(tmp_path: Path) -> None:
    """A partition directory that is a link to a directory outside the data dir is not loaded or written."""
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    with LogManager.open(data, background=False) as mgr:
        _fill(mgr)
    (data / "t-0").rename(elsewhere)
    (data / "t-0").symlink_to(elsewhere, target_is_directory=True)
    (data / ".kafka_cleanshutdown").unlink()
    with open(sorted(elsewhere.glob("*.log"))[-1], "ab") as f:
        f.write(b"garbage tail")
    before = _files(elsewhere)
    with LogManager.open(data, background=False) as mgr:
        assert [str(f.error) for f in mgr.load_failures] == [
            f"refusing partition directory {data / 't-0'}: it is a symbolic link, not a directory (kafkalog only "
            "reads and writes inside the data directory)"
        ]
    assert _files(elsewhere) == before


def test_fifo_segment_is_a_load_failure_not_a_hang(unclean: Path) -> None:
    part = unclean / "t-0"
    first = sorted(part.glob("*.log"))[0]
    first.unlink()
    os.mkfifo(first)
    before = _files(part)
    with LogManager.open(unclean, background=False) as mgr:
        assert "FIFO" in str(mgr.load_failures[0].error)
    assert _files(part) == before


def test_segment_name_out_of_range_is_a_load_failure(unclean: Path) -> None:
    """Item 9: ``99999999999999999999.log`` passed as a segment (LEO 10**20 - 1) and recovery deleted a real
    snapshot around it. Now the partition is not loaded and nothing in it changes."""
    part = unclean / "t-0"
    last = sorted(part.glob("*.log"))[-1]
    (part / "99999999999999999999.log").write_bytes(last.read_bytes())
    before = _files(part)
    assert any(name.endswith(".snapshot") for name in before)
    with LogManager.open(unclean, background=False) as mgr:
        assert len(mgr.load_failures) == 1
        assert "above the largest offset 9223372036854775807" in str(mgr.load_failures[0].error)
    assert _files(part) == before


@pytest.mark.parametrize(
    "name",
    ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"],
)
def test_checkpoint_with_invalid_utf8_is_ignored(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 10: invalid UTF-8 in a checkpoint crashed LogManager.open with a bare UnicodeDecodeError."""
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as mgr:
        _fill(mgr, 5)
    (data / name).write_bytes(b"0\n1\nt 0 \xff\xfe\n")
    with caplog.at_level(logging.WARNING, logger="kafkalog.manager"), LogManager.open(data) as mgr:
        assert mgr.get_log("t", 0).log_end_offset == 5
    assert f"Ignoring unreadable checkpoint {data / name}" in caplog.text
    assert "not valid UTF-8" in caplog.text


def test_partition_checkpoints_with_invalid_utf8_are_typed_errors(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_bytes(b"0\n1\n\xc3\x28 0\n")
    with pytest.raises(CheckpointError, match="not valid UTF-8"):
        leader_epoch_checkpoint(tmp_path).read()
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as mgr:
        _fill(mgr, 3)
    (data / "t-0" / "partition.metadata").write_bytes(b"version: 0\ntopic_id: \xff\n")
    with LogManager.open(data, background=False) as mgr:
        assert isinstance(mgr.load_failures[0].error, KafkaError)
        assert "not valid UTF-8" in str(mgr.load_failures[0].error)


def test_atomic_write_never_writes_through_a_planted_tmp_link(tmp_path: Path) -> None:
    """A link (or FIFO) planted as a checkpoint's temp file is replaced, never written through or waited on."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    path = tmp_path / "recovery-point-offset-checkpoint"
    tmp = tmp_path / "recovery-point-offset-checkpoint.tmp"
    tmp.symlink_to(outside)
    offset_checkpoint(path).write([])
    assert outside.read_bytes() == b"precious"
    assert path.read_bytes() == b"0\n0\n" and not tmp.exists()
    os.mkfifo(tmp)
    atomic_write(path, b"x")
    assert path.read_bytes() == b"x" and not tmp.exists()
    tmp.mkdir()
    with pytest.raises(OSError):
        atomic_write(path, b"y")
    assert path.read_bytes() == b"x"


def test_failed_partition_keeps_its_checkpoint_entries(unclean: Path) -> None:
    """A partition that failed to load keeps its offset checkpoint entries when the manager writes them."""
    (unclean / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":-1}')
    with LogManager.open(unclean, background=False):
        pass
    kept = {name: (unclean / name).read_bytes() for name in ("replication-offset-checkpoint",)}
    assert b"t 0 30" in kept["replication-offset-checkpoint"]
    (unclean / "t-0" / "partition.metadata").write_text("garbage")
    with LogManager.open(unclean, background=False) as mgr:
        assert mgr.load_failures
        mgr.create_topic("other", 1)
    text = (unclean / "replication-offset-checkpoint").read_text()
    assert "t 0 30" in text and "other 0 0" in text


def test_planted_links_as_temp_files_do_not_stop_the_log(unclean: Path, tmp_path: Path) -> None:
    """A ``.tmp`` of a partition checkpoint is not data: a link there neither fails the load nor is written
    through; the next checkpoint write replaces it."""
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    tmp = unclean / "t-0" / "leader-epoch-checkpoint.tmp"
    tmp.symlink_to(outside)
    with LogManager.open(unclean, background=False) as mgr:
        assert not mgr.load_failures
        log = mgr.get_log("t", 0)
        log.leader_epoch_cache.assign(5, log.log_end_offset)
    assert outside.read_bytes() == b"precious"
    assert not tmp.exists() and (unclean / "t-0" / "leader-epoch-checkpoint").read_text().endswith("5 30\n")


def test_verify_reports_a_linked_lock_file(unclean: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from kafkalog.cli import cli

    (unclean / ".lock").unlink(missing_ok=True)
    (unclean / ".lock").symlink_to(tmp_path / "elsewhere")
    result = CliRunner().invoke(cli, ["verify", str(unclean)])
    assert result.exit_code == 1 and ".lock: is a symbolic link" in result.output, result.output
    with pytest.raises(KafkaStorageError, match="symbolic link"):
        LogManager.open(unclean)
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("name", ["t-99999999999999999999", "t-2147483648", "t-\u0661"])
def test_partition_directory_names_out_of_range_are_not_partitions(tmp_path: Path, name: str) -> None:
    """Kafka parses the partition with Integer.parseInt: a number above 2**31 - 1, or digits that are not
    ASCII ("t-\u0661" was loaded as partition 1 of t, from a directory that is not t-1), name no partition."""
    from kafkalog.log.names import parse_topic_partition_name

    with pytest.raises(KafkaError, match="not in the form of topic-partition"):
        parse_topic_partition_name(tmp_path / name)
    assert parse_topic_partition_name(tmp_path / "t-2147483647").partition == 2**31 - 1
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as mgr:
        _fill(mgr, 3)
    (data / "t-0").rename(data / name)
    with LogManager.open(data, background=False) as mgr:
        assert [p.name for p in mgr.ignored_dirs] == [name]
        assert mgr.get_or_create_log("t", 0).log_end_offset == 0
