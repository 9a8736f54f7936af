"""Review of tiering (issue #25, rev10): a replay of a damaged ``__remote_log_metadata`` never applies a damaged
event. A bit flipped on disk inside an event (here the end offset of a segment) with the batch's CRC left as
it was: the batch-by-batch replay (the only one before the bulk decoder, and still the one without pyarrow)
did not check CRCs and replayed the segment with the wrong end offset, silently; the bulk decoder checks them.
Both must fail the replay, naming the metadata partition."""

from __future__ import annotations

import logging
import struct
from pathlib import Path
from typing import Any

import pytest

import kafkalog.tiering.rlmm as rlmm_module
from kafkalog.errors import CorruptRecordError, KafkaStorageError
from kafkalog.log import Log
from kafkalog.remote import (
    REMOTE_LOG_METADATA_TOPIC_NAME,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
    Uuid,
)
from kafkalog.tiering import TopicBasedRemoteLogMetadataManager

from .conftest import SMALL, MetadataLogs

_END = 0x0123456789AB  # a segment end offset whose 8 bytes occur once in the metadata partition
_TIP = TopicIdPartition(Uuid(7, 7), "damaged", 0)


def _damaged_history(data_dir: Path) -> None:
    """Ten finished segments of :data:`_TIP`, then one byte of the fifth one's end offset flipped on disk (the
    record still decodes; only its batch's CRC tells)."""
    logs = MetadataLogs(data_dir)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        for i in range(10):
            end = _END if i == 4 else i * 10 + 9
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(_TIP, Uuid.random_uuid()), i * 10, end, i, 0, 0, 100, ((0, i * 10),)
            )
            rlmm.add_remote_log_segment_metadata(md)
            rlmm.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    md.remote_log_segment_id, i, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0
                )
            )
        rlmm.close()
    finally:
        logs.close()
    (segment,) = (data_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0").glob("*.log")
    data = bytearray(segment.read_bytes())
    at = data.find(struct.pack(">q", _END))
    assert at > 0 and data.find(struct.pack(">q", _END), at + 1) == -1
    data[at + 7] ^= 0x01  # the end offset becomes _END ^ 1
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize("decoder", ["bulk", "batch by batch"])
def test_a_replay_never_applies_an_event_whose_batch_fails_its_crc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    _damaged_history(tmp_path)
    if decoder == "batch by batch":
        monkeypatch.setattr(rlmm_module, "_columnar_decoder", lambda: None, raising=False)
    logs = MetadataLogs(tmp_path)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        with pytest.raises(
            CorruptRecordError, match=f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0 is corrupt"
        ) as info:
            ends = [md.end_offset for md in rlmm.list_remote_log_segments(_TIP)]
            pytest.fail(f"the damaged partition replayed: end offsets {ends}")
        assert "crc" in str(info.value).lower()
        assert not rlmm.is_ready(_TIP)  # nothing answers from a partial replay
    finally:
        logs.close()


def _write_finished_segments(
    data_dir: Path, count: int, logs_type: type[MetadataLogs] = MetadataLogs
) -> None:
    """``count`` segments' COPY_SEGMENT_STARTED and COPY_SEGMENT_FINISHED events (segment ``i``: offsets
    ``10i``..``10i+9``) in the metadata partition of ``data_dir`` (its logs opened by ``logs_type``), one batch
    each."""
    logs = logs_type(data_dir)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        for i in range(count):
            md = RemoteLogSegmentMetadata(
                RemoteLogSegmentId(_TIP, Uuid.random_uuid()), i * 10, i * 10 + 9, i, 0, 0, 100, ((0, i * 10),)
            )
            rlmm.add_remote_log_segment_metadata(md)
            rlmm.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    md.remote_log_segment_id, i, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0
                )
            )
        rlmm.close()
    finally:
        logs.close()


def _batch_positions(data: bytes | bytearray) -> list[int]:
    positions, pos = [], 0
    while pos + 12 <= len(data):
        positions.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return positions


