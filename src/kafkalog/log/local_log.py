"""LocalLog: the mechanism of a partition log — segments on disk, roll, read, truncate, delete, rename.

It owns the log end offset (with its segment and position), the recovery point and the crash-safe file
protocols shared with the loader and the cleaner:

* **delete** — rename the four files to ``.deleted``, then remove them after ``file.delete.delay.ms`` on
  the scheduler (``delete-file``); a crash in between leaves ``.deleted`` files that the loader removes.
* **replace** (cleaning, splitting, swap recovery) — new segments are written as ``.cleaned``, renamed to
  ``.swap`` in descending base-offset order, added to the map, old segments are deleted as above, then
  ``.swap`` is stripped in ascending order and the directory fsynced. A crash at any point is completed
  or undone by the loader.

Invariants: there is always an active segment once the log is loaded; a roll never moves backwards; the
log end offset's metadata always points into the active segment. This class is not thread-safe on its own:
``Log`` serialises writers. Every I/O error becomes :class:`~kafkalog.errors.KafkaStorageError` and takes
the log's directory offline (later operations fail fast), except an error of a read whose segment was
deleted meanwhile (retention, truncation, cleaning): that is only a ``KafkaStorageError``, which ``Log.read``
reports as :class:`~kafkalog.errors.OffsetOutOfRangeError`; and running out of descriptors or memory
(EMFILE, ENFILE, ENOMEM: not a disk fault), which is a retriable
:class:`~kafkalog.errors.ResourceExhaustedError` that leaves the directory online (a roll that cannot open
its new segment leaves the old one active, trimmed, so the next append rolls again). Reads take no lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from kafkalog.errors import (
    KafkaError,
    KafkaStorageError,
    NotRegularFileError,
    OffsetOutOfRangeError,
    ResourceExhaustedError,
    is_resource_exhaustion,
)
from kafkalog.log.checkpoint import fsync_dir
from kafkalog.log.config import AppendSettings, LogConfig
from kafkalog.log.names import TopicPartition
from kafkalog.log.scheduler import Scheduler
from kafkalog.log.segments import LogSegments
from kafkalog.records import MemoryRecords
from kafkalog.storage import FetchDataInfo, LogOffsetMetadata, LogSegment, OffsetPosition
from kafkalog.storage.files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    log_file,
    offset_index_file,
    time_index_file,
    transaction_index_file,
)
from kafkalog.storage.segment import TO_SEGMENT_END
from kafkalog.storage.segment_read import read_records
from kafkalog.storage.txn_index import AbortedTxn
from kafkalog.storage.types import offset_metadata
from kafkalog.time import Time

__all__ = ["LocalLog", "LogDirFailureHandler", "delete_segment_files", "open_segment", "replace_segments"]

_log = logging.getLogger("kafkalog.log")

#: Called with (log dir, message, cause) when an I/O error takes a directory offline.
LogDirFailureHandler = Callable[[Path, str, BaseException], None]


def open_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    time: Time,
    *,
    file_already_exists: bool = False,
    file_suffix: str = "",
    preallocate: bool | None = None,
) -> LogSegment:
    """Open (or create) a segment with the sizes and jitter that ``config`` asks for."""
    prealloc = config.preallocate if preallocate is None else preallocate
    return LogSegment.open(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        roll_jitter_ms=LogSegment.random_jitter_ms(config.segment_jitter_ms, config.segment_ms),
        time=time,
        file_already_exists=file_already_exists,
        init_file_size=config.init_file_size if prealloc else 0,
        preallocate=prealloc,
        file_suffix=file_suffix,
    )


def delete_segment_files(
    segments: list[LogSegment],
    async_delete: bool,
    directory: Path,
    scheduler: Scheduler | None,
    config: LogConfig,
    log_prefix: str = "",
) -> None:
    """Rename the segments' files to ``.deleted`` now; remove them now or after ``file.delete.delay.ms``."""
    for segment in segments:
        if not segment.has_suffix(DELETED_FILE_SUFFIX):
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)

    def delete() -> None:
        _log.info("%sDeleting segment files %s", log_prefix, ", ".join(str(s) for s in segments))
        for segment in segments:
            try:
                segment.delete_if_exists()
            except OSError as exc:  # the directory may be gone already
                _log.warning("%sError deleting segment %s: %s", log_prefix, segment, exc)

    if async_delete and scheduler is not None:
        scheduler.schedule_once("delete-file", delete, config.file_delete_delay_ms)
    else:
        delete()


