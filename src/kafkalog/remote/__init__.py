"""kafkalog's remote log metadata (Kafka's ``org.apache.kafka.server.log.remote``): the foundation of tiering.

* :mod:`~kafkalog.remote.metadata`: the value types (``Uuid``, ``TopicIdPartition``, ``RemoteLogSegmentId``,
  ``RemoteLogSegmentMetadata`` and its update, ``RemotePartitionDeleteMetadata``, the snapshot entry) and the
  state enums with Kafka's valid transitions;
* :mod:`~kafkalog.remote.serde`: the byte format of ``__remote_log_metadata`` record values;
* :mod:`~kafkalog.remote.partitioner`: which metadata partition holds a topic partition's records;
* :mod:`~kafkalog.remote.cache`: replaying records into per-partition, per-leader-epoch segment state;
* :mod:`~kafkalog.remote.store`: the caches of all loaded partitions and their delete states, fed with the
  decoded values of a ``__remote_log_metadata`` partition.

Layering: this package sits above ``log`` (it may import ``records``, ``storage``, ``log``, ``errors``) and is
imported by the layers above it; it owns no files yet.
"""

from kafkalog.remote.cache import RemoteLogLeaderEpochState, RemoteLogMetadataCache
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from kafkalog.remote.partitioner import (
    DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS,
    REMOTE_LOG_METADATA_TOPIC_NAME,
    RemoteLogMetadataTopicPartitioner,
)
from kafkalog.remote.serde import RemoteLogMetadata, deserialize, serialize
from kafkalog.remote.store import RemotePartitionMetadataStore

__all__ = [
    "DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS",
    "REMOTE_LOG_METADATA_TOPIC_NAME",
    "RemoteLogLeaderEpochState",
    "RemoteLogMetadata",
    "RemoteLogMetadataCache",
    "RemoteLogMetadataTopicPartitioner",
    "RemoteLogSegmentId",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataSnapshot",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata",
    "RemotePartitionDeleteState",
    "RemotePartitionMetadataStore",
    "TopicIdPartition",
    "Uuid",
    "deserialize",
    "serialize",
]
