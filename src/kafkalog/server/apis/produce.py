"""Produce (key 0): append each partition's record batch as the partition's leader.

Versions 3-13 (v13 names topics by id). Per partition, in request order:

0. a request carrying a transactional batch (any partition's first batch) without a transactional id is
   refused whole, every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing written (Kafka's
   ``KafkaApis.handleProduceRequest``);
1. the topic must exist (UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID; Produce never auto-creates, as in
   KRaft Kafka);
2. the records must be exactly one batch of magic v2 (Kafka's ``ProduceRequest.validateRecords``, else
   INVALID_RECORD; zstd only from v7, else UNSUPPORTED_COMPRESSION_TYPE); a frame that is not even a batch
   is CORRUPT_MESSAGE;
3. :meth:`Log.append_as_leader` at the partition's leader epoch does everything else (CRC, sizes, offsets,
   timestamps, idempotent-producer sequence and epoch checks, duplicate detection) and changes nothing when
   it refuses the batch; its error maps to Kafka's code through :mod:`kafkalog.server.errors`, with
   ``record_errors`` for record-level failures (v8+).

``acks`` must be -1, 0 or 1 (INVALID_REQUIRED_ACKS). A partition has one replica, so its high watermark
follows its log end offset and ``acks=-1`` is answered as soon as the append returns, like ``acks=1``. With
``acks=0`` no response is sent, and a failed append closes the connection (Kafka's way of telling such a
client). Appends larger than ``inline_io_max_bytes`` run on the I/O threads while other connections have
requests waiting for the event loop (:meth:`~kafkalog.server.broker.Broker.offload`), and a compressed batch
that expands past ``inline_io_max_bytes`` always does (the append decompresses it: up to 256 MiB, about a
second of gzip; whether it expands that far is found by decompressing at most ``inline_io_max_bytes`` on
the loop); waiting fetches are woken after each successful append.

No copy of the records: they are a view of the request frame (:func:`~kafkalog.server.protocol.decode_request`)
and, when the frame is the request's own (:attr:`~kafkalog.server.context.RequestContext.owns_frame`, as the
connection hands every frame over), the batch is validated, given its offsets and written from the frame
itself. A frame the caller keeps is only read: the batch is copied once.
"""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceResponse

