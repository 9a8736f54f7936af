"""The sink's crash suite (issue 20): SIGKILL of the whole driver session at random moments, then a restart.

A chain of driver sessions (``sink_crash_driver.py``) writes to one data directory: batch jobs and a streaming
query (the same checkpoint across restarts), concurrently. Each session but the last is killed after a random
delay — the driver's Python, the JVM and every pyspark worker (whatever process descends from the driver,
including the workers that run the sink's commit in process groups of their own): the whole tree is frozen
with SIGSTOP, collected again, then SIGKILLed, so nothing finishes a step after the "crash". Every kill
lands wherever both writers were: staging, planning, mid-commit, mid-append, cleanup, sweeping. The next
session is the restart. After each kill the test, as a reader, checks what readers may see (item 2): whole
jobs and whole micro-batches only, none twice. After the final session (no kill):

* every batch job started is in topic ``batch`` exactly once: ``ROWS_PER_JOB`` records, one contiguous
  offset range per partition (a batch write is all or nothing, and the driver re-runs a job that is not
  there: the restart of a user who sees the job did not complete);
* every record of every input file is in topic ``stream`` exactly once, each file's records (one
  micro-batch) contiguous per partition;
* no journal is pending or failed, and no staging is left: what killed sessions staged is removed by the
  sweeps of the final session's jobs (``stagingTtlMs`` 1 s there; 10 min in the killed sessions, which run
  a batch job and a micro-batch at once and must not sweep each other's live staging).

Every kill is a batch trial and a streaming trial. ``KAFKALOG_SINK_CRASH_KILLS`` sets the number of kills
(default 20: about 4-6 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from .conftest import SRC_DIR, _skip_reason
from .sink_crash_driver import read_topic

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DRIVER = Path(__file__).with_name("sink_crash_driver.py")
KILLS = int(os.environ.get("KAFKALOG_SINK_CRASH_KILLS", "20"))
ROWS_PER_JOB = 20_000
ROWS_PER_FILE = 3_000
#: Seconds after the session's first committed batch job and micro-batch before the kill: uniform in this range.
KILL_AFTER = (0.0, 6.0)
SESSION_START_TIMEOUT = 240.0


# --- killing a whole driver session --------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(root: int) -> set[int]:
    tree = _children()
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo += tree.get(pid, [])
    return found


def kill_session(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL the driver and every process descending from it (JVM, pyspark daemon and workers, whatever
    their process group); returns how many processes died."""
    frozen: set[int] = set()
    for _ in range(5):  # freeze until no new process appears (a stopped process forks nothing)
        pids = _descendants(proc.pid) - frozen
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        frozen |= pids
    groups = set()
    for pid in frozen:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for group in groups - {os.getpgid(0)}:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(os.path.exists(f"/proc/{pid}") and _state(pid) != "Z" for pid in frozen):
        assert time.monotonic() < deadline, "processes of the killed session survived"
        time.sleep(0.05)
    return len(frozen)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return "Z"
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


# --- one session ---------------------------------------------------------------------------------------------


