"""confluent-kafka (librdkafka) against the server: every codec, idempotence, admin operations, restart."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from kafkalog.server import KafkaServer  # noqa: E402

from .helpers import log_records, producer_ids  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 25
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _produce(bootstrap: str, topic: str) -> None:
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        errors: list[object] = []

        def delivered(err: object, msg: object, errors: list[object] = errors) -> None:
            if err is not None:
                errors.append(err)

        for i in range(PER_CODEC):
            key = None if i == 0 else f"k{i}".encode()  # one null key (sticky partitioner)
            headers = [("h", f"x{i}".encode()), ("null", None), ("codec", codec.encode())]
            producer.produce(
                topic,
                key=key,
                value=f"{codec}-{i}".encode(),
                headers=headers,
                on_delivery=delivered,
            )
        assert producer.flush(30) == 0
        assert errors == []


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Row]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-no-commits",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: list[Row] = []
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), list(msg.headers() or [])))
        return out
    finally:
        consumer.close()


def _expected() -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    out = []
    for codec in CODECS:
        for i in range(PER_CODEC):
            key = None if i == 0 else f"k{i}".encode()
            out.append(
                (
                    key,
                    f"{codec}-{i}".encode(),
                    [("h", f"x{i}".encode()), ("null", None), ("codec", codec.encode())],
                )
            )
    return sorted(out, key=repr)


def test_confluent_round_trip_every_codec_and_restart(data_dir: Path) -> None:
    topic = "ck"
    total = len(CODECS) * PER_CODEC
    with KafkaServer(data_dir, port=0) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
            assert future.result() is None
        for future in admin.create_partitions([NewPartitions(topic, 3)]).values():
            assert future.result() is None
        _produce(server.bootstrap, topic)
        first = _consume(server.bootstrap, topic, 3, total)
    assert sorted(((k, v, h) for _, _, k, v, h in first), key=repr) == _expected()
    with KafkaServer(data_dir, port=0) as server:
        again = _consume(server.bootstrap, topic, 3, total)
    assert sorted(again, key=repr) == sorted(first, key=repr)
    on_disk: list[Row] = []
    for p in range(3):
        on_disk += [(p, o, k, v, h) for o, k, v, h in log_records(data_dir / f"{topic}-{p}")]
    assert sorted(on_disk, key=repr) == sorted(first, key=repr)
    # idempotent producers: every batch carries a producer id and sequence, one id per producer
    assert producer_ids(data_dir, topic, 3) == len(CODECS)


def test_confluent_admin_configs_and_delete_records(server: KafkaServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("cfg", 1, 1, config={"cleanup.policy": "delete"})]).values():
        future.result()
    with pytest.raises(Exception, match=r"(?i)replication"):
        admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result()
    producer = Producer({"bootstrap.servers": server.bootstrap, "enable.idempotence": True})
    for i in range(10):
        producer.produce("cfg", value=str(i).encode(), partition=0)
    assert producer.flush(30) == 0

    resource = ConfigResource("topic", "cfg")
    described = admin.describe_configs([resource])[resource].result()
    assert described["retention.ms"].value == "604800000"
    assert described["retention.ms"].is_default
    change = ConfigResource(
        "topic",
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    for future in admin.incremental_alter_configs([change]).values():
        future.result()
    described = admin.describe_configs([resource])[resource].result()
    assert described["retention.ms"].value == "3600000"
    assert not described["retention.ms"].is_default
    assert set(described["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert server.manager is not None
    assert server.manager.get_log("cfg", 0).config.retention_ms == 3_600_000
    bad = ConfigResource(
        "topic",
        "cfg",
        incremental_configs=[ConfigEntry("retention.ms", "x", incremental_operation=AlterConfigOpType.SET)],
    )
    with pytest.raises(Exception, match=r"(?i)invalid"):
        admin.incremental_alter_configs([bad])[bad].result()

    deleted = admin.delete_records([TopicPartition("cfg", 0, 4)])
    for future in deleted.values():
        assert future.result().low_watermark == 4
    assert server.manager.get_log("cfg", 0).log_start_offset == 4
