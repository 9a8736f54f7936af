"""Kafka's ``TransactionIndexTest`` scenarios, same numbers, against :class:`kafkalog.storage.TransactionIndex`.

Ported (``storage/src/test/java/org/apache/kafka/storage/internals/log/TransactionIndexTest.java``):
testPositionSetCorrectlyWhenOpened, testSanityCheck, testLastOffsetMustIncrease, testLastOffsetCannotDecrease,
testCollectAbortedTransactions, testTruncate, testAbortedTxnSerde, testRenameIndex, testUpdateParentDir,
testFlush, testDeleteIfExists, testIsEmptyWhenFileDoesNotExist, testIsEmptyWhenFileIsEmpty,
testIsEmptyWhenFileIsNotEmpty, testDoNotCreateFileUntilNeeded, testAppendAndCollectAfterClose (without the
``txnFile.closeChannel()`` steps: kafkalog has no separate channel object; closing the index twice stands in).

Skipped: testAppendAndCollectAfterInterrupted (Java's ClosedByInterruptException: a thread interrupt closes a
FileChannel; Python threads cannot be interrupted and ``os.pread`` on a descriptor is not affected).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkalog.errors import CorruptIndexError
from kafkalog.storage import AbortedTxn, TransactionIndex

FOUR_TXNS = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


@pytest.fixture
def file(tmp_path: Path) -> Path:
    path = tmp_path / "txn.txnindex"
    path.touch()  # Kafka's TestUtils.tempFile() creates an empty file
    return path


@pytest.fixture
def index(file: Path) -> Iterator[TransactionIndex]:
    idx = TransactionIndex(0, file)
    yield idx
    idx.close()


def test_position_set_correctly_when_opened(index: TransactionIndex, file: Path) -> None:
    for txn in FOUR_TXNS:
        index.append(txn)
    index.close()
    reopened = TransactionIndex(0, file)
    try:
        another = AbortedTxn(3, 50, 60, 55)
        reopened.append(another)
        assert reopened.all_aborted_txns() == [*FOUR_TXNS, another]
    finally:
        reopened.close()
    assert file.stat().st_size == 5 * 34


def test_sanity_check(index: TransactionIndex, file: Path) -> None:
    for txn in FOUR_TXNS:
        index.append(txn)
    index.close()
    reopened = TransactionIndex(100, file)  # a later start offset fakes invalid data
    try:
        with pytest.raises(CorruptIndexError):
            reopened.sanity_check()
    finally:
        reopened.close()


def test_last_offset_must_increase(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(0, 0, 15, 11))


def test_last_offset_cannot_decrease(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(0, 0, 10, 11))


def test_collect_aborted_transactions(index: TransactionIndex) -> None:
    for txn in FOUR_TXNS:
        index.append(txn)

    result = index.collect_aborted_txns(0, 100)
    assert result.aborted_transactions == FOUR_TXNS
    assert not result.is_complete

    result = index.collect_aborted_txns(0, 32)
    assert result.aborted_transactions == FOUR_TXNS[0:3]
    assert result.is_complete

    result = index.collect_aborted_txns(0, 35)
    assert result.aborted_transactions == FOUR_TXNS
    assert result.is_complete

    result = index.collect_aborted_txns(10, 35)
    assert result.aborted_transactions == FOUR_TXNS
    assert result.is_complete

    result = index.collect_aborted_txns(11, 35)
    assert result.aborted_transactions == FOUR_TXNS[1:4]
    assert result.is_complete

    result = index.collect_aborted_txns(20, 41)
    assert result.aborted_transactions == FOUR_TXNS[2:4]
    assert not result.is_complete


def test_truncate(index: TransactionIndex, file: Path) -> None:
    txns = [
        AbortedTxn(0, 0, 10, 2),
        AbortedTxn(1, 5, 15, 16),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for txn in txns:
        index.append(txn)

    index.truncate_to(51)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns

    index.truncate_to(50)
    assert index.collect_aborted_txns(0, 100).aborted_transactions == txns[0:3]
    assert file.stat().st_size == 3 * 34

    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    assert file.stat().st_size == 0


def test_aborted_txn_serde() -> None:
    pid, first, last, lso = 983493, 137, 299, 200
    txn = AbortedTxn(pid, first, last, lso)
    assert txn.version == 0
    assert (txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset) == (
        pid,
        first,
        last,
        lso,
    )
    assert AbortedTxn.from_bytes(txn.to_bytes()) == txn


def test_rename_index(index: TransactionIndex, tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.txnindex"
    renamed.touch()
    index.append(AbortedTxn(0, 0, 10, 2))
    index.rename_to(renamed)
    index.append(AbortedTxn(1, 5, 15, 16))

    txns = index.collect_aborted_txns(0, 100).aborted_transactions
    assert [t.first_offset for t in txns] == [0, 5]
    assert index.path == renamed
    assert renamed.stat().st_size == 2 * 34
    assert TransactionIndex(0, renamed).all_aborted_txns() == txns


def test_update_parent_dir(index: TransactionIndex, tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    assert index.path.parent != parent
    index.update_parent_dir(parent)
    assert index.path.parent == parent


def test_flush(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txnindex"
    idx = TransactionIndex(0, missing)
    try:
        idx.flush()
        idx.append(AbortedTxn(0, 0, 10, 2))
        idx.flush()
        assert missing.stat().st_size != 0
    finally:
        idx.close()


def test_delete_if_exists(index: TransactionIndex, file: Path) -> None:
    assert file.exists()
    assert index.delete_if_exists() is True
    assert not file.exists()
    assert index.delete_if_exists() is False


def test_is_empty_when_file_does_not_exist(tmp_path: Path) -> None:
    idx = TransactionIndex(0, tmp_path / "missing.txnindex")
    assert idx.is_empty
    idx.close()


def test_is_empty_when_file_is_empty(index: TransactionIndex) -> None:
    assert index.is_empty


def test_is_empty_when_file_is_not_empty(index: TransactionIndex) -> None:
    index.append(AbortedTxn(0, 0, 10, 2))
    assert not index.is_empty


def test_do_not_create_file_until_needed(file: Path) -> None:
    file.unlink()
    idx = TransactionIndex(0, file)
    try:
        assert not file.exists()
        idx.reset()
        assert not file.exists()
        idx.flush()
        assert not file.exists()
        idx.append(AbortedTxn(0, 0, 10, 2))  # only a modification creates it
        assert file.exists()
    finally:
        idx.close()


def test_append_and_collect_after_close(index: TransactionIndex) -> None:
    index.close()
    index.append(AbortedTxn(0, 0, 10, 2))  # a closed index still appends
    index.close()
    index.append(AbortedTxn(1, 5, 15, 16))
    index.close()
    txns = index.collect_aborted_txns(0, 100).aborted_transactions  # and still reads
    assert [t.first_offset for t in txns] == [0, 5]
    index.close()
    assert len(index.collect_aborted_txns(0, 100).aborted_transactions) == 2
