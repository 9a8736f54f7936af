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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaError, LogDirLockedError
from kafkalog.log.checkpoint import atomic_write
from kafkalog.storage.files import open_regular, read_regular

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "TOPICS_FILE",
    "DirLock",
    "TopicMetadata",
    "TopicsDocument",
    "read_topics",
    "write_topics",
]

LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
TOPICS_FILE = "kafkalog-topics.json"
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
