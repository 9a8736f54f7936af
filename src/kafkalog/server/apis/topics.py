"""CreateTopics (key 19), DeleteTopics (key 20) and CreatePartitions (key 37).

One node holds every partition, so a replication factor must be 1 (or -1, the default) and a manual
assignment may only name this node: otherwise INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT, with
Kafka's messages. ``num_partitions`` -1 means ``num.partitions``. Errors are per topic and come from the
LogManager through :mod:`kafkalog.server.errors` (TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION,
INVALID_PARTITIONS, INVALID_CONFIG); a topic named twice in one request is INVALID_REQUEST for each entry.
``validate_only`` checks everything and creates nothing. Topic operations write metadata with fsync, so they
run on the I/O threads.

Partition limits (:mod:`kafkalog.manager.limits`): the new partitions of the whole request are counted
before any topic is created; more than ``max.partitions.per.request``, a total past ``max.partitions`` or
more file descriptors than the process has free refuses every topic of the request with POLICY_VIOLATION
(as Kafka's controller answers an excessively large batch operation), and nothing is created. Internal
topics (:mod:`kafkalog.server.internal_topics`) cannot be created, grown or deleted here (POLICY_VIOLATION).
A request of more than 1000 topics is planned, and its refusals built, on the I/O threads (200,000 topic
names held the event loop 7.4 s). A topic's configs must be above the client floors (:data:`~kafkalog.server.apis.configs.CLIENT_CONFIG_FLOORS`,
else INVALID_CONFIG).

CreateTopics v5+ answers with the new topic's partition count, replication factor and configs (as
DescribeConfigs describes them), v7+ with its topic id. DeleteTopics v6 accepts names or topic ids
(UNKNOWN_TOPIC_ID for an unknown id); deletion renames the partition directories at once and removes them
later (the LogManager's ``-delete`` protocol). CreatePartitions only grows a topic.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Final

from kafka.protocol.admin import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse
from kafka.protocol.api_key import ApiKey

from kafkalog.errors import InvalidPartitionsError, KafkaError, TopicExistsError, UnknownTopicOrPartitionError
from kafkalog.log.config import LogConfig
from kafkalog.log.names import validate_topic_name
from kafkalog.server.apis.configs import check_client_overrides, describe_topic
from kafkalog.server.broker import ZERO_UUID, Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for, error_message_for
from kafkalog.server.internal_topics import (
    check_internal_topic_creation,
    check_internal_topic_deletion,
    check_internal_topic_growth,
)
from kafkalog.server.protocol import Message

__all__ = ["handle_create_partitions", "handle_create_topics", "handle_delete_topics"]

_Created = CreateTopicsResponse.CreatableTopicResult
_CreatedConfig = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_Grown = CreatePartitionsResponse.CreatePartitionsTopicResult


class _Refused(Exception):
    """A topic-level refusal with its own Kafka code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check_replication(broker: Broker, factor: int) -> None:
    if factor not in (-1, 1):
        raise _Refused(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {factor} time(s): The target replication factor of {factor} "
            "cannot be reached because only 1 broker(s) are registered.",
        )


def _check_assignment(broker: Broker, broker_ids: list[int]) -> None:
    if list(broker_ids) != [broker.node_id]:
        raise _Refused(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"replica assignment {list(broker_ids)} must name exactly this broker ({broker.node_id})",
        )


