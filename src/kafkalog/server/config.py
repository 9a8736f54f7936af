"""ServerConfig: the settings of ``kafkalog serve`` (listener, node, limits), with Kafka's broker names.

The log's own settings stay where they are (topic configs in :class:`~kafkalog.log.config.LogConfig`,
``num.partitions`` and the background tasks in :class:`~kafkalog.log.config.ManagerConfig`); this holds only
what the network layer adds. :meth:`ServerConfig.from_props` takes Kafka's broker names
(``socket.request.max.bytes``, ``auto.create.topics.enable``, ``node.id``, ``advertised.host``...), so a
``server.properties``-style mapping reads the same here as in Kafka.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kafkalog.errors import InvalidConfigurationError

__all__ = ["DEFAULT_PORT", "ServerConfig", "parse_listen"]

DEFAULT_PORT = 9092


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> (host, port); a bare port listens on 127.0.0.1."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise InvalidConfigurationError(f"invalid listen address {text!r}: expected HOST:PORT") from None
    if not 0 <= number <= 65535:
        raise InvalidConfigurationError(f"invalid port {number} in listen address {text!r}")
    return host, number


@dataclass(frozen=True)
class ServerConfig:
    """Network-layer settings (see the module doc). ``port=0`` picks a free port."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    #: The host clients are told to connect to (Metadata's broker list); None: ``host`` (or 127.0.0.1 for a
    #: wildcard listener).
    advertised_host: str | None = None
    node_id: int = 0
    socket_request_max_bytes: int = 104_857_600
    auto_create_topics: bool = False
    #: Appends and reads at or below this many bytes run on the event loop; larger ones on a thread while
    #: another connection's request waits for the loop (see :meth:`Broker.offload
    #: <kafkalog.server.broker.Broker.offload>`).
    inline_io_max_bytes: int = 256 * 1024
    #: Threads for blocking work (large appends and reads, topic operations, fsyncs).
    io_threads: int = 4
    #: How long a graceful shutdown waits for in-flight requests before closing connections.
    shutdown_grace_ms: int = 5_000
    #: Partitions of ``__consumer_offsets`` when the group coordinator creates it (an existing topic keeps its
    #: own count).
    offsets_topic_num_partitions: int = 50
    #: Partitions of ``__transaction_state`` when the transaction coordinator creates it.
    transaction_state_num_partitions: int = 50
    #: The session timeouts a group member may ask for (else INVALID_SESSION_TIMEOUT).
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    #: How long the first rebalance of an empty group waits for more members (extended while they come).
    group_initial_rebalance_delay_ms: int = 3_000
    #: Longest committed offset metadata string (else OFFSET_METADATA_TOO_LARGE).
    offset_metadata_max_bytes: int = 4_096
    #: Longest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).
    transaction_max_timeout_ms: int = 900_000
    #: How often the coordinators look for expired sessions, due rebalances and timed-out transactions.
    coordinator_tick_ms: int = 100
    # --- what one client can make the server spend (docs/operations.md §9) --------------------------------
    #: Bytes of requests held at once, by their declared sizes, from size prefix to response; past it every
    #: connection stops reading until requests are answered (one request may overshoot: Kafka's pool).
    #: -1: unbounded (Kafka's default; not this server's).
    queued_max_request_bytes: int = 512 * 1024 * 1024
    #: Open client connections; at the limit the server stops accepting (clients wait in the listen backlog,
    #: as with Kafka's acceptor). The effective limit is also kept below half the process's descriptor
    #: limit (``RLIMIT_NOFILE``), the rest being for the logs' files.
    max_connections: int = 1_000
    #: Open client connections from one IP address; more from it are accepted and closed at once.
    max_connections_per_ip: int = 1_000
    #: A connection without progress for this long is closed: no bytes received and no request in flight,
    #: or a response its client stopped reading.
    connections_max_idle_ms: int = 600_000
    #: Most record bytes of one Fetch response (a request's own ``max_bytes`` applies below it); the first
    #: partition with data still returns one whole batch if it is larger (Kafka's progress guarantee).
    fetch_max_bytes: int = 57_671_680

    _NAMES: ClassVar[dict[str, str]] = {
        "host": "host",
        "port": "port",
        "advertised.host": "advertised_host",
        "advertised.host.name": "advertised_host",
        "node.id": "node_id",
        "broker.id": "node_id",
        "socket.request.max.bytes": "socket_request_max_bytes",
        "auto.create.topics.enable": "auto_create_topics",
        "auto_create_topics": "auto_create_topics",
        "inline.io.max.bytes": "inline_io_max_bytes",
        "num.io.threads": "io_threads",
        "shutdown.grace.ms": "shutdown_grace_ms",
        "offsets.topic.num.partitions": "offsets_topic_num_partitions",
        "transaction.state.log.num.partitions": "transaction_state_num_partitions",
        "group.min.session.timeout.ms": "group_min_session_timeout_ms",
        "group.max.session.timeout.ms": "group_max_session_timeout_ms",
        "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
        "offset.metadata.max.bytes": "offset_metadata_max_bytes",
        "transaction.max.timeout.ms": "transaction_max_timeout_ms",
        "coordinator.tick.ms": "coordinator_tick_ms",
        "queued.max.request.bytes": "queued_max_request_bytes",
        "max.connections": "max_connections",
        "max.connections.per.ip": "max_connections_per_ip",
        "connections.max.idle.ms": "connections_max_idle_ms",
        "fetch.max.bytes": "fetch_max_bytes",
    }

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidConfigurationError(f"invalid port {self.port}")
        if self.node_id < 0:
            raise InvalidConfigurationError(f"node.id must be >= 0, got {self.node_id}")
        if self.socket_request_max_bytes < 1:
            raise InvalidConfigurationError("socket.request.max.bytes must be at least 1")
        if self.io_threads < 1:
            raise InvalidConfigurationError("num.io.threads must be at least 1")
        if self.offsets_topic_num_partitions < 1 or self.transaction_state_num_partitions < 1:
            raise InvalidConfigurationError("internal topics need at least one partition")
        if not 0 <= self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise InvalidConfigurationError(
                "group.min.session.timeout.ms must be <= group.max.session.timeout.ms"
            )
        if self.group_initial_rebalance_delay_ms < 0 or self.coordinator_tick_ms < 1:
            raise InvalidConfigurationError("invalid coordinator timing settings")
        if self.queued_max_request_bytes == 0 or self.queued_max_request_bytes < -1:
            raise InvalidConfigurationError("queued.max.request.bytes must be positive, or -1 (unbounded)")
        if self.max_connections < 1 or self.max_connections_per_ip < 1:
            raise InvalidConfigurationError("max.connections and max.connections.per.ip must be at least 1")
        if self.connections_max_idle_ms < 1:
            raise InvalidConfigurationError("connections.max.idle.ms must be at least 1")
        if self.fetch_max_bytes < 0:
            raise InvalidConfigurationError("fetch.max.bytes must be >= 0")

    @classmethod
    def known_names(cls) -> frozenset[str]:
        """The Kafka-style names :meth:`from_props` accepts."""
        return frozenset(cls._NAMES)

    @property
    def advertised(self) -> str:
        """The host advertised in Metadata responses."""
        if self.advertised_host:
            return self.advertised_host
        return "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None, **kwargs: Any) -> ServerConfig:
        """Build from Kafka-style names (values may be strings) and/or keyword arguments."""
        values: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name, value in (props or {}).items():
            attr = cls._NAMES.get(name)
            if attr is None:
                raise InvalidConfigurationError(f"unknown server configuration {name!r}")
            values[attr] = value
        values.update(kwargs)
        out: dict[str, Any] = {}
        for attr, value in values.items():
            field = fields.get(attr)
            if field is None or attr.startswith("_"):
                raise InvalidConfigurationError(f"unknown server configuration attribute {attr!r}")
            out[attr] = _coerce(attr, field.type, value)
        return cls(**out)


def _coerce(attr: str, annotation: Any, value: Any) -> Any:
    kind = str(annotation)
    if value is None or kind.startswith("str"):
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise InvalidConfigurationError(f"invalid boolean {value!r} for {attr}")
        return text == "true"
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidConfigurationError(f"invalid integer {value!r} for {attr}") from None
