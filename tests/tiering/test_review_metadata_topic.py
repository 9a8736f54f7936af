"""Review of tiering (issue #25): the ``__remote_log_metadata`` topic is the only record of what the remote tier
holds, yet the manager treats it as an ordinary topic: a config change a client may send (AlterConfigs with a
``retention.ms``) lets retention delete its records, and after a restart the remote segments are forgotten: the
records only they held are unreadable and their objects are orphans."""

from __future__ import annotations

import contextlib
import time as wall
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaError
from kafkalog.log.types import FetchIsolation
from kafkalog.manager import LogManager
from kafkalog.remote import (
    REMOTE_LOG_METADATA_TOPIC_NAME,
    RemoteLogMetadataTopicPartitioner,
    TopicIdPartition,
)
from kafkalog.tiering import topic_id_partition
from kafkalog.time import MockTime

from .tier_helpers import TIERED_TOPIC, local_bases, produce, read_all


def test_a_retention_set_on_the_metadata_topic_never_forgets_remote_segments(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))  # the metadata records carry the wall clock's timestamps
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1})
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        mgr.delete_old_segments()  # local retention: the copied segments now live only in the remote tier
        assert local_bases(log)[0] > 0
        expected = read_all(log, 0)
        assert len(expected) == 200
        # what a client's AlterConfigs may ask (the server passes it to the manager): refused or harmless
        with contextlib.suppress(KafkaError):
            mgr.alter_topic_config(REMOTE_LOG_METADATA_TOPIC_NAME, {"retention.ms": 1000})
        time.sleep(60_000)
        mgr.delete_old_segments()
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        log = mgr.get_log("t", 0)
        assert read_all(log, 0, FetchIsolation.HIGH_WATERMARK) == expected


def test_records_a_client_produces_to_the_metadata_topic_never_delete_local_data(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """The server refuses Produce only to ``__consumer_offsets`` / ``__transaction_state``: a client (no ACLs in
    kafkalog) may append to ``__remote_log_metadata`` what the manager's own publishes look like. A forged
    COPY_SEGMENT_FINISHED then raises the highest offset in remote storage after a restart, and local retention
    deletes segments that were never copied."""
    from tests.server.helpers import RawClient
    from tests.server.test_produce_fetch import produce as server_produce

    from kafkalog.records import MemoryRecords, SimpleRecord
    from kafkalog.remote import (
        RemoteLogSegmentId,
        RemoteLogSegmentMetadata,
        RemoteLogSegmentMetadataUpdate,
        RemoteLogSegmentState,
        Uuid,
    )
    from kafkalog.remote.serde import serialize
    from kafkalog.server import ErrorCode, KafkaServer
    from kafkalog.tiering import topic_id_partition

    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1})
        produce(log, 200)  # never copied (the copy task has not run)
        expected = read_all(log, 0)
        sid = RemoteLogSegmentId(topic_id_partition(log), Uuid.random_uuid())
        forged = RemoteLogSegmentMetadata(sid, 0, 10**9, 0, 0, 0, 1, ((0, 0),))
        finished = RemoteLogSegmentMetadataUpdate(
            sid, 0, None, RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0
        )
        forged_batch = MemoryRecords.build(
            [SimpleRecord(serialize(forged)), SimpleRecord(serialize(finished))]
        )
        meta_end = mgr.get_log(REMOTE_LOG_METADATA_TOPIC_NAME, 0).log_end_offset
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            response = server_produce(client, REMOTE_LOG_METADATA_TOPIC_NAME, bytes(forged_batch.buffer))
            assert response.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION  # type: ignore[attr-defined]
        assert mgr.get_log(REMOTE_LOG_METADATA_TOPIC_NAME, 0).log_end_offset == meta_end
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        log = mgr.get_log("t", 0)
        mgr.delete_old_segments()  # local retention
        assert read_all(log, 0) == expected


def test_deleting_the_metadata_topic_never_forgets_remote_segments(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """DeleteTopics refuses only ``__consumer_offsets`` / ``__transaction_state``; the manager deleted
    ``__remote_log_metadata`` like any topic, and the next start forgot every remote segment."""
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1})
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        mgr.delete_old_segments()
        expected = read_all(log, 0)
        with contextlib.suppress(KafkaError):
            mgr.delete_topic(REMOTE_LOG_METADATA_TOPIC_NAME)
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        assert read_all(mgr.get_log("t", 0), 0) == expected


