"""Kept for one release: ``kafkalog.log.readonly`` is now :mod:`kafkalog.readonly.log` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``readonly.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.readonly.log import (
    DEFAULT_CHUNK_BYTES,
    BatchChunk,
    ReadOnlyDataDir,
    ReadOnlyLog,
    SegmentInfo,
)

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "BatchChunk",
    "ReadOnlyDataDir",
    "ReadOnlyLog",
    "SegmentInfo",
]
