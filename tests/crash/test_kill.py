"""SIGKILL a writer at random moments, hundreds of times, and check every reopen.

One directory per scenario is reused across rounds: a writer (forked by :mod:`crash.writer`'s fork server)
opens the log — recovering whatever the previous round left — and appends until it is killed after a random
delay (sometimes during its own open, sometimes mid-append, mid-roll or mid-flush). The test then reopens the
log itself, unclean, from the last recovery point the writer reported, and checks:

* the reopen succeeds;
* the log is a prefix of what was appended: every offset from 0 to the log end is there once, every record's
  value is the one the writer derived from its offset;
* nothing acknowledged is lost (a SIGKILL loses no written byte: the page cache survives the process), and
  certainly nothing the writer reported as flushed;
* producer state and leader epochs survived: an idempotent writer's sequence equals its offset, so a wrong
  rebuild makes the next writer's first append fail; transactional writers continue the transaction the
  rebuilt state says is open;
* after a clean close, the full verification of :mod:`crash.verify` passes.

Half of the clean closes leave a clean-shutdown marker, so the next writer loads without recovery and deletes
the marker at once (KAFKA-10471): a kill during that load makes the next open unclean.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crash.faults import fast_tmp_dir
from crash.verify import assert_valid_partition_dir
from crash.writer import IDEMPOTENT_PID, TXN_PIDS, expected_value
from kafkalog.log import Log, LogConfig
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE, write_clean_shutdown

WRITER = Path(__file__).with_name("writer.py")
#: Kills per scenario in the regular run (4 scenarios: 240 kills); the slow test does 400 per scenario.
KILLS_PER_SCENARIO = 60


@dataclass
class Round:
    """What one writer said before it died."""

    exit_code: int
    opened_at: int | None = None
    acked: list[int] = field(default_factory=list)
    flushed: list[int] = field(default_factory=list)
    error: str | None = None


class ForkServer:
    """Drives ``writer.py --serve`` (see its module doc)."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buf = b""
        assert self._line(60.0) == "R"

    def _line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with selectors.DefaultSelector() as sel:  # epoll: no FD_SETSIZE limit, unlike select()
                sel.register(self._fd, selectors.EVENT_READ)
                ready = sel.select(left)
            if ready:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    raise AssertionError(f"fork server died (exit {self.proc.wait(10)}):\n{self.stderr()}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode()

    def run(self, job: dict[str, Any], kill_after: float) -> Round:
        """Start a writer, kill it after ``kill_after`` seconds, return what it reported."""
        self._in.write((json.dumps(job) + "\n").encode())
        self._in.flush()
        lines: list[str] = []
        deadline = time.monotonic() + kill_after
        while True:
            line = self._line(max(0.0, deadline - time.monotonic()))
            if line is None:
                break
            lines.append(line)
            if line.startswith("E "):
                break
        self._in.write(b"kill\n")
        self._in.flush()
        while True:
            line = self._line(30.0)
            assert line is not None, "writer did not die within 30 s of SIGKILL"
            if line.startswith("X "):
                result = Round(int(line.split()[1]))
                break
            lines.append(line)
        for line in lines:
            kind, _, rest = line.partition(" ")
            if kind == "O":
                result.opened_at = int(rest)
            elif kind == "A":
                result.acked.append(int(rest))
            elif kind == "F":
                result.flushed.append(int(rest))
            elif kind == "E":
                result.error = rest.replace("\\n", "\n")
        return result

    def stderr(self) -> str:
        """The server's (and its writers') stderr so far, last 4 KiB."""
        self._stderr.seek(0)
        return self._stderr.read()[-4096:].decode(errors="replace")

    def close(self) -> None:
        try:
            self._in.write(b"quit\n")
            self._in.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer]:
    server = ForkServer()
    yield server
    server.close()


@dataclass(frozen=True)
class Scenario:
    mode: str
    flush_every: int
    config: dict[str, Any]
    #: "tmpfs" (fast: fsync is free, so more kills land mid-append) or "disk" (kills land in slow fsyncs).
    storage: str = "tmpfs"
    max_log_end: int = 1500

    @property
    def id(self) -> str:
        pre = "-prealloc" if self.config.get("preallocate") else ""
        return f"{self.mode}-flush{self.flush_every}{pre}-{self.storage}"


@pytest.fixture
def scenario_dir(tmp_path: Path, scenario: Scenario) -> Iterator[Path]:
    """A directory on tmpfs (``/dev/shm``) when the scenario asks for it and one is available."""
    if scenario.storage == "tmpfs":
        with fast_tmp_dir(tmp_path) as directory:
            yield directory
    else:
        yield tmp_path


_SMALL = {"segment.bytes": 4096, "index.interval.bytes": 256, "segment.index.bytes": 1024}
SCENARIOS = [
    Scenario("plain", 0, _SMALL),
    Scenario("plain", 5, _SMALL, storage="disk"),
    Scenario("idempotent", 3, {**_SMALL, "preallocate": True}),
    Scenario("txn", 4, _SMALL),
]


