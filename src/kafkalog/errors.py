"""Typed errors of kafkalog, named after Apache Kafka's exceptions (``...Exception`` becomes ``...Error``).

Invariant owned here: every failure that kafkalog reports on purpose is a subclass of :class:`KafkaError`,
so callers can catch one base class, and the subclass says *what* went wrong in Kafka's vocabulary. Errors
about bytes carry ``position`` (the byte offset in the buffer or file where the problem was found) when it
is known. Errors caused by bad input are also :class:`ValueError` subclasses, so generic code that treats
bad input as ``ValueError`` keeps working.

Mapping to Kafka (``org.apache.kafka.common.errors`` unless noted):

=====================================  =====================================================================
kafkalog                                Kafka
=====================================  =====================================================================
CorruptRecordError                      CorruptRecordException (CRC mismatch, impossible sizes)
InvalidRecordError                      org.apache.kafka.common.InvalidRecordException (bad structure)
RecordTooLargeError                     RecordTooLargeException (batch > max.message.bytes)
RecordBatchTooLargeError                RecordBatchTooLargeException (append > segment.bytes)
OffsetOutOfRangeError                   OffsetOutOfRangeException
InvalidTimestampError                   InvalidTimestampException
RecordValidationError                   storage.internals.log.RecordValidationException
OutOfOrderSequenceError                 OutOfOrderSequenceException
InvalidProducerEpochError               InvalidProducerEpochException
InvalidTxnStateError                    InvalidTxnStateException
TransactionCoordinatorFencedError       TransactionCoordinatorFencedException
UnsupportedForMessageFormatError        UnsupportedForMessageFormatException
UnsupportedCompressionTypeError         UnsupportedCompressionTypeException
KafkaStorageError                       KafkaStorageException (I/O error; log dir offline)
ResourceExhaustedError                  (kafkalog) EMFILE/ENFILE/ENOMEM: retriable, the log dir stays online
InconsistentTopicIdError                InconsistentTopicIdException
InvalidOffsetError                      InvalidOffsetException
InvalidTopicError                       InvalidTopicException
InvalidConfigurationError               InvalidConfigurationException / ConfigException
OffsetsOutOfOrderError                  kafka.common.OffsetsOutOfOrderException
UnexpectedAppendOffsetError             kafka.common.UnexpectedAppendOffsetException
LogSegmentOffsetOverflowError           storage.internals.log.LogSegmentOffsetOverflowException
IndexOffsetOverflowError                storage.internals.log.IndexOffsetOverflowException
CorruptIndexError                       storage.internals.log.CorruptIndexException
CorruptSnapshotError                    storage.internals.log.CorruptSnapshotException
LogCleaningAbortedError                 kafka.common.LogCleaningAbortedException
RecordDecompressionError                (kafkalog) a compressed payload that cannot be decompressed
RemoteStorageError                      server.log.remote.storage.RemoteStorageException
RemoteResourceNotFoundError             server.log.remote.storage.RemoteResourceNotFoundException
UnsupportedRemoteSegmentError           (kafkalog) an archived segment that is not Kafka bytes (Aiven Iceberg mode)
UnknownArchiveLayoutError               (kafkalog) keys under a prefix match no layout kafkalog reads
RejectedExecutionError                  java.util.concurrent.RejectedExecutionException (a full remote reader
                                        queue, ``remote.log.reader.max.pending.tasks``: UNKNOWN_SERVER_ERROR)
DecompressionBombError                  (kafkalog) a payload that expands past the configured bound
UnknownTopicOrPartitionError            UnknownTopicOrPartitionException
TopicExistsError                        TopicExistsException
InvalidPartitionsError                  InvalidPartitionsException
PolicyViolationError                    PolicyViolationException (a limit or policy of this node refuses it)
LogDirLockedError                       (kafkalog) KafkaException "Failed to acquire lock on file .lock"
LogDirNotAvailableError                 LogDirNotFoundException / KafkaStorageException (dir offline)
NotRegularFileError                     (kafkalog) KafkaStorageException: a log file that is a symlink, FIFO, ...
LogDirNotFoundError                     LogDirNotFoundException (no such data directory, or not visible here)
=====================================  =====================================================================
"""

from __future__ import annotations

import errno as _errno

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
    "LogCleaningAbortedError",
    "LogDirLockedError",
    "LogDirNotAvailableError",
    "LogDirNotFoundError",
    "LogSegmentOffsetOverflowError",
    "NotRegularFileError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
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
    "is_resource_exhaustion",
]


