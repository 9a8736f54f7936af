"""Filter pushdown of batch reads (``filterPushdown=true`` with ``spark.sql.python.filterPushdown.enabled``).

Pure tests run the reader's plan for a table of filter lists over a real directory (several topics,
partitions and segments, timestamps out of order) and compare, row for row, against a full read filtered
by a row-wise three-valued evaluator: the rows Spark ends with are the same, handled filters hold for every
row returned, and pruning cuts what is read. Spark tests check both states of Spark's conf, SQL predicates
with and without pushdown giving the same rows, and that the plan shrinks.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from kafkalog.log import Log, LogConfig
from kafkalog.records import SimpleRecord
from kafkalog.spark.options import parse_source_options
from kafkalog.spark.pushdown import MAX_OFFSET_RANGES, push_filters
from kafkalog.spark.reader import (
    KafkaLogBatchReader,
    KafkaLogPushdownReader,
    batch_reader,
    plan_batch,
    read_task,
)

TS = 1_700_000_000_000
UTC = dt.UTC


def when(ms: int, extra_us: int = 0) -> dt.datetime:
    """The aware datetime Spark passes for a timestamp literal of ``ms`` (+ ``extra_us``)."""
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=ms, microseconds=extra_us)


def write_data(data_dir: Path) -> None:
    """``orders`` (3 partitions x 120 records, ~6 segments each) and ``audit`` (1 x 40). Timestamps grow by
    1 ms per offset, except every 13th record, which is 500 ms older (out of order)."""
    for topic, partitions, count in (("orders", 3, 120), ("audit", 1, 40)):
        for p in range(partitions):
            log = Log.open(data_dir / f"{topic}-{p}", LogConfig(segment_bytes=1024, index_interval_bytes=64))
            for start in range(0, count, 4):
                log.append(
                    [
                        SimpleRecord(b"v%d" % n, b"k", TS + n - (500 if n % 13 == 0 else 0))
                        for n in range(start, start + 4)
                    ]
                )
            log.close()


COLUMNS = ("topic", "partition", "offset", "timestamp")


def truth(f: Filter, row: dict[str, Any]) -> bool | None:
    """SQL's three-valued value of ``f`` on ``row`` (the oracle: row by row, no ranges)."""
    if isinstance(f, Not):
        inner = truth(f.child, row)
        return None if inner is None else not inner
    v = row[f.attribute[0]]
    if isinstance(f, IsNull):
        return v is None
    if isinstance(f, IsNotNull):
        return v is not None
    if isinstance(f, In):
        if v in [x for x in f.value if x is not None]:
            return True
        return None if None in f.value else False
    lit = f.value
    if isinstance(f, EqualNullSafe):
        return v == lit
    if lit is None:
        return None
    ops = {
        EqualTo: lambda a, b: a == b,
        GreaterThan: lambda a, b: a > b,
        GreaterThanOrEqual: lambda a, b: a >= b,
        LessThan: lambda a, b: a < b,
        LessThanOrEqual: lambda a, b: a <= b,
        StringStartsWith: lambda a, b: a.startswith(b),
        StringEndsWith: lambda a, b: a.endswith(b),
        StringContains: lambda a, b: b in a,
    }
    return bool(ops[type(f)](v, lit))


def read_rows(
    data_dir: Path, pushed_filters: list[Filter] | None, **options: str
) -> tuple[list[dict[str, Any]], list[Filter]]:
    """Rows a read returns (with the filters pushed, or none), and the filters left to Spark."""
    opts = parse_source_options(
        {"path": str(data_dir), "subscribepattern": ".*", "filterpushdown": "true", **options},
        streaming=False,
    )
    reader = batch_reader(opts)
    assert isinstance(reader, KafkaLogPushdownReader)
    rest = list(pushed_filters or [])
    if pushed_filters is not None:
        rest = list(reader.pushFilters(list(pushed_filters)))
    rows = []
    for task in plan_batch(opts, pushed=reader.pushed):
        for batch in read_task(task, include_headers=False):
            for row in batch.select(["key", "offset", "timestamp", "timestampType"]).to_pylist():
                rows.append({"topic": task.topic, "partition": task.partition, **row})
    return rows, rest


def key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["topic"], row["partition"], row["offset"])


