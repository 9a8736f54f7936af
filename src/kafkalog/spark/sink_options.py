"""What the ``kafkalog`` Spark sink accepts: its options, its input columns, and the topics it may write to.

Pure functions (no pyspark import): the writer classes in :mod:`kafkalog.spark.writer` call them on the
driver, the staging code in :mod:`kafkalog.spark.staging` on the executors.

Input columns mirror Spark's Kafka sink (``KafkaWriter.validateQuery``); names match case-insensitively and
any other column (``offset``, ``timestampType``, ... of a DataFrame read from a kafkalog or Kafka source) is
ignored:

==========  ==========================================  ========  ============================================
column      Spark type                                  required  meaning
==========  ==========================================  ========  ============================================
value       string or binary                            yes       record value (null = tombstone)
key         string or binary                            no        record key (strings as UTF-8); null = no key
topic       string                                      no [1]    target topic; a null topic fails the task
partition   int                                         no        target partition; null/missing: Kafka's
                                                                  default partitioner (murmur2(key) % n, sticky
                                                                  round robin for null keys)
headers     array<struct<key: string, value: binary>>   no        record headers (null = none)
timestamp   timestamp                                   no        record CreateTime (floor to ms); null/missing:
                                                                  the time the row is staged (SPARK-50160)
==========  ==========================================  ========  ============================================

[1] required unless the ``topic`` option is set; the option overrides the column, as in Kafka's sink.

Options (case-insensitive keys, string values, see :class:`SinkOptions`): ``path`` (the data directory, or
``.save(path)``), ``topic``, ``createTopics`` / ``createTopics.partitions`` / ``createTopics.config.<name>``
(create unknown topics at commit; without it an unknown topic is an error), ``kafka.compression.type`` (the
codec for topics whose ``compression.type`` is ``producer``; default ``none``), ``batchBytes`` (target
uncompressed size of a staged record batch, default 1 MiB, capped by the topic's ``max.message.bytes``),
``sinkId`` (streaming: the identity batch ids are deduplicated under; default the streaming query id),
``lockTimeoutMs`` (how long a commit waits for the data directory's lock, default 120 s) and
``stagingTtlMs`` (after how long an unreferenced staging directory counts as abandoned, default 24 h) and
``stagingMaxBytes`` (how much staging no commit journal names may stay before the oldest is removed ahead of
its TTL once idle for ``lockTimeoutMs`` + 60 s, default 1 GiB; the sweep runs at the start of every job and
after every commit and abort).

Kafka producer options, as Spark's Kafka sink treats them: ``kafka.key.serializer`` and
``kafka.value.serializer`` are refused with Spark's messages; ``kafka.partitioner.class`` is honoured when it
names Kafka's default partitioner (what the sink does for rows without a ``partition`` column) and refused
otherwise (a Java class cannot run here; a ``partition`` column places rows any way); ``kafka.compression.type``
is honoured; every other ``kafka.*`` option (``kafka.bootstrap.servers``, ``kafka.acks``, ``kafka.linger.ms``,
...) is ignored with one warning naming them, checked on the driver when the write is planned.

Topic metadata as executors see it (:func:`load_topic_metadata`): the LogManager's
``<data dir>/kafkalog-topics.json`` (partition count and config overrides per topic), completed by partition
directories ``<topic>-<n>`` for topics it does not list. The commit re-checks everything under the lock.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kafkalog.datadir import TOPICS_FILE, read_topics
from kafkalog.errors import KafkaError, SinkError, UnknownTopicOrPartitionError
from kafkalog.log.config import LogConfig
from kafkalog.log.names import validate_topic_name
from kafkalog.records import Compression
from kafkalog.spark.sink_layout import SPARK_DIR_NAME

__all__ = [
    "DEFAULT_PARTITIONER_CLASSES",
    "HEADERS_TYPE",
    "SPARK_DIR_NAME",
    "TOPICS_FILE",
    "ColumnPlan",
    "SinkError",
    "SinkOptions",
    "TopicMeta",
    "check_producer_options",
    "load_topic_metadata",
    "plan_columns",
    "resolve_topic",
]

HEADERS_TYPE: Final = "array<struct<key:string,value:binary>>"

_DEFAULT_BATCH_BYTES: Final = 1 << 20
_DEFAULT_LOCK_TIMEOUT_MS: Final = 120_000
_DEFAULT_STAGING_TTL_MS: Final = 24 * 3600 * 1000
_DEFAULT_STAGING_MAX_BYTES: Final = 1 << 30
_PARTITION_DIR: Final = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>[0-9]+)$")


_log = logging.getLogger("kafkalog.spark")

#: Refused as Spark's Kafka sink refuses them (``KafkaSourceProvider.kafkaParamsForProducer``).
_REFUSED_PRODUCER_OPTIONS: Final = {
    "kafka.key.serializer": (
        "Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer."
    ),
    "kafka.value.serializer": (
        "Kafka option 'value.serializer' is not supported as values are serialized with ByteArraySerializer."
    ),
}
#: ``kafka.partitioner.class`` values that mean what the sink does: Kafka's default partitioner.
DEFAULT_PARTITIONER_CLASSES: Final = frozenset(
    {
        "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
    }
)
_HONOURED_PRODUCER_OPTIONS: Final = frozenset({"kafka.compression.type", "kafka.partitioner.class"})


def check_producer_options(options: Mapping[str, str]) -> list[str]:
    """Check the ``kafka.*`` options of a write as Spark's Kafka sink does (see the module doc).

    Raises :class:`SinkError` for a refused option; returns the ignored ones (sorted, as given), for which
    the caller logs one warning.
    """
    lowered = {key.lower(): (key, value) for key, value in options.items()}
    for name, message in _REFUSED_PRODUCER_OPTIONS.items():
        if name in lowered:
            raise SinkError(message)
    if "kafka.partitioner.class" in lowered:
        value = lowered["kafka.partitioner.class"][1].strip()
        if value not in DEFAULT_PARTITIONER_CLASSES:
            raise SinkError(
                f"kafka.partitioner.class {value!r} is not supported: the kafkalog sink places rows without a "
                "'partition' column with Kafka's default partitioner (murmur2 of the key, sticky for null "
                "keys), org.apache.kafka.clients.producer.internals.DefaultPartitioner; to place rows "
                "otherwise, compute a 'partition' column (an int) in the DataFrame"
            )
    return sorted(
        key
        for low, (key, _) in lowered.items()
        if low.startswith("kafka.") and low not in _HONOURED_PRODUCER_OPTIONS
    )


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive option lookup (Spark's ``CaseInsensitiveDict`` lower-cases keys; plain dicts may not)."""
    if name in options:
        return options[name]
    low = name.lower()
    for key, value in options.items():
        if key.lower() == low:
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise SinkError(f"option {name} must be true or false, got {raw!r}")


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SinkError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SinkError(f"option {name} must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, parsed and checked (see the module docstring for their meaning)."""

    path: str
    topic: str | None = None
    create_topics: bool = False
    create_partitions: int = 1
    create_config: Mapping[str, str] = field(default_factory=dict)
    compression: Compression = Compression.NONE
    batch_bytes: int = _DEFAULT_BATCH_BYTES
    sink_id: str | None = None
    lock_timeout_ms: int = _DEFAULT_LOCK_TIMEOUT_MS
    staging_ttl_ms: int = _DEFAULT_STAGING_TTL_MS
    staging_max_bytes: int = _DEFAULT_STAGING_MAX_BYTES

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Parse Spark's option mapping; raises :class:`SinkError` with the offending option named."""
        ignored = check_producer_options(options)
        if ignored:
            _log.warning(
                "Kafka producer options ignored by the kafkalog sink (it appends to log files, not to "
                "brokers): %s",
                ", ".join(ignored),
            )
        path = _get(options, "path")
        if not path:
            raise SinkError(
                "the kafkalog sink needs a data directory: .option('path', dir) or .save(dir) "
                "(the directory a LogManager writes, visible at the same path on every executor)"
            )
        topic = _get(options, "topic")
        if topic is not None:
            topic = topic.strip()
            _check_topic_name(topic)
        create_config: dict[str, str] = {}
        prefix = "createtopics.config."
        for key, value in options.items():
            if key.lower().startswith(prefix):
                create_config[key[len(prefix) :].lower()] = value
        if create_config:
            try:
                LogConfig.from_props(create_config)
            except KafkaError as exc:
                raise SinkError(f"bad createTopics.config.* option: {exc}") from None
        codec_name = _get(options, "kafka.compression.type") or _get(options, "compression") or "none"
        try:
            compression = Compression.from_name(codec_name.strip().lower())
        except (ValueError, KeyError):
            raise SinkError(f"unknown compression {codec_name!r} (none, gzip, snappy, lz4 or zstd)") from None
        sink_id = _get(options, "sinkId")
        if sink_id is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,200}", sink_id):
            raise SinkError(f"option sinkId must match [A-Za-z0-9._-]{{1,200}}, got {sink_id!r}")
        return cls(
            path=os.path.abspath(os.path.expanduser(path)),
            topic=topic,
            create_topics=_bool(options, "createTopics", False),
            create_partitions=_int(options, "createTopics.partitions", 1, 1) or 1,
            create_config=create_config,
            compression=compression,
            batch_bytes=_int(options, "batchBytes", _DEFAULT_BATCH_BYTES, 1024) or _DEFAULT_BATCH_BYTES,
            sink_id=sink_id,
            lock_timeout_ms=_int(options, "lockTimeoutMs", _DEFAULT_LOCK_TIMEOUT_MS, 0) or 0,
            staging_ttl_ms=_int(options, "stagingTtlMs", _DEFAULT_STAGING_TTL_MS, 0) or 0,
            staging_max_bytes=_int(options, "stagingMaxBytes", _DEFAULT_STAGING_MAX_BYTES, 0) or 0,
        )


