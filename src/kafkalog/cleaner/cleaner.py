"""The log cleaner's work on one log (Kafka's ``Cleaner``): offset map, segment groups, ``.cleaned`` segments, swap.

A log is a *clean* section (below the first dirty offset, from ``cleaner-offset-checkpoint``) followed by a
*dirty* one; the dirty section's *cleanable* part ends at the first uncleanable offset (a segment base: never
the active segment, never at or past the last stable offset, never a segment within ``min.compaction.lag.ms``).
One cleaning round (:meth:`Cleaner.do_clean`):

1. **Offset map** (:meth:`Cleaner.build_offset_map`): the keys of the cleanable dirty records, key digest ->
   latest offset, skipping aborted transactional data and control batches, until the map holds
   ``slots * load_factor`` keys; after each fully read segment the map's latest offset jumps to the next
   segment's base minus one (offset gaps never stall the cleaner, KAFKA-8764). The round ends at
   ``latest offset + 1``: when the map filled up the rest is cleaned by later rounds.
2. **Groups** (:meth:`Cleaner.group_segments_by_size`): consecutive segments of ``[0, end)`` are merged while the
   sum of their sizes stays within ``segment.bytes``, their index sizes within ``segment.index.bytes`` and
   their offsets within an int32 of the group's base (an empty segment is not range-checked, KAFKA-12889).
3. **Clean** (:meth:`Cleaner.clean_segments`): each group is filtered (:mod:`kafkalog.cleaner.filter`) into
   ``<first base>.log.cleaned`` with its indexes and a rebuilt ``.txnindex``, which is trimmed, fsynced and
   given the last source segment's modification time.
4. **Swap** (:func:`swap_in`): under the log's lock, after checking that every source segment is still the
   one that was read and that every segment the offset map was built from is unchanged (same object, same
   size, :class:`RoundGuard`: a truncation, retention or a concurrent swap abandons the round, whose map
   could otherwise describe records that are gone), the crash-safe replace protocol of
   :func:`kafkalog.log.local_log.replace_segments` runs: ``.cleaned`` -> ``.swap`` -> old segments renamed
   ``.deleted`` -> ``.swap`` stripped, directory fsynced.

Invariants kept here:

* **No empty segment.** A group that filters down to nothing is not swapped in as an empty segment: its
  segments are deleted through the same protocol (a crash part-way only leaves obsolete records behind),
  except a group that holds the log start offset, which keeps its last batch as an empty batch header so
  that the log start offset still points into a segment (KAFKA-9157's subtlety).
* **Readers never fail.** Reads take no lock and may hold a replaced segment: its indexes, transaction index
  and file descriptor are loaded before the swap, and its files are unlinked (after ``file.delete.delay.ms``
  on the log's scheduler) *without* closing the descriptor, so a read already in flight finishes on the old
  bytes; the descriptor closes when the last reference goes. A reader sees either the old or the new
  segment, never a record twice and no gap other than compaction's. (As in Kafka, a read_committed read
  that picked a replaced segment just before a swap collects aborted transactions from the segments after
  it at the time it looks: the index entries of a merged group's later segments have moved to the group's
  new segment, at its first base.)
* Offsets and batch boundaries of retained records never change (see :mod:`kafkalog.cleaner.filter`).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from kafkalog.cleaner.filter import FilterParams, LastRecord, filter_chunk, finish_crc, pack_header
from kafkalog.cleaner.map import map_chunk
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.cleaner.txn import CleanedTransactionMetadata
from kafkalog.errors import (
    CorruptRecordError,
    KafkaError,
    LogCleaningAbortedError,
    LogSegmentOffsetOverflowError,
)
from kafkalog.log.local_log import open_segment, replace_segments
from kafkalog.log.names import TopicPartition
from kafkalog.log.scheduler import ScheduledTask
from kafkalog.records import MemoryRecords, RecordBatch
from kafkalog.records.batch import DefaultRecordBatch
from kafkalog.records.framing import (
    HEADER_SIZE_UP_TO_MAGIC,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    PARTIAL_TAIL,
    RECORD_BATCH_OVERHEAD,
    CorruptFrame,
    PartialTail,
    next_frame,
)
from kafkalog.storage import LogSegment, OffsetIndex, TimeIndex, TransactionIndex
from kafkalog.storage.files import (
    CLEANED_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from kafkalog.time import SYSTEM_TIME, Time

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = [
    "Cleaner",
    "CleanerStats",
    "LogToClean",
    "RoundGuard",
    "Throttler",
    "calculate_cleanable_bytes",
    "swap_in",
]

_log = logging.getLogger("kafkalog.log.cleaner")
_INT32_MAX: Final = 2**31 - 1
#: Read size of one cleaner I/O chunk unless the caller sets one (grown for a larger batch).
DEFAULT_IO_BUFFER_SIZE: Final = 1 << 20


# --- statistics, throttling and the log to clean ----------------------------------------------------------------


@dataclass
class CleanerStats:
    """What one cleaning round read and wrote (Kafka's ``CleanerStats``)."""

    time: Time = field(default=SYSTEM_TIME, repr=False)
    bytes_read: int = 0
    bytes_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages_read: int = 0
    buffer_utilization: float = 0.0
    start_time: int = -1
    map_complete_time: int = -1
    end_time: int = -1

    def __post_init__(self) -> None:
        if self.start_time < 0:
            self.start_time = self.time.milliseconds()

    def index_done(self) -> None:
        """The offset map is built."""
        self.map_complete_time = self.time.milliseconds()

    def all_done(self) -> None:
        """The round is over."""
        self.end_time = self.time.milliseconds()

    @property
    def elapsed_secs(self) -> float:
        """Seconds the round took."""
        end = self.end_time if self.end_time >= 0 else self.time.milliseconds()
        return (end - self.start_time) / 1000.0

    @property
    def elapsed_index_secs(self) -> float:
        """Seconds building the offset map took."""
        end = self.map_complete_time if self.map_complete_time >= 0 else self.time.milliseconds()
        return (end - self.start_time) / 1000.0


class Throttler:
    """Limits the cleaner's I/O to ``desired_rate_per_sec`` bytes/s across threads (Kafka's ``Throttler``):
    every ``check_interval_ms`` the observed rate is compared with the target and the caller sleeps off
    the excess."""

    def __init__(
        self, desired_rate_per_sec: float, check_interval_ms: int = 300, time: Time = SYSTEM_TIME
    ) -> None:
        self.desired_rate_per_sec = float(desired_rate_per_sec)
        self.check_interval_ms = check_interval_ms
        self._time = time
        self._lock = threading.Lock()
        self._period_start_ns = time.nanoseconds()
        self._observed = 0.0
        self.total_sleep_ms = 0.0

    def update_desired_rate_per_sec(self, rate: float) -> None:
        """Change the target rate."""
        self.desired_rate_per_sec = float(rate)

    def maybe_throttle(self, observed: float) -> None:
        """Account ``observed`` bytes; sleep if the rate over the current interval is above the target."""
        if self.desired_rate_per_sec == float("inf") or observed <= 0:
            return
        sleep_ms = 0.0
        with self._lock:
            self._observed += observed
            now = self._time.nanoseconds()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns > self.check_interval_ms * 1_000_000 and self._observed > 0:
                rate = self._observed * 1e9 / elapsed_ns
                if rate > self.desired_rate_per_sec:
                    desired_ns = self._observed * 1e9 / self.desired_rate_per_sec
                    sleep_ms = (desired_ns - elapsed_ns) / 1e6
                self._period_start_ns = now + int(max(sleep_ms, 0.0) * 1e6)
                self._observed = 0.0
        if sleep_ms > 0:
            self.total_sleep_ms += sleep_ms
            self._time.sleep(sleep_ms)


def calculate_cleanable_bytes(log: Log, first_dirty_offset: int, uncleanable_offset: int) -> tuple[int, int]:
    """``(first uncleanable offset, cleanable bytes)``: the uncleanable offset rounded down to the base of the
    segment holding it (the active segment's base at most), and the bytes of the segments from the one
    holding the first dirty offset up to it."""
    segments = log.local_log.segments
    non_active = segments.non_active_log_segments_from(uncleanable_offset)
    first_uncleanable = non_active[0] if non_active else log.active_segment
    upper = first_uncleanable.base_offset
    lower = min(first_dirty_offset, upper)
    cleanable = sum(s.size for s in segments.values(lower, upper))
    return upper, cleanable


@dataclass
class LogToClean:
    """A log, the first offset the cleaner has not cleaned and the first it may not clean (Kafka's
    ``LogToClean``); the sizes and the dirty ratio are computed from the log's segments."""

    log: Log
    first_dirty_offset: int
    uncleanable_offset: int
    need_compaction_now: bool = False
    clean_bytes: int = field(init=False)
    first_uncleanable_offset: int = field(init=False)
    cleanable_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        segments = self.log.local_log.segments
        self.clean_bytes = sum(s.size for s in segments.values(-1, self.first_dirty_offset))
        upper, cleanable = calculate_cleanable_bytes(
            self.log, self.first_dirty_offset, self.uncleanable_offset
        )
        self.first_uncleanable_offset = upper
        self.cleanable_bytes = cleanable

    @property
    def topic_partition(self) -> TopicPartition:
        """The log's partition."""
        return self.log.topic_partition

    @property
    def total_bytes(self) -> int:
        """Clean plus cleanable bytes."""
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Cleanable bytes over total bytes (0 for an empty log)."""
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0


# --- the swap -------------------------------------------------------------------------------------------------


class _DeleteRecorder:
    """A stand-in scheduler for :func:`replace_segments`: the old segments are renamed ``.deleted`` by the
    protocol; their removal is done by :func:`_retire` instead (unlink without closing descriptors)."""

    def schedule(
        self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        return ScheduledTask(0, 0, name, fn, period_ms)

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms)


def _pin(segment: LogSegment) -> None:
    """Load what a reader of ``segment`` may still need once its files are gone (see the module doc)."""
    _ = segment.offset_index, segment.time_index
    segment.txn_index.all_aborted_txns()
    if segment.size:
        segment.log.read(0, 1)


def _close_indexes(indexes: tuple[OffsetIndex, TimeIndex, TransactionIndex]) -> None:
    offset_index, time_index, txn_index = indexes
    offset_index.close_handler()
    time_index.close_handler()
    txn_index.close()


def _close_when_unused(segment: LogSegment) -> None:
    """Close the index descriptors of a replaced segment once nothing references it any more (its ``.log``
    descriptor closes by itself then): a reader may still be using it, so nothing is closed now."""
    weakref.finalize(segment, _close_indexes, (segment.offset_index, segment.time_index, segment.txn_index))


def _retire(segments: Sequence[LogSegment]) -> None:
    """Remove the (``.deleted``) files of replaced segments; open descriptors stay valid until collected."""
    for segment in segments:
        for path in (
            segment.log.path,
            segment.offset_index.path,
            segment.time_index.path,
            segment.txn_index.path,
        ):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:  # the directory may be gone (deleted or renamed log)
                _log.warning("Error deleting replaced segment file %s: %s", path, exc)


class RoundGuard:
    """The segments a round's offset map was built from, each with its size when the round began.

    Every swap of the round first checks (under the log's lock) that each of them is still in the log
    unchanged, or was replaced by this round's own cleaned segment (itself unchanged): a truncation (or any
    other change) during the round would make the map describe records that no longer exist, and cleaning
    against it could drop the only surviving copy of a key. The round is then abandoned.
    """

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        self._expected: dict[int, tuple[LogSegment, int]] = {s.base_offset: (s, s.size) for s in segments}

    def verify(self, log: Log) -> None:
        """Raise :class:`LogCleaningAbortedError` if a mapped segment changed (call under the log's lock)."""
        current = log.local_log.segments
        for base, (segment, size) in self._expected.items():
            found = current.get(base)
            if found is not segment or segment.size != size:
                raise LogCleaningAbortedError(
                    f"segment {base} of {log.topic_partition} changed during the cleaning round"
                )

    def replaced(self, old: Sequence[LogSegment], cleaned: LogSegment | None) -> None:
        """Old segments were swapped out for ``cleaned`` (or removed): expect that from now on."""
        for segment in old:
            self._expected.pop(segment.base_offset, None)
        if cleaned is not None and any(s.base_offset == cleaned.base_offset for s in old):
            self._expected[cleaned.base_offset] = (cleaned, cleaned.size)


def swap_in(
    log: Log,
    cleaned: LogSegment | None,
    old: Sequence[LogSegment],
    sizes: Sequence[int],
    guard: RoundGuard | None = None,
) -> bool:
    """Replace ``old`` (each still of the size in ``sizes``) by ``cleaned`` (None: by nothing) under the log's
    lock with the crash-safe replace protocol; returns False (and changes nothing) when ``cleaned`` is None
    and the group holds the log start offset. Raises :class:`LogCleaningAbortedError` when the log changed
    (the group, or what ``guard`` watches)."""
    with log.lock:
        if log.closed or log.local_log.offline:
            raise LogCleaningAbortedError(f"log {log.topic_partition} was closed while being cleaned")
        segments = log.local_log.segments
        for segment, size in zip(old, sizes, strict=True):
            if segments.get(segment.base_offset) is not segment or segment.size != size:
                raise LogCleaningAbortedError(
                    f"segment {segment.base_offset} of {log.topic_partition} changed while it was being cleaned"
                )
        if guard is not None:
            guard.verify(log)
        if cleaned is None and old[0].base_offset <= log.log_start_offset:
            return False
        for segment in old:
            _pin(segment)
            _close_when_unused(segment)
        with log.local_log.io(
            f"error while swapping in cleaned segments of {log.topic_partition} in {log.dir}"
        ):
            deleted = replace_segments(
                segments,
                [] if cleaned is None else [cleaned],
                list(old),
                log.dir,
                _DeleteRecorder(),
                log.config,
                log.local_log.log_prefix,
            )
            for segment in deleted:
                log.producer_state.delete_snapshot(segment.base_offset)
        if guard is not None:
            guard.replaced(old, cleaned)
    retired = list(old)
    scheduler = log.local_log.scheduler
    if scheduler is not None:
        try:
            scheduler.schedule_once("delete-file", lambda: _retire(retired), log.config.file_delete_delay_ms)
            return True
        except RuntimeError:  # the scheduler was shut down
            pass
    _retire(retired)
    return True


def _open_cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    """A fresh ``<base>.log.cleaned`` segment (leftovers of an earlier attempt are removed first)."""
    for path in (
        log_file(log.dir, base_offset, CLEANED_FILE_SUFFIX),
        offset_index_file(log.dir, base_offset, CLEANED_FILE_SUFFIX),
        time_index_file(log.dir, base_offset, CLEANED_FILE_SUFFIX),
        transaction_index_file(log.dir, base_offset, CLEANED_FILE_SUFFIX),
    ):
        path.unlink(missing_ok=True)
    return open_segment(
        log.dir, base_offset, log.config, log.time, file_suffix=CLEANED_FILE_SUFFIX, preallocate=False
    )


def _last_batch(segment: LogSegment) -> RecordBatch | None:
    index = segment.offset_index
    last: RecordBatch | None = None
    for batch in segment.batches(index.lookup(index.last_offset).position):
        last = batch
    return last


def _empty_batch_like(batch: RecordBatch) -> MemoryRecords:
    """A 0-record v2 header ending at ``batch``'s last offset (what Kafka's ``RETAIN_EMPTY`` keeps)."""
    if isinstance(batch, DefaultRecordBatch):
        attrs = batch.attributes & 0x38
        header = pack_header(
            RECORD_BATCH_OVERHEAD,
            batch.base_offset,
            batch.partition_leader_epoch,
            attrs,
            batch.last_offset_delta,
            -1,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            0,
        )
    else:
        header = pack_header(
            RECORD_BATCH_OVERHEAD, batch.last_offset, -1, 0, 0, -1, batch.max_timestamp, -1, -1, -1, 0
        )
    finish_crc(header, 0, RECORD_BATCH_OVERHEAD)
    return MemoryRecords(bytes(header))


# --- the cleaner ----------------------------------------------------------------------------------------------


def _no_check(tp: TopicPartition) -> None:
    return None


class Cleaner:
    """Cleans logs one round at a time with its own offset map (one per cleaner thread).

    Kafka's constructor: ``io_buffer_size`` is the read size (a batch larger than it is read whole, as
    Kafka's ``growBuffersOrFail`` ends up doing, as long as it fits in its segment), ``max_io_buffer_size``
    the largest batch expected (``message.max.bytes``, kept for reference), ``dup_buffer_load_factor`` the
    share of the map's slots a round fills, ``throttler`` the I/O limit shared by all cleaners and
    ``check_done`` a call made at every chunk that raises :class:`LogCleaningAbortedError` to stop.
    """

    def __init__(
        self,
        id: int = 0,
        offset_map: SkimpyOffsetMap | None = None,
        io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
        max_io_buffer_size: int = 1024 * 1024 + 12,
        dup_buffer_load_factor: float = 0.9,
        throttler: Throttler | None = None,
        time: Time = SYSTEM_TIME,
        check_done: Callable[[TopicPartition], None] = _no_check,
    ) -> None:
        self.id = id
        self.offset_map = offset_map if offset_map is not None else SkimpyOffsetMap(128 * 1024 * 1024)
        self.io_buffer_size = max(io_buffer_size, 4096)
        self.max_io_buffer_size = max_io_buffer_size
        self.dup_buffer_load_factor = dup_buffer_load_factor
        self.throttler = throttler if throttler is not None else Throttler(float("inf"), time=time)
        self.time = time
        self.check_done = check_done
        if self.offset_map.slots * dup_buffer_load_factor < 1:
            raise ValueError(
                "offset map is too small to fit in even a single message, so log cleaning will never make "
                "progress. You can increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads"
            )

    @property
    def max_map_entries(self) -> int:
        """Keys the map takes before a round stops (``slots * load factor``)."""
        return int(self.offset_map.slots * self.dup_buffer_load_factor)

    # --- one round ------------------------------------------------------------------------------------------
    def clean(self, cleanable: LogToClean) -> tuple[int, CleanerStats]:
        """Clean one round at the current time; returns the first offset not cleaned and the statistics."""
        return self.do_clean(cleanable, self.time.milliseconds())

    def do_clean(self, cleanable: LogToClean, current_time: int) -> tuple[int, CleanerStats]:
        """One round (see the module doc) as of ``current_time``."""
        log = cleanable.log
        _log.info("Cleaner %d: Beginning cleaning of log %s", self.id, log.topic_partition)
        segments = log.local_log.segments
        clean_section = (
            segments.values(0, cleanable.first_dirty_offset) if cleanable.first_dirty_offset > 0 else []
        )
        legacy_horizon = (
            clean_section[-1].last_modified - log.config.delete_retention_ms if clean_section else 0
        )
        stats = CleanerStats(self.time)
        upper = cleanable.first_uncleanable_offset
        first_dirty = cleanable.first_dirty_offset
        guard = RoundGuard(segments.values(first_dirty, upper) if upper > first_dirty else [])
        self.build_offset_map(log, first_dirty, upper, self.offset_map, stats)
        end_offset = self.offset_map.latest_offset + 1
        stats.index_done()
        txn = CleanedTransactionMetadata()
        groups = self.group_segments_by_size(
            segments.values(0, end_offset) if end_offset > 0 else [],
            log.config.segment_bytes,
            log.config.segment_index_bytes,
            upper,
        )
        for group in groups:
            self.clean_segments(
                log, group, self.offset_map, current_time, stats, txn, legacy_horizon, upper, guard
            )
        stats.buffer_utilization = self.offset_map.utilization
        stats.all_done()
        return end_offset, stats

    # --- groups ---------------------------------------------------------------------------------------------
    @staticmethod
    def group_segments_by_size(
        segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
    ) -> list[list[LogSegment]]:
        """Consecutive segments grouped so each group fits one segment (see the module doc)."""
        groups: list[list[LogSegment]] = []
        rest = list(segments)
        i = 0
        while i < len(rest):
            group = [rest[i]]
            log_size = rest[i].size
            index_size = rest[i].offset_index.size_in_bytes
            time_size = rest[i].time_index.size_in_bytes
            i += 1
            while i < len(rest):
                candidate = rest[i]
                last_offset = (
                    rest[i + 1].base_offset - 1 if i + 1 < len(rest) else first_uncleanable_offset - 1
                )
                if not (
                    log_size + candidate.size <= max_size
                    and index_size + candidate.offset_index.size_in_bytes <= max_index_size
                    and time_size + candidate.time_index.size_in_bytes <= max_index_size
                    and (candidate.size == 0 or last_offset - group[0].base_offset <= _INT32_MAX)
                ):
                    break
                group.append(candidate)
                log_size += candidate.size
                index_size += candidate.offset_index.size_in_bytes
                time_size += candidate.time_index.size_in_bytes
                i += 1
            groups.append(group)
        return groups

    # --- the offset map -------------------------------------------------------------------------------------
    def build_offset_map(
        self, log: Log, start: int, end: int, offset_map: SkimpyOffsetMap, stats: CleanerStats
    ) -> None:
        """Map the keys of ``[start, end)`` (see the module doc); the map's latest offset is where it stopped."""
        offset_map.clear()
        dirty = log.local_log.segments.values(start, end) if end > start else []
        if not dirty:
            return
        next_starts = [s.base_offset for s in dirty[1:]] + [end]
        _log.info(
            "Cleaner %d: Building offset map for log %s for %d segments in offset range [%d, %d).",
            self.id,
            log.topic_partition,
            len(dirty),
            start,
            end,
        )
        txn = CleanedTransactionMetadata()
        txn.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        max_entries = int(offset_map.slots * self.dup_buffer_load_factor)
        for segment, next_start in zip(dirty, next_starts, strict=True):
            self.check_done(log.topic_partition)
            if self._map_segment(log, segment, offset_map, start, next_start, txn, stats, max_entries):
                _log.debug("Offset map is full; segment %d is partially mapped", segment.base_offset)
                return

    def _map_segment(
        self,
        log: Log,
        segment: LogSegment,
        offset_map: SkimpyOffsetMap,
        start: int,
        next_start: int,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
        max_entries: int,
    ) -> bool:
        position = segment.offset_index.lookup(start).position
        size = segment.size
        read_size = self.io_buffer_size
        while position < size:
            self.check_done(log.topic_partition)
            chunk = segment.log.read(position, read_size)
            self.throttler.maybe_throttle(len(chunk))
            progress = map_chunk(
                chunk, start, offset_map, max_entries, txn, position, log.config.max_message_bytes * 256
            )
            stats.map_bytes_read += progress.bytes_read
            stats.map_messages_read += progress.messages_read
            if progress.full:
                return True
            if progress.bytes_read == 0:
                read_size = self._next_read_size(segment, position, chunk, size)
                continue
            position += progress.bytes_read
            read_size = self.io_buffer_size
        offset_map.update_latest_offset(next_start - 1)
        return False

    def _next_read_size(self, segment: LogSegment, position: int, chunk: bytes, size: int) -> int:
        """The read size that takes the (large) batch at ``position`` whole (Kafka's ``growBuffersOrFail``)."""
        left = size - position
        frame = next_frame(chunk, 0, left) if len(chunk) > HEADER_SIZE_UP_TO_MAGIC else PARTIAL_TAIL
        if isinstance(frame, CorruptFrame):
            raise frame.error(position, f" at position {position} of {segment.log.path}")
        if isinstance(frame, PartialTail):
            if left > HEADER_SIZE_UP_TO_MAGIC and len(chunk) > HEADER_SIZE_UP_TO_MAGIC:
                need = int.from_bytes(chunk[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True) + LOG_OVERHEAD
                raise CorruptRecordError(
                    f"log segment may be corrupt, batch size {need} > {left} bytes left in segment "
                    f"{segment.log.path} at position {position}",
                    position=position,
                )
            raise CorruptRecordError(
                f"log segment may be corrupt: {left} bytes at position {position} of {segment.log.path} do not "
                "hold a batch",
                position=position,
            )
        need = frame
        if need <= len(chunk):
            raise KafkaError(
                f"batch size {need} fits the read of {len(chunk)} bytes but was not read at {position}"
            )
        _log.info("Cleaner %d: growing the I/O buffer to %d bytes for a large batch", self.id, need)
        return need

    # --- cleaning a group ------------------------------------------------------------------------------------
    def clean_segments(
        self,
        log: Log,
        segments: Sequence[LogSegment],
        offset_map: SkimpyOffsetMap,
        current_time: int,
        stats: CleanerStats,
        txn: CleanedTransactionMetadata,
        legacy_delete_horizon_ms: int,
        upper_bound_offset_of_round: int,
        guard: RoundGuard | None = None,
    ) -> None:
        """Clean ``segments`` into one ``.cleaned`` segment and swap it in (see the module doc); ``guard``
        (from :meth:`do_clean`) abandons the swap if the log changed under the round."""
        sizes = [s.size for s in segments]
        cleaned = _open_cleaned_segment(log, segments[0].base_offset)
        txn.cleaned_index = cleaned.txn_index
        try:
            producers = log.producer_state.active_producers()
            params = FilterParams(
                offset_map,
                current_time,
                log.config.delete_retention_ms,
                {
                    pid: LastRecord(e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch)
                    for pid, e in producers.items()
                },
                upper_bound_offset_of_round,
            )
            for i, segment in enumerate(segments):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.read_next_offset()
                txn.add_aborted_transactions(log.collect_aborted_transactions(segment.base_offset, upper))
                params.retain_legacy_deletes = segment.last_modified > legacy_delete_horizon_ms
                try:
                    self._clean_into(log, segment, sizes[i], cleaned, params, txn, stats)
                except LogSegmentOffsetOverflowError as exc:
                    _log.info("Cleaner %d: Caught segment overflow error during cleaning: %s", self.id, exc)
                    log.split_overflowed_segment(segment)
                    raise LogCleaningAbortedError(str(exc)) from exc
            if cleaned.size == 0 and segments[0].base_offset <= log.log_start_offset:
                last = _last_batch(segments[-1])
                if last is not None:
                    cleaned.append(
                        last.last_offset, last.max_timestamp, last.last_offset, _empty_batch_like(last)
                    )
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            cleaned.set_last_modified(segments[-1].last_modified)
            _log.info(
                "Cleaner %d: Swapping in cleaned segment %s for %s in log %s", self.id, cleaned, segments, log
            )
            if cleaned.size == 0:
                cleaned.close_handlers()
                cleaned.delete_if_exists()
                swap_in(log, None, segments, sizes, guard)
            else:
                swap_in(log, cleaned, segments, sizes, guard)
        except BaseException:
            cleaned.close_handlers()
            cleaned.delete_if_exists()
            raise
        finally:
            txn.cleaned_index = None

    def _clean_into(
        self,
        log: Log,
        source: LogSegment,
        size: int,
        dest: LogSegment,
        params: FilterParams,
        txn: CleanedTransactionMetadata,
        stats: CleanerStats,
    ) -> None:
        """Filter ``source`` (its first ``size`` bytes) into ``dest`` (Kafka's ``cleanInto``)."""
        position = 0
        read_size = self.io_buffer_size
        while position < size:
            self.check_done(log.topic_partition)
            chunk = source.log.read(position, min(read_size, size - position))
            self.throttler.maybe_throttle(len(chunk))
            params.max_decompressed_bytes = max(log.config.max_message_bytes * 256, 1 << 24)
            result = filter_chunk(chunk, params, txn, position)
            stats.messages_read += result.messages_read
            stats.bytes_read += result.bytes_read
            stats.messages_written += result.messages_retained
            stats.invalid_messages_read += result.invalid_messages
            if result.sizes:
                written = self._append(
                    dest, result.data, result.sizes, result.last_offsets, result.max_timestamps
                )
                stats.bytes_written += written
                self.throttler.maybe_throttle(written)
            if result.bytes_read == 0:
                read_size = self._next_read_size(source, position, chunk, size)
                continue
            position += result.bytes_read
            read_size = self.io_buffer_size

    @staticmethod
    def _append(
        dest: LogSegment,
        data: bytes | bytearray | memoryview,
        sizes: list[int],
        last_offsets: list[int],
        max_timestamps: list[int],
    ) -> int:
        """Append the output batches in runs of just over ``index.interval.bytes`` (one offset index entry
        per run, as if they had been appended one batch at a time); returns the bytes written."""
        view = memoryview(data)
        interval = dest.index_interval_bytes
        n = len(sizes)
        i = 0
        pos = 0
        while i < n:
            run = 0
            max_ts = -1
            max_ts_offset = -1
            while i < n:
                run += sizes[i]
                if max_timestamps[i] > max_ts:
                    max_ts, max_ts_offset = max_timestamps[i], last_offsets[i]
                i += 1
                if run > interval:
                    break
            if max_ts_offset < 0:
                max_ts_offset = last_offsets[i - 1]
            dest.append(last_offsets[i - 1], max_ts, max_ts_offset, MemoryRecords(view[pos : pos + run]))
            pos += run
        return pos
