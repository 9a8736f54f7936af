"""Object storage (issue #24): the ``kafkalog`` source reading Kafka tiered-storage archives from a real S3
server (SeaweedFS on loopback, started here by :mod:`bench.seaweed`), in ``local[2]``.

Data: one topic of 4 partitions, ~1 GiB of records (16-byte key, 100-byte value, CreateTime growing with the
offset; ``--quick``: ~120 MiB, said in the row names) appended through the ``LogManager`` into 32 MiB
segments (``--quick``: 4 MiB), then uploaded as the Aiven plugin does (``kafkalog.tiered.writer``), every
segment the active one included: once uncompressed (fixed chunk index) and once zstd-chunked (variable
chunk index). 4 MiB chunks, the plugin's recommended size.

Rows:

* **archive read** — ``spark.read.format("kafkalog").load("s3://bucket/prefix")`` then ``count(*)`` and
  ``sum(length(value))``, against the lower of two ceilings measured in the same round: the *transfer
  ceiling* (obstore's own ``get_async`` of the same objects, 32 at a time, configured as kafkalog configures
  its store) and the *Python data source ceiling* (``bench.bench_spark``'s source yielding pre-built Arrow
  batches of the same number of rows and the same schema). Target >= 0.8x. Reference rows give the ratio
  to each ceiling alone and to reading the same rows from the local data directory. The zstd archive gets
  the same row.
* **planning** — the Spark driver's plan (``batch_reader(...).partitions()``: listing, manifests, the newest
  epoch blob per partition; no data) of an archive of 10,000 segments (``--quick``: 2,000) of 10 records each
  in 4 partitions. Target < 10 s; the GET and LIST counts are counted at the seam (``StoreStats``). Against
  the server's own small-GET ceiling, interleaved: obstore's ``get_async`` of the same manifests alone, 32 at
  a time (the ratio is the ceiling's seconds over ours: 1.0 = planning costs no more than its GETs).
* **time-range bytes** — ``where(timestamp >= T)`` selecting the newest 1% of the topic, with
  ``filterPushdown=true``, planned and read in this process through the source's own tasks: bytes
  transferred at the seam (every store this process opened, ``StoreStats.bytes_read``) as a share of the
  bytes of the topic's objects. Target <= 3%.

Rounds are interleaved: each round runs every side once (archive, ceilings, local, zstd), in reverse order
on every other round, after one warm-up round; the per-round ratios give the median and the spread. The
machine is shared, so figures are same-run ratios.

Run standalone: ``python bench/bench_objstore.py [--quick]``; the harness imports :func:`run`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # standalone: make ``kafkalog`` (src layout) and the repo importable
    _ROOT = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(_ROOT / "src"), str(_ROOT)]

from bench.bench_spark import CEILING_FORMAT, VALUE_BYTES, _aggregate, _session
from bench.harness import Row, Stats, log, single_row
from bench.seaweed import S3Server, running_server

__all__ = ["run"]

AREA = "objstore"
PARTITIONS = 4
FULL_ROWS = 8_400_000  # ~1.0 GiB of v2 batches
QUICK_ROWS = 1_000_000
FULL_SEGMENT_BYTES = 32 * 1024 * 1024
QUICK_SEGMENT_BYTES = 4 * 1024 * 1024
BATCH_RECORDS = 1_000
KEY_BYTES = 16
TS_BASE_MS = 1_700_000_000_000
NEWEST_FRACTION = 0.01
ROUNDS = 3
PLAN_SEGMENTS_FULL = 10_000
PLAN_SEGMENTS_QUICK = 2_000
PLAN_RECORDS = 10
PLAN_RUNS = 3
GET_CONCURRENCY = 32
UPLOAD_THREADS = 16
TOPIC = "bench"


# ------------------------------------------------------------------------------------------------ the data


def _batch(first_offset: int, n: int) -> Any:
    from kafkalog.records import MemoryRecords, SimpleRecord

    value = b"v" * VALUE_BYTES
    return MemoryRecords.build(
        [
            SimpleRecord(value, b"%016d" % ((first_offset + i) % 100_000), TS_BASE_MS + first_offset + i)
            for i in range(n)
        ]
    )


def _batches(per_partition: int) -> Iterator[Any]:
    """The batches of one partition: a template of ``BATCH_RECORDS`` records whose first and max timestamps
    are moved to ``base + offset`` (CRC recomputed by ``set_max_timestamp``); building each batch from
    records would cost ~4 minutes for the full size."""
    import struct

    from kafkalog.records import MemoryRecords, TimestampType
    from kafkalog.records.framing import BASE_TIMESTAMP_OFFSET

    template = _batch(0, BATCH_RECORDS).to_bytes()
    offset = 0
    while offset < per_partition:
        n = min(BATCH_RECORDS, per_partition - offset)
        if n < BATCH_RECORDS:
            yield _batch(offset, n)
            break
        records = MemoryRecords(bytearray(template))
        batch = next(records.batches())
        struct.pack_into(">q", records.buffer, BASE_TIMESTAMP_OFFSET, TS_BASE_MS + offset)
        batch.set_max_timestamp(TimestampType.CREATE_TIME, TS_BASE_MS + offset + n - 1)
        yield records
        offset += n


def write_topic(data_dir: Path, rows: int, segment_bytes: int) -> int:
    """A data directory with topic ``bench``: ``rows`` records in 4 partitions, CreateTime = base + offset."""
    from kafkalog.manager import LogManager

    per = rows // PARTITIONS
    with LogManager.open(data_dir, background=False) as mgr:
        logs = mgr.create_topic(TOPIC, PARTITIONS, {"segment.bytes": segment_bytes})
        for lg in logs:
            for records in _batches(per):
                lg.append_as_leader(records)
    return per * PARTITIONS


def upload_archive(store: Any, data_dir: Path, prefix: str, compression: bool) -> int:
    """Every segment of topic ``bench`` (the active one too) as the Aiven plugin uploads it; returns the
    number of segments."""
    from kafkalog.tiered.writer import kafka_uuid, segments_from_log_dir, write_aiven_segment

    topic_id = kafka_uuid()
    count = 0
    with ThreadPoolExecutor(PARTITIONS) as pool:
        for p in range(PARTITIONS):
            segments = segments_from_log_dir(data_dir / f"{TOPIC}-{p}", include_active=True)
            list(
                pool.map(
                    lambda seg, p=p: write_aiven_segment(
                        store,
                        seg,
                        topic=TOPIC,
                        topic_id=topic_id,
                        partition=p,
                        prefix=prefix,
                        compression=compression,
                    ),
                    segments,
                )
            )
            count += len(segments)
    return count


def upload_plan_archive(store: Any, prefix: str, segments: int) -> None:
    """An Aiven archive of ``segments`` segments of 10 records each in 4 partitions (what planning reads:
    keys, manifests, the newest epoch blob; every object a real segment's)."""
    from kafkalog.tiered.writer import SegmentFiles, kafka_uuid, write_aiven_segment

    topic_id = kafka_uuid()
    checkpoint = b"0\n1\n0 0\n"  # leader-epoch-checkpoint: version 0, one entry, epoch 0 from offset 0

    def one(i: int) -> None:
        p, n = i % PARTITIONS, i // PARTITIONS
        base = n * PLAN_RECORDS
        seg = SegmentFiles(
            base_offset=base,
            end_offset=base + PLAN_RECORDS - 1,
            max_timestamp_ms=TS_BASE_MS + base + PLAN_RECORDS - 1,
            log=_batch_at(base),
            offset_index=b"",
            time_index=b"",
            producer_snapshot=b"",
            leader_epoch=checkpoint,
            leader_epochs={0: base},
        )
        write_aiven_segment(store, seg, topic="plan", topic_id=topic_id, partition=p, prefix=prefix)

    with ThreadPoolExecutor(UPLOAD_THREADS) as pool:
        list(pool.map(one, range(segments)))


def _batch_at(base: int) -> bytes:
    from kafkalog.records import MemoryRecords, SimpleRecord

    return MemoryRecords.build(
        [SimpleRecord(b"v" * VALUE_BYTES, b"k", TS_BASE_MS + base + i) for i in range(PLAN_RECORDS)],
        base_offset=base,
        partition_leader_epoch=0,
    ).to_bytes()


# ------------------------------------------------------------------------------------------ seam accounting


@contextmanager
def counted_stores() -> Iterator[list[Any]]:
    """Every cloud store this process opens inside the block (the reader's own, at the seam)."""
    import kafkalog.objstore.cloud as cloud

    opened: list[Any] = []
    original = cloud.open_cloud_store

    def counting(url: str, options: Any = None) -> Any:
        store = original(url, options)
        opened.append(store)
        return store

    cloud.open_cloud_store = counting
    try:
        yield opened
    finally:
        cloud.open_cloud_store = original


def _totals(stores: list[Any]) -> tuple[int, int, int]:
    """(bytes read, GETs, LISTs) summed over ``stores``."""
    return (
        sum(s.stats.bytes_read for s in stores),
        sum(s.stats.get_requests for s in stores),
        sum(s.stats.list_requests for s in stores),
    )


def _source_options(url: str, server: S3Server, topic: str, **extra: str) -> dict[str, str]:
    return {"path": url, "subscribe": topic, **server.options(), **extra}


def plan_seconds(url: str, server: S3Server) -> tuple[float, int, int, int]:
    """(seconds, GETs, LISTs, input partitions) of the Spark driver planning a batch read of ``url``."""
    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.reader import batch_reader

    with counted_stores() as stores:
        start = time.perf_counter()
        parts = batch_reader(
            parse_source_options(_source_options(url, server, "plan"), streaming=False)
        ).partitions()
        seconds = time.perf_counter() - start
    _, gets, lists = _totals(stores)
    return seconds, gets, lists, len(parts)


def newest_bytes(url: str, server: S3Server, cutoff_ms: int, expected: int) -> tuple[int, int, int]:
    """(bytes, GETs, rows) of planning and reading every task of the newest-1% query in this process."""
    from pyspark.sql.datasource import GreaterThanOrEqual

    from kafkalog.spark.options import parse_source_options
    from kafkalog.spark.reader import KafkaLogPushdownReader, batch_reader, read_task

    with counted_stores() as stores:
        options = _source_options(url, server, TOPIC, filterpushdown="true")
        reader = batch_reader(parse_source_options(options, streaming=False))
        assert isinstance(reader, KafkaLogPushdownReader)
        since = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=cutoff_ms)
        list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), since)]))
        rows = 0
        for partition in reader.partitions():
            for batch in read_task(partition.task, include_headers=False):  # type: ignore[attr-defined]
                ts = batch.column("timestamp").cast("int64").to_pylist()
                rows += sum(1 for t in ts if t // 1000 >= cutoff_ms)
        nbytes, gets, _ = _totals(stores)
    assert rows == expected, (rows, expected)
    return nbytes, gets, rows


def prefix_bytes(store: Any, prefix: str) -> int:
    """The bytes of every object under ``prefix``."""
    return sum(meta.size for meta in store.list(prefix, delimiter=False).objects)


# ------------------------------------------------------------------------------------------------ ceilings


def transfer(server: S3Server, bucket: str, keys: list[str]) -> int:
    """obstore's own parallel ``get_async`` of ``keys`` (``GET_CONCURRENCY`` at a time); returns the bytes."""
    import obstore
    from obstore.store import from_url

    from kafkalog.objstore.options import resolve

    cfg = resolve(f"s3://{bucket}", server.options())
    store = from_url(f"s3://{bucket}", config=dict(cfg.config), client_options=dict(cfg.client_options))

    async def fetch_all() -> int:
        gate = asyncio.Semaphore(GET_CONCURRENCY)

        async def one(key: str) -> int:
            async with gate:
                result = await obstore.get_async(store, key)
                return len(await result.bytes_async())

        return sum(await asyncio.gather(*(one(k) for k in keys)))

    return asyncio.run(fetch_all())


# ---------------------------------------------------------------------------------------------------- rows


def _rounds(sides: dict[str, Callable[[], None]], rows: int) -> dict[str, list[float]]:
    """rows/s of each side, per round: one unrecorded warm-up round, then ``ROUNDS`` interleaved ones."""
    figures: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for r in range(ROUNDS + 1):
        for name in order if r % 2 else reversed(order):
            start = time.perf_counter()
            sides[name]()
            seconds = time.perf_counter() - start
            if r:
                figures[name].append(rows / seconds)
        if r:
            log(
                f"{AREA}: round {r}: "
                + ", ".join(f"{k} {v[-1] / 1e6:.2f}M rows/s" for k, v in figures.items())
            )
    return figures


def _ratio_row(
    name: str,
    ours: list[float],
    theirs: list[float],
    baseline_name: str,
    target: str | None,
    note: str,
) -> Row:
    ratios = [m / t for m, t in zip(ours, theirs)]
    o, b, q = Stats.of(ours), Stats.of(theirs), Stats.of(ratios)
    row = Row(
        area=AREA,
        name=name,
        value=o.median,
        unit="rows/s",
        baseline_name=baseline_name,
        baseline_value=b.median,
        ratio=q.median,
        target=target,
        spread=o.spread,
        baseline_spread=b.spread,
        ratio_spread=q.spread,
        runs=q.n,
        note=note,
    )
    from bench.harness import evaluate_target

    row.passed = evaluate_target(target, value=row.value, unit=row.unit, ratio=row.ratio)
    return row


def read_rows(
    spark: Any, server: S3Server, bucket: str, data_dir: Path, rows: int, label: str, store: Any
) -> list[Row]:
    """The archive read rows (see the module doc)."""
    opts = server.options()
    keys = {
        prefix: [m.key for m in store.list(prefix, delimiter=False).objects]
        for prefix in ("aiven/", "aiven-zstd/")
    }
    sizes = {prefix: prefix_bytes(store, prefix) for prefix in keys}

    def archive(prefix: str) -> Callable[[], None]:
        def read() -> None:
            df = spark.read.format("kafkalog").options(**opts).option("subscribe", TOPIC)
            _aggregate(df.load(f"s3://{bucket}/{prefix}"), rows)

        return read

    def fetched() -> None:
        got = transfer(server, bucket, keys["aiven/"])
        assert got == sizes["aiven/"], (got, sizes["aiven/"])

    sides: dict[str, Callable[[], None]] = {
        "archive": archive("aiven/"),
        "transfer": fetched,
        "ceiling": lambda: _aggregate(
            spark.read.format(CEILING_FORMAT).option("rows", str(rows)).load(), rows
        ),
        "local": lambda: _aggregate(
            spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(data_dir)), rows
        ),
        "zstd": archive("aiven-zstd/"),
    }
    log(f"{AREA}: archive reads of {label}, {ROUNDS} interleaved rounds after a warm-up")
    f = _rounds(sides, rows)
    lower = [min(t, c) for t, c in zip(f["transfer"], f["ceiling"])]
    which = ["transfer" if t <= c else "Python DS" for t, c in zip(f["transfer"], f["ceiling"])]
    gib = sizes["aiven/"] / 2**30
    transfer_gib_s = [x * gib / rows for x in f["transfer"]]
    note = (
        f"uncompressed archive {sizes['aiven/'] / 2**20:.0f} MiB in {len(keys['aiven/']) // 3} segments; "
        f"lower ceiling per round: {', '.join(which)}; transfer ceiling "
        f"{min(transfer_gib_s):.2f}-{max(transfer_gib_s):.2f} GiB/s"
    )
    out = [
        _ratio_row(
            f"Spark read of an Aiven archive in S3, {label}, uncompressed: count(*), sum(length(value))",
            f["archive"],
            lower,
            "the lower of two same-round ceilings: obstore parallel get of the same objects, Python DS "
            "yielding pre-built Arrow batches",
            ">= 0.8x",
            note,
        ),
        _ratio_row(
            f"Spark read of an Aiven archive in S3, {label}, uncompressed, vs the transfer ceiling",
            f["archive"],
            f["transfer"],
            f"obstore get_async of the same {len(keys['aiven/'])} objects, {GET_CONCURRENCY} at a time",
            None,
            "reference: the bytes alone, no decoding, no Spark",
        ),
        _ratio_row(
            f"Spark read of an Aiven archive in S3, {label}, uncompressed, vs the Python DS ceiling",
            f["archive"],
            f["ceiling"],
            "source yielding pre-built Arrow batches of the same rows (API ceiling)",
            None,
            "reference: the Python Data Source API's cost per row, no I/O",
        ),
        _ratio_row(
            f"Spark read of an Aiven archive in S3, {label}, uncompressed, vs the same rows in a local directory",
            f["archive"],
            f["local"],
            "the kafkalog source reading the same topic from the local data directory",
            None,
            "reference: what the bucket costs over local files",
        ),
        _ratio_row(
            f"Spark read of an Aiven archive in S3, {label}, zstd chunks: count(*), sum(length(value))",
            f["zstd"],
            lower,
            "the lower of the same two ceilings (uncompressed objects' transfer, Python DS)",
            ">= 0.8x",
            f"zstd-chunked archive {sizes['aiven-zstd/'] / 2**20:.0f} MiB; ratio to the local directory "
            f"{statistics.median(z / loc for z, loc in zip(f['zstd'], f['local'])):.2f}x",
        ),
    ]
    return out


