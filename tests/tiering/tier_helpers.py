"""Helpers of the tiering integration tests: a LogManager with tiering on against the session's SeaweedFS
(``s3_server``), small segments, and reads that walk a log across both tiers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkalog.log.log import Log
from kafkalog.log.types import FetchIsolation
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord

#: Topic overrides: tiering on, segments of a few batches, nothing expires by time.
TIERED_TOPIC: dict[str, Any] = {
    "remote.storage.enable": "true",
    "segment.bytes": 1024,
    "index.interval.bytes": 128,
    "retention.ms": -1,
}
TS0 = 1_700_000_000_000


def tier_props(server: Any, bucket: str, *, prefix: str = "", **extra: Any) -> dict[str, Any]:
    """Broker settings (Kafka's names) for a manager tiering into ``bucket`` of ``server``; tasks every hour
    (tests run the passes themselves)."""
    props: dict[str, Any] = {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": 3_600_000,
        "remote.log.metadata.topic.num.partitions": 2,
        "rsm.config.storage.url": f"s3://{bucket}",
        "rsm.config.chunk.size": 4096,
    }
    if prefix:
        props["rsm.config.key.prefix"] = prefix
    for key, value in server.options().items():
        props[f"rsm.config.storage.{key}"] = value
    props.update(extra)
    return props


def open_tiered(data_dir: Path, props: Mapping[str, Any], **kwargs: Any) -> LogManager:
    """A manager over ``data_dir`` with ``props`` (manager and remote keys together, as ``serve`` passes them)."""
    return LogManager.open(data_dir, config=dict(props), **kwargs)


def produce(log: Log, n: int, start: int = 0, per_batch: int = 5) -> None:
    """``n`` records (values ``v<i>``, timestamps ``TS0 + i``) in batches of ``per_batch``."""
    i = start
    while i < start + n:
        k = min(per_batch, start + n - i)
        log.append_as_leader(
            MemoryRecords.build([SimpleRecord(b"v%d" % j, b"k%d" % j, TS0 + j) for j in range(i, i + k)]), 0
        )
        i += k


def read_all(
    log: Log, start: int | None = None, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record from ``start`` (the log start) to the bound, read as a consumer does:
    batch after batch, across the tiers."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    bound = log.high_watermark if isolation is FetchIsolation.HIGH_WATERMARK else log.last_stable_offset
    while offset < bound:
        info = log.read(offset, 1 << 16, isolation, min_one_message=True)
        records = (
            info.records if isinstance(info.records, MemoryRecords) else info.records.to_memory_records()
        )
        batches = list(records.batches())
        assert batches, f"no data at offset {offset} below {bound}"
        for batch in batches:
            for r in batch:
                if r.offset >= offset:
                    out.append((r.offset, r.value))
            offset = batch.last_offset + 1
    return out


def bucket_keys(server: Any, bucket: str) -> list[str]:
    """Every object key in ``bucket``."""
    store = server.open(f"s3://{bucket}")
    return sorted(o.key for o in store.list("", delimiter=False).objects)


def local_bases(log: Log) -> list[int]:
    """The base offsets of the log's local segments."""
    return [s.base_offset for s in log.segments]
