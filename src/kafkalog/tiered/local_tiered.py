"""Archives of Kafka's ``LocalTieredStorage`` (the test RSM of ``apache/kafka``'s ``storage`` module).

Layout owned here (``RemoteTopicPartitionDirectory``, ``RemoteLogSegmentFileset``)::

    <prefix><topic>-<partition>-<topicId>/<startOffset>-<segmentUuid><suffix>
    suffix: .log .index .timeindex .txnindex (optional) .leader_epoch_checkpoint .snapshot

The files are plain copies of the segment's files (``.leader_epoch_checkpoint`` is the leader's epoch cache up
to the segment's end, ``.snapshot`` the producer snapshot at its end). Since KAFKA-15194 the start offset is
written with ``LogFileUtils.filenamePrefixFromOffset`` (20 digits); the file-name pattern accepts any number
of digits, so unpadded names are read too. There is no manifest: planning reads each segment's offset and time
indexes, its epoch checkpoint and the tail of its ``.log`` (the end offset is the last offset of its last
batch), a few ranged GETs per segment.

``RemoteLogSegmentFileset.copy`` writes the ``.log`` first, so a fileset with its ``.log`` but missing a
required file is a copy that failed (an orphan: skipped with a warning); one whose ``.log`` is gone while its
other files remain can only be a delete that stopped, or files removed behind Kafka's back: its offsets are
lost data (a :class:`~kafkalog.tiered.view.GoneSegment`, ending where the next segment begins: without a
manifest its end offset is not known), as for an Aiven manifest without its ``.log``
(:mod:`kafkalog.tiered.aiven`), except before the first readable segment (a retention delete in progress).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore.files import RandomAccessFile
from kafkalog.objstore.ranged import DEFAULT_WHOLE_FILE_MAX_BYTES, RangedFile
from kafkalog.objstore.store import ObjectMeta, ObjectStore
from kafkalog.tiered.aiven import TOPIC_IDS_OPTION, epochs_in_range
from kafkalog.tiered.files import object_url
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

__all__ = ["LOCAL_TIERED_SUFFIXES", "LocalTieredArchive", "LocalTieredSegment", "local_tiered_file_name"]

log = logging.getLogger(__name__)

#: Segments planned at once (each reads its indexes and the tail of its `.log`: no manifests here).
DEFAULT_PLAN_CONCURRENCY: Final = 16

_UUID = r"[A-Za-z0-9_-]{22}"
_DIR = re.compile(rf"^(?P<topic>.+)-(?P<p>\d{{1,10}})-(?P<id>{_UUID})/$")
_FILE = re.compile(rf"^(?P<offset>\d+)-(?P<id>{_UUID})(?P<suffix>\.[a-z_]+)$")
#: ``RemoteLogSegmentFileType`` suffix -> the part it holds (``log`` for the segment itself).
LOCAL_TIERED_SUFFIXES: Final[dict[str, str]] = {
    ".log": "log",
    ".index": "offset",
    ".timeindex": "timestamp",
    ".txnindex": "transaction",
    ".leader_epoch_checkpoint": "leader_epoch",
    ".snapshot": "producer_snapshot",
}
_REQUIRED: Final = frozenset({".log", ".index", ".timeindex", ".leader_epoch_checkpoint", ".snapshot"})


def local_tiered_file_name(start_offset: int, segment_id: str, suffix: str) -> str:
    """``RemoteLogSegmentFileType.toFilename`` (20-digit offset, as Kafka writes it since KAFKA-15194)."""
    return f"{start_offset:020d}-{segment_id}{suffix}"


def _url(store: ObjectStore, key: str) -> str:
    return object_url(store, key)


class LocalTieredSegment(ArchivedSegment):
    """One segment of a LocalTieredStorage archive (plain files)."""

    def __init__(
        self, store: ObjectStore, objects: Mapping[str, ObjectMeta], base_offset: int, segment_id: str
    ) -> None:
        self.store = store
        self.objects = dict(objects)
        sizes: dict[PartKind, int | None] = {
            "offset": None,
            "timestamp": None,
            "transaction": None,
            "leader_epoch": None,
            "producer_snapshot": None,
        }
        for suffix, meta in objects.items():
            part = LOCAL_TIERED_SUFFIXES[suffix]
            if part != "log":
                sizes[part] = meta.size  # type: ignore[index]
        super().__init__(
            base_offset=base_offset,
            end_offset=-1,
            max_timestamp_ms=-1,
            size=objects[".log"].size,
            segment_id=segment_id,
            name=_url(store, objects[".log"].key),
            leader_epochs={},
            event_timestamp_ms=None,
            part_sizes=sizes,
        )

    def open_log(self) -> RandomAccessFile:
        return RangedFile(self.store, self.objects[".log"].key, size=self.size)

    def read_part(self, kind: PartKind) -> bytes:
        for suffix, part in LOCAL_TIERED_SUFFIXES.items():
            if part == kind and suffix in self.objects:
                meta = self.objects[suffix]
                if meta.size > DEFAULT_WHOLE_FILE_MAX_BYTES:
                    raise RemoteStorageError(
                        f"{_url(self.store, meta.key)}: {meta.size} bytes, more than the "
                        f"{DEFAULT_WHOLE_FILE_MAX_BYTES} an index, snapshot or checkpoint is read whole within"
                    )
                return self.store.get_range(meta.key, 0, meta.size) if meta.size else b""
        return b""

    def plan(self) -> None:
        """Read the end offset, max timestamp and epochs from the segment's files."""
        log_file = self.open_log()
        try:
            self.end_offset, self.max_timestamp_ms = scan_end(
                log_file, self.base_offset, self.read_part("offset"), self.read_part("timestamp")
            )
        finally:
            log_file.close()
        entries = parse_epoch_blob(
            self.read_part("leader_epoch"), _url(self.store, self.objects[".leader_epoch_checkpoint"].key)
        )
        self.leader_epochs = epochs_in_range(list(entries), self.base_offset, self.end_offset)


