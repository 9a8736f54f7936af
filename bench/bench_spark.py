"""Spark benchmarks: the ``kafkalog`` data source reading and writing Kafka logs in ``local[2]``.

Rows (10,000,000 records of a 16-byte key and a 100-byte value in 4 partitions; ``--quick``: 2,000,000, said
in the row name):

* **batch read** — ``spark.read.format("kafkalog")`` then ``count(*)`` and ``sum(length(value))``, against the
  *ceiling* of the Python Data Source API measured in the same run: a data source whose ``read()`` yields
  pre-built Arrow batches of the same shape and schema with no decoding (what any Python source can at best
  deliver). Target >= 0.8x the ceiling.
* **read vs Parquet** — the same query over the same rows stored as uncompressed Parquet (Spark's own
  vectorised reader), for reference; no target.
* **batch write** — ``df.write.format("kafkalog").mode("append")`` of rows generated in the JVM (keys hashed
  by Kafka's partitioner, staged as record batches on the executors, appended atomically at commit), against
  a Python Arrow writer that only counts the rows it receives (the API's ceiling). Target >= 500k rows/s.
* **filter pushdown** — ``where(timestamp >= T)`` selecting the newest 1% of a topic (same rows and layout,
  timestamps growing with the offsets as a producer's CreateTime does) then ``count(*)``, with
  ``filterPushdown=true`` (and ``spark.sql.python.filterPushdown.enabled``) against the same query without
  it, interleaved. Target >= 5x. Bytes read: ``rchar`` of this process (``/proc/self/io``) while it plans and
  reads every task of the query in-process, pushed down against not: target <= 3%.

Each figure is rows/s over wall time of the whole Spark job (planning, tasks, commit), median of interleaved
runs (``compare``); Spark jobs this long are run 3 times after one warm-up, not the harness's usual 7/11.
The session start and the first query (Python worker start-up) are excluded by the warm-up.

Run standalone: ``python bench/bench_spark.py [--quick]``; the harness imports :func:`run`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # standalone: make ``kafkalog`` (src layout) and the repo importable
    _ROOT = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from bench.harness import Row, Stats, compare, comparison_row, log, rate, single_row

__all__ = ["run"]

AREA = "spark"
FULL_ROWS = 10_000_000
QUICK_ROWS = 2_000_000
PARTITIONS = 4
KEY_BYTES = 16
VALUE_BYTES = 100
SPARK_RUNS = 3
CEILING_FORMAT = "kafkalog-bench-ceiling"
COUNT_FORMAT = "kafkalog-bench-count"
BATCH_ROWS = 32_768
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
TIMED_BASE_MS = 1_700_000_000_000
NEWEST_FRACTION = 0.01

_BATCH_CACHE: dict[int, pa.RecordBatch] = {}


def _prebuilt(partition: int) -> pa.RecordBatch:
    """One Arrow batch of the kafkalog schema (built once per worker process, then reused)."""
    batch = _BATCH_CACHE.get(partition)
    if batch is None:
        from kafkalog.spark.schema import ARROW_TIMESTAMP, arrow_schema

        n = BATCH_ROWS
        keys = pa.array([b"%016d" % (i % 100_000) for i in range(n)], pa.binary())
        values = pa.array([(b"%d" % i).ljust(VALUE_BYTES, b"v") for i in range(n)], pa.binary())
        batch = pa.record_batch(
            [
                keys,
                values,
                pa.array(["bench"] * n, pa.string()),
                pa.array([partition] * n, pa.int32()),
                pa.array(range(n), pa.int64()),
                pa.array([1_700_000_000_000_000 + i * 1000 for i in range(n)], ARROW_TIMESTAMP),
                pa.array([0] * n, pa.int32()),
            ],
            schema=arrow_schema(False),
        )
        _BATCH_CACHE[partition] = batch
    return batch


class _CeilingReader(DataSourceReader):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(p) for p in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        p = int(partition.value)
        left = self.rows // PARTITIONS + (1 if p < self.rows % PARTITIONS else 0)
        batch = _prebuilt(p)
        while left > 0:
            take = min(left, BATCH_ROWS)
            yield batch if take == BATCH_ROWS else batch.slice(0, take)
            left -= take


class CeilingSource(DataSource):
    """Yields pre-built Arrow batches of kafkalog's schema: the Python Data Source API's read ceiling."""

    @classmethod
    def name(cls) -> str:
        return CEILING_FORMAT

    def schema(self) -> Any:
        from kafkalog.spark.schema import spark_schema

        return spark_schema(False)

    def reader(self, schema: Any) -> DataSourceReader:
        return _CeilingReader(int(self.options["rows"]))


class _CountMessage(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _CountingWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _CountMessage(sum(b.num_rows for b in iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        return None


class CountingSource(DataSource):
    """A sink that only counts the Arrow rows it receives: the Python Data Source API's write ceiling."""

    @classmethod
    def name(cls) -> str:
        return COUNT_FORMAT

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return _CountingWriter()


