"""Transactions: kafka-python 3 and confluent-kafka transactional producers (commit, abort, offsets in the
transaction, fencing), read_committed consumers, and the coordinator's own behaviour at the protocol level
(epoch bumps, fencing, timeouts, restart with an open transaction)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError as KpKafkaError
from kafka.protocol.api_key import ApiKey
from kafka.structs import OffsetAndMetadata as KpOffsetAndMetadata

from kafkalog.log.log import Log
from kafkalog.records import ControlRecordType, MemoryRecords, MemoryRecordsBuilder
from kafkalog.server import KafkaServer
from kafkalog.server.internal_topics import TRANSACTION_STATE, partition_for
from kafkalog.server.txn.records import (
    TransactionLogValue,
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)

from .helpers import RawClient
from .test_group_protocol import req, sub

FAST = {
    "group_initial_rebalance_delay_ms": 50,
    "offsets_topic_num_partitions": 3,
    "transaction_state_num_partitions": 3,
}


def _create(bootstrap: str, *topics: str, partitions: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
    finally:
        admin.close()


def _read(bootstrap: str, topic: str, isolation: str, partitions: int = 2) -> list[bytes]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False, fetch_max_wait_ms=50
    )
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)  # the LSO for read_committed
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(consumer.position(tp) < ends[tp] for tp in tps):
            for records in consumer.poll(timeout_ms=100).values():
                out += [r.value for r in records]
        return sorted(out)
    finally:
        consumer.close()


def _control_markers(partition_dir: Path) -> list[str]:
    out = []
    with Log.open(partition_dir) as log:
        info = log.read(log.log_start_offset, 1 << 24)
        mem = info.records if isinstance(info.records, MemoryRecords) else info.records.to_memory_records()
        for batch in mem.batches():
            if batch.is_control_batch:
                out += [ControlRecordType.parse(r.key).name for r in batch]
    return out


# --- record format -------------------------------------------------------------------------------------------
def test_transaction_log_records_golden_bytes() -> None:
    import struct

    key = encode_txn_key("tx")
    assert key == struct.pack(">hh", 0, 2) + b"tx"
    value = TransactionLogValue(
        7, 3, 60000, TxnState.ONGOING, frozenset({("t", 1), ("t", 0), ("u", 2)}), 11, 10
    )
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1) + b"u" + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 11, 10)
    )  # fmt: skip
    assert encode_txn_value(value) == expected
    assert decode_txn_value(expected) == value
    empty = TransactionLogValue(7, 4, 60000, TxnState.EMPTY, frozenset(), 12, -1)
    assert encode_txn_value(empty) == struct.pack(">hqhibi", 0, 7, 4, 60000, 0, -1) + struct.pack(
        ">qq", 12, -1
    )
    assert decode_txn_key(key) == "tx"


# --- kafka-python --------------------------------------------------------------------------------------------
def test_kafka_python_transactions_commit_abort_offsets_and_fencing(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with KafkaServer(data_dir, port=0, **FAST) as server:
        _create(server.bootstrap, "tx-in", "tx-out")
        producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-tx")
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(6):
            producer.send("tx-out", value=f"c{i}".encode(), partition=i % 2)
        producer.send_offsets_to_transaction(
            {KpTopicPartition("tx-in", 0): KpOffsetAndMetadata(3, "", -1)}, "kp-copy-group"
        )
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send("tx-out", value=f"a{i}".encode(), partition=i % 2)
        producer.send_offsets_to_transaction(
            {KpTopicPartition("tx-in", 0): KpOffsetAndMetadata(99, "", -1)}, "kp-copy-group"
        )
        producer.flush()
        producer.abort_transaction()
        assert _read(server.bootstrap, "tx-out", "read_committed") == [f"c{i}".encode() for i in range(6)]
        everything = _read(server.bootstrap, "tx-out", "read_uncommitted")
        assert everything == sorted(
            [f"c{i}".encode() for i in range(6)] + [f"a{i}".encode() for i in range(4)]
        )
        probe = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp-copy-group")
        assert probe.committed(KpTopicPartition("tx-in", 0)) == 3  # the aborted offset 99 never showed
        probe.close()

        # a second producer with the same transactional id fences the first
        usurper = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-tx")
        usurper.init_transactions()
        producer.begin_transaction()
        with pytest.raises(KpKafkaError):
            producer.send("tx-out", value=b"zombie", partition=0).get(timeout=10)
            producer.commit_transaction()
        producer.close(timeout=1)
        usurper.begin_transaction()
        usurper.send("tx-out", value=b"usurper", partition=0)
        usurper.commit_transaction()
        usurper.close()
        assert b"zombie" not in _read(server.bootstrap, "tx-out", "read_committed")
    markers = _control_markers(data_dir / "tx-out-0")
    assert markers[:2] == ["COMMIT", "ABORT"] and markers[-1] == "COMMIT"


# --- confluent-kafka -----------------------------------------------------------------------------------------
def test_confluent_transactions_and_send_offsets(data_dir: Path) -> None:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    with KafkaServer(data_dir, port=0, **FAST) as server:
        _create(server.bootstrap, "ck-in", "ck-out")
        plain = KafkaProducer(bootstrap_servers=server.bootstrap)
        for i in range(10):
            plain.send("ck-in", value=f"in{i}".encode(), partition=i % 2)
        plain.flush()
        plain.close()
        producer = ck.Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "ck-tx"})
        producer.init_transactions(30)
        consumer = ck.Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "ck-copy",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        consumer.subscribe(["ck-in"])
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                seen.append(msg)
        assert len(seen) == 10
        producer.begin_transaction()
        for msg in seen:
            producer.produce("ck-out", value=msg.value(), partition=msg.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        producer.begin_transaction()
        producer.produce("ck-out", value=b"aborted", partition=0)
        producer.flush(10)
        producer.abort_transaction(30)
        consumer.close()
        committed = ck.Consumer({"bootstrap.servers": server.bootstrap, "group.id": "ck-copy"})
        offsets = committed.committed([ck.TopicPartition("ck-in", p) for p in range(2)], timeout=20)
        committed.close()
        assert [tp.offset for tp in offsets] == [5, 5]
        assert _read(server.bootstrap, "ck-out", "read_committed") == sorted(
            f"in{i}".encode() for i in range(10)
        )
        assert b"aborted" in _read(server.bootstrap, "ck-out", "read_uncommitted")


# --- protocol level ------------------------------------------------------------------------------------------
def _init(
    c: RawClient, txn_id: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1
) -> tuple[int, int, int]:
    for _ in range(100):
        r = c.call(
            req(ApiKey.InitProducerId, transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                producer_id=pid, producer_epoch=epoch),
            4,
        )  # fmt: skip
        if r.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS just after a start: retry, as clients do
            break
        time.sleep(0.05)
    return r.error_code, r.producer_id, r.producer_epoch


def _add(c: RawClient, txn_id: str, pid: int, epoch: int, topic: str, partition: int) -> int:
    topics = [sub(ApiKey.AddPartitionsToTxn, "AddPartitionsToTxnTopic", name=topic, partitions=[partition])]
    r = c.call(
        req(ApiKey.AddPartitionsToTxn, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics),
        3,
    )  # fmt: skip
    return int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def _produce_txn(c: RawClient, topic: str, pid: int, epoch: int, seq: int, value: bytes) -> int:
    builder = MemoryRecordsBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    builder.append(int(time.time() * 1000), None, value)
    part = sub(
        ApiKey.Produce, "TopicProduceData.PartitionProduceData", index=0, records=builder.build().to_bytes()
    )
    data = [sub(ApiKey.Produce, "TopicProduceData", name=topic, partition_data=[part])]
    r = c.call(req(ApiKey.Produce, transactional_id="x", acks=-1, timeout_ms=5000, topic_data=data), 9)
    return int(r.responses[0].partition_responses[0].error_code)


def _end(c: RawClient, txn_id: str, pid: int, epoch: int, commit: bool) -> int:
    r = c.call(
        req(ApiKey.EndTxn, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit),
        3,
    )
    return int(r.error_code)


def test_epochs_fencing_timeout_and_restart(data_dir: Path) -> None:
    settings = {**FAST, "coordinator_tick_ms": 20}
    with KafkaServer(data_dir, port=0, **settings) as server:
        _create(server.bootstrap, "raw", partitions=1)
        with RawClient(server.port) as c:
            assert _init(c, "")[0] == 42  # INVALID_REQUEST
            assert _init(c, "t1", timeout_ms=10**9)[0] == 50  # INVALID_TRANSACTION_TIMEOUT
            code, pid, epoch = _init(c, "t1")
            assert (code, epoch) == (0, 0)
            assert _end(c, "t1", pid, epoch, True) == 48  # INVALID_TXN_STATE: nothing ongoing
            assert _add(c, "t1", pid, epoch, "raw", 0) == 0
            assert _add(c, "t1", pid, epoch, "nope", 0) == 3
            assert _produce_txn(c, "raw", pid, epoch, 0, b"open") == 0
            # a new InitProducerId aborts the open transaction and fences the old epoch
            code, pid2, epoch2 = _init(c, "t1")
            assert (code, pid2) == (0, pid) and epoch2 > epoch
            assert _add(c, "t1", pid, epoch, "raw", 0) == 90  # PRODUCER_FENCED
            assert _end(c, "t1", pid, epoch, True) == 90
            assert _add(c, "t1", 12345, epoch2, "raw", 0) == 49  # INVALID_PRODUCER_ID_MAPPING
            assert _init(c, "t1", pid=pid, epoch=epoch)[0] == 90  # a stale producer cannot re-init
            # commit, and a retried EndTxn is fine
            assert _add(c, "t1", pid2, epoch2, "raw", 0) == 0
            assert _produce_txn(c, "raw", pid2, epoch2, 0, b"kept") == 0
            assert _end(c, "t1", pid2, epoch2, True) == 0
            assert _end(c, "t1", pid2, epoch2, True) == 0
            assert _end(c, "t1", pid2, epoch2, False) == 48
            # a transaction open past its timeout is aborted and its producer fenced
            code, pid3, epoch3 = _init(c, "t2", timeout_ms=200)
            assert _add(c, "t2", pid3, epoch3, "raw", 0) == 0
            assert _produce_txn(c, "raw", pid3, epoch3, 0, b"timed-out") == 0
            time.sleep(0.6)
            assert _end(c, "t2", pid3, epoch3, True) == 90
            # left open across a restart
            code, pid4, epoch4 = _init(c, "t3", timeout_ms=1000)
            assert _add(c, "t3", pid4, epoch4, "raw", 0) == 0
            assert _produce_txn(c, "raw", pid4, epoch4, 0, b"restart") == 0
        assert _read(server.bootstrap, "raw", "read_committed", 1) == [b"kept"]
    with KafkaServer(data_dir, port=0, **settings) as server:
        with RawClient(server.port) as c:
            code, pid5, epoch5 = _init(c, "t1")  # the stored state survived: same id, next epoch
            assert (code, pid5, epoch5) == (0, pid2, epoch2 + 1)
        time.sleep(1.5)  # t3's timeout aborts it
        assert _read(server.bootstrap, "raw", "read_committed", 1) == [b"kept"]
        assert server.manager is not None
        assert (
            server.manager.get_log("raw", 0).last_stable_offset
            == server.manager.get_log("raw", 0).log_end_offset
        )
    assert _control_markers(data_dir / "raw-0") == ["ABORT", "COMMIT", "ABORT", "ABORT"]
    assert (data_dir / f"{TRANSACTION_STATE}-{partition_for('t1', 3)}").is_dir()
