"""LogManager: topics, checkpoints, restart, locking, background tasks, log dir failure, partitioning."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from kafkalog.datadir import TOPICS_FILE, read_topics
from kafkalog.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirLockedError,
    LogDirNotAvailableError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log import FetchIsolation, MockScheduler
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager, ManagerConfig
from kafkalog.partitioner import partition_for_key
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def mock_time() -> MockTime:
    return MockTime(time.time_ns() // 1_000_000)


@pytest.fixture
def scheduler(mock_time: MockTime) -> MockScheduler:
    return MockScheduler(mock_time)


def open_manager(
    path: Path | list[Path], mock_time: MockTime, scheduler: MockScheduler, **kw: Any
) -> LogManager:
    return LogManager.open(path, scheduler=scheduler, time=mock_time, **kw)


def values(mgr: LogManager, topic: str, partition: int, start: int = 0) -> list[bytes | None]:
    out: list[bytes | None] = []
    log = mgr.get_log(topic, partition)
    offset = start
    while offset < log.high_watermark:
        records = mgr.read(topic, partition, offset)
        for batch in records.batches():
            for rec in batch:
                if rec.offset >= offset:
                    out.append(rec.value)
            offset = batch.last_offset + 1
    return out


# --- topics ---------------------------------------------------------------------------------------------------


def test_create_list_describe_topics(tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        logs = mgr.create_topic("events", 3, {"segment.bytes": 4096, "cleanup.policy": ["compact", "delete"]})
        mgr.create_topic("audit")
        assert len(logs) == 3
        assert mgr.topics() == ["audit", "events"]
        assert mgr.partitions("events") == [0, 1, 2]
        assert mgr.num_partitions("audit") == 1
        assert mgr.topic_config("events").segment_bytes == 4096
        assert mgr.topic_config("events").cleanup_policy == ("compact", "delete")
        assert mgr.get_log("events", 2).dir == tmp_path / "events-2"
        assert mgr.topic_id("events") == mgr.get_log("events", 0).topic_id
        with pytest.raises(TopicExistsError):
            mgr.create_topic("events", 1)
        with pytest.raises(UnknownTopicOrPartitionError):
            mgr.get_log("events", 3)
        with pytest.raises(UnknownTopicOrPartitionError):
            mgr.partitions("nope")
        with pytest.raises(InvalidPartitionsError):
            mgr.create_topic("zero", 0)
        with pytest.raises(InvalidConfigurationError):
            mgr.create_topic("badcfg", 1, {"segment.bytes": -5})
        assert "badcfg" not in mgr.topics() and not (tmp_path / "badcfg-0").exists()
    # written lazily, as Kafka does (before the next append or at close)
    assert (tmp_path / "events-0" / "partition.metadata").exists()


def test_tiered_topics_refused_while_the_system_gate_is_off(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    """remote.log.storage.system.enable is the manager's (off until it has a remote tier): creating or altering
    a topic to remote.storage.enable=true, or a default config with it, is refused with Kafka's text and
    changes nothing."""
    gate = "Tiered Storage functionality is disabled in the broker"
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        assert mgr.remote_storage_system_enable is False
        with pytest.raises(InvalidConfigurationError, match=gate):
            mgr.create_topic("tiered", 1, {"remote.storage.enable": "true"})
        assert "tiered" not in mgr.topics() and not (tmp_path / "tiered-0").exists()
        mgr.create_topic("plain", 1)
        with pytest.raises(InvalidConfigurationError, match=gate):
            mgr.alter_topic_config("plain", {"remote.storage.enable": True})
        assert not mgr.topic_config("plain").remote_storage_enable
        assert not mgr.get_log("plain", 0).config.remote_storage_enable
    with pytest.raises(InvalidConfigurationError, match=gate):
        LogManager.open(
            tmp_path / "other", {"remote.storage.enable": True}, scheduler=scheduler, time=mock_time
        )
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("name", ["../x", "a/b", "x\x00y", "t" * 250, ".", "..", "", "sp ace", "ü"])
def test_hostile_topic_names_are_refused_and_nothing_escapes(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler, name: str
) -> None:
    data = tmp_path / "data"
    with open_manager(data, mock_time, scheduler) as mgr:
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(InvalidTopicError):
            mgr.create_topic(name, 1)
        with pytest.raises(InvalidTopicError):
            mgr.get_or_create_log(name, 0)
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
        assert mgr.topics() == []


def test_topic_names_colliding_in_metrics_are_refused(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("a.b")
        with pytest.raises(InvalidConfigurationError, match="collides"):
            mgr.create_topic("a_b")


def test_get_or_create_log_registers_or_grows_the_topic(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        log = mgr.get_or_create_log("auto", 2, {"retention.ms": 1000})
        assert log.topic_partition == TopicPartition("auto", 2)
        assert mgr.num_partitions("auto") == 3
        assert mgr.topic_config("auto").retention_ms == 1000
        assert mgr.get_or_create_log("auto", 2) is log
        mgr.get_or_create_log("auto", 4)
        assert mgr.partitions("auto") == [0, 1, 2, 3, 4]
        with pytest.raises(InvalidPartitionsError):
            mgr.get_or_create_log("auto", -1)


def test_alter_config_applies_to_live_logs_and_persists(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 2, {"retention.ms": 5000})
        new = mgr.alter_topic_config("t", {"segment.bytes": 2048, "retention.ms": None})
        assert new.segment_bytes == 2048 and new.retention_ms == mgr.default_config.retention_ms
        assert mgr.get_log("t", 1).config.segment_bytes == 2048
        with pytest.raises(InvalidConfigurationError):
            mgr.alter_topic_config("t", {"no.such.config": 1})
        assert mgr.topic_config("t").segment_bytes == 2048
    doc = read_topics(tmp_path)
    assert doc is not None and doc.topics["t"].config == {"segment.bytes": 2048}
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert mgr.get_log("t", 0).config.segment_bytes == 2048
        assert mgr.topic_config("t").retention_ms == mgr.default_config.retention_ms


def test_add_partitions(tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 2)
        new = mgr.add_partitions("t", 5)
        assert [log.topic_partition.partition for log in new] == [2, 3, 4]
        with pytest.raises(InvalidPartitionsError):
            mgr.add_partitions("t", 5)
        with pytest.raises(UnknownTopicOrPartitionError):
            mgr.add_partitions("missing", 2)
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert mgr.partitions("t") == [0, 1, 2, 3, 4]


def test_delete_topic_renames_then_removes_after_the_delay(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    cfg = {"log.delete.delay.ms": 10_000, "log.initial.task.delay.ms": 0}
    with open_manager(tmp_path, mock_time, scheduler, config=cfg) as mgr:
        mgr.create_topic("gone", 2)
        mgr.produce("gone", [(b"k", b"v")], partition=0)
        mgr.delete_topic("gone")
        assert mgr.topics() == []
        deleted = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith("-delete"))
        assert len(deleted) == 2 and all(n.startswith("gone-") for n in deleted)
        assert not (tmp_path / "gone-0").exists()
        with pytest.raises(UnknownTopicOrPartitionError):
            mgr.get_log("gone", 0)
        mock_time.sleep(5_000)
        assert len([p for p in tmp_path.iterdir() if p.name.endswith("-delete")]) == 2
        mock_time.sleep(6_000)
        assert [p for p in tmp_path.iterdir() if p.name.endswith("-delete")] == []
        mgr.create_topic("gone", 1)  # the name is free again
        assert mgr.get_log("gone", 0).log_end_offset == 0


def test_delete_dirs_left_by_a_crash_are_removed_after_reopen(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler, config={"log.delete.delay.ms": 10_000}) as mgr:
        mgr.create_topic("x", 1)
        mgr.delete_topic("x")
        mgr._logs_to_delete.clear()  # simulate a crash before the delayed delete ran
    assert any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    cfg = {"log.delete.delay.ms": 0, "log.initial.task.delay.ms": 0}
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time), config=cfg) as mgr:
        mock_time.sleep(1000)
        assert mgr.topics() == []
    assert not any(p.name.endswith("-delete") for p in tmp_path.iterdir())


# --- restart --------------------------------------------------------------------------------------------------


def test_restart_keeps_topics_configs_offsets_and_skips_recovery(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("a", 2, {"segment.bytes": 1024})
        mgr.create_topic("b", 1)
        for i in range(50):
            mgr.produce("a", [(f"k{i}".encode(), b"x" * 100)])
        mgr.produce("b", [(None, b"one"), (None, b"two")], partition=0)
        mgr.get_log("a", 0).maybe_increment_log_start_offset(
            mgr.get_log("a", 0).log_end_offset // 2, "client delete records"
        )
        before = {
            tp: (log.log_start_offset, log.log_end_offset, log.high_watermark)
            for tp, log in mgr.all_logs().items()
        }
        segments = {tp: log.num_log_segments for tp, log in mgr.all_logs().items()}
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert not (tmp_path / ".kafka_cleanshutdown").exists()  # read and deleted at load
        assert mgr.topics() == ["a", "b"]
        assert mgr.topic_config("a").segment_bytes == 1024
        after = {
            tp: (log.log_start_offset, log.log_end_offset, log.high_watermark)
            for tp, log in mgr.all_logs().items()
        }
        assert after == before
        assert {tp: log.num_log_segments for tp, log in mgr.all_logs().items()} == segments
        assert all(log.had_clean_shutdown for log in mgr.all_logs().values())
        assert values(mgr, "b", 0) == [b"one", b"two"]
        assert mgr.load_failures == []


def test_checkpoint_files_are_kafkas_text_format(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 2)
        mgr.produce("t", [(None, b"a"), (None, b"b"), (None, b"c")], partition=1)
        mgr.get_log("t", 1).maybe_increment_log_start_offset(1, "test")
        mgr.flush()
        mgr.checkpoint()
        assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 0\nt 1 3\n"
        assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 0\nt 1 3\n"
        assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\nt 1 1\n"


def test_hard_kill_recovers_from_the_checkpointed_recovery_point(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO / "src")!r})
        from kafkalog.manager import LogManager
        mgr = LogManager.open({str(tmp_path)!r}, config={{"log.initial.task.delay.ms": 0}})
        mgr.create_topic("k", 1, {{"segment.bytes": 2048}})
        for i in range(40):
            mgr.produce("k", [(None, b"%03d" % i + b"." * 100)], partition=0)
            if i == 19:
                mgr.flush()
                mgr.checkpoint()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    checkpointed = dict(offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint").read())
    assert checkpointed[TopicPartition("k", 0)] == 20
    mock_time = MockTime()
    with LogManager.open(tmp_path, scheduler=MockScheduler(mock_time), time=mock_time) as mgr:
        log = mgr.get_log("k", 0)
        assert not log.had_clean_shutdown
        assert log.log_end_offset == 40  # page cache survived the process kill: recovery kept every batch
        assert (
            log.recovery_point == 20
        )  # as Kafka: recovered data counts as flushed only after the next flush
        assert [v[:3] for v in values(mgr, "k", 0) if v is not None] == [b"%03d" % i for i in range(40)]


# --- locking --------------------------------------------------------------------------------------------------


def test_a_second_manager_in_the_same_process_is_refused(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    other = tmp_path / "other"
    with open_manager(tmp_path / "d1", mock_time, scheduler) as mgr:
        mgr.create_topic("t", 1)
        with pytest.raises(LogDirLockedError, match="Failed to acquire lock"):
            LogManager.open([other, tmp_path / "d1"], scheduler=scheduler, time=mock_time)
        # the refused open released what it had locked
        with LogManager.open(other, scheduler=scheduler, time=mock_time):
            pass
        assert mgr.get_log("t", 0).log_end_offset == 0


def test_a_second_process_cannot_open_the_directory(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO / "src")!r})
        from kafkalog.errors import LogDirLockedError
        from kafkalog.manager import LogManager
        try:
            LogManager.open({str(tmp_path)!r})
        except LogDirLockedError as exc:
            print("LOCKED", exc)
            sys.exit(3)
        sys.exit(0)
        """
    )
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 1)
        listing = sorted(p.name for p in tmp_path.rglob("*"))
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert "LOCKED" in proc.stdout and "another process" in proc.stdout
        assert sorted(p.name for p in tmp_path.rglob("*")) == listing
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- high watermark -------------------------------------------------------------------------------------------


