"""Kept for one release: ``kafkalog.log.cleaner_filter`` is now :mod:`kafkalog.cleaner.filter` (README and docs cited the old path).

A package rather than a module file, so that git's rename detection pairs the old ``cleaner_filter.py``
with its new home when branches that edited it are merged.
"""

from __future__ import annotations

from kafkalog.cleaner.filter import (
    ChunkOutput,
    FilterParams,
    LastRecord,
    control_type,
    filter_chunk,
    finish_crc,
    pack_header,
    raise_record_error,
    scratch_arrays,
)

__all__ = [
    "ChunkOutput",
    "FilterParams",
    "LastRecord",
    "control_type",
    "filter_chunk",
    "finish_crc",
    "pack_header",
    "raise_record_error",
    "scratch_arrays",
]
