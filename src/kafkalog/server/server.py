"""The server's lifecycle: listen, accept, shut down gracefully; embedded in a thread or run in the foreground.

* :class:`AsyncKafkaServer` runs on an asyncio loop: :meth:`~AsyncKafkaServer.start` binds the listener and
  serves each accepted socket with a :class:`~kafkalog.server.connection.Connection`. It accepts itself
  (not asyncio's accept loop), one socket at a time while fewer than ``max.connections`` are open (kept
  below half the descriptor limit): at the limit it stops watching the listener, so further clients wait in
  the listen backlog (Kafka's acceptor waits for a slot too) and hold no descriptor of this process; a
  client address over ``max.connections.per.ip`` is closed at once; a failed ``accept()`` (EMFILE, ENFILE,
  ENOBUFS, ENOMEM) pauses accepting for :data:`ACCEPT_RETRY_S` and is logged at most once per
  :data:`LOG_INTERVAL_S` (:class:`RateLimitedLog`). A background task closes connections idle for
  ``connections.max.idle.ms``.
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
import collections
import contextlib
import logging
import resource
import signal
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kafkalog.errors import KafkaStorageError
from kafkalog.log.config import LogConfig, ManagerConfig
from kafkalog.log.names import TopicPartition
from kafkalog.manager import LogManager
from kafkalog.server.broker import Broker
from kafkalog.server.config import ServerConfig
from kafkalog.server.connection import Connection
from kafkalog.server.dispatch import Registry

__all__ = [
    "AsyncKafkaServer",
    "KafkaServer",
    "RateLimitedLog",
    "default_registry",
    "effective_max_connections",
    "serve",
]

_log = logging.getLogger("kafkalog.server")

#: Shortest interval between two log lines of one kind of repeated failure (refused or failed accepts).
LOG_INTERVAL_S: Final = 10.0
#: The longest pause between two looks for idle connections (connections.max.idle.ms).
IDLE_CHECK_MAX_S: Final = 1.0
#: How long accepting pauses after a failed ``accept()`` (EMFILE...), as asyncio's own accept loop does.
ACCEPT_RETRY_S: Final = 1.0
#: The listen backlog: clients waiting to be accepted (while max.connections is reached, for instance).
LISTEN_BACKLOG: Final = 100


async def _bind(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address of ``host`` (all interfaces for ``""``), non-blocking; with port 0
    they all share the port the first one got."""
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class RateLimitedLog:
    """Logs a repeated event at most once per ``interval`` seconds, with the count of the ones not logged
    (an accept loop failing on every wake-up must not fill the disk with log lines)."""

    def __init__(self, logger: logging.Logger, interval: float = LOG_INTERVAL_S) -> None:
        self._logger = logger
        self._interval = interval
        self._last = -float("inf")
        self._suppressed = 0

    def log(self, level: int, message: str, *args: object) -> bool:
        """Log ``message % args`` unless one was logged within the interval; True when it was logged."""
        now = time.monotonic()
        if now - self._last < self._interval:
            self._suppressed += 1
            return False
        if self._suppressed:
            message += " (%d more like it not logged in the last %.0f s)"
            args = (*args, self._suppressed, now - self._last)
        self._last, self._suppressed = now, 0
        self._logger.log(level, message, *args)
        return True


