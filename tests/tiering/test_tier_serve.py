"""``kafkalog serve`` over a tiered data dir (issue 25): an unmodified client (confluent-kafka, librdkafka)
consumes a topic from offset 0 after every local segment but the active one was deleted (the fetches below
the local log start are served from the remote tier), ListOffsets answers EARLIEST (the log start, remote),
EARLIEST_LOCAL, LATEST_TIERED and timestamps in the remote tier, and DeleteRecords moves the log start over
both tiers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402
from kafka.protocol.admin import DeleteRecordsRequest  # noqa: E402
from kafka.protocol.consumer import ListOffsetsRequest  # noqa: E402

from kafkalog.server import KafkaServer  # noqa: E402
from server.helpers import RawClient  # noqa: E402

from .tier_helpers import TIERED_TOPIC, TS0, open_tiered, produce, tier_props  # noqa: E402

LT = ListOffsetsRequest.ListOffsetsTopic
N = 600


def _list_offsets(client: RawClient, timestamp: int) -> tuple[int, int]:
    p = LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
    request = ListOffsetsRequest[9](replica_id=-1, isolation_level=0, topics=[LT(name="t", partitions=[p])])
    result = client.call(request, 9).topics[0].partitions[0]
    assert result.error_code == 0
    return result.timestamp, result.offset


def _consume_all(bootstrap: str, n: int) -> list[tuple[int, bytes | None, int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tiered",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 4096,  # many fetches: all of them below the local log start
        }
    )
    got: list[tuple[int, bytes | None, int]] = []
    try:
        consumer.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 90
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value(), msg.timestamp()[1]))
        low, high = consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=10)
        assert (low, high) == (0, n)
        (found,) = consumer.offsets_for_times([TopicPartition("t", 0, TS0 + 11)], timeout=10)
        assert found.offset == 11
    finally:
        consumer.close()
    return got


def test_a_client_consumes_from_offset_zero_out_of_the_remote_tier(s3_server: Any, tmp_path: Path) -> None:
    bucket = s3_server.make_bucket("serve")
    with open_tiered(tmp_path / "data", tier_props(s3_server, bucket)) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 0})
        produce(log, N)
        for _ in range(2):  # local retention rolls the active segment too; the next pass copies it
            mgr.copy_remote_segments()
            mgr.delete_old_segments()
        assert len(log.segments) == 1  # only the active segment is local
        local_start = log.local_log_start_offset
        assert local_start == log.active_segment.base_offset > N // 2
        with KafkaServer(manager=mgr, port=0) as server:
            got = _consume_all(server.bootstrap, N)
            assert [o for o, _, _ in got] == list(range(N))
            assert all(v == b"v%d" % o and ts == TS0 + o for o, v, ts in got)
            with RawClient(server.port) as client:
                assert _list_offsets(client, -2) == (-1, 0)
                assert _list_offsets(client, -4) == (-1, local_start)
                assert _list_offsets(client, -5) == (-1, log.highest_offset_in_remote_storage)
                assert _list_offsets(client, TS0 + 3) == (TS0 + 3, 3)
                DT = DeleteRecordsRequest.DeleteRecordsTopic
                request = DeleteRecordsRequest[2](
                    topics=[
                        DT(name="t", partitions=[DT.DeleteRecordsPartition(partition_index=0, offset=7)])
                    ],
                    timeout_ms=1000,
                )
                result = client.call(request, 2).topics[0].partitions[0]
                assert (result.error_code, result.low_watermark) == (0, 7)
                assert _list_offsets(client, -2) == (-1, 7)
