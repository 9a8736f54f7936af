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

* :func:`check_internal_topic_config`: the policy that keeps a client from breaking the coordinators through
  the admin APIs (Kafka's POLICY_VIOLATION, :class:`~kafkalog.errors.PolicyViolationError`): CreateTopics may
  not create an internal topic, DeleteTopics may not delete one (the coordinators do, with ``offsets.topic.num.partitions`` /
  ``transaction.state.log.num.partitions``), CreatePartitions may not grow one (its count decides which
  partition owns each group id and transactional id: growing it would orphan their state), and a config
  change must leave the topic compacted and within :data:`INTERNAL_TOPIC_FLOORS` (``segment.bytes=100``
  would refuse every coordinator append, so every offset commit and every transaction).

No record format lives here (see :mod:`kafkalog.server.groups.records` and
:mod:`kafkalog.server.txn.records`). The methods block (file I/O): coordinators call them through
``Broker.run_blocking`` or for small appends inline, as the handler contract allows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Final

from kafkalog.errors import PolicyViolationError, TopicExistsError
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.log.types import AppendOrigin, FetchIsolation, LogAppendInfo
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords
from kafkalog.records.batch import RecordBatch

__all__ = [
    "CONSUMER_OFFSETS",
    "INTERNAL_TOPICS",
    "INTERNAL_TOPIC_CONFIG",
    "INTERNAL_TOPIC_FLOORS",
    "TRANSACTION_STATE",
    "InternalTopic",
    "check_internal_topic_config",
    "check_internal_topic_creation",
    "check_internal_topic_deletion",
    "check_internal_topic_growth",
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

#: The least value an internal topic may have for the configs a coordinator append depends on: a batch must
#: fit a segment and ``max.message.bytes`` (Kafka's default for both floors, and Kafka 4.0's minimum
#: ``segment.bytes`` for any topic), a segment must not roll per append (each segment keeps three file
#: descriptors), and a coordinator record, stamped with this node's clock, must pass the timestamp checks.
INTERNAL_TOPIC_FLOORS: Final[dict[str, int]] = {
    "segment.bytes": 1024 * 1024,
    "max.message.bytes": 1024 * 1024 + 12,
    "segment.index.bytes": 1024 * 1024,
    "segment.ms": 60_000,
    "message.timestamp.before.max.ms": 60_000,
    "message.timestamp.after.max.ms": 60_000,
}

_READ_CHUNK: Final = 1 << 20


def check_internal_topic_creation(name: str) -> None:
    """CreateTopics may not create an internal topic (:class:`PolicyViolationError`)."""
    if name in INTERNAL_TOPICS:
        raise PolicyViolationError(
            f"Creation of internal topic {name} is prohibited: its coordinator creates it on first use."
        )


def check_internal_topic_deletion(name: str) -> None:
    """DeleteTopics may not delete an internal topic (:class:`PolicyViolationError`), as Kafka's
    ``kafka-topics --delete`` refuses: it would drop every group's offsets or every transaction's state under
    a coordinator that still holds them in memory."""
    if name in INTERNAL_TOPICS:
        raise PolicyViolationError(
            f"Topic {name} is a Kafka internal topic and is not allowed to be marked for deletion."
        )


def check_internal_topic_growth(name: str) -> None:
    """CreatePartitions may not grow an internal topic (:class:`PolicyViolationError`)."""
    if name in INTERNAL_TOPICS:
        raise PolicyViolationError(
            f"The partition count of internal topic {name} cannot be changed: it decides which partition "
            "owns each group id and transactional id."
        )


def check_internal_topic_config(name: str, config: LogConfig) -> None:
    """Refuse ``config`` as the new effective config of internal topic ``name`` if it would break its
    coordinator: not compacted (only), or below a floor of :data:`INTERNAL_TOPIC_FLOORS`. Other topics pass."""
    if name not in INTERNAL_TOPICS:
        return
    if config.cleanup_policy != ("compact",):
        raise PolicyViolationError(
            f"Internal topic {name} must keep cleanup.policy=compact, not {','.join(config.cleanup_policy)}."
        )
    values = config.to_props()
    for key, floor in INTERNAL_TOPIC_FLOORS.items():
        if int(values[key]) < floor:
            raise PolicyViolationError(
                f"Internal topic {name} needs {key} of at least {floor}, not {values[key]}."
            )
    if config.segment_bytes < config.max_message_bytes:
        raise PolicyViolationError(
            f"Internal topic {name} needs segment.bytes ({config.segment_bytes}) of at least "
            f"max.message.bytes ({config.max_message_bytes})."
        )


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
