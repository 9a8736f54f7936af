"""A deleted topic's ``-delete`` directories left for the next open (``file.delete.delay.ms`` had not passed)."""

from __future__ import annotations

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
