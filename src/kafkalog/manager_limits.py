"""Kept for one release: ``kafkalog.manager_limits`` is now :mod:`kafkalog.manager.limits` (README and docs cited the old path)."""

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
