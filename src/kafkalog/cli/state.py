"""Helpers of the commands that change a data directory (``recover``, ``retention``, ``topics``, ``produce``).

* :class:`ImmediateScheduler` — a scheduler for one-shot command-line runs: one-off tasks (``delete-file``,
  ``flush-log``) run at once, in the caller's thread, so a deleted segment is gone when the command returns
  instead of ``file.delete.delay.ms`` later; periodic tasks never run.
* :func:`open_manager` — :class:`~kafkalog.manager.LogManager` for a command: no background tasks, the
  immediate scheduler; :class:`~kafkalog.errors.LogDirLockedError` becomes exit 75 (see
  :class:`~kafkalog.cli.common.KafkalogCommand`).
* :func:`snapshot_dir` / :func:`diff_dirs` — what a partition directory held before and after an operation
  (segment sizes, index contents, snapshots), to report what recovery or retention changed.
* :func:`partition_config` — the effective config of a partition directory: the defaults plus its topic's
  overrides from ``kafkalog-topics.json``.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kafkalog.datadir import read_topics
from kafkalog.errors import KafkaError
from kafkalog.log.config import LogConfig
from kafkalog.log.loader import LoadProgress
from kafkalog.log.names import TopicPartition
from kafkalog.log.scheduler import ScheduledTask
from kafkalog.manager import LogManager

__all__ = [
    "DirChanges",
    "DirSnapshot",
    "ImmediateScheduler",
    "diff_dirs",
    "open_manager",
    "partition_config",
    "snapshot_dir",
]

_INDEX_ENTRY: Final = {".index": 8, ".timeindex": 12, ".txnindex": 34}


class ImmediateScheduler:
    """Runs one-off tasks at once (synchronously); periodic tasks are accepted and never run."""

    def __init__(self) -> None:
        self._seq = itertools.count()
        self.ran: list[str] = []

    def schedule(
        self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        """A periodic task is recorded only; a one-off task runs now."""
        task = ScheduledTask(0, next(self._seq), name, fn, period_ms)
        if period_ms <= 0:
            self.ran.append(name)
            fn()
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        """Runs ``fn`` now."""
        return self.schedule(name, fn, delay_ms, -1)


def open_manager(
    data_dir: Path,
    default_config: Mapping[str, Any] | None = None,
    *,
    hw_follows_leo: bool | None = None,
    load_progress: LoadProgress | None = None,
) -> LogManager:
    """A :class:`LogManager` for a command-line run (no background tasks, immediate deletes).

    ``hw_follows_leo`` None keeps what the directory's ``kafkalog-topics.json`` says (True without one);
    ``load_progress`` is :meth:`LogManager.open`'s (``.log`` bytes loaded, for a progress bar).
    """
    if hw_follows_leo is None:
        try:
            doc = read_topics(data_dir)
        except KafkaError:
            doc = None
        hw_follows_leo = True if doc is None else doc.hw_follows_leo
    return LogManager.open(
        data_dir,
        dict(default_config or {}),
        config={"log.segment.delete.delay.ms": 0},
        scheduler=ImmediateScheduler(),
        hw_follows_leo=hw_follows_leo,
        background=False,
        load_progress=load_progress,
    )


def partition_config(data_dir: Path | None, topic: str) -> LogConfig:
    """Defaults plus the topic's overrides in ``data_dir``'s ``kafkalog-topics.json`` (if any)."""
    if data_dir is None:
        return LogConfig()
    doc = read_topics(data_dir)
    meta = None if doc is None else doc.topics.get(topic)
    return LogConfig.from_props(meta.config if meta is not None else {})


# --------------------------------------------------------------------------------------------------- before/after


@dataclass(frozen=True)
class FileState:
    """A file's size and, for index files, the digest and count of its used entries."""

    size: int
    entries: int | None = None
    digest: str | None = None


