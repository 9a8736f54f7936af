"""Kafka's small text files: checkpoints, ``partition.metadata`` and the clean-shutdown marker.

Checkpoint files (``CheckpointFile``): UTF-8, ``\\n`` line endings::

    <version>\\n<entry count>\\n<entry>\\n...

* ``leader-epoch-checkpoint`` (per partition): version 0, entries ``"<epoch> <start offset>"``.
* ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
  ``cleaner-offset-checkpoint`` (per log dir): version 0, entries ``"<topic> <partition> <offset>"``.

Every write goes to ``<file>.tmp`` (created afresh if something other than a regular file is there), is fsynced, atomically renamed over the file, and the directory is
fsynced, so a crash leaves either the old or the new file. A reader rejects a wrong version, a malformed
line, bytes that are not UTF-8 or a count that does not match (:class:`CheckpointError`); an empty file has no
entries. Files are read and written only as regular files (:func:`~kafkalog.storage.files.open_regular`: a
link, FIFO or directory in their place is refused, never followed or waited on).

``partition.metadata``: exactly ``version: 0\\ntopic_id: <22-char base64url uuid>`` (no trailing newline).
``.kafka_cleanshutdown``: JSON ``{"version":0,"brokerEpoch":<long>}``; its presence means the directory was
shut down cleanly.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final, Generic, TypeVar

from kafkalog import _durable
from kafkalog._durable import atomic_write
from kafkalog.errors import KafkaError
from kafkalog.log.names import TopicPartition
from kafkalog.storage.files import read_regular

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "PARTITION_METADATA_FILE",
    "CheckpointError",
    "CheckpointFile",
    "EpochEntry",
    "atomic_write",
    "fsync_dir",
    "leader_epoch_checkpoint",
    "offset_checkpoint",
    "read_clean_shutdown",
    "read_partition_metadata",
    "topic_id_from_string",
    "topic_id_to_string",
    "write_clean_shutdown",
    "write_partition_metadata",
]

LEADER_EPOCH_CHECKPOINT_FILE: Final = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE: Final = "partition.metadata"
CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"

T = TypeVar("T")


class CheckpointError(KafkaError, OSError):
    """A checkpoint file is malformed."""


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or a new file in it is durable (:func:`kafkalog._durable.fsync_dir`).

    A missing directory is ignored: the log layer's callers fsync a partition directory that topic deletion
    or a partition move may have renamed away concurrently, leaving nothing to make durable there."""
    _durable.fsync_dir(directory, missing_ok=True)


