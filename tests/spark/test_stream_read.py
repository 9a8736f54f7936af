"""Streaming reads of the ``kafkalog`` source.

Pure tests drive :class:`KafkaLogStreamReader` the way Spark's streaming runner does (initialOffset,
latestOffset with a read limit, partitions, prepareForTriggerAvailableNow) without a session; Spark tests
(marked ``spark``) run ``Trigger.AvailableNow`` queries: a restart from the checkpoint reads exactly the
appended rows, ``maxOffsetsPerTrigger`` shapes the micro-batches, new partitions are picked up.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kafkalog.errors import OffsetOutOfRangeError
from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.stream_reader import KafkaLogStreamReader

TS = 1_700_000_000_000


def append(data_dir: Path, topic: str, partition: int, n: int, config: LogConfig | None = None) -> int:
    """Append ``n`` records (one per batch) to ``<topic>-<partition>``; returns the new log end offset."""
    log = Log.open(data_dir / f"{topic}-{partition}", config or LogConfig(segment_bytes=2048))
    for _ in range(n):
        i = log.log_end_offset
        log.append([SimpleRecord(b"%s-%d-%d" % (topic.encode(), partition, i), None, TS + i)])
    end = log.log_end_offset
    log.close()
    return end


def reader(data_dir: Path, **options: Any) -> KafkaLogStreamReader:
    opts = {"path": str(data_dir), **{k.lower(): str(v) for k, v in options.items()}}
    return KafkaLogStreamReader(parse_source_options(opts, streaming=True))


def ranges(parts: list[Any]) -> list[tuple[str, int, int, int]]:
    return [(p.task.topic, p.task.partition, p.task.start, p.task.end) for p in parts]


# --- pure -----------------------------------------------------------------------------------------------------


def test_initial_offsets(tmp_path: Path) -> None:
    append(tmp_path, "t", 0, 10)
    append(tmp_path, "t", 1, 4)
    assert reader(tmp_path, subscribe="t").initialOffset() == {"t": {"0": 10, "1": 4}}  # default: latest
    assert reader(tmp_path, subscribe="t", startingOffsets="earliest").initialOffset() == {
        "t": {"0": 0, "1": 0}
    }
    spec = '{"t": {"1": -2, "0": 3}}'
    assert reader(tmp_path, subscribe="t", startingOffsets=spec).initialOffset() == {"t": {"0": 3, "1": 0}}
    assert reader(tmp_path, subscribe="t", startingTimestamp=TS + 2).initialOffset() == {
        "t": {"0": 2, "1": 2}
    }
    with pytest.raises(ValueError, match="No offset matched"):
        reader(tmp_path, subscribe="t", startingTimestamp=TS + 5).initialOffset()
    late = reader(
        tmp_path, subscribe="t", startingTimestamp=TS + 5, startingOffsetsByTimestampStrategy="latest"
    )
    assert late.initialOffset() == {"t": {"0": 5, "1": 4}}


def test_latest_offset_and_read_limits(tmp_path: Path) -> None:
    for p in range(2):
        append(tmp_path, "o", p, 30)
    append(tmp_path, "o", 10, 2)
    r = reader(tmp_path, subscribe="o", startingOffsets="earliest", maxOffsetsPerTrigger=20)
    start = r.initialOffset()
    assert json.dumps(start) == '{"o": {"0": 0, "1": 0, "10": 0}}'  # canonical: numeric partition order
    assert r.getDefaultReadLimit() == ReadMaxRows(20)
    end = r.latestOffset(start, ReadMaxRows(20))
    assert end == {"o": {"0": 9, "1": 9, "10": 1}}
    assert r.reportLatestOffset() == {"o": {"0": 30, "1": 30, "10": 2}}
    assert r.latestOffset(start, ReadAllAvailable()) == {"o": {"0": 30, "1": 30, "10": 2}}
    assert r.latestOffset() == {"o": {"0": 30, "1": 30, "10": 2}}  # pyspark < 4.2 calls it without arguments
    assert ranges(r.partitions(start, end)) == [("o", 0, 0, 9), ("o", 1, 0, 9), ("o", 10, 0, 1)]
    assert r.partitions(end, end) == []
    assert reader(tmp_path, subscribe="o").getDefaultReadLimit() == ReadAllAvailable()
    assert reader(tmp_path, subscribe="o", minOffsetsPerTrigger=5).getDefaultReadLimit() == ReadMinRows(5)


def test_min_offsets_per_trigger_waits_until_max_trigger_delay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the reader's wall clock, moved by hand: no real wait, nothing timing-dependent
    clock = [1_700_000_000.0]
    monkeypatch.setattr("kafkalog.spark.stream_reader.time", SimpleNamespace(time=lambda: clock[0]))
    append(tmp_path, "m", 0, 5)
    r = reader(
        tmp_path, subscribe="m", startingOffsets="earliest", minOffsetsPerTrigger=10, maxTriggerDelay="300ms"
    )
    start = r.initialOffset()
    assert r.latestOffset(start, ReadMinRows(10)) == {"m": {"0": 5}}  # first trigger runs at once, as Kafka's
    assert r.latestOffset({"m": {"0": 5}}, ReadMinRows(10)) == {"m": {"0": 5}}
    append(tmp_path, "m", 0, 3)
    # steps that are exact in binary floating point: 250 ms, then 312.5 ms after the last trigger
    clock[0] += 0.25
    assert r.latestOffset({"m": {"0": 5}}, ReadMinRows(10)) == {"m": {"0": 5}}  # 3 < 10: wait
    clock[0] += 0.0625
    assert r.latestOffset({"m": {"0": 5}}, ReadMinRows(10)) == {"m": {"0": 8}}  # the delay passed
    append(tmp_path, "m", 0, 2)
    clock[0] += 0.25
    assert r.latestOffset({"m": {"0": 8}}, ReadMinRows(10)) == {"m": {"0": 8}}  # measured from that trigger


def test_available_now_freezes_the_target(tmp_path: Path) -> None:
    append(tmp_path, "a", 0, 10)
    r = reader(
        tmp_path, subscribe="a", startingOffsets="earliest", maxOffsetsPerTrigger=4, minOffsetsPerTrigger=2
    )
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    append(tmp_path, "a", 0, 5)
    append(tmp_path, "a", 1, 5)  # a new partition after the target was taken
    offsets = [start]
    while True:
        nxt = r.latestOffset(offsets[-1], ReadMaxRows(4))
        if nxt == offsets[-1]:
            break
        offsets.append(nxt)
    assert [o["a"]["0"] for o in offsets] == [0, 4, 8, 10]
    assert all(set(o["a"]) == {"0"} for o in offsets)


def test_new_partitions_and_topics_start_at_earliest(tmp_path: Path) -> None:
    append(tmp_path, "n", 0, 3)
    r = reader(tmp_path, subscribePattern="n.*")
    start = r.initialOffset()
    append(tmp_path, "n", 1, 2)
    append(tmp_path, "nx", 0, 4)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"n": {"0": 3, "1": 2}, "nx": {"0": 4}}
    assert ranges(r.partitions(start, end)) == [("n", 1, 0, 2), ("nx", 0, 0, 4)]


def test_data_loss_in_partitions(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = LogConfig(segment_bytes=512, retention_bytes=1024, retention_ms=-1, file_delete_delay_ms=0)
    append(tmp_path, "d", 0, 60, config)
    r = reader(tmp_path, subscribe="d", startingOffsets="earliest")
    start = r.initialOffset()
    log = Log.open(tmp_path / "d-0", config)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0  # retention passes the committed offset
    earliest = log.log_start_offset
    log.close()
    end = r.latestOffset(start, ReadAllAvailable())
    with pytest.raises(OffsetOutOfRangeError, match="Cannot fetch offset 0"):
        r.partitions(start, end)
    lenient = reader(tmp_path, subscribe="d", startingOffsets="earliest", failOnDataLoss="false")
    assert ranges(lenient.partitions(start, end)) == [("d", 0, earliest, 60)]
    with pytest.raises(OffsetOutOfRangeError, match="offset was changed from 70 to 60"):
        r.partitions({"d": {"0": 70}}, end)
    assert lenient.partitions({"d": {"0": 70}}, end) == []
    with pytest.raises(OffsetOutOfRangeError, match="are gone"):
        r.partitions({"d": {"0": 60}, "gone": {"0": 5}}, end)
    assert "Some data may have been lost" in caplog.text


def test_read_committed_stops_at_the_last_stable_offset(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0")
    log.append([SimpleRecord(b"a")])
    txn = MemoryRecords.build(
        [SimpleRecord(b"t")], producer_id=3, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    log.append_as_leader(txn, 0)
    log.append([SimpleRecord(b"b")])
    r = reader(
        tmp_path, subscribe="c", startingOffsets="earliest", **{"kafka.isolation.level": "read_committed"}
    )
    assert r.latestOffset(r.initialOffset(), ReadAllAvailable()) == {"c": {"0": 1}}
    marker = MemoryRecords.end_transaction_marker(
        producer_id=3,
        producer_epoch=0,
        control_type=ControlRecordType.ABORT,
        coordinator_epoch=0,
        timestamp=TS,
    )
    log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)
    log.close()
    end = r.latestOffset({"c": {"0": 1}}, ReadAllAvailable())
    assert end == {"c": {"0": 4}}
    (part,) = r.partitions({"c": {"0": 1}}, end)
    assert part.task.aborted == ((3, 1, 3),)
    values = [v for b in r.read(part) for v in b.column("value").to_pylist()]
    assert values == [b"b"]


def test_reader_pickles_without_driver_state(tmp_path: Path) -> None:
    append(tmp_path, "p", 0, 3)
    r = reader(tmp_path, subscribe="p")
    r.initialOffset()
    copy = pickle.loads(pickle.dumps(r))
    assert copy._dirs is None and copy.options == r.options


# --- Spark ----------------------------------------------------------------------------------------------------


def run_available_now(
    spark: Any, data_dir: Path, checkpoint: Path, **options: Any
) -> tuple[list[Any], list[int]]:
    """One ``Trigger.AvailableNow`` run; returns (rows, rows per micro-batch).

    Rows go to a Parquet file sink beside the checkpoint (exactly-once, restartable), not ``foreachBatch``: a
    Python foreachBatch callback that collects can deadlock against a driver thread blocked in
    ``awaitTermination`` (py4j callback; seen once in CI). The rows returned are the ones this run added."""
    out = checkpoint.with_name(checkpoint.name + "-out")
    stream = spark.readStream.format("kafkalog").options(**{k: str(v) for k, v in options.items()})
    df = stream.load(str(data_dir))
    before = _sink_rows(spark, out, df.schema)
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(300)
    if not finished:
        query.stop()
        raise AssertionError("the AvailableNow query did not finish within 300 s")
    if query.exception() is not None:
        raise AssertionError(f"the query failed: {query.exception()}")
    seen = {(r.topic, r.partition, r.offset) for r in before}
    rows = [r for r in _sink_rows(spark, out, df.schema) if (r.topic, r.partition, r.offset) not in seen]
    sizes = [int(p["numInputRows"]) for p in query.recentProgress if int(p["numInputRows"])]
    return rows, sizes


def _sink_rows(spark: Any, out: Path, schema: Any) -> list[Any]:
    if not any(out.glob("*.parquet")):
        return []
    return list(spark.read.schema(schema).parquet(str(out)).orderBy("partition", "offset").collect())


@pytest.mark.spark
def test_spark_stream_restarts_from_its_checkpoint(spark: Any, tmp_path: Path) -> None:
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    append(data, "s", 0, 10)
    rows, _ = run_available_now(spark, data, checkpoint, subscribe="s")
    assert rows == []  # startingOffsets defaults to latest
    append(data, "s", 0, 7)
    rows, _ = run_available_now(spark, data, checkpoint, subscribe="s")
    assert [(r.partition, r.offset, r.value) for r in rows] == [(0, o, b"s-0-%d" % o) for o in range(10, 17)]
    append(data, "s", 0, 3)
    append(data, "s", 1, 2)  # a partition created while the query was down starts at its earliest offset
    rows, _ = run_available_now(spark, data, checkpoint, subscribe="s")
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 17), (0, 18), (0, 19), (1, 0), (1, 1)]
    rows, _ = run_available_now(spark, data, checkpoint, subscribe="s")
    assert rows == []


@pytest.mark.spark
def test_spark_max_offsets_per_trigger(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    append(data, "r", 0, 101)
    append(data, "r", 1, 100)
    rows, sizes = run_available_now(
        spark,
        data,
        tmp_path / "cp",
        subscribe="r",
        startingOffsets="earliest",
        maxOffsetsPerTrigger=50,
        includeHeaders="true",
    )
    assert sizes == [49, 50, 50, 50, 2]  # Kafka's split: floor of each partition's share of 50
    assert len({(r.partition, r.offset) for r in rows}) == 201
    assert rows[0].headers is None