def _session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = Path(__file__).resolve().parents[1]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(root / "src"), str(root), os.environ.get("PYTHONPATH")) if p
    )
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from kafkalog.spark import KafkaLogDataSource

    if __name__ != "__main__":  # workers cannot import the bench package: ship these classes by value
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalog-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for source in (KafkaLogDataSource, CeilingSource, CountingSource):
        spark.dataSource.register(source)
    return spark


def _generated(spark: Any, rows: int) -> Any:
    """``rows`` rows of (16-byte key, 100-byte value) generated in the JVM, 4 tasks."""
    from pyspark.sql import functions as F

    return spark.range(0, rows, numPartitions=PARTITIONS).select(
        F.lpad((F.col("id") % 100_000).cast("string"), KEY_BYTES, "0").cast("binary").alias("key"),
        F.rpad(F.col("id").cast("string"), VALUE_BYTES, "v").cast("binary").alias("value"),
    )


def _aggregate(df: Any, rows: int) -> None:
    from pyspark.sql import functions as F

    count, total = df.agg(F.count("*"), F.sum(F.length("value"))).collect()[0]
    assert count == rows, (count, rows)
    assert total == rows * VALUE_BYTES, (total, rows * VALUE_BYTES)


def _make_topic(data_dir: Path) -> None:
    from kafkalog.manager import LogManager

    with LogManager.open(data_dir, background=False) as mgr:
        mgr.create_topic("bench", PARTITIONS)


