"""Kafka's ``RemoteStorageThreadPool``: the bounded pool that runs remote log reads for fetches
(``remote.log.reader.threads``, ``remote.log.reader.max.pending.tasks``).

Invariant owned here: the pool never runs more than ``num_threads`` threads and never holds more than
``max_pending_tasks`` tasks waiting for one; a task submitted past that is refused at once with
:class:`~kafkalog.errors.RejectedExecutionError` (Java's ``ThreadPoolExecutor`` over a bounded
``LinkedBlockingQueue`` with the abort policy, which Kafka builds), so a caller never blocks on it and a
client cannot make it grow. Threads start on demand (a new thread takes the task that started it, as
Java's ``addWorker``) and live until :meth:`RemoteStorageThreadPool.shutdown`. A task cancelled while it
waits (``Future.cancel``, Kafka's ``DelayedRemoteFetch.onExpiration``) is skipped when its turn comes; one
already running finishes. Thread-safe.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Final, TypeVar

from kafkalog.errors import RejectedExecutionError

__all__ = ["READER_THREAD_PREFIX", "RemoteStorageThreadPool"]

_log = logging.getLogger(__name__)

T = TypeVar("T")
#: Kafka's name prefix of the remote reader threads.
READER_THREAD_PREFIX: Final = "remote-log-reader-"

_Task = tuple["Future[Any]", Callable[[], Any]]


class RemoteStorageThreadPool:
    """A fixed-size thread pool with a bounded queue that refuses work instead of blocking (module doc)."""

    def __init__(
        self, num_threads: int, max_pending_tasks: int, name_prefix: str = READER_THREAD_PREFIX
    ) -> None:
        if num_threads < 1 or max_pending_tasks < 1:
            raise ValueError("a remote reader pool needs at least one thread and one queue slot")
        self.num_threads = num_threads
        self.max_pending_tasks = max_pending_tasks
        self._prefix = name_prefix
        #: tasks waiting for a thread (None: a thread's stop); bounded by ``_pending``, counted under ``_lock``
        self._queue: queue.SimpleQueue[_Task | None] = queue.SimpleQueue()
        self._pending = 0
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False

    def __repr__(self) -> str:
        return (
            f"RemoteStorageThreadPool({len(self._threads)}/{self.num_threads} threads, "
            f"{self.task_queue_size}/{self.max_pending_tasks} pending)"
        )

    @property
    def task_queue_size(self) -> int:
        """Tasks waiting for a thread (Kafka's ``RemoteLogReaderTaskQueueSize``)."""
        with self._lock:
            return self._pending

    @property
    def thread_count(self) -> int:
        """Threads started so far (at most ``num_threads``)."""
        with self._lock:
            return len(self._threads)

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a pool thread; its :class:`~concurrent.futures.Future`. Raises
        :class:`~kafkalog.errors.RejectedExecutionError` when every thread is taken and the queue is full, or
        after :meth:`shutdown`; never blocks."""
        future: Future[T] = Future()
        task: _Task = (future, lambda: fn(*args))
        with self._lock:
            if self._shutdown:
                raise RejectedExecutionError("the remote log reader pool is shut down")
            if len(self._threads) < self.num_threads:
                thread = threading.Thread(
                    target=self._work,
                    args=(task,),
                    name=f"{self._prefix}{len(self._threads)}",
                    daemon=True,
                )
                # the process may start no more threads: refused like a full queue
                try:
                    thread.start()
                except RuntimeError as exc:
                    raise RejectedExecutionError(f"cannot start a remote log reader thread: {exc}") from exc
                self._threads.append(thread)
                return future
            if self._pending >= self.max_pending_tasks:
                raise RejectedExecutionError(
                    f"the remote log reader queue is full: {self.num_threads} threads busy and "
                    f"{self.max_pending_tasks} reads pending (remote.log.reader.threads, "
                    "remote.log.reader.max.pending.tasks)"
                )
            self._pending += 1
            self._queue.put(task)
        return future

    def _work(self, first: _Task) -> None:
        task: _Task | None = first
        while task is not None:
            future, call = task
            task = None
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:  # the caller gets it through the future
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, call
            task = self._queue.get()
            if task is not None:
                with self._lock:
                    self._pending -= 1

    def shutdown(self, timeout: float | None = None) -> bool:
        """Refuse new tasks, cancel the waiting ones, and let the threads end after their running task, waiting
        for them up to ``timeout`` seconds in all (None: until they end). Whether every thread ended."""
        with self._lock:
            threads = [] if self._shutdown else list(self._threads)
            self._shutdown = True
        while True:
            try:
                waiting = self._queue.get_nowait()
            except queue.Empty:
                break
            if waiting is not None:
                with self._lock:
                    self._pending -= 1
                waiting[0].cancel()
        for _ in threads:
            self._queue.put(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        ended = True
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                ended = False
                _log.warning(
                    "Remote log reader %s is still reading after %s s; left running", thread.name, timeout
                )
        return ended
