"""kafkalog._durable: the one fsync / atomic-write implementation (errors raised, never swallowed unless a caller
passes ``missing_ok``; every step through the ``os`` module, as the crash suites patch it)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kafkalog import _durable
from kafkalog.errors import NotRegularFileError
from kafkalog.log.checkpoint import atomic_write
from kafkalog.spark.sink_layout import fsync_dir as sink_fsync_dir


def _failing_fsync(fd: int) -> None:
    raise OSError(errno.EIO, "Input/output error")


def test_the_spark_sinks_directory_fsync_raises_a_failing_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sink's copy used to swallow it: a journal's directory entry could be lost with no error."""
    monkeypatch.setattr(os, "fsync", _failing_fsync)
    with pytest.raises(OSError) as info:
        sink_fsync_dir(tmp_path)
    assert info.value.errno == errno.EIO


def test_fsync_dir_raises_for_a_missing_directory_unless_the_caller_waives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(FileNotFoundError):
        _durable.fsync_dir(tmp_path / "gone")
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    _durable.fsync_dir(tmp_path / "gone", missing_ok=True)
    assert synced == []
    _durable.fsync_dir(tmp_path)
    assert len(synced) == 1


def test_fsync_file_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError):
        _durable.fsync_file(tmp_path / "fifo")  # never waits for a writer
    (tmp_path / "target").write_bytes(b"x")
    os.symlink(tmp_path / "target", tmp_path / "link")
    with pytest.raises(NotRegularFileError):
        _durable.fsync_file(tmp_path / "link")
    with pytest.raises(FileNotFoundError):
        _durable.fsync_file(tmp_path / "missing")
    _durable.fsync_file(tmp_path / "missing", missing_ok=True)
    _durable.fsync_file(tmp_path / "target")
    assert (tmp_path / "target").read_bytes() == b"x"


def test_atomic_write_refuses_a_directory_in_place_of_its_temp_file_with_a_typed_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"old")
    (tmp_path / "file.tmp").mkdir()
    with pytest.raises(NotRegularFileError):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"


def test_atomic_write_replaces_a_stale_temp_file_and_fsyncs_file_then_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file"
    (tmp_path / "file.tmp").write_bytes(b"stale, longer than the new content")
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert not (tmp_path / "file.tmp").exists()
    assert calls == ["fsync", "replace", "fsync"]


def test_atomic_write_leaves_the_old_file_when_the_temp_files_fsync_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"old")
    monkeypatch.setattr(os, "fsync", _failing_fsync)
    with pytest.raises(OSError):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"
