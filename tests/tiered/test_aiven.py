"""Aiven-layout archives written as the plugin writes them (plain, zstd-chunked, encrypted, old-style
manifests, re-uploads, orphans) read back through ``AivenArchive``'s PartitionSource: byte-identical files, the
reader's rows, what planning reads, and every error path typed."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError, UnsupportedRemoteSegmentError
from kafkalog.objstore.ranged import RangedFile, RangedSettings
from kafkalog.objstore.store import MemoryStore
from kafkalog.tiered import AivenArchive
from kafkalog.tiered.files import ChunkedFile
from kafkalog.tiered.writer import SegmentFiles, kafka_uuid, segments_from_log_dir, write_aiven_segment

from .conftest import RecordingStore, build_log, materialize, rows

TOPIC_ID = "MWJ6FHTfRYy67jzwZdeqSQ"
PREFIX = "tiered/"


@pytest.fixture(scope="module")
def kek() -> tuple[rsa.RSAPrivateKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key, pem


@pytest.fixture(scope="module")
def source_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_log(tmp_path_factory.mktemp("src") / "orders-3", 60, epochs=((0, 0), (2, 40)))


def upload(
    store: MemoryStore, segments: list[SegmentFiles], kek: tuple[Any, bytes] | None = None, **options: Any
) -> list[str]:
    encryption = ("kek-1", kek[0].public_key()) if kek else None
    return [
        write_aiven_segment(
            store,
            seg,
            topic="orders",
            topic_id=TOPIC_ID,
            partition=3,
            prefix=PREFIX,
            encryption=encryption,
            event_timestamp_ms=10_000 + i,
            **options,
        )
        for i, seg in enumerate(segments)
    ]


MODES = {
    "plain": {},
    "zstd": {"compression": True, "chunk_size": 300},
    "encrypted": {"encrypt": True, "chunk_size": 500},
    "zstd+encrypted": {"compression": True, "encrypt": True, "chunk_size": 256},
    "old-style": {"old_style_manifest": True, "chunk_size": 700},
    "old-style+zstd+encrypted": {"old_style_manifest": True, "compression": True, "encrypt": True},
    # the layout before October 2023: one object per index, no segmentIndexes in the manifest
    "separate-indexes": {"separate_indexes": True, "old_style_manifest": True, "chunk_size": 700},
    "separate-indexes+metadata": {"separate_indexes": True},
    "separate-indexes+zstd+encrypted": {
        "separate_indexes": True,
        "old_style_manifest": True,
        "compression": True,
        "encrypt": True,
        "chunk_size": 400,
    },
}


@pytest.mark.parametrize("mode", list(MODES))
def test_archive_reads_back_byte_identical(
    mode: str, source_log: Path, kek: tuple[Any, bytes], tmp_path: Path
) -> None:
    options = dict(MODES[mode])
    encrypt = options.pop("encrypt", False)
    segments = segments_from_log_dir(source_log)
    assert len(segments) >= 2
    store = MemoryStore(url="memory://bucket")
    upload(store, segments, kek if encrypt else None, **options)
    archive = AivenArchive(store, PREFIX, key_ring={"kek-1": kek[1].decode()} if encrypt else None)
    assert archive.topics() == {"orders": [TOPIC_ID]}
    assert archive.partitions("orders") == [3]
    source = archive.partition("orders", 3)
    assert source.name == f"memory://bucket/{PREFIX}orders-{TOPIC_ID}/3"
    files = source.list_files()
    expected = {"leader-epoch-checkpoint"}
    for seg in segments:
        expected |= {f"{seg.base_offset:020d}.{s}" for s in ("log", "index", "timeindex")}
        expected.add(f"{seg.end_offset + 1:020d}.snapshot")
    assert set(files) == expected
    for seg, chosen in zip(segments, source.segments, strict=True):
        stem = f"{seg.base_offset:020d}"
        assert (chosen.base_offset, chosen.end_offset, chosen.max_timestamp_ms) == (
            seg.base_offset,
            seg.end_offset,
            seg.max_timestamp_ms,
        )
        assert chosen.leader_epochs == seg.leader_epochs
        assert source.read(f"{stem}.log") == seg.log == (source_log / f"{stem}.log").read_bytes()
        assert source.read(f"{stem}.index") == seg.offset_index
        assert source.read(f"{stem}.timeindex") == seg.time_index
        assert source.read(f"{seg.end_offset + 1:020d}.snapshot") == seg.producer_snapshot
        log_file = source.open(f"{stem}.log")
        plain = mode in ("plain", "old-style", "separate-indexes", "separate-indexes+metadata")
        assert isinstance(log_file, RangedFile if plain else ChunkedFile)
        for start, n in ((0, 1), (13, 700), (299, 2), (len(seg.log) - 5, 100), (len(seg.log), 10)):
            assert log_file.pread(n, start) == seg.log[start : start + n]
    assert source.read("leader-epoch-checkpoint") == segments[-1].leader_epoch == b"0\n2\n0 0\n2 40\n"
    archived = [r for r in rows(source_log) if r[0] <= segments[-1].end_offset]
    assert rows(materialize(source, tmp_path / "orders-3")) == archived


def test_planning_reads_manifests_and_one_epoch_blob_never_a_log(source_log: Path) -> None:
    store = RecordingStore()
    upload(store, segments_from_log_dir(source_log), compression=True, chunk_size=300)
    store.reads.clear()
    source = AivenArchive(store, PREFIX, ranged=RangedSettings(readahead_blocks=0)).partition("orders", 3)
    assert not [k for k in store.reads if k.endswith(".log")]
    assert sum(k.endswith(".rsm-manifest") for k in store.reads) == len(source.segments)
    newest_indexes = (
        source.segments[-1].name.removeprefix("memory://bucket/").replace(".rsm-manifest", ".indexes")
    )
    assert [k for k in store.reads if k.endswith(".indexes")] == [newest_indexes]
    assert store.stats.list_requests == 2  # the topics (prefix) and the partition
    store.reads.clear()
    log_file = source.open(f"{source.segments[0].base_offset:020d}.log")
    assert isinstance(log_file, ChunkedFile)
    data = log_file.pread(1500, 100)  # six chunks of 300 bytes: one get_ranges request
    assert len(data) == 1500 and store.reads == [store.reads[0]] and store.reads[0].endswith(".log")


def test_chunk_cache_is_bounded(source_log: Path) -> None:
    store = MemoryStore()
    upload(store, segments_from_log_dir(source_log)[:1], compression=True, chunk_size=200)
    archive = AivenArchive(store, PREFIX, chunk_cache_bytes=400)
    seg = archive.partition("orders", 3).segments[0]
    log_file = seg.open_log()
    assert isinstance(log_file, ChunkedFile)
    whole = b"".join(log_file.pread(150, p) for p in range(0, log_file.size, 150))
    assert whole == (source_log / "00000000000000000000.log").read_bytes()
    assert log_file.cached_chunks == 2


def test_damaged_objects_are_typed_errors_naming_the_object(source_log: Path, kek: tuple[Any, bytes]) -> None:
    segments = segments_from_log_dir(source_log)
    store = MemoryStore(url="memory://bucket")
    stems = upload(store, segments, kek, compression=True, chunk_size=256)
    ring = {"kek-1": kek[1]}
    # an object shorter than its manifest says
    log_key = stems[0] + ".log"
    good = store.get(log_key)
    store.put(log_key, good[:-10])
    with pytest.raises(RemoteStorageError, match=rf"{log_key}: .* shorter than its manifest says"):
        AivenArchive(store, PREFIX, key_ring=ring).partition("orders", 3)
    # a chunk failing GCM authentication (the size is right, one byte flipped in chunk 1)
    flipped = bytearray(good)
    flipped[300] ^= 0x40
    store.put(log_key, bytes(flipped))
    source = AivenArchive(store, PREFIX, key_ring=ring).partition("orders", 3)
    with pytest.raises(RemoteStorageError, match=rf"{log_key} chunk \d+: chunk fails AES-GCM authentication"):
        source.read("00000000000000000000.log")
    store.put(log_key, good)
    # missing and wrong keys
    with pytest.raises(
        RemoteStorageError, match=r"encrypted with key 'kek-1'; pass the RSA private key .*key_ring"
    ):
        AivenArchive(store, PREFIX).partition("orders", 3)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    # (planning decrypts the newest segment's leader-epoch blob, so a wrong key fails there)
    with pytest.raises(RemoteStorageError, match="does not decrypt with key 'kek-1' of the key_ring option"):
        AivenArchive(store, PREFIX, key_ring={"kek-1": other}).partition("orders", 3)
    with pytest.raises(RemoteStorageError, match="which the key_ring option does not hold"):
        AivenArchive(store, PREFIX, key_ring={"kek-2": other}).partition("orders", 3)
    # a corrupt manifest; an .indexes object shorter than the manifest slices it
    manifest_key = stems[1] + ".rsm-manifest"
    good_manifest = store.get(manifest_key)
    store.put(manifest_key, good_manifest[:40])
    with pytest.raises(RemoteStorageError, match=rf"{manifest_key}: corrupt segment manifest"):
        AivenArchive(store, PREFIX, key_ring=ring).partition("orders", 3)
    store.put(manifest_key, good_manifest)
    store.put(stems[1] + ".indexes", store.get(stems[1] + ".indexes")[:5])
    with pytest.raises(RemoteStorageError, match=r"\.indexes: 5 bytes, but its manifest .* shorter"):
        AivenArchive(store, PREFIX, key_ring=ring).partition("orders", 3)


def test_orphans_are_skipped_with_a_warning_or_refused_when_strict(
    source_log: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segments = segments_from_log_dir(source_log)
    store = MemoryStore()
    upload(store, segments)
    orphan = write_aiven_segment(
        store,
        segments[0],
        topic="orders",
        topic_id=TOPIC_ID,
        partition=3,
        prefix=PREFIX,
        upload_manifest=False,
    )
    with caplog.at_level(logging.WARNING, logger="kafkalog.tiered.aiven"):
        source = AivenArchive(store, PREFIX).partition("orders", 3)
    assert sorted(source.orphans) == [orphan + ".indexes", orphan + ".log"]
    assert f"orphan object {orphan}.log" in caplog.text
    assert [s.base_offset for s in source.segments] == [s.base_offset for s in segments]
    with pytest.raises(RemoteStorageError, match=r"orphan objects .* \(strict=True\)"):
        AivenArchive(store, PREFIX, strict=True).partition("orders", 3)


def test_reuploads_are_chosen_by_leader_epoch_lineage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The old leader wrote 0..59 in epoch 0; the new one kept 0..29 and wrote 30.. in epoch 3 (KAFKA-15168).
    old = segments_from_log_dir(build_log(tmp_path / "a" / "orders-3", 60, tag=b"-A"))
    new = segments_from_log_dir(
        build_log(tmp_path / "b" / "orders-3", 60, epochs=((0, 0), (3, 30)), tag=b"-B")
    )
    assert [(s.base_offset, s.end_offset) for s in old] == [(s.base_offset, s.end_offset) for s in new]
    store = MemoryStore()
    for i, seg in enumerate(old):
        write_aiven_segment(
            store,
            seg,
            topic="orders",
            topic_id=TOPIC_ID,
            partition=3,
            prefix=PREFIX,
            event_timestamp_ms=100 + i,
        )
    new_ids = [kafka_uuid() for _ in new]
    for i, seg in enumerate(new):
        write_aiven_segment(
            store,
            seg,
            topic="orders",
            topic_id=TOPIC_ID,
            partition=3,
            prefix=PREFIX,
            segment_id=new_ids[i],
            event_timestamp_ms=200 + i,
        )
    with caplog.at_level(logging.WARNING):
        source = AivenArchive(store, PREFIX).partition("orders", 3)
    assert [s.segment_id for s in source.segments] == new_ids
    skipped = {s.base_offset: why for s, why in source.selection.skipped}
    assert (
        "outside the leader-epoch lineage" in skipped[old[1].base_offset]
    )  # the old leader's 30..51 were truncated away
    assert "held by segment" in skipped[0]
    got = rows(materialize(source, tmp_path / "view" / "orders-3"))
    assert [r[3] for r in got] == [b"value-%d-B" % i for i in range(new[-1].end_offset + 1)]
    with pytest.raises(RemoteStorageError, match="strict=True"):
        AivenArchive(store, PREFIX, strict=True).partition("orders", 3)


def test_recreated_topic_takes_the_newest_incarnation_or_the_option(source_log: Path) -> None:
    segments = segments_from_log_dir(source_log)
    store = MemoryStore()
    older, newer = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBw"
    for topic_id, stamp, segs in ((newer, 5_000, segments[:1]), (older, 1_000, segments)):
        for seg in segs:
            write_aiven_segment(
                store,
                seg,
                topic="orders",
                topic_id=topic_id,
                partition=3,
                prefix=PREFIX,
                event_timestamp_ms=stamp,
            )
    archive = AivenArchive(store, PREFIX)
    assert archive.topics() == {"orders": [older, newer]}
    assert archive.topic_id("orders") == newer
    assert len(archive.partition("orders", 3).segments) == 1
    assert len(
        AivenArchive(store, PREFIX, topic_ids={"orders": older}).partition("orders", 3).segments
    ) == len(segments)
    with pytest.raises(RemoteResourceNotFoundError, match=r"has no id 'CCCCCCCCCCCCCCCCCCCCCC' .*topic_ids"):
        AivenArchive(store, PREFIX, topic_ids={"orders": "C" * 22}).partition("orders", 3)
    with pytest.raises(RemoteResourceNotFoundError, match="no topic 'payments'"):
        archive.partition("payments", 0)
    with pytest.raises(RemoteResourceNotFoundError, match="no archived segments"):
        archive.partition("orders", 4)


def test_iceberg_mode_segment_is_refused_by_name(source_log: Path) -> None:
    store = MemoryStore()
    stems = upload(store, segments_from_log_dir(source_log))
    store.put(stems[0] + ".rsm-manifest", b"PFA1" + b"\0" * 40)
    with pytest.raises(UnsupportedRemoteSegmentError, match=r"\.rsm-manifest: a Puffin file.*Iceberg mode"):
        AivenArchive(store, PREFIX).partition("orders", 3)


def test_an_oversized_manifest_is_refused_unread(source_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalog.tiered.aiven as aiven

    store = RecordingStore()
    stems = upload(store, segments_from_log_dir(source_log)[:1])
    monkeypatch.setattr(aiven, "MAX_MANIFEST_BYTES", 100)
    store.reads.clear()
    with pytest.raises(
        RemoteStorageError, match=r"\.rsm-manifest: corrupt segment manifest: \d+ bytes, more than"
    ):
        AivenArchive(store, PREFIX).partition("orders", 3)
    assert stems[0] + ".rsm-manifest" not in store.reads


def test_every_whole_read_of_planning_is_bounded(source_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bound holds where a recreated topic's incarnations are compared (the newest manifest of each
    is read), and the ``.indexes`` parts a manifest slices (read whole) are bounded too: both refused before
    their GET."""
    import kafkalog.tiered.aiven as aiven

    segments = segments_from_log_dir(source_log)
    store = RecordingStore()
    for topic_id in ("AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBw"):
        write_aiven_segment(store, segments[0], topic="orders", topic_id=topic_id, partition=3, prefix=PREFIX)
    monkeypatch.setattr(aiven, "MAX_MANIFEST_BYTES", 100)
    store.reads.clear()
    with pytest.raises(RemoteStorageError, match=r"\.rsm-manifest: corrupt segment manifest: \d+ bytes"):
        AivenArchive(store, PREFIX).topic_id("orders")
    assert not [k for k in store.reads if k.endswith(".rsm-manifest")]
    monkeypatch.undo()
    single = RecordingStore()
    upload(single, segments[:1])
    monkeypatch.setattr(aiven, "MAX_INDEXES_BYTES", 16)
    single.reads.clear()
    with pytest.raises(RemoteStorageError, match=r"its segmentIndexes span \d+ bytes, more than the 16"):
        AivenArchive(single, PREFIX).partition("orders", 3)
    assert not [k for k in single.reads if k.endswith(".indexes")]


