"""Kafka's ``RemoteLogManager``: copying rolled segments to remote storage, expiring them by total retention,
and reading them back (``RLMCopyTask``, ``RLMExpirationTask``, ``read``, ``findOffsetByTimestamp``).

Invariants owned here:

* **Copy order.** A segment is copied only once it is rolled and its last offset is below
  ``min(last stable offset, high watermark)``, in offset order, each as COPY_SEGMENT_STARTED (durable) →
  the RSM's upload (``.log``, ``.indexes``, manifest last) → COPY_SEGMENT_FINISHED (durable) →
  ``log.update_highest_offset_in_remote_storage(end)``. The local segment may be deleted by local retention
  only after that, so a crash anywhere loses nothing.
* **No orphans.** A COPY_SEGMENT_STARTED without FINISHED (a crash or a failed upload) and a
  DELETE_SEGMENT_STARTED without FINISHED are finished as deletes by :meth:`RemoteLogManager.cleanup_incomplete`
  (run when a partition starts and at the start of every copy pass): DELETE_SEGMENT_STARTED → the RSM's delete
  (manifest first) → DELETE_SEGMENT_FINISHED. The copy is then retried with a new segment id.
  A deletion of a partition's remote data cut short (DELETE_PARTITION_MARKED / STARTED without FINISHED:
  tiering turned off or the topic deleted, then a failure) is finished when the partition starts again,
  before its highest remote offset is restored; for a partition that no longer tiers it is finished by
  :meth:`RemoteLogManager.delete_partition` (the manager asks at open and after a failure,
  :meth:`TopicBasedRemoteLogMetadataManager.partitions_pending_deletion`).
* **Total retention** (``retention.ms``, ``retention.bytes`` over the local-only and remote bytes, the log start
  offset, segments whose epochs all precede the leader-epoch lineage) moves the log start offset first
  (``maybe_increment_log_start_offset(end + 1, "segment deletion")``, so no reader is sent to a segment being
  deleted), then deletes the segments as above: Kafka's order.
* **Failures.** A pass never raises to its scheduler and never takes the log dir offline: a storage failure
  stops the pass with one log line and the ``FailedRemoteCopyRequestsPerSec`` (or delete) metric, and the
  next pass retries. Reads raise :class:`~kafkalog.errors.RemoteStorageError` to their caller. Nor does
  :meth:`RemoteLogManager.stop_partition` with ``delete`` (Kafka's ``stopPartitions``): the partition stops,
  its segments are DELETE_SEGMENT_STARTED first, and every expiration pass retries the delete until done.
* **Metrics** are Kafka's: meters (:class:`~kafkalog.meter.Meter`: count and rates) for the ``*PerSec`` names,
  per partition and broker-wide, and gauges set by each pass.
* **Reads** (:class:`RemoteTierReader`) find the segment by the leader-epoch lineage and offset, position
  through the remote offset index (:class:`~kafkalog.tiering.index_cache.RemoteIndexCache`), fetch only the
  byte ranges needed (one ranged GET per read in the common case) and return whole batches of that one
  segment; a segment that expiration deleted after the lookup reads as None (the Log's
  ``OffsetOutOfRangeError``), not as a storage failure.
* **Copy quota.** ``remote.log.manager.copy.max.bytes.per.second`` bounds the bytes all partitions copy
  (:class:`~kafkalog.tiering.quota.RLMQuotaManager`). As Kafka's ``RLMCopyTask``, a pass waits before each
  segment while the quota is exceeded (re-checking at least every :data:`QUOTA_WAIT_MS`), then records the
  segment's bytes and copies it; the wait ends at once when the manager closes or the partition stops (the
  pass then ends without copying), and a segment is never cut.
* **Fetch quota and reader pool** (Kafka's ``fetchQuotaManager``, ``asyncRead``,
  ``remoteStorageReaderThreadPool``). :meth:`RemoteLogManager.async_read` runs a fetch's read of the remote tier
  (and :meth:`RemoteLogManager.async_offset_read` a ListOffsets lookup of it)
  on a :class:`~kafkalog.tiering.reader_pool.RemoteStorageThreadPool` of ``remote.log.reader.threads`` threads
  with at most ``remote.log.reader.max.pending.tasks`` waiting (past that it raises
  :class:`~kafkalog.errors.RejectedExecutionError` at once), and records the bytes each read returned in the
  fetch quota ``remote.log.manager.fetch.max.bytes.per.second`` (after the read, as Kafka's
  ``RemoteLogReader``). The caller (``kafkalog serve``'s Fetch) asks :meth:`RemoteLogManager.get_fetch_throttle_time_ms`
  first and, over the quota, skips the read and answers the partition empty (KIP-956), recording the throttle
  time in :attr:`RemoteLogManager.fetch_throttle_time_sensor`. Reads through ``Log.read`` (the embedded API,
  the CLI, Spark) are not client-driven: they run on the caller's thread and are neither throttled nor
  counted by the fetch quota, as Kafka's quota covers only the reads its ``ReplicaManager`` schedules.

The manager schedules :meth:`RemoteLogManager.copy_once` / :meth:`RemoteLogManager.expire_once` every
``remote.log.manager.task.interval.ms``; the passes of one partition take its lock, so a copy, an expiration
and a cleanup never interleave (reads take no such lock). The only threads of its own are the reader pool's,
started on the first :meth:`RemoteLogManager.async_read` and stopped by :meth:`RemoteLogManager.close`.
"""

from __future__ import annotations

import itertools
import logging
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from kafkalog.errors import KafkaError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.log.checkpoint import EpochEntry, leader_epoch_checkpoint
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.log.tiers import SEGMENT_DELETION, RemoteLogReader
from kafkalog.log.types import FetchIsolation
from kafkalog.meter import Meter, MeterSnapshot, combined
from kafkalog.records import MemoryRecords
from kafkalog.records.framing import (
    HEADER_SIZE_UP_TO_MAGIC,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    frame_magic,
)
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
)
from kafkalog.storage.segment import LogSegment
from kafkalog.storage.txn_index import AbortedTxn, collect_aborted_txns
from kafkalog.storage.types import FetchDataInfo, LogOffsetMetadata, TimestampAndOffset, fetch_data_info
from kafkalog.tiered.aiven import epochs_in_range
from kafkalog.tiered.view import is_within_lineage
from kafkalog.tiering.config import RemoteLogManagerConfig
from kafkalog.tiering.index_cache import RemoteIndexCache
from kafkalog.tiering.quota import RLMQuotaManager, ThrottleTimeSensor
from kafkalog.tiering.reader_pool import RemoteStorageThreadPool
from kafkalog.tiering.rlmm import TopicBasedRemoteLogMetadataManager
from kafkalog.tiering.rsm import AivenRemoteStorageManager, LogSegmentData, RemoteStorageManager
from kafkalog.time import SYSTEM_TIME, Time

