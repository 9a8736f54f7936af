"""A compacted partition written by kafkalog reads identically in Apache Kafka's own record code, and every
batch the cleaner re-wrote is byte for byte what Kafka's cleaner writes for the same retained records
(``MemoryRecordsBuilder`` with the delete horizon and ``overrideLastOffset``, or
``DefaultRecordBatch.writeEmptyHeader``). Skipped with the reason when Java 17 or the jars are missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interop.kafka_java import KafkaJava, b64
from interop.specs import kafkalog_dump
from kafkalog.cleaner.service import LogCleaner
from kafkalog.log import AppendOrigin, Log, LogConfig, MockScheduler
from kafkalog.records import (
    Compression,
    ControlRecordType,
    DefaultRecordBatch,
    Header,
    MemoryRecords,
    SimpleRecord,
)
from kafkalog.records.batch import ATTR_CONTROL
from kafkalog.time import MockTime

pytestmark = pytest.mark.interop

TS = 1_700_000_000_000
CONFIG = LogConfig(
    segment_bytes=2048,
    index_interval_bytes=256,
    cleanup_policy=("compact",),
    delete_retention_ms=5_000,
    message_timestamp_after_max_ms=2**63 - 1,
)


def kafka_spec(batch: DefaultRecordBatch) -> dict[str, Any]:
    """The write spec with which Kafka's own code produces what its cleaner keeps of ``batch``."""
    spec: dict[str, Any] = {
        "baseOffset": batch.base_offset,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "timestampType": batch.timestamp_type.kafka_name,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "isTransactional": batch.is_transactional,
    }
    if batch.count == 0:
        spec.update(
            records=[],
            lastOffset=batch.last_offset,
            maxTimestamp=batch.max_timestamp,
            isControlBatch=batch.is_control_batch,
        )
        return spec
    if batch.delete_horizon_ms is not None:
        spec["deleteHorizonMs"] = batch.delete_horizon_ms
    if batch.timestamp_type.kafka_name == "LogAppendTime":
        spec["logAppendTime"] = batch.max_timestamp
    if batch.attributes & ATTR_CONTROL:
        marker = batch.end_transaction_marker()
        assert marker is not None
        (record,) = list(batch.records())
        spec["control"] = {
            "type": marker.control_type.name,
            "coordinatorEpoch": marker.coordinator_epoch,
            "timestamp": record.timestamp,
        }
        return spec
    spec["records"] = [
        {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key": b64(r.key),
            "value": b64(r.value),
            "headers": [{"key": h.key, "value": b64(h.value)} for h in r.headers],
        }
        for r in batch.records()
    ]
    spec["lastOffset"] = batch.last_offset
    return spec


def build_log(directory: Path, time: MockTime) -> Log:
    log = Log.open(directory, CONFIG, scheduler=MockScheduler(time), time=time, last_shutdown_clean=True)
    log.hw_follows_leo = True
    for i in range(24):
        recs = [
            SimpleRecord(
                None if (i * 5 + j) % 11 == 0 else b"value-%d-%d" % (i, j),
                b"key-%d" % ((i * 5 + j) % 9),
                TS + 10 * i + j,
                (Header("trace", b"t%d" % i),) if j % 2 else (),
            )
            for j in range(5)
        ]
        codec = Compression.NONE if i % 3 else list(Compression)[i % len(Compression)]
        pid = 7 if i % 4 == 1 else -1
        batch = MemoryRecords.build(
            recs,
            compression=codec,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=(i // 4) * 5 if pid >= 0 else -1,
            now_ms=TS,
        )
        log.append_as_leader(batch, 2)
        if i in (8, 16):
            pid = 100 + i
            txn = MemoryRecords.build(
                [SimpleRecord(b"in-txn", b"key-%d" % i, TS)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
                now_ms=TS,
            )
            log.append_as_leader(txn, 2)
            control = ControlRecordType.ABORT if i == 8 else ControlRecordType.COMMIT
            end = MemoryRecords.end_transaction_marker(
                producer_id=pid, producer_epoch=0, control_type=control, coordinator_epoch=3, timestamp=TS
            )
            log.append_as_leader(end, 2, AppendOrigin.COORDINATOR)
    tombstones = [SimpleRecord(None, b"key-%d" % k, TS + 400 + k) for k in (2, 3)] + [
        SimpleRecord(b"kept", b"key-4", TS + 410)
    ]
    log.append_as_leader(MemoryRecords.build(tombstones, now_ms=TS), 2)
    log.roll()
    return log


def test_compacted_partition_reads_identically_in_kafka(kafka_java: KafkaJava, tmp_path: Path) -> None:
    time = MockTime(TS + 1000)
    log = build_log(tmp_path / "compacted-0", time)
    LogCleaner({"log.cleaner.dedupe.buffer.size": 1 << 16}, time=time).clean_log(log)
    log.append([SimpleRecord(b"again", b"key-1", TS + 500)])  # make the log dirty again
    log.roll()
    time.sleep(1_000)
    LogCleaner({"log.cleaner.dedupe.buffer.size": 1 << 16}, time=time).clean_log(log)
    batches = [b for s in log.segments for b in s.batches()]
    assert any(b.delete_horizon_ms is not None for b in batches), "a tombstone got its delete horizon"
    assert any(b.count == 0 for b in batches), "a producer's emptied last batch"
    assert any(b.is_control_batch for b in batches)
    log.close()

    rewritten = 0
    for path in sorted((tmp_path / "compacted-0").glob("*.log")):
        theirs, code = kafka_java.dump(path, deep=True)
        assert code == 0
        ours, our_code, _ = kafkalog_dump(path.read_bytes())
        assert our_code == 0
        assert [line for line in theirs if line["type"] != "summary"] == [
            line for line in ours if line["type"] != "summary"
        ]
        assert kafka_java.validate(path)["valid"]
        for batch in MemoryRecords(path.read_bytes()).batches():
            assert isinstance(batch, DefaultRecordBatch)
            if batch.compression is not Compression.NONE:
                continue
            expected = kafka_java.write({"batches": [kafka_spec(batch)]}, tmp_path / "kafka.log")
            assert batch.to_bytes() == expected, (
                f"batch {batch.base_offset}..{batch.last_offset} differs from Kafka's"
            )
            rewritten += 1
    assert rewritten > 5