def test_a_changed_metadata_partition_count_never_forgets_remote_segments(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """``remote.log.metadata.topic.num.partitions`` changed between starts: the existing topic keeps its count
    but the partitioner used the new one, so a partition's events were looked for in the wrong metadata
    partition; the start then raised the log start offset to the local one (nothing remote "held" below it),
    and the remote range was gone for good. Kafka refuses to start when the counts differ
    (``TopicBasedRemoteLogMetadataManager``: "Existing topic partition count ... and configured partition count
    ... do not match")."""
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    props = {**props, "remote.log.metadata.topic.num.partitions": 2}
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        logs = mgr.create_topic("t", 4, {**TIERED_TOPIC, "local.retention.bytes": 1})
        for log in logs:
            produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        mgr.delete_old_segments()
        expected = [read_all(log, 0) for log in logs]
        assert all(len(e) == 200 for e in expected)
        tips = [topic_id_partition(log) for log in logs]

    def moved(n: int, tip: TopicIdPartition) -> int:
        new = RemoteLogMetadataTopicPartitioner(n).metadata_partition(tip)
        return -1 if new == RemoteLogMetadataTopicPartitioner(2).metadata_partition(tip) else new

    # a count under which some partition's events are looked for in the other existing metadata partition
    changed = next(n for n in range(3, 64) if any(0 <= moved(n, tip) < 2 for tip in tips))
    with (
        contextlib.suppress(KafkaError),
        LogManager.open(
            data, config={**props, "remote.log.metadata.topic.num.partitions": changed}, time=time
        ) as mgr,
    ):
        mgr.checkpoint()
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        assert [read_all(mgr.get_log("t", p), 0) for p in range(4)] == expected


def test_delete_records_on_the_metadata_topic_never_forgets_remote_segments(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """A client's DeleteRecords on ``__remote_log_metadata`` (delete policy, so not refused as a compacted
    topic's) moved its log start offset past the events: the next start replayed none of them."""
    from kafka.protocol.admin import DeleteRecordsRequest
    from tests.server.helpers import RawClient

    from kafkalog.server import KafkaServer

    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1})
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        mgr.delete_old_segments()
        expected = read_all(log, 0)
        dt = DeleteRecordsRequest.DeleteRecordsTopic
        part = dt.DeleteRecordsPartition(partition_index=0, offset=-1)
        request = DeleteRecordsRequest[2](
            topics=[dt(name=REMOTE_LOG_METADATA_TOPIC_NAME, partitions=[part])], timeout_ms=1000
        )
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            client.call(request, 2)
        mgr.checkpoint()
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        assert read_all(mgr.get_log("t", 0), 0) == expected


def test_validate_only_answers_the_refusal_of_the_change(tmp_path: Path, props: dict[str, Any]) -> None:
    """IncrementalAlterConfigs with ``validate_only`` answers what the change would: a retention set on
    ``__remote_log_metadata`` is POLICY_VIOLATION, and tiering turned off without
    ``remote.log.delete.on.disable`` INVALID_CONFIG; nothing changes (before, both answered NONE)."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    from tests.server.helpers import RawClient

    from kafkalog.server import ErrorCode, KafkaServer

    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    alterable = resource.AlterableConfig

    def alter(client: RawClient, topic: str, key: str, value: str, validate_only: bool) -> Any:
        request = IncrementalAlterConfigsRequest[1](
            resources=[
                resource(
                    resource_type=2,
                    resource_name=topic,
                    configs=[alterable(name=key, config_operation=0, value=value)],
                )
            ],
            validate_only=validate_only,
        )
        return client.call(request, 1).responses[0]

    with LogManager.open(tmp_path / "data", config=dict(props), time=MockTime()) as mgr:
        mgr.create_topic("t", 1, TIERED_TOPIC)
        cases = [
            (REMOTE_LOG_METADATA_TOPIC_NAME, "retention.ms", "1000", ErrorCode.POLICY_VIOLATION),
            ("t", "remote.storage.enable", "false", ErrorCode.INVALID_CONFIG),
        ]
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            for topic, key, value, code in cases:
                before = mgr.topic_config(topic)
                dry = alter(client, topic, key, value, True)
                real = alter(client, topic, key, value, False)
                assert (dry.error_code, real.error_code) == (code, code), (topic, key)
                assert mgr.topic_config(topic) == before
            ok = alter(client, "t", "retention.ms", "123456789", True)
            assert ok.error_code == ErrorCode.NONE
            assert mgr.topic_config("t").retention_ms == -1  # validate_only changes nothing
