"""The leader epoch cache of a partition (Kafka's ``LeaderEpochFileCache``), kept in ``leader-epoch-checkpoint``.

Entries ``(epoch, start offset)`` are strictly increasing in both fields. ``assign`` adds an epoch when it
is new or starts earlier than the latest one, first removing every entry that would break the ordering;
truncation from the end (log truncation) drops entries starting at or after the new end; truncation from
the start (log start offset moved) drops entries wholly before it and moves the last of them to start at
the new log start offset.

Durability: every change is written to the checkpoint file synchronously, by the thread that made it (Kafka
flushes truncations asynchronously and repairs at load; the file is a few lines, so kafkalog keeps it simple
and current). One exception keeps that fsync out of the Log's lock: a log start offset moved forward
(retention, DeleteRecords, the remote tier's expiration) changes the entries under the lock and writes the
file right after releasing it (``truncate_from_start(flush=False)``, then :meth:`LeaderEpochFileCache.flush`),
so appends never wait for it. The loader truncates the cache against the loaded log and its checkpointed log
start offset, so a file a crash left stale in between is repaired.
"""

from __future__ import annotations

import bisect
import logging
import threading
from pathlib import Path

from kafkalog.log.checkpoint import CheckpointFile, EpochEntry, leader_epoch_checkpoint

__all__ = ["EpochEntry", "LeaderEpochFileCache"]

