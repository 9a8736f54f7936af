"""Batch reads of the ``kafkalog`` source.

Pure tests (no Spark session) cover the executor path (:func:`read_task`: exact Arrow schema, offsets,
aborted transactions cut out, data loss) and the driver plan; Spark tests (marked ``spark``, shared session)
check every read option end to end, ``read_committed``, ``failOnDataLoss`` and a directory written by
Kafka's own record code.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import InputPartition

from kafkalog.errors import CorruptRecordError, LogDirNotFoundError, OffsetOutOfRangeError
from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import ControlRecordType, Header, MemoryRecords, SimpleRecord
from kafkalog.records import _kernels as K
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.reader import (
    KafkaLogBatchReader,
    ReadTask,
    _kept_runs,
    plan_batch,
    read_task,
)
from kafkalog.spark.schema import arrow_schema, spark_schema

TS = 1_700_000_000_000


def write_topic(
    data_dir: Path, topic: str, partitions: int, batches: int, per_batch: int = 5, segment_bytes: int = 4096
) -> dict[int, list[tuple[Any, ...]]]:
    """A topic written with ``Log``; returns per partition the rows Spark should show (key, value, offset,
    timestamp ms, headers). Every third record has headers, every seventh a null key, every eleventh a
    null value."""
    expected: dict[int, list[tuple[Any, ...]]] = {}
    for p in range(partitions):
        log = Log.open(
            data_dir / f"{topic}-{p}", LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256)
        )
        rows = []
        offset = 0
        for b in range(batches):
            recs = []
            for j in range(per_batch):
                n = b * per_batch + j
                key = None if n % 7 == 0 else b"key-%d" % n
                value = None if n % 11 == 0 else b"%s-%d-%d" % (topic.encode(), p, n)
                headers = (Header(f"h{n}", b"v"), Header("n", None)) if n % 3 == 0 else ()
                recs.append(SimpleRecord(value, key, TS + n, headers))
                rows.append((key, value, offset, TS + n, [(h.key, h.value) for h in headers] or None))
                offset += 1
            log.append(recs)
        log.close()
        expected[p] = rows
    return expected


def append_txn(log: Log, pid: int, values: list[bytes], seq: int = 0) -> None:
    batch = MemoryRecords.build(
        [SimpleRecord(v, None, TS) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )
    log.append_as_leader(batch, 0)


def end_txn(log: Log, pid: int, control: ControlRecordType) -> None:
    marker = MemoryRecords.end_transaction_marker(
        producer_id=pid, producer_epoch=0, control_type=control, coordinator_epoch=0, timestamp=TS
    )
    log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)


def write_transactions(data_dir: Path) -> Log:
    """``txn-0``: plain a0 a1 | T7 c0 c1 | T8 x0 | plain a2 | T8 x1 | COMMIT 7 | ABORT 8 | T9 o0 | plain a3.

    Offsets: a0=0 a1=1 c0=2 c1=3 x0=4 a2=5 x1=6 markers 7, 8; o0=9 (open: LSO 9); a3=10; LEO 11.
    """
    log = Log.open(data_dir / "txn-0", LogConfig(segment_bytes=1 << 20))
    log.append([SimpleRecord(b"a0"), SimpleRecord(b"a1")])
    append_txn(log, 7, [b"c0", b"c1"])
    append_txn(log, 8, [b"x0"])
    log.append([SimpleRecord(b"a2")])
    append_txn(log, 8, [b"x1"], seq=1)
    end_txn(log, 7, ControlRecordType.COMMIT)
    end_txn(log, 8, ControlRecordType.ABORT)
    append_txn(log, 9, [b"o0"])
    log.append([SimpleRecord(b"a3")])
    return log


def values_of(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]


# --- pure: executor path ------------------------------------------------------------------------------------


def test_read_task_yields_spark_arrow_batches(tmp_path: Path) -> None:
    expected = write_topic(tmp_path, "orders", 1, batches=40)
    task = ReadTask("orders", 0, str(tmp_path / "orders-0"), 7, 163)
    for headers in (False, True):
        batches = list(read_task(task, include_headers=headers, batch_rows=32))
        assert len(batches) > 2
        assert all(b.schema.equals(arrow_schema(headers)) for b in batches)
        rows = [row for b in batches for row in b.to_pylist()]
        assert [r["offset"] for r in rows] == list(range(7, 163))
        assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {("orders", 0, 0)}
        for row, (key, value, offset, ts, hdrs) in zip(rows, expected[0][7:163]):
            assert (row["key"], row["value"], row["offset"]) == (key, value, offset)
            assert row["timestamp"] == dt.datetime.fromtimestamp(ts / 1000, dt.UTC)
            if headers:
                got = None if row["headers"] is None else [(h["key"], h["value"]) for h in row["headers"]]
                assert got == hdrs
    # Spark's Arrow types exactly (the first batch of a read is compared with Spark's schema)
    assert arrow_schema(True).field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert all(f.nullable for f in arrow_schema(True))


def test_read_task_drops_aborted_transactions(tmp_path: Path) -> None:
    log = write_transactions(tmp_path)
    rl_aborted = ((8, 4, 8),)
    task = ReadTask("txn", 0, str(tmp_path / "txn-0"), 0, 9, rl_aborted)
    assert values_of(list(read_task(task, include_headers=False))) == [b"a0", b"a1", b"c0", b"c1", b"a2"]
    plain = ReadTask("txn", 0, str(tmp_path / "txn-0"), 0, 11)
    assert values_of(list(read_task(plain, include_headers=False))) == [
        b"a0", b"a1", b"c0", b"c1", b"x0", b"a2", b"x1", b"o0", b"a3"
    ]  # fmt: skip
    log.close()


def test_kept_runs() -> None:
    table = np.zeros((K.N_BATCH_FIELDS, 6), np.int64)
    table[K.F_BASE_OFFSET] = [0, 2, 4, 5, 6, 7]
    table[K.F_PRODUCER_ID] = [-1, 8, 8, 9, 8, 8]
    table[K.F_ATTRIBUTES] = [0, K.ATTR_TRANSACTIONAL, K.ATTR_TRANSACTIONAL, K.ATTR_TRANSACTIONAL, 0, 0x30]
    assert _kept_runs(table, [(8, 2, 6)]) == [(0, 1), (3, 6)]  # a control batch of 8 is never cut here
    assert _kept_runs(table, [(8, 100, 200)]) == [(0, 6)]
    assert _kept_runs(table, []) == [(0, 6)]


def test_timestamp_overflow_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "big-0").mkdir()
    batch = MemoryRecords.build([SimpleRecord(b"x", None, 2**62)])  # a Log would reject the timestamp
    (tmp_path / "big-0" / "00000000000000000000.log").write_bytes(batch.to_bytes())
    with pytest.raises(pa.ArrowInvalid, match="overflow"):
        list(read_task(ReadTask("big", 0, str(tmp_path / "big-0"), 0, 1), include_headers=False))


def test_placeholder_partition_reads_nothing(tmp_path: Path) -> None:
    write_topic(tmp_path, "other", 1, batches=1)
    opts = parse_source_options({"path": str(tmp_path), "subscribe": "none"}, streaming=False)
    reader = KafkaLogBatchReader(opts)
    assert reader.partitions() == []
    assert list(reader.read(InputPartition(None))) == []


def test_executor_reports_data_loss(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_topic(tmp_path, "gone", 1, batches=40, segment_bytes=1024)
    directory = tmp_path / "gone-0"
    first = sorted(directory.glob("*.log"))
    for path in first[:2]:
        path.unlink()
    lost_to = int(first[2].name.split(".")[0])
    task = ReadTask("gone", 0, str(directory), 0, 200)
    with pytest.raises(OffsetOutOfRangeError, match="failOnDataLoss"):
        list(read_task(task, include_headers=False))
    batches = list(read_task(task, include_headers=False, fail_on_data_loss=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(lost_to, 200))
    assert "Some data may have been lost" in caplog.text


def test_executor_damage_in_a_rolled_segment(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A rolled segment's torn batch was read as the end of its data: its offsets vanished silently. It is an
    error with failOnDataLoss (the default), a data-loss warning and a skip without."""
    write_topic(tmp_path, "torn", 1, batches=40, segment_bytes=1024)
    directory = tmp_path / "torn-0"
    segments = sorted(directory.glob("*.log"))
    segments[1].write_bytes(segments[1].read_bytes()[:-10])
    next_base = int(segments[2].stem)
    task = ReadTask("torn", 0, str(directory), 0, 200)
    with pytest.raises(CorruptRecordError, match="rolled segment"):
        list(read_task(task, include_headers=False))
    batches = list(read_task(task, include_headers=False, fail_on_data_loss=False))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    torn_from = next_base - 5  # the torn batch held the segment's last 5 offsets
    assert offsets == [o for o in range(200) if not torn_from <= o < next_base]
    assert f"Cannot fetch offsets [{torn_from}, {next_base})" in caplog.text


