"""Broker: the state every handler shares — the LogManager, the node's identity, wake-ups, producer ids.

One :class:`Broker` per running server. It owns no protocol logic; it answers the questions handlers have in
common: which log serves a partition (:meth:`Broker.get_log`), which topic a topic id names
(:meth:`Broker.topic_for_id`), the partition's leader epoch (:meth:`Broker.leader_epoch`), and how to run
blocking work off the event loop (:meth:`Broker.run_blocking`, a bounded thread pool) and when that pays
(:meth:`Broker.offload`). Handlers that change a log call :meth:`Broker.notify` so that waiting fetches
re-read it. The server attaches the coordinators
(``groups``: :class:`~kafkalog.server.groups.coordinator.GroupCoordinator`, ``transactions``:
:class:`~kafkalog.server.txn.coordinator.TransactionCoordinator`) at startup.

Node identity: a single node (``node.id``, 0 by default) is the leader and only replica of every partition;
the cluster id is derived from the data directory's path (22 characters of URL-safe base64, the shape of a
Kafka cluster id), stable across restarts of the same directory.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

from kafkalog.errors import KafkaError
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager
from kafkalog.server.config import ServerConfig
from kafkalog.server.dispatch import Registry
from kafkalog.server.memory_pool import MemoryPool
from kafkalog.server.notify import PartitionWaiters
from kafkalog.server.producer_ids import ProducerIdManager

if TYPE_CHECKING:
    from kafkalog.server.groups.coordinator import GroupCoordinator
    from kafkalog.server.txn.coordinator import TransactionCoordinator
    from kafkalog.tiering import RemoteLogManager

__all__ = ["IDLE_INLINE_MAX_BYTES", "ZERO_UUID", "Broker"]

T = TypeVar("T")
ZERO_UUID = uuid.UUID(int=0)
#: Appends and reads above ``inline.io.max.bytes`` but at most this large run on the event loop while no
#: other connection has a request waiting for it (:meth:`Broker.offload`); larger ones always on a thread.
IDLE_INLINE_MAX_BYTES: Final = 4 * 1024 * 1024


def _cluster_id(manager: LogManager) -> str:
    key = "|".join(str(p.resolve()) for p in manager.log_dirs)
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkalog:{key}").bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _seen_producer_ids(manager: LogManager) -> list[int]:
    seen: list[int] = []
    for log in manager.all_logs().values():
        try:
            seen.extend(log.producer_state.active_producers())
        except Exception:  # an offline log: its ids are covered by the block file
            continue
    return seen


class Broker:
    """Shared server state (see the module doc)."""

    def __init__(
        self,
        manager: LogManager,
        config: ServerConfig,
        registry: Registry,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.manager = manager
        self.config = config
        self.registry = registry
        self.loop = loop
        self.port = config.port
        self.waiters = PartitionWaiters(loop)
        self.executor = ThreadPoolExecutor(config.io_threads, thread_name_prefix="kafkalog-server-io-")
        #: queued.max.request.bytes: the declared sizes of the requests the connections hold.
        limit = config.queued_max_request_bytes
        self.memory_pool = MemoryPool(limit if limit > 0 else None)
        self.producer_ids = ProducerIdManager(manager.log_dirs[0], _seen_producer_ids(manager))
        self.cluster_id = _cluster_id(manager)
        self._topic_ids: dict[uuid.UUID, str] = {}
        #: Set at shutdown: waiting fetches answer at once.
        self.closing = False
        #: Set with ``closing`` (:meth:`begin_shutdown`): ends the waits for remote reads (:meth:`wait_remote`).
        self._closed = asyncio.Event()
        #: Connections whose next request has been received and waits for the event loop (not handling one);
        #: kept up to date by the connections (:meth:`offload` reads it).
        self.ready_connections = 0
        #: The group and transaction coordinators, attached by the server at startup (None until then).
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None

    @property
    def node_id(self) -> int:
        """This node's id (the leader of every partition)."""
        return self.config.node_id

    @property
    def advertised_host(self) -> str:
        """The host clients connect to."""
        return self.config.advertised

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the server's I/O threads and await its result."""
        return await self.loop.run_in_executor(self.executor, functools.partial(fn, *args))

    def offload(self, nbytes: int) -> bool:
        """Whether blocking work on ``nbytes`` (an append, a fetch's partition limits) should run on the I/O
        threads (:meth:`run_blocking`) rather than on the event loop: when it is above ``inline.io.max.bytes``
        and another connection's request is waiting for the loop, or above :data:`IDLE_INLINE_MAX_BYTES`.

        The thread hop (two wake-ups and the GIL passed back and forth) pays off only when the loop has
        something else to do meanwhile (measured: docs/server.md and docs/benchmarks.md, "Design
        measurements")."""
        if nbytes <= self.config.inline_io_max_bytes:
            return False
        return self.ready_connections > 0 or nbytes > IDLE_INLINE_MAX_BYTES

    @property
    def remote_log_manager(self) -> RemoteLogManager | None:
        """The manager's ``RemoteLogManager`` (its remote fetch quota and reader pool), None without tiering."""
        tier = self.manager.remote_tier
        return None if tier is None else tier.rlm

    def get_log(self, topic: str, partition: int) -> Log:
        """The partition's log (``UnknownTopicOrPartitionError``, ``KafkaStorageError`` as the manager raises)."""
        return self.manager.get_log(topic, partition)

    @staticmethod
    def leader_epoch(log: Log) -> int:
        """The partition's current leader epoch: the log's latest epoch (0 for a log that has none)."""
        epoch = log.latest_epoch
        return 0 if epoch is None else epoch

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id, or the zero UUID for a topic without one (inferred from a Kafka data dir)."""
        return self.manager.topic_id(topic) or ZERO_UUID

    def topic_for_id(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id``, or None."""
        if topic_id == ZERO_UUID:
            return None
        name = self._topic_ids.get(topic_id)
        if name is not None:
            with contextlib.suppress(KafkaError):
                if self.manager.topic_id(name) == topic_id:
                    return name
        ids: dict[uuid.UUID, str] = {}  # built aside, then swapped in: I/O threads call this too
        for topic in self.manager.topics():
            tid = self.manager.topic_id(topic)
            if tid is not None:
                ids[tid] = topic
        self._topic_ids = ids
        return ids.get(topic_id)

    def begin_shutdown(self) -> None:
        """Shutdown starts (on the loop thread): waiting fetches and remote reads' waits answer at once."""
        self.closing = True
        self._closed.set()
        self.waiters.notify_all()

    async def wait_remote(self, waits: list[asyncio.Future[Any]], timeout_s: float) -> None:
        """Wait until every one of ``waits`` (remote reads on the reader pool) is done, ``timeout_s`` passed, or
        shutdown begins; the futures themselves are left as they are (the caller cancels what is not done)."""
        every = asyncio.ensure_future(asyncio.wait(waits))
        closing = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({every, closing}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            every.cancel()
            closing.cancel()

    def notify(self, tp: TopicPartition) -> None:
        """Wake fetches waiting on ``tp`` (call on the loop thread after changing its log)."""
        self.waiters.notify(tp)

    def close(self) -> None:
        """Stop the I/O threads (after in-flight work finished)."""
        self.executor.shutdown(wait=True)
