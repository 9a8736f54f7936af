"""The sink keeps its word after crashes, without Spark: a re-run micro-batch never rewrites the staged files a
pending journal names (issue 20, item 1), a replay that cannot complete is quarantined instead of wedging
the data directory, and staging no journal names is swept and bounded (item 3)."""

from __future__ import annotations

import json
import os
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


def stage_job(data: Path, job: str, n: int = 300, **opts: str) -> list[Any]:
    from kafkalog.spark.sink_options import SinkOptions, plan_columns
    from kafkalog.spark.staging import TaskStager

    options = SinkOptions.parse({"path": str(data), "topic": "t", **opts})
    stager = TaskStager(options, plan_columns({"key": "string", "value": "binary"}, "t"), task_dir(data, job))
    stager.add(rows(n))
    return stager.finish()


def task_dir(data: Path, job: str) -> Path:
    return staging_root(data) / job / "p00000-a0-t0-0123abcd"


def sink_options(data: Path, **opts: str) -> Any:
    from kafkalog.spark.sink_options import SinkOptions

    return SinkOptions.parse({"path": str(data), "topic": "t", **opts})


def crash_mid_commit(monkeypatch: pytest.MonkeyPatch, data: Path, job: str, files: list[Any]) -> None:
    real_append = LogManager.append
    calls = {"n": 0}

    def dying_append(self: LogManager, *args: Any, **kw: Any) -> Any:
        if calls["n"] == 1:
            raise Crash("killed mid-commit")
        calls["n"] += 1
        return real_append(self, *args, **kw)

    monkeypatch.setattr(LogManager, "append", dying_append)
    with pytest.raises(Crash):
        commit_mod.commit_staged(sink_options(data), job, files, cleanup=[f".kafkalog-spark/staging/{job}"])
    monkeypatch.setattr(LogManager, "append", real_append)


def test_a_journal_that_cannot_complete_is_quarantined_not_wedging_later_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path)
    files = stage_job(tmp_path, "j1", 400, batchBytes="2048")
    crash_mid_commit(monkeypatch, tmp_path, "j1", files)
    staged = tmp_path / files[0].path
    staged.write_bytes(staged.read_bytes()[:-7])  # the staged file is damaged before the replay
    with LogManager.open(tmp_path, background=False) as mgr:  # the replay at open cannot complete
        leo = mgr.get_log("t", 0).log_end_offset
    assert 0 < leo < 400
    # later writes are not wedged
    more = stage_job(tmp_path, "j2", 50)
    res = commit_mod.commit_staged(sink_options(tmp_path), "j2", more, cleanup=[".kafkalog-spark/staging/j2"])
    assert res.records == 50 and res.partitions[0].first_offset == leo
    failed = commit_mod.failed_journal_dir(tmp_path) / f"{'j1'}.json"
    doc = json.loads(failed.read_text())
    assert doc["job_id"] == "j1" and "CorruptRecordError" in doc["error"]
    assert doc["log_end_offsets"] == {"t": {"0": leo}}
    assert not list(journal_dir(tmp_path).glob("*.json"))
    assert (tmp_path / files[0].path).exists()  # kept for the operator: the failed journal names it
    # ... and reported by info
    from click.testing import CliRunner

    from kafkalog.cli.main import cli

    out = CliRunner().invoke(cli, ["info", str(tmp_path), "--json"])
    sink = [json.loads(line) for line in out.output.splitlines() if '"sparkSink"' in line]
    assert sink == [
        {
            "type": "sparkSink",
            "pendingJournals": [],
            "failedJournals": ["j1"],
            "stagingDirs": 1,
            "stagingBytes": (tmp_path / files[0].path).stat().st_size,
        }
    ]
    text = CliRunner().invoke(cli, ["info", str(tmp_path)]).output
    assert "journal/failed/j1.json" in text
    checked = CliRunner().invoke(cli, ["verify", str(tmp_path)])
    assert checked.exit_code == 1 and "could not complete" in checked.output


def test_the_replay_refuses_a_staged_file_changed_after_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path)
    files = stage_job(tmp_path, "j1", 400, batchBytes="2048")
    crash_mid_commit(monkeypatch, tmp_path, "j1", files)
    staged = tmp_path / files[0].path
    raw = bytearray(staged.read_bytes())
    other = stage_job(tmp_path, "j9", 400, batchBytes="2048")  # same size, other bytes (a rewrite)
    rewrite = (tmp_path / other[0].path).read_bytes()
    assert len(rewrite) == len(raw) and rewrite != bytes(raw)
    staged.write_bytes(rewrite)
    with LogManager.open(tmp_path, background=False) as mgr:
        assert mgr.get_log("t", 0).log_end_offset < 400  # nothing of the rewritten file was appended
    doc = json.loads((commit_mod.failed_journal_dir(tmp_path) / "j1.json").read_text())
    assert "changed after commit journal" in doc["error"]


def test_interrupted_journal_temp_files_are_removed(tmp_path: Path) -> None:
    make_topic(tmp_path)
    journal_dir(tmp_path).mkdir(parents=True)
    (journal_dir(tmp_path) / "x.json.tmp").write_text('{"version": 1, "job')
    with LogManager.open(tmp_path, background=False):
        pass
    assert (journal_dir(tmp_path) / "x.json.tmp").exists()  # nothing pending: the manager does not look
    commit_mod.prepare_job(sink_options(tmp_path))
    assert not list(journal_dir(tmp_path).iterdir())


def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    for p in [path, *path.rglob("*")]:
        os.utime(p, (past, past))


def test_staging_no_journal_names_is_swept_at_job_start_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path)
    # three crashed attempts of a job (nothing journaled), one committing job's journaled staging
    for job in ("c1", "c2", "c3"):
        stage_job(tmp_path, job, 2000)
    files = stage_job(tmp_path, "live", 400, batchBytes="2048")
    crash_mid_commit(monkeypatch, tmp_path, "live", files)
    monkeypatch.setattr(commit_mod, "replay_pending", lambda mgr: [])  # keep the journal pending
    monkeypatch.setattr(LogManager, "_complete_pending_sink_commits", lambda self: None)
    size = sum(f.stat().st_size for f in task_dir(tmp_path, "c1").iterdir())
    age(staging_root(tmp_path) / "c1", 7200)
    age(staging_root(tmp_path) / "c2", 3600)
    age(staging_root(tmp_path) / "live", 9000)
    opts = sink_options(tmp_path, stagingMaxBytes=str(size), lockTimeoutMs="1000", stagingTtlMs="86400000")
    commit_mod.prepare_job(opts)
    left = sorted(p.name for p in staging_root(tmp_path).iterdir())
    # over the bound: the oldest idle attempts go (c1, then c2); c3 was touched just now, live is journaled
    assert left == ["c3", "live"]
    # past the TTL, everything no journal names goes
    age(staging_root(tmp_path) / "c3", 60)
    commit_mod.prepare_job(sink_options(tmp_path, stagingTtlMs="30000"))
    assert sorted(p.name for p in staging_root(tmp_path).iterdir()) == ["live"]
