"""Small value types that carry positions and results between the storage and log layers.

* :class:`OffsetPosition` — an offset-index entry resolved to absolute terms: ``(offset, position)``.
* :class:`TimestampOffset` — a time-index entry: ``(timestamp, offset)``; ``UNKNOWN`` is ``(-1, -1)``.
* :class:`LogOffsetPosition` — a batch found by offset: its last offset, file position and size.
* :class:`TimestampAndOffset` — the answer to a timestamp lookup (with the batch's leader epoch).
* :class:`LogOffsetMetadata` — an offset plus, when known, the segment base and byte position holding it
  (Kafka's ``LogOffsetMetadata``; ``UNKNOWN_OFFSET_METADATA`` marks offset-only metadata).
* :class:`FetchDataInfo` — what a read returns: where it started, the records, and whether the first batch
  is cut short; for ``read_committed`` reads also the aborted transactions that overlap the range.
* :class:`RollParams` — everything ``LogSegment.should_roll`` needs to decide.
* :class:`ProducerStateLike`, :class:`EpochCacheLike`, :class:`CompletedTxnLike` — what segment recovery
  needs from the log layer's producer state and leader epoch cache (protocols: storage never imports the
  log layer).

The dataclasses are frozen: a value never changes once made. :func:`read_info` and
:func:`fetch_data_info` make the same frozen values without the generated ``__init__`` (which pays an
``object.__setattr__`` call per field): the read path makes two per read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol

if TYPE_CHECKING:
    from kafkalog.records import MemoryRecords, RecordBatch
    from kafkalog.storage.file_records import FileRecords
    from kafkalog.storage.txn_index import AbortedTxn

__all__ = [
    "UNKNOWN_OFFSET",
    "UNKNOWN_OFFSET_METADATA",
    "UNKNOWN_TIMESTAMP_OFFSET",
    "CompletedTxnLike",
    "EpochCacheLike",
    "FetchDataInfo",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "OffsetPosition",
    "ProducerStateLike",
    "RollParams",
    "TimestampAndOffset",
    "TimestampOffset",
    "fetch_data_info",
    "offset_metadata",
    "read_info",
]

UNKNOWN_OFFSET: Final = -1
_UNKNOWN_SEGMENT: Final = -1
_UNKNOWN_POSITION: Final = -1


class OffsetPosition(NamedTuple):
    """An offset-index entry: absolute ``offset`` and the byte ``position`` of its batch in the ``.log``."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time-index entry: the largest timestamp seen up to (and including) ``offset``."""

    timestamp: int
    offset: int


#: Kafka's ``TimestampOffset.UNKNOWN``: no timestamp seen yet.
UNKNOWN_TIMESTAMP_OFFSET: Final = TimestampOffset(-1, -1)


class LogOffsetPosition(NamedTuple):
    """A batch located by offset: its last ``offset``, its file ``position`` and its ``size``."""

    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    """Result of a lookup by timestamp: the record's ``timestamp``, ``offset`` and batch ``leader_epoch``."""

    timestamp: int
    offset: int
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset, and where it lives: segment base offset and byte position (when known)."""

    message_offset: int
    segment_base_offset: int = _UNKNOWN_SEGMENT
    relative_position_in_segment: int = _UNKNOWN_POSITION

    @property
    def message_offset_only(self) -> bool:
        """True when only the offset is known (no segment and position)."""
        return (
            self.segment_base_offset == _UNKNOWN_SEGMENT
            and self.relative_position_in_segment == _UNKNOWN_POSITION
        )

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        """Whether this offset is on an older segment than ``that``."""
        if self.message_offset_only or that.message_offset_only:
            raise ValueError(
                f"{self} cannot compare its segment info with {that} since it only has message offset info"
            )
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        """Whether both offsets are on the same segment."""
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes between the two positions (both on the same segment)."""
        if self.message_offset_only or that.message_offset_only or not self.on_same_segment(that):
            raise ValueError(f"{self} and {that} are not on the same segment")
        return self.relative_position_in_segment - that.relative_position_in_segment


