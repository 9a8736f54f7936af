"""kafkalog.partitioner: Kafka's murmur2 and default partitioner, checked against Kafka's Java code and
kafka-python's independent implementation."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.partitioner import (
    NullKeyPartitioner,
    murmur2,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2 vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), sorted(KAFKA_VECTORS.items()))
def test_murmur2_matches_kafka_utils_test_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_empty_key_and_to_positive() -> None:
    assert murmur2(b"") == murmur2(bytearray())
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_matches_kafka_python(key: bytes, n: int) -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    assert to_positive(murmur2(key)) == kp_murmur2(key) & 0x7FFFFFFF
    assert partition_for_key(key, n) == (kp_murmur2(key) & 0x7FFFFFFF) % n


def test_column_kernel_agrees_with_scalar_and_marks_nulls() -> None:
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(k) for k in keys])
    valid = np.array([i % 7 != 0 for i in range(len(keys))])
    out = partitions_for_keys(offsets, b"".join(keys), 12, valid)
    for i, key in enumerate(keys):
        assert out[i] == (partition_for_key(key, 12) if valid[i] else -1)
    assert partitions_for_keys([0], b"", 3).shape == (0,)


def test_bad_partition_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for_key(b"k", 0)
    with pytest.raises(ValueError, match="positive"):
        partitions_for_keys([0, 1], b"k", -1)
    with pytest.raises(ValueError, match="positive"):
        NullKeyPartitioner(0)


def test_null_keys_are_sticky_then_round_robin() -> None:
    p = NullKeyPartitioner(3, sticky_records=2, start=1)
    assert [p.next_partition() for _ in range(8)] == [1, 1, 2, 2, 0, 0, 1, 1]


@pytest.mark.interop
def test_murmur2_partitions_agree_with_kafka_java(kafka_java) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(11)
    keys = [b"", b"a", b"ab", b"abc", "clé-ünïcode".encode()]
    keys += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(400)]
    keys += [f"user-{i}".encode() for i in range(200)]
    java = kafka_java.murmur2(keys)
    assert [to_positive(murmur2(k)) for k in keys] == java
    for n in (1, 3, 7, 100):
        assert [partition_for_key(k, n) for k in keys] == [v % n for v in java]
