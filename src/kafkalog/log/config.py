"""LogConfig: every log-affecting topic config, with Kafka's dotted names, defaults and validation ranges.

Names, defaults and ranges follow Kafka 4.x (``LogConfig``, ``TopicConfig``, ``ServerLogConfigs``), with two
deliberate differences: ``segment.bytes`` accepts values down to 14 bytes (Kafka 4.0 raised the minimum to
1 MiB and added a test-only ``internal.segment.bytes``; an embedded store wants small segments in tests),
and the tiered-storage gate is the caller's: a ``LogConfig`` runs Kafka's tiered checks except the broker gate
(``validateRemoteStorageOnlyIfSystemEnabled``), which needs the broker's ``remote.log.storage.system.enable``;
:meth:`Log.open <kafkalog.log.log.Log.open>` (its ``remote_storage_system_enable``), ``Log.update_config`` and
the manager's topic registry call :func:`validate_remote_storage` with their setting. That function holds all
of Kafka's tiered checks (the gate, ``validateNoRemoteStorageForCompactedTopic``,
``validateRemoteStorageRetentionSize/Time``, ``validateRetentionConfigsWhenRemoteCopyDisabled``; and
:func:`validate_remote_storage_change` for ``validateTurningOffRemoteStorageWithDelete``): they run only when
``remote.storage.enable=true``, exactly as in Kafka. ``local.retention.ms`` / ``local.retention.bytes``
of −2 follow ``retention.ms`` / ``retention.bytes`` (:attr:`LogConfig.effective_local_retention_ms` /
``_bytes``, Kafka's ``localRetentionMs()`` / ``localRetentionBytes()``).

A config is built from keyword arguments (``LogConfig(segment_bytes=1024)``) or from a mapping of dotted
names (``LogConfig.from_props({"segment.bytes": "1024"})``; values may be strings, as in a
``.properties`` file). Invalid names, types or ranges raise :class:`~kafkalog.errors.InvalidConfigurationError`.
``overrides`` remembers which names were set explicitly (what a topic stores as its overrides).
:class:`AppendSettings` is what an append reads of a config, derived once per config object.

:class:`ManagerConfig` holds the broker-level settings a :class:`~kafkalog.manager.LogManager` uses
(``num.recovery.threads.per.data.dir``, the background tasks' intervals, ``num.partitions``, and the partition
limits ``max.partitions`` (KIP-578's name) and ``max.partitions.per.request``), with Kafka's names and
defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from kafkalog.errors import InvalidConfigurationError
from kafkalog.records import Compression, TimestampType

__all__ = [
    "CONFIG_DEFS",
    "DEFAULT_LOCAL_RETENTION_BYTES",
    "DEFAULT_LOCAL_RETENTION_MS",
    "AppendSettings",
    "ConfigDef",
    "LogConfig",
    "ManagerConfig",
    "validate_remote_storage",
    "validate_remote_storage_change",
]

LONG_MAX: Final = 2**63 - 1
INT_MAX: Final = 2**31 - 1

#: ``local.retention.ms`` / ``local.retention.bytes`` value meaning "follow ``retention.ms`` / ``retention.bytes``".
DEFAULT_LOCAL_RETENTION_MS: Final = -2
DEFAULT_LOCAL_RETENTION_BYTES: Final = -2


@dataclass(frozen=True)
class ConfigDef:
    """One config: dotted name, attribute name, type, default, valid range or choices, documentation."""

    name: str
    attr: str
    type: type
    default: Any
    doc: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] | None = None
    parse: Callable[[Any], Any] | None = None


def _parse_policy(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    out = tuple(sorted({str(v).strip().lower() for v in items if str(v).strip()}))
    bad = [v for v in out if v not in ("compact", "delete")]
    if bad:
        raise InvalidConfigurationError(
            f"invalid value {value!r} for configuration cleanup.policy: {bad[0]!r}"
        )
    return out


def _parse_compression(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", "none"):
        raise InvalidConfigurationError(f"invalid value {value!r} for configuration compression.type")
    return "uncompressed" if text == "none" else text


def _parse_ts_type(value: Any) -> str:
    try:
        return TimestampType.from_name(str(value)).kafka_name
    except ValueError:
        raise InvalidConfigurationError(
            f"invalid value {value!r} for configuration message.timestamp.type"
        ) from None


CONFIG_DEFS: Final[tuple[ConfigDef, ...]] = (
    ConfigDef(
        "segment.bytes",
        "segment_bytes",
        int,
        1024**3,
        "Segment file size; a segment rolls past it.",
        14,
        INT_MAX,
    ),
    ConfigDef(
        "segment.ms", "segment_ms", int, 7 * 24 * 3600 * 1000, "Roll a segment this old (record time).", 1
    ),
    ConfigDef(
        "segment.jitter.ms", "segment_jitter_ms", int, 0, "Random jitter subtracted from segment.ms.", 0
    ),
    ConfigDef(
        "segment.index.bytes",
        "segment_index_bytes",
        int,
        10 * 1024 * 1024,
        "Preallocated index size.",
        4,
        INT_MAX,
    ),
    ConfigDef(
        "index.interval.bytes",
        "index_interval_bytes",
        int,
        4096,
        "Bytes between offset index entries.",
        0,
        INT_MAX,
    ),
    ConfigDef(
        "retention.ms",
        "retention_ms",
        int,
        7 * 24 * 3600 * 1000,
        "Delete segments older than this (-1: never).",
        -1,
    ),
    ConfigDef(
        "retention.bytes", "retention_bytes", int, -1, "Delete oldest segments past this size (-1: never)."
    ),
    ConfigDef(
        "cleanup.policy", "cleanup_policy", tuple, ("delete",), "delete and/or compact.", parse=_parse_policy
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        "min_cleanable_dirty_ratio",
        float,
        0.5,
        "Dirty ratio that triggers cleaning.",
        0,
        1,
    ),
    ConfigDef(
        "delete.retention.ms",
        "delete_retention_ms",
        int,
        24 * 3600 * 1000,
        "How long tombstones are kept.",
        0,
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        "min_compaction_lag_ms",
        int,
        0,
        "Minimum age before a record can be compacted.",
        0,
    ),
    ConfigDef(
        "max.compaction.lag.ms",
        "max_compaction_lag_ms",
        int,
        LONG_MAX,
        "Maximum age before a record is compacted.",
        1,
    ),
    ConfigDef(
        "file.delete.delay.ms",
        "file_delete_delay_ms",
        int,
        60_000,
        "Delay between .deleted rename and unlink.",
        0,
    ),
    ConfigDef("flush.messages", "flush_messages", int, LONG_MAX, "fsync after this many messages.", 1),
    ConfigDef("flush.ms", "flush_ms", int, LONG_MAX, "fsync when the last flush is older than this.", 0),
    ConfigDef(
        "max.message.bytes", "max_message_bytes", int, 1024 * 1024 + 12, "Largest batch accepted.", 0, INT_MAX
    ),
    ConfigDef(
        "message.timestamp.type",
        "message_timestamp_type",
        str,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        parse=_parse_ts_type,
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        "message_timestamp_before_max_ms",
        int,
        LONG_MAX,
        "Reject CreateTime timestamps older than now minus this.",
        0,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms",
        "message_timestamp_after_max_ms",
        int,
        3_600_000,
        "Reject CreateTime timestamps newer than now plus this.",
        0,
    ),
    ConfigDef("preallocate", "preallocate", bool, False, "Preallocate new segment files."),
    ConfigDef(
        "compression.type",
        "compression_type",
        str,
        "producer",
        "Topic codec (producer keeps the batch's).",
        parse=_parse_compression,
    ),
    ConfigDef("compression.gzip.level", "compression_gzip_level", int, -1, "gzip level (-1 or 1..9).", -1, 9),
    ConfigDef("compression.lz4.level", "compression_lz4_level", int, 9, "lz4 level (1..17).", 1, 17),
    ConfigDef(
        "compression.zstd.level", "compression_zstd_level", int, 3, "zstd level (-131072..22).", -131072, 22
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        "unclean_leader_election_enable",
        bool,
        False,
        "Not used by the log.",
    ),
    ConfigDef("min.insync.replicas", "min_insync_replicas", int, 1, "Not used by the log.", 1),
    ConfigDef(
        "remote.storage.enable",
        "remote_storage_enable",
        bool,
        False,
        "Tiered storage (needs the broker's remote.log.storage.system.enable).",
    ),
    ConfigDef(
        "local.retention.ms",
        "local_retention_ms",
        int,
        DEFAULT_LOCAL_RETENTION_MS,
        "Local-tier retention time (-2: retention.ms). Tiered storage only.",
        -2,
    ),
    ConfigDef(
        "local.retention.bytes",
        "local_retention_bytes",
        int,
        DEFAULT_LOCAL_RETENTION_BYTES,
        "Local-tier retention size (-2: retention.bytes). Tiered storage only.",
        -2,
    ),
    ConfigDef(
        "remote.log.copy.disable",
        "remote_log_copy_disable",
        bool,
        False,
        "Tiered data becomes read only: no more uploads (local.* must then equal retention.*).",
    ),
    ConfigDef(
        "remote.log.delete.on.disable",
        "remote_log_delete_on_disable",
        bool,
        False,
        "Delete the tiered data when remote.storage.enable turns false (required to turn it off).",
    ),
    # Broker-level settings that shape a single log's behaviour.
    ConfigDef(
        "producer.id.expiration.ms",
        "producer_id_expiration_ms",
        int,
        86_400_000,
        "Expire idle producer ids after this long.",
        1,
    ),
    ConfigDef(
        "producer.id.expiration.check.interval.ms",
        "producer_id_expiration_check_interval_ms",
        int,
        600_000,
        "How often producer ids are checked for expiry.",
        1,
    ),
    ConfigDef(
        "transaction.max.timeout.ms", "transaction_max_timeout_ms", int, 900_000, "Longest transaction.", 1
    ),
)

_BY_NAME: Final = {d.name: d for d in CONFIG_DEFS}
_BY_ATTR: Final = {d.attr: d for d in CONFIG_DEFS}


def _coerce(d: ConfigDef, value: Any) -> Any:
    if d.parse is not None:
        return d.parse(value)
    if d.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise InvalidConfigurationError(
            f"invalid value {value!r} for configuration {d.name}: expected a boolean"
        )
    if d.type is int:
        if isinstance(value, bool):
            raise InvalidConfigurationError(
                f"invalid value {value!r} for configuration {d.name}: expected an integer"
            )
        try:
            out = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            out = None
        if out is None:
            raise InvalidConfigurationError(
                f"invalid value {value!r} for configuration {d.name}: expected an integer"
            )
        return out
    if d.type is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise InvalidConfigurationError(
                f"invalid value {value!r} for configuration {d.name}: expected a number"
            ) from None
    return value


def _check(d: ConfigDef, value: Any) -> None:
    if d.min is not None and value < d.min:
        raise InvalidConfigurationError(
            f"invalid value {value} for configuration {d.name}: value must be at least {d.min}"
        )
    if d.max is not None and value > d.max:
        raise InvalidConfigurationError(
            f"invalid value {value} for configuration {d.name}: value must be no more than {d.max}"
        )
    if d.name == "compression.gzip.level" and value == 0:
        raise InvalidConfigurationError(
            "invalid value 0 for configuration compression.gzip.level: must be -1 or 1..9"
        )


@dataclass(frozen=True)
class LogConfig:
    """The configuration of one partition log (see :data:`CONFIG_DEFS` for names, defaults and ranges)."""

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    preallocate: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    producer_id_expiration_ms: int = 86_400_000
    producer_id_expiration_check_interval_ms: int = 600_000
    transaction_max_timeout_ms: int = 900_000
    overrides: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        for d in CONFIG_DEFS:
            value = _coerce(d, getattr(self, d.attr))
            _check(d, value)
            object.__setattr__(self, d.attr, value)
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise InvalidConfigurationError(
                f"conflict topic config setting: min.compaction.lag.ms ({self.min_compaction_lag_ms}) is greater than "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )
        # Every tiered check but the broker gate, which the caller runs with its setting (module doc).
        validate_remote_storage(self, True)
        if not self.overrides:
            defaults = LogConfig.__dataclass_fields__
            explicit = {d.name for d in CONFIG_DEFS if getattr(self, d.attr) != defaults[d.attr].default}
            object.__setattr__(self, "overrides", frozenset(explicit))

    # --- construction -------------------------------------------------------------------------------------
    @classmethod
    def from_props(
        cls, props: Mapping[str, Any] | None = None, base: LogConfig | None = None, **kwargs: Any
    ) -> LogConfig:
        """Build from dotted names (``{"segment.bytes": 1024}``) and/or keyword arguments, over ``base``."""
        values: dict[str, Any] = {}
        explicit: set[str] = set(base.overrides) if base is not None else set()
        if base is not None:
            values.update({d.attr: getattr(base, d.attr) for d in CONFIG_DEFS})
        for name, value in (props or {}).items():
            d = _BY_NAME.get(name)
            if d is None:
                raise InvalidConfigurationError(f"unknown topic configuration {name!r}")
            values[d.attr] = value
            explicit.add(name)
        for attr, value in kwargs.items():
            d = _BY_ATTR.get(attr)
            if d is None:
                raise InvalidConfigurationError(f"unknown topic configuration attribute {attr!r}")
            values[attr] = value
            explicit.add(d.name)
        return cls(**values, overrides=frozenset(explicit))

    def updated(self, props: Mapping[str, Any] | None = None, **kwargs: Any) -> LogConfig:
        """A copy with some values changed (validated again)."""
        return LogConfig.from_props(props, base=self, **kwargs)

    def to_props(self, only_overrides: bool = False) -> dict[str, Any]:
        """The values by dotted name (``cleanup.policy`` as a comma-separated string)."""
        out: dict[str, Any] = {}
        for d in CONFIG_DEFS:
            if only_overrides and d.name not in self.overrides:
                continue
            value = getattr(self, d.attr)
            out[d.name] = ",".join(value) if isinstance(value, tuple) else value
        return out

    def replace(self, **kwargs: Any) -> LogConfig:
        """``dataclasses.replace`` with validation."""
        return dataclasses.replace(self, **kwargs)

    # --- derived ------------------------------------------------------------------------------------------
    @property
    def delete(self) -> bool:
        """Whether ``cleanup.policy`` includes ``delete``."""
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        """Whether ``cleanup.policy`` includes ``compact``."""
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """``segment.ms``, capped by ``max.compaction.lag.ms`` for compacted topics (as Kafka does)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def effective_local_retention_ms(self) -> int:
        """``local.retention.ms``, or ``retention.ms`` when it is −2 (Kafka's ``LogConfig.localRetentionMs()``)."""
        if self.local_retention_ms == DEFAULT_LOCAL_RETENTION_MS:
            return self.retention_ms
        return self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``local.retention.bytes``, or ``retention.bytes`` when it is −2 (Kafka's ``localRetentionBytes()``)."""
        if self.local_retention_bytes == DEFAULT_LOCAL_RETENTION_BYTES:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def init_file_size(self) -> int:
        """Initial ``.log`` size: ``segment.bytes`` when preallocating, else 0."""
        return self.segment_bytes if self.preallocate else 0

    @property
    def timestamp_type(self) -> TimestampType:
        """``message.timestamp.type`` as an enum."""
        return TimestampType.from_name(self.message_timestamp_type)

    @property
    def target_compression(self) -> Compression | None:
        """The topic's codec, or None for ``producer`` (keep the batch's codec)."""
        if self.compression_type == "producer":
            return None
        return Compression.from_name(self.compression_type)

    def compression_level(self, codec: Compression) -> int | None:
        """The configured level for ``codec`` (None = library default)."""
        if codec is Compression.GZIP:
            return None if self.compression_gzip_level == -1 else self.compression_gzip_level
        if codec is Compression.LZ4:
            return None if self.compression_lz4_level == 9 else self.compression_lz4_level
        if codec is Compression.ZSTD:
            return self.compression_zstd_level
        return None


def validate_remote_storage(config: LogConfig, remote_log_storage_system_enable: bool) -> None:
    """Kafka's tiered-storage topic checks (``LogConfig.validateTopicLogConfigValues``), in Kafka's order.

    Nothing is checked when ``remote.storage.enable`` is false. Otherwise: the broker gate
    ``remote.log.storage.system.enable`` must be on, ``cleanup.policy`` must not include ``compact``, and when
    ``retention.bytes`` > −1 (``retention.ms`` ≠ −1) the matching ``local.retention.*`` must be −2 or neither −1
    nor larger than the total; with ``remote.log.copy.disable=true`` each ``local.retention.*`` must be −2 or
    equal to its ``retention.*``. Raises :class:`~kafkalog.errors.InvalidConfigurationError` with Kafka's text.
    """
    if not config.remote_storage_enable:
        return
    if not remote_log_storage_system_enable:
        raise InvalidConfigurationError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )
    if config.compact:
        raise InvalidConfigurationError("Remote log storage is unsupported for the compacted topics")
    checks = (
        ("local.retention.bytes", config.local_retention_bytes, "retention.bytes", config.retention_bytes),
        ("local.retention.ms", config.local_retention_ms, "retention.ms", config.retention_ms),
    )
    for local_name, local, total_name, total in checks:
        # Kafka tests retention.bytes > -1 and retention.ms != -1; retention.ms is at least -1, so both read "> -1".
        if total <= -1 or local == DEFAULT_LOCAL_RETENTION_MS:
            continue
        if local == -1:
            raise InvalidConfigurationError(
                f"Invalid value {local} for configuration {local_name}: "
                f"Value must not be -1 as {total_name} value is set as {total}."
            )
        if local > total:
            raise InvalidConfigurationError(
                f"Invalid value {local} for configuration {local_name}: "
                f"Value must not be more than {total_name} property value: {total}"
            )
    # validateRetentionConfigsWhenRemoteCopyDisabled
    if config.remote_log_copy_disable:
        if config.local_retention_bytes not in (DEFAULT_LOCAL_RETENTION_BYTES, config.retention_bytes):
            raise InvalidConfigurationError(
                "When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and `retention.bytes` "
                "must be set to the identical value because there will be no more logs copied to the remote storage."
            )
        if config.local_retention_ms not in (DEFAULT_LOCAL_RETENTION_MS, config.retention_ms):
            raise InvalidConfigurationError(
                "When `remote.log.copy.disable` is set to true, the `local.retention.ms` and `retention.ms` "
                "must be set to the identical value because there will be no more logs copied to the remote storage."
            )


