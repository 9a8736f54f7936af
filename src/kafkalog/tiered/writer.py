"""Writers of tiered-storage archives, as the Aiven plugin and Kafka's ``LocalTieredStorage`` write them
(test fixtures today; tiering kafkalog's own logs later).

Invariant owned here: what is written is what the plugin would upload for the same segment files and
options — ``.log`` cut into ``chunk_size`` chunks, each zstd-compressed (content size in the frame) when
``compression``, then AES-256-GCM encrypted (a fresh 12-byte IV prepended, the tag appended, the segment's
random 32-byte AAD) when ``encryption``; the ``.indexes`` object the concatenation of offset index, time
index, producer snapshot, leader-epoch blob and transaction index, each encrypted alone and never
compressed; a manifest in the plugin's field order; and the upload order ``.log``, ``.indexes``, manifest.
``old_style_manifest`` leaves out ``remoteLogSegmentMetadata`` (plugin versions before September 2023);
``separate_indexes`` writes the layout before October 2023: no ``.indexes`` object and no ``segmentIndexes``
in the manifest, but one object per index (``.index``, ``.timeindex``, ``.snapshot``, ``.txnindex`` when the
segment has one, ``.leader-epoch-checkpoint``), each encrypted alone, uploaded after the manifest as that
plugin did; ``upload_manifest=False`` leaves an orphan.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

import zstandard

from kafkalog.errors import RemoteStorageError
from kafkalog.log.checkpoint import EpochEntry, leader_epoch_checkpoint
from kafkalog.objstore.store import PUT_PART_SIZE, ObjectStore
from kafkalog.records import MemoryRecords
from kafkalog.storage.files import offset_from_file_name
from kafkalog.tiered.aiven import aiven_segment_key, epochs_in_range
from kafkalog.tiered.crypto import encrypt_chunk, wrap_data_key
from kafkalog.tiered.local_tiered import local_tiered_file_name
from kafkalog.tiered.manifest import (
    ChunkIndex,
    EncryptionMetadata,
    RemoteLogSegmentMetadata,
    SegmentIndex,
    SegmentIndexes,
    SegmentManifest,
    manifest_json,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "SegmentFiles",
    "kafka_uuid",
    "segments_from_log_dir",
    "write_aiven_segment",
    "write_local_tiered_segment",
]

#: The plugin's recommended ``chunk.size``.
DEFAULT_CHUNK_SIZE: Final = 4 * 1024 * 1024
#: Bytes of one read of an untransformed ``.log`` (no compression, no encryption): a whole upload part, so
#: each read is handed to the store as it is (obstore takes the buffer without a copy) and nothing joins
#: chunks into parts while holding the GIL; the chunk index is computed, the object is the same.
LOG_READ_BYTES: Final = PUT_PART_SIZE


def kafka_uuid() -> str:
    """A random Kafka ``Uuid`` as ``Uuid.toString`` prints it (URL-safe base64, no padding, 22 chars); like
    ``Uuid.randomUuid``, never one printed with a leading ``-``."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


@dataclass
class SegmentFiles:
    """What Kafka's ``RemoteLogManager`` hands an RSM for one segment (``LogSegmentData`` plus metadata)."""

    base_offset: int
    end_offset: int
    max_timestamp_ms: int
    log: bytes
    offset_index: bytes
    time_index: bytes
    producer_snapshot: bytes
    #: The leader's epoch cache up to the segment's end, as checkpoint-file content.
    leader_epoch: bytes
    transaction_index: bytes | None = None
    #: ``{epoch: start offset}`` of the epochs within the segment (``segmentLeaderEpochs``).
    leader_epochs: dict[int, int] = field(default_factory=dict)
    #: When set, the ``.log`` is this file (read, transformed and uploaded chunk by chunk; ``log`` is unused),
    #: so a copy holds a few chunks of the segment, never all of it.
    log_path: Path | None = None


