"""Partition limits and whole-or-nothing topic creation in the LogManager (issue 19, item 1).

``max.partitions.per.request`` and ``max.partitions`` (and the file descriptors a new partition keeps open)
refuse new partitions with PolicyViolationError before anything is created; a creation that fails half
way leaves neither directories nor a registry entry behind; a stored count that the directories do not back
is corrected on open instead of driving allocation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kafkalog.datadir import TOPICS_FILE
from kafkalog.errors import KafkaStorageError, PolicyViolationError
from kafkalog.log import MockScheduler
from kafkalog.log.config import ManagerConfig
from kafkalog.manager import LogManager
from kafkalog.time import MockTime

REPO = Path(__file__).resolve().parents[2]


def open_manager(path: Path, **config: Any) -> LogManager:
    time = MockTime(1_700_000_000_000)
    return LogManager.open(path, scheduler=MockScheduler(time), time=time, config=config or None)


def partition_dirs(path: Path, topic: str) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.is_dir() and p.name.rpartition("-")[0] == topic)


def test_limits_are_kafka_named_configs_with_defaults() -> None:
    config = ManagerConfig.from_props({"max.partitions": "50", "max.partitions.per.request": 7})
    assert (config.max_partitions, config.max_partitions_per_request) == (50, 7)
    assert (ManagerConfig().max_partitions, ManagerConfig().max_partitions_per_request) == (10_000, 1_000)


def test_partition_limits_refuse_before_anything_is_created(tmp_path: Path) -> None:
    with open_manager(tmp_path, **{"max.partitions": 8, "max.partitions.per.request": 5}) as mgr:
        before = (tmp_path / TOPICS_FILE).read_bytes()
        with pytest.raises(PolicyViolationError, match=re.escape("max.partitions.per.request is 5")):
            mgr.create_topic("big", 2**31 - 1)
        with pytest.raises(PolicyViolationError, match=re.escape("max.partitions.per.request")):
            mgr.create_topic("big", 6)
        assert partition_dirs(tmp_path, "big") == [] and mgr.topics() == []
        assert (tmp_path / TOPICS_FILE).read_bytes() == before
        mgr.create_topic("a", 5)
        with pytest.raises(
            PolicyViolationError, match=re.escape("holds 5 partitions and max.partitions is 8")
        ):
            mgr.create_topic("b", 4)
        with pytest.raises(PolicyViolationError, match=re.escape("max.partitions is 8")):
            mgr.add_partitions("a", 9)
        with pytest.raises(PolicyViolationError, match=re.escape("max.partitions")):
            mgr.get_or_create_log("c", 3)  # would create partitions 0-3
        assert mgr.topics() == ["a"] and mgr.num_partitions("a") == 5
        assert partition_dirs(tmp_path, "b") == [] and partition_dirs(tmp_path, "c") == []
        mgr.add_partitions("a", 8)
        assert partition_dirs(tmp_path, "a") == [f"a-{p}" for p in range(8)]
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["a"]["partitions"] == 8


def test_get_or_create_log_creates_every_partition_it_registers(tmp_path: Path) -> None:
    with open_manager(tmp_path) as mgr:
        mgr.get_or_create_log("auto", 3)
        mgr.get_or_create_log("auto", 5)
        # the registry never records partitions that do not exist
        assert partition_dirs(tmp_path, "auto") == [f"auto-{p}" for p in range(6)]
        assert mgr.num_partitions("auto") == 6


def _fail_open_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    import kafkalog.manager.log_manager as manager_module

    real_open = manager_module.Log.open
    count = {"n": 0}

    def open_or_fail(*args: Any, **kwargs: Any) -> Any:
        count["n"] += 1
        if count["n"] > calls:
            raise OSError(24, "Too many open files")
        return real_open(*args, **kwargs)

    monkeypatch.setattr(manager_module.Log, "open", open_or_fail)


def test_a_creation_failing_half_way_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_manager(tmp_path) as mgr:
        mgr.create_topic("kept", 2)
        before = (tmp_path / TOPICS_FILE).read_bytes()
        with monkeypatch.context() as patch:
            _fail_open_after(patch, 3)
            with pytest.raises(KafkaStorageError, match="Too many open files"):
                mgr.create_topic("half", 6)
        assert partition_dirs(tmp_path, "half") == []
        assert mgr.topics() == ["kept"] and (tmp_path / TOPICS_FILE).read_bytes() == before
        with monkeypatch.context() as patch:
            _fail_open_after(patch, 2)
            with pytest.raises(KafkaStorageError):
                mgr.add_partitions("kept", 6)
        assert partition_dirs(tmp_path, "kept") == ["kept-0", "kept-1"]
        assert mgr.num_partitions("kept") == 2 and (tmp_path / TOPICS_FILE).read_bytes() == before
        assert mgr.offline_dirs == []
        mgr.create_topic("half", 3)  # nothing was left in the way
        mgr.add_partitions("kept", 3)
    with open_manager(tmp_path) as mgr:
        assert (mgr.num_partitions("half"), mgr.num_partitions("kept")) == (3, 3)


_LOW_NOFILE = textwrap.dedent(
    """
    import json, os, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    from kafkalog.manager import LogManager
    data = Path(sys.argv[1])
    outcome = "created"
    with LogManager.open(data, background=False) as mgr:
        try:
            mgr.create_topic("t", 100)  # 300 descriptors, 256 allowed
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        offline = [str(p) for p in mgr.offline_dirs]
    topics = json.loads((data / "kafkalog-topics.json").read_text())["topics"]
    dirs = sorted(p.name for p in data.iterdir() if p.name.startswith("t-"))
    print(json.dumps({"outcome": outcome, "registered": "t" in topics, "dirs": dirs, "offline": offline}))
    """
)


def test_descriptors_a_topic_needs_are_checked_against_rlimit_nofile(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _LOW_NOFILE, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["outcome"].startswith("PolicyViolationError"), result
    assert "RLIMIT_NOFILE" in result["outcome"] and "300 file descriptors" in result["outcome"]
    assert result == {**result, "registered": False, "dirs": [], "offline": []}


def test_a_stored_count_the_directories_do_not_back_is_corrected_on_open(tmp_path: Path) -> None:
    with open_manager(tmp_path) as mgr:
        mgr.create_topic("t", 3)
        mgr.create_topic("gone", 2)
    doc = json.loads((tmp_path / TOPICS_FILE).read_text())
    doc["topics"]["t"]["partitions"] = 2**31 - 1  # what CreateTopics(2**31-1) left before the limits
    doc["topics"]["ghost"] = {"partitions": 400, "config": {}}  # registered, never created
    (tmp_path / TOPICS_FILE).write_text(json.dumps(doc))
    for p in range(2):  # a deletion cut short by a crash: the directories went, the entry stayed
        (tmp_path / f"gone-{p}").rename(tmp_path / f"gone-{p}.0123456789abcdef0123456789abcdef-delete")
    with open_manager(tmp_path) as mgr:
        assert mgr.topics() == ["t"]
        assert mgr.partitions("t") == [0, 1, 2]
        mgr.create_topic("ghost", 1)  # the name is free again
    stored = json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]
    assert stored["t"]["partitions"] == 3 and stored["ghost"]["partitions"] == 1 and "gone" not in stored


def test_a_partition_directory_numbered_past_max_partitions_is_left_alone(tmp_path: Path) -> None:
    with open_manager(tmp_path) as mgr:
        mgr.create_topic("t", 1)
    (tmp_path / "t-2000000000").mkdir()  # a damaged or hostile name: the count would be two billion
    with open_manager(tmp_path) as mgr:
        assert mgr.num_partitions("t") == 1 and mgr.partitions("t") == [0]
        assert [p.name for p in mgr.ignored_dirs] == ["t-2000000000"]
    assert (tmp_path / "t-2000000000").is_dir()
    assert json.loads((tmp_path / TOPICS_FILE).read_text())["topics"]["t"]["partitions"] == 1
