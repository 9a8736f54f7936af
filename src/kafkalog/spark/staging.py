"""Executor side of the ``kafkalog`` sink: Arrow rows -> Kafka v2 record batches staged on disk per partition.

Format owned here — a *staged file* ``<data dir>/.kafkalog-spark/staging/<job>/<task>/<topic>-<partition>.batches``
is a valid Kafka log byte stream (what a ``.log`` segment holds) of magic-2 record batches, each with base
offset 0 (offsets are assigned at commit, when the driver appends the batch as partition leader and the
validator rewrites the base offset in place), producer id/epoch/sequence -1, partition leader epoch -1,
``CreateTime`` timestamps, the topic's codec (``compression.type``; the sink's ``kafka.compression.type`` for
``producer`` topics) and a CRC-32C over attributes..end. Bytes are exactly what
:class:`~kafkalog.records.MemoryRecordsBuilder` builds for the same records (tested): records are encoded by
the builder's own kernels (:mod:`kafkalog.records.kernels`), fed straight from the Arrow buffers, so no
Python object is made per row.

Rules applied per row, as Kafka's producer and sink do: the ``topic`` option overrides the column, a null
topic fails the task; a partition outside ``[0, partitions)`` fails; a null/missing partition goes through
Kafka's default partitioner (:func:`kafkalog.partitioner.partitions_for_keys` for keys, sticky round robin
for null keys, starting at the task's partition id); a missing/null timestamp is the staging time; a negative
timestamp, a null header key, a null key on a compacted topic, a CreateTime timestamp outside the topic's
``message.timestamp.{before,after}.max.ms`` window and a record larger than ``max.message.bytes`` fail the
task early (the commit re-checks them under the lock). Within a task, records keep their input order per
partition.

Staged files and task directories are created exclusively (``O_EXCL``): a name that exists already fails
the task instead of rewriting a file that a pending commit journal may name, and a failing task removes only
the directory it created itself. Task directory names carry a random suffix per task attempt, so a run
restarted after a crash (whose Spark task attempt ids start at 0 again) never reuses a previous run's names.

Batches fill up to the target size (``batchBytes``, default 1 MiB, capped so that the compressed batch stays
within ``max.message.bytes`` and ``segment.bytes``) across Arrow batches; each partition's open batch owns a
buffer of that size, and when the open buffers of a task exceed 64 MiB they are all written out. Finished
files are fsynced, then their directories; a task that fails removes its own directory (:meth:`TaskStager.abort`).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from crc32c import crc32c

from kafkalog.partitioner import partitions_for_keys
from kafkalog.records import Compression
from kafkalog.records.batch import HEADER, MAGIC_V2, RECORD_BATCH_OVERHEAD
from kafkalog.records.compression import compress
from kafkalog.records.framing import ATTRIBUTES_OFFSET, CRC_OFFSET
from kafkalog.records.kernels import record_body_sizes_kernel as _body_sizes
from kafkalog.records.kernels import write_records_kernel as _write
from kafkalog.spark.sink_layout import STAGED_SUFFIX, StagedFile, fsync_dir, staging_root
from kafkalog.spark.sink_options import (
    ColumnPlan,
    SinkError,
    SinkOptions,
    TopicMeta,
    load_topic_metadata,
    resolve_topic,
)

__all__ = [
    "STAGED_SUFFIX",
    "PartitionStager",
    "StagedFile",
    "StickyNullKeys",
    "TaskStager",
    "fsync_dir",
    "staging_root",
]

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

_OPEN_BUFFER_BUDGET: Final = 64 << 20
_EMPTY_U8: Final = np.zeros(1, dtype=np.uint8)
_EMPTY_I64: Final = np.zeros(0, dtype=np.int64)
_NULL_KEY_STICKY_RECORDS: Final = 1000


# --- Arrow columns -> flat arrays ---------------------------------------------------------------------------


@dataclass
class _Binary:
    """A binary/string column as the encoder wants it: shared data, per-row start and length (-1 = null)."""

    data: U8
    offsets: I64  # n + 1 entries, positions into data (ignoring nulls)
    lens: I64
    nulls: npt.NDArray[np.bool_] | None

    @property
    def pos(self) -> I64:
        return self.offsets[:-1]


def _binary(arr: pa.Array) -> _Binary:
    n = len(arr)
    bufs = arr.buffers()
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    dtype = np.int64 if large else np.int32
    offsets = np.frombuffer(bufs[1], dtype=dtype, count=arr.offset + n + 1)[arr.offset :].astype(np.int64)
    data = bufs[2]
    data_arr = np.frombuffer(data, dtype=np.uint8) if data is not None and data.size > 0 else _EMPTY_U8
    lens = np.diff(offsets)
    nulls = None
    if arr.null_count:
        nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
        lens[nulls] = -1
    return _Binary(data_arr, offsets, lens, nulls)


@dataclass
class _Headers:
    start: I64
    count: I64
    k_data: U8
    k_pos: I64
    k_len: I64
    v_data: U8
    v_pos: I64
    v_len: I64


def _no_headers(n: int) -> _Headers:
    zeros = np.zeros(n, dtype=np.int64)
    return _Headers(zeros, zeros, _EMPTY_U8, _EMPTY_I64, _EMPTY_I64, _EMPTY_U8, _EMPTY_I64, _EMPTY_I64)


def _headers(arr: pa.Array) -> _Headers:
    n = len(arr)
    if arr.null_count == n:
        return _no_headers(n)
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    count = np.diff(offsets)
    if arr.null_count:
        count[np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)] = 0
    if not count.any():
        return _no_headers(n)
    keys_arr, values_arr = arr.values.flatten()
    keys, values = _binary(keys_arr), _binary(values_arr)
    if keys.nulls is not None:
        used = np.zeros(len(keys.lens) + 1, dtype=np.int64)
        np.add.at(used, offsets[:-1][count > 0], 1)
        np.add.at(used, (offsets[:-1] + count)[count > 0], -1)
        if (keys.nulls & (np.cumsum(used)[:-1] > 0)).any():
            raise SinkError("invalid null header key found in headers (a header needs a key)")
    return _Headers(
        offsets[:-1].copy(),
        count,
        keys.data,
        keys.pos.copy(),
        keys.lens,
        values.data,
        values.pos.copy(),
        values.lens,
    )


_UNIT_MS: Final = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def _timestamps(arr: pa.Array | None, n: int, now_ms: int) -> I64:
    if arr is None:
        return np.full(n, now_ms, dtype=np.int64)
    mul, div = _UNIT_MS[arr.type.unit]
    raw = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=arr.offset + n)[arr.offset :]
    ms = raw * mul if mul != 1 else np.floor_divide(raw, div) if div != 1 else raw.copy()
    if arr.null_count:
        ms = np.where(np.asarray(arr.is_null().to_numpy(zero_copy_only=False)), now_ms, ms)
    return np.ascontiguousarray(ms, dtype=np.int64)


class StickyNullKeys:
    """Null-key partition assignment, vectorised: the exact sequence of
    :class:`kafkalog.partitioner.NullKeyPartitioner` (a sticky partition for ``sticky_records`` records,
    then the next one, round robin from ``start``)."""

    def __init__(self, num_partitions: int, sticky_records: int = _NULL_KEY_STICKY_RECORDS, start: int = 0):
        self.num_partitions = num_partitions
        self.sticky_records = sticky_records
        self._current = start % num_partitions
        self._used = 0

    def assign(self, count: int) -> npt.NDArray[np.int32]:
        """Partitions for the next ``count`` null-key records."""
        out = np.empty(count, dtype=np.int32)
        i = 0
        while i < count:
            if self._used >= self.sticky_records:
                self._current = (self._current + 1) % self.num_partitions
                self._used = 0
            take = min(self.sticky_records - self._used, count - i)
            out[i : i + take] = self._current
            self._used += take
            i += take
        return out


# --- one partition's batches ------------------------------------------------------------------------------


def _varint_len(values: I64) -> I64:
    zz = values.astype(np.uint64) << np.uint64(1)  # zig-zag of a non-negative int32
    out = np.ones(len(values), dtype=np.int64)
    for bound in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        out += zz >= np.uint64(bound)
    return out


class PartitionStager:
    """Accumulates one partition's records of one task into record batches and appends them to its staged file.

    :meth:`add` takes the rows as flat arrays (data buffers shared with Arrow, positions per row); a batch is
    written when the next record would not fit the target size.
    """

    def __init__(
        self,
        path: Path,
        *,
        compression: Compression,
        compression_level: int | None,
        target_bytes: int,
        max_batch_bytes: int,
    ) -> None:
        self.path = path
        self.compression = compression
        self.compression_level = compression_level
        self.max_batch_bytes = max_batch_bytes
        margin = 0 if compression is Compression.NONE else 64 + max_batch_bytes // 64
        self.hard_payload = max_batch_bytes - RECORD_BATCH_OVERHEAD - margin
        if self.hard_payload <= 0:
            raise SinkError(f"max.message.bytes {max_batch_bytes} leaves no room for a record batch")
        self.target_payload = max(1, min(target_bytes, self.hard_payload))
        self._buf: U8 | None = None
        self._pos = 0
        self._count = 0
        self._base_ts = 0
        self._max_ts = -1
        self._file: BinaryIO | None = None
        self.size = 0
        self.records = 0
        self.batches = 0
        self.min_timestamp = 2**63 - 1
        self.max_timestamp = -1
        self.null_keys = 0
        self.largest_batch = 0

    @property
    def open_bytes(self) -> int:
        """Bytes held by the open (not yet written) batch."""
        return self._pos

    def add(
        self,
        ts: I64,
        key: _Binary,
        value: _Binary,
        headers: _Headers,
        rows: I64 | None,
    ) -> None:
        """Append the records at ``rows`` (None: all) of the given columns."""
        if rows is None:
            t, k_pos, k_len, v_pos, v_len = ts, key.pos, key.lens, value.pos, value.lens
            h_start, h_count = headers.start, headers.count
        else:
            t, k_pos, k_len = ts[rows], key.pos[rows], key.lens[rows]
            v_pos, v_len = value.pos[rows], value.lens[rows]
            h_start, h_count = headers.start[rows], headers.count[rows]
        m = len(t)
        if m == 0:
            return
        self.min_timestamp = min(self.min_timestamp, int(t.min()))
        self.max_timestamp = max(self.max_timestamp, int(t.max()))
        self.null_keys += int(np.count_nonzero(k_len < 0))
        i = 0
        while i < m:
            if self._count == 0:
                self._base_ts = int(t[i])
            ts_delta = np.ascontiguousarray(t[i:] - self._base_ts)
            off_delta = np.arange(self._count, self._count + m - i, dtype=np.int64)
            sizes = np.empty(m - i, dtype=np.int64)
            _body_sizes(
                ts_delta, off_delta, k_len[i:], v_len[i:], h_start[i:], h_count[i:], headers.k_len,
                headers.v_len, sizes,
            )  # fmt: skip
            cum = np.cumsum(sizes + _varint_len(sizes))
            room = self.target_payload - self._pos
            if self._count == 0 and cum[0] > room:
                if cum[0] > self.hard_payload:
                    raise SinkError(
                        f"a record is {int(cum[0])} bytes when serialized, more than the topic's "
                        f"max.message.bytes ({self.max_batch_bytes}) allows in a batch; partition file {self.path.name}"
                    )
                room = int(cum[0])
            k = int(np.searchsorted(cum, room, side="right"))
            if k == 0:
                self._flush_batch()
                continue
            need = self._pos + int(cum[k - 1])
            if self._buf is None or len(self._buf) < need:
                grown = np.empty(max(need, self.target_payload), dtype=np.uint8)
                if self._buf is not None and self._pos:
                    grown[: self._pos] = self._buf[: self._pos]
                self._buf = grown
            written = _write(
                self._buf[self._pos :], ts_delta[:k], off_delta[:k], key.data, k_pos[i : i + k],
                k_len[i : i + k], value.data, v_pos[i : i + k], v_len[i : i + k], h_start[i : i + k],
                h_count[i : i + k], headers.k_data, headers.k_pos, headers.k_len, headers.v_data,
                headers.v_pos, headers.v_len, sizes[:k],
            )  # fmt: skip
            assert written == int(cum[k - 1])
            self._pos += written
            self._count += k
            self._max_ts = max(self._max_ts, int(t[i : i + k].max()))
            i += k
            if i < m:
                self._flush_batch()

    def _flush_batch(self) -> None:
        if self._count == 0 or self._buf is None:
            return
        payload: bytes | memoryview = memoryview(self._buf[: self._pos])  # type: ignore[arg-type]
        if self.compression is not Compression.NONE:
            payload = compress(self.compression, payload, self.compression_level)
        size = RECORD_BATCH_OVERHEAD + len(payload)
        if size > self.max_batch_bytes:
            raise SinkError(
                f"a {self.compression.kafka_name} batch of {self._count} records is {size} bytes, more than "
                f"max.message.bytes ({self.max_batch_bytes}); lower batchBytes"
            )
        header = bytearray(RECORD_BATCH_OVERHEAD)
        HEADER.pack_into(
            header, 0, 0, size - 12, -1, MAGIC_V2, 0, int(self.compression), self._count - 1, self._base_ts,
            self._max_ts, -1, -1, -1, self._count,
        )  # fmt: skip
        crc = crc32c(payload, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
        header[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc.to_bytes(4, "big")
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:  # created exclusively: a staged file that a commit journal may name is never rewritten
                self._file = open(self.path, "xb", buffering=0)  # noqa: SIM115 - closed in finish()/discard()
            except FileExistsError:
                raise SinkError(
                    f"staged file {self.path} already exists: staged files are never overwritten (another task "
                    "attempt or run used the same name)"
                ) from None
        self._file.write(header)
        self._file.write(payload)
        self.size += size
        self.records += self._count
        self.batches += 1
        self.largest_batch = max(self.largest_batch, size)
        self._pos = 0
        self._count = 0
        self._max_ts = -1

    def flush_open_batch(self) -> None:
        """Write the open batch now (to bound memory)."""
        self._flush_batch()

    def finish(self, data_dir: Path, topic: str, partition: int) -> StagedFile | None:
        """Write the open batch, fsync and close the file; None if no record was staged."""
        self._flush_batch()
        self._buf = None
        if self._file is None:
            return None
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        return StagedFile(
            topic=topic,
            partition=partition,
            path=os.path.relpath(self.path, data_dir),
            size=self.size,
            records=self.records,
            batches=self.batches,
            min_timestamp=self.min_timestamp,
            max_timestamp=self.max_timestamp,
            null_keys=self.null_keys,
            max_batch_bytes=self.largest_batch,
            compression=int(self.compression),
        )

    def discard(self) -> None:
        """Close the file without keeping anything (the task failed)."""
        self._buf = None
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None


# --- one task -----------------------------------------------------------------------------------------------


def _topic_batch_limits(meta: TopicMeta, options: SinkOptions) -> tuple[Compression, int | None, int, int]:
    codec = meta.config.target_compression
    if codec is None:
        codec = options.compression
    hard = min(meta.config.max_message_bytes, meta.config.segment_bytes)
    return codec, meta.config.compression_level(codec), options.batch_bytes, hard


class TaskStager:
    """Stages one Spark task's rows: groups them per (topic, partition) into :class:`PartitionStager` files.

    ``task_dir`` is this task attempt's own directory (created on the first staged batch). ``now_ms`` is the
    clock used for missing timestamps and the timestamp window check.
    """

    def __init__(
        self,
        options: SinkOptions,
        plan: ColumnPlan,
        task_dir: Path,
        *,
        task_index: int = 0,
        now_ms: Callable[[], int] | None = None,
        metadata: Mapping[str, TopicMeta] | None = None,
    ) -> None:
        self.options = options
        self.plan = plan
        self.data_dir = Path(options.path)
        self.task_dir = task_dir
        self.task_index = task_index
        self._now = now_ms or (lambda: int(time.time() * 1000))
        self._metadata = dict(metadata) if metadata is not None else None
        self._topics: dict[str, TopicMeta] = {}
        self._sticky: dict[str, StickyNullKeys] = {}
        self._stagers: dict[tuple[str, int], PartitionStager] = {}
        self._created_dir = False
        self.rows = 0

    # topic resolution, once per topic per task
    def _topic(self, topic: str) -> TopicMeta:
        meta = self._topics.get(topic)
        if meta is None:
            if self._metadata is None:
                self._metadata = load_topic_metadata(self.data_dir)
            meta = resolve_topic(topic, self._metadata, self.options, self.data_dir)
            self._topics[topic] = meta
        return meta

    def _ensure_task_dir(self) -> None:
        """Create this task attempt's directory exclusively (an existing one belongs to someone else)."""
        if self._created_dir:
            return
        self.task_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.task_dir.mkdir()
        except FileExistsError:
            raise SinkError(
                f"staging directory {self.task_dir} already exists: task directories are never reused"
            ) from None
        self._created_dir = True

    def _stager(self, topic: str, partition: int) -> PartitionStager:
        st = self._stagers.get((topic, partition))
        if st is None:
            self._ensure_task_dir()
            codec, level, target, hard = _topic_batch_limits(self._topic(topic), self.options)
            st = PartitionStager(
                self.task_dir / f"{topic}-{partition}{STAGED_SUFFIX}",
                compression=codec,
                compression_level=level,
                target_bytes=target,
                max_batch_bytes=hard,
            )
            self._stagers[(topic, partition)] = st
        return st

    def add_batches(self, batches: Iterable[pa.RecordBatch]) -> None:
        """Stage every batch of an iterator (what ``DataSourceArrowWriter.write`` receives)."""
        for batch in batches:
            self.add(batch)

    def add(self, batch: pa.RecordBatch) -> None:
        """Stage one Arrow batch of input rows."""
        n = batch.num_rows
        if n == 0:
            return
        plan = self.plan
        value = _binary(batch.column(plan.value))
        key = _binary(batch.column(plan.key)) if plan.key is not None else None
        if key is None:
            key = _Binary(_EMPTY_U8, np.zeros(n + 1, dtype=np.int64), np.full(n, -1, dtype=np.int64), None)
        headers = _headers(batch.column(plan.headers)) if plan.headers is not None else _no_headers(n)
        now = self._now()
        ts = _timestamps(batch.column(plan.timestamp) if plan.timestamp is not None else None, n, now)
        if (ts < 0).any():
            bad = int(ts[ts < 0][0])
            raise SinkError(f"invalid timestamp {bad}: record timestamps must be >= 0 (1970-01-01 or later)")

        # topics
        if self.options.topic is not None or plan.topic is None:
            assert self.options.topic is not None
            topic_names = [self.options.topic]
            topic_idx: npt.NDArray[np.int32] | None = None
        else:
            col = batch.column(plan.topic)
            if col.null_count:
                raise SinkError("null topic present in the data. Use the topic option for setting a topic.")
            encoded = pc.dictionary_encode(col)
            topic_names = [str(t) for t in encoded.dictionary.to_pylist()]
            topic_idx = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
            if len(topic_names) == 1:
                topic_idx = None

        # partitions
        given: npt.NDArray[np.int32] | None = None
        given_nulls: npt.NDArray[np.bool_] | None = None
        if plan.partition is not None:
            pcol = batch.column(plan.partition)
            if pcol.null_count < n:
                given = np.asarray(pc.fill_null(pcol, 0).to_numpy(zero_copy_only=False), dtype=np.int32)
                if pcol.null_count:
                    given_nulls = np.asarray(pcol.is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
        parts = np.empty(n, dtype=np.int32)
        for ti, topic in enumerate(topic_names):
            rows_t = None if topic_idx is None else np.flatnonzero(topic_idx == ti)
            self._assign_partitions(topic, rows_t, n, key, given, given_nulls, parts)
            meta = self._topic(topic)
            self._check_records(topic, meta, ts, key, rows_t, now)

        # group and stage
        group = parts.astype(np.int64)
        if topic_idx is not None:
            group += topic_idx.astype(np.int64) << np.int64(32)
        first = int(group[0])
        if (group == first).all():
            pieces: list[tuple[int, I64 | None]] = [(first, None)]
        else:
            order = np.argsort(group, kind="stable")
            ordered = group[order]
            cuts = np.flatnonzero(np.diff(ordered)) + 1
            starts = np.concatenate(([0], cuts))
            ends = np.concatenate((cuts, [n]))
            pieces = [(int(ordered[s]), order[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]
        for gid, rows in pieces:
            topic = topic_names[gid >> 32]
            partition = gid & 0xFFFFFFFF
            self._stager(topic, partition).add(ts, key, value, headers, rows)
        self.rows += n
        if sum(st.open_bytes for st in self._stagers.values()) > _OPEN_BUFFER_BUDGET:
            for st in self._stagers.values():
                st.flush_open_batch()

    def _assign_partitions(
        self,
        topic: str,
        rows: I64 | None,
        n: int,
        key: _Binary,
        given: npt.NDArray[np.int32] | None,
        given_nulls: npt.NDArray[np.bool_] | None,
        out: npt.NDArray[np.int32],
    ) -> None:
        num = self._topic(topic).partitions
        sel: Any = slice(None) if rows is None else rows
        if given is not None:
            g = given[sel]
            bad = (g < 0) | (g >= num)
            if given_nulls is not None:
                bad &= ~given_nulls[sel]
            if bad.any():
                raise SinkError(
                    f"invalid partition {int(g[bad][0])} for topic {topic!r}: it has {num} partitions (0..{num - 1})"
                )
            out[sel] = g
            if given_nulls is None:
                return
            need = np.flatnonzero(given_nulls) if rows is None else rows[given_nulls[rows]]
        else:
            need = np.arange(n, dtype=np.int64) if rows is None else rows
        if len(need) == 0:
            return
        lens = key.lens[need]
        has_key = lens >= 0
        if has_key.any():
            if len(need) == n:
                computed = partitions_for_keys(key.offsets, key.data, num, valid=has_key)
            else:
                sub_offsets = np.concatenate(([0], np.cumsum(np.maximum(lens, 0))))
                pos = key.pos[need]
                gathered = _gather(key.data, pos, np.maximum(lens, 0), int(sub_offsets[-1]))
                computed = partitions_for_keys(sub_offsets, gathered, num, valid=has_key)
            out[need] = computed
        nulls = np.flatnonzero(~has_key)
        if len(nulls):
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = self._sticky[topic] = StickyNullKeys(num, start=self.task_index)
            out[need[nulls]] = sticky.assign(len(nulls))

    def _check_records(
        self, topic: str, meta: TopicMeta, ts: I64, key: _Binary, rows: I64 | None, now: int
    ) -> None:
        cfg = meta.config
        t = ts if rows is None else ts[rows]
        if cfg.timestamp_type.kafka_name == "CreateTime":
            lo = now - cfg.message_timestamp_before_max_ms
            hi = now + cfg.message_timestamp_after_max_ms
            bad = (t < lo) | (t > hi)
            if bad.any():
                raise SinkError(
                    f"timestamp {int(t[bad][0])} is out of range for topic {topic!r}: it must be within "
                    f"[{lo}, {hi}] (message.timestamp.before.max.ms / message.timestamp.after.max.ms)"
                )
        if cfg.compact:
            lens = key.lens if rows is None else key.lens[rows]
            if (lens < 0).any():
                raise SinkError(f"compacted topic {topic!r} cannot accept a record without key")

    def finish(self) -> list[StagedFile]:
        """Write all open batches, fsync files and directories; the staged files in (topic, partition) order."""
        out: list[StagedFile] = []
        for (topic, partition), st in sorted(self._stagers.items()):
            staged = st.finish(self.data_dir, topic, partition)
            if staged is not None:
                out.append(staged)
        if out:
            fsync_dir(self.task_dir)
            fsync_dir(self.task_dir.parent)
            fsync_dir(self.task_dir.parent.parent)
        return out

    def abort(self) -> None:
        """Drop everything this task staged (its directory included, if this stager created it)."""
        for st in self._stagers.values():
            try:
                st.discard()
            except OSError:
                pass
        if self._created_dir:
            shutil.rmtree(self.task_dir, ignore_errors=True)


def _gather(data: U8, pos: I64, lens: I64, total: int) -> U8:
    """The bytes of rows (pos, lens) concatenated (for hashing a subset of keys)."""
    if total == 0:
        return _EMPTY_U8
    starts = np.repeat(pos - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    out: U8 = data[starts + np.arange(total, dtype=np.int64)]
    return out