@pytest.mark.parametrize("decoder", ["bulk", "batch by batch"])
def test_a_replay_never_stops_silently_before_the_log_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    """The size of a batch in the middle of the log inflated on disk (no CRC covers it): the replay saw no
    whole batch there and ended, as at the end of the log, forgetting every later event (here 15 of the 20
    segments) without a word. It must fail instead."""
    _write_finished_segments(tmp_path, 20)
    (segment,) = (tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0").glob("*.log")
    data = bytearray(segment.read_bytes())
    struct.pack_into(">i", data, _batch_positions(data)[10] + 8, 1 << 20)  # the 11th batch's size field
    segment.write_bytes(bytes(data))
    if decoder == "batch by batch":
        monkeypatch.setattr(rlmm_module, "_columnar_decoder", lambda: None, raising=False)
    logs = MetadataLogs(tmp_path)
    try:
        assert logs(0).log_end_offset == 40  # the log itself still ends after the 40 events
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        with pytest.raises(
            CorruptRecordError, match="no readable record batch at offset 10, below its log end"
        ):
            n = len(list(rlmm.list_remote_log_segments(_TIP)))
            pytest.fail(f"the replay ended early: {n} of 20 segments")
        assert not rlmm.is_ready(_TIP)
    finally:
        logs.close()


class _SmallSegments(MetadataLogs):
    """Metadata Logs whose segments roll every few events."""

    def __call__(self, partition: int) -> Log:
        log = self.logs.get(partition)
        if log is None:
            log = Log.open(
                self.data_dir / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-{partition}", {**SMALL, "retention.ms": -1}
            )
            log.hw_follows_leo = True
            self.logs[partition] = log
        return log


@pytest.mark.parametrize("decoder", ["bulk", "batch by batch"])
def test_a_replay_never_skips_a_hole_in_the_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    """The tail of a rolled segment of the metadata partition lost on disk (the log still opens: the damage is
    not at its end). The replay read on from the next segment and forgot the lost events (a segment of 20 here,
    silently). The topic is never compacted, so a hole in its offsets is damage: the replay must fail."""
    _write_finished_segments(tmp_path, 20, _SmallSegments)
    segments = sorted((tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0").glob("*.log"))
    assert len(segments) > 3
    data = segments[2].read_bytes()
    segments[2].write_bytes(data[: _batch_positions(data)[3]])  # its batches from the fourth on are lost
    if decoder == "batch by batch":
        monkeypatch.setattr(rlmm_module, "_columnar_decoder", lambda: None, raising=False)
    logs = _SmallSegments(tmp_path)
    try:
        assert logs(0).log_end_offset == 40
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        with pytest.raises(
            CorruptRecordError, match=r"has no records at offsets \d+ to \d+, below its log end"
        ):
            n = len(list(rlmm.list_remote_log_segments(_TIP)))
            pytest.fail(f"the replay skipped the hole: {n} of 20 segments")
        assert not rlmm.is_ready(_TIP)
    finally:
        logs.close()


def test_a_torn_batch_at_the_end_of_the_log_is_not_damage(tmp_path: Path) -> None:
    """The last write cut short (a crash): the log ends before it, and the replay answers what is before."""
    _write_finished_segments(tmp_path, 3)
    (segment,) = (tmp_path / f"{REMOTE_LOG_METADATA_TOPIC_NAME}-0").glob("*.log")
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])  # the last update (COPY_SEGMENT_FINISHED of the third segment) is torn
    logs = MetadataLogs(tmp_path)
    try:
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        states = [md.state for md in rlmm.list_remote_log_segments(_TIP)]
        assert states == [RemoteLogSegmentState.COPY_SEGMENT_FINISHED] * 2 + [
            RemoteLogSegmentState.COPY_SEGMENT_STARTED
        ]
    finally:
        logs.close()


def test_a_failed_replay_leaves_nothing_half_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A replay that fails part-way (here the log's read fails once, after the first reads were applied; as
    well a damaged batch) left the events before the failure in the store: the retry (the copy task starts the
    partition again) applied them again on top of themselves, each refused with a warning (a flood at every
    retry on a large metadata partition). The retry must start clean."""
    _write_finished_segments(tmp_path, 10)
    monkeypatch.setattr(rlmm_module, "_REPLAY_FETCH_BYTES", 400)  # a few events per read
    logs = MetadataLogs(tmp_path)
    try:
        log = logs(0)
        real, reads = log.read, [0]

        def flaky(*args: Any, **kwargs: Any) -> Any:
            reads[0] += 1
            if reads[0] == 3:
                raise KafkaStorageError("I/O error reading the metadata partition")
            return real(*args, **kwargs)

        monkeypatch.setattr(log, "read", flaky)
        rlmm = TopicBasedRemoteLogMetadataManager(logs, 1)
        with pytest.raises(KafkaStorageError):
            rlmm.on_partition_leadership_changes({_TIP})
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            segments = list(rlmm.list_remote_log_segments(_TIP))  # the retry
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert [md.state for md in segments] == [RemoteLogSegmentState.COPY_SEGMENT_FINISHED] * 10
    finally:
        logs.close()
