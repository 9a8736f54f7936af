"""The cleaner layer: log compaction (Kafka's ``LogCleaner``), above :mod:`kafkalog.log`, below the manager.

Public names::

    LogCleaner        the cleaner threads of one or more log dirs (``log.cleaner.*``)
    CleanerConfig     Kafka's ``log.cleaner.*`` settings
    CleanResult       one cleaning round of one log

Modules: :mod:`~kafkalog.cleaner.service` (threads, backoff, claims per log dir), :mod:`~kafkalog.cleaner.manager`
(which log to clean next, pauses, ``cleaner-offset-checkpoint``), :mod:`~kafkalog.cleaner.cleaner` (one round:
offset map, groups, ``.cleaned`` segments, swap), :mod:`~kafkalog.cleaner.map` and
:mod:`~kafkalog.cleaner.filter` (the two passes over batches), :mod:`~kafkalog.cleaner.kernels` (their numba
kernels), :mod:`~kafkalog.cleaner.offset_map` (``SkimpyOffsetMap``), :mod:`~kafkalog.cleaner.txn` (aborted
transactions while cleaning). Independent of :mod:`kafkalog.readonly` (docs/architecture.md).
"""

from __future__ import annotations

from kafkalog.cleaner.manager import CleanerConfig
from kafkalog.cleaner.service import CleanResult, LogCleaner

__all__ = ["CleanResult", "CleanerConfig", "LogCleaner"]
