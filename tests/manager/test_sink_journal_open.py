"""LogManager.open replays the Spark sink's pending commit journals (kafkalog.manager.sink_journal): what a
replay that fails does to the open (issue 22: no silent swallow; issue 20's quarantine is the replay's own)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import KafkaError
from kafkalog.manager import LogManager, sink_journal
from kafkalog.manager.sink_journal import journal_dir, replay_pending


def _journal(data: Path, job: str, doc: dict[str, Any]) -> Path:
    jdir = journal_dir(data)
    jdir.mkdir(parents=True, exist_ok=True)
    path = jdir / f"{job}.json"
    path.write_text(json.dumps(doc))
    return path


def _empty_job(job: str) -> dict[str, Any]:
    return {"version": 1, "job_id": job, "created_ms": 0, "sink": None, "cleanup": [], "partitions": []}


def test_a_bug_in_the_replay_fails_the_open_and_releases_the_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    LogManager.open(tmp_path, background=False).close()
    path = _journal(tmp_path, "j1", _empty_job("j1"))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(sink_journal, "apply_journal", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        LogManager.open(tmp_path, background=False)
    assert path.exists()  # nothing was decided about the journal
    monkeypatch.undo()
    with LogManager.open(tmp_path, background=False):  # the dirs were released; the replay completes now
        assert not path.exists()


def test_a_malformed_journal_is_a_typed_error_logged_at_open_and_raised_by_the_next_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    LogManager.open(tmp_path, background=False).close()
    path = _journal(tmp_path, "j2", {"version": 1, "job_id": "j2", "created_ms": 0})  # no "partitions"
    with caplog.at_level(logging.ERROR), LogManager.open(tmp_path, background=False) as mgr:
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert any("malformed commit journal" in m and "its journal stays pending" in m for m in errors)
        assert path.exists()  # pending: readers keep bounding its partitions, the next commit retries it
        with pytest.raises(KafkaError, match="malformed commit journal"):
            replay_pending(mgr)
    assert path.exists()
