"""The read-only layer: reading a data directory that a writer (a LogManager or a Kafka broker) may be using.

Public names::

    ReadOnlyDataDir       the partitions of a data directory, opened without its ``.lock``
    ReadOnlyLog           one partition: offsets, batch reads, timestamp lookups, committed view
    iter_committed        the records a ``read_committed`` consumer sees (also over a :class:`~kafkalog.log.Log`)

Modules: :mod:`~kafkalog.readonly.log` (the lock-free view) and :mod:`~kafkalog.readonly.committed` (the
committed-records filter). Above :mod:`kafkalog.datadir` and :mod:`kafkalog.log`, independent of
:mod:`kafkalog.cleaner`, below the manager and the Spark source (docs/architecture.md).
"""

from __future__ import annotations

from kafkalog.readonly.committed import iter_committed
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog

__all__ = ["ReadOnlyDataDir", "ReadOnlyLog", "iter_committed"]
