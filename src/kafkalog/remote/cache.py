"""Replaying ``__remote_log_metadata`` into per-partition segment state (Kafka's ``RemoteLogMetadataCache`` and
``RemoteLogLeaderEpochState``).

Invariants, as Kafka's:

* a segment enters with :meth:`RemoteLogMetadataCache.add_copy_in_progress_segment` in COPY_SEGMENT_STARTED
  and is then *unreferenced* in every leader epoch it covers (listed, never served by offset lookups);
* COPY_SEGMENT_FINISHED puts it in each epoch's offset map under the epoch's first offset in the segment; a
  finished segment whose epoch range reaches at least as far as the epoch's highest offset so far replaces the
  entries at or after its start (the older ones become unreferenced: duplicates uploaded across leader changes);
  the epoch's highest offset only grows;
* DELETE_SEGMENT_STARTED takes it out of the offset maps (unreferenced again, so deletes can be retried);
  DELETE_SEGMENT_FINISHED forgets it;
* an invalid transition (:meth:`RemoteLogSegmentState.is_valid_transition`) is logged and dropped, as Kafka
  does; an update of an unknown segment is a :class:`~kafkalog.errors.RemoteResourceNotFoundError` once the
  cache is initialized (dropped before, as Kafka drops events whose base record was already removed); a
  COPY_SEGMENT_STARTED update, or an add in another state, is an :class:`~kafkalog.errors.InvalidRecordError`
  (Kafka's ``IllegalArgumentException``).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError
from kafkalog.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
)

__all__ = ["RemoteLogLeaderEpochState", "RemoteLogMetadataCache"]

_log = logging.getLogger(__name__)


class RemoteLogLeaderEpochState:
    """One leader epoch's segments: COPY_SEGMENT_FINISHED ones by start offset, the rest unreferenced."""

    def __init__(self) -> None:
        self._offsets: list[int] = []  # sorted start offsets of the referenced segments
        self._ids: dict[int, RemoteLogSegmentId] = {}
        self.unreferenced_segment_ids: set[RemoteLogSegmentId] = set()
        #: Highest offset of this epoch among the segments that reached COPY_SEGMENT_FINISHED (None if none).
        self.highest_log_offset: int | None = None

    def referenced_segment_ids(self) -> list[RemoteLogSegmentId]:
        """The referenced segments, by start offset."""
        return [self._ids[o] for o in self._offsets]

    def floor_entry(self, offset: int) -> RemoteLogSegmentId | None:
        """The referenced segment with the greatest start offset ≤ ``offset``."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._ids[self._offsets[i - 1]] if i else None

    def handle_copy_started(self, segment_id: RemoteLogSegmentId) -> None:
        """A copy began: track the segment as unreferenced."""
        self.unreferenced_segment_ids.add(segment_id)

    def handle_copy_finished(
        self, start_offset: int, segment_id: RemoteLogSegmentId, epoch_end_offset: int
    ) -> None:
        """A copy finished: reference it at ``start_offset``, unreferencing segments it supersedes."""
        while (
            self._offsets
            and self._offsets[-1] >= start_offset
            and self.highest_log_offset is not None
            and self.highest_log_offset <= epoch_end_offset
        ):
            self.unreferenced_segment_ids.add(self._ids.pop(self._offsets.pop()))
        if start_offset not in self._ids:
            bisect.insort(self._offsets, start_offset)
        self._ids[start_offset] = segment_id
        self.unreferenced_segment_ids.discard(segment_id)
        if self.highest_log_offset is None or epoch_end_offset > self.highest_log_offset:
            self.highest_log_offset = epoch_end_offset

    def handle_delete_started(self, start_offset: int, segment_id: RemoteLogSegmentId) -> None:
        """A delete began: drop the offset mapping (if it is this segment's) and keep it unreferenced."""
        if self._ids.get(start_offset) == segment_id:
            del self._ids[start_offset]
            self._offsets.remove(start_offset)
        self.unreferenced_segment_ids.add(segment_id)

    def handle_delete_finished(self, segment_id: RemoteLogSegmentId) -> None:
        """A delete finished: forget the segment."""
        self.unreferenced_segment_ids.discard(segment_id)

    def list_all_remote_log_segments(
        self, id_to_metadata: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata]
    ) -> list[RemoteLogSegmentMetadata]:
        """Referenced and unreferenced segments, by start offset."""
        out = []
        for segment_id in [*self.referenced_segment_ids(), *self.unreferenced_segment_ids]:
            metadata = id_to_metadata.get(segment_id)
            if metadata is None:
                raise RemoteResourceNotFoundError(f"No remote log segment metadata found for :{segment_id}")
            out.append(metadata)
        if self.unreferenced_segment_ids:
            out.sort(key=lambda m: m.start_offset)
        return out


def _epoch_end_offset(epoch: int, metadata: RemoteLogSegmentMetadata) -> int:
    """The last offset of ``epoch`` within the segment: the next epoch's start − 1, else the segment's end."""
    epochs = metadata.segment_leader_epochs
    for i, (e, _) in enumerate(epochs):
        if e > epoch:
            return epochs[i][1] - 1
    return metadata.end_offset


