"""The file view readers take of a partition, wherever its bytes live.

Invariant owned here: a reader of one partition (``kafkalog.readonly``) sees a :class:`PartitionSource` — the
file names of a Kafka partition directory (``<20-digit offset>.log`` / ``.index`` / ``.timeindex`` /
``.txnindex`` / ``<20-digit offset>.snapshot`` / ``leader-epoch-checkpoint``) with their sizes, each
openable as a :class:`RandomAccessFile`, and nothing else. A local directory, a copy of one in a bucket, a
Kafka tiered-storage archive (whose objects are chunked, compressed or encrypted) and the union of a local
directory with its archive all present themselves this way, so there is one reader and several byte
sources. The bytes a source returns are the bytes Kafka wrote to the segment file (decoded, decrypted),
never a re-encoding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable


@runtime_checkable
class RandomAccessFile(Protocol):
    """One file's bytes, read by position (thread-compatible: one reader thread at a time)."""

    @property
    def name(self) -> str:
        """What errors call the file: a path or an object URL (never with credentials)."""
        ...

    @property
    def size(self) -> int:
        """The file's size in bytes when it was opened."""
        ...

    def pread(self, n: int, position: int) -> bytes:
        """Up to ``n`` bytes from ``position``; shorter only at the end of the file."""
        ...

    def close(self) -> None:
        """Release what the file holds (descriptors, cached chunks)."""
        ...


@runtime_checkable
class PartitionSource(Protocol):
    """One partition's files, as names of a Kafka partition directory."""

    @property
    def name(self) -> str:
        """What errors call the partition: a directory path or a URL (never with credentials)."""
        ...

    def list_files(self) -> Mapping[str, int]:
        """File name -> size, for every file of the partition directory (listing again sees new files)."""
        ...

    def open(self, name: str) -> RandomAccessFile:
        """Open one listed file; a file gone since the listing raises ``FileNotFoundError``."""
        ...

    def read(self, name: str) -> bytes:
        """A small file whole (indexes, snapshots, checkpoints)."""
        ...
