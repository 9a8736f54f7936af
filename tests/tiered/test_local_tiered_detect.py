"""Kafka's LocalTieredStorage layout read back through its PartitionSource; layout detection from keys; the
segment choice's lineage rule (Kafka's ``isRemoteSegmentWithinLeaderEpochs`` cases) and its reports; a
Kafka-written segment archived and read back byte-identical."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import (
    RemoteResourceNotFoundError,
    RemoteStorageError,
    UnknownArchiveLayoutError,
    UnsupportedRemoteSegmentError,
)
from kafkalog.log import Log
from kafkalog.objstore.store import MemoryStore
from kafkalog.tiered import AivenArchive, LocalTieredArchive, detect_layout
from kafkalog.tiered.view import ArchivedSegment, is_within_lineage, select_segments
from kafkalog.tiered.writer import segments_from_log_dir, write_aiven_segment, write_local_tiered_segment

from .conftest import build_log, materialize, rows

TOPIC_ID = "lZ6vvmajTWKDBUTV6SQAtQ"


@pytest.fixture(scope="module")
def source_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_log(tmp_path_factory.mktemp("src") / "events-0", 60, epochs=((0, 0), (1, 33)))


def test_local_tiered_reads_back_byte_identical(source_log: Path, tmp_path: Path) -> None:
    segments = segments_from_log_dir(source_log)
    store = MemoryStore()
    for seg in segments:
        directory = write_local_tiered_segment(store, seg, topic="events", topic_id=TOPIC_ID, partition=0)
    assert directory == f"events-0-{TOPIC_ID}/"
    assert store.list(directory).objects[0].key.startswith(f"{directory}00000000000000000000-")
    archive = LocalTieredArchive(store)
    assert (archive.topics(), archive.partitions("events")) == (["events"], [0])
    source = archive.partition("events", 0)
    for seg, chosen in zip(segments, source.segments, strict=True):
        assert (chosen.base_offset, chosen.end_offset, chosen.max_timestamp_ms, chosen.leader_epochs) == (
            seg.base_offset,
            seg.end_offset,
            seg.max_timestamp_ms,
            seg.leader_epochs,
        )
        stem = f"{seg.base_offset:020d}"
        assert source.read(f"{stem}.log") == seg.log
        assert source.read(f"{stem}.index") == seg.offset_index
        assert source.read(f"{stem}.timeindex") == seg.time_index
        assert source.read(f"{seg.end_offset + 1:020d}.snapshot") == seg.producer_snapshot
    assert source.read("leader-epoch-checkpoint") == segments[-1].leader_epoch
    archived = [r for r in rows(source_log) if r[0] <= segments[-1].end_offset]
    assert rows(materialize(source, tmp_path / "events-0")) == archived
    with pytest.raises(FileNotFoundError):
        source.open("00000000000000000001.log")


def test_local_tiered_unpadded_names_and_orphans(source_log: Path, caplog: pytest.LogCaptureFixture) -> None:
    segments = segments_from_log_dir(source_log)
    store = MemoryStore()
    directory = f"events-0-{TOPIC_ID}/"
    for seg in segments:
        write_local_tiered_segment(
            store, seg, topic="events", topic_id=TOPIC_ID, partition=0, segment_id="A" * 22
        )
    for key in [o.key for o in store.list(directory).objects]:  # rename to unpadded start offsets
        offset, rest = key[len(directory) :].split("-", 1)
        store.put(f"{directory}{int(offset)}-{rest}", store.get(key))
        store.delete(key)
    write_local_tiered_segment(
        store, segments[0], topic="events", topic_id=TOPIC_ID, partition=0, skip={".index": True}
    )
    with caplog.at_level(logging.WARNING):
        source = LocalTieredArchive(store).partition("events", 0)
    assert [s.base_offset for s in source.segments] == [s.base_offset for s in segments]
    assert len(source.orphans) == 4 and "lacks a required file" in caplog.text
    assert source.read("00000000000000000000.log") == segments[0].log
    with pytest.raises(RemoteStorageError, match="orphan objects"):
        LocalTieredArchive(store, strict=True).partition("events", 0)
    with pytest.raises(RemoteResourceNotFoundError, match="no partition events-1"):
        LocalTieredArchive(store).partition("events", 1)


def test_local_tiered_fileset_whose_log_is_gone_is_lost_data(
    source_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``RemoteLogSegmentFileset.copy`` writes the ``.log`` first, so a fileset whose ``.log`` is gone while its
    other files remain is a delete that stopped: lost data after the first readable segment (in the plan, each
    file open naming the ``.log``), a retention delete in progress before it; every ``.log`` gone is all lost."""
    segments = segments_from_log_dir(source_log)
    assert len(segments) >= 2
    store = MemoryStore()
    directory = f"events-0-{TOPIC_ID}/"
    for i, seg in enumerate(segments):
        write_local_tiered_segment(
            store, seg, topic="events", topic_id=TOPIC_ID, partition=0, segment_id=f"{i}" * 22
        )
    logs = sorted(o.key for o in store.list(directory).objects if o.key.endswith(".log"))
    store.delete(logs[-1])
    with caplog.at_level(logging.WARNING):
        source = LocalTieredArchive(store).partition("events", 0)
    assert [s.base_offset for s in source.lost] == [segments[-1].base_offset]
    assert source.missing_objects(0, 10**9) == [f"memory://{logs[-1]}"]
    with pytest.raises(FileNotFoundError, match=r"\.log is gone: offsets \d+-\d+ are lost"):
        source.open(f"{segments[-1].base_offset:020d}.log")
    assert "are lost" in caplog.text and not source.orphans
    store.delete(logs[0])
    source = LocalTieredArchive(store).partition("events", 0)  # the first one gone too: all gone
    assert [s.base_offset for s in source.lost] == [s.base_offset for s in segments]
    store2 = MemoryStore()
    for i, seg in enumerate(segments):
        write_local_tiered_segment(
            store2, seg, topic="events", topic_id=TOPIC_ID, partition=0, segment_id=f"{i}" * 22
        )
    store2.delete(sorted(o.key for o in store2.list(directory).objects if o.key.endswith(".log"))[0])
    source = LocalTieredArchive(store2).partition("events", 0)  # only the oldest: retention under way
    assert not source.lost and source.segments[0].base_offset == segments[1].base_offset
    assert [seg.base_offset for seg, _ in source.selection.skipped] == [segments[0].base_offset]
    with pytest.raises(RemoteStorageError, match=r"\.log is gone.*strict=True"):
        LocalTieredArchive(store, strict=True).partition("events", 0)


