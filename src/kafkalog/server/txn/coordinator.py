"""The transaction coordinator: transactional producer ids and epochs, transactions and their markers.

This node coordinates every transactional id (FindCoordinator key type 1 answers node 0). One
:class:`TransactionCoordinator` per running server, attached to the Broker at startup; its operations run
on the event loop, one at a time (an ``asyncio.Lock``), and store every state change in
``__transaction_state`` (Kafka's TransactionLogKey/Value, :mod:`kafkalog.server.txn.records`) before
answering.

Semantics follow Kafka's ``TransactionCoordinator`` without transactions V2 (KIP-890 part 2 is not
advertised: EndTxn stops at v4, AddPartitionsToTxn at v3):

* InitProducerId with a transactional id: a new id gets a fresh producer id at epoch 0; a known one gets
  its epoch bumped (a new producer id once the epoch is exhausted), which fences every older producer of
  that id. An ongoing transaction of the previous producer is aborted first (ABORT markers written with a
  fenced epoch). From v3 a producer naming its current (or just-replaced) id and epoch may re-initialize;
  any other named id/epoch is PRODUCER_FENCED.
* AddPartitionsToTxn / AddOffsetsToTxn add partitions (the group's ``__consumer_offsets`` partition) to the
  transaction, which becomes Ongoing.
* EndTxn: PrepareCommit/PrepareAbort is stored, a COMMIT/ABORT control marker is appended to every
  partition of the transaction (``AppendOrigin.COORDINATOR``; for ``__consumer_offsets`` partitions the
  group coordinator then publishes or drops the transactional offsets), then CompleteCommit/CompleteAbort
  is stored. A retried EndTxn of a completed transaction succeeds; a mismatched one is INVALID_TXN_STATE.
* A transaction open longer than its ``transaction.timeout.ms`` is aborted with a bumped epoch (the
  producer is fenced), checked every ``coordinator.tick.ms``.
* At startup ``__transaction_state`` is read back; a transaction found in PrepareCommit/PrepareAbort (the
  server stopped between the two writes) gets its markers written again and is completed. Until loading is
  done, requests get COORDINATOR_LOAD_IN_PROGRESS.

Not done: transactional id expiration (``transactional.id.expiration.ms``), DescribeTransactions,
ListTransactions, KIP-939 two-phase commit (InitProducerId v6 ``keep_prepared_txn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kafkalog.errors import KafkaError
from kafkalog.log.names import TopicPartition
from kafkalog.log.types import AppendOrigin
from kafkalog.records import ControlRecordType, MemoryRecords, MemoryRecordsBuilder
from kafkalog.server.errors import ErrorCode
from kafkalog.server.internal_topics import CONSUMER_OFFSETS, TRANSACTION_STATE, InternalTopic
from kafkalog.server.txn.records import (
    TransactionLogValue,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from kafkalog.server.wire import RecordFormatError

if TYPE_CHECKING:
    from kafkalog.server.broker import Broker

#: Above this many partitions, AddPartitionsToTxn checks which exist on an I/O thread.
MANY_TXN_PARTITIONS: Final = 1000

__all__ = ["TransactionCoordinator", "TxnMetadata"]

_log = logging.getLogger("kafkalog.server.txn")
#: Kafka bumps to a new producer id once the epoch reaches Short.MAX_VALUE - 1.
_MAX_EPOCH: Final = 32766


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TxnMetadata:
    """One transactional id's state in memory."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1

    def value(self) -> TransactionLogValue:
        """The stored form."""
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.last_update_ms,
            self.start_ms,
        )


