"""kafkalog's ``__remote_log_metadata`` codec and partitioner against Kafka's own code (the interop harness).

Kafka's generated ``RemoteLogSegmentMetadata*Record`` classes are in its storage jar, which no reachable package
ships; the harness declares the four version-0 schemas with kafka-clients' protocol types (``COMPACT_STRING``,
``UUID``, ``CompactArrayOf``, ``COMPACT_NULLABLE_BYTES``, tagged-field sections: what the generator emits) and
computes the partitioner with kafka-clients' ``Uuid``, ``Utils.murmur2`` and ``Objects.hash``.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest

from interop.kafka_java import KafkaJava
from kafkalog.errors import CorruptRecordError, InvalidRecordError
from kafkalog.remote import (
    RemoteLogMetadata,
    RemoteLogMetadataTopicPartitioner,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
    deserialize,
    serialize,
)

pytestmark = pytest.mark.interop


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _tags(fields: tuple[tuple[int, bytes], ...] = ()) -> dict[str, str]:
    return {str(tag): base64.b64encode(raw).decode("ascii") for tag, raw in fields}


def _tp(tp: TopicIdPartition) -> list[Any]:
    return [tp.topic, str(tp.topic_id), tp.partition, {}]


def _sid(sid: RemoteLogSegmentId) -> list[Any]:
    return [_tp(sid.topic_id_partition), str(sid.id), {}]


def _epochs(epochs: tuple[tuple[int, int], ...]) -> list[Any]:
    return [[e, o, {}] for e, o in epochs]


def generic(value: RemoteLogMetadata) -> tuple[int, list[Any]]:
    """The harness's generic JSON form of ``value``: fields in schema order, tags last."""
    tags = _tags(value.unknown_tagged_fields)
    if isinstance(value, RemoteLogSegmentMetadata):
        return 0, [
            _sid(value.remote_log_segment_id), value.start_offset, value.end_offset, value.broker_id,
            value.max_timestamp_ms, value.event_timestamp_ms, _epochs(value.segment_leader_epochs),
            value.segment_size_in_bytes, _b64(value.custom_metadata), int(value.state), tags,
        ]  # fmt: skip
    if isinstance(value, RemoteLogSegmentMetadataUpdate):
        return 1, [
            _sid(value.remote_log_segment_id), value.broker_id, value.event_timestamp_ms,
            _b64(value.custom_metadata), int(value.state), tags,
        ]  # fmt: skip
    if isinstance(value, RemotePartitionDeleteMetadata):
        return 2, [
            _tp(value.topic_id_partition),
            value.broker_id,
            value.event_timestamp_ms,
            int(value.state),
            tags,
        ]
    return 3, [
        str(value.segment_id), value.start_offset, value.end_offset, value.broker_id, value.max_timestamp_ms,
        value.event_timestamp_ms, _epochs(value.segment_leader_epochs), value.segment_size_in_bytes,
        _b64(value.custom_metadata), int(value.state), tags,
    ]  # fmt: skip


def _random_values(rng: random.Random, n: int) -> list[RemoteLogMetadata]:
    def i64() -> int:
        return rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randrange(-(2**63), 2**63)])

    def i32() -> int:
        return rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)])

    def tp() -> TopicIdPartition:
        name = "".join(rng.choice("abcé_-.\u4e2d") for _ in range(rng.randrange(0, 30)))
        return TopicIdPartition(Uuid(i64(), i64()), name, i32())

    def custom() -> bytes | None:
        return rng.choice([None, b"", rng.randbytes(rng.randrange(0, 300))])

    out: list[RemoteLogMetadata] = []
    for i in range(n):
        start = rng.randrange(0, 2**40)
        end = start + rng.randrange(0, 2**20)
        epochs = tuple((i32(), i64()) for _ in range(rng.randrange(1, 200 if i % 10 == 0 else 4)))
        state = rng.choice(list(RemoteLogSegmentState))
        sid = RemoteLogSegmentId(tp(), Uuid(i64(), i64()))
        kind = i % 4
        if kind == 0:
            size = rng.randrange(0, 2**31)
            out.append(
                RemoteLogSegmentMetadata(sid, start, end, i64(), i32(), i64(), size, epochs, custom(), state)
            )
        elif kind == 1:
            out.append(RemoteLogSegmentMetadataUpdate(sid, i64(), custom(), state, i32()))
        elif kind == 2:
            out.append(
                RemotePartitionDeleteMetadata(
                    tp(), rng.choice(list(RemotePartitionDeleteState)), i64(), i32()
                )
            )
        else:
            size = rng.randrange(0, 2**31)
            out.append(
                RemoteLogSegmentMetadataSnapshot(
                    sid.id, start, end, i64(), i32(), i64(), size, epochs, custom(), state
                )
            )
    return out


