"""One driver session of the sink crash suite (``test_sink_crash.py``): run as a script, killed at random.

``python sink_crash_driver.py DATA INPUT CHECKPOINT STATE ROWS_PER_JOB ROWS_PER_FILE [--final]``

A restart first opens the data directory with a LogManager (what any writer does first: a commit a crash
left pending is completed). Then, concurrently until killed:

* **batch writes**: jobs ``0, 1, 2, ...`` of ``ROWS_PER_JOB`` rows ``b:<job>:<i>`` (partition ``i % 2``) to
  topic ``batch`` with ``df.write.format("kafkalog")``. Before job ``k`` starts, ``STATE/jobs`` is set to
  ``k + 1`` (atomically). A restart re-runs the jobs below that count that no reader sees in the log (a batch
  write is all or nothing, so a job that is not there was not committed), then starts new ones.
* **streaming writes**: a feeder thread adds parquet files ``s-<f>.parquet`` (``ROWS_PER_FILE`` rows
  ``s:<f>:<i>``, partition ``i % 2``) to INPUT, keeping about two files ahead of the sink (it prints
  ``{"event": "stream"}`` once the session's first micro-batch is committed); a query reads INPUT with
  ``maxFilesPerTrigger=1`` and writes to topic ``stream`` with ``writeStream.format("kafkalog")``, checkpoint
  CHECKPOINT (the same across restarts).

With ``--final`` no new file is added: the stream catches up alone (``Trigger.AvailableNow``), then the
missing jobs and one new job run with a short ``stagingTtlMs`` (their sweeps remove what killed sessions
staged), and the script prints ``{"event": "done"}``. Progress goes to stdout as JSON lines.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: The sessions' ``stagingTtlMs``: long enough that a live job's staging is never swept under any load (a
#: swept micro-batch fails its commit's pre-check). The final session's batch jobs, which run alone, use
#: ``FINAL_STAGING_TTL_MS``: their sweeps remove whatever the killed sessions staged.
STAGING_TTL_MS = 600_000
FINAL_STAGING_TTL_MS = 1_000
#: A session's JVM lives seconds before its kill: the client compiler only and the serial collector start it
#: and run its first jobs sooner (on 2 busy cores: the first committed batch and micro-batch 30-40 s after
#: the start instead of 45-55 s); what the sink does, and where a kill lands in it, is the same.
SESSION_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def input_file(inp: Path, f: int, rows: int) -> None:
    """File ``f`` of the stream's input: always the same rows; appears in INPUT whole (rename)."""
    target = inp / f"s-{f:05d}.parquet"
    if target.exists():
        return
    table = pa.table(
        {
            "value": [f"s:{f}:{i}" for i in range(rows)],
            "partition": pa.array([i % 2 for i in range(rows)], pa.int32()),
        }
    )
    tmp = inp.parent / f".{target.name}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, target)


def read_topic(data: Path, topic: str, *, visible: bool = True) -> dict[int, pa.Table]:
    """Per partition, the ``offset`` and ``value`` of the records readers see (``visible``: below the high
    watermark) or of the whole log (to the log end offset), decoded as Spark's reader decodes them
    (:func:`~kafkalog.records.columnar.iter_columnar`: CRC-checked, whole batches, offsets filtered); an
    absent topic has no partitions."""
    from kafkalog.readonly.log import ReadOnlyDataDir
    from kafkalog.records.columnar import iter_columnar

    ro = ReadOnlyDataDir(data)
    out: dict[int, pa.Table] = {}
    for p in ro.partitions(topic) if (data / f"{topic}-0").exists() else []:
        log = ro.log(topic, p)
        lo, hi = log.log_start_offset, log.high_watermark if visible else log.log_end_offset
        batches = [
            b.select(["offset", "value"])
            for chunk in log.iter_batch_chunks(lo, hi)
            for b in iter_columnar(chunk.data, include_headers=False, start_offset=lo, end_offset=hi)
        ]
        schema = pa.schema([("offset", pa.int64()), ("value", pa.binary())])
        out[p] = pa.Table.from_batches(batches).cast(schema) if batches else schema.empty_table()
    return out