class KafkaError(Exception):
    """Base class of every error kafkalog raises on purpose (Kafka's ``KafkaException``).

    ``position`` is the byte position where the problem was detected, when it concerns bytes.
    """

    def __init__(self, message: str, *, position: int | None = None) -> None:
        if position is not None:
            message = f"{message} (at byte position {position})"
        super().__init__(message)
        self.position = position


# --- bad records and batches ------------------------------------------------------------------------------


class CorruptRecordError(KafkaError, ValueError):
    """A batch failed its CRC, or its framing (sizes, magic) is impossible."""


class InvalidRecordError(KafkaError, ValueError):
    """A batch or record is well framed but its contents break the format's rules."""


class RecordDecompressionError(CorruptRecordError):
    """A compressed payload could not be decompressed."""


class DecompressionBombError(RecordDecompressionError):
    """A compressed payload expands past the configured limit (``max_decompressed_bytes``)."""


class InvalidTimestampError(KafkaError, ValueError):
    """A record timestamp is outside the range the topic accepts."""


class RecordValidationError(KafkaError, ValueError):
    """Record-level validation failed for one or more records of an append.

    ``invalid_exception`` is the underlying error (an :class:`InvalidTimestampError` wins over an
    :class:`InvalidRecordError`, as in Kafka); ``record_errors`` lists ``(batch_index, message)`` pairs.
    """

    def __init__(
        self,
        invalid_exception: KafkaError,
        record_errors: list[tuple[int, str]] | None = None,
    ) -> None:
        super().__init__(str(invalid_exception))
        self.invalid_exception = invalid_exception
        self.record_errors = list(record_errors or [])


class RecordTooLargeError(KafkaError, ValueError):
    """A batch is larger than ``max.message.bytes``."""


class RecordBatchTooLargeError(KafkaError, ValueError):
    """An append is larger than ``segment.bytes`` and can never fit a segment."""


class UnsupportedForMessageFormatError(KafkaError, ValueError):
    """The operation needs a newer message format (e.g. idempotence below magic 2)."""


class UnsupportedCompressionTypeError(KafkaError, ValueError):
    """The compression codec id is unknown or not allowed here."""


# --- offsets ----------------------------------------------------------------------------------------------


class OffsetOutOfRangeError(KafkaError):
    """An offset outside ``[log_start_offset, log_end_offset]`` was requested (or a truncation of a tiered
    log at or below its highest offset in remote storage)."""


class InvalidOffsetError(KafkaError):
    """An index append with an offset that is not larger than the last one."""


class OffsetsOutOfOrderError(KafkaError, ValueError):
    """A follower append whose batches' last offsets are not strictly increasing."""


class UnexpectedAppendOffsetError(KafkaError, ValueError):
    """A follower append whose first offset is below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogSegmentOffsetOverflowError(KafkaError):
    """An offset does not fit a segment: ``offset - base_offset`` is outside ``[0, 2**31 - 1]``."""

    def __init__(self, message: str, segment_base_offset: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.segment_base_offset = segment_base_offset
        self.offset = offset


class IndexOffsetOverflowError(KafkaError):
    """An index entry's relative offset does not fit an int32."""


# --- producers and transactions --------------------------------------------------------------------------


class OutOfOrderSequenceError(KafkaError):
    """A producer sequence number is not the one expected next."""


class InvalidProducerEpochError(KafkaError):
    """A producer epoch is older than the one the log has seen."""


class InvalidTxnStateError(KafkaError):
    """A batch does not fit the producer's transaction state."""


class TransactionCoordinatorFencedError(KafkaError):
    """A transaction marker carries an older coordinator epoch than the one the log has seen."""


# --- storage ----------------------------------------------------------------------------------------------


class KafkaStorageError(KafkaError, OSError):
    """An I/O error in a log directory; the directory is taken offline."""


#: The errnos of a process or system out of descriptors or memory: not a fault of the disk.
RESOURCE_EXHAUSTION_ERRNOS = frozenset({_errno.EMFILE, _errno.ENFILE, _errno.ENOMEM})


