"""Batch writes through Spark: ``df.write.format(...).mode("append").save(dir)`` into a kafkalog data directory.

The writer is exercised through a tiny DataSource of this module (``kafkalog-sink-test``) so that these tests do
not depend on the read side; one test goes through the real ``kafkalog`` format both ways when it is there.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log.types import FetchIsolation
from kafkalog.manager import LogManager
from kafkalog.partitioner import partition_for_key

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")

from pyspark import cloudpickle  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import DataSource  # noqa: E402

from kafkalog.spark.writer import KafkaLogStreamWriter, KafkaLogWriter  # noqa: E402

TEST_FORMAT = "kafkalog-sink-test"


class SinkTestSource(DataSource):
    """Only the sink half, for testing the writer on its own."""

    @classmethod
    def name(cls) -> str:
        return TEST_FORMAT

    def writer(self, schema: Any, overwrite: bool) -> Any:
        return KafkaLogWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        return KafkaLogStreamWriter(self.options, schema, overwrite)


# Workers import pickled classes by reference; this test module is not on their path, so ship it by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def sink_spark(spark: Any) -> Any:
    spark.dataSource.register(SinkTestSource)
    return spark


def make_topic(data: Path, topic: str, partitions: int, **config: Any) -> None:
    with LogManager.open(data, background=False) as mgr:
        mgr.create_topic(topic, partitions, config or None)


def read_partition(data: Path, topic: str, partition: int) -> list[Any]:
    out: list[Any] = []
    with LogManager.open(data, background=False) as mgr:
        log = mgr.get_log(topic, partition)
        offset = 0
        while offset < log.log_end_offset:
            for batch in mgr.read(topic, partition, offset, 1 << 24, FetchIsolation.LOG_END).batches():
                out.extend(r for r in batch if r.offset >= offset)
                offset = batch.last_offset + 1
    return out


def staging_left(data: Path) -> list[Path]:
    root = data / ".kafkalog-spark" / "staging"
    return [p for p in root.rglob("*")] if root.exists() else []


def test_batch_write_round_trip(sink_spark: Any, tmp_path: Path) -> None:
    make_topic(tmp_path, "orders", 3)
    df = sink_spark.range(0, 1000, numPartitions=4).select(
        F.concat(F.lit("k"), (F.col("id") % 50).cast("string")).alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        F.when(F.col("id") % 2 == 0, F.lit(None)).otherwise((F.col("id") % 3).cast("int")).alias("partition"),
        F.when(
            F.col("id") % 5 == 0, F.array(F.struct(F.lit("src").alias("key"), F.lit(b"x").alias("value")))
        ).alias("headers"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + F.col("id")).alias("timestamp"),
        F.col("id").alias("offset"),  # ignored, as by Kafka's sink
    )
    df.write.format(TEST_FORMAT).option("topic", "orders").mode("append").save(str(tmp_path))

    seen = 0
    for p in range(3):
        recs = read_partition(tmp_path, "orders", p)
        assert [r.offset for r in recs] == list(range(len(recs)))  # one contiguous range from 0
        for r in recs:
            i = int(r.value.decode().split("-")[1])
            assert r.key == f"k{i % 50}".encode()
            assert p == (partition_for_key(r.key, 3) if i % 2 == 0 else i % 3)
            assert r.timestamp == 1_700_000_000_000 + i
            assert [(h.key, h.value) for h in r.headers] == ([("src", b"x")] if i % 5 == 0 else [])
        seen += len(recs)
    assert seen == 1000
    assert staging_left(tmp_path) == []


def test_batch_write_refusals(sink_spark: Any, tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 1)
    df = sink_spark.createDataFrame([("a", "1")], "key string, value string")

    def writer() -> Any:  # DataFrameWriter accumulates options: a fresh one per attempt
        return df.write.format(TEST_FORMAT).option("path", str(tmp_path))

    with pytest.raises(Exception, match="only appends"):
        writer().option("topic", "t").mode("overwrite").save()
    with pytest.raises(Exception, match="does not exist"):
        writer().option("topic", "missing").mode("append").save()
    with pytest.raises(Exception, match="topic option required"):
        writer().mode("append").save()
    bad = sink_spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception, match="value attribute unsupported type int"):
        bad.write.format(TEST_FORMAT).option("topic", "t").mode("append").save(str(tmp_path))
    # createTopics: the topic comes from a column and is created at commit
    rows = sink_spark.createDataFrame(
        [("n1", "a", "x"), ("n2", "b", "y"), ("n1", None, "z")], "topic string, key string, value string"
    )
    rows.write.format(TEST_FORMAT).option("createTopics", "true").option("createTopics.partitions", "2").mode(
        "append"
    ).save(str(tmp_path))
    with LogManager.open(tmp_path, background=False) as mgr:
        assert mgr.num_partitions("n1") == 2 and mgr.num_partitions("n2") == 2
        assert sum(mgr.get_log("n1", p).log_end_offset for p in range(2)) == 2
    assert read_partition(tmp_path, "t", 0) == []


def test_failed_job_leaves_nothing(sink_spark: Any, tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 2)
    df = sink_spark.range(0, 4000, numPartitions=4).select(
        F.col("id").cast("string").alias("key"),
        F.when(F.col("id") == 3900, F.raise_error(F.lit("boom")))
        .otherwise(F.col("id").cast("string"))
        .alias("value"),
    )
    with pytest.raises(Exception, match="boom"):
        df.write.format(TEST_FORMAT).option("topic", "t").mode("append").save(str(tmp_path))
    with LogManager.open(tmp_path, background=False) as mgr:
        assert [mgr.get_log("t", p).log_end_offset for p in range(2)] == [0, 0]
    # abort() removes what the tasks staged; a task Spark cancelled can still finish writing after abort ran
    # (a race under load): such leftovers belong to no journal and the next commit's sweep removes them
    from kafkalog.spark.commit import sweep_stale_staging

    sweep_stale_staging(tmp_path, 0)
    assert [p for p in staging_left(tmp_path) if p.is_file()] == []


def test_real_format_round_trip(spark: Any, tmp_path: Path) -> None:
    try:
        spark.read.format("kafkalog")  # registered by the conftest when the read side imports
        from kafkalog.spark import KafkaLogDataSource  # noqa: F401
    except Exception as exc:  # pragma: no cover - read side not there
        pytest.skip(f"kafkalog data source unavailable: {exc}")
    make_topic(tmp_path, "src", 2)
    data = spark.range(0, 500, numPartitions=2).selectExpr(
        "cast(id % 7 as string) as key", "cast(id as string) as value"
    )
    data.write.format("kafkalog").option("topic", "src").mode("append").save(str(tmp_path))
    back = spark.read.format("kafkalog").option("subscribe", "src").load(str(tmp_path))
    copied = back.selectExpr("key", "value", "partition")  # same partitions, topic from the option
    copied.write.format("kafkalog").option("topic", "copy").option("createTopics", "true").option(
        "createTopics.partitions", "2"
    ).mode("append").save(str(tmp_path))
    rows = spark.read.format("kafkalog").option("subscribe", "copy").load(str(tmp_path)).collect()
    assert sorted(int(r.value) for r in rows) == list(range(500))
    assert all(r.partition == partition_for_key(r.key, 2) for r in rows)
