"""Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``): naming, partitioning, I/O.

Owned here:

* the names (:data:`CONSUMER_OFFSETS`, :data:`TRANSACTION_STATE`, :data:`INTERNAL_TOPICS`) and Kafka's topic
  configs for them (compacted, ``compression.type=producer``, 100 MiB segments);
* :func:`java_string_hash` and :func:`partition_for`: which partition owns a group id or transactional id,
  ``Utils.abs(key.hashCode()) % partitions`` with Java's ``String.hashCode`` (UTF-16 code units, int32
  wrap-around) and Kafka's ``Utils.abs`` (``Integer.MIN_VALUE`` maps to 0), so a data directory written by
  Kafka is read from the same partitions;
* :class:`InternalTopic`: create-on-first-use (with the configured partition count; an existing topic keeps
  its own), append a coordinator batch (``AppendOrigin.COORDINATOR``, as Kafka's coordinators append), and
  read every batch of a partition back for loading.

No record format lives here (see :mod:`kafkalog.server.groups.records` and
:mod:`kafkalog.server.txn.records`). The methods block (file I/O): coordinators call them through
``Broker.run_blocking`` or for small appends inline, as the handler contract allows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Final

from kafkalog.errors import TopicExistsError
from kafkalog.log.log import Log
from kafkalog.log.types import AppendOrigin, FetchIsolation, LogAppendInfo
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords
from kafkalog.records.batch import RecordBatch

__all__ = [
    "CONSUMER_OFFSETS",
    "INTERNAL_TOPICS",
    "INTERNAL_TOPIC_CONFIG",
    "TRANSACTION_STATE",
    "InternalTopic",
    "java_string_hash",
    "partition_for",
]

CONSUMER_OFFSETS: Final = "__consumer_offsets"
TRANSACTION_STATE: Final = "__transaction_state"
INTERNAL_TOPICS: Final = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})

#: The topic configs Kafka gives both internal topics (``offsets.topic.*`` / ``transaction.state.log.*``).
INTERNAL_TOPIC_CONFIG: Final[dict[str, str]] = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": str(100 * 1024 * 1024),
}

_READ_CHUNK: Final = 1 << 20


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text`` (a signed 32-bit int)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """``Utils.abs(key.hashCode()) % partitions``: the internal-topic partition that owns ``key``."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic:
    """One internal topic of a LogManager (see the module doc)."""

    def __init__(self, manager: LogManager, name: str, default_partitions: int) -> None:
        self.manager = manager
        self.name = name
        self.default_partitions = default_partitions
        self._lock = threading.Lock()

    def exists(self) -> bool:
        """Whether the topic is in the data directory."""
        return self.name in self.manager.topics()

    def ensure(self) -> int:
        """Create the topic if it is missing; its partition count."""
        with self._lock:
            if not self.exists():
                try:
                    self.manager.create_topic(self.name, self.default_partitions, INTERNAL_TOPIC_CONFIG)
                except TopicExistsError:
                    pass
            return self.manager.num_partitions(self.name)

    @property
    def partitions(self) -> int:
        """The partition count: the existing topic's, else the one it will be created with."""
        if self.exists():
            return self.manager.num_partitions(self.name)
        return self.default_partitions

    def partition_for(self, key: str) -> int:
        """The partition that owns ``key``."""
        return partition_for(key, self.partitions)

    def log(self, partition: int) -> Log:
        """The partition's log (the topic must exist)."""
        return self.manager.get_log(self.name, partition)

    def append(self, partition: int, records: MemoryRecords) -> LogAppendInfo:
        """Append a coordinator batch (or an end-transaction marker) to ``partition``, creating the topic."""
        self.ensure()
        log = self.log(partition)
        epoch = log.latest_epoch
        return log.append_as_leader(records, 0 if epoch is None else epoch, AppendOrigin.COORDINATOR)

    def batches(self, partition: int) -> Iterator[RecordBatch]:
        """Every batch of ``partition`` from its log start offset to its log end offset."""
        log = self.log(partition)
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            info = log.read(offset, _READ_CHUNK, FetchIsolation.LOG_END)
            records = info.records
            mem = records if isinstance(records, MemoryRecords) else records.to_memory_records()
            advanced = offset
            for batch in mem.batches():
                if batch.next_offset <= offset:
                    continue
                yield batch
                advanced = batch.next_offset
            if advanced <= offset:
                break
            offset = advanced
