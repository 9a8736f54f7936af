"""The main job behind ``make demo``: kafkalog as a Kafka-compatible store feeding a Spark pipeline.

Steps (each timed, summarised in a table at the end):

1. **produce** — create a data directory (``--data-dir``, default ``./demo-data``) with a topic ``events``
   (``--partitions``, default 4; lz4) and write ``--events`` (default 1,000,000) synthetic shop events through
   the kafkalog API (:class:`~kafkalog.manager.LogManager`): key = user id, value = compact JSON
   ``{"user": ..., "type": "view|click|cart|purchase", "amount": ...}``, CreateTime timestamps over the last
   hour, placed by Kafka's default partitioner (murmur2 of the key);
2. **batch** — Spark reads ``events`` (``format("kafkalog")``), aggregates per user (events, purchases,
   amount spent, first/last seen) and writes one record per user to the topic ``user-stats``
   (``df.write.format("kafkalog")``, created by the sink);
3. **append** — ``--more-events`` (default a tenth of ``--events``) new events are appended by the LogManager;
4. **stream** — a streaming query (``Trigger.AvailableNow``) starting at the offsets where step 3 began reads
   only the new events, keeps the purchases and writes them to the topic ``purchases``
   (``writeStream.format("kafkalog")``, exactly once per micro-batch);
5. every result is checked against what was generated (the exit status is 1 on a mismatch): the record
   counts of each topic, and every user's aggregate in ``user-stats`` (events, purchases, amount spent,
   first and last seen) against the same totals computed in plain Python from the generated events
   (:func:`check_user_stats`).

The data directory is a plain Kafka ``log.dirs`` entry (``events-0/00000000000000000000.log`` ...): it can be
read by ``kafkalog dump`` or copied under a Kafka broker. A directory that is neither empty nor an earlier demo
run (marker file ``.kafkalog-demo``) is refused; an earlier demo run is replaced. ``--keep`` keeps an existing
demo directory's data and adds to it.

Running elsewhere:

* a real directory: ``python -m kafkalog.demo --data-dir /data/kafkalog-demo --events 5000000``;
* a Spark cluster: ``python -m kafkalog.demo --master spark://host:7077 --data-dir /shared/kafkalog-demo``.
  The data directory must be visible **at the same path** on the driver and on every executor (a shared
  filesystem: NFS, a mounted volume), because the planner lists partitions on the driver, executors read
  segment files and stage record batches there, and the driver appends the staged batches at commit.
  kafkalog (with its ``spark`` extra) must be installed in the executors' Python environment
  (``PYSPARK_PYTHON``), since Spark imports the data source classes by reference. Only one process may write
  a data directory at a time (``.lock``): the demo closes its LogManager before every Spark write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kafkalog.manager import LogManager
from kafkalog.partitioner import partition_for_key
from kafkalog.records import Compression, MemoryRecords, SimpleRecord

__all__ = ["EventGenerator", "Expected", "UserTotals", "check_user_stats", "main"]

MARKER = ".kafkalog-demo"
EVENTS, STATS, PURCHASES = "events", "user-stats", "purchases"
TYPES = (b"view", b"click", b"cart", b"purchase")
TYPE_WEIGHTS = (0.55, 0.25, 0.12, 0.08)
CHUNK = 50_000


@dataclass
class UserTotals:
    """One user's aggregate, computed in plain Python from the generated events (not by Spark)."""

    events: int = 0
    purchases: int = 0
    spent_cents: int = 0
    first_seen: int = 2**63 - 1
    last_seen: int = -(2**63)


@dataclass
class Expected:
    """What the generator produced, to check the pipeline's results against."""

    per_user: dict[int, UserTotals] = field(default_factory=dict)
    purchases: int = 0
    spent_cents: int = 0

    def add(self, users: np.ndarray, types: np.ndarray, cents: np.ndarray, ts: np.ndarray) -> None:
        """Count one chunk of events (event ``i`` is ``users[i], types[i], cents[i], ts[i]``)."""
        for u, t, c, t_ms in zip(users.tolist(), types.tolist(), cents.tolist(), ts.tolist(), strict=True):
            totals = self.per_user.get(u)
            if totals is None:
                totals = self.per_user[u] = UserTotals()
            totals.events += 1
            totals.purchases += int(t == 3)
            totals.spent_cents += c
            totals.first_seen = min(totals.first_seen, t_ms)
            totals.last_seen = max(totals.last_seen, t_ms)
            self.purchases += int(t == 3)
            self.spent_cents += c


