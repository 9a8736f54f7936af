"""Review of tiering (issue #25): a topic deleted with its remote data while the storage fails (or the process
dies) part way. Issue #25: "a crash at any point of a copy or a delete ... leaves no orphan after the next start".
The manager deletes a deleted topic's remote segments once, in the background, and on failure leaves the objects
"for an operator": nothing after a restart resumes the partition's deletion (Kafka's
DELETE_PARTITION_STARTED without DELETE_PARTITION_FINISHED), so the objects are orphaned for good."""

from __future__ import annotations

import time as wall
from pathlib import Path
from typing import Any

from kafkalog.errors import RemoteStorageError
from kafkalog.manager import LogManager
from kafkalog.objstore import open_store
from kafkalog.tiering import topic_id_partition
from kafkalog.time import MockTime

from .tier_helpers import TIERED_TOPIC, produce


def test_a_topic_deletion_cut_short_is_finished_after_a_restart(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    store = open_store(str(props["rsm.config.storage.url"]))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        assert store.list("", delimiter=False).objects
        tier = mgr.remote_tier
        assert tier is not None
        rsm: Any = tier.rlm.rsm

        def outage(*_: object) -> None:
            raise RemoteStorageError("connection refused")

        rsm.delete_log_segment_data = outage  # the storage fails while the topic's remote data is deleted
        mgr.delete_topic("t")
        assert mgr.remote_tier_idle(30)
    with LogManager.open(data, config=dict(props), time=time) as mgr:  # storage healthy again
        mgr.copy_remote_segments()
        mgr.expire_remote_segments()
        assert mgr.remote_tier_idle(30)
        left = [o.key for o in store.list("", delimiter=False).objects]
        assert left == [], f"{len(left)} orphan objects of the deleted topic, e.g. {left[:1]}"


def _objects(store: Any) -> list[str]:
    return [o.key for o in store.list("", delimiter=False).objects]


def test_a_topic_deletion_a_crash_cuts_before_it_ran_is_finished_at_the_next_open(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """The deletion is marked (DELETE_PARTITION_MARKED, durable) before the background job is submitted: a
    crash before the job ran leaves the mark, and the next open finishes the deletion; a topic recreated
    under the name meanwhile keeps its own remote data."""
    data = tmp_path / "data"
    time = MockTime(int(wall.time() * 1000))
    store = open_store(str(props["rsm.config.storage.url"]))
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        old = set(_objects(store))
        tier = mgr.remote_tier
        assert tier is not None
        jobs: list[object] = []
        tier._deleter.submit = jobs.append  # type: ignore[method-assign,assignment]  # the job never runs
        mgr.delete_topic("t")
        assert len(jobs) == 1
        (new,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        del tier._deleter.submit  # the instance's own again
        assert mgr.remote_tier_idle(30)
    assert set(_objects(store)) == old  # nothing deleted yet: the process "died" before the job ran
    with LogManager.open(data, config=dict(props), time=time) as mgr:
        new = mgr.get_log("t", 0)
        produce(new, 200)
        assert mgr.copy_remote_segments() > 0
        assert mgr.remote_tier_idle(30)
        left = set(_objects(store))
        assert not left & old, f"{len(left & old)} orphan objects of the deleted topic"
        assert left  # the new topic's copies stay
        assert next(iter(new.read(0, 1 << 20).records.records())).value == b"v0"


def test_a_deletion_cut_short_is_never_resumed_for_a_topic_still_recorded(
    tmp_path: Path, props: dict[str, Any]
) -> None:
    """A partition left DELETE_PARTITION_MARKED whose topic the log dirs still record (its only log dir left
    out of this open: the registry forgets a topic none of whose partitions is found) keeps its remote data."""
    a, b = tmp_path / "a", tmp_path / "b"
    time = MockTime(int(wall.time() * 1000))
    store = open_store(str(props["rsm.config.storage.url"]))
    with LogManager.open([a, b], config=dict(props), time=time) as mgr:
        (log,) = mgr.create_topic("t", 1, TIERED_TOPIC)
        produce(log, 200)
        assert mgr.copy_remote_segments() > 0
        tier = mgr.remote_tier
        assert tier is not None
        tier.rlm.mark_partition_deleted(topic_id_partition(log))  # a deletion marked, never run
        meta_dirs = {mgr.get_log("__remote_log_metadata", 0).dir.parent}
        topic_dir = log.dir.parent
    before = _objects(store)
    assert before
    assert topic_dir not in meta_dirs  # the new topic goes to the log dir with fewer partitions
    with LogManager.open([next(iter(meta_dirs))], config=dict(props), time=time) as mgr:
        assert mgr.remote_tier_idle(30)
        assert _objects(store) == before
