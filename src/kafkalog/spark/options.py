"""Options of the ``kafkalog`` Spark source, parsed and checked as Spark's Kafka source checks them.

Names are case-insensitive (Spark hands a ``CaseInsensitiveDict`` whose keys are lower-cased); every value
is a string. Errors are ``ValueError`` (Spark's ``IllegalArgumentException``) with Spark's wording.

==================================  ====================================================================
option                              meaning
==================================  ====================================================================
path / paths                        the data directory (Kafka's ``log.dirs``); replaces
                                    ``kafka.bootstrap.servers`` (which is accepted and ignored).
                                    ``paths`` is the JSON list Spark passes for ``load([a, b])``.
                                    Made absolute on the driver (``~`` expanded), so executors
                                    read the directory the driver saw, whatever their own cwd.
                                    A URL (``s3://bucket/prefix``, ``s3a://``, ``gs://``,
                                    ``az://``, ``abfss://``) reads object storage: a log-dir copy or
                                    a tiered-storage archive (:mod:`kafkalog.spark.remote`)
fs.* / spark.hadoop.fs.* /          storage options under Hadoop's names (``fs.s3a.endpoint``,
storage.*                           ``fs.s3a.access.key``, ...): :func:`kafkalog.objstore.open_store`
tieredPath                          kafkalog only: the URL of the tiered-storage archive of the
                                    local data directory read (its older segments)
layout                              kafkalog only: ``logdir`` | ``aiven`` | ``local-tiered``
                                    (default: detected from the keys)
keyRing                             kafkalog only: JSON ``{"kekId": "PEM text or file path"}`` to
                                    decrypt an encrypted Aiven archive
strict                              kafkalog only: orphans, overlaps and gaps of an archive are
                                    errors (default ``false``: warnings)
subscribe / subscribePattern /      exactly one is required: comma-separated topics / a regular
assign                              expression (``re.fullmatch``) / JSON ``{"t": [0, 1]}``
startingOffsets, endingOffsets      ``earliest`` | ``latest`` | JSON ``{"t": {"0": 23, "1": -2}}``
                                    (-2 earliest, -1 latest); see :mod:`kafkalog.spark.offsets`
startingTimestamp,                  a ms timestamp for every partition / JSON per partition;
startingOffsetsByTimestamp          precedence: timestamp > by-timestamp > offsets
startingOffsetsByTimestampStrategy  ``error`` (default) | ``latest``: when no offset matches
endingTimestamp,                    batch only; no match means latest
endingOffsetsByTimestamp
failOnDataLoss                      ``true`` (default): fail when requested offsets are gone; else
                                    skip forward with a warning
includeHeaders                      adds the ``headers`` column
minPartitions,                      split large offset ranges over more Spark partitions
maxRecordsPerPartition
maxOffsetsPerTrigger,               streaming rate limits (ignored with a warning in batch queries)
minOffsetsPerTrigger,
maxTriggerDelay
kafka.isolation.level               ``read_uncommitted`` (default: up to the high watermark) or
                                    ``read_committed`` (up to the LSO, aborted transactions dropped)
arrowBatchRows                      kafkalog only: rows per Arrow batch handed to Spark (default 32768)
filterPushdown                      kafkalog only, batch: ``true`` lets the reader take Spark's pushed
                                    filters (needs ``spark.sql.python.filterPushdown.enabled=true``);
                                    default ``false``; see :mod:`kafkalog.spark.pushdown`
==================================  ====================================================================

Rejected as Spark rejects them: ``kafka.auto.offset.reset``, ``kafka.key.deserializer``,
``kafka.value.deserializer``, ``kafka.enable.auto.commit``, ``kafka.interceptor.classes``. Accepted and
ignored with a warning: ``kafka.group.id`` (Spark's warning), and in one warning naming them
``groupIdPrefix``, ``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.numRetries``, ``fetchOffset.retryIntervalMs``
and every other ``kafka.*`` option (``kafka.bootstrap.servers`` included). The table of every source and
sink option beside Spark's Kafka integration guide is in ``docs/spark.md``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kafkalog.readonly.log import is_url, local_path, recorded_archive_url
from kafkalog.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    parse_assign,
    parse_offset_spec,
)
from kafkalog.spark.remote import RemoteSpec, is_storage_option
from kafkalog.tiered.crypto import parse_key_ring_json
from kafkalog.tiered.detect import LAYOUTS

__all__ = [
    "DEFAULT_ARROW_BATCH_ROWS",
    "SourceOptions",
    "Strategy",
    "parse_bool",
    "parse_source_options",
    "time_string_as_ms",
]

_log = logging.getLogger("kafkalog.spark")

DEFAULT_ARROW_BATCH_ROWS: Final = 32768
DEFAULT_MAX_TRIGGER_DELAY_MS: Final = 15 * 60 * 1000
_STRATEGY_KEYS: Final = ("assign", "subscribe", "subscribepattern")

_REJECTED: Final = {
    "kafka.auto.offset.reset": (
        "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source option 'startingoffsets' "
        "to 'earliest' or 'latest' to specify where to start. Structured Streaming manages which offsets are "
        "consumed internally, rather than relying on the kafkaConsumer to do it. This will ensure that no "
        "data is missed when new topics/partitions are dynamically subscribed. Note that 'startingoffsets' "
        "only applies when a new Streaming query is started, and that resuming will always pick up from "
        "where the query left off. See the docs for more details."
    ),
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
    ),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays with "
        "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values."
    ),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

_IGNORED: Final = frozenset(
    {"groupidprefix", "kafkaconsumer.polltimeoutms", "fetchoffset.numretries", "fetchoffset.retryintervalms"}
)
_HONOURED_KAFKA: Final = frozenset({"kafka.isolation.level", "kafka.group.id"})  # group.id: its own warning

_CUSTOM_GROUP_ID_WARNING: Final = (
    "Kafka option 'kafka.group.id' has been set on this query; kafkalog reads files and has no consumer "
    "groups, so it is ignored."
)

_TIME_UNITS: Final = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_TIME = re.compile(r"^(-?[0-9]+)([a-z]+)?$")


def parse_bool(name: str, value: str) -> bool:
    """Scala's ``String.toBoolean``: ``true``/``false`` in any case, anything else is an error."""
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"option '{name}': for input string: \"{value}\" (expected true or false)")


