"""What a log directory (one entry of Kafka's ``log.dirs``) holds at its root, besides partition directories.

Files and the invariants owned here:

* ``.lock`` — held for as long as a :class:`~kafkalog.manager.LogManager` has the directory open, with two
  kinds of exclusive lock on the same file: a POSIX record lock (``fcntl``/``lockf``, what Java's
  ``FileChannel.tryLock`` takes, so a running Kafka broker and kafkalog exclude each other) and an ``flock``
  (what other flock users see). POSIX record locks do not exclude a second locker in the *same* process and
  are all dropped when *any* descriptor of the file is closed, so the process also keeps a registry of the
  lock files it holds and refuses a second manager before it opens the file. Any of these taken by
  someone else is :class:`~kafkalog.errors.LogDirLockedError`. The file itself is never deleted (deleting it would let two
  processes lock two different inodes).
* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``cleaner-offset-checkpoint`` — Kafka's text checkpoints (:mod:`kafkalog.log.checkpoint`).
* ``.kafka_cleanshutdown`` — Kafka's clean-shutdown marker for the whole directory.
* ``kafkalog-topics.json`` — kafkalog's own small metadata file (Kafka keeps this in KRaft/ZooKeeper)::

      {"version": 1, "generation": G, "hw_follows_leo": true,
       "topics": {"<topic>": {"partitions": N, "config": {"<dotted name>": value, ...},
                              "topic_id": "<22-char base64url uuid>"}}}

  ``config`` holds only the per-topic overrides. The same document is written (atomically: temp file,
  fsync, rename, directory fsync) to every online log dir; ``generation`` grows with every write and the
  highest one found wins on load, so a directory that missed an update (it was offline) is repaired.
  A data dir without the file (a Kafka broker's ``log.dirs`` entry) has its topics inferred from the
  partition directories, with default configs.
* ``kafkalog-tiered-storage.json`` — where a data dir with tiering on (issue 25) keeps its archive, so the
  read-only side (``info``, ``verify``, ``consume``, the Spark source) reads one history without being told::

      {"version": 1, "url": "s3://bucket/prefix", "layout": "aiven", "key_prefix": "tiered/"}

  ``url`` is ``rsm.config.storage.url`` with any user-info (an Azure ``container@account`` stays: it names
  the container), query and fragment removed, ``key_prefix`` the
  Aiven plugin's ``rsm.config.key.prefix``. **Never a secret**: no storage option is recorded (credentials
  come from the reader's own options, as for any URL). Written atomically by the manager when it opens with
  ``remote.log.storage.system.enable=true`` and the record differs (:func:`write_archive_location`); a
  malformed file is a :class:`KafkaError`.
* ``.kafkalog-spark/`` — the Spark sink's files (the commit journal's format and replay are owned by
  :mod:`kafkalog.manager.sink_journal`). Two of them matter to every reader, and are read here so that the
  read-only view needs nothing from the layers above it:

  * ``journal/<job>.json`` — a sink job that has decided to commit and whose records may be partly appended.
    Its ``partitions[].topic``, ``.partition`` and ``.base_offset`` say where: the job's records start at
    ``base_offset``. **Readers bound their view of such a partition at the oldest pending job's
    ``base_offset``** (:func:`pending_sink_bounds`), so a job appears to them all at once, when its journal
    is deleted — as ``read_committed`` consumers stop at the LSO.
  * ``commit.seq`` — a decimal counter the committer increments (atomically) after writing a journal and
    before appending anything. A reader takes a consistent view with :func:`read_pending_sink_bounds`: read
    the counter, the journals, then the offsets it wants, then the counter again, and start over if it
    moved (a whole job that committed between two looks would otherwise go unseen).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kafkalog._durable import atomic_write
from kafkalog.errors import KafkaError, LogDirLockedError
from kafkalog.objstore.options import public_url
from kafkalog.storage.files import open_regular, read_regular

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SINK_COMMIT_SEQ",
    "SINK_DIR",
    "TIERED_STORAGE_FILE",
    "TOPICS_FILE",
    "ArchiveLocation",
    "DirLock",
    "SinkDirState",
    "TopicMetadata",
    "TopicsDocument",
    "bump_sink_commit_seq",
    "parse_topics",
    "pending_sink_bounds",
    "read_archive_location",
    "read_pending_sink_bounds",
    "read_sink_commit_seq",
    "read_sink_dir_state",
    "read_topics",
    "write_archive_location",
    "write_topics",
]

LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
TOPICS_FILE = "kafkalog-topics.json"
TIERED_STORAGE_FILE = "kafkalog-tiered-storage.json"
SINK_DIR = ".kafkalog-spark"
SINK_COMMIT_SEQ = "commit.seq"
_SINK_JOURNAL_DIR = "journal"
_CONSISTENT_VIEW_ATTEMPTS = 100
_VERSION = 1
_HELD: set[str] = set()  # lock files held by this process (realpath)
_HELD_LOCK = threading.Lock()


class DirLock:
    """The exclusive ``.lock`` of one log directory (see the module doc)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None
        self._key = ""

    def _locked_error(self) -> LogDirLockedError:
        return LogDirLockedError(
            f"Failed to acquire lock on file {LOCK_FILE} in {self.path.parent}. A Kafka instance in another "
            "process or thread is using this directory."
        )

    def acquire(self) -> DirLock:
        """Take the lock or raise :class:`LogDirLockedError` at once (never waits)."""
        key = os.path.realpath(self.path)
        with _HELD_LOCK:
            if key in _HELD:
                raise self._locked_error()
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)  # a link or FIFO as .lock is refused
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # Kafka's lock (Java FileChannel.tryLock)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (BlockingIOError, PermissionError):
                os.close(fd)
                raise self._locked_error() from None
            except OSError:
                os.close(fd)
                raise
            _HELD.add(key)
            self._key = key
            self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                fcntl.lockf(self._fd, fcntl.LOCK_UN)
            with _HELD_LOCK:
                os.close(self._fd)
                self._fd = None
                _HELD.discard(self._key)

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None