def test_executor_that_cannot_see_the_data_dir_is_not_data_loss(tmp_path: Path) -> None:
    """On a cluster whose executors do not mount the data directory: its own error, never data loss and
    never zero rows (issue 23 item 2)."""
    task = ReadTask("orders", 0, str(tmp_path / "not-mounted" / "orders-0"), 0, 300)
    for fail in (True, False):
        with pytest.raises(LogDirNotFoundError, match=r"not visible on this executor.*shared filesystem"):
            list(read_task(task, include_headers=False, fail_on_data_loss=fail))


def test_missing_data_dir_is_an_error_not_an_empty_topic(tmp_path: Path) -> None:
    opts = parse_source_options({"path": str(tmp_path / "nope"), "subscribe": "t"}, streaming=False)
    with pytest.raises(LogDirNotFoundError, match="does not exist"):
        plan_batch(opts)
    (tmp_path / "file").write_bytes(b"")
    opts = parse_source_options({"path": str(tmp_path / "file"), "subscribe": "t"}, streaming=False)
    with pytest.raises(LogDirNotFoundError, match="not a directory"):
        plan_batch(opts)


def test_a_path_that_is_not_a_data_dir_is_an_error_not_zero_rows(tmp_path: Path) -> None:
    """A mistyped path that exists (a partition directory, the log dir's parent, an empty directory) is
    LogDirNotFoundError, not an empty read; a log dir without the topic asked for still reads nothing."""
    write_topic(tmp_path / "data", "orders", 1, batches=3)
    for wrong in (tmp_path / "data" / "orders-0", tmp_path, tmp_path / "empty"):
        wrong.mkdir(exist_ok=True)
        opts = parse_source_options({"path": str(wrong), "subscribe": "orders"}, streaming=False)
        with pytest.raises(LogDirNotFoundError, match="is not a kafkalog data directory"):
            plan_batch(opts)
    opts = parse_source_options({"path": str(tmp_path / "data"), "subscribe": "nothing"}, streaming=False)
    assert plan_batch(opts) == []