def check_reopened(log: Log, scenario: Scenario, must_have: int, context: str) -> None:
    """The checks of the module doc on a freshly reopened log."""
    end = log.log_end_offset
    assert end >= must_have, f"{context}: log end {end} lost acknowledged/flushed offsets below {must_have}"
    seen = []
    for segment in log.segments:  # the open log's view: a preallocated file's zero tail is not part of it
        for batch in segment.batches():
            if batch.is_control_batch:
                continue
            for record in batch.records():
                assert record.value == expected_value(record.offset), (
                    f"{context}: offset {record.offset} holds {record.value!r}"
                )
                seen.append(record.offset)
    if scenario.mode != "txn":
        assert seen == list(range(end)), f"{context}: offsets are not 0..{end - 1}"
    else:
        assert seen == sorted(set(seen)) and (not seen or seen[-1] < end)
        markers = {b.base_offset for s in log.segments for b in s.batches() if b.is_control_batch}
        assert sorted(set(seen) | markers) == list(range(end)), f"{context}: offsets are not 0..{end - 1}"
    if scenario.mode == "idempotent" and end > 0:
        entry = log.producer_state.last_entry(IDEMPOTENT_PID)
        assert entry is not None and entry.last_seq == end - 1, f"{context}: producer state {entry}"
        assert entry.last_data_offset == end - 1
    if scenario.mode == "txn":
        for pid in TXN_PIDS:
            entry = log.producer_state.last_entry(pid)
            if entry is None:
                continue
            data = [b for s in log.segments for b in s.batches() if b.producer_id == pid]
            last_data = [b for b in data if not b.is_control_batch]
            if last_data:
                assert entry.last_seq == last_data[-1].last_sequence, f"{context}: producer {pid} {entry}"
            is_open = bool(data) and not data[-1].is_control_batch
            assert (entry.current_txn_first_offset is not None) == is_open, (
                f"{context}: producer {pid} {entry}"
            )


def kill_rounds(
    server: ForkServer,
    base_dir: Path,
    scenario: Scenario,
    rounds: int,
    seed: int,
    max_delay: float,
    caplog: pytest.LogCaptureFixture | None = None,
) -> dict[str, int]:
    """Run ``rounds`` kill rounds of ``scenario``; returns counters. ``caplog`` is cleared after each round:
    pytest keeps a test's log records until it ends, and a recovery warning's exception argument holds its
    traceback, whose frames hold the reopened log's files (hundreds of rounds ran the process out of
    descriptors)."""
    rng = random.Random(seed)
    config = LogConfig.from_props(scenario.config)
    generation = 0
    directory = base_dir / f"crash{generation}-0"
    recovery_point = 0
    known_end = 0
    stats = {"kills": 0, "killed_during_open": 0, "appends": 0, "flushes": 0, "clean_markers": 0, "resets": 0}
    for i in range(rounds):
        pick = rng.random()
        if pick < 0.1:
            delay = 0.0
        elif pick < 0.35:
            delay = rng.uniform(0.0, 0.03)  # around the writer's own open (recovery)
        else:
            delay = rng.uniform(0.0, max_delay)
        job = {
            "dir": str(directory),
            "config": scenario.config,
            "recovery_point": recovery_point,
            "mode": scenario.mode,
            "flush_every": scenario.flush_every,
            "seed": seed * 100_000 + i,
            "leader_epoch": i,
        }
        marker_before = (directory / CLEAN_SHUTDOWN_FILE).exists()
        result = server.run(job, delay)
        context = f"{scenario.id} round {i} (delay {delay * 1000:.1f} ms, marker {marker_before})"
        assert result.error is None, f"{context}: writer failed:\n{result.error}"
        assert result.exit_code == -9, f"{context}: writer exited with {result.exit_code}"
        stats["kills"] += 1
        if result.opened_at is None:
            stats["killed_during_open"] += 1
        if result.opened_at is not None or not marker_before:
            assert not (directory / CLEAN_SHUTDOWN_FILE).exists(), f"{context}: marker left behind"
        stats["appends"] += len(result.acked)
        stats["flushes"] += len(result.flushed)
        if result.flushed:
            recovery_point = max(result.flushed)
        must_have = max([known_end, recovery_point, *result.acked])
        log = Log.open(directory, config, recovery_point=recovery_point, last_shutdown_clean=None)
        try:
            check_reopened(log, scenario, must_have, context)
            known_end = log.log_end_offset
        finally:
            log.close()
            del log
            if caplog is not None:
                caplog.clear()
        assert_valid_partition_dir(directory)
        recovery_point = known_end
        if rng.random() < 0.5:
            write_clean_shutdown(directory)
            stats["clean_markers"] += 1
        if known_end > scenario.max_log_end:
            shutil.rmtree(directory)
            generation += 1
            directory = base_dir / f"crash{generation}-0"
            recovery_point = known_end = 0
            stats["resets"] += 1
    return stats


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_sigkill_rounds(
    fork_server: ForkServer, scenario_dir: Path, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    started = time.monotonic()
    stats = kill_rounds(
        fork_server,
        scenario_dir,
        scenario,
        rounds=KILLS_PER_SCENARIO,
        seed=SCENARIOS.index(scenario) + 1,
        max_delay=0.15,
        caplog=caplog,
    )
    assert stats["kills"] == KILLS_PER_SCENARIO
    print(f"{scenario.id}: {stats} in {time.monotonic() - started:.1f} s")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_sigkill_rounds_long(
    fork_server: ForkServer, scenario_dir: Path, scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    stats = kill_rounds(
        fork_server,
        scenario_dir,
        scenario,
        rounds=400,
        seed=1000 + SCENARIOS.index(scenario),
        max_delay=0.3,
        caplog=caplog,
    )
    assert stats["kills"] == 400