def _check_topic_name(topic: str) -> None:
    try:
        validate_topic_name(topic)
    except KafkaError as exc:
        raise SinkError(str(exc)) from None


# --- columns -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnPlan:
    """Which input column (its actual name) feeds each Kafka field; None = absent."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None
    timestamp: str | None = None


def _norm(type_string: str) -> str:
    return re.sub(r"\s+", "", type_string.lower())


def plan_columns(columns: Mapping[str, str] | list[tuple[str, str]], topic_option: str | None) -> ColumnPlan:
    """Check the input columns as Spark's Kafka sink does and say which column feeds which field.

    ``columns`` maps each column name to its Spark type as ``DataType.simpleString()`` (``"binary"``,
    ``"array<struct<key:string,value:binary>>"``, ...). Raises :class:`SinkError` naming the column.
    """
    items = list(columns.items()) if isinstance(columns, Mapping) else list(columns)
    by_lower: dict[str, tuple[str, str]] = {}
    for name, type_string in items:
        by_lower.setdefault(name.lower(), (name, _norm(type_string)))

    def pick(field_name: str, allowed: tuple[str, ...], what: str) -> str | None:
        found = by_lower.get(field_name)
        if found is None:
            return None
        name, type_string = found
        if type_string not in allowed:
            raise SinkError(
                f"{field_name} attribute unsupported type {type_string}. {field_name} must be {what}"
            )
        return name

    if "value" not in by_lower:
        raise SinkError("required attribute 'value' not found (the kafkalog sink writes a value column)")
    value = pick("value", ("string", "binary"), "a(n) string or binary")
    assert value is not None
    topic = None
    if topic_option is None:
        topic = pick("topic", ("string",), "a(n) string")
        if topic is None:
            raise SinkError(
                "topic option required when no 'topic' attribute is present. Use the topic option for "
                "setting a topic."
            )
    return ColumnPlan(
        value=value,
        key=pick("key", ("string", "binary"), "a(n) string or binary"),
        topic=topic,
        partition=pick("partition", ("int",), "a(n) int"),
        headers=pick("headers", (HEADERS_TYPE,), f"a(n) {HEADERS_TYPE}"),
        timestamp=pick("timestamp", ("timestamp",), "a(n) timestamp"),
    )


# --- topics ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicMeta:
    """A topic as the sink sees it: partition count and effective config (defaults + overrides)."""

    partitions: int
    config: LogConfig


def load_topic_metadata(data_dir: str | Path) -> dict[str, TopicMeta]:
    """Topics of a data directory from ``kafkalog-topics.json`` plus ``<topic>-<n>`` directories (read-only).

    Deleted (``-delete``), future and stray partition directories, hidden directories and files are ignored.
    A topic only found as directories gets the default :class:`LogConfig` and ``max(n) + 1`` partitions.
    """
    root = Path(data_dir)
    out: dict[str, TopicMeta] = {}
    try:
        doc = read_topics(root)
    except (KafkaError, OSError) as exc:
        raise SinkError(f"cannot read {root / TOPICS_FILE}: {exc}") from None
    for name, topic_meta in (doc.topics if doc is not None else {}).items():
        try:
            config = LogConfig.from_props(dict(topic_meta.config))
        except KafkaError:
            config = LogConfig()
        out[name] = TopicMeta(topic_meta.partitions, config)
    seen: dict[str, int] = {}
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        entries = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        m = _PARTITION_DIR.match(entry.name)
        if m is None:
            continue
        topic, partition = m.group("topic"), int(m.group("partition"))
        seen[topic] = max(seen.get(topic, 0), partition + 1)
    for topic, count in seen.items():
        known = out.get(topic)
        if known is None:
            out[topic] = TopicMeta(count, LogConfig())
        elif known.partitions < count:
            out[topic] = TopicMeta(count, known.config)
    return out


def resolve_topic(
    topic: str, metadata: Mapping[str, TopicMeta], options: SinkOptions, data_dir: str | Path
) -> TopicMeta:
    """The topic's metadata, or what ``createTopics`` would create; :class:`SinkError` for an unknown topic."""
    known = metadata.get(topic)
    if known is not None and known.partitions > 0:
        return known
    _check_topic_name(topic)
    if not options.create_topics:
        err = SinkError(
            f"topic {topic!r} does not exist in {data_dir}; create it first (LogManager.create_topic or "
            "`kafkalog` tools) or let the sink create it: .option('createTopics', 'true')"
            ".option('createTopics.partitions', N)"
        )
        raise err from UnknownTopicOrPartitionError(topic)
    return TopicMeta(options.create_partitions, LogConfig.from_props(dict(options.create_config)))
