"""Apache Kafka's Java clients 3.9 (kafka-clients jar) with consumer groups and transactions: a KafkaConsumer
group (classic protocol) commits and resumes after a restart; a transactional KafkaProducer commits one
transaction and aborts another; a consume-transform-produce loop commits its offsets in the transaction.
Skips with a reason when Java 17 or the jars are missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.server import KafkaServer

from .java_clients import JavaClients
from .test_transactions import _control_markers, _read

pytestmark = pytest.mark.interop

FAST = {
    "group_initial_rebalance_delay_ms": 50,
    "offsets_topic_num_partitions": 3,
    "transaction_state_num_partitions": 3,
}


def _values(rows: list[dict[str, object]]) -> list[str]:
    return sorted(str(r["value"]) for r in rows if "value" in r)


def test_java_group_commit_restart_and_transactions(data_dir: Path, java_clients: JavaClients) -> None:
    with KafkaServer(data_dir, port=0, **FAST) as server:
        assert java_clients.run("create", server.bootstrap, "jg", 2) == [{"created": "jg"}]
        assert java_clients.run("create", server.bootstrap, "jg-out", 2) == [{"created": "jg-out"}]
        out = java_clients.run("txn-produce", server.bootstrap, "jg", "java-tx", 5)
        assert out == [{"committed": 5, "aborted": 5}]
        assert _read(server.bootstrap, "jg", "read_committed") == sorted(f"c{i}".encode() for i in range(5))
        rows = java_clients.run("group-consume", server.bootstrap, "jg", "jgroup", 5, "read_committed")
        assert _values(rows) == sorted(f"c{i}" for i in range(5))
        committed = rows[-1]["committed"]
        assert server.manager is not None
        ends = {str(p): server.manager.get_log("jg", p).log_end_offset for p in range(2)}
        assert committed == ends  # past the records and the markers
    with KafkaServer(data_dir, port=0, **FAST) as server:
        # the group resumes after its committed offsets: nothing left
        again = java_clients.run("group-consume", server.bootstrap, "jg", "jgroup", 1, "read_committed")
        assert _values(again) == []
        copied = java_clients.run("txn-copy", server.bootstrap, "jg", "jg-out", "jcopy", "java-copy-tx", 5)
        assert copied == [{"copied": 5}]
        assert _read(server.bootstrap, "jg-out", "read_committed") == sorted(
            f"c{i}".encode() for i in range(5)
        )
        resumed = java_clients.run("group-consume", server.bootstrap, "jg", "jcopy", 1, "read_committed")
        assert _values(resumed) == []  # the offsets committed in the transaction hold
    markers = _control_markers(data_dir / "jg-0") + _control_markers(data_dir / "jg-1")
    assert markers.count("COMMIT") == markers.count("ABORT") >= 1
