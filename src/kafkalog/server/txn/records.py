"""The record format of ``__transaction_state``: Kafka's TransactionLogKey and TransactionLogValue.

Key: int16 version 0, then the transactional id (string). Value: int16 version, then ``TransactionLogValue``;
kafkalog writes version **0** (what Kafka writes without transactions V2): producer id (int64), producer
epoch (int16), transaction timeout (int32), state (int8, Kafka's ids: :class:`TxnState`), the partitions
of the transaction (nullable array of topic + int32 partition ids; null when the state is Empty), last
update and start timestamps (int64). Version 1 (flexible, tagged previous/next producer id and client
transaction version) is decoded too. A tombstone (null value) removes a transactional id.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final

from kafkalog.server.wire import Reader, RecordFormatError, Writer

__all__ = [
    "TXN_KEY_VERSION",
    "TXN_VALUE_VERSION",
    "TransactionLogValue",
    "TxnState",
    "decode_txn_key",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
]

TXN_KEY_VERSION: Final = 0
TXN_VALUE_VERSION: Final = 0


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids as stored in ``TransactionLogValue.TransactionStatus``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One transactional id's stored state."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    last_update_ms: int = -1
    start_ms: int = -1


def encode_txn_key(transactional_id: str) -> bytes:
    """``TransactionLogKey`` v0."""
    return Writer().int16(TXN_KEY_VERSION).string(transactional_id).to_bytes()


def decode_txn_key(data: bytes | None) -> str | None:
    """The transactional id of a key (None for an unknown key version)."""
    if data is None:
        raise RecordFormatError("__transaction_state record without a key")
    r = Reader(data)
    if r.int16() != TXN_KEY_VERSION:
        return None
    txn_id = r.string()
    if txn_id is None:
        raise RecordFormatError("null transactional id")
    return txn_id


def encode_txn_value(value: TransactionLogValue) -> bytes:
    """``TransactionLogValue`` v0."""
    w = Writer().int16(TXN_VALUE_VERSION)
    w.int64(value.producer_id).int16(value.producer_epoch).int32(value.timeout_ms).int8(int(value.state))
    if value.state is TxnState.EMPTY and not value.partitions:
        w.int32(-1)
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(value.partitions):
            by_topic[topic].append(partition)
        w.int32(len(by_topic))
        for topic, partitions in by_topic.items():
            w.string(topic).int32(len(partitions))
            for p in partitions:
                w.int32(p)
    return w.int64(value.last_update_ms).int64(value.start_ms).to_bytes()


def decode_txn_value(data: bytes) -> TransactionLogValue:
    """A ``TransactionLogValue`` of version 0 or 1."""
    r = Reader(data)
    version = r.int16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    flex = version >= 1
    pid = r.int64()
    epoch = r.int16()
    timeout = r.int32()
    try:
        state = TxnState(r.int8())
    except ValueError as exc:
        raise RecordFormatError(f"unknown transaction state: {exc}") from None
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(r.array_length(flex), 0)):
        topic = r.string(flex)
        if topic is None:
            raise RecordFormatError("null topic in a transaction's partitions")
        for _ in range(max(r.array_length(flex), 0)):
            partitions.add((topic, r.int32()))
        if flex:
            r.tagged_fields()
    last_update = r.int64()
    start = r.int64()
    if flex:
        r.tagged_fields()
    return TransactionLogValue(pid, epoch, timeout, state, frozenset(partitions), last_update, start)