def _iso_ms(text: str) -> int:
    """Milliseconds since the epoch of a Spark ``to_json`` timestamp (``2026-11-27T08:00:00.123Z`` or ``+01:00``)."""
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def check_user_stats(rows: dict[str, dict[str, Any]], expected: Expected) -> list[str]:
    """Every ``user-stats`` record against the independent per-user totals; returns the mismatches (empty: all
    agree). ``rows`` maps the record key (user id) to its JSON value as Spark wrote it."""
    problems: list[str] = []
    want_users = {f"u{u:06d}": totals for u, totals in expected.per_user.items()}
    for user in sorted(want_users.keys() - rows.keys())[:5]:
        problems.append(f"{user}: no aggregate written")
    for user in sorted(rows.keys() - want_users.keys())[:5]:
        problems.append(f"{user}: aggregate for a user with no events")
    for user in sorted(want_users.keys() & rows.keys()):
        want, got = want_users[user], rows[user]
        try:
            seen = (_iso_ms(got["first_seen"]), _iso_ms(got["last_seen"]))
            actual = (int(got["events"]), int(got["purchases"]), round(float(got["spent"]) * 100), *seen)
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{user}: unreadable aggregate {got!r} ({exc})")
            continue
        wanted = (want.events, want.purchases, want.spent_cents, want.first_seen, want.last_seen)
        if actual != wanted:
            problems.append(f"{user}: (events, purchases, cents, first, last) {actual} != {wanted}")
    return problems


class EventGenerator:
    """Deterministic synthetic shop events (skewed users), as Kafka batches per partition."""

    def __init__(self, users: int, partitions: int, seed: int = 7) -> None:
        self.users = users
        self.rng = np.random.default_rng(seed)
        self.keys = [b"u%06d" % u for u in range(users)]
        self.user_partition = np.array([partition_for_key(k, partitions) for k in self.keys], dtype=np.int32)
        self.partitions = partitions

    def chunk(
        self, n: int, start_ts: int, span_ms: int, expected: Expected
    ) -> Iterator[tuple[int, list[SimpleRecord]]]:
        """``n`` events with timestamps spread over ``[start_ts, start_ts + span_ms)``, grouped per partition."""
        users = (self.rng.pareto(1.3, n) * self.users / 20).astype(np.int64) % self.users
        types = self.rng.choice(4, size=n, p=TYPE_WEIGHTS)
        cents = np.where(types == 3, self.rng.integers(99, 25_000, n), 0)
        ts = np.sort(start_ts + self.rng.integers(0, span_ms, n))
        expected.add(users, types, cents, ts)
        parts = self.user_partition[users]
        for p in range(self.partitions):
            idx = np.flatnonzero(parts == p).tolist()
            records = [
                SimpleRecord(
                    value=b'{"user":"%s","type":"%s","amount":%d.%02d}'
                    % (self.keys[u], TYPES[t], c // 100, c % 100),
                    key=self.keys[u],
                    timestamp=int(t_ms),
                )
                for u, t, c, t_ms in zip(
                    users[idx].tolist(), types[idx].tolist(), cents[idx].tolist(), ts[idx].tolist()
                )
            ]
            if records:
                yield p, records


@dataclass
class Phase:
    """One timed step of the demo."""

    name: str
    what: str
    records: int
    seconds: float


def _prepare_dir(data_dir: Path, keep: bool, console: Console) -> None:
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / MARKER).exists():
            raise SystemExit(
                f"{data_dir} is not empty and was not made by the demo; choose another --data-dir"
            )
        if not keep:
            console.print(f"[dim]replacing the previous demo run in {data_dir}[/dim]")
            shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER).write_text("made by python -m kafkalog.demo; safe to delete\n")


