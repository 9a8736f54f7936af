"""A crash at every step of a copy pass and an expiration pass: before and after each metadata publish and
before each object write or delete. The files as the crash left them (a copy of the data directory, the bucket as
it was) restart into a tier where the next passes succeed, nothing is orphaned, and every offset from the log
start offset the crashed log had reads back its value (no hole: a remote segment is deleted only after the log
start offset passed it)."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from kafkalog.log import FetchIsolation, Log
from kafkalog.remote import RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState
from kafkalog.tiering import TopicBasedRemoteLogMetadataManager
from kafkalog.time import MockTime

from .test_rlm import CrashAt, FlakyStore, Tier, _append, open_tier

S = RemoteLogSegmentState
#: Local retention keeps only the active segment once the others are copied.
LOCAL: dict[str, object] = {"local.retention.bytes": 1}


class Points:
    """Counts the steps of a run and crashes at step ``at`` (None: never)."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.seen = 0

    def step(self, what: str) -> None:
        if self.seen == self.at:
            raise CrashAt(what)
        self.seen += 1


class CrashingStore(FlakyStore):
    points: Points | None = None

    def put(self, key: str, data: bytes) -> None:
        if self.points is not None:
            self.points.step(f"put {key}")
        super().put(key, data)

    def delete(self, key: str) -> None:
        if self.points is not None:
            self.points.step(f"delete {key}")
        super().delete(key)


class CrashingRlmm(TopicBasedRemoteLogMetadataManager):
    points: Points | None = None

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        if self.points is not None:
            self.points.step("before add")
        super().add_remote_log_segment_metadata(metadata)
        if self.points is not None:
            self.points.step("after add")

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        if self.points is not None:
            self.points.step(f"before {update.state.name}")
        super().update_remote_log_segment_metadata(update)
        if self.points is not None:
            self.points.step(f"after {update.state.name}")


def _scenario(tier: Tier) -> None:
    _append(tier.log, 25, start=60)
    tier.rlm.copy_once(tier.log)
    tier.log.delete_old_segments()  # local retention: the remote tier serves what it holds
    tier.log.update_config({"retention.bytes": 2500})
    tier.rlm.expire_once(tier.log)


def _check_no_hole(log: Log, hw: int, values: dict[int, bytes], point: int) -> None:
    """Every offset from the log start offset to ``hw`` reads back its value."""
    offset = log.log_start_offset
    while offset < hw:
        info = log.read(offset, 400, FetchIsolation.HIGH_WATERMARK)
        records = [r for batch in info.records.batches() for r in batch if r.offset >= offset]
        assert records, (point, offset)
        for r in records:
            assert r.value == values[r.offset], (point, r.offset)
        offset = records[-1].offset + 1


def test_every_crash_point_of_copy_and_expiry_recovers(tmp_path: Path) -> None:
    # the baseline: 60 records, all rolled segments copied
    time = MockTime()
    store = CrashingStore()
    base = open_tier(tmp_path / "base", store, time, LOCAL)
    _append(base.log, 60)
    assert base.rlm.copy_once(base.log) > 0
    base.log.delete_old_segments()
    assert base.log.local_log_start_offset > 0
    base.close()
    baseline_objects = {o.key: store.get(o.key) for o in store.list("", delimiter=False).objects}
    values = {i: b"value-%04d" % i for i in range(85)}

    point = 0
    crashes = 0
    while True:
        run_dir = tmp_path / f"run-{point}"
        shutil.copytree(tmp_path / "base", run_dir)
        bucket = CrashingStore()
        for key, data in baseline_objects.items():
            bucket.put(key, data)
        points = Points(point)
        bucket.points = points
        tier = open_tier(run_dir, bucket, time, LOCAL, rlmm_class=CrashingRlmm)
        rlmm = tier.rlm.rlmm
        assert isinstance(rlmm, CrashingRlmm)
        rlmm.points = points
        try:
            _scenario(tier)
            crashed = False
        except CrashAt:
            crashed = True
        served_from = tier.log.log_start_offset
        hw = tier.log.high_watermark
        bucket.points = None
        rlmm.points = None
        if not crashed:
            tier.close()
            break
        crashes += 1
        # the files as the crash left them (the logs are still open; no clean shutdown)
        shutil.copytree(run_dir, tmp_path / f"after-{point}")
        tier.close()
        for marker in (tmp_path / f"after-{point}").rglob(".kafka_cleanshutdown"):
            marker.unlink()
        # reopened with the log start offset the crashed log had (what the manager's checkpoint keeps at best)
        restarted = open_tier(
            tmp_path / f"after-{point}",
            bucket,
            time,
            {**LOCAL, "retention.bytes": 2500},
            log_start_offset=served_from,
        )
        try:
            log = restarted.log
            assert log.log_end_offset >= hw
            _check_no_hole(log, hw, values, point)  # as restarted, before any pass
            restarted.rlm.copy_once(log)
            restarted.rlm.expire_once(log)
            segs = sorted(restarted.segments(), key=lambda m: m.start_offset)
            assert all(m.state is S.COPY_SEGMENT_FINISHED for m in segs), point
            assert set(bucket.keys()) == restarted.objects_of_finished(), point
            for a, b in itertools.pairwise(segs):
                assert b.start_offset == a.end_offset + 1, point
            if segs:
                assert segs[-1].end_offset + 1 >= log.local_log_start_offset, point
            _check_no_hole(log, hw, values, point)
        finally:
            restarted.close()
        point += 1
    # copy: 7 steps a segment (add, 3 puts, FINISHED, each publish before and after); expiry: 7 a segment
    assert crashes >= 20, crashes
