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
"""

from __future__ import annotations

import json
import os
import random
import sys
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


if __name__ == "__main__":
    raise SystemExit(main(json.loads(Path(sys.argv[1]).read_text())))