def test_detect_layout_from_keys(source_log: Path) -> None:
    seg = segments_from_log_dir(source_log)[0]
    aiven = MemoryStore()
    write_aiven_segment(aiven, seg, topic="t-5", topic_id=TOPIC_ID, partition=2, prefix="p/")
    assert detect_layout(aiven, "p/") == "aiven"  # "t-5-<id>/" also fits LocalTieredStorage's pattern
    assert detect_layout(aiven, f"p/t-5-{TOPIC_ID}/2/") == "aiven"
    local = MemoryStore()
    write_local_tiered_segment(local, seg, topic="t", topic_id=TOPIC_ID, partition=2)
    assert detect_layout(local) == "local-tiered"
    logdir = MemoryStore(
        {"backup/t-0/00000000000000000000.log": seg.log, "backup/t-0/leader-epoch-checkpoint": b""}
    )
    assert detect_layout(logdir, "backup/") == "logdir"
    assert detect_layout(logdir, "backup/t-0/") == "logdir"
    assert detect_layout(logdir, "backup/", layout="aiven") == "aiven"
    with pytest.raises(
        UnknownArchiveLayoutError, match=r"layout='zip' is not one of logdir, aiven, local-tiered"
    ):
        detect_layout(logdir, "backup/", layout="zip")
    odd = MemoryStore({"x/readme.txt": b"", "x/data/part-0.parquet": b""})
    with pytest.raises(UnknownArchiveLayoutError, match=r"seen: \['data/', 'readme.txt'\]; set layout"):
        detect_layout(odd, "x/")
    with pytest.raises(RemoteResourceNotFoundError, match="nothing under this prefix"):
        detect_layout(odd, "y/")
    iceberg = MemoryStore({"wh/t/metadata/00001-a.metadata.json": b"{}", "wh/t/data/x.parquet": b""})
    with pytest.raises(UnsupportedRemoteSegmentError, match="Iceberg table"):
        detect_layout(iceberg, "wh/t/")


class Stub(ArchivedSegment):
    def __init__(self, base: int, end: int, epochs: dict[int, int], stamp: int = 0, sid: str = "") -> None:
        super().__init__(
            base_offset=base,
            end_offset=end,
            max_timestamp_ms=end,
            size=0,
            segment_id=sid or f"s{base}-{end}",
            name=f"s{base}-{end}",
            leader_epochs=epochs,
            event_timestamp_ms=stamp,
            part_sizes={},
        )

    def open_log(self) -> Any:
        raise NotImplementedError

    def read_part(self, kind: Any) -> bytes:
        return b""


