"""Requests a hostile or buggy client sends (issue #19 items 5 and 6): each is answered as Kafka answers it,
changes nothing it should not, and keeps the event loop free."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import crc32c
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kafkalog.manager import LogManager
from kafkalog.records import Compression, MemoryRecords, SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer, ServerConfig, default_registry
from kafkalog.server.broker import Broker
from kafkalog.server.connection import handle_frame
from kafkalog.server.protocol import message_classes

from .helpers import RawClient

T = ProduceRequest.TopicProduceData


def _produce_frame(version: int, records: bytes, transactional_id: str | None = None) -> bytearray:
    part = T.PartitionProduceData(index=0, records=records)
    request = ProduceRequest[version](
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=1000,
        topic_data=[T(name="t", partition_data=[part])],
    )
    request.API_VERSION = version
    request.with_header(correlation_id=1, client_id="hostile")
    return bytearray(request.encode(header=True))


def _serve(tmp_path: Path, body: Callable[[Broker, LogManager], Any]) -> None:
    """Run ``body(broker, manager)`` (a coroutine function) on a broker over a fresh directory with topic t."""

    async def run(manager: LogManager) -> None:
        broker = Broker(manager, ServerConfig(), default_registry(), asyncio.get_running_loop())
        try:
            await body(broker, manager)
        finally:
            broker.close()

    with LogManager.open(tmp_path / "data", background=False) as manager:
        manager.create_topic("t", 1)
        asyncio.run(run(manager))


async def _produce(broker: Broker, version: int, records: bytes, transactional_id: str | None = None) -> Any:
    data, close = await handle_frame(broker, _produce_frame(version, records, transactional_id), owned=True)
    assert data is not None and not close
    response = ProduceResponse[version].decode(bytes(data)[4:], header=True)
    return response.responses[0].partition_responses[0]


# --- item 5: decompression off the event loop ---------------------------------------------------------------
@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_a_batch_that_expands_past_the_inline_bound_is_appended_on_the_io_threads(
    tmp_path: Path, codec: Compression
) -> None:
    """A few KiB of gzip expand to MiBs: the append (which decompresses) used to run on the event loop when no
    other connection waited (the bomb stalled every client for seconds); it now always runs on a thread. Small
    compressed batches stay inline (the thread hop costs more than they do)."""
    expanding = MemoryRecords.build([SimpleRecord(bytes(8 << 20), key=b"k")], compression=codec).to_bytes()
    small = MemoryRecords.build([SimpleRecord(b"v" * 1000, key=b"k")], compression=codec).to_bytes()
    assert len(expanding) < 64 << 10

    async def body(broker: Broker, manager: LogManager) -> None:
        offloaded: list[str] = []
        run_blocking = broker.run_blocking

        async def recording(fn: Callable[..., Any], *args: Any) -> Any:
            offloaded.append(getattr(fn, "__name__", "?"))
            return await run_blocking(fn, *args)

        broker.run_blocking = recording  # type: ignore[method-assign]
        assert broker.ready_connections == 0
        small_result = await _produce(broker, 9, small)
        assert small_result.error_code == 0 and offloaded == []
        result = await _produce(broker, 9, expanding)
        assert result.error_code == 0 and result.base_offset == 1
        assert offloaded == ["append_as_leader"]
        assert manager.get_log("t", 0).log_end_offset == 2

    _serve(tmp_path, body)


# --- item 6: handler bugs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("producer_id", [-1, 7])
def test_transactional_batch_without_a_transactional_id_is_refused(tmp_path: Path, producer_id: int) -> None:
    """Kafka's KafkaApis answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for transactional records in a request
    without a transactional id (with producer id -1 kafkalog used to write the batch)."""
    batch = bytearray(
        MemoryRecords.build(
            [SimpleRecord(b"v")], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True
        ).buffer
    )
    struct.pack_into(">q", batch, 43, producer_id)  # Kafka's builder refuses -1 too: a hand-made batch
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))

    async def body(broker: Broker, manager: LogManager) -> None:
        result = await _produce(broker, 9, bytes(batch))
        assert result.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED == 53
        assert manager.get_log("t", 0).log_end_offset == 0
        plain = MemoryRecords.build([SimpleRecord(b"v")]).to_bytes()
        assert (await _produce(broker, 9, plain)).error_code == 0  # the connection goes on

    _serve(tmp_path, body)


def test_zstd_batch_below_produce_v7_is_refused(tmp_path: Path) -> None:
    """Kafka's ProduceRequest.validateRecords: zstd needs Produce v7+ (UNSUPPORTED_COMPRESSION_TYPE)."""
    batch = MemoryRecords.build([SimpleRecord(b"v")], compression=Compression.ZSTD).to_bytes()

    async def body(broker: Broker, manager: LogManager) -> None:
        assert (await _produce(broker, 6, batch)).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert manager.get_log("t", 0).log_end_offset == 0
        assert (await _produce(broker, 7, batch)).error_code == 0

    _serve(tmp_path, body)