def validate_remote_storage_change(old: LogConfig, new: LogConfig) -> None:
    """Kafka's ``validateTurningOffRemoteStorageWithDelete``, for a topic's config change from ``old`` to ``new``:
    turning ``remote.storage.enable`` off needs ``remote.log.delete.on.disable=true`` in the same change.
    The caller runs it with the old and the new config (``Log.update_config``, the manager's topic registry)."""
    if old.remote_storage_enable and not new.remote_storage_enable and not new.remote_log_delete_on_disable:
        raise InvalidConfigurationError(
            "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote "
            "data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If "
            "you want to disable remote storage and delete all remote data, please set "
            "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
        )


class AppendSettings:
    """What every append reads of a :class:`LogConfig`, derived once per config object: a
    :class:`~kafkalog.log.local_log.LocalLog` builds it with its config and again whenever the config is
    replaced (``update_config``), so an append reads plain attributes and checks nothing."""

    __slots__ = (
        "after_ms",
        "before_ms",
        "compact",
        "eligible",
        "flush_messages",
        "log_append_time",
        "max_message_bytes",
        "max_segment_ms",
        "segment_bytes",
    )

    def __init__(self, config: LogConfig) -> None:
        target = config.target_compression
        #: whether the append fast paths may take a batch as it is (the topic keeps the producer's codec or
        #: stores uncompressed)
        self.eligible = target is None or target is Compression.NONE
        self.log_append_time = config.timestamp_type is TimestampType.LOG_APPEND_TIME
        self.before_ms = config.message_timestamp_before_max_ms
        self.after_ms = config.message_timestamp_after_max_ms
        self.compact = config.compact
        self.max_message_bytes = config.max_message_bytes
        self.segment_bytes = config.segment_bytes
        self.max_segment_ms = config.max_segment_ms
        self.flush_messages = config.flush_messages


