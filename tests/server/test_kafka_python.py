"""kafka-python 3 (an independent client) against the server: admin, producer, consumer, restart."""

from __future__ import annotations

import logging
from pathlib import Path

import kafka.codec
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError

from kafkalog.server import KafkaServer

from .helpers import log_records

# snappy needs python-snappy, which kafka-python does not pull in (confluent-kafka and Java cover snappy).
CODECS = [c for c in ("none", "gzip", "snappy", "lz4", "zstd") if c != "snappy" or kafka.codec.has_snappy()]
PER_CODEC = 20


def _expected() -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    out = []
    for codec in CODECS:
        for i in range(PER_CODEC):
            out.append(
                (
                    f"k{i}".encode(),
                    f"{codec}-{i}".encode(),
                    [("h", f"x{i}".encode()), ("codec", codec.encode())],
                )
            )
    return out


def _consume(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> list[tuple[int, int, bytes, bytes, list[tuple[str, bytes]]]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000, fetch_max_wait_ms=100
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        for m in consumer:
            out.append((m.partition, m.offset, m.key, m.value, list(m.headers)))
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


def _as_multiset(
    rows: list[tuple[int, int, bytes, bytes, list[tuple[str, bytes]]]],
) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return sorted((k, v, h) for _, _, k, v, h in rows)


def test_kafka_python_round_trip_and_restart(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    topic = "kp"
    with KafkaServer(data_dir, port=0) as server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 2, 1)])
            with pytest.raises(TopicAlreadyExistsError):
                admin.create_topics([NewTopic(topic, 2, 1)], raise_errors=True)
            admin.create_partitions({topic: NewPartitions(3)})
        finally:
            admin.close()
        for codec in CODECS:
            producer = KafkaProducer(
                bootstrap_servers=server.bootstrap,
                compression_type=None if codec == "none" else codec,
                acks="all",
                linger_ms=5,
                enable_idempotence=True,
            )
            for i in range(PER_CODEC):
                producer.send(
                    topic,
                    key=f"k{i}".encode(),
                    value=f"{codec}-{i}".encode(),
                    headers=[("h", f"x{i}".encode()), ("codec", codec.encode())],
                )
            producer.flush()
            producer.close()
        first = _consume(server.bootstrap, topic, 3, len(CODECS) * PER_CODEC)
    assert _as_multiset(first) == sorted(_expected())
    with KafkaServer(data_dir, port=0) as server:  # same directory, new process state
        again = _consume(server.bootstrap, topic, 3, len(CODECS) * PER_CODEC)
        consumer = KafkaConsumer(bootstrap_servers=server.bootstrap)
        try:
            tps = [TopicPartition(topic, p) for p in range(3)]
            assert sum(consumer.end_offsets(tps).values()) == len(CODECS) * PER_CODEC
            assert set(consumer.beginning_offsets(tps).values()) == {0}
        finally:
            consumer.close()
    assert sorted(again) == sorted(first)
    on_disk = []
    for p in range(3):
        on_disk += [(p, o, k, v, h) for o, k, v, h in log_records(data_dir / f"{topic}-{p}")]
    assert sorted(on_disk) == sorted(first)


def test_kafka_python_admin_delete_topic(server: KafkaServer) -> None:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic("gone", 1, 1)])
        assert "gone" in admin.list_topics()
        admin.delete_topics(["gone"])
        assert "gone" not in admin.list_topics()
    finally:
        admin.close()
    assert server.manager is not None and "gone" not in server.manager.topics()
