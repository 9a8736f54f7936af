"""RemoteLogManagerConfig / RsmConfig: Kafka's and the plugin's names, validation with the key named, and no
credential in a repr."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkalog.errors import InvalidConfigurationError
from kafkalog.tiering import AivenRemoteStorageManager, RemoteLogManagerConfig, RsmConfig


def test_from_props_reads_kafkas_and_the_plugins_names() -> None:
    cfg = RemoteLogManagerConfig.from_props(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.manager.task.interval.ms": "5000",
            "remote.log.metadata.topic.num.partitions": "7",
            "remote.log.index.file.cache.total.size.bytes": "1048576",
            "node.id": "3",
            "remote.log.manager.copy.max.bytes.per.second": "1048576",
            "remote.log.manager.copy.quota.window.num": "5",
            "rsm.config.storage.url": "s3://bucket/tier",
            "rsm.config.storage.fs.s3a.endpoint": "http://127.0.0.1:9000",
            "rsm.config.storage.fs.s3a.secret.key": "very-secret-value",
            "rsm.config.key.prefix": "prod/",
            "rsm.config.chunk.size": "1048576",
            "rsm.config.compression.enabled": "true",
            "unrelated.key": "x",
        }
    )
    assert cfg.remote_log_storage_system_enable is True
    assert (cfg.remote_log_manager_task_interval_ms, cfg.remote_log_metadata_topic_num_partitions) == (
        5000,
        7,
    )
    assert cfg.remote_log_index_file_cache_total_size_bytes == 1 << 20
    assert cfg.broker_id == 3
    assert (
        cfg.remote_log_manager_copy_max_bytes_per_second,
        cfg.remote_log_manager_copy_quota_window_num,
    ) == (
        1 << 20,
        5,
    )
    assert cfg.remote_log_manager_copy_quota_window_size_seconds == 1
    assert cfg.rsm.storage_url == "s3://bucket/tier"
    assert cfg.rsm.storage_options == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.secret.key": "very-secret-value",
    }
    assert (cfg.rsm.key_prefix, cfg.rsm.chunk_size, cfg.rsm.compression_enabled) == ("prod/", 1 << 20, True)
    assert "very-secret-value" not in repr(cfg)
    assert "very-secret-value" not in str(cfg)
    # another impl prefix
    other = RemoteLogManagerConfig.from_props(
        {
            "remote.log.storage.manager.impl.prefix": "tier.",
            "tier.key.prefix": "p/",
            "rsm.config.key.prefix": "no",
        }
    )
    assert other.rsm.key_prefix == "p/"
    assert RemoteLogManagerConfig() == RemoteLogManagerConfig.from_props({})


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"remote.log.manager.task.interval.ms": "0"}, "remote.log.manager.task.interval.ms"),
        ({"remote.log.metadata.topic.num.partitions": "x"}, "remote.log.metadata.topic.num.partitions"),
        ({"remote.log.storage.system.enable": "maybe"}, "remote.log.storage.system.enable"),
        ({"rsm.config.chunk.size": "0"}, "rsm.config.chunk.size"),
        (
            {"remote.log.manager.copy.max.bytes.per.second": "0"},
            "remote.log.manager.copy.max.bytes.per.second",
        ),
        ({"rsm.config.encryption.enabled": "true"}, "rsm.config.encryption.key.pair.id"),
        (
            {"rsm.config.encryption.enabled": "true", "rsm.config.encryption.key.pair.id": "k9"},
            "rsm.config.encryption.key.pairs.k9",
        ),
        ({"rsm.config.encryption.key.pairs.k1.public.key.file": "/p"}, "rsm.config.encryption.key.pairs.k1"),
    ],
)
def test_bad_values_name_the_key(props: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=named.replace(".", r"\.")):
        RemoteLogManagerConfig.from_props(props)


def test_rsm_from_config_needs_a_storage_url(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"rsm\.config\.storage\.url"):
        AivenRemoteStorageManager.from_config(RsmConfig())
    rsm = AivenRemoteStorageManager.from_config(RsmConfig(storage_url=str(tmp_path / "tier")))
    assert repr(rsm).startswith("AivenRemoteStorageManager(")


def test_reprs_never_print_the_storage_urls_query_string(tmp_path: Path) -> None:
    """An Azure SAS token rides in the storage URL's query string: ``RsmConfig`` and ``RemoteTier`` print the
    URL without it (and without user-info or fragment), as ``kafkalog-tiered-storage.json`` records it."""
    from kafkalog.manager.remote_tier import RemoteTier
    from kafkalog.objstore.options import public_url

    url = "abfss://container@account.dfs.core.windows.net/tier?sv=2022-11-02&sig=SAS-SECRET-SIGNATURE#frag"
    cfg = RemoteLogManagerConfig.from_props(
        {"remote.log.storage.system.enable": "true", "rsm.config.storage.url": url}
    )
    assert cfg.rsm.storage_url == url  # the store still gets the whole URL
    assert "SAS-SECRET-SIGNATURE" not in repr(cfg) and "SAS-SECRET-SIGNATURE" not in repr(cfg.rsm)
    assert "abfss://container@account.dfs.core.windows.net/tier" in repr(cfg.rsm)
    tier = RemoteTier(cfg, None, None, False)  # type: ignore[arg-type]
    try:
        assert repr(tier) == "RemoteTier('abfss://container@account.dfs.core.windows.net/tier', 0 partitions)"
    finally:
        tier._deleter.shutdown()
        tier._copiers.shutdown()
        tier._expirers.shutdown()
    assert public_url("s3://key:secret@bucket/p?x=1") == "s3://bucket/p"
    assert public_url("/data/archive?x") == "/data/archive?x"  # a path has no query string


#: Kafka's ``RemoteLogManagerConfig`` defaults of the remote read settings (LONG / INT, each at least 1).
REMOTE_READ_DEFAULTS = {
    "remote.log.manager.fetch.max.bytes.per.second": (
        "remote_log_manager_fetch_max_bytes_per_second",
        2**63 - 1,
    ),
    "remote.log.manager.fetch.quota.window.num": ("remote_log_manager_fetch_quota_window_num", 11),
    "remote.log.manager.fetch.quota.window.size.seconds": (
        "remote_log_manager_fetch_quota_window_size_seconds",
        1,
    ),
    "remote.log.reader.threads": ("remote_log_reader_threads", 10),
    "remote.log.reader.max.pending.tasks": ("remote_log_reader_max_pending_tasks", 100),
    "remote.fetch.max.wait.ms": ("remote_fetch_max_wait_ms", 500),
    "remote.list.offsets.request.timeout.ms": ("remote_list_offsets_request_timeout_ms", 30_000),
}


def test_the_remote_read_settings_have_kafkas_defaults_and_ranges() -> None:
    cfg = RemoteLogManagerConfig()
    assert {key: getattr(cfg, attr) for key, (attr, _) in REMOTE_READ_DEFAULTS.items()} == {
        key: default for key, (_, default) in REMOTE_READ_DEFAULTS.items()
    }
    given = RemoteLogManagerConfig.from_props({key: "7" for key in REMOTE_READ_DEFAULTS})
    assert all(getattr(given, attr) == 7 for attr, _ in REMOTE_READ_DEFAULTS.values())
    for key, (attr, _) in REMOTE_READ_DEFAULTS.items():
        for bad in ("0", "-1", "x"):
            with pytest.raises(InvalidConfigurationError, match=key.replace(".", r"\.")):
                RemoteLogManagerConfig.from_props({key: bad})
        with pytest.raises(InvalidConfigurationError, match=key.replace(".", r"\.")):
            RemoteLogManagerConfig(**{attr: 0})
    with pytest.raises(InvalidConfigurationError, match=r"remote\.fetch\.max\.wait\.ms"):
        RemoteLogManagerConfig.from_props({"remote.fetch.max.wait.ms": str(2**31)})  # Kafka's INT


def test_the_quota_and_reader_keys_reach_the_remote_tier_through_the_managers_config(
    tmp_path: Path, props: dict[str, object]
) -> None:
    """``LogManager.open(config=...)`` and ``serve --set`` pass Kafka's broker keys together: the copy quota's
    keys were taken for LogManager settings and refused ("unknown LogManager configuration")."""
    from kafkalog.manager import LogManager

    keys = {
        "remote.log.manager.copy.max.bytes.per.second": 1_000_000,
        "remote.log.manager.copy.quota.window.num": 3,
        "remote.log.manager.copy.quota.window.size.seconds": 2,
        **{key: 5 for key in REMOTE_READ_DEFAULTS},
    }
    with LogManager.open(tmp_path / "data", config={**props, **keys}) as mgr:
        assert mgr.remote_tier is not None
        cfg = mgr.remote_tier.config
        assert cfg.remote_log_manager_copy_max_bytes_per_second == 1_000_000
        assert (
            cfg.remote_log_manager_copy_quota_window_num,
            cfg.remote_log_manager_copy_quota_window_size_seconds,
        ) == (3, 2)
        assert all(getattr(cfg, attr) == 5 for attr, _ in REMOTE_READ_DEFAULTS.values())
        rlm = mgr.remote_tier.rlm
        assert (
            rlm.fetch_quota.quota_bytes_per_second,
            rlm.fetch_quota.num_windows,
            rlm.fetch_quota.window_size_ms,
        ) == (5, 5, 5000)
        assert (rlm.reader_pool.num_threads, rlm.reader_pool.max_pending_tasks) == (5, 5)