def is_resource_exhaustion(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` for running out of descriptors or memory (EMFILE, ENFILE, ENOMEM)."""
    return isinstance(exc, OSError) and exc.errno in RESOURCE_EXHAUSTION_ERRNOS


class ResourceExhaustedError(KafkaStorageError):
    """A file operation failed for want of descriptors or memory (EMFILE, ENFILE, ENOMEM).

    Retriable: nothing is wrong with the disk, so the log directory stays **online** and the operation may
    be retried once descriptors are free (Kafka, which has no such class, takes the dir offline). It is a
    :class:`KafkaStorageError` so that callers handling storage errors handle it too (the server answers it
    with KAFKA_STORAGE_ERROR, which every Kafka client retries); ``errno`` is the cause's."""

    def __init__(self, message: str, cause_errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = cause_errno


class CorruptIndexError(KafkaError):
    """An index file fails its sanity check; recovery rebuilds it."""


class CorruptSnapshotError(KafkaError):
    """A producer-state snapshot file is unreadable; it is deleted and an older one is used."""


class InconsistentTopicIdError(KafkaError):
    """``partition.metadata`` names another topic id than the one supplied."""


class LogCleaningAbortedError(KafkaError):
    """Cleaning of a log was aborted (truncation, deletion or a split happened)."""


# --- configuration and names ------------------------------------------------------------------------------


class InvalidTopicError(KafkaError, ValueError):
    """A topic name or partition directory name is not legal."""


class InvalidConfigurationError(KafkaError, ValueError):
    """A configuration value is unknown, of the wrong type or out of its range."""


# --- topics and log directories (LogManager) --------------------------------------------------------------


class UnknownTopicOrPartitionError(KafkaError, KeyError):
    """The topic or the partition does not exist in this data directory."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TopicExistsError(KafkaError):
    """``create_topic`` for a topic that already exists."""


class InvalidPartitionsError(KafkaError, ValueError):
    """A partition count or number is not valid (not positive, or not more than the current count)."""


class PolicyViolationError(KafkaError, ValueError):
    """A request the node's limits or policies refuse before it changes anything: more partitions than
    ``max.partitions.per.request`` or ``max.partitions`` allow, more file descriptors than the process may
    open, a config that would break an internal topic (Kafka answers such requests with POLICY_VIOLATION)."""


class LogDirLockedError(KafkaError):
    """Another process (or another LogManager in this one) holds the ``.lock`` file of a log directory."""


class LogDirNotAvailableError(KafkaStorageError):
    """The log directory is offline after an I/O error; its partitions cannot be used until restart."""


class NotRegularFileError(KafkaStorageError):
    """A file (or partition directory) of a log directory is a symlink, FIFO, directory or device: it is
    refused, never followed, opened for good or waited on. Met by a live log it takes the directory offline
    like any other I/O error; met while loading, the partition is a load failure."""


class SinkError(KafkaError, ValueError):
    """A write the ``kafkalog`` Spark sink refuses (bad options, unsupported columns, an unknown topic, a bad
    row), or a commit journal that names staged files which are missing or outside the staging area.
    kafkalog's own (Kafka has no sink); defined here so the journal's replay in the manager layer raises the
    same class as the Spark side (:mod:`kafkalog.spark.sink_options` re-exports it)."""


class LogDirNotFoundError(KafkaError, FileNotFoundError):
    """A data directory (log dir) does not exist, or is not visible to this process: a Spark executor on
    a host where the directory is not mounted at the path the driver saw. Never reported as data loss."""


class RemoteStorageError(KafkaError):
    """Object storage (S3, GCS, Azure, a tiered-storage archive) could not serve a request: the bucket or
    endpoint is unreachable after the bounded retries, the credentials are refused, an object is shorter
    than its manifest says, a manifest is corrupt, a key is missing or a chunk fails authentication. The
    message names the object (never a secret) and the option that fixes it."""


class RejectedExecutionError(KafkaError):
    """A bounded pool refused a task: the remote log reader pool's queue holds
    ``remote.log.reader.max.pending.tasks`` reads already, or the pool is shut down (Java's
    ``RejectedExecutionException``, which Kafka's ``ReplicaManager`` answers as the partition's
    UNKNOWN_SERVER_ERROR instead of blocking a request thread). Nothing was read and nothing changed."""


class RemoteResourceNotFoundError(RemoteStorageError, FileNotFoundError):
    """An object, prefix or bucket that a read needs does not exist in object storage."""


class UnsupportedRemoteSegmentError(RemoteStorageError):
    """An archived segment kafkalog refuses to read because its objects are not Kafka's segment bytes: the
    Aiven plugin's Iceberg mode (``segment.format=iceberg``: Parquet rows in an Iceberg table, a Puffin
    segment manifest). The message names the object and the mode."""


class UnknownArchiveLayoutError(RemoteStorageError, ValueError):
    """The keys under a prefix match none of the layouts kafkalog reads (a copy of a log directory, the Aiven
    tiered-storage plugin's, Kafka's ``LocalTieredStorage``). The message names what was seen and the option
    that forces a layout."""
