"""LogConfig: Kafka's names, defaults and validation (unknown names, bad types, out-of-range values, the
min/max compaction lag conflict), dotted names and keyword arguments, updates.

Ported from Kafka (same values):

* LogConfigTest: testFromPropsInvalid (every invalid value Kafka lists, per config), testInvalidCompactionLagConfig,
  testLocalLogRetentionDerivedDefaultProps (the defaults kafkalog keeps: -2 for local retention).
* LocalLogTest: testUpdateConfig.

Deliberate differences (documented in ``kafkalog.log.config``): ``segment.bytes`` accepts values down to 14
(Kafka 4 requires 1 MiB and has a test-only ``internal.segment.bytes``, which is why Kafka's own
testFromPropsInvalid skips it); the tiered-storage gate (remote.log.storage.system.enable) is the caller's:
``Log.open`` refuses ``remote.storage.enable=true`` unless it is given the gate.

Skipped: testKafkaConfigToProps / testOverriddenConfigsAsLoggableString / testGetConfigValue / the HTML/RST
doc tests (broker config and documentation generation are not part of the log); the remote-storage validation
tests (testInvalidLocalLogRetentionProps, testEnableRemoteLogStorage*, ...); shouldValidateThrottledReplicasConfig
(replication quota configs are not log configs).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigurationError
from kafkalog.log import Log, LogConfig
from kafkalog.log.config import CONFIG_DEFS
from kafkalog.records import Compression, TimestampType

from .conftest import LogFactory

LONG_MAX = 2**63 - 1

# testFromPropsInvalid: Kafka's invalid values per config (``default`` = "not_a_number" and "-1").
KAFKA_INVALID_VALUES: dict[str, tuple[str, ...]] = {
    "unclean.leader.election.enable": ("not a boolean",),
    "remote.storage.enable": ("not a boolean",),
    "remote.log.copy.disable": ("not a boolean",),
    "remote.log.delete.on.disable": ("not a boolean",),
    "retention.bytes": ("not_a_number",),
    "retention.ms": ("not_a_number",),
    "cleanup.policy": ("true", "foobar"),
    "min.cleanable.dirty.ratio": ("not_a_number", "-0.1", "1.2"),
    "min.insync.replicas": ("not_a_number", "0", "-1"),
    "local.retention.ms": ("not_a_number", "-3"),
    "local.retention.bytes": ("not_a_number", "-3"),
    "compression.gzip.level": ("not_a_number", "-2"),
    "compression.lz4.level": ("not_a_number", "-1"),
    "compression.zstd.level": ("not_a_number", "-0.1"),
}


@pytest.mark.parametrize("name", [d.name for d in CONFIG_DEFS])
def test_from_props_invalid(name: str) -> None:
    """testFromPropsInvalid."""
    for value in KAFKA_INVALID_VALUES.get(name, ("not_a_number", "-1")):
        with pytest.raises(InvalidConfigurationError):
            LogConfig.from_props({name: value})


def test_invalid_compaction_lag_config() -> None:
    """testInvalidCompactionLagConfig: min.compaction.lag.ms > max.compaction.lag.ms."""
    with pytest.raises(InvalidConfigurationError):
        LogConfig.from_props({"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "200"})
    with pytest.raises(InvalidConfigurationError):
        LogConfig(max_compaction_lag_ms=100, min_compaction_lag_ms=200)
    LogConfig(max_compaction_lag_ms=200, min_compaction_lag_ms=200)


def test_unknown_names() -> None:
    with pytest.raises(InvalidConfigurationError, match="unknown"):
        LogConfig.from_props({"segment.byte": 1024})
    with pytest.raises(InvalidConfigurationError, match="unknown"):
        LogConfig.from_props(segment_byte=1024)
    with pytest.raises(TypeError):
        LogConfig(segment_byte=1024)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"segment_bytes": "1kb"}, "segment.bytes"),
        ({"segment_bytes": 10.5}, "segment.bytes"),
        ({"segment_bytes": True}, "segment.bytes"),
        ({"retention_ms": None}, "retention.ms"),
        ({"preallocate": "yes"}, "preallocate"),
        ({"min_cleanable_dirty_ratio": "half"}, "min.cleanable.dirty.ratio"),
        ({"compression_type": "brotli"}, "compression.type"),
        ({"message_timestamp_type": "NoTimestampType2"}, "message.timestamp.type"),
        ({"cleanup_policy": "compact,foo"}, "cleanup.policy"),
    ],
)
def test_bad_types(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=name.replace(".", r"\.")):
        LogConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "bad", "good"),
    [
        ("segment.bytes", 13, 14),
        ("segment.ms", 0, 1),
        ("segment.index.bytes", 3, 4),
        ("retention.ms", -2, -1),
        ("max.message.bytes", -1, 0),
        ("min.cleanable.dirty.ratio", 1.01, 1.0),
        ("compression.gzip.level", 10, 9),
        ("compression.gzip.level", 0, 1),
        ("compression.lz4.level", 18, 17),
        ("compression.zstd.level", 23, 22),
        ("compression.zstd.level", -131073, -131072),
        ("flush.messages", 0, 1),
        ("max.compaction.lag.ms", 0, 1),
    ],
)
def test_ranges(name: str, bad: object, good: object) -> None:
    with pytest.raises(InvalidConfigurationError, match=name.replace(".", r"\.")):
        LogConfig.from_props({name: bad})
    assert LogConfig.from_props({name: good}).to_props()[name] == good


def test_kafka_defaults() -> None:
    """The defaults of Kafka 4.x (LogConfig / ServerLogConfigs)."""
    config = LogConfig()
    assert config.segment_bytes == 1024**3
    assert config.segment_ms == 7 * 24 * 3600 * 1000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10 * 1024 * 1024
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.cleanup_policy == ("delete",) and config.delete and not config.compact
    assert config.file_delete_delay_ms == 60_000
    assert config.flush_messages == LONG_MAX and config.flush_ms == LONG_MAX
    assert config.max_message_bytes == 1024 * 1024 + 12
    assert config.message_timestamp_type == "CreateTime"
    assert config.timestamp_type is TimestampType.CREATE_TIME
    assert config.message_timestamp_before_max_ms == LONG_MAX
    assert config.message_timestamp_after_max_ms == 3_600_000
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.delete_retention_ms == 24 * 3600 * 1000
    assert config.min_compaction_lag_ms == 0 and config.max_compaction_lag_ms == LONG_MAX
    assert config.compression_type == "producer" and config.target_compression is None
    assert (config.compression_gzip_level, config.compression_lz4_level, config.compression_zstd_level) == (
        -1,
        9,
        3,
    )
    assert config.preallocate is False and config.init_file_size == 0
    assert (config.local_retention_ms, config.local_retention_bytes) == (-2, -2)
    assert config.overrides == frozenset()


def test_dotted_names_and_kwargs_agree() -> None:
    from_dotted = LogConfig.from_props(
        {"segment.bytes": "1024", "cleanup.policy": "delete, compact", "preallocate": "true"}
    )
    from_kwargs = LogConfig(segment_bytes=1024, cleanup_policy="compact,delete", preallocate=True)
    mixed = LogConfig.from_props(
        {"segment.bytes": 1024}, cleanup_policy=["compact", "delete"], preallocate=True
    )
    assert from_dotted == from_kwargs == mixed
    assert from_dotted.cleanup_policy == ("compact", "delete")
    assert from_dotted.init_file_size == 1024
    assert from_dotted.overrides == frozenset({"segment.bytes", "cleanup.policy", "preallocate"})
    round_trip = LogConfig.from_props(from_dotted.to_props())
    assert round_trip == from_dotted
    assert from_dotted.to_props(only_overrides=True) == {
        "segment.bytes": 1024,
        "cleanup.policy": "compact,delete",
        "preallocate": True,
    }


def test_compression_type_names() -> None:
    assert LogConfig(compression_type="none").compression_type == "uncompressed"
    assert LogConfig(compression_type="uncompressed").target_compression is Compression.NONE
    assert LogConfig(compression_type="ZSTD").target_compression is Compression.ZSTD
    assert (
        LogConfig(compression_type="gzip", compression_gzip_level=9).compression_level(Compression.GZIP) == 9
    )


def test_max_segment_ms_for_compacted_topics() -> None:
    """UnifiedLog: compacted topics roll at min(segment.ms, max.compaction.lag.ms)."""
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=10).max_segment_ms == 1000
    assert LogConfig(segment_ms=1000, max_compaction_lag_ms=10, cleanup_policy="compact").max_segment_ms == 10
    assert LogConfig(segment_ms=10, max_compaction_lag_ms=1000, cleanup_policy="compact").max_segment_ms == 10


def test_updated_validates_and_keeps_overrides() -> None:
    base = LogConfig(segment_bytes=2048)
    new = base.updated({"retention.ms": "1000"})
    assert (new.segment_bytes, new.retention_ms) == (2048, 1000)
    assert new.overrides == frozenset({"segment.bytes", "retention.ms"})
    with pytest.raises(InvalidConfigurationError):
        base.updated(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    with pytest.raises(InvalidConfigurationError):
        base.replace(segment_ms=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.segment_bytes = 1  # type: ignore[misc]


def test_tiered_storage_rejected(tmp_path: Path) -> None:
    """Kafka's validateRemoteStorageOnlyIfSystemEnabled text: Log.open without remote.log.storage.system.enable
    refuses the topic and creates nothing; with it the log opens with its remote tier enabled."""
    config = LogConfig.from_props({"remote.storage.enable": "true"})
    with pytest.raises(
        InvalidConfigurationError, match="Tiered Storage functionality is disabled in the broker"
    ):
        Log.open(tmp_path / "t-0", config)
    assert not (tmp_path / "t-0").exists()
    with Log.open(tmp_path / "t-0", config, remote_storage_system_enable=True) as log:
        assert log.remote_log_enabled
        with pytest.raises(
            InvalidConfigurationError, match="Tiered Storage functionality is disabled in the broker"
        ):
            Log.open(tmp_path / "u-0", config, remote_storage_system_enable=False)
    with Log.open(tmp_path / "t-0", LogConfig()) as log:
        assert not log.remote_log_enabled
        with pytest.raises(
            InvalidConfigurationError, match="Tiered Storage functionality is disabled in the broker"
        ):
            log.update_config({"remote.storage.enable": True})
        assert not log.config.remote_storage_enable


def test_update_config(make_log: LogFactory) -> None:
    """LocalLogTest.testUpdateConfig, through Log.update_config (a config or a mapping of changes)."""
    log = make_log()
    old = log.config
    new = LogConfig(segment_bytes=old.segment_bytes + 1)
    assert log.update_config(new) is old
    assert log.config == new and log.local_log.config == new
    log.update_config({"retention.ms": 5})
    assert (log.config.segment_bytes, log.config.retention_ms) == (old.segment_bytes + 1, 5)
    with pytest.raises(InvalidConfigurationError):
        log.update_config({"retention.ms": "soon"})
    assert log.config.retention_ms == 5


def test_updated_segment_bytes_applies_to_next_roll(make_log: LogFactory) -> None:
    """A smaller segment.bytes takes effect on the next append (as a dynamic topic config update does)."""
    log = make_log()
    for i in range(5):
        log.append([(b"k", b"v%d" % i)])
    assert log.num_log_segments == 1
    log.update_config({"segment.bytes": 100})
    for i in range(3):
        log.append([(b"k", b"w%d" % i)])
    assert log.num_log_segments == 4