__all__ = [
    "GAUGE_NAMES",
    "METER_NAMES",
    "METRIC_NAMES",
    "QUOTA_WAIT_MS",
    "READER_CLOSE_WAIT_S",
    "READ_METRIC_NAMES",
    "RemoteLogManager",
    "RemoteTierReader",
]

_log = logging.getLogger(__name__)
T = TypeVar("T")

#: Kafka's remote storage meters (``kafka.server:type=BrokerTopicMetrics,name=...``): each a
#: :class:`~kafkalog.meter.Meter` (count, mean and 1/5/15-minute rates), per partition and broker-wide.
METER_NAMES: Final = (
    "RemoteCopyBytesPerSec",
    "RemoteFetchBytesPerSec",
    "RemoteCopyRequestsPerSec",
    "RemoteFetchRequestsPerSec",
    "FailedRemoteCopyRequestsPerSec",
    "FailedRemoteFetchRequestsPerSec",
    "RemoteDeleteRequestsPerSec",
    "FailedRemoteDeleteRequestsPerSec",
)
#: Kafka's remote storage gauges (values as of the partition's last pass).
GAUGE_NAMES: Final = (
    "RemoteCopyLagBytes",
    "RemoteCopyLagSegments",
    "RemoteLogSizeBytes",
    "RemoteLogMetadataCount",
)
#: Every remote storage metric name; :meth:`RemoteLogManager.metrics` gives a meter's count, a gauge's value.
METRIC_NAMES: Final = (*METER_NAMES, *GAUGE_NAMES)
#: Longest single wait of a copy pass for the copy quota before it checks again (Kafka's ``quotaTimeout``).
QUOTA_WAIT_MS: Final = 1_000
#: The broker-wide metrics of remote reads for fetches and of the copy quota
#: (:meth:`RemoteLogManager.read_metrics`): Kafka's ``RemoteLogManager`` sensors ``remote-fetch-throttle-time``
#: and ``remote-copy-throttle-time`` (avg, max in ms) and the count of fetches / copy waits they throttled,
#: the reader pool's ``RemoteLogReaderTaskQueueSize``, and the counts of Kafka's
#: ``DelayedRemoteFetchMetrics`` / ``DelayedRemoteListOffsetsMetrics`` ``ExpiresPerSec`` meters (waits that
#: ran out: ``remote.fetch.max.wait.ms``, ``remote.list.offsets.request.timeout.ms``).
READ_METRIC_NAMES: Final = (
    "remote-fetch-throttle-time-avg",
    "remote-fetch-throttle-time-max",
    "remote-fetch-throttle-count",
    "remote-copy-throttle-time-avg",
    "remote-copy-throttle-time-max",
    "remote-copy-throttle-count",
    "RemoteLogReaderTaskQueueSize",
    "DelayedRemoteFetchExpiresPerSec",
    "DelayedRemoteListOffsetsExpiresPerSec",
)
#: How long :meth:`RemoteLogManager.close` waits for the reader threads' running reads, all of them together.
READER_CLOSE_WAIT_S: Final = 10.0
#: Bytes fetched at least per ranged read of a remote ``.log`` (a batch header plus some batches).
_MIN_FETCH_BYTES: Final = 64 * 1024
_I32 = struct.Struct(">i")
#: Header bytes that say a v2 batch's size and offsets (through ``lastOffsetDelta``).
_HEADER_BYTES: Final = LAST_OFFSET_DELTA_OFFSET + 4


def _batch_header(buf: bytes | bytearray, pos: int, size_limit: int) -> tuple[int, int, int, int]:
    """``(size, base offset, last offset, leader epoch)`` from the header of the entry at ``buf[pos]`` (its
    first 27 bytes, or 17 for a legacy entry), as ``next_frame`` frames it: a size below 14 or past
    ``size_limit`` (the segment's end) is corrupt data."""
    length = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    if length < RECORD_OVERHEAD_V0 or LOG_OVERHEAD + length > size_limit:
        raise RemoteStorageError(f"corrupt remote segment data at position {pos}: batch length {length}")
    base = int.from_bytes(buf[pos : pos + 8], "big", signed=True)
    if frame_magic(buf, pos) >= 2:
        last = base + _I32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]
        epoch = _I32.unpack_from(buf, pos + PARTITION_LEADER_EPOCH_OFFSET)[0]
        return LOG_OVERHEAD + length, base, last, epoch
    return LOG_OVERHEAD + length, base, base, -1  # a legacy entry's offset is its last offset


@dataclass
class _PartitionState:
    tip: TopicIdPartition
    meters: dict[str, Meter]
    gauges: dict[str, int] = field(default_factory=lambda: dict.fromkeys(GAUGE_NAMES, 0))
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: held by every pass (copy, expiration, cleanup): a partition's passes never interleave
    pass_lock: threading.RLock = field(default_factory=threading.RLock)


class _SegmentWindow:
    """The bytes of one remote segment fetched so far from ``start``, extended with ranged reads."""

    def __init__(
        self,
        rlm: RemoteLogManager,
        state: _PartitionState,
        md: RemoteLogSegmentMetadata,
        start: int,
        step: int,
    ) -> None:
        self._rlm = rlm
        self._state = state
        self._md = md
        self.start = start
        #: the bytes fetched: the first GET's buffer as it came (no copy; one GET is the common case), a
        #: bytearray once a second GET extends it
        self.data: bytes | bytearray = b""
        #: bytes fetched at least when the window must grow (a read lowers it to what it can still use)
        self.step = max(step, _MIN_FETCH_BYTES)

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def ensure(self, position: int) -> bool:
        """Hold the bytes up to ``position`` (exclusive); False when the segment ends before it."""
        size = self._md.segment_size_in_bytes
        while self.end < min(position, size):
            want = min(size, max(position, self.end + self.step))
            chunk = self._rlm._fetch_bytes(  # noqa: SLF001 (the window is the manager's own helper)
                self._state, self._md, self.end, want - 1
            )
            if not chunk:
                return False
            if not self.data:
                self.data = chunk
            else:
                if not isinstance(self.data, bytearray):
                    self.data = bytearray(self.data)
                self.data += chunk
        return self.end >= position

    def batches(self) -> Iterator[tuple[int, int, int, int, int]]:
        """``(position, size, base offset, last offset, epoch)`` of each batch from ``start``, read from its
        header alone: a caller that wants the batch calls :meth:`ensure` for its end (a torn tail, which a
        rolled segment never has, ends the walk)."""
        pos = self.start
        segment_size = self._md.segment_size_in_bytes
        while True:
            self.ensure(pos + _HEADER_BYTES)
            rel = pos - self.start
            if len(self.data) - rel < _HEADER_BYTES and (
                len(self.data) - rel <= HEADER_SIZE_UP_TO_MAGIC or frame_magic(self.data, rel) >= 2
            ):
                return
            size, base, last, epoch = _batch_header(self.data, rel, segment_size - pos)
            yield pos, size, base, last, epoch
            pos += size

    def slice(self, first: int, end: int) -> bytes:
        """``[first, end)`` of the segment as bytes: one copy (none when it is the whole window)."""
        lo, hi = first - self.start, end - self.start
        if lo == 0 and hi == len(self.data) and isinstance(self.data, bytes):
            return self.data
        with memoryview(self.data) as view:
            return bytes(view[lo:hi])


