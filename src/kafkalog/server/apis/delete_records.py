"""DeleteRecords (key 21): move partitions' log start offsets forward (Kafka's ``deleteRecords``).

Versions 0-2. Per partition: the target offset -1 means the high watermark; a negative offset or one past the
high watermark is OFFSET_OUT_OF_RANGE; a topic whose ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION,
as in Kafka; ``__remote_log_metadata`` is INVALID_TOPIC_EXCEPTION (its events are the only record of what the remote
tier holds: a start replays them from its log start offset). The new log start offset is visible at once (``low_watermark`` in the answer, ListOffsets
EARLIEST, Fetch); segments wholly below it are removed by the next retention run, as in Kafka. A partition
named more than once is handled once, with the last offset named, and answered once (Kafka keys the request
by partition), so repeating an entry costs the server nothing more. A request of more than
:data:`MANY_PARTITIONS` entries is handled on the I/O threads (200,000 held the event loop 1.4 s).
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteRecordsResponse
from kafka.protocol.api_key import ApiKey

from kafkalog.errors import InvalidTopicError, KafkaError, OffsetOutOfRangeError
from kafkalog.log.names import TopicPartition
from kafkalog.remote import REMOTE_LOG_METADATA_TOPIC_NAME
from kafkalog.server.apis.list_offsets import MANY_PARTITIONS
from kafkalog.server.broker import Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message

__all__ = ["handle_delete_records"]

_TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
_PartitionResult = DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult


@api(ApiKey.DeleteRecords)
async def handle_delete_records(ctx: RequestContext, request: Message) -> Message:
    """Advance each partition's log start offset to the requested offset."""
    broker = ctx.broker
    if sum(len(t.partitions) for t in request.topics) > MANY_PARTITIONS:
        topics, moved = await broker.run_blocking(_delete, broker, request)
    else:
        topics, moved = _delete(broker, request)
    for tp in moved:  # on the event loop: waiting fetches see the new log start offset
        broker.notify(tp)
    return ctx.response(throttle_time_ms=0, topics=topics)


def _delete(broker: Broker, request: Message) -> tuple[list[Message], list[TopicPartition]]:
    """Each topic's answer and the partitions whose log start offset moved (thread-safe: more than
    :data:`MANY_PARTITIONS` are handled on an I/O thread)."""
    moved: list[TopicPartition] = []
    # Kafka keys the request by partition (a map): a partition named again keeps its first place and takes
    # its last offset, and is answered once, under its topic's one entry.
    wanted: dict[str, dict[int, int]] = {}
    for topic in request.topics:
        offsets = wanted.setdefault(str(topic.name), {})
        for p in topic.partitions:
            offsets[int(p.partition_index)] = int(p.offset)
    topics = []
    for name, offsets in wanted.items():
        partitions = []
        for index, offset in offsets.items():
            try:
                if (
                    name == REMOTE_LOG_METADATA_TOPIC_NAME
                ):  # its events are the only record of the remote tier
                    raise InvalidTopicError(f"Cannot delete records of internal topic {name}")
                log = broker.get_log(name, index)
                if not log.config.delete:
                    partitions.append(
                        _PartitionResult(
                            partition_index=index, low_watermark=-1, error_code=ErrorCode.POLICY_VIOLATION
                        )
                    )
                    continue
                target = log.high_watermark if offset == -1 else offset
                if target < 0:
                    raise OffsetOutOfRangeError(f"invalid offset {offset} for DeleteRecords")
                if log.maybe_increment_log_start_offset(target, "client delete records"):
                    moved.append(TopicPartition(name, index))
                partitions.append(
                    _PartitionResult(
                        partition_index=index, low_watermark=log.log_start_offset, error_code=ErrorCode.NONE
                    )
                )
            except KafkaError as exc:
                partitions.append(
                    _PartitionResult(partition_index=index, low_watermark=-1, error_code=error_code_for(exc))
                )
        topics.append(_TopicResult(name=name, partitions=partitions))
    return topics, moved
