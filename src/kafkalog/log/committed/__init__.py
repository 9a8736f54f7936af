"""Kept for one release: ``kafkalog.log.committed`` is now :mod:`kafkalog.readonly.committed` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``committed.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.readonly.committed import (
    AbortedTransaction,
    CommittedRecords,
    Fetch,
    committed_records,
    iter_committed,
)

__all__ = [
    "AbortedTransaction",
    "CommittedRecords",
    "Fetch",
    "committed_records",
    "iter_committed",
]