def _parse_int(name: str, value: str, *, bits: int = 64) -> int:
    try:
        result = int(value.strip())
    except ValueError:
        raise ValueError(f"option '{name}': for input string: \"{value}\" (expected an integer)") from None
    if not -(1 << (bits - 1)) <= result < 1 << (bits - 1):
        raise ValueError(f"option '{name}': {value} is out of range for a {bits}-bit integer")
    return result


def time_string_as_ms(value: str) -> int:
    """Spark's ``JavaUtils.timeStringAsMs``: ``15m``, ``30s``, ``100ms``, ``2h``, ``1d``; no unit = ms."""
    m = _TIME.match(value.strip().lower())
    if m is None or (m.group(2) is not None and m.group(2) not in _TIME_UNITS):
        raise ValueError(
            f"Time must be specified as seconds (s), milliseconds (ms), microseconds (us), minutes (m or min), "
            f"hour (h), or day (d). E.g. 50s, 100ms, or 250us. Failed to parse time string: {value}"
        )
    return int(int(m.group(1)) * _TIME_UNITS[m.group(2) or "ms"])


@dataclass(frozen=True)
class Strategy:
    """Which partitions to read: ``kind`` is ``assign``, ``subscribe`` or ``subscribepattern``."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is selected (for ``assign``: whether any of its partitions is)."""
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribepattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


@dataclass(frozen=True)
class SourceOptions:
    """Parsed source options (see the module doc); picklable."""

    paths: tuple[str, ...]
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec
    starting_no_match_latest: bool = False
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    read_committed: bool = False
    arrow_batch_rows: int = DEFAULT_ARROW_BATCH_ROWS
    filter_pushdown: bool = False
    #: Storage options (credentials among them: never in the ``repr``).
    storage_options: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    tiered_path: str | None = None
    layout: str | None = None
    key_ring: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    strict: bool = False

    def remote_spec(self, path: str) -> RemoteSpec | None:
        """What executors need to open ``path`` when it is not a plain local directory (None when it is; a
        local data dir that records its tiered-storage archive is not plain: its storage options travel)."""
        if not is_url(path) and self.tiered_path is None and recorded_archive_url(path) is None:
            return None
        return RemoteSpec(
            path,
            self.storage_options,
            self.layout if is_url(path) else None,
            self.tiered_path,
            self.key_ring,
            self.strict,
        )


