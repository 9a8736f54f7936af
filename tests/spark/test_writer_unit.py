"""The kafkalog sink without Spark: options, column checks, staging bytes, partitioning, the atomic commit,
journal replay after simulated crashes, streaming batch-id deduplication and the staging sweep."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kafkalog.errors import CorruptRecordError, LogDirLockedError
from kafkalog.log.config import LogConfig
from kafkalog.log.types import FetchIsolation
from kafkalog.manager import LogManager
from kafkalog.partitioner import NullKeyPartitioner, partition_for_key
from kafkalog.records import Compression, MemoryRecords, MemoryRecordsBuilder
from kafkalog.spark import commit as commit_mod
from kafkalog.spark.commit import (
    SinkBatch,
    abort_staged,
    commit_staged,
    journal_dir,
    last_committed_batch,
    replay_pending,
    sweep_stale_staging,
)
from kafkalog.spark.sink_layout import StagedFile, staging_root
from kafkalog.spark.sink_options import (
    HEADERS_TYPE,
    SinkError,
    SinkOptions,
    TopicMeta,
    load_topic_metadata,
    plan_columns,
)
from kafkalog.spark.staging import StickyNullKeys, TaskStager

HEADER_ARROW = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
NOW = int(time.time() * 1000)


def rows_batch(
    n: int,
    *,
    start: int = 0,
    keys: bool = True,
    partition: list[int | None] | None = None,
    topic: list[str | None] | None = None,
    headers: bool = False,
    timestamps: bool = True,
    value_size: int = 20,
) -> pa.RecordBatch:
    cols: dict[str, pa.Array] = {}
    if keys:
        cols["key"] = pa.array([None if i % 10 == 9 else f"user-{i % 37}" for i in range(start, start + n)])
    cols["value"] = pa.array(
        [
            None if i % 13 == 12 else f"v{i:08d}".encode().ljust(value_size, b"x")
            for i in range(start, start + n)
        ],
        pa.binary(),
    )
    if partition is not None:
        cols["partition"] = pa.array(partition, pa.int32())
    if topic is not None:
        cols["topic"] = pa.array(topic, pa.string())
    if headers:
        cols["headers"] = pa.array(
            [
                None if i % 3 else [{"key": "h", "value": str(i).encode()}, {"key": "n", "value": None}]
                for i in range(start, start + n)
            ],
            HEADER_ARROW,
        )
    if timestamps:
        cols["timestamp"] = pa.array(
            [(NOW - 1000 + i) * 1000 for i in range(start, start + n)], pa.timestamp("us", tz="UTC")
        )
    return pa.record_batch(list(cols.values()), names=list(cols))


def plan_for(batch: pa.RecordBatch, topic: str | None = "t") -> Any:
    kinds = {
        pa.string(): "string",
        pa.binary(): "binary",
        pa.int32(): "int",
        HEADER_ARROW: HEADERS_TYPE,
    }
    cols = {f.name: ("timestamp" if pa.types.is_timestamp(f.type) else kinds[f.type]) for f in batch.schema}
    return plan_columns(cols, topic)


def make_topic(data: Path, topic: str = "t", partitions: int = 3, **config: Any) -> None:
    with LogManager.open(data, background=False) as mgr:
        mgr.create_topic(topic, partitions, config or None)


def stage(
    data: Path, batches: list[pa.RecordBatch], *, job: str = "job1", task: int = 0, **opts: str
) -> list[StagedFile]:
    options = SinkOptions.parse({"path": str(data), "topic": "t", **opts})
    stager = TaskStager(
        options,
        plan_for(batches[0], options.topic),
        staging_root(data) / job / f"task{task}",
        task_index=task,
    )
    stager.add_batches(batches)
    return stager.finish()


def read_all(data: Path, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None, int]]:
    out = []
    with LogManager.open(data, background=False) as mgr:
        log = mgr.get_log(topic, partition)
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            recs = mgr.read(topic, partition, offset, 1 << 22, FetchIsolation.LOG_END)
            for batch in recs.batches():
                for r in batch:
                    if r.offset >= offset:
                        out.append((r.offset, r.key, r.value, r.timestamp))
                offset = batch.last_offset + 1
    return out


# --- options and columns -----------------------------------------------------------------------------------


def test_options_parse_and_errors(tmp_path: Path) -> None:
    opts = SinkOptions.parse(
        {
            "PATH": str(tmp_path),
            "Topic": "events",
            "createTopics": "TRUE",
            "createTopics.partitions": "4",
            "createTopics.config.compression.type": "zstd",
            "kafka.compression.type": "lz4",
        }
    )
    assert opts.topic == "events" and opts.create_topics and opts.create_partitions == 4
    assert opts.create_config == {"compression.type": "zstd"} and opts.compression is Compression.LZ4
    with pytest.raises(SinkError, match="data directory"):
        SinkOptions.parse({})
    with pytest.raises(SinkError, match="compression"):
        SinkOptions.parse({"path": "x", "kafka.compression.type": "brotli"})
    with pytest.raises(SinkError, match="createTopics"):
        SinkOptions.parse({"path": "x", "createTopics": "maybe"})
    with pytest.raises(SinkError, match=r"createTopics\.config"):
        SinkOptions.parse({"path": "x", "createTopics.config.no.such": "1"})
    with pytest.raises(SinkError, match="illegal"):
        SinkOptions.parse({"path": "x", "topic": "bad/name"})


def test_plan_columns_mirrors_kafka_sink() -> None:
    plan = plan_columns(
        {"Key": "string", "VALUE": "binary", "topic": "string", "partition": "int", "offset": "bigint",
         "headers": "array<struct<key:string,value:binary>>", "timestamp": "timestamp"},
        None,
    )  # fmt: skip
    assert (plan.key, plan.value, plan.topic, plan.partition, plan.headers, plan.timestamp) == (
        "Key", "VALUE", "topic", "partition", "headers", "timestamp",
    )  # fmt: skip
    assert plan_columns({"value": "string", "topic": "int"}, "t").topic is None  # the option overrides
    with pytest.raises(SinkError, match="required attribute 'value'"):
        plan_columns({"key": "binary"}, "t")
    with pytest.raises(SinkError, match="topic option required"):
        plan_columns({"value": "binary"}, None)
    for col, typ in [("value", "int"), ("key", "bigint"), ("partition", "bigint"), ("topic", "binary"),
                     ("headers", "array<string>"), ("timestamp", "bigint")]:  # fmt: skip
        cols = {"value": "binary", col: typ}
        with pytest.raises(SinkError, match=f"{col} attribute unsupported type"):
            plan_columns(cols, None if col == "topic" else "t")


def test_topic_metadata_from_manager_and_dirs(tmp_path: Path) -> None:
    make_topic(tmp_path, "a", 2, **{"compression.type": "zstd"})
    (tmp_path / "b-0").mkdir()
    (tmp_path / "b-4").mkdir()
    (tmp_path / "c-0.0123abcd-delete").mkdir()
    meta = load_topic_metadata(tmp_path)
    assert meta["a"].partitions == 2 and meta["a"].config.compression_type == "zstd"
    assert meta["b"].partitions == 5 and "c" not in meta


# --- staging -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "zstd", "gzip", "lz4", "snappy"])
def test_staged_batches_are_what_the_builder_writes(tmp_path: Path, codec: str) -> None:
    batch = rows_batch(3000, headers=True, partition=[0] * 3000)
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "t", "batchBytes": "20000"})
    stager = TaskStager(
        options, plan_for(batch), tmp_path / "task",
        metadata={"t": TopicMeta(1, LogConfig.from_props({"compression.type": codec}))},
    )  # fmt: skip
    stager.add(batch.slice(0, 1000))
    stager.add(batch.slice(1000))
    (staged,) = stager.finish()
    records = MemoryRecords((tmp_path / staged.path).read_bytes())
    records.ensure_valid()
    batches = list(records.batches())
    assert len(batches) == staged.batches > 1 and staged.records == 3000
    got = []
    for b in batches:
        assert b.base_offset == 0 and b.producer_id == -1 and b.compression is Compression.from_name(codec)
        builder = MemoryRecordsBuilder(compression=Compression.from_name(codec))
        recs = list(b)
        for r in recs:
            builder.append_with_offset(r.offset, r.timestamp, r.key, r.value, r.headers)
        assert builder.build().to_bytes() == b.to_bytes()
        got.extend(recs)
    expected = batch.to_pylist()
    assert [r.value for r in got] == [e["value"] for e in expected]
    assert [r.key for r in got] == [None if e["key"] is None else e["key"].encode() for e in expected]
    assert [r.timestamp for r in got] == [int(e["timestamp"].timestamp() * 1000) for e in expected]
    assert [tuple((h.key, h.value) for h in r.headers) for r in got] == [
        () if e["headers"] is None else tuple((h["key"], h["value"]) for h in e["headers"]) for e in expected
    ]


def test_default_partitioner_keys_and_sticky_null_keys(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 5)
    batch = rows_batch(2500)
    files = stage(tmp_path, [batch], task=2)
    by_partition = {
        f.partition: list(MemoryRecords((tmp_path / f.path).read_bytes()).records()) for f in files
    }
    expected_null = NullKeyPartitioner(5, sticky_records=1000, start=2)
    placed: dict[int, list[bytes | None]] = {p: [] for p in range(5)}
    for row in batch.to_pylist():
        key = row["key"]
        p = expected_null.next_partition() if key is None else partition_for_key(key.encode(), 5)
        placed[p].append(row["value"])
    for p in range(5):
        assert [r.value for r in by_partition.get(p, [])] == placed[p]


def test_sticky_null_keys_matches_partitioner() -> None:
    sticky = StickyNullKeys(3, sticky_records=4, start=1)
    ref = NullKeyPartitioner(3, sticky_records=4, start=1)
    got = np.concatenate([sticky.assign(n) for n in (1, 5, 0, 7, 3)])
    assert got.tolist() == [ref.next_partition() for _ in range(16)]


def test_explicit_partitions_topics_and_row_errors(tmp_path: Path) -> None:
    make_topic(tmp_path, "a", 2)
    make_topic(tmp_path, "b", 3)
    options = SinkOptions.parse({"path": str(tmp_path)})
    batch = rows_batch(6, topic=["a", "b", "a", "b", "b", "a"], partition=[1, 2, None, 0, None, 1])
    stager = TaskStager(options, plan_for(batch, None), tmp_path / "s" / "t0")
    stager.add(batch)
    files = {(f.topic, f.partition): f.records for f in stager.finish()}
    assert files[("a", 1)] >= 2 and files[("b", 2)] >= 1 and files[("b", 0)] >= 1
    assert sum(files.values()) == 6

    def fails(b: pa.RecordBatch, match: str, topic: str | None = None) -> None:
        opts = {"path": str(tmp_path)} if topic is None else {"path": str(tmp_path), "topic": topic}
        st = TaskStager(SinkOptions.parse(opts), plan_for(b, topic), tmp_path / "s" / "x")
        with pytest.raises(SinkError, match=match):
            st.add(b)
        st.abort()
        assert not (tmp_path / "s" / "x").exists()

    fails(rows_batch(2, topic=["a", None]), "null topic")
    fails(rows_batch(2, topic=["a", "zz"]), "does not exist")
    fails(rows_batch(2, partition=[0, 2]), "invalid partition 2", "a")
    fails(rows_batch(2, partition=[-1, 0]), "invalid partition -1", "a")
    bad_ts = pa.record_batch(
        [pa.array([b"v"]), pa.array([-5000], pa.timestamp("us", tz="UTC"))], names=["value", "timestamp"]
    )
    fails(bad_ts, "invalid timestamp", "a")
    future = pa.record_batch(
        [pa.array([b"v"]), pa.array([(NOW + 2 * 3600_000) * 1000], pa.timestamp("us", tz="UTC"))],
        names=["value", "timestamp"],
    )
    fails(future, "out of range", "a")
    big = pa.record_batch([pa.array([b"x" * (2 << 20)])], names=["value"])
    fails(big, "max.message.bytes", "a")


def test_compacted_topic_needs_keys_and_null_header_keys_fail(tmp_path: Path) -> None:
    make_topic(tmp_path, "c", 1, **{"cleanup.policy": "compact"})
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "c"})
    batch = rows_batch(20)
    st = TaskStager(options, plan_for(batch, "c"), tmp_path / "s" / "t")
    with pytest.raises(SinkError, match="without key"):
        st.add(batch)
    hdr = pa.array([[{"key": None, "value": b"1"}]], HEADER_ARROW)
    b2 = pa.record_batch([pa.array([b"v"]), hdr], names=["value", "headers"])
    st2 = TaskStager(
        SinkOptions.parse({"path": str(tmp_path), "topic": "c"}), plan_for(b2, "c"), tmp_path / "s" / "u"
    )
    with pytest.raises(SinkError, match="null header key"):
        st2.add(b2)


# --- commit ------------------------------------------------------------------------------------------------


def commit(
    data: Path, files: list[StagedFile], job: str = "job1", sink: SinkBatch | None = None, **opts: str
) -> Any:
    options = SinkOptions.parse({"path": str(data), "topic": "t", **opts})
    return commit_staged(options, job, files, cleanup=[f".kafkalog-spark/staging/{job}"], sink=sink)


def test_commit_appends_each_partition_contiguously(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 3)
    with LogManager.open(tmp_path, background=False) as mgr:  # something already in partition 1
        mgr.produce("t", [(b"x", b"before")], partition=1)
    files = stage(tmp_path, [rows_batch(500)], task=0) + stage(tmp_path, [rows_batch(700, start=500)], task=1)
    result = commit(tmp_path, files)
    assert result.records == 1200
    totals: dict[int, int] = {}
    for f in files:
        totals[f.partition] = totals.get(f.partition, 0) + f.records
    for r in result.partitions:
        assert r.last_offset - r.first_offset + 1 == r.records == totals[r.partition]
        assert r.first_offset == (1 if r.partition == 1 else 0)
        got = read_all(tmp_path, "t", r.partition)
        offsets = [o for o, *_ in got]
        assert offsets == list(range(len(offsets)))
    assert not staging_root(tmp_path).joinpath("job1").exists()
    assert not list(journal_dir(tmp_path).glob("*.json"))
    # values per partition keep the task order: task 0's rows, then task 1's
    all_values = [v for p in range(3) for _, _, v, _ in read_all(tmp_path, "t", p)]
    assert len(all_values) == 1201


def test_commit_keeps_the_topic_codec_without_reencoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path, "t", 1, **{"compression.type": "zstd"})
    files = stage(tmp_path, [rows_batch(2000, partition=[0] * 2000)])
    assert files[0].compression == int(Compression.ZSTD)
    from kafkalog.records import builder

    monkeypatch.setattr(builder.MemoryRecordsBuilder, "build", lambda self: pytest.fail("re-encoded"))
    commit(tmp_path, files)
    with LogManager.open(tmp_path, background=False) as mgr:
        recs = mgr.read("t", 0, 0, 1 << 22, FetchIsolation.LOG_END)
        assert {b.compression for b in recs.batches()} == {Compression.ZSTD}
        assert mgr.get_log("t", 0).log_end_offset == 2000


def test_unknown_topic_refused_unless_created(tmp_path: Path) -> None:
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "new"})
    batch = rows_batch(10)
    with pytest.raises(SinkError, match="does not exist"):
        TaskStager(options, plan_for(batch, "new"), tmp_path / "x").add(batch)
    opts = {
        "createTopics": "true",
        "createTopics.partitions": "4",
        "createTopics.config.compression.type": "lz4",
    }
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "new", **opts})
    st = TaskStager(options, plan_for(batch, "new"), staging_root(tmp_path) / "j" / "t")
    st.add(batch)
    files = st.finish()
    assert {f.compression for f in files} == {int(Compression.LZ4)}
    commit_staged(options, "j", files, cleanup=[".kafkalog-spark/staging/j"])
    with LogManager.open(tmp_path, background=False) as mgr:
        assert mgr.num_partitions("new") == 4 and mgr.topic_config("new").compression_type == "lz4"
        assert sum(mgr.get_log("new", p).log_end_offset for p in range(4)) == 10


def test_precheck_failure_appends_nothing(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 3)
    files = stage(tmp_path, [rows_batch(300)])
    victim = tmp_path / files[-1].path
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF
    victim.write_bytes(raw)
    with pytest.raises(CorruptRecordError, match="CRC"):
        commit(tmp_path, files)
    with LogManager.open(tmp_path, background=False) as mgr:
        assert all(mgr.get_log("t", p).log_end_offset == 0 for p in range(3))
    assert not staging_root(tmp_path).joinpath("job1").exists()
    assert not list(journal_dir(tmp_path).glob("*.json"))


class Crash(Exception):
    pass


def crash_after(monkeypatch: pytest.MonkeyPatch, appends: int) -> None:
    """Make LogManager.append raise after ``appends`` successful appends (a process dying mid-commit)."""
    real = LogManager.append
    count = {"n": 0}

    def append(self: LogManager, *args: Any, **kw: Any) -> Any:
        if count["n"] >= appends:
            raise Crash("simulated crash")
        count["n"] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(LogManager, "append", append)


@pytest.mark.parametrize("appends", [0, 1, 3, 99])
def test_crash_mid_commit_rolls_forward_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, appends: int
) -> None:
    make_topic(tmp_path, "t", 2)
    files = stage(tmp_path, [rows_batch(1500, value_size=200)], batchBytes="8192")
    assert sum(f.batches for f in files) > 4
    expected = {p: [] for p in range(2)}  # type: dict[int, list[bytes | None]]
    for f in files:
        expected[f.partition] += [r.value for r in MemoryRecords((tmp_path / f.path).read_bytes()).records()]
    crash_after(monkeypatch, appends)
    if appends == 99:  # crash after every append, before the journal is deleted
        monkeypatch.setattr(
            commit_mod, "finish_journal", lambda *a: (_ for _ in ()).throw(Crash("after appends"))
        )
    with pytest.raises(Crash):
        commit(tmp_path, files)
    monkeypatch.undo()
    assert len(list(journal_dir(tmp_path).glob("*.json"))) == 1
    # the next LogManager.open rolls the journal forward before anything else can append
    with LogManager.open(tmp_path, background=False) as mgr:
        assert not list(journal_dir(tmp_path).glob("*.json"))
        assert replay_pending(mgr) == []
    for p in range(2):
        got = read_all(tmp_path, "t", p)
        assert [o for o, *_ in got] == list(range(len(expected[p])))
        assert [v for _, _, v, _ in got] == expected[p]
    assert not staging_root(tmp_path).joinpath("job1").exists()


def test_abort_drops_staging_but_completes_a_decided_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path, "t", 1)
    options = SinkOptions.parse({"path": str(tmp_path), "topic": "t"})
    files = stage(tmp_path, [rows_batch(50)])
    abort_staged(options, [".kafkalog-spark/staging/job1"])
    assert not staging_root(tmp_path).joinpath("job1").exists()
    files = stage(tmp_path, [rows_batch(50)], job="job2")
    crash_after(monkeypatch, 0)
    with pytest.raises(Crash):
        commit(tmp_path, files, job="job2")
    monkeypatch.undo()
    abort_staged(options, [".kafkalog-spark/staging/job2"])  # Spark aborts after a failed commit
    assert len(read_all(tmp_path, "t", 0)) == 50


def test_streaming_batch_ids_are_committed_once(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 1)
    for attempt in range(2):  # the second run replays batch 0 after a restart
        files = stage(tmp_path, [rows_batch(10)], job=f"b0-{attempt}")
        res = commit(tmp_path, files, job=f"b0-{attempt}", sink=SinkBatch("q1", 0))
        assert res.skipped == (attempt == 1)
    assert last_committed_batch(tmp_path, "q1") == 0
    files = stage(tmp_path, [rows_batch(5)], job="b1")
    commit(tmp_path, files, job="b1", sink=SinkBatch("q1", 1))
    files = stage(tmp_path, [rows_batch(5)], job="other")
    commit(tmp_path, files, job="other", sink=SinkBatch("q2", 0))  # another query has its own ids
    assert len(read_all(tmp_path, "t", 0)) == 20
    marker = json.loads((tmp_path / ".kafkalog-spark" / "sinks" / "q1.json").read_text())
    assert marker["batch_id"] == 1 and marker["offsets"] == {"t": {"0": [10, 14]}}


def test_streaming_crash_after_journal_then_replayed_batch_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path, "t", 1)
    files = stage(tmp_path, [rows_batch(40)], job="s", batchBytes="1024")
    crash_after(monkeypatch, 1)
    with pytest.raises(Crash):
        commit(tmp_path, files, job="s", sink=SinkBatch("q", 7))
    monkeypatch.undo()
    # Spark restarts and re-runs batch 7: new staging, same batch id -> the journal completes, the rerun is skipped
    again = stage(tmp_path, [rows_batch(40)], job="s2")
    assert commit(tmp_path, again, job="s2", sink=SinkBatch("q", 7)).skipped
    assert len(read_all(tmp_path, "t", 0)) == 40 and last_committed_batch(tmp_path, "q") == 7


def test_commit_waits_for_the_lock_then_gives_up(tmp_path: Path) -> None:
    make_topic(tmp_path, "t", 1)
    files = stage(tmp_path, [rows_batch(5)])
    with LogManager.open(tmp_path, background=False), pytest.raises(LogDirLockedError, match="lockTimeoutMs"):
        commit(tmp_path, files, lockTimeoutMs="200")
    commit(tmp_path, files)
    assert len(read_all(tmp_path, "t", 0)) == 5


def test_sweep_removes_only_abandoned_staging(tmp_path: Path) -> None:
    root = staging_root(tmp_path)
    for name in ("old", "fresh", "journaled"):
        (root / name / "task").mkdir(parents=True)
        (root / name / "task" / "t-0.batches").write_bytes(b"")
    past = time.time() - 7200
    for name in ("old", "journaled"):
        for p in [root / name, root / name / "task", root / name / "task" / "t-0.batches"]:
            os.utime(p, (past, past))
    journal_dir(tmp_path).mkdir(parents=True)
    (journal_dir(tmp_path) / "j.json").write_text(
        json.dumps({"version": 1, "job_id": "j", "created_ms": 0, "partitions": [
            {"topic": "t", "partition": 0, "base_offset": 0, "records": 0,
             "files": [{"path": ".kafkalog-spark/staging/journaled/task/t-0.batches"}]}]})
    )  # fmt: skip
    removed = sweep_stale_staging(tmp_path, 3600_000)
    assert [p.name for p in removed] == ["old"]
    assert (root / "fresh").exists() and (root / "journaled").exists()


def test_writer_constructors_check_mode_types_and_topic(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    from kafkalog.spark.writer import KafkaLogCommitMessage, KafkaLogStreamWriter, KafkaLogWriter

    make_topic(tmp_path, "t", 2)
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    opts = {"path": str(tmp_path), "topic": "t"}
    with pytest.raises(SinkError, match="only appends"):
        KafkaLogWriter(opts, schema, True)
    KafkaLogStreamWriter(opts, schema, True)  # complete mode appends, as Kafka's sink
    bad = StructType([StructField("value", LongType())])
    with pytest.raises(SinkError, match="value attribute unsupported type bigint"):
        KafkaLogWriter(opts, bad, False)
    with pytest.raises(SinkError, match="does not exist"):
        KafkaLogWriter({"path": str(tmp_path), "topic": "nope"}, schema, False)
    with_partition = StructType([*schema.fields, StructField("partition", IntegerType())])
    writer = KafkaLogWriter(opts, with_partition, False)
    batch = pa.record_batch(
        [pa.array(["a", "b"]), pa.array([b"1", b"2"]), pa.array([1, 1], pa.int32())],
        names=["key", "value", "partition"],
    )
    msg = writer.write(iter([batch]))
    assert isinstance(msg, KafkaLogCommitMessage) and msg.rows == 2
    writer.commit([msg, None])
    assert [v for *_, v, _ in read_all(tmp_path, "t", 1)] == [b"1", b"2"]


def _iter(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def test_replay_after_a_foreign_append_completes_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_topic(tmp_path, "t", 1)
    files = stage(tmp_path, [rows_batch(300, partition=[0] * 300)], batchBytes="2048")
    staged_values = [r.value for r in MemoryRecords((tmp_path / files[0].path).read_bytes()).records()]
    crash_after(monkeypatch, 2)
    with pytest.raises(Crash):
        commit(tmp_path, files)
    monkeypatch.undo()
    from kafkalog.log import Log

    # a writer that does not replay journals (a standalone Log, not a LogManager)
    with Log.open(tmp_path / "t-0") as log:
        done = log.log_end_offset
        log.append([(b"k", b"foreign")])
    with LogManager.open(tmp_path, background=False) as mgr:  # replays at open
        assert replay_pending(mgr) == []
    values = [v for _, _, v, _ in read_all(tmp_path, "t", 0)]
    assert values == [*staged_values[:done], b"foreign", *staged_values[done:]]
