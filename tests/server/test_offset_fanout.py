"""Work per request of OffsetCommit, TxnOffsetCommit, OffsetFetch, AddPartitionsToTxn, ListOffsets and
DeleteRecords (issue #19): a partition named more than
once is one entry answered once (a commit keeps the last offset given), a request of many partitions is
read, built and answered on the I/O threads (a 300k-partition OffsetCommit held every other client for
6.7 s, a 3M-entry AddPartitionsToTxn 5.9 s), and a commit too large for one ``__consumer_offsets`` batch is refused before its records are
built."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey

from kafkalog.records import SimpleRecord
from kafkalog.server import ErrorCode, KafkaServer
from kafkalog.server.apis import delete_records as delete_records_module
from kafkalog.server.apis import list_offsets as list_offsets_module
from kafkalog.server.apis import offsets as offsets_module
from kafkalog.server.groups import coordinator as coordinator_module
from kafkalog.server.protocol import message_classes

from .helpers import RawClient

_COMMIT = message_classes()[ApiKey.OffsetCommit][0]
_FETCH = message_classes()[ApiKey.OffsetFetch][0]
_TXN_COMMIT = message_classes()[ApiKey.TxnOffsetCommit][0]
_INIT = message_classes()[ApiKey.InitProducerId][0]
_ADD = message_classes()[ApiKey.AddPartitionsToTxn][0]
_LIST = message_classes()[ApiKey.ListOffsets][0]
_DELETE = message_classes()[ApiKey.DeleteRecords][0]
#: More partitions than MANY_OFFSETS (1000)
_MANY = 5000


def _commit(partitions: list[tuple[int, int]], group: str = "g", metadata: str = "") -> Any:
    part = _COMMIT.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    return _COMMIT[8](
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            _COMMIT.OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    part(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=-1,
                        committed_metadata=metadata,
                    )
                    for p, o in partitions
                ],
            )
        ],
    )


def _fetch(partitions: list[int], group: str = "g") -> Any:
    topic = _FETCH.OffsetFetchRequestTopic(name="t", partition_indexes=partitions)
    return _FETCH[7](group_id=group, topics=[topic], require_stable=True)


def _txn_commit(partitions: list[int]) -> Any:
    part = _TXN_COMMIT.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
    topic = _TXN_COMMIT.TxnOffsetCommitRequestTopic(
        name="t",
        partitions=[
            part(partition_index=p, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")
            for p in partitions
        ],
    )
    return _TXN_COMMIT[3](
        transactional_id="tx",
        group_id="g",
        producer_id=1,
        producer_epoch=0,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[topic],
    )


def _answered(response: Any) -> list[tuple[int, int]]:
    return [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


def _threads_of(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> set[str]:
    """The names of the threads that call ``module.name`` from now on."""
    seen: set[str] = set()
    real: Callable[..., Any] = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.add(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_a_partition_named_twice_is_committed_and_fetched_once(server: KafkaServer) -> None:
    with RawClient(server.port) as client:
        committed = client.call(_commit([(0, 5), (1, 3), (0, 6), (0, 7)]), 8)
        assert _answered(committed) == [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]
        fetched = client.call(_fetch([1, 0, 1, 0, 2]), 7)
        rows = [(p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions]
        assert rows == [(1, 3), (0, 7), (2, -1)]


def test_a_large_commit_and_fetch_run_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _threads_of(monkeypatch, offsets_module, "CommitEntry")
    rows = _threads_of(monkeypatch, offsets_module, "_FetchPartition")
    with RawClient(server.port) as client:
        committed = client.call(_commit([(p, p + 1) for p in range(_MANY)]), 8)
        assert _answered(committed) == [(p, ErrorCode.NONE) for p in range(_MANY)]
        fetched = client.call(_fetch(list(range(_MANY))), 7)
    offsets = [(p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions]
    assert offsets == [(p, p + 1) for p in range(_MANY)]
    assert entries and all(n.startswith("kafkalog-server-io-") for n in entries), entries
    assert rows and all(n.startswith("kafkalog-server-io-") for n in rows), rows


def test_a_large_txn_offset_commit_runs_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _threads_of(monkeypatch, offsets_module, "CommitEntry")
    with RawClient(server.port) as client:
        response = client.call(_txn_commit([*range(_MANY), 0, 1]), 3)
    assert _answered(response) == [(p, ErrorCode.NONE) for p in range(_MANY)]
    assert entries and all(n.startswith("kafkalog-server-io-") for n in entries), entries


def test_a_commit_too_large_for_one_batch_is_refused_before_its_records_are_built(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30,000 partitions take at least 1.2 MB of records, past the 1 MiB max.message.bytes of
    __consumer_offsets: INVALID_COMMIT_OFFSET_SIZE (what the append answers), and no record is encoded."""
    encoded = _threads_of(monkeypatch, coordinator_module, "encode_offset_commit_value")
    with RawClient(server.port) as client:
        client.call(_commit([(0, 1)]), 8)  # the coordinator and its topic are ready
        encoded.clear()
        response = client.call(_commit([(p, 1) for p in range(30_000)]), 8)
        assert {code for _, code in _answered(response)} == {ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
        assert not encoded
        fetched = client.call(_fetch([0, 1]), 7)
    assert [(p.partition_index, p.committed_offset) for t in fetched.topics for p in t.partitions] == [
        (0, 1),
        (1, -1),
    ]


def test_a_large_add_partitions_to_txn_runs_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert server.manager is not None
    server.manager.create_topic("t", 3)
    checked: set[str] = set()  # the threads that look up how many partitions "t" has
    real_count = server.manager.num_partitions

    def count(topic: str) -> int:
        if topic == "t":
            checked.add(threading.current_thread().name)
        return real_count(topic)

    monkeypatch.setattr(server.manager, "num_partitions", count)
    with RawClient(server.port) as client:
        init = _INIT[2](
            transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
        )
        ready = client.call(init, 2)
        for _ in range(100):  # the transaction coordinator may still be loading its topic
            if ready.error_code == ErrorCode.NONE:
                break
            threading.Event().wait(0.1)
            ready = client.call(init, 2)
        assert ready.error_code == ErrorCode.NONE, ready
        topic = _ADD.AddPartitionsToTxnTopic(name="t", partitions=[*range(_MANY), 0, 1])
        request = _ADD[3](
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=ready.producer_id,
            v3_and_below_producer_epoch=ready.producer_epoch,
            v3_and_below_topics=[topic],
        )
        checked.clear()
        response = client.call(request, 3)
    answered = [(p.partition_index, p.partition_error_code) for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition]  # fmt: skip
    assert answered == [(p, ErrorCode.OPERATION_NOT_ATTEMPTED) for p in range(3)] + [
        (p, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in range(3, _MANY)
    ]
    assert checked and all(n.startswith("kafkalog-server-io-") for n in checked), checked


def test_a_large_list_offsets_and_delete_records_run_off_the_event_loop(
    server: KafkaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200,000 partitions held the event loop 1.9 s (ListOffsets) and 1.4 s (DeleteRecords)."""
    assert server.manager is not None
    server.manager.create_topic("t", 2)
    log = server.manager.get_log("t", 1)
    for i in range(3):
        log.append([SimpleRecord(b"%d" % i)])
    listed = _threads_of(monkeypatch, list_offsets_module, "_PartitionResponse")
    deleted = _threads_of(monkeypatch, delete_records_module, "_PartitionResult")
    lt = _LIST.ListOffsetsTopic
    list_request = _LIST[7](
        replica_id=-1,
        isolation_level=0,
        topics=[
            lt(name="t", partitions=[lt.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                                     for p in range(1, _MANY)])
        ],
    )  # fmt: skip
    dt = _DELETE.DeleteRecordsTopic
    delete_request = _DELETE[2](
        topics=[dt(name="t", partitions=[dt.DeleteRecordsPartition(partition_index=p, offset=2) for p in range(1, _MANY)])],
        timeout_ms=1000,
    )  # fmt: skip
    with RawClient(server.port) as client:
        listed_offsets = client.call(list_request, 7)
        removed = client.call(delete_request, 2)
    first = listed_offsets.topics[0].partitions[0]
    assert (first.partition_index, first.error_code, first.offset) == (1, ErrorCode.NONE, 3)
    assert len(listed_offsets.topics[0].partitions) == _MANY - 1
    answered = removed.topics[0].partitions
    assert (answered[0].partition_index, answered[0].error_code, answered[0].low_watermark) == (1, 0, 2)
    assert {p.error_code for p in answered[1:]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert log.log_start_offset == 2
    assert listed and all(n.startswith("kafkalog-server-io-") for n in listed), listed
    assert deleted and all(n.startswith("kafkalog-server-io-") for n in deleted), deleted
