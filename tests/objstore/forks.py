"""Running a check in a forked child with a bounded wait (the object-storage fork tests)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def in_forked_child(work: Callable[[], bool], timeout: float = 30.0) -> int:
    """Run ``work()`` in a forked child; its exit code (0: returned True), or -1 if it hung."""
    pid = os.fork()
    if pid == 0:
        try:
            code = 0 if work() else 1
        except BaseException:
            code = 2
        os._exit(code)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return -1