class RemoteTierReader:
    """The :class:`~kafkalog.log.tiers.RemoteLogReader` of one log: reads below its local log start offset."""

    def __init__(self, rlm: RemoteLogManager, log: Log) -> None:
        self._rlm = rlm
        self._log = log

    def __repr__(self) -> str:
        return f"RemoteTierReader({self._log.topic_partition})"

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int, min_one_message: bool, read_committed: bool
    ) -> FetchDataInfo | None:
        """Whole batches of the remote segment holding ``fetch_offset`` (None: no remote segment holds it)."""
        return self._rlm.read(self._log, fetch_offset, max_bytes, max_offset, min_one_message, read_committed)

    def find_offset_by_timestamp(self, target_timestamp: int, start_offset: int) -> TimestampAndOffset | None:
        """The first remote record at or after ``start_offset`` with a timestamp ≥ ``target_timestamp``."""
        return self._rlm.find_offset_by_timestamp(self._log, target_timestamp, start_offset)


def topic_id_partition(log: Log, topic_id: uuid.UUID | Uuid | None = None) -> TopicIdPartition:
    """Kafka's ``TopicIdPartition`` of a log (``topic_id`` defaults to the log's own)."""
    tid = topic_id if topic_id is not None else log.topic_id
    if tid is None:
        raise RemoteStorageError(f"{log.topic_partition} has no topic id: it cannot be tiered")
    kid = tid if isinstance(tid, Uuid) else Uuid.from_bytes(tid.bytes)
    tp = log.topic_partition
    return TopicIdPartition(kid, tp.topic, tp.partition)


