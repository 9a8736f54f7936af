"""Which partition of ``__remote_log_metadata`` holds a topic partition's records (Kafka's
``RemoteLogMetadataTopicPartitioner``).

The partition is ``toPositive(murmur2(int32BE(h))) % n`` where ``h`` is Java's
``Objects.hash(topicId.leastSignificantBits, topicId.mostSignificantBits, partition)`` (a 31-based hash of
``Long.hashCode`` / ``Integer.hashCode`` with 32-bit overflow) and ``n`` is the topic's partition count
(``remote.log.metadata.topic.num.partitions``, default 50). The topic name plays no part.
"""

from __future__ import annotations

from typing import Final

from kafkalog.partitioner import murmur2, to_positive
from kafkalog.remote.metadata import TopicIdPartition

__all__ = [
    "DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS",
    "REMOTE_LOG_METADATA_TOPIC_NAME",
    "RemoteLogMetadataTopicPartitioner",
]

#: Kafka's name of the metadata topic (``TopicBasedRemoteLogMetadataManagerConfig``).
REMOTE_LOG_METADATA_TOPIC_NAME: Final = "__remote_log_metadata"
#: Default of ``remote.log.metadata.topic.num.partitions``.
DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS: Final = 50


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def _long_hash(value: int) -> int:
    """Java's ``Long.hashCode``: ``(int) (v ^ (v >>> 32))``."""
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return _int32(unsigned ^ (unsigned >> 32))


def _objects_hash(*hashes: int) -> int:
    """Java's ``Objects.hash`` (``Arrays.hashCode``) over already-computed element hashes."""
    result = 1
    for h in hashes:
        result = _int32(31 * result + h)
    return result


class RemoteLogMetadataTopicPartitioner:
    """Maps a :class:`~kafkalog.remote.metadata.TopicIdPartition` to its metadata partition, as Kafka does."""

    def __init__(
        self, num_metadata_topic_partitions: int = DEFAULT_REMOTE_LOG_METADATA_TOPIC_PARTITIONS
    ) -> None:
        if num_metadata_topic_partitions <= 0:
            raise ValueError(
                f"num_metadata_topic_partitions must be positive, got {num_metadata_topic_partitions}"
            )
        self.num_metadata_topic_partitions = num_metadata_topic_partitions

    def metadata_partition(self, topic_id_partition: TopicIdPartition) -> int:
        """The ``__remote_log_metadata`` partition of ``topic_id_partition``."""
        topic_id = topic_id_partition.topic_id
        h = _objects_hash(
            _long_hash(topic_id.least_significant_bits),
            _long_hash(topic_id.most_significant_bits),
            _int32(topic_id_partition.partition),
        )
        return to_positive(murmur2(h.to_bytes(4, "big", signed=True))) % self.num_metadata_topic_partitions
