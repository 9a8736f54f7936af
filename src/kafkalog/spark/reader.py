"""Batch reads of the ``kafkalog`` source: planning on the driver, columnar decoding on the executors.

Driver (``partitions()``): the selected partitions are listed from the data directories, their offsets
resolved (:mod:`kafkalog.spark.offsets`) against each partition's bounds (log start offset; high
watermark, or last stable offset with ``read_committed``), checked for data loss, and split into
:class:`ReadTask` s (:mod:`kafkalog.spark.planning`). With ``read_committed`` each task carries the
aborted transactions that overlap its range, computed once on the driver from the ``.txnindex`` files and
the markers the LSO replay saw (a writer appends a marker before it indexes it).

Executor (:func:`read_task`): the task's offsets are read from the segment files in large chunks of whole
batches (:meth:`~kafkalog.readonly.log.ReadOnlyLog.iter_batch_chunks`, one reused buffer), batches of
aborted transactions are cut out, and each run of batches is decoded by the numba columnar decoder
(:func:`~kafkalog.records.columnar.iter_columnar`: CRC-checked, control batches skipped, offsets filtered
to ``[start, end)``). Every decoded batch becomes an Arrow RecordBatch of :func:`arrow_schema` with no
per-record Python work: ``topic``/``partition`` are slices of constant arrays, timestamps are multiplied
from ms to us (overflow is an error, as in Spark), the rest are the decoder's buffers.

Data loss (offsets the plan wants that are gone): with ``failOnDataLoss`` (default) an error whose message
follows Spark's; otherwise a warning, and the read skips forward. A data directory that does not exist (on
the driver) or that an executor cannot see (not on a shared filesystem at the driver's path) is neither
data loss nor an empty topic: :class:`~kafkalog.errors.LogDirNotFoundError`, whatever ``failOnDataLoss``.

Filter pushdown (opt-in: source option ``filterPushdown=true`` and Spark's
``spark.sql.python.filterPushdown.enabled=true``): :func:`batch_reader` then returns a
:class:`KafkaLogPushdownReader`, whose ``pushFilters`` keeps the plan of :mod:`kafkalog.spark.pushdown`;
offsets are resolved and checked for data loss exactly as without it, then the ranges are pruned. Without
the option the reader does not override ``pushFilters`` (PySpark fails every read of a reader that does
while the conf is off).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from kafkalog.errors import (
    CorruptRecordError,
    LogDirNotFoundError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.names import TopicPartition
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.records import kernels as K
from kafkalog.records.columnar import iter_columnar
from kafkalog.spark.offsets import TP, PartitionBounds, resolve_offsets
from kafkalog.spark.options import SourceOptions, Strategy
from kafkalog.spark.planning import OffsetRange, split_ranges
from kafkalog.spark.pushdown import PushedFilters, group_pieces, prune_ranges, push_filters
from kafkalog.spark.remote import RemoteSpec, open_spec
from kafkalog.spark.schema import ARROW_TIMESTAMP, arrow_schema

__all__ = [
    "DATA_LOSS_HINT",
    "KafkaLogBatchReader",
    "KafkaLogInputPartition",
    "KafkaLogPushdownReader",
    "LogDirs",
    "ReadTask",
    "batch_reader",
    "make_tasks",
    "plan_batch",
    "read_task",
    "report_data_loss",
    "to_spark_batch",
]

_log = logging.getLogger("kafkalog.spark")

DATA_LOSS_HINT: Final = (
    "Some data may have been lost because they are not available in the log any more; either the data was "
    "aged out by retention or the topic may have been deleted before all the data in the topic was "
    'processed. If you don\'t want your query to fail on such cases, set the source option "failOnDataLoss" '
    'to "false".'
)
_DATA_LOSS_SKIP: Final = (
    "Some data may have been lost because they are not available in the log any more; either the data was "
    "aged out by retention or the topic may have been deleted before all the data in the topic was "
    'processed. If you want your query to fail on such cases, set the source option "failOnDataLoss" to '
    '"true".'
)


def report_data_loss(message: str, fail: bool) -> None:
    """Spark's ``reportDataLoss``: raise :class:`OffsetOutOfRangeError` or log a warning."""
    if fail:
        raise OffsetOutOfRangeError(f"{message}. {DATA_LOSS_HINT}")
    _log.warning("%s. %s", message, _DATA_LOSS_SKIP)