def test_separate_index_objects_upload_stopped_lost_and_unencrypted(
    source_log: Path, kek: tuple[Any, bytes], caplog: pytest.LogCaptureFixture
) -> None:
    """The layout before October 2023 (one object per index, uploaded after the manifest): a segment whose
    upload stopped before an index object is an orphan (skipped, warned), not lost data; one whose ``.log`` is
    gone is lost data; an index object left unencrypted in an encrypted archive (plugin versions before July
    2023) fails authentication with an error that says so."""
    segments = segments_from_log_dir(source_log)
    store = MemoryStore()
    stems = upload(store, segments, separate_indexes=True)
    assert not [k for k in store.list("", delimiter=False).objects if k.key.endswith(".indexes")]
    assert len(stems) == 2
    store.delete(stems[0] + ".timeindex")
    store.delete(stems[1] + ".log")
    source = AivenArchive(store, PREFIX).partition("orders", 3)
    assert {stems[0] + s for s in (".log", ".rsm-manifest", ".index", ".snapshot")} <= set(source.orphans)
    assert "an upload that stopped before its index objects" in caplog.text
    assert [s.base_offset for s in source.lost] == [segments[-1].base_offset]
    assert source.missing_objects(0, 10**9) == [f"memory://{stems[1]}.log"]
    encrypted = MemoryStore()
    enc_stems = upload(encrypted, segments[:2], kek, separate_indexes=True)
    encrypted.put(
        enc_stems[0] + ".index", segments[0].offset_index
    )  # as the plugin uploaded it before 2023-07
    planned = AivenArchive(encrypted, PREFIX, key_ring={"kek-1": kek[1].decode()}).partition("orders", 3)
    with pytest.raises(
        RemoteStorageError,
        match=r"\.index \(an index object .*before July 2023 uploaded them unencrypted.*fails AES-GCM authentication",
    ):
        planned.read(f"{segments[0].base_offset:020d}.index")


