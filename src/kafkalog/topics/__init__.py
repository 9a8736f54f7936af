"""Kept for one release: ``kafkalog.topics`` is now :mod:`kafkalog.manager.topics` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``topics.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.manager.topics import (
    TopicRegistry,
    check_partition_count,
    normalize_overrides,
)

__all__ = [
    "TopicRegistry",
    "check_partition_count",
    "normalize_overrides",
]