def test_lineage_rule_is_kafkas() -> None:
    # RemoteLogManagerTest-style cases: lineage {(5, 10), (7, 15), (9, 100)}
    lineage = {5: 10, 7: 15, 9: 100}
    assert is_within_lineage({5: 10, 7: 15}, 50, 200, lineage) is True  # Kafka's comment's segment1
    assert is_within_lineage({5: 10, 7: 15}, 99, 200, lineage) is True
    assert is_within_lineage({5: 10, 7: 15}, 100, 200, lineage) is False  # past the start of epoch 9
    assert is_within_lineage({5: 14, 7: 15, 9: 100}, 150, 200, lineage) is True  # overlapping re-upload
    assert (
        is_within_lineage({4: 0, 5: 10}, 12, 200, lineage) is True
    )  # epochs below the lineage's first: ignored
    assert (
        is_within_lineage({4: 0, 5: 10}, 12, 200, {7: 15, 9: 100}) is False
    )  # ends before the lineage starts
    assert is_within_lineage({5: 11, 7: 15}, 20, 200, {3: 0, 5: 10, 7: 15}) is True
    assert is_within_lineage({5: 9, 7: 15}, 20, 200, {3: 0, 5: 10, 7: 15}) is False  # starts before its epoch
    assert is_within_lineage({5: 10, 7: 16}, 20, 200, lineage) is False  # epoch 7 starts elsewhere
    assert is_within_lineage({6: 10}, 12, 200, lineage) is False  # an epoch the lineage does not have
    assert is_within_lineage({9: 100}, 250, 200, lineage) is False  # beyond the log end offset
    assert is_within_lineage({5: 10, 6: 15, 7: 15}, 20, 200, lineage) is True  # epoch 6 had no records


def test_selection_reports_overlaps_and_gaps() -> None:
    segs = [
        Stub(0, 99, {0: 0}, 1),
        Stub(0, 199, {0: 0}, 2),
        Stub(150, 299, {0: 0}, 3),
        Stub(400, 499, {0: 0}, 4),
    ]
    sel = select_segments(segs, None, "p")
    assert [(s.base_offset, s.end_offset) for s in sel.chosen] == [(0, 199), (150, 299), (400, 499)]
    assert sel.overlaps == [(150, 199)] and sel.gaps == [(300, 399)]
    assert [s.segment_id for s, _ in sel.skipped] == ["s0-99"]
    with pytest.raises(RemoteStorageError, match=r"offsets 150-199 are in two segments.*strict=True"):
        select_segments(segs, None, "p", strict=True)


@pytest.mark.interop
def test_kafka_written_segment_archived_and_read_back(kafka_java: Any, tmp_path: Path) -> None:
    from tests.log.test_readonly import kafka_spec

    directory = tmp_path / "kafka-0"
    directory.mkdir()
    kafka_bytes = kafka_java.write(kafka_spec(), directory / "00000000000000000000.log")
    Log.open(directory, {"index.interval.bytes": 128}).close()  # recovery writes the indexes, the snapshot
    segments = segments_from_log_dir(directory, include_active=True)
    assert [s.log for s in segments] == [kafka_bytes]
    for mode in ({}, {"compression": True, "chunk_size": 512}):
        store = MemoryStore()
        write_aiven_segment(store, segments[0], topic="kafka", topic_id=TOPIC_ID, partition=0, **mode)
        source = AivenArchive(store).partition("kafka", 0)
        assert source.read("00000000000000000000.log") == kafka_bytes
        assert (
            source.read("00000000000000000000.index")
            == (directory / "00000000000000000000.index").read_bytes()
        )
        assert source.segments[0].end_offset == 27
        view = materialize(source, tmp_path / str(len(mode)) / "kafka-0")
        lines, code = kafka_java.dump(view / "00000000000000000000.log", deep=True)
        assert code == 0
        expected = [(line["offset"], line["timestamp"]) for line in lines if line["type"] == "record"]
        got = [(r[0], r[1]) for r in rows(view)]
        assert set(got) <= set(expected) and len(got) == 27  # the reader skips the control record


def test_a_corrupt_epoch_checkpoint_is_a_typed_error(source_log: Path) -> None:
    store = MemoryStore()
    directory = write_local_tiered_segment(
        store, segments_from_log_dir(source_log)[0], topic="events", topic_id=TOPIC_ID, partition=0
    )
    key = next(o.key for o in store.list(directory).objects if o.key.endswith(".leader_epoch_checkpoint"))
    store.put(key, b"0\n2\n0 0\n")  # says two entries, holds one
    with pytest.raises(
        RemoteStorageError,
        match=r"leader_epoch_checkpoint: corrupt leader-epoch checkpoint: expected 2 entries .*found only 1$",
    ):
        LocalTieredArchive(store).partition("events", 0)


def test_choosing_among_many_segments_is_not_quadratic() -> None:
    import time

    segs = [Stub(i * 10, i * 10 + 9, {0: 0}, i) for i in range(20_000)]
    segs += [Stub(i * 10, i * 10 + 4, {0: 0}, 0, sid=f"dup{i}") for i in range(0, 20_000, 100)]
    started = time.perf_counter()
    sel = select_segments(segs, {0: 0}, "p")
    elapsed = time.perf_counter() - started
    assert len(sel.chosen) == 20_000 and len(sel.skipped) == 200 and not sel.overlaps and not sel.gaps
    assert elapsed < 10.0, elapsed  # ~0.2 s here; the quadratic version took minutes