@dataclass
class TopicMetadata:
    """What kafkalog remembers of a topic: its partition count, config overrides and topic id."""

    partitions: int
    config: dict[str, Any] = field(default_factory=dict)
    topic_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored for the topic."""
        out: dict[str, Any] = {"partitions": self.partitions, "config": dict(sorted(self.config.items()))}
        if self.topic_id is not None:
            out["topic_id"] = self.topic_id
        return out


@dataclass
class TopicsDocument:
    """The whole ``kafkalog-topics.json`` document."""

    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    generation: int = 0
    hw_follows_leo: bool = True

    def to_bytes(self) -> bytes:
        """Serialized form (sorted keys, one trailing newline)."""
        doc = {
            "version": _VERSION,
            "generation": self.generation,
            "hw_follows_leo": self.hw_follows_leo,
            "topics": {name: self.topics[name].to_json() for name in sorted(self.topics)},
        }
        return (json.dumps(doc, indent=2, sort_keys=False) + "\n").encode("utf-8")


def read_topics(directory: Path) -> TopicsDocument | None:
    """The document in ``directory`` (None if there is none); a malformed file is a :class:`KafkaError`."""
    path = directory / TOPICS_FILE
    try:
        raw = read_regular(path)
    except FileNotFoundError:
        return None
    return parse_topics(raw, directory)


def parse_topics(raw: bytes, directory: Path | str) -> TopicsDocument:
    """The document from the bytes of ``<directory>/kafkalog-topics.json`` (a malformed one is a
    :class:`KafkaError` naming ``directory``: a path or an object URL)."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            raise ValueError(f"unsupported version {doc.get('version') if isinstance(doc, dict) else doc!r}")
        topics: dict[str, TopicMetadata] = {}
        for name, entry in doc.get("topics", {}).items():
            partitions = int(entry["partitions"])
            if partitions <= 0:
                raise ValueError(f"topic {name!r} has {partitions} partitions")
            config = entry.get("config", {})
            if not isinstance(config, dict):
                raise ValueError(f"topic {name!r} config is not an object")
            topic_id = entry.get("topic_id")
            topics[str(name)] = TopicMetadata(
                partitions, dict(config), None if topic_id is None else str(topic_id)
            )
        return TopicsDocument(topics, int(doc.get("generation", 0)), bool(doc.get("hw_follows_leo", True)))
    except (ValueError, KeyError, TypeError) as exc:
        raise KafkaError(f"malformed {TOPICS_FILE} in {directory}: {exc}") from None


def write_topics(directory: Path, document: TopicsDocument) -> None:
    """Write the document atomically (temp file, fsync, rename, directory fsync)."""
    atomic_write(directory / TOPICS_FILE, document.to_bytes())


# --- where the tiered-storage archive lives -----------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveLocation:
    """Where a data dir's tiered-storage archive is: the storage URL (no credentials), its layout and the
    layout's key prefix (``kafkalog-tiered-storage.json``)."""

    url: str
    layout: str = "aiven"
    key_prefix: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "url", public_url(self.url))

    def to_bytes(self) -> bytes:
        """The file's bytes."""
        doc = {"version": _VERSION, "url": self.url, "layout": self.layout, "key_prefix": self.key_prefix}
        return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def read_archive_location(directory: Path) -> ArchiveLocation | None:
    """The archive recorded in ``directory`` (None without one); a malformed file is a :class:`KafkaError`."""
    try:
        raw = read_regular(directory / TIERED_STORAGE_FILE)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            raise ValueError("unsupported version")
        url, layout, prefix = doc["url"], doc.get("layout", "aiven"), doc.get("key_prefix", "")
        if not all(isinstance(v, str) for v in (url, layout, prefix)) or not url:
            raise ValueError("url, layout and key_prefix must be strings")
        return ArchiveLocation(url, layout, prefix)
    except (ValueError, KeyError, TypeError) as exc:
        raise KafkaError(f"malformed {TIERED_STORAGE_FILE} in {directory}: {exc}") from None


