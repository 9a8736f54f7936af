"""The log's seam to the remote tier (KIP-405): :class:`RemoteLogReader` and Kafka's log start offset reasons.

The ``log`` layer never imports ``tiering``, ``remote``, ``tiered`` or ``objstore``: a
:class:`~kafkalog.log.log.Log` whose ``remote_log_enabled`` is true reaches the remote tier only through the
reader its owner attaches with :meth:`Log.set_remote_log_reader <kafkalog.log.log.Log.set_remote_log_reader>`
(the ``RemoteLogManager``'s ``reader_for(log)``).

Invariant owned here (the contract both sides code against): a reader answers for offsets the remote tier
holds, in ``[log_start_offset, highest_offset_in_remote_storage]``; it returns whole batches in memory (never a
lazy slice), never a batch at or past ``max_offset``, at most ``max_bytes`` unless ``min_one_message`` and the
first batch is larger; ``None`` means no remote segment holds the offset (the log then answers
:class:`~kafkalog.errors.OffsetOutOfRangeError`); a storage failure raises
:class:`~kafkalog.errors.RemoteStorageError`, never a bare ``OSError``.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from kafkalog.storage import FetchDataInfo, TimestampAndOffset

__all__ = [
    "CLIENT_RECORD_DELETION",
    "LEADER_OFFSET_INCREMENTED",
    "SEGMENT_DELETION",
    "SNAPSHOT_GENERATED",
    "RemoteLogReader",
]

# Kafka's ``LogStartOffsetIncrementReason`` (its ``toString`` texts), the ``reason`` of
# ``Log.maybe_increment_log_start_offset`` / ``maybe_increment_local_log_start_offset``.
LEADER_OFFSET_INCREMENTED: Final = "leader offset increment"
SEGMENT_DELETION: Final = "segment deletion"
CLIENT_RECORD_DELETION: Final = "client delete records"
SNAPSHOT_GENERATED: Final = "snapshot generated"


@runtime_checkable
class RemoteLogReader(Protocol):
    """Reads one partition's remote tier for its :class:`~kafkalog.log.log.Log` (see the module doc)."""

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int,
        min_one_message: bool,
        read_committed: bool,
    ) -> FetchDataInfo | None:
        """The records of the remote segment holding ``fetch_offset``: whole batches from the one holding it,
        none at or past ``max_offset`` (exclusive), at most ``max_bytes`` unless ``min_one_message``; with
        ``read_committed`` the ``aborted_transactions`` from the remote transaction indexes. ``None`` when no
        remote segment holds the offset. Raises :class:`~kafkalog.errors.RemoteStorageError` when storage fails.
        """
        ...

    def find_offset_by_timestamp(self, target_timestamp: int, start_offset: int) -> TimestampAndOffset | None:
        """Kafka's ``RemoteLogManager.findOffsetByTimestamp``: the first offset >= ``start_offset`` whose
        timestamp is >= ``target_timestamp`` in the remote tier (its time indexes, following the leader-epoch
        lineage), or ``None``. Raises :class:`~kafkalog.errors.RemoteStorageError` when storage fails."""
        ...
