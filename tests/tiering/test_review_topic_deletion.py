"""Review of tiering (issue #25): a topic deleted with its remote data while the storage fails (or the process
dies) part way. Issue #25: "a crash at any point of a copy or a delete ... leaves no orphan after the next start".
The manager deletes a deleted topic's remote segments once, in the background, and on failure leaves the objects
"for an operator": nothing after a restart resumes the partition's deletion (Kafka's
DELETE_PARTITION_STARTED without DELETE_PARTITION_FINISHED), so the objects are orphaned for good."""

from __future__ import annotations

import time as wall
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import RemoteStorageError
from kafkalog.manager import LogManager
from kafkalog.objstore import open_store
from kafkalog.objstore.open import forget_memory_store
from kafkalog.time import MockTime

from .tier_helpers import TIERED_TOPIC, produce


@pytest.fixture
def props(tmp_path: Path) -> Iterator[dict[str, Any]]:
    name = f"review-del-{tmp_path.name}"
    yield {
        "remote.log.storage.system.enable": "true",
        "remote.log.manager.task.interval.ms": 3_600_000,
        "remote.log.metadata.topic.num.partitions": 1,
        "rsm.config.storage.url": f"memory://{name}",
        "rsm.config.chunk.size": 4096,
    }
    forget_memory_store(name)


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
