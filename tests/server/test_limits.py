"""What one client can make the server spend (issue #19, items 2 and 3): memory for a size prefix alone,
bytes of requests held at once (``queued.max.request.bytes``), connections (``max.connections``,
``max.connections.per.ip``), idle sockets (``connections.max.idle.ms``), and the log lines of failing accepts;
and, in a process with a low descriptor limit, that running out of descriptors never takes the dir offline."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer, ServerConfig, default_registry
from kafkalog.server import server as server_module
from kafkalog.server.broker import Broker
from kafkalog.server.connection import FRAME_START_BYTES, Connection

from .helpers import RawClient

T = ProduceRequest.TopicProduceData


def _produce_frame(topic: str, records: bytes, correlation_id: int = 1) -> bytes:
    part = T.PartitionProduceData(index=0, records=records)
    request = ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    request.API_VERSION = 9
    request.with_header(correlation_id=correlation_id, client_id="limits-test")
    return bytes(request.encode(header=True, framed=True))


def _api_versions_frame(correlation_id: int = 7) -> bytes:
    request = ApiVersionsRequest[0]()
    request.API_VERSION = 0
    request.with_header(correlation_id=correlation_id, client_id="limits-test")
    return bytes(request.encode(header=True, framed=True))


def _big_batch(nbytes: int) -> bytes:
    return MemoryRecords.build(
        [SimpleRecord(bytes([i % 251]) * 1000) for i in range(nbytes // 1000)]
    ).to_bytes()


def _answered(client: RawClient, timeout: float) -> bytes | None:
    """The next response frame if one arrives within ``timeout`` seconds, else None."""
    client.sock.settimeout(timeout)
    try:
        return client.recv_frame()
    except TimeoutError:
        return None
    finally:
        client.sock.settimeout(10.0)


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        pass


def _feed(conn: Connection, data: bytes) -> None:
    while data:
        buf = conn.get_buffer(len(data))
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        conn.buffer_updated(n)
        data = data[n:]


# --- item 2: frame allocation and queued.max.request.bytes ---------------------------------------------------


def test_a_size_prefix_alone_allocates_no_frame(tmp_path: Path) -> None:
    """Five connections announcing 100 MiB frames and sending nothing more hold only their first buffers
    (1 MiB each; the server used to allocate and zero the whole frame: +500 MiB); a body is allocated as it
    arrives (doubling: at most twice what arrived)."""

    async def main(manager: LogManager) -> None:
        broker = Broker(manager, ServerConfig(), default_registry(), asyncio.get_running_loop())
        connections = [Connection(broker) for _ in range(5)]
        try:
            for conn in connections:
                conn.connection_made(_Transport())
            tracemalloc.start()
            try:
                for conn in connections:
                    _feed(conn, struct.pack(">i", 100 * 1024 * 1024 - 1))
                prefixes, _ = tracemalloc.get_traced_memory()
                _feed(connections[0], b"\0" * (3 * FRAME_START_BYTES))  # part of one body: grows with it
                partial, _ = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert prefixes < 5 * FRAME_START_BYTES + (1 << 20)
            assert FRAME_START_BYTES <= partial - prefixes <= 5 * FRAME_START_BYTES
            # the pool holds what is allocated, not what is announced
            assert broker.memory_pool.used <= 5 * FRAME_START_BYTES + 2 * 3 * FRAME_START_BYTES
        finally:
            for conn in connections:
                conn.close()
            await asyncio.gather(*(c.task for c in connections if c.task is not None))
            assert broker.memory_pool.used == 0
            broker.close()

    with LogManager.open(tmp_path / "data", background=False) as manager:
        asyncio.run(main(manager))


def test_a_large_frame_arriving_in_pieces_is_served(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("big", 1, {"max.message.bytes": 4 << 20})
    records = _big_batch(2_500_000)  # above FRAME_START_BYTES: the frame's buffer grows twice
    data = _produce_frame("big", records)
    with RawClient(server.port) as client:
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, len(data), 50_000):
            client.send_raw(data[start : start + 50_000])
        response = ProduceResponse.decode(client.recv_frame(), version=9, header=True)
    assert response.responses[0].partition_responses[0].error_code == 0
    log = server.manager.get_log("big", 0)
    assert log.log_end_offset == 2500
    fetched = log.read(0, 4 << 20)
    values = [r.value for r in fetched.records.records()]
    assert values == [r.value for r in MemoryRecords(records).records()]


def test_queued_max_request_bytes_holds_other_connections_until_requests_are_answered(data_dir: Path) -> None:
    """With the pool taken by one half-received request, another connection's request waits unread; it is
    answered once the first request is complete and answered (and a request larger than the whole pool
    is still served: Kafka's over-commit)."""
    with KafkaServer(data_dir, port=0, config={"queued.max.request.bytes": "65536"}) as server:
        assert server.manager is not None
        server.manager.create_topic("q", 1)
        data = _produce_frame("q", _big_batch(200_000))  # three times the pool
        with RawClient(server.port) as holder, RawClient(server.port) as other:
            holder.send_raw(data[:100_000])
            time.sleep(0.1)  # the holder's prefix reaches the server first
            other.send_raw(_api_versions_frame())
            assert _answered(other, 0.5) is None  # waits for the pool, unread
            holder.send_raw(data[100_000:])
            answer = holder.recv_frame()
            assert answer is not None
            frame = _answered(other, 10.0)
            assert frame is not None
            assert ApiVersionsResponse.decode(frame, version=0, header=True).error_code == 0
        assert server.manager.get_log("q", 0).log_end_offset == 200


def test_size_prefixes_alone_do_not_take_the_pool(data_dir: Path) -> None:
    """Seven sockets announcing 100 MiB requests reserve only their first buffers, so a 512 MiB pool still
    serves everyone else (reserving announced sizes, the seventh would have blocked every connection until
    connections.max.idle.ms)."""
    with KafkaServer(data_dir, port=0) as server:
        prefixes = [RawClient(server.port) for _ in range(7)]
        try:
            for client in prefixes:
                client.send_raw(struct.pack(">i", 100 * 1024 * 1024 - 1) + b"\0" * 100)
            with RawClient(server.port) as other:
                assert _served(other)
        finally:
            for client in prefixes:
                client.close()


def test_requests_larger_than_the_pool_arriving_together_are_all_served(data_dir: Path) -> None:
    """Two 1 MiB produce requests arriving in interleaved halves with a 256 KiB pool: neither can complete
    within the pool, so the oldest is let through beyond it (no deadlock), then the other."""
    with KafkaServer(data_dir, port=0, config={"queued.max.request.bytes": str(256 * 1024)}) as server:
        assert server.manager is not None
        server.manager.create_topic("two", 2)
        frames = [_produce_frame_to("two", i, _big_batch(1_000_000), correlation_id=i + 1) for i in range(2)]
        with RawClient(server.port) as first, RawClient(server.port) as second:
            clients = [first, second]
            half = len(frames[0]) // 2
            for client, frame in zip(clients, frames, strict=True):
                client.send_raw(frame[:half])
            for client, frame in zip(clients, frames, strict=True):
                client.send_raw(frame[half:])
            for client in clients:
                answer = client.recv_frame()
                assert answer is not None
                assert (
                    ProduceResponse.decode(answer, version=9, header=True)
                    .responses[0]
                    .partition_responses[0]
                    .error_code
                    == 0
                )
        assert [server.manager.get_log("two", p).log_end_offset for p in (0, 1)] == [1000, 1000]


def _produce_frame_to(topic: str, partition: int, records: bytes, correlation_id: int) -> bytes:
    part = T.PartitionProduceData(index=partition, records=records)
    request = ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    request.API_VERSION = 9
    request.with_header(correlation_id=correlation_id, client_id="limits-test")
    return bytes(request.encode(header=True, framed=True))


# --- item 3: connections ----------------------------------------------------------------------------------


def _served(client: RawClient) -> bool:
    client.send_raw(_api_versions_frame())
    return _answered(client, 10.0) is not None


def test_connections_above_max_connections_wait_for_a_slot(data_dir: Path) -> None:
    """As Kafka's acceptor: at max.connections the server accepts no more (clients wait in the listen
    backlog) until a connection closes."""
    with KafkaServer(data_dir, port=0, config={"max.connections": "3"}) as server:
        clients = [RawClient(server.port) for _ in range(3)]
        try:
            assert all(_served(c) for c in clients)
            with RawClient(server.port) as waiting:
                waiting.send_raw(_api_versions_frame())
                assert _answered(waiting, 0.5) is None
                clients.pop().close()
                assert _answered(waiting, 10.0) is not None
        finally:
            for c in clients:
                c.close()


def test_connections_above_max_connections_per_ip_are_closed_at_once(data_dir: Path) -> None:
    with KafkaServer(data_dir, port=0, config={"max.connections.per.ip": "3"}) as server:
        clients = [RawClient(server.port) for _ in range(3)]
        try:
            assert all(_served(c) for c in clients)
            with RawClient(server.port) as refused:
                assert refused.closed(timeout=10.0)
            clients.pop().close()
            deadline = time.monotonic() + 10
            while True:  # the server sees the close asynchronously: a new connection is served then
                with RawClient(server.port) as again:
                    if not again.closed(timeout=0.2):
                        assert _served(again)
                        break
                assert time.monotonic() < deadline
        finally:
            for c in clients:
                c.close()


def test_max_connections_stays_below_the_descriptor_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    from kafkalog.server.server import effective_max_connections

    assert effective_max_connections(ServerConfig(max_connections=10**9)) <= max(1, soft // 2)
    assert effective_max_connections(ServerConfig(max_connections=3)) == min(3, max(1, soft // 2))


def test_idle_connections_are_closed(data_dir: Path) -> None:
    with KafkaServer(data_dir, port=0, config={"connections.max.idle.ms": "300"}) as server:
        with RawClient(server.port) as idle, RawClient(server.port) as active:
            started = time.monotonic()
            while time.monotonic() - started < 0.9:  # one request every 100 ms: never idle for 300 ms
                assert _served(active)
                time.sleep(0.1)
            assert idle.closed(timeout=10.0)
            assert _served(active)
        with RawClient(server.port) as prefix_only:  # a request that never completes is idle too
            prefix_only.send_raw(struct.pack(">i", 1000) + b"\0" * 10)
            assert prefix_only.closed(timeout=10.0)


def test_a_client_that_stops_reading_responses_is_closed_when_idle(data_dir: Path) -> None:
    """Kafka's selector counts a send that makes no progress as idle: a client pipelining fetches of MiBs
    and reading nothing is closed after connections.max.idle.ms, and its buffered responses freed (it held
    the connection and a response's memory for good)."""
    with KafkaServer(data_dir, port=0, config={"connections.max.idle.ms": "300"}) as server:
        assert server.manager is not None
        server.manager.create_topic("r", 1)
        log = server.manager.get_log("r", 0)
        for i in range(5):
            log.append([SimpleRecord(bytes([i]) * 900_000)])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        try:
            FT = FetchRequest.FetchTopic
            for correlation_id in range(1, 4):
                part = FT.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 << 20)
                request = FetchRequest[12](
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=8 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[FT(topic="r", partitions=[part])],
                    forgotten_topics_data=[],
                    rack_id="",
                )
                request.API_VERSION = 12
                request.with_header(correlation_id=correlation_id, client_id="limits-test")
                sock.sendall(bytes(request.encode(header=True, framed=True)))
            deadline = time.monotonic() + 10
            while server.connection_count and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.connection_count == 0
        finally:
            sock.close()


def test_a_quiet_connection_gives_back_its_grown_response_buffer(server: KafkaServer) -> None:
    """A 4.5 MB fetch response grew the connection's reused response buffer; once the connection is quiet
    for a second the buffer is dropped (1000 quiet connections kept up to 8 MiB each)."""
    assert server.manager is not None
    server.manager.create_topic("m", 1)
    log = server.manager.get_log("m", 0)
    for i in range(5):
        log.append([SimpleRecord(bytes([i]) * 900_000)])
    FT = FetchRequest.FetchTopic
    part = FT.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=8 << 20)
    request = FetchRequest[12](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=8 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FT(topic="m", partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )
    tracemalloc.start()
    try:
        with RawClient(server.port) as client:
            response = client.call(request, 12)
            assert len(response.responses[0].partitions[0].records) > 4_000_000
            del response
            held, _ = tracemalloc.get_traced_memory()
            deadline = time.monotonic() + 10
            while tracemalloc.get_traced_memory()[0] > held - 3_000_000 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert tracemalloc.get_traced_memory()[0] <= held - 3_000_000
    finally:
        tracemalloc.stop()


def test_failing_accepts_back_off_and_are_logged_at_most_once_per_interval(
    data_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``accept()`` failing with EMFILE: the server backs off and retries, one log line per interval (not
    one per retry: 21 MB of log in a minute before), and serves the client once descriptors are free."""
    failing = threading.Event()
    failing.set()
    real_accept = socket.socket.accept

    def accept(self: socket.socket) -> tuple[socket.socket, object]:
        if failing.is_set():
            raise OSError(errno.EMFILE, "Too many open files")
        return real_accept(self)

    monkeypatch.setattr(server_module, "ACCEPT_RETRY_S", 0.005)
    monkeypatch.setattr(socket.socket, "accept", accept)
    with (
        caplog.at_level(logging.WARNING),
        KafkaServer(data_dir, port=0) as server,
        RawClient(server.port) as client,
    ):
        client.send_raw(_api_versions_frame())
        assert _answered(client, 0.5) is None
        failing.clear()
        assert _answered(client, 10.0) is not None
    lines = [r for r in caplog.records if "Accepting a connection failed" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].exc_info is None


def test_a_produce_that_runs_out_of_descriptors_is_retriable_and_the_dir_stays_online(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append needs a new segment and ``os.open`` fails with EMFILE: KAFKA_STORAGE_ERROR (clients retry
    it), the log dir stays online, and the retried produce succeeds once descriptors are free (before: the dir
    went offline for good and every later produce failed)."""
    assert server.manager is not None
    server.manager.create_topic("e", 1, {"segment.bytes": 4096})
    root = str(server.manager.log_dirs[0])
    exhausted = threading.Event()
    real_open = os.open

    def os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        if exhausted.is_set() and os.fspath(path).startswith(root):
            raise OSError(errno.EMFILE, "Too many open files", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    with RawClient(server.port) as client:
        assert _produce_to(client, "e", _big_batch(3_000)) == 0
        exhausted.set()
        assert _produce_to(client, "e", _big_batch(3_000)) == ErrorCode.KAFKA_STORAGE_ERROR  # must roll
        assert server.manager.offline_dirs == []
        exhausted.clear()
        assert _produce_to(client, "e", _big_batch(3_000)) == 0
    assert server.manager.get_log("e", 0).log_end_offset == 6


def _produce_to(client: RawClient, topic: str, records: bytes) -> int:
    part = T.PartitionProduceData(index=0, records=records)
    request = ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    return int(client.call(request, 9).responses[0].partition_responses[0].error_code)


_LOW_FD_SERVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))
from kafkalog.cli import main
sys.argv = ["kafkalog", "serve", sys.argv[1], "--listen", "127.0.0.1:0"]
main()
"""


@pytest.fixture
def low_fd_server(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    data = tmp_path / "data"
    process = subprocess.Popen(
        [sys.executable, "-c", _LOW_FD_SERVER, str(data), "256"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        while line and "listening on" not in line:  # e.g. the warning that max.connections was lowered
            line = process.stdout.readline()
        assert "listening on" in line, line
        yield int(line.rsplit(":", 1)[1]), process
    finally:
        process.terminate()
        process.wait(30)


def _create_topic(client: RawClient, name: str) -> int:
    C = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[5](
        topics=[C(name=name, num_partitions=4, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000,
        validate_only=False,
    )
    return int(client.call(request, 5).topics[0].error_code)


def test_descriptor_exhaustion_by_clients_leaves_the_server_and_its_dir_serving(
    low_fd_server: tuple[int, subprocess.Popen[str]],
) -> None:
    """A process with 256 descriptors and 200 idle client sockets: beyond max.connections (128 here) they wait
    in the listen backlog, so the log still gets descriptors: a topic is created and produced to meanwhile,
    and after they leave (before: the sockets took every descriptor, the topic's files failed with EMFILE and
    the dir went offline for good)."""
    port, _ = low_fd_server
    with RawClient(port) as probe:
        assert _served(probe)
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(200)]
        try:
            with RawClient(port) as late:  # over max.connections: waits in the backlog, unanswered
                late.send_raw(_api_versions_frame())
                assert _answered(late, 0.5) is None
            assert _create_topic(probe, "after") == 0
            assert _produce(probe, "after") == 0
        finally:
            for s in sockets:
                s.close()
        assert _produce(probe, "after") == 0


def _produce(client: RawClient, topic: str) -> int:
    part = T.PartitionProduceData(index=1, records=_big_batch(5_000))
    request = ProduceRequest[9](
        transactional_id=None, acks=1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    return int(client.call(request, 9).responses[0].partition_responses[0].error_code)
