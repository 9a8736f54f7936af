"""Kafka's ``TopicBasedRemoteLogMetadataManager``: remote segment metadata kept in the ``__remote_log_metadata``
topic of the data directory.

Format: each event is one record of an ordinary kafkalog :class:`~kafkalog.log.Log` of that topic, key null,
value :func:`kafkalog.remote.serde.serialize` (Kafka's ``RemoteLogMetadataSerde``: Kafka's own message schemas
decode it); the partition is :class:`~kafkalog.remote.RemoteLogMetadataTopicPartitioner`'s.

Invariants owned here:

* a publish returns only once its record is appended **and flushed** (durable), and only then is it applied
  to the in-memory :class:`~kafkalog.remote.RemotePartitionMetadataStore` (Kafka waits for its consumer to
  read the record back): what a query answers survives a crash;
* a metadata partition is replayed, from its log start to its end, before any of its user partitions is
  queried (:meth:`TopicBasedRemoteLogMetadataManager.on_partition_leadership_changes` or the first query),
  so after a restart the state is exactly what the durable records say;
* an event is checked against the current state before it is written (Kafka's ``IllegalArgumentException``
  cases: an add in a state other than COPY_SEGMENT_STARTED, an update to COPY_SEGMENT_STARTED, a transition
  :meth:`~kafkalog.remote.RemoteLogSegmentState.is_valid_transition` refuses): a refused event is an
  :class:`~kafkalog.errors.InvalidRecordError` and writes nothing.

It gets its Logs from ``log_for_partition`` (the manager's), so it imports nothing above ``log``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError
from kafkalog.log.log import Log
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)
from kafkalog.remote.partitioner import (
    DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS,
    RemoteLogMetadataTopicPartitioner,
)
from kafkalog.remote.serde import RemoteLogMetadata, deserialize, serialize
from kafkalog.remote.store import RemotePartitionMetadataStore

__all__ = ["TopicBasedRemoteLogMetadataManager"]

_log = logging.getLogger(__name__)
#: Bytes read per step while replaying a metadata partition.
_REPLAY_FETCH_BYTES = 1 << 20


class TopicBasedRemoteLogMetadataManager:
    """Publishes remote log metadata events to ``__remote_log_metadata`` and answers queries from their replay.

    Thread-safe: one lock orders publishes and queries of all partitions."""

    def __init__(
        self,
        log_for_partition: Callable[[int], Log],
        num_metadata_topic_partitions: int = DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS,
    ) -> None:
        self._log_for_partition = log_for_partition
        self.partitioner = RemoteLogMetadataTopicPartitioner(num_metadata_topic_partitions)
        self.store = RemotePartitionMetadataStore()
        self._replayed: set[int] = set()
        self._lock = threading.RLock()
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"TopicBasedRemoteLogMetadataManager({self.partitioner.num_metadata_topic_partitions} partitions)"
        )

    # --- partitions ---------------------------------------------------------------------------------------
    def metadata_partition(self, topic_id_partition: TopicIdPartition) -> int:
        """The ``__remote_log_metadata`` partition holding ``topic_id_partition``'s events."""
        return self.partitioner.metadata_partition(topic_id_partition)

    def on_partition_leadership_changes(
        self,
        leader_partitions: Iterable[TopicIdPartition],
        follower_partitions: Iterable[TopicIdPartition] = (),
    ) -> None:
        """Kafka's: start serving these partitions (their metadata partitions are replayed if not yet)."""
        for tip in (*leader_partitions, *follower_partitions):
            self._ensure_loaded(tip)

    def on_stop_partitions(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Stop serving these partitions (their events stay in the topic)."""
        with self._lock:
            for tip in partitions:
                self.store.clear_topic_partition(tip)

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        """Whether the partition's metadata is loaded and replayed."""
        with self._lock:
            return self.store.is_initialized(topic_id_partition)

    def _ensure_loaded(self, tip: TopicIdPartition) -> None:
        with self._lock:
            if self.store.is_initialized(tip):
                return
            partition = self.metadata_partition(tip)
            if partition not in self._replayed:
                self._replay(partition)
            self.store.maybe_load_partition(tip)
            self.store.mark_initialized(tip)

    def _replay(self, partition: int) -> None:
        """Apply every record of metadata partition ``partition`` (each user partition met is loaded)."""
        log = self._log_for_partition(partition)
        offset = log.log_start_offset
        end = log.log_end_offset
        count = 0
        while offset < end:
            info = log.read(offset, _REPLAY_FETCH_BYTES)
            batches = list(info.records.batches())
            if not batches:
                break
            for batch in batches:
                if batch.is_control_batch:
                    continue
                for record in batch:
                    if record.offset < offset or record.value is None:
                        continue
                    self._apply(deserialize(record.value))
                    count += 1
            offset = batches[-1].last_offset + 1
        self._replayed.add(partition)
        _log.info(
            "Replayed %d remote log metadata records of %s-%d", count, "__remote_log_metadata", partition
        )

    def _apply(self, event: RemoteLogMetadata) -> None:
        if isinstance(event, RemoteLogSegmentMetadataSnapshot):
            raise InvalidRecordError(
                "RemoteLogSegmentMetadataSnapshotRecord is not a __remote_log_metadata record"
            )
        tip = event.topic_id_partition
        if not self.store.is_initialized(tip):
            self.store.maybe_load_partition(tip)
        self.store.handle_remote_log_metadata(event)

    # --- publishing ---------------------------------------------------------------------------------------
    def _publish(self, tip: TopicIdPartition, event: RemoteLogMetadata) -> None:
        value = serialize(event)
        with self._lock:
            log = self._log_for_partition(self.metadata_partition(tip))
            log.append_as_leader(MemoryRecords.build([SimpleRecord(value, None)]), 0)
            log.flush()
            if log.high_watermark < log.log_end_offset:  # a Log the manager does not run with hw_follows_leo
                log.maybe_increment_high_watermark(log.log_end_offset)
            self.store.handle_remote_log_metadata(event)

    def _current_state(self, metadata_id: object, tip: TopicIdPartition) -> RemoteLogSegmentState | None:
        for md in self.store.list_remote_log_segments(tip):
            if md.remote_log_segment_id == metadata_id:
                return md.state
        return None

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Kafka's ``addRemoteLogSegmentMetadata``: a COPY_SEGMENT_STARTED segment, durable on return."""
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRecordError(
                f"Given remoteLogSegmentMetadata should have state as COPY_SEGMENT_STARTED but it contains state "
                f"as: {metadata.state.name}"
            )
        tip = metadata.topic_id_partition
        with self._lock:
            self._ensure_loaded(tip)
            if self._current_state(metadata.remote_log_segment_id, tip) is not None:
                raise InvalidRecordError(f"segment {metadata.remote_log_segment_id} is already known")
            self._publish(tip, metadata)

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Kafka's ``updateRemoteLogSegmentMetadata``: a state change of a known segment, durable on return."""
        if update.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRecordError(
                "Given remoteLogSegmentMetadata should not have the state as: COPY_SEGMENT_STARTED"
            )
        tip = update.topic_id_partition
        with self._lock:
            self._ensure_loaded(tip)
            current = self._current_state(update.remote_log_segment_id, tip)
            if current is None:
                raise RemoteResourceNotFoundError(
                    f"No remote log segment metadata found for :{update.remote_log_segment_id}"
                )
            if not RemoteLogSegmentState.is_valid_transition(current, update.state):
                raise InvalidRecordError(
                    f"Current state: {current.name} can not be transitioned to target state: {update.state.name}"
                )
            self._publish(tip, update)

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Kafka's ``putRemotePartitionDeleteMetadata``: a step of deleting a partition's remote data."""
        tip = metadata.topic_id_partition
        with self._lock:
            self._ensure_loaded(tip)
            self._publish(tip, metadata)

    # --- queries ------------------------------------------------------------------------------------------
    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        """Every segment of the partition not yet DELETE_SEGMENT_FINISHED (in the order they were added), or
        with ``leader_epoch`` the segments holding that epoch, by start offset."""
        with self._lock:
            self._ensure_loaded(topic_id_partition)
            return iter(list(self.store.list_remote_log_segments(topic_id_partition, leader_epoch)))

    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, epoch_for_offset: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written in ``epoch_for_offset``, else None."""
        with self._lock:
            self._ensure_loaded(topic_id_partition)
            return self.store.remote_log_segment_metadata(topic_id_partition, offset, epoch_for_offset)

    def highest_offset_for_epoch(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` among the partition's finished copies, else None."""
        with self._lock:
            self._ensure_loaded(topic_id_partition)
            return self.store.highest_log_offset(topic_id_partition, leader_epoch)

    def remote_log_size(self, topic_id_partition: TopicIdPartition) -> int:
        """Bytes of the partition's segments that are COPY_SEGMENT_FINISHED."""
        return sum(
            md.segment_size_in_bytes
            for md in self.list_remote_log_segments(topic_id_partition)
            if md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        )

    def close(self) -> None:
        """Forget the replayed state (the Logs are the manager's to close)."""
        with self._lock:
            self._closed = True
            self._replayed.clear()
            self.store = RemotePartitionMetadataStore()
