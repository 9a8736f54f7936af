"""A storage outage (issue 25): the S3 server is stopped while the background copy task uploads, the log keeps
appending locally, local retention keeps every segment not yet copied, the log dir never goes offline; once
the server is back the copy task resumes by itself (it cleans up the copy the outage cut short) and nothing
is lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from bench.seaweed import find_weed, restartable_server

from .tier_helpers import open_tiered, produce, read_all, tier_props

TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": 64 * 1024,
    "index.interval.bytes": 4096,
    "retention.ms": -1,
    "local.retention.bytes": 64 * 1024,
}
#: The appender's pause between its 50-record batches (about 25,000 records a second at most).
APPEND_PAUSE_S = 0.002


def _until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_an_outage_mid_copy_pauses_copying_and_loses_nothing(tmp_path: Path) -> None:
    if find_weed() is None:
        pytest.skip("no weed binary")
    with restartable_server() as rs:
        bucket = rs.server.make_bucket("outage")
        props = tier_props(
            rs.server,
            bucket,
            **{
                "remote.log.manager.task.interval.ms": 200,
                "rsm.config.chunk.size": 16 * 1024,
                "rsm.config.storage.fs.s3a.attempts.maximum": 0,
            },
        )
        with open_tiered(tmp_path / "data", props) as mgr:
            (log,) = mgr.create_topic("t", 1, TOPIC)
            tier = mgr.remote_tier
            assert tier is not None
            stop_now = threading.Event()
            appended = [0]

            def appender() -> None:
                # a batch every APPEND_PAUSE_S at most: segments roll several times a second, and the data to
                # copy and read back at the end stays near a hundred thousand records (flat out, a slow
                # outage or restart let it reach millions, read back for most of a minute)
                while not stop_now.is_set():
                    produce(log, 50, start=appended[0], per_batch=50)
                    appended[0] += 50
                    stop_now.wait(APPEND_PAUSE_S)

            writer = threading.Thread(target=appender)
            writer.start()
            try:
                _until(lambda: tier.metrics()["RemoteCopyRequestsPerSec"] >= 2, 60, "a first copy")
                rs.stop()  # mid-copy: the task is uploading the next segments
                failed_before = tier.metrics()["FailedRemoteCopyRequestsPerSec"]
                _until(
                    lambda: tier.metrics()["FailedRemoteCopyRequestsPerSec"] > failed_before,
                    60,
                    "a failed copy pass",
                )
                highest = log.highest_offset_in_remote_storage
                during = appended[0]
                _until(lambda: appended[0] > during + 500, 60, "appends during the outage")
                assert not mgr.offline_dirs
                mgr.delete_old_segments()
                # local retention never deletes what is not copied
                assert log.local_log_start_offset <= highest + 1
                assert log.highest_offset_in_remote_storage == highest
                rs.start()
                _until(
                    lambda: log.highest_offset_in_remote_storage > highest + 1000,
                    120,
                    "copying resumed after the outage",
                )
            finally:
                stop_now.set()
                writer.join()
            assert not mgr.offline_dirs
            mgr.copy_remote_segments()
            mgr.delete_old_segments()
            assert log.local_log_start_offset > highest + 1
            rows = read_all(log)
            assert [o for o, _ in rows] == list(range(appended[0]))
            assert all(v == b"v%d" % o for o, v in rows)
