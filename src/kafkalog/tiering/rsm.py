"""Kafka's ``RemoteStorageManager`` and its implementation over an :class:`~kafkalog.objstore.ObjectStore` in the
Aiven plugin's layout.

Layout and byte formats are :mod:`kafkalog.tiered`'s (``tiered/writer.py`` writes, ``tiered/aiven.py`` reads):
``<key.prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segmentUuid>.{log,indexes,rsm-manifest}``.

Invariants owned here:

* **copy** uploads ``.log``, then ``.indexes``, then ``.rsm-manifest``: a segment whose manifest exists is
  complete; anything else is an orphan that :class:`~kafkalog.tiered.AivenArchive` skips. The ``.log`` is
  streamed (a multipart upload on object storage): transformed (compressed or encrypted), read and
  transformed ``rsm.config.chunk.size`` at a time; untransformed, read a whole upload part
  (:data:`~kafkalog.tiered.writer.LOG_READ_BYTES`) at a time with the GIL released and handed to the store
  as read (no Python-side copy or join, so the appending threads are not held up). A copy holds about
  ``2 x chunk.size`` plus the store's parts in flight (:data:`~kafkalog.objstore.store.PUT_PART_SIZE` x
  :data:`~kafkalog.objstore.store.PUT_CONCURRENCY`), never the segment; the indexes (bounded by
  ``segment.index.bytes``) are read whole.
* **delete** removes the manifest first (the segment becomes an orphan no reader serves), then ``.log`` and
  ``.indexes``; deleting what is already gone is not an error, so a delete can always be retried.
* **fetch** reads only what is asked: a manifest (cached per segment, bounded), then ranged GETs of the
  ``.log`` (the chunks covering the range when chunks are transformed, decoded chunks of the last few
  objects kept so sequential fetches do not fetch a chunk twice) or of one part of ``.indexes``.
* Every storage failure surfaces as :class:`~kafkalog.errors.RemoteStorageError` (a missing object as its
  subclass :class:`~kafkalog.errors.RemoteResourceNotFoundError`); nothing here writes outside the store.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from kafkalog.errors import InvalidConfigurationError, KafkaError, RemoteStorageError
from kafkalog.objstore.open import open_store
from kafkalog.objstore.store import ObjectStore
from kafkalog.remote.metadata import RemoteLogSegmentMetadata
from kafkalog.tiered.aiven import aiven_segment_key
from kafkalog.tiered.crypto import KeyRing, decrypt_chunk
from kafkalog.tiered.files import ChunkedFile, object_url
from kafkalog.tiered.manifest import SegmentIndex, SegmentManifest, parse_manifest
from kafkalog.tiered.writer import SegmentFiles, write_aiven_segment
from kafkalog.tiering.config import RsmConfig

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

__all__ = [
    "AivenRemoteStorageManager",
    "IndexType",
    "LogSegmentData",
    "RemoteStorageManager",
]

#: Manifests kept by one :class:`AivenRemoteStorageManager` (each about 1 KiB).
MANIFEST_CACHE_ENTRIES: Final = 1024
#: Decoded chunks kept per transformed ``.log`` (sequential fetches of one segment reuse its chunks).
CHUNK_CACHE_BYTES: Final = 8 * 1024 * 1024
#: Transformed ``.log`` objects whose decoded chunks are kept at once (so at most 4 x 8 MiB, plus one chunk
#: each when a chunk is larger than the bound).
OPEN_CHUNKED_FILES: Final = 4


class IndexType(Enum):
    """Kafka's ``RemoteStorageManager.IndexType``."""

    OFFSET = "offset"
    TIMESTAMP = "timestamp"
    PRODUCER_SNAPSHOT = "producer_snapshot"
    TRANSACTION = "transaction"
    LEADER_EPOCH = "leader_epoch"