#: Partitions in object storage the driver plans at once (each runs its own manifest GETs, ``manifest_concurrency``
#: at a time).
PLAN_PARTITION_CONCURRENCY: Final = 4


class LogDirs:
    """The partitions of one or more data directories, with cached read-only views (driver side). A path
    may be an object-storage URL, and a local one may have a ``tieredPath`` archive (``options``)."""

    def __init__(self, paths: Sequence[str], options: SourceOptions | None = None) -> None:
        self.paths = tuple(paths)
        self.options = options
        self._logs: dict[TP, ReadOnlyLog] = {}
        self._data_dirs: list[tuple[ReadOnlyDataDir, RemoteSpec | None]] | None = None
        self._owner: dict[TP, int] = {}

    def data_dirs(self) -> list[tuple[ReadOnlyDataDir, RemoteSpec | None]]:
        """Each path's data directory, with the spec executors open it by (None: a plain local directory)."""
        if self._data_dirs is None:
            found: list[tuple[ReadOnlyDataDir, RemoteSpec | None]] = []
            for path in self.paths:
                spec = None if self.options is None else self.options.remote_spec(path)
                if spec is None:
                    if not os.path.isdir(path):
                        raise LogDirNotFoundError(
                            f"kafkalog data directory {path} does not exist or is not a directory"
                            + ("" if os.path.exists(path) else " (no such path)")
                        )
                    found.append((ReadOnlyDataDir(path), None))
                else:
                    data_dir = spec.open()
                    found.append((data_dir, spec.with_layout(data_dir)))
            self._data_dirs = found
        return self._data_dirs

    def check_data_dirs(self) -> None:
        """:class:`LogDirNotFoundError` for a local path that is not a Kafka log dir at all (a mistyped or
        wrong-level path: no partition directory and none of a log dir's files), so a read that finds no
        partition there is an error, not zero rows."""
        for data_dir, _ in self.data_dirs():
            if not data_dir.is_data_dir():
                raise LogDirNotFoundError(
                    f"{data_dir.path} is not a kafkalog data directory: it holds no partition directory "
                    "(<topic>-<partition>) and none of a log dir's files (kafkalog-topics.json, checkpoints, "
                    "meta.properties); give the log dir itself (Kafka's log.dirs entry), not a partition "
                    "directory or a parent"
                )

    def partition_names(self) -> dict[TP, str]:
        """Every partition -> its directory or URL (the first data directory wins on a duplicate)."""
        found: dict[TP, str] = {}
        for i, (data_dir, _) in enumerate(self.data_dirs()):
            for tp, name in data_dir.partition_names().items():
                key = (tp.topic, tp.partition)
                if key not in found:
                    found[key] = name
                    self._owner[key] = i
        return found

    def partition_dirs(self) -> dict[TP, Path]:
        """:meth:`partition_names` as paths (local data directories)."""
        return {tp: Path(name) for tp, name in self.partition_names().items()}

    def spec_of(self, tp: TP) -> RemoteSpec | None:
        """The spec executors open ``tp``'s data directory by (None: a plain local directory)."""
        if tp not in self._owner:
            self.partition_names()
        return self.data_dirs()[self._owner[tp]][1]

    def refresh(self) -> None:
        """Look for new partitions of archives at the next :meth:`select` (a stream's trigger)."""
        for data_dir, spec in self.data_dirs():
            if spec is not None:
                data_dir.refresh()

    def select(self, strategy: Strategy, *, strict: bool = True) -> list[TP]:
        """The partitions a strategy reads, sorted; ``assign`` of a missing partition is an error when
        ``strict`` (a streaming query reports partitions that disappear as data loss instead)."""
        dirs = self.partition_names()
        if strategy.kind == "assign":
            missing = [tp for tp in strategy.assigned if tp not in dirs]
            if not strict:
                return sorted(set(strategy.assigned) - set(missing))
            if missing:
                names = ", ".join(f"{t}-{p}" for t, p in missing)
                raise UnknownTopicOrPartitionError(
                    f"assigned partitions do not exist in {self.paths}: {names}"
                )
            return sorted(set(strategy.assigned))
        return sorted(tp for tp in dirs if strategy.matches(tp[0]))

    def log(self, tp: TP, *, refresh: bool = False) -> ReadOnlyLog:
        """The cached view of ``tp``; ``refresh`` re-reads its tail first."""
        log = self._logs.get(tp)
        if log is None:
            if tp not in self.partition_names():
                raise UnknownTopicOrPartitionError(
                    f"partition {tp[0]}-{tp[1]} does not exist in {self.paths}"
                )
            data_dir = self.data_dirs()[self._owner[tp]][0]
            log = self._logs[tp] = data_dir.log(tp[0], tp[1], check=False)
        elif refresh:
            data_dir, spec = self.data_dirs()[self._owner[tp]]
            if spec is not None and data_dir.refresh_partition(tp[0], tp[1]):  # new archived segments
                log = self._logs[tp] = data_dir.log(tp[0], tp[1], check=False)
            else:
                log.refresh()
        return log

    def plan(self, tps: Sequence[TP]) -> None:
        """Open the views of ``tps`` in object storage, :data:`PLAN_PARTITION_CONCURRENCY` partitions at once
        (an archive's partition is planned when its view opens: one LIST and its manifests; planned one after
        another, each partition's LIST and parsing would wait for the previous one's GETs). Local
        partitions are left to open when asked for (cheap)."""
        todo = [tp for tp in tps if tp not in self._logs and self.spec_of(tp) is not None]
        if len(todo) < 2:
            return
        with ThreadPoolExecutor(min(PLAN_PARTITION_CONCURRENCY, len(todo))) as pool:
            for tp, view in zip(todo, pool.map(self._open_log, todo), strict=True):
                self._logs.setdefault(tp, view)

    def _open_log(self, tp: TP) -> ReadOnlyLog:
        data_dir = self.data_dirs()[self._owner[tp]][0]
        return data_dir.log(tp[0], tp[1], check=False)

    def bounds(self, tp: TP, read_committed: bool) -> PartitionBounds:
        """Earliest and latest offsets a reader of ``tp`` may see."""
        log = self.log(tp)
        return PartitionBounds(
            log.log_start_offset, log.last_stable_offset if read_committed else log.high_watermark
        )

    def offset_for_timestamp(self, tp: TP, timestamp: int, read_committed: bool) -> int | None:
        """First offset with a timestamp >= ``timestamp`` below the partition's latest offset."""
        return self.log(tp).offset_for_timestamp(
            timestamp, upper_offset=self.bounds(tp, read_committed).latest
        )

    def offset_hint_for_timestamp(self, tp: TP, timestamp: int, read_committed: bool) -> int:
        """An offset below which every record of ``tp`` has a timestamp < ``timestamp``, from its time
        indexes alone (:meth:`~kafkalog.readonly.log.ReadOnlyLog.offset_hint_for_timestamp`)."""
        return self.log(tp).offset_hint_for_timestamp(
            timestamp, upper_offset=self.bounds(tp, read_committed).latest
        )

    def boundaries(self, tp: TP) -> list[int]:
        """Segment base offsets of ``tp`` (preferred split points)."""
        return [s.base_offset for s in self.log(tp).segments]

    def __getstate__(self) -> dict[str, Any]:
        return {"paths": self.paths, "options": self.options, "_logs": {}, "_data_dirs": None, "_owner": {}}


