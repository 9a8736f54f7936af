"""The sink keeps its word after crashes, without Spark: a re-run micro-batch never rewrites the staged files a
pending journal names (issue 20, item 1), a replay that cannot complete is quarantined instead of wedging
the data directory, and staging no journal names is swept and bounded (item 3)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafkalog.log.types import FetchIsolation
from kafkalog.manager import LogManager
from kafkalog.spark import commit as commit_mod
from kafkalog.spark import writer as writer_mod
from kafkalog.spark.commit import last_committed_batch
from kafkalog.spark.sink_layout import journal_dir, staging_root

pytest.importorskip("pyspark")

from pyspark.sql.types import BinaryType, StringType, StructField, StructType

SCHEMA = StructType([StructField("key", StringType()), StructField("value", BinaryType())])


class Crash(Exception):
    pass


def make_topic(data: Path, topic: str = "t", partitions: int = 1) -> None:
    with LogManager.open(data, background=False) as mgr:
        mgr.create_topic(topic, partitions)


def rows(n: int, start: int = 0) -> pa.RecordBatch:
    """Rows without a ``timestamp`` column: each staging gives them the staging time."""
    return pa.record_batch(
        [
            pa.array([f"k{i % 7}" for i in range(start, start + n)]),
            pa.array([f"v{i:08d}".encode().ljust(120, b".") for i in range(start, start + n)], pa.binary()),
        ],
        names=["key", "value"],
    )


def values(data: Path, topic: str = "t", partition: int = 0) -> list[bytes]:
    out: list[bytes] = []
    with LogManager.open(data, background=False) as mgr:
        log = mgr.get_log(topic, partition)
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            for batch in mgr.read(topic, partition, offset, 1 << 22, FetchIsolation.LOG_END).batches():
                out += [r.value for r in batch if r.offset >= offset and r.value is not None]
                offset = batch.last_offset + 1
    return out


def first_task_of_a_run(monkeypatch: pytest.MonkeyPatch, batch_id: int) -> None:
    """What Spark's TaskContext says to the first task a driver run executes: attempt ids start at 0."""
    info = writer_mod._TaskInfo(partition=0, attempt=0, task_attempt_id=0, query_id="q", batch_id=batch_id)
    monkeypatch.setattr(writer_mod, "_task_info", lambda: info)


def test_rerun_micro_batch_after_a_kill_mid_commit_is_not_duplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path)
    opts = {"path": str(tmp_path), "topic": "t", "batchBytes": "4096", "sinkId": "q"}
    first_task_of_a_run(monkeypatch, 0)
    # run 1: batch 0 is staged and its commit dies after two appends (the journal is on disk)
    run1 = writer_mod.KafkaLogStreamWriter(opts, SCHEMA, False)
    msg1 = run1.write(iter([rows(1000)]))
    assert sum(f.batches for f in msg1.files) > 4
    staged_before = {f.path: (tmp_path / f.path).read_bytes() for f in msg1.files}
    expected = values_of_staged(tmp_path, msg1)
    real_append = LogManager.append
    calls = {"n": 0}

    def dying_append(self: LogManager, *args: Any, **kw: Any) -> Any:
        if calls["n"] == 2:
            raise Crash("killed mid-commit")
        calls["n"] += 1
        return real_append(self, *args, **kw)

    monkeypatch.setattr(LogManager, "append", dying_append)
    with pytest.raises(Crash):
        writer_mod.KafkaLogStreamWriter(opts, SCHEMA, False).commit([msg1], 0)
    monkeypatch.setattr(LogManager, "append", real_append)
    assert len(list(journal_dir(tmp_path).glob("*.json"))) == 1

    # run 2 (a restart): the same batch 0, the same partition / attempt / task attempt id, a later clock, and
    # the staging happens before anything replays the journal (the commit is the first to open the manager)
    clock = time.time() + 5.0
    monkeypatch.setattr(time, "time", lambda: clock)
    monkeypatch.setattr(commit_mod, "replay_pending", lambda mgr: [])  # staging must not rely on a replay
    run2_stager = writer_mod.KafkaLogStreamWriter.__new__(writer_mod.KafkaLogStreamWriter)
    run2_stager.__dict__.update(run1.__dict__)
    msg2 = run2_stager.write(iter([rows(1000)]))
    monkeypatch.undo()
    first_task_of_a_run(monkeypatch, 0)
    rewritten = [path for path, raw in staged_before.items() if (tmp_path / path).read_bytes() != raw]
    writer_mod.KafkaLogStreamWriter(opts, SCHEMA, False).commit([msg2], 0)
    got = values(tmp_path)
    assert len(got) == 1000, f"{len(got) - 1000} duplicates"
    assert got == expected
    assert rewritten == []  # the files the journal names were never touched
    assert last_committed_batch(tmp_path, "q") == 0
    assert not list(staging_root(tmp_path).rglob("*.batches"))


def values_of_staged(data: Path, msg: Any) -> list[bytes]:
    from kafkalog.records import MemoryRecords

    out: list[bytes] = []
    for f in msg.files:
        out += [r.value for r in MemoryRecords((data / f.path).read_bytes()).records()]
    return out
