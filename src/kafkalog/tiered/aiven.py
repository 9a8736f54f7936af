"""Archives of the Aiven tiered-storage plugin (``Aiven-Open/tiered-storage-for-apache-kafka``), read from
listings and manifests.

Layout owned here (``ObjectKeyFactory``)::

    <prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segmentUuid>.log
                                                                     .indexes
                                                                     .rsm-manifest

``topicId`` and ``segmentUuid`` are Kafka ``Uuid``\\ s in URL-safe base64 without padding (22 characters).
The plugin uploads ``.log``, then ``.indexes``, then the manifest, so a segment with a manifest is complete;
a ``.log`` or ``.indexes`` without a manifest is an orphan (a failed upload, a partial delete), skipped with a
warning or refused with ``strict=True``.

A manifest whose ``.log`` or ``.indexes`` is gone (:class:`LostSegment`) says its offsets were archived, and
their data is not there: the plugin deletes a segment's three objects in one unordered batch, so a delete
interrupted, or an object removed behind the plugin's back (a bucket lifecycle rule), leaves it. Kafka's
remote-log retention deletes the oldest segments first, after moving the log start offset past them, so
such segments *before* the first readable one are a retention delete in progress: left out with a warning
(the archive starts after them). Anywhere else, or when no segment is readable, the segment stays in the plan
and its offsets are **lost data**: readers report them as missing (the Spark source fails with
``failOnDataLoss=true``, its default, naming the objects; with ``false`` it warns and skips them;
``consume`` exits 2; ``verify`` reports a fault). ``strict=True`` refuses any of them. A lost segment with an
old-style manifest (no end offset) is taken to end where the next segment begins (the last: at its base).

The ``.indexes`` object concatenates the offset index, time index, producer snapshot, leader-epoch
checkpoint and transaction index, each encrypted on its own (never compressed); the manifest's
``segmentIndexes`` slices it.

**Before plugin commit 107d1653 (October 2023)** each index was an object of its own, and the manifest has
no ``segmentIndexes``::

    <...>-<segmentUuid>.log  .rsm-manifest  .index  .timeindex  .snapshot  .leader-epoch-checkpoint  [.txnindex]

(``ObjectKeyFactory.Suffix`` of that time), uploaded in that order: ``.log``, the manifest, then the indexes
(``.txnindex`` only when the segment has one), each the whole file as one transformed chunk: encrypted on
its own when the archive is (``IV || ciphertext || tag``; empty when the file is), never compressed. Such a
segment is complete with all but ``.txnindex``; with its manifest but some index object missing it is an
upload that stopped after the manifest (an orphan: skipped with a warning, as Kafka abandons it); with its
manifest but no ``.log`` it is a :class:`LostSegment`. Plugin versions before 204d3928 (July 2023) uploaded
these index objects unencrypted even in an encrypted archive: reading one fails GCM authentication with an
error saying so, never a misread.

Planning costs one LIST per level and one GET per manifest (run ``manifest_concurrency`` at a time), plus one
small ranged GET of the newest segment's leader-epoch blob (the lineage). Manifests older than plugin commit
f9439410 (September 2023) carry no ``remoteLogSegmentMetadata``; for those the end offset, max timestamp and
epochs come from the segment's own indexes and the tail of its ``.log`` (offset index's last entry, then a
scan of the last batches), which costs a few ranged GETs per such segment.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore.files import RandomAccessFile
from kafkalog.objstore.ranged import DEFAULT_WHOLE_FILE_MAX_BYTES, RangedFile, RangedSettings
from kafkalog.objstore.store import ObjectMeta, ObjectStore
from kafkalog.tiered.crypto import GCM_TAG_SIZE, IV_SIZE, KEY_RING_OPTION, KeyRing, decrypt_chunk
from kafkalog.tiered.files import DEFAULT_CHUNK_CACHE_BYTES, ChunkedFile, object_url
from kafkalog.tiered.manifest import (
    ChunkIndex,
    EncryptionMetadata,
    SegmentIndex,
    SegmentIndexes,
    SegmentManifest,
    parse_manifest,
)
from kafkalog.tiered.scan import scan_end
from kafkalog.tiered.view import (
    ArchivedSegment,
    ArchivePartitionSource,
    GoneSegment,
    PartKind,
    filtered_epochs,
    leave_out_leading_gone,
    parse_epoch_blob,
    place_gone,
    select_segments,
    warn_gone,
)

__all__ = [
    "DEFAULT_MANIFEST_CONCURRENCY",
    "MAX_INDEXES_BYTES",
    "MAX_MANIFEST_BYTES",
    "AivenArchive",
    "AivenSegment",
    "LostSegment",
    "aiven_segment_key",
    "epochs_in_range",
]

log = logging.getLogger(__name__)

#: Manifests fetched at once while planning a partition.
DEFAULT_MANIFEST_CONCURRENCY: Final = 16
#: A manifest larger than this is refused unread (real ones are about 1 KiB; a variable chunk index of a
#: 2 GiB segment in 4 MiB chunks adds well under 1 KiB).
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
#: The ``.indexes`` parts of one segment are read whole: a manifest slicing more than this is refused (Kafka's
#: own indexes are at most ``segment.index.bytes``, 10 MiB by default, each).
MAX_INDEXES_BYTES: Final = DEFAULT_WHOLE_FILE_MAX_BYTES
_UUID = r"[A-Za-z0-9_-]{22}"
_TOPIC_DIR = re.compile(rf"^(?P<topic>.+)-(?P<id>{_UUID})/$")
_PARTITION_DIR = re.compile(r"^(?P<p>\d{1,10})/$")
_SEGMENT_OBJECT = re.compile(
    rf"^(?P<offset>\d{{20}})-(?P<id>{_UUID})\."
    r"(?P<suffix>log|indexes|rsm-manifest|index|timeindex|snapshot|txnindex|leader-epoch-checkpoint)$"
)
#: The index objects of the layout before October 2023 (one object per index) by suffix.
SEPARATE_INDEX_SUFFIXES: Final[dict[str, PartKind]] = {
    "index": "offset",
    "timeindex": "timestamp",
    "snapshot": "producer_snapshot",
    "leader-epoch-checkpoint": "leader_epoch",
    "txnindex": "transaction",
}
_SEPARATE_REQUIRED: Final = frozenset(
    {"log", "rsm-manifest", "index", "timeindex", "snapshot", "leader-epoch-checkpoint"}
)
_CONCATENATED_REQUIRED: Final = frozenset({"log", "indexes", "rsm-manifest"})
TOPIC_IDS_OPTION: Final = "topic_ids"


def aiven_segment_key(
    prefix: str, topic: str, topic_id: str, partition: int, start_offset: int, segment_id: str
) -> str:
    """``ObjectKeyFactory.mainPath`` with the prefix (add ``.log`` / ``.indexes`` / ``.rsm-manifest``)."""
    return f"{prefix}{topic}-{topic_id}/{partition}/{start_offset:020d}-{segment_id}"


def epochs_in_range(entries: list[tuple[int, int]], start: int, end: int) -> dict[int, int]:
    """Kafka's ``getLeaderEpochEntries(log, start, end + 1)``: the epochs with offsets in ``[start, end]``,
    the first one moved up to ``start``."""
    out: dict[int, int] = {}
    for i, (epoch, offset) in enumerate(entries):
        nxt = entries[i + 1][1] if i + 1 < len(entries) else None
        if offset > end or (nxt is not None and nxt <= start):
            continue
        out[epoch] = max(offset, start)
    return out


def _check_manifest_size(store: ObjectStore, meta: ObjectMeta) -> None:
    """A manifest larger than :data:`MAX_MANIFEST_BYTES` (its listed size) is refused before its GET."""
    if meta.size > MAX_MANIFEST_BYTES:
        raise RemoteStorageError(
            f"{_url(store, meta.key)}: corrupt segment manifest: {meta.size} bytes, "
            f"more than the {MAX_MANIFEST_BYTES} a manifest can need"
        )


def _url(store: ObjectStore, key: str) -> str:
    return object_url(store, key)


class AivenSegment(ArchivedSegment):
    """A segment of an Aiven archive (its manifest parsed; its objects read on demand)."""

    def __init__(
        self,
        store: ObjectStore,
        stem: str,
        manifest: SegmentManifest,
        log_meta: ObjectMeta,
        indexes_meta: ObjectMeta | None,
        *,
        key_ring: KeyRing | None,
        part_objects: Mapping[PartKind, ObjectMeta] | None = None,
        cache_bytes: int,
        ranged: RangedSettings | None = None,
        base_offset: int,
        segment_id: str,
    ) -> None:
        self.store = store
        self.stem = stem
        self.manifest = manifest
        self.log_meta = log_meta
        self.indexes_meta = indexes_meta
        #: The index objects of a segment in the layout before October 2023 (None: one ``.indexes``).
        self.part_objects = None if part_objects is None else dict(part_objects)
        self._key_ring = key_ring
        self._cache_bytes = cache_bytes
        #: How the ``.log`` is read: read-ahead depth (blocks of an untransformed object, chunks of a
        #: transformed one), block size and cache of an untransformed one.
        self.ranged = ranged or RangedSettings()
        self._lock = threading.Lock()
        self._indexes: bytes | None = None
        self._dek: tuple[bytes, bytes] | None = None
        enc = manifest.encryption is not None
        si = manifest.segment_indexes

        def size(part: SegmentIndex | ObjectMeta | None) -> int | None:
            if part is None:
                return None
            return max(0, part.size - IV_SIZE - GCM_TAG_SIZE) if enc and part.size else part.size

        if si is None:
            objects = self.part_objects or {}
            parts: dict[PartKind, SegmentIndex | ObjectMeta | None] = {
                k: objects.get(k)
                for k in ("offset", "timestamp", "producer_snapshot", "leader_epoch", "transaction")
            }
        else:
            parts = {
                "offset": si.offset,
                "timestamp": si.timestamp,
                "producer_snapshot": si.producer_snapshot,
                "leader_epoch": si.leader_epoch,
                "transaction": si.transaction,
            }
        md = manifest.remote_log_segment_metadata
        super().__init__(
            base_offset=base_offset,
            end_offset=md.end_offset if md is not None else -1,
            max_timestamp_ms=md.max_timestamp_ms if md is not None else -1,
            size=manifest.chunk_index.original_file_size,
            segment_id=segment_id,
            name=_url(store, stem + ".rsm-manifest"),
            leader_epochs=md.segment_leader_epochs if md is not None else {},
            event_timestamp_ms=md.event_timestamp_ms if md is not None else None,
            part_sizes={kind: size(part) for kind, part in parts.items()},
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Planned state only, as flat values (a Spark task carries thousands of segments: about 200 bytes
        # each, not 800 as attribute dicts of dataclasses): the lock, the caches (indexes blob, unwrapped data
        # key), the listing's metadata and the manifest's remoteLogSegmentMetadata (its offsets, time and
        # epochs are this segment's own fields) stay behind; the store and settings, shared by every
        # segment, pickle once.
        m = self.manifest
        ci, si = m.chunk_index, m.segment_indexes
        sizes: tuple[int, ...] = ci.transformed_sizes
        if ci.kind == "fixed":  # every chunk the same size but the last: two numbers
            sizes = (sizes[0], sizes[-1]) if sizes else ()
        separate: tuple[tuple[str, str, int], ...] | None = None
        parts: tuple[tuple[int, int] | None, ...] = ()
        if si is None:  # the layout before October 2023: one object per index part
            separate = tuple((kind, o.key, o.size) for kind, o in (self.part_objects or {}).items())
        else:
            parts = tuple(
                None if p is None else (p.position, p.size)
                for p in (si.offset, si.timestamp, si.producer_snapshot, si.leader_epoch, si.transaction)
            )
        enc = None if m.encryption is None else (m.encryption.data_key, m.encryption.aad)
        return _planned_segment, (
            self.store,
            self.stem,
            (ci.kind, ci.original_chunk_size, ci.original_file_size, sizes),
            parts if separate is None else separate,
            m.compression,
            enc,
            self._key_ring,
            self._cache_bytes,
            self.ranged,
            (self.base_offset, self.end_offset, self.max_timestamp_ms, self.event_timestamp_ms),
            self.segment_id,
            tuple(self.leader_epochs.items()),
        )

    def _data_key(self) -> tuple[bytes, bytes]:
        enc = self.manifest.encryption
        assert enc is not None
        with self._lock:
            if self._dek is None:
                if self._key_ring is None:
                    raise RemoteStorageError(
                        f"{self.name}: the segment is encrypted with key {enc.key_id!r}; pass the RSA private "
                        f"key through the {KEY_RING_OPTION} option ({{key id: PEM}})"
                    )
                self._dek = (self._key_ring.unwrap(enc.data_key, self.name), enc.aad)
            return self._dek

    def open_log(self) -> RandomAccessFile:
        key = self.stem + ".log"
        m = self.manifest
        if not m.compression and m.encryption is None:
            return RangedFile(self.store, key, size=m.chunk_index.original_file_size, settings=self.ranged)
        return ChunkedFile(
            self.store,
            key,
            m.chunk_index,
            compressed=m.compression,
            data_key=self._data_key if m.encryption is not None else None,
            cache_bytes=self._cache_bytes,
            readahead_chunks=self.ranged.readahead_blocks,
        )

    def part_name(self, kind: PartKind) -> str:
        """What errors call one index part: its object, or its slice of the ``.indexes`` object."""
        if self.part_objects is not None:
            meta = self.part_objects.get(kind)
            return _url(self.store, meta.key) if meta is not None else f"{self.name} ({kind} index)"
        return f"{_url(self.store, self.stem + '.indexes')} ({kind} index)"

    def _indexes_object(self) -> bytes:
        with self._lock:
            if self._indexes is None:
                assert self.manifest.segment_indexes is not None
                end = self.manifest.segment_indexes.end()
                self._indexes = self.store.get_range(self.stem + ".indexes", 0, end) if end else b""
            return self._indexes

    def read_part(self, kind: PartKind) -> bytes:
        si = self.manifest.segment_indexes
        if si is None:  # the layout before October 2023: one object per index
            meta = (self.part_objects or {}).get(kind)
            if meta is None or meta.size == 0:
                return b""
            data = self.store.get_range(meta.key, 0, meta.size)
            return self._decrypted(data, kind)
        part = {
            "offset": si.offset,
            "timestamp": si.timestamp,
            "producer_snapshot": si.producer_snapshot,
            "leader_epoch": si.leader_epoch,
            "transaction": si.transaction,
        }[kind]
        if part is None or part.size == 0:
            return b""
        if kind == "leader_epoch" and self._indexes is None:
            data = self.store.get_range(self.stem + ".indexes", part.position, part.position + part.size)
        else:
            data = self._indexes_object()[part.position : part.position + part.size]
        return self._decrypted(data, kind)

    def _decrypted(self, data: bytes, kind: PartKind) -> bytes:
        if self.manifest.encryption is None:
            return data
        key, aad = self._data_key()
        where = self.part_name(kind)
        if self.part_objects is not None:
            where += (
                " (an index object of the layout before October 2023; plugin versions before July 2023 "
                "uploaded them unencrypted, which kafkalog does not read)"
            )
        return decrypt_chunk(key, aad, data, where)


class LostSegment(GoneSegment):
    """A segment whose manifest remains while its ``.log`` or ``.indexes`` is gone (see the module doc): its
    offsets, as the manifest gives them, are in the plan, and opening any of its files raises
    ``FileNotFoundError`` naming the objects gone."""

    def __init__(self, store: ObjectStore, stem: str, manifest: SegmentManifest, group: _Group) -> None:
        md = manifest.remote_log_segment_metadata
        super().__init__(
            base_offset=group.offset,
            end_offset=md.end_offset if md is not None else -1,
            max_timestamp_ms=md.max_timestamp_ms if md is not None else -1,
            size=manifest.chunk_index.original_file_size,
            segment_id=group.segment_id,
            name=_url(store, stem + ".rsm-manifest"),
            leader_epochs=md.segment_leader_epochs if md is not None else {},
            event_timestamp_ms=md.event_timestamp_ms if md is not None else None,
            part_sizes={},
        )
        needed = ("log", "indexes") if manifest.segment_indexes is not None else ("log",)
        self.missing = tuple(_url(store, f"{stem}.{s}") for s in needed if s not in group.objects)


def _planned_segment(
    store: ObjectStore,
    stem: str,
    chunks: tuple[Any, int, int, tuple[int, ...]],
    parts: tuple[Any, ...],
    compression: bool,
    enc: tuple[str, bytes] | None,
    key_ring: KeyRing | None,
    cache_bytes: int,
    ranged: RangedSettings,
    offsets: tuple[int, int, int, int | None],
    segment_id: str,
    leader_epochs: tuple[tuple[int, int], ...],
) -> AivenSegment:
    """An unpickled :class:`AivenSegment` (see its ``__reduce__``)."""
    kind, chunk_size, file_size, sizes = chunks
    if kind == "fixed":
        count = ChunkIndex.chunk_count(chunk_size, file_size)
        sizes = (sizes[0],) * (count - 1) + (sizes[-1],) if count else ()
    segment_indexes: SegmentIndexes | None = None
    part_objects: dict[PartKind, ObjectMeta] | None = None
    if not parts or (parts[0] is not None and len(parts[0]) == 3):  # separate index objects
        part_objects = {p[0]: ObjectMeta(p[1], p[2]) for p in parts}
    else:
        offset, timestamp, snapshot, epoch, transaction = (
            None if p is None else SegmentIndex(p[0], p[1]) for p in parts
        )
        assert offset is not None and timestamp is not None and snapshot is not None and epoch is not None
        segment_indexes = SegmentIndexes(offset, timestamp, snapshot, epoch, transaction)
    manifest = SegmentManifest(
        ChunkIndex.build(kind, chunk_size, file_size, sizes),
        segment_indexes,
        compression,
        None if enc is None else EncryptionMetadata(enc[0], enc[1]),
        None,
    )
    base_offset, end_offset, max_timestamp_ms, event_timestamp_ms = offsets
    seg = AivenSegment(
        store,
        stem,
        manifest,
        ObjectMeta(stem + ".log", manifest.chunk_index.transformed_file_size),
        None if segment_indexes is None else ObjectMeta(stem + ".indexes", segment_indexes.end()),
        key_ring=key_ring,
        part_objects=part_objects,
        cache_bytes=cache_bytes,
        ranged=ranged,
        base_offset=base_offset,
        segment_id=segment_id,
    )
    seg.end_offset, seg.max_timestamp_ms, seg.event_timestamp_ms = (
        end_offset,
        max_timestamp_ms,
        event_timestamp_ms,
    )
    seg.leader_epochs = dict(leader_epochs)
    return seg


@dataclass
class _Group:
    offset: int
    segment_id: str
    objects: dict[str, ObjectMeta]


class AivenArchive:
    """The topics and partitions of an Aiven-layout archive under ``prefix`` (``""`` or ending with ``/``;
    the plugin's ``key.prefix`` is free-form, so a prefix not ending with ``/`` is used as is).

    Options: ``key_ring`` (``{kekId: PEM text | bytes | path}`` or a :class:`KeyRing`) for encrypted
    segments; ``strict`` (orphans, overlaps, gaps and segments outside the lineage are errors, not warnings);
    ``topic_ids`` (``{topic: topicId}``: which incarnation of a recreated topic to read; by default the one
    whose newest manifest has the newest ``eventTimestampMs``); ``chunk_cache_bytes`` (decoded chunks kept per
    open ``.log``); ``manifest_concurrency`` (manifest GETs at once); ``ranged`` (the storage options'
    :class:`~kafkalog.objstore.ranged.RangedSettings`: read-ahead, and the blocks of an untransformed ``.log``)."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "",
        *,
        key_ring: KeyRing | Mapping[str, str] | None = None,
        strict: bool = False,
        topic_ids: Mapping[str, str] | None = None,
        chunk_cache_bytes: int = DEFAULT_CHUNK_CACHE_BYTES,
        manifest_concurrency: int = DEFAULT_MANIFEST_CONCURRENCY,
        ranged: RangedSettings | None = None,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.key_ring = key_ring if key_ring is None or isinstance(key_ring, KeyRing) else KeyRing(key_ring)
        self.strict = strict
        self.topic_id_option = dict(topic_ids or {})
        self.chunk_cache_bytes = chunk_cache_bytes
        self.ranged = ranged or RangedSettings()
        self.manifest_concurrency = max(1, manifest_concurrency)
        self._topics: dict[str, list[str]] | None = None
        self._chosen_ids: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"AivenArchive({_url(self.store, self.prefix)!r})"

    def topics(self) -> dict[str, list[str]]:
        """Topic name -> the topic ids found for it (more than one: the topic was recreated)."""
        if self._topics is None:
            found: dict[str, list[str]] = {}
            for p in self.store.list(self.prefix).prefixes:
                m = _TOPIC_DIR.match(p[len(self.prefix) :])
                if m is not None:
                    found.setdefault(m.group("topic"), []).append(m.group("id"))
            self._topics = {t: sorted(ids) for t, ids in sorted(found.items())}
        return self._topics

    def topic_id(self, topic: str) -> str:
        """The topic id read for ``topic`` (see the class docstring)."""
        ids = self.topics().get(topic)
        if not ids:
            raise RemoteResourceNotFoundError(
                f"{_url(self.store, self.prefix)}: no topic {topic!r} in the archive (found {sorted(self.topics())})"
            )
        wanted = self.topic_id_option.get(topic)
        if wanted is not None:
            if wanted not in ids:
                raise RemoteResourceNotFoundError(
                    f"{_url(self.store, self.prefix)}: topic {topic!r} has no id {wanted!r} "
                    f"(the {TOPIC_IDS_OPTION} option); found {ids}"
                )
            return wanted
        if len(ids) == 1:
            return ids[0]
        if topic not in self._chosen_ids:
            self._chosen_ids[topic] = self._newest_incarnation(topic, ids)
        return self._chosen_ids[topic]

    def _newest_incarnation(self, topic: str, ids: list[str]) -> str:
        stamps: dict[str, int] = {}
        for topic_id in ids:
            base = f"{self.prefix}{topic}-{topic_id}/"
            best = -1
            for p in self.store.list(base).prefixes:
                objects = [o for o in self.store.list(p).objects if o.key.endswith(".rsm-manifest")]
                if not objects:
                    continue
                newest = max(objects, key=lambda o: o.key)
                _check_manifest_size(self.store, newest)
                manifest = parse_manifest(self.store.get(newest.key), _url(self.store, newest.key))
                md = manifest.remote_log_segment_metadata
                stamp = md.event_timestamp_ms if md is not None else newest.last_modified_ms
                if stamp is None:
                    raise RemoteStorageError(
                        f"{_url(self.store, self.prefix)}: topic {topic!r} was recreated (ids {ids}) and its "
                        f"manifests carry no eventTimestampMs; choose one with the {TOPIC_IDS_OPTION} option"
                    )
                best = max(best, stamp)
            stamps[topic_id] = best
        chosen = max(ids, key=lambda i: (stamps[i], i))
        log.warning(
            "%s: topic %r was recreated (ids %s); reading the newest, %s (set %s to choose)",
            _url(self.store, self.prefix),
            topic,
            ids,
            chosen,
            TOPIC_IDS_OPTION,
        )
        return chosen

    def partitions(self, topic: str) -> list[int]:
        """The partitions archived for ``topic``."""
        base = f"{self.prefix}{topic}-{self.topic_id(topic)}/"
        out = []
        for p in self.store.list(base).prefixes:
            m = _PARTITION_DIR.match(p[len(base) :])
            if m is not None:
                out.append(int(m.group("p")))
        return sorted(out)

    def partition(self, topic: str, partition: int) -> ArchivePartitionSource:
        """Plan one partition: its segments chosen, as a partition directory's files."""
        base = f"{self.prefix}{topic}-{self.topic_id(topic)}/{partition}/"
        name = _url(self.store, base).rstrip("/")
        groups: dict[str, _Group] = {}
        strays: list[str] = []
        objects = self.store.list(base).objects
        for obj in objects:
            m = _SEGMENT_OBJECT.match(obj.key[len(base) :])
            if m is None:
                strays.append(obj.key)
                continue
            stem = obj.key[: -len(m.group("suffix")) - 1]
            group = groups.setdefault(stem, _Group(int(m.group("offset")), m.group("id"), {}))
            group.objects[m.group("suffix")] = obj
        if not groups and not strays:
            raise RemoteResourceNotFoundError(
                f"{name}: no archived segments (is the partition or prefix right?)"
            )
        orphans: list[str] = list(strays)
        complete: list[tuple[str, _Group]] = []
        gone: list[tuple[str, _Group]] = []
        for stem, group in sorted(groups.items(), key=lambda kv: (kv[1].offset, kv[0])):
            have = set(group.objects)
            if have == _CONCATENATED_REQUIRED or (
                "indexes" not in have and _SEPARATE_REQUIRED <= have <= _SEPARATE_REQUIRED | {"txnindex"}
            ):
                complete.append((stem, group))
            elif "rsm-manifest" in have:
                gone.append((stem, group))  # lost data, or (separate indexes) an upload that stopped
            else:
                orphans.extend(o.key for o in group.objects.values())
        for key in orphans:
            log.warning(
                "%s: orphan object %s (no complete segment: no manifest, or a file missing)", name, key
            )
        if orphans and self.strict:
            raise RemoteStorageError(
                f"{name}: orphan objects {orphans[:5]}{' ...' if len(orphans) > 5 else ''} (strict=True)"
            )

        def manifest_of(group: _Group) -> SegmentManifest:
            manifest_meta = group.objects["rsm-manifest"]
            manifest_key = manifest_meta.key
            _check_manifest_size(self.store, manifest_meta)
            return parse_manifest(
                self.store.get_range(manifest_key, 0, manifest_meta.size), _url(self.store, manifest_key)
            )

        def load(item: tuple[str, _Group]) -> AivenSegment:
            stem, group = item
            return self._segment(stem, group, manifest_of(group))

        def load_lost(item: tuple[str, _Group]) -> LostSegment | None:
            stem, group = item
            manifest = manifest_of(group)
            if manifest.segment_indexes is None and "log" in group.objects:
                return None  # the layout before October 2023: the upload stopped before its index objects
            return LostSegment(self.store, stem, manifest, group)

        with ThreadPoolExecutor(max_workers=self.manifest_concurrency) as pool:
            segments = list(pool.map(load, complete))
            maybe_lost = list(pool.map(load_lost, gone))
        lost = [s for s in maybe_lost if s is not None]
        stopped = [group for (_, group), s in zip(gone, maybe_lost, strict=True) if s is None]
        for group in stopped:
            keys = [o.key for o in group.objects.values()]
            orphans.extend(keys)
            for key in keys:
                log.warning(
                    "%s: orphan object %s (an upload that stopped before its index objects)", name, key
                )
        if stopped and self.strict:
            raise RemoteStorageError(
                f"{name}: orphan objects {orphans[:5]}{' ...' if len(orphans) > 5 else ''} (strict=True)"
            )
        lineage: dict[int, int] | None = None
        if segments:
            newest = max(segments, key=lambda s: (s.end_offset, s.event_timestamp_ms or -1, s.base_offset))
            entries = parse_epoch_blob(newest.read_part("leader_epoch"), newest.part_name("leader_epoch"))
            lineage = filtered_epochs(dict(entries)) if entries else None
        place_gone(lost, segments)
        if lost and self.strict:
            raise RemoteStorageError(
                f"{name}: segments whose manifest remains but whose data is gone: "
                f"{[u for s in lost for u in s.missing][:5]} (strict=True)"
            )
        selection = select_segments([*segments, *lost], lineage, name, strict=self.strict)
        leave_out_leading_gone(selection, name)
        warn_gone(selection, name)
        listed = tuple((o.key, o.size) for o in objects)
        return ArchivePartitionSource(name, selection, orphans, listed)

    def _segment(self, stem: str, group: _Group, manifest: SegmentManifest) -> AivenSegment:
        log_meta = group.objects["log"]
        indexes_meta = group.objects.get("indexes")
        manifest_url = _url(self.store, group.objects["rsm-manifest"].key)
        part_objects: dict[PartKind, ObjectMeta] | None = None
        if (manifest.segment_indexes is None) != (indexes_meta is None):
            raise RemoteStorageError(
                f"{manifest_url}: corrupt segment manifest: "
                + (
                    "it has no segmentIndexes, yet the segment's indexes are one .indexes object"
                    if indexes_meta is not None
                    else "it slices a .indexes object (segmentIndexes), and the segment has none"
                )
            )
        if indexes_meta is None:
            part_objects = {
                kind: group.objects[suffix]
                for suffix, kind in SEPARATE_INDEX_SUFFIXES.items()
                if suffix in group.objects
            }
            for meta in part_objects.values():
                if meta.size > MAX_INDEXES_BYTES:
                    raise RemoteStorageError(
                        f"{_url(self.store, meta.key)}: {meta.size} bytes, more than the {MAX_INDEXES_BYTES} an "
                        "index object is read whole within"
                    )
        md = manifest.remote_log_segment_metadata
        if md is not None and (md.start_offset != group.offset or md.segment_id != group.segment_id):
            raise RemoteStorageError(
                f"{manifest_url}: corrupt segment manifest: it describes segment {md.segment_id} at offset "
                f"{md.start_offset}, its key segment {group.segment_id} at offset {group.offset}"
            )
        expected = manifest.chunk_index.transformed_file_size
        if log_meta.size != expected:
            raise RemoteStorageError(
                f"{_url(self.store, log_meta.key)}: {log_meta.size} bytes, but its manifest ({manifest_url}) "
                f"says {expected}: the object is {'shorter' if log_meta.size < expected else 'longer'} than "
                "its manifest says (a damaged or replaced upload)"
            )
        need = 0 if manifest.segment_indexes is None else manifest.segment_indexes.end()
        if need > MAX_INDEXES_BYTES:
            raise RemoteStorageError(
                f"{manifest_url}: corrupt segment manifest: its segmentIndexes span {need} bytes, more than the "
                f"{MAX_INDEXES_BYTES} a segment's indexes are read whole within"
            )
        if indexes_meta is not None and indexes_meta.size < need:
            raise RemoteStorageError(
                f"{_url(self.store, indexes_meta.key)}: {indexes_meta.size} bytes, but its manifest "
                f"({manifest_url}) slices it to {need}: the object is shorter than its manifest says"
            )
        if manifest.encryption is not None and self.key_ring is None:
            raise RemoteStorageError(
                f"{manifest_url}: the segment is encrypted with key {manifest.encryption.key_id!r}; pass the "
                f"RSA private key through the {KEY_RING_OPTION} option ({{key id: PEM}}; Spark: keyRing, the CLI: "
                "--key-ring FILE)"
            )
        seg = AivenSegment(
            self.store,
            stem,
            manifest,
            log_meta,
            indexes_meta,
            key_ring=self.key_ring,
            cache_bytes=self.chunk_cache_bytes,
            ranged=self.ranged,
            base_offset=group.offset,
            segment_id=group.segment_id,
            part_objects=part_objects,
        )
        if md is None:
            log_file = seg.open_log()
            try:
                offset_index = seg.read_part("offset")
                time_index = seg.read_part("timestamp")
                seg.end_offset, seg.max_timestamp_ms = scan_end(
                    log_file, seg.base_offset, offset_index, time_index
                )
            finally:
                log_file.close()
            entries = parse_epoch_blob(seg.read_part("leader_epoch"), seg.part_name("leader_epoch"))
            seg.leader_epochs = epochs_in_range(list(entries), seg.base_offset, seg.end_offset)
        return seg
