"""Produce without copies: records decoded as views of the request frame and appended from the frame itself
(offsets assigned in place) when the frame is the request's own; kafka-python itself is left as it was."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from kafkalog.log import Log
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer, ServerConfig, default_registry
from kafkalog.server.broker import Broker
from kafkalog.server.connection import DIRECT_FRAME_BYTES, handle_frame
from kafkalog.server.protocol import decode_request

from .helpers import RawClient

T = ProduceRequest.TopicProduceData


def _batch(n: int, size: int, seed: int = 0) -> bytes:
    return MemoryRecords.build(
        [SimpleRecord(bytes([(seed + i) % 251]) * size, key=b"k%d" % i) for i in range(n)]
    ).to_bytes()


def _request(version: int, topic: str, *records: bytes | None, correlation_id: int = 1) -> Any:
    parts = [T.PartitionProduceData(index=i, records=r) for i, r in enumerate(records)]
    by = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": topic}
    request = ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[T(**by, partition_data=parts)]
    )
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="zero-copy-test")
    return request


def _frame(version: int, topic: str, *records: bytes | None, correlation_id: int = 1) -> bytearray:
    """A request frame without its size prefix, as the connection hands it over (a private bytearray)."""
    return bytearray(_request(version, topic, *records, correlation_id=correlation_id).encode(header=True))


def _as_logged(batch: bytes, base_offset: int, epoch: int = 0) -> bytes:
    """``batch`` as the log stores it: base offset and partition leader epoch set (both outside the CRC)."""
    out = bytearray(batch)
    out[0:8] = base_offset.to_bytes(8, "big")
    out[12:16] = epoch.to_bytes(4, "big", signed=True)
    return bytes(out)


def _log_bytes(log: Log) -> bytes:
    out = b""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = log.read(offset, 8 << 20).records
        mem = records if isinstance(records, MemoryRecords) else records.to_memory_records()
        out += bytes(mem.buffer)
        offset = list(mem.batches())[-1].next_offset
    return out


# --- decoding -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_produce_records_decode_as_writable_views_of_the_frame(version: int) -> None:
    large, small = _batch(50, 2000), _batch(2, 10)
    frame = _frame(version, "t", large, None, small, b"")
    header, request = decode_request(frame, ProduceRequest, version)
    assert header.correlation_id == 1 and header.client_id == "zero-copy-test"
    parts = request.topic_data[0].partition_data
    records = [p.records for p in parts]
    assert records[1] is None
    for view, sent in zip([records[0], records[2], records[3]], [large, small, b""]):
        assert isinstance(view, memoryview) and view.obj is frame and not view.readonly
        assert view == sent
    # the same request kafka-python decodes (with bytes copies)
    assert request == ProduceRequest.decode(bytes(frame), version=version, header=True)
    assert request.to_dict()["topic_data"][0]["partition_data"][1]["records"] is None
    # a read-only frame gives read-only views
    view = decode_request(bytes(frame), ProduceRequest, version)[1].topic_data[0].partition_data[0].records
    assert view.readonly and view == large


def test_a_decoder_that_does_not_compile_falls_back_to_kafka_pythons_copy(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The view decoder relies on kafka-python internals: if they changed, records are copied, nothing fails."""
    from kafkalog.server import protocol

    def broken(request_class: Any, version: int) -> Any:
        raise AttributeError("CodegenContext changed")

    monkeypatch.setattr(protocol, "_compile_view_decoder", broken)
    monkeypatch.setattr(protocol, "_view_decoders", {})
    large = _batch(50, 2000)
    frame = _frame(9, "t", large)
    with caplog.at_level("WARNING", logger="kafkalog.server.protocol"):
        _, request = decode_request(frame, ProduceRequest, 9)
        decode_request(frame, ProduceRequest, 9)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, bytes) and records == large
    assert request == ProduceRequest.decode(bytes(frame), version=9, header=True)
    assert sum("zero-copy decoder" in r.getMessage() for r in caplog.records) == 1  # once per version


