"""The server's lifecycle: listen, accept, shut down gracefully; embedded in a thread or run in the foreground.

* :class:`AsyncKafkaServer` runs on an asyncio loop: :meth:`~AsyncKafkaServer.start` binds the listener and
  serves each accepted socket with a :class:`~kafkalog.server.connection.Connection`;
  :meth:`~AsyncKafkaServer.shutdown` stops accepting, lets requests in flight finish (up to
  ``shutdown_grace_ms``; waiting fetches are woken and answer at once), closes every connection and stops
  the I/O threads. It never closes the LogManager: its owner does, after the loop is done.
* :class:`KafkaServer` is the embeddable form for tests and applications: ``with KafkaServer(dir, port=0) as
  s:`` opens the LogManager, runs the loop in a background thread, and exposes ``s.port`` and
  ``s.bootstrap``; leaving the block shuts down and closes the LogManager (flush, checkpoints,
  clean-shutdown marker), so the next open scans nothing.
* :func:`serve` is ``kafkalog serve``: the same in the foreground, stopped by SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaStorageError
from kafkalog.log.config import LogConfig, ManagerConfig
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager
from kafkalog.server.broker import Broker
from kafkalog.server.config import ServerConfig
from kafkalog.server.connection import Connection
from kafkalog.server.dispatch import Registry

__all__ = ["AsyncKafkaServer", "KafkaServer", "default_registry", "serve"]

_log = logging.getLogger("kafkalog.server")


def default_registry() -> Registry:
    """The registry with every built-in API (importing :mod:`kafkalog.server.apis` registers them)."""
    from kafkalog.server import apis

    return apis.registry()


class AsyncKafkaServer:
    """The server on the running event loop (see the module doc)."""

    def __init__(self, manager: LogManager, config: ServerConfig, registry: Registry | None = None) -> None:
        self.manager = manager
        self.config = config
        self.registry = registry if registry is not None else default_registry()
        self.broker: Broker | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self.broker is None:
            raise RuntimeError("the server is not started")
        return self.broker.port

    async def start(self) -> None:
        """Bind the listener and start accepting connections."""
        loop = asyncio.get_running_loop()
        self.broker = Broker(self.manager, self.config, self.registry, loop)
        try:
            self._server = await loop.create_server(
                self._new_connection, self.config.host, self.config.port, reuse_address=True
            )
        except BaseException:
            self.broker.close()
            raise
        self._start_coordinators(self.broker)
        sockets = self._server.sockets
        self.broker.port = int(sockets[0].getsockname()[1]) if sockets else self.config.port
        _log.info(
            "kafkalog serve: node %d listening on %s:%d (advertised %s), data %s",
            self.config.node_id,
            self.config.host,
            self.broker.port,
            self.config.advertised,
            ", ".join(str(p) for p in self.manager.log_dirs),
        )

    @staticmethod
    def _start_coordinators(broker: Broker) -> None:
        from kafkalog.server.groups.coordinator import GroupCoordinator
        from kafkalog.server.txn.coordinator import TransactionCoordinator

        broker.groups = GroupCoordinator(broker)
        broker.groups.start()
        broker.transactions = TransactionCoordinator(broker)
        broker.transactions.start()

    @staticmethod
    async def _stop_coordinators(broker: Broker) -> None:
        if broker.transactions is not None:
            await broker.transactions.close()
        if broker.groups is not None:
            await broker.groups.close()

    def _new_connection(self) -> Connection:
        assert self.broker is not None
        connection = Connection(self.broker, on_done=self._connections.discard)
        self._connections.add(connection)
        return connection

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake fetches waiting on a partition appended to outside the server (call on the loop thread)."""
        if self.broker is not None:
            self.broker.notify(TopicPartition(topic, partition))

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests (bounded), close connections and stop the I/O threads."""
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.closing = True
            if not connection.busy:
                connection.close()
        if self.broker is not None:
            self.broker.closing = True
            self.broker.waiters.notify_all()
            await self._stop_coordinators(self.broker)
        deadline = self.config.shutdown_grace_ms / 1000
        pending = [c.task for c in self._connections if c.task is not None and not c.task.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=deadline)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=1.0)
        for connection in list(self._connections):
            connection.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        if self.broker is not None:
            broker = self.broker
            await asyncio.get_running_loop().run_in_executor(None, broker.close)


def _server_config(
    config: ServerConfig | Mapping[str, Any] | None, host: str | None, port: int | None, **overrides: Any
) -> ServerConfig:
    base = config if isinstance(config, ServerConfig) else ServerConfig.from_props(config)
    changes: dict[str, Any] = dict(overrides)
    if host is not None:
        changes["host"] = host
    if port is not None:
        changes["port"] = port
    return ServerConfig.from_props(None, **{**_as_kwargs(base), **changes})


def _as_kwargs(config: ServerConfig) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


class KafkaServer:
    """A Kafka wire-protocol server over a data directory, on a background thread (see the module doc).

    ``KafkaServer(dir, port=0)`` picks a free port; ``config`` takes a :class:`ServerConfig` or Kafka broker
    names (``{"auto.create.topics.enable": "true"}``); ``log_config`` and ``manager_config`` go to
    :meth:`LogManager.open`. Pass ``manager`` to serve an already open LogManager (then it is not closed).
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        port: int | None = None,
        host: str | None = None,
        *,
        config: ServerConfig | Mapping[str, Any] | None = None,
        log_config: LogConfig | Mapping[str, Any] | None = None,
        manager_config: ManagerConfig | Mapping[str, Any] | None = None,
        manager: LogManager | None = None,
        registry: Registry | None = None,
        **settings: Any,
    ) -> None:
        if (data_dir is None) == (manager is None):
            raise ValueError("give exactly one of data_dir and manager")
        self.config = _server_config(config, host, port, **settings)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self._log_config = log_config
        self._manager_config = manager_config
        self._given_manager = manager
        self._registry = registry
        self.manager: LogManager | None = manager
        self._server: AsyncKafkaServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> KafkaServer:
        """Open the LogManager (unless given), start the loop thread and wait until the port is bound."""
        if self._thread is not None:
            raise RuntimeError("the server is already started")
        if self.manager is None:
            assert self.data_dir is not None
            self.manager = LogManager.open(self.data_dir, self._log_config, config=self._manager_config)
        self._started.clear()
        self._thread = threading.Thread(target=self._run, name="kafkalog-server", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            error, self._error = self._error, None
            self._thread.join()
            self._thread = None
            self._close_manager()
            raise error
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:
            if not self._started.is_set():
                self._error = exc
            else:
                _log.exception("kafkalog server loop failed")
        finally:
            self._started.set()
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        assert self.manager is not None
        self._stop = asyncio.Event()
        server = AsyncKafkaServer(self.manager, self.config, self._registry)
        await server.start()
        self._server = server
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await server.shutdown()

    def stop(self) -> None:
        """Shut down gracefully (see :meth:`AsyncKafkaServer.shutdown`) and close the LogManager if owned."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        thread.join()
        self._thread = None
        self._server = None
        self._close_manager()

    def _close_manager(self) -> None:
        if self._given_manager is None and self.manager is not None:
            self.manager.close()
            self.manager = None

    # --- access -------------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("the server is not running")
        return self._server.port

    @property
    def host(self) -> str:
        """The advertised host."""
        return self.config.advertised

    @property
    def bootstrap(self) -> str:
        """``HOST:PORT`` for a client's ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the loop thread is serving."""
        return self._thread is not None and self._thread.is_alive()

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake fetches waiting on a partition that was appended to through the LogManager directly."""
        loop, server = self._loop, self._server
        if loop is not None and server is not None:
            loop.call_soon_threadsafe(server.notify_append, topic, partition)

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.data_dir if self.data_dir is not None else self._given_manager
        state = f"port={self._server.port}" if self._server is not None else "stopped"
        return f"KafkaServer({where}, {state})"


def serve(
    data_dir: Path | str,
    config: ServerConfig,
    *,
    log_config: LogConfig | Mapping[str, Any] | None = None,
    manager_config: ManagerConfig | Mapping[str, Any] | None = None,
    ready: threading.Event | None = None,
) -> None:
    """Run the server in the foreground until SIGTERM or SIGINT, then shut down gracefully and close the
    LogManager (flush, checkpoints, clean-shutdown markers).

    A log dir that went offline while serving (or that could not be marked clean) is reported after the
    close and raises :class:`~kafkalog.errors.KafkaStorageError` (``kafkalog serve`` exits 1): the next
    start recovers it."""
    manager = LogManager.open(data_dir, log_config, config=manager_config)
    try:
        asyncio.run(_serve_until_signal(manager, config, ready))
    finally:
        manager.close()
    unclean = manager.unclean_dirs
    if unclean:
        names = ", ".join(str(p) for p in unclean)
        _log.error(
            "kafkalog serve: stopped; log dir(s) %s not closed cleanly (offline or failed to close); the next "
            "start recovers them",
            names,
        )
        raise KafkaStorageError(f"log dir(s) {names} not closed cleanly (offline or failed to close)")
    _log.info("kafkalog serve: stopped; %s closed cleanly", data_dir)


async def _serve_until_signal(
    manager: LogManager, config: ServerConfig, ready: threading.Event | None
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / platform
            pass
    server = AsyncKafkaServer(manager, config)
    await server.start()
    print(f"kafkalog serve: listening on {config.host}:{server.port}", flush=True)
    if ready is not None:
        ready.set()
    try:
        await stop.wait()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await server.shutdown()