def _rchar() -> int:
    """Bytes this process has read with read()/pread() so far (``/proc/self/io``; -1 where there is none)."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return -1
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("rchar:"))


def _bytes_read(data_dir: Path, cutoff_ms: int, pushdown: bool) -> tuple[int, int]:
    """(bytes read, rows) of planning and reading every task of the time-range query in this process."""
    import datetime as dt

    from pyspark.sql.datasource import GreaterThanOrEqual

    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.reader import KafkaLogPushdownReader, batch_reader, read_task

    options = {"path": str(data_dir), "subscribe": "bench", "filterpushdown": str(pushdown).lower()}
    before = _rchar()
    reader = batch_reader(parse_source_options(options, streaming=False))
    if isinstance(reader, KafkaLogPushdownReader):
        since = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=cutoff_ms)
        list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), since)]))
    rows = 0
    for partition in reader.partitions():
        for batch in read_task(partition.task, include_headers=False):  # type: ignore[attr-defined]
            rows += batch.num_rows
    return _rchar() - before, rows


def pushdown_rows(spark: Any, tmp: Path, rows_n: int, label: str) -> list[Row]:
    """The filter pushdown rows (see the module doc) over a topic of ``rows_n`` rows written here."""
    from pyspark.sql import functions as F

    data_dir = tmp / "timed"
    _make_topic(data_dir)
    log(f"{AREA}: writing {label} with growing timestamps")
    spark.range(0, rows_n, numPartitions=PARTITIONS).select(
        F.lpad((F.col("id") % 100_000).cast("string"), KEY_BYTES, "0").cast("binary").alias("key"),
        F.rpad(F.col("id").cast("string"), VALUE_BYTES, "v").cast("binary").alias("value"),
        F.timestamp_millis(F.col("id") + F.lit(TIMED_BASE_MS)).alias("timestamp"),
    ).write.format("kafkalog").option("topic", "bench").mode("append").save(str(data_dir))
    newest = round(rows_n * NEWEST_FRACTION)
    cutoff_ms = TIMED_BASE_MS + rows_n - newest
    since = F.timestamp_millis(F.lit(cutoff_ms))

    def query(pushdown: bool) -> None:
        reader = spark.read.format("kafkalog").option("subscribe", "bench")
        if pushdown:
            reader = reader.option("filterPushdown", "true")
        count = reader.load(str(data_dir)).where(F.col("timestamp") >= since).count()
        assert count == newest, (count, newest)

    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        log(f"{AREA}: newest-1% time-range query over {label}, with and without pushdown")
        result = compare(rate(lambda: query(True), 1), rate(lambda: query(False), 1), runs=SPARK_RUNS)
    finally:
        spark.conf.unset(PUSHDOWN_CONF)
    log(f"{AREA}: bytes read by the time-range query, in-process")
    _bytes_read(data_dir, cutoff_ms, pushdown=True)  # warm-up: the first read loads the numba kernel cache
    pushed_bytes, pushed_rows = _bytes_read(data_dir, cutoff_ms, pushdown=True)
    full_bytes, full_rows = _bytes_read(data_dir, cutoff_ms, pushdown=False)
    topic_bytes = sum(f.stat().st_size for f in data_dir.glob("bench-*/*.log"))
    share = 100.0 * pushed_bytes / full_bytes if full_bytes > 0 else float("nan")
    return [
        comparison_row(
            AREA,
            f"newest-1% time-range query, {label}: where(timestamp >= T).count(), filterPushdown=true",
            "queries/s",
            result,
            "the same query without pushdown (Spark filters every row)",
            target=">= 5x",
            note="each partition's start moved by its time indexes (no record read to plan); Spark re-applies the filter",
        ),
        single_row(
            AREA,
            f"newest-1% time-range query, {label}: bytes read with pushdown, % of those read without",
            "%",
            Stats.of([share]),
            target="<= 3 %",
            note=f"{pushed_bytes / 2**20:.1f} MiB ({pushed_rows:,} rows decoded) vs {full_bytes / 2**20:.1f} MiB "
            f"({full_rows:,} rows); .log files {topic_bytes / 2**20:.1f} MiB; /proc/self/io rchar, planning included",
        ),
    ]


def run(quick: bool, only: str | None = None, rows: int | None = None) -> list[Row]:
    """Measure; rows for the report (``only="pushdown"``: the pushdown rows alone; ``rows``: another size)."""
    rows_n = rows or (QUICK_ROWS if quick else FULL_ROWS)
    label = f"{rows_n / 1e6:g}M rows" + (" (quick)" if quick else "")
    spark = _session()
    out: list[Row] = []
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-bench-spark-"))
    try:
        if only == "pushdown":
            return pushdown_rows(spark, tmp, rows_n, label)
        source = _generated(spark, rows_n)
        written: list[Path] = []

        def write_kafkalog() -> None:
            target = tmp / f"w{len(written)}"
            _make_topic(target)
            source.write.format("kafkalog").option("topic", "bench").mode("append").save(str(target))
            written.append(target)
            if len(written) > 1:  # keep the newest data set only (disk)
                shutil.rmtree(written[-2], ignore_errors=True)

        def write_counting() -> None:
            source.write.format(COUNT_FORMAT).mode("append").save()

        log(f"{AREA}: batch write of {label}")
        result = compare(rate(write_kafkalog, rows_n), rate(write_counting, rows_n), runs=SPARK_RUNS)
        out.append(
            comparison_row(
                AREA,
                f"batch write, {label} (16 B key, 100 B value, murmur2 partitioning, atomic commit)",
                "rows/s",
                result,
                "Python Arrow writer that only counts rows (API ceiling)",
                target=">= 500k rows/s",
                note="JVM-generated rows -> Arrow -> staged v2 batches on 4 tasks -> driver commit into 4 partitions",
            )
        )
        data_dir = written[-1]

        parquet = tmp / "parquet"
        log(f"{AREA}: writing the Parquet copy")
        spark.read.format("kafkalog").option("subscribe", "bench").load(str(data_dir)).write.option(
            "compression", "none"
        ).parquet(str(parquet))

        def read_kafkalog() -> None:
            _aggregate(spark.read.format("kafkalog").option("subscribe", "bench").load(str(data_dir)), rows_n)

        def read_ceiling() -> None:
            _aggregate(spark.read.format(CEILING_FORMAT).option("rows", str(rows_n)).load(), rows_n)

        def read_parquet() -> None:
            _aggregate(spark.read.parquet(str(parquet)), rows_n)

        log(f"{AREA}: batch read of {label}")
        result = compare(rate(read_kafkalog, rows_n), rate(read_ceiling, rows_n), runs=SPARK_RUNS)
        out.append(
            comparison_row(
                AREA,
                f"batch read, {label}: count(*), sum(length(value))",
                "rows/s",
                result,
                "source yielding pre-built Arrow batches, no decoding (API ceiling)",
                target=">= 0.8x",
                note="CRC-checked columnar decode of 4 partitions; both sides yield the same 7 Arrow columns",
            )
        )
        result = compare(rate(read_kafkalog, rows_n), rate(read_parquet, rows_n), runs=SPARK_RUNS)
        out.append(
            comparison_row(
                AREA,
                f"batch read, {label}, vs Spark reading the same rows from Parquet",
                "rows/s",
                result,
                "Spark's Parquet reader, uncompressed, same 7 columns",
                note="reference only: Parquet is decoded in the JVM (vectorised), no Python worker",
            )
        )
        shutil.rmtree(parquet, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        out.extend(pushdown_rows(spark, tmp, rows_n, label))
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone run: print the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["pushdown"], help="run only these rows")
    parser.add_argument("--rows", type=int, help="rows per data set (default 10M, --quick 2M)")
    args = parser.parse_args(argv)
    for row in run(args.quick, args.only, args.rows):
        print(row.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