UNKNOWN_OFFSET_METADATA: Final = LogOffsetMetadata(UNKNOWN_OFFSET)


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """The result of a read: start metadata, the records (a file slice or in memory), and txn info."""

    fetch_offset_metadata: LogOffsetMetadata
    records: MemoryRecords | FileRecords
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None


_new = object.__new__
# The slot descriptors of the frozen dataclasses: setting through them is what the generated ``__init__``
# does (via ``object.__setattr__``), minus the attribute lookups.
_set_message_offset = vars(LogOffsetMetadata)["message_offset"].__set__
_set_segment_base_offset = vars(LogOffsetMetadata)["segment_base_offset"].__set__
_set_relative_position = vars(LogOffsetMetadata)["relative_position_in_segment"].__set__
_set_fetch_offset_metadata = vars(FetchDataInfo)["fetch_offset_metadata"].__set__
_set_records = vars(FetchDataInfo)["records"].__set__
_set_first_entry_incomplete = vars(FetchDataInfo)["first_entry_incomplete"].__set__
_set_aborted_transactions = vars(FetchDataInfo)["aborted_transactions"].__set__


def offset_metadata(message_offset: int, segment_base_offset: int, position: int) -> LogOffsetMetadata:
    """``LogOffsetMetadata(message_offset, segment_base_offset, position)``, made without ``__init__`` (the
    log end offset moves on every append)."""
    meta: LogOffsetMetadata = _new(LogOffsetMetadata)
    _set_message_offset(meta, message_offset)
    _set_segment_base_offset(meta, segment_base_offset)
    _set_relative_position(meta, position)
    return meta


def read_info(
    message_offset: int,
    segment_base_offset: int,
    position: int,
    records: MemoryRecords | FileRecords,
    first_entry_incomplete: bool = False,
) -> FetchDataInfo:
    """``FetchDataInfo(LogOffsetMetadata(message_offset, segment_base_offset, position), records,
    first_entry_incomplete)``: a segment read's answer, both values made without ``__init__``."""
    meta: LogOffsetMetadata = _new(LogOffsetMetadata)
    _set_message_offset(meta, message_offset)
    _set_segment_base_offset(meta, segment_base_offset)
    _set_relative_position(meta, position)
    info: FetchDataInfo = _new(FetchDataInfo)
    _set_fetch_offset_metadata(info, meta)
    _set_records(info, records)
    _set_first_entry_incomplete(info, first_entry_incomplete)
    _set_aborted_transactions(info, None)
    return info


def fetch_data_info(
    metadata: LogOffsetMetadata,
    records: MemoryRecords | FileRecords,
    first_entry_incomplete: bool = False,
    aborted_transactions: list[AbortedTxn] | None = None,
) -> FetchDataInfo:
    """``FetchDataInfo(...)`` with the same arguments, made without ``__init__``."""
    info: FetchDataInfo = _new(FetchDataInfo)
    _set_fetch_offset_metadata(info, metadata)
    _set_records(info, records)
    _set_first_entry_incomplete(info, first_entry_incomplete)
    _set_aborted_transactions(info, aborted_transactions)
    return info


@dataclass(frozen=True, slots=True)
class RollParams:
    """Inputs of ``LogSegment.should_roll``: config limits and the incoming append's shape."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class CompletedTxnLike(Protocol):
    """A transaction that a marker completed (see ``kafkalog.log.producer_state``)."""

    @property
    def producer_id(self) -> int: ...
    @property
    def first_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def is_aborted(self) -> bool: ...


class ProducerStateLike(Protocol):
    """What segment recovery needs from the producer state manager."""

    def update_from_batch(self, batch: RecordBatch) -> Any:
        """Replay one batch (as a follower would); return the transaction it completed (CompletedTxnLike) or None."""
        ...

    def last_stable_offset(self, completed: Any) -> int:
        """The LSO at the time ``completed`` completed."""
        ...

    def complete_txn(self, completed: Any) -> None:
        """Mark the transaction complete."""
        ...

    def update_map_end_offset(self, offset: int) -> None:
        """Record that the state now covers every offset below ``offset``."""
        ...


class EpochCacheLike(Protocol):
    """What segment recovery needs from the leader epoch cache."""

    @property
    def latest_epoch(self) -> int | None:
        """The largest epoch in the cache, if any."""
        ...

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``."""
        ...
