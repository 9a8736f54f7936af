"""kafkalog: Apache Kafka's partition log storage engine, in Python, byte-compatible with Kafka's on-disk format.

The user surface (the package ``__init__`` of each layer is its public contract; a module or name with a
leading ``_`` is private to its package)::

    LogManager              a data directory (Kafka's ``log.dirs``): topics, appends, reads, background tasks
    Log, LogConfig          one partition's log, and Kafka's topic-level configs
    ReadOnlyDataDir,        a data directory read beside a live writer, without its lock
    ReadOnlyLog
    KafkaError, ...         the errors, with Kafka's names (:mod:`kafkalog.errors`)
    warm_up                 compile (or load from cache) the numba kernels before the first timed read

``import kafkalog`` stays cheap (PySpark imports the data source module at every session): the errors are
imported here, the rest on first use of the name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalog.errors import (
    CorruptIndexError,
    CorruptRecordError,
    CorruptSnapshotError,
    DecompressionBombError,
    InconsistentTopicIdError,
    IndexOffsetOverflowError,
    InvalidConfigurationError,
    InvalidOffsetError,
    InvalidPartitionsError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    LogCleaningAbortedError,
    LogDirLockedError,
    LogDirNotAvailableError,
    LogDirNotFoundError,
    LogSegmentOffsetOverflowError,
    NotRegularFileError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    OutOfOrderSequenceError,
    PolicyViolationError,
    RecordBatchTooLargeError,
    RecordDecompressionError,
    RecordTooLargeError,
    RecordValidationError,
    RejectedExecutionError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    ResourceExhaustedError,
    SinkError,
    TopicExistsError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
    UnknownArchiveLayoutError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
    UnsupportedRemoteSegmentError,
    is_resource_exhaustion,
)

if TYPE_CHECKING:
    from kafkalog.log import Log, LogConfig
    from kafkalog.manager import LogManager
    from kafkalog.readonly import ReadOnlyDataDir, ReadOnlyLog
    from kafkalog.records.kernels import warm_up

__version__ = "0.1.0"

_LAZY = {
    "LogManager": "kafkalog.manager",
    "Log": "kafkalog.log",
    "LogConfig": "kafkalog.log",
    "ReadOnlyDataDir": "kafkalog.readonly",
    "ReadOnlyLog": "kafkalog.readonly",
    "warm_up": "kafkalog.records.kernels",
}

__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "DecompressionBombError",
    "InconsistentTopicIdError",
    "IndexOffsetOverflowError",
    "InvalidConfigurationError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "KafkaError",
    "KafkaStorageError",
    "Log",
    "LogCleaningAbortedError",
    "LogConfig",
    "LogDirLockedError",
    "LogDirNotAvailableError",
    "LogDirNotFoundError",
    "LogManager",
    "LogSegmentOffsetOverflowError",
    "NotRegularFileError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
    "ReadOnlyDataDir",
    "ReadOnlyLog",
    "RecordBatchTooLargeError",
    "RecordDecompressionError",
    "RecordTooLargeError",
    "RecordValidationError",
    "RejectedExecutionError",
    "RemoteResourceNotFoundError",
    "RemoteStorageError",
    "ResourceExhaustedError",
    "SinkError",
    "TopicExistsError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
    "UnknownArchiveLayoutError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedRemoteSegmentError",
    "__version__",
    "is_resource_exhaustion",
    "warm_up",
]


def __getattr__(name: str) -> Any:
    """The heavy public names, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalog' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
