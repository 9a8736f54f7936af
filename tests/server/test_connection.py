"""The connection's framing fast paths: pipelined and split frames, direct large frames, read-ahead, and
responses encoded into the connection's reused buffer (byte-identical to kafka-python's ``encode()``)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBuffer

from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.server import KafkaServer, ServerConfig, default_registry
from kafkalog.server.broker import Broker
from kafkalog.server.connection import DIRECT_FRAME_BYTES, READ_AHEAD_FRAMES, Connection
from kafkalog.server.protocol import decode_request, encode_response

from .helpers import RawClient

T = ProduceRequest.TopicProduceData


def _produce_frame(client: RawClient, topic: str, records: bytes, correlation_id: int) -> bytes:
    part = T.PartitionProduceData(index=0, records=records)
    request = ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    request.API_VERSION = 9
    request.with_header(correlation_id=correlation_id, client_id="conn-test")
    return bytes(request.encode(header=True, framed=True))


def _batch(n: int, size: int) -> bytes:
    return MemoryRecords.build([SimpleRecord(bytes([i % 251]) * size) for i in range(n)]).to_bytes()


def _answers(client: RawClient, count: int) -> list[tuple[int, int, int]]:
    out = []
    for _ in range(count):
        frame = client.recv_frame()
        assert frame is not None
        response = ProduceResponse.decode(frame, version=9, header=True)
        part = response.responses[0].partition_responses[0]
        out.append((response.header.correlation_id, part.error_code, part.base_offset))
    return out


def test_pipelined_small_and_large_frames_in_one_write_are_answered_in_order(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("p", 1)
    small, large = _batch(3, 10), _batch(40, 4000)  # one cut from the receive buffer, one received directly
    assert len(small) < DIRECT_FRAME_BYTES < len(large)
    sizes = [small, large, small, large, large, small]
    with RawClient(server.port) as client:
        data = b"".join(_produce_frame(client, "p", b, i + 1) for i, b in enumerate(sizes))
        client.send_raw(data)
        answers = _answers(client, len(sizes))
    counts = [3 if b is small else 40 for b in sizes]
    expected = [(i + 1, 0, sum(counts[:i])) for i in range(len(sizes))]
    assert answers == expected
    assert server.manager.get_log("p", 0).log_end_offset == sum(counts)


def test_frames_split_into_tiny_writes_are_reassembled(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("s", 1)
    sizes = [_batch(2, 10), _batch(20, 3000), _batch(1, 5)]
    with RawClient(server.port) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b"".join(_produce_frame(client, "s", b, i + 1) for i, b in enumerate(sizes))
        for start in range(0, len(data), 7919):  # pieces that cut size prefixes and headers anywhere
            client.send_raw(data[start : start + 7919])
            if start < 4 * 7919:
                time.sleep(0.002)
        assert [a[:2] for a in _answers(client, 3)] == [(1, 0), (2, 0), (3, 0)]


def test_read_ahead_is_bounded_and_resumes(server: KafkaServer) -> None:
    request = MetadataRequest[12](topics=[])
    with RawClient(server.port) as client:
        frames = []
        for i in range(3 * READ_AHEAD_FRAMES):
            request.API_VERSION = 12
            request.with_header(correlation_id=i + 1, client_id="conn-test")
            frames.append(bytes(request.encode(header=True, framed=True)))
        client.send_raw(b"".join(frames))  # more queued requests than the read-ahead holds: reading pauses
        for i in range(3 * READ_AHEAD_FRAMES):
            frame = client.recv_frame()
            assert frame is not None
            assert struct.unpack_from(">i", frame)[0] == i + 1


def test_requests_before_a_refused_size_are_answered_then_the_connection_closes(server: KafkaServer) -> None:
    request = ApiVersionsRequest[0]()
    request.API_VERSION = 0
    request.with_header(correlation_id=5, client_id="conn-test")
    good = bytes(request.encode(header=True, framed=True))
    with RawClient(server.port) as client:
        client.send_raw(good + good + struct.pack(">i", -3) + b"junk")
        for _ in range(2):
            frame = client.recv_frame()
            assert frame is not None
            assert ApiVersionsResponse.decode(frame, version=0, header=True).error_code == 0
        assert client.closed()


def test_a_long_client_id_header_is_decoded() -> None:
    request = MetadataRequest[12](topics=[])
    request.API_VERSION = 12
    request.with_header(
        correlation_id=9, client_id="c" * 3000
    )  # longer than the header prefix that is copied
    frame = bytearray(request.encode(header=True))
    header, decoded = decode_request(frame, MetadataRequest, 12)
    assert (header.correlation_id, header.client_id) == (9, "c" * 3000)
    assert decoded.topics == []


def test_responses_encoded_into_a_reused_buffer_match_kafka_python() -> None:
    topic = FetchResponse.FetchableTopicResponse
    fetch = FetchResponse[12](
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            topic(
                topic="t",
                partitions=[
                    topic.PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=7,
                        last_stable_offset=7,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=memoryview(_batch(7, 20000)),
                    )
                ],
            )
        ],
    )
    produce_topic = ProduceResponse.TopicProduceResponse
    produce = ProduceResponse[9](
        responses=[
            produce_topic(
                name="t",
                partition_responses=[
                    produce_topic.PartitionProduceResponse(
                        index=0, error_code=0, base_offset=3, log_append_time_ms=-1, log_start_offset=0
                    )
                ],
            )
        ],
        throttle_time_ms=0,
    )
    versions = ApiVersionsResponse[3](error_code=0, api_keys=[], throttle_time_ms=0)  # header v0 (KIP-511)
    out = EncodeBuffer(16)  # grows as needed, then is reused
    for response, version in [(fetch, 12), (produce, 9), (versions, 3), (fetch, 12), (produce, 9)]:
        expected = bytes(encode_response(response, version, 41))
        assert bytes(encode_response(response, version, 41, out)) == expected


class _Transport(asyncio.Transport):
    """Just enough of a socket transport to drive a :class:`Connection` by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _frames_in(data: bytearray) -> int:
    count = pos = 0
    while pos < len(data):
        pos += 4 + struct.unpack_from(">i", data, pos)[0]
        count += 1
    assert pos == len(data)
    return count


