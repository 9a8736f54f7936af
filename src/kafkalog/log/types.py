"""Value types of the log layer: :class:`AppendOrigin`, :class:`FetchIsolation`, :class:`LogAppendInfo`.

``LogAppendInfo`` is what an append reports (Kafka's ``LogAppendInfo``): the offsets it was given, the
largest timestamp and the offset Kafka associates with it, the log append time (for ``LogAppendTime``
topics, else -1), the log start offset after the append, how many records and batches were appended, how
many bytes were valid, the source and target codecs and whether the offsets were monotonic. For a
duplicate batch from an idempotent producer, nothing is written and the info carries the original offsets.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkalog.records import Compression
from kafkalog.storage.types import LogOffsetMetadata

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_PENDING_UPLOAD_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIERED_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendOrigin",
    "FetchIsolation",
    "LeaderHwChange",
    "LogAppendInfo",
    "LogOffsetSnapshot",
    "plain_append_info",
]

# The special timestamps of a ListOffsets lookup (Kafka's ``ListOffsetsRequest`` constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


class AppendOrigin(enum.Enum):
    """Who is appending: a client (leader), a replica fetcher (follower) or the transaction coordinator."""

    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"
    RAFT_LEADER = "raft_leader"


class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (replicas), the high watermark, or the last stable offset."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


class LeaderHwChange(enum.Enum):
    """Whether an append moved the leader's high watermark."""

    INCREASED = "increased"
    SAME = "same"
    NONE = "none"


@dataclass
class LogAppendInfo:
    """What an append did (see module doc); mutable while the append is in progress."""

    first_offset: int
    last_offset: int
    last_leader_epoch: int | None
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    source_compression: Compression
    target_compression: Compression
    valid_bytes: int
    last_offset_of_first_batch: int
    num_messages: int = 0
    shallow_count: int = 0
    offsets_monotonic: bool = True
    record_errors: list[tuple[int, str]] | None = None
    leader_hw_change: LeaderHwChange = LeaderHwChange.NONE
    duplicate: bool = False

    @property
    def num_batches(self) -> int:
        """Alias of ``shallow_count``."""
        return self.shallow_count


_new = object.__new__
_NONE_CODEC = Compression.NONE


def plain_append_info(
    first_offset: int,
    last_offset: int,
    last_leader_epoch: int | None,
    max_timestamp: int,
    shallow_offset_of_max_timestamp: int,
    log_append_time: int,
    log_start_offset: int,
    valid_bytes: int,
    num_messages: int,
) -> LogAppendInfo:
    """The :class:`LogAppendInfo` of one uncompressed batch appended as is (the fast append path's answer),
    equal to the one ``__init__`` makes, in about 70% of its time.

    The fields whose value is the dataclass default (``offsets_monotonic``, ``record_errors``,
    ``leader_hw_change``, ``duplicate``) are left to the class attributes the dataclass defines, so the
    instance dict is smaller; setting one later (``info.duplicate = True``) works as on any instance."""
    info: LogAppendInfo = _new(LogAppendInfo)
    info.__dict__ = {
        "first_offset": first_offset,
        "last_offset": last_offset,
        "last_leader_epoch": last_leader_epoch,
        "max_timestamp": max_timestamp,
        "shallow_offset_of_max_timestamp": shallow_offset_of_max_timestamp,
        "log_append_time": log_append_time,
        "log_start_offset": log_start_offset,
        "source_compression": _NONE_CODEC,
        "target_compression": _NONE_CODEC,
        "valid_bytes": valid_bytes,
        "last_offset_of_first_batch": num_messages - 1,
        "num_messages": num_messages,
        "shallow_count": 1,
    }
    return info


@dataclass(frozen=True)
class LogOffsetSnapshot:
    """The offsets a fetch response reports, captured together."""

    log_start_offset: int
    log_end_offset: LogOffsetMetadata
    high_watermark: LogOffsetMetadata
    last_stable_offset: LogOffsetMetadata