def _key_ring(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(parse_key_ring_json(text, "option 'keyRing'").items()))


def _paths(options: Mapping[str, str]) -> tuple[str, ...]:
    paths: list[str] = []
    if options.get("paths"):
        try:
            parsed = json.loads(options["paths"])
        except ValueError:
            parsed = None
        if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
            raise ValueError(f"option 'paths' must be a JSON list of directories, got {options['paths']}")
        paths.extend(parsed)
    if options.get("path"):
        paths.insert(0, options["path"])
    if not paths:
        raise ValueError(
            "Option 'path' must be specified: the kafkalog data directory "
            "(spark.read.format('kafkalog').load('/data/dir') or .option('path', ...))"
        )
    return tuple(
        dict.fromkeys(
            p if is_url(p) else os.path.abspath(os.path.expanduser(str(local_path(p)))) for p in paths
        )
    )


def _strategy(options: Mapping[str, str]) -> Strategy:
    given = [k for k in _STRATEGY_KEYS if k in options]
    if not given:
        raise ValueError(
            "One of the following options must be specified for Kafka source: subscribe, subscribepattern, "
            "assign. See the docs for more details."
        )
    if len(given) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka source: subscribe, "
            "subscribepattern, assign. See the docs for more details."
        )
    kind = given[0]
    value = options[kind]
    if kind == "assign":
        if not value.strip().startswith("{"):
            raise ValueError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        return Strategy(kind, assigned=tuple(parse_assign(value)))
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ValueError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return Strategy(kind, topics=topics)
    pattern = value.strip()
    if not pattern:
        raise ValueError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid subscribePattern {pattern!r}: {exc}") from None
    return Strategy(kind, pattern=pattern)


