"""Apache Kafka's Java clients 3.9 (kafka-clients jar) against the server, and Kafka's own reading of the
segments they wrote. Skips with a reason when Java 17 or the jars are missing (CI has both)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from interop.kafka_java import KafkaJava
from kafkalog.manager import LogManager
from kafkalog.server import KafkaServer

from .helpers import log_records, producer_ids
from .java_clients import JavaClients

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 20
TOTAL = len(CODECS) * PER_CODEC


def _rows(consumed: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(
        (r["partition"], r["offset"], r["key"], r["value"], tuple(tuple(h) for h in r["headers"]))  # type: ignore[union-attr]
        for r in consumed
    )


def test_java_clients_round_trip_restart_and_kafka_reads_the_segments(
    data_dir: Path, java_clients: JavaClients, kafka_java: KafkaJava
) -> None:
    topic = "jv"
    with KafkaServer(data_dir, port=0) as server:
        assert java_clients.run("create", server.bootstrap, topic, 3) == [{"created": topic}]
        produced = java_clients.run("produce", server.bootstrap, topic, ",".join(CODECS), PER_CODEC)
        assert len(produced) == TOTAL
        consumed = java_clients.run("consume", server.bootstrap, topic, TOTAL)
        offsets = java_clients.run("offsets", server.bootstrap, topic)
    rows = _rows(consumed)
    assert len(rows) == TOTAL
    assert sorted((r["partition"], r["offset"]) for r in produced) == [(p, o) for p, o, *_ in rows]
    expected = sorted(
        (f"k{i}", f"{codec}-{i}", (("h", f"x{i}"),)) for codec in CODECS for i in range(PER_CODEC)
    )
    assert sorted((k, v, h) for _, _, k, v, h in rows) == expected
    for row in offsets:
        assert row["earliest"] == 0
        assert row["latest"] == 1 + max([o for p, o, *_ in rows if p == row["partition"]], default=-1)

    with KafkaServer(data_dir, port=0) as server:  # restart on the same directory
        again = java_clients.run("consume", server.bootstrap, topic, TOTAL)
        low = java_clients.run("delete-records", server.bootstrap, topic, 0, 1)
    assert _rows(again) == rows
    assert low == [{"lowWatermark": 1}]

    # kafkalog's own Log reads what Kafka's producer wrote through the server ...
    on_disk = []
    for p in range(3):
        for offset, key, value, headers in log_records(data_dir / f"{topic}-{p}"):
            on_disk.append(
                (
                    p,
                    offset,
                    key.decode() if key else None,
                    value.decode() if value else None,
                    tuple((h, v.decode() if v else None) for h, v in headers),
                )
            )
    assert sorted(on_disk) == rows  # DeleteRecords moved the log start offset; the segment keeps the bytes
    with LogManager.open(data_dir, background=False) as manager:  # ... and the checkpoint kept the move
        assert manager.get_log(topic, 0).log_start_offset == 1
    assert producer_ids(data_dir, topic, 3) == len(CODECS)
    # ... and so does Kafka's own record code (FileRecords.batches(), CRC checks, every codec)
    segments = sorted(data_dir.glob(f"{topic}-*/*.log"))
    assert segments
    values = []
    codecs = set()
    for segment in segments:
        lines, code = kafka_java.dump(segment, deep=True)
        assert code == 0, lines
        for line in lines:
            if line["type"] == "batch":
                assert line["isValid"] and line["producerId"] >= 0, line
                codecs.add(line["compressionType"])
            elif line["type"] == "record":
                values.append(base64.b64decode(line["value"]).decode())
    assert codecs == set(CODECS)
    assert sorted(values) == sorted(f"{codec}-{i}" for codec in CODECS for i in range(PER_CODEC))
