"""Review of tiering (issue #25): the deletion of a partition's remote data when its tiering is turned off
(``remote.storage.enable=false`` with ``remote.log.delete.on.disable=true``) fails part way (storage down).
It stayed marked (DELETE_PARTITION_MARKED) but was finished only if tiering was turned on again: the next
open resumed marked deletions of deleted topics only, nothing retried it in the process, and with the broker
gate turned off afterwards nothing even said it was pending. The remote objects were orphaned for good."""

from __future__ import annotations

import logging
import time as wall
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import RemoteStorageError
from kafkalog.manager import LogManager
from kafkalog.objstore import open_store
from kafkalog.time import MockTime

from .tier_helpers import TIERED_TOPIC, produce

OFF = {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}


def _objects(props: dict[str, Any]) -> list[str]:
    return [o.key for o in open_store(str(props["rsm.config.storage.url"])).list("", delimiter=False).objects]


def _outage(*_: object) -> None:
    raise RemoteStorageError("connection refused")


def _turn_off_during_outage(data: Path, props: dict[str, Any], time: MockTime) -> list[str]:
    """A tiered topic whose tiering is turned off while the storage refuses deletes; its objects."""
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        rsm: Any = tier.rlm.rsm
        rsm.delete_log_segment_data = _outage
        mgr.alter_topic_config("t", OFF)
        assert mgr.remote_tier_idle(30)
    left = _objects(props)
    assert left  # nothing could be deleted
    return left


def test_a_deletion_of_tiering_turned_off_cut_short_is_finished_at_the_next_open(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    _turn_off_during_outage(data, props, time)
    with LogManager.open(data, config=dict(props), time=time) as mgr:  # storage healthy again
        assert mgr.remote_tier_idle(30)
        left = _objects(props)
        assert left == [], f"{len(left)} orphan objects of a topic whose tiering was turned off"
        tier = mgr.remote_tier
        assert tier is not None
        assert tier.rlm.rlmm.partitions_pending_deletion() == []  # DELETE_PARTITION_FINISHED
        assert mgr.get_log("t", 0).log_end_offset == 200  # the local log is untouched


def test_a_failed_deletion_of_tiering_turned_off_is_retried_by_the_expiration_pass(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        rsm: Any = tier.rlm.rsm
        rsm.delete_log_segment_data = _outage
        mgr.alter_topic_config("t", OFF)
        assert mgr.remote_tier_idle(30)
        assert _objects(props)
        del rsm.delete_log_segment_data  # the storage answers again
        mgr.expire_remote_segments()  # what kafka-remote-log-expiration runs (no log tiers any more)
        assert mgr.remote_tier_idle(30)
        assert _objects(props) == []
        assert tier.rlm.rlmm.partitions_pending_deletion() == []


def test_a_deletion_cut_short_is_finished_with_the_broker_gate_off_when_the_storage_is_configured(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """Tiering turned off, the deletion cut short, then the broker gate turned off too (the storage settings
    still given): the open finishes the deletion."""
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    _turn_off_during_outage(data, props, time)
    gate_off = {**props, "remote.log.storage.system.enable": "false"}
    with LogManager.open(data, config=gate_off, time=time) as mgr:
        assert mgr.remote_tier_idle(30)
        assert _objects(props) == []
        assert mgr.get_log("t", 0).log_end_offset == 200


def test_without_a_storage_the_mark_is_kept_with_a_warning(
    tmp_path: Path, props: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    left = _turn_off_during_outage(data, props, time)
    bare = {"remote.log.storage.system.enable": "false"}  # neither the gate nor a storage
    with (
        caplog.at_level(logging.WARNING, logger="kafkalog.manager"),
        LogManager.open(data, config=bare, time=time) as mgr,
    ):
        assert mgr.remote_tier is None
    warned = [r.getMessage() for r in caplog.records if "marked for deletion" in r.getMessage()]
    assert len(warned) == 1 and "t-0" in warned[0] and "rsm.config.storage.url" in warned[0], warned
    assert _objects(props) == left  # nothing deleted, the mark kept
    with LogManager.open(data, config=dict(props), time=time) as mgr:  # configured again: finished
        assert mgr.remote_tier_idle(30)
        assert _objects(props) == []


def test_with_the_gate_off_the_metadata_topic_of_the_tier_opened_for_deletions_stays(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """The tier opened for the deletions alone keeps its record: deleting ``__remote_log_metadata`` would
    forget what is left to delete."""
    from kafkalog.errors import PolicyViolationError

    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    _turn_off_during_outage(data, props, time)
    gate_off = {**props, "remote.log.storage.system.enable": "false"}
    with LogManager.open(data, config=gate_off, time=time) as mgr:
        tier = mgr.remote_tier
        assert tier is not None
        with pytest.raises(
            PolicyViolationError, match="open to finish the deletions of remote data it records"
        ):
            mgr.delete_topic("__remote_log_metadata")


def test_with_the_gate_off_a_broken_storage_setting_never_fails_the_open(
    tmp_path: Path, props: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    left = _turn_off_during_outage(data, props, time)
    broken = {**props, "remote.log.storage.system.enable": "false", "rsm.config.storage.url": "nosuch://x"}
    with (
        caplog.at_level(logging.WARNING, logger="kafkalog.manager"),
        LogManager.open(data, config=broken, time=time) as mgr,
    ):
        assert mgr.remote_tier is None
        assert mgr.get_log("t", 0).log_end_offset == 200
    assert any("marks are kept" in r.getMessage() for r in caplog.records)
    assert _objects(props) == left


def test_a_failed_deletion_of_a_deleted_topic_is_retried_by_the_expiration_pass(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    time = MockTime(int(wall.time() * 1000))
    with LogManager.open(tmp_path / "data", config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        rsm: Any = tier.rlm.rsm
        rsm.delete_log_segment_data = _outage
        mgr.delete_topic("t")
        assert mgr.remote_tier_idle(30)
        assert _objects(props)
        del rsm.delete_log_segment_data
        mgr.expire_remote_segments()
        assert mgr.remote_tier_idle(30)
        assert _objects(props) == []
