"""Helpers shared by the partition-log tests: Kafka's ``TestUtils`` / ``LogTestUtils`` fixtures in Python.

* :func:`singleton_records` and :func:`records` build one v2 batch like ``TestUtils.singletonRecords`` and
  ``TestUtils.records`` (timestamp ``NO_TIMESTAMP`` unless given, so sizes match Kafka's byte for byte:
  ``singleton_records(b"test")`` is the 72-byte batch Kafka's size arithmetic is based on).
* :func:`legacy_records` builds magic-0/1 entries with kafka-python's independent encoder (kafkalog only
  reads magic 0/1).
* :func:`read_log` is ``LogTestUtils.readLog`` (``LOG_END`` isolation, ``min_one_message=True``).
* :func:`append_transactional` / :func:`append_non_transactional` / :func:`append_end_txn_marker` are
  ``LogTestUtils.appendTransactionalAsLeader`` & co.
* :func:`assert_valid_log_offset_metadata` is ``UnifiedLogTest.assertValidLogOffsetMetadata``.
* :func:`check_log_invariants` verifies what every log must satisfy at rest (watermark order, ascending
  segment bases, each batch found through its segment's offset index).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.log import AppendOrigin, FetchIsolation, Log, LogAppendInfo
from kafkalog.records import (
    Compression,
    ControlRecordType,
    MemoryRecords,
    Record,
    SimpleRecord,
    TimestampType,
)
from kafkalog.storage import FetchDataInfo, LogOffsetMetadata
from kafkalog.time import MockTime

NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1


def records(
    items: Iterable[SimpleRecord],
    *,
    base_offset: int = 0,
    codec: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
) -> MemoryRecords:
    """``TestUtils.records``: one v2 batch; records without a timestamp get ``NO_TIMESTAMP``."""
    fixed = [r if r.timestamp is not None else r._replace(timestamp=NO_TIMESTAMP) for r in items]
    return MemoryRecords.build(
        fixed,
        compression=codec,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=sequence,
        is_transactional=transactional,
        partition_leader_epoch=partition_leader_epoch,
        timestamp_type=timestamp_type,
        log_append_time=log_append_time,
        now_ms=0,
    )


def singleton_records(
    value: bytes | None,
    key: bytes | None = None,
    timestamp: int = NO_TIMESTAMP,
    codec: Compression = Compression.NONE,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> MemoryRecords:
    """``TestUtils.singletonRecords(value, key, codec, timestamp)``."""
    return records(
        [SimpleRecord(value, key, timestamp)],
        base_offset=base_offset,
        codec=codec,
        partition_leader_epoch=partition_leader_epoch,
    )


def legacy_records(
    magic: int,
    items: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    codec: int = 0,
    timestamp: int = NO_TIMESTAMP,
) -> MemoryRecords:
    """Magic-0/1 entries ``(key, value)`` at ``base_offset, base_offset + 1 ...`` (kafka-python encoder).

    ``codec`` is kafka-python's codec id (0 none, 1 gzip, 2 snappy, 3 lz4).
    """
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    # Inner offsets of a compressed v1 wrapper are relative (0..n-1); v0 inner offsets are absolute.
    relative = codec != 0 and magic == 1
    for i, (key, value) in enumerate(items):
        builder.append(i if relative else base_offset + i, None if magic == 0 else timestamp, key, value)
    data = bytearray(builder.build())
    if codec != 0:
        # A broker stores a compressed wrapper at the offset of its last inner record (kafka-python, being a
        # producer, leaves 0); the offset is outside the legacy CRC.
        data[0:8] = (base_offset + len(items) - 1).to_bytes(8, "big")
    return MemoryRecords(bytes(data))


def concat(*parts: MemoryRecords) -> MemoryRecords:
    """Several buffers of batches as one (Kafka tests write several builders into one ByteBuffer)."""
    return MemoryRecords(b"".join(p.to_bytes() for p in parts))


def read_log(
    log: Log,
    start_offset: int,
    max_length: int,
    isolation: FetchIsolation = FetchIsolation.LOG_END,
    min_one_message: bool = True,
) -> FetchDataInfo:
    """``LogTestUtils.readLog``."""
    return log.read(start_offset, max_length, isolation, min_one_message)


def fetched_records(info: FetchDataInfo) -> list[Record]:
    """Every record of the complete batches a read returned."""
    return [r for b in info.records.batches() for r in b.records()]


def fetched_offsets(info: FetchDataInfo) -> list[int]:
    return [r.offset for r in fetched_records(info)]


def segment_bases(log: Log) -> list[int]:
    return [s.base_offset for s in log.segments]


def files_with_suffix(directory: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the ``.snapshot`` files in a partition directory (``ProducerStateManager.listSnapshotFiles``)."""
    return sorted(int(p.name.split(".")[0]) for p in directory.iterdir() if p.name.endswith(".snapshot"))


