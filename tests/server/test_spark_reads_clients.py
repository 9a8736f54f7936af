"""Spark reads what Kafka clients wrote: confluent-kafka produces through the server (keys, headers, two
codecs, idempotence), the server stops, and the ``kafkalog`` Spark source reads the data directory; every
partition, offset, key, value and header matches what the producer's delivery reports and inputs say.

Marked ``spark`` and ``slow``; skips when pyspark or Java is missing (the shared session fixture of
``tests/spark/conftest.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kafkalog.server import KafkaServer  # noqa: E402
from spark.conftest import spark  # noqa: E402, F401  (the shared session fixture)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "from-clients"
PARTITIONS = 3
CODECS = ("zstd", "lz4")
PER_CODEC = 40

#: (partition, offset, key, value, headers) as Spark's Kafka schema shows them.
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _produce(bootstrap: str) -> list[Row]:
    """Produce every codec's records; returns what was sent, at the partition and offset of its delivery
    report (a delivery report carries no headers, so they come from the input)."""
    delivered: list[Row] = []
    errors: list[object] = []
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        for i in range(PER_CODEC):
            key = None if i % 13 == 0 else f"{codec}-key-{i}".encode()
            value = None if i % 17 == 5 else f"{codec}-value-{i}-".encode() * (1 + i % 4)
            headers: list[tuple[str, bytes | None]] = [("codec", codec.encode()), ("i", str(i).encode())]
            if i % 3 == 0:
                headers.append(("empty", None))

            def report(err: Any, msg: Any, sent: tuple[Any, ...] = (key, value, headers)) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    delivered.append((msg.partition(), msg.offset(), *sent))

            producer.produce(
                TOPIC, key=key, value=value, headers=headers, partition=i % PARTITIONS, on_delivery=report
            )
        assert producer.flush(30) == 0
        producer.close()
    assert errors == []
    return delivered


def test_spark_reads_every_record_clients_wrote(data_dir: Path, spark: Any) -> None:  # noqa: F811
    with KafkaServer(data_dir, port=0) as server:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
            assert future.result() is None
        delivered = _produce(server.bootstrap)
        del admin  # its connection would retry against the stopped server
    assert len(delivered) == len(CODECS) * PER_CODEC

    df = (
        spark.read.format("kafkalog")
        .option("subscribe", TOPIC)
        .option("includeHeaders", "true")
        .option("path", str(data_dir))
        .load()
    )
    rows = df.select("topic", "partition", "offset", "key", "value", "headers").collect()
    assert {r.topic for r in rows} == {TOPIC}
    got: list[Row] = [
        (
            r.partition,
            r.offset,
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            [(h.key, None if h.value is None else bytes(h.value)) for h in (r.headers or [])],
        )
        for r in rows
    ]
    assert sorted(got, key=lambda r: (r[0], r[1])) == sorted(delivered, key=lambda r: (r[0], r[1]))
    # offsets are dense per partition from 0 (idempotent producers, no control batches)
    for p in range(PARTITIONS):
        offsets = sorted(o for q, o, *_ in got if q == p)
        assert offsets == list(range(len(offsets)))
