"""Helpers of the tiered-archive tests: kafkalog-written partition directories with several segments and
leader epochs, a store that records which objects were read, and a way to materialize a PartitionSource as a
local directory so the read-only reader reads it."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path

from kafkalog.log import Log
from kafkalog.objstore.files import PartitionSource
from kafkalog.objstore.store import MemoryStore
from kafkalog.readonly.log import ReadOnlyLog
from kafkalog.records import SimpleRecord
from kafkalog.records.columnar import iter_columnar

SMALL = {"segment.bytes": 2048, "index.interval.bytes": 128}


def build_log(
    directory: Path,
    count: int = 60,
    *,
    epochs: Sequence[tuple[int, int]] = ((0, 0),),
    tag: bytes = b"",
    config: dict[str, int] | None = None,
) -> Path:
    """A closed log of ``count`` one-record batches; ``epochs``: (epoch, first offset) in order."""
    log = Log.open(directory, config or SMALL)
    try:
        for i in range(count):
            epoch = max(e for e, start in epochs if start <= i)
            log.append([SimpleRecord(b"value-%d" % i + tag, b"k%d" % (i % 3), 1_000 + i)], leader_epoch=epoch)
    finally:
        log.close()
    return directory


class RecordingStore(MemoryStore):
    """A MemoryStore that records the key of every read (to prove what planning reads)."""

    def __init__(self) -> None:
        super().__init__(url="memory://bucket")
        self.reads: list[str] = []

    def get(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self.reads.append(key)
        return super().get_range(key, start, end)

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        self.reads.append(key)
        return [MemoryStore.get_range(self, key, s, e) for s, e in ranges]


def materialize(source: PartitionSource, directory: Path) -> Path:
    """Write every file of ``source`` into ``directory`` (a partition directory the reader can open)."""
    directory.mkdir(parents=True)
    for name, size in source.list_files().items():
        data = source.read(name)
        assert len(data) == size, name
        (directory / name).write_bytes(data)
    return directory


def rows(directory: Path) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record the read-only reader decodes from ``directory``."""
    rl = ReadOnlyLog.open(directory)
    out = []
    for chunk in rl.iter_batch_chunks(rl.log_start_offset, rl.log_end_offset):
        for batch in iter_columnar(chunk.data):
            for row in batch.to_pylist():
                out.append((row["offset"], row["timestamp"], row["key"], row["value"]))
    return out