def dir_state(directory: Path) -> dict[str, int]:
    """Name -> size of every file in a directory (to show an operation changed nothing)."""
    return {p.name: p.stat().st_size for p in sorted(directory.iterdir()) if p.is_file()}


def create_empty_logs(directory: Path, *offsets: int) -> None:
    """``UnifiedLogTest.createEmptyLogs``: empty ``.log`` and ``.index`` files at the given base offsets."""
    directory.mkdir(parents=True, exist_ok=True)
    for offset in offsets:
        (directory / f"{offset:020d}.log").touch()
        (directory / f"{offset:020d}.index").touch()


# --- transactional appends (LogTestUtils) --------------------------------------------------------------------


def append_transactional(
    log: Log, producer_id: int, producer_epoch: int, time: MockTime, leader_epoch: int = 0
) -> Callable[[int], LogAppendInfo]:
    """``LogTestUtils.appendTransactionalAsLeader``: a closure appending ``n`` records in one batch."""
    sequence = 0

    def append(n: int) -> LogAppendInfo:
        nonlocal sequence
        batch = records(
            [
                SimpleRecord(str(seq).encode(), None, time.milliseconds())
                for seq in range(sequence, sequence + n)
            ],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            sequence=sequence,
            transactional=True,
        )
        info = log.append_as_leader(batch, leader_epoch)
        sequence += n
        return info

    return append


def append_non_transactional(log: Log, n: int, leader_epoch: int = 0) -> LogAppendInfo:
    """``LogTestUtils.appendNonTransactionalAsLeader``."""
    batch = records([SimpleRecord(str(i).encode()) for i in range(n)])
    return log.append_as_leader(batch, leader_epoch)


def append_end_txn_marker(
    log: Log,
    producer_id: int,
    producer_epoch: int,
    control: ControlRecordType,
    timestamp: int,
    coordinator_epoch: int = 0,
    leader_epoch: int = 0,
) -> LogAppendInfo:
    """``LogTestUtils.appendEndTxnMarkerAsLeader``."""
    marker = MemoryRecords.end_transaction_marker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        control_type=control,
        coordinator_epoch=coordinator_epoch,
        timestamp=timestamp,
    )
    return log.append_as_leader(marker, leader_epoch, AppendOrigin.COORDINATOR)


# --- assertions -----------------------------------------------------------------------------------------------


def assert_valid_log_offset_metadata(log: Log, metadata: LogOffsetMetadata) -> None:
    """``UnifiedLogTest.assertValidLogOffsetMetadata``: the metadata names a real segment and position."""
    assert not metadata.message_offset_only
    base = metadata.segment_base_offset
    segments = log.local_log.segments.values(base, base + 1)
    assert segments, metadata
    segment = segments[0]
    assert segment.base_offset == base
    assert metadata.relative_position_in_segment <= segment.size
    info = segment.read(metadata.message_offset, 2048, segment.size, False)
    if metadata.relative_position_in_segment < segment.size:
        assert info is not None and info.fetch_offset_metadata == metadata
    else:
        assert info is None


def check_log_invariants(log: Log) -> None:
    """What holds for every open log at rest (see ``kafkalog.log.log`` module doc)."""
    log.check_watermarks()  # log start <= local log start <= LEO, log start <= HW <= LEO, LSO = min(FUO, HW)
    if not log.remote_log_enabled:
        assert log.local_log_start_offset == log.log_start_offset
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert log.recovery_point <= log.log_end_offset
    bases = segment_bases(log)
    assert bases == sorted(set(bases)), bases
    assert bases, "a log always has an active segment"
    assert log.log_end_offset_metadata.segment_base_offset == bases[-1]
    assert log.log_end_offset_metadata.relative_position_in_segment == log.active_segment.size
    for i, segment in enumerate(log.segments):
        upper = bases[i + 1] if i + 1 < len(bases) else log.log_end_offset
        position = 0
        for batch in segment.batches():
            assert segment.base_offset <= batch.base_offset and batch.last_offset < upper
            found = segment.translate_offset(batch.base_offset)
            assert found is not None and found.position == position, (segment, batch.base_offset, found)
            found_last = segment.translate_offset(batch.last_offset)
            assert found_last is not None and found_last.position == position
            position += batch.size_in_bytes
        assert position == segment.size
        entries = segment.offset_index.entries
        last = None
        for n in range(entries):
            entry = segment.offset_index.entry(n)
            assert last is None or entry.offset > last
            assert entry.position < segment.size
            last = entry.offset


def open_log(
    directory: Path,
    config: Any = None,
    *,
    time: MockTime,
    scheduler: Any,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    last_shutdown_clean: bool = True,
    remote_storage_system_enable: bool = False,
) -> Log:
    """``LogTestUtils.createLog`` with a clean last shutdown (Kafka's default in tests)."""
    return Log.open(
        directory,
        config,
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        scheduler=scheduler,
        time=time,
        last_shutdown_clean=last_shutdown_clean,
        remote_storage_system_enable=remote_storage_system_enable,
    )
