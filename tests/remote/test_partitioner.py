"""RemoteLogMetadataTopicPartitioner against vectors from Kafka's own code.

The expected partitions were computed once with kafka-clients' ``Uuid``, ``Utils.murmur2``/``toPositive`` and
``java.util.Objects.hash`` exactly as ``RemoteLogMetadataTopicPartitioner.metadataPartition`` combines them
(the class itself lives in ``kafka-storage``, which no reachable package ships), then pinned here.
"""

from __future__ import annotations

import pytest

from kafkalog.remote import RemoteLogMetadataTopicPartitioner, TopicIdPartition, Uuid

# (msb, lsb, partition, partition of 50, partition of 7)
VECTORS = [
    (0, 1, 0, 35, 0),
    (0, 1, 1, 6, 1),
    (0, 1, 7, 46, 2),
    (0, 1, 49, 43, 1),
    (0, 1, 2147483647, 45, 6),
    (0, 0, 0, 6, 2),
    (0, 0, 49, 8, 0),
    (-1, -1, 1, 30, 2),
    (0x123456789ABCDEF0, 0x0FEDCBA987654321, 0, 11, 0),
    (0x123456789ABCDEF0, 0x0FEDCBA987654321, 1, 2, 4),
    (0x123456789ABCDEF0, 0x0FEDCBA987654321, 7, 26, 3),
    (0x123456789ABCDEF0, 0x0FEDCBA987654321, 49, 28, 1),
    (0x123456789ABCDEF0, 0x0FEDCBA987654321, 2147483647, 2, 0),
    (-(2**63), 2**63 - 1, 7, 31, 6),
    (7, -42, 0, 20, 1),
    (7, -42, 1, 41, 5),
    (7, -42, 7, 42, 2),
    (7, -42, 49, 5, 0),
    (7, -42, 2147483647, 40, 5),
]


@pytest.mark.parametrize(("msb", "lsb", "partition", "of50", "of7"), VECTORS)
def test_matches_kafka(msb: int, lsb: int, partition: int, of50: int, of7: int) -> None:
    tp = TopicIdPartition(Uuid(msb, lsb), "any-name", partition)
    assert RemoteLogMetadataTopicPartitioner().metadata_partition(tp) == of50
    assert RemoteLogMetadataTopicPartitioner(7).metadata_partition(tp) == of7
    # The topic name plays no part.
    assert (
        RemoteLogMetadataTopicPartitioner().metadata_partition(
            TopicIdPartition(Uuid(msb, lsb), "x", partition)
        )
        == of50
    )


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        RemoteLogMetadataTopicPartitioner(0)