@pytest.fixture
def group_server(data_dir: Path) -> Iterator[KafkaServer]:
    with KafkaServer(
        data_dir, port=0, offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0
    ) as s:
        yield s


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_commit_with_the_largest_retention_is_answered(
    group_server: KafkaServer, version: int
) -> None:
    """OffsetCommit v2-4 ``retention_time_ms=2**63-1``: now + retention overflowed the int64 of the record
    (``struct.error``, the connection dropped); the expire timestamp now saturates, as "never"."""
    request_cls, _ = message_classes()[int(ApiKey.OffsetCommit)]
    part = request_cls.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata="m"
    )
    topic = request_cls.OffsetCommitRequestTopic(name="t", partitions=[part])
    fetch_cls, _ = message_classes()[int(ApiKey.OffsetFetch)]
    with RawClient(group_server.port) as client:
        for retention in (2**63 - 1, 2**62, 0):
            response = client.call(
                request_cls(
                    group_id=f"g{retention}",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    retention_time_ms=retention,
                    topics=[topic],
                ),
                version,
            )
            assert response.topics[0].partitions[0].error_code == 0
            fetched = client.call(
                fetch_cls(
                    group_id=f"g{retention}",
                    topics=[fetch_cls.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
                ),
                3,
            )
            assert fetched.topics[0].partitions[0].committed_offset == 5


@pytest.mark.parametrize(
    ("api_key", "version", "fields"),
    [
        (ApiKey.CreateTopics, 4, {"topics": None, "timeout_ms": 1, "validate_only": False}),
        (ApiKey.CreateTopics, 6, {"topics": None, "timeout_ms": 1, "validate_only": False}),
        (ApiKey.DeleteRecords, 2, {"topics": None, "timeout_ms": 1}),
        (ApiKey.Produce, 3, {"transactional_id": None, "acks": 1, "timeout_ms": 1, "topic_data": None}),
        (ApiKey.Metadata, 0, {"topics": []}),  # v0 topics are not nullable: its length is made -1 below
        (ApiKey.ListGroups, 4, {"states_filter": ["Stable", None]}),  # an element of a string array
    ],
)
def test_null_in_a_non_nullable_field_closes_the_connection_without_a_handler_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, api_key: int, version: int, fields: dict[str, Any]
) -> None:
    """Found by the fuzzer: a null array (length -1) where the schema allows none decoded as None and the
    handler failed on it (TypeError logged as a handler bug). Kafka's decoder refuses it: a malformed request,
    the connection is closed."""
    request = message_classes()[int(api_key)][0][version](**fields)
    request.with_header(correlation_id=1, client_id="hostile")
    frame = bytes(request.encode(header=True))
    if api_key == ApiKey.Metadata:
        assert frame.endswith(b"\x00\x00\x00\x00")
        frame = frame[:-4] + b"\xff\xff\xff\xff"

    async def body(broker: Broker, manager: LogManager) -> None:
        data, close = await handle_frame(broker, frame)
        assert data is None and close

    caplog.set_level("ERROR", logger="kafkalog")
    _serve(tmp_path, body)
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_the_zero_topic_id_is_not_a_null(tmp_path: Path) -> None:
    """kafka-python decodes Kafka's zero UUID as None; it is a value (an unknown topic id), not a null."""
    fetch_cls = message_classes()[int(ApiKey.Fetch)][0]
    part = fetch_cls.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1024
    )
    request = fetch_cls[13](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[fetch_cls.FetchTopic(topic_id=uuid.UUID(int=0), partitions=[part])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    request.with_header(correlation_id=1, client_id="hostile")

    async def body(broker: Broker, manager: LogManager) -> None:
        data, close = await handle_frame(broker, bytes(request.encode(header=True)))
        assert data is not None and not close
        response = message_classes()[int(ApiKey.Fetch)][1].decode(bytes(data)[4:], version=13, header=True)
        assert response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID

    _serve(tmp_path, body)
