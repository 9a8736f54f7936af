"""Hostile admin requests (issue 19, items 1 and 7): partition counts and internal topics.

CreateTopics / CreatePartitions asking for more partitions than ``max.partitions.per.request`` or
``max.partitions`` allow are refused with POLICY_VIOLATION before anything is created; an all-topics
Metadata afterwards is as small as before. Internal topics cannot be created or grown through the admin
APIs, and IncrementalAlterConfigs cannot give them a config that stops their coordinator.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.protocol.metadata import MetadataRequest

from kafkalog.datadir import TOPICS_FILE
from kafkalog.server import KafkaServer
from kafkalog.server.errors import ErrorCode
from kafkalog.server.internal_topics import CONSUMER_OFFSETS

from .helpers import RawClient

_Topic = CreateTopicsRequest.CreatableTopic
_Grow = CreatePartitionsRequest.CreatePartitionsTopic
_Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
_Config = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
_TOPIC, _SET, _DELETE = 2, 0, 1


@pytest.fixture
def limited(data_dir: Path) -> Iterator[KafkaServer]:
    """A server allowing 6 partitions per request and 10 in all."""
    config = {"max.partitions": 10, "max.partitions.per.request": 6}
    with KafkaServer(data_dir, port=0, manager_config=config) as running:
        yield running


def _create(client: RawClient, *topics: tuple[str, int], validate_only: bool = False) -> list[Any]:
    request = CreateTopicsRequest[7](
        topics=[
            _Topic(name=n, num_partitions=p, replication_factor=1, assignments=[], configs=[])
            for n, p in topics
        ],
        timeout_ms=1000,
        validate_only=validate_only,
    )
    return list(client.call(request, 7).topics)


def _grow(client: RawClient, name: str, count: int) -> Any:
    request = CreatePartitionsRequest[3](
        topics=[_Grow(name=name, count=count, assignments=None)], timeout_ms=1000, validate_only=False
    )
    return client.call(request, 3).results[0]


def _alter(client: RawClient, name: str, *ops: tuple[str, int, str | None]) -> Any:
    configs = [_Config(name=k, config_operation=op, value=v) for k, op, v in ops]
    request = IncrementalAlterConfigsRequest[1](
        resources=[_Resource(resource_type=_TOPIC, resource_name=name, configs=configs)], validate_only=False
    )
    return client.call(request, 1).responses[0]


def _partition_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.is_dir())


def test_create_topics_past_the_partition_limits_is_refused_before_anything_is_created(
    limited: KafkaServer, data_dir: Path
) -> None:
    with RawClient(limited.port) as client:
        [huge] = _create(client, ("huge", 2**31 - 1))
        assert huge.error_code == ErrorCode.POLICY_VIOLATION
        assert "max.partitions.per.request is 6" in huge.error_message
        # the request's topics together: 4 + 4 > 6, so neither is created (nor a valid third one refused alone)
        a, b, bad = _create(client, ("a", 4), ("b", 4), ("bad/name", 1))
        assert (a.error_code, b.error_code) == (ErrorCode.POLICY_VIOLATION, ErrorCode.POLICY_VIOLATION)
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        [dry] = _create(client, ("dry", 7), validate_only=True)
        assert dry.error_code == ErrorCode.POLICY_VIOLATION
        assert _partition_dirs(data_dir) == []
        assert [t.error_code for t in _create(client, ("a", 6))] == [ErrorCode.NONE]
        [over] = _create(client, ("c", 5))  # 6 + 5 > max.partitions 10
        assert over.error_code == ErrorCode.POLICY_VIOLATION and "max.partitions is 10" in over.error_message
        metadata = client.call(MetadataRequest[12](topics=None), 12)
    assert [(t.name, len(t.partitions)) for t in metadata.topics] == [("a", 6)]
    assert _partition_dirs(data_dir) == [f"a-{p}" for p in range(6)]
    assert list(json.loads((data_dir / TOPICS_FILE).read_text())["topics"]) == ["a"]


def test_create_partitions_past_the_partition_limits_is_refused(limited: KafkaServer, data_dir: Path) -> None:
    with RawClient(limited.port) as client:
        assert [t.error_code for t in _create(client, ("t", 2))] == [ErrorCode.NONE]
        huge = _grow(client, "t", 2**31 - 1)
        assert huge.error_code == ErrorCode.POLICY_VIOLATION
        assert _grow(client, "t", 11).error_code == ErrorCode.POLICY_VIOLATION  # 9 new: per request
        assert _grow(client, "t", 8).error_code == ErrorCode.NONE
        assert _grow(client, "t", 11).error_code == ErrorCode.POLICY_VIOLATION  # 11 > max.partitions
    assert limited.manager is not None and limited.manager.num_partitions("t") == 8
    assert _partition_dirs(data_dir) == sorted(f"t-{p}" for p in range(8))


def test_metadata_auto_creation_counts_the_whole_request(data_dir: Path) -> None:
    config = {"max.partitions": 100, "max.partitions.per.request": 5, "num.partitions": 2}
    with (
        KafkaServer(
            data_dir, port=0, manager_config=config, config={"auto.create.topics.enable": "true"}
        ) as srv,
        RawClient(srv.port) as client,
    ):
        names = [f"auto{i}" for i in range(4)]
        request = MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        response = client.call(request, 12)
    codes = [t.error_code for t in response.topics]
    assert codes == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.POLICY_VIOLATION, ErrorCode.POLICY_VIOLATION]
    assert _partition_dirs(data_dir) == ["auto0-0", "auto0-1", "auto1-0", "auto1-1"]


def test_internal_topics_cannot_be_created_grown_or_deleted_by_clients(
    server: KafkaServer, data_dir: Path
) -> None:
    with RawClient(server.port) as client:
        [created] = _create(client, (CONSUMER_OFFSETS, 1))
        assert created.error_code == ErrorCode.POLICY_VIOLATION
        assert not (data_dir / f"{CONSUMER_OFFSETS}-0").exists()
        assert server.manager is not None
        server.manager.create_topic(CONSUMER_OFFSETS, 2, {"cleanup.policy": "compact"})  # as the coordinator
        assert _grow(client, CONSUMER_OFFSETS, 3).error_code == ErrorCode.POLICY_VIOLATION
        deleted = client.call(DeleteTopicsRequest[4](topic_names=[CONSUMER_OFFSETS], timeout_ms=1000), 4)
        assert deleted.responses[0].error_code == ErrorCode.POLICY_VIOLATION
    assert server.manager.num_partitions(CONSUMER_OFFSETS) == 2
    assert (data_dir / f"{CONSUMER_OFFSETS}-1").is_dir()


@pytest.mark.parametrize(
    ("ops", "plain_code"),
    [
        # below the floor any client change has (server.apis.configs.CLIENT_CONFIG_FLOORS): refused first
        ([("segment.bytes", _SET, "100")], ErrorCode.INVALID_CONFIG),
        ([("segment.ms", _SET, "1")], ErrorCode.INVALID_CONFIG),
        ([("max.message.bytes", _SET, "100")], ErrorCode.NONE),
        ([("cleanup.policy", _SET, "delete")], ErrorCode.NONE),
        ([("cleanup.policy", _DELETE, None)], ErrorCode.NONE),  # back to the default: delete
        ([("segment.index.bytes", _SET, "4096")], ErrorCode.NONE),
        ([("message.timestamp.before.max.ms", _SET, "0")], ErrorCode.NONE),
    ],
)
def test_configs_that_would_stop_a_coordinator_are_refused(
    server: KafkaServer, ops: list[tuple[str, int, str | None]], plain_code: ErrorCode
) -> None:
    from kafkalog.server.internal_topics import INTERNAL_TOPIC_CONFIG

    assert server.manager is not None
    server.manager.create_topic(CONSUMER_OFFSETS, 1, INTERNAL_TOPIC_CONFIG)
    before = server.manager.topic_config(CONSUMER_OFFSETS)
    with RawClient(server.port) as client:
        response = _alter(client, CONSUMER_OFFSETS, *ops)
        want = ErrorCode.POLICY_VIOLATION if plain_code == ErrorCode.NONE else plain_code
        assert response.error_code == want, response.error_message
        assert server.manager.topic_config(CONSUMER_OFFSETS) == before
        # a harmless change still works, and the same hostile change on an ordinary topic is Kafka's business
        ok = _alter(client, CONSUMER_OFFSETS, ("min.cleanable.dirty.ratio", _SET, "0.3"))
        assert ok.error_code == ErrorCode.NONE
        server.manager.create_topic("plain", 1)
        assert _alter(client, "plain", *ops).error_code == plain_code
    assert server.manager.topic_config(CONSUMER_OFFSETS).min_cleanable_dirty_ratio == 0.3
