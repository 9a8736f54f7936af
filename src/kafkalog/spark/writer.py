"""The ``kafkalog`` sinks: ``df.write.format("kafkalog")`` and ``df.writeStream.format("kafkalog")``.

Contract (Spark's Kafka sink, see :mod:`kafkalog.spark.sink_options` for columns and options)::

    df.write.format("kafkalog").option("topic", "events").mode("append").save("/data/kafka")
    df.writeStream.format("kafkalog").option("path", "/data/kafka").option("checkpointLocation", ckpt).start()

Where each piece runs, and what it owns:

* ``KafkaLogWriter(options, schema, overwrite)`` / ``KafkaLogStreamWriter(...)`` — built on the driver by
  ``KafkaLogDataSource.writer()`` / ``streamWriter()``; checks options and column types (so mistakes fail
  before any task runs) and refuses a batch ``overwrite`` (``mode("overwrite")``), as Kafka's sink does. It
  is pickled to the executors and, for batch jobs, back to the driver for ``commit``/``abort`` (same job id);
  a streaming commit runs on a *new* instance, so nothing but the constructor's result is kept.
* ``write(iterator)`` — on the executors, once per Spark task: stages the task's rows as Kafka record batches
  (:class:`~kafkalog.spark.staging.TaskStager`) in ``<data dir>/.kafkalog-spark/staging/<job>/<task>/`` and
  returns a :class:`KafkaLogCommitMessage` naming the staged files; on any error it deletes its directory.
* ``commit(messages)`` — on the driver: appends all staged batches atomically under the data dir's lock
  (:func:`~kafkalog.spark.commit.commit_staged`: pre-checks, roll-forward journal, one contiguous offset
  range per partition). ``abort(messages)`` deletes the job's staging (or completes a commit that was
  already decided).
* Streaming: ``commit(messages, batchId)`` does the same plus exactly-once across restarts: the batch id is
  recorded in the journal and in the sink marker ``.kafkalog-spark/sinks/<sink id>.json``, and a batch id at
  or below the marker is skipped. The sink id is the ``sinkId`` option, else Spark's streaming query id
  (stable across restarts from the same checkpoint; read on the executors from the task's local property
  ``sql.streaming.queryId`` and carried in the commit messages). ``outputMode("complete")`` (``overwrite``)
  appends the whole result every batch, as Kafka's sink does.

The data directory must be the same path on the driver and every executor (a shared filesystem on a
cluster), and no other process may hold it open with a LogManager while a job commits (the commit waits
``lockTimeoutMs`` for the lock).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from kafkalog.spark.sink_layout import StagedFile, staging_root
from kafkalog.spark.sink_options import (
    ColumnPlan,
    SinkError,
    SinkOptions,
    load_topic_metadata,
    plan_columns,
    resolve_topic,
)
from kafkalog.spark.staging import TaskStager

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = ["KafkaLogCommitMessage", "KafkaLogStreamWriter", "KafkaLogWriter", "stage_task"]

_STREAM_PREFIX = "stream-"


def _new_job_id(prefix: str = "") -> str:
    """A unique, time-ordered id (``<ms>-<12 hex>``); the same form as :func:`kafkalog.spark.commit.new_job_id`
    (not imported here: executors only stage, the commit machinery loads on the driver)."""
    return f"{prefix}{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:12]}"


def _run_token() -> str:
    """A random suffix for a task directory: Spark's task attempt ids restart at 0 with every driver run, so
    ``b<batch>-p<part>-a<attempt>-t<id>`` alone repeats across a crash and a restart."""
    return uuid.uuid4().hex[:8]


@dataclass
class KafkaLogCommitMessage(WriterCommitMessage):
    """What one task staged: its directory (relative to the data dir) and files, for the driver's commit."""

    task_dir: str
    files: list[StagedFile] = field(default_factory=list)
    rows: int = 0
    query_id: str | None = None
    batch_id: int | None = None


def _columns(schema: StructType) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def _check_topic_option(options: SinkOptions) -> None:
    """Fail on the driver, before any task, for an unknown ``topic`` option (unless topics may be created)."""
    if options.topic is None or options.create_topics:
        return
    resolve_topic(options.topic, load_topic_metadata(options.path), options, options.path)


def _prepare_job(options: SinkOptions) -> None:
    """On the driver, before any task stages: complete a commit a crash left pending and sweep staging that no
    journal names (:func:`kafkalog.spark.commit.prepare_job`), so a job that keeps crashing cannot fill the
    disk with its attempts' staging."""
    if not os.path.isdir(options.path):
        return
    from kafkalog.spark.commit import prepare_job

    prepare_job(options)


@dataclass(frozen=True)
class _TaskInfo:
    partition: int = 0
    attempt: int = 0
    task_attempt_id: int = 0
    query_id: str | None = None
    batch_id: int | None = None


def _task_info() -> _TaskInfo:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return _TaskInfo()
    query_id = ctx.getLocalProperty("sql.streaming.queryId")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return _TaskInfo(
        ctx.partitionId(),
        ctx.attemptNumber(),
        ctx.taskAttemptId(),
        query_id or None,
        int(batch) if batch not in (None, "") else None,
    )


