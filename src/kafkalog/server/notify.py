"""Wake-ups for Fetch long polls: per-partition waiter sets, woken when the partition's log changes.

Kafka parks a fetch that has fewer than ``min_bytes`` in its ``DelayedFetch`` purgatory and completes it when
an append (or a high-watermark or log-start move) may have made data visible. Here a fetch
:meth:`PartitionWaiters.watch`\\ es its partitions **before** reading them (so an append between its read and
its wait is not lost): one future, registered in the waiter set of each partition. :meth:`notify` resolves
every future of a partition; the fetch then reads again, or gives up at its deadline.

Everything runs on the server's event loop; :meth:`PartitionWaiters.notify_threadsafe` is for changes made on
another thread (an executor, or code embedding the server that appends through the LogManager directly).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator

from kafkalog.log.names import TopicPartition

__all__ = ["PartitionWaiters"]


class PartitionWaiters:
    """Per-partition waiters (see the module doc). Loop-thread only, except :meth:`notify_threadsafe`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    @contextlib.contextmanager
    def watch(self, tps: Iterable[TopicPartition]) -> Iterator[asyncio.Future[None]]:
        """A future resolved by the next change of any of ``tps``; unregistered when the block exits."""
        future: asyncio.Future[None] = self._loop.create_future()
        keys = list(dict.fromkeys(tps))
        for tp in keys:
            self._waiters.setdefault(tp, set()).add(future)
        try:
            yield future
        finally:
            for tp in keys:
                waiters = self._waiters.get(tp)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[tp]
            if not future.done():
                future.cancel()

    def notify(self, tp: TopicPartition) -> None:
        """The partition changed: wake every fetch waiting on it."""
        for future in self._waiters.get(tp, ()):
            if not future.done():
                future.set_result(None)

    def notify_all(self) -> None:
        """Wake every waiting fetch (shutdown, topic deletion)."""
        for waiters in self._waiters.values():
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def notify_threadsafe(self, tp: TopicPartition) -> None:
        """:meth:`notify` from any thread."""
        self._loop.call_soon_threadsafe(self.notify, tp)

    def waiting(self, tp: TopicPartition) -> int:
        """How many fetches wait on ``tp`` (for tests and metrics)."""
        return len(self._waiters.get(tp, ()))

    @staticmethod
    async def wait(future: asyncio.Future[None], timeout_s: float) -> bool:
        """Wait for ``future`` at most ``timeout_s``; True if it was resolved (a change), False on timeout."""
        if future.done():
            return not future.cancelled()
        if timeout_s <= 0:
            return False
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            return False
        return True