def produce(
    data_dir: Path,
    gen: EventGenerator,
    total: int,
    start_ts: int,
    span_ms: int,
    expected: Expected,
    console: Console,
    label: str,
) -> dict[int, int]:
    """Append ``total`` events to ``events`` through a LogManager; returns the end offsets before appending."""
    with LogManager.open(data_dir, background=False) as mgr:
        if EVENTS not in mgr.topics():
            mgr.create_topic(EVENTS, gen.partitions, {"compression.type": "lz4"})
        before = {p: mgr.get_log(EVENTS, p).log_end_offset for p in range(gen.partitions)}
        columns = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
        ]
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task(label, total=total, rate="")
            t0 = time.perf_counter()
            done = 0
            while done < total:
                n = min(CHUNK, total - done)
                span = max(1, span_ms * n // total)
                chunk_start = start_ts + span_ms * done // total
                for p, records in gen.chunk(n, chunk_start, span, expected):
                    mgr.append(EVENTS, p, MemoryRecords.build(records, compression=Compression.LZ4))
                done += n
                rate = done / max(time.perf_counter() - t0, 1e-9)
                progress.update(task, completed=done, rate=f"{rate:,.0f} events/s")
        mgr.flush()
    return before


@contextmanager
def spark_session(master: str, partitions: int) -> Iterator[Any]:
    """A SparkSession with the kafkalog data source registered (stopped on exit)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    src = str(Path(__file__).resolve().parents[1])
    if src not in os.environ.get("PYTHONPATH", "").split(os.pathsep):  # a source checkout without install
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    from kafkalog.spark import KafkaLogDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("kafkalog-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaLogDataSource)
    try:
        yield spark
    finally:
        spark.stop()


def batch_pipeline(spark: Any, data_dir: Path, partitions: int) -> None:
    """events -> per-user aggregates -> topic user-stats (one record per user)."""
    from pyspark.sql import functions as F

    events = spark.read.format("kafkalog").option("subscribe", EVENTS).load(str(data_dir))
    parsed = events.select(
        F.col("key").cast("string").alias("user"),
        F.from_json(F.col("value").cast("string"), "type string, amount double").alias("e"),
        "timestamp",
    )
    stats = parsed.groupBy("user").agg(
        F.count("*").alias("events"),
        F.sum(F.when(F.col("e.type") == "purchase", 1).otherwise(0)).alias("purchases"),
        F.round(F.sum("e.amount"), 2).alias("spent"),
        F.min("timestamp").alias("first_seen"),
        F.max("timestamp").alias("last_seen"),
    )
    out = stats.select(
        F.col("user").alias("key"),
        F.to_json(F.struct("events", "purchases", "spent", "first_seen", "last_seen")).alias("value"),
    )
    (
        out.write.format("kafkalog")
        .option("topic", STATS)
        .option("createTopics", "true")
        .option("createTopics.partitions", str(partitions))
        .mode("append")
        .save(str(data_dir))
    )


def stream_pipeline(spark: Any, data_dir: Path, start: dict[int, int], partitions: int) -> int:
    """New events (from ``start``) -> purchases only -> topic purchases, Trigger.AvailableNow."""
    from pyspark.sql import functions as F

    offsets = json.dumps({EVENTS: {str(p): o for p, o in sorted(start.items())}})
    stream = (
        spark.readStream.format("kafkalog")
        .option("subscribe", EVENTS)
        .option("startingOffsets", offsets)
        .option("maxOffsetsPerTrigger", "200000")
        .load(str(data_dir))
    )
    purchases = stream.where(F.get_json_object(F.col("value").cast("string"), "$.type") == "purchase").select(
        "key", "value", "timestamp"
    )
    query = (
        purchases.writeStream.format("kafkalog")
        .option("path", str(data_dir))
        .option("topic", PURCHASES)
        .option("createTopics", "true")
        .option("createTopics.partitions", str(partitions))
        .option("checkpointLocation", str(data_dir / ".demo-checkpoints" / PURCHASES))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def _topic_table(data_dir: Path) -> tuple[Table, dict[str, int]]:
    table = Table(title="topics in " + str(data_dir))
    for col in ("topic", "partitions", "records", "bytes on disk", "codec"):
        table.add_column(col, justify="right" if col != "topic" else "left")
    counts: dict[str, int] = {}
    with LogManager.open(data_dir, background=False) as mgr:
        for topic in mgr.topics():
            logs = [mgr.get_log(topic, p) for p in mgr.partitions(topic)]
            counts[topic] = sum(log.log_end_offset - log.log_start_offset for log in logs)
            size = sum(log.size for log in logs)
            firsts = (next(iter(seg.log.batches()), None) for log in logs for seg in log.segments)
            codecs = {b.compression.kafka_name for b in firsts if b is not None}
            table.add_row(topic, str(len(logs)), f"{counts[topic]:,}", f"{size:,}", ",".join(sorted(codecs)))
    return table, counts


def _user_stats(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Every record of ``user-stats``: user id -> its JSON aggregate (a user written twice: the last one)."""
    rows: dict[str, dict[str, Any]] = {}
    with LogManager.open(data_dir, background=False) as mgr:
        for p in mgr.partitions(STATS):
            for rec in mgr.read(STATS, p, 0, 1 << 30):
                rows[(rec.key or b"").decode()] = json.loads(rec.value or b"{}")
    return rows


def _top_users(rows: dict[str, dict[str, Any]], n: int = 5) -> list[tuple[str, dict[str, Any]]]:
    return sorted(rows.items(), key=lambda r: -float(r[1].get("spent") or 0))[:n]


def _timed(phases: list[Phase], name: str, what: str, fn: Callable[[], int]) -> int:
    t0 = time.perf_counter()
    records = fn()
    phases.append(Phase(name, what, records, time.perf_counter() - t0))
    return records


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m kafkalog.demo",
        description="kafkalog end to end: produce events, Spark batch aggregation, streaming append.",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path("demo-data"), help="data directory (./demo-data)"
    )
    parser.add_argument("--events", type=int, default=1_000_000, help="events to produce first (1,000,000)")
    parser.add_argument("--more-events", type=int, default=None, help="events appended before streaming")
    parser.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    parser.add_argument("--users", type=int, default=20_000, help="distinct users (20,000)")
    parser.add_argument("--master", default="local[2]", help="Spark master URL (local[2])")
    parser.add_argument("--keep", action="store_true", help="add to an earlier demo run's data")
    args = parser.parse_args(argv)
    if args.events <= 0 or args.partitions <= 0 or args.users <= 0:
        parser.error("--events, --partitions and --users must be positive")
    if args.more_events is None:
        args.more_events = max(1, args.events // 10)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    args = parse_args(argv)
    console = Console()
    data_dir: Path = args.data_dir.resolve()
    _prepare_dir(data_dir, args.keep, console)
    console.rule("[bold]kafkalog demo")
    console.print(f"data directory: {data_dir}\nSpark master: {args.master}")
    started = time.perf_counter()
    phases: list[Phase] = []
    expected, more_expected = Expected(), Expected()
    gen = EventGenerator(args.users, args.partitions)
    now = int(time.time() * 1000)

    def produce_first() -> int:  # the first events cover 50 minutes, the later ones the last 10
        produce(data_dir, gen, args.events, now - 3_600_000, 3_000_000, expected, console, "produce events")
        return int(args.events)

    _timed(phases, "produce", f"{EVENTS}: LogManager appends, lz4", produce_first)

    ok = True
    t0 = time.perf_counter()
    with spark_session(args.master, args.partitions) as spark:
        phases.append(Phase("spark", f"start a {args.master} session", 0, time.perf_counter() - t0))

        def batch() -> int:
            batch_pipeline(spark, data_dir, args.partitions)
            return int(args.events)

        _timed(phases, "batch", f"read {EVENTS}, aggregate per user, write {STATS}", batch)
        start: dict[int, int] = {}

        def append_more() -> int:
            before = produce(
                data_dir, gen, args.more_events, now - 600_000, 590_000, more_expected, console, "append more"
            )
            start.update(before)
            return int(args.more_events)

        _timed(phases, "append", f"{EVENTS}: more events while no query runs", append_more)
        streamed = 0

        def stream() -> int:
            nonlocal streamed
            streamed = stream_pipeline(spark, data_dir, start, args.partitions)
            return streamed

        _timed(phases, "stream", f"new {EVENTS} -> {PURCHASES} (AvailableNow)", stream)
    total = time.perf_counter() - started

    topics, counts = _topic_table(data_dir)
    stats_rows = _user_stats(data_dir)
    # events, purchases, amount spent, first and last seen of every user, recomputed from the generated events
    user_problems = [] if args.keep else check_user_stats(stats_rows, expected)
    checks = [
        (
            "events in the log",
            counts.get(EVENTS, 0),
            args.events + args.more_events if not args.keep else None,
        ),
        ("users aggregated", counts.get(STATS, 0), len(expected.per_user) if not args.keep else None),
        (
            "per-user aggregates equal to a plain-Python count",
            len(expected.per_user) - len(user_problems) if not args.keep else 0,
            len(expected.per_user) if not args.keep else None,
        ),
        ("new events streamed", streamed, args.more_events),
        ("purchases written", counts.get(PURCHASES, 0), more_expected.purchases if not args.keep else None),
    ]
    summary = Table(title="kafkalog demo: timings")
    for col in ("step", "what", "records", "seconds", "records/s"):
        summary.add_column(col, justify="left" if col in ("step", "what") else "right")
    for ph in phases:
        per_second = f"{ph.records / ph.seconds:,.0f}" if ph.records else ""
        summary.add_row(
            ph.name, ph.what, f"{ph.records:,}" if ph.records else "", f"{ph.seconds:.1f}", per_second
        )
    summary.add_row("total", "everything above", "", f"{total:.1f}", "")
    console.print(summary)
    console.print(topics)
    check_table = Table(title="checks")
    for col in ("check", "got", "expected", ""):
        check_table.add_column(col)
    for name, got, want in checks:
        good = want is None or got == want
        ok &= good
        check_table.add_row(
            name, f"{got:,}", "-" if want is None else f"{want:,}", "ok" if good else "MISMATCH"
        )
    console.print(check_table)
    for problem in user_problems[:10]:
        console.print(f"[red]user-stats mismatch[/] {problem}")
    top = Table(title=f"top users by amount spent ({STATS})")
    for col in ("user", "events", "purchases", "spent"):
        top.add_column(col, justify="right" if col != "user" else "left")
    for user, stats in _top_users(stats_rows):
        top.add_row(user, str(stats.get("events")), str(stats.get("purchases")), f"{stats.get('spent'):,}")
    console.print(top)
    console.print(
        f"[bold {'green' if ok else 'red'}]{'all checks passed' if ok else 'CHECKS FAILED'}[/] — "
        f"data in {data_dir} (try: kafkalog dump {data_dir / (EVENTS + '-0')}/00000000000000000000.log)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
