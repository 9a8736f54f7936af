"""Every user partition's remote segment state, replayed from ``__remote_log_metadata`` (Kafka's
``RemotePartitionMetadataStore`` with ``RemotePartitionMetadataEventHandler.handleRemoteLogMetadata``).

Invariants, as Kafka's: a partition's records are applied only after :meth:`maybe_load_partition` (a segment
record or update for a partition that is not loaded is a
:class:`~kafkalog.errors.RemoteResourceNotFoundError`, Kafka's ``IllegalStateException``); an update the
partition's cache cannot place (unknown segment once initialized) is logged and skipped; the newest
:class:`RemotePartitionDeleteMetadata` of a partition is kept until DELETE_PARTITION_FINISHED, which forgets
the partition (its cache too). Queries need a loaded partition (else ``RemoteResourceNotFoundError``) whose
replay caught up (:meth:`mark_initialized`; else :class:`~kafkalog.errors.RemoteStorageError`, where Kafka
raises the retriable ``ReplicaNotAvailableException``). Snapshot records (api key 3) belong to Kafka's
snapshot files, not to the topic, and are refused here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.remote.cache import RemoteLogMetadataCache
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from kafkalog.remote.serde import RemoteLogMetadata

__all__ = ["RemotePartitionMetadataStore"]

_log = logging.getLogger(__name__)


class RemotePartitionMetadataStore:
    """The :class:`RemoteLogMetadataCache` of each loaded partition and the partitions' delete states."""

    def __init__(self) -> None:
        self._caches: dict[TopicIdPartition, RemoteLogMetadataCache] = {}
        self._deletes: dict[TopicIdPartition, RemotePartitionDeleteMetadata] = {}

    # --- partitions ---------------------------------------------------------------------------------------
    def maybe_load_partition(self, topic_id_partition: TopicIdPartition) -> None:
        """Start tracking a partition (idempotent)."""
        self._caches.setdefault(topic_id_partition, RemoteLogMetadataCache())

    def mark_initialized(self, topic_id_partition: TopicIdPartition) -> None:
        """The replay of a loaded partition caught up."""
        self._loaded(topic_id_partition).mark_initialized()

    def is_initialized(self, topic_id_partition: TopicIdPartition) -> bool:
        """Whether the partition is loaded and its replay caught up."""
        cache = self._caches.get(topic_id_partition)
        return cache is not None and cache.is_initialized()

    def clear_topic_partition(self, topic_id_partition: TopicIdPartition) -> None:
        """Stop tracking a partition's segments."""
        self._caches.pop(topic_id_partition, None)

    # --- replay -------------------------------------------------------------------------------------------
    def handle_remote_log_metadata(self, record: RemoteLogMetadata) -> None:
        """Apply one decoded ``__remote_log_metadata`` value."""
        if isinstance(record, RemoteLogSegmentMetadata):
            self._loaded(record.topic_id_partition).add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            cache = self._loaded(record.topic_id_partition)
            try:
                cache.update_remote_log_segment_metadata(record)
            except RemoteResourceNotFoundError as exc:
                _log.warning("Error occurred while updating the remote log segment: %s", exc)
        elif isinstance(record, RemotePartitionDeleteMetadata):
            tp = record.topic_id_partition
            self._deletes[tp] = record
            if record.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
                self._caches.pop(tp, None)
                del self._deletes[tp]
        elif isinstance(record, RemoteLogSegmentMetadataSnapshot):
            raise InvalidRecordError(
                "RemoteLogSegmentMetadataSnapshotRecord is not a __remote_log_metadata record"
            )

    # --- queries ------------------------------------------------------------------------------------------
    def remote_partition_delete_metadata(
        self, topic_id_partition: TopicIdPartition
    ) -> RemotePartitionDeleteMetadata | None:
        """The partition's newest delete record, until DELETE_PARTITION_FINISHED."""
        return self._deletes.get(topic_id_partition)

    def partitions_pending_deletion(self) -> list[RemotePartitionDeleteMetadata]:
        """The newest delete record of every partition whose deletion is DELETE_PARTITION_MARKED or STARTED
        (not FINISHED), loaded or not."""
        return list(self._deletes.values())

    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        """The partition's segments (all, or those of ``leader_epoch`` by start offset)."""
        return self._ready(topic_id_partition).list_remote_log_segments(leader_epoch)

    def segment_metadata(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The tracked segment ``segment_id`` of a ready partition (any state before DELETE_SEGMENT_FINISHED),
        else None: a dict lookup, not a scan of the partition's segments."""
        return self._ready(segment_id.topic_id_partition).segment_metadata(segment_id)

    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, offset: int, epoch_for_offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` of ``epoch_for_offset``, else None."""
        return self._ready(topic_id_partition).remote_log_segment_metadata(epoch_for_offset, offset)

    def highest_log_offset(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` in the partition's finished copies, else None."""
        return self._ready(topic_id_partition).highest_offset_for_epoch(leader_epoch)

    def _loaded(self, topic_id_partition: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self._caches.get(topic_id_partition)
        if cache is None:
            raise RemoteResourceNotFoundError(f"No partition metadata found for : {topic_id_partition}")
        return cache

    def _ready(self, topic_id_partition: TopicIdPartition) -> RemoteLogMetadataCache:
        cache = self._caches.get(topic_id_partition)
        if cache is None:
            raise RemoteResourceNotFoundError(f"No resource found for partition: {topic_id_partition}")
        if not cache.is_initialized():
            raise RemoteStorageError(
                f"Remote log metadata cache is not initialized for partition: {topic_id_partition}"
            )
        return cache