_log = logging.getLogger("kafkalog.log.leader_epoch")
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochFileCache:
    """Leader epochs and the offsets they start at, persisted on every change."""

    def __init__(self, checkpoint: CheckpointFile[EpochEntry] | None, log_prefix: str = "") -> None:
        self._checkpoint = checkpoint
        self._lock = threading.RLock()
        self._prefix = log_prefix
        self._entries: list[EpochEntry] = []
        if checkpoint is not None:
            for entry in checkpoint.read():
                self._assign_no_flush(entry.epoch, entry.start_offset)

    @classmethod
    def for_directory(cls, directory: Path, log_prefix: str = "") -> LeaderEpochFileCache:
        """The cache backed by ``<directory>/leader-epoch-checkpoint``."""
        return cls(leader_epoch_checkpoint(directory), log_prefix)

    def with_directory(self, directory: Path) -> LeaderEpochFileCache:
        """The same entries, persisted in another directory (after a directory rename)."""
        with self._lock:
            other = LeaderEpochFileCache(None, self._prefix)
            other._checkpoint = leader_epoch_checkpoint(directory)
            other._entries = list(self._entries)
            return other

    # --- mutation -----------------------------------------------------------------------------------------
    def _assign_no_flush(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            raise ValueError(f"received invalid partition leader epoch entry with epoch {epoch}")
        if start_offset < 0:
            raise ValueError(
                f"received invalid partition leader epoch entry with start offset {start_offset}"
            )
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == epoch and latest.start_offset <= start_offset:
            return False
        # Remove entries that would no longer be monotonic.
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            removed = self._entries.pop()
            _log.debug(
                "%sRemoved epoch entry %r when assigning epoch %d at %d",
                self._prefix,
                removed,
                epoch,
                start_offset,
            )
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if already known)."""
        with self._lock:
            if self._assign_no_flush(epoch, start_offset):
                _log.info(
                    "%sNew epoch entry EpochEntry(epoch=%d, startOffset=%d)",
                    self._prefix,
                    epoch,
                    start_offset,
                )
                self.flush()

    def assign_entries(self, entries: list[EpochEntry]) -> None:
        """Assign several entries, flushing once."""
        with self._lock:
            changed = False
            for e in entries:
                changed |= self._assign_no_flush(e.epoch, e.start_offset)
            if changed:
                self.flush()

    @staticmethod
    def _truncated_from_end(entries: list[EpochEntry], end_offset: int) -> list[EpochEntry]:
        if end_offset >= 0 and entries and entries[-1].start_offset >= end_offset:
            return [e for e in entries if e.start_offset < end_offset]
        return entries

    @staticmethod
    def _truncated_from_start(entries: list[EpochEntry], start_offset: int) -> list[EpochEntry]:
        removed = [e for e in entries if e.start_offset <= start_offset]
        if not removed:
            return entries
        kept = [e for e in entries if e.start_offset > start_offset]
        return [EpochEntry(removed[-1].epoch, start_offset), *kept]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries whose start offset is >= ``end_offset`` (the log was truncated to it)."""
        with self._lock:
            entries = self._truncated_from_end(self._entries, end_offset)
            if entries is not self._entries:
                self._entries = entries
                self.flush()

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> bool:
        """Drop entries before ``start_offset``; the last dropped epoch then starts at ``start_offset``. Returns
        whether the entries changed. ``flush=False`` leaves the file to the caller's :meth:`flush` (Kafka's
        ``truncateFromStartAsyncFlush``: the Log writes it once its lock is released)."""
        with self._lock:
            entries = self._truncated_from_start(self._entries, start_offset)
            if entries is self._entries:
                return False
            self._entries = entries
            if flush:
                self.flush()
            return True

    def clear(self) -> None:
        """Forget every entry (not persisted)."""
        with self._lock:
            self._entries = []

    def clear_and_flush(self) -> None:
        """Forget every entry and persist."""
        with self._lock:
            self._entries = []
            self.flush()

    def flush(self) -> None:
        """Write the checkpoint file (if the directory still exists)."""
        with self._lock:
            if self._checkpoint is not None and self._checkpoint.path.parent.exists():
                try:
                    self._checkpoint.write(self._entries)
                except FileNotFoundError:
                    if self._checkpoint.path.parent.exists():
                        raise
                    # the directory was renamed or deleted meanwhile (a flush outside the Log's lock): the
                    # loader repairs whatever file the new directory holds

    # --- queries ------------------------------------------------------------------------------------------
    @property
    def epoch_entries(self) -> list[EpochEntry]:
        """Every entry, ascending."""
        with self._lock:
            return list(self._entries)

    @property
    def is_empty(self) -> bool:
        """Whether there is no entry."""
        return not self._entries

    @property
    def latest_epoch(self) -> int | None:
        """The largest epoch."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The entry of the largest epoch (no lock: one read of the list's last item, which every append asks
        for; a concurrent change is seen before or after, never half done)."""
        try:
            return self._entries[-1]
        except IndexError:
            return None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The entry of the smallest epoch."""
        with self._lock:
            return self._entries[0] if self._entries else None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below ``epoch`` (default: below the latest)."""
        with self._lock:
            if epoch is None:
                return self._entries[-2].epoch if len(self._entries) >= 2 else None
            lower = [e.epoch for e in self._entries if e.epoch < epoch]
            return lower[-1] if lower else None

    def previous_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of the largest epoch below ``epoch``."""
        with self._lock:
            lower = [e for e in self._entries if e.epoch < epoch]
            return lower[-1] if lower else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        """The entry of exactly ``epoch``."""
        with self._lock:
            for e in self._entries:
                if e.epoch == epoch:
                    return e
            return None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest epoch above ``epoch``."""
        with self._lock:
            higher = [e.epoch for e in self._entries if e.epoch > epoch]
            return higher[0] if higher else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the last entry starting at or before ``offset``."""
        with self._lock:
            starts = [e.start_offset for e in self._entries]
            i = bisect.bisect_right(starts, offset) - 1
            return self._entries[i].epoch if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetsForLeaderEpoch: where ``requested_epoch`` ends (Kafka's rules)."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            latest = self.latest_epoch
            if latest is not None and requested_epoch == latest:
                return requested_epoch, log_end_offset
            higher = [e for e in self._entries if e.epoch > requested_epoch]
            if not higher:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = [e for e in self._entries if e.epoch <= requested_epoch]
            if not floor:
                return requested_epoch, higher[0].start_offset
            return floor[-1].epoch, higher[0].start_offset

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        """Kafka's ``epochEntriesInRange``: the entries covering ``[start_offset, end_offset)``.

        A copy truncated from the start (when ``start_offset >= 0``; the epoch holding it then starts at
        ``start_offset``) and from the end; the cache itself is unchanged.
        """
        with self._lock:
            entries = list(self._entries)
            if start_offset >= 0:
                entries = self._truncated_from_start(entries, start_offset)
            return list(self._truncated_from_end(entries, end_offset))
