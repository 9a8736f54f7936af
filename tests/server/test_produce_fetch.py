"""Produce, Fetch, ListOffsets, Metadata, DeleteRecords and InitProducerId semantics over the raw protocol."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from kafkalog.log.types import AppendOrigin
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer

from .helpers import RawClient

T = ProduceRequest.TopicProduceData
FT = FetchRequest.FetchTopic
LT = ListOffsetsRequest.ListOffsetsTopic


def produce(
    client: RawClient, topic: str, data: bytes | None, *, partition: int = 0, acks: int = 1, version: int = 9
) -> object:
    part = T.PartitionProduceData(index=partition, records=data)
    request = ProduceRequest[version](
        transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[part])]
    )
    if acks == 0:
        client.send(request, version)
        return None
    return client.call(request, version).responses[0].partition_responses[0]


def fetch(
    client: RawClient,
    topic: str,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    isolation: int = 0,
    version: int = 12,
    topic_id: uuid.UUID | None = None,
    partition_max_bytes: int = 1 << 20,
) -> object:
    part = FT.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes)
    fetch_topic = (
        FT(topic_id=topic_id, partitions=[part]) if version >= 13 else FT(topic=topic, partitions=[part])
    )
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=50 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[fetch_topic],
        forgotten_topics_data=[],
        rack_id="",
    )
    return client.call(request, version).responses[0].partitions[0]


def batch(*values: bytes, **kwargs: object) -> bytes:
    return MemoryRecords.build([SimpleRecord(v, key=b"k") for v in values], **kwargs).to_bytes()  # type: ignore[arg-type]


def offsets(records: bytes) -> list[int]:
    return [r.offset for r in MemoryRecords(records).records()]


@pytest.fixture
def topic(server: KafkaServer) -> str:
    assert server.manager is not None
    server.manager.create_topic("t", 1)
    return "t"


def test_produce_then_fetch(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        first = produce(client, topic, batch(b"a", b"b", compression="zstd"))
        second = produce(client, topic, batch(b"c"))
        assert (first.error_code, first.base_offset, first.log_start_offset) == (0, 0, 0)
        assert (second.error_code, second.base_offset) == (0, 2)
        part = fetch(client, topic, 0)
        assert part.error_code == 0 and part.high_watermark == 3 and part.last_stable_offset == 3
        assert part.aborted_transactions is None  # read_uncommitted
        assert offsets(part.records) == [0, 1, 2]
        assert fetch(client, topic, 3).records in (b"", None)
        assert fetch(client, topic, 4).error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_corrupt_batch_is_refused_and_changes_nothing(server: KafkaServer, topic: str) -> None:
    good = batch(b"x")
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # CRC no longer matches
    with RawClient(server.port) as client:
        result = produce(client, topic, bytes(bad))
        assert result.error_code == ErrorCode.CORRUPT_MESSAGE
        assert produce(client, topic, b"\x00" * 30).error_code in (
            ErrorCode.CORRUPT_MESSAGE,
            ErrorCode.INVALID_RECORD,
        )
        assert produce(client, topic, good).base_offset == 0  # the log did not move
    assert server.manager is not None
    assert server.manager.get_log(topic, 0).log_end_offset == 1


def test_record_too_large_and_batch_rules(server: KafkaServer) -> None:
    assert server.manager is not None
    server.manager.create_topic("small", 1, {"max.message.bytes": 200})
    with RawClient(server.port) as client:
        assert produce(client, "small", batch(b"x" * 500)).error_code == ErrorCode.MESSAGE_TOO_LARGE
        two = batch(b"a") + batch(b"b")
        assert produce(client, "small", two).error_code == ErrorCode.INVALID_RECORD  # one batch per partition
        assert produce(client, "small", None).error_code == ErrorCode.INVALID_RECORD
        assert (
            produce(client, "small", batch(b"ok"), partition=7).error_code
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        assert produce(client, "small", batch(b"ok"), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert server.manager.get_log("small", 0).log_end_offset == 0


def test_clients_cannot_produce_to_internal_topics(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        for name in ("__consumer_offsets", "__transaction_state"):
            assert produce(client, name, batch(b"forged")).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_acks_zero_sends_nothing_and_closes_on_error(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        produce(client, topic, batch(b"quiet"), acks=0)
        assert fetch(client, topic, 0).high_watermark == 1  # the next response is the fetch's
        produce(client, "missing", batch(b"lost"), acks=0)
        assert client.closed()


def test_produce_v13_and_fetch_v13_by_topic_id(server: KafkaServer, topic: str) -> None:
    assert server.manager is not None
    topic_id = server.manager.topic_id(topic)
    assert topic_id is not None
    with RawClient(server.port) as client:
        part = T.PartitionProduceData(index=0, records=batch(b"by-id"))
        request = ProduceRequest[13](
            transactional_id=None,
            acks=-1,
            timeout_ms=1000,
            topic_data=[T(topic_id=topic_id, partition_data=[part])],
        )
        response = client.call(request, 13).responses[0]
        assert response.topic_id == topic_id and response.partition_responses[0].error_code == 0
        assert offsets(fetch(client, topic, 0, version=16, topic_id=topic_id).records) == [0]
        assert (
            fetch(client, topic, 0, version=16, topic_id=uuid.uuid4()).error_code
            == ErrorCode.UNKNOWN_TOPIC_ID
        )


def test_fetch_long_poll_wakes_on_append(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as consumer, RawClient(server.port) as producer:

        def append_later() -> None:
            time.sleep(0.3)
            produce(producer, topic, batch(b"late"))

        thread = threading.Thread(target=append_later)
        start = time.monotonic()
        thread.start()
        part = fetch(consumer, topic, 0, max_wait_ms=10_000)
        elapsed = time.monotonic() - start
        thread.join()
        assert offsets(part.records) == [0]
        assert 0.2 < elapsed < 5.0


def test_fetch_waits_max_wait_then_answers_empty(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        start = time.monotonic()
        part = fetch(client, topic, 0, max_wait_ms=300)
        assert 0.25 < time.monotonic() - start < 3
        assert part.error_code == 0 and part.records in (b"", None)


def test_fetch_wakes_for_appends_through_the_manager(server: KafkaServer, topic: str) -> None:
    assert server.manager is not None
    log = server.manager.get_log(topic, 0)
    with RawClient(server.port) as client:

        def append_later() -> None:
            time.sleep(0.3)
            log.append([SimpleRecord(b"direct")])
            server.notify_append(topic, 0)

        thread = threading.Thread(target=append_later)
        thread.start()
        part = fetch(client, topic, 0, max_wait_ms=10_000)
        thread.join()
        assert offsets(part.records) == [0]


def test_fetch_byte_limits_return_at_least_one_batch(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        for i in range(3):
            produce(client, topic, batch(bytes([i]) * 100))
        assert offsets(fetch(client, topic, 0, partition_max_bytes=10).records) == [0]  # one whole batch
        assert offsets(fetch(client, topic, 1, partition_max_bytes=1 << 20).records) == [1, 2]


def test_read_committed_reports_aborted_transactions(server: KafkaServer, topic: str) -> None:
    assert server.manager is not None
    log = server.manager.get_log(topic, 0)
    pid = 4242
    txn = MemoryRecords.build(
        [SimpleRecord(b"t1"), SimpleRecord(b"t2")],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(txn, 0)
    with RawClient(server.port) as client:
        open_txn = fetch(client, topic, 0, isolation=1)
        assert open_txn.last_stable_offset == 0 and open_txn.high_watermark == 2
        assert offsets(open_txn.records) == []
        marker = MemoryRecords.end_transaction_marker(
            producer_id=pid, producer_epoch=0, control_type="ABORT", coordinator_epoch=0
        )
        log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)
        produce(client, topic, batch(b"after"))
        part = fetch(client, topic, 0, isolation=1)
        assert part.last_stable_offset == 4
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, 0)]
        assert offsets(part.records) == [0, 1, 2, 3]  # the client drops the aborted ones
        assert fetch(client, topic, 0, isolation=0).aborted_transactions is None


def _list_offsets(client: RawClient, topic: str, timestamp: int, version: int = 8) -> tuple[int, int]:
    p = LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
    request = ListOffsetsRequest[version](
        replica_id=-1, isolation_level=0, topics=[LT(name=topic, partitions=[p])]
    )
    result = client.call(request, version).topics[0].partitions[0]
    assert result.error_code == 0
    return result.timestamp, result.offset


def test_list_offsets(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        for ts in (1000, 3000, 2000):
            produce(client, topic, MemoryRecords.build([SimpleRecord(b"v", timestamp=ts)]).to_bytes())
        assert _list_offsets(client, topic, -2) == (-1, 0)
        assert _list_offsets(client, topic, -1) == (-1, 3)
        assert _list_offsets(client, topic, -3) == (3000, 1)
        assert _list_offsets(client, topic, 1500) == (3000, 1)
        assert _list_offsets(client, topic, 2500) == (3000, 1)
        assert _list_offsets(client, topic, 9999) == (-1, -1)
        assert _list_offsets(client, topic, -1, version=1) == (-1, 3)


def test_delete_records(server: KafkaServer, topic: str) -> None:
    DT = DeleteRecordsRequest.DeleteRecordsTopic
    with RawClient(server.port) as client:
        for _ in range(5):
            produce(client, topic, batch(b"v"))

        def delete(offset: int) -> tuple[int, int]:
            p = DT.DeleteRecordsPartition(partition_index=0, offset=offset)
            request = DeleteRecordsRequest[2](topics=[DT(name=topic, partitions=[p])], timeout_ms=1000)
            r = client.call(request, 2).topics[0].partitions[0]
            return r.error_code, r.low_watermark

        assert delete(3) == (0, 3)
        assert delete(99) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1)
        assert _list_offsets(client, topic, -2) == (-1, 3)
        assert fetch(client, topic, 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert delete(-1) == (0, 5)


def _metadata(
    client: RawClient, names: list[str] | None, version: int = 12, allow: bool = True
) -> list[object]:
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    request = MetadataRequest[version](topics=topics, allow_auto_topic_creation=allow)
    return list(client.call(request, version).topics)


def test_metadata(server: KafkaServer, topic: str) -> None:
    with RawClient(server.port) as client:
        (known,) = _metadata(client, [topic])
        part = known.partitions[0]
        assert (part.leader_id, part.replica_nodes, part.isr_nodes, part.leader_epoch) == (0, [0], [0], 0)
        assert known.topic_id == server.manager.topic_id(topic)  # type: ignore[union-attr]
        (missing,) = _metadata(client, ["missing"])
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (bad,) = _metadata(client, ["bad/name"])
        assert bad.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert [t.name for t in _metadata(client, None)] == [topic]
        assert [t.name for t in _metadata(client, [], version=0)] == [topic]
        assert _metadata(client, [], version=1) == []
    assert not (server.data_dir / "missing-0").exists()  # type: ignore[operator]


def test_metadata_auto_creates_topics_when_enabled(data_dir: Path) -> None:
    config = {"auto.create.topics.enable": "true"}
    with KafkaServer(data_dir, port=0, config=config) as server, RawClient(server.port) as client:
        (refused,) = _metadata(client, ["auto"], allow=False)
        assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (created,) = _metadata(client, ["auto"])
        assert created.error_code == 0 and len(created.partitions) == 1
    assert (data_dir / "auto-0").is_dir()


def test_init_producer_id_is_unique_across_restarts(data_dir: Path) -> None:
    seen = set()
    txn_ids: list[tuple[int, int]] = []
    for _ in range(2):
        with KafkaServer(data_dir, port=0) as server, RawClient(server.port) as client:
            for _ in range(3):
                r = client.call(
                    InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000), 4
                )
                assert r.error_code == 0 and r.producer_epoch == 0
                seen.add(r.producer_id)
            for _ in range(100):  # COORDINATOR_LOAD_IN_PROGRESS just after a start: retry, as clients do
                txn = client.call(
                    InitProducerIdRequest[4](transactional_id="tx", transaction_timeout_ms=60000), 4
                )
                if txn.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                time.sleep(0.05)
            assert txn.error_code == ErrorCode.NONE
            txn_ids.append((txn.producer_id, txn.producer_epoch))
    assert len(seen) == 6
    # the transactional id keeps its producer id across the restart, with the next epoch
    assert txn_ids[0][0] not in seen and txn_ids == [(txn_ids[0][0], 0), (txn_ids[0][0], 1)]


def test_graceful_stop_answers_waiting_fetch_and_writes_clean_shutdown(data_dir: Path) -> None:
    server = KafkaServer(data_dir, port=0).start()
    assert server.manager is not None
    server.manager.create_topic("t", 1)
    client = RawClient(server.port)
    results: list[object] = []

    def long_poll() -> None:
        results.append(fetch(client, "t", 0, max_wait_ms=20_000))

    thread = threading.Thread(target=long_poll)
    thread.start()
    time.sleep(0.3)
    start = time.monotonic()
    server.stop()
    thread.join(10)
    assert time.monotonic() - start < 5
    assert results and results[0].error_code == 0  # type: ignore[attr-defined]
    client.close()
    assert (data_dir / ".kafka_cleanshutdown").exists()


def test_every_advertised_version_of_produce_fetch_list_offsets_and_metadata(
    server: KafkaServer, topic: str
) -> None:
    assert server.manager is not None
    topic_id = server.manager.topic_id(topic)
    with RawClient(server.port) as client:
        for n, version in enumerate(range(3, 14)):
            if version >= 13:
                part = T.PartitionProduceData(index=0, records=batch(b"v13"))
                request = ProduceRequest[13](
                    transactional_id=None,
                    acks=1,
                    timeout_ms=1000,
                    topic_data=[T(topic_id=topic_id, partition_data=[part])],
                )
                result = client.call(request, 13).responses[0].partition_responses[0]
            else:
                result = produce(client, topic, batch(f"v{version}".encode()), version=version)
            assert (result.error_code, result.base_offset) == (0, n), version
        for version in range(4, 19):
            part = fetch(client, topic, 0, version=version, topic_id=topic_id)
            assert part.error_code == 0 and offsets(part.records) == list(range(11)), version
        for version in range(1, 12):
            assert _list_offsets(client, topic, -1, version=version) == (-1, 11), version
        for version in range(0, 14):
            (entry,) = _metadata(client, [topic], version=version)
            assert entry.error_code == 0 and entry.name == topic and len(entry.partitions) == 1, version
