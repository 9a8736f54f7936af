"""Streaming writes: ``writeStream.format(...)`` appends each micro-batch exactly once across restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from kafkalog.manager import LogManager  # noqa: E402

from .test_write import TEST_FORMAT, SinkTestSource, make_topic, read_partition  # noqa: E402


@pytest.fixture(scope="module")
def sink_spark(spark: Any) -> Any:
    spark.dataSource.register(SinkTestSource)
    return spark


def add_input(directory: Path, name: str, start: int, count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "key": [f"user-{i % 11}" for i in range(start, start + count)],
            "value": [f"event-{i}" for i in range(start, start + count)],
        }
    )
    pq.write_table(table, directory / f"{name}.parquet")


def values(data: Path, topic: str, partitions: int) -> list[str]:
    out = []
    for p in range(partitions):
        recs = read_partition(data, topic, p)
        assert [r.offset for r in recs] == list(range(len(recs)))
        out += [r.value.decode() for r in recs]
    return out


def test_stream_sink_exactly_once_across_restarts(sink_spark: Any, tmp_path: Path) -> None:
    data, inp, ckpt = tmp_path / "data", tmp_path / "in", tmp_path / "ckpt"
    make_topic(data, "events", 2)
    add_input(inp, "a", 0, 300)

    def run() -> Any:
        query = (
            sink_spark.readStream.schema("key string, value string")
            .parquet(str(inp))
            .writeStream.format(TEST_FORMAT)
            .option("path", str(data))
            .option("topic", "events")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None
        return query

    run()
    assert sorted(values(data, "events", 2)) == sorted(f"event-{i}" for i in range(300))
    add_input(inp, "b", 300, 100)
    run()
    assert len(values(data, "events", 2)) == 400
    markers = list((data / ".kafkalog-spark" / "sinks").glob("*.json"))
    assert len(markers) == 1  # keyed by the streaming query id
    assert json.loads(markers[0].read_text())["batch_id"] == 1

    # The driver died after the sink committed batch 1 but before Spark wrote its commit log entry:
    # the restarted query re-runs batch 1 with the same id, and the sink must not append it again.
    for name in ("1", ".1.crc"):
        (ckpt / "commits" / name).unlink(missing_ok=True)
    replay = run()
    assert [(p["batchId"], p["numInputRows"]) for p in replay.recentProgress][:1] == [(1, 100)]
    got = values(data, "events", 2)
    assert sorted(got) == sorted(f"event-{i}" for i in range(400))
    assert not list((data / ".kafkalog-spark" / "staging").rglob("*.batches"))
    with LogManager.open(data, background=False) as mgr:
        assert sum(mgr.get_log("events", p).log_end_offset for p in range(2)) == 400
