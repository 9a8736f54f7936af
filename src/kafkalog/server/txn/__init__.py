"""Transactions: the transaction coordinator and Kafka's ``__transaction_state`` record format.

Modules: :mod:`~kafkalog.server.txn.records` (TransactionLogKey/Value) and
:mod:`~kafkalog.server.txn.coordinator` (:class:`TransactionCoordinator`). The API handlers are in
:mod:`kafkalog.server.apis.transactions` and :mod:`kafkalog.server.apis.init_producer_id`.
"""

from __future__ import annotations

from kafkalog.server.txn.coordinator import TransactionCoordinator, TxnMetadata
from kafkalog.server.txn.records import TxnState

__all__ = ["TransactionCoordinator", "TxnMetadata", "TxnState"]
