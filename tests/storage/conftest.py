"""Helpers shared by the storage tests: Kafka's test fixtures (``LogTestUtils.createSegment``, ``v1Records``,
``v2Records``, ``newProducerStateManager``) and a counter of ``os.open`` calls for the lazy-loading checks.

Legacy (magic 1) batches are built with kafka-python's independent encoder: kafkalog only *reads* magic 0/1,
but many of Kafka's segment scenarios use magic-1 records, and their byte positions (39 bytes per ``"hello"``
record) are part of the expected numbers.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage import LogSegment, OffsetIndex, TimeIndex, TransactionIndex, files
from kafkalog.storage.file_records import FileRecords
from kafkalog.time import SYSTEM_TIME, MockTime, Time

NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1


def v1_records(offset: int, *values: str, magic: int = 1) -> MemoryRecords:
    """Kafka's ``v1Records(offset, values...)``: one uncompressed legacy entry per value, timestamp offset*10."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(offset + i, offset * 10 if magic else None, None, value.encode())
    return MemoryRecords(bytes(builder.build()))


def v2_records(
    offset: int, *values: str | bytes, timestamp: int | None = None, leader_epoch: int = -1
) -> MemoryRecords:
    """Kafka's ``v2Records(offset, values...)``: one magic-2 batch, every record at ``timestamp`` (offset*10)."""
    ts = offset * 10 if timestamp is None else timestamp
    return MemoryRecords.build(
        [SimpleRecord(v if isinstance(v, bytes) else v.encode(), None, ts) for v in values],
        base_offset=offset,
        partition_leader_epoch=leader_epoch,
    )


def end_txn_marker(
    control: ControlRecordType, producer_id: int, producer_epoch: int, offset: int
) -> MemoryRecords:
    """Kafka's ``endTxnRecords``: a COMMIT/ABORT marker batch without timestamp, epoch 0, coordinator 0."""
    return MemoryRecords.end_transaction_marker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        control_type=control,
        coordinator_epoch=0,
        base_offset=offset,
        timestamp=NO_TIMESTAMP,
        partition_leader_epoch=0,
    )


def create_segment(
    directory: Path, offset: int, index_interval_bytes: int = 10, time: Time = SYSTEM_TIME
) -> LogSegment:
    """Kafka's ``LogTestUtils.createSegment``: offset index of 1000 bytes, time index of 1500, no jitter."""
    return LogSegment(
        FileRecords.open(files.log_file(directory, offset)),
        OffsetIndex(files.offset_index_file(directory, offset), offset, 1000),
        TimeIndex(files.time_index_file(directory, offset), offset, 1500),
        TransactionIndex(offset, files.transaction_index_file(directory, offset)),
        offset,
        index_interval_bytes,
        0,
        time,
    )


class SegmentFactory:
    """Creates segments in one directory and closes every one of them at teardown."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.created: list[LogSegment] = []

    def __call__(self, offset: int, index_interval_bytes: int = 10, time: Time = SYSTEM_TIME) -> LogSegment:
        seg = create_segment(self.dir, offset, index_interval_bytes, time)
        self.created.append(seg)
        return seg

    def track(self, seg: LogSegment) -> LogSegment:
        self.created.append(seg)
        return seg

    def close_all(self) -> None:
        for seg in self.created:
            if not seg.log.closed:
                seg.close()


@pytest.fixture
def segments(tmp_path: Path) -> Iterator[SegmentFactory]:
    factory = SegmentFactory(tmp_path)
    yield factory
    factory.close_all()


# --- what LogSegment.recover drives -----------------------------------------------------------------------------


def new_producer_state_manager(log_dir: Path) -> ProducerStateManager:
    """Kafka's ``newProducerStateManager()``: 5 minutes max transaction timeout, default expiration."""
    return ProducerStateManager("topic-0", log_dir, max_transaction_timeout_ms=5 * 60 * 1000, time=MockTime())


# --- watching file opens --------------------------------------------------------------------------------------


class OpenCounter:
    """Records every path passed to ``os.open`` while installed (see the ``open_calls`` fixture)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def names(self) -> list[str]:
        return [os.path.basename(p) for p in self.paths]


@pytest.fixture
def open_calls(monkeypatch: pytest.MonkeyPatch) -> OpenCounter:
    counter = OpenCounter()
    real_open = os.open

    def counting_open(
        path: str | bytes | os.PathLike[str], flags: int, mode: int = 0o777, **kw: object
    ) -> int:
        counter.paths.append(os.fsdecode(path))
        return real_open(path, flags, mode, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", counting_open)
    return counter


def write_nonsense(path: Path, position: int, size: int, seed: int = 0) -> None:
    """Kafka's ``writeNonsenseToFile``: overwrite ``size`` bytes from ``position`` with random bytes."""
    rng = random.Random(seed)
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(bytes(rng.randrange(255) for _ in range(size)))