def run(quick: bool, rows: int | None = None, plan_segments: int | None = None) -> list[Row]:
    """Measure; rows for the report (``rows``, ``plan_segments``: other sizes)."""
    rows_n = rows or (QUICK_ROWS if quick else FULL_ROWS)
    plan_n = plan_segments or (PLAN_SEGMENTS_QUICK if quick else PLAN_SEGMENTS_FULL)
    tmp = Path(tempfile.mkdtemp(prefix="kafkalog-bench-objstore-"))
    out: list[Row] = []
    try:
        with running_server() as server:
            bucket = server.make_bucket("bench")
            store = server.open(f"s3://{bucket}")
            data_dir = tmp / "data"
            log(f"{AREA}: writing {rows_n:,} records")
            rows_n = write_topic(data_dir, rows_n, QUICK_SEGMENT_BYTES if quick else FULL_SEGMENT_BYTES)
            topic_bytes = sum(f.stat().st_size for f in data_dir.glob(f"{TOPIC}-*/*.log"))
            label = f"{topic_bytes / 2**30:.2f} GiB ({rows_n / 1e6:g}M rows)" + (" (quick)" if quick else "")
            log(f"{AREA}: uploading {label} twice (uncompressed, zstd)")
            segments = upload_archive(store, data_dir, "aiven/", compression=False)
            upload_archive(store, data_dir, "aiven-zstd/", compression=True)

            per = rows_n // PARTITIONS
            newest = round(per * NEWEST_FRACTION)
            cutoff = TS_BASE_MS + per - newest
            log(f"{AREA}: bytes of the newest-1% query at the seam")
            archive_bytes = prefix_bytes(store, "aiven/")
            nbytes, gets, got = newest_bytes(f"s3://{bucket}/aiven/", server, cutoff, newest * PARTITIONS)
            out.append(
                single_row(
                    AREA,
                    f"newest-1% time-range query over an Aiven archive in S3, {label}: bytes transferred, "
                    "% of the topic's",
                    "%",
                    Stats.of([100.0 * nbytes / archive_bytes]),
                    target="<= 3 %",
                    note=f"{nbytes / 2**20:.2f} MiB in {gets} GETs of {archive_bytes / 2**20:.0f} MiB "
                    f"({segments} segments); {got:,} rows; filterPushdown=true, planning included, "
                    "counted at the seam (StoreStats)",
                )
            )

            spark = _session()
            try:
                out[:0] = read_rows(spark, server, bucket, data_dir, rows_n, label, store)
            finally:
                spark.stop()
            shutil.rmtree(data_dir, ignore_errors=True)

            log(f"{AREA}: uploading an archive of {plan_n:,} segments for planning")
            started = time.perf_counter()
            upload_plan_archive(store, "plan/", plan_n)
            log(f"{AREA}: uploaded in {time.perf_counter() - started:.0f} s; planning {PLAN_RUNS} times")
            manifests = [m.key for m in store.list("plan/", delimiter=False).objects]
            manifests = [k for k in manifests if k.endswith(".rsm-manifest")]
            plans: list[tuple[float, int, int, int]] = []
            ceiling: list[float] = []
            for r in range(PLAN_RUNS):  # interleaved: plan, ceiling; ceiling, plan; ...
                for side in ("plan", "ceiling") if r % 2 == 0 else ("ceiling", "plan"):
                    if side == "plan":
                        plans.append(plan_seconds(f"s3://{bucket}/plan/", server))
                    else:
                        started = time.perf_counter()
                        transfer(server, bucket, manifests)
                        ceiling.append(time.perf_counter() - started)
            _, gets, lists, parts = plans[-1]
            seconds = Stats.of(p[0] for p in plans)
            ceiling_stats = Stats.of(ceiling)
            speed = Stats.of(c / p[0] for c, p in zip(ceiling, plans))
            row = single_row(
                AREA,
                f"planning a batch read of an Aiven archive of {plan_n:,} segments in S3 (listing + "
                "manifests)" + (" (quick)" if quick else ""),
                "s",
                seconds,
                target="< 10 s",
                note=f"{gets:,} GETs, {lists} LISTs per plan, {parts} input partitions; the Spark driver's "
                "batch_reader(...).partitions(), a fresh reader each run, no data read; ratio: the "
                "ceiling's seconds / ours",
            )
            row.baseline_name = (
                f"obstore get_async of the same {len(manifests):,} manifests alone, {GET_CONCURRENCY} at a "
                "time (the server's small-GET ceiling)"
            )
            row.baseline_value = ceiling_stats.median
            row.baseline_spread = ceiling_stats.spread
            row.ratio = speed.median
            row.ratio_spread = speed.spread
            out.append(row)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone run: print the rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, help="records in the topic (default 8.4M, --quick 1M)")
    parser.add_argument("--plan-segments", type=int, help="segments of the planned archive (10,000; 2,000)")
    args = parser.parse_args(argv)
    for row in run(args.quick, args.rows, args.plan_segments):
        print(row.to_dict())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
