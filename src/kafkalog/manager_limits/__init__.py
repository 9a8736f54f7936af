"""Kept for one release: ``kafkalog.manager_limits`` is now :mod:`kafkalog.manager.limits` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``manager_limits.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.manager.limits import (
    DESCRIPTOR_RESERVE,
    DESCRIPTORS_PER_PARTITION,
    check_new_partitions,
    descriptors_available,
)

__all__ = [
    "DESCRIPTORS_PER_PARTITION",
    "DESCRIPTOR_RESERVE",
    "check_new_partitions",
    "descriptors_available",
]
