"""RemotePartitionMetadataStore (Kafka's RemotePartitionMetadataStore / RemotePartitionMetadataEventHandler):
replaying a metadata partition's values for several user partitions."""

from __future__ import annotations

import logging

import pytest

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.remote import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemotePartitionMetadataStore,
    TopicIdPartition,
    Uuid,
    deserialize,
    serialize,
)

S = RemoteLogSegmentState
P = RemotePartitionDeleteState
TP0 = TopicIdPartition(Uuid(1, 1), "a", 0)
TP1 = TopicIdPartition(Uuid(1, 1), "a", 1)


def _segment(tp: TopicIdPartition, n: int) -> RemoteLogSegmentMetadata:
    sid = RemoteLogSegmentId(tp, Uuid(9, n))
    return RemoteLogSegmentMetadata(sid, 100 * n, 100 * n + 99, 0, 0, 0, 10, ((0, 100 * n),))


def _update(seg: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(seg.remote_log_segment_id, 5, b"cm", state, 2)


def test_replays_values_of_several_partitions() -> None:
    store = RemotePartitionMetadataStore()
    for tp in (TP0, TP1):
        store.maybe_load_partition(tp)
    a, b, c = _segment(TP0, 0), _segment(TP0, 1), _segment(TP1, 0)
    values = [a, b, c, _update(a, S.COPY_SEGMENT_FINISHED), _update(c, S.COPY_SEGMENT_FINISHED)]
    for raw in map(serialize, values):
        store.handle_remote_log_metadata(deserialize(raw))
    with pytest.raises(RemoteStorageError, match="not initialized"):
        store.list_remote_log_segments(TP0)
    for tp in (TP0, TP1):
        store.mark_initialized(tp)
    assert store.is_initialized(TP0)
    assert [(m.start_offset, m.state) for m in store.list_remote_log_segments(TP0)] == [
        (0, S.COPY_SEGMENT_FINISHED),
        (100, S.COPY_SEGMENT_STARTED),
    ]
    hit = store.remote_log_segment_metadata(TP0, 50, 0)
    assert hit is not None and hit.custom_metadata == b"cm"
    assert store.remote_log_segment_metadata(TP0, 150, 0) is None
    assert (store.highest_log_offset(TP0, 0), store.highest_log_offset(TP1, 0)) == (99, 99)
    assert [m.remote_log_segment_id for m in store.list_remote_log_segments(TP1, 0)] == [
        c.remote_log_segment_id
    ]


def test_unloaded_partitions_and_unknown_updates(caplog: pytest.LogCaptureFixture) -> None:
    store = RemotePartitionMetadataStore()
    seg = _segment(TP0, 0)
    with pytest.raises(RemoteResourceNotFoundError, match="No partition metadata found"):
        store.handle_remote_log_metadata(seg)
    with pytest.raises(RemoteResourceNotFoundError, match="No resource found for partition"):
        store.highest_log_offset(TP0, 0)
    store.maybe_load_partition(TP0)
    store.mark_initialized(TP0)
    with caplog.at_level(logging.WARNING, logger="kafkalog.remote.store"):
        store.handle_remote_log_metadata(_update(seg, S.COPY_SEGMENT_FINISHED))  # unknown segment: logged
    assert "No remote log segment metadata found" in caplog.text
    assert list(store.list_remote_log_segments(TP0)) == []
    snapshot = RemoteLogSegmentMetadataSnapshot(Uuid(1, 2), 0, 0, 0, 0, 0, 0, ((0, 0),))
    with pytest.raises(InvalidRecordError, match="not a __remote_log_metadata record"):
        store.handle_remote_log_metadata(snapshot)


def test_partition_delete_finished_forgets_the_partition() -> None:
    store = RemotePartitionMetadataStore()
    store.maybe_load_partition(TP0)
    store.handle_remote_log_metadata(_segment(TP0, 0))
    marked = RemotePartitionDeleteMetadata(TP0, P.DELETE_PARTITION_MARKED, 1, 0)
    store.handle_remote_log_metadata(marked)
    assert store.remote_partition_delete_metadata(TP0) == marked
    store.handle_remote_log_metadata(RemotePartitionDeleteMetadata(TP0, P.DELETE_PARTITION_FINISHED, 2, 0))
    assert store.remote_partition_delete_metadata(TP0) is None
    assert not store.is_initialized(TP0)
    with pytest.raises(RemoteResourceNotFoundError):
        store.list_remote_log_segments(TP0)