def stage_task(
    options: SinkOptions,
    plan: ColumnPlan,
    job_dir: str,
    task_name: str,
    batches: Iterator[pa.RecordBatch],
    index: int,
) -> tuple[str, list[StagedFile], int]:
    """Stage one task's Arrow batches under ``staging/<job_dir>/<task_name>``; on failure nothing stays.

    Returns (task directory relative to the data dir, staged files, rows).
    """
    task_dir = staging_root(options.path) / job_dir / task_name
    stager = TaskStager(options, plan, task_dir, task_index=index)
    try:
        stager.add_batches(batches)
        files = stager.finish()
    except BaseException:
        stager.abort()
        raise
    rel = str(task_dir.relative_to(options.path))
    return rel, files, stager.rows


def _staged(messages: Sequence[WriterCommitMessage | None]) -> list[StagedFile]:
    return [f for m in messages if isinstance(m, KafkaLogCommitMessage) for f in m.files]


class KafkaLogWriter(DataSourceArrowWriter):
    """Batch sink: stage on executors, append atomically on the driver (see the module doc)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise SinkError(
                "the kafkalog sink only appends: save mode Overwrite is not supported (as with Spark's Kafka sink); "
                "use .mode('append')"
            )
        self.options = SinkOptions.parse(options)
        self.plan = plan_columns(_columns(schema), self.options.topic)
        _check_topic_option(self.options)
        _prepare_job(self.options)
        self.job_id = _new_job_id()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        """Stage this task's rows (executor)."""
        info = _task_info()
        name = f"p{info.partition:05d}-a{info.attempt}-t{info.task_attempt_id}-{_run_token()}"
        task_dir, files, rows = stage_task(
            self.options, self.plan, self.job_id, name, iterator, info.partition
        )
        return KafkaLogCommitMessage(task_dir, files, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Append every staged batch atomically (driver)."""
        from kafkalog.spark.commit import commit_staged

        job_dir = str((staging_root(self.options.path) / self.job_id).relative_to(self.options.path))
        commit_staged(self.options, self.job_id, _staged(messages), cleanup=[job_dir])

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop the job's staging (driver)."""
        from kafkalog.spark.commit import abort_staged

        job_dir = str((staging_root(self.options.path) / self.job_id).relative_to(self.options.path))
        abort_staged(self.options, [job_dir])


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:200]


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: the batch sink's staging and commit, exactly once per micro-batch id."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        # overwrite = outputMode("complete"): Kafka's sink appends the whole result table every batch.
        self.overwrite = overwrite
        self.options = SinkOptions.parse(options)
        self.plan = plan_columns(_columns(schema), self.options.topic)
        _check_topic_option(self.options)
        _prepare_job(self.options)
        self.fallback_id = _new_job_id()

    def _sink_key(self, query_id: str | None) -> str:
        if self.options.sink_id is not None:
            return self.options.sink_id
        return _safe_id(query_id) if query_id else self.fallback_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLogCommitMessage:
        """Stage this task's rows of the micro-batch (executor)."""
        info = _task_info()
        batch = -1 if info.batch_id is None else info.batch_id
        job_dir = _STREAM_PREFIX + self._sink_key(info.query_id)
        name = f"b{batch:09d}-p{info.partition:05d}-a{info.attempt}-t{info.task_attempt_id}-{_run_token()}"
        task_dir, files, rows = stage_task(self.options, self.plan, job_dir, name, iterator, info.partition)
        return KafkaLogCommitMessage(task_dir, files, rows, info.query_id, info.batch_id)

    def _cleanup(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> list[str]:
        """The task dirs of this micro-batch (and leftovers of failed attempts of it and earlier batches)."""
        dirs = {m.task_dir for m in messages if isinstance(m, KafkaLogCommitMessage)}
        job_dirs = {str(Path(d).parent) for d in dirs}
        for job in job_dirs:
            root = Path(self.options.path) / job
            try:
                entries = list(root.iterdir())
            except FileNotFoundError:
                continue
            for entry in entries:
                m = re.match(r"b(-?\d+)-", entry.name)
                if m is not None and int(m.group(1)) <= batch_id:
                    dirs.add(str(Path(job) / entry.name))
        return sorted(dirs)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Append the micro-batch exactly once (driver; a new writer instance)."""
        from kafkalog.spark.commit import SinkBatch, commit_staged

        query_ids = [m.query_id for m in messages if isinstance(m, KafkaLogCommitMessage) and m.query_id]
        sink_id = self.options.sink_id or (_safe_id(query_ids[0]) if query_ids else None)
        staged = _staged(messages)
        cleanup = self._cleanup(messages, batchId)
        if sink_id is None:
            if staged:  # no stable identity: at-least-once, like Kafka's sink
                commit_staged(self.options, _new_job_id(), staged, cleanup=cleanup)
            return
        job_id = _new_job_id(f"{sink_id}-b{batchId}-")
        commit_staged(self.options, job_id, staged, cleanup=cleanup, sink=SinkBatch(sink_id, batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Drop the micro-batch's staging (driver)."""
        from kafkalog.spark.commit import abort_staged

        abort_staged(self.options, self._cleanup(messages, batchId))
