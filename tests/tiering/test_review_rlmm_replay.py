"""Review of tiering (issue #25): starting partitions that have no remote segments yet (a new tiered topic, or a
manager opening many partitions before their first copy) must not replay the whole metadata partition once per
partition: each start of a partition without events read every record of its ``__remote_log_metadata``
partition again (P partitions x M records at every open: hours with months of metadata)."""

from __future__ import annotations

from pathlib import Path

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
