"""Request fan-out (issue #19, item 4): a Fetch naming one partition many times reads it once, the response's
record bytes are capped by ``fetch.max.bytes``, ListOffsets refuses repeated partitions as Kafka does, and a
large request is decoded, handled and encoded off the event loop."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer
from kafkalog.server import connection as connection_module
from kafkalog.server.connection import HEAVY_REQUEST_BYTES

from .helpers import RawClient

FT = FetchRequest.FetchTopic
LT = ListOffsetsRequest.ListOffsetsTopic


def _fetch_request(entries: list[tuple[str, int, int]], *, max_bytes: int = 50 << 20) -> Any:
    """A v12 Fetch with one topic entry per run of the same topic in ``entries`` (topic, partition, offset)."""
    topics: list[Any] = []
    for topic, partition, offset in entries:
        part = FT.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)
        if topics and topics[-1].topic == topic:
            topics[-1].partitions.append(part)
        else:
            topics.append(FT(topic=topic, partitions=[part]))
    return FetchRequest[12](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=topics,
        forgotten_topics_data=[],
        rack_id="",
    )


def _offsets(records: bytes) -> list[int]:
    return [r.offset for r in MemoryRecords(records).records()]


def _fill(server: KafkaServer, topic: str, partitions: int, batches: int, size: int) -> None:
    assert server.manager is not None
    server.manager.create_topic(topic, partitions)
    for p in range(partitions):
        log = server.manager.get_log(topic, p)
        for i in range(batches):
            log.append([SimpleRecord(bytes([i % 251]) * size)])


def test_fetch_reads_a_repeated_partition_once(server: KafkaServer) -> None:
    """Kafka's fetch data is a LinkedHashMap: one entry per partition, at its first place, with the
    parameters of its last mention."""
    _fill(server, "a", 2, 3, 100)
    _fill(server, "b", 1, 3, 100)
    entries = [("a", 0, 0), ("a", 1, 2), ("b", 0, 0)] + [("a", 0, 1)] * 500 + [("b", 0, 2)]
    with RawClient(server.port) as client:
        response = client.call(_fetch_request(entries), 12)
    got = [
        (t.topic, p.partition_index, _offsets(p.records)) for t in response.responses for p in t.partitions
    ]
    assert got == [("a", 0, [1, 2]), ("a", 1, [2]), ("b", 0, [2])]
    assert [t.topic for t in response.responses] == ["a", "b"]


def test_fetch_max_bytes_caps_the_response_but_returns_a_first_batch(data_dir: Path) -> None:
    with KafkaServer(data_dir, port=0, config={"fetch.max.bytes": "1000"}) as server:
        _fill(server, "c", 3, 4, 400)  # batches of ~470 bytes
        with RawClient(server.port) as client:
            response = client.call(_fetch_request([("c", p, 0) for p in range(3)]), 12)
            parts = response.responses[0].partitions
            total = sum(len(p.records or b"") for p in parts)
            assert 0 < total <= 1000
            assert _offsets(parts[0].records) == [0, 1]
            assert all(p.error_code == 0 for p in parts)
            assert not parts[1].records and not parts[2].records
            # a request's own max_bytes below the broker's applies; a first batch above both still comes back
            small = client.call(_fetch_request([("c", 1, 0)], max_bytes=10), 12)
            assert _offsets(small.responses[0].partitions[0].records) == [0]


def test_list_offsets_refuses_every_entry_of_a_repeated_partition(server: KafkaServer) -> None:
    _fill(server, "l", 2, 3, 10)
    P = LT.ListOffsetsPartition
    request = ListOffsetsRequest[7](
        replica_id=-1,
        isolation_level=0,
        topics=[
            LT(name="l", partitions=[P(partition_index=0, timestamp=-1), P(partition_index=1, timestamp=-1)]),
            LT(name="l", partitions=[P(partition_index=0, timestamp=-2)]),
        ],
    )
    with RawClient(server.port) as client:
        response = client.call(request, 7)
    got = [(p.partition_index, p.error_code, p.offset) for t in response.topics for p in t.partitions]
    assert got == [(0, ErrorCode.INVALID_REQUEST, -1), (1, 0, 3), (0, ErrorCode.INVALID_REQUEST, -1)]


def test_a_large_request_is_decoded_and_encoded_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Fetch of 60k partition entries (~2 MB) is decoded and its response encoded on the I/O threads, so
    the loop serves other connections meanwhile (a 500k-entry Fetch held every other client for 6 s)."""
    _fill(server, "h", 1, 1, 10)
    threads: dict[str, set[str]] = {"decode": set(), "encode": set()}
    real_decode, real_encode = connection_module.decode_request, connection_module.encode_response

    def decode(*args: Any) -> Any:
        threads["decode"].add(threading.current_thread().name)
        return real_decode(*args)

    def encode(*args: Any) -> Any:
        threads["encode"].add(threading.current_thread().name)
        return real_encode(*args)

    monkeypatch.setattr(connection_module, "decode_request", decode)
    monkeypatch.setattr(connection_module, "encode_response", encode)
    request = _fetch_request([("h", 0, 0)] * 60_000)
    request.API_VERSION = 12
    request.with_header(correlation_id=1, client_id="fanout-test")
    assert len(request.encode(header=True, framed=True)) > HEAVY_REQUEST_BYTES
    with RawClient(server.port) as client:
        response = client.call(_fetch_request([("h", 0, 0)] * 60_000), 12)
    assert [len(t.partitions) for t in response.responses] == [1]
    assert threads["decode"] and all(n.startswith("kafkalog-server-io-") for n in threads["decode"])
    assert threads["encode"] and all(n.startswith("kafkalog-server-io-") for n in threads["encode"])


def test_delete_records_answers_a_repeated_partition_once_with_its_last_offset(server: KafkaServer) -> None:
    """Kafka keys DeleteRecords by partition: the last offset named wins, one result per partition."""
    _fill(server, "d", 2, 5, 10)
    DT = DeleteRecordsRequest.DeleteRecordsTopic
    DP = DT.DeleteRecordsPartition
    request = DeleteRecordsRequest[2](
        topics=[
            DT(name="d", partitions=[DP(partition_index=0, offset=1), DP(partition_index=1, offset=3)]),
            DT(name="d", partitions=[DP(partition_index=0, offset=2)] * 300),
        ],
        timeout_ms=1000,
    )
    with RawClient(server.port) as client:
        response = client.call(request, 2)
    got = [
        (t.name, p.partition_index, p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    ]
    assert got == [("d", 0, 0, 2), ("d", 1, 0, 3)]