def test_ready_connections_counts_requests_waiting_for_the_loop(tmp_path: Path) -> None:
    """A connection counts in ``Broker.ready_connections`` while a received request waits for the loop and
    none is being handled; never after it is closed."""
    request = MetadataRequest[12](topics=[])
    request.API_VERSION = 12
    request.with_header(correlation_id=1, client_id="conn-test")
    one = bytes(request.encode(header=True, framed=True))

    def feed(conn: Connection, data: bytes) -> None:
        buf = conn.get_buffer(len(data))
        buf[: len(data)] = data
        conn.buffer_updated(len(data))

    async def main(manager: LogManager) -> None:
        broker = Broker(manager, ServerConfig(), default_registry(), asyncio.get_running_loop())
        try:
            first, second = Connection(broker), Connection(broker)
            transports = [_Transport(), _Transport()]
            first.connection_made(transports[0])
            second.connection_made(transports[1])
            await asyncio.sleep(0)
            assert broker.ready_connections == 0
            feed(first, one)
            feed(second, one + one)
            assert broker.ready_connections == 2  # received, their request loops not run yet
            for _ in range(20):
                await asyncio.sleep(0)
            assert broker.ready_connections == 0  # answered: nothing waits
            assert [_frames_in(t.written) for t in transports] == [1, 2]
            feed(first, one)
            assert broker.ready_connections == 1
            first.close()
            assert broker.ready_connections == 0
            second.close()
            await asyncio.gather(*(c.task for c in (first, second) if c.task is not None))
            assert broker.ready_connections == 0
        finally:
            broker.close()

    with LogManager.open(tmp_path / "data", background=False) as manager:
        asyncio.run(main(manager))