def _index_state(path: Path, size: int, entry: int) -> FileState:
    """Digest of the entries up to the zero-filled (preallocated) tail."""
    data = path.read_bytes()
    used = len(data) - len(data) % entry
    while used >= entry and not any(data[used - entry : used]):
        used -= entry
    return FileState(size, used // entry, hashlib.blake2b(data[:used], digest_size=16).hexdigest())


@dataclass
class DirSnapshot:
    """The files of a partition directory at one moment."""

    path: Path
    files: dict[str, FileState] = field(default_factory=dict)

    def segment_sizes(self) -> dict[int, int]:
        """``.log`` size by base offset."""
        return {int(n[:-4]): s.size for n, s in self.files.items() if n.endswith(".log") and n[:-4].isdigit()}


def snapshot_dir(path: Path) -> DirSnapshot:
    """The files of ``path`` now (indexes digested; ``.log`` files only sized)."""
    snap = DirSnapshot(path)
    if not path.is_dir():
        return snap
    for entry in os.scandir(path):
        if not entry.is_file():
            continue
        size = entry.stat().st_size
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if suffix in _INDEX_ENTRY:
            try:
                snap.files[entry.name] = _index_state(Path(entry.path), size, _INDEX_ENTRY[suffix])
            except FileNotFoundError:
                continue
        else:
            snap.files[entry.name] = FileState(size)
    return snap


@dataclass
class DirChanges:
    """What changed in a partition directory between two snapshots."""

    truncated: list[tuple[int, int, int]] = field(default_factory=list)
    """``(base offset, bytes before, bytes after)`` of segments that shrank."""
    deleted: list[tuple[int, int]] = field(default_factory=list)
    """``(base offset, bytes)`` of segments that are gone."""
    created: list[int] = field(default_factory=list)
    """Base offsets of new segments."""
    indexes_rebuilt: list[str] = field(default_factory=list)
    """Index files whose entries changed (or that were created)."""
    files_removed: list[str] = field(default_factory=list)
    """Other files that are gone (leftovers, orphan indexes, snapshots)."""
    moved: list[tuple[int, int]] = field(default_factory=list)
    """``(base offset before, base offset after)`` of segments renamed to a lower base offset."""

    @property
    def bytes_truncated(self) -> int:
        """Bytes cut from segment tails plus bytes of deleted segments."""
        return sum(b - a for _, b, a in self.truncated) + sum(s for _, s in self.deleted)

    @property
    def changed(self) -> bool:
        """Whether anything changed."""
        return bool(
            self.truncated
            or self.deleted
            or self.created
            or self.indexes_rebuilt
            or self.files_removed
            or self.moved
        )


def diff_dirs(before: DirSnapshot, after: DirSnapshot, moves: dict[int, int] | None = None) -> DirChanges:
    """What :func:`snapshot_dir` saw change; ``moves`` (old base offset -> new) are segments renamed, not
    deleted and created (a moved segment that shrank is also listed as truncated, under its old base; a
    segment whose name a moved one took is deleted)."""
    out = DirChanges()
    old, new = before.segment_sizes(), after.segment_sizes()
    moves = {a: b for a, b in (moves or {}).items() if a in old and a not in new and b in new}
    targets = set(moves.values())
    for base, size in sorted(old.items()):
        if base in moves:
            out.moved.append((base, moves[base]))
            if new[moves[base]] < size:
                out.truncated.append((base, size, new[moves[base]]))
        elif base not in new or base in targets:  # gone, or its name now holds a moved segment
            out.deleted.append((base, size))
        elif new[base] < size:
            out.truncated.append((base, size, new[base]))
    out.created = sorted(b for b in new if b not in old and b not in targets)
    deleted_stems = {f"{b:020d}" for b, _ in out.deleted} | {f"{b:020d}" for b in moves}
    for name, state in sorted(after.files.items()):
        if state.digest is None:
            continue
        prior = before.files.get(name)
        if prior is None or prior.digest != state.digest:
            out.indexes_rebuilt.append(name)
    for name in sorted(before.files):
        if name in after.files or name.endswith(".log"):
            continue
        if name.split(".", 1)[0] in deleted_stems and not name.endswith(".snapshot"):
            continue  # the index files of a deleted segment
        out.files_removed.append(name)
    return out


def partition_label(tp: TopicPartition | None, path: Path) -> str:
    """``topic-N`` (or the directory name)."""
    return str(tp) if tp is not None else path.name
