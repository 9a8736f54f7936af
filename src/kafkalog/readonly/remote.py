"""Opening a data directory in object storage: the store for a URL, the layout its keys show, and the union of
a local data directory with its tiered-storage archive.

Invariants owned here:

* A URL becomes exactly one :class:`~kafkalog.objstore.ObjectStore` (rooted at the URL's bucket and prefix,
  opened with the caller's storage options) and one layout, detected from the keys under the root
  (:func:`kafkalog.tiered.detect_layout`: one or two LISTs) or forced by name: ``logdir`` (a copy of a log
  dir), ``aiven`` (the Aiven plugin's archive) or ``local-tiered`` (Kafka's ``LocalTieredStorage``). A
  prefix with nothing under it is :class:`~kafkalog.errors.RemoteResourceNotFoundError`.
* An archive has no checkpoints: its log start is its first chosen segment's base offset and its high
  watermark (and, without open transactions, its LSO) the end of its last chosen segment.
* **Whole history** (:class:`TieredUnionSource`): a partition's local directory (recent segments) and its
  archive (older ones) read as one partition: every local segment, and the archived segments whose base
  offset is below the first local segment's (the same offsets archived and still local are read from the
  local copy). Kafka archives whole segments under the uploading leader's base offsets, which need not be
  this replica's: an archived segment that straddles the first local offset is read only below it (the
  reader ends every segment's data at the next segment's base offset). Offsets and checkpoints are the local
  log dir's.
* **Planned state travels**: a :class:`PlannedArchive` (and a :class:`TieredUnionSource` over one) pickles as its
  chosen segments and their manifests, clipped to a task's offsets by ``within``; its store pickles as its URL
  and options (never a live connection), so an executor reads by ranged GETs without planning again.
* Storage options travel with the reader (Spark pickles them to executors) and are never part of a ``repr``
  or a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkalog.errors import InvalidConfigurationError, RemoteResourceNotFoundError
from kafkalog.log.names import TopicPartition
from kafkalog.objstore import ObjectStore, PartitionSource, RandomAccessFile, open_store
from kafkalog.objstore.ranged import RangedSettings
from kafkalog.readonly.copies import LogDirCopy, object_url
from kafkalog.readonly.local import LocalPartitionSource
from kafkalog.readonly.state import LogDirState, NoLogDirState, RemoteLayout
from kafkalog.storage.files import LOG_FILE_SUFFIX, offset_from_file_name
from kafkalog.tiered import AivenArchive, ArchivePartitionSource, KeyRing, LocalTieredArchive, detect_layout
from kafkalog.tiered.detect import LAYOUTS

__all__ = ["LAYOUTS", "ArchiveLayout", "TieredUnionSource", "open_layout"]


def open_layout(
    url: str,
    storage_options: Mapping[str, str],
    *,
    layout: str | None = None,
    store: ObjectStore | None = None,
    key_ring: KeyRing | Mapping[str, Any] | None = None,
    strict: bool = False,
    prefix: str = "",
    topic_ids: Mapping[str, str] | None = None,
) -> RemoteLayout:
    """The layout of the data at ``url`` (``store``: one already open at that root; ``layout`` forces one of
    :data:`LAYOUTS`; ``key_ring`` decrypts an encrypted Aiven archive; ``strict`` makes orphans, overlaps
    and gaps of an archive errors instead of warnings; ``prefix``: a free-form Aiven ``key.prefix`` glued to
    the topic directories' names; ``topic_ids``: which incarnation of a recreated topic to read)."""
    if layout is not None and layout not in LAYOUTS:
        raise InvalidConfigurationError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if store is None:
        store = open_store(url, storage_options)
    kind = detect_layout(store, prefix, layout=layout)
    if kind == "logdir":
        return LogDirCopy(store, "", settings=RangedSettings.from_options(storage_options))
    if kind == "aiven":
        archive = AivenArchive(
            store,
            prefix,
            key_ring=key_ring,
            strict=strict,
            topic_ids=topic_ids,
            ranged=RangedSettings.from_options(storage_options),
        )
        return ArchiveLayout("aiven", archive, store)
    return ArchiveLayout("local-tiered", LocalTieredArchive(store, prefix, strict=strict), store)


class ArchiveLayout:
    """A tiered-storage archive (Aiven or LocalTieredStorage) as a :class:`~kafkalog.readonly.log.RemoteLayout`:
    each partition is planned (listing and manifests, no ``.log`` read) when its source is first asked for."""

    def __init__(self, kind: str, archive: AivenArchive | LocalTieredArchive, store: ObjectStore) -> None:
        self.kind = kind
        self.archive = archive
        self.store = store
        self._sources: dict[TopicPartition, PlannedArchive] = {}
        self._names: dict[TopicPartition, str] | None = None
        self._keys: dict[TopicPartition, str] = {}
        self._listed: dict[TopicPartition, tuple[tuple[str, int], ...]] = {}

    def __repr__(self) -> str:
        return f"ArchiveLayout({self.kind!r}, {self.name!r})"

    @property
    def name(self) -> str:
        """The archive's root URL."""
        return self.store.url

    def partitions(self) -> dict[TopicPartition, str]:
        """Every archived partition -> its URL (one LIST per topic for Aiven, one in all for LocalTiered)."""
        if self._names is None:
            archive = self.archive
            names: dict[TopicPartition, str] = {}
            if isinstance(archive, AivenArchive):
                for topic in archive.topics():
                    topic_dir = f"{topic}-{archive.topic_id(topic)}"
                    for p in archive.partitions(topic):
                        self._keys[TopicPartition(topic, p)] = f"{archive.prefix}{topic_dir}/{p}/"
            else:
                for (topic, p), ids in archive.directories().items():
                    self._keys[TopicPartition(topic, p)] = f"{archive.prefix}{topic}-{p}-{ids[-1]}/"
            for tp, key in self._keys.items():
                names[tp] = object_url(self.store, key)
            self._names = names
        return self._names

    def is_empty(self) -> bool:
        """Whether the archive holds no partition."""
        return not self.partitions()

    def source(self, tp: TopicPartition) -> PlannedArchive:
        """The partition's chosen segments as a partition directory (planned once, then cached)."""
        source = self._sources.get(tp)
        if source is None:
            planned = self.archive.partition(tp.topic, tp.partition)
            if tp in self.partitions():  # what refresh_partition compares with: the planning LIST's objects
                listed = planned.listed
                if listed is None or not all(k.startswith(self._keys[tp]) for k, _ in listed[:1]):
                    listed = self._listing(tp)  # planned under another prefix (a recreated topic's other id)
                self._listed[tp] = listed
            source = self._sources[tp] = PlannedArchive(planned)
        return source

    def _listing(self, tp: TopicPartition) -> tuple[tuple[str, int], ...]:
        return tuple((o.key, o.size) for o in self.store.list(self._keys[tp]).objects)

    def refresh(self) -> None:
        """Forget the partition list (new topics and partitions of the archive show at the next call)."""
        self._names = None
        a = self.archive  # an archive object caches its listing of topics: a new one lists again
        if isinstance(a, AivenArchive):
            self.archive = AivenArchive(
                a.store,
                a.prefix,
                key_ring=a.key_ring,
                strict=a.strict,
                topic_ids=a.topic_id_option,
                chunk_cache_bytes=a.chunk_cache_bytes,
                manifest_concurrency=a.manifest_concurrency,
                ranged=a.ranged,
            )
        else:
            self.archive = LocalTieredArchive(
                a.store, a.prefix, strict=a.strict, topic_ids=a.topic_id_option, concurrency=a.concurrency
            )

    def refresh_partition(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s objects changed since it was planned (one LIST); if so, it is planned again at its
        next :meth:`source` (segments uploaded since appear: a stream over an archive)."""
        if tp not in self._sources or tp not in self.partitions():
            return False
        listed = self._listing(tp)
        if listed == self._listed.get(tp):
            return False
        del self._sources[tp]
        return True

    def log_dir_state(self) -> LogDirState:
        """No checkpoints: log start at the first segment, HW at the end of the last."""
        return NoLogDirState()


class PlannedArchive:
    """An archived partition's source with what its manifests say of each segment (its end offset and largest
    timestamp: :class:`~kafkalog.readonly.log.SegmentMetadata`), so offsets and timestamp pruning come from
    listings and manifests alone."""

    def __init__(self, archive: ArchivePartitionSource) -> None:
        self.archive = archive
        self._by_base = {s.base_offset: s for s in archive.segments}

    def __repr__(self) -> str:
        return f"PlannedArchive({self.archive.name!r})"

    @property
    def name(self) -> str:
        """The archived partition's URL."""
        return self.archive.name

    def within(self, start: int, end: int) -> PlannedArchive:
        """The segments holding offsets ``[start, end)`` only, planned state and all (pickles with no store
        connection: a Spark task's executor reads them by ranged GETs, with no LIST or manifest GET)."""
        return PlannedArchive(self.archive.within(start, end))

    def list_files(self) -> Mapping[str, int]:
        """The chosen segments' files."""
        return self.archive.list_files()

    def open(self, name: str) -> RandomAccessFile:
        """One file (a ``.log`` read by ranged GETs of its chunks)."""
        return self.archive.open(name)

    def read(self, name: str) -> bytes:
        """One small file whole."""
        return self.archive.read(name)

    def segment_end_offset(self, base_offset: int) -> int | None:
        """The manifest's end offset (None for a manifest without segment metadata: the data tells)."""
        seg = self._by_base.get(base_offset)
        return None if seg is None or seg.end_offset < 0 else seg.end_offset

    def segment_max_timestamp(self, base_offset: int) -> int | None:
        """The manifest's largest timestamp (None when not known)."""
        seg = self._by_base.get(base_offset)
        return None if seg is None or seg.max_timestamp_ms < 0 else seg.max_timestamp_ms

    def missing_objects(self, start: int, end: int) -> list[str]:
        """URLs of the objects gone from the segments holding ``[start, end)`` whose manifests remain (what a
        data-loss message names)."""
        return self.archive.missing_objects(start, end)


class TieredUnionSource:
    """One partition's local directory and its archive, read as one (see the module doc)."""

    def __init__(self, local: LocalPartitionSource, archive: PartitionSource | None) -> None:
        self.local = local
        self.archive = archive

    def __repr__(self) -> str:
        return (
            f"TieredUnionSource({self.local.name!r}, {None if self.archive is None else self.archive.name!r})"
        )

    @property
    def name(self) -> str:
        """The local partition directory's path."""
        return self.local.name

    def within(self, start: int, end: int) -> TieredUnionSource:
        """The local directory with only the archived segments holding offsets ``[start, end)`` (see
        :meth:`PlannedArchive.within`)."""
        clip = getattr(self.archive, "within", None)
        return TieredUnionSource(self.local, self.archive if clip is None else clip(start, end))

    def _split(self) -> tuple[Mapping[str, int], dict[str, int], int | None]:
        local = self.local.list_files()
        bases = []
        for name in local:
            if name.endswith(LOG_FILE_SUFFIX):
                try:
                    bases.append(offset_from_file_name(name))
                except ValueError:
                    continue
        first_local = min(bases) if bases else None
        archived: dict[str, int] = {}
        if self.archive is not None:
            for name, size in self.archive.list_files().items():
                try:
                    offset = offset_from_file_name(name)
                except ValueError:
                    continue  # leader-epoch-checkpoint: the local one is newer
                if first_local is None or offset < first_local:
                    archived[name] = size
        return local, archived, first_local

    def list_files(self) -> Mapping[str, int]:
        """The local files, and the archived ones of segments older than the first local segment."""
        local, archived, _ = self._split()
        files = dict(archived)
        for name in local:
            files[name] = local[name]
        return files

    def open(self, name: str) -> RandomAccessFile:
        """A local file if there is one, else the archived one."""
        try:
            return self.local.open(name)
        except FileNotFoundError:
            if self.archive is None:
                raise
            return self.archive.open(name)

    def missing_objects(self, start: int, end: int) -> list[str]:
        """The archive's objects gone for offsets ``[start, end)`` (:meth:`PlannedArchive.missing_objects`)."""
        find = getattr(self.archive, "missing_objects", None)
        return [] if find is None else list(find(start, end))

    def read(self, name: str) -> bytes:
        """A local file whole if there is one, else the archived one."""
        try:
            return self.local.read(name)
        except FileNotFoundError:
            if self.archive is None:
                raise
            return self.archive.read(name)


def archive_source(archive: RemoteLayout, tp: TopicPartition) -> PartitionSource | None:
    """The archived partition's source, None if the archive does not hold it."""
    if tp not in archive.partitions():
        return None
    try:
        return archive.source(tp)
    except RemoteResourceNotFoundError:
        return None