def effective_max_connections(config: ServerConfig) -> int:
    """``max.connections``, kept below half the process's soft descriptor limit (``RLIMIT_NOFILE``): the
    other half is for the logs' segment files, checkpoints and the listener."""
    limit = config.max_connections
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft > 0:
        limit = min(limit, max(1, soft // 2))
    return limit


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
        self._listeners: list[socket.socket] = []
        self._accepting = False
        self._accept_retry: asyncio.TimerHandle | None = None
        self._closed = False
        self._connections: set[Connection] = set()
        #: Open connections per client address (max.connections.per.ip).
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._ip_of: dict[Connection, str] = {}
        self._starting: set[asyncio.Task[None]] = set()  # accepted sockets getting their transport
        #: max.connections, kept below the descriptor limit (:func:`effective_max_connections`).
        self.max_connections = effective_max_connections(config)
        #: Connections refused (max.connections.per.ip), closed for being idle, and failed ``accept()`` calls.
        self.refused_connections = 0
        self.idle_closed_connections = 0
        self.failed_accepts = 0
        self._refused_log = RateLimitedLog(_log)
        self._accept_log = RateLimitedLog(_log)
        self._idle_task: asyncio.Task[None] | None = None

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
            self._listeners = await _bind(loop, self.config.host, self.config.port)
        except BaseException:
            self.broker.close()
            raise
        self._start_coordinators(self.broker)
        self._update_accepting()
        self._idle_task = loop.create_task(self._close_idle_connections())
        if self.max_connections < self.config.max_connections:
            _log.warning(
                "max.connections=%d is above half the descriptor limit (ulimit -n); using %d",
                self.config.max_connections,
                self.max_connections,
            )
        self.broker.port = int(self._listeners[0].getsockname()[1]) if self._listeners else self.config.port
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

    # --- accepting (max.connections, max.connections.per.ip, accept failures) -----------------------------
    def _update_accepting(self) -> None:
        """Watch the listeners while a connection slot is free (Kafka's acceptor waits for a slot: clients
        wait in the listen backlog), not while closing or backing off after a failed ``accept()``."""
        want = (
            not self._closed and self._accept_retry is None and len(self._connections) < self.max_connections
        )
        if want == self._accepting:
            return
        loop = asyncio.get_running_loop()
        for sock in self._listeners:
            if want:
                loop.add_reader(sock.fileno(), self._accept_ready, sock)
            else:
                loop.remove_reader(sock.fileno())
        self._accepting = want

    def _accept_ready(self, listener: socket.socket) -> None:
        """Accept what the listener has, one socket at a time while a slot is free (no burst of descriptors
        beyond max.connections); a failed ``accept()`` backs off for :data:`ACCEPT_RETRY_S`."""
        assert self.broker is not None
        loop = asyncio.get_running_loop()
        while len(self._connections) < self.max_connections and not self._closed:
            try:
                sock, addr = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                break
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS, ENOMEM...: back off, log once per interval
                self.failed_accepts += 1
                self._accept_log.log(
                    logging.ERROR,
                    "Accepting a connection failed: %s; retrying in %.1f s",
                    exc,
                    ACCEPT_RETRY_S,
                )
                self._accept_retry = loop.call_later(ACCEPT_RETRY_S, self._retry_accept)
                break
            ip = str(addr[0]) if isinstance(addr, tuple) else ""
            if self._per_ip[ip] >= self.config.max_connections_per_ip:
                sock.close()
                self.refused_connections += 1
                self._refused_log.log(
                    logging.WARNING,
                    "Refusing a connection from %s: max.connections.per.ip=%d reached",
                    ip,
                    self.config.max_connections_per_ip,
                )
                continue
            sock.setblocking(False)
            connection = Connection(self.broker, on_done=self._connection_done)
            self._connections.add(connection)
            self._ip_of[connection] = ip
            self._per_ip[ip] += 1
            task = loop.create_task(self._serve_socket(connection, sock))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)
        self._update_accepting()

    async def _serve_socket(self, connection: Connection, sock: socket.socket) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, sock)
        except BaseException as exc:  # including a shutdown that cancels it: the slot and socket are freed
            if not isinstance(exc, asyncio.CancelledError):
                _log.info("Could not serve an accepted connection: %s", exc)
            sock.close()
            self._connection_done(connection)
            if not isinstance(exc, Exception):
                raise

    def _retry_accept(self) -> None:
        self._accept_retry = None
        self._update_accepting()

    def _connection_done(self, connection: Connection) -> None:
        self._connections.discard(connection)
        ip = self._ip_of.pop(connection, None)
        if ip is not None:
            self._per_ip[ip] -= 1
            if self._per_ip[ip] <= 0:
                del self._per_ip[ip]
        if not self._closed:
            self._update_accepting()

    async def _close_idle_connections(self) -> None:
        """Close connections idle for connections.max.idle.ms (no bytes received, no request in flight), and
        trim the response buffers of quiet ones (:meth:`Connection.trim`)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        interval = min(max(idle_s / 4, 0.01), IDLE_CHECK_MAX_S)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for connection in list(self._connections):
                connection.trim(now)
                if not connection.closing and connection.idle_for(now) >= idle_s:
                    self.idle_closed_connections += 1
                    _log.info(
                        "Closing connection from %s:%s: idle for connections.max.idle.ms=%d",
                        connection.client[0],
                        connection.client[1],
                        self.config.connections_max_idle_ms,
                    )
                    connection.abort()

    @property
    def connection_count(self) -> int:
        """Open client connections."""
        return len(self._connections)

    def notify_append(self, topic: str, partition: int) -> None:
        """Wake fetches waiting on a partition appended to outside the server (call on the loop thread)."""
        if self.broker is not None:
            self.broker.notify(TopicPartition(topic, partition))

    async def shutdown(self) -> None:
        """Stop accepting, finish in-flight requests (bounded), close connections and stop the I/O threads."""
        self._closed = True
        self._update_accepting()
        if self._accept_retry is not None:
            self._accept_retry.cancel()
            self._accept_retry = None
        for sock in self._listeners:
            sock.close()
        for task in list(self._starting):
            task.cancel()
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
            self._idle_task = None
        for connection in list(self._connections):
            connection.closing = True
            if not connection.busy:
                connection.close()
        if self.broker is not None:
            self.broker.begin_shutdown()
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
    def connection_count(self) -> int:
        """Open client connections (0 when stopped)."""
        server = self._server
        return server.connection_count if server is not None else 0

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
