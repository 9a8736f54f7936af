"""What a path given to a ``kafkalog`` command is: a data directory (one entry of Kafka's ``log.dirs``) or a
single partition directory (``<topic>-<partition>``), and the partition directories it holds.

A directory is a **partition directory** when its name is ``<topic>-<number>`` and it holds segment files
(``*.log``), a ``leader-epoch-checkpoint`` or a ``partition.metadata``, or nothing at all. Otherwise it is a
**data directory**; its live partitions are the subdirectories named ``<topic>-<number>`` (``-delete``,
``-future`` and ``-stray`` directories are listed apart). A partition directory's parent counts as its data
directory when it holds a data directory's files (``.lock``, ``kafkalog-topics.json``, checkpoints).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kafkalog.cli.common import EXIT_NOINPUT, fail, require_dir
from kafkalog.errors import KafkaError
from kafkalog.log.names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    TopicPartition,
    parse_topic_partition_name,
)

__all__ = ["DATA_DIR_FILES", "Target", "is_partition_dir", "list_partition_dirs", "resolve_target"]

#: Files found at the root of a data directory.
DATA_DIR_FILES: Final = (
    ".lock",
    "kafkalog-topics.json",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "meta.properties",
)
_PARTITION_FILES: Final = ("leader-epoch-checkpoint", "partition.metadata")
_SUFFIXES: Final = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)


def _plain_partition(name: str) -> TopicPartition | None:
    if name.endswith(_SUFFIXES) or name.startswith("."):
        return None
    try:
        return parse_topic_partition_name(name)
    except KafkaError:
        return None


def is_partition_dir(path: Path) -> bool:
    """Whether ``path`` is a partition directory (see the module doc)."""
    if _plain_partition(path.name) is None:
        return False
    has_subdirs = False
    for entry in os.scandir(path):
        name = entry.name
        if name.endswith(".log") or name in _PARTITION_FILES or name.endswith((".index", ".snapshot")):
            return True
        if entry.is_dir():
            has_subdirs = True
    return not has_subdirs


def list_partition_dirs(data_dir: Path) -> tuple[list[tuple[TopicPartition, Path]], list[Path]]:
    """Live partition directories of ``data_dir`` sorted by topic and partition, and the others
    (``-delete``/``-future``/``-stray``)."""
    live: list[tuple[TopicPartition, Path]] = []
    other: list[Path] = []
    for entry in os.scandir(data_dir):
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        if entry.name.endswith(_SUFFIXES):
            other.append(Path(entry.path))
            continue
        tp = _plain_partition(entry.name)
        if tp is not None:
            live.append((tp, Path(entry.path)))
    live.sort(key=lambda item: (item[0].topic, item[0].partition))
    return live, sorted(other)


def _looks_like_data_dir(path: Path) -> bool:
    return any((path / name).exists() for name in DATA_DIR_FILES)


@dataclass(frozen=True)
class Target:
    """A resolved command-line path: its kind, the partitions to work on, and the data directory, if any."""

    path: Path
    is_data_dir: bool
    partitions: list[tuple[TopicPartition, Path]]
    data_dir: Path | None
    other_dirs: list[Path] = field(default_factory=list)


def resolve_target(path: Path, *, topic: str | None = None) -> Target:
    """Resolves ``path`` (exit 66 if it is not a readable directory); ``topic`` keeps only that topic's
    partitions (exit 66 if it has none)."""
    require_dir(path)
    if is_partition_dir(path):
        tp = _plain_partition(path.name)
        assert tp is not None
        parent = path.parent if _looks_like_data_dir(path.parent) else None
        if topic is not None and tp.topic != topic:
            fail(f"{path} is a partition of topic {tp.topic!r}, not {topic!r}", EXIT_NOINPUT)
        return Target(path, False, [(tp, path)], parent)
    live, other = list_partition_dirs(path)
    if topic is not None:
        live = [(tp, p) for tp, p in live if tp.topic == topic]
        if not live:
            fail(f"topic {topic!r} has no partition directory in {path}", EXIT_NOINPUT)
    return Target(path, True, live, path, other)
