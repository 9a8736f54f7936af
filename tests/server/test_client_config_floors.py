"""Topic configs a client sets over the wire have floors (``CLIENT_CONFIG_FLOORS``): ``segment.bytes=14`` or
``segment.ms=1`` would roll a segment per append, each segment holding about three descriptors (issue #19).
The Python API keeps Kafka's old minimums."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest, IncrementalAlterConfigsRequest

from kafkalog.manager import LogManager
from kafkalog.server import KafkaServer
from kafkalog.server.apis import configs
from kafkalog.server.errors import ErrorCode

from .helpers import RawClient

_Topic = CreateTopicsRequest.CreatableTopic
_TopicConfig = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
_Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
_Config = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
_TOPIC, _SET, _DELETE, _APPEND = 2, 0, 1, 2

#: server.apis.configs.CLIENT_CONFIG_FLOORS, as docs/server.md states them
CLIENT_CONFIG_FLOORS = {
    "segment.bytes": 1024 * 1024,
    "segment.ms": 60_000,
    "segment.index.bytes": 1024,
    "max.compaction.lag.ms": 60_000,
}
_BELOW = [(name, floor - 1) for name, floor in CLIENT_CONFIG_FLOORS.items()] + [
    ("segment.bytes", 14),
    ("segment.ms", 1),
    ("segment.index.bytes", 4),
]


def _create(client: RawClient, name: str, configs: dict[str, str]) -> Any:
    topic = _Topic(
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=[],
        configs=[_TopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    return client.call(
        CreateTopicsRequest[7](topics=[topic], timeout_ms=1000, validate_only=False), 7
    ).topics[0]


def _alter(client: RawClient, name: str, *ops: tuple[str, int, str | None]) -> Any:
    configs = [_Config(name=k, config_operation=op, value=v) for k, op, v in ops]
    request = IncrementalAlterConfigsRequest[1](
        resources=[_Resource(resource_type=_TOPIC, resource_name=name, configs=configs)], validate_only=False
    )
    return client.call(request, 1).responses[0]


@pytest.mark.parametrize(("name", "value"), _BELOW)
def test_a_config_below_its_client_floor_is_refused_over_the_wire(
    server: KafkaServer, data_dir: Path, name: str, value: int
) -> None:
    assert server.manager is not None
    server.manager.create_topic("plain", 1)
    before = server.manager.topic_config("plain")
    with RawClient(server.port) as client:
        created = _create(client, "small", {name: str(value)})
        assert created.error_code == ErrorCode.INVALID_CONFIG, created
        assert str(CLIENT_CONFIG_FLOORS[name]) in created.error_message
        altered = _alter(client, "plain", ("retention.ms", _SET, "1000"), (name, _SET, str(value)))
        assert altered.error_code == ErrorCode.INVALID_CONFIG, altered
        # at the floor both are accepted
        floor = str(CLIENT_CONFIG_FLOORS[name])
        assert _create(client, "floor", {name: floor}).error_code == ErrorCode.NONE
        assert _alter(client, "plain", (name, _SET, floor)).error_code == ErrorCode.NONE
    assert not (data_dir / "small-0").exists()
    assert server.manager.topic_config("plain") == before.replace(**{name.replace(".", "_"): int(floor)})
    assert CLIENT_CONFIG_FLOORS == configs.CLIENT_CONFIG_FLOORS


def test_the_python_api_and_server_defaults_keep_small_segments(tmp_path: Path) -> None:
    """Only a client's own values are checked: a server started with small segments still creates topics
    (their effective config below the floors) and a DELETE goes back to that default."""
    data_dir = tmp_path / "data"
    with KafkaServer(data_dir, port=0, log_config={"segment.bytes": 4096}) as server:
        assert server.manager is not None
        with RawClient(server.port) as client:
            assert _create(client, "t", {"retention.ms": "1000"}).error_code == ErrorCode.NONE
            assert _alter(client, "t", ("segment.bytes", _SET, str(1 << 20))).error_code == ErrorCode.NONE
            assert _alter(client, "t", ("segment.bytes", _DELETE, None)).error_code == ErrorCode.NONE
        assert server.manager.topic_config("t").segment_bytes == 4096
    with LogManager.open(tmp_path / "api", background=False) as manager:
        manager.create_topic("small", 1, {"segment.bytes": 14, "segment.ms": 1})
        assert manager.topic_config("small").segment_bytes == 14
