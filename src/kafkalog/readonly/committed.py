"""Only the committed records of a partition: what a ``read_committed`` Kafka consumer sees.

The core is a pure function over one *fetch*: a run of record batches plus the aborted transactions that
overlap it (what a broker's FetchResponse carries as ``aborted_transactions``, read from the ``.txnindex``
files). It is Kafka's consumer logic (``CompletedFetch.nextFetchedRecord``), step by step:

1. the fetch's aborted transactions are ordered by first offset (Kafka keeps them in a priority queue);
2. before each batch that has a producer id, every aborted transaction whose first offset is at or before
   the batch's last offset is taken off the queue and its producer id added to the *aborted producers*;
3. a control batch whose first record is an ABORT marker removes its producer from the aborted producers;
   any other **transactional** batch of an aborted producer is skipped whole (non-transactional batches of
   the same producer id are never skipped);
4. control batches (COMMIT/ABORT markers, other control types) are never returned;
5. records below the fetch position are skipped (a fetch starts at the boundary of the batch holding the
   requested offset), so each record is returned once across consecutive fetches.

The queue and the aborted-producer set belong to one fetch. A fetch that starts inside an aborted
transaction still skips it, because the broker reports every aborted transaction whose marker is at or after
the fetch offset and whose first offset is below the fetch's upper bound.

Entry points:

* :class:`CommittedRecords` / :func:`committed_records` — one fetch (the pure core);
  ``next_offset`` afterwards is where the next fetch starts (after the last batch, as Kafka's consumer).
* :func:`iter_committed` — a whole range from a :class:`~kafkalog.log.Log` (successive
  ``read(..., FetchIsolation.TXN_COMMITTED)`` calls, so never past the last stable offset) or from fetches a
  read-only reader assembled itself: a :class:`Fetch` ``(batches, aborted_transactions)``, a
  :class:`~kafkalog.storage.FetchDataInfo`, or an iterable of those, applied in order.

A read-only reader of a partition directory can pass every batch of every segment with every entry of every
``.txnindex`` as one :class:`Fetch`. Such a reader has no last stable offset: records of a transaction that
is still open at the end of the batches look committed, so it should bound the range with ``end_offset``
(the log's LSO when known), as a broker bounds a ``read_committed`` fetch.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeAlias

from kafkalog.records import ControlRecordType, Record, RecordBatch
from kafkalog.storage.types import FetchDataInfo

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = [
    "AbortedTransaction",
    "CommittedRecords",
    "Fetch",
    "committed_records",
    "iter_committed",
]

#: Default bytes per ``Log.read`` in :func:`iter_committed` (Kafka's ``max.partition.fetch.bytes``).
DEFAULT_FETCH_MAX_BYTES = 1 << 20


class AbortedTransaction(Protocol):
    """What the fetch logic needs of an aborted transaction (``AbortedTxn`` has both attributes)."""

    @property
    def producer_id(self) -> int:
        """The producer whose transaction was aborted."""
        ...

    @property
    def first_offset(self) -> int:
        """The first offset of the aborted transaction."""
        ...


AbortedLike: TypeAlias = AbortedTransaction | tuple[int, int]


class _HasBatches(Protocol):
    def batches(self) -> Iterator[RecordBatch]:
        """The batches, in offset order."""
        ...


BatchSource: TypeAlias = Iterable[RecordBatch] | _HasBatches


class Fetch(NamedTuple):
    """One fetch a reader assembled: batches in offset order and the aborted transactions overlapping them.

    ``batches`` may be an iterable of :class:`~kafkalog.records.RecordBatch` or anything with a
    ``batches()`` method (``MemoryRecords``, ``FileRecords``). ``aborted_transactions`` items are
    :class:`~kafkalog.storage.AbortedTxn` (or anything with ``producer_id`` and ``first_offset``) or plain
    ``(producer_id, first_offset)`` pairs.
    """

    batches: BatchSource
    aborted_transactions: Iterable[AbortedLike] | None = None


def _pid_and_first(txn: AbortedLike) -> tuple[int, int]:
    if isinstance(txn, tuple) and not hasattr(txn, "producer_id"):
        return int(txn[0]), int(txn[1])
    return int(txn.producer_id), int(txn.first_offset)  # type: ignore[union-attr]


def _batches_of(source: BatchSource) -> Iterator[RecordBatch]:
    method = getattr(source, "batches", None)
    if callable(method):
        return iter(method())
    return iter(source)  # type: ignore[arg-type]


def _is_abort_marker(batch: RecordBatch) -> bool:
    """Kafka's ``containsAbortMarker``: a control batch whose first record's key is an ABORT key."""
    if not batch.is_control_batch:
        return False
    for record in batch.records():
        # A malformed control key raises InvalidRecordError, as in Kafka's consumer.
        return ControlRecordType.parse(record.key) is ControlRecordType.ABORT
    return False


class CommittedRecords(Iterator[Record]):
    """The committed records of one fetch, in offset order (Kafka's ``CompletedFetch`` in read_committed).

    ``start_offset`` is the fetch position (records below it are skipped); iteration stops before the first
    record at or after ``end_offset`` (None: the end of the batches). ``check_crcs`` validates each batch
    (Kafka's ``check.crcs``, on by default) and raises :class:`~kafkalog.errors.CorruptRecordError`.
    """

    def __init__(
        self,
        batches: BatchSource,
        aborted_transactions: Iterable[AbortedLike] | None = None,
        start_offset: int = 0,
        end_offset: int | None = None,
        *,
        check_crcs: bool = True,
    ) -> None:
        self._batches = _batches_of(batches)
        # (first offset, arrival order, producer id): a min-heap on the first offset, stable on ties.
        self._queue: list[tuple[int, int, int]] = []
        for n, txn in enumerate(aborted_transactions or ()):
            pid, first = _pid_and_first(txn)
            self._queue.append((first, n, pid))
        heapq.heapify(self._queue)
        self._aborted_producers: set[int] = set()
        self._records: Iterator[Record] | None = None
        self._batch: RecordBatch | None = None
        self._next_offset = start_offset
        self._end_offset = end_offset
        self._check_crcs = check_crcs
        self._done = False

    @property
    def next_offset(self) -> int:
        """Where the next fetch starts: past every batch consumed so far (or ``end_offset`` once reached)."""
        return self._next_offset

    @property
    def aborted_producers(self) -> frozenset[int]:
        """Producers whose aborted transaction is being skipped at the current position."""
        return frozenset(self._aborted_producers)

    def __iter__(self) -> CommittedRecords:
        return self

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0][0] <= offset:
            _, _, pid = heapq.heappop(self._queue)
            self._aborted_producers.add(pid)

    def _finish(self, next_offset: int | None = None) -> None:
        if next_offset is not None:
            self._next_offset = max(self._next_offset, next_offset)
        self._records = None
        self._done = True

    def __next__(self) -> Record:
        if self._done:
            raise StopIteration
        while True:
            if self._records is not None:
                record = next(self._records, None)
                if record is not None:
                    if self._end_offset is not None and record.offset >= self._end_offset:
                        self._finish(self._end_offset)
                        raise StopIteration
                    if record.offset < self._next_offset:
                        continue  # below the fetch position
                    batch = self._batch
                    assert batch is not None
                    if batch.is_control_batch:
                        self._next_offset = record.offset + 1
                        continue  # markers are not returned to the user
                    self._next_offset = record.offset + 1
                    return record
                self._records = None
            batch = next(self._batches, None)
            if batch is None:
                last = self._batch
                self._finish(last.next_offset if last is not None else None)
                raise StopIteration
            if self._end_offset is not None and batch.base_offset >= self._end_offset:
                self._finish(self._end_offset)
                raise StopIteration
            self._batch = batch
            if self._check_crcs:
                batch.ensure_valid()
            if batch.producer_id >= 0:
                self._consume_aborted_up_to(batch.last_offset)
                if _is_abort_marker(batch):
                    self._aborted_producers.discard(batch.producer_id)
                elif batch.is_transactional and batch.producer_id in self._aborted_producers:
                    self._next_offset = max(self._next_offset, batch.next_offset)
                    continue  # a batch of an aborted transaction
            self._records = iter(batch.records())


def committed_records(
    batches: BatchSource,
    aborted_transactions: Iterable[AbortedLike] | None = None,
    start_offset: int = 0,
    end_offset: int | None = None,
    *,
    check_crcs: bool = True,
) -> CommittedRecords:
    """The committed records of one fetch (see :class:`CommittedRecords`); a pure function of its inputs."""
    return CommittedRecords(batches, aborted_transactions, start_offset, end_offset, check_crcs=check_crcs)


FetchLike: TypeAlias = Fetch | FetchDataInfo


def _as_fetch(item: FetchLike) -> Fetch:
    if isinstance(item, FetchDataInfo):
        return Fetch(item.records, item.aborted_transactions)
    return item


def _iter_fetches(
    fetches: Iterable[FetchLike], start_offset: int, end_offset: int | None, check_crcs: bool
) -> Iterator[Record]:
    position = start_offset
    for item in fetches:
        fetch = _as_fetch(item)
        committed = CommittedRecords(
            fetch.batches, fetch.aborted_transactions, position, end_offset, check_crcs=check_crcs
        )
        yield from committed
        position = max(position, committed.next_offset)
        if end_offset is not None and position >= end_offset:
            return


def _iter_log(
    log: Log, start_offset: int, end_offset: int | None, max_bytes: int, check_crcs: bool
) -> Iterator[Record]:
    from kafkalog.log.types import FetchIsolation

    position = start_offset
    while end_offset is None or position < end_offset:
        info = log.read(position, max_bytes, FetchIsolation.TXN_COMMITTED, min_one_message=True)
        committed = CommittedRecords(
            info.records, info.aborted_transactions, position, end_offset, check_crcs=check_crcs
        )
        yield from committed
        if committed.next_offset <= position:
            return  # nothing complete below the last stable offset: caught up
        position = committed.next_offset


def iter_committed(
    source: Log | FetchLike | Iterable[FetchLike],
    start_offset: int = 0,
    end_offset: int | None = None,
    *,
    max_fetch_bytes: int = DEFAULT_FETCH_MAX_BYTES,
    check_crcs: bool = True,
) -> Iterator[Record]:
    """Committed records with offsets in ``[start_offset, end_offset)``, in order, each once.

    ``source`` is a :class:`~kafkalog.log.Log` (read with ``FetchIsolation.TXN_COMMITTED`` in fetches of
    ``max_fetch_bytes``, until ``end_offset`` or until the last stable offset is reached; a start below the
    log start offset raises :class:`~kafkalog.errors.OffsetOutOfRangeError`), or one fetch
    (:class:`Fetch` or :class:`~kafkalog.storage.FetchDataInfo` with its ``aborted_transactions``), or an
    iterable of fetches applied in order, each with its own aborted transactions (records already returned
    by an earlier fetch are skipped).
    """
    from kafkalog.log.log import Log

    if isinstance(source, Log):
        return _iter_log(source, start_offset, end_offset, max_fetch_bytes, check_crcs)
    if isinstance(source, (Fetch, FetchDataInfo)):
        return _iter_fetches([source], start_offset, end_offset, check_crcs)
    return _iter_fetches(source, start_offset, end_offset, check_crcs)
