"""Cross-check with kafka-python's independent v2 codec, in both directions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords

from kafkalog.records import Compression, Header, MemoryRecords, Record, SimpleRecord

from .strategies import BASE_TS, record_lists

KP_CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4, Compression.ZSTD]


@given(record_lists, st.sampled_from(KP_CODECS), st.booleans())
def test_ours_read_by_kafka_python(records: list[SimpleRecord], codec: Compression, idempotent: bool) -> None:
    records = [r._replace(timestamp=BASE_TS if r.timestamp == -1 else r.timestamp) for r in records]
    pid, epoch, seq = (5, 1, 10) if idempotent else (-1, -1, -1)
    ours = MemoryRecords.build(
        records, compression=codec, base_offset=3, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    ).to_bytes()
    kp = KpMemoryRecords(ours)
    batch = kp.next_batch()
    assert batch.validate_crc()
    assert (batch.producer_id, batch.base_sequence) == (pid, seq)
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
    want = [
        (3 + i, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for i, r in enumerate(records)
    ]
    assert got == want


@given(record_lists, st.sampled_from(KP_CODECS))
def test_kafka_python_read_by_us_and_identical_when_uncompressed(
    records: list[SimpleRecord], codec: Compression
) -> None:
    records = [r._replace(timestamp=BASE_TS if r.timestamp == -1 else r.timestamp) for r in records]
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, r in enumerate(records):
        builder.append(
            i, timestamp=r.timestamp, key=r.key, value=r.value, headers=[tuple(h) for h in r.headers]
        )
    theirs = bytes(builder.build())
    (batch,) = MemoryRecords(theirs).batches()
    batch.ensure_valid()
    assert list(batch) == [
        Record(i, r.timestamp, r.key, r.value, tuple(Header(*h) for h in r.headers))
        for i, r in enumerate(records)
    ]
    if codec is Compression.NONE:
        # kafka-python leaves the partition leader epoch at 0 where Kafka's builder writes -1 by default.
        ours = MemoryRecords.build(records, partition_leader_epoch=0).to_bytes()
        assert ours == theirs
