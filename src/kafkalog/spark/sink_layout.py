"""What a staged file is, and where the ``kafkalog`` sink keeps its files inside a data directory.

The layout under ``<data dir>/.kafkalog-spark/`` (staging, journals, failed journals, sink markers) is owned by
:mod:`kafkalog.manager.sink_journal` (the commit journal's format and replay are a storage recovery rule that
``LogManager.open`` runs); this module re-exports its path helpers for the sink's modules. A batch job's
``<job>`` is ``<ms>-<12 hex>``; a streaming query's is ``stream-<sink id>`` and its task directories start
with ``b<batch id>-``. Task directory names end in a random ``-<8 hex>`` per task attempt (Spark's attempt ids
restart at 0 with every driver run), and are created exclusively. Paths recorded in commit messages and
journals are relative to the data directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kafkalog._durable import fsync_dir
from kafkalog.datadir import SINK_DIR
from kafkalog.manager.sink_journal import has_pending_journals, journal_dir, sinks_dir, staging_root

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