def test_encoding_is_byte_identical_to_kafkas(kafka_java: KafkaJava) -> None:
    values = _random_values(random.Random(25), 400)
    specs = [{"apiKey": k, "version": 0, "value": v} for k, v in map(generic, values)]
    kafka_bytes = kafka_java.rlmm_encode(specs)
    for value, theirs in zip(values, kafka_bytes, strict=True):
        assert serialize(value) == theirs, value
        assert deserialize(theirs) == value


def test_kafka_decodes_what_kafkalog_writes(kafka_java: KafkaJava) -> None:
    values = _random_values(random.Random(405), 200)
    decoded = kafka_java.rlmm_decode([serialize(v) for v in values])
    for value, theirs in zip(values, decoded, strict=True):
        api_key, fields = generic(value)
        assert theirs == {"apiKey": api_key, "remaining": 0, "value": fields}


def test_mutated_values_decode_as_kafka_does(kafka_java: KafkaJava) -> None:
    """Flip, cut or extend valid values: where kafkalog decodes, Kafka decodes the same fields; where Kafka's types
    fail, kafkalog raises its typed errors. (kafkalog also refuses what Kafka's constructors or its state enums
    refuse, and trailing bytes, which the generic types do not check.)"""
    rng = random.Random(1)
    bases = [serialize(v) for v in _random_values(random.Random(7), 40)]
    raws = []
    for _ in range(1500):
        buf = bytearray(rng.choice(bases))
        for _ in range(rng.randrange(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        if rng.random() < 0.3:
            buf = buf[: rng.randrange(len(buf) + 1)]
        buf[1:2] = b"\x00"  # version 0: the only one both sides read the same way
        raws.append(bytes(buf))
    agree = 0
    for raw, theirs in zip(raws, kafka_java.rlmm_decode(raws), strict=True):
        try:
            ours = deserialize(raw)
        except (CorruptRecordError, InvalidRecordError):
            continue
        assert "error" not in theirs, (raw.hex(), theirs)
        api_key, fields = generic(ours)
        # kafkalog keeps one entry per epoch, sorted (Kafka's TreeMap in RemoteLogSegmentMetadata): compare so.
        if api_key in (0, 3):
            theirs["value"][6] = _epochs(tuple(sorted({e: o for e, o, _ in theirs["value"][6]}.items())))
        assert theirs == {"apiKey": api_key, "remaining": 0, "value": fields}, raw.hex()
        agree += 1
    assert agree > 50


def test_partitioner_matches_kafka(kafka_java: KafkaJava) -> None:
    rng = random.Random(50)
    lines = [
        (rng.randrange(-(2**63), 2**63), rng.randrange(-(2**63), 2**63), rng.randrange(0, 2**31), n)
        for n in (1, 7, 50, 50, 50, 1000)
        for _ in range(200)
    ]
    theirs = kafka_java.rlmm_partition(lines)
    for (msb, lsb, p, n), expected in zip(lines, theirs, strict=True):
        tp = TopicIdPartition(Uuid(msb, lsb), "t", p)
        assert RemoteLogMetadataTopicPartitioner(n).metadata_partition(tp) == expected
