"""A partition directory written by kafkalog's ``Log`` is read back by Kafka's own record code identically."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import Compression, ControlRecordType, MemoryRecords, SimpleRecord

from .kafka_java import KafkaJava
from .specs import kafkalog_dump

pytestmark = pytest.mark.interop


def test_log_directory_reads_identically_in_kafka(kafka_java: KafkaJava, tmp_path: Path) -> None:
    log = Log.open(tmp_path / "orders-0", LogConfig(segment_bytes=1024, index_interval_bytes=256))
    now = log.time.milliseconds()
    for i, codec in enumerate([c for c in Compression for _ in range(4)]):
        log.append(
            [SimpleRecord(b"value-%d-%d" % (i, j) * 3, b"key-%d" % j, now + j) for j in range(8)],
            compression=codec,
        )
    txn = MemoryRecords.build(
        [SimpleRecord(b"in-txn", b"t", now)],
        producer_id=42,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_as_leader(txn, leader_epoch=3)
    marker = MemoryRecords.end_transaction_marker(
        producer_id=42,
        producer_epoch=0,
        control_type=ControlRecordType.ABORT,
        coordinator_epoch=1,
        timestamp=now,
    )
    log.append_as_leader(marker, leader_epoch=3, origin=AppendOrigin.COORDINATOR)
    log.close()
    logs = sorted((tmp_path / "orders-0").glob("*.log"))
    assert len(logs) > 3, "several segments"
    total = 0
    for path in logs:
        theirs, code = kafka_java.dump(path, deep=True)
        assert code == 0
        ours, our_code, _ = kafkalog_dump(path.read_bytes())
        assert our_code == 0
        assert [line for line in theirs if line["type"] != "summary"] == [
            line for line in ours if line["type"] != "summary"
        ]
        assert kafka_java.validate(path)["valid"]
        total += sum(1 for line in theirs if line["type"] == "record")
    assert total == 20 * 8 + 2
