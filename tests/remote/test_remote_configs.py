"""The tiered topic configs of LogConfig, validated as Kafka's LogConfig does (LogConfigTest's remote cases)."""

from __future__ import annotations

import pytest

from kafkalog.errors import InvalidConfigurationError
from kafkalog.log.config import (
    LogConfig,
    validate_remote_storage,
    validate_remote_storage_change,
)


def _unchecked(**kwargs: object) -> LogConfig:
    """A LogConfig with remote.storage.enable=true, built without the closed system gate (as #25's broker will)."""
    config = LogConfig(**kwargs)  # type: ignore[arg-type]
    object.__setattr__(config, "remote_storage_enable", True)
    return config


def test_gate_closed_refuses_with_kafka_text() -> None:
    """The gate is the caller's (Log.open, the manager): a LogConfig alone accepts remote.storage.enable=true,
    validate_remote_storage with the system gate off refuses it with Kafka's text."""
    config = LogConfig.from_props({"remote.storage.enable": "true", "local.retention.ms": "10"})
    assert config.remote_storage_enable
    with pytest.raises(
        InvalidConfigurationError,
        match=r"^Tiered Storage functionality is disabled in the broker\. "
        r"Topic cannot be configured with remote log storage\.$",
    ):
        validate_remote_storage(config, False)
    validate_remote_storage(config, True)


def test_log_config_runs_the_other_tiered_checks() -> None:
    """Without the gate a LogConfig still refuses what Kafka refuses for any broker (compact + remote)."""
    with pytest.raises(InvalidConfigurationError, match="unsupported for the compacted topics"):
        LogConfig.from_props({"remote.storage.enable": "true", "cleanup.policy": "compact"})
    with pytest.raises(InvalidConfigurationError, match=r"local\.retention\.ms"):
        LogConfig.from_props(
            {"remote.storage.enable": "true", "retention.ms": "10", "local.retention.ms": "20"}
        )


def test_local_retention_accepted_without_remote_storage() -> None:
    """Kafka checks local.* against retention.* only when remote.storage.enable=true."""
    config = LogConfig.from_props(
        {"retention.ms": "100", "local.retention.ms": "1000", "local.retention.bytes": "-1"}
    )
    assert config.local_retention_ms == 1000
    with pytest.raises(InvalidConfigurationError, match="at least -2"):
        LogConfig.from_props({"local.retention.bytes": "-3"})


def test_effective_local_retention_follows_total_at_minus_two() -> None:
    config = LogConfig(retention_ms=500, retention_bytes=4096)
    assert (config.effective_local_retention_ms, config.effective_local_retention_bytes) == (500, 4096)
    config = LogConfig(
        retention_ms=500, retention_bytes=4096, local_retention_ms=100, local_retention_bytes=-1
    )
    assert (config.effective_local_retention_ms, config.effective_local_retention_bytes) == (100, -1)


def test_system_enabled_accepts_valid_tiered_configs() -> None:
    validate_remote_storage(_unchecked(retention_ms=1000, local_retention_ms=1000), True)
    validate_remote_storage(_unchecked(retention_ms=1000, local_retention_ms=0), True)
    validate_remote_storage(_unchecked(retention_ms=-1, local_retention_ms=-1), True)
    validate_remote_storage(_unchecked(retention_ms=-1, local_retention_ms=5), True)
    validate_remote_storage(_unchecked(retention_bytes=-1, local_retention_bytes=10**12), True)
    validate_remote_storage(_unchecked(retention_bytes=100, local_retention_bytes=-2), True)
    # The gate on its own refuses only when remote.storage.enable is true.
    validate_remote_storage(LogConfig(cleanup_policy=("compact",)), False)


def test_system_gate_off_refuses() -> None:
    with pytest.raises(InvalidConfigurationError, match="Tiered Storage functionality is disabled"):
        validate_remote_storage(_unchecked(), False)


def test_no_remote_storage_for_compacted_topic() -> None:
    with pytest.raises(
        InvalidConfigurationError, match=r"^Remote log storage is unsupported for the compacted topics$"
    ):
        validate_remote_storage(_unchecked(cleanup_policy=("delete", "compact")), True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"retention_bytes": 100, "local_retention_bytes": -1},
            "Invalid value -1 for configuration local.retention.bytes: "
            "Value must not be -1 as retention.bytes value is set as 100.",
        ),
        (
            {"retention_bytes": 100, "local_retention_bytes": 101},
            "Invalid value 101 for configuration local.retention.bytes: "
            "Value must not be more than retention.bytes property value: 100",
        ),
        (
            {"retention_ms": 1000, "local_retention_ms": -1},
            "Invalid value -1 for configuration local.retention.ms: "
            "Value must not be -1 as retention.ms value is set as 1000.",
        ),
        (
            {"retention_ms": 1000, "local_retention_ms": 1001},
            "Invalid value 1001 for configuration local.retention.ms: "
            "Value must not be more than retention.ms property value: 1000",
        ),
    ],
)
def test_local_retention_bounded_by_total(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as info:
        validate_remote_storage(_unchecked(**kwargs), True)
    assert str(info.value) == message


def test_copy_disabled_needs_local_retention_equal_to_total() -> None:
    """Kafka's validateRetentionConfigsWhenRemoteCopyDisabled."""
    validate_remote_storage(_unchecked(remote_log_copy_disable=True), True)
    validate_remote_storage(
        _unchecked(remote_log_copy_disable=True, retention_ms=500, local_retention_ms=500, retention_bytes=9,
                   local_retention_bytes=9), True,
    )  # fmt: skip
    with pytest.raises(
        InvalidConfigurationError, match=r"`local\.retention\.bytes` and `retention\.bytes` must be"
    ):
        validate_remote_storage(
            _unchecked(remote_log_copy_disable=True, retention_bytes=9, local_retention_bytes=5), True
        )
    with pytest.raises(
        InvalidConfigurationError, match=r"`local\.retention\.ms` and `retention\.ms` must be"
    ):
        validate_remote_storage(
            _unchecked(remote_log_copy_disable=True, retention_ms=9, local_retention_ms=5), True
        )
    # Without remote storage Kafka does not look at it.
    assert LogConfig.from_props(
        {"remote.log.copy.disable": "true", "local.retention.ms": "5"}
    ).remote_log_copy_disable


def test_turning_remote_storage_off_needs_delete_on_disable() -> None:
    """Kafka's validateTurningOffRemoteStorageWithDelete."""
    on = _unchecked()
    with pytest.raises(
        InvalidConfigurationError, match=r"^It is invalid to disable remote storage without deleting"
    ):
        validate_remote_storage_change(on, LogConfig())
    validate_remote_storage_change(on, LogConfig(remote_log_delete_on_disable=True))
    validate_remote_storage_change(LogConfig(), LogConfig())
    validate_remote_storage_change(on, on)