@dataclass(frozen=True)
class ReadTask:
    """What one Spark task reads: offsets ``[start, end)`` of a partition directory (picklable)."""

    topic: str
    partition: int
    directory: str
    start: int
    end: int
    aborted: tuple[tuple[int, int, int], ...] | None = None  # (producer id, first offset, marker offset)
    pieces: tuple[tuple[int, int], ...] | None = None  # only these ranges [lo, hi) of [start, end) (pushdown)
    remote: RemoteSpec | None = None  # object storage / a tieredPath: how executors open it (repr: no secret)
    # an archive's partition as planned on the driver, clipped to [start, end): executors read it as is
    view: ReadOnlyLog | None = field(default=None, repr=False, compare=False)


class KafkaLogInputPartition(InputPartition):
    """A Spark input partition carrying one :class:`ReadTask`."""

    def __init__(self, task: ReadTask) -> None:
        super().__init__(task)
        self.task = task

    def __repr__(self) -> str:
        t = self.task
        return f"KafkaLogInputPartition({t.topic}-{t.partition} [{t.start}, {t.end}))"


def make_tasks(
    dirs: LogDirs,
    ranges: Sequence[OffsetRange],
    opts: SourceOptions,
    pieces: Mapping[TP, Sequence[tuple[int, int]]] | None = None,
) -> list[ReadTask]:
    """Split ``ranges`` as the options ask and attach what executors need (directory, aborted txns); with
    ``pieces`` (per partition, the offset ranges to read within its range) each task reads only those."""
    parts = split_ranges(
        ranges,
        min_partitions=opts.min_partitions,
        max_records_per_partition=opts.max_records_per_partition,
        boundaries={(r.topic, r.partition): dirs.boundaries((r.topic, r.partition)) for r in ranges},
    )
    dir_of = dirs.partition_names()
    tasks = []
    for r in parts:
        within = None
        if pieces is not None:
            within = tuple(
                (max(lo, r.start), min(hi, r.end))
                for lo, hi in pieces[(r.topic, r.partition)]
                if lo < r.end and hi > r.start
            )
            if not within:
                continue
            r = OffsetRange(r.topic, r.partition, within[0][0], within[-1][1])
            if len(within) == 1:
                within = None
        aborted = None
        if opts.read_committed:
            txns = dirs.log((r.topic, r.partition)).aborted_transactions(r.start, r.end)
            aborted = tuple((t.producer_id, t.first_offset, t.last_offset) for t in txns)
        tp = (r.topic, r.partition)
        spec = dirs.spec_of(tp)
        view = None if spec is None else dirs.log(tp).restricted(r.start, r.end)
        tasks.append(ReadTask(r.topic, r.partition, dir_of[tp], r.start, r.end, aborted, within, spec, view))
    return tasks


