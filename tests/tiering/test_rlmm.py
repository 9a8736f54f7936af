"""TopicBasedRemoteLogMetadataManager over real Logs of ``__remote_log_metadata``: publishes are durable before
they return, a reopened (or crashed) data directory replays to the same state, refused events write nothing."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError
from kafkalog.remote import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
    deserialize,
)
from kafkalog.tiering import TopicBasedRemoteLogMetadataManager

from .conftest import MetadataLogs

TIP = TopicIdPartition(Uuid(0x1234, 0x5678), "orders", 2)
OTHER = TopicIdPartition(Uuid(0x99, 0x77), "clicks", 0)
S = RemoteLogSegmentState


def _segment(
    tip: TopicIdPartition, start: int, end: int, epochs: tuple[tuple[int, int], ...]
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(tip, Uuid.random_uuid()),
        start,
        end,
        10_000 + end,
        1,
        20_000,
        100 * (end - start + 1),
        epochs,
    )


def _update(md: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(md.remote_log_segment_id, 30_000, None, state, 1)


def _populate(rlmm: TopicBasedRemoteLogMetadataManager) -> list[RemoteLogSegmentMetadata]:
    a = _segment(TIP, 0, 99, ((0, 0),))
    b = _segment(TIP, 100, 199, ((0, 100), (2, 150)))
    c = _segment(TIP, 200, 299, ((2, 200),))
    o = _segment(OTHER, 0, 9, ((5, 0),))
    for md in (a, b, c, o):
        rlmm.add_remote_log_segment_metadata(md)
    for md in (a, b, o):
        rlmm.update_remote_log_segment_metadata(_update(md, S.COPY_SEGMENT_FINISHED))
    rlmm.update_remote_log_segment_metadata(_update(a, S.DELETE_SEGMENT_STARTED))
    return [a, b, c, o]


def _view(rlmm: TopicBasedRemoteLogMetadataManager) -> object:
    return (
        sorted(
            (str(m.remote_log_segment_id.id), m.state, m.start_offset)
            for m in rlmm.list_remote_log_segments(TIP)
        ),
        [m.start_offset for m in rlmm.list_remote_log_segments(TIP, 2)],
        rlmm.highest_offset_for_epoch(TIP, 0),
        rlmm.highest_offset_for_epoch(TIP, 2),
        rlmm.remote_log_segment_metadata(TIP, 2, 160),
        rlmm.remote_log_segment_metadata(TIP, 0, 50),
        [m.state for m in rlmm.list_remote_log_segments(OTHER)],
    )


def test_publish_replay_and_queries(tmp_path: Path, metadata_logs: Callable[[Path], MetadataLogs]) -> None:
    logs = metadata_logs(tmp_path / "data")
    rlmm = TopicBasedRemoteLogMetadataManager(logs, 5)
    a, b, c, _ = _populate(rlmm)
    assert rlmm.highest_offset_for_epoch(TIP, 2) == 199
    assert rlmm.highest_offset_for_epoch(TIP, 0) == 149
    assert rlmm.remote_log_segment_metadata(TIP, 2, 160) == b.create_with_updates(
        _update(b, S.COPY_SEGMENT_FINISHED)
    )
    assert rlmm.remote_log_segment_metadata(TIP, 0, 50) is None  # a's delete started
    assert rlmm.remote_log_segment_metadata(TIP, 2, 250) is None  # c's copy is not finished
    # one record per event, in the partition Kafka's partitioner picks, decodable by Kafka's serde
    part = rlmm.metadata_partition(TIP)
    log = logs(part)
    values = [r.value for batch in log.read(0, 1 << 20).records.batches() for r in batch]
    decoded = [deserialize(v) for v in values if v is not None]
    assert sum(1 for d in decoded if d.topic_id_partition == TIP) == 6
    assert log.recovery_point == log.log_end_offset  # flushed: durable before the publish returned
    before = _view(rlmm)

    logs.close()
    again = TopicBasedRemoteLogMetadataManager(metadata_logs(tmp_path / "data"), 5)
    assert _view(again) == before
    # epoch 0: a (DELETE_SEGMENT_STARTED, unreferenced) and b, by start offset
    assert [m.remote_log_segment_id for m in again.list_remote_log_segments(TIP, 0)] == [
        a.remote_log_segment_id,
        b.remote_log_segment_id,
    ]
    assert [m.state for m in again.list_remote_log_segments(TIP, 2)] == [
        S.COPY_SEGMENT_FINISHED,
        S.COPY_SEGMENT_STARTED,
    ]
    assert c.remote_log_segment_id in {m.remote_log_segment_id for m in again.list_remote_log_segments(TIP)}


def test_replay_after_a_crash(tmp_path: Path, metadata_logs: Callable[[Path], MetadataLogs]) -> None:
    logs = metadata_logs(tmp_path / "data")
    rlmm = TopicBasedRemoteLogMetadataManager(logs, 3)
    _populate(rlmm)
    before = _view(rlmm)
    # the files as a crash leaves them: copied while the logs are open, no clean-shutdown marker
    shutil.copytree(tmp_path / "data", tmp_path / "crashed")
    for marker in (tmp_path / "crashed").rglob(".kafka_cleanshutdown"):
        marker.unlink()
    crashed = TopicBasedRemoteLogMetadataManager(metadata_logs(tmp_path / "crashed"), 3)
    assert _view(crashed) == before


def test_refused_events_write_nothing(tmp_path: Path, metadata_logs: Callable[[Path], MetadataLogs]) -> None:
    logs = metadata_logs(tmp_path / "data")
    rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
    md = _segment(TIP, 0, 9, ((0, 0),))
    rlmm.add_remote_log_segment_metadata(md)
    end = logs(0).log_end_offset
    with pytest.raises(InvalidRecordError):
        rlmm.add_remote_log_segment_metadata(md)  # already known
    with pytest.raises(InvalidRecordError):
        rlmm.update_remote_log_segment_metadata(
            _update(md, S.DELETE_SEGMENT_FINISHED)
        )  # skips DELETE_STARTED
    with pytest.raises(InvalidRecordError):
        rlmm.update_remote_log_segment_metadata(_update(md, S.COPY_SEGMENT_STARTED))
    with pytest.raises(RemoteResourceNotFoundError):
        rlmm.update_remote_log_segment_metadata(
            _update(_segment(TIP, 10, 19, ((0, 10),)), S.COPY_SEGMENT_FINISHED)
        )
    with pytest.raises(InvalidRecordError):
        rlmm.add_remote_log_segment_metadata(
            RemoteLogSegmentMetadata(
                RemoteLogSegmentId(TIP, Uuid.random_uuid()),
                0,
                9,
                0,
                1,
                0,
                10,
                ((0, 0),),
                state=S.COPY_SEGMENT_FINISHED,
            )
        )
    assert logs(0).log_end_offset == end
    assert [m.state for m in rlmm.list_remote_log_segments(TIP)] == [S.COPY_SEGMENT_STARTED]


def test_a_stopped_partition_replays_again(
    tmp_path: Path, metadata_logs: Callable[[Path], MetadataLogs]
) -> None:
    rlmm = TopicBasedRemoteLogMetadataManager(metadata_logs(tmp_path / "data"), 1)
    o = _populate(rlmm)[3]
    before = _view(rlmm)
    rlmm.on_stop_partitions({TIP})
    rlmm.update_remote_log_segment_metadata(_update(o, S.DELETE_SEGMENT_STARTED))  # OTHER stays live
    rlmm.on_partition_leadership_changes({TIP})
    assert _view(rlmm)[:-1] == before[:-1]  # type: ignore[index]
    assert [m.state for m in rlmm.list_remote_log_segments(OTHER)] == [S.DELETE_SEGMENT_STARTED]