class RemoteLogManager:
    """Kafka's ``RemoteLogManager`` over an RSM and the topic-based RLMM (see the module docstring)."""

    def __init__(
        self,
        rsm: RemoteStorageManager,
        rlmm: TopicBasedRemoteLogMetadataManager,
        config: RemoteLogManagerConfig | None = None,
        time: Time | None = None,
        quota_wait: Callable[[int], object] | None = None,
    ) -> None:
        """``quota_wait(ms)`` is how a copy pass waits for the copy quota (default: up to ``ms`` or until
        :meth:`close`; tests pass one advancing a mock clock)."""
        self.rsm = rsm
        self.rlmm = rlmm
        self.config = config or RemoteLogManagerConfig()
        self.time = time or SYSTEM_TIME
        self.index_cache = RemoteIndexCache(rsm, self.config.remote_log_index_file_cache_total_size_bytes)
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        #: Kafka's all-topics meters (every partition's events, stopped partitions' included)
        self._all_meters = {name: Meter(self.time) for name in METER_NAMES}
        #: stopped partitions whose remote delete failed (retried by every expiration pass)
        self._pending_deletes: dict[TopicPartition, _PartitionState] = {}
        self._lock = threading.Lock()
        #: set by :meth:`close`: ends every quota wait at once
        self._closing = threading.Event()
        #: orders the quota check and record of concurrent passes (Kafka's ``copyQuotaManagerLock``)
        self._quota_lock = threading.Lock()
        self._quota_wait = quota_wait or (lambda ms: self._closing.wait(ms / 1000))
        cfg = self.config
        self.copy_quota = RLMQuotaManager(
            cfg.remote_log_manager_copy_max_bytes_per_second,
            cfg.remote_log_manager_copy_quota_window_num,
            cfg.remote_log_manager_copy_quota_window_size_seconds,
            self.time,
        )
        #: Kafka's ``rlmFetchQuotaManager``: bytes remote reads returned to fetches
        self.fetch_quota = RLMQuotaManager(
            cfg.remote_log_manager_fetch_max_bytes_per_second,
            cfg.remote_log_manager_fetch_quota_window_num,
            cfg.remote_log_manager_fetch_quota_window_size_seconds,
            self.time,
        )
        #: Kafka's ``fetchThrottleTimeSensor`` (``remote-fetch-throttle-time``)
        self.fetch_throttle_time_sensor = ThrottleTimeSensor(self.time)
        #: Kafka's ``copyThrottleTimeSensor`` (``remote-copy-throttle-time``): each wait of a copy pass for the
        #: copy quota records the throttle time it waits out
        self.copy_throttle_time_sensor = ThrottleTimeSensor(self.time)
        #: Kafka's ``remoteStorageReaderThreadPool``, started by the first :meth:`async_read`
        self._reader_pool: RemoteStorageThreadPool | None = None
        #: Kafka's ``DelayedRemoteFetchMetrics`` / ``DelayedRemoteListOffsetsMetrics`` ``ExpiresPerSec``:
        #: marked by ``serve`` when a wait for remote reads runs out
        self.delayed_remote_fetch_expires = Meter(self.time)
        self.delayed_remote_list_offsets_expires = Meter(self.time)

    def __repr__(self) -> str:
        return f"RemoteLogManager({self.rsm!r}, {len(self._partitions)} partitions)"

    @classmethod
    def from_config(
        cls, config: RemoteLogManagerConfig, log_for_partition: Callable[[int], Log], time: Time | None = None
    ) -> RemoteLogManager:
        """The manager's whole remote tier from its config: an :class:`AivenRemoteStorageManager` over
        ``rsm.config.storage.url`` and a :class:`TopicBasedRemoteLogMetadataManager` over the
        ``__remote_log_metadata`` Logs ``log_for_partition`` opens (no I/O until first used)."""
        rsm = AivenRemoteStorageManager.from_config(config.rsm)
        rlmm = TopicBasedRemoteLogMetadataManager(
            log_for_partition, config.remote_log_metadata_topic_num_partitions
        )
        return cls(rsm, rlmm, config, time)

    # --- partitions ---------------------------------------------------------------------------------------
    def on_leadership_change(self, log: Log, topic_id: uuid.UUID | Uuid | None = None) -> None:
        """Start managing ``log`` (Kafka's ``onLeadershipChange`` for a leader)."""
        self.start_partition(log, topic_id)

    def start_partition(self, log: Log, topic_id: uuid.UUID | Uuid | None = None) -> TopicIdPartition:
        """Load the partition's metadata, restore the log's highest offset in remote storage, and clean up what
        a crash left half done."""
        tip = topic_id_partition(log, topic_id)
        state = self._new_state(tip)
        with self._lock:
            self._partitions[log.topic_partition] = state
        self.rlmm.on_partition_leadership_changes({tip})
        if self.rlmm.remote_partition_delete_metadata(tip) is not None:
            # a deletion of its remote data (tiering turned off) was cut short: finish it first, or the highest
            # offset restored below would count the segments it still deletes as copied
            self._delete_remote_partition(state)
        highest = self.find_highest_remote_offset(log)
        if highest > log.highest_offset_in_remote_storage:
            log.update_highest_offset_in_remote_storage(highest)
        self.cleanup_incomplete(log)
        return tip

    def stop_partition(self, tp: TopicPartition, delete: bool = False) -> None:
        """Stop managing ``tp``; with ``delete`` its remote segments and metadata go too (Kafka's
        ``stopPartitions`` with ``deleteRemoteLog``).

        As Kafka's, a failure of the delete (storage down) never fails the stop: it is logged (one ERROR
        line) and counted in ``FailedRemoteDeleteRequestsPerSec``, and the partition stops all the same. Its
        segments are then marked DELETE_SEGMENT_STARTED in ``__remote_log_metadata`` (Kafka's first step), and
        the delete is retried by :meth:`retry_partition_deletes` (run at the start of every expiration pass)
        until storage answers, so it leaves no orphan behind."""
        with self._lock:
            state = self._partitions.pop(tp, None)
        if state is None:
            return
        if delete:
            with state.pass_lock:  # a running pass of the partition ends first (it sees it is stopped)
                if self.rlmm.remote_partition_delete_metadata(state.tip) is None:  # not marked by the caller
                    self.mark_partition_deleted(state.tip)  # durable: a crash from here on is resumed at open
                try:
                    self._delete_remote_partition(state)
                except Exception as exc:
                    self._count(state, "FailedRemoteDeleteRequestsPerSec")
                    with self._lock:
                        self._pending_deletes[tp] = state
                    _log.error(
                        "Error while stopping the partition %s: deleting its remote log failed, retrying in the "
                        "next expiration pass: %s",
                        tp,
                        exc,
                    )
                    return
        self.rlmm.on_stop_partitions({state.tip})

    def _delete_remote_partition(self, state: _PartitionState) -> None:
        """Kafka's ``deleteRemoteLogPartition``: DELETE_PARTITION_MARKED/STARTED, every segment
        DELETE_SEGMENT_STARTED, the RSM's deletes, every segment DELETE_SEGMENT_FINISHED, then
        DELETE_PARTITION_FINISHED. Repeating it after a failure finishes what the failed one began."""
        tip = state.tip
        broker = self.config.broker_id
        marked = self.rlmm.remote_partition_delete_metadata(tip)
        steps = {
            None: (
                RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
            ),
            RemotePartitionDeleteState.DELETE_PARTITION_MARKED: (
                RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
            ),
            RemotePartitionDeleteState.DELETE_PARTITION_STARTED: (),
        }[None if marked is None else marked.state]
        for step in steps:
            self.rlmm.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(tip, step, self.time.milliseconds(), broker)
            )
        segments = list(self.rlmm.list_remote_log_segments(tip))
        for md in segments:
            if md.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                self._publish_segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        for md in segments:
            self._count(state, "RemoteDeleteRequestsPerSec")
            self.index_cache.remove(md.remote_log_segment_id.id)
            self.rsm.delete_log_segment_data(md)
        for md in segments:
            self._publish_segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
        self.rlmm.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(
                tip, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED, self.time.milliseconds(), broker
            )
        )

    def pending_partition_deletes(self) -> list[TopicPartition]:
        """Stopped partitions whose remote delete failed and is still to be retried."""
        with self._lock:
            return sorted(self._pending_deletes)

    def retry_partition_deletes(self) -> int:
        """Retry the remote deletes of stopped partitions that failed (see :meth:`stop_partition`); returns how
        many finished (never raises)."""
        with self._lock:
            pending = list(self._pending_deletes.items())
        done = 0
        for tp, state in pending:
            with state.pass_lock:
                try:
                    self._delete_remote_partition(state)
                except Exception as exc:
                    self._count(state, "FailedRemoteDeleteRequestsPerSec")
                    _log.warning(
                        "Failed to delete the remote log of stopped partition %s, retrying: %s", tp, exc
                    )
                    continue
            with self._lock:
                if self._pending_deletes.get(tp) is state:
                    del self._pending_deletes[tp]
            self.rlmm.on_stop_partitions({state.tip})
            _log.info("Deleted the remote log of stopped partition %s", tp)
            done += 1
        return done

    def mark_partition_deleted(self, tip: TopicIdPartition) -> None:
        """Publish DELETE_PARTITION_MARKED for ``tip`` (durable on return; Kafka's ``stopPartitions`` marks
        before the deletion runs): a deletion cut short after this is found again at the next start
        (:meth:`TopicBasedRemoteLogMetadataManager.partitions_pending_deletion`) and finished."""
        self.rlmm.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(
                tip,
                RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                self.time.milliseconds(),
                self.config.broker_id,
            )
        )

    def delete_partition(self, tip: TopicIdPartition) -> None:
        """Delete ``tip``'s remote segments and metadata (Kafka's ``deleteRemoteLogPartition``), stopping it
        first if it is managed; also for a partition never started here (a deleted topic's, whose deletion a
        crash or a storage failure cut short). Raises as the deletion does, leaving it pending (marked) for
        the next start."""
        tp = TopicPartition(tip.topic, tip.partition)
        with self._lock:
            state = self._partitions.get(tp)
            if state is not None and state.tip == tip:
                del self._partitions[tp]
            else:
                state = self._new_state(tip)
        if self.rlmm.remote_partition_delete_metadata(tip) is None:
            self.mark_partition_deleted(tip)
        self._delete_remote_partition(state)

    def cancel_copies(self) -> None:
        """The first step of closing: every copy pass ends (a quota wait at once, the pass before its next
        segment) and an upload under way is cancelled before its next chunk, its multipart upload aborted (the
        RSM's ``cancel_copies``, when it has one). Its COPY_SEGMENT_STARTED is cleaned up at the next start."""
        self._closing.set()
        cancel = getattr(self.rsm, "cancel_copies", None)
        if callable(cancel):
            cancel()

    def close(self) -> None:
        """Forget every partition, the cached indexes, and close the RSM and the RLMM (not their Logs); a copy
        pass waiting for the copy quota ends at once, an upload under way is cancelled (:meth:`cancel_copies`),
        the reader pool refuses new reads, cancels the waiting ones and its threads end after their running read
        (waited for up to :data:`READER_CLOSE_WAIT_S` in all)."""
        self.cancel_copies()
        with self._lock:
            self._partitions.clear()
        self.stop_readers(READER_CLOSE_WAIT_S)
        self.index_cache.clear()
        self.rsm.close()
        self.rlmm.close()

    def _state(self, log: Log) -> _PartitionState:
        state = self._partitions.get(log.topic_partition)
        if state is None:
            raise RemoteStorageError(f"{log.topic_partition} is not managed by the remote log manager")
        return state

    def reader_for(self, log: Log) -> RemoteLogReader:
        """The reader (a :class:`RemoteTierReader`) the manager passes to ``log.set_remote_log_reader``."""
        self._state(log)
        return RemoteTierReader(self, log)

    def _new_state(self, tip: TopicIdPartition) -> _PartitionState:
        return _PartitionState(tip, {name: Meter(self.time) for name in METER_NAMES})

    def partitions(self) -> list[TopicPartition]:
        """The partitions the manager manages now, sorted."""
        with self._lock:
            return sorted(self._partitions)

    def _states(self, tp: TopicPartition | None) -> list[_PartitionState]:
        with self._lock:
            if tp is None:
                return list(self._partitions.values())
            return [self._partitions[tp]] if tp in self._partitions else []

    def meters(self, tp: TopicPartition | None = None) -> dict[str, MeterSnapshot]:
        """Kafka's remote meters (:data:`METER_NAMES`) now: of one managed partition (zero if it is not), or
        broker-wide (Kafka's all-topics meters: every partition since the manager started, stopped ones
        included)."""
        if tp is None:
            return {name: meter.snapshot() for name, meter in self._all_meters.items()}
        states = self._states(tp)
        return {name: combined(st.meters[name].snapshot() for st in states) for name in METER_NAMES}

    def metrics(self, tp: TopicPartition | None = None) -> dict[str, int]:
        """Every remote metric of :data:`METRIC_NAMES` as one number: a meter's count (see :meth:`meters` for
        its rates) and a gauge's value, of one partition or broker-wide (gauges summed over the managed
        partitions)."""
        out = {name: snap.count for name, snap in self.meters(tp).items()}
        out.update(self.gauges(tp))
        return out

    def gauges(self, tp: TopicPartition | None = None) -> dict[str, int]:
        """Kafka's remote gauges (:data:`GAUGE_NAMES`) of one partition, or summed over the managed ones."""
        out = dict.fromkeys(GAUGE_NAMES, 0)
        for state in self._states(tp):
            with state.lock:
                for k, v in state.gauges.items():
                    out[k] += v
        return out

    def _count(self, state: _PartitionState, name: str, n: int = 1) -> None:
        state.meters[name].mark(n)
        self._all_meters[name].mark(n)

    def _set(self, state: _PartitionState, name: str, value: int) -> None:
        with state.lock:
            state.gauges[name] = value

    # --- offsets ------------------------------------------------------------------------------------------
    def find_highest_remote_offset(self, log: Log) -> int:
        """Kafka's ``findHighestRemoteOffset``: the highest copied offset along the log's epoch lineage (-1)."""
        tip = self._state(log).tip
        cache = log.leader_epoch_cache
        entry = cache.latest_entry
        while entry is not None:
            epoch = entry.epoch
            highest = self.rlmm.highest_offset_for_epoch(tip, epoch)
            if highest is not None:
                _, end_offset = cache.end_offset_for(epoch, log.log_end_offset)
                return end_offset - 1 if end_offset <= highest else highest
            entry = cache.previous_entry(epoch)
        return -1

    def _lineage(self, log: Log) -> dict[int, int]:
        return {e.epoch: e.start_offset for e in log.leader_epoch_cache.epoch_entries}

    # --- cleanup ------------------------------------------------------------------------------------------
    def cleanup_incomplete(self, log: Log) -> int:
        """Delete every segment left COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED; returns how many. A
        storage failure is logged and counted (the next pass retries)."""
        state = self._state(log)
        try:
            with state.pass_lock:
                return self._cleanup(state)
        except Exception as exc:  # the scheduler must never see it
            self._failed(
                state, "FailedRemoteDeleteRequestsPerSec", "clean up incomplete segments of", log, exc
            )
            return 0

    def _cleanup(self, state: _PartitionState) -> int:
        done = 0
        incomplete = (
            RemoteLogSegmentState.COPY_SEGMENT_STARTED,
            RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
        )
        for md in list(self.rlmm.list_remote_log_segments(state.tip)):
            if md.state in incomplete:
                _log.info(
                    "Cleaning up incomplete remote segment %s of %s (%s)",
                    md.remote_log_segment_id.id,
                    state.tip,
                    md.state.name,
                )
                self._delete_segment(state, md)
                done += 1
        return done

    def _publish_segment_state(self, md: RemoteLogSegmentMetadata, target: RemoteLogSegmentState) -> None:
        """Publish ``md``'s move to ``target`` (durable on return), its custom metadata kept."""
        self.rlmm.update_remote_log_segment_metadata(
            RemoteLogSegmentMetadataUpdate(
                md.remote_log_segment_id,
                self.time.milliseconds(),
                md.custom_metadata,
                target,
                self.config.broker_id,
            )
        )

    def _delete_segment(self, state: _PartitionState, md: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED → the RSM's delete → DELETE_SEGMENT_FINISHED (Kafka's ``deleteRemoteLogSegment``)."""
        if md.state is not RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            self._publish_segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
        self._count(state, "RemoteDeleteRequestsPerSec")
        self.index_cache.remove(md.remote_log_segment_id.id)
        self.rsm.delete_log_segment_data(md)
        self._publish_segment_state(md, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)

    def _failed(self, state: _PartitionState, metric: str, what: str, log: Log, exc: BaseException) -> None:
        self._count(state, metric)
        if isinstance(exc, (KafkaError, OSError)):
            _log.warning("Failed to %s %s, retrying in the next pass: %s", what, log.topic_partition, exc)
        else:
            _log.error("Failed to %s %s, retrying in the next pass", what, log.topic_partition, exc_info=exc)

    # --- copy ---------------------------------------------------------------------------------------------
    def candidate_log_segments(self, log: Log, from_offset: int) -> list[tuple[LogSegment, int]]:
        """Kafka's ``candidateLogSegments``: ``(segment, next segment's base offset)`` of every rolled segment
        with offsets at or above ``from_offset`` whose last offset is below ``min(LSO, high watermark)``."""
        limit = min(log.last_stable_offset, log.high_watermark)
        segments = log.segments
        out: list[tuple[LogSegment, int]] = []
        for seg, nxt in itertools.pairwise(segments):
            next_base = nxt.base_offset
            if next_base <= from_offset or next_base - 1 < seg.base_offset:
                continue  # already copied, or an empty segment
            if next_base > limit:
                break
            out.append((seg, next_base))
        return out

    def copy_once(self, log: Log) -> int:
        """One pass of Kafka's ``RLMCopyTask``; returns how many segments were copied (never raises)."""
        state = self._partitions.get(log.topic_partition)
        if state is None or not log.remote_log_enabled or log.config.remote_log_copy_disable:
            return 0
        copied = 0
        state.pass_lock.acquire()
        try:
            self._cleanup(state)  # what a failed or crashed copy left (a failure here ends the pass)
            from_offset = max(log.highest_offset_in_remote_storage + 1, log.local_log_start_offset)
            candidates = self.candidate_log_segments(log, from_offset)
            for seg, next_base in candidates:
                if not self._await_copy_quota(log, state, seg.size):
                    break  # the manager closes or the partition stopped
                self._copy_segment(log, state, seg, next_base)
                copied += 1
        except Exception as exc:
            if self._closing.is_set():  # cancelled by close: not a storage failure
                _log.info("Copy of a segment of %s cancelled by close: %s", log.topic_partition, exc)
            else:
                self._failed(state, "FailedRemoteCopyRequestsPerSec", "copy log segments of", log, exc)
        finally:
            state.pass_lock.release()
            if not self._cancelled(log, state):  # (a closed manager's metadata is not replayed again)
                self._update_lag(log, state)
        return copied

    def _cancelled(self, log: Log, state: _PartitionState) -> bool:
        """Kafka's ``isCancelled`` of a copy task: the manager closes or stopped managing the partition."""
        return self._closing.is_set() or self._partitions.get(log.topic_partition) is not state

    def _await_copy_quota(self, log: Log, state: _PartitionState, size: int) -> bool:
        """Kafka's wait in ``copyLogSegmentsToRemote``: until the copy quota allows, then record ``size``
        bytes (before the copy, as Kafka does). False, without recording, when the pass is cancelled."""
        cfg = self.config
        quota = self.copy_quota
        if (
            quota.quota_bytes_per_second != cfg.remote_log_manager_copy_max_bytes_per_second
            or quota.num_windows != cfg.remote_log_manager_copy_quota_window_num
            or quota.window_size_ms != cfg.remote_log_manager_copy_quota_window_size_seconds * 1000
        ):  # a changed config (Kafka's updateCopyQuota)
            quota.update_quota(
                cfg.remote_log_manager_copy_max_bytes_per_second,
                cfg.remote_log_manager_copy_quota_window_num,
                cfg.remote_log_manager_copy_quota_window_size_seconds,
            )
        while True:
            if self._cancelled(log, state):
                return False
            with self._quota_lock:
                throttle_ms = quota.get_throttle_time_ms()
                if throttle_ms <= 0:
                    quota.record(size)
                    return True
            self.copy_throttle_time_sensor.record(throttle_ms)
            _log.debug(
                "Quota exceeded for copying log segments of %s, waiting %d ms for the quota to be available",
                log.topic_partition,
                throttle_ms,
            )
            self._quota_wait(min(throttle_ms, QUOTA_WAIT_MS))

    def _copy_segment(self, log: Log, state: _PartitionState, seg: LogSegment, next_base: int) -> None:
        end = next_base - 1
        entries = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.epoch_entries]
        epochs = epochs_in_range(entries, seg.base_offset, end)
        if not epochs:
            raise RemoteStorageError(
                f"segment {seg.base_offset} of {log.topic_partition} has no leader epoch: it cannot be copied"
            )
        log.flush(next_base)  # the files copied are the durable ones
        checkpoint = leader_epoch_checkpoint(Path("."))
        epoch_bytes = checkpoint.format([EpochEntry(e, o) for e, o in entries if o < next_base])
        segment_id = RemoteLogSegmentId(state.tip, Uuid.random_uuid())
        started = RemoteLogSegmentMetadata(
            segment_id,
            seg.base_offset,
            end,
            seg.largest_timestamp(),
            self.config.broker_id,
            self.time.milliseconds(),
            seg.size,
            tuple(epochs.items()),
        )
        self.rlmm.add_remote_log_segment_metadata(started)
        txn_path = seg.txn_index.path
        data = LogSegmentData(
            log_segment=seg.log.path,
            offset_index=seg.offset_index.path,
            time_index=seg.time_index.path,
            transaction_index=txn_path if txn_path.exists() and txn_path.stat().st_size > 0 else None,
            producer_snapshot=log.producer_state.fetch_snapshot(next_base),
            leader_epoch_index=epoch_bytes,
        )
        self._count(state, "RemoteCopyRequestsPerSec")
        custom = self.rsm.copy_log_segment_data(started, data)
        self.rlmm.update_remote_log_segment_metadata(
            RemoteLogSegmentMetadataUpdate(
                segment_id,
                self.time.milliseconds(),
                custom,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                self.config.broker_id,
            )
        )
        log.update_highest_offset_in_remote_storage(end)
        self._count(state, "RemoteCopyBytesPerSec", seg.size)
        _log.info(
            "Copied segment %d-%d of %s to remote storage as %s",
            seg.base_offset,
            end,
            log.topic_partition,
            segment_id.id,
        )

    def _update_lag(self, log: Log, state: _PartitionState) -> None:
        try:
            highest = log.highest_offset_in_remote_storage
            pending = [s for s in log.segments[:-1] if s.base_offset > highest]
            self._set(state, "RemoteCopyLagSegments", len(pending))
            self._set(state, "RemoteCopyLagBytes", sum(s.size for s in pending))
            finished = [
                md
                for md in self.rlmm.list_remote_log_segments(state.tip)
                if md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ]
            self._set(state, "RemoteLogSizeBytes", sum(md.segment_size_in_bytes for md in finished))
            self._set(state, "RemoteLogMetadataCount", len(finished))
        except Exception:  # metrics never fail a pass
            _log.debug("could not update remote metrics of %s", log.topic_partition, exc_info=True)

    # --- expiration ---------------------------------------------------------------------------------------
    def expire_once(self, log: Log) -> int:
        """One pass of Kafka's ``RLMExpirationTask``; returns how many remote segments were deleted (never
        raises)."""
        if self._pending_deletes:
            self.retry_partition_deletes()
        state = self._partitions.get(log.topic_partition)
        if state is None or not log.remote_log_enabled:
            return 0
        deleted = 0
        state.pass_lock.acquire()
        try:
            to_delete, new_start = self._expired_segments(log, state)
            if new_start is not None and new_start > log.log_start_offset:
                log.maybe_increment_log_start_offset(new_start, SEGMENT_DELETION)
            for md in to_delete:
                self._delete_segment(state, md)
                deleted += 1
        except Exception as exc:
            self._failed(
                state, "FailedRemoteDeleteRequestsPerSec", "delete expired remote segments of", log, exc
            )
        finally:
            state.pass_lock.release()
            self._update_lag(log, state)
        return deleted

    def _expired_segments(
        self, log: Log, state: _PartitionState
    ) -> tuple[list[RemoteLogSegmentMetadata], int | None]:
        tip = state.tip
        lineage = self._lineage(log)
        if not lineage:
            return [], None
        cfg = log.config
        log_start = log.log_start_offset
        log_end = log.log_end_offset
        finished = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        cleanup_until = self.time.milliseconds() - cfg.retention_ms if cfg.retention_ms > -1 else None
        remaining: int | None = None
        if cfg.retention_bytes > -1:
            highest = log.highest_offset_in_remote_storage
            only_local = sum(s.size for s in log.segments if s.base_offset >= highest)
            seen: set[Uuid] = set()
            remote = 0
            for epoch in sorted(lineage):
                for md in self.rlmm.list_remote_log_segments(tip, epoch):
                    if (
                        md.state is finished
                        and md.remote_log_segment_id.id not in seen
                        and is_within_lineage(dict(md.segment_leader_epochs), md.end_offset, log_end, lineage)
                    ):
                        seen.add(md.remote_log_segment_id.id)
                        remote += md.segment_size_in_bytes
            remaining = only_local + remote - cfg.retention_bytes
        to_delete: list[RemoteLogSegmentMetadata] = []
        chosen: set[Uuid] = set()
        new_start: int | None = None
        can_process = True  # Kafka's: the first valid segment kept ends the walk of every later epoch too
        for epoch in sorted(lineage):
            if not can_process:
                break
            for md in self.rlmm.list_remote_log_segments(tip, epoch):
                if not can_process:
                    break
                sid = md.remote_log_segment_id.id
                if sid in chosen or md.state is not finished:
                    continue
                delete = md.end_offset < log_start
                valid = False
                if not delete:
                    valid = is_within_lineage(dict(md.segment_leader_epochs), md.end_offset, log_end, lineage)
                    if valid:
                        if cleanup_until is not None and md.max_timestamp_ms <= cleanup_until:
                            delete = True
                            if remaining is not None:
                                remaining = max(0, remaining - md.segment_size_in_bytes)
                        elif (
                            remaining is not None
                            and remaining > 0
                            and remaining - md.segment_size_in_bytes >= 0
                        ):
                            delete = True
                            remaining -= md.segment_size_in_bytes
                        if delete:
                            new_start = (
                                md.end_offset + 1 if new_start is None else max(new_start, md.end_offset + 1)
                            )
                if delete:
                    to_delete.append(md)
                    chosen.add(sid)
                can_process = delete or not valid
        # segments whose epochs all precede the lineage's earliest epoch (Kafka's last step)
        earliest = min(lineage)
        for md in self.rlmm.list_remote_log_segments(tip):
            sid = md.remote_log_segment_id.id
            if (
                sid not in chosen
                and md.state is finished
                and all(e < earliest for e, _ in md.segment_leader_epochs)
            ):
                to_delete.append(md)
                chosen.add(sid)
        return to_delete, new_start

    # --- remote reads for fetches (quota, reader pool) -------------------------------------------------------
    def get_fetch_throttle_time_ms(self) -> int:
        """Kafka's ``getFetchThrottleTimeMs``: 0 while the remote fetch quota allows a read, else how long until
        it does (a fetch then skips its remote read)."""
        return self.fetch_quota.get_throttle_time_ms()

    @property
    def reader_pool(self) -> RemoteStorageThreadPool:
        """The remote reader pool (``remote.log.reader.threads``, ``remote.log.reader.max.pending.tasks``),
        made on first use; a closed manager's refuses every read."""
        with self._lock:
            pool = self._reader_pool
            if pool is None:
                cfg = self.config
                pool = RemoteStorageThreadPool(
                    cfg.remote_log_reader_threads, cfg.remote_log_reader_max_pending_tasks
                )
                if self._closing.is_set():
                    pool.shutdown()
                else:
                    self._reader_pool = pool
            return pool

    def async_read(
        self,
        log: Log,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ) -> Future[FetchDataInfo]:
        """Kafka's ``asyncRead``: ``log.read(fetch_offset, max_bytes, isolation, min_one_message)`` (an offset
        below the log's local log start offset, so the remote tier answers) on the reader pool; the bytes it
        returned are recorded in the fetch quota (0 when it failed). Raises
        :class:`~kafkalog.errors.RejectedExecutionError` at once when the pool's queue is full."""
        return self.reader_pool.submit(
            self._fetch_read, log, fetch_offset, max_bytes, isolation, min_one_message
        )

    def async_offset_read(self, lookup: Callable[[], T]) -> Future[T]:
        """Kafka's ``asyncOffsetRead``: a ListOffsets lookup that may read the remote tier (``lookup()``, the
        log's ``fetch_offset_by_timestamp`` and its bound) on the reader pool; not counted in the fetch quota.
        Raises :class:`~kafkalog.errors.RejectedExecutionError` at once when the pool's queue is full."""
        return self.reader_pool.submit(lookup)

    def _fetch_read(
        self, log: Log, fetch_offset: int, max_bytes: int, isolation: FetchIsolation, min_one_message: bool
    ) -> FetchDataInfo:
        size = 0
        try:
            info = log.read(fetch_offset, max_bytes, isolation, min_one_message)
            size = info.records.size_in_bytes
            return info
        finally:
            self.fetch_quota.record(size)

    def stop_readers(self, timeout: float | None = None) -> bool:
        """Shut the reader pool down for good (the manager closes): new reads are refused, waiting ones
        cancelled, running ones waited for up to ``timeout`` seconds in all. Whether none is left running."""
        self._closing.set()
        with self._lock:
            pool, self._reader_pool = self._reader_pool, None
        return True if pool is None else pool.shutdown(timeout)

    def read_metrics(self) -> dict[str, float]:
        """The broker-wide metrics of remote reads for fetches and of the copy quota (:data:`READ_METRIC_NAMES`)
        now."""
        sensor = self.fetch_throttle_time_sensor
        copy = self.copy_throttle_time_sensor
        pool = self._reader_pool
        return {
            "remote-fetch-throttle-time-avg": sensor.avg(),
            "remote-fetch-throttle-time-max": float(sensor.max()),
            "remote-fetch-throttle-count": float(sensor.count),
            "remote-copy-throttle-time-avg": copy.avg(),
            "remote-copy-throttle-time-max": float(copy.max()),
            "remote-copy-throttle-count": float(copy.count),
            "RemoteLogReaderTaskQueueSize": float(pool.task_queue_size if pool is not None else 0),
            "DelayedRemoteFetchExpiresPerSec": float(self.delayed_remote_fetch_expires.snapshot().count),
            "DelayedRemoteListOffsetsExpiresPerSec": float(
                self.delayed_remote_list_offsets_expires.snapshot().count
            ),
        }

    # --- reads --------------------------------------------------------------------------------------------
    def _fetch_bytes(
        self, state: _PartitionState, md: RemoteLogSegmentMetadata, start: int, end: int
    ) -> bytes:
        """``[start, end]`` of a remote segment's ``.log`` through the RSM, counted."""
        self._count(state, "RemoteFetchRequestsPerSec")
        try:
            data = self.rsm.fetch_log_segment(md, start, end)
        except Exception:
            self._count(state, "FailedRemoteFetchRequestsPerSec")
            raise
        self._count(state, "RemoteFetchBytesPerSec", len(data))
        return data

    def fetch_remote_log_segment_metadata(
        self, log: Log, tip: TopicIdPartition, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """Kafka's ``fetchRemoteLogSegmentMetadata``: the finished segment holding ``offset`` in its epoch, or
        in the following epochs of the lineage."""
        cache = log.leader_epoch_cache
        epoch = cache.epoch_for_offset(offset)
        while epoch is not None:
            md = self.rlmm.remote_log_segment_metadata(tip, epoch, offset)
            if md is not None:
                return md
            epoch = cache.next_epoch(epoch)
        return None

    def _next_segment(
        self, log: Log, tip: TopicIdPartition, md: RemoteLogSegmentMetadata
    ) -> RemoteLogSegmentMetadata | None:
        return self.fetch_remote_log_segment_metadata(log, tip, md.end_offset + 1)

    def read(
        self,
        log: Log,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int,
        min_one_message: bool,
        read_committed: bool,
    ) -> FetchDataInfo | None:
        """Kafka's ``RemoteLogManager.read`` (see :class:`RemoteTierReader`)."""
        state = self._state(log)
        md = self.fetch_remote_log_segment_metadata(log, state.tip, fetch_offset)
        if md is None:
            return None
        try:
            return self._read_segment(
                log, state, md, fetch_offset, max_bytes, max_offset, min_one_message, read_committed
            )
        except RemoteResourceNotFoundError:
            # expiration deleted the segment after it was looked up: the offset is gone, not storage broken
            if self.fetch_remote_log_segment_metadata(log, state.tip, fetch_offset) == md:
                raise
            return None

    def _read_segment(
        self,
        log: Log,
        state: _PartitionState,
        md: RemoteLogSegmentMetadata,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int,
        min_one_message: bool,
        read_committed: bool,
    ) -> FetchDataInfo:
        try:
            entry = self.index_cache.get(md)
        except Exception:
            self._count(state, "FailedRemoteFetchRequestsPerSec")
            raise
        start, next_indexed = entry.lookup_offset_span(fetch_offset)
        # one GET holds, in the common case, the batch holding the offset (it starts before the next indexed
        # position), max_bytes of batches from it, and the header of the batch after them
        slack = (next_indexed - start) if next_indexed is not None else 0
        window = _SegmentWindow(self, state, md, start, slack + max_bytes + RECORD_BATCH_OVERHEAD)
        first: int | None = None
        incomplete = False
        end = start
        total = 0
        next_offset = fetch_offset
        for pos, size, base, last, _ in window.batches():
            if last < fetch_offset:
                continue
            if base >= max_offset:
                break
            if first is None:
                if size > max_bytes and not min_one_message:
                    incomplete = True
                    break
                first = pos
            elif total + size > max_bytes:
                break
            if not window.ensure(pos + size):
                break  # a torn tail
            total += size
            end = pos + size
            next_offset = last + 1
            # grow the window only by what the rest of max_bytes could still use (and a header to see)
            window.step = max(RECORD_BATCH_OVERHEAD, max_bytes - total)
        if first is None:
            records = MemoryRecords(b"")
            return fetch_data_info(
                LogOffsetMetadata(fetch_offset), records, incomplete, [] if read_committed else None
            )
        records = MemoryRecords(window.slice(first, end))
        aborted: list[AbortedTxn] | None = None
        if read_committed:
            aborted = self._aborted_transactions(
                log, state, md, entry.aborted_txns, fetch_offset, next_offset
            )
        return fetch_data_info(LogOffsetMetadata(fetch_offset), records, False, aborted)

    def _aborted_transactions(
        self,
        log: Log,
        state: _PartitionState,
        md: RemoteLogSegmentMetadata,
        entries: tuple[AbortedTxn, ...],
        start_offset: int,
        upper_bound: int,
    ) -> list[AbortedTxn]:
        """Kafka's ``collectAbortedTransactions``: remote segments from ``md`` on, then the local ones, until a
        transaction index entry proves the search complete."""
        out: list[AbortedTxn] = []
        current: RemoteLogSegmentMetadata | None = md
        txns = list(entries)
        while current is not None:
            result = collect_aborted_txns(txns, start_offset, upper_bound)
            out.extend(result.aborted_transactions)
            if result.is_complete:
                return out
            current = self._next_segment(log, state.tip, current)
            if current is not None:
                txns = list(self.index_cache.get(current).aborted_txns)
        segments = log.segments
        if segments:
            local_start = max(start_offset, segments[0].base_offset)
            out.extend(
                log.local_log.collect_aborted_transactions_range(
                    segments[0].base_offset, local_start, upper_bound
                )
            )
        return out

    def find_offset_by_timestamp(
        self, log: Log, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """Kafka's ``findOffsetByTimestamp`` over the remote segments of the lineage."""
        state = self._state(log)
        cache = log.leader_epoch_cache
        lineage = self._lineage(log)
        log_end = log.log_end_offset
        epoch = cache.epoch_for_offset(starting_offset)
        while epoch is not None:
            for md in self.rlmm.list_remote_log_segments(state.tip, epoch):
                if (
                    md.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                    and md.max_timestamp_ms >= timestamp
                    and md.end_offset >= starting_offset
                    and is_within_lineage(dict(md.segment_leader_epochs), md.end_offset, log_end, lineage)
                ):
                    found = self._lookup_timestamp(state, md, timestamp, starting_offset)
                    if found is not None:  # (Kafka stops at this segment even without a match)
                        return found
            epoch = cache.next_epoch(epoch)
        return None

    def _lookup_timestamp(
        self, state: _PartitionState, md: RemoteLogSegmentMetadata, timestamp: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        start = self.index_cache.get(md).lookup_timestamp(timestamp, starting_offset)
        window = _SegmentWindow(self, state, md, start, _MIN_FETCH_BYTES)
        for pos, size, _, last, _ in window.batches():
            if last < starting_offset:
                continue
            if not window.ensure(pos + size):
                return None
            batch = next(MemoryRecords(window.slice(pos, pos + size)).batches())
            if batch.max_timestamp < timestamp:
                continue
            for record in batch:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None
