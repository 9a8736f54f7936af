"""kafkalog.metrics: in-process snapshot and the Prometheus collector (Kafka's MBean names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.log import MockScheduler
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager
from kafkalog.metrics import register_prometheus, snapshot
from kafkalog.time import MockTime


def test_snapshot_and_prometheus_exposition(tmp_path: Path) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    mock_time = MockTime()
    with LogManager.open(tmp_path, scheduler=MockScheduler(mock_time), time=mock_time) as mgr:
        mgr.create_topic("m", 2, {"segment.bytes": 200})
        for _ in range(10):
            mgr.produce("m", [(None, b"x" * 50)], partition=0)
        mgr.get_log("m", 0).maybe_increment_log_start_offset(3, "test")
        mgr.delete_old_segments()
        snap = snapshot(mgr)
        log = mgr.get_log("m", 0)
        assert snap[TopicPartition("m", 0)] == {
            "num_log_segments": log.num_log_segments,
            "log_start_offset": 3,
            "log_end_offset": 10,
            "size": log.size,
        }
        assert snap[TopicPartition("m", 1)]["log_end_offset"] == 0
        registry = prometheus_client.CollectorRegistry()
        register_prometheus(mgr, registry)
        text = prometheus_client.generate_latest(registry).decode()
        assert 'kafka_log_log_logendoffset{partition="0",topic="m"} 10.0' in text
        assert 'kafka_log_log_logstartoffset{partition="0",topic="m"} 3.0' in text
        assert f'kafka_log_log_size{{partition="0",topic="m"}} {float(log.size)}' in text
        assert "kafka_log_log_numlogsegments" in text
    # closed logs are skipped, the scrape does not fail
    assert snapshot(mgr) == {}
    assert "kafka_log_log_size{" not in prometheus_client.generate_latest(registry).decode()
