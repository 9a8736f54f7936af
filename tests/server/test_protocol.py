"""Framing, dispatch and error mapping: what the server answers to good and bad bytes (raw sockets)."""

from __future__ import annotations

import struct
from pathlib import Path

import kafka.errors
import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kafkalog import errors as log_errors
from kafkalog.server import ErrorCode, KafkaServer, Registry, error_code_for
from kafkalog.server.errors import EXCEPTION_CODES
from kafkalog.server.protocol import message_classes, schema_versions

from .helpers import RawClient, frame

PHASE1 = {
    ApiKey.Produce: (3, 13),
    ApiKey.Fetch: (4, 18),
    ApiKey.ListOffsets: (1, 11),
    ApiKey.Metadata: (0, 13),
    ApiKey.ApiVersions: (0, 4),
    ApiKey.CreateTopics: (2, 7),
    ApiKey.DeleteTopics: (1, 6),
    ApiKey.DeleteRecords: (0, 2),
    ApiKey.InitProducerId: (0, 6),
    ApiKey.DescribeConfigs: (1, 4),
    ApiKey.CreatePartitions: (0, 3),
    ApiKey.IncrementalAlterConfigs: (0, 1),
}
PHASE2 = {
    ApiKey.OffsetCommit: (2, 9),
    ApiKey.OffsetFetch: (1, 9),
    ApiKey.FindCoordinator: (0, 6),
    ApiKey.JoinGroup: (0, 9),
    ApiKey.Heartbeat: (0, 4),
    ApiKey.LeaveGroup: (0, 5),
    ApiKey.SyncGroup: (0, 5),
    ApiKey.DescribeGroups: (0, 6),
    ApiKey.ListGroups: (0, 5),
    ApiKey.DeleteGroups: (0, 2),
    ApiKey.AddPartitionsToTxn: (0, 3),
    ApiKey.AddOffsetsToTxn: (0, 4),
    ApiKey.EndTxn: (0, 4),
    ApiKey.TxnOffsetCommit: (0, 4),
}


def _api_versions(client: RawClient, version: int) -> dict[int, tuple[int, int]]:
    kwargs = (
        {"client_software_name": "kafkalog-tests", "client_software_version": "1.0"} if version >= 3 else {}
    )
    response = client.call(ApiVersionsRequest[version](**kwargs), version)
    assert response.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_advertises_exactly_the_registry(server: KafkaServer, version: int) -> None:
    with RawClient(server.port) as client:
        assert _api_versions(client, version) == {int(k): v for k, v in {**PHASE1, **PHASE2}.items()}