def plan_batch(
    opts: SourceOptions, dirs: LogDirs | None = None, pushed: PushedFilters | None = None
) -> list[ReadTask]:
    """The batch read plan: resolve starting/ending offsets, check data loss, prune by the ``pushed``
    filters, split (driver side)."""
    dirs = dirs or LogDirs(opts.paths, opts)
    partitions = dirs.select(opts.strategy)
    if not partitions:
        dirs.check_data_dirs()
    dirs.plan(partitions)

    def bounds(tp: TP) -> PartitionBounds:
        return dirs.bounds(tp, opts.read_committed)

    def by_time(tp: TP, ts: int) -> int | None:
        return dirs.offset_for_timestamp(tp, ts, opts.read_committed)

    starts = resolve_offsets(
        opts.starting,
        partitions,
        bounds,
        by_time,
        starting=True,
        no_match_latest=opts.starting_no_match_latest,
    )
    ends = resolve_offsets(opts.ending, partitions, bounds, by_time, starting=False)
    ranges = []
    for tp in partitions:
        lo, hi = starts[tp], ends[tp]
        b = bounds(tp)
        if lo < b.earliest:
            report_data_loss(
                f"Cannot fetch offset {lo} of {tp[0]}-{tp[1]}: the earliest available offset is {b.earliest}",
                opts.fail_on_data_loss,
            )
            lo = b.earliest
        if hi > b.latest:
            report_data_loss(
                f"Cannot fetch records in [{b.latest}, {hi}) of {tp[0]}-{tp[1]}: the latest available offset "
                f"is {b.latest}",
                opts.fail_on_data_loss,
            )
            hi = b.latest
        if lo > hi:
            raise ValueError(
                f"Beginning offset {lo} is after the ending offset {hi} for topic {tp[0]} partition {tp[1]}. "
                "You either provided an invalid fromOffset, or the Kafka topic has been damaged"
            )
        ranges.append(OffsetRange(tp[0], tp[1], lo, hi))
    if pushed is None:
        return make_tasks(dirs, ranges, opts)

    def time_hint(tp: TP, ts: int) -> int:
        return dirs.offset_hint_for_timestamp(tp, ts, opts.read_committed)

    hulls, pieces = group_pieces(prune_ranges(ranges, pushed, time_hint))
    return make_tasks(dirs, hulls, opts, pieces)