def segments_from_log_dir(directory: Path, *, include_active: bool = False) -> list[SegmentFiles]:
    """The segments of a Kafka partition directory as ``RemoteLogManager.copyLogSegment`` would copy them:
    every segment but the active one (``include_active`` adds it, ending at its last batch)."""
    logs = sorted(
        (p for p in directory.iterdir() if p.suffix == ".log" and len(p.stem) == 20), key=lambda p: p.name
    )
    checkpoint = leader_epoch_checkpoint(directory)
    entries = checkpoint.read()
    out: list[SegmentFiles] = []
    for i, path in enumerate(logs):
        base = offset_from_file_name(path)
        data = path.read_bytes()
        batches = list(MemoryRecords(data).batches())
        if i + 1 < len(logs):
            next_base = offset_from_file_name(logs[i + 1])
        elif include_active and batches:
            next_base = batches[-1].last_offset + 1
        else:
            continue
        end = next_base - 1
        max_ts = max((b.max_timestamp for b in batches), default=-1)
        stem = directory / path.stem

        def read(suffix: str, stem: Path = stem) -> bytes | None:
            p = stem.with_suffix(suffix)
            return p.read_bytes() if p.exists() else None

        snapshot = directory / f"{next_base:020d}.snapshot"
        lineage = [EpochEntry(e, o) for e, o in entries if o < next_base]
        out.append(
            SegmentFiles(
                base_offset=base,
                end_offset=end,
                max_timestamp_ms=max_ts,
                log=data,
                offset_index=read(".index") or b"",
                time_index=read(".timeindex") or b"",
                producer_snapshot=snapshot.read_bytes() if snapshot.exists() else b"",
                leader_epoch=checkpoint.format(lineage),
                transaction_index=read(".txnindex"),
                leader_epochs=epochs_in_range([(e, o) for e, o in lineage], base, end),
            )
        )
    return out


def _source_chunks(segment: SegmentFiles, size: int) -> Iterator[bytes]:
    """The segment's ``.log`` in ``size``-byte chunks (the last shorter), from its file when it has one."""
    if segment.log_path is None:
        data = segment.log
        for i in range(0, len(data), size):
            yield data[i : i + size]
        return
    try:
        with segment.log_path.open("rb") as f:
            while chunk := f.read(size):
                yield chunk
    except OSError as exc:
        raise RemoteStorageError(
            f"cannot read the segment {segment.log_path} to copy it: {exc.strerror}"
        ) from exc


def _log_chunks(
    segment: SegmentFiles,
    chunk_size: int,
    compression: bool,
    transform: Callable[[bytes], bytes] | None,
    sizes: list[int],
    original: list[int],
    cancelled: Callable[[], bool] | None = None,
) -> Iterator[bytes]:
    """The ``.log`` object's bytes chunk by chunk (compressed, then encrypted), appending each transformed
    chunk's size to ``sizes`` and the original bytes to ``original[0]`` as it goes (the chunk index is
    built from them once the generator is exhausted). Untransformed, the file is read :data:`LOG_READ_BYTES`
    at a time instead (the chunk sizes are then known from the total). When ``cancelled()`` turns true it raises
    :class:`~kafkalog.errors.RemoteStorageError` before the next chunk: the store's multipart upload is then
    aborted (obstore aborts an upload whose source fails), so nothing is left on the server."""
    if not compression and transform is None:
        # the object is the file's bytes: read whole upload parts (GIL released during each read, no join) and
        # compute the fixed chunks' sizes from the total
        total = 0
        for piece in _source_chunks(segment, LOG_READ_BYTES):
            if cancelled is not None and cancelled():
                raise RemoteStorageError(f"the upload of {segment.log_path or 'the segment'} was cancelled")
            total += len(piece)
            yield piece
        original[0] = total
        full, rest = divmod(total, chunk_size)
        sizes.extend([chunk_size] * full)
        if rest:
            sizes.append(rest)
        return
    compressor = zstandard.ZstdCompressor(write_content_size=True) if compression else None
    for chunk in _source_chunks(segment, chunk_size):
        if cancelled is not None and cancelled():
            raise RemoteStorageError(f"the upload of {segment.log_path or 'the segment'} was cancelled")
        original[0] += len(chunk)
        if compressor is not None:
            chunk = compressor.compress(chunk)
        if transform is not None:
            chunk = transform(chunk)
        sizes.append(len(chunk))
        yield chunk


