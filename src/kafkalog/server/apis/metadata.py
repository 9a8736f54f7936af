"""Metadata (key 3): the single broker, and every requested topic with its partitions led by it.

Versions 0-13. Topics are requested by name (or by topic id from v10); ``null`` (v1+) or an empty list at v0
means every topic. Every partition has this node as leader, only replica and only in-sync replica, and the
log's latest leader epoch. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID when asked by
id) unless ``auto_create_topics`` is on and the request allows it (v4+), when it is created with
``num.partitions`` partitions, as Kafka's ``auto.create.topics.enable``, within the partition limits
(:mod:`kafkalog.manager.limits`; the partitions a request auto-creates are summed against
``max.partitions.per.request``, and a topic past a limit is POLICY_VIOLATION); an illegal name is
INVALID_TOPIC_EXCEPTION. A partition whose log dir is offline has no leader (LEADER_NOT_AVAILABLE). A topic
requested more than once is described once (Kafka reads the request's topics as a set): each description
lists every partition, so a 2 MB request naming one topic 200,000 times built a 12.6 MB response on the
event loop (7 s), and one of a thousand partitions would have built gigabytes.
"""

from __future__ import annotations

import logging
import uuid

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataResponse

from kafkalog.errors import KafkaError, KafkaStorageError, TopicExistsError
from kafkalog.log.names import validate_topic_name
from kafkalog.server.broker import ZERO_UUID, Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message

__all__ = ["handle_metadata", "topic_metadata"]

_log = logging.getLogger("kafkalog.server.metadata")
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition


def _partition(broker: Broker, topic: str, index: int) -> Message:
    node = broker.node_id
    try:
        log = broker.get_log(topic, index)
    except KafkaStorageError:
        return _Partition(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=index,
            leader_id=-1,
            leader_epoch=-1,
            replica_nodes=[node],
            isr_nodes=[],
            offline_replicas=[node],
        )
    return _Partition(
        error_code=ErrorCode.NONE,
        partition_index=index,
        leader_id=node,
        leader_epoch=broker.leader_epoch(log),
        replica_nodes=[node],
        isr_nodes=[node],
        offline_replicas=[],
    )


def topic_metadata(broker: Broker, topic: str) -> Message:
    """The Metadata entry of an existing topic."""
    partitions = [_partition(broker, topic, p) for p in broker.manager.partitions(topic)]
    return _Topic(
        error_code=ErrorCode.NONE,
        name=topic,
        topic_id=broker.topic_id(topic),
        is_internal=topic.startswith("__"),
        partitions=partitions,
    )


def _error_topic(code: ErrorCode, name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> Message:
    return _Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


class _Created:
    """The partitions one Metadata request has auto-created so far."""

    def __init__(self) -> None:
        self.partitions = 0


async def _lookup(
    ctx: RequestContext, name: str | None, topic_id: uuid.UUID, allow_create: bool, created: _Created
) -> Message:
    broker = ctx.broker
    if name is None:
        found = broker.topic_for_id(topic_id)
        if found is None:
            return _error_topic(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
        name = found
    try:
        validate_topic_name(name)
    except KafkaError:
        return _error_topic(ErrorCode.INVALID_TOPIC_EXCEPTION, name)
    if name not in broker.manager.topics():
        if not (allow_create and broker.config.auto_create_topics):
            return _error_topic(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name)
        try:
            count = broker.manager.config.num_partitions
            broker.manager.check_new_partitions(count, created.partitions + count)
            await broker.run_blocking(broker.manager.create_topic, name)
            created.partitions += count
            _log.info("Auto-created topic %s for client %s", name, ctx.client_id)
        except TopicExistsError:
            pass
        except KafkaError as exc:
            return _error_topic(error_code_for(exc), name)
    try:
        return topic_metadata(broker, name)
    except KafkaError as exc:  # deleted meanwhile
        return _error_topic(error_code_for(exc), name)


@api(ApiKey.Metadata)
async def handle_metadata(ctx: RequestContext, request: Message) -> Message:
    """Brokers (this node), cluster id, controller (this node) and the requested topics."""
    broker = ctx.broker
    version = ctx.api_version
    requested = request.topics
    topics: list[Message] = []
    if requested is None or (version == 0 and not requested):
        for name in broker.manager.topics():
            try:
                topics.append(topic_metadata(broker, name))
            except KafkaError:
                continue  # deleted while listing
    else:
        allow = bool(request.allow_auto_topic_creation) if version >= 4 else True
        created = _Created()
        seen: set[tuple[str | None, uuid.UUID]] = set()
        for entry in requested:
            topic_id = entry.topic_id if version >= 10 and entry.topic_id is not None else ZERO_UUID
            if (entry.name, topic_id) in seen:
                continue  # Kafka's request set: a topic named twice is described once
            seen.add((entry.name, topic_id))
            topics.append(await _lookup(ctx, entry.name, topic_id, allow, created))
    brokers = [
        MetadataResponse.MetadataResponseBroker(
            node_id=broker.node_id, host=broker.advertised_host, port=broker.port, rack=None
        )
    ]
    return ctx.response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
        error_code=ErrorCode.NONE,
    )
