"""The manager layer: a data directory (Kafka's ``log.dirs``) holding many topic-partitions.

Public names::

    LogManager       open a data directory; topics, appends, reads, checkpoints, background tasks
    ManagerConfig    Kafka's broker-side names (``log.retention.check.interval.ms``, ...)
    LoadFailure      a partition directory that failed to load (``LogManager.load_failures``)

Modules: :mod:`~kafkalog.manager.log_manager` (the LogManager), :mod:`~kafkalog.manager.dirs` (one log dir's
state, checkpoints and clean-shutdown marker), :mod:`~kafkalog.manager.limits` (partition limits),
:mod:`~kafkalog.manager.moves` (moving a partition between log dirs), :mod:`~kafkalog.manager.tasks` (the
background tasks), :mod:`~kafkalog.manager.topics` (the topic registry). This layer sits above
:mod:`kafkalog.cleaner` and :mod:`kafkalog.readonly` and below ``cli``, ``server``, ``spark``, ``metrics`` and
``demo`` (docs/architecture.md).
"""

from __future__ import annotations

from kafkalog.manager.log_manager import LoadFailure, LogManager, ManagerConfig

__all__ = ["LoadFailure", "LogManager", "ManagerConfig"]