def replace_segments(
    existing: LogSegments,
    new_segments: list[LogSegment],
    old_segments: list[LogSegment],
    directory: Path,
    scheduler: Scheduler | None,
    config: LogConfig,
    log_prefix: str = "",
    is_recovered_swap_file: bool = False,
) -> list[LogSegment]:
    """Swap ``new_segments`` (``.cleaned``, or ``.swap`` when recovering) in for ``old_segments``, crash-safely.

    Returns the old segments that were deleted without a new segment taking their base offset.
    """
    new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
    old_sorted = sorted(
        (s for s in old_segments if existing.contains(s.base_offset)), key=lambda s: s.base_offset
    )
    if not is_recovered_swap_file:
        for segment in reversed(new_sorted):
            segment.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
    for segment in reversed(new_sorted):
        existing.add(segment)
    new_bases = {s.base_offset for s in new_sorted}
    deleted_not_replaced = []
    for segment in old_sorted:
        if segment.base_offset not in new_bases:
            existing.remove(segment.base_offset)
            deleted_not_replaced.append(segment)
        delete_segment_files([segment], True, directory, scheduler, config, log_prefix)
    for segment in new_sorted:
        segment.change_file_suffixes(SWAP_FILE_SUFFIX, "")
    fsync_dir(directory)
    return deleted_not_replaced