def test_api_versions_unsupported_version_answers_35_in_v0_layout(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        # A future ApiVersions v9 from a newer client: header v2 (flexible), body we cannot know.
        client.send_raw(frame(struct.pack(">hhih", 18, 9, 77, 3) + b"cli" + b"\x00" + b"\x00\x00\x00"))
        payload = client.recv_frame()
        assert payload is not None
        (correlation_id,) = struct.unpack_from(">i", payload)  # response header v0: correlation id only
        assert correlation_id == 77
        body = ApiVersionsResponse[0].decode(payload[4:], version=0)
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
        # the connection stays usable: the client steps down
        assert _api_versions(client, 3)[18] == (0, 4)


def test_api_versions_refuses_bad_software_name(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        request = ApiVersionsRequest[3](client_software_name="bad name!", client_software_version="1")
        correlation_id = client.send(request, 3)
        payload = client.recv_frame()
        assert payload is not None  # header v0, then the v3 body's error code
        assert struct.unpack_from(">ih", payload) == (correlation_id, ErrorCode.INVALID_REQUEST)


def _assert_closed_then_alive(server: KafkaServer, client: RawClient) -> None:
    assert client.closed()
    with RawClient(server.port) as again:  # the server is still serving
        assert _api_versions(again, 0)


def test_unknown_api_key_closes_the_connection(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        client.send_raw(frame(struct.pack(">hhih", 999, 0, 1, -1)))
        _assert_closed_then_alive(server, client)


def test_unregistered_known_api_key_closes_the_connection(server: KafkaServer) -> None:
    with RawClient(server.port) as client:  # JoinGroup (11) is a later phase
        client.send_raw(frame(struct.pack(">hhih", 11, 5, 1, -1)))
        _assert_closed_then_alive(server, client)


def test_unsupported_version_of_other_api_closes_the_connection(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        client.send_raw(frame(struct.pack(">hhih", 0, 2, 1, -1) + b"\x00" * 16))  # Produce v2
        _assert_closed_then_alive(server, client)


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # empty frame
        b"\x00\x03\x00",  # shorter than a header
        struct.pack(">hhih", 3, 12, 5, -1) + b"\xff\xff\xff",  # Metadata v12 body cut short
        struct.pack(">hhih", 19, 7, 5, -1) + b"\x00\x05" + b"\x80" * 40,  # CreateTopics v7: varint garbage
    ],
    ids=["empty", "short-header", "truncated-body", "garbage-varints"],
)
def test_malformed_frames_close_the_connection(server: KafkaServer, payload: bytes) -> None:
    with RawClient(server.port) as client:
        client.send_raw(frame(payload))
        _assert_closed_then_alive(server, client)


def test_negative_size_closes_the_connection(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        client.send_raw(struct.pack(">i", -5) + b"junk")
        _assert_closed_then_alive(server, client)


def test_oversized_request_is_refused_before_it_is_read(data_dir: Path) -> None:
    with KafkaServer(data_dir, port=0, config={"socket.request.max.bytes": "1024"}) as server:
        with RawClient(server.port) as client:
            client.send_raw(struct.pack(">i", 1025))  # only the size: the server must not wait for the body
            _assert_closed_then_alive(server, client)
        with RawClient(server.port) as client:  # 1024 itself is fine
            assert _api_versions(client, 0)


def test_default_request_limit_is_kafkas(server: KafkaServer) -> None:
    assert server.config.socket_request_max_bytes == 104_857_600
    with RawClient(server.port) as client:
        client.send_raw(struct.pack(">i", 104_857_601))
        _assert_closed_then_alive(server, client)


def test_pipelined_requests_are_answered_in_order(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        ids = [client.send(MetadataRequest[v](topics=[]), v) for v in (1, 5, 9, 12)]
        got = []
        for _ in ids:
            payload = client.recv_frame()
            assert payload is not None
            got.append(struct.unpack_from(">i", payload)[0])
        assert got == ids


def test_handler_exception_closes_only_that_connection(data_dir: Path) -> None:
    registry = Registry()

    async def broken(ctx: object, request: object) -> object:
        raise RuntimeError("bug")

    async def versions(ctx: object, request: object) -> object:
        from kafkalog.server.apis.api_versions import handle_api_versions

        return await handle_api_versions(ctx, request)  # type: ignore[arg-type]

    registry.register(ApiKey.ApiVersions, versions)
    registry.register(ApiKey.Metadata, broken)
    with KafkaServer(data_dir, port=0, registry=registry) as server:
        with RawClient(server.port) as client:
            assert _api_versions(client, 3) == {18: (0, 4), 3: (0, 13)}
            client.send(MetadataRequest[12](topics=[]), 12)
            assert client.closed()
        with RawClient(server.port) as client:
            assert 3 in _api_versions(client, 0)


def test_registry_contract() -> None:
    registry = Registry()

    async def handler(ctx: object, request: object) -> None:
        return None

    spec = registry.register(ApiKey.Produce, handler, min_version=9)
    assert (spec.name, spec.min_version, spec.max_version) == ("Produce", 9, 13)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(ApiKey.Produce, handler)
    with pytest.raises(ValueError, match="outside the schema"):
        registry.register(ApiKey.Fetch, handler, min_version=0)  # Kafka's Fetch schema starts at v4
    with pytest.raises(ValueError, match="no message schema"):
        registry.register(4242, handler)
    assert [s.api_key for s in registry] == [0]


def test_schema_versions_are_kafkas_not_kafka_pythons() -> None:
    request, _ = message_classes()[ApiKey.Produce]
    assert schema_versions(request) == (3, 13)
    assert request.min_version == 0  # kafka-python widens it for its client


def test_error_codes_match_kafkas_table() -> None:
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        klass = kafka.errors.for_code(code.value)
        assert klass.errno == code.value, code
    assert error_code_for(log_errors.CorruptRecordError("crc")) == ErrorCode.CORRUPT_MESSAGE
    assert error_code_for(log_errors.RecordTooLargeError("big")) == ErrorCode.MESSAGE_TOO_LARGE
    assert (
        error_code_for(log_errors.UnknownTopicOrPartitionError("t")) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert error_code_for(log_errors.LogDirNotAvailableError("off")) == ErrorCode.KAFKA_STORAGE_ERROR
    assert error_code_for(log_errors.DecompressionBombError("bomb")) == ErrorCode.CORRUPT_MESSAGE
    invalid_ts = log_errors.RecordValidationError(log_errors.InvalidTimestampError("ts"), [(0, "bad ts")])
    assert error_code_for(invalid_ts) == ErrorCode.INVALID_TIMESTAMP
    assert error_code_for(RuntimeError("?")) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_exception_table_lists_subclasses_before_their_bases() -> None:
    classes = [k for k, _ in EXCEPTION_CODES]
    for i, klass in enumerate(classes):
        for later in classes[i + 1 :]:
            assert not issubclass(later, klass) or later is klass, f"{later} is shadowed by {klass}"


def test_create_topics_validate_only_writes_nothing(server: KafkaServer, data_dir: Path) -> None:
    topic = CreateTopicsRequest.CreatableTopic(
        name="dry", num_partitions=2, replication_factor=1, assignments=[], configs=[]
    )
    with RawClient(server.port) as client:
        response = client.call(CreateTopicsRequest[7](topics=[topic], timeout_ms=1000, validate_only=True), 7)
    assert response.topics[0].error_code == 0
    assert not (data_dir / "dry-0").exists()
    assert server.manager is not None and "dry" not in server.manager.topics()


def test_produce_request_to_unknown_topic_changes_nothing(server: KafkaServer, data_dir: Path) -> None:
    from kafkalog.records import MemoryRecords, SimpleRecord

    records = MemoryRecords.build([SimpleRecord(b"v")]).to_bytes()
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
    request = ProduceRequest[9](
        transactional_id=None,
        acks=1,
        timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name="nope", partition_data=[part])],
    )
    with RawClient(server.port) as client:
        response = client.call(request, 9)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not (data_dir / "nope-0").exists()