def start_session(tmp: Path, final: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = SRC_DIR + os.pathsep + env.get("PYTHONPATH", "")
    args = [sys.executable, str(DRIVER), *(str(tmp / d) for d in ("data", "in", "ckpt", "state"))]
    args += [str(ROWS_PER_JOB), str(ROWS_PER_FILE)] + (["--final"] if final else [])
    log = open(tmp / "driver.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)


def wait_writing(proc: subprocess.Popen[bytes]) -> None:
    """Until the session has committed its first batch job and its first micro-batch (Spark and both writers
    are warm by then: the first Python data-source query of a session costs seconds, and a kill during it
    tests little)."""
    deadline = time.monotonic() + SESSION_START_TIMEOUT
    assert proc.stdout is not None
    events: set[str] = set()
    for line in proc.stdout:
        events.add(json.loads(line).get("event"))
        if {"batch", "stream"} <= events:
            return
        assert time.monotonic() < deadline, "the driver session did not start writing in time"
    raise AssertionError(f"the driver session exited ({proc.wait()}) before it wrote anything")


# --- what readers see, what the sink holds --------------------------------------------------------------------


def check_whole_and_once(records: dict[int, pa.Table], per_unit: int, what: str) -> set[int]:
    """That every value is ``<x>:<unit>:<i>`` (``unit`` the job or input file), none appears twice, and each
    unit has ``per_unit`` records in one contiguous offset range per partition (offsets in a partition are
    distinct, so a range is contiguous when its count is its span); the units."""
    if not records:
        return set()
    table = pa.concat_tables(
        t.append_column("partition", pa.array([p] * t.num_rows, pa.int32())) for p, t in records.items()
    )
    parts = pc.extract_regex(pc.cast(table["value"], pa.string()), r"^[^:]*:(?P<unit>\d+):(?P<i>\d+)$")
    assert parts.null_count == 0, f"{what}: values not of the form <x>:<unit>:<i>"
    unit = pc.struct_field(parts, "unit").cast(pa.int64())
    # (unit, i) as one integer: a value twice is a key twice, found next to itself once sorted
    key = np.sort(pc.add(pc.shift_left(unit, 32), pc.struct_field(parts, "i").cast(pa.int64())).to_numpy())
    dupes = np.unique(key[1:][key[1:] == key[:-1]]).tolist()
    assert not dupes, (
        f"{len(dupes)} {what} records appear twice, e.g. {[f'<x>:{k >> 32}:{k & 0xFFFFFFFF}' for k in dupes[:3]]}"
    )
    ranges = (
        pa.table({"unit": unit, "partition": table["partition"], "offset": table["offset"]})
        .group_by(["unit", "partition"])
        .aggregate([("offset", "min"), ("offset", "max"), ("offset", "count")])
        .to_pylist()
    )
    totals: Counter[int] = Counter()
    for r in ranges:
        totals[r["unit"]] += r["offset_count"]
        span = r["offset_max"] - r["offset_min"] + 1
        assert span == r["offset_count"], f"{what} {r['unit']} p{r['partition']} gaps"
    for u, total in totals.items():
        assert total == per_unit, f"{what} {u}: {total} of {per_unit} records"
    return set(totals)


def state_after_kill(data: Path) -> str:
    spark_dir = data / ".kafkalog-spark"
    journals = list((spark_dir / "journal").glob("*.json"))
    staging = spark_dir / "staging"
    if journals:
        return "mid-commit"
    if staging.is_dir() and any(staging.rglob("*.batches")):
        return "staged"
    return "idle"


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
@pytest.mark.timeout(180 * KILLS + 900)  # about 20 s a session on idle cores; 90 s on a machine 5x overloaded
def test_sigkill_of_the_whole_driver_session_at_random_points(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("KAFKALOG_SINK_CRASH_SEED", str(time.time_ns()))))
    phases: Counter[str] = Counter()
    killed = 0
    try:
        for _ in range(KILLS):
            began = time.monotonic()
            proc = start_session(tmp_path, final=False)
            try:
                wait_writing(proc)
                writing = time.monotonic()
                time.sleep(rng.uniform(*KILL_AFTER))
            finally:
                killed += kill_session(proc)
            print(
                f"session: writing after {writing - began:.1f} s, killed after {time.monotonic() - began:.1f} s"
            )
            data = tmp_path / "data"
            phases[state_after_kill(data)] += 1
            # what a reader sees right after the crash: whole jobs, whole micro-batches, nothing twice
            check_whole_and_once(read_topic(data, "batch", visible=True), ROWS_PER_JOB, "batch job")
            check_whole_and_once(read_topic(data, "stream", visible=True), ROWS_PER_FILE, "input file")
        proc = start_session(tmp_path, final=True)
        try:
            out, _ = proc.communicate(timeout=900)
        finally:
            if proc.poll() is None:  # never leave a session behind (a timeout, an interrupt)
                kill_session(proc)
        assert proc.returncode == 0, (tmp_path / "driver.log").read_text()[-4000:]
        done = json.loads(out.decode().strip().splitlines()[-1])
        assert done["event"] == "done"
    except BaseException:
        sys.stderr.write((tmp_path / "driver.log").read_text(errors="replace")[-6000:])
        raise
    print(f"\n{KILLS} kills ({killed} processes), state at the kill: {dict(phases)}")
    data = tmp_path / "data"
    from kafkalog.manager import LogManager

    with LogManager.open(data, background=False):  # nothing left to replay, nothing to recover
        pass
    jobs = check_whole_and_once(read_topic(data, "batch", visible=False), ROWS_PER_JOB, "batch job")
    assert jobs == set(range(done["jobs"]))
    files = check_whole_and_once(read_topic(data, "stream", visible=False), ROWS_PER_FILE, "input file")
    assert files == set(range(done["files"]))
    assert done["jobs"] >= 3 and done["files"] >= 3
    spark_dir = data / ".kafkalog-spark"
    assert not list((spark_dir / "journal").glob("**/*.json"))
    from kafkalog.spark.sink_layout import staging_root

    root = staging_root(data)  # the final session's sweeps removed what the killed sessions staged
    assert not root.exists() or not list(root.iterdir()), list(root.rglob("*"))
    assert phases["mid-commit"] + phases["staged"] > 0
