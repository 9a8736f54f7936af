"""One segment's files, exactly as Kafka lays them out: ``FileRecords``, the indexes, ``LogSegment``.

Public names::

    FileRecords                         a .log file or a slice of one
    OffsetIndex, TimeIndex              .index and .timeindex
    TransactionIndex, AbortedTxn        .txnindex
    LogSegment                          the four files of one segment
    files                               file naming (filename_prefix_from_offset, log_file, ...)
    LogOffsetMetadata, FetchDataInfo,   value types shared with the log layer
    RollParams, OffsetPosition, ...
"""

from __future__ import annotations

from kafkalog.storage import files
from kafkalog.storage.file_records import FileRecords
from kafkalog.storage.offset_index import OffsetIndex
from kafkalog.storage.segment import LogSegment
from kafkalog.storage.time_index import TimeIndex
from kafkalog.storage.txn_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult
from kafkalog.storage.types import (
    UNKNOWN_OFFSET_METADATA,
    UNKNOWN_TIMESTAMP_OFFSET,
    FetchDataInfo,
    LogOffsetMetadata,
    LogOffsetPosition,
    OffsetPosition,
    RollParams,
    TimestampAndOffset,
    TimestampOffset,
)

__all__ = [
    "UNKNOWN_OFFSET_METADATA",
    "UNKNOWN_TIMESTAMP_OFFSET",
    "AbortedTxn",
    "FetchDataInfo",
    "FileRecords",
    "LogOffsetMetadata",
    "LogOffsetPosition",
    "LogSegment",
    "OffsetIndex",
    "OffsetPosition",
    "RollParams",
    "TimeIndex",
    "TimestampAndOffset",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "files",
]