class CheckpointFile(Generic[T]):
    """A versioned list of entries in a text file (Kafka's ``CheckpointFile``)."""

    def __init__(
        self, path: Path, version: int, to_line: Callable[[T], str], from_line: Callable[[str], T]
    ) -> None:
        self.path = path
        self.version = version
        self._to_line = to_line
        self._from_line = from_line

    def write(self, entries: Iterable[T], sync: bool = True) -> None:
        """Replace the file's entries atomically."""
        atomic_write(self.path, self.format(entries), sync)

    def format(self, entries: Iterable[T]) -> bytes:
        """The file content for ``entries`` (what :meth:`write` writes)."""
        items = list(entries)
        text = f"{self.version}\n{len(items)}\n" + "".join(self._to_line(e) + "\n" for e in items)
        return text.encode("utf-8")

    def read(self) -> list[T]:
        """The entries (empty if the file is missing or empty)."""
        try:
            data = read_regular(self.path)
        except FileNotFoundError:
            return []
        return self.parse(data)

    def parse(self, data: bytes) -> list[T]:
        """The entries of checkpoint-file content (the same checks as :meth:`read`; errors name ``path``).

        Used where the content comes from elsewhere than this file, e.g. the leader-epoch blob of a
        tiered-storage archive."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CheckpointError(f"checkpoint file ({self.path}) is not valid UTF-8: {exc}") from None
        if not text:
            return []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        try:
            version = int(lines[0])
        except (ValueError, IndexError):
            raise CheckpointError(f"malformed line in checkpoint file ({self.path}): {lines[:1]!r}") from None
        if version != self.version:
            raise CheckpointError(f"unrecognized version of the checkpoint file ({self.path}): {version}")
        if len(lines) < 2:
            return []  # Kafka's CheckpointReadBuffer: a version line and nothing else holds no entries
        try:
            expected = int(lines[1])
        except ValueError:
            raise CheckpointError(f"malformed entry count in checkpoint file ({self.path})") from None
        entries: list[T] = []
        for line in lines[2:]:
            try:
                entries.append(self._from_line(line))
            except (ValueError, IndexError):
                raise CheckpointError(f"malformed line in checkpoint file ({self.path}): {line!r}") from None
        if len(entries) != expected:
            raise CheckpointError(
                f"expected {expected} entries in checkpoint file ({self.path}), but found only {len(entries)}"
            )
        return entries


class EpochEntry(tuple[int, int]):
    """A leader epoch and the first offset written in it."""

    __slots__ = ()

    def __new__(cls, epoch: int, start_offset: int) -> EpochEntry:
        return super().__new__(cls, (epoch, start_offset))

    @property
    def epoch(self) -> int:
        """The leader epoch."""
        return self[0]

    @property
    def start_offset(self) -> int:
        """First offset of the epoch."""
        return self[1]

    def __repr__(self) -> str:
        return f"EpochEntry(epoch={self[0]}, startOffset={self[1]})"


def _epoch_from_line(line: str) -> EpochEntry:
    parts = line.split()
    if len(parts) != 2:
        raise ValueError(line)
    return EpochEntry(int(parts[0]), int(parts[1]))


def leader_epoch_checkpoint(directory: Path) -> CheckpointFile[EpochEntry]:
    """The partition's ``leader-epoch-checkpoint``."""
    return CheckpointFile(
        directory / LEADER_EPOCH_CHECKPOINT_FILE, 0, lambda e: f"{e.epoch} {e.start_offset}", _epoch_from_line
    )


def _offset_from_line(line: str) -> tuple[TopicPartition, int]:
    parts = line.split()
    if len(parts) != 3:
        raise ValueError(line)
    return TopicPartition(parts[0], int(parts[1])), int(parts[2])


def offset_checkpoint(path: Path) -> CheckpointFile[tuple[TopicPartition, int]]:
    """A per-log-dir offset checkpoint (``<topic> <partition> <offset>`` lines)."""
    return CheckpointFile(path, 0, lambda e: f"{e[0].topic} {e[0].partition} {e[1]}", _offset_from_line)


# --- partition.metadata ----------------------------------------------------------------------------------------


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: base64url of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString``."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(directory: Path, topic_id: uuid.UUID, sync: bool = True) -> None:
    """Write ``partition.metadata`` atomically."""
    text = f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}"
    atomic_write(directory / PARTITION_METADATA_FILE, text.encode("utf-8"), sync)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id in ``partition.metadata`` (None if the file is missing)."""
    path = directory / PARTITION_METADATA_FILE
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise KafkaError(f"partition metadata file {path} is not valid UTF-8: {exc}") from None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        parts = re.split(r":\s+", line, maxsplit=1)
        if len(parts) != 2:
            raise KafkaError(f"malformed line in partition metadata file {path}: {line!r}")
        fields[parts[0]] = parts[1]
    try:
        version = int(fields["version"])
        topic_id = topic_id_from_string(fields["topic_id"])
    except (KeyError, ValueError) as exc:
        raise KafkaError(f"malformed partition metadata file {path}: {exc}") from None
    if version < 0 or topic_id.int == 0:
        raise KafkaError(f"invalid partition metadata file {path}")
    return topic_id


# --- clean shutdown marker -------------------------------------------------------------------------------------


def write_clean_shutdown(directory: Path, broker_epoch: int = -1) -> None:
    """Write ``.kafka_cleanshutdown`` (fsynced)."""
    data = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode()
    atomic_write(directory / CLEAN_SHUTDOWN_FILE, data)


def read_clean_shutdown(directory: Path, delete: bool = True) -> bool:
    """Whether the marker exists; it is deleted as soon as it is read (KAFKA-10471) unless ``delete`` is False."""
    path = directory / CLEAN_SHUTDOWN_FILE
    if not path.exists():
        return False
    if delete:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fsync_dir(directory)
    return True
