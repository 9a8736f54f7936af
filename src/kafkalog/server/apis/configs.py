"""DescribeConfigs (key 32) and IncrementalAlterConfigs (key 44) for topic configs.

Topic configs are :class:`~kafkalog.log.config.LogConfig`'s, with Kafka's names, defaults and ranges. Each
described entry has Kafka's value text (booleans ``true``/``false``, lists comma-separated), its source —
DYNAMIC_TOPIC_CONFIG (1) for a topic override, STATIC_BROKER_CONFIG (4) for a default the server was started
with, DEFAULT_CONFIG (5) otherwise — its type (v3+), and with ``include_synonyms`` the entry itself as its
synonym. The BROKER resource (this node's id, or empty) describes the server's own settings, read-only.

A resource requested more than once (same type, name and keys) is described once: its configs with
synonyms and documentation take ~3 KB, so a 2 MB request naming one topic 200,000 times built a 644 MB
response.

IncrementalAlterConfigs applies SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3, list
configs such as ``cleanup.policy``) to a topic's overrides; the result is validated as a whole, so a refused
change (unknown name, bad value: INVALID_CONFIG) changes nothing; ``validate_only`` validates and stops. Live
logs switch to the new config at once. Other resource types are INVALID_REQUEST. A change that would leave an
internal topic without what its coordinator needs (:func:`~kafkalog.server.internal_topics.check_internal_topic_config`:
compacted, segments and batches not below their floors) is POLICY_VIOLATION and changes nothing.

Client floors (:data:`CLIENT_CONFIG_FLOORS`, :func:`check_client_overrides`): a value a client sets over the
wire — CreateTopics' configs, an IncrementalAlterConfigs SET or APPEND — below its floor is INVALID_CONFIG
and changes nothing. ``segment.bytes`` >= 1 MiB is Kafka 4.0's (KIP-1030); ``segment.ms``,
``max.compaction.lag.ms`` >= 60000 and ``segment.index.bytes`` >= 1024 are the floors KIP-1030 plans for
Kafka 5.0, taken now: below them one client could make a new segment (about three descriptors) per append.
The Python API and the server's own settings keep Kafka's old minimums (tests rely on small segments), and a
DELETE returns to the server's default whatever it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from kafka.protocol.admin import DescribeConfigsResponse, IncrementalAlterConfigsResponse
from kafka.protocol.api_key import ApiKey

from kafkalog.errors import InvalidConfigurationError, KafkaError
from kafkalog.log.config import CONFIG_DEFS, INT_MAX, LogConfig
from kafkalog.manager import LogManager
from kafkalog.server.broker import Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for, error_message_for
from kafkalog.server.internal_topics import check_internal_topic_config
from kafkalog.server.protocol import Message

__all__ = [
    "BROKER_RESOURCE",
    "CLIENT_CONFIG_FLOORS",
    "TOPIC_RESOURCE",
    "ConfigEntry",
    "check_client_overrides",
    "describe_topic",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
]

TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4

# Kafka's ConfigSource and ConfigType ids.
_DYNAMIC_TOPIC, _STATIC_BROKER, _DEFAULT = 1, 4, 5
_BOOLEAN, _STRING, _INT, _LONG, _DOUBLE, _LIST = 1, 2, 3, 5, 6, 7
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_INT_CONFIGS: Final = frozenset(
    {"min.insync.replicas", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level"}
)
_TYPES: Final = {bool: _BOOLEAN, str: _STRING, float: _DOUBLE, tuple: _LIST}
_DOCS: Final = {d.name: d.doc for d in CONFIG_DEFS}
_LISTS: Final = frozenset(d.name for d in CONFIG_DEFS if d.type is tuple)

_Result = DescribeConfigsResponse.DescribeConfigsResult
_Entry = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
_Synonym = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult.DescribeConfigsSynonym
_AlterResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse

#: The least value a client may set over the wire for a topic config that decides how often a segment rolls.
CLIENT_CONFIG_FLOORS: Final[dict[str, int]] = {
    "segment.bytes": 1024 * 1024,
    "segment.ms": 60_000,
    "segment.index.bytes": 1024,
    "max.compaction.lag.ms": 60_000,
}


def check_client_overrides(names: Iterable[str], config: LogConfig) -> None:
    """Refuse (:class:`InvalidConfigurationError`) a config a client set over the wire, ``names`` of the
    validated ``config``, below its floor in :data:`CLIENT_CONFIG_FLOORS`."""
    values = config.to_props()
    for name in names:
        floor = CLIENT_CONFIG_FLOORS.get(name)
        if floor is not None and int(values[name]) < floor:
            raise InvalidConfigurationError(
                f"Invalid value {values[name]} for configuration {name}: Value must be at least {floor}"
            )


#: (name, value text, source, config type, documentation)
ConfigEntry = tuple[str, str | None, int, int, str | None]


def config_text(value: Any) -> str:
    """A config value as Kafka prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def _type_of(name: str, kind: type, maximum: float | None) -> int:
    if kind is int:
        return _INT if maximum == INT_MAX or name in _INT_CONFIGS else _LONG
    return _TYPES.get(kind, _STRING)


