"""Faults the server fuzzer found below the server: a deleted topic's `-delete` directories (left for the next open,
holding descriptors) and offset checkpoints written from two threads at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kafkalog.manager import LogManager


def test_a_topic_deleted_and_created_again_reopens_and_the_old_dir_goes(tmp_path: Path) -> None:
    """Found by the server fuzzer: after DeleteTopics and CreateTopics of the same name, the next open tried
    to give the old ``-delete`` dir the new topic's id (InconsistentTopicIdError), reported a load failure
    and kept the dir forever."""
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as manager:
        manager.create_topic("a", 1)
        manager.produce("a", [(None, b"old")])
        manager.delete_topic("a")
        manager.create_topic("a", 1)
        manager.produce("a", [(None, b"new")])
    assert [p.name for p in data.iterdir() if p.name.endswith("-delete")]
    with LogManager.open(data, background=False, config={"log.segment.delete.delay.ms": 0}) as manager:
        assert manager.load_failures == []
        assert manager.get_log("a", 0).log_end_offset == 1
        manager.delete_logs()
    with LogManager.open(data, background=False) as manager:
        assert manager.load_failures == []
    assert not [p.name for p in data.iterdir() if p.name.endswith("-delete")]


def test_deleted_topics_do_not_keep_their_descriptors_for_the_delay(tmp_path: Path) -> None:
    """Found by the server fuzzer: a deleted partition kept its three descriptors open until its ``-delete``
    dir was removed (``file.delete.delay.ms``, 60 s), so a client creating and deleting topics ran the process
    towards EMFILE, which takes the log dir offline. The handles now close at the delete; the files go later."""
    data = tmp_path / "data"

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    with LogManager.open(data, background=False) as manager:
        manager.create_topic("warm", 1)
        base = fds()
        for _ in range(20):
            manager.create_topic("a", 3)
            for p in range(3):
                manager.produce("a", [(None, b"x")], partition=p)
                assert manager.get_log("a", p).read(0, 1000).records.size_in_bytes > 0
            manager.delete_topic("a")
        assert fds() - base < 10
        assert len([p for p in data.iterdir() if p.name.endswith("-delete")]) == 60
    with LogManager.open(data, background=False, config={"log.segment.delete.delay.ms": 0}) as manager:
        assert fds() < base + 10  # the -delete dirs found at open are not held open either
        manager.delete_logs()
        assert not [p for p in data.iterdir() if p.name.endswith("-delete")]


def test_checkpoints_written_from_two_threads_at_once_keep_the_dir_online(tmp_path: Path) -> None:
    """Found by the server fuzzer: the high-watermark checkpoint task and a topic deletion (a request) wrote
    ``replication-offset-checkpoint`` at once through the same ``.tmp`` file; one rename found it gone (ENOENT)
    and the whole log dir went offline."""
    data = tmp_path / "data"
    with LogManager.open(data, background=False) as manager:
        manager.create_topic("a", 4)
        failed = threading.Event()
        start = threading.Barrier(3)

        def writer() -> None:
            start.wait()
            for _ in range(150):
                if failed.is_set():
                    return
                manager.checkpoint_high_watermarks()
                if manager.offline_dirs:
                    failed.set()

        threads = [threading.Thread(target=writer) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert manager.offline_dirs == []
        manager.produce("a", [(None, b"still online")])
