"""One reader, several byte sources: a copy of a log dir in object storage reads exactly as the local directory
it was copied from (offsets, HW, LSO, aborted transactions, timestamps, batches), a torn last segment ends the
data as recovery would, and a data directory or prefix that does not exist is an error, not zero partitions."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kafkalog.errors import LogDirNotFoundError, RemoteResourceNotFoundError, UnknownTopicOrPartitionError
from kafkalog.log import Log
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.objstore import MemoryStore, open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.readonly.copies import LogDirCopy
from kafkalog.readonly.local import LocalPartitionSource
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.records import ControlRecordType
from kafkalog.records.columnar import iter_columnar

from .conftest import LogFactory
from .helpers import append_end_txn_marker, append_transactional
from .test_readonly import SMALL, fill, kafka_spec


def copy_to_store(data_dir: Path, store: MemoryStore, prefix: str = "") -> None:
    """Every file under ``data_dir`` as an object (what ``aws s3 sync`` of a log dir makes)."""
    for path in sorted(data_dir.rglob("*")):
        if path.is_file():
            key = path.relative_to(data_dir).as_posix()
            store.put(f"{prefix}/{key}" if prefix else key, path.read_bytes())


def rows(rl: ReadOnlyLog, start: int, end: int) -> list[tuple[Any, ...]]:
    out = []
    for chunk in rl.iter_batch_chunks(start, end):
        for batch in iter_columnar(chunk.data, start_offset=start, end_offset=end):
            out.extend(tuple(r.values()) for r in batch.to_pylist())
    return out


def summary(rl: ReadOnlyLog) -> dict[str, Any]:
    leo = rl.log_end_offset
    return {
        "segments": [(s.base_offset, s.size_bytes) for s in rl.segments],
        "offsets": (rl.log_start_offset, leo, rl.high_watermark, rl.last_stable_offset),
        "aborted": rl.aborted_transactions(0, leo),
        "by_time": [rl.offset_for_timestamp(t) for t in (0, 1_000, 1_005, 1_030, 10**15)],
        "hints": [rl.offset_hint_for_timestamp(t) for t in (0, 1_005, 1_030)],
        "rows": rows(rl, rl.log_start_offset, leo),
        "middle": rows(rl, 7, min(31, leo)),
        "read": rl.read(13, 300).buffer.tobytes() if leo > 13 else b"",
    }


def transactional_log(make_log: LogFactory, mock_time: Any) -> Log:
    log = make_log(SMALL)
    fill(log, 6)
    committed = append_transactional(log, 7, 0, mock_time)
    aborted = append_transactional(log, 8, 0, mock_time)
    committed(3)
    aborted(2)
    fill(log, 10, ts=1_020)
    aborted(2)
    append_end_txn_marker(log, 7, 0, ControlRecordType.COMMIT, mock_time.milliseconds())
    append_end_txn_marker(log, 8, 0, ControlRecordType.ABORT, mock_time.milliseconds())
    open_txn = append_transactional(log, 9, 0, mock_time)
    open_txn(2)
    fill(log, 60, ts=1_040)
    log.update_high_watermark(log.log_end_offset - 5)
    return log


def test_a_copy_in_object_storage_reads_as_the_local_directory(
    make_log: LogFactory, log_dir: Path, mock_time: Any
) -> None:
    log = transactional_log(make_log, mock_time)
    log.flush()
    tp = TopicPartition("test_topic", 1)
    offset_checkpoint(log_dir.parent / "replication-offset-checkpoint").write([(tp, log.high_watermark)])
    offset_checkpoint(log_dir.parent / "log-start-offset-checkpoint").write([(tp, 3)])
    assert len(list(log_dir.glob("*.log"))) > 3
    store = MemoryStore(url="s3://bucket/backup")
    copy_to_store(log_dir.parent, store, "cluster1")

    local = ReadOnlyDataDir(log_dir.parent)
    remote = ReadOnlyDataDir("s3://bucket/backup/cluster1", layout=LogDirCopy(store, "cluster1"))
    assert remote.topics() == local.topics() == ["test_topic"]
    assert remote.partitions("test_topic") == [1]
    assert remote.partition_names() == {tp: "s3://bucket/backup/cluster1/test_topic-1"}
    ours, theirs = remote.log("test_topic", 1), local.log("test_topic", 1)
    expected = summary(theirs)
    assert expected["offsets"][0] == 3 and expected["offsets"][2] == log.high_watermark
    assert expected["aborted"] and expected["rows"]
    assert summary(ours) == expected
    assert repr(ours) == "ReadOnlyLog('s3://bucket/backup/cluster1/test_topic-1')"
    with pytest.raises(UnknownTopicOrPartitionError):
        remote.log("test_topic", 0)
    log.close()


def test_a_store_rooted_at_the_log_dir(make_log: LogFactory, log_dir: Path, mock_time: Any) -> None:
    """``ReadOnlyDataDir(url, store=...)``: the store is rooted at the URL; the layout is detected."""
    log = transactional_log(make_log, mock_time)
    log.flush()
    store = MemoryStore(url="memory://copy")
    copy_to_store(log_dir.parent, store)
    remote = ReadOnlyDataDir("memory://copy", store=store)
    assert remote.is_remote and repr(remote) == "ReadOnlyDataDir('memory://copy')"
    assert summary(remote.log("test_topic", 1)) == summary(ReadOnlyLog.open(log_dir))
    log.close()


@pytest.mark.parametrize("cut", [1, 17, 61, 200])
def test_a_torn_last_segment_ends_the_data_as_recovery_would(
    make_log: LogFactory, log_dir: Path, cut: int
) -> None:
    """A copy taken while a broker appended: the last segment's partial tail is not an error."""
    log = make_log(SMALL)
    fill(log, 40)
    log.close()
    last = sorted(log_dir.glob("*.log"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[: len(data) - cut])
    store = MemoryStore()
    copy_to_store(log_dir.parent, store)
    local = ReadOnlyLog.open(log_dir)
    ours = ReadOnlyDataDir("memory://", store=store).log("test_topic", 1)
    assert ours.log_end_offset == local.log_end_offset < 160
    assert summary(ours) == summary(local)
    with Log.open(log_dir, SMALL) as recovered:  # what Kafka's recovery keeps
        assert recovered.log_end_offset == ours.log_end_offset


def test_a_prefix_or_directory_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    store = MemoryStore({"data/orders-0/00000000000000000000.log": b""}, url="memory://")
    with pytest.raises(RemoteResourceNotFoundError, match="memory://dtaa"):
        ReadOnlyDataDir("memory://dtaa", layout=LogDirCopy(store, "dtaa")).topics()
    assert ReadOnlyDataDir("memory://data", layout=LogDirCopy(store, "data")).topics() == ["orders"]
    with pytest.raises(LogDirNotFoundError, match="no such path"):
        ReadOnlyDataDir(tmp_path / "mistyped").topics()
    with pytest.raises(LogDirNotFoundError):
        ReadOnlyDataDir(tmp_path / "mistyped").log("orders", 0)
    (tmp_path / "empty").mkdir()
    assert ReadOnlyDataDir(tmp_path / "empty").topics() == []
    assert ReadOnlyDataDir(f"file://{tmp_path}/empty").topics() == []


def test_local_source_and_pickling(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 20)
    source = LocalPartitionSource(log_dir)
    files = source.list_files()
    assert files["00000000000000000000.log"] == (log_dir / "00000000000000000000.log").stat().st_size
    assert set(files) == {p.name for p in log_dir.iterdir()}
    with source.open("00000000000000000000.log") as f:
        buf = np.zeros(100, np.uint8)
        assert f.readinto(memoryview(buf), 10) == 100
        assert (
            buf.tobytes() == f.pread(100, 10) == (log_dir / "00000000000000000000.log").read_bytes()[10:110]
        )
    rl = ReadOnlyLog(source, topic_partition=TopicPartition("test_topic", 1))
    assert rl.log_end_offset == log.log_end_offset
    clone = pickle.loads(pickle.dumps(ReadOnlyLog.open(log_dir)))
    assert clone.dir == log_dir and clone.log_end_offset == log.log_end_offset
    log.close()


@pytest.mark.interop
def test_kafka_written_segment_from_a_store(kafka_java: Any, tmp_path: Path) -> None:
    directory = tmp_path / "kafka-0"
    directory.mkdir()
    kafka_java.write(kafka_spec(), directory / "00000000000000000000.log")
    store = MemoryStore()
    copy_to_store(tmp_path, store)
    ours = ReadOnlyDataDir("memory://", store=store).log("kafka", 0)
    local = ReadOnlyLog.open(directory)
    assert (ours.log_start_offset, ours.log_end_offset, ours.last_stable_offset) == (0, 28, 28)
    assert summary(ours) == summary(local)


# --- tiered-storage archives ----------------------------------------------------------------------------------

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"


def archive(log_dir: Path, store: MemoryStore, layout: str, *, kek: Any = None, **options: Any) -> int:
    """Archive every rolled segment of ``log_dir``; returns the archive's end (last offset + 1)."""
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment, write_local_tiered_segment

    segments = segments_from_log_dir(log_dir)
    assert len(segments) > 3
    for i, seg in enumerate(segments):
        if layout == "aiven":
            write_aiven_segment(
                store,
                seg,
                topic="test_topic",
                topic_id=TOPIC_ID,
                partition=1,
                encryption=None if kek is None else ("kek-1", kek.public_key()),
                event_timestamp_ms=10_000 + i,
                **options,
            )
        else:
            write_local_tiered_segment(store, seg, topic="test_topic", topic_id=TOPIC_ID, partition=1)
    return segments[-1].end_offset + 1


@pytest.fixture(scope="module")
def kek() -> tuple[Any, str]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key, pem.decode()


@pytest.mark.parametrize(
    "layout,options",
    [
        ("aiven", {}),
        ("aiven", {"compression": True, "encrypt": True, "chunk_size": 500}),
        ("aiven", {"old_style_manifest": True, "chunk_size": 700}),
        ("local-tiered", {}),
    ],
)
def test_an_archive_reads_as_the_segments_it_holds(
    make_log: LogFactory,
    log_dir: Path,
    mock_time: Any,
    kek: tuple[Any, str],
    layout: str,
    options: dict[str, Any],
) -> None:
    """Offsets, rows, read_committed's aborted transactions and timestamp lookups of an archive are those of
    the local log up to the archive's end (its HW: an archive has no checkpoints)."""
    log = transactional_log(make_log, mock_time)
    log.flush()
    store = MemoryStore(url=f"memory://archive-{layout}")
    encrypt = options.pop("encrypt", False)
    end = archive(log_dir, store, layout, kek=kek[0] if encrypt else None, **options)
    remote = ReadOnlyDataDir(store.url, store=store, key_ring={"kek-1": kek[1]} if encrypt else None)
    assert remote.topics() == ["test_topic"] and remote.partitions("test_topic") == [1]
    ours = remote.log("test_topic", 1)
    local = ReadOnlyLog.open(log_dir, log_start_offset=0)
    assert (ours.log_start_offset, ours.log_end_offset, ours.high_watermark) == (0, end, end)
    assert ours.last_stable_offset <= end
    assert rows(ours, 0, end) == rows(local, 0, end)
    assert rows(ours, 9, end - 3) == rows(local, 9, end - 3)
    shipped = pickle.loads(pickle.dumps(ours.restricted(9, end - 3)))  # what a Spark task carries
    assert shipped is not None and rows(shipped, 9, end - 3) == rows(local, 9, end - 3)
    lo = ours.segments[1].base_offset
    one = pickle.loads(pickle.dumps(ours.restricted(lo, lo + 3)))
    assert [s.base_offset for s in one.segments] == [lo] and rows(one, lo, lo + 3) == rows(local, lo, lo + 3)
    assert ours.aborted_transactions(0, end) == local.aborted_transactions(0, end)
    for t in (0, 1_000, 1_020, 1_041):
        assert ours.offset_for_timestamp(t) == local.offset_for_timestamp(t, upper_offset=end)
    assert [s.base_offset for s in ours.segments] == [
        s.base_offset for s in local.segments if s.base_offset < end
    ]
    log.close()


def test_whole_history_a_local_dir_and_its_archive(
    make_log: LogFactory, log_dir: Path, mock_time: Any
) -> None:
    """``tiered_path``: the older segments only in the archive, the recent ones local, read as one log."""
    log = transactional_log(make_log, mock_time)
    log.close()
    tp = TopicPartition("test_topic", 1)
    offset_checkpoint(log_dir.parent / "replication-offset-checkpoint").write([(tp, 60)])
    full = summary(ReadOnlyLog.open(log_dir))
    store = open_store("memory://history")
    archive(log_dir, store, "aiven")  # type: ignore[arg-type]
    bases = sorted(log_dir.glob("*.log"))
    for old in bases[:3]:  # local retention deleted the oldest segments: they are only archived now
        for path in log_dir.glob(old.stem + ".*"):
            path.unlink()
    try:
        history = ReadOnlyDataDir(log_dir.parent, tiered_path="memory://history")
        assert history.partitions("test_topic") == [1]
        assert summary(history.log("test_topic", 1)) == full
        assert ReadOnlyLog.open(log_dir).log_start_offset > 0  # the local log alone has lost them
    finally:
        forget_memory_store("history")


def test_an_archived_segment_straddling_the_first_local_offset_is_read_once(tmp_path: Path) -> None:
    """``tiered_path`` where the archive's segment boundaries are not the local ones (the leader that uploaded
    rolled elsewhere): the archived segment holding the first local offset is read only below it."""
    from kafkalog.log import LogConfig
    from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment

    local_dir = tmp_path / "local" / "test_topic-1"
    leader_dir = tmp_path / "leader" / "test_topic-1"
    local = Log.open(local_dir, SMALL)
    leader = Log.open(leader_dir, LogConfig(segment_bytes=5000, index_interval_bytes=128))
    for log in (local, leader):
        fill(log, 60)
        log.roll()
        log.close()
    local_bases = sorted(int(p.stem) for p in local_dir.glob("*.log"))
    archived = [s for s in segments_from_log_dir(leader_dir) if s.end_offset >= 0]
    first_local = next(b for b in local_bases if all(b != s.base_offset for s in archived) and b > 0)
    straddling = [s for s in archived if s.base_offset < first_local <= s.end_offset]
    assert straddling  # the fixture makes the case
    name = f"straddle-{tmp_path.name}"
    store = open_store(f"memory://{name}")
    try:
        for seg in archived:
            if seg.base_offset < first_local:
                write_aiven_segment(store, seg, topic="test_topic", topic_id=TOPIC_ID, partition=1)
        for base in local_bases:  # local retention deleted what is below first_local
            if base < first_local:
                for path in local_dir.glob(f"{base:020d}.*"):
                    path.unlink()
        history = ReadOnlyDataDir(local_dir.parent, tiered_path=f"memory://{name}").log("test_topic", 1)
        end = history.log_end_offset
        assert end == 240
        offsets = [r[0] for r in rows(history, 0, end)]
        assert offsets == list(range(end))
        assert [r[0] for r in rows(history, first_local - 3, first_local + 3)] == list(
            range(first_local - 3, first_local + 3)
        )
    finally:
        forget_memory_store(name)