@dataclass(frozen=True)
class LogSegmentData:
    """Kafka's ``LogSegmentData``: the files of one rolled segment and the leader-epoch checkpoint bytes.

    ``producer_snapshot`` None uploads an empty snapshot part (the log had no snapshot at the next segment's
    base offset); ``transaction_index`` None: the segment has none."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot: Path | None
    leader_epoch_index: bytes


class RemoteStorageManager(Protocol):
    """Kafka's ``RemoteStorageManager`` (snake_case): where remote segments' bytes live."""

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> bytes | None:
        """Upload one segment; returns the custom metadata to record (None: none)."""
        ...

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> bytes:
        """Bytes ``[start_position, end_position]`` (inclusive, Kafka's) of the segment's ``.log``; None: to its end."""
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """One index of the segment, whole (empty if the segment has none of that type)."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment's objects (idempotent)."""
        ...

    def close(self) -> None:
        """Release what the manager holds."""
        ...


def _read(path: Path | None, what: str) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RemoteStorageError(f"cannot read the {what} {path} to copy it: {exc.strerror}") from exc


def _load_public_key(path: str) -> RSAPublicKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise RemoteStorageError(f"cannot load the RSA public key file {path}: {exc}") from None
    if not isinstance(key, RSAPublicKey):
        raise RemoteStorageError(f"{path} is not an RSA public key")
    return key


class AivenRemoteStorageManager:
    """A :class:`RemoteStorageManager` writing and reading the Aiven plugin's layout in ``store``."""

    def __init__(self, store: ObjectStore, rsm_config: RsmConfig | None = None) -> None:
        self.store = store
        self.config = rsm_config or RsmConfig()
        self._public_key: tuple[str, RSAPublicKey] | None = None
        self._key_ring: KeyRing | None = None
        if self.config.encryption_key_pairs:
            self._key_ring = KeyRing(
                {kid: files[1] for kid, files in self.config.encryption_key_pairs.items()}
            )
        if self.config.encryption_enabled:
            kid = self.config.encryption_key_pair_id
            assert kid is not None  # RsmConfig checks it
            self._public_key = (kid, _load_public_key(self.config.encryption_key_pairs[kid][0]))
        self._manifests: OrderedDict[str, SegmentManifest] = OrderedDict()
        self._chunked: OrderedDict[str, ChunkedFile] = OrderedDict()
        self._lock = threading.Lock()
        #: set by :meth:`cancel_copies`: every upload under way ends before its next chunk, aborted
        self._cancel = threading.Event()

    def __repr__(self) -> str:
        return f"AivenRemoteStorageManager({self.store.url!r})"

    def cancel_copies(self) -> None:
        """End every copy under way before its next chunk and refuse new ones (the manager closes): each
        raises :class:`~kafkalog.errors.RemoteStorageError` and its multipart upload is aborted, so a close
        never leaves a half-sent upload behind (nor waits for a large segment to finish uploading)."""
        self._cancel.set()

    @property
    def copies_cancelled(self) -> bool:
        """Whether :meth:`cancel_copies` was called."""
        return self._cancel.is_set()

    @classmethod
    def from_config(cls, rsm_config: RsmConfig) -> AivenRemoteStorageManager:
        """An RSM over ``open_store(rsm.config.storage.url, rsm.config.storage.*)`` (no I/O yet)."""
        if not rsm_config.storage_url:
            raise InvalidConfigurationError(
                "rsm.config.storage.url must name the remote tier's object storage (s3://bucket/path, file://...)"
            )
        return cls(open_store(rsm_config.storage_url, rsm_config.storage_options), rsm_config)

    # --- keys ---------------------------------------------------------------------------------------------
    def segment_key(self, metadata: RemoteLogSegmentMetadata) -> str:
        """The key stem of a segment's objects (add ``.log``, ``.indexes``, ``.rsm-manifest``)."""
        segment_id = metadata.remote_log_segment_id
        tip = segment_id.topic_id_partition
        return aiven_segment_key(
            self.config.key_prefix,
            tip.topic,
            str(tip.topic_id),
            tip.partition,
            metadata.start_offset,
            str(segment_id.id),
        )

    # --- copy ---------------------------------------------------------------------------------------------
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> bytes | None:
        """Upload ``.log``, ``.indexes`` and, last, the manifest (see the module docstring)."""
        segment = SegmentFiles(
            base_offset=metadata.start_offset,
            end_offset=metadata.end_offset,
            max_timestamp_ms=metadata.max_timestamp_ms,
            log=b"",
            log_path=segment_data.log_segment,  # streamed chunk by chunk (see write_aiven_segment)
            offset_index=_read(segment_data.offset_index, "offset index"),
            time_index=_read(segment_data.time_index, "time index"),
            producer_snapshot=_read(segment_data.producer_snapshot, "producer snapshot"),
            leader_epoch=segment_data.leader_epoch_index,
            transaction_index=(
                None
                if segment_data.transaction_index is None
                else _read(segment_data.transaction_index, "txn index")
            ),
            leader_epochs=dict(metadata.segment_leader_epochs),
        )
        tip = metadata.topic_id_partition
        try:
            write_aiven_segment(
                self.store,
                segment,
                topic=tip.topic,
                topic_id=str(tip.topic_id),
                partition=tip.partition,
                prefix=self.config.key_prefix,
                segment_id=str(metadata.remote_log_segment_id.id),
                chunk_size=self.config.chunk_size,
                compression=self.config.compression_enabled,
                encryption=self._public_key,
                broker_id=metadata.broker_id,
                event_timestamp_ms=metadata.event_timestamp_ms,
                cancelled=self._cancel.is_set,
            )
        except KafkaError:
            raise
        except Exception as exc:  # a store's own failure type must not escape as anything but storage failure
            raise RemoteStorageError(f"copy of {self.segment_key(metadata)} failed: {exc}") from exc
        return None

    # --- fetch --------------------------------------------------------------------------------------------
    def manifest(self, metadata: RemoteLogSegmentMetadata) -> SegmentManifest:
        """The segment's parsed manifest (cached)."""
        stem = self.segment_key(metadata)
        with self._lock:
            cached = self._manifests.get(stem)
            if cached is not None:
                self._manifests.move_to_end(stem)
                return cached
        key = stem + ".rsm-manifest"
        manifest = parse_manifest(self.store.get(key), object_url(self.store, key))
        with self._lock:
            self._manifests[stem] = manifest
            while len(self._manifests) > MANIFEST_CACHE_ENTRIES:
                self._manifests.popitem(last=False)
        return manifest

    def _data_key(self, manifest: SegmentManifest, name: str) -> tuple[bytes, bytes]:
        enc = manifest.encryption
        assert enc is not None
        if self._key_ring is None:
            raise RemoteStorageError(
                f"{name}: the segment is encrypted with key {enc.key_id!r} and no "
                "rsm.config.encryption.key.pairs are configured"
            )
        return self._key_ring.unwrap(enc.data_key, name), enc.aad

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> bytes:
        """Bytes ``[start_position, end_position]`` of the original ``.log`` (inclusive end; None: its end)."""
        manifest = self.manifest(metadata)
        size = manifest.chunk_index.original_file_size
        end = size if end_position is None else min(size, end_position + 1)
        if start_position < 0 or start_position > size:
            raise RemoteStorageError(
                f"position {start_position} is outside segment {metadata.remote_log_segment_id.id} ({size} bytes)"
            )
        if end <= start_position:
            return b""
        key = self.segment_key(metadata) + ".log"
        if not manifest.compression and manifest.encryption is None:
            return self.store.get_range(key, start_position, end)
        return self._chunked_file(key, manifest).pread(end - start_position, start_position)

    def _chunked_file(self, key: str, manifest: SegmentManifest) -> ChunkedFile:
        """The reader of a transformed ``.log`` with its decoded-chunk cache (the newest few are kept)."""
        with self._lock:
            chunked = self._chunked.get(key)
            if chunked is not None:
                self._chunked.move_to_end(key)
                return chunked
        name = object_url(self.store, key)
        chunked = ChunkedFile(
            self.store,
            key,
            manifest.chunk_index,
            compressed=manifest.compression,
            data_key=(lambda: self._data_key(manifest, name)) if manifest.encryption is not None else None,
            cache_bytes=CHUNK_CACHE_BYTES,
        )
        with self._lock:
            self._chunked[key] = chunked
            while len(self._chunked) > OPEN_CHUNKED_FILES:
                self._chunked.popitem(last=False)[1].close()
        return chunked

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """One part of the ``.indexes`` object, decrypted (one ranged GET)."""
        manifest = self.manifest(metadata)
        si = manifest.segment_indexes
        if (
            si is None
        ):  # separate index objects: a plugin archive from before October 2023, never one we wrote
            raise RemoteStorageError(
                f"{self.segment_key(metadata)}.rsm-manifest has no segmentIndexes (index objects of the plugin's "
                "layout before October 2023); kafkalog's tiering reads only the single .indexes object it writes"
            )
        parts: dict[IndexType, SegmentIndex | None] = {
            IndexType.OFFSET: si.offset,
            IndexType.TIMESTAMP: si.timestamp,
            IndexType.PRODUCER_SNAPSHOT: si.producer_snapshot,
            IndexType.LEADER_EPOCH: si.leader_epoch,
            IndexType.TRANSACTION: si.transaction,
        }
        part = parts[index_type]
        if part is None or part.size == 0:
            return b""
        key = self.segment_key(metadata) + ".indexes"
        data = self.store.get_range(key, part.position, part.position + part.size)
        if manifest.encryption is not None:
            name = object_url(self.store, key)
            dek, aad = self._data_key(manifest, name)
            data = decrypt_chunk(dek, aad, data, f"{name} ({index_type.value} index)")
        return data

    # --- delete -------------------------------------------------------------------------------------------
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Manifest first, then ``.log`` and ``.indexes`` (idempotent)."""
        stem = self.segment_key(metadata)
        with self._lock:
            self._manifests.pop(stem, None)
            chunked = self._chunked.pop(stem + ".log", None)
        if chunked is not None:
            chunked.close()
        try:
            for suffix in (".rsm-manifest", ".log", ".indexes"):
                self.store.delete(stem + suffix)  # a missing key is not an error (ObjectStore's contract)
        except KafkaError:
            raise
        except Exception as exc:
            raise RemoteStorageError(f"delete of {stem} failed: {exc}") from exc

    def close(self) -> None:
        """Forget the cached manifests."""
        with self._lock:
            self._manifests.clear()
            chunked = list(self._chunked.values())
            self._chunked.clear()
        for f in chunked:
            f.close()
