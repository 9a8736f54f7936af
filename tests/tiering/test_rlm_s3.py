"""The RemoteLogManager against a real S3 server (SeaweedFS): copy after roll, reads through the Log below its
local log start offset byte-identical to what was local, expiry emptying the bucket, and an outage in the
middle of a copy pass (the server stopped, then restarted on the same data) that copying survives."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.log import FetchIsolation, Log
from kafkalog.objstore import ObjectStore
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.remote import RemoteLogSegmentMetadata, RemoteLogSegmentState
from kafkalog.tiering import (
    AivenRemoteStorageManager,
    LogSegmentData,
    RemoteLogManager,
    RemoteLogManagerConfig,
    RsmConfig,
    TopicBasedRemoteLogMetadataManager,
)
from kafkalog.tiering.rlm import topic_id_partition
from kafkalog.time import MockTime
from s3_server import S3Server

from .conftest import SMALL, TOPIC_ID, MetadataLogs

pytest.importorskip("obstore")

#: Fail fast while the server is down: one attempt, short timeouts.
FAST_FAIL = {
    "storage.attempts.maximum": "1",
    "storage.retry.timeout": "2s",
    "storage.connection.establish.timeout": "2s",
    "storage.connection.timeout": "5s",
}


def _open(
    data_dir: Path, rsm: AivenRemoteStorageManager, time: MockTime, **config: Any
) -> tuple[Log, MetadataLogs, RemoteLogManager]:
    meta = MetadataLogs(data_dir)
    log = Log.open(
        data_dir / "orders-0",
        {**SMALL, "remote.storage.enable": "true", "retention.ms": -1, **config},
        time=time,
        topic_id=TOPIC_ID,
        remote_storage_system_enable=True,
    )
    log.hw_follows_leo = True
    rlm = RemoteLogManager(
        rsm, TopicBasedRemoteLogMetadataManager(meta, 2), RemoteLogManagerConfig(broker_id=1), time
    )
    rlm.start_partition(log)
    log.set_remote_log_reader(rlm.reader_for(log))
    return log, meta, rlm


def _append(log: Log, start: int, n: int, ts: int) -> None:
    for i in range(start, start + n):
        log.append([SimpleRecord(b"v%05d" % i * 3, b"k%d" % (i % 7), ts + i)])


def _read_all(log: Log, start: int, end: int) -> bytes:
    out = b""
    offset = start
    while offset < end:
        data = bytes(log.read(offset, 4096, FetchIsolation.HIGH_WATERMARK).records.buffer)
        batches = list(MemoryRecords(data).batches())
        assert batches, offset
        out += data
        offset = batches[-1].last_offset + 1
    return out


def _keys(store: ObjectStore) -> set[str]:
    return {o.key for o in store.list("", delimiter=False).objects}


def _expected_keys(rsm: AivenRemoteStorageManager, segs: list[RemoteLogSegmentMetadata]) -> set[str]:
    return {rsm.segment_key(m) + s for m in segs for s in (".log", ".indexes", ".rsm-manifest")}


def test_tiered_log_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    time = MockTime()
    bucket = s3_server.make_bucket("tiering")
    store = s3_server.open(f"s3://{bucket}/kafkalog")
    rsm = AivenRemoteStorageManager(
        store, RsmConfig(key_prefix="tiered/", chunk_size=700, compression_enabled=True)
    )
    log, meta, rlm = _open(tmp_path / "data", rsm, time, **{"local.retention.bytes": 1})
    try:
        _append(log, 0, 150, time.milliseconds())
        everything = _read_all(log, 0, log.log_end_offset)
        copied = rlm.copy_once(log)
        assert copied == log.num_log_segments - 1
        segs = list(rlm.rlmm.list_remote_log_segments(topic_id_partition(log)))
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segs)
        assert _keys(store) == _expected_keys(rsm, segs)
        # local retention deletes every copied segment; reads fall through to S3
        log.delete_old_segments()
        assert log.num_log_segments == 1
        assert log.log_start_offset == 0 < log.local_log_start_offset
        store.stats.reset()
        assert _read_all(log, 0, log.log_end_offset) == everything
        assert store.stats.get_requests > 0
        found = log.fetch_offset_by_timestamp(time.milliseconds() + 20)
        assert found is not None and found.offset == 20

        # total retention: everything older than retention.ms goes from the bucket, then the log start moves
        log.update_config({"retention.ms": 1_000})
        time.sleep(5_000 + 150)
        assert rlm.expire_once(log) == copied
        assert _keys(store) == set()
        assert log.log_start_offset == log.local_log_start_offset
    finally:
        log.close()
        meta.close()


@pytest.fixture
def own_server(s3_server: S3Server, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A SeaweedFS server of this test alone, which it may stop and restart on the same data and ports (it
    asks for the session's server only for its availability rules: skip, or fail under KAFKALOG_REQUIRE_ALL)."""
    import os
    import secrets
    import tempfile

    from bench.seaweed import _start, _stop, _wait_ready, find_weed

    weed = find_weed()
    assert weed is not None  # the s3_server fixture found it
    root = tempfile.mkdtemp(prefix="kafkalog-s3-")
    key, secret = "KLT" + secrets.token_hex(8).upper(), secrets.token_urlsafe(24)
    proc, endpoint, log = _start(weed, root, key, secret)
    server = S3Server(endpoint, key, secret, data_dir=root)
    state: dict[str, Any] = {"proc": proc, "server": server}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}

    def stop() -> None:
        _stop(state["proc"])

    def restart() -> None:
        with open(log, "ab") as out:
            state["proc"] = subprocess.Popen(
                proc.args, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True
            )
        _wait_ready(state["proc"], server, log)

    try:
        _wait_ready(proc, server, log)
        state.update(stop=stop, restart=restart)
        yield state
    finally:
        _stop(state["proc"])
        import shutil

        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_outage_mid_copy_pass_then_resume(own_server: dict[str, Any], tmp_path: Path) -> None:
    server: S3Server = own_server["server"]
    bucket = server.make_bucket("outage")
    store = server.open(f"s3://{bucket}", **FAST_FAIL)
    time = MockTime()

    class StopsTheServer(AivenRemoteStorageManager):
        """Stops the server after the first copy of the pass (the next upload meets a dead endpoint)."""

        copies = 0

        def copy_log_segment_data(
            self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
        ) -> bytes | None:
            out = super().copy_log_segment_data(metadata, segment_data)
            type(self).copies += 1
            if type(self).copies == 1:
                own_server["stop"]()
            return out

    rsm = StopsTheServer(store, RsmConfig(chunk_size=1024))
    log, meta, rlm = _open(tmp_path / "data", rsm, time)
    try:
        _append(log, 0, 120, time.milliseconds())
        rolled = log.num_log_segments - 1
        assert rolled >= 3
        assert rlm.copy_once(log) == 1  # the second segment's upload fails: the pass stops, nothing raised
        assert rlm.metrics()["FailedRemoteCopyRequestsPerSec"] == 1
        _append(log, 120, 40, time.milliseconds())  # the log keeps appending
        assert rlm.copy_once(log) == 0  # still down
        assert not log.local_log.offline
        own_server["restart"]()
        # the scheduler's next passes: a pass may still meet a connection of the old process and fail; within
        # a few passes every rolled segment is copied
        copied = 0
        for _ in range(10):
            copied += rlm.copy_once(log)
            if copied == log.num_log_segments - 1 - 1:
                break
        assert copied == log.num_log_segments - 1 - 1
        segs = sorted(
            rlm.rlmm.list_remote_log_segments(topic_id_partition(log)), key=lambda m: m.start_offset
        )
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segs)
        assert [m.end_offset for m in segs] == [s.base_offset - 1 for s in log.segments[1:]]
        assert _keys(store) == _expected_keys(rsm, segs)  # the failed attempt left nothing behind
        reader = rlm.reader_for(log)
        end = segs[-1].end_offset + 1
        out = b""
        offset = 0
        while offset < end:
            info = reader.read(offset, 1 << 20, log.high_watermark, True, False)
            assert info is not None
            data = bytes(info.records.buffer)
            out += data
            offset = list(MemoryRecords(data).batches())[-1].last_offset + 1
        assert out == _read_all(log, 0, end)
    finally:
        log.close()
        meta.close()