def visible_batch_jobs(data: Path) -> set[int]:
    """The batch jobs readers see (``b:<job>:<i>`` records in topic ``batch``)."""
    import pyarrow.compute as pc

    jobs: set[int] = set()
    for table in read_topic(data, "batch").values():
        values = pc.cast(table["value"], pa.string())
        jobs.update(pc.unique(pc.list_element(pc.split_pattern(values, ":"), 1)).to_pylist())
    return {int(j) for j in jobs}


def main() -> None:
    data, inp, ckpt, state = (Path(a) for a in sys.argv[1:5])
    rows_per_job, rows_per_file = int(sys.argv[5]), int(sys.argv[6])
    final = "--final" in sys.argv[7:]
    inp.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)

    from kafkalog.manager import LogManager

    with LogManager.open(data, background=False) as mgr:  # a restart: pending commits complete here
        for topic in ("batch", "stream"):
            if topic not in mgr.topics():
                mgr.create_topic(topic, 2)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafkalog-sink-crash")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.extraJavaOptions", SESSION_JVM_OPTIONS)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    say(event="ready")

    files_path = state / "files"
    files = int(files_path.read_text()) if files_path.exists() else 0
    stop_feeding = threading.Event()

    def committed_batches() -> int:
        """Micro-batches the sink has committed (one input file each), from its marker."""
        for marker in (data / ".kafkalog-spark" / "sinks").glob("*.json"):
            try:
                return int(json.loads(marker.read_text())["batch_id"]) + 1
            except (OSError, ValueError, KeyError):
                return 0
        return 0

    def feeder() -> None:
        nonlocal files
        first = committed_batches()
        while not stop_feeding.is_set():
            done = committed_batches()
            if done > first:
                say(event="stream", batches=done)
                first = 1 << 62
            if files < done + 2:  # keep a backlog of about two files: the stream is always busy
                write_atomic(files_path, str(files + 1))
                input_file(inp, files, rows_per_file)
                files += 1
            stop_feeding.wait(0.2)

    for f in range(files):  # a file the last session was killed while writing
        input_file(inp, f, rows_per_file)
    if not final:
        threading.Thread(target=feeder, daemon=True, name="feeder").start()
    writer = (
        spark.readStream.schema("value string, partition int")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(inp))
        .writeStream.format("kafkalog")
        .option("path", str(data))
        .option("topic", "stream")
        .option("checkpointLocation", str(ckpt))
        .option("stagingTtlMs", str(STAGING_TTL_MS))
    )
    if final:  # the stream catches up first, alone; then the batch jobs (whose sweeps clean up)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        exc = query.exception()
        if exc is not None:
            raise RuntimeError(f"streaming query failed: {exc}")
    else:
        writer.trigger(processingTime="100 milliseconds").start()

    jobs_path = state / "jobs"
    started = int(jobs_path.read_text()) if jobs_path.exists() else 0
    present = visible_batch_jobs(data)
    todo = [k for k in range(started) if k not in present]
    k = started
    ttl = FINAL_STAGING_TTL_MS if final else STAGING_TTL_MS
    while True:
        if todo:
            job = todo.pop(0)
        elif final and k > started:
            break
        else:  # the final session too runs one new job: its start and commit sweep what is left
            job = k
            k += 1
            write_atomic(jobs_path, str(k))
        df = spark.range(rows_per_job).selectExpr(
            f"concat('b:{job}:', cast(id as string)) as value", "cast(id % 2 as int) as partition"
        )
        writer_options = {"topic": "batch", "stagingTtlMs": str(ttl)}
        df.write.format("kafkalog").options(**writer_options).mode("append").save(str(data))
        say(event="batch", job=job)
    if final:
        say(event="done", files=files, jobs=k)
        spark.stop()


if __name__ == "__main__":
    main()
