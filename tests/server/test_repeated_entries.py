"""A resource named many times in one request is answered once (issue #19, work per request): Metadata reads
its topics as a set (as Kafka does) and DescribeConfigs describes a (type, name, keys) resource once, so a
small request cannot build a response many times its size (200,000 names of one topic: a 12.6 MB Metadata
and a 644 MB DescribeConfigs response), DescribeGroups describes a group once, and a CreateTopics of many
topics is planned off the event loop."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

from kafkalog.server import ErrorCode, KafkaServer
from kafkalog.server.apis import topics as topics_module
from kafkalog.server.protocol import message_classes

from .helpers import RawClient

_METADATA = message_classes()[ApiKey.Metadata][0]
_DESCRIBE = message_classes()[ApiKey.DescribeConfigs][0]
_CREATE = message_classes()[ApiKey.CreateTopics][0]
_DESCRIBE_GROUPS = message_classes()[ApiKey.DescribeGroups][0]
_DELETE_GROUPS = message_classes()[ApiKey.DeleteGroups][0]


def test_metadata_describes_a_repeated_topic_once(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("t", 50)
    names = ["t", "unknown", "t", "t", "unknown"] * 1000
    request = _METADATA[9](
        topics=[_METADATA.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with RawClient(server.port) as client:
        response = client.call(request, 9)
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("t", ErrorCode.NONE, 50),
        ("unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]


def test_describe_configs_describes_a_repeated_resource_once(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("t", 1)
    resource = _DESCRIBE.DescribeConfigsResource
    resources = [
        resource(resource_type=2, resource_name="t", configuration_keys=None),
        resource(resource_type=2, resource_name="t", configuration_keys=["retention.ms", "segment.ms"]),
        resource(resource_type=2, resource_name="t", configuration_keys=["segment.ms", "retention.ms"]),
        resource(resource_type=2, resource_name="t", configuration_keys=None),
    ] * 500
    request = _DESCRIBE[4](resources=resources, include_synonyms=True, include_documentation=True)
    with RawClient(server.port) as client:
        response = client.call(request, 4)
    described = [(r.resource_name, r.error_code, len(r.configs)) for r in response.results]
    assert len(described) == 2 and described[0][2] > 20, described
    assert described[1] == ("t", ErrorCode.NONE, 2)


def test_a_create_topics_of_many_topics_is_planned_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1500 topics of one partition are past max.partitions.per.request (1000): every one is refused, after
    being planned on the I/O threads (200,000 names held the event loop 7.4 s)."""
    planned: set[str] = set()
    real_plan = topics_module._plan_topic

    def plan(*args: Any) -> Any:
        planned.add(threading.current_thread().name)
        return real_plan(*args)

    monkeypatch.setattr(topics_module, "_plan_topic", plan)
    topic = _CREATE.CreatableTopic
    request = _CREATE[7](
        topics=[
            topic(name=f"n{i}", num_partitions=1, replication_factor=1, assignments=[], configs=[])
            for i in range(1500)
        ],
        timeout_ms=1000,
        validate_only=False,
    )
    with RawClient(server.port) as client:
        response = client.call(request, 7)
    assert {t.error_code for t in response.topics} == {ErrorCode.POLICY_VIOLATION}
    assert len(response.topics) == 1500
    assert planned and all(n.startswith("kafkalog-server-io-") for n in planned), planned
    assert server.manager is not None and server.manager.topics() == []


def test_describe_groups_describes_a_repeated_group_once(server: KafkaServer) -> None:
    """A description carries every member's metadata and assignment: 200,000 names of one group held the
    event loop 3.2 s."""
    request = _DESCRIBE_GROUPS[5](
        groups=["g", "h", "g", "g", "h"] * 1000, include_authorized_operations=False
    )
    with RawClient(server.port) as client:
        response = client.call(request, 5)
    assert [g.group_id for g in response.groups] == ["g", "h"]


def test_delete_groups_deletes_a_repeated_group_once(server: KafkaServer) -> None:
    """Kafka deletes the request's groups as a set (200,000 names held the event loop 0.55 s)."""
    request = _DELETE_GROUPS[2](groups_names=["g", "h", "g"] * 1000)
    with RawClient(server.port) as client:
        response = client.call(request, 2)
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("g", ErrorCode.GROUP_ID_NOT_FOUND),
        ("h", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