def describe_topic(manager: LogManager, topic: str, keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every topic config (or the named ones) with value, source, type and documentation."""
    config = manager.topic_config(topic)
    defaults = manager.default_config
    wanted = None if keys is None else set(keys)
    out: list[ConfigEntry] = []
    for d in CONFIG_DEFS:
        if wanted is not None and d.name not in wanted:
            continue
        value = getattr(config, d.attr)
        if d.name in config.overrides and (
            d.name not in defaults.overrides or value != getattr(defaults, d.attr)
        ):
            source = _DYNAMIC_TOPIC
        elif d.name in defaults.overrides:
            source = _STATIC_BROKER
        else:
            source = _DEFAULT
        out.append((d.name, config_text(value), source, _type_of(d.name, d.type, d.max), d.doc))
    return out


def _describe_broker(broker: Broker, keys: Iterable[str] | None) -> list[ConfigEntry]:
    c = broker.config
    values: list[tuple[str, Any, int]] = [
        ("node.id", c.node_id, _INT),
        ("broker.id", c.node_id, _INT),
        ("auto.create.topics.enable", c.auto_create_topics, _BOOLEAN),
        ("socket.request.max.bytes", c.socket_request_max_bytes, _INT),
        ("num.partitions", broker.manager.config.num_partitions, _INT),
        ("max.partitions", broker.manager.config.max_partitions, _INT),
        ("max.partitions.per.request", broker.manager.config.max_partitions_per_request, _INT),
        ("default.replication.factor", 1, _INT),
        ("log.dirs", ",".join(str(p) for p in broker.manager.log_dirs), _STRING),
    ]
    wanted = None if keys is None else set(keys)
    return [
        (name, config_text(value), _STATIC_BROKER, kind, None)
        for name, value, kind in values
        if wanted is None or name in wanted
    ]


def _entries(ctx: RequestContext, entries: list[ConfigEntry], synonyms: bool, docs: bool) -> list[Message]:
    out = []
    for name, value, source, kind, doc in entries:
        out.append(
            _Entry(
                name=name,
                value=value,
                read_only=source == _STATIC_BROKER and name in ("node.id", "broker.id", "log.dirs"),
                config_source=source,
                is_default=source == _DEFAULT,
                is_sensitive=False,
                synonyms=[_Synonym(name=name, value=value, source=source)] if synonyms else [],
                config_type=kind,
                documentation=doc if docs else None,
            )
        )
    return out


@api(ApiKey.DescribeConfigs)
async def handle_describe_configs(ctx: RequestContext, request: Message) -> Message:
    """The configs of each requested topic (or of this broker)."""
    broker = ctx.broker
    synonyms = bool(request.include_synonyms)
    docs = ctx.api_version >= 3 and bool(request.include_documentation)
    results = []
    seen: set[tuple[int, str, frozenset[str] | None]] = set()
    for res in request.resources:
        kind, name = int(res.resource_type), str(res.resource_name)
        keys = res.configuration_keys
        resource = (kind, name, None if keys is None else frozenset(keys))
        if resource in seen:  # described once: the same topic 200k times made a 644 MB response
            continue
        seen.add(resource)
        try:
            if kind == TOPIC_RESOURCE:
                entries = describe_topic(broker.manager, name, keys)
            elif kind == BROKER_RESOURCE and name in ("", str(broker.node_id)):
                entries = _describe_broker(broker, keys)
            else:
                raise _Refused(f"unsupported resource type {kind} or name {name!r}")
            results.append(
                _Result(
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    resource_type=kind,
                    resource_name=name,
                    configs=_entries(ctx, entries, synonyms, docs),
                )
            )
        except (KafkaError, _Refused) as exc:
            code = ErrorCode.INVALID_REQUEST if isinstance(exc, _Refused) else error_code_for(exc)
            results.append(
                _Result(
                    error_code=code,
                    error_message=error_message_for(exc),
                    resource_type=kind,
                    resource_name=name,
                    configs=[],
                )
            )
    return ctx.response(throttle_time_ms=0, results=results)


def topic_changes(config: LogConfig, ops: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
    """The override changes of IncrementalAlterConfigs operations (None removes an override)."""
    changes: dict[str, Any] = {}
    seen: set[str] = set()
    for name, op, value in ops:
        if name in seen:
            raise _Refused(f"duplicate config key {name!r} in one resource")
        seen.add(name)
        if op == _DELETE:
            changes[name] = None
            continue
        if op not in (_SET, _APPEND, _SUBTRACT):
            raise _Refused(f"unknown config operation {op}")
        if value is None:
            raise InvalidConfigurationError(f"null value for config {name!r}")
        if op == _SET:
            changes[name] = value
            continue
        if name not in _LISTS:
            raise InvalidConfigurationError(
                f"config {name!r} is not a list: APPEND and SUBTRACT do not apply"
            )
        attr = next(d.attr for d in CONFIG_DEFS if d.name == name)
        current = list(getattr(config, attr))
        items = [v.strip() for v in value.split(",") if v.strip()]
        if op == _APPEND:
            current += [v for v in items if v not in current]
        else:
            current = [v for v in current if v not in items]
        changes[name] = ",".join(current)
    return changes


@api(ApiKey.IncrementalAlterConfigs)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Message) -> Message:
    """Apply each resource's config operations (topics only)."""
    manager = ctx.broker.manager
    responses = []
    for res in request.resources:
        kind, name = int(res.resource_type), str(res.resource_name)
        try:
            if kind != TOPIC_RESOURCE:
                raise _Refused(f"only topic configs can be altered (resource type {kind})")
            config = manager.topic_config(name)
            changes = topic_changes(
                config, [(str(c.name), int(c.config_operation), c.value) for c in res.configs]
            )
            after = _config_after(manager, config, changes)
            check_client_overrides([k for k, v in changes.items() if v is not None], after)
            check_internal_topic_config(name, after)
            if request.validate_only:  # the refusal the change itself would get, nothing changed
                manager.validate_topic_config_change(name, changes)
            else:
                await ctx.broker.run_blocking(manager.alter_topic_config, name, changes)
            responses.append(
                _AlterResult(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=kind, resource_name=name
                )
            )
        except (KafkaError, _Refused) as exc:
            code = ErrorCode.INVALID_REQUEST if isinstance(exc, _Refused) else error_code_for(exc)
            responses.append(
                _AlterResult(
                    error_code=code,
                    error_message=error_message_for(exc),
                    resource_type=kind,
                    resource_name=name,
                )
            )
    return ctx.response(throttle_time_ms=0, responses=responses)


def _config_after(manager: LogManager, config: LogConfig, changes: dict[str, Any]) -> LogConfig:
    """The effective config ``changes`` would give a topic whose config is ``config`` (validated: a bad name
    or value raises :class:`InvalidConfigurationError`)."""
    props = config.to_props()
    defaults = manager.default_config.to_props()
    for key, value in changes.items():
        if value is None:
            if key in defaults:
                props[key] = defaults[key]
        else:
            props[key] = value
    return LogConfig.from_props(props)


class _Refused(Exception):
    """A request Kafka answers with INVALID_REQUEST."""
