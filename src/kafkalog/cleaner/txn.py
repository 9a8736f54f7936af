"""Transaction state of a cleaning walk (Kafka's ``CleanedTransactionMetadata``).

The cleaner walks a log in offset order with the aborted transactions of the transaction indexes
(``.txnindex``: producer id, first offset, marker offset, LSO at abort). It decides from them:

* a transactional data batch is **aborted** when its producer has an aborted transaction that started at or
  before the batch (and whose ABORT marker has not been walked yet): it can be discarded whatever its keys;
* an **ABORT marker** can go only if no batch of its transaction was walked in this cleaning (the data is
  gone already); otherwise it stays and the transaction is written to the cleaned segment's ``.txnindex`` so
  readers still filter the data this cleaning is removing;
* a **COMMIT marker** can go when no batch of its transaction was walked; an empty control batch always can.

Whether a marker that can go actually goes is the filter's business (its delete horizon must have passed).
Duplicate aborted transactions (found again from a later segment) are ignored.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from kafkalog.records import ControlRecordType
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTransactionMetadata"]


@dataclass
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state while the cleaner walks the log in offset order (Kafka's class of the same name).

    Aborted transactions (from the transaction indexes) become "ongoing" once the walk reaches their first
    offset; a data batch of an ongoing aborted transaction can be discarded; its ABORT marker may go only
    when no batch of the transaction was seen in this walk (else the marker stays and the transaction is
    written to the cleaned segment's ``.txnindex``); a COMMIT marker may go when none of its batches was
    seen; an empty control batch may always go.
    """

    def __init__(self) -> None:
        self._aborted: list[tuple[int, int, AbortedTxn]] = []
        self._seen: set[AbortedTxn] = set()
        self._ongoing_aborted: dict[int, _AbortedTxnState] = {}
        self._ongoing_committed: set[int] = set()
        self._seq = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        """Add aborted transactions found in the transaction indexes (duplicates are ignored)."""
        for txn in txns:
            if txn in self._seen:
                continue
            self._seen.add(txn)
            heapq.heappush(self._aborted, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def consume_up_to(self, offset: int) -> None:
        """Make the aborted transactions starting at or before ``offset`` ongoing."""
        aborted = self._aborted
        while aborted and aborted[0][0] <= offset:
            txn = heapq.heappop(aborted)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(
        self, producer_id: int, last_offset: int, control: ControlRecordType | None
    ) -> bool:
        """A control batch was walked (``control`` is its record's type, None if it has no record); returns
        whether it may be discarded."""
        self.consume_up_to(last_offset)
        if control is None:
            return True  # an empty control batch was already cleaned
        if control is ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(producer_id, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if control is ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, producer_id: int, last_offset: int, is_transactional: bool) -> bool:
        """A data batch was walked; returns whether it belongs to an aborted transaction."""
        self.consume_up_to(last_offset)
        if not is_transactional:
            return False
        state = self._ongoing_aborted.get(producer_id)
        if state is not None:
            state.last_observed_batch_offset = last_offset
            return True
        self._ongoing_committed.add(producer_id)
        return False