@dataclass
class _Group:
    offset: int
    segment_id: str
    objects: dict[str, ObjectMeta]


class LocalTieredArchive:
    """The partitions of a LocalTieredStorage archive under ``prefix`` (its storage directory).

    Options: ``strict`` (orphans, overlaps and gaps are errors); ``topic_ids`` (``{topic: topicId}`` for a
    recreated topic; by default the incarnation with the most recently modified objects, when the store
    reports modification times)."""

    def __init__(
        self,
        store: ObjectStore,
        prefix: str = "",
        *,
        strict: bool = False,
        topic_ids: Mapping[str, str] | None = None,
        concurrency: int = DEFAULT_PLAN_CONCURRENCY,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.strict = strict
        self.topic_id_option = dict(topic_ids or {})
        self.concurrency = max(1, concurrency)
        self._dirs: dict[tuple[str, int], list[str]] | None = None

    def __repr__(self) -> str:
        return f"LocalTieredArchive({_url(self.store, self.prefix)!r})"

    def directories(self) -> dict[tuple[str, int], list[str]]:
        """``(topic, partition)`` -> the topic ids found for it."""
        if self._dirs is None:
            found: dict[tuple[str, int], list[str]] = {}
            for p in self.store.list(self.prefix).prefixes:
                m = _DIR.match(p[len(self.prefix) :])
                if m is not None:
                    found.setdefault((m.group("topic"), int(m.group("p"))), []).append(m.group("id"))
            self._dirs = {k: sorted(v) for k, v in sorted(found.items())}
        return self._dirs

    def topics(self) -> list[str]:
        """The topics archived."""
        return sorted({t for t, _ in self.directories()})

    def partitions(self, topic: str) -> list[int]:
        """The partitions archived for ``topic``."""
        return sorted(p for t, p in self.directories() if t == topic)

    def _topic_id(self, topic: str, partition: int) -> str:
        ids = self.directories().get((topic, partition))
        where = _url(self.store, self.prefix)
        if not ids:
            raise RemoteResourceNotFoundError(f"{where}: no partition {topic}-{partition} in the archive")
        wanted = self.topic_id_option.get(topic)
        if wanted is not None:
            if wanted not in ids:
                raise RemoteResourceNotFoundError(
                    f"{where}: {topic}-{partition} has no topic id {wanted!r} (the {TOPIC_IDS_OPTION} option); "
                    f"found {ids}"
                )
            return wanted
        if len(ids) == 1:
            return ids[0]
        stamps: dict[str, int] = {}
        for topic_id in ids:
            objects = self.store.list(f"{self.prefix}{topic}-{partition}-{topic_id}/").objects
            times = [o.last_modified_ms for o in objects]
            if any(t is None for t in times):
                raise RemoteStorageError(
                    f"{where}: topic {topic!r} was recreated (ids {ids}) and the store reports no modification "
                    f"times; choose one with the {TOPIC_IDS_OPTION} option"
                )
            stamps[topic_id] = max((t for t in times if t is not None), default=-1)
        chosen = max(ids, key=lambda i: (stamps[i], i))
        log.warning("%s: topic %r was recreated (ids %s); reading the newest, %s", where, topic, ids, chosen)
        return chosen

    def partition(self, topic: str, partition: int) -> ArchivePartitionSource:
        """Plan one partition: its segments chosen, as a partition directory's files."""
        base = f"{self.prefix}{topic}-{partition}-{self._topic_id(topic, partition)}/"
        name = _url(self.store, base).rstrip("/")
        groups: dict[tuple[int, str], _Group] = {}
        orphans: list[str] = []
        objects = self.store.list(base).objects
        for obj in objects:
            m = _FILE.match(obj.key[len(base) :])
            if m is None or m.group("suffix") not in LOCAL_TIERED_SUFFIXES:
                orphans.append(obj.key)
                continue
            offset, segment_id = int(m.group("offset")), m.group("id")
            groups.setdefault((offset, segment_id), _Group(offset, segment_id, {})).objects[
                m.group("suffix")
            ] = obj
        complete: list[_Group] = []
        gone: list[GoneSegment] = []
        for _, group in sorted(groups.items()):
            if set(group.objects) >= _REQUIRED:
                complete.append(group)
            elif ".log" not in group.objects:
                gone.append(self._gone(group))
            else:
                orphans.extend(o.key for o in group.objects.values())
        for key in orphans:
            log.warning("%s: orphan object %s (its segment lacks a required file)", name, key)
        if orphans and self.strict:
            raise RemoteStorageError(
                f"{name}: orphan objects {orphans[:5]}{' ...' if len(orphans) > 5 else ''} (strict=True)"
            )
        if gone and self.strict:
            raise RemoteStorageError(
                f"{name}: segments whose files remain but whose .log is gone: "
                f"{[u for s in gone for u in s.missing][:5]} (strict=True)"
            )
        if not complete and not orphans and not gone:
            raise RemoteResourceNotFoundError(f"{name}: no archived segments")
        segments = [LocalTieredSegment(self.store, g.objects, g.offset, g.segment_id) for g in complete]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            list(pool.map(LocalTieredSegment.plan, segments))
        lineage: dict[int, int] | None = None
        if segments:
            newest = max(segments, key=lambda s: (s.end_offset, s.base_offset))
            entries = parse_epoch_blob(
                newest.read_part("leader_epoch"),
                _url(self.store, newest.objects[".leader_epoch_checkpoint"].key),
            )
            lineage = filtered_epochs(dict(entries)) if entries else None
        place_gone(gone, segments)
        selection = select_segments([*segments, *gone], lineage, name, strict=self.strict)
        leave_out_leading_gone(selection, name)
        warn_gone(selection, name)
        listed = tuple((o.key, o.size) for o in objects)
        return ArchivePartitionSource(name, selection, orphans, listed)

    def _gone(self, group: _Group) -> GoneSegment:
        """The segment of a fileset whose ``.log`` is gone (its end offset is set by ``place_gone``)."""
        some = next(iter(group.objects.values()))
        suffix = next(s for s, o in group.objects.items() if o is some)
        log_key = some.key[: -len(suffix)] + ".log"
        return GoneSegment(
            base_offset=group.offset,
            end_offset=-1,
            max_timestamp_ms=-1,
            size=0,
            segment_id=group.segment_id,
            name=_url(self.store, some.key),
            leader_epochs={},
            event_timestamp_ms=None,
            part_sizes={},
        ).with_missing((_url(self.store, log_key),))
