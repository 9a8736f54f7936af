"""Random roll / append / copy / local deletion / expiry / restart sequences against a model: every offset from
the log start offset to the high watermark reads back its value through the Log (local or remote tier), the
remote segments are contiguous FINISHED copies in offset order, and the bucket holds exactly their objects."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.log.helpers import append_end_txn_marker, append_transactional

from kafkalog.log import FetchIsolation, Log
from kafkalog.objstore.store import MemoryStore
from kafkalog.readonly import iter_committed
from kafkalog.records import ControlRecordType, SimpleRecord
from kafkalog.remote import RemoteLogSegmentState
from kafkalog.tiering import (
    AivenRemoteStorageManager,
    RemoteLogManager,
    RemoteLogManagerConfig,
    RsmConfig,
    TopicBasedRemoteLogMetadataManager,
)
from kafkalog.tiering.rlm import topic_id_partition
from kafkalog.time import MockTime

from .conftest import TOPIC_ID, MetadataLogs

CONFIG = {
    "segment.bytes": 600,
    "index.interval.bytes": 100,
    "remote.storage.enable": "true",
    "retention.ms": -1,
    "local.retention.bytes": 1,
}

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 25), st.booleans()),
        st.tuples(st.just("txn"), st.integers(1, 6), st.booleans()),
        st.tuples(st.just("copy")),
        st.tuples(st.just("local-retention")),
        st.tuples(st.just("expire-bytes"), st.integers(1, 4000)),
        st.tuples(st.just("delete-records"), st.integers(0, 100)),
        st.tuples(st.just("restart")),
    ),
    min_size=1,
    max_size=25,
)


class Node:
    def __init__(self, data_dir: Path, store: MemoryStore, time: MockTime) -> None:
        self.data_dir = data_dir
        self.store = store
        self.time = time
        self.rsm = AivenRemoteStorageManager(store, RsmConfig(chunk_size=256, compression_enabled=True))
        self.open(log_start=0)

    def open(self, log_start: int) -> None:
        self.meta = MetadataLogs(self.data_dir)
        self.log = Log.open(
            self.data_dir / "t-0",
            CONFIG,
            log_start_offset=log_start,
            time=self.time,
            topic_id=TOPIC_ID,
            remote_storage_system_enable=True,
        )
        self.log.hw_follows_leo = True
        self.rlm = RemoteLogManager(
            self.rsm, TopicBasedRemoteLogMetadataManager(self.meta, 2), RemoteLogManagerConfig(), self.time
        )
        self.rlm.start_partition(self.log)
        self.log.set_remote_log_reader(self.rlm.reader_for(self.log))

    def close(self) -> int:
        start = self.log.log_start_offset  # what the manager's log-start-offset checkpoint keeps
        self.log.close()
        self.meta.close()
        return start


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_tiered_log_matches_the_model(operations: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(url="memory://model")
        node = Node(Path(tmp), store, MockTime())
        values: dict[int, bytes] = {}
        aborted: set[int] = set()
        epoch = 0
        time = node.time
        try:
            for op in operations:
                log = node.log
                if op[0] == "append":
                    _, n, bump = op
                    epoch += int(bool(bump))
                    for _ in range(int(n)):  # type: ignore[call-overload]
                        value = b"value-%06d" % len(values)
                        info = log.append(
                            [SimpleRecord(value, None, 1_000 + len(values))], leader_epoch=epoch
                        )
                        values[info.first_offset] = value
                elif op[0] == "txn":  # a transaction of n records, aborted or committed
                    _, n, abort = op
                    pid = 7000 + len(values)
                    first = log.log_end_offset
                    append_transactional(log, pid, 0, time, leader_epoch=epoch)(int(n))  # type: ignore[call-overload]
                    for offset in range(first, log.log_end_offset):
                        values[offset] = str(offset - first).encode()
                        if abort:
                            aborted.add(offset)
                    control = ControlRecordType.ABORT if abort else ControlRecordType.COMMIT
                    append_end_txn_marker(log, pid, 0, control, time.milliseconds(), leader_epoch=epoch)
                elif op[0] == "copy":
                    node.rlm.copy_once(log)
                elif op[0] == "local-retention":
                    log.delete_old_segments()
                elif op[0] == "expire-bytes":
                    log.update_config({"retention.bytes": int(op[1])})  # type: ignore[call-overload]
                    node.rlm.expire_once(log)
                    log.update_config({"retention.bytes": -1})
                elif op[0] == "delete-records":
                    target = min(log.log_start_offset + int(op[1]), log.high_watermark)  # type: ignore[call-overload]
                    log.maybe_increment_log_start_offset(target, "client delete records")
                    node.rlm.expire_once(log)
                else:
                    node.open(node.close())
                _check(node, values, aborted)
        finally:
            node.close()


def _check(node: Node, values: dict[int, bytes], aborted: set[int]) -> None:
    log = node.log
    tip = topic_id_partition(log)
    segs = sorted(node.rlm.rlmm.list_remote_log_segments(tip), key=lambda m: m.start_offset)
    assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segs)
    for a, b in itertools.pairwise(segs):
        assert b.start_offset == a.end_offset + 1
    if segs:
        assert log.highest_offset_in_remote_storage == segs[-1].end_offset
        assert segs[-1].end_offset >= log.local_log_start_offset - 1  # no gap between the tiers
    keys = {o.key for o in node.store.list("", delimiter=False).objects}
    assert keys == {node.rsm.segment_key(m) + s for m in segs for s in (".log", ".indexes", ".rsm-manifest")}
    offset = log.log_start_offset
    while offset < log.high_watermark:
        info = log.read(offset, 300, FetchIsolation.HIGH_WATERMARK)
        batches = list(info.records.batches())
        assert batches, offset
        for batch in batches:
            if batch.is_control_batch:
                continue
            for r in batch:
                if r.offset >= offset:
                    assert r.value == values[r.offset]
        offset = batches[-1].last_offset + 1
    # read_committed through both tiers: every committed data record, none of an aborted transaction
    start = log.log_start_offset
    committed = [r.offset for r in iter_committed(log, start, log.last_stable_offset)]
    assert committed == [
        o for o in sorted(values) if start <= o < log.last_stable_offset and o not in aborted
    ]