def _limit_spec(
    options: Mapping[str, str], global_ts_key: str, by_ts_key: str, offsets_key: str, default: OffsetSpec
) -> OffsetSpec:
    """``KafkaSourceProvider.getKafkaOffsetRangeLimit``: timestamp > by-timestamp > offsets > default."""
    if global_ts_key in options:
        text = options[global_ts_key].strip()
        try:
            return SpecificTimestamps(global_timestamp=int(text))
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if by_ts_key in options:
        return parse_offset_spec(options[by_ts_key], timestamps=True)
    if offsets_key in options:
        return parse_offset_spec(options[offsets_key])
    return default


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check and parse the options of a batch (``streaming=False``) or streaming read."""
    opts = {k.lower(): v for k, v in options.items()}
    for key, message in _REJECTED.items():
        if key in opts:
            raise ValueError(message)
    if "kafka.group.id" in opts:
        _log.warning(_CUSTOM_GROUP_ID_WARNING)
    ignored = sorted(
        k for k in opts if k in _IGNORED or (k.startswith("kafka.") and k not in _HONOURED_KAFKA)
    )
    if ignored:
        _log.warning(
            "Kafka consumer options ignored by the kafkalog source (it reads log files, not brokers): %s",
            ", ".join(ignored),
        )
    if streaming:
        if "endingoffsets" in opts:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in opts:
            raise ValueError("ending timestamp not valid in streaming queries")
    strategy = _strategy(opts)
    paths = _paths(opts)
    no_match = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if no_match not in ("error", "latest"):
        raise ValueError(f"No value found for '{no_match.upper()}' (startingOffsetsByTimestampStrategy)")
    starting = _limit_spec(
        opts,
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "startingoffsets",
        LATEST if streaming else EARLIEST,
    )
    ending = _limit_spec(opts, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets", LATEST)
    if not streaming:
        _check_batch_limits(starting, ending)
    min_partitions = None
    if "minpartitions" in opts:
        min_partitions = _parse_int("minPartitions", opts["minpartitions"], bits=32)
        if min_partitions <= 0:
            raise ValueError("minPartitions must be positive")
    max_records = None
    if "maxrecordsperpartition" in opts:
        max_records = _parse_int("maxRecordsPerPartition", opts["maxrecordsperpartition"])
        if max_records <= 0:
            raise ValueError("maxRecordsPerPartition must be positive")
    max_per_trigger = min_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = _parse_int("maxOffsetsPerTrigger", opts["maxoffsetspertrigger"])
    if "minoffsetspertrigger" in opts:
        min_per_trigger = _parse_int("minOffsetsPerTrigger", opts["minoffsetspertrigger"])
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise ValueError(
            f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
            f"maxOffsetsPerTrigger({max_per_trigger})."
        )
    delay = time_string_as_ms(opts.get("maxtriggerdelay", "15m"))
    if not streaming:
        for key, name in (
            ("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
            ("minoffsetspertrigger", "minOffsetsPerTrigger"),
            ("maxtriggerdelay", "maxTriggerDelay"),
        ):
            if key in opts:
                _log.warning("%s option ignored in batch queries", name)
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ValueError(
            f"Invalid value {opts['kafka.isolation.level']} for configuration isolation.level: "
            "String must be one of: read_committed, read_uncommitted"
        )
    batch_rows = _parse_int(
        "arrowBatchRows", opts.get("arrowbatchrows", str(DEFAULT_ARROW_BATCH_ROWS)), bits=32
    )
    if batch_rows <= 0:
        raise ValueError("arrowBatchRows must be positive")
    pushdown = parse_bool("filterPushdown", opts.get("filterpushdown", "false"))
    storage = tuple(sorted((k, v) for k, v in opts.items() if is_storage_option(k)))
    tiered_path = opts.get("tieredpath") or None
    if tiered_path is not None and not is_url(tiered_path):
        raise ValueError(
            f"option 'tieredPath' must be an object-storage URL (s3://, gs://, az://), got {tiered_path}"
        )
    if tiered_path is not None and any(is_url(p) for p in paths):
        raise ValueError("option 'tieredPath' is read beside a local data directory, not beside a URL")
    layout = opts.get("layout") or None
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"option 'layout' must be one of {', '.join(LAYOUTS)}, got {layout}")
    if streaming and pushdown:
        _log.warning("filterPushdown option ignored in streaming queries")
    return SourceOptions(
        paths=paths,
        strategy=strategy,
        starting=starting,
        ending=ending,
        starting_no_match_latest=no_match == "latest",
        include_headers=parse_bool("includeHeaders", opts.get("includeheaders", "false")),
        fail_on_data_loss=parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        read_committed=isolation == "read_committed",
        arrow_batch_rows=batch_rows,
        filter_pushdown=pushdown and not streaming,
        storage_options=storage,
        tiered_path=tiered_path,
        layout=layout,
        key_ring=_key_ring(opts["keyring"]) if "keyring" in opts else (),
        strict=parse_bool("strict", opts.get("strict", "false")),
    )


def _check_batch_limits(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """``validateBatchOptions`` + ``checkOffsetLimitValidity`` of Spark's Kafka source."""
    if starting == LATEST:
        raise ValueError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for (topic, partition), offset in starting.offsets.items():
            if offset == -1:
                raise ValueError(
                    f"startingOffsets for {topic}-{partition} can't be latest for batch queries on Kafka"
                )
    if ending == EARLIEST:
        raise ValueError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for (topic, partition), offset in ending.offsets.items():
            if offset == -2:
                raise ValueError(
                    f"ending offset for {topic}-{partition} can't be earliest for batch queries on Kafka"
                )
    pairs: list[tuple[dict[tuple[str, int], int], dict[tuple[str, int], int], str]] = []
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        pairs.append((starting.offsets, ending.offsets, "offset"))
    if (
        isinstance(starting, SpecificTimestamps)
        and isinstance(ending, SpecificTimestamps)
        and starting.global_timestamp is None
        and ending.global_timestamp is None
    ):
        pairs.append((starting.timestamps, ending.timestamps, "timestamp"))
    for start, end, what in pairs:
        if set(start) != set(end):
            raise ValueError(
                f"The specified start {what} topic partitions {_tps(start)} do not match the specified end "
                f"{what} topic partitions {_tps(end)}"
            )
        for tp, lo in start.items():
            hi = end[tp]
            if lo > hi and lo >= 0 and hi >= 0:
                raise ValueError(
                    f"The specified starting {what} {lo} is greater than the ending {what} {hi} for topic "
                    f"partition {tp[0]}-{tp[1]}"
                )


def _tps(offsets: Mapping[tuple[str, int], int]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(offsets)) + "]"
