"""MemoryPool: the bound on the bytes of requests the server holds at once (``queued.max.request.bytes``).

Kafka's ``SimpleMemoryPool`` as its ``SocketServer`` uses it: a connection reserves a request's **declared**
size (its size prefix) before it reads the body, and releases it once the request is answered. A reservation
succeeds while the pool has any room left, even when the request is larger than the room (Kafka's
over-commit: one request up to ``socket.request.max.bytes`` is always served, so a pool smaller than a
request cannot stall a client for good); otherwise the connection stops reading and waits in FIFO order until
reservations are released. The memory itself is allocated as the body arrives (the connection's buffer
grows), so the pool bounds what a client *can* make the server hold, and a size prefix alone costs nothing but
its reservation.

Invariant owned here: ``used`` is the sum of the reservations not yet released; with a ``limit`` it exceeds
``limit`` by less than one request. The pool lives on the event loop thread and takes no lock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

__all__ = ["MemoryPool"]


class MemoryPool:
    """Reservations of request bytes against ``limit`` (None: unbounded); see the module doc."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        #: Bytes reserved and not yet released.
        self.used = 0
        self._waiters: collections.OrderedDict[int, Callable[[], None]] = collections.OrderedDict()

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
        while self._waiters and self.available:
            _, callback = self._waiters.popitem(last=False)
            callback()

    def wait(self, key: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once) when room is released; ``key`` identifies the waiter for :meth:`cancel`."""
        self._waiters[key] = callback

    def cancel(self, key: int) -> None:
        """Forget the waiter ``key`` (a connection that closed while waiting)."""
        self._waiters.pop(key, None)

    @property
    def waiting(self) -> int:
        """Connections waiting for room."""
        return len(self._waiters)