class TransactionCoordinator:
    """Transactions of every transactional id (see the module doc)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.topic = InternalTopic(
            broker.manager, TRANSACTION_STATE, self.config.transaction_state_num_partitions
        )
        self.txns: dict[str, TxnMetadata] = {}
        self.loading = True
        self._lock = asyncio.Lock()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._topic_ready = False

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Load ``__transaction_state``, then check transaction timeouts every tick (on the loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kafkalog-txn-coordinator")

    async def _run(self) -> None:
        try:
            loaded = await self.broker.run_blocking(self.load_all)
            if self.broker.groups is not None:
                await self.broker.groups.loaded.wait()
            async with self._lock:
                self._restore(loaded)
        except Exception:
            _log.exception("loading %s failed; transactional ids start empty", TRANSACTION_STATE)
        self.loading = False
        tick = self.config.coordinator_tick_ms / 1000
        while not self._closed:
            await asyncio.sleep(tick)
            try:
                async with self._lock:
                    self.abort_timed_out()
            except Exception:
                _log.exception("transaction coordinator tick failed")

    async def close(self) -> None:
        """Stop the timer."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__transaction_state`` if needed."""
        if self._topic_ready:
            return ErrorCode.NONE
        try:
            await self.broker.run_blocking(self.topic.ensure)
        except KafkaError as exc:
            _log.warning("cannot create %s: %s", TRANSACTION_STATE, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._topic_ready = True
        return ErrorCode.NONE

    async def _check(self, transactional_id: str | None) -> ErrorCode:
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return await self.ensure_topic()

    # --- storage --------------------------------------------------------------------------------------------
    def _store(self, meta: TxnMetadata) -> None:
        meta.last_update_ms = _now_ms()
        builder = MemoryRecordsBuilder()
        builder.append(
            meta.last_update_ms, encode_txn_key(meta.transactional_id), encode_txn_value(meta.value())
        )
        partition = self.topic.partition_for(meta.transactional_id)
        self.topic.append(partition, builder.build())
        self.broker.notify(TopicPartition(TRANSACTION_STATE, partition))

    def load_all(self) -> dict[str, TransactionLogValue]:
        """The last stored state of every transactional id (blocking; runs on an I/O thread)."""
        out: dict[str, TransactionLogValue] = {}
        if not self.topic.exists():
            return out
        for partition in range(self.topic.partitions):
            for batch in self.topic.batches(partition):
                if batch.is_control_batch:
                    continue
                for record in batch:
                    try:
                        txn_id = decode_txn_key(record.key)
                        if txn_id is None:
                            continue
                        if record.value is None:
                            out.pop(txn_id, None)
                        else:
                            out[txn_id] = decode_txn_value(record.value)
                    except RecordFormatError as exc:
                        _log.warning("skipping an unreadable %s record: %s", TRANSACTION_STATE, exc)
        return out

    def _restore(self, loaded: dict[str, TransactionLogValue]) -> None:
        for txn_id, v in loaded.items():
            meta = TxnMetadata(
                txn_id,
                v.producer_id,
                v.producer_epoch,
                v.timeout_ms,
                v.state,
                set(v.partitions),
                v.start_ms,
                v.last_update_ms,
            )
            self.txns[txn_id] = meta
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
                commit = meta.state is TxnState.PREPARE_COMMIT
                _log.info("completing transaction %s found in %s", txn_id, meta.state.name)
                try:
                    self._complete(meta, commit)
                except KafkaError as exc:
                    _log.warning("cannot complete transaction %s: %s", txn_id, exc)

    # --- markers ------------------------------------------------------------------------------------------
    def _write_markers(self, meta: TxnMetadata, commit: bool) -> None:
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        manager = self.broker.manager
        for topic, partition in sorted(meta.partitions):
            try:
                log = manager.get_log(topic, partition)
            except KafkaError as exc:  # deleted since: nothing to mark (Kafka drops such markers too)
                _log.info("no marker for %s-%d of %s: %s", topic, partition, meta.transactional_id, exc)
                continue
            marker = MemoryRecords.end_transaction_marker(
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                control_type=control,
                coordinator_epoch=0,
                timestamp=_now_ms(),
            )
            epoch = log.latest_epoch
            log.append_as_leader(marker, 0 if epoch is None else epoch, AppendOrigin.COORDINATOR)
            self.broker.notify(TopicPartition(topic, partition))
            groups = self.broker.groups
            if topic == CONSUMER_OFFSETS and groups is not None:
                groups.complete_transaction(meta.producer_id, partition, commit)

    def _complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Prepare (stored), markers, Complete (stored)."""
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        self._store(meta)
        self._write_markers(meta, commit)
        meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        meta.partitions = set()
        self._store(meta)

    def _fence_and_abort(self, meta: TxnMetadata) -> None:
        """Abort the ongoing transaction with a bumped epoch (fences its producer)."""
        if meta.producer_epoch < _MAX_EPOCH:
            meta.producer_epoch += 1
        self._complete(meta, commit=False)

    def abort_timed_out(self) -> None:
        """Abort every transaction open longer than its timeout."""
        now = _now_ms()
        for meta in list(self.txns.values()):
            if meta.state is TxnState.ONGOING and now > meta.start_ms + meta.timeout_ms:
                _log.info(
                    "aborting transaction %s: timed out after %d ms", meta.transactional_id, meta.timeout_ms
                )
                try:
                    self._fence_and_abort(meta)
                except KafkaError as exc:
                    _log.warning("cannot abort transaction %s: %s", meta.transactional_id, exc)

    # --- operations ---------------------------------------------------------------------------------------------
    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        code = await self._check(transactional_id)
        if code is not ErrorCode.NONE:
            return code, -1, -1
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        async with self._lock:
            try:
                return await self._init(transactional_id, timeout_ms, expected_pid, expected_epoch)
            except KafkaError as exc:
                _log.warning("InitProducerId of %s failed: %s", transactional_id, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1

    async def _init(
        self, transactional_id: str, timeout_ms: int, expected_pid: int, expected_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        broker = self.broker
        meta = self.txns.get(transactional_id)
        if meta is None:
            pid = await broker.run_blocking(broker.producer_ids.next_id)
            meta = TxnMetadata(transactional_id, pid, 0, timeout_ms)
            self._store(meta)
            self.txns[transactional_id] = meta
            return ErrorCode.NONE, meta.producer_id, meta.producer_epoch
        if expected_pid >= 0:
            current = (expected_pid, expected_epoch) == (meta.producer_id, meta.producer_epoch)
            retried = (expected_pid, expected_epoch) == (meta.last_producer_id, meta.last_producer_epoch)
            if retried and meta.state is TxnState.EMPTY:
                return ErrorCode.NONE, meta.producer_id, meta.producer_epoch
            if not current:
                return ErrorCode.PRODUCER_FENCED, -1, -1
        if meta.state is TxnState.ONGOING:
            self._fence_and_abort(meta)
        elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._complete(meta, meta.state is TxnState.PREPARE_COMMIT)
        meta.last_producer_id, meta.last_producer_epoch = meta.producer_id, meta.producer_epoch
        if meta.producer_epoch >= _MAX_EPOCH - 1:
            meta.producer_id = await broker.run_blocking(broker.producer_ids.next_id)
            meta.producer_epoch = 0
        else:
            meta.producer_epoch += 1
        meta.timeout_ms = timeout_ms
        meta.state = TxnState.EMPTY
        meta.partitions = set()
        meta.start_ms = -1
        self._store(meta)
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    def _validate(self, meta: TxnMetadata | None, pid: int, epoch: int, fenced: ErrorCode) -> ErrorCode:
        if meta is None or meta.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.producer_epoch:
            return fenced
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    def _unknown(self, partitions: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """The partitions of ``partitions`` that do not exist (thread-safe: it may run on an I/O thread)."""
        manager = self.broker.manager
        topics = set(manager.topics())
        counts = {t: manager.num_partitions(t) for t in {t for t, _ in partitions} & topics}
        return {(t, p) for t, p in partitions if not 0 <= p < counts.get(t, 0)}

    async def add_partitions(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        partitions: list[tuple[str, int]],
        fenced: ErrorCode = ErrorCode.PRODUCER_FENCED,
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn (and AddOffsetsToTxn's partition): each partition's error."""
        code = await self._check(transactional_id)
        if code is not ErrorCode.NONE:
            return dict.fromkeys(partitions, code)
        if len(partitions) > MANY_TXN_PARTITIONS:
            unknown = await self.broker.run_blocking(self._unknown, partitions)
        else:
            unknown = self._unknown(partitions)
        async with self._lock:
            meta = self.txns.get(transactional_id)
            code = self._validate(meta, pid, epoch, fenced)
            if code is not ErrorCode.NONE or meta is None:
                return dict.fromkeys(partitions, code)
            if unknown:
                return {
                    tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in partitions
                }
            if meta.state is TxnState.ONGOING and meta.partitions.issuperset(partitions):
                return dict.fromkeys(partitions, ErrorCode.NONE)
            if meta.state is not TxnState.ONGOING:
                meta.start_ms = _now_ms()
                meta.state = TxnState.ONGOING
            meta.partitions.update(partitions)
            try:
                self._store(meta)
            except KafkaError as exc:
                _log.warning("cannot store transaction %s: %s", transactional_id, exc)
                return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return dict.fromkeys(partitions, ErrorCode.NONE)

    async def end_txn(
        self,
        transactional_id: str,
        pid: int,
        epoch: int,
        commit: bool,
        fenced: ErrorCode = ErrorCode.PRODUCER_FENCED,
    ) -> ErrorCode:
        """EndTxn: commit or abort the ongoing transaction."""
        code = await self._check(transactional_id)
        if code is not ErrorCode.NONE:
            return code
        async with self._lock:
            meta = self.txns.get(transactional_id)
            code = self._validate(meta, pid, epoch, fenced)
            if code is not ErrorCode.NONE or meta is None:
                return code
            if meta.state is TxnState.ONGOING:
                try:
                    self._complete(meta, commit)
                except KafkaError as exc:
                    _log.warning("cannot end transaction %s: %s", transactional_id, exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                return ErrorCode.NONE
            if meta.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
                return ErrorCode.NONE  # a retry
            return ErrorCode.INVALID_TXN_STATE