def _plan_topic(broker: Broker, topic: Message) -> tuple[int, dict[str, str]]:
    """Validate one CreatableTopic; returns (partitions, config overrides)."""
    validate_topic_name(topic.name)
    check_internal_topic_creation(str(topic.name))
    assignments = list(topic.assignments or [])
    if assignments:
        if int(topic.num_partitions) != -1 or int(topic.replication_factor) != -1:
            raise _Refused(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            )
        for a in assignments:
            _check_assignment(broker, a.broker_ids)
        partitions = len(assignments)
    else:
        _check_replication(broker, int(topic.replication_factor))
        partitions = int(topic.num_partitions)
        if partitions == -1:
            partitions = broker.manager.config.num_partitions
        if partitions <= 0:
            raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
    configs: dict[str, str] = {}
    for c in topic.configs or []:
        if c.value is None:
            raise _Refused(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
        configs[str(c.name)] = str(c.value)
    check_client_overrides(configs, LogConfig.from_props(configs, base=broker.manager.default_config))
    return partitions, configs


def _created(ctx: RequestContext, name: str, partitions: int) -> Message:
    broker = ctx.broker
    configs = [
        _CreatedConfig(name=n, value=v, read_only=False, config_source=source, is_sensitive=False)
        for n, v, source, _, _ in describe_topic(broker.manager, name)
    ]
    return _Created(
        name=name,
        topic_id=broker.topic_id(name),
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=partitions,
        replication_factor=1,
        configs=configs,
    )


def _create_failed(name: str, exc: BaseException) -> Message:
    code = exc.code if isinstance(exc, _Refused) else error_code_for(exc)
    return _Created(
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=error_message_for(exc),
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


#: Above this many topics, CreateTopics plans them and builds their refusals on the I/O threads.
_MANY_TOPICS: Final = 1000


def _plan_topics(
    broker: Broker, client_id: str | None, topics: list[Message]
) -> tuple[dict[str, tuple[int, dict[str, str]]], dict[str, BaseException]]:
    """Each topic's plan (partitions, configs) or why it is refused (no state changed: may run on an I/O
    thread)."""
    counts = Counter(str(t.name) for t in topics)
    planned: dict[str, tuple[int, dict[str, str]]] = {}
    refused: dict[str, BaseException] = {}
    for topic in topics:
        name = str(topic.name)
        try:
            if counts[name] > 1:
                raise _Refused(
                    ErrorCode.INVALID_REQUEST,
                    f"Create topics request from client `{client_id}` contains multiple entries for the "
                    f"following topics: {name}",
                )
            planned[name] = _plan_topic(broker, topic)
        except (KafkaError, _Refused) as exc:
            refused[name] = exc
    return planned, refused


def _failures(refused: dict[str, BaseException]) -> dict[str, Message]:
    return {name: _create_failed(name, exc) for name, exc in refused.items()}


@api(ApiKey.CreateTopics)
async def handle_create_topics(ctx: RequestContext, request: Message) -> Message:
    """Create each topic (or only validate it with ``validate_only``), within the partition limits."""
    broker = ctx.broker
    many = len(request.topics) > _MANY_TOPICS
    if many:
        planned, refused = await broker.run_blocking(_plan_topics, broker, ctx.client_id, request.topics)
    else:
        planned, refused = _plan_topics(broker, ctx.client_id, request.topics)
    try:
        broker.manager.check_new_partitions(sum(p for p, _ in planned.values()))
    except KafkaError as exc:  # the whole request is refused before anything is created
        refused.update((name, exc) for name in planned)
        planned.clear()
    failed = await broker.run_blocking(_failures, refused) if many else _failures(refused)
    results = []
    for topic in request.topics:
        name = str(topic.name)
        if name in failed:
            results.append(failed[name])
            continue
        try:
            partitions, configs = planned[name]
            if request.validate_only:
                if name in broker.manager.topics():
                    raise TopicExistsError(f"Topic '{name}' already exists.")
                results.append(
                    _Created(
                        name=name,
                        topic_id=ZERO_UUID,
                        error_code=ErrorCode.NONE,
                        error_message=None,
                        num_partitions=partitions,
                        replication_factor=1,
                        configs=[],
                    )
                )
                continue
            await broker.run_blocking(broker.manager.create_topic, name, partitions, configs)
            results.append(_created(ctx, name, partitions))
        except (KafkaError, _Refused) as exc:
            results.append(_create_failed(name, exc))
    return ctx.response(throttle_time_ms=0, topics=results)


@api(ApiKey.DeleteTopics)
async def handle_delete_topics(ctx: RequestContext, request: Message) -> Message:
    """Delete each topic, named or (v6) by id."""
    broker = ctx.broker
    wanted: list[tuple[str | None, uuid.UUID]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    else:
        wanted = [(str(n), ZERO_UUID) for n in request.topic_names]
    results = []
    for name, topic_id in wanted:
        resolved = name if name is not None else broker.topic_for_id(topic_id)
        try:
            if resolved is None:
                raise _Refused(ErrorCode.UNKNOWN_TOPIC_ID, f"unknown topic id {topic_id}")
            check_internal_topic_deletion(resolved)
            tid = broker.topic_id(resolved) if resolved in broker.manager.topics() else topic_id
            await broker.run_blocking(broker.manager.delete_topic, resolved)
            broker.waiters.notify_all()
            results.append(
                _Deleted(name=resolved, topic_id=tid, error_code=ErrorCode.NONE, error_message=None)
            )
        except (KafkaError, _Refused) as exc:
            code = exc.code if isinstance(exc, _Refused) else error_code_for(exc)
            results.append(
                _Deleted(
                    name=resolved, topic_id=topic_id, error_code=code, error_message=error_message_for(exc)
                )
            )
    return ctx.response(throttle_time_ms=0, responses=results)


@api(ApiKey.CreatePartitions)
async def handle_create_partitions(ctx: RequestContext, request: Message) -> Message:
    """Grow each topic to its requested partition count, within the partition limits."""
    broker = ctx.broker
    manager = broker.manager
    counts = Counter(str(t.name) for t in request.topics)
    planned: dict[str, int] = {}
    refused: dict[str, BaseException] = {}
    for topic in request.topics:
        name, count = str(topic.name), int(topic.count)
        try:
            if counts[name] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if name not in manager.topics():
                raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
            check_internal_topic_growth(name)
            current = manager.num_partitions(name)
            if count <= current:
                raise InvalidPartitionsError(
                    f"Topic currently has {current} partitions, which is higher than the requested {count}."
                    if count < current
                    else f"Topic already has {current} partitions."
                )
            if topic.assignments is not None:
                if len(topic.assignments) != count - current:
                    raise _Refused(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Increasing the number of partitions by {count - current} but "
                        f"{len(topic.assignments)} assignments provided.",
                    )
                for a in topic.assignments:
                    _check_assignment(broker, a.broker_ids)
            planned[name] = count - current
        except (KafkaError, _Refused) as exc:
            refused[name] = exc
    try:
        manager.check_new_partitions(sum(planned.values()))
    except KafkaError as exc:  # the whole request is refused before anything is created
        refused.update((name, exc) for name in planned)
        planned.clear()
    results = []
    for topic in request.topics:
        name, count = str(topic.name), int(topic.count)
        try:
            if name in refused:
                raise refused[name]
            if not request.validate_only:
                await broker.run_blocking(manager.add_partitions, name, count)
            results.append(_Grown(name=name, error_code=ErrorCode.NONE, error_message=None))
        except (KafkaError, _Refused) as exc:
            code = exc.code if isinstance(exc, _Refused) else error_code_for(exc)
            results.append(_Grown(name=name, error_code=code, error_message=error_message_for(exc)))
    return ctx.response(throttle_time_ms=0, results=results)
