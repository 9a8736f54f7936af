"""Where the ``kafkalog`` sink keeps its files inside a data directory, and what a staged file is.

Layout owned here (everything under one hidden directory, which the LogManager and partition scans skip)::

    <data dir>/.kafkalog-spark/
        staging/<job>/<task>/<topic>-<partition>.batches   staged record batches (kafkalog.spark.staging)
        journal/<job>.json                                 commit journals in progress (kafkalog.spark.commit)
        journal/failed/<job>.json                          journals whose replay could not complete
        commit.seq                                         commit counter readers use (kafkalog.datadir)
        sinks/<sink id>.json                               last committed micro-batch of a streaming sink

A batch job's ``<job>`` is ``<ms>-<12 hex>``; a streaming query's is ``stream-<sink id>`` and its task
directories start with ``b<batch id>-``. Task directory names end in a random ``-<8 hex>`` per task attempt
(Spark's attempt ids restart at 0 with every driver run), and are created exclusively. Paths recorded in commit messages and journals are relative to the
data directory. This module needs nothing but :mod:`kafkalog.datadir` (which owns the directory's name and
what readers read of it), so that a LogManager can look for pending journals cheaply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkalog.datadir import SINK_DIR

__all__ = [
    "SPARK_DIR_NAME",
    "STAGED_SUFFIX",
    "StagedFile",
    "fsync_dir",
    "has_pending_journals",
    "journal_dir",
    "sinks_dir",
    "staging_root",
]

SPARK_DIR_NAME: Final = SINK_DIR
STAGED_SUFFIX: Final = ".batches"


def staging_root(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/staging``: one directory per job, one per task inside it."""
    return Path(data_dir) / SPARK_DIR_NAME / "staging"


def journal_dir(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/journal``."""
    return Path(data_dir) / SPARK_DIR_NAME / "journal"


def sinks_dir(data_dir: str | Path) -> Path:
    """``<data dir>/.kafkalog-spark/sinks``."""
    return Path(data_dir) / SPARK_DIR_NAME / "sinks"


def has_pending_journals(data_dir: str | Path) -> bool:
    """Whether a commit journal waits to be rolled forward (cheap: one directory listing)."""
    try:
        return any(name.endswith(".json") for name in os.listdir(journal_dir(data_dir)))
    except FileNotFoundError:
        return False


def fsync_dir(path: str | Path) -> None:
    """fsync a directory so the entries created in it survive a crash (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass(frozen=True)
class StagedFile:
    """One staged file: the batches one task wrote for one partition, with what the commit checks."""

    topic: str
    partition: int
    path: str  # relative to the data directory
    size: int
    records: int
    batches: int
    min_timestamp: int
    max_timestamp: int
    null_keys: int
    max_batch_bytes: int
    compression: int
