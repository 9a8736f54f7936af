"""File names and the regular-file rule of :mod:`kafkalog.storage.files` (issue #19, items 8 and 9)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.storage import FileRecords
from kafkalog.storage.files import (
    check_regular,
    offset_from_file_name,
    open_regular,
    read_regular,
)
from kafkalog.storage.offset_index import OffsetIndex
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex


def test_offset_from_file_name_range() -> None:
    assert offset_from_file_name("09223372036854775807.log") == 2**63 - 1
    with pytest.raises(KafkaStorageError, match="above the largest offset"):
        offset_from_file_name("99999999999999999999.log")
    with pytest.raises(KafkaStorageError):
        offset_from_file_name("09223372036854775808.snapshot")
    with pytest.raises(ValueError, match="not a segment file name"):
        offset_from_file_name(
            "\u0661\u0662.log"
        )  # Arabic-Indic digits: str.isdigit() says yes, Kafka says no
    with pytest.raises(ValueError):
        offset_from_file_name("abc.log")


def test_open_regular_refuses_a_symlink_and_leaves_its_target(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious")
    link = tmp_path / "00000000000000000000.index"
    link.symlink_to(outside)
    for flags in (os.O_RDONLY, os.O_RDWR, os.O_RDWR | os.O_CREAT | os.O_TRUNC):
        with pytest.raises(KafkaStorageError, match="symbolic link"):
            open_regular(link, flags)
    dangling = tmp_path / "00000000000000000001.log"
    dangling.symlink_to(tmp_path / "created-outside.log")
    with pytest.raises(KafkaStorageError, match="symbolic link"):
        open_regular(dangling, os.O_RDWR | os.O_CREAT)
    assert outside.read_bytes() == b"precious"
    assert not (tmp_path / "created-outside.log").exists()
    with pytest.raises(KafkaStorageError, match="symbolic link"):
        check_regular(link)


def test_open_regular_never_blocks_on_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "00000000000000000000.log"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def attempt() -> None:
        for flags in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):
            try:
                open_regular(fifo, flags)
            except BaseException as exc:
                outcome.append(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():  # unblock it before failing, so the test process can end
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        pytest.fail("open_regular blocked on a FIFO")
    assert len(outcome) == 3
    assert all(isinstance(e, KafkaStorageError) and "FIFO" in str(e) for e in outcome), outcome
    with pytest.raises(KafkaStorageError, match="FIFO"):
        read_regular(fifo)


def test_open_regular_refuses_a_directory(tmp_path: Path) -> None:
    d = tmp_path / "leader-epoch-checkpoint"
    d.mkdir()
    for flags in (os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
        with pytest.raises(KafkaStorageError, match="directory"):
            open_regular(d, flags)


def test_open_regular_on_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    fd = open_regular(path, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"abc")
    finally:
        os.close(fd)
    assert read_regular(path) == b"abc"
    assert check_regular(path) and not check_regular(tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing", os.O_RDONLY)


def test_segment_files_are_never_opened_through_a_link(tmp_path: Path) -> None:
    """A ``.log``, ``.index`` or ``.txnindex`` that is a link is refused by the storage layer itself, and the
    file it points to keeps every byte (truncation and writes go through descriptors opened O_NOFOLLOW)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    part = tmp_path / "t-0"
    part.mkdir()
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.txnindex"):
        (outside / name).write_bytes(b"\x00" * 68)
        (part / name).symlink_to(outside / name)
    with pytest.raises(KafkaStorageError):
        FileRecords.open(part / "00000000000000000000.log", file_already_exists=True)
    with pytest.raises(KafkaStorageError):
        FileRecords.open(part / "00000000000000000000.log")
    index = OffsetIndex(part / "00000000000000000000.index", 0, 1024)
    with pytest.raises(KafkaStorageError):
        index.truncate_to(0)
    txn = TransactionIndex(0, part / "00000000000000000000.txnindex")
    with pytest.raises(KafkaStorageError):
        txn.append(AbortedTxn(1, 0, 1, 0))
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.txnindex"):
        assert (outside / name).read_bytes() == b"\x00" * 68
