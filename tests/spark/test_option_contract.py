"""Source and sink options against Spark's Kafka integration: what is honoured, refused or ignored with a
warning (issue 23 item 3; the table is docs/spark.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafkalog.manager import LogManager
from kafkalog.records import SimpleRecord
from kafkalog.spark.sink_options import SinkError, SinkOptions

pyspark = pytest.importorskip("pyspark")

DEFAULT_PARTITIONER = "org.apache.kafka.clients.producer.internals.DefaultPartitioner"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "kafka.key.serializer",
            "Kafka option 'key.serializer' is not supported as keys are serialized with",
        ),
        (
            "kafka.value.serializer",
            "Kafka option 'value.serializer' is not supported as values are serialized",
        ),
    ],
)
def test_sink_refuses_serializers_as_spark_does(name: str, message: str) -> None:
    with pytest.raises(SinkError, match=message):
        SinkOptions.parse({"path": "/d", "topic": "t", name: "org.apache.kafka.common.serialization.X"})


def test_sink_partitioner_class() -> None:
    SinkOptions.parse({"path": "/d", "topic": "t", "kafka.partitioner.class": DEFAULT_PARTITIONER})
    for other in ("org.apache.kafka.clients.producer.RoundRobinPartitioner", "com.example.MyPartitioner"):
        with pytest.raises(SinkError, match=r"is not supported.*'partition' column"):
            SinkOptions.parse({"path": "/d", "topic": "t", "KAFKA.PARTITIONER.CLASS": other})


def test_sink_warns_once_about_ignored_producer_options(caplog: pytest.LogCaptureFixture) -> None:
    SinkOptions.parse(
        {
            "path": "/d",
            "topic": "t",
            "kafka.bootstrap.servers": "h:9092",
            "kafka.acks": "all",
            "kafka.linger.ms": "5",
            "kafka.compression.type": "zstd",
        }
    )
    warnings = [r.getMessage() for r in caplog.records if "ignored by the kafkalog sink" in r.getMessage()]
    assert len(warnings) == 1
    assert "kafka.acks, kafka.bootstrap.servers, kafka.linger.ms" in warnings[0]
    assert "compression" not in warnings[0]


def _topic(data: Path) -> None:
    with LogManager.open(data, background=False) as mgr:
        mgr.create_topic("t", 2)
        mgr.produce("t", [SimpleRecord(b"v", b"k")])


@pytest.mark.spark
def test_spark_sink_option_refusals(spark: Any, tmp_path: Path) -> None:
    _topic(tmp_path)
    df = spark.createDataFrame([("a", "1")], "key string, value string")
    for name, value, message in (
        (
            "kafka.partitioner.class",
            "org.apache.kafka.clients.producer.RoundRobinPartitioner",
            "not supported",
        ),
        ("kafka.key.serializer", "x", "key.serializer' is not supported"),
    ):
        writer = df.write.format("kafkalog").options(topic="t", **{name: value}).mode("append")
        with pytest.raises(Exception, match=message):
            writer.save(str(tmp_path))
    with LogManager.open(tmp_path, background=False) as mgr:
        assert mgr.get_log("t", 0).log_end_offset + mgr.get_log("t", 1).log_end_offset == 1


@pytest.mark.spark
def test_spark_streaming_ending_offsets_fails_with_its_own_message(spark: Any, tmp_path: Path) -> None:
    _topic(tmp_path)
    df = (
        spark.readStream.format("kafkalog").options(subscribe="t", endingOffsets="latest").load(str(tmp_path))
    )
    query = (
        df.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "chk"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="ending offset not valid in streaming queries") as failure:
        query.awaitTermination(300)
    assert "UnboundLocalError" not in str(failure.value)
