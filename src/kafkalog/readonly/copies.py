"""A copy of a Kafka log dir in object storage (a backup or an rsync of a broker's ``log.dirs`` entry), as
:class:`~kafkalog.objstore.PartitionSource` s and the log dir's checkpoints.

Layout read (the local layout, keys instead of paths)::

    <prefix>/<topic>-<partition>/<20-digit offset>.log  (.index .timeindex .txnindex .snapshot)
    <prefix>/<topic>-<partition>/leader-epoch-checkpoint
    <prefix>/replication-offset-checkpoint, log-start-offset-checkpoint, kafkalog-topics.json  (optional)

Invariants owned here:

* **Nothing is written**, and nothing but the store's own requests is made: one LIST per listing, ranged
  GETs of aligned blocks per ``.log`` (:class:`~kafkalog.objstore.ranged.RangedFile`), one GET per small file. A copy does not change while it is read, so each
  log dir's checkpoints are read once per :class:`StoreLogDirState`.
* **Every file read whole is size-bounded** before its GET, as a partition's small files are
  (``storage.whole.file.max.bytes``, :func:`~kafkalog.objstore.ranged.read_whole`): the log dir's checkpoints
  and ``kafkalog-topics.json`` included, so a huge object where a checkpoint should be is a
  :class:`~kafkalog.errors.RemoteStorageError` naming it and the option, never a large allocation.
* A partition directory's names are exactly those of a local one, so the reader treats a copy as a local
  directory: a torn last segment (the copy was taken while a broker appended) ends the data as recovery
  would, and is never an error. A ``.log`` key whose name holds an offset above ``2**63 - 1`` is a
  :class:`~kafkalog.errors.KafkaStorageError` when listed, as locally.
* Errors name the object by URL and never a credential (the store's URL has none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import TypeVar

from kafkalog.datadir import TOPICS_FILE, parse_topics
from kafkalog.errors import KafkaError, RemoteResourceNotFoundError
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition, parse_topic_partition_name
from kafkalog.objstore import ObjectStore
from kafkalog.objstore.ranged import RangedFile, RangedSettings, read_whole
from kafkalog.storage.files import LOG_FILE_SUFFIX, offset_from_file_name

__all__ = [
    "CopiedPartitionSource",
    "LogDirCopy",
    "StoreLogDirState",
    "join_key",
    "object_url",
    "partition_of_dir_name",
]

_T = TypeVar("_T")
_LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
_REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


def object_url(store: ObjectStore, key: str) -> str:
    """The URL of ``key`` in ``store`` (the store's URL, which has no credential, and the key)."""
    url = store.url
    key = key.strip("/")
    if not key:
        return url
    return f"{url}{key}" if url.endswith("/") else f"{url}/{key}"


def join_key(prefix: str, name: str) -> str:
    """``prefix`` and ``name`` joined with one ``/`` (an empty prefix is the store's root)."""
    return f"{prefix.rstrip('/')}/{name}" if prefix.strip("/") else name


class CopiedPartitionSource:
    """One partition directory of a log-dir copy, ``<prefix>/<topic>-<n>/``, in an object store; its files
    are read as :class:`~kafkalog.objstore.ranged.RangedFile` s (aligned blocks, a bounded cache, read-ahead
    on a sequential scan)."""

    __slots__ = ("_listing", "prefix", "settings", "store")

    def __init__(self, store: ObjectStore, prefix: str, *, settings: RangedSettings | None = None) -> None:
        self.store = store
        self.prefix = prefix.rstrip("/") + "/"
        self.settings = settings
        self._listing: dict[str, int] | None = None

    def __repr__(self) -> str:
        return f"CopiedPartitionSource({self.name!r})"

    def __reduce__(self) -> tuple[type[CopiedPartitionSource], tuple[ObjectStore, str]]:
        return type(self), (self.store, self.prefix)

    @property
    def name(self) -> str:
        """The partition directory's URL."""
        return object_url(self.store, self.prefix)

    def list_files(self) -> Mapping[str, int]:
        """Every object directly under the partition's prefix (one LIST)."""
        listing = self.store.list(self.prefix)
        files: dict[str, int] = {}
        for meta in listing.objects:
            name = meta.key[len(self.prefix) :]
            if name.endswith(LOG_FILE_SUFFIX):
                try:
                    offset_from_file_name(name)  # KafkaStorageError above int64, as locally
                except ValueError:
                    pass
            files[name] = meta.size
        self._listing = files
        return files

    def open(self, name: str) -> RangedFile:
        """The object ``name`` (its size from the last listing, else one HEAD)."""
        size = None if self._listing is None else self._listing.get(name)
        key = self.prefix + name
        if size is None:
            size = self.store.head(key).size  # RemoteResourceNotFoundError is a FileNotFoundError
        return RangedFile(
            self.store, key, size=size, settings=self.settings, name=object_url(self.store, key)
        )

    def read(self, name: str) -> bytes:
        """The whole object ``name`` (``FileNotFoundError`` if it does not exist; a
        :class:`~kafkalog.errors.RemoteStorageError` above ``storage.whole.file.max.bytes``)."""
        key = self.prefix + name
        size = None if self._listing is None else self._listing.get(name)
        try:
            return read_whole(self.store, key, size, self.settings, object_url(self.store, key))
        except RemoteResourceNotFoundError as exc:
            raise FileNotFoundError(str(exc)) from None


class StoreLogDirState:
    """The checkpoints of a log-dir copy (:class:`~kafkalog.readonly.log.LogDirState`), read once."""

    __slots__ = ("_hw", "_hw_follows_leo", "_log_start", "prefix", "settings", "store")

    def __init__(self, store: ObjectStore, prefix: str, settings: RangedSettings | None = None) -> None:
        self.store = store
        self.prefix = prefix
        self.settings = settings
        self._log_start: dict[TopicPartition, int] | None = None
        self._hw: dict[TopicPartition, int] | None = None
        self._hw_follows_leo = False

    def __reduce__(
        self,
    ) -> tuple[type[StoreLogDirState], tuple[ObjectStore, str, RangedSettings | None]]:
        return type(self), (self.store, self.prefix, self.settings)

    def _small(self, name: str) -> bytes | None:
        """The file whole (None if absent); one HEAD, then one GET only when it is within
        ``storage.whole.file.max.bytes`` (else :class:`~kafkalog.errors.RemoteStorageError`)."""
        key = join_key(self.prefix, name)
        try:
            return read_whole(self.store, key, None, self.settings, object_url(self.store, key))
        except RemoteResourceNotFoundError:
            return None

    def _checkpoint(self, name: str) -> dict[TopicPartition, int]:
        data = self._small(name)
        if data is None:
            return {}
        url = object_url(self.store, join_key(self.prefix, name))
        try:
            return dict(offset_checkpoint(PurePosixPath(url)).parse(data))  # type: ignore[arg-type]
        except (KafkaError, ValueError):
            return {}  # unreadable, as locally: the offsets come from the segments

    def _load(self) -> None:
        if self._log_start is not None:
            return
        self._log_start = self._checkpoint(_LOG_START_OFFSET_CHECKPOINT)
        topics = self._small(TOPICS_FILE)
        follows = False
        if topics is not None:
            try:
                follows = parse_topics(topics, self.store.url).hw_follows_leo
            except KafkaError:
                follows = False
        self._hw_follows_leo = follows
        self._hw = {} if follows else self._checkpoint(_REPLICATION_OFFSET_CHECKPOINT)

    def look(self, tp: TopicPartition, read: Callable[[], _T]) -> tuple[_T, int | None]:
        """``read()``; a copy has no pending Spark sink job."""
        return read(), None

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The copied ``log-start-offset-checkpoint`` entry (0 if none)."""
        self._load()
        assert self._log_start is not None
        return self._log_start.get(tp, 0)

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The copied ``replication-offset-checkpoint`` entry (None: the log end offset)."""
        self._load()
        assert self._hw is not None
        return self._hw.get(tp)


class LogDirCopy:
    """A log-dir copy under ``prefix`` of ``store``: its partitions, their sources, its checkpoints."""

    __slots__ = ("_state", "prefix", "settings", "store")

    #: The layout's name (:data:`kafkalog.tiered.LAYOUTS`).
    kind = "logdir"

    def __init__(
        self, store: ObjectStore, prefix: str = "", *, settings: RangedSettings | None = None
    ) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self.settings = settings
        self._state = StoreLogDirState(store, self.prefix, settings)

    def __repr__(self) -> str:
        return f"LogDirCopy({self.store.url!r}, {self.prefix!r})"

    def __reduce__(self) -> tuple[type[LogDirCopy], tuple[ObjectStore, str]]:
        return type(self), (self.store, self.prefix)  # settings: the defaults on executors

    @property
    def name(self) -> str:
        """The copy's URL."""
        return object_url(self.store, self.prefix)

    def partitions(self) -> dict[TopicPartition, str]:
        """Partition directories (``<topic>-<n>/`` prefixes; ``-delete``/``-future``/``-stray`` and foreign
        names ignored, as locally) -> their names (one LIST)."""
        listing = self.store.list(join_key(self.prefix, "") if self.prefix else "")
        found: dict[TopicPartition, str] = {}
        for key in listing.prefixes:
            name = key.rstrip("/").rsplit("/", 1)[-1]
            tp = partition_of_dir_name(name)
            if tp is not None:
                found[tp] = object_url(self.store, key)
        return found

    def is_empty(self) -> bool:
        """Whether nothing at all is under the prefix (it does not exist, as object storage sees it)."""
        listing = self.store.list(join_key(self.prefix, "") if self.prefix else "")
        return not listing.prefixes and not listing.objects

    def source(self, tp: TopicPartition) -> CopiedPartitionSource:
        """The partition's files (no request until they are listed)."""
        return CopiedPartitionSource(
            self.store, join_key(self.prefix, f"{tp.topic}-{tp.partition}"), settings=self.settings
        )

    def log_dir_state(self) -> StoreLogDirState:
        """The copy's checkpoints (read on first use)."""
        return self._state


def partition_of_dir_name(name: str) -> TopicPartition | None:
    """The partition a live partition directory's name stands for, None for anything else (``-delete``,
    ``-future`` and ``-stray`` directories, other files' names)."""
    head, sep, tail = name.rpartition("-")
    if not sep or not head or not tail.isdigit() or not tail.isascii():
        return None
    try:
        return parse_topic_partition_name(name)
    except KafkaError:
        return None
