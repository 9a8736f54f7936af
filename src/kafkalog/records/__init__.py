"""Kafka's record format as pure codecs (no I/O): batches v2 read/write, legacy v0/v1 read, compression.

Public names::

    MemoryRecords, MemoryRecordsBuilder        buffers of batches; building v2 batches
    RecordBatch, DefaultRecordBatch,           batch views (v2 and legacy v0/v1)
    LegacyRecordBatch
    Record, SimpleRecord, Header               value types
    Compression, TimestampType                 enums
    ControlRecordType, EndTransactionMarker    control records
    iter_batches, read_batch_at                walking a buffer batch by batch
"""

from __future__ import annotations

from kafkalog.records.batch import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    DefaultRecordBatch,
    RecordBatch,
    RecordDetail,
)
from kafkalog.records.builder import MemoryRecordsBuilder
from kafkalog.records.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression
from kafkalog.records.control import ControlRecordType, EndTransactionMarker
from kafkalog.records.legacy import LegacyRecordBatch
from kafkalog.records.memory_records import MemoryRecords, iter_batches, read_batch_at
from kafkalog.records.record import NO_TIMESTAMP, Header, Record, SimpleRecord, TimestampType

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "Compression",
    "ControlRecordType",
    "DefaultRecordBatch",
    "EndTransactionMarker",
    "Header",
    "LegacyRecordBatch",
    "MemoryRecords",
    "MemoryRecordsBuilder",
    "Record",
    "RecordBatch",
    "RecordDetail",
    "SimpleRecord",
    "TimestampType",
    "iter_batches",
    "read_batch_at",
]
