"""AivenRemoteStorageManager: what it copies is an archive the object-storage reader reads like a broker's;
fetches read only the bytes (chunks) asked for; deletes go manifest first and can be repeated."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kafkalog.errors import RemoteStorageError
from kafkalog.log import Log
from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.objstore.store import MemoryStore
from kafkalog.readonly import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.records import SimpleRecord
from kafkalog.remote import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition, Uuid
from kafkalog.tiered.aiven import epochs_in_range
from kafkalog.tiering import AivenRemoteStorageManager, IndexType, RsmConfig

from .conftest import SMALL, TOPIC_ID, reader_rows, segment_data

_names = itertools.count()


@pytest.fixture
def store_name() -> Iterator[str]:
    name = f"rsm-test-{next(_names)}-{time.monotonic_ns()}"
    yield name
    forget_memory_store(name)


def _build(directory: Path, count: int = 80) -> Log:
    log = Log.open(directory, SMALL)
    for i in range(count):
        log.append(
            [SimpleRecord(b"value-%03d" % i, b"k%d" % (i % 3), 1_000 + i)], leader_epoch=0 if i < 50 else 3
        )
    return log


def _copy_all(log: Log, rsm: AivenRemoteStorageManager) -> list[RemoteLogSegmentMetadata]:
    tp = log.topic_partition
    tip = TopicIdPartition(Uuid.from_bytes(TOPIC_ID.bytes), tp.topic, tp.partition)
    entries = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.epoch_entries]
    out = []
    segments = log.segments
    for seg, nxt in itertools.pairwise(segments):
        end = nxt.base_offset - 1
        md = RemoteLogSegmentMetadata(
            RemoteLogSegmentId(tip, Uuid.random_uuid()),
            seg.base_offset,
            end,
            seg.largest_timestamp(),
            1,
            5_000,
            seg.size,
            tuple(epochs_in_range(entries, seg.base_offset, end).items()),
        )
        rsm.copy_log_segment_data(md, segment_data(log, seg, nxt.base_offset))
        out.append(md)
    return out


def _keys() -> tuple[bytes, bytes, rsa.RSAPrivateKey]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public, private, key


@pytest.mark.parametrize("transform", ["plain", "zstd+aes"])
def test_copy_is_an_archive_the_reader_reads(tmp_path: Path, store_name: str, transform: str) -> None:
    log = _build(tmp_path / "data" / "clicks-3")
    options: dict[str, object] = {}
    key_ring = None
    if transform != "plain":
        public, private, _ = _keys()
        (tmp_path / "pub.pem").write_bytes(public)
        (tmp_path / "priv.pem").write_bytes(private)
        options = {
            "compression.enabled": "true",
            "encryption.enabled": "true",
            "encryption.key.pair.id": "k1",
            "encryption.key.pairs.k1.public.key.file": str(tmp_path / "pub.pem"),
            "encryption.key.pairs.k1.private.key.file": str(tmp_path / "priv.pem"),
            "chunk.size": "300",
        }
        key_ring = {"k1": private.decode()}
    store = open_store(f"memory://{store_name}")
    rsm = AivenRemoteStorageManager(store, RsmConfig.from_props({"key.prefix": "", **options}))
    copied = _copy_all(log, rsm)
    assert len(copied) >= 4
    local = reader_rows(ReadOnlyLog.open(log.dir), 0, copied[-1].end_offset + 1)
    log.close()

    archive = ReadOnlyDataDir(f"memory://{store_name}", layout="aiven", key_ring=key_ring)
    assert archive.topics() == ["clicks"]
    remote = archive.log("clicks", 3)
    assert [(s.base_offset) for s in remote.segments] == [md.start_offset for md in copied]
    assert reader_rows(remote) == local
    # every segment's files come back byte for byte through the RSM
    for md in copied:
        stem = tmp_path / "data" / "clicks-3" / f"{md.start_offset:020d}"
        data = stem.with_suffix(".log").read_bytes()
        assert rsm.fetch_log_segment(md, 0) == data
        assert rsm.fetch_log_segment(md, 17, 140) == data[17:141]
        assert rsm.fetch_index(md, IndexType.OFFSET) == stem.with_suffix(".index").read_bytes()
        assert rsm.fetch_index(md, IndexType.TIMESTAMP) == stem.with_suffix(".timeindex").read_bytes()
        assert rsm.fetch_index(md, IndexType.TRANSACTION) == b""


def test_ranged_fetch_reads_only_the_chunks_needed(tmp_path: Path) -> None:
    log = _build(tmp_path / "clicks-0", 200)
    store = MemoryStore(url="memory://ranged")
    rsm = AivenRemoteStorageManager(store, RsmConfig(chunk_size=100, compression_enabled=True))
    md = _copy_all(log, rsm)[0]
    data = (log.dir / f"{md.start_offset:020d}.log").read_bytes()
    log.close()
    rsm.manifest(md)  # cached from here on
    store.stats.reset()
    assert rsm.fetch_log_segment(md, 250, 349) == data[250:350]
    # chunks 2 and 3 of the zstd-compressed .log: two ranges, and far less than the object
    assert store.stats.get_requests == 2
    assert store.stats.bytes_read < len(data) // 2


class _RecordingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__(url="memory://recording")
        self.deletes: list[str] = []

    def delete(self, key: str) -> None:
        self.deletes.append(key)
        super().delete(key)


def test_delete_goes_manifest_first_and_repeats(tmp_path: Path) -> None:
    log = _build(tmp_path / "clicks-1", 40)
    store = _RecordingStore()
    rsm = AivenRemoteStorageManager(store, RsmConfig(key_prefix="tier/"))
    first, second, *_ = _copy_all(log, rsm)
    log.close()
    stem = rsm.segment_key(first)
    assert stem.startswith(f"tier/clicks-{Uuid.from_bytes(TOPIC_ID.bytes)}/1/{first.start_offset:020d}-")
    rsm.delete_log_segment_data(first)
    assert [k.removeprefix(stem) for k in store.deletes] == [".rsm-manifest", ".log", ".indexes"]
    assert not [o for o in store.list("tier/", delimiter=False).objects if o.key.startswith(stem)]
    rsm.delete_log_segment_data(first)  # again: nothing left, no error
    assert len(store.deletes) == 6
    # a delete cut short after the manifest leaves an orphan the reader skips
    second_stem = rsm.segment_key(second)
    store.delete(second_stem + ".rsm-manifest")
    from kafkalog.tiered import AivenArchive

    source = AivenArchive(store, "tier/").partition("clicks", 1)
    assert second.start_offset not in [s.base_offset for s in source.segments]
    assert any(k.startswith(second_stem) for k in source.orphans)


def test_sequential_fetches_fetch_each_chunk_once(tmp_path: Path) -> None:
    log = _build(tmp_path / "clicks-0", 200)
    store = MemoryStore(url="memory://sequential")
    rsm = AivenRemoteStorageManager(store, RsmConfig(chunk_size=400, compression_enabled=True))
    md = _copy_all(log, rsm)[0]
    data = (log.dir / f"{md.start_offset:020d}.log").read_bytes()
    log.close()
    rsm.manifest(md)
    store.stats.reset()
    out = b"".join(rsm.fetch_log_segment(md, p, min(p + 99, len(data) - 1)) for p in range(0, len(data), 100))
    assert out == data
    assert store.stats.get_requests == -(-len(data) // 400)  # one GET per chunk, not per fetch


class _StreamRecordingStore(MemoryStore):
    """Records the size of every buffer a put hands the store (the largest is what a copy held at once)."""

    def __init__(self) -> None:
        super().__init__(url="memory://streaming")
        self.largest: dict[str, int] = {}
        self.pieces: dict[str, list[int]] = {}

    def put(self, key: str, data: bytes) -> None:
        self.largest[key] = max(self.largest.get(key, 0), len(data))
        super().put(key, data)

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        seen: list[bytes] = []
        for chunk in chunks:
            self.largest[key] = max(self.largest.get(key, 0), len(chunk))
            self.pieces.setdefault(key, []).append(len(chunk))
            seen.append(chunk)
        MemoryStore.put(self, key, b"".join(seen))


@pytest.mark.parametrize("compression", [False, True])
def test_copy_streams_the_log_chunk_by_chunk_into_the_same_bytes(
    tmp_path: Path, compression: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafkalog.tiered import writer
    from kafkalog.tiered.manifest import parse_manifest
    from kafkalog.tiered.writer import SegmentFiles, write_aiven_segment

    read_bytes = 300  # an upload part (3 chunks), scaled down with the chunk
    monkeypatch.setattr(writer, "LOG_READ_BYTES", read_bytes, raising=False)
    log = _build(tmp_path / "clicks-0", 300)
    store = _StreamRecordingStore()
    chunk = 100
    rsm = AivenRemoteStorageManager(store, RsmConfig(chunk_size=chunk, compression_enabled=compression))
    md = _copy_all(log, rsm)[0]
    data = (log.dir / f"{md.start_offset:020d}.log").read_bytes()
    log.close()
    assert len(data) > 8 * chunk
    stem = rsm.segment_key(md)
    # the .log reached the store a chunk (compressed) or an upload part (as read) at a time: no buffer of the
    # whole segment was ever held
    assert len(data) > 2 * read_bytes
    if compression:
        assert store.largest[stem + ".log"] <= chunk + 32
    else:  # whole parts as read from the file, not chunks for the store to join (a copy under the GIL)
        assert store.pieces[stem + ".log"][:-1] == [read_bytes] * (len(data) // read_bytes)
    # and it is the object (and chunk index) the whole-bytes writer makes of the same segment
    reference = MemoryStore(url="memory://reference")
    ref_stem = write_aiven_segment(
        reference,
        SegmentFiles(md.start_offset, md.end_offset, md.max_timestamp_ms, data, b"", b"", b"", b""),
        topic=md.topic_id_partition.topic,
        topic_id=str(md.topic_id_partition.topic_id),
        partition=md.topic_id_partition.partition,
        segment_id=str(md.remote_log_segment_id.id),
        chunk_size=chunk,
        compression=compression,
    )
    assert ref_stem == stem
    assert store.get(stem + ".log") == reference.get(stem + ".log")
    ours = parse_manifest(store.get(stem + ".rsm-manifest"), "ours").chunk_index
    theirs = parse_manifest(reference.get(stem + ".rsm-manifest"), "reference").chunk_index
    assert ours == theirs and ours.original_file_size == len(data)
    assert rsm.fetch_log_segment(md, 0) == data


def test_copy_of_a_segment_that_cannot_be_read_writes_nothing(tmp_path: Path) -> None:
    log = _build(tmp_path / "clicks-0", 120)
    store = MemoryStore(url="memory://unreadable")
    rsm = AivenRemoteStorageManager(store, RsmConfig())
    seg, nxt = log.segments[0], log.segments[1]
    md = RemoteLogSegmentMetadata(
        RemoteLogSegmentId(
            TopicIdPartition(Uuid.from_bytes(TOPIC_ID.bytes), "clicks", 0), Uuid.random_uuid()
        ),
        seg.base_offset,
        nxt.base_offset - 1,
        seg.largest_timestamp(),
        1,
        5_000,
        seg.size,
        ((0, 0),),
    )
    data = segment_data(log, seg, nxt.base_offset)
    log.close()
    gone = tmp_path / "gone.log"
    with pytest.raises(RemoteStorageError, match="cannot read the segment"):
        rsm.copy_log_segment_data(md, replace(data, log_segment=gone))
    assert store.list("", delimiter=False).objects == []