def write_aiven_segment(
    store: ObjectStore,
    segment: SegmentFiles,
    *,
    topic: str,
    topic_id: str,
    partition: int,
    prefix: str = "",
    segment_id: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    compression: bool = False,
    encryption: tuple[str, RSAPublicKey] | None = None,
    old_style_manifest: bool = False,
    broker_id: int = 0,
    event_timestamp_ms: int = 0,
    upload_manifest: bool = True,
    upload_indexes: bool = True,
    separate_indexes: bool = False,
    cancelled: Callable[[], bool] | None = None,
) -> str:
    """Upload one segment as the Aiven plugin does; returns its key stem (without ``.log`` etc.).
    ``cancelled`` (polled before each chunk of ``.log``) ends the upload mid-way with
    :class:`~kafkalog.errors.RemoteStorageError`, the multipart upload aborted."""
    segment_id = segment_id or kafka_uuid()
    stem = aiven_segment_key(prefix, topic, topic_id, partition, segment.base_offset, segment_id)
    dek = secrets.token_bytes(32) if encryption else b""
    aad = secrets.token_bytes(32) if encryption else b""
    sizes: list[int] = []
    original = [0]
    transform = (lambda chunk: encrypt_chunk(dek, aad, chunk)) if encryption else None
    store.put_stream(
        stem + ".log", _log_chunks(segment, chunk_size, compression, transform, sizes, original, cancelled)
    )
    chunk_index = ChunkIndex.build("variable" if compression else "fixed", chunk_size, original[0], sizes)
    parts: list[bytes] = []
    positions: list[SegmentIndex | None] = []
    position = 0
    sources: list[bytes | None] = [
        segment.offset_index,
        segment.time_index,
        segment.producer_snapshot,
        segment.leader_epoch,
        segment.transaction_index,
    ]
    for source in sources:
        if source is None:
            positions.append(None)
            continue
        part = encrypt_chunk(dek, aad, source) if encryption and source else source
        positions.append(SegmentIndex(position, len(part)))
        parts.append(part)
        position += len(part)
    if upload_indexes and not separate_indexes:
        store.put(stem + ".indexes", b"".join(parts))
    offset, timestamp, snapshot, epoch, txn = positions
    assert offset is not None and timestamp is not None and snapshot is not None and epoch is not None
    metadata = None
    if not old_style_manifest:
        metadata = RemoteLogSegmentMetadata(
            topic_id=topic_id,
            topic=topic,
            partition=partition,
            segment_id=segment_id,
            start_offset=segment.base_offset,
            end_offset=segment.end_offset,
            max_timestamp_ms=segment.max_timestamp_ms,
            broker_id=broker_id,
            event_timestamp_ms=event_timestamp_ms,
            segment_leader_epochs=dict(segment.leader_epochs),
        )
    enc_meta = None
    if encryption:
        kek_id, public_key = encryption
        enc_meta = EncryptionMetadata(wrap_data_key(dek, kek_id, public_key), aad)
    indexes = None if separate_indexes else SegmentIndexes(offset, timestamp, snapshot, epoch, txn)
    manifest = SegmentManifest(chunk_index, indexes, compression, enc_meta, metadata)
    if upload_manifest:
        store.put(stem + ".rsm-manifest", manifest_json(manifest))
    if separate_indexes and upload_indexes:  # RemoteStorageManager before 107d1653: after the manifest
        suffixes = (".index", ".timeindex", ".snapshot", ".txnindex", ".leader-epoch-checkpoint")
        ordered = (segment.offset_index, segment.time_index, segment.producer_snapshot)
        for suffix, source in zip(
            suffixes, (*ordered, segment.transaction_index, segment.leader_epoch), strict=True
        ):
            if source is not None:
                store.put(stem + suffix, encrypt_chunk(dek, aad, source) if encryption and source else source)
    return stem


def write_local_tiered_segment(
    store: ObjectStore,
    segment: SegmentFiles,
    *,
    topic: str,
    topic_id: str,
    partition: int,
    prefix: str = "",
    segment_id: str | None = None,
    skip: Mapping[str, bool] | None = None,
) -> str:
    """Copy one segment as ``RemoteLogSegmentFileset.copy`` does; returns the partition directory's key
    prefix. ``skip`` ({suffix: True}) leaves files out (orphans in tests)."""
    segment_id = segment_id or kafka_uuid()
    directory = f"{prefix}{topic}-{partition}-{topic_id}/"
    files: dict[str, bytes | None] = {
        ".log": segment.log,
        ".index": segment.offset_index,
        ".timeindex": segment.time_index,
        ".txnindex": segment.transaction_index,
        ".leader_epoch_checkpoint": segment.leader_epoch,
        ".snapshot": segment.producer_snapshot,
    }
    for suffix, data in files.items():
        if data is None or (skip or {}).get(suffix):
            continue
        store.put(directory + local_tiered_file_name(segment.base_offset, segment_id, suffix), data)
    return directory