class RemoteLogMetadataCache:
    """One partition's remote segments, replayed from its metadata records (Kafka's ``RemoteLogMetadataCache``).

    Not thread-safe: one replaying thread owns it (Kafka's consumer task), readers take their own lock.
    """

    def __init__(self) -> None:
        self._id_to_metadata: dict[RemoteLogSegmentId, RemoteLogSegmentMetadata] = {}
        self._epochs: dict[int, RemoteLogLeaderEpochState] = {}
        self._initialized = False

    # --- lifecycle ----------------------------------------------------------------------------------------
    def mark_initialized(self) -> None:
        """The replay caught up: from now on an update of an unknown segment is an error."""
        self._initialized = True

    def is_initialized(self) -> bool:
        """Whether :meth:`mark_initialized` was called."""
        return self._initialized

    # --- queries ------------------------------------------------------------------------------------------
    def remote_log_segment_metadata(self, leader_epoch: int, offset: int) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written in ``leader_epoch``, else None."""
        state = self._epochs.get(leader_epoch)
        if state is None:
            return None
        segment_id = state.floor_entry(offset)
        if segment_id is None:
            return None
        metadata = self._id_to_metadata[segment_id]
        return None if offset > _epoch_end_offset(leader_epoch, metadata) else metadata

    def segment_metadata(self, segment_id: RemoteLogSegmentId) -> RemoteLogSegmentMetadata | None:
        """The tracked segment ``segment_id`` (any state but DELETE_SEGMENT_FINISHED), else None: O(1)."""
        return self._id_to_metadata.get(segment_id)

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        """The highest offset of ``leader_epoch`` in segments that reached COPY_SEGMENT_FINISHED, else None."""
        state = self._epochs.get(leader_epoch)
        return None if state is None else state.highest_log_offset

    def list_remote_log_segments(self, leader_epoch: int | None = None) -> Iterator[RemoteLogSegmentMetadata]:
        """Every tracked segment (not yet DELETE_SEGMENT_FINISHED) in insertion order, or with ``leader_epoch``
        the segments of that epoch (referenced and unreferenced) by start offset."""
        if leader_epoch is None:
            return iter(list(self._id_to_metadata.values()))
        state = self._epochs.get(leader_epoch)
        if state is None:
            return iter(())
        return iter(state.list_all_remote_log_segments(self._id_to_metadata))

    # --- replay -------------------------------------------------------------------------------------------
    def add_copy_in_progress_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Track a segment whose copy started (its state must be COPY_SEGMENT_STARTED)."""
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRecordError(
                f"Given remoteLogSegmentMetadata:{metadata.remote_log_segment_id} should have state as "
                f"COPY_SEGMENT_STARTED but it contains state as: {metadata.state.name}"
            )
        segment_id = metadata.remote_log_segment_id
        existing = self._id_to_metadata.get(segment_id)
        if not self._check_transition(existing.state if existing else None, metadata.state, segment_id):
            return
        for epoch, _ in metadata.segment_leader_epochs:
            self._epoch_state(epoch).handle_copy_started(segment_id)
        self._id_to_metadata[segment_id] = metadata

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Apply a state change of a tracked segment (see the module docstring for the rules)."""
        segment_id = update.remote_log_segment_id
        existing = self._id_to_metadata.get(segment_id)
        if existing is None:
            if not self._initialized:
                _log.debug(
                    "Dropping the event: %s as the base-metadata about the segment was already removed",
                    update,
                )
                return
            raise RemoteResourceNotFoundError(f"No remote log segment metadata found for :{segment_id}")
        if not self._check_transition(existing.state, update.state, segment_id):
            return
        if update.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise InvalidRecordError(
                f"metadataUpdate: {segment_id} with state COPY_SEGMENT_STARTED can not be updated"
            )
        metadata = existing.create_with_updates(update)
        if update.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            for epoch, start in metadata.segment_leader_epochs:
                end = _epoch_end_offset(epoch, metadata)
                self._epoch_state(epoch).handle_copy_finished(start, segment_id, end)
            self._id_to_metadata[segment_id] = metadata
        elif update.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
            for epoch, start in metadata.segment_leader_epochs:
                self._epoch_state(epoch).handle_delete_started(start, segment_id)
            self._id_to_metadata[segment_id] = metadata
        else:
            for epoch, _ in metadata.segment_leader_epochs:
                self._epoch_state(epoch).handle_delete_finished(segment_id)
            del self._id_to_metadata[segment_id]

    def replay(self, record: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate) -> None:
        """Apply one decoded record of this partition: a segment record adds, an update record updates."""
        if isinstance(record, RemoteLogSegmentMetadata):
            self.add_copy_in_progress_segment(record)
        else:
            self.update_remote_log_segment_metadata(record)

    def _epoch_state(self, epoch: int) -> RemoteLogLeaderEpochState:
        state = self._epochs.get(epoch)
        if state is None:
            state = self._epochs[epoch] = RemoteLogLeaderEpochState()
        return state

    @staticmethod
    def _check_transition(
        existing: RemoteLogSegmentState | None, target: RemoteLogSegmentState, segment_id: RemoteLogSegmentId
    ) -> bool:
        valid = RemoteLogSegmentState.is_valid_transition(existing, target)
        if not valid:
            _log.error(
                "Current state: %s can not be transitioned to target state: %s, segmentId: %s. Dropping the event",
                existing.name if existing is not None else None,
                target.name,
                segment_id,
            )
        return valid