def test_relative_path_is_resolved_on_the_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Executors resolve a relative path from their own work directory: the plan carries absolute paths."""
    write_topic(tmp_path / "data", "t", 1, batches=3)
    monkeypatch.chdir(tmp_path)
    opts = parse_source_options({"path": "data", "subscribe": "t"}, streaming=False)
    assert opts.paths == (str(tmp_path / "data"),)
    tasks = plan_batch(opts)
    monkeypatch.chdir("/")
    assert [Path(t.directory) for t in tasks] == [tmp_path / "data" / "t-0"]
    assert sum(b.num_rows for t in tasks for b in read_task(t, include_headers=False)) == 15


def test_plan_batch_checks_offsets(tmp_path: Path) -> None:
    write_topic(tmp_path, "t", 2, batches=20, segment_bytes=1024)

    def plan(**options: str) -> list[ReadTask]:
        return plan_batch(
            parse_source_options({"path": str(tmp_path), "subscribe": "t", **options}, streaming=False)
        )

    assert [(t.partition, t.start, t.end) for t in plan()] == [(0, 0, 100), (1, 0, 100)]
    ranges = plan(startingoffsets='{"t": {"0": 95, "1": -2}}', endingoffsets='{"t": {"0": -1, "1": 3}}')
    assert [(t.partition, t.start, t.end) for t in ranges] == [(0, 95, 100), (1, 0, 3)]
    with pytest.raises(OffsetOutOfRangeError, match="Cannot fetch records in"):
        plan(endingoffsets='{"t": {"0": 150, "1": -1}}')
    assert [t.end for t in plan(endingoffsets='{"t": {"0": 150, "1": -1}}', failondataloss="false")] == [
        100,
        100,
    ]
    with pytest.raises(ValueError, match="Beginning offset 120 is after the ending offset 100"):
        plan(startingoffsets='{"t": {"0": 120, "1": 0}}', failondataloss="false")
    for path in sorted((tmp_path / "t-0").glob("*.log"))[:1]:
        path.unlink()
    with pytest.raises(OffsetOutOfRangeError, match="Cannot fetch offset 0"):
        plan(startingoffsets='{"t": {"0": 0, "1": 0}}')
    skipped = plan(startingoffsets='{"t": {"0": 0, "1": 0}}', failondataloss="false")
    assert skipped[0].start > 0
    split = plan(minpartitions="5")
    assert len(split) == 5 and sum(t.end - t.start for t in split) == 200 - split[0].start


def test_auto_registration_module() -> None:
    from pyspark.sql.datasource import DataSource

    import pyspark_kafkalog

    assert issubclass(pyspark_kafkalog.DefaultSource, DataSource)
    assert pyspark_kafkalog.DefaultSource.name() == "kafkalog"


# --- Spark ----------------------------------------------------------------------------------------------------


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.orderBy("topic", "partition", "offset").collect()]


@pytest.mark.spark
def test_spark_batch_read(spark: Any, tmp_path: Path) -> None:
    expected = write_topic(tmp_path, "orders", 2, batches=30)
    df = spark.read.format("kafkalog").option("subscribe", "orders").load(str(tmp_path))
    assert df.schema == spark_schema(False)
    assert df.rdd.getNumPartitions() == 2
    got = rows_of(df)
    assert len(got) == 300
    assert [(r[0], r[1], r[2], r[3], r[4], r[6]) for r in got] == [
        (key, value, "orders", p, offset, 0) for p in (0, 1) for key, value, offset, _, _ in expected[p]
    ]
    assert got[5][5] == dt.datetime.fromtimestamp((TS + 5) / 1000)  # session time zone, naive
    with_headers = spark.read.format("kafkalog").options(
        subscribe="orders", includeHeaders="true", path=str(tmp_path)
    )
    hdf = with_headers.load()
    assert hdf.schema == spark_schema(True)
    headers = [r.headers for r in hdf.where("partition = 0").orderBy("offset").collect()]
    assert [None if h is None else [(x.key, x.value) for x in h] for h in headers] == [
        r[4] for r in expected[0]
    ]


@pytest.mark.spark
def test_spark_read_options(spark: Any, tmp_path: Path) -> None:
    write_topic(tmp_path, "orders", 2, batches=30, segment_bytes=1024)
    write_topic(tmp_path, "other", 1, batches=4)

    def read(**options: str) -> Any:
        return spark.read.format("kafkalog").options(**options).load(str(tmp_path))

    ranged = read(
        subscribe="orders",
        startingOffsets='{"orders": {"0": 95, "1": -2}}',
        endingOffsets='{"orders": {"0": 105, "1": 3}}',
    )
    assert [(r.partition, r.offset) for r in ranged.orderBy("partition", "offset").collect()] == [
        (0, o) for o in range(95, 105)
    ] + [(1, 0), (1, 1), (1, 2)]
    assert read(subscribePattern="o.*").count() == 320
    assert read(subscribePattern="ord").count() == 0
    assert read(subscribe="nothing-here").count() == 0
    assigned = read(assign='{"orders": [1], "other": [0]}')
    assert sorted({(r.topic, r.partition) for r in assigned.collect()}) == [("orders", 1), ("other", 0)]
    by_time = read(subscribe="orders", startingTimestamp=str(TS + 100), endingTimestamp=str(TS + 110))
    assert sorted({r.offset for r in by_time.collect()}) == list(range(100, 110))
    per_partition = read(
        subscribe="orders",
        startingOffsetsByTimestamp=f'{{"orders": {{"0": {TS + 140}, "1": {TS}}}}}',
        endingOffsetsByTimestamp=f'{{"orders": {{"0": {TS + 10**9}, "1": {TS + 2}}}}}',
    )
    assert sorted((r.partition, r.offset) for r in per_partition.collect()) == [
        (0, 140), (0, 141), (0, 142), (0, 143), (0, 144), (0, 145), (0, 146), (0, 147), (0, 148), (0, 149),
        (1, 0), (1, 1),
    ]  # fmt: skip
    split = read(subscribe="orders", minPartitions="6")
    assert split.rdd.getNumPartitions() == 6 and split.count() == 300
    capped = read(subscribe="orders", maxRecordsPerPartition="40")
    assert capped.rdd.getNumPartitions() == 8 and capped.select("offset").distinct().count() == 150
    assert (
        read(subscribe="orders", **{"kafka.group.id": "g", "kafka.bootstrap.servers": "x:1"}).count() == 300
    )


@pytest.mark.spark
def test_spark_read_committed(spark: Any, tmp_path: Path) -> None:
    log = write_transactions(tmp_path)
    base = spark.read.format("kafkalog").option("subscribe", "txn").option("path", str(tmp_path))
    uncommitted = [r.value for r in base.load().orderBy("offset").collect()]
    assert uncommitted == [b"a0", b"a1", b"c0", b"c1", b"x0", b"a2", b"x1", b"o0", b"a3"]
    committed = base.option("kafka.isolation.level", "read_committed").load()
    assert [(r.offset, r.value) for r in committed.orderBy("offset").collect()] == [
        (0, b"a0"), (1, b"a1"), (2, b"c0"), (3, b"c1"), (5, b"a2")
    ]  # fmt: skip
    end_txn(log, 9, ControlRecordType.COMMIT)
    log.close()
    committed = base.option("kafka.isolation.level", "read_committed").load()
    assert [r.value for r in committed.orderBy("offset").collect()] == [
        b"a0",
        b"a1",
        b"c0",
        b"c1",
        b"a2",
        b"o0",
        b"a3",
    ]


@pytest.mark.spark
def test_spark_fail_on_data_loss(spark: Any, tmp_path: Path) -> None:
    log = Log.open(
        tmp_path / "ret-0",
        LogConfig(segment_bytes=1024, retention_bytes=2048, retention_ms=-1, file_delete_delay_ms=0),
    )
    for i in range(100):
        log.append([SimpleRecord(b"v%d" % i, None, TS + i)])
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0
    start = log.log_start_offset
    log.close()
    reader = (
        spark.read.format("kafkalog")
        .option("subscribe", "ret")
        .option("startingOffsets", '{"ret": {"0": 0}}')
    )
    with pytest.raises(Exception, match="failOnDataLoss"):
        reader.load(str(tmp_path)).count()
    offsets = [r.offset for r in reader.option("failOnDataLoss", "false").load(str(tmp_path)).collect()]
    assert sorted(offsets) == list(range(start, 100))


@pytest.mark.spark
def test_spark_missing_data_dir_is_an_error(spark: Any, tmp_path: Path) -> None:
    for fail in ("true", "false"):
        reader = spark.read.format("kafkalog").options(subscribe="t", failOnDataLoss=fail)
        with pytest.raises(Exception, match="LogDirNotFoundError"):
            reader.load(str(tmp_path / "no-such-dir")).count()


@pytest.mark.spark
def test_spark_option_errors(spark: Any, tmp_path: Path) -> None:
    write_topic(tmp_path, "orders", 1, batches=2)
    with pytest.raises(Exception, match=r"auto\.offset\.reset' is not supported"):
        spark.read.format("kafkalog").options(subscribe="orders", **{"kafka.auto.offset.reset": "x"}).load(
            str(tmp_path)
        ).count()
    with pytest.raises(Exception, match="fixed schema and cannot be set with a custom one"):
        spark.read.format("kafkalog").schema("value binary").option("subscribe", "orders").load(
            str(tmp_path)
        ).count()
    with pytest.raises(Exception, match="starting offset can't be latest"):
        spark.read.format("kafkalog").options(subscribe="orders", startingOffsets="latest").load(
            str(tmp_path)
        ).count()
    with pytest.raises(Exception, match="One of the following options must be specified"):
        spark.read.format("kafkalog").load(str(tmp_path)).count()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.spark
@pytest.mark.interop
def test_spark_reads_a_kafka_written_directory(spark: Any, kafka_java: Any, tmp_path: Path) -> None:
    directory = tmp_path / "kafka-0"
    directory.mkdir()
    batches: list[dict[str, Any]] = []
    for i, codec in enumerate(("none", "gzip", "snappy", "lz4", "zstd")):
        recs = [
            {
                "timestamp": TS + 10 * i + j,
                "key": None if j == 0 else _b64(b"k%d" % j),
                "value": _b64(b"%s-%d" % (codec.encode(), j)),
                "headers": [{"key": "h", "value": _b64(b"x")}, {"key": "n", "value": None}] if j == 1 else [],
            }
            for j in range(4)
        ]
        batches.append({"compression": codec, "baseOffset": 4 * i, "records": recs})
    batches.append({"baseOffset": 20, "producerId": 5, "producerEpoch": 0, "baseSequence": 0, "isTransactional": True,
                    "records": [{"timestamp": TS, "value": _b64(b"aborted")}]})  # fmt: skip
    batches.append({"baseOffset": 21, "producerId": 5, "producerEpoch": 0,
                    "control": {"type": "ABORT", "coordinatorEpoch": 0, "timestamp": TS}})  # fmt: skip
    segment = directory / "00000000000000000000.log"
    kafka_java.write({"batches": batches}, segment)
    lines, code = kafka_java.dump(segment, deep=True)
    assert code == 0
    expected = []
    control = False
    for line in lines:
        if line["type"] == "batch":
            control = line["isControlBatch"]
        elif line["type"] == "record" and not control:
            key = None if line["key"] is None else base64.b64decode(line["key"])
            value = None if line["value"] is None else base64.b64decode(line["value"])
            hdrs = [
                (h["key"], None if h["value"] is None else base64.b64decode(h["value"]))
                for h in line["headers"]
            ]
            expected.append((line["offset"], key, value, line["timestamp"], hdrs or None))
    df = spark.read.format("kafkalog").options(subscribe="kafka", includeHeaders="true").load(str(tmp_path))
    got = [
        (
            r.offset,
            r.key,
            r.value,
            round(r.timestamp.timestamp() * 1000),
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in df.orderBy("offset").collect()
    ]
    assert got == expected
    committed = df.sparkSession.read.format("kafkalog").options(
        subscribe="kafka", **{"kafka.isolation.level": "read_committed"}
    )
    assert [r.offset for r in committed.load(str(tmp_path)).orderBy("offset").collect()] == list(range(20))


@pytest.mark.spark
def test_spark_reads_every_log_dir_of_a_log_manager(spark: Any, tmp_path: Path) -> None:
    from kafkalog.manager import LogManager

    dirs = [tmp_path / "d1", tmp_path / "d2"]
    with LogManager.open(dirs, background=False) as mgr:
        mgr.create_topic("events", partitions=4)
        for p in range(4):
            mgr.append(
                "events", p, MemoryRecords.build([SimpleRecord(b"%d-%d" % (p, i)) for i in range(p + 1)])
            )
        df = spark.read.format("kafkalog").option("subscribe", "events").load([str(d) for d in dirs])
        assert sorted((r.partition, r.offset) for r in df.collect()) == [
            (p, o) for p in range(4) for o in range(p + 1)
        ]