def test_high_watermark_follows_the_log_end_by_default(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 1)
        mgr.produce("t", [(None, b"a"), (None, b"b")], partition=0)
        log = mgr.get_log("t", 0)
        assert log.high_watermark == log.log_end_offset == 2
        log.append([(None, b"direct")])
        assert log.high_watermark == 3
        assert values(mgr, "t", 0) == [b"a", b"b", b"direct"]
        log.truncate_to(1)
        assert log.high_watermark == 1


def test_high_watermark_under_caller_control(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler, hw_follows_leo=False) as mgr:
        mgr.create_topic("t", 1)
        mgr.produce("t", [(None, b"a"), (None, b"b"), (None, b"c")], partition=0)
        log = mgr.get_log("t", 0)
        assert log.high_watermark == 0
        assert log.read(0, isolation=FetchIsolation.HIGH_WATERMARK).records.size_in_bytes == 0
        log.update_high_watermark(2)
    doc = json.loads((tmp_path / TOPICS_FILE).read_text())
    assert doc["hw_follows_leo"] is False
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time), hw_follows_leo=False) as mgr:
        assert mgr.get_log("t", 0).high_watermark == 2


# --- background tasks -----------------------------------------------------------------------------------------


def test_background_retention_flush_and_checkpoints(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    cfg = {
        "log.initial.task.delay.ms": 1000,
        "log.retention.check.interval.ms": 1000,
        "log.flush.scheduler.interval.ms": 500,
        "log.flush.offset.checkpoint.interval.ms": 1000,
        "log.flush.start.offset.checkpoint.interval.ms": 1000,
    }
    topic_cfg = {"segment.bytes": 300, "retention.bytes": 600, "flush.ms": 2000, "file.delete.delay.ms": 0}
    with open_manager(tmp_path, mock_time, scheduler, config=cfg) as mgr:
        assert {"kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint"} <= set(
            scheduler.pending()
        )
        mgr.create_topic("r", 1, topic_cfg)
        for i in range(20):
            mgr.produce("r", [(None, b"%02d" % i + b"-" * 60)], partition=0)
        log = mgr.get_log("r", 0)
        segments_before = log.num_log_segments
        assert segments_before > 3 and log.recovery_point < log.log_end_offset
        mock_time.sleep(1500)  # retention + checkpoints ran; flush.ms not reached yet
        assert log.num_log_segments < segments_before
        assert log.size <= 600 + 300
        mock_time.sleep(2500)  # flush.ms passed: the flusher flushed the log
        assert log.recovery_point == log.log_end_offset
        mock_time.sleep(1000)
        checkpointed = dict(offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint").read())
        assert checkpointed[TopicPartition("r", 0)] == log.log_end_offset
        starts = dict(offset_checkpoint(tmp_path / "log-start-offset-checkpoint").read())
        assert starts.get(TopicPartition("r", 0), log.log_start_offset) == log.log_start_offset
    assert scheduler.pending() == [] or all("Producer" not in n for n in scheduler.pending())


def test_manager_config_validation() -> None:
    assert (
        ManagerConfig.from_props({"num.recovery.threads.per.data.dir": "4"}).num_recovery_threads_per_data_dir
        == 4
    )
    with pytest.raises(InvalidConfigurationError, match="unknown"):
        ManagerConfig.from_props({"log.dirz": 1})
    with pytest.raises(InvalidConfigurationError, match="at least 1"):
        ManagerConfig.from_props({"num.recovery.threads.per.data.dir": 0})
    with pytest.raises(InvalidConfigurationError, match="integer"):
        ManagerConfig.from_props({"log.retention.check.interval.ms": "soon"})


# --- several log dirs, failures -------------------------------------------------------------------------------


def test_partitions_spread_over_log_dirs_and_reload_from_each(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    with open_manager(dirs, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 4)
        per_dir = {d: sorted(p.name for p in d.iterdir() if p.is_dir()) for d in dirs}
        assert per_dir[dirs[0]] == ["t-0", "t-2"] and per_dir[dirs[1]] == ["t-1", "t-3"]
        for p in range(4):
            mgr.produce("t", [(None, b"p%d" % p)], partition=p)
    with open_manager(dirs, mock_time, MockScheduler(mock_time)) as mgr:
        assert [values(mgr, "t", p) for p in range(4)] == [[b"p0"], [b"p1"], [b"p2"], [b"p3"]]


def test_an_io_error_takes_only_its_log_dir_offline(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    with open_manager(dirs, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 4)  # t-0, t-2 in d0; t-1, t-3 in d1
        victim = mgr.get_log("t", 0)
        segment = victim.local_log.segments.active_segment

        def disk_full(*args: Any, **kwargs: Any) -> Any:
            raise OSError(28, "No space left on device")

        segment.log.append = disk_full  # type: ignore[method-assign]
        caplog.set_level(logging.ERROR, logger="kafkalog")
        with pytest.raises(KafkaStorageError):
            mgr.produce("t", [(None, b"x")], partition=0)
        assert mgr.offline_dirs == [dirs[0]]
        with pytest.raises(KafkaStorageError):
            victim.append([(None, b"again")])
        with pytest.raises(LogDirNotAvailableError):
            mgr.get_log("t", 2)
        with pytest.raises(KafkaStorageError):
            mgr.all_logs()[TopicPartition("t", 2)].append([(None, b"same dir")])
        mgr.produce("t", [(None, b"fine")], partition=1)
        assert values(mgr, "t", 1) == [b"fine"]
        offline_msgs = [r for r in caplog.records if "offline" in r.getMessage()]
        assert len(offline_msgs) == 1 and "No space left" in offline_msgs[0].getMessage()
        mgr.create_topic("new", 2)  # new partitions go to the online dir only
        assert {log.dir.parent for tp, log in mgr.all_logs().items() if tp.topic == "new"} == {dirs[1]}
    # the offline dir was not marked clean; the healthy one was
    assert not (dirs[0] / ".kafka_cleanshutdown").exists()
    assert (dirs[1] / ".kafka_cleanshutdown").exists()


def test_a_partition_that_fails_to_load_is_skipped_and_reported(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("good", 1)
        mgr.create_topic("bad", 1)
        mgr.produce("good", [(None, b"ok")], partition=0)
        mgr.produce("bad", [(None, b"precious")], partition=0)
    (tmp_path / "bad-0" / "partition.metadata").write_text("garbage")
    (tmp_path / "lost+found").mkdir()
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert [f.path.name for f in mgr.load_failures] == ["bad-0"]
        assert [p.name for p in mgr.ignored_dirs] == ["lost+found"]
        assert values(mgr, "good", 0) == [b"ok"]
        # the failed partition is not silently recreated empty (that would hide its data)
        with pytest.raises(KafkaStorageError, match="failed to load"):
            mgr.get_log("bad", 0)
        with pytest.raises(KafkaStorageError, match="failed to load"):
            mgr.get_or_create_log("bad", 0)
    # a dir that did not load fully gets no clean-shutdown marker (KAFKA-15375)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "bad-0" / "partition.metadata").read_text() == "garbage"


def test_a_partition_that_fails_to_load_keeps_its_checkpoint_entries(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("good", 1, {"segment.bytes": 200})
        mgr.create_topic("bad", 1, {"segment.bytes": 200})
        for _ in range(10):
            mgr.produce("good", [(None, b"g" * 50)], partition=0)
            mgr.produce("bad", [(None, b"b" * 50)], partition=0)
        mgr.get_log("bad", 0).maybe_increment_log_start_offset(4, "test")  # not deleted yet: an entry
    names = (
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    )
    before = {n: dict(offset_checkpoint(tmp_path / n).read()) for n in names}
    bad = TopicPartition("bad", 0)
    assert all(bad in before[n] for n in names) and before["log-start-offset-checkpoint"][bad] == 4
    (tmp_path / "bad-0" / "partition.metadata").write_text("garbage")
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert [f.path.name for f in mgr.load_failures] == ["bad-0"]
        mgr.produce("good", [(None, b"more")], partition=0)
    after = {n: dict(offset_checkpoint(tmp_path / n).read()) for n in names}
    for n in names:  # the failed partition's entries are what they were; the others moved on
        assert after[n][bad] == before[n][bad]
    assert after["recovery-point-offset-checkpoint"][TopicPartition("good", 0)] == 11


def test_stray_directories_do_not_make_every_restart_unclean(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    (tmp_path / "lost+found").mkdir()
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("t", 1)
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    with open_manager(tmp_path, mock_time, MockScheduler(mock_time)) as mgr:
        assert mgr.get_log("t", 0).had_clean_shutdown


def test_a_kafka_data_dir_without_metadata_has_its_topics_inferred(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    from kafkalog.log import Log

    for p in (0, 2):
        with Log.open(tmp_path / f"orders-{p}") as log:
            log.append([(None, b"o%d" % p)])
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        assert mgr.topics() == ["orders"]
        assert mgr.partitions("orders") == [0, 1, 2]
        assert values(mgr, "orders", 2) == [b"o2"]
        assert mgr.get_log("orders", 1).log_end_offset == 0  # created on first use


def test_move_partition_between_log_dirs(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    with open_manager(dirs, mock_time, scheduler, config={"log.delete.delay.ms": 0}) as mgr:
        mgr.create_topic("m", 1, {"segment.bytes": 512})
        for i in range(30):
            mgr.produce("m", [(None, b"%02d" % i * 20)], partition=0)
        mgr.get_log("m", 0).maybe_increment_log_start_offset(5, "test")
        moved = mgr.move_partition("m", 0, dirs[1])
        assert moved.dir == dirs[1] / "m-0"
        assert moved.log_start_offset == 5 and moved.log_end_offset == 30
        assert values(mgr, "m", 0, 5) == [b"%02d" % i * 20 for i in range(5, 30)]
        mgr.produce("m", [(None, b"after")], partition=0)
        mgr.delete_logs()
        assert not any(p.name.startswith("m-0") for p in dirs[0].iterdir())
    with open_manager(dirs, mock_time, MockScheduler(mock_time)) as mgr:
        assert mgr.get_log("m", 0).dir.parent == dirs[1]
        assert values(mgr, "m", 0, 5)[-1] == b"after"


# --- producing ------------------------------------------------------------------------------------------------


def test_produce_places_keys_like_kafkas_default_partitioner(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    with open_manager(tmp_path, mock_time, scheduler) as mgr:
        mgr.create_topic("keys", 5)
        keys = [f"user-{i}".encode() for i in range(100)]
        infos = mgr.produce("keys", [SimpleRecord(key=k, value=k) for k in keys])
        assert sum(i.num_messages for i in infos.values()) == 100
        for p in range(5):
            expected = [k for k in keys if partition_for_key(k, 5) == p]
            assert values(mgr, "keys", p) == expected
        nulls = [mgr.partition_for_key("keys", None) for _ in range(3000)]
        assert set(nulls) == {0, 1, 2} or len(set(nulls)) == 3
        assert nulls[:1000] == [nulls[0]] * 1000


def test_append_prebuilt_batches_and_close_is_idempotent(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    mgr = open_manager(tmp_path, mock_time, scheduler)
    mgr.create_topic("t", 1)
    info = mgr.append("t", 0, MemoryRecords.build([(b"k", b"v1"), (b"k", b"v2")]))
    assert (info.first_offset, info.last_offset) == (0, 1)
    mgr.close()
    mgr.close()
    assert mgr.closed
    with pytest.raises(Exception, match="closed"):
        mgr.get_log("t", 0)
    if os.name == "posix":
        with LogManager.open(tmp_path, scheduler=scheduler, time=mock_time) as again:
            assert values(again, "t", 0) == [b"v1", b"v2"]


JAVA_LOCKER = """
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;

public class Locker {
    public static void main(String[] args) throws Exception {
        FileChannel ch = new RandomAccessFile(args[0], "rw").getChannel();
        FileLock lock = ch.tryLock();   // what Kafka's LogManager does with <log dir>/.lock
        System.out.println(lock == null ? "BUSY" : "LOCKED");
        System.out.flush();
        if (lock != null && args.length > 1) {
            System.in.read();
        }
    }
}
"""


@pytest.mark.interop
def test_locks_exclude_a_kafka_broker_both_ways(
    tmp_path: Path, mock_time: MockTime, scheduler: MockScheduler
) -> None:
    import shutil

    if shutil.which("java") is None:
        pytest.skip("no Java runtime on PATH")
    src = tmp_path / "Locker.java"
    src.write_text(JAVA_LOCKER)
    data = tmp_path / "data"
    data.mkdir()
    lock = str(data / ".lock")
    with open_manager(data, mock_time, scheduler):
        probe = subprocess.run(["java", str(src), lock], capture_output=True, text=True, timeout=120)
        assert probe.stdout.strip() == "BUSY", probe.stderr
    holder = subprocess.Popen(
        ["java", str(src), lock, "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "LOCKED"
        with pytest.raises(LogDirLockedError):
            LogManager.open(data, scheduler=scheduler, time=mock_time)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
    with open_manager(data, mock_time, scheduler):
        pass
