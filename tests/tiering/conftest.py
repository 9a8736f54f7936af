"""Helpers of the tiering tests: metadata-topic Logs in a data directory, a user log with rolled segments, and
rows read back through the read-only reader."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log import Log
from kafkalog.remote import REMOTE_LOG_METADATA_TOPIC_NAME
from kafkalog.storage.segment import LogSegment
from kafkalog.tiering import LogSegmentData

#: Small segments: a few dozen one-record batches roll several times.
SMALL: dict[str, int] = {"segment.bytes": 1024, "index.interval.bytes": 128}
TOPIC_ID = uuid.UUID("5b3c3d6e-1a2b-4c5d-8e9f-0a1b2c3d4e5f")


class MetadataLogs:
    """The ``__remote_log_metadata`` partitions of one data directory, opened on demand (the manager's job)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.logs: dict[int, Log] = {}

    def __call__(self, partition: int) -> Log:
        log = self.logs.get(partition)
        if log is None:
            log = Log.open(
                self.data_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}", {"retention.ms": -1}
            )
            log.hw_follows_leo = True
            self.logs[partition] = log
        return log

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
        self.logs.clear()


@pytest.fixture
def props(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A manager's tiering settings over a private ``memory://`` store (one metadata partition, 4 KiB chunks,
    tasks run by hand); the store is forgotten after the test."""
    from kafkalog.objstore.open import forget_memory_store

    name = f"tier-{tmp_path.name}"
    yield {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": 3_600_000,
        "remote.log.metadata.topic.num.partitions": 1,
        "rsm.config.storage.url": f"memory://{name}",
        "rsm.config.chunk.size": 4096,
    }
    forget_memory_store(name)


@pytest.fixture
def metadata_logs(tmp_path: Path) -> Iterator[Callable[[Path], MetadataLogs]]:
    opened: list[MetadataLogs] = []

    def make(data_dir: Path) -> MetadataLogs:
        logs = MetadataLogs(data_dir)
        opened.append(logs)
        return logs

    yield make
    for logs in opened:
        logs.close()


def segment_data(log: Log, segment: LogSegment, next_base: int) -> LogSegmentData:
    """What the RemoteLogManager hands the RSM for ``segment`` (no producer snapshot, epoch blob of the cache)."""
    from kafkalog.log.checkpoint import leader_epoch_checkpoint

    entries = [e for e in log.leader_epoch_cache.epoch_entries if e.start_offset < next_base]
    txn = segment.txn_index.path
    return LogSegmentData(
        log_segment=segment.log.path,
        offset_index=segment.offset_index.path,
        time_index=segment.time_index.path,
        transaction_index=txn if txn.exists() and txn.stat().st_size else None,
        producer_snapshot=log.producer_state.fetch_snapshot(next_base),
        leader_epoch_index=leader_epoch_checkpoint(Path(".")).format(entries),
    )


def reader_rows(
    rl: object, start: int | None = None, end: int | None = None
) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record a :class:`~kafkalog.readonly.ReadOnlyLog` decodes."""
    from kafkalog.readonly import ReadOnlyLog
    from kafkalog.records.columnar import iter_columnar

    assert isinstance(rl, ReadOnlyLog)
    lo = rl.log_start_offset if start is None else start
    hi = rl.log_end_offset if end is None else end
    out = []
    for chunk in rl.iter_batch_chunks(lo, hi):
        for batch in iter_columnar(chunk.data):
            for row in batch.to_pylist():
                if lo <= row["offset"] < hi:
                    out.append((row["offset"], row["timestamp"], row["value"]))
    return out
