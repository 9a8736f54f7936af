"""The child process of the tiering SIGKILL suite: opens a tiered LogManager and appends, copies, applies local
retention, moves the log start offset and expires remote segments, in a random order, until it is killed.

Every record's value is ``v<offset>``, so the parent can check what it reads without knowing how many appends
happened. One line per event on stdout, each written with one ``os.write`` (whole lines survive the kill)::

    O <log end offset>              the manager is open (after recovery and the remote tier's cleanup)
    A <log end offset>              an append returned: every offset below it is acknowledged
    C <highest remote offset>       a copy pass returned
    L <local log start offset>      a local retention pass returned
    S <log start offset>            the log start offset moved (DeleteRecords)
    X <log start offset>            an expiration pass returned
    E <message>                     an error (then exit status 1)

Usage: ``python tests/tiering/tier_child.py JOB.json`` (a file, mode 0600: the storage credentials stay out of
the process list) with ``data``, ``props`` (broker settings, Kafka's names), ``topic`` (overrides), ``seed``.

``python tests/tiering/tier_child.py --zygote`` is the same child for many trials, started once (the imports
and the numba kernels cost a second or more per process, longer than many of the kill delays): it imports
kafkalog, appends to a scratch log in a temporary directory (so every kernel an append runs is compiled or
loaded from the cache), writes ``R <pid>``, then serves one trial at a time, read from stdin:

* ``<JOB.json>`` forks a trial process that runs :func:`main` on that job (its events on the shared stdout)
  and writes ``P <pid>``;
* ``K`` SIGKILLs the running trial process (if it is still alive);
* when the trial process is gone (killed, or exited by itself) its status is written as ``D <wait status>``
  after every line it wrote (it is reaped first), so the parent reads a trial's events up to ``D``.

The zygote never opens an object store (no runtime thread exists when it forks); each trial process opens its
own, as a freshly started process does. End of stdin ends the zygote.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import sys
import tempfile
import traceback
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(_ROOT / "src")]

from kafkalog.manager import LogManager  # noqa: E402
from kafkalog.records import MemoryRecords, SimpleRecord  # noqa: E402

TOPIC = "t"


def emit(kind: str, value: object) -> None:
    os.write(1, f"{kind} {value}\n".encode())


def main(job: dict[str, object]) -> int:
    rng = random.Random(int(str(job["seed"])))
    props = dict(job["props"])  # type: ignore[call-overload]
    topic = dict(job["topic"])  # type: ignore[call-overload]
    try:
        mgr = LogManager.open(Path(str(job["data"])), config=props, background=False)
        log = mgr.get_or_create_log(TOPIC, 0, topic)
        emit("O", log.log_end_offset)
        while True:
            end = log.log_end_offset
            n = rng.randint(1, 8)
            records = [SimpleRecord(b"v%d" % (end + i), b"k", 1_700_000_000_000 + end + i) for i in range(n)]
            log.append_as_leader(MemoryRecords.build(records), 0)
            emit("A", log.log_end_offset)
            r = rng.random()
            if r < 0.25:
                mgr.copy_remote_segments()
                emit("C", log.highest_offset_in_remote_storage)
            elif r < 0.35:
                mgr.delete_old_segments()
                emit("L", log.local_log_start_offset)
            elif r < 0.40:
                log.maybe_increment_log_start_offset(log.log_end_offset // 3, "client delete records")
                emit("S", log.log_start_offset)
            elif r < 0.50:
                mgr.expire_remote_segments()
                emit("X", log.log_start_offset)
    except Exception:
        emit("E", traceback.format_exc().replace("\n", " | "))
        return 1


def warm_up() -> None:
    """Run the append and read paths of a trial once on a local-only manager in a scratch directory (removed)."""
    with tempfile.TemporaryDirectory(prefix="tier-zygote-") as scratch:
        mgr = LogManager.open(Path(scratch), config={}, background=False)
        try:
            log = mgr.get_or_create_log(TOPIC, 0, {"segment.bytes": 1024, "index.interval.bytes": 256})
            for end in range(0, 200, 4):
                records = [
                    SimpleRecord(b"v%d" % (end + i), b"k", 1_700_000_000_000 + end + i) for i in range(4)
                ]
                log.append_as_leader(MemoryRecords.build(records), 0)
            log.maybe_increment_log_start_offset(50, "client delete records")
            mgr.delete_old_segments()
        finally:
            mgr.close()


def zygote() -> int:
    """Serve trials from stdin until it ends (see the module docstring)."""
    warm_up()
    emit("R", os.getpid())
    sel = selectors.DefaultSelector()
    sel.register(sys.stdin.fileno(), selectors.EVENT_READ)
    pending = b""
    child: int | None = None
    while True:
        if child is not None:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                emit("D", status)
                child = None
        ready = sel.select(timeout=0.02 if child is not None else None)
        if not ready:
            continue
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            if child is not None:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            return 0
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            command = line.decode().strip()
            if command == "K":
                if child is not None:
                    os.kill(child, signal.SIGKILL)  # not reaped yet: the pid is still this child's
                    _, status = os.waitpid(child, 0)
                    emit("D", status)
                    child = None
            elif command and child is None:
                job = json.loads(Path(command).read_text())
                pid = os.fork()
                if pid == 0:  # the trial process: never returns into this loop
                    code = 1
                    try:
                        sel.close()
                        os.close(0)
                        code = main(job)
                    finally:
                        os._exit(code)
                child = pid
                emit("P", pid)
            elif command:
                emit("E", f"zygote: a trial is running, {command!r} refused")


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        raise SystemExit(zygote())
    raise SystemExit(main(json.loads(Path(sys.argv[1]).read_text())))
