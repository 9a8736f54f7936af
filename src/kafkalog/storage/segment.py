"""LogSegment: one ``.log`` file and its offset, time and transaction indexes (Kafka's ``LogSegment``).

Invariants:

* The base offset is fixed for the segment's life: it is <= every offset in the segment and > every
  offset of earlier segments; every offset in the segment fits an int32 relative to it (an append that
  would break this raises :class:`~kafkalog.errors.LogSegmentOffsetOverflowError` and writes nothing).
* Index entries are sparse: after at least ``index.interval.bytes`` have been appended since the last
  entry, the next append adds ``(last offset of the appended batches, position where they start)`` to the
  offset index and ``(max timestamp so far, its offset)`` to the time index. The first append after the
  segment is created, truncated or recovered never adds an entry.
* ``max_timestamp_so_far`` / ``offset_of_max_timestamp_so_far`` come from the time index's last entry
  when the segment is opened (lazily) and from the appends after that.
* Time-based rolling measures record time: from the first batch's max timestamp to the incoming one,
  falling back to wall-clock time since the segment was created when timestamps are missing.
* Indexes load lazily: opening an existing segment costs one ``stat`` of its ``.log`` (for its size) and
  no index object at all; the index objects are made on first use, their file names derived from the
  ``.log`` file's name at that time, and a segment that is never read never opens its indexes (a log of
  10,000 segments opens in a fraction of a second). An index that fails its load-time check is rebuilt
  from the ``.log``.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from kafkalog.errors import (
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaError,
    LogSegmentOffsetOverflowError,
)
from kafkalog.records import MemoryRecords, RecordBatch
from kafkalog.records.batch import MAGIC_V2
from kafkalog.storage._reindex import Walk, bulk_reindex, check_batch_offsets
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.files import (
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    filename_prefix_from_offset,
)
from kafkalog.storage.offset_index import OffsetIndex
from kafkalog.storage.time_index import TimeIndex
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from kafkalog.storage.types import (
    UNKNOWN_TIMESTAMP_OFFSET,
    CompletedTxnLike,
    EpochCacheLike,
    FetchDataInfo,
    LogOffsetMetadata,
    LogOffsetPosition,
    OffsetPosition,
    ProducerStateLike,
    RollParams,
    TimestampAndOffset,
    TimestampOffset,
)
from kafkalog.time import SYSTEM_TIME, Time

__all__ = ["TO_SEGMENT_END", "LogSegment", "check_batch_offsets"]

#: ``max_position`` for :meth:`LogSegment.read` meaning "up to the end of the segment".
TO_SEGMENT_END = -1

_log = logging.getLogger("kafkalog.storage.segment")
#: Guards the first-use creation of a segment's index objects (readers take no segment lock).
_LAZY_LOCK = threading.Lock()
_INT32_MAX = 2**31 - 1
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


class LogSegment:
    """A segment of a partition log: ``<base>.log`` plus ``.index``, ``.timeindex`` and ``.txnindex``."""

    def __init__(
        self,
        log: FileRecords,
        offset_index: OffsetIndex | None,
        time_index: TimeIndex | None,
        txn_index: TransactionIndex | None,
        base_offset: int,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        roll_jitter_ms: int = 0,
        time: Time = SYSTEM_TIME,
        *,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> None:
        """An index given as None is made on first use, named after the ``.log`` file at that time
        (``<base>.log[suffix]`` -> ``<base>.index[suffix]`` ...) with ``max_index_size``."""
        self.log = log
        self._oi = offset_index
        self._ti = time_index
        self._txn = txn_index
        self._max_index_size = max_index_size
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self._time = time
        self.created = time.milliseconds()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: TimestampOffset | None = None

    # --- opening ------------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path | str,
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        roll_jitter_ms: int = 0,
        time: Time = SYSTEM_TIME,
        file_already_exists: bool = False,
        init_file_size: int = 0,
        preallocate: bool = False,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or create) the segment at ``base_offset`` in ``directory``; indexes are not read.

        An existing segment (``file_already_exists``) costs one ``stat`` of its ``.log`` and one ``Path``
        object: the index objects are made (their names derived from the ``.log`` name) when first used.
        """
        dir_path = directory if isinstance(directory, Path) else Path(directory)
        prefix = filename_prefix_from_offset(base_offset)
        log_path = dir_path / (prefix + LOG_FILE_SUFFIX + file_suffix)
        if file_already_exists:
            # What FileRecords.open does for an existing file, without parsing the path a second time.
            log = FileRecords(log_path, None, 0, None, is_slice=False, size=os.stat(log_path).st_size)
        else:
            log = FileRecords.open(log_path, init_file_size=init_file_size, preallocate=preallocate)
        return cls(
            log,
            None,
            None,
            None,
            base_offset,
            index_interval_bytes,
            roll_jitter_ms,
            time,
            max_index_size=max_index_size,
        )

    @staticmethod
    def random_jitter_ms(segment_jitter_ms: int, segment_ms: int) -> int:
        """Kafka's ``randomSegmentJitter``: a per-segment jitter in ``[0, min(jitter, segment.ms))``."""
        if segment_jitter_ms <= 0:
            return 0
        return random.randrange(0, 2**31) % min(segment_jitter_ms, segment_ms)

    # --- indexes (lazy, self-repairing) --------------------------------------------------------------------
    def _index_file(self, suffix: str) -> str:
        """The path of this segment's index with ``suffix``, derived from the ``.log`` file's current name."""
        directory, name = os.path.split(os.fspath(self.log.path))
        dot = name.find(".")
        if dot < 0 or not name.startswith(LOG_FILE_SUFFIX, dot):
            raise KafkaError(f"cannot derive index file names from segment file {self.log.path}")
        return os.path.join(directory, name[:dot] + suffix + name[dot + len(LOG_FILE_SUFFIX) :])

    def _make_indexes(self) -> None:
        with _LAZY_LOCK:  # readers take no segment lock: two threads must not make two objects
            if self._oi is None:
                self._oi = OffsetIndex(
                    self._index_file(INDEX_FILE_SUFFIX), self.base_offset, self._max_index_size
                )
            if self._ti is None:
                self._ti = TimeIndex(
                    self._index_file(TIME_INDEX_FILE_SUFFIX), self.base_offset, self._max_index_size
                )
            if self._txn is None:
                self._txn = TransactionIndex(self.base_offset, self._index_file(TXN_INDEX_FILE_SUFFIX))

    @property
    def _offset_index(self) -> OffsetIndex:
        """The offset index object (made on first use, not loaded)."""
        if self._oi is None:
            self._make_indexes()
        assert self._oi is not None
        return self._oi

    @property
    def _time_index(self) -> TimeIndex:
        """The time index object (made on first use, not loaded)."""
        if self._ti is None:
            self._make_indexes()
        assert self._ti is not None
        return self._ti

    @property
    def txn_index(self) -> TransactionIndex:
        """The transaction index (made on first use; its file is read when first searched)."""
        if self._txn is None:
            self._make_indexes()
        assert self._txn is not None
        return self._txn

    @property
    def offset_index(self) -> OffsetIndex:
        """The offset index, loaded (and rebuilt if it fails its check) on first use."""
        index = self._oi
        if index is None or not index.is_loaded:
            self._load_indexes()
            index = self._offset_index
        return index

    @property
    def time_index(self) -> TimeIndex:
        """The time index, loaded (and rebuilt if it fails its check) on first use."""
        index = self._ti
        if index is None or not index.is_loaded:
            self._load_indexes()
            index = self._time_index
        return index

    @property
    def indexes_loaded(self) -> bool:
        """Whether the offset or the time index has been read (a segment that is never used reads neither)."""
        return (self._oi is not None and self._oi.is_loaded) or (self._ti is not None and self._ti.is_loaded)

    def _load_indexes(self) -> None:
        try:
            self._offset_index.load()
            self._time_index.load()
        except CorruptIndexError as exc:
            _log.warning(
                "Found a corrupted index file for segment %s (%s), rebuilding it", self.log.path, exc
            )
            self.rebuild_indexes()

    def rebuild_indexes(self) -> int:
        """Rebuild the offset and time indexes from the ``.log`` (the ``.log`` itself is not changed).

        Returns the number of valid bytes scanned.
        """
        valid_bytes = self._reindex()
        self._time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        return valid_bytes

    def _reindex(
        self,
        on_batch: Callable[[RecordBatch], None] | None = None,
        producer_state: ProducerStateLike | None = None,
        epoch_cache: EpochCacheLike | None = None,
    ) -> int:
        """Reset both indexes and rebuild them from the valid prefix of the ``.log``; returns its length.

        Every batch is checked as Kafka's recovery checks it (CRC and size; the record count is not read, so a
        batch Kafka keeps is kept), and its offsets: they fit the segment and grow from batch to batch (the
        base offset is outside the CRC, so a damaged one that goes backwards or below the segment's base offset
        is caught here, while a forward jump looks like a compaction gap); ``on_batch`` (recovery's replay of
        ``producer_state`` and
        ``epoch_cache``) sees each valid batch after it is indexed. The walk stops at the first invalid batch.

        Clean v2 batches take a bulk path (:mod:`kafkalog.storage._reindex`); the first batch it does not vouch for,
        and everything after it, takes the batch-at-a-time walk below, which checks, raises and stops as it
        always did.
        """
        self._offset_index.reset()
        self._time_index.reset()
        self._max_ts_and_offset = UNKNOWN_TIMESTAMP_OFFSET
        walk = Walk(0, 0, self.base_offset - 1)
        try:
            bulk_reindex(self, walk, on_batch, producer_state, epoch_cache)
            for batch in self.log.batches(walk.valid_bytes):
                batch.ensure_valid()
                check_batch_offsets(
                    batch, self.base_offset, walk.previous_last, False, self.log.path, check_count=False
                )
                self.ensure_offset_in_range(batch.last_offset)
                walk.previous_last = batch.last_offset
                self._note_max_timestamp(batch.max_timestamp, batch.last_offset)
                if walk.valid_bytes - walk.last_index_entry > self.index_interval_bytes:
                    self._offset_index.append(batch.last_offset, walk.valid_bytes)
                    self._time_index.maybe_append(
                        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                    )
                    walk.last_index_entry = walk.valid_bytes
                walk.valid_bytes += batch.size_in_bytes
                if on_batch is not None:
                    on_batch(batch)
        except (CorruptRecordError, InvalidRecordError, InvalidOffsetError) as exc:
            _log.warning(
                "Found invalid messages in log segment %s at byte offset %d: %s",
                self.log.path,
                walk.valid_bytes,
                str(
                    exc
                ),  # not the exception: its traceback holds this segment's files open in any kept record
            )
        return walk.valid_bytes

    # --- sizes and offsets --------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes of batches in the ``.log``."""
        return self.log.size_in_bytes

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits this segment (``0 <= offset - base <= 2**31 - 1``)."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def ensure_offset_in_range(self, offset: int) -> None:
        """Raise :class:`LogSegmentOffsetOverflowError` unless ``offset`` fits this segment."""
        if not self.can_convert_to_relative_offset(offset):
            raise LogSegmentOffsetOverflowError(
                f"detected offset overflow at offset {offset} in segment {self}", self.base_offset, offset
            )

    def _note_max_timestamp(self, timestamp: int, offset: int) -> None:
        current = self._max_ts_and_offset
        if current is None:
            current = self._load_max_timestamp()
        if timestamp > current.timestamp:
            self._max_ts_and_offset = TimestampOffset(timestamp, offset)

    def _load_max_timestamp(self) -> TimestampOffset:
        last = self.time_index.last_entry()
        self._max_ts_and_offset = last
        if last.timestamp < 0 and self.log.size_in_bytes > 0:
            # An empty time index on a non-empty segment: records without timestamps, or an index cut short
            # by a crash that structure checks cannot see. Read the answer from the batches (once; lazily).
            self._load_largest_timestamp()
        return self._max_ts_and_offset

    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        """The largest timestamp in the segment and the offset Kafka associates with it."""
        if self._max_ts_and_offset is None:
            return self._load_max_timestamp()
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest record timestamp appended so far (-1 if none)."""
        return self.max_timestamp_and_offset_so_far.timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """The (batch last) offset that carries :attr:`max_timestamp_so_far`."""
        return self.max_timestamp_and_offset_so_far.offset

    # --- append -------------------------------------------------------------------------------------------
    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        shallow_offset_of_max_timestamp: int,
        records: MemoryRecords,
    ) -> None:
        """Append batches whose last offset is ``largest_offset``; maybe add index entries."""
        size = len(records.buffer)
        if size <= 0:
            return
        file = self.log
        physical_position = file.size_in_bytes
        if not 0 <= largest_offset - self.base_offset <= _INT32_MAX:
            self.ensure_offset_in_range(largest_offset)
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        current = self._max_ts_and_offset
        if current is None:
            current = self._load_max_timestamp()  # before the write: what the segment held, not the new batch
        file.append(records)
        if largest_timestamp > current.timestamp:
            current = self._max_ts_and_offset = TimestampOffset(
                largest_timestamp, shallow_offset_of_max_timestamp
            )
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            oi, ti = self._oi, self._ti
            # the index properties' check, inlined on the append path
            if oi is None or ti is None or not (oi._loaded and ti._loaded):  # noqa: SLF001
                oi, ti = self.offset_index, self.time_index
            oi.append(largest_offset, physical_position)
            ti.maybe_append(current.timestamp, current.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def append_from_file(self, records: FileRecords, start: int) -> int:
        """Append whole batches of ``records`` from byte ``start`` while they fit this segment.

        Used to split a segment whose offsets overflow. Returns the bytes appended.
        """
        position = start
        size = records.size_in_bytes
        while position < size:
            bucket = self._batches_that_fit(records, position)
            if bucket is None:
                break
            end, last_offset, max_ts, max_ts_offset = bucket
            data = MemoryRecords(records.read(position, end - position))
            self.append(last_offset, max_ts, max_ts_offset, data)
            position = end
        return position - start

    def _batches_that_fit(self, records: FileRecords, position: int) -> tuple[int, int, int, int] | None:
        end = position
        last_offset = -1
        max_ts = -1
        max_ts_offset = -1
        for batch in records.batches(position):
            if not self.can_convert_to_relative_offset(batch.last_offset) or end - position > 1 << 20:
                break
            end = batch.position + batch.size_in_bytes
            last_offset = batch.last_offset
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_offset = batch.max_timestamp, batch.last_offset
        if end == position:
            return None
        return end, last_offset, max_ts, max_ts_offset

    def update_txn_index(self, completed_txn: CompletedTxnLike, last_stable_offset: int) -> None:
        """Record ``completed_txn`` in the transaction index if it was aborted."""
        if completed_txn.is_aborted:
            self.txn_index.append(
                AbortedTxn(
                    completed_txn.producer_id,
                    completed_txn.first_offset,
                    completed_txn.last_offset,
                    last_stable_offset,
                )
            )

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions of this segment overlapping ``[fetch_offset, upper_bound_offset)``."""
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # --- lookups and reads --------------------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_file_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first one after it): its last offset, position and size."""
        index = self.offset_index
        upper = index.lookup_upper(offset)
        if upper is not None and upper.position >= starting_file_position:
            # Usually one batch per index entry: the batch at the smallest upper bound holds ``offset``.
            found = self.log.batch_range_at(upper.position)
            if found is not None and found[0] <= offset <= found[1]:
                return LogOffsetPosition(found[1], upper.position, found[2])
        mapping = index.lookup(offset)
        return self.log.search_for_offset_with_size(offset, max(mapping.position, starting_file_position))

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = TO_SEGMENT_END,
        min_one_message: bool = False,
    ) -> FetchDataInfo | None:
        """Read from the batch holding ``start_offset``, at most ``max_size`` bytes, not past ``max_position``.

        Returns None if ``start_offset`` is beyond the segment. The records are a file slice (a view); they
        may end with a partial batch. With ``min_one_message`` the first batch is returned whole even if it
        is larger than ``max_size``. ``max_position`` is :data:`TO_SEGMENT_END` for no limit, or None when
        the limit is unknown (Kafka's empty ``Optional``): the read then returns no records.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for log read from segment {self.log}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        metadata = LogOffsetMetadata(start_offset, self.base_offset, start.position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0 or max_position is None:
            return FetchDataInfo(metadata, MemoryRecords.EMPTY)
        if max_position == TO_SEGMENT_END:
            max_position = self.size
        fetch_size = min(max_position - start.position, adjusted_max_size)
        if fetch_size < 0:
            fetch_size = 0
        return FetchDataInfo(
            metadata,
            self.log.slice(start.position, fetch_size),
            first_entry_incomplete=adjusted_max_size < start.size,
        )

    def fetch_upper_bound_offset(self, start_offset_position: OffsetPosition, fetch_size: int) -> int | None:
        """An offset known to be at or beyond ``fetch_size`` bytes after the start position (via the index)."""
        found = self.offset_index.fetch_upper_bound_offset(start_offset_position, fetch_size)
        return None if found is None else found.offset

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (the base offset when empty)."""
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self.base_offset
        for batch in self.log.batches(start):
            next_offset = batch.next_offset
        return next_offset

    def batches(self, start_position: int = 0) -> Iterator[RecordBatch]:
        """Walk the segment's batches from a byte position."""
        return self.log.batches(start_position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int | None = None
    ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        ts_entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(ts_entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    # --- recovery and truncation --------------------------------------------------------------------------
    def recover(
        self,
        producer_state: ProducerStateLike | None = None,
        leader_epoch_cache: EpochCacheLike | None = None,
    ) -> int:
        """Validate every batch, rebuild all indexes, cut the invalid tail; return the bytes truncated.

        Producer state and the leader epoch cache (when given) are replayed from the magic-2 batches (the
        producer state's map end offset moves past each one, as in Kafka), and aborted transactions are
        written to the rebuilt transaction index.
        """
        self.txn_index.reset()

        def replay(batch: RecordBatch) -> None:
            if batch.magic < MAGIC_V2:
                return
            if leader_epoch_cache is not None and batch.partition_leader_epoch >= 0:
                latest = leader_epoch_cache.latest_epoch
                if latest is None or batch.partition_leader_epoch > latest:
                    leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            if producer_state is not None:
                completed = producer_state.update_from_batch(batch)
                if completed is not None:
                    self.update_txn_index(completed, producer_state.last_stable_offset(completed))
                    producer_state.complete_txn(completed)
                producer_state.update_map_end_offset(batch.last_offset + 1)

        valid_bytes = self._reindex(replay, producer_state, leader_epoch_cache)
        truncated = self.log.size_in_bytes - valid_bytes
        if truncated > 0:
            _log.debug(
                "Truncated %d invalid bytes at the end of segment %s during recovery",
                truncated,
                self.log.path,
            )
            self.log.truncate_to(valid_bytes)
        self._offset_index.trim_to_valid_size()
        self._time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self._time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after the one holding ``offset``; returns the bytes removed."""
        had_timestamp = self.max_timestamp_so_far >= 0
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # After truncation the indexes may look full (KAFKA-6492): give them their room back.
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size_in_bytes == 0:
            self.created = self._time.milliseconds()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        if had_timestamp:
            self._load_largest_timestamp()
        return truncated

    def _load_largest_timestamp(self) -> None:
        last = self.time_index.last_entry()
        self._max_ts_and_offset = last
        position = self.offset_index.lookup(last.offset).position
        after = self.log.largest_timestamp_after(position)
        if after.timestamp > last.timestamp:
            self._max_ts_and_offset = after

    # --- rolling ------------------------------------------------------------------------------------------
    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            for batch in self.log.batches():
                self._rolling_based_timestamp = batch.max_timestamp
                break

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp (what time-based rolling measures from)."""
        self._load_first_batch_timestamp()
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """How long this segment has been filling, in record time when known, else wall-clock time."""
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created

    def should_roll(self, params: RollParams) -> bool:
        """Kafka's roll conditions: size, age (minus jitter), full indexes, relative offset overflow."""
        return self.should_roll_for(
            params.max_segment_ms,
            params.max_segment_bytes,
            params.max_timestamp_in_messages,
            params.max_offset_in_messages,
            params.messages_size,
            params.now,
        )

    def should_roll_for(
        self,
        max_segment_ms: int,
        max_segment_bytes: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        messages_size: int,
        now: int,
    ) -> bool:
        """:meth:`should_roll` without building a :class:`RollParams` (the append path's per-call form)."""
        size = self.log.size_in_bytes
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self._rolling_based_timestamp
            if ts is None:
                ts = self.rolling_based_timestamp
            waited = max_timestamp_in_messages - ts if ts is not None and ts >= 0 else now - self.created
            if waited > max_segment_ms - self.roll_jitter_ms:
                return True
        oi, ti = self._oi, self._ti
        # the index properties' check, inlined on the append path
        if oi is None or ti is None or not (oi._loaded and ti._loaded):  # noqa: SLF001
            oi, ti = self.offset_index, self.time_index
        return (
            oi.is_full() or ti.is_full() or not 0 <= max_offset_in_messages - self.base_offset <= _INT32_MAX
        )

    def get_first_batch_timestamp(self) -> int:
        """:attr:`rolling_based_timestamp` when known and >= 0, else ``2**63 - 1`` (empty or no timestamps)."""
        ts = self.rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else 2**63 - 1

    def on_become_inactive_segment(self) -> None:
        """A roll made this segment read-only: final time-index entry, then trim indexes and ``.log``."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def resize_indexes(self, size: int) -> None:
        """Resize both indexes (the active segment's get their preallocation back at load)."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # --- timestamps of the files --------------------------------------------------------------------------
    @property
    def last_modified(self) -> int:
        """The ``.log`` file's modification time, in epoch ms."""
        return int(os.stat(self.log.path).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        """Set the modification time of the ``.log`` and index files."""
        seconds = ms / 1000.0
        for path in (self.log.path, self._offset_index.path, self._time_index.path):
            if path.exists():
                os.utime(path, (seconds, seconds))

    def largest_timestamp(self) -> int:
        """The largest record timestamp, or the file's modification time without timestamps (retention)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified

    # --- file management ----------------------------------------------------------------------------------
    def flush(self, *, indexes: bool = True) -> None:
        """fsync the ``.log``, the transaction index and (unless ``indexes`` is False) the offset and time
        indexes. Index files that were never written are created (and fsynced) either way, as Kafka's flush
        materialises them."""
        self.log.flush()
        offset_index, time_index = self.offset_index, self.time_index
        if indexes or not offset_index.is_loaded:
            offset_index.flush()
        if indexes or not time_index.is_loaded:
            time_index.flush()
        self.txn_index.flush()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files from ``old_suffix`` to ``new_suffix`` (e.g. ``""`` -> ``.deleted``)."""

        def renamed(path: Path) -> Path:
            name = path.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return path.with_name(name + new_suffix)

        # The index objects are made (from the current .log name) before the .log is renamed.
        offset_index, time_index, txn_index = self._offset_index, self._time_index, self.txn_index
        self.log.rename_to(renamed(self.log.path))
        offset_index.rename_to(renamed(offset_index.path))
        time_index.rename_to(renamed(time_index.path))
        txn_index.rename_to(renamed(txn_index.path))

    def has_suffix(self, suffix: str) -> bool:
        """Whether all files carry ``suffix``."""
        return all(
            p.name.endswith(suffix)
            for p in (self.log.path, self._offset_index.path, self._time_index.path, self.txn_index.path)
        )

    def update_parent_dir(self, parent: Path) -> None:
        """Point every file at ``parent`` after the directory was renamed."""
        self.log.update_parent_dir(parent)
        # Indexes not made yet will take their names from the moved .log file.
        for index in (self._oi, self._ti, self._txn):
            if index is not None:
                index.update_parent_dir(parent)

    def sanity_check(self, time_index_file_newly_created: bool = False) -> None:
        """Check the indexes as the loader does: a missing offset index or a bad txn index is an error."""
        if not self._offset_index.path.exists():
            raise FileNotFoundError(f"offset index file {self._offset_index.path} does not exist")
        if time_index_file_newly_created:
            self.time_index.resize(0)
        try:
            self.txn_index.sanity_check()
        except KafkaError as exc:
            if isinstance(exc, CorruptIndexError):
                raise
            raise CorruptIndexError(str(exc)) from exc

    def close(self) -> None:
        """Final time-index entry (if the max timestamp is known), trim and close everything."""
        if self._max_ts_and_offset is not None and self._ti is not None and self._ti.is_loaded:
            self._ti.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
        if self._oi is not None:
            self._oi.close()
        if self._ti is not None:
            self._ti.close()
        self.log.close()
        if self._txn is not None:
            self._txn.close()

    def close_handlers(self) -> None:
        """Close file descriptors without flushing or trimming (the directory went offline)."""
        if self._oi is not None:
            self._oi.close_handler()
        if self._ti is not None:
            self._ti.close_handler()
        self.log.close_handlers()
        if self._txn is not None:
            self._txn.close()

    def delete_if_exists(self) -> None:
        """Delete all four files (missing ones are fine)."""
        self.log.delete()
        self._offset_index.delete_if_exists()
        self._time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    @property
    def deleted(self) -> bool:
        """Whether the ``.log`` file no longer exists."""
        return not self.log.path.exists()

    def __repr__(self) -> str:
        return f"LogSegment(baseOffset={self.base_offset}, size={self.size}, lastModifiedTime={self.created})"