def test_kafka_pythons_own_decoding_and_encoding_are_unchanged() -> None:
    """kafka-python's decoders and encoders give the same results with and without kafkalog's server loaded
    (its clients decode responses in the same process): each computed in a fresh interpreter."""
    script = r"""
import json, sys, uuid
if sys.argv[1] == "server":
    import kafkalog.server.protocol  # noqa: F401  (installs the server's Produce decoder)
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
T = ProduceRequest.TopicProduceData
out = {}
for v in (3, 8, 9, 13):
    by = {"topic_id": uuid.UUID(int=7)} if v >= 13 else {"name": "t"}
    for records in (b"\x01" * 300, memoryview(b"\x02" * 70), None):
        req = ProduceRequest[v](transactional_id="x", acks=1, timeout_ms=5, topic_data=[
            T(**by, partition_data=[T.PartitionProduceData(index=0, records=records)])])
        req.API_VERSION = v
        req.with_header(correlation_id=3, client_id="c")
        data = bytes(req.encode(header=True, framed=True))
        back = ProduceRequest.decode(data[4:], version=v, header=True)
        got = back.topic_data[0].partition_data[0].records
        out[f"produce v{v} {type(records).__name__}"] = [data.hex(), type(got).__name__, repr(back)]
F = FetchResponse.FetchableTopicResponse
for v in (4, 12, 16):
    resp = FetchResponse[v](throttle_time_ms=0, error_code=0, session_id=0, responses=[F(
        topic="t", topic_id=uuid.UUID(int=9), partitions=[F.PartitionData(
            partition_index=0, error_code=0, high_watermark=1, last_stable_offset=1, log_start_offset=0,
            aborted_transactions=None, preferred_read_replica=-1, records=b"\x03" * 90)])])
    resp.API_VERSION = v
    resp.with_header(correlation_id=4)
    data = bytes(resp.encode(header=True, framed=True))
    back = FetchResponse.decode(data[4:], version=v, header=True)
    got = back.responses[0].partitions[0].records
    out[f"fetch v{v}"] = [data.hex(), type(got).__name__, repr(back)]
P = ProduceResponse.TopicProduceResponse
resp = ProduceResponse[9](throttle_time_ms=0, responses=[P(name="t", partition_responses=[
    P.PartitionProduceResponse(index=0, error_code=0, base_offset=5, log_append_time_ms=-1,
                               log_start_offset=0, record_errors=[], error_message=None)])])
resp.API_VERSION = 9
resp.with_header(correlation_id=5)
data = bytes(resp.encode(header=True, framed=True))
out["produce response"] = [data.hex(), repr(ProduceResponse.decode(data[4:], version=9, header=True))]
print(json.dumps(out))
"""

    def run(mode: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, timeout=120
        )
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    plain, with_server = run("plain"), run("server")
    assert plain == with_server
    assert {v[1] for k, v in plain.items() if k.startswith(("produce v", "fetch"))} <= {"bytes", "NoneType"}


# --- appending from the frame -------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[Broker, LogManager, asyncio.AbstractEventLoop]]:
    """A Broker on a private event loop (for :func:`handle_frame` without a socket), topic ``t``."""
    loop = asyncio.new_event_loop()
    with LogManager.open(tmp_path / "data", background=False) as manager:
        manager.create_topic("t", 2)
        broker = Broker(manager, ServerConfig(inline_io_max_bytes=64 * 1024), default_registry(), loop)
        try:
            yield broker, manager, loop
        finally:
            broker.close()
            loop.close()


def _answer(data: Any) -> list[tuple[int, int]]:
    response = ProduceResponse.decode(bytes(data)[4:], version=9, header=True)
    return [(p.error_code, p.base_offset) for p in response.responses[0].partition_responses]


@pytest.mark.parametrize(
    ("n", "others_waiting", "threaded"),
    [
        (3, True, False),  # a small frame
        (80, True, False),  # a large frame (received directly), below inline.io.max.bytes
        (400, False, False),  # above inline.io.max.bytes, nothing else waits for the loop: inline
        (400, True, True),  # above, another connection's request waits: on an I/O thread
    ],
)
def test_an_owned_frame_is_appended_in_place(
    broker: tuple[Broker, LogManager, asyncio.AbstractEventLoop],
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    others_waiting: bool,
    threaded: bool,
) -> None:
    server, manager, loop = broker
    first, second = _batch(n, 500, seed=1), _batch(n, 500, seed=2)
    assert (len(first) > DIRECT_FRAME_BYTES) == (n > 3)
    loop.run_until_complete(handle_frame(server, _frame(9, "t", first)))
    frame = _frame(9, "t", second, correlation_id=2)
    at = frame.find(second)
    hops = []
    run_blocking = server.run_blocking

    async def counted(fn: Any, *args: Any) -> Any:
        hops.append(fn)
        return await run_blocking(fn, *args)

    monkeypatch.setattr(server, "run_blocking", counted)
    server.ready_connections = int(others_waiting)
    data, close = loop.run_until_complete(handle_frame(server, frame, owned=True))
    assert not close and _answer(data) == [(0, n)]
    assert len(hops) == int(threaded)
    # the batch was given its offset in the frame itself: no copy was made
    assert frame[at : at + len(second)] == _as_logged(second, n)
    assert _log_bytes(manager.get_log("t", 0)) == _as_logged(first, 0) + _as_logged(second, n)
    if threaded:
        # The I/O thread drops its work item (which holds the records view) only after handing the result
        # back, so the loop can run ahead of it; joining the threads ends that window.
        server.executor.shutdown(wait=True)
    frame.extend(b"resizable")  # no view of the frame is left behind (a view would make this a BufferError)


