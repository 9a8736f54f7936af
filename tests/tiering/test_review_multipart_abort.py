"""Review of tiering (issue #25) against a real S3 server (SeaweedFS): a segment upload that fails or is
cancelled mid-way. A large segment's ``.log`` goes up as a multipart upload through obstore (parts of
``PUT_PART_SIZE``); an upload begun and never completed nor aborted is invisible to a listing of objects but
kept (and billed) by the server until it is aborted. obstore aborts the upload when the source of the parts
fails; these tests show it on the server's own record of pending uploads (its filer, see
``S3Server.pending_multipart_uploads``: S3's ListMultipartUploads needs a signed request obstore cannot make).

Before, closing the manager during a large upload did not cancel it: the close waited up to ``CLOSE_WAIT_S``
for the upload and, if the upload outlived that, left it running on a daemon thread, which the process exit
then cut (a pending upload nothing aborts)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import RemoteStorageError
from kafkalog.log.log import Log
from kafkalog.manager import LogManager
from kafkalog.objstore.store import PUT_PART_SIZE
from kafkalog.records import MemoryRecords, SimpleRecord
from s3_server import S3Server

from .tier_helpers import tier_props

pytest.importorskip("obstore")

#: Three and a half parts: the upload is a multipart one with parts on the server before the failure.
SEGMENT_BYTES = 3 * PUT_PART_SIZE + PUT_PART_SIZE // 2
#: Where the source fails: after two whole parts went up.
FAIL_AT = 2 * PUT_PART_SIZE + PUT_PART_SIZE // 4
VALUE = 256 * 1024


def _big_segment(mgr: LogManager) -> Log:
    (log,) = mgr.create_topic(
        "big", 1, {"remote.storage.enable": "true", "retention.ms": -1, "segment.bytes": 1 << 30}
    )
    value = bytes(range(256)) * (VALUE // 256)
    for i in range(SEGMENT_BYTES // VALUE // 3 + 1):
        log.append_as_leader(MemoryRecords.build([SimpleRecord(value, b"k%d" % i)] * 3), 0)
    log.roll()
    assert log.segments[0].size > SEGMENT_BYTES - VALUE
    return log


def _objects(server: S3Server, bucket: str) -> list[str]:
    return [o.key for o in server.open(f"s3://{bucket}").list("", delimiter=False).objects]


def _failing_source(monkeypatch: pytest.MonkeyPatch, at: int, then: Any, seen: dict[str, Any]) -> None:
    """The segment's chunks as usual until ``at`` bytes, then ``then()`` (which raises or waits)."""
    import kafkalog.tiered.writer as writer

    real = writer._source_chunks

    def source(segment: Any, size: int) -> Iterator[bytes]:
        sent = 0
        for chunk in real(segment, size):
            if sent >= at:
                then()
            sent += len(chunk)
            yield chunk

    monkeypatch.setattr(writer, "_source_chunks", source)


def test_an_upload_whose_source_fails_mid_way_leaves_no_object_and_no_pending_upload(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3_server.make_bucket("mpfail")
    props = tier_props(s3_server, bucket, **{"rsm.config.chunk.size": 1 << 20})
    seen: dict[str, Any] = {}

    def fail() -> None:
        seen["pending"] = s3_server.pending_multipart_uploads(bucket)  # parts are on the server now
        raise RemoteStorageError("cannot read the segment to copy it: Input/output error")

    with LogManager.open(tmp_path / "data", config=props) as mgr:
        log = _big_segment(mgr)
        with monkeypatch.context() as m:
            _failing_source(m, FAIL_AT, fail, seen)
            assert mgr.copy_remote_segments() == 0
        assert len(seen["pending"]) == 1, seen  # the failure came mid-way through a multipart upload
        assert mgr.remote_log_metrics("big", 0)["FailedRemoteCopyRequestsPerSec"] == 1
        assert s3_server.pending_multipart_uploads(bucket) == []  # aborted
        assert not [k for k in _objects(s3_server, bucket) if k.endswith(".log")]
        assert mgr.copy_remote_segments() == 1  # the next pass copies it (the failed one cleaned up first)
        assert log.highest_offset_in_remote_storage == log.segments[1].base_offset - 1
    assert s3_server.pending_multipart_uploads(bucket) == []
    assert len([k for k in _objects(s3_server, bucket) if k.endswith(".log")]) == 1


def test_closing_the_manager_cancels_an_upload_under_way_and_aborts_it(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3_server.make_bucket("mpcancel")
    props = tier_props(s3_server, bucket, **{"rsm.config.chunk.size": 1 << 20})
    seen: dict[str, Any] = {}
    mid = threading.Event()
    mgr = LogManager.open(tmp_path / "data", config=props)
    try:
        _big_segment(mgr)
        tier = mgr.remote_tier
        assert tier is not None
        rsm = tier.rlm.rsm

        def hold() -> None:  # the upload is slow: it is under way when the manager closes
            if not mid.is_set():
                seen["pending"] = s3_server.pending_multipart_uploads(bucket)
                mid.set()
            deadline = time.monotonic() + 10
            while not getattr(rsm, "copies_cancelled", False) and time.monotonic() < deadline:
                time.sleep(0.01)

        _failing_source(monkeypatch, FAIL_AT, hold, seen)
        copier = threading.Thread(target=mgr.copy_remote_segments, daemon=True)
        copier.start()
        assert mid.wait(60)
    finally:
        started = time.monotonic()
        mgr.close()
        took = time.monotonic() - started
    copier.join(60)
    assert len(seen["pending"]) == 1, seen
    assert s3_server.pending_multipart_uploads(bucket) == []  # aborted
    assert not [k for k in _objects(s3_server, bucket) if k.endswith(".log")]
    assert took < 10, f"close waited {took:.1f} s for the upload"
    monkeypatch.undo()
    with LogManager.open(tmp_path / "data", config=props) as mgr:  # the next start cleans up and copies
        assert mgr.copy_remote_segments() == 1
    assert s3_server.pending_multipart_uploads(bucket) == []
