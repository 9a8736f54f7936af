"""The state a read-only reader takes from beside a partition's files: its log dir's checkpoints
(:class:`LogDirState`), what a source knows of its segments without reading them (:class:`SegmentMetadata`),
and a data directory in object storage (:class:`RemoteLayout`). Protocols and value types only, so the reader
(:mod:`kafkalog.readonly.log`) and the byte sources (:mod:`kafkalog.readonly.remote`, ``copies``) share them
without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from kafkalog.log.names import TopicPartition
from kafkalog.objstore import PartitionSource

__all__ = ["LogDirState", "NoLogDirState", "RemoteLayout", "SegmentMetadata"]

_T = TypeVar("_T")


class LogDirState(Protocol):
    """What a partition's offsets take from its log dir: checkpoints and Spark sink jobs still pending."""

    def look(self, tp: TopicPartition, read: Callable[[], _T]) -> tuple[_T, int | None]:
        """``read()`` and, taken consistently with it, the bound a pending sink job puts on ``tp``'s high
        watermark (None: no bound)."""
        ...

    def log_start_offset(self, tp: TopicPartition) -> int:
        """The log start offset checkpointed for ``tp`` (0 if none)."""
        ...

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The high watermark checkpointed for ``tp``; None: it is the log end offset."""
        ...


class NoLogDirState:
    """A partition without log-dir checkpoints (an archive): log start at the first segment, HW = LEO."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[NoLogDirState], tuple[()]]:
        return type(self), ()

    def look(self, tp: TopicPartition, read: Callable[[], _T]) -> tuple[_T, int | None]:
        """``read()``; no sink bound."""
        return read(), None

    def log_start_offset(self, tp: TopicPartition) -> int:
        """0 (the first segment's base offset decides)."""
        return 0

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """None: the high watermark is the log end offset."""
        return None


class SegmentMetadata(Protocol):
    """What a source may know of its segments without reading them (an archive's manifests): a reader uses it
    instead of scanning the last segment's tail and reading time indexes, so planning reads no data."""

    def segment_end_offset(self, base_offset: int) -> int | None:
        """The last offset (inclusive) of the complete segment at ``base_offset``; None if not known."""
        ...

    def segment_max_timestamp(self, base_offset: int) -> int | None:
        """The largest timestamp of the segment at ``base_offset``; None if not known."""
        ...


class RemoteLayout(Protocol):
    """A data directory in object storage as the reader sees it: partitions, their sources, checkpoints."""

    @property
    def name(self) -> str:
        """The layout's root URL (never a credential)."""
        ...

    def partitions(self) -> dict[TopicPartition, str]:
        """Every partition -> what errors call it."""
        ...

    def is_empty(self) -> bool:
        """Whether nothing is stored under the root (it does not exist)."""
        ...

    def source(self, tp: TopicPartition) -> PartitionSource:
        """The partition's files (cheap: no request until read)."""
        ...

    def log_dir_state(self) -> LogDirState:
        """The checkpoints offsets come from."""
        ...