def test_a_frame_the_caller_keeps_is_only_read(
    broker: tuple[Broker, LogManager, asyncio.AbstractEventLoop],
) -> None:
    server, manager, loop = broker
    batch = _batch(60, 500)
    loop.run_until_complete(handle_frame(server, _frame(9, "t", _batch(1, 10))))
    for frame in (_frame(9, "t", batch), bytes(_frame(9, "t", batch)), memoryview(_frame(9, "t", batch))):
        before = bytes(frame)
        data, close = loop.run_until_complete(handle_frame(server, frame))  # owned=False: the default
        assert not close and _answer(data)[0][0] == ErrorCode.NONE
        assert bytes(frame) == before
    assert manager.get_log("t", 0).log_end_offset == 1 + 3 * 60


def test_corrupt_batches_in_owned_frames_are_refused_and_change_nothing(
    broker: tuple[Broker, LogManager, asyncio.AbstractEventLoop],
) -> None:
    server, manager, loop = broker
    good = _batch(60, 500)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    bad_size = bytearray(good)
    bad_size[8:12] = (len(good) + 100).to_bytes(4, "big")  # the batch claims more bytes than it has
    for bad, code in ((bad_crc, ErrorCode.CORRUPT_MESSAGE), (bad_size, ErrorCode.CORRUPT_MESSAGE)):
        frame = _frame(9, "t", bytes(bad), good)  # partition 0 corrupt, partition 1 good
        data, close = loop.run_until_complete(handle_frame(server, frame, owned=True))
        assert not close
        (error, _), (ok, base) = _answer(data)
        assert error in (code, ErrorCode.INVALID_RECORD)
        assert (ok, base) == (0, manager.get_log("t", 1).log_end_offset - 60)
    assert manager.get_log("t", 0).log_end_offset == 0
    assert _log_bytes(manager.get_log("t", 0)) == b""
    data, _ = loop.run_until_complete(handle_frame(server, _frame(9, "t", good), owned=True))
    assert _answer(data) == [(0, 0)]
    assert _log_bytes(manager.get_log("t", 0)) == _as_logged(good, 0)


def test_records_longer_than_the_frame_close_the_connection(
    broker: tuple[Broker, LogManager, asyncio.AbstractEventLoop],
) -> None:
    server, manager, loop = broker
    batch = _batch(3, 10)
    for version in (8, 9):
        frame = _frame(version, "t", batch)
        cut = frame[: len(frame) - (1 if version < 9 else 5)]  # the records (and tagged fields) run short
        assert loop.run_until_complete(handle_frame(server, cut, owned=True)) == (None, True)
    assert manager.get_log("t", 0).log_end_offset == 0


# --- through a connection -----------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [False, True])
def test_small_and_large_produce_interleaved_with_read_ahead(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, threads: bool
) -> None:
    """Small frames (copied out of the receive buffer), large ones (received directly), some above
    ``inline.io.max.bytes`` (appended inline, or on an I/O thread while the connection reads ahead), all in
    one write: every answer in order, and the log holds exactly the batches sent."""
    sizes = [1, 70, 2, 300, 5, 70, 1, 300, 300, 2, 70, 1]
    batches = [_batch(n, 480, seed=i) for i, n in enumerate(sizes)]
    assert min(len(b) for b in batches) < DIRECT_FRAME_BYTES < max(len(b) for b in batches)
    if threads:  # as if other connections always had requests waiting
        monkeypatch.setattr(Broker, "offload", lambda self, n: n > self.config.inline_io_max_bytes)
    with KafkaServer(data_dir, port=0, config={"inline.io.max.bytes": 64 * 1024}) as server:
        assert server.manager is not None
        server.manager.create_topic("rw", 1)
        with RawClient(server.port) as client:
            client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            data = b"".join(
                bytes(_request(9, "rw", b, correlation_id=i + 1).encode(header=True, framed=True))
                for i, b in enumerate(batches)
            )
            for _ in range(2):  # twice: the second round's frames reuse what the first round freed
                client.send_raw(data)
                answers = []
                for _ in batches:
                    frame = client.recv_frame()
                    assert frame is not None
                    response = ProduceResponse.decode(frame, version=9, header=True)
                    part = response.responses[0].partition_responses[0]
                    answers.append((response.header.correlation_id, part.error_code, part.base_offset))
                start = server.manager.get_log("rw", 0).log_end_offset - sum(sizes)
                expected = [(i + 1, 0, start + sum(sizes[:i])) for i in range(len(sizes))]
                assert answers == expected
        log = server.manager.get_log("rw", 0)
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        once = b"".join(_as_logged(b, s) for b, s in zip(batches, starts))
        again = b"".join(_as_logged(b, s + sum(sizes)) for b, s in zip(batches, starts))
        assert _log_bytes(log) == once + again
