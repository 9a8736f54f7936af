"""Readers see a Spark sink job all at once (issue 20, item 2): the read-only view (and so the Spark source,
``consume`` and ``info``) stops each partition at the ``base_offset`` of the oldest pending commit journal,
read consistently with the log end through the sink's commit counter. Without Spark: the sink's own staging and
commit functions, a committing writer thread, a writer that dies mid-commit, and polling readers."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafkalog.manager import LogManager
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.spark import commit as commit_mod
from kafkalog.spark.sink_layout import journal_dir, staging_root
from kafkalog.spark.sink_options import SinkOptions, plan_columns
from kafkalog.spark.staging import TaskStager

JOB = 600  # records per job; every job writes JOB records to partition 0 of topic t, nothing else writes


class Crash(Exception):
    pass


def options(data: Path) -> SinkOptions:
    return SinkOptions.parse({"path": str(data), "topic": "t", "batchBytes": "2048"})


def stage(data: Path, job: str) -> list[Any]:
    batch = pa.record_batch(
        [
            pa.array([f"{job}:{i}:".encode().ljust(40, b"x") for i in range(JOB)], pa.binary()),
            pa.array([0] * JOB, pa.int32()),
        ],
        names=["value", "partition"],
    )
    plan = plan_columns({"value": "binary", "partition": "int"}, "t")
    stager = TaskStager(options(data), plan, staging_root(data) / job / "p00000-a0-t0-00000000")
    stager.add(batch)
    files = stager.finish()
    assert sum(f.batches for f in files) > 5
    return files


def commit(data: Path, job: str, files: list[Any]) -> Any:
    return commit_mod.commit_staged(options(data), job, files, cleanup=[f".kafkalog-spark/staging/{job}"])


def crash_mid_commit(
    monkeypatch: pytest.MonkeyPatch, data: Path, job: str, files: list[Any], appends: int
) -> None:
    real = LogManager.append
    calls = {"n": 0}

    def dying(self: LogManager, *args: Any, **kw: Any) -> Any:
        if calls["n"] == appends:
            raise Crash("killed mid-commit")
        calls["n"] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(LogManager, "append", dying)
    with pytest.raises(Crash):
        commit(data, job, files)
    monkeypatch.setattr(LogManager, "append", real)


def visible(data: Path) -> tuple[int, int]:
    log = ReadOnlyDataDir(data).log("t", 0)
    return log.high_watermark, log.log_end_offset


def test_a_job_killed_mid_commit_stays_invisible_until_it_is_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
    commit(tmp_path, "j0", stage(tmp_path, "j0"))
    files = stage(tmp_path, "j1")
    monkeypatch.setattr(LogManager, "_complete_pending_sink_commits", lambda self: None)
    crash_mid_commit(monkeypatch, tmp_path, "j1", files, appends=3)
    hw, leo = visible(tmp_path)
    assert JOB < leo < 2 * JOB  # part of j1 is in the log
    assert hw == JOB  # ... and no reader sees it: the view ends where j1 starts
    log = ReadOnlyLog.open(tmp_path / "t-0")
    assert log.last_stable_offset == JOB
    monkeypatch.undo()
    with LogManager.open(tmp_path, background=False):  # the replay at open completes j1
        pass
    assert visible(tmp_path) == (2 * JOB, 2 * JOB)
    log.refresh()
    assert log.high_watermark == 2 * JOB


def test_readers_beside_committing_and_crashing_writers_see_whole_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
    jobs = [f"j{i:02d}" for i in range(12)]
    staged = {job: stage(tmp_path, job) for job in jobs}
    done = threading.Event()
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        log = ReadOnlyLog.open(tmp_path / "t-0")
        try:
            while not done.is_set():
                log.refresh()
                hw, leo = log.high_watermark, log.log_end_offset
                seen.append((hw, leo))
                values = [r.value for r in log.read(0, 1 << 24, end_offset=hw).records()] if hw else []
                assert len(values) == hw
                tags = {}
                for v in values:
                    assert v is not None
                    tag = v.split(b":")[0]
                    tags[tag] = tags.get(tag, 0) + 1
                assert all(n == JOB for n in tags.values()), tags  # every job seen is whole
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        real = LogManager.append
        for i, job in enumerate(jobs):
            if i % 3 == 1:  # a writer dies mid-commit; the next commit's replay completes its job
                crash_mid_commit(monkeypatch, tmp_path, job, staged[job], appends=1 + i % 5)
                monkeypatch.setattr(LogManager, "append", real)
            else:
                commit(tmp_path, job, staged[job])
    finally:
        done.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors, errors[0]
    assert not list(journal_dir(tmp_path).glob("*.json"))
    assert visible(tmp_path) == (len(jobs) * JOB, len(jobs) * JOB)
    assert any(leo > hw for hw, leo in seen)  # the readers did look while a job was partly appended
    assert all(hw % JOB == 0 for hw, _ in seen)


def test_a_job_that_starts_and_finishes_between_two_looks_is_not_missed(tmp_path: Path) -> None:
    from kafkalog.datadir import read_pending_sink_bounds

    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("t", 1)
    files = stage(tmp_path, "j0")
    log = ReadOnlyLog.open(tmp_path / "t-0")
    looks: list[int] = []

    def look() -> int:
        looks.append(1)
        if len(looks) == 1:  # the whole commit of j0 happens while the reader looks at the log end
            commit(tmp_path, "j0", files)
            return JOB // 2  # what a look in the middle of its appends would have found
        log.refresh()
        return log.log_end_offset

    end, bounds = read_pending_sink_bounds(tmp_path, look)
    assert len(looks) == 2  # the counter moved: the reader looked again
    assert end == JOB and bounds == {}
