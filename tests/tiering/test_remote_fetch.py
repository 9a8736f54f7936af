"""Remote reads for ``kafkalog serve``'s fetches (issue #25's open items, Kafka's ``RemoteLogManager`` and
``ReplicaManager``): the remote fetch quota (``remote.log.manager.fetch.max.bytes.per.second``: over it a
partition gets no remote data in that fetch, KIP-956, and ``remote-fetch-throttle-time`` records it), the
bounded remote reader pool (``remote.log.reader.threads`` / ``remote.log.reader.max.pending.tasks``: a full
queue is the partition's UNKNOWN_SERVER_ERROR at once, never a blocked I/O thread or a new thread), and
``remote.fetch.max.wait.ms`` (a remote read not done by then answers the partition empty).

Every store is ``memory://`` (no S3 server); clocks are injected and blocked reads are released by events."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest

from kafkalog.errors import RejectedExecutionError
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords
from kafkalog.server import ErrorCode, KafkaServer
from kafkalog.tiering import RemoteLogManager, RemoteStorageThreadPool
from kafkalog.tiering.reader_pool import READER_THREAD_PREFIX
from kafkalog.time import MockTime
from server.helpers import RawClient

from .tier_helpers import TIERED_TOPIC, open_tiered, produce

FT = FetchRequest.FetchTopic
N = 300


def _until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@contextmanager
def _tiered(tmp_path: Path, props: dict[str, Any], **extra: Any) -> Iterator[LogManager]:
    """A manager whose topic ``t`` (one partition, ``N`` records) is in the remote tier but for its active
    segment."""
    with open_tiered(tmp_path / "data", {**props, **extra}) as mgr:
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 0})
        produce(log, N)
        for _ in range(2):  # local retention rolls the active segment too; the next pass copies it
            mgr.copy_remote_segments()
            mgr.delete_old_segments()
        assert log.local_log_start_offset > N // 2
        yield mgr


def _rlm(mgr: LogManager) -> RemoteLogManager:
    assert mgr.remote_tier is not None
    return mgr.remote_tier.rlm


def _fetch(client: RawClient, offset: int, max_bytes: int = 4096) -> Any:
    part = FT.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)
    request = FetchRequest[12](
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[FT(topic="t", partitions=[part])],
        forgotten_topics_data=[],
        rack_id="",
    )
    return client.call(request, 12).responses[0].partitions[0]


def _offsets(records: bytes) -> list[int]:
    return [r.offset for b in MemoryRecords(records).batches() for r in b]


def _block_remote_reads(rlm: RemoteLogManager) -> tuple[threading.Event, threading.Event]:
    """Make every ranged read of a remote ``.log`` wait for the returned ``release`` event (``entered`` is set
    when one waits)."""
    entered, release = threading.Event(), threading.Event()
    original = rlm.rsm.fetch_log_segment

    def blocked(*args: Any, **kwargs: Any) -> bytes:
        entered.set()
        assert release.wait(60), "the test never released the remote read"
        return original(*args, **kwargs)

    rlm.rsm.fetch_log_segment = blocked  # type: ignore[method-assign]
    return entered, release


def _reader_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(READER_THREAD_PREFIX)]


def test_over_the_fetch_quota_a_partition_gets_no_remote_data_until_the_window_passes(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    quota = {
        "remote.log.manager.fetch.max.bytes.per.second": 500,
        "remote.log.manager.fetch.quota.window.num": 2,
        "remote.log.manager.fetch.quota.window.size.seconds": 1,
    }
    with _tiered(tmp_path, props, **quota) as mgr:
        rlm = _rlm(mgr)
        clock = MockTime()
        rlm.fetch_quota.time = clock  # the configured quota, on a clock the test moves
        rlm.fetch_throttle_time_sensor.time = clock
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            first = _fetch(client, 0)
            assert first.error_code == ErrorCode.NONE
            assert _offsets(first.records)[0] == 0
            assert len(first.records) > 500  # over 500 B/s in the 1 s the rate spans
            assert rlm.get_fetch_throttle_time_ms() > 0
            assert rlm.read_metrics()["remote-fetch-throttle-count"] == 0
            reads = rlm.meters()["RemoteFetchRequestsPerSec"].count

            throttled = _fetch(client, 0)  # KIP-956: no remote read, no data, no error
            assert throttled.error_code == ErrorCode.NONE
            assert bytes(throttled.records or b"") == b""
            assert throttled.log_start_offset == 0 and throttled.high_watermark == N
            assert rlm.meters()["RemoteFetchRequestsPerSec"].count == reads  # nothing was read
            metrics = rlm.read_metrics()
            assert metrics["remote-fetch-throttle-count"] == 1
            assert metrics["remote-fetch-throttle-time-max"] == rlm.get_fetch_throttle_time_ms() > 0

            prometheus_client = pytest.importorskip("prometheus_client")
            from kafkalog.metrics import register_prometheus, register_remote_prometheus

            for register, target in ((register_remote_prometheus, rlm), (register_prometheus, mgr)):
                registry = prometheus_client.CollectorRegistry()
                register(target, registry)  # type: ignore[operator]
                text = prometheus_client.generate_latest(registry).decode()
                assert "kafka_server_remotelogmanager_remote_fetch_throttle_count 1.0" in text
                max_ms = metrics["remote-fetch-throttle-time-max"]
                assert f"kafka_server_remotelogmanager_remote_fetch_throttle_time_max {max_ms}" in text
                assert "kafka_log_remote_remotestoragethreadpool_remotelogreadertaskqueuesize 0.0" in text
                assert "kafka_server_delayedremotefetchmetrics_expirespersec_count 0.0" in text

            clock.sleep(2_000)  # the two 1 s windows holding the read pass
            assert rlm.get_fetch_throttle_time_ms() == 0
            again = _fetch(client, 0)
            assert again.error_code == ErrorCode.NONE
            assert bytes(again.records) == bytes(first.records)


def test_a_full_reader_queue_is_the_partitions_error_at_once_and_starts_no_thread(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    pool = {
        "remote.log.reader.threads": 1,
        "remote.log.reader.max.pending.tasks": 1,
        "remote.fetch.max.wait.ms": 60_000,
    }
    with _tiered(tmp_path, props, **pool) as mgr:
        rlm = _rlm(mgr)
        produce(mgr.get_log("t", 0), 10, start=N)  # local records after the remote ones
        entered, release = _block_remote_reads(rlm)
        with KafkaServer(manager=mgr, port=0, config={"num.io.threads": 1}) as server:
            results: dict[str, Any] = {}

            def fetch_in_background(name: str) -> threading.Thread:
                def run() -> None:
                    with RawClient(server.port, timeout=60) as client:
                        results[name] = _fetch(client, 0)

                thread = threading.Thread(target=run, name=f"test-fetch-{name}")
                thread.start()
                return thread

            running = fetch_in_background("running")  # takes the only reader thread, blocked in storage
            assert entered.wait(30)
            queued = fetch_in_background("queued")  # waits in the only queue slot
            _until(lambda: rlm.read_metrics()["RemoteLogReaderTaskQueueSize"] == 1, "the queued read")
            try:
                with RawClient(server.port) as client:  # answered at once, with both reads still blocked
                    rejected = _fetch(client, 0)
                    assert rejected.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
                    assert not release.is_set()
                    # the only I/O thread is free: a local read run on it (8 MiB of limits) is served meanwhile
                    local = _fetch(client, N, max_bytes=8 << 20)
                    assert local.error_code == ErrorCode.NONE and _offsets(local.records)[0] == N
                assert _reader_threads() == [f"{READER_THREAD_PREFIX}0"]
                assert rlm.reader_pool.thread_count == 1
            finally:
                release.set()
                running.join(60)
                queued.join(60)
        for name in ("running", "queued"):  # the blocked reads complete once released
            assert results[name].error_code == ErrorCode.NONE, name
            assert _offsets(results[name].records)[0] == 0, name
    assert _reader_threads() == []  # closing the manager stopped the pool


def test_a_remote_read_longer_than_remote_fetch_max_wait_answers_the_partition_empty(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    with _tiered(tmp_path, props, **{"remote.fetch.max.wait.ms": 50}) as mgr:
        rlm = _rlm(mgr)
        entered, release = _block_remote_reads(rlm)
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            try:
                expired = _fetch(client, 0)  # answered while its read is still blocked in storage
                assert entered.is_set() and not release.is_set()
                assert expired.error_code == ErrorCode.NONE
                assert bytes(expired.records or b"") == b""
                assert expired.high_watermark == N
                assert rlm.read_metrics()["DelayedRemoteFetchExpiresPerSec"] == 1
            finally:
                release.set()
            _until(lambda: rlm.reader_pool.task_queue_size == 0, "the reader to finish")
            # the next fetch of the consumer gets the data (the read is not blocked any more)
            answered = _fetch(client, 0)
            assert answered.error_code == ErrorCode.NONE and _offsets(answered.records)[0] == 0


def test_the_reader_pool_never_grows_past_its_threads_and_refuses_past_its_queue() -> None:
    pool = RemoteStorageThreadPool(2, 3, name_prefix="test-reader-")
    release = threading.Event()
    started = threading.Semaphore(0)

    def work(i: int) -> int:
        started.release()
        assert release.wait(30)
        return i

    try:
        futures = [pool.submit(work, i) for i in range(5)]  # 2 running, 3 waiting
        for _ in range(2):
            assert started.acquire(timeout=30)
        assert pool.thread_count == 2 and pool.task_queue_size == 3
        with pytest.raises(RejectedExecutionError, match=re.escape("remote.log.reader.max.pending.tasks")):
            pool.submit(work, 5)
        assert futures[4].cancel()  # a waiting read can be cancelled (an expired remote fetch)
        release.set()
        assert [f.result(30) for f in futures[:4]] == [0, 1, 2, 3]
        assert futures[4].cancelled()
        assert len([t for t in threading.enumerate() if t.name.startswith("test-reader-")]) == 2
    finally:
        release.set()
        pool.shutdown(30)
    assert [t for t in threading.enumerate() if t.name.startswith("test-reader-")] == []
    with pytest.raises(RejectedExecutionError, match="shut down"):
        pool.submit(work, 6)


def test_a_real_client_consumes_everything_from_offset_zero_under_a_small_fetch_quota(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """librdkafka through ``serve`` with a quota of about a quarter of the remote bytes per second: throttled
    fetches come back empty and it asks again, slowly but to the end, in order."""
    confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    quota = {
        "remote.log.manager.fetch.max.bytes.per.second": 2000,
        "remote.log.manager.fetch.quota.window.num": 2,
        "remote.log.manager.fetch.quota.window.size.seconds": 1,
    }
    with _tiered(tmp_path, props, **quota) as mgr:
        rlm = _rlm(mgr)
        remote_bytes = rlm.gauges()["RemoteLogSizeBytes"]
        assert remote_bytes > 3 * 2000
        with KafkaServer(manager=mgr, port=0) as server:
            consumer = confluent_kafka.Consumer(
                {"bootstrap.servers": server.bootstrap, "group.id": "quota", "enable.auto.commit": False}
            )
            got: list[int] = []
            started = time.monotonic()
            try:
                consumer.assign([confluent_kafka.TopicPartition("t", 0, confluent_kafka.OFFSET_BEGINNING)])
                deadline = started + 120
                while len(got) < N and time.monotonic() < deadline:
                    msg = consumer.poll(1.0)
                    if msg is None:
                        continue
                    assert msg.error() is None, msg.error()
                    got.append(msg.offset())
            finally:
                consumer.close()
            elapsed = time.monotonic() - started
    assert got == list(range(N))
    metrics = rlm.read_metrics()
    assert metrics["remote-fetch-throttle-count"] >= 1
    # the quota held: beyond the first read and what the two 1 s windows forgive, 2000 B/s
    assert elapsed >= (remote_bytes - 1024) / 2000 - 2
    assert rlm.meters()["RemoteFetchBytesPerSec"].count >= remote_bytes


def test_a_fetch_of_remote_and_local_partitions_answers_each_in_request_order(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """The local partitions are read first, the remote one on the reader pool; the answers keep the request's
    order, and the remote partition's limit is reserved from the response's ``max_bytes`` (Kafka's
    ``readFromLog``) unless the fetch quota skips its read: then nothing is reserved."""
    quota = {"remote.log.manager.fetch.max.bytes.per.second": 10**9}
    with open_tiered(tmp_path / "data", {**props, **quota}) as mgr:
        remote_log, local_log = mgr.create_topic("t", 2, {**TIERED_TOPIC, "local.retention.bytes": 0})
        produce(remote_log, N)
        for _ in range(2):
            mgr.copy_remote_segments()
            mgr.delete_old_segments()
        produce(local_log, 200)  # several KiB, all local (its segments are not copied)
        assert remote_log.local_log_start_offset > 0 and local_log.local_log_start_offset == 0
        parts = [FT.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=4096) for p in (1, 0, 1)]
        request = FetchRequest[
            12
        ](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=5000,  # room for the local partition after the remote one's 4096 reserved: 904 bytes
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FT(topic="t", partitions=parts[:2])],
            forgotten_topics_data=[],
            rack_id="",
        )
        with KafkaServer(manager=mgr, port=0) as server, RawClient(server.port) as client:
            first, second = client.call(request, 12).responses[0].partitions
            assert (first.partition_index, second.partition_index) == (1, 0)
            assert first.error_code == second.error_code == ErrorCode.NONE
            assert _offsets(first.records)[0] == 0 and _offsets(second.records)[0] == 0
            assert len(first.records) + len(second.records) <= 5000
            request.topics = [
                FT(topic="t", partitions=parts[1:])
            ]  # remote first: the local one gets the rest
            remote_first, local_after = client.call(request, 12).responses[0].partitions
            assert (remote_first.partition_index, local_after.partition_index) == (0, 1)
            assert _offsets(remote_first.records)[0] == 0
            assert 0 < len(local_after.records) <= 5000 - 4096
            assert _rlm(mgr).meters()["RemoteFetchRequestsPerSec"].count >= 2
            _rlm(mgr).fetch_quota.record(10**11)  # far over the quota for the next 10 s
            throttled, local_whole = client.call(request, 12).responses[0].partitions
            assert throttled.error_code == ErrorCode.NONE and bytes(throttled.records or b"") == b""
            assert 5000 - 4096 < len(local_whole.records) <= 4096  # nothing reserved for the skipped read


def test_a_remote_list_offsets_lookup_runs_on_the_reader_pool_and_times_out_as_kafkas(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """A timestamp lookup of the remote tier is Kafka's ``asyncOffsetRead``: on a reader thread, never on the
    only I/O thread, and REQUEST_TIMED_OUT (retriable) once ``remote.list.offsets.request.timeout.ms`` passes."""
    from kafka.protocol.consumer import ListOffsetsRequest

    from .tier_helpers import TS0

    LT = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest[9](
        replica_id=-1,
        isolation_level=0,
        topics=[
            LT(
                name="t",
                partitions=[
                    LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=TS0 + 11)
                ],
            )
        ],
    )
    with _tiered(tmp_path, props, **{"remote.list.offsets.request.timeout.ms": 50}) as mgr:
        rlm = _rlm(mgr)
        produce(mgr.get_log("t", 0), 10, start=N)  # local records after the remote ones
        entered, release = _block_remote_reads(rlm)
        with (
            KafkaServer(manager=mgr, port=0, config={"num.io.threads": 1}) as server,
            RawClient(server.port) as client,
        ):
            try:
                timed_out = client.call(request, 9).topics[0].partitions[0]
                assert entered.is_set() and not release.is_set()  # answered while the lookup hangs
                assert (timed_out.error_code, timed_out.offset) == (ErrorCode.REQUEST_TIMED_OUT, -1)
                assert rlm.read_metrics()["DelayedRemoteListOffsetsExpiresPerSec"] == 1
                assert _reader_threads() == [f"{READER_THREAD_PREFIX}0"]
                local = _fetch(client, N, max_bytes=8 << 20)  # the only I/O thread is free meanwhile
                assert local.error_code == ErrorCode.NONE and _offsets(local.records)[0] == N
            finally:
                release.set()
            answers: list[Any] = []  # a client retries REQUEST_TIMED_OUT (a loaded machine may take 50 ms)
            _until(
                lambda: (
                    answers.append(client.call(request, 9).topics[0].partitions[0])
                    or answers[-1].error_code != ErrorCode.REQUEST_TIMED_OUT
                ),
                "a lookup within the timeout",
            )
            found = answers[-1]
            assert (found.error_code, found.timestamp, found.offset) == (ErrorCode.NONE, TS0 + 11, 11)


def test_shutdown_answers_a_fetch_waiting_on_a_remote_read_at_once(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """A graceful stop ends the wait for a hung remote read (``remote.fetch.max.wait.ms`` of a minute here): the
    fetch is answered (empty) instead of being cut with its connection after ``shutdown.grace.ms``."""
    with _tiered(tmp_path, props, **{"remote.fetch.max.wait.ms": 60_000}) as mgr:
        rlm = _rlm(mgr)
        entered, release = _block_remote_reads(rlm)
        server = KafkaServer(manager=mgr, port=0).start()  # shutdown.grace.ms: 5 s
        answers: list[Any] = []
        try:
            with RawClient(server.port, timeout=60) as client:
                thread = threading.Thread(target=lambda: answers.append(_fetch(client, 0)))
                thread.start()
                assert entered.wait(30)
                server.stop()  # the fetch is answered at once, not cut after the grace period
                thread.join(60)
            assert not release.is_set()
        finally:
            release.set()
            server.stop()
    assert len(answers) == 1
    assert answers[0].error_code == ErrorCode.NONE and bytes(answers[0].records or b"") == b""


def test_a_reader_thread_that_cannot_start_refuses_the_read_and_is_not_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = RemoteStorageThreadPool(2, 1, name_prefix="test-nostart-")

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refuse)
        with pytest.raises(RejectedExecutionError, match="cannot start a remote log reader thread"):
            pool.submit(lambda: 1)
    assert pool.thread_count == 0
    try:
        assert pool.submit(lambda: 2).result(30) == 2  # once threads start again, the pool works
        assert pool.thread_count == 1
    finally:
        pool.shutdown(30)
