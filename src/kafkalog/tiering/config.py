"""The configuration of tiering: Kafka's ``RemoteLogManagerConfig`` names and the Aiven plugin's ``rsm.config.*``.

Invariant owned here: a :class:`RemoteLogManagerConfig` is validated when it is made (a bad value is an
:class:`~kafkalog.errors.InvalidConfigurationError` naming the key, never its value when the key is a
secret), and its ``repr`` never shows a storage credential (the storage options are shown through
:func:`kafkalog.objstore.redact`; key files are named by path, their content is never read into the config).

Keys (``from_props``; values may be strings, as in a properties file)::

    remote.log.storage.system.enable                 bool, default false (the broker-wide gate)
    remote.log.manager.task.interval.ms              int > 0, default 30000 (copy / expiration period)
    remote.log.metadata.topic.num.partitions         int > 0, default 50
    remote.log.index.file.cache.total.size.bytes     int > 0, default 1 GiB (fetched remote indexes kept)
    remote.log.manager.copy.max.bytes.per.second     int > 0, default 2^63-1 (no quota): copies of all partitions
    remote.log.manager.copy.quota.window.num         int > 0, default 11  } the quota's rate is measured over
    remote.log.manager.copy.quota.window.size.seconds int > 0, default 1  } num x size seconds
    remote.log.manager.fetch.max.bytes.per.second    int > 0, default 2^63-1 (no quota): remote reads serving fetches
    remote.log.manager.fetch.quota.window.num        int > 0, default 11  } the fetch quota's rate is measured
    remote.log.manager.fetch.quota.window.size.seconds int > 0, default 1 } over num x size seconds
    remote.log.reader.threads                        int > 0, default 10 (threads reading the remote tier for fetches)
    remote.log.reader.max.pending.tasks              int > 0, default 100 (reads queued for them; more are refused)
    remote.fetch.max.wait.ms                         int in [1, 2^31-1], default 500 (a fetch's wait for its remote read)
    remote.list.offsets.request.timeout.ms           int > 0, default 30000 (a ListOffsets' wait for its remote lookups)
    remote.log.storage.manager.impl.prefix           default "rsm.config."
    broker.id | node.id                              int >= 0, default 0 (written into the metadata)
    <prefix>storage.url                              the archive's URL (s3://bucket/path, file://, memory://)
    <prefix>storage.<option>                         storage options (Hadoop names: fs.s3a.endpoint, ...)
    <prefix>key.prefix                               default "" (the plugin's object key prefix)
    <prefix>chunk.size                               int in [1, 2^31-1], default 4 MiB
    <prefix>compression.enabled                      bool, default false (zstd per chunk)
    <prefix>encryption.enabled                       bool, default false (AES-256-GCM per chunk)
    <prefix>encryption.key.pair.id                   the key pair new segments are encrypted with
    <prefix>encryption.key.pairs.<id>.public.key.file / .private.key.file   PEM files of each key pair
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kafkalog.errors import InvalidConfigurationError
from kafkalog.objstore.options import public_url, redact

__all__ = [
    "DEFAULT_REMOTE_FETCH_MAX_WAIT_MS",
    "DEFAULT_REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS",
    "DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES",
    "DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS",
    "DEFAULT_REMOTE_LOG_READER_MAX_PENDING_TASKS",
    "DEFAULT_REMOTE_LOG_READER_THREADS",
    "DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX",
    "DEFAULT_RSM_CHUNK_SIZE",
    "RemoteLogManagerConfig",
    "RsmConfig",
]

DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS: Final = 30_000
DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES: Final = 1024 * 1024 * 1024
DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX: Final = "rsm.config."
#: Kafka's ``remote.log.reader.threads`` / ``remote.log.reader.max.pending.tasks`` / ``remote.fetch.max.wait.ms``.
DEFAULT_REMOTE_LOG_READER_THREADS: Final = 10
DEFAULT_REMOTE_LOG_READER_MAX_PENDING_TASKS: Final = 100
DEFAULT_REMOTE_FETCH_MAX_WAIT_MS: Final = 500
DEFAULT_REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS: Final = 30_000
#: The plugin's recommended ``chunk.size``.
DEFAULT_RSM_CHUNK_SIZE: Final = 4 * 1024 * 1024
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidConfigurationError(
        f"Invalid value {value!r} for configuration {key}: Expected value to be a boolean"
    )


def _int(key: str, value: Any, low: int, high: int = 2**63 - 1) -> int:
    try:
        number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value).strip())
    except ValueError:
        raise InvalidConfigurationError(
            f"Invalid value {value!r} for configuration {key}: Not a number of type LONG"
        ) from None
    if not low <= number <= high:
        raise InvalidConfigurationError(
            f"Invalid value {number} for configuration {key}: Value must be in [{low}, {high}]"
        )
    return number


@dataclass(frozen=True)
class RsmConfig:
    """The Aiven plugin's settings (``rsm.config.*`` without the prefix) and the archive's storage."""

    storage_url: str = ""
    #: Storage options (Hadoop's names, ``fs.s3a.endpoint`` ...); shown redacted.
    storage_options: Mapping[str, str] = field(default_factory=dict)
    key_prefix: str = ""
    chunk_size: int = DEFAULT_RSM_CHUNK_SIZE
    compression_enabled: bool = False
    encryption_enabled: bool = False
    encryption_key_pair_id: str | None = None
    #: ``{key pair id: (public key PEM file, private key PEM file)}``.
    encryption_key_pairs: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _int("rsm.config.chunk.size", self.chunk_size, 1, _INT32_MAX)
        if self.encryption_enabled:
            kid = self.encryption_key_pair_id
            if not kid:
                raise InvalidConfigurationError(
                    "rsm.config.encryption.key.pair.id must be set when rsm.config.encryption.enabled is true"
                )
            if kid not in self.encryption_key_pairs:
                raise InvalidConfigurationError(
                    f"rsm.config.encryption.key.pair.id {kid!r} has no rsm.config.encryption.key.pairs.{kid}"
                    ".public.key.file / .private.key.file"
                )

    def __repr__(self) -> str:
        return (
            f"RsmConfig(storage_url={public_url(self.storage_url)!r}, storage_options={redact(self.storage_options)!r}, "
            f"key_prefix={self.key_prefix!r}, chunk_size={self.chunk_size}, "
            f"compression_enabled={self.compression_enabled}, encryption_enabled={self.encryption_enabled}, "
            f"encryption_key_pair_id={self.encryption_key_pair_id!r}, "
            f"encryption_key_pairs={sorted(self.encryption_key_pairs)!r})"
        )

    @classmethod
    def from_props(cls, props: Mapping[str, Any], prefix: str = "") -> RsmConfig:
        """The settings under ``prefix`` (``rsm.config.``) of ``props``; other keys are not looked at."""
        own = {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}
        storage = {k[len("storage.") :]: str(v) for k, v in own.items() if k.startswith("storage.")}
        url = storage.pop("url", "")
        pairs: dict[str, dict[str, str]] = {}
        for key, value in own.items():
            if key.startswith("encryption.key.pairs."):
                rest = key[len("encryption.key.pairs.") :]
                for suffix, slot in ((".public.key.file", "public"), (".private.key.file", "private")):
                    if rest.endswith(suffix) and rest[: -len(suffix)]:
                        pairs.setdefault(rest[: -len(suffix)], {})[slot] = str(value)
        key_pairs: dict[str, tuple[str, str]] = {}
        for kid, files in pairs.items():
            if set(files) != {"public", "private"}:
                raise InvalidConfigurationError(
                    f"{prefix}encryption.key.pairs.{kid} needs both .public.key.file and .private.key.file"
                )
            key_pairs[kid] = (files["public"], files["private"])
        return cls(
            storage_url=url,
            storage_options=storage,
            key_prefix=str(own.get("key.prefix", "")),
            chunk_size=_int(
                f"{prefix}chunk.size", own.get("chunk.size", DEFAULT_RSM_CHUNK_SIZE), 1, _INT32_MAX
            ),
            compression_enabled=_bool(f"{prefix}compression.enabled", own.get("compression.enabled", False)),
            encryption_enabled=_bool(f"{prefix}encryption.enabled", own.get("encryption.enabled", False)),
            encryption_key_pair_id=(
                str(own["encryption.key.pair.id"]) if "encryption.key.pair.id" in own else None
            ),
            encryption_key_pairs=key_pairs,
        )


#: ``(key, attribute, upper bound, default)`` of the remote read settings (Kafka's types: LONG, INT): the fetch
#: quota, the reader pool and the remote fetch's wait; each at least 1.
_READ_KEYS: Final = (
    (
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote_log_manager_fetch_max_bytes_per_second",
        _INT64_MAX,
        _INT64_MAX,
    ),
    (
        "remote.log.manager.fetch.quota.window.num",
        "remote_log_manager_fetch_quota_window_num",
        _INT32_MAX,
        11,
    ),
    (
        "remote.log.manager.fetch.quota.window.size.seconds",
        "remote_log_manager_fetch_quota_window_size_seconds",
        _INT32_MAX,
        1,
    ),
    ("remote.log.reader.threads", "remote_log_reader_threads", _INT32_MAX, DEFAULT_REMOTE_LOG_READER_THREADS),
    (
        "remote.log.reader.max.pending.tasks",
        "remote_log_reader_max_pending_tasks",
        _INT32_MAX,
        DEFAULT_REMOTE_LOG_READER_MAX_PENDING_TASKS,
    ),
    ("remote.fetch.max.wait.ms", "remote_fetch_max_wait_ms", _INT32_MAX, DEFAULT_REMOTE_FETCH_MAX_WAIT_MS),
    (
        "remote.list.offsets.request.timeout.ms",
        "remote_list_offsets_request_timeout_ms",
        _INT64_MAX,
        DEFAULT_REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS,
    ),
)


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """Kafka's ``RemoteLogManagerConfig`` (the keys kafkalog implements) plus the RSM's settings."""

    remote_log_storage_system_enable: bool = False
    remote_log_manager_task_interval_ms: int = DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS
    remote_log_metadata_topic_num_partitions: int = 50
    remote_log_index_file_cache_total_size_bytes: int = DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES
    remote_log_storage_manager_impl_prefix: str = DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX
    remote_log_manager_copy_max_bytes_per_second: int = _INT64_MAX
    remote_log_manager_copy_quota_window_num: int = 11
    remote_log_manager_copy_quota_window_size_seconds: int = 1
    remote_log_manager_fetch_max_bytes_per_second: int = _INT64_MAX
    remote_log_manager_fetch_quota_window_num: int = 11
    remote_log_manager_fetch_quota_window_size_seconds: int = 1
    remote_log_reader_threads: int = DEFAULT_REMOTE_LOG_READER_THREADS
    remote_log_reader_max_pending_tasks: int = DEFAULT_REMOTE_LOG_READER_MAX_PENDING_TASKS
    remote_fetch_max_wait_ms: int = DEFAULT_REMOTE_FETCH_MAX_WAIT_MS
    remote_list_offsets_request_timeout_ms: int = DEFAULT_REMOTE_LIST_OFFSETS_REQUEST_TIMEOUT_MS
    #: Kafka's ``broker.id`` / ``node.id``: written into every metadata record.
    broker_id: int = 0
    rsm: RsmConfig = field(default_factory=RsmConfig)

    def __post_init__(self) -> None:
        _int("remote.log.manager.task.interval.ms", self.remote_log_manager_task_interval_ms, 1)
        _int(
            "remote.log.metadata.topic.num.partitions",
            self.remote_log_metadata_topic_num_partitions,
            1,
            _INT32_MAX,
        )
        _int(
            "remote.log.index.file.cache.total.size.bytes",
            self.remote_log_index_file_cache_total_size_bytes,
            1,
        )
        _int("broker.id", self.broker_id, 0, _INT32_MAX)
        _int(
            "remote.log.manager.copy.max.bytes.per.second",
            self.remote_log_manager_copy_max_bytes_per_second,
            1,
        )
        _int(
            "remote.log.manager.copy.quota.window.num",
            self.remote_log_manager_copy_quota_window_num,
            1,
            _INT32_MAX,
        )
        _int(
            "remote.log.manager.copy.quota.window.size.seconds",
            self.remote_log_manager_copy_quota_window_size_seconds,
            1,
            _INT32_MAX,
        )
        for key, attr, high, _ in _READ_KEYS:
            _int(key, getattr(self, attr), 1, high)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> RemoteLogManagerConfig:
        """Read the keys of the module docstring from ``props`` (unknown keys are the caller's)."""
        prefix = str(
            props.get(
                "remote.log.storage.manager.impl.prefix", DEFAULT_REMOTE_LOG_STORAGE_MANAGER_IMPL_PREFIX
            )
        )
        broker = props.get("broker.id", props.get("node.id", 0))
        return cls(
            remote_log_storage_system_enable=_bool(
                "remote.log.storage.system.enable", props.get("remote.log.storage.system.enable", False)
            ),
            remote_log_manager_task_interval_ms=_int(
                "remote.log.manager.task.interval.ms",
                props.get("remote.log.manager.task.interval.ms", DEFAULT_REMOTE_LOG_MANAGER_TASK_INTERVAL_MS),
                1,
            ),
            remote_log_metadata_topic_num_partitions=_int(
                "remote.log.metadata.topic.num.partitions",
                props.get("remote.log.metadata.topic.num.partitions", 50),
                1,
                _INT32_MAX,
            ),
            remote_log_index_file_cache_total_size_bytes=_int(
                "remote.log.index.file.cache.total.size.bytes",
                props.get(
                    "remote.log.index.file.cache.total.size.bytes",
                    DEFAULT_REMOTE_LOG_INDEX_FILE_CACHE_TOTAL_SIZE_BYTES,
                ),
                1,
            ),
            remote_log_storage_manager_impl_prefix=prefix,
            remote_log_manager_copy_max_bytes_per_second=_int(
                "remote.log.manager.copy.max.bytes.per.second",
                props.get("remote.log.manager.copy.max.bytes.per.second", _INT64_MAX),
                1,
            ),
            remote_log_manager_copy_quota_window_num=_int(
                "remote.log.manager.copy.quota.window.num",
                props.get("remote.log.manager.copy.quota.window.num", 11),
                1,
                _INT32_MAX,
            ),
            remote_log_manager_copy_quota_window_size_seconds=_int(
                "remote.log.manager.copy.quota.window.size.seconds",
                props.get("remote.log.manager.copy.quota.window.size.seconds", 1),
                1,
                _INT32_MAX,
            ),
            broker_id=_int("broker.id", broker, 0, _INT32_MAX),
            rsm=RsmConfig.from_props(props, prefix),
            **{attr: _int(key, props.get(key, default), 1, high) for key, attr, high, default in _READ_KEYS},
        )