def test_a_chunked_scan_reads_ahead_decodes_in_parallel_and_fills_buffers_in_place(source_log: Path) -> None:
    """A read spanning several chunks starts fetching and decoding the next ``readahead_blocks`` chunks in the
    background (old code: no read-ahead for chunked objects, so every scan read waited for its transfer);
    ``readinto`` fills the caller's buffer, byte-identical, and ``prefetch`` starts a file's first chunks."""
    original = (source_log / "00000000000000000000.log").read_bytes()
    store = RecordingStore()
    upload(store, segments_from_log_dir(source_log)[:1], compression=True, chunk_size=200)
    seg = (
        AivenArchive(store, PREFIX, ranged=RangedSettings(readahead_blocks=3))
        .partition("orders", 3)
        .segments[0]
    )
    log_file = seg.open_log()
    assert isinstance(log_file, ChunkedFile) and log_file.size == len(original) > 1000
    store.reads.clear()
    buf = bytearray(450)
    assert log_file.readinto(memoryview(buf), 0) == 450 and bytes(buf) == original[:450]  # chunks 0-2
    # chunks 3, 4, 5 come from the read-ahead threads (one get_ranges each), without another read
    assert _wait_for(lambda: len(store.reads) == 4)
    got = bytearray()
    position = 450
    while position < log_file.size:
        n = log_file.readinto(memoryview(buf), position)
        got += buf[:n]
        position += n
    assert original[:450] + bytes(got) == original
    chunks = -(-len(original) // 200)
    assert len(store.reads) == chunks - 2  # every chunk fetched once (chunks 0-2 by one request)
    log_file.close()

    store.reads.clear()
    fresh = seg.open_log()
    fresh.prefetch(0)  # type: ignore[attr-defined]
    assert _wait_for(lambda: len(store.reads) == 3)
    assert fresh.pread(600, 0) == original[:600]  # from the prefetched chunks, then 3 more ahead
    assert _wait_for(lambda: len(store.reads) == 6)
    fresh.close()


def _wait_for(predicate: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_planning_lists_each_partition_once(source_log: Path) -> None:
    """The archive's planning LIST of a partition is also what a stream compares with later (old code listed
    every partition a second time while planning: 3,000 objects in 4 partitions cost 4 more LIST pages)."""
    from kafkalog.objstore.store import forget_shared_memory_store, shared_memory_store
    from kafkalog.readonly.log import ReadOnlyDataDir

    store = shared_memory_store("plan-lists")
    try:
        segments = segments_from_log_dir(source_log)
        for seg in segments:
            write_aiven_segment(store, seg, topic="orders", topic_id=TOPIC_ID, partition=3, prefix="")
        data_dir = ReadOnlyDataDir("memory://plan-lists", {})
        assert len(data_dir.partition_names()) == 1  # lists the topics and partitions
        store.stats.reset()
        log = data_dir.log("orders", 3)
        assert log.high_watermark == segments[-1].end_offset + 1
        lists = store.stats.list_requests
        assert lists == 1, lists  # the partition's objects, once
        assert not data_dir.refresh_partition("orders", 3)  # unchanged: one more LIST, no re-planning
        assert store.stats.list_requests == lists + 1
    finally:
        forget_shared_memory_store("plan-lists")


class _SpyFile:
    """A local file that records its reads and prefetches in ``events`` (as a ranged object would take them)."""

    def __init__(self, inner: Any, name: str, events: list[tuple[str, str]]) -> None:
        self._inner, self._name, self._events = inner, name, events

    name = property(lambda self: self._inner.name)
    size = property(lambda self: self._inner.size)

    def pread(self, n: int, position: int) -> bytes:
        self._events.append(("read", self._name))
        data: bytes = self._inner.pread(n, position)
        return data

    def prefetch(self, position: int) -> None:
        self._events.append(("prefetch", self._name))

    def close(self) -> None:
        self._events.append(("close", self._name))
        self._inner.close()


def test_a_scan_prefetches_the_next_segment_while_reading_this_one(source_log: Path) -> None:
    """``iter_batch_chunks`` over remote files opens segment k + 1 when it starts segment k and asks it to
    prefetch (so no segment's first read waits for a whole transfer), opens each file once, and prefetches
    nothing past the end offset; local files (no ``prefetch``) are opened one at a time as before."""
    from kafkalog.readonly.local import LocalPartitionSource
    from kafkalog.readonly.log import ReadOnlyLog
    from kafkalog.records import kernels as K

    events: list[tuple[str, str]] = []

    class Spy(LocalPartitionSource):
        def open(self, name: str) -> Any:
            events.append(("open", name))
            return _SpyFile(super().open(name), name, events)

    logs = sorted(p.name for p in source_log.glob("*.log"))
    assert len(logs) >= 3
    view = ReadOnlyLog(Spy(source_log))
    offsets = [int(t) for chunk in view.iter_batch_chunks(0, 60) for t in chunk.table[K.F_BASE_OFFSET]]
    assert offsets == list(range(60))
    opens = [n for e, n in events if e == "open" and n.endswith(".log")]
    assert opens == logs  # each once, in order
    for k in range(1, len(logs)):
        opened, prefetched = events.index(("open", logs[k])), events.index(("prefetch", logs[k]))
        first_read_before = events.index(("read", logs[k - 1]))
        assert opened < prefetched < first_read_before  # asked for while segment k - 1 was being read
    assert ("prefetch", logs[0]) not in events
    assert [e for e in events if e[0] == "close"] == [("close", n) for n in logs]

    events.clear()
    second = logs[1]
    end = int(second.removesuffix(".log")) - 1  # inside the first segment: nothing to prefetch
    assert sum(c.table.shape[1] for c in view.iter_batch_chunks(0, end)) >= 1
    assert not [e for e in events if e[0] == "prefetch"] and ("open", second) not in events


@pytest.mark.parametrize("mode", list(MODES))
def test_a_planned_partition_pickles_compactly_and_reads_the_same(
    mode: str, source_log: Path, kek: tuple[Any, bytes], tmp_path: Path
) -> None:
    """What a Spark task carries (a partition clipped to its segments) pickles as flat values per segment
    (old code: each segment's attribute dict with its manifest's dataclasses and listing metadata, ~830
    bytes for a real segment; now ~210) and reads back the same files."""
    import pickle

    from kafkalog.objstore.store import forget_shared_memory_store, shared_memory_store

    options = dict(MODES[mode])
    encrypt = options.pop("encrypt", False)
    segments = segments_from_log_dir(source_log)
    name = f"compact-{mode}"
    store = shared_memory_store(name)  # pickles as its name: only the plan is measured
    try:
        upload(store, segments, kek if encrypt else None, **options)
        ring = {"kek-1": kek[1].decode()} if encrypt else None
        source = AivenArchive(store, PREFIX, key_ring=ring).partition("orders", 3)
        clipped = source.within(0, segments[-1].end_offset + 1)
        blob = pickle.dumps(clipped)
        back = pickle.loads(blob)
        assert back.list_files() == source.list_files()
        for seg in segments:
            stem = f"{seg.base_offset:020d}"
            assert back.read(f"{stem}.log") == seg.log and back.read(f"{stem}.index") == seg.offset_index
        kept = [
            (s.base_offset, s.end_offset, s.max_timestamp_ms, s.size, s.part_sizes, s.name, s.leader_epochs)
            for s in source.segments
        ]
        assert kept == [
            (s.base_offset, s.end_offset, s.max_timestamp_ms, s.size, s.part_sizes, s.name, s.leader_epochs)
            for s in back.segments
        ]
        assert rows(materialize(back, tmp_path / "orders-3")) == rows(materialize(source, tmp_path / "x-3"))
        if mode == "plain":
            one = len(pickle.dumps(source.within(0, 1)))  # the partition's shared parts and one segment
            per_segment = (len(blob) - one) / (len(segments) - 1)
            assert per_segment < 300, per_segment
    finally:
        forget_shared_memory_store(name)