_AT_LEAST_ONE: Final = frozenset(
    {"num_recovery_threads_per_data_dir", "num_partitions", "max_partitions", "max_partitions_per_request"}
)


@dataclass(frozen=True)
class ManagerConfig:
    """The broker-level settings a LogManager uses (Kafka's names in :meth:`from_props`)."""

    num_recovery_threads_per_data_dir: int = 2
    log_retention_check_interval_ms: int = 300_000
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    log_initial_task_delay_ms: int = 30_000
    log_delete_delay_ms: int | None = None  # None: the default topic config's file.delete.delay.ms
    num_partitions: int = 1
    # --- partition limits (KIP-578's max.partitions; see docs/operations.md §9) ---
    #: Partitions the manager may hold in all (every topic, internal ones too); creating more is refused
    #: with PolicyViolationError (POLICY_VIOLATION) before anything is created.
    max_partitions: int = 10_000
    #: Partitions one create_topic / add_partitions call (one CreateTopics or CreatePartitions request) may
    #: create; more is refused with PolicyViolationError before anything is created.
    max_partitions_per_request: int = 1_000

    _NAMES: ClassVar[dict[str, str]] = {
        "num.recovery.threads.per.data.dir": "num_recovery_threads_per_data_dir",
        "log.retention.check.interval.ms": "log_retention_check_interval_ms",
        "log.flush.scheduler.interval.ms": "log_flush_scheduler_interval_ms",
        "log.flush.offset.checkpoint.interval.ms": "log_flush_offset_checkpoint_interval_ms",
        "log.flush.start.offset.checkpoint.interval.ms": "log_flush_start_offset_checkpoint_interval_ms",
        "replica.high.watermark.checkpoint.interval.ms": "replica_high_watermark_checkpoint_interval_ms",
        "log.initial.task.delay.ms": "log_initial_task_delay_ms",
        "log.segment.delete.delay.ms": "log_delete_delay_ms",  # Kafka's broker name for file.delete.delay.ms
        "log.delete.delay.ms": "log_delete_delay_ms",  # kafkalog's alias (how long -delete dirs are kept)
        "num.partitions": "num_partitions",
        "max.partitions": "max_partitions",
        "max.partitions.per.request": "max_partitions_per_request",
    }

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None) -> ManagerConfig:
        """Build from Kafka's dotted broker names; unknown names and out-of-range values are refused."""
        values: dict[str, int] = {}
        for name, value in (props or {}).items():
            attr = cls._NAMES.get(name)
            if attr is None:
                raise InvalidConfigurationError(f"unknown LogManager configuration {name!r}")
            try:
                number = int(value)
            except (TypeError, ValueError):
                raise InvalidConfigurationError(f"{name} must be an integer, got {value!r}") from None
            minimum = 1 if attr in _AT_LEAST_ONE else 0
            if number < minimum:
                raise InvalidConfigurationError(f"{name} must be at least {minimum}, got {number}")
            values[attr] = number
        return cls(**values)
