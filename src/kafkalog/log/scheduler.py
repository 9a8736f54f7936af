"""Background task schedulers: :class:`KafkaScheduler` (threads) and :class:`MockScheduler` (driven by MockTime).

A task has a name (Kafka's names: ``flush-log``, ``delete-file``, ``PeriodicProducerExpirationCheck``,
``kafka-log-retention`` ...), a delay and an optional period. Invariants: a task never runs before its
time; a periodic task is rescheduled after it finishes (runs of one task never overlap); an exception in a
task is logged and does not stop the scheduler or later runs of the task; ``shutdown`` waits for running
tasks and drops pending ones (``flush-log``-style durability work is done by ``close`` instead).

:func:`background_executor` is the one worker thread for logs opened without a scheduler: their roll's
``flush-log`` runs there, in the background as Kafka runs it, and ``Log.close`` waits for it.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kafkalog.time import SYSTEM_TIME, MockTime, Time

__all__ = ["KafkaScheduler", "MockScheduler", "ScheduledTask", "Scheduler", "background_executor"]

_log = logging.getLogger("kafkalog.scheduler")


@dataclass(order=True)
class ScheduledTask:
    """A pending task; ordered by due time, then submission order."""

    due_ms: int
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    period_ms: int = field(compare=False, default=-1)
    cancelled: bool = field(compare=False, default=False)

    def cancel(self) -> None:
        """Prevent future runs (a run in progress finishes). The task lets go of its function at once: a
        cancelled periodic task stays in the scheduler's queue until its next due time (10 minutes for a
        log's producer expiry check), and must not keep the closed log (and its file descriptors) alive."""
        self.cancelled = True
        self.fn = _cancelled


def _cancelled() -> None:
    """The function of a cancelled task (never run: the schedulers skip cancelled tasks)."""


class Scheduler(Protocol):
    """What logs need from a scheduler."""

    def schedule(
        self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        """Run ``fn`` after ``delay_ms``, then every ``period_ms`` if positive."""
        ...

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        """Run ``fn`` once after ``delay_ms``."""
        ...


def _run(task: ScheduledTask) -> None:
    try:
        task.fn()
    except Exception:
        _log.exception("Uncaught exception in scheduled task '%s'", task.name)


class KafkaScheduler:
    """Runs tasks on a pool of daemon threads (``num_threads``), by wall-clock time."""

    def __init__(
        self, num_threads: int = 1, thread_name_prefix: str = "kafka-scheduler-", time: Time = SYSTEM_TIME
    ):
        self._num_threads = num_threads
        self._prefix = thread_name_prefix
        self._time = time
        self._cond = threading.Condition()
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._running = False

    @property
    def is_started(self) -> bool:
        """Whether :meth:`startup` was called and :meth:`shutdown` was not."""
        return self._running

    def startup(self) -> KafkaScheduler:
        """Start the worker threads."""
        with self._cond:
            if self._running:
                return self
            self._running = True
            for i in range(self._num_threads):
                t = threading.Thread(target=self._work, name=f"{self._prefix}{i}", daemon=True)
                self._threads.append(t)
                t.start()
        return self

    def schedule(
        self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        task = ScheduledTask(
            self._time.milliseconds() + max(0, delay_ms), next(self._seq), name, fn, period_ms
        )
        with self._cond:
            if not self._running:
                raise RuntimeError("the scheduler is not running")
            heapq.heappush(self._heap, task)
            self._cond.notify()
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms, -1)

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._running and (not self._heap or self._heap[0].due_ms > self._time.milliseconds()):
                    timeout = None
                    if self._heap:
                        timeout = max(0.0, (self._heap[0].due_ms - self._time.milliseconds()) / 1000.0)
                    self._cond.wait(timeout)
                if not self._running:
                    return
                task = heapq.heappop(self._heap)
            if not task.cancelled:
                _run(task)
                if task.period_ms > 0 and not task.cancelled:
                    with self._cond:
                        if self._running:
                            task.due_ms = self._time.milliseconds() + task.period_ms
                            task.seq = next(self._seq)
                            heapq.heappush(self._heap, task)
                            self._cond.notify()
            # not kept while waiting for the next task: a finished task's function may hold a closed log
            del task

    def shutdown(self) -> None:
        """Stop the threads after the tasks that are running finish; pending tasks are dropped."""
        with self._cond:
            self._running = False
            self._heap.clear()
            self._cond.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()
        self._threads.clear()

    def pending(self) -> list[str]:
        """Names of pending tasks (for diagnostics)."""
        with self._cond:
            return [t.name for t in sorted(self._heap) if not t.cancelled]


class MockScheduler:
    """Runs tasks when they are due by a :class:`MockTime`: at ``schedule`` (a task due now runs at once, as
    in Kafka's ``MockScheduler``), and whenever the clock moves (``tick`` or ``time.sleep``)."""

    def __init__(self, time: MockTime) -> None:
        self.time = time
        self._heap: list[ScheduledTask] = []
        self._seq = itertools.count()
        self._lock = threading.RLock()
        self.is_started = True
        time.add_listener(self.tick)

    def startup(self) -> MockScheduler:
        """No-op (always running)."""
        return self

    def shutdown(self) -> None:
        """Drop every pending task."""
        with self._lock:
            self._heap.clear()

    def schedule(
        self, name: str, fn: Callable[[], object], delay_ms: int = 0, period_ms: int = -1
    ) -> ScheduledTask:
        with self._lock:
            task = ScheduledTask(
                self.time.milliseconds() + max(0, delay_ms), next(self._seq), name, fn, period_ms
            )
            heapq.heappush(self._heap, task)
            self.tick()
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms, -1)

    def tick(self) -> None:
        """Run every task that is due now (periodic ones are rescheduled)."""
        with self._lock:
            now = self.time.milliseconds()
            while self._heap and self._heap[0].due_ms <= now:
                task = heapq.heappop(self._heap)
                if task.cancelled:
                    continue
                _run(task)
                if task.period_ms > 0 and not task.cancelled:
                    task.due_ms += task.period_ms
                    task.seq = next(self._seq)
                    heapq.heappush(self._heap, task)

    def pending(self) -> list[str]:
        """Names of pending tasks."""
        with self._lock:
            return [t.name for t in sorted(self._heap) if not t.cancelled]


_BACKGROUND: concurrent.futures.ThreadPoolExecutor | None = None
_BACKGROUND_LOCK = threading.Lock()


def background_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's one ``kafkalog-flush-log`` thread, started on first use (see module doc)."""
    global _BACKGROUND
    with _BACKGROUND_LOCK:
        if _BACKGROUND is None:
            _BACKGROUND = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafkalog-flush-log")
        return _BACKGROUND