def write_archive_location(directory: Path, location: ArchiveLocation | None) -> None:
    """Record ``location`` in ``directory`` (atomically, only when it changed); None removes the record."""
    path = directory / TIERED_STORAGE_FILE
    if location is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    data = location.to_bytes()
    try:
        if read_regular(path) == data:
            return
    except FileNotFoundError:
        pass
    atomic_write(path, data)


# --- the Spark sink's pending jobs, as readers see them ------------------------------------------------------

T = TypeVar("T")


def read_sink_commit_seq(directory: Path) -> int:
    """The sink's commit counter (-1 when there is none: no sink commit ever ran here, or an old directory)."""
    try:
        return int((directory / SINK_DIR / SINK_COMMIT_SEQ).read_bytes() or b"-1")
    except FileNotFoundError:
        return -1
    except (OSError, ValueError):
        return -2  # unreadable or torn by hand: still a value that is compared, never trusted as a count


def bump_sink_commit_seq(directory: Path) -> None:
    """Increment the commit counter atomically (only under the data dir's lock, after writing a journal and
    before appending its records)."""
    current = max(read_sink_commit_seq(directory), 0)
    (directory / SINK_DIR).mkdir(parents=True, exist_ok=True)
    atomic_write(directory / SINK_DIR / SINK_COMMIT_SEQ, f"{current + 1}\n".encode())


def pending_sink_bounds(directory: Path) -> dict[tuple[str, int], int]:
    """``(topic, partition) -> base offset`` of the oldest pending sink job on each partition it touches.

    A journal that is unreadable or malformed is skipped (the next writer replays or quarantines it)."""
    jdir = directory / SINK_DIR / _SINK_JOURNAL_DIR
    try:
        names = os.listdir(jdir)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    bounds: dict[tuple[str, int], int] = {}
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            doc = json.loads((jdir / name).read_bytes())
            entries = [
                (str(e["topic"]), int(e["partition"]), int(e["base_offset"])) for e in doc["partitions"]
            ]
        except FileNotFoundError:
            continue  # completed since the listing
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for topic, partition, base in entries:
            key = (topic, partition)
            bounds[key] = min(base, bounds.get(key, base))
    return bounds


def read_pending_sink_bounds(directory: Path, read: Callable[[], T]) -> tuple[T, dict[tuple[str, int], int]]:
    """``read()`` (the caller's look at log end offsets) together with the pending sink jobs' bounds, taken
    consistently: no sink job both started and finished unseen while ``read()`` ran (see the module doc).

    Retried while the commit counter moves (at most 100 times: then the last look is returned)."""
    result: tuple[T, dict[tuple[str, int], int]] | None = None
    for _ in range(_CONSISTENT_VIEW_ATTEMPTS):
        before = read_sink_commit_seq(directory)
        bounds = pending_sink_bounds(directory)
        value = read()
        result = value, bounds
        if read_sink_commit_seq(directory) == before:
            break
    assert result is not None
    return result


@dataclass(frozen=True)
class SinkDirState:
    """What ``kafkalog info`` reports of ``.kafkalog-spark/``: journals pending and failed (job ids), and the
    staging on disk (directories directly under ``staging/<job>/``, and bytes of their files)."""

    pending_journals: list[str]
    failed_journals: list[str]
    staging_dirs: int
    staging_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "pendingJournals": self.pending_journals,
            "failedJournals": self.failed_journals,
            "stagingDirs": self.staging_dirs,
            "stagingBytes": self.staging_bytes,
        }


def read_sink_dir_state(directory: Path) -> SinkDirState | None:
    """The Spark sink's state in a log dir (None when the sink never wrote there). Read-only."""
    root = directory / SINK_DIR
    if not root.is_dir():
        return None
    jdir = root / _SINK_JOURNAL_DIR

    def names(d: Path) -> list[str]:
        try:
            return sorted(n[: -len(".json")] for n in os.listdir(d) if n.endswith(".json"))
        except (FileNotFoundError, NotADirectoryError):
            return []

    dirs = size = 0
    for job_root, subdirs, files in os.walk(root / "staging"):
        depth = len(Path(job_root).relative_to(root / "staging").parts)
        if depth == 1:
            dirs += len(subdirs)
        for name in files:
            with contextlib.suppress(OSError):
                size += os.stat(os.path.join(job_root, name)).st_size
    return SinkDirState(names(jdir), names(jdir / "failed"), dirs, size)
