"""Micro-batch streaming reads of the ``kafkalog`` source (``spark.readStream.format("kafkalog")``).

Offsets are Kafka's JSON ``{"topic": {"0": 42}}``: per partition the **next** offset to read, emitted in
canonical order (:func:`~kafkalog.spark.offsets.to_json_offsets`) because Spark compares offsets as text.
Mirrors ``KafkaMicroBatchStream``:

* ``initialOffset``: ``startingOffsets`` (default ``latest``) / ``startingTimestamp`` /
  ``startingOffsetsByTimestamp`` resolved against the partitions selected now; a restarted query resumes
  from its checkpoint instead (Spark's doing).
* ``latestOffset(start, limit)``: every selected partition's latest offset (high watermark, or LSO with
  ``read_committed``), re-read incrementally on each call; partitions and topics that appear are included
  (they start at their earliest offset). ``ReadAllAvailable`` takes everything; ``ReadMaxRows`` (the default
  limit with ``maxOffsetsPerTrigger``) applies Kafka's proportional split; ``minOffsetsPerTrigger`` delays a
  batch until enough offsets are pending or ``maxTriggerDelay`` has passed since the last batch.
* ``Trigger.AvailableNow``: ``prepareForTriggerAvailableNow`` freezes the latest offsets once; later calls
  never go past them (rate limits still apply, ``minOffsetsPerTrigger`` does not: it could wait forever).
* ``partitions(start, end)``: offsets below a partition's log start (retention passed the committed
  offset), partitions that disappeared, new partitions not starting at 0, and offsets that went backwards
  are data loss: an error with ``failOnDataLoss=true``, else a warning and the read skips forward.
* ``read`` runs on executors from the pickled reader, exactly like the batch reader
  (:func:`~kafkalog.spark.reader.read_task`).

The driver-side instance lives for the whole query in one Python process, so the partition views (and
their tail scan positions) are cached in it; nothing of that is pickled to executors.
Compatibility: ``latestOffset(self, start=None, limit=None)`` also serves pyspark 4.0/4.1, which call it
without arguments (no admission control there: every trigger reads all available offsets).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kafkalog.spark.offsets import (
    TP,
    PartitionBounds,
    from_json_offsets,
    rate_limit,
    resolve_offsets,
    to_json_offsets,
    total_new_offsets,
)
from kafkalog.spark.options import SourceOptions
from kafkalog.spark.planning import OffsetRange
from kafkalog.spark.reader import (
    KafkaLogInputPartition,
    LogDirs,
    make_tasks,
    read_input_partition,
    report_data_loss,
)

_limits: Any
_AvailableNowBase: Any
try:  # pyspark >= 4.2: ReadLimit family and the Trigger.AvailableNow mixin
    import pyspark.sql.streaming.datasource as _limits

    _AvailableNowBase = _limits.SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - pyspark 4.0/4.1: no admission control, no AvailableNow hook
    _limits = None
    _AvailableNowBase = object

__all__ = ["KafkaLogStreamReader", "RefusedStreamReader"]


class KafkaLogStreamReader(DataSourceStreamReader, _AvailableNowBase):  # type: ignore[misc]
    """Kafka's micro-batch stream over log directories (see the module doc)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._dirs: LogDirs | None = None
        self._target: dict[TP, int] | None = None  # frozen by prepareForTriggerAvailableNow
        self._latest: dict[TP, int] | None = None
        self._last_trigger_ms = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_dirs"] = None
        return state

    # --- driver -------------------------------------------------------------------------------------------
    @property
    def dirs(self) -> LogDirs:
        """The cached partition views of this query (driver side)."""
        if self._dirs is None:
            self._dirs = LogDirs(self.options.paths, self.options)
        return self._dirs

    def _bounds(self, tp: TP) -> PartitionBounds:
        return self.dirs.bounds(tp, self.options.read_committed)

    def _fetch_latest(self) -> dict[TP, int]:
        """Latest offsets of every selected partition, after re-reading each partition's tail."""
        out: dict[TP, int] = {}
        self.dirs.refresh()
        for tp in self.dirs.select(self.options.strategy, strict=False):
            self.dirs.log(tp, refresh=True)
            out[tp] = self._bounds(tp).latest
        return out

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Where a new query starts (``startingOffsets``, default ``latest``)."""
        opts = self.options
        partitions = self.dirs.select(opts.strategy)
        for tp in partitions:
            self.dirs.log(tp, refresh=True)
        starts = resolve_offsets(
            opts.starting,
            partitions,
            self._bounds,
            lambda tp, ts: self.dirs.offset_for_timestamp(tp, ts, opts.read_committed),
            starting=True,
            no_match_latest=opts.starting_no_match_latest,
        )
        return to_json_offsets(starts)

    def getDefaultReadLimit(self) -> Any:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, ``ReadMinRows(minOffsetsPerTrigger)`` or ``ReadAllAvailable``."""
        opts = self.options
        if opts.max_offsets_per_trigger is not None:
            return _limits.ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.min_offsets_per_trigger is not None:
            return _limits.ReadMinRows(opts.min_offsets_per_trigger)
        return _limits.ReadAllAvailable()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, dict[str, int]]:
        """The end offset of the next micro-batch (see the module doc for the limits)."""
        latest = dict(self._target) if self._target is not None else self._fetch_latest()
        self._latest = latest
        if start is None or limit is None or isinstance(limit, _limits.ReadAllAvailable):
            return to_json_offsets(latest)
        begin = from_json_offsets(start)
        opts = self.options
        max_rows = limit.max_rows if isinstance(limit, _limits.ReadMaxRows) else None
        min_rows = limit.min_rows if isinstance(limit, _limits.ReadMinRows) else opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None and self._delay_batch(min_rows, begin, latest):
            return to_json_offsets(begin)
        if max_rows is not None:
            latest = rate_limit(max_rows, begin, latest, lambda tp: self._bounds(tp).earliest)
        return to_json_offsets(latest)

    def _delay_batch(self, min_rows: int, begin: dict[TP, int], latest: dict[TP, int]) -> bool:
        """Kafka's ``delayBatch``: wait for ``min_rows`` pending offsets unless ``maxTriggerDelay`` passed."""
        now = int(time.time() * 1000)
        if now - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if total_new_offsets(begin, latest) < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """The latest offsets seen by the last ``latestOffset`` call (shown in query progress)."""
        return None if self._latest is None else to_json_offsets(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the target: this run reads what exists now and nothing appended later."""
        self._target = self._fetch_latest()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Input partitions for offsets ``start`` to ``end``, after the data-loss checks."""
        opts = self.options
        fail = opts.fail_on_data_loss
        begin, until = from_json_offsets(start), from_json_offsets(end)
        gone = sorted(set(begin) - set(until))
        if gone:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            report_data_loss(f"Set({names}) are gone. Some data may have been missed", fail)
        ranges = []
        for tp in sorted(until):
            hi = until[tp]
            try:
                earliest = self._bounds(tp).earliest
            except KeyError:  # the partition disappeared after latestOffset
                report_data_loss(f"Cannot find earliest offsets of Set({tp[0]}-{tp[1]})", fail)
                continue
            if tp in begin:
                lo = begin[tp]
            else:
                lo = earliest
                if earliest != 0:
                    report_data_loss(
                        f"Added partition {tp[0]}-{tp[1]} starts from {earliest} instead of 0. "
                        "Some data may have been missed",
                        fail,
                    )
            if hi < lo:
                report_data_loss(
                    f"Partition {tp[0]}-{tp[1]}'s offset was changed from {lo} to {hi}. This could be either "
                    "1) a user error that the start offset is set beyond available offset when starting "
                    "query, or 2) the topic-partition is deleted and re-created",
                    fail,
                )
                continue
            if lo < earliest:
                report_data_loss(
                    f"Cannot fetch offset {lo} of {tp[0]}-{tp[1]}: the earliest available offset is {earliest}",
                    fail,
                )
                lo = min(earliest, hi)
            ranges.append(OffsetRange(tp[0], tp[1], lo, hi))
        return [KafkaLogInputPartition(t) for t in make_tasks(self.dirs, ranges, opts)]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint (Kafka's source does not commit either)."""

    def stop(self) -> None:
        """Drop the cached partition views."""
        self._dirs = None

    # --- executors ----------------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one input partition (same path as batch reads)."""
        return read_input_partition(partition, self.options)


class RefusedStreamReader(KafkaLogStreamReader):
    """The reader of a streaming query whose options are invalid: every call raises the options error, and
    ``stop()`` does nothing (see :meth:`kafkalog.spark.source.KafkaLogDataSource.streamReader`)."""

    def __init__(self, error: ValueError) -> None:
        self.error = error

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error

    initialOffset = latestOffset = getDefaultReadLimit = reportLatestOffset = _refuse
    prepareForTriggerAvailableNow = partitions = commit = read = _refuse

    def stop(self) -> None:
        """Nothing to release."""