# --- executor side ------------------------------------------------------------------------------------------


class _Constants:
    """Reusable constant ``topic``/``partition`` columns, sliced to each batch's length."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic.encode("utf-8")
        self.partition = partition
        self.capacity = 0
        self.topics: pa.Array = pa.array([], pa.string())
        self.partitions: pa.Array = pa.array([], pa.int32())

    def get(self, n: int) -> tuple[pa.Array, pa.Array]:
        if n > self.capacity:
            cap = max(n, 2 * self.capacity, 1024)
            width = len(self.topic)
            offsets = (np.arange(cap + 1, dtype=np.int64) * width).astype(np.int32)
            self.topics = pa.Array.from_buffers(
                pa.string(), cap, [None, pa.py_buffer(offsets), pa.py_buffer(self.topic * cap)]
            )
            self.partitions = pa.array(np.full(cap, self.partition, np.int32))
            self.capacity = cap
        return self.topics.slice(0, n), self.partitions.slice(0, n)


def to_spark_batch(batch: pa.RecordBatch, constants: _Constants, schema: pa.Schema) -> pa.RecordBatch:
    """A columnar-decoder batch (offset, timestamp ms, timestampType, key, value[, headers]) in the
    column order and types of :func:`~kafkalog.spark.schema.arrow_schema`."""
    n = batch.num_rows
    topics, partitions = constants.get(n)
    micros = pc.multiply_checked(batch.column(1), 1000).view(ARROW_TIMESTAMP)
    columns = [batch.column(3), batch.column(4), topics, partitions, batch.column(0), micros, batch.column(2)]
    if batch.num_columns > 5:
        columns.append(batch.column(5))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _kept_runs(table: Any, aborted: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Runs ``[i, j)`` of batches in ``table`` that are not data of an aborted transaction."""
    n = table.shape[1]
    base = table[K.F_BASE_OFFSET]
    last = int(base[-1] + table[K.F_LAST_OFFSET_DELTA, -1])
    attrs = table[K.F_ATTRIBUTES]
    txn = (attrs & (K.ATTR_TRANSACTIONAL | K.ATTR_CONTROL)) == K.ATTR_TRANSACTIONAL
    drop = np.zeros(n, np.bool_)
    if txn.any():
        pid = table[K.F_PRODUCER_ID]
        first = int(base[0])
        for producer, lo, hi in aborted:
            if hi >= first and lo <= last:
                drop |= txn & (pid == producer) & (base >= lo) & (base <= hi)
    if not drop.any():
        return [(0, n)]
    keep = np.flatnonzero(~drop)
    if keep.shape[0] == 0:
        return []
    breaks = np.flatnonzero(np.diff(keep) != 1)
    starts = np.concatenate(([keep[0]], keep[breaks + 1]))
    ends = np.concatenate((keep[breaks], [keep[-1]])) + 1
    return list(zip(starts.tolist(), ends.tolist()))


def _check_visible(directory: str) -> None:
    """:class:`LogDirNotFoundError` when the data directory holding ``directory`` is not visible here."""
    data_dir = os.path.dirname(directory)
    if not os.path.isdir(data_dir):
        raise LogDirNotFoundError(
            f"kafkalog data directory {data_dir} (planned on the driver) is not visible on this executor "
            f"(host {socket.gethostname()}, working directory {os.getcwd()}): it must be on a shared filesystem "
            "mounted at the same path on the driver and every executor"
        )


