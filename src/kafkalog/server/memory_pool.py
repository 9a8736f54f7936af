"""MemoryPool: the bound on the bytes of requests the server holds at once (``queued.max.request.bytes``).

Kafka's ``SimpleMemoryPool`` as its ``SocketServer`` uses it, counted in bytes actually held rather than
announced: a connection reserves a request's buffer as it allocates it (a large request's buffer grows as its
body arrives, so a size prefix alone reserves only the first 64 KiB) and releases it once the request is
answered. A reservation succeeds while the pool has room left; otherwise the connection stops reading and
waits, oldest first, until reservations are released.

Progress: when every request being received is waiting for room (so none can complete and release any), the
oldest waiter is granted its reservation anyway (Kafka's over-commit), so a request larger than the whole
pool, or several large requests arriving together, are always served. A client that stops sending in the
middle of a request holds what it sent until ``connections.max.idle.ms`` closes it; to hold the pool, clients
must send (and keep unanswered) about ``queued.max.request.bytes`` of real bytes.

Invariant owned here: ``used`` is the sum of the reservations not yet released; it exceeds ``limit`` only
by grants made to let a stalled request progress. The pool lives on the event loop thread and takes no lock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

__all__ = ["MemoryPool"]

#: Called when a waiter may go on: with True when its reservation was granted beyond the limit (already
#: counted in ``used``), with False when it should try to reserve again.
WaiterCallback = Callable[[bool], None]


class MemoryPool:
    """Reservations of request bytes against ``limit`` (None: unbounded); see the module doc."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        #: Bytes reserved and not yet released.
        self.used = 0
        self._waiters: collections.OrderedDict[int, tuple[int, WaiterCallback]] = collections.OrderedDict()
        self._receiving: set[int] = set()

    @property
    def available(self) -> bool:
        """Whether a reservation would succeed now."""
        return self.limit is None or self.used < self.limit

    def try_allocate(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` if the pool has room left (possibly less than ``nbytes``); False otherwise."""
        if not self.available:
            return False
        self.used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """Give back a reservation; waiting connections are called (oldest first) while room is left."""
        self.used -= nbytes
        self._wake()

    def wait(self, key: int, nbytes: int, callback: WaiterCallback) -> None:
        """Call ``callback`` (once) when ``nbytes`` may be reserved; ``key`` identifies the waiter."""
        self._waiters[key] = (nbytes, callback)
        self._wake()

    def cancel(self, key: int) -> None:
        """Forget the waiter ``key`` and its request being received (a connection that closed)."""
        self._waiters.pop(key, None)
        self.stop_receiving(key)

    def start_receiving(self, key: int) -> None:
        """``key`` is receiving a request whose buffer grows as it arrives (see the progress rule)."""
        self._receiving.add(key)

    def stop_receiving(self, key: int) -> None:
        """``key``'s request is complete (or abandoned)."""
        if key in self._receiving:
            self._receiving.discard(key)
            self._wake()

    @property
    def waiting(self) -> int:
        """Connections waiting for room."""
        return len(self._waiters)

    def _wake(self) -> None:
        while self._waiters:
            if self.available:
                _, (_, callback) = self._waiters.popitem(last=False)
                callback(False)
                continue
            stalled = [key for key in self._waiters if key in self._receiving]
            if not self._receiving or len(stalled) < len(self._receiving):
                return  # a request still arriving, or requests being answered, will release room
            nbytes, callback = self._waiters.pop(stalled[0])
            self.used += nbytes  # every request being received waits: the oldest goes on beyond the limit
            callback(True)
