"""Kafka's ``TopicBasedRemoteLogMetadataManager``: remote segment metadata kept in the ``__remote_log_metadata``
topic of the data directory.

Format: each event is one record of an ordinary kafkalog :class:`~kafkalog.log.Log` of that topic, key null,
value :func:`kafkalog.remote.serde.serialize` (Kafka's ``RemoteLogMetadataSerde``: Kafka's own message schemas
decode it); the partition is :class:`~kafkalog.remote.RemoteLogMetadataTopicPartitioner`'s.

Invariants owned here:

* a publish returns only once its record is appended **and flushed** (durable), and only then is it applied
  to the in-memory :class:`~kafkalog.remote.RemotePartitionMetadataStore` (Kafka waits for its consumer to
  read the record back): what a query answers survives a crash;
* a user partition's events are replayed from its metadata partition, log start to end, before it is first
  queried or published to (:meth:`TopicBasedRemoteLogMetadataManager.on_partition_leadership_changes` or the
  first use; again after :meth:`~TopicBasedRemoteLogMetadataManager.on_stop_partitions`), so after a
  restart its state is exactly what the durable records say (no snapshot, as Kafka's trunk since
  KAFKA-15181 / KAFKA-16161: the replay is a scan of the local log, decoded in bulk by the columnar decoder
  when pyarrow is installed, else batch by batch); a metadata partition is read whole once per start (a
  replay loads every user partition with events there; one started later without any is loaded empty), and
  again only after one of its user partitions was stopped;
* a replay checks the CRC of every batch it reads, whichever decoder runs it: a damaged batch fails it with
  :class:`~kafkalog.errors.CorruptRecordError` naming the metadata partition and offset (as Kafka's consumer,
  ``check.crcs``), so a damaged event is never applied (nor a segment silently changed); so does an offset
  below the log end offset at which no whole batch can be read (a damaged batch size, which no CRC covers),
  instead of ending the replay there and forgetting every later event, and a hole in the offsets (a segment or
  its tail missing: the topic is never compacted, so its offsets have none). A torn batch at the end of the log (a
  write a crash cut short) is not part of the log (its log end offset stops before it): the replay ends there;
* an event is checked against the current state before it is written (Kafka's ``IllegalArgumentException``
  cases: an add in a state other than COPY_SEGMENT_STARTED, an update to COPY_SEGMENT_STARTED, a transition
  :meth:`~kafkalog.remote.RemoteLogSegmentState.is_valid_transition` refuses): a refused event is an
  :class:`~kafkalog.errors.InvalidRecordError` and writes nothing. The check looks the segment up by id
  (O(1)); no publish walks the partition's segment list.

It gets its Logs from ``log_for_partition`` (the manager's), so it imports nothing above ``log``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kafkalog.errors import CorruptRecordError, InvalidRecordError, RemoteResourceNotFoundError
from kafkalog.log.log import Log
from kafkalog.records import MemoryRecords, RecordBatch, SimpleRecord
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    TopicIdPartition,
)
from kafkalog.remote.partitioner import (
    DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS,
    REMOTE_LOG_METADATA_TOPIC_NAME,
    RemoteLogMetadataTopicPartitioner,
)
from kafkalog.remote.serde import RemoteLogMetadata, deserialize, serialize
from kafkalog.remote.store import RemotePartitionMetadataStore

__all__ = ["TopicBasedRemoteLogMetadataManager"]

_log = logging.getLogger(__name__)
#: Bytes read per step while replaying a metadata partition.
_REPLAY_FETCH_BYTES = 1 << 20


def _columnar_decoder() -> Callable[..., Iterator[Any]] | None:
    """:func:`kafkalog.records.columnar.iter_columnar` when pyarrow is installed (the ``arrow`` extra), else
    None (a replay then decodes batch by batch)."""
    try:
        from kafkalog.records.columnar import iter_columnar
    except ImportError:
        return None
    return iter_columnar


def _replay_columnar(
    decode: Callable[..., Iterator[Any]], data: memoryview, offset: int, apply: Callable[[bytes], None]
) -> int:
    """Apply the value of every record at or above ``offset`` in ``data`` (whole batches) through one columnar
    decode (CRCs checked, control batches dropped): decoding batch by batch cost more than the events
    themselves (the metadata partition is one-record batches). Returns the offset after the last record
    (-1: none)."""
    next_offset = -1
    for chunk in decode(data, include_headers=False, start_offset=offset, pool=None):
        next_offset = chunk.column("offset")[-1].as_py() + 1
        for value in chunk.column("value").to_pylist():
            if value is not None:
                apply(value)
    return next_offset


def _replay_batches(batches: Iterable[RecordBatch], offset: int, apply: Callable[[bytes], None]) -> int:
    """:func:`_replay_columnar` batch by batch (without pyarrow): the CRC of every batch is checked as the
    columnar decoder checks it (a damaged event is never applied)."""
    next_offset = -1
    for batch in batches:
        batch.ensure_valid()
        next_offset = batch.last_offset + 1
        if batch.is_control_batch:
            continue
        for record in batch:
            if record.offset >= offset and record.value is not None:
                apply(record.value)
    return next_offset


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
        #: user partitions loaded (replayed) since start
        self._loaded: set[TopicIdPartition] = set()
        #: metadata partitions replayed whole since start: every user partition with events there was loaded
        #: by it, so one not loaded has none (it is loaded empty, without reading the partition again)
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
                self._loaded.discard(tip)
                self._replayed.discard(self.metadata_partition(tip))  # its events are read again when started

    def is_ready(self, topic_id_partition: TopicIdPartition) -> bool:
        """Whether the partition's metadata is loaded and replayed."""
        with self._lock:
            return self.store.is_initialized(topic_id_partition)

    def _ensure_loaded(self, tip: TopicIdPartition) -> None:
        with self._lock:
            if not self.store.is_initialized(tip):
                partition = self.metadata_partition(tip)
                if partition in self._replayed:  # no events there: nothing to read
                    self.store.maybe_load_partition(tip)
                    self.store.mark_initialized(tip)
                    self._loaded.add(tip)
                else:
                    self._replay(partition, tip)
                    self._replayed.add(partition)

    def _replay(self, partition: int, tip: TopicIdPartition | None) -> None:
        """Apply every record of metadata partition ``partition`` for the user partitions not loaded yet (so
        ``tip`` and the others sharing the partition); each is then initialized."""
        log = self._log_for_partition(partition)
        live = {t for t in self._loaded if self.store.is_initialized(t)}
        touched: set[TopicIdPartition] = set() if tip is None else {tip}
        offset = log.log_start_offset
        end = log.log_end_offset
        seen: set[TopicIdPartition] = set()
        count = 0

        def apply(value: bytes) -> None:
            nonlocal count
            event = deserialize(value)
            if isinstance(event, RemoteLogSegmentMetadataSnapshot):
                raise InvalidRecordError(
                    "RemoteLogSegmentMetadataSnapshotRecord is not a __remote_log_metadata record"
                )
            t = event.topic_id_partition
            if t in live:
                return
            if t not in seen:
                seen.add(t)
                touched.add(t)
                self.store.maybe_load_partition(t)
            self.store.handle_remote_log_metadata(event)
            count += 1

        columnar = _columnar_decoder()
        try:
            while offset < end:
                records = log.read(offset, _REPLAY_FETCH_BYTES).records
                first = next(iter(records.batches()), None)
                if first is not None and first.base_offset > offset:  # the log skipped offsets: lost batches
                    raise CorruptRecordError(
                        f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition} has no records at offsets {offset} to "
                        f"{first.base_offset - 1}, below its log end offset {end} (a segment or its tail is missing; "
                        "its remote log metadata cannot be replayed past it; the partitions it holds are not started)"
                    )
                try:
                    if columnar is not None:
                        next_offset = _replay_columnar(columnar, records.buffer, offset, apply)
                    else:
                        next_offset = _replay_batches(records.batches(), offset, apply)
                except CorruptRecordError as exc:  # a damaged disk: the replay fails, naming where
                    raise CorruptRecordError(
                        f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition} is corrupt in the batches read from offset "
                        f"{offset} (its remote log metadata cannot be replayed; the partitions it holds are not "
                        f"started): {exc}"
                    ) from exc
                # nothing at or above `offset` (control batches only): the batches say where to go on
                if next_offset <= offset:
                    batches = list(records.batches())
                    if not batches:  # below the log end, yet no whole batch: a damaged batch size (not CRC'd)
                        raise CorruptRecordError(
                            f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition} has no readable record batch at offset "
                            f"{offset}, below its log end offset {end} (its remote log metadata cannot be replayed "
                            "past it; the partitions it holds are not started)"
                        )
                    next_offset = batches[-1].last_offset + 1
                offset = next_offset
        except BaseException:
            # nothing stays half applied: the next replay (a retry) starts from a clean state, not re-applying
            # every event before the failure on top of itself (one warning each)
            for t in seen:
                self.store.clear_topic_partition(t)
            raise
        for t in touched:
            self.store.maybe_load_partition(t)
            self.store.mark_initialized(t)
            self._loaded.add(t)
        _log.info("Replayed %d records of %s-%d", count, REMOTE_LOG_METADATA_TOPIC_NAME, partition)

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

    def _current_state(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentState | None:
        md = self.store.segment_metadata(segment_id)  # O(1): a publish never scans the partition's segments
        return None if md is None else md.state

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
            if self._current_state(metadata.remote_log_segment_id) is not None:
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
            current = self._current_state(update.remote_log_segment_id)
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
    def remote_partition_delete_metadata(
        self, topic_id_partition: TopicIdPartition
    ) -> RemotePartitionDeleteMetadata | None:
        """The partition's newest DELETE_PARTITION_MARKED / STARTED event (a deletion of its remote data not
        finished), else None."""
        with self._lock:
            self._ensure_loaded(topic_id_partition)
            return self.store.remote_partition_delete_metadata(topic_id_partition)

    def partitions_pending_deletion(self) -> list[TopicIdPartition]:
        """Every user partition whose deletion of its remote data was DELETE_PARTITION_MARKED or STARTED and
        never FINISHED (a crash or a storage failure cut it short), after replaying every metadata partition
        not yet replayed since start (Kafka's ``RemotePartitionDeleteMetadata`` handling)."""
        with self._lock:
            for partition in range(self.partitioner.num_metadata_topic_partitions):
                if partition not in self._replayed:
                    self._replay(partition, None)
                    self._replayed.add(partition)
            return [md.topic_id_partition for md in self.store.partitions_pending_deletion()]

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
            self._loaded.clear()
            self._replayed.clear()
            self.store = RemotePartitionMetadataStore()
