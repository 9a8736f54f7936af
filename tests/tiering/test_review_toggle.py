"""Review of tiering (issue #25): ``remote.storage.enable`` turned off (``remote.log.delete.on.disable=true``) and
on again before the background deletion of the remote data ran. The deletion then stopped the partition the
re-enable had just started: the manager still counted it as started, so no copy pass ever ran for it again (the
local disk grows without bound) and its reads below the local log start failed."""

from __future__ import annotations

import threading
import time as wall
from pathlib import Path
from typing import Any

from kafkalog.manager import LogManager
from kafkalog.time import MockTime

from .tier_helpers import TIERED_TOPIC, produce, read_all


def test_tiering_turned_off_and_on_again_keeps_copying(tmp_path: Path, props: dict[str, Any]) -> None:
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 100)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        gate = threading.Event()
        tier._deleter.submit(gate.wait, 30)  # the deleter is busy (another topic's deletion, say)
        mgr.alter_topic_config(
            "t", {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
        )
        mgr.alter_topic_config("t", {"remote.storage.enable": "true", "remote.log.delete.on.disable": None})
        gate.set()
        assert mgr.remote_tier_idle(30)
        produce(log, 100, start=100)
        assert mgr.copy_remote_segments() > 0
        log.update_config({"local.retention.bytes": 1})
        mgr.delete_old_segments()
        start = log.log_start_offset
        assert read_all(log, start) == [(i, b"v%d" % i) for i in range(start, 200)]


def test_tiering_turned_off_and_on_again_never_deletes_what_was_not_copied_again(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """No race needed: turning tiering off deletes the remote data but the log keeps its highest offset in
    remote storage (it never lowers); turned on again, local retention deletes the local segments at or below
    it, which now exist nowhere else."""
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 100)
        assert mgr.copy_remote_segments() > 0
        mgr.alter_topic_config(
            "t", {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
        )
        assert mgr.remote_tier_idle(30)  # the remote data is deleted
        mgr.alter_topic_config("t", {"remote.storage.enable": "true", "remote.log.delete.on.disable": None})
        expected = read_all(log, log.log_start_offset)
        log.update_config({"local.retention.bytes": 1})
        mgr.delete_old_segments()  # before any copy pass ran again
        assert read_all(log, expected[0][0]) == expected


def test_a_topic_recreated_under_its_name_keeps_its_remote_data(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """A topic deleted and created again under the same name before the old one's remote deletion ran: the
    deletion stopped the partition by its name, so it took the new topic's state and deleted its segments."""
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 100)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        gate = threading.Event()
        tier._deleter.submit(gate.wait, 30)  # the deleter is busy
        mgr.delete_topic("t")
        (log,) = mgr.create_topic("t", 1, {**TIERED_TOPIC, "local.retention.bytes": 1})
        produce(log, 100)
        mgr.copy_remote_segments()
        gate.set()
        assert mgr.remote_tier_idle(30)
        mgr.copy_remote_segments()
        mgr.delete_old_segments()
        assert log.local_log_start_offset > 0
        assert read_all(log, 0) == [(i, b"v%d" % i) for i in range(100)]


def test_tiering_turned_on_again_after_a_failed_deletion_never_deletes_what_is_not_remote(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """The deletion of the remote data (tiering turned off) failed part way: a segment stays
    DELETE_SEGMENT_STARTED (its manifest already deleted), the rest FINISHED. Turned on again, the highest remote
    offset is restored from the epoch states (which count the half-deleted segment), the start's cleanup deletes
    that segment, and local retention deletes the local copy of its range: those offsets exist nowhere."""
    from kafkalog.errors import RemoteStorageError

    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 100)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        rsm: Any = tier.rlm.rsm
        real_delete = rsm.delete_log_segment_data
        calls = 0

        def failing_second(md: Any) -> None:
            nonlocal calls
            calls += 1
            if calls == 2:
                raise RemoteStorageError("connection refused")
            real_delete(md)

        rsm.delete_log_segment_data = failing_second
        mgr.alter_topic_config(
            "t", {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
        )
        assert mgr.remote_tier_idle(30)
        rsm.delete_log_segment_data = real_delete
        mgr.alter_topic_config("t", {"remote.storage.enable": "true", "remote.log.delete.on.disable": None})
        expected = read_all(log, log.log_start_offset)
        log.update_config({"local.retention.bytes": 1})
        mgr.delete_old_segments()
        assert read_all(log, expected[0][0]) == expected