T = lambda ms, us=0: when(TS + ms, us)  # noqa: E731
CASES: list[list[Filter]] = [
    [EqualTo(("partition",), 1)],
    [EqualNullSafe(("partition",), 2), GreaterThanOrEqual(("offset",), 37)],
    [EqualNullSafe(("partition",), None)],
    [Not(EqualNullSafe(("partition",), None))],
    [EqualTo(("partition",), None)],
    [Not(EqualTo(("partition",), None))],
    [In(("partition",), (0, 2)), LessThan(("offset",), 10)],
    [In(("partition",), (0, None))],
    [Not(In(("partition",), (0, None)))],
    [Not(In(("partition",), (0, 1))), IsNotNull(("partition",))],
    [IsNull(("offset",))],
    [Not(IsNull(("topic",))), EqualTo(("topic",), "audit")],
    [GreaterThan(("topic",), "audit"), LessThanOrEqual(("offset",), 0)],
    [StringStartsWith(("topic",), "ord"), StringEndsWith(("topic",), "ers"), EqualTo(("offset",), 119)],
    [StringContains(("topic",), "udi"), Not(StringStartsWith(("topic",), "x"))],
    [Not(EqualTo(("topic",), "orders")), GreaterThan(("offset",), 38)],
    [EqualTo(("offset",), 0)],
    [EqualTo(("offset",), 120)],
    [GreaterThan(("offset",), -1), LessThan(("offset",), 1)],
    [GreaterThanOrEqual(("offset",), 1 << 62), LessThan(("offset",), -(1 << 62))],
    [Not(EqualTo(("offset",), 5)), LessThan(("offset",), 8)],
    [In(("offset",), (3, 4, 5, 60, 119, 500)), Not(In(("offset",), (4,)))],
    [Not(In(("offset",), (1, None)))],
    [In(("offset",), tuple(range(0, 2 * MAX_OFFSET_RANGES + 10, 2)))],  # too many ranges: hull only
    [Not(LessThan(("offset",), 100)), Not(Not(LessThanOrEqual(("offset",), 105)))],
    [EqualNullSafe(("offset",), 77), EqualNullSafe(("offset",), None)],
    [GreaterThanOrEqual(("timestamp",), T(100))],
    [GreaterThanOrEqual(("timestamp",), T(100, 1))],
    [GreaterThan(("timestamp",), T(100)), GreaterThan(("timestamp",), T(99, 999))],
    [EqualTo(("timestamp",), T(110)), EqualTo(("partition",), 0)],
    [EqualTo(("timestamp",), T(110, 500))],
    [EqualNullSafe(("timestamp",), T(60))],
    [In(("timestamp",), (T(115), T(119), None))],
    [Not(LessThan(("timestamp",), T(117)))],
    [Not(LessThanOrEqual(("timestamp",), T(117)))],
    [GreaterThanOrEqual(("timestamp",), T(10_000))],
    [GreaterThanOrEqual(("timestamp",), T(-10_000)), LessThan(("timestamp",), T(20))],
    [Not(GreaterThanOrEqual(("timestamp",), T(50)))],
    [GreaterThanOrEqual(("timestamp",), T(78)), In(("offset",), (77, 78, 79)), EqualTo(("partition",), 1)],
    [EqualTo(("key",), b"k"), EqualTo(("timestampType",), 0), EqualTo(("offset",), 3)],
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pushdown")
    write_data(path)
    return path


@pytest.fixture(scope="module")
def full(data_dir: Path) -> list[dict[str, Any]]:
    return read_rows(data_dir, None)[0]


@pytest.mark.parametrize("split", [{}, {"minpartitions": "9"}], ids=["plain", "minPartitions"])
@pytest.mark.parametrize("filters", CASES, ids=[repr(c)[:80] for c in CASES])
def test_pushdown_returns_the_same_rows(
    data_dir: Path, full: list[dict[str, Any]], filters: list[Filter], split: dict[str, str]
) -> None:
    rows, rest = read_rows(data_dir, filters, **split)
    assert all(any(r is f for f in filters) for r in rest)  # the same objects, never new ones
    handled = [f for f in filters if not any(r is f for r in rest)]
    for row in rows:  # exact: no row failing a handled filter comes back
        assert all(truth(f, row) is True for f in handled), (row, handled)
    expected = [key(r) for r in full if all(truth(f, r) is True for f in filters)]
    got = [key(r) for r in rows if all(truth(f, r) is True for f in rest)]
    assert sorted(got) == sorted(expected)


def test_what_is_handled_and_what_prunes(data_dir: Path, full: list[dict[str, Any]]) -> None:
    handled_cols = [
        EqualTo(("topic",), "orders"),
        In(("partition",), (1,)),
        GreaterThanOrEqual(("offset",), 50),
        Not(EqualTo(("offset",), 60)),
    ]
    kept = [GreaterThanOrEqual(("timestamp",), T(100)), EqualTo(("key",), b"k"), EqualTo(("topic",), 5)]
    pushed, rest = push_filters([*handled_cols, *kept])
    assert rest == kept and all(a is b for a, b in zip(rest, kept))
    assert pushed.min_timestamp_ms == TS + 100
    rows, _ = read_rows(data_dir, [GreaterThanOrEqual(("timestamp",), T(100))])
    starts = {key(r)[:2]: min(x["offset"] for x in rows if key(x)[:2] == key(r)[:2]) for r in rows}
    # the first record with ts >= TS+100 is offset 100 in each orders partition: the time index starts the
    # read one entry before it; audit-0's active segment may still hold newer records past its last entry
    assert starts == {("orders", 0): 99, ("orders", 1): 99, ("orders", 2): 99, ("audit", 0): 39}
    for r in full:  # nothing pruned could pass
        if r["offset"] < starts.get(key(r)[:2], 1 << 62):
            assert r["timestamp"] < T(100)
    rows, _ = read_rows(data_dir, handled_cols)
    assert sorted({key(r)[:2] for r in rows}) == [("orders", 1)]
    assert [r["offset"] for r in rows] == [o for o in range(50, 120) if o != 60]
    # a long IN only prunes by its hull, and stays with Spark
    many = In(("offset",), tuple(range(10, 10 + 2 * (MAX_OFFSET_RANGES + 1), 2)))
    pushed, rest = push_filters([many])
    assert rest == [many] and pushed.offsets == ((10, 10 + 2 * MAX_OFFSET_RANGES + 1),)


def test_plan_prunes_segments(data_dir: Path) -> None:
    opts = parse_source_options(
        {"path": str(data_dir), "subscribe": "orders", "filterpushdown": "true"}, streaming=False
    )
    reader = batch_reader(opts)
    assert isinstance(reader, KafkaLogPushdownReader)
    list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), T(117)), EqualTo(("partition",), 2)]))
    tasks = [p.task for p in reader.partitions()]  # type: ignore[attr-defined]
    assert [(t.topic, t.partition, t.start, t.end) for t in tasks] == [("orders", 2, 115, 120)]  # index entry
    assert reader.pushFilters([EqualTo(("partition",), 7)]) == []
    assert reader.partitions() == []
    # an offset set is read by one task per partition, which reads only its pieces
    list(reader.pushFilters([In(("offset",), (3, 4, 60, 119)), EqualTo(("partition",), 1)]))
    tasks = [p.task for p in reader.partitions()]  # type: ignore[attr-defined]
    assert [(t.partition, t.start, t.end, t.pieces) for t in tasks] == [
        (1, 3, 120, ((3, 5), (60, 61), (119, 120)))
    ]
    batches = list(read_task(tasks[0], include_headers=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [3, 4, 60, 119]


def test_offset_hint_for_timestamp_is_never_past_the_first_match(data_dir: Path) -> None:
    from kafkalog.readonly.log import ReadOnlyDataDir

    for topic, partition in (("orders", 0), ("audit", 0)):
        log = ReadOnlyDataDir(data_dir).log(topic, partition)
        for ts in range(TS - 600, TS + 130, 7):
            hint = log.offset_hint_for_timestamp(ts)
            found = log.offset_for_timestamp(ts)
            assert hint <= (log.log_end_offset if found is None else found), ts
        assert log.offset_hint_for_timestamp(TS + 10_000) >= log.log_end_offset - 4  # only the last batch


def test_without_the_option_the_reader_does_not_override_push_filters(data_dir: Path) -> None:
    from pyspark.sql.datasource import DataSourceReader

    opts = parse_source_options({"path": str(data_dir), "subscribe": "orders"}, streaming=False)
    reader = batch_reader(opts)
    assert type(reader) is KafkaLogBatchReader
    # PySpark's own test (plan_data_source_read.py): overriding pushFilters with the conf off fails every read
    assert reader.pushFilters.__func__ is DataSourceReader.pushFilters  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="filterPushdown"):
        parse_source_options(
            {"path": str(data_dir), "subscribe": "orders", "filterpushdown": "yes"}, streaming=False
        )
    assert not parse_source_options(
        {"path": str(data_dir), "subscribe": "orders", "filterpushdown": "true"}, streaming=True
    ).filter_pushdown


# --- Spark ----------------------------------------------------------------------------------------------------

CONF = "spark.sql.python.filterPushdown.enabled"
SQL_PREDICATES = [
    "partition <=> 2 AND offset >= 37",
    "partition IN (0, 2) AND offset < 10",
    "NOT (partition <=> NULL) AND offset = 119",
    "topic LIKE 'ord%' AND offset BETWEEN 30 AND 33",
    "topic > 'audit' AND offset <= 0",
    "offset IN (3, 4, 60, 119, 500) AND offset <> 4",
    "offset NOT IN (1, 2) AND offset < 5",
    "timestamp > TIMESTAMP_MICROS(({ts} + 99) * 1000 + 999)",
    "NOT timestamp < TIMESTAMP_MILLIS({ts} + 117) AND partition = 0",
    "timestamp IN (TIMESTAMP_MILLIS({ts} + 115), TIMESTAMP_MILLIS({ts} + 119))",
    "key = X'6B' AND offset = 3",
]


def spark_df(spark: Any, data_dir: Path, where: str, pushdown: bool) -> Any:
    reader = spark.read.format("kafkalog").option("subscribePattern", ".*")
    if pushdown:
        reader = reader.option("filterPushdown", "true")
    return reader.load(str(data_dir)).where(where.format(ts=TS))


def spark_rows(spark: Any, data_dir: Path, where: str, pushdown: bool) -> list[tuple[Any, ...]]:
    df = spark_df(spark, data_dir, where, pushdown)
    return sorted(tuple(r) for r in df.select("topic", "partition", "offset", "timestamp").collect())


@pytest.mark.spark
def test_spark_pushdown_prunes_the_plan(spark: Any, data_dir: Path) -> None:
    spark.conf.set(CONF, "true")
    try:
        assert spark_df(spark, data_dir, "offset >= 0", pushdown=False).rdd.getNumPartitions() == 4
        one = spark_df(spark, data_dir, "partition = 1 AND topic = 'orders' AND offset < 3", pushdown=True)
        assert one.rdd.getNumPartitions() == 1  # one input partition per Kafka partition read
        assert [(r.partition, r.offset) for r in one.orderBy("offset").collect()] == [(1, 0), (1, 1), (1, 2)]
        newest = spark_df(spark, data_dir, "timestamp >= TIMESTAMP_MILLIS({ts} + 118)", pushdown=True)
        assert sorted(r.offset for r in newest.collect()) == [118, 118, 118, 119, 119, 119]
    finally:
        spark.conf.unset(CONF)


@pytest.mark.spark
@pytest.mark.slow
def test_spark_pushdown_same_rows(spark: Any, data_dir: Path) -> None:
    spark.conf.set(CONF, "true")
    try:
        for where in SQL_PREDICATES:
            assert spark_rows(spark, data_dir, where, True) == spark_rows(spark, data_dir, where, False), (
                where
            )
    finally:
        spark.conf.unset(CONF)


@pytest.mark.spark
def test_spark_pushdown_conf_off(spark: Any, data_dir: Path) -> None:
    spark.conf.set(CONF, "false")
    try:
        rows = spark_rows(spark, data_dir, "partition = 1 AND offset < 3", pushdown=False)
        assert [r[1:3] for r in rows] == [(1, 0), (1, 1), (1, 2)]
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            spark_rows(spark, data_dir, "partition = 1", pushdown=True)
    finally:
        spark.conf.unset(CONF)