from kafkalog.errors import (
    InvalidRecordError,
    InvalidTopicError,
    KafkaError,
    RecordValidationError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from kafkalog.log.names import TopicPartition
from kafkalog.records import Compression, DefaultRecordBatch, MemoryRecords
from kafkalog.remote import REMOTE_LOG_METADATA_TOPIC_NAME
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for, error_message_for
from kafkalog.server.internal_topics import INTERNAL_TOPICS
from kafkalog.server.protocol import Message

__all__ = ["handle_produce", "validate_produce_records"]

_TopicResponse = ProduceResponse.TopicProduceResponse
_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_RecordError = ProduceResponse.TopicProduceResponse.PartitionProduceResponse.BatchIndexAndErrorMessage


def validate_produce_records(records: MemoryRecords, version: int = 13) -> DefaultRecordBatch:
    """Kafka's ``ProduceRequest.validateRecords`` for v3+: exactly one batch, of magic 2, and zstd only from
    v7 (UNSUPPORTED_COMPRESSION_TYPE). Returns the batch."""
    batches = records.batches()
    first = next(batches, None)
    if first is None:
        raise InvalidRecordError(
            "produce requests with version 3 and above must have exactly one record batch"
        )
    if first.magic != 2 or not isinstance(first, DefaultRecordBatch):
        raise InvalidRecordError(
            f"produce requests with version 3 and above must use magic 2, got {first.magic}"
        )
    if version < 7 and first.compression is Compression.ZSTD:
        raise UnsupportedCompressionTypeError(
            f"produce requests with version {version} are not allowed to use ZStandard compression"
        )
    if next(batches, None) is not None:
        raise InvalidRecordError(
            "produce requests with version 3 and above must have exactly one record batch"
        )
    return first


def _is_transactional(data: bytes | bytearray | memoryview | None) -> bool:
    """Whether the partition's records start with a transactional batch (Kafka's
    ``RequestUtils.hasTransactionalRecords`` looks at each partition's first batch)."""
    if not data:
        return False
    try:
        first = next(MemoryRecords(data).batches(), None)
    except KafkaError:
        return False
    return first is not None and first.is_transactional


def _error(index: int, exc: BaseException, code: ErrorCode | None = None) -> Message:
    record_errors = []
    if isinstance(exc, RecordValidationError):
        record_errors = [
            _RecordError(batch_index=i, batch_index_error_message=msg) for i, msg in exc.record_errors
        ]
    return _PartitionResponse(
        index=index,
        error_code=error_code_for(exc) if code is None else code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=record_errors,
        error_message=error_message_for(exc),
    )


async def _append(
    ctx: RequestContext, topic: str | None, index: int, data: bytes | bytearray | memoryview | None
) -> Message:
    broker = ctx.broker
    if topic is None:
        return _error(index, UnknownTopicOrPartitionError("unknown topic id"), ErrorCode.UNKNOWN_TOPIC_ID)
    try:
        if topic in INTERNAL_TOPICS:  # written by the coordinators only, as in Kafka
            raise InvalidTopicError(f"cannot append to internal topic {topic}")
        if topic == REMOTE_LOG_METADATA_TOPIC_NAME:  # the remote log manager's record of the remote tier
            raise InvalidTopicError(f"cannot append to {topic}: only the remote log manager writes it")
        log = broker.get_log(topic, index)
        if not data:
            raise InvalidRecordError("produce request without records")
        # offsets are assigned in place: in the request's own frame when it may be changed (the records are
        # a writable view of it), else in a copy
        owned = ctx.owns_frame and isinstance(data, memoryview) and not data.readonly
        records = MemoryRecords(data if owned else bytearray(data))
        batch = validate_produce_records(records, ctx.api_version)
        epoch = broker.leader_epoch(log)
        # a compressed batch is decompressed by the append: one that expands past inline.io.max.bytes always
        # runs on the I/O threads (a gzip bomb decompresses for ~1 s), whatever other connections are doing
        inline_max = broker.config.inline_io_max_bytes
        expands = batch.is_compressed and batch.decompressed_size_at_most(inline_max) > inline_max
        if expands or broker.offload(len(data)):
            info = await broker.run_blocking(log.append_as_leader, records, epoch)
        else:
            info = log.append_as_leader(records, epoch)
    except KafkaError as exc:
        return _error(index, exc)
    broker.notify(TopicPartition(topic, index))
    return _PartitionResponse(
        index=index,
        error_code=ErrorCode.NONE,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
        record_errors=[],
        error_message=None,
    )


@api(ApiKey.Produce)
async def handle_produce(ctx: RequestContext, request: Message) -> Message | None:
    """Append every partition's batch; the response lists each partition's base offset or error."""
    by_id = ctx.api_version >= 13
    acks = int(request.acks)
    # Kafka's KafkaApis: transactional records need the request's transactional id (and its authorization),
    # else the whole request fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written
    refused = request.transactional_id is None and any(
        _is_transactional(part.records) for t in request.topic_data for part in t.partition_data
    )
    failed = False
    responses = []
    for topic_data in request.topic_data:
        name = ctx.broker.topic_for_id(topic_data.topic_id) if by_id else topic_data.name
        partitions = []
        for part in topic_data.partition_data:
            if refused:
                result = _error(
                    part.index,
                    ValueError("transactional records without a transactional id"),
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                )
            elif acks not in (-1, 0, 1):
                result = _error(
                    part.index, ValueError(f"invalid acks {acks}"), ErrorCode.INVALID_REQUIRED_ACKS
                )
            else:
                result = await _append(ctx, name, int(part.index), part.records)
            failed = failed or result.error_code != ErrorCode.NONE
            partitions.append(result)
        if by_id:
            responses.append(_TopicResponse(topic_id=topic_data.topic_id, partition_responses=partitions))
        else:
            responses.append(_TopicResponse(name=topic_data.name, partition_responses=partitions))
    if acks == 0:
        if failed:
            ctx.close_connection()
        return None
    return ctx.response(responses=responses, throttle_time_ms=0)