class LocalLog:
    """Segments of one partition on local disk, and the offsets they define."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: LogSegments,
        recovery_point: int,
        next_offset_metadata: LogOffsetMetadata,
        scheduler: Scheduler | None,
        time: Time,
        topic_partition: TopicPartition,
        on_dir_failure: LogDirFailureHandler | None = None,
    ) -> None:
        self.dir = Path(directory)
        self.config = config
        #: derived from ``config``, replaced with it (:meth:`update_config`)
        self.append_settings = AppendSettings(config)
        self.segments = segments
        self.recovery_point = recovery_point
        self._next_offset_metadata = next_offset_metadata
        self.scheduler = scheduler
        self.time = time
        self.topic_partition = topic_partition
        self._on_dir_failure = on_dir_failure
        self.last_flushed_time = time.milliseconds()
        self.closed = False
        # Kafka's ``isMemoryMappedBufferClosed``: set by close_handlers and delete_all_segments (not by close).
        self.buffers_closed = False
        self.offline = False
        self._exhausted_logged_ms = -(10**18)
        self.log_prefix = f"[LocalLog partition={topic_partition}, dir={self.dir.parent}] "

    # --- I/O error handling -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def io(self, message: str) -> Iterator[None]:
        """Run file operations; an ``OSError`` takes the directory offline as a ``KafkaStorageError``."""
        if self.offline:
            raise self.offline_error()
        try:
            yield
        except NotRegularFileError as exc:  # a file swapped for a link or FIFO under a live log: an I/O error
            raise self.io_failed(message, exc) from exc
        except KafkaStorageError:
            raise
        except OSError as exc:
            raise self.io_failed(message, exc) from exc

    def offline_error(self) -> KafkaStorageError:
        """The error every operation on an offline directory fails fast with."""
        return KafkaStorageError(f"the log dir {self.dir.parent} is offline due to a previous IO exception")

    def io_failed(self, message: str, exc: OSError) -> KafkaStorageError:
        """Take the directory offline after ``exc``; returns the error to raise. Running out of descriptors or
        memory is no disk fault: a retriable :class:`ResourceExhaustedError`, the directory stays online."""
        if is_resource_exhaustion(exc):
            now = self.time.milliseconds()
            if now - self._exhausted_logged_ms >= 10_000:  # at most one line per 10 s per partition
                self._exhausted_logged_ms = now
                _log.warning("%s%s: %s (retriable; the log dir stays online)", self.log_prefix, message, exc)
            return ResourceExhaustedError(f"{message}: {exc}", exc.errno)
        self.offline = True
        if self._on_dir_failure is not None:
            self._on_dir_failure(self.dir.parent, message, exc)
        else:
            _log.error("%s%s: %s", self.log_prefix, message, exc)
        return KafkaStorageError(f"{message}: {exc}")

    def check_if_closed(self) -> None:
        """Fail fast once the file handles are gone (Kafka's ``checkIfMemoryMappedBufferClosed``)."""
        if self.buffers_closed:
            raise KafkaStorageError(
                f"the memory mapped buffer for log of {self.topic_partition} is already closed"
            )

    # --- offsets ------------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.dir.name

    @property
    def log_end_offset(self) -> int:
        return self._next_offset_metadata.message_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return self._next_offset_metadata

    @property
    def active_segment(self) -> LogSegment:
        seg = self.segments.active_segment
        if seg is None:
            raise KafkaError(f"log {self.topic_partition} has no segments")
        return seg

    def update_log_end_offset(self, end_offset: int) -> None:
        """Move the log end offset (its metadata points at the active segment's end)."""
        active = self.active_segment
        self._next_offset_metadata = offset_metadata(end_offset, active.base_offset, active.log.size_in_bytes)
        if self.recovery_point > end_offset:
            self.recovery_point = end_offset

    def update_recovery_point(self, offset: int) -> None:
        self.recovery_point = offset

    def mark_flushed(self, offset: int) -> None:
        """Advance the recovery point after a flush."""
        if offset > self.recovery_point:
            self.recovery_point = offset
            self.last_flushed_time = self.time.milliseconds()

    @property
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def update_config(self, config: LogConfig) -> None:
        """Replace the config (and the append settings derived from it)."""
        self.append_settings = AppendSettings(config)
        self.config = config

    # --- append, flush, roll ------------------------------------------------------------------------------
    def append(
        self,
        last_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: MemoryRecords,
        active: LogSegment | None = None,
    ) -> LogOffsetMetadata:
        """Append to the active segment and move the log end offset past ``last_offset``; returns the new log
        end offset's metadata.

        ``active`` is the active segment when the caller (under the log's lock) just looked it up."""
        if active is None:
            active = self.active_segment
        active.append(last_offset, largest_timestamp, shallow_offset_of_max_timestamp, records)
        end_offset = last_offset + 1
        end = self._next_offset_metadata = offset_metadata(
            end_offset, active.base_offset, active.log.size_in_bytes
        )
        if self.recovery_point > end_offset:
            self.recovery_point = end_offset
        return end

    def flush(self, offset: int, *, active_indexes: bool = False) -> None:
        """fsync segments holding offsets in ``[recovery point, offset)`` (and the directory).

        The active segment's offset and time indexes are fsynced only with ``active_indexes`` (a clean close):
        the segment holding the recovery point, and every one after it, has its indexes rebuilt from its
        ``.log`` by recovery after an unclean shutdown (``LogLoader``), so only a segment the recovery point
        passes entirely needs them on disk, and it is flushed whole (by the roll's ``flush-log``, or here
        once it is no longer active). With ``flush.messages=1`` this saves an index fsync every
        ``index.interval.bytes`` of appends."""
        current = self.recovery_point
        active = self.segments.last_segment
        if active is not None and active.base_offset < current < offset:
            # [current, offset) lies in the active segment, which holds the recovery point (the usual case,
            # e.g. after every append with flush.messages=1): nothing else to flush, no new file to sync the
            # directory for
            active.flush(indexes=active_indexes)
            return
        if current <= offset:
            to_flush = self.segments.values(current, offset)
            for segment in to_flush:
                if segment is active and not active_indexes:
                    segment.flush(indexes=False)
                else:
                    segment.flush()
            if any(s.base_offset >= current for s in to_flush):
                fsync_dir(self.dir)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, log end offset)``."""
        with self.io(f"error while rolling log segment for {self.topic_partition} in dir {self.dir.parent}"):
            start = self.time.nanoseconds()
            self.check_if_closed()
            new_offset = max(expected_next_offset or 0, self.log_end_offset)
            active = self.segments.active_segment
            if self.segments.contains(new_offset):
                if active is not None and active.base_offset == new_offset and active.size == 0:
                    # The active segment is empty yet looked full (KAFKA-6388): replace it.
                    _log.warning(
                        "%sTrying to roll a new log segment with start offset %d while it already exists and is "
                        "active with size 0",
                        self.log_prefix,
                        new_offset,
                    )
                    new_segment = self.create_and_delete_segment(new_offset, active, True)
                    self.update_log_end_offset(self.log_end_offset)
                    return new_segment
                raise KafkaError(
                    f"trying to roll a new log segment for topic partition {self.topic_partition} with start offset "
                    f"{new_offset} while it already exists"
                )
            if active is not None and new_offset < active.base_offset:
                raise KafkaError(
                    f"trying to roll a new log segment for topic partition {self.topic_partition} with start offset "
                    f"{new_offset} lower than start offset of the active segment {active}"
                )
            for path in (
                log_file(self.dir, new_offset),
                offset_index_file(self.dir, new_offset),
                time_index_file(self.dir, new_offset),
                transaction_index_file(self.dir, new_offset),
            ):
                if path.exists():
                    _log.warning(
                        "%sNewly rolled segment file %s already exists; deleting it first",
                        self.log_prefix,
                        path,
                    )
                    path.unlink()
            # Kafka's order: the old segment is trimmed (no preallocated tail is ever left behind the last
            # segment) before the new one is opened. If opening fails (EMFILE...), the old segment stays the
            # active one with full indexes, so the next append rolls again.
            if active is not None:
                active.on_become_inactive_segment()
            new_segment = open_segment(self.dir, new_offset, self.config, self.time)
            self.segments.add(new_segment)
            self.update_log_end_offset(self.log_end_offset)
            _log.info(
                "%sRolled new log segment at offset %d in %d ms.",
                self.log_prefix,
                new_offset,
                (self.time.nanoseconds() - start) // 1_000_000,
            )
            return new_segment

    def create_and_delete_segment(
        self, new_offset: int, to_delete: LogSegment, async_delete: bool
    ) -> LogSegment:
        """Create a segment at ``new_offset`` before deleting ``to_delete`` (never leaves the log without one)."""
        if new_offset == to_delete.base_offset:
            to_delete.change_file_suffixes("", DELETED_FILE_SUFFIX)
        new_segment = open_segment(self.dir, new_offset, self.config, self.time)
        self.segments.add(new_segment)
        if new_offset != to_delete.base_offset:
            self.segments.remove(to_delete.base_offset)
        delete_segment_files(
            [to_delete], async_delete, self.dir, self.scheduler, self.config, self.log_prefix
        )
        return new_segment

    # --- reads --------------------------------------------------------------------------------------------
    def convert_to_offset_metadata_or_throw(self, offset: int) -> LogOffsetMetadata:
        """Offset metadata (segment and position) for ``offset``, read from the log."""
        info = self.read(offset, 1, False, self._next_offset_metadata, False)
        return info.fetch_offset_metadata

    def read(
        self,
        start_offset: int,
        max_length: int,
        min_one_message: bool,
        max_offset_metadata: LogOffsetMetadata,
        include_aborted_txns: bool,
        *,
        in_memory: bool = False,
    ) -> FetchDataInfo:
        """Read from ``start_offset`` up to ``max_length`` bytes, never past ``max_offset_metadata``.

        The records are a file slice, or with ``in_memory`` read into memory (``LogSegment.read`` then
        ``to_memory_records``, usually in one ``pread``: :mod:`kafkalog.storage.segment_read`). An
        ``OSError`` takes the directory offline (:meth:`io`, inlined: this runs once per fetch) unless the
        segment being read was deleted meanwhile: that is a :class:`KafkaStorageError` only, which
        ``Log.read`` reports as :class:`OffsetOutOfRangeError`.
        """
        if self.offline:
            raise self.offline_error()
        segment: LogSegment | None = None
        try:
            end_offset = self._next_offset_metadata.message_offset
            segment = self.segments.floor_segment(start_offset)
            if start_offset > end_offset or segment is None:
                raise OffsetOutOfRangeError(
                    f"received request for offset {start_offset} for partition {self.topic_partition}, but we only "
                    f"have log segments upto {end_offset}"
                )
            max_message_offset = max_offset_metadata.message_offset
            if start_offset >= max_message_offset:
                if start_offset == max_message_offset:
                    return self._empty(max_offset_metadata, include_aborted_txns)
                return self._empty(
                    self.convert_to_offset_metadata_or_throw(start_offset), include_aborted_txns
                )
            max_segment = max_offset_metadata.segment_base_offset
            while segment is not None:
                base = segment.base_offset
                max_position: int | None
                if base < max_segment:
                    max_position = TO_SEGMENT_END
                elif base == max_segment:  # a segment base is >= 0: the metadata is not offset-only
                    max_position = max_offset_metadata.relative_position_in_segment
                else:
                    max_position = None
                if in_memory:
                    info = read_records(segment, start_offset, max_length, max_position, min_one_message)
                else:
                    info = segment.read(start_offset, max_length, max_position, min_one_message)
                if info is not None:
                    if include_aborted_txns:
                        info = self._add_aborted_transactions(start_offset, segment, info)
                    return info
                segment = self.segments.higher_segment(base)
            return FetchDataInfo(self._next_offset_metadata, MemoryRecords.EMPTY)
        except KafkaStorageError:
            raise
        except OSError as exc:
            if segment is not None and (
                segment.log.closed or self.segments.get(segment.base_offset) is not segment
            ):
                raise KafkaStorageError(f"segment {segment} was deleted during the read: {exc}") from exc
            message = f"exception while reading from {self.topic_partition} in dir {self.dir.parent}"
            raise self.io_failed(message, exc) from exc

    def _empty(self, metadata: LogOffsetMetadata, include_aborted_txns: bool) -> FetchDataInfo:
        return FetchDataInfo(
            metadata, MemoryRecords.EMPTY, aborted_transactions=[] if include_aborted_txns else None
        )

    def _add_aborted_transactions(
        self, start_offset: int, segment: LogSegment, info: FetchDataInfo
    ) -> FetchDataInfo:
        fetch_size = info.records.size_in_bytes
        start = OffsetPosition(
            info.fetch_offset_metadata.message_offset, info.fetch_offset_metadata.relative_position_in_segment
        )
        upper = segment.fetch_upper_bound_offset(start, fetch_size)
        if upper is None:
            higher = self.segments.higher_segment(segment.base_offset)
            upper = higher.base_offset if higher is not None else self.log_end_offset
        aborted: list[AbortedTxn] = []
        self.collect_aborted_transactions(start_offset, upper, segment, aborted.extend)
        return FetchDataInfo(info.fetch_offset_metadata, info.records, info.first_entry_incomplete, aborted)

    def collect_aborted_transactions(
        self,
        start_offset: int,
        upper_bound_offset: int,
        starting_segment: LogSegment,
        accumulator: Callable[[list[AbortedTxn]], object],
    ) -> None:
        """Aborted transactions overlapping ``[start_offset, upper_bound_offset)``, from ``starting_segment`` on."""
        for segment in [starting_segment, *self.segments.higher_segments(starting_segment.base_offset)]:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            accumulator(result.aborted_transactions)
            if result.is_complete:
                return

    def collect_aborted_transactions_range(
        self, log_start_offset: int, base_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """All aborted transactions from the segment holding ``base_offset`` up to ``upper_bound_offset``."""
        segment = self.segments.floor_segment(base_offset)
        out: list[AbortedTxn] = []
        if segment is not None:
            self.collect_aborted_transactions(log_start_offset, upper_bound_offset, segment, out.extend)
        return out

    # --- truncation and deletion --------------------------------------------------------------------------
    def remove_and_delete_segments(self, segments: list[LogSegment], async_delete: bool, reason: str) -> None:
        """Drop segments from the map and delete their files (see module doc)."""
        if not segments:
            return
        to_delete = list(segments)
        _log.info(
            "%sDeleting segments due to %s: %s", self.log_prefix, reason, ", ".join(str(s) for s in to_delete)
        )
        for segment in to_delete:
            self.segments.remove(segment.base_offset)
        delete_segment_files(to_delete, async_delete, self.dir, self.scheduler, self.config, self.log_prefix)

    def truncate_to(self, target_offset: int) -> list[LogSegment]:
        """Drop every offset >= ``target_offset``; returns the whole segments deleted."""
        deletable = self.segments.filter(lambda s: s.base_offset > target_offset)
        # Newest first: a crash part-way leaves a prefix of the log, never a hole.
        self.remove_and_delete_segments(list(reversed(deletable)), True, "log truncation")
        self.active_segment.truncate_to(target_offset)
        self.update_log_end_offset(target_offset)
        return deletable

    def truncate_fully_and_start_at(self, new_offset: int) -> list[LogSegment]:
        """Delete every segment and start an empty active segment at ``new_offset``."""
        with self.io(
            f"error while truncating the entire log for {self.topic_partition} in dir {self.dir.parent}"
        ):
            self.check_if_closed()
            to_delete = self.segments.values()
            if to_delete:
                self.remove_and_delete_segments(to_delete[:-1], True, "log truncation")
                self.create_and_delete_segment(new_offset, to_delete[-1], True)
            self.update_log_end_offset(new_offset)
            return to_delete

    def delete_all_segments(self) -> list[LogSegment]:
        """Delete every segment's files now."""
        with self.io(
            f"error while deleting all segments for {self.topic_partition} in dir {self.dir.parent}"
        ):
            deleted = self.segments.values()
            for segment in deleted:
                self.segments.remove(segment.base_offset)
            delete_segment_files(deleted, False, self.dir, self.scheduler, self.config, self.log_prefix)
            self.buffers_closed = True
            return deleted

    def delete_empty_dir(self) -> None:
        """Remove the directory itself once it has no segments."""
        if not self.segments.is_empty:
            raise RuntimeError(
                f"can not delete directory when {len(self.segments)} segments are still present"
            )
        if not self.buffers_closed:
            raise RuntimeError(
                f"can not delete directory when the log of {self.topic_partition} still has open file handles"
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, name: str) -> bool:
        """Rename the partition directory (atomic); False if it already has that name."""
        with self.io(f"error while renaming dir for {self.topic_partition} in log dir {self.dir.parent}"):
            renamed = self.dir.parent / name
            if renamed == self.dir:
                return False
            os.replace(self.dir, renamed)
            fsync_dir(self.dir.parent)
            self.dir = renamed
            self.segments.update_parent_dir(renamed)
            return True

    def close(self) -> None:
        """Close every segment (final time-index entries, trims, flushes); closing twice is harmless."""
        with self.io(f"error while closing log for {self.topic_partition} in dir {self.dir.parent}"):
            self.check_if_closed()
            self.segments.close()
            self.closed = True

    def close_handlers(self) -> None:
        """Close file descriptors without flushing (the directory went offline)."""
        self.segments.close_handlers()
        self.buffers_closed = True
        self.closed = True
