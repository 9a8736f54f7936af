"""Review of tiering (issue #25): starting partitions that have no remote segments yet (a new tiered topic, or a
manager opening many partitions before their first copy) must not replay the whole metadata partition once per
partition: each start of a partition without events read every record of its ``__remote_log_metadata``
partition again (P partitions x M records at every open: hours with months of metadata)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import Log
from kafkalog.remote import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from kafkalog.tiering import TopicBasedRemoteLogMetadataManager

from .conftest import MetadataLogs


class CountingLogs(MetadataLogs):
    """Metadata Logs whose reads are counted."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.reads = 0

    def __call__(self, partition: int) -> Log:
        log = super().__call__(partition)
        if not getattr(log, "_counted", False):
            real = log.read
            owner = self

            def counted(*args: object, **kwargs: object) -> object:
                owner.reads += 1
                return real(*args, **kwargs)  # type: ignore[arg-type]

            log.read = counted  # type: ignore[method-assign]
            log._counted = True  # type: ignore[attr-defined]
        return log


def test_partitions_without_events_do_not_replay_the_metadata_partition_each(tmp_path: Path) -> None:
    logs = CountingLogs(tmp_path)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        old = TopicIdPartition(Uuid(1, 1), "old", 0)
        for i in range(50):  # a metadata partition with some history
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(old, Uuid.random_uuid()), i * 10, i * 10 + 9, 0, 0, 0, 100, ((0, i * 10),)
            )
            rlmm.add_remote_log_segment_metadata(md)
            rlmm.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    md.remote_log_segment_id, 0, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0
                )
            )
        rlmm.close()

        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)  # a restart
        logs.reads = 0
        rlmm.on_partition_leadership_changes({old})
        one_replay = logs.reads
        assert one_replay >= 1
        new = [TopicIdPartition(Uuid(2, 2), "new", p) for p in range(40)]
        for tip in new:
            rlmm.on_partition_leadership_changes({tip})
            assert list(rlmm.list_remote_log_segments(tip)) == []
        assert logs.reads <= 2 * one_replay, f"{logs.reads} reads for 41 partitions ({one_replay} per replay)"
    finally:
        logs.close()


def _history(logs: MetadataLogs, segments: int) -> tuple[TopicIdPartition, TopicIdPartition]:
    """``segments`` finished copies of one partition and a deleted one of another, as publishes write them
    (one record per batch); the two partitions share metadata partition 0."""
    rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
    kept = TopicIdPartition(Uuid(3, 3), "kept", 0)
    gone = TopicIdPartition(Uuid(4, 4), "gone", 1)
    for tip in (kept, gone):
        for i in range(segments):
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(tip, Uuid.random_uuid()), i * 10, i * 10 + 9, i, 0, 0, 100, ((0, i * 10),)
            )
            rlmm.add_remote_log_segment_metadata(md)
            for state in (
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
            ):
                rlmm.update_remote_log_segment_metadata(
                    RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, i, None, state, 0)
                )
                if tip == kept:
                    break
    rlmm.close()
    return kept, gone


def _state(rlmm: TopicBasedRemoteLogMetadataManager, tip: TopicIdPartition) -> list[object]:
    return [(md.remote_log_segment_id, md.state, md.end_offset) for md in rlmm.list_remote_log_segments(tip)]


def test_a_replay_decodes_the_metadata_partition_in_bulk_not_batch_by_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every publish is a one-record batch: decoding batch by batch (a record index and its record objects
    per batch) cost more than the events (10,000 segments: 2.6 s of replay at every open, 0.8 s after)."""
    from kafkalog.records import DefaultRecordBatch

    logs = MetadataLogs(tmp_path)
    try:
        kept, _ = _history(logs, 30)
        per_batch = 0
        real = DefaultRecordBatch.record_index

        def counted(self: DefaultRecordBatch, *args: object) -> object:
            nonlocal per_batch
            per_batch += 1
            return real(self, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(DefaultRecordBatch, "record_index", counted)
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        assert len(_state(rlmm, kept)) == 30
        assert per_batch == 0, f"{per_batch} batches decoded one by one"
    finally:
        logs.close()


def test_the_bulk_replay_and_the_batch_replay_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pyarrow the replay decodes batch by batch: both give the same state."""
    import kafkalog.tiering.rlmm as rlmm_module

    logs = MetadataLogs(tmp_path)
    try:
        kept, gone = _history(logs, 30)
        bulk = TopicBasedRemoteLogMetadataManager(logs, 1)
        expected = (_state(bulk, kept), _state(bulk, gone))
        assert len(expected[0]) == 30 and {s for _, s, _ in expected[1]} == {
            RemoteLogSegmentState.DELETE_SEGMENT_STARTED
        }
        monkeypatch.setattr(rlmm_module, "_columnar_decoder", lambda: None)
        one_by_one = TopicBasedRemoteLogMetadataManager(logs, 1)
        assert (_state(one_by_one, kept), _state(one_by_one, gone)) == expected
    finally:
        logs.close()
