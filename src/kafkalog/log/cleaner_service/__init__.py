"""Kept for one release: ``kafkalog.log.cleaner_service`` is now :mod:`kafkalog.cleaner.service` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``cleaner_service.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.cleaner.service import (
    CleanResult,
    LogCleaner,
)

__all__ = [
    "CleanResult",
    "LogCleaner",
]
