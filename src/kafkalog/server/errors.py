"""Kafka protocol error codes and the one table that maps kafkalog's exceptions to them.

Owned here:

* :class:`ErrorCode`: the subset of Kafka's ``org.apache.kafka.common.protocol.Errors`` codes the server
  sends, with Kafka's numbers and names (a test checks each against kafka-python's own table).
* :data:`EXCEPTION_CODES` and :func:`error_code_for`: **the** mapping from a :mod:`kafkalog.errors`
  exception (raised by the LogManager or a Log) to the code a client sees. Most specific classes come first;
  anything unmapped is ``UNKNOWN_SERVER_ERROR`` (-1), as Kafka answers an unexpected exception.
* The server's own typed errors (:class:`ProtocolError` and subclasses): what the framing and decoding layer
  raises for bytes it cannot serve. Each one closes the connection, as Kafka's ``SocketServer`` does for an
  ``InvalidRequestException`` or ``InvalidReceiveException``; none of them can reach the log.
"""

from __future__ import annotations

import enum
from typing import Final

from kafkalog import errors as log_errors

__all__ = [
    "EXCEPTION_CODES",
    "ErrorCode",
    "FrameTooLargeError",
    "MalformedRequestError",
    "ProtocolError",
    "UnknownApiKeyError",
    "UnsupportedApiVersionError",
    "error_code_for",
    "error_message_for",
]


class ErrorCode(enum.IntEnum):
    """Kafka's error codes (``Errors``), by Kafka's names."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = 90
    UNKNOWN_TOPIC_ID = 100


#: kafkalog exception class -> Kafka error code; first match wins, so subclasses come before their bases.
EXCEPTION_CODES: Final[tuple[tuple[type[BaseException], ErrorCode], ...]] = (
    (log_errors.LogDirNotAvailableError, ErrorCode.KAFKA_STORAGE_ERROR),
    # EMFILE/ENFILE/ENOMEM, the dir stays online: KAFKA_STORAGE_ERROR is retriable in every client (Java's
    # KafkaStorageException is an InvalidMetadataException, a RetriableException; fetch and list-offsets
    # handle it by retrying), while e.g. REQUEST_TIMED_OUT on a fetch partition is fatal to the Java consumer.
    (log_errors.ResourceExhaustedError, ErrorCode.KAFKA_STORAGE_ERROR),
    (log_errors.KafkaStorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    (log_errors.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),  # CRC, framing, decompression
    (log_errors.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
    (log_errors.RecordBatchTooLargeError, ErrorCode.RECORD_LIST_TOO_LARGE),
    (log_errors.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
    (log_errors.InvalidRecordError, ErrorCode.INVALID_RECORD),
    (log_errors.UnsupportedForMessageFormatError, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (log_errors.UnsupportedCompressionTypeError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (log_errors.OffsetOutOfRangeError, ErrorCode.OFFSET_OUT_OF_RANGE),
    (log_errors.OutOfOrderSequenceError, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (log_errors.InvalidProducerEpochError, ErrorCode.INVALID_PRODUCER_EPOCH),
    (log_errors.InvalidTxnStateError, ErrorCode.INVALID_TXN_STATE),
    (log_errors.TransactionCoordinatorFencedError, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    (log_errors.UnknownTopicOrPartitionError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (log_errors.TopicExistsError, ErrorCode.TOPIC_ALREADY_EXISTS),
    (log_errors.InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (log_errors.PolicyViolationError, ErrorCode.POLICY_VIOLATION),
    (log_errors.InvalidTopicError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (log_errors.InvalidConfigurationError, ErrorCode.INVALID_CONFIG),
    # a full remote reader queue: Kafka's ReplicaManager answers the RejectedExecutionException with
    # Errors.forException's default, which every client treats as a retriable partition error
    (log_errors.RejectedExecutionError, ErrorCode.UNKNOWN_SERVER_ERROR),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code a client sees for ``exc`` (a :class:`RecordValidationError` reports the code of
    its underlying error, as Kafka's ``RecordValidationException`` does)."""
    if isinstance(exc, log_errors.RecordValidationError):
        return error_code_for(exc.invalid_exception)
    for klass, code in EXCEPTION_CODES:
        if isinstance(exc, klass):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def error_message_for(exc: BaseException) -> str:
    """The message sent with an error code (the exception's text, or its class name when it has none)."""
    text = str(exc)
    return text if text else type(exc).__name__


class ProtocolError(log_errors.KafkaError):
    """Bytes on a connection that cannot be served; the connection is closed (the log is never touched)."""


class FrameTooLargeError(ProtocolError):
    """A request frame whose size prefix is negative or above ``socket.request.max.bytes``."""


class MalformedRequestError(ProtocolError, ValueError):
    """A request frame whose header or body does not decode (Kafka's ``InvalidRequestException``)."""


class UnknownApiKeyError(ProtocolError, ValueError):
    """A request for an API key the server does not serve."""


class UnsupportedApiVersionError(ProtocolError, ValueError):
    """A request (other than ApiVersions) at a version outside the advertised range."""