def read_task(
    task: ReadTask,
    *,
    include_headers: bool,
    fail_on_data_loss: bool = True,
    batch_rows: int = 32768,
    chunk_bytes: int = 16 << 20,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches (schema :func:`arrow_schema`) of the records in ``task`` (executor side)."""
    if task.view is not None:
        log = task.view  # planned on the driver: no listing, no manifest read here
    elif task.remote is None:
        _check_visible(task.directory)
        log = ReadOnlyLog.open(task.directory)
    else:
        data_dir = open_spec(task.remote)
        log = data_dir.log(task.topic, task.partition, check=False)
        if log.high_watermark < task.end and data_dir.refresh_partition(task.topic, task.partition):
            log = data_dir.log(task.topic, task.partition, check=False)  # segments uploaded since planned
    schema = arrow_schema(include_headers)
    constants = _Constants(task.topic, task.partition)
    tp = TopicPartition(task.topic, task.partition)

    gone = getattr(log.source, "missing_objects", None)

    def missing(lo: int, hi: int) -> None:
        objects = [] if gone is None else gone(lo, hi)
        why = (
            f"their segment is still claimed (its manifest or index files remain) but its objects are gone: "
            f"{', '.join(objects)}"
            if objects
            else "they are no longer in the log"
        )
        report_data_loss(f"Cannot fetch offsets [{lo}, {hi}) of {tp}: {why}", fail_on_data_loss)

    # Offsets between an archive's segments are lost data (tiered storage holds no compacted topic); between a
    # local log's segments they are what compaction leaves.
    gaps_are_loss = getattr(log.source, "segment_end_offset", None) is not None

    def damaged(lo: int, hi: int, error: CorruptRecordError) -> None:
        # failOnDataLoss=true never gets here: without on_damage the error itself is raised
        report_data_loss(f"Cannot fetch offsets [{lo}, {hi}) of {tp}: damaged data ({error})", False)

    for start, end in task.pieces or ((task.start, task.end),):
        for chunk in log.iter_batch_chunks(
            start,
            end,
            chunk_bytes=chunk_bytes,
            on_missing=missing,
            on_damage=None if fail_on_data_loss else damaged,
            on_gap=missing if gaps_are_loss else None,
        ):
            table = chunk.table
            runs = [(0, table.shape[1])] if not task.aborted else _kept_runs(table, task.aborted)
            for i, j in runs:
                lo = int(table[K.F_POS, i])
                hi = int(table[K.F_POS, j - 1] + table[K.F_SIZE, j - 1])
                for batch in iter_columnar(
                    chunk.data[lo:hi],
                    include_headers=include_headers,
                    start_offset=start,
                    end_offset=end,
                    target_rows=batch_rows,
                ):
                    yield to_spark_batch(batch, constants, schema)


def read_input_partition(partition: InputPartition, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    """What batch and streaming readers do on an executor: the records of one input partition as Spark Arrow
    batches (``InputPartition(None)``, Spark's stand-in for an empty plan, reads nothing)."""
    task = getattr(partition, "task", None)
    if not isinstance(task, ReadTask):
        return iter(())
    return read_task(
        task,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        batch_rows=options.arrow_batch_rows,
    )


class KafkaLogBatchReader(DataSourceReader):
    """``spark.read.format("kafkalog")``: plans on the driver, reads with :func:`read_task`."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        """One input partition per (split) offset range; ``[]`` when there is nothing to read."""
        return [KafkaLogInputPartition(task) for task in plan_batch(self.options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one input partition (``InputPartition(None)``, Spark's stand-in for an empty
        plan, reads nothing)."""
        return read_input_partition(partition, self.options)


class KafkaLogPushdownReader(KafkaLogBatchReader):
    """The batch reader with ``filterPushdown=true``: handles ``topic``/``partition``/``offset`` filters and
    prunes by ``timestamp`` ones (:mod:`kafkalog.spark.pushdown`). Needs Spark's
    ``spark.sql.python.filterPushdown.enabled=true``: with it false, PySpark refuses the read with
    ``DATA_SOURCE_PUSHDOWN_DISABLED``."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.pushed = PushedFilters()

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        """Keep the plan for ``filters``; return the ones Spark must still evaluate (same objects)."""
        self.pushed, rest = push_filters(filters)
        return rest

    def partitions(self) -> list[InputPartition]:
        """The input partitions of the pruned plan; ``[]`` when nothing passes."""
        return [KafkaLogInputPartition(task) for task in plan_batch(self.options, pushed=self.pushed)]


def batch_reader(options: SourceOptions) -> KafkaLogBatchReader:
    """The reader for a batch read: :class:`KafkaLogPushdownReader` with ``filterPushdown=true``, else
    :class:`KafkaLogBatchReader` (which leaves every filter to Spark and works with any pushdown conf)."""
    if options.filter_pushdown:
        return KafkaLogPushdownReader(options)
    return KafkaLogBatchReader(options)
