"""LogManager with its log cleaner: compacted topics cleaned in the background, retention for the others, a
partition move and a topic deletion while the cleaner runs, checkpoints cleaned up."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafkalog.cleaner.service import LogCleaner
from kafkalog.errors import LogDirLockedError
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager
from kafkalog.records import SimpleRecord


def test_manager_runs_the_cleaner(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    cfg = {"log.initial.task.delay.ms": 0, "log.retention.check.interval.ms": 50}
    with LogManager.open(
        dirs, config=cfg, cleaner={"log.cleaner.backoff.ms": 20, "log.cleaner.dedupe.buffer.size": 1 << 20}
    ) as m:
        m.create_topic("users", 2, {"cleanup.policy": "compact", "segment.bytes": 2048})
        m.create_topic("events", 1, {"segment.bytes": 2048, "retention.bytes": 4096})
        for i in range(400):
            m.produce("users", [SimpleRecord(b"v%d" % i, b"k%d" % (i % 9))], partition=i % 2)
            m.produce("events", [SimpleRecord(b"e%d" % i)])
        for p in range(2):
            m.get_log("users", p).roll()
        # Wait for both background jobs: the cleaner's checkpoints and a retention run after the last append.
        # Retention is a periodic task (every 50 ms) on the scheduler's thread, independent of the cleaner;
        # under load the cleaner can finish before retention ran again (seen: "events" at 16704 bytes).
        deadline = time.monotonic() + 60  # generous: CI machines are shared
        while time.monotonic() < deadline:
            cps = m.cleaner.manager.all_cleaner_checkpoints()
            cleaned = all(
                cps.get(TopicPartition("users", p), 0) >= m.get_log("users", p).active_segment.base_offset
                for p in range(2)
            )
            if cleaned and m.get_log("events", 0).size <= 8192:
                break
            time.sleep(0.05)
        else:
            raise AssertionError((cps, m.get_log("events", 0)))
        for p in range(2):
            log = m.get_log("users", p)
            latest = {}
            for s in log.segments:
                for b in s.batches():
                    for r in b.records():
                        latest[r.key] = r.value
            assert len(latest) == 9
            assert log.size < 3000
        assert m.get_log("events", 0).size <= 8192  # retention still works on the others
        m.move_partition("users", 0, dirs[1] if m.get_log("users", 0).dir.parent == dirs[0] else dirs[0])
        m.delete_topic("users")
    for d in dirs:
        text = (
            (d / "cleaner-offset-checkpoint").read_text()
            if (d / "cleaner-offset-checkpoint").exists()
            else "0\n0\n"
        )
        assert "users" not in text


def _dirty_compacted(m: LogManager) -> None:
    m.create_topic("users", 1, {"cleanup.policy": "compact", "segment.bytes": 2048})
    for i in range(200):
        m.produce("users", [SimpleRecord(b"v%d" % i, b"k%d" % (i % 5))])
    m.get_log("users", 0).roll()


def test_a_second_cleaner_on_the_managers_dirs_is_refused(tmp_path: Path) -> None:
    """The LogManager runs a cleaner; another on the same log dirs (what operations.md used to tell users to
    build) would race it on the same .cleaned files. It is refused, and changes nothing."""
    with LogManager.open(tmp_path, cleaner={"log.cleaner.backoff.ms": 60_000}) as m:
        assert m.cleaner is not None and m.cleaner.is_running
        m.cleaner.abort_and_pause_cleaning(TopicPartition("users", 0))  # the files stay as they are
        _dirty_compacted(m)
        other = LogCleaner({"log.cleaner.threads": 1}, log_dirs=m.log_dirs, logs=m.all_logs)
        with pytest.raises(LogDirLockedError, match="another LogCleaner"):
            other.startup()
        assert not other.is_running
        before = sorted(p.name for p in (tmp_path / "users-0").iterdir())
        with pytest.raises(LogDirLockedError):
            other.clean_once()
        with pytest.raises(LogDirLockedError):
            other.clean_log(m.get_log("users", 0))
        # a cleaner that names no dir is refused at its round: it never cleans the manager's logs
        stray = LogCleaner(logs=m.all_logs)
        assert stray.clean_once() == []
        assert stray.manager.uncleanable_partitions(tmp_path) == {TopicPartition("users", 0)}
        assert sorted(p.name for p in (tmp_path / "users-0").iterdir()) == before
    # once the manager (and its cleaner) closed, a cleaner may work there
    with LogManager.open(tmp_path, background=False) as m:
        assert m.cleaner is None
        own = LogCleaner(log_dirs=m.log_dirs, logs=m.all_logs)
        assert own.clean_log(m.get_log("users", 0))


def test_a_manager_whose_cleaner_is_refused_does_not_open(tmp_path: Path) -> None:
    """A cleaner already works in the dir: the manager's own would race it. The open fails and leaves nothing
    locked or running."""
    with LogManager.open(tmp_path, background=False) as m:
        _dirty_compacted(m)
    first = LogCleaner(log_dirs=[tmp_path], logs=dict)
    first.startup()
    try:
        with pytest.raises(LogDirLockedError, match="another LogCleaner"):
            LogManager.open(tmp_path)
    finally:
        first.shutdown()
    with LogManager.open(
        tmp_path, cleaner={"log.cleaner.backoff.ms": 60_000}
    ) as m:  # the dir lock was released
        assert m.cleaner is not None and m.cleaner.is_running
