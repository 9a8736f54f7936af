"""Storage options under Hadoop's names: precedence (per-bucket > global > spark.hadoop. > environment),
the mapping to obstore's keys, bounded client defaults, unknown keys warned once, and no credential in a
``repr`` or an error."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from kafkalog.errors import InvalidConfigurationError
from kafkalog.objstore import options as opt
from kafkalog.objstore.options import redact, resolve

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYSECRET"
TOKEN = "FwoGZXIvYXdzEJr-SESSIONTOKEN"


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    opt._warned.clear()


def test_s3a_keys_map_to_obstore_config() -> None:
    cfg = resolve(
        "s3a://bucket/some/prefix",
        {
            "fs.s3a.endpoint": "http://127.0.0.1:9000",
            "fs.s3a.access.key": "AKID",
            "fs.s3a.secret.key": SECRET,
            "fs.s3a.session.token": TOKEN,
            "fs.s3a.endpoint.region": "eu-west-1",
            "fs.s3a.path.style.access": "true",
        },
    )
    assert (cfg.kind, cfg.bucket, cfg.prefix) == ("s3", "bucket", "some/prefix")
    assert cfg.config == {
        "access_key_id": "AKID",
        "secret_access_key": SECRET,
        "session_token": TOKEN,
        "region": "eu-west-1",
        "endpoint": "http://127.0.0.1:9000",
        "virtual_hosted_style_request": False,
    }
    assert cfg.client_options["allow_http"] is True
    assert cfg.secrets == {SECRET, TOKEN}


def test_spark_hadoop_prefix_is_accepted_and_the_plain_key_wins() -> None:
    cfg = resolve(
        "s3://b",
        {"spark.hadoop.fs.s3a.endpoint": "http://spark:1", "spark.hadoop.fs.s3a.access.key": "FROM_SPARK"},
    )
    assert cfg.config["endpoint"] == "http://spark:1"
    assert cfg.config["access_key_id"] == "FROM_SPARK"
    cfg = resolve("s3://b", {"spark.hadoop.fs.s3a.access.key": "FROM_SPARK", "fs.s3a.access.key": "PLAIN"})
    assert cfg.config["access_key_id"] == "PLAIN"


def test_per_bucket_key_overrides_global_for_its_bucket_only() -> None:
    options = {
        "fs.s3a.endpoint": "http://global:1",
        "fs.s3a.bucket.logs.endpoint": "http://logs:2",
        "spark.hadoop.fs.s3a.bucket.logs.access.key": "LOGS_KEY",
        "fs.s3a.access.key": "GLOBAL_KEY",
        "fs.s3a.bucket.my.dotted.bucket.endpoint.region": "ap-south-1",
    }
    logs = resolve("s3://logs/p", options)
    assert logs.config["endpoint"] == "http://logs:2"
    assert logs.config["access_key_id"] == "LOGS_KEY"
    other = resolve("s3://other", options)
    assert other.config["endpoint"] == "http://global:1"
    assert other.config["access_key_id"] == "GLOBAL_KEY"
    dotted = resolve("s3://my.dotted.bucket/x", options)  # bucket names may hold dots, as Hadoop allows
    assert dotted.config["region"] == "ap-south-1"


def test_endpoint_without_scheme_follows_ssl_enabled_and_virtual_host_style() -> None:
    assert resolve("s3://b", {"fs.s3a.endpoint": "minio:9000"}).config["endpoint"] == "https://minio:9000"
    cfg = resolve("s3://b", {"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false"})
    assert cfg.config["endpoint"] == "http://minio:9000"
    assert cfg.client_options["allow_http"] is True
    cfg = resolve(
        "s3://b", {"fs.s3a.endpoint": "https://s3.example.com", "fs.s3a.path.style.access": "false"}
    )
    assert cfg.config["endpoint"] == "https://b.s3.example.com"  # the bucket in the host name, as S3A does
    assert cfg.config["virtual_hosted_style_request"] is True
    assert "virtual_hosted_style_request" not in resolve("s3://b", {}).config  # obstore's default


def test_environment_is_left_to_obstore_below_options() -> None:
    # Nothing from AWS_* is copied into the config: obstore reads the environment itself and explicit
    # config overrides it, which is the documented precedence (tests/objstore/test_s3_server.py proves it
    # against the real server).
    cfg = resolve("s3://b", {})
    assert "access_key_id" not in cfg.config and "endpoint" not in cfg.config


def test_client_bounds_defaults_fail_fast() -> None:
    cfg = resolve("s3://b", {})
    assert cfg.client_options == {
        "connect_timeout": timedelta(seconds=5),
        "read_timeout": timedelta(seconds=10),
        "timeout": timedelta(seconds=60),
    }
    assert cfg.retry_config["max_retries"] == 3
    assert cfg.retry_config["retry_timeout"] == timedelta(seconds=20)
    worst = (1 + 3) * 5 + 0.1 + 0.2 + 0.4  # every attempt waits out its connect timeout, plus backoffs
    assert worst < 30


def test_client_bounds_hadoop_aliases_and_units() -> None:
    cfg = resolve(
        "s3://b",
        {
            "fs.s3a.attempts.maximum": "0",
            "fs.s3a.connection.establish.timeout": "1500",  # a bare number is milliseconds, as Hadoop
            "fs.s3a.connection.timeout": "2s",
            "fs.s3a.connection.request.timeout": "1m",
            "fs.s3a.retry.interval": "250ms",
            "storage.retry.timeout": "3s",
        },
    )
    assert cfg.retry_config["max_retries"] == 0
    assert cfg.client_options["connect_timeout"] == timedelta(milliseconds=1500)
    assert cfg.client_options["read_timeout"] == timedelta(seconds=2)
    assert cfg.client_options["timeout"] == timedelta(minutes=1)
    assert cfg.retry_config["backoff"]["init_backoff"] == timedelta(milliseconds=250)
    assert cfg.retry_config["retry_timeout"] == timedelta(seconds=3)
    # kafkalog's own name wins over the alias, and applies to every scheme
    assert (
        resolve("s3://b", {"storage.attempts.maximum": "7", "fs.s3a.attempts.maximum": "1"}).retry_config[
            "max_retries"
        ]
        == 7
    )
    assert resolve("gs://b", {"storage.attempts.maximum": "2"}).retry_config["max_retries"] == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fs.s3a.attempts.maximum", "-1"),
        ("fs.s3a.attempts.maximum", "many"),
        ("fs.s3a.connection.timeout", "soon"),
        ("fs.s3a.connection.timeout", "0"),
        ("fs.s3a.path.style.access", "yes"),
        ("fs.s3a.endpoint", "ftp://x"),
    ],
)
def test_malformed_values_are_typed_errors_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=key.replace(".", r"\.")):
        resolve("s3://b", {key: value})


def test_unsupported_scheme_is_a_typed_error() -> None:
    with pytest.raises(InvalidConfigurationError, match="unsupported storage URL scheme 'hdfs'"):
        resolve("hdfs://nn/x")


def test_unknown_fs_keys_are_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kafkalog.objstore"):
        resolve("s3://b", {"fs.s3a.fast.upload": "true", "fs.s3a.endpiont": "typo", "subscribe": "t"})
        resolve("s3://b", {"fs.s3a.fast.upload": "true", "fs.s3a.endpiont": "typo"})
    messages = [r.getMessage() for r in caplog.records]
    assert sum("fs.s3a.endpiont" in m for m in messages) == 1
    assert sum("fs.s3a.fast.upload" in m for m in messages) == 1
    assert not any("subscribe" in m for m in messages)  # not a storage key: the caller's


def test_secrets_never_in_repr_errors_or_warnings(caplog: pytest.LogCaptureFixture) -> None:
    options = {
        "fs.s3a.access.key": "AKIDVISIBLE",
        "fs.s3a.secret.key": SECRET,
        "fs.s3a.session.token": TOKEN,
        "fs.s3a.bucket.b.secret.key.typo": SECRET,
    }
    with caplog.at_level(logging.DEBUG):
        cfg = resolve("s3://b", options)
        with pytest.raises(InvalidConfigurationError) as info:
            resolve("s3://b", {**options, "fs.s3a.path.style.access": SECRET})
    for text in (repr(cfg), str(cfg), str(info.value), caplog.text, repr(redact(options))):
        assert SECRET not in text and TOKEN not in text
    assert cfg.scrub(f"x {SECRET} y {TOKEN}") == "x *** y ***"


def test_gcs_keys() -> None:
    cfg = resolve(
        "gs://bucket/p",
        {
            "fs.gs.auth.service.account.json.keyfile": "/k.json",
            "fs.gs.storage.root.url": "http://127.0.0.1:4443",
        },
    )
    assert cfg.config == {"service_account": "/k.json", "base_url": "http://127.0.0.1:4443"}
    assert cfg.client_options["allow_http"] is True
    assert resolve("gs://b", {"fs.gs.auth.type": "UNAUTHENTICATED"}).config == {"skip_signature": True}


def test_azure_keys() -> None:
    key = "bXlhY2NvdW50a2V5U0VDUkVU"
    options = {
        "fs.azure.account.key.acct.dfs.core.windows.net": key,
        "fs.azure.account.key.other.dfs.core.windows.net": "OTHERKEY",
        "fs.azure.account.oauth2.client.id": "cid",
        "fs.azure.account.oauth2.client.secret": "csecret",
        "fs.azure.account.oauth2.client.endpoint": "https://login.microsoftonline.com/tenant-1/oauth2/token",
        "fs.azure.account.auth.type": "SharedKey",
    }
    cfg = resolve("abfss://container@acct.dfs.core.windows.net/dir", options)
    assert cfg.bucket == "container" and cfg.prefix == "dir"
    assert cfg.config["account_name"] == "acct"
    assert cfg.config["account_key"] == key
    assert cfg.config["client_id"] == "cid" and cfg.config["client_secret"] == "csecret"
    assert cfg.config["tenant_id"] == "tenant-1"
    assert cfg.config["authority_host"] == "https://login.microsoftonline.com"
    assert key in cfg.secrets and "csecret" in cfg.secrets
    assert key not in repr(cfg) and "csecret" not in repr(cfg)
    # az://container/path: the account comes from the one account key given
    cfg = resolve("az://container/p", {"fs.azure.account.key.acct.dfs.core.windows.net": key})
    assert cfg.config["account_name"] == "acct" and cfg.config["account_key"] == key


def test_local_and_memory_urls() -> None:
    assert resolve("/data/kafka").kind == "file"
    assert resolve("file:///data/kafka").prefix == "/data/kafka"
    assert resolve("memory://t1").kind == "memory"


def test_credentials_in_the_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(InvalidConfigurationError, match="credentials in the URL") as info:
        resolve(f"s3://AKID:{SECRET}@bucket/prefix")
    assert SECRET not in str(info.value) and "s3://bucket/prefix" in str(info.value)
    assert resolve("abfss://container@acct.dfs.core.windows.net/p").bucket == "container"  # not credentials


@pytest.mark.parametrize(
    "url,key",
    [
        ("s3://bucket/p", "fs.s3a.endpoint"),
        ("s3://bucket/p", "storage.endpoint"),
        ("gs://bucket/p", "fs.gs.storage.root.url"),
        ("az://container/p", "storage.endpoint"),
    ],
)
def test_credentials_in_an_endpoint_are_refused_without_echoing_them(url: str, key: str) -> None:
    """An endpoint is named by every connection error: a password in it would leak, so it is refused."""
    with pytest.raises(InvalidConfigurationError, match="carries credentials") as info:
        resolve(
            url,
            {
                key: f"http://AKID:{SECRET}@127.0.0.1:9000",
                "fs.azure.account.key.acct.blob.core.windows.net": "a2V5",
            },
        )
    assert SECRET not in str(info.value) and "127.0.0.1:9000" in str(info.value)
    with pytest.raises(InvalidConfigurationError) as info:
        resolve(url, {key: f"ftp://AKID:{SECRET}@host"})
    assert SECRET not in str(info.value)


def test_keys_are_matched_whatever_their_case() -> None:
    # Spark passes a Python data source its options with lower-cased keys; Hadoop's own spelling works too
    options = {"FS.S3A.Endpoint": "http://h:1", "fs.s3a.bucket.legacybucket.endpoint.region": "eu-west-1"}
    cfg = resolve("s3://LegacyBucket/p", options)  # a pre-2018 bucket name with capitals
    assert cfg.config["endpoint"] == "http://h:1" and cfg.config["region"] == "eu-west-1"
    cfg = resolve("abfss://c@acct.dfs.core.windows.net/p", {"fs.azure.account.oauth2.client.ID": "cid"})
    assert cfg.config["client_id"] == "cid"


def test_azure_account_specific_keys_win_and_other_accounts_are_not_used() -> None:
    options = {
        "fs.azure.account.oauth2.client.id": "generic-id",
        "fs.azure.account.oauth2.client.id.acct.dfs.core.windows.net": "acct-id",
        "fs.azure.account.oauth2.client.id.other.dfs.core.windows.net": "other-id",
        "fs.azure.sas.fixed.token.other.dfs.core.windows.net": "other-sas",
    }
    cfg = resolve("abfss://c@acct.dfs.core.windows.net/p", options)
    assert cfg.config["client_id"] == "acct-id" and "sas_key" not in cfg.config
    cfg = resolve("abfss://c@third.dfs.core.windows.net/p", options)
    assert cfg.config["client_id"] == "generic-id"
    cfg = resolve("az://c/p", {"fs.azure.sas.fixed.token.acct.dfs.core.windows.net": "acct-sas"})
    assert cfg.config["account_name"] == "acct" and cfg.config["sas_key"] == "acct-sas"


def test_gcs_and_azure_options_become_obstores_own_config() -> None:
    """Every Hadoop option kafkalog maps for ``gs://`` and ``az://`` / ``abfss://`` lands on a key obstore's own
    store takes (``GCSStore`` / ``AzureStore`` refuse an unknown key with ``UnknownConfigurationKeyError``):
    each resolved configuration is handed to ``obstore.store.from_url`` and read back from the store."""
    obstore = pytest.importorskip("obstore")

    def built(url: str, options: dict[str, str]) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
        cfg = resolve(url, options)
        store = obstore.store.from_url(
            url,
            config=dict(cfg.config),
            client_options=dict(cfg.client_options),
            retry_config=dict(cfg.retry_config),
        )
        return dict(store.config), dict(store.client_options), dict(store.retry_config or {})

    bounds = {
        "storage.connection.timeout": "7s",
        "storage.connection.establish.timeout": "3s",
        "storage.attempts.maximum": "4",
    }
    config, client, retry = built(
        "gs://bucket/p",
        {"fs.gs.storage.root.url": "http://127.0.0.1:4443", "fs.gs.auth.type": "UNAUTHENTICATED", **bounds},
    )
    assert config == {"bucket": "bucket", "base_url": "http://127.0.0.1:4443", "skip_signature": "true"}
    assert (
        client["allow_http"] in (True, "true")
        and client["read_timeout"] == "7s"
        and client["connect_timeout"] == "3s"
    )
    assert retry["max_retries"] == 4
    key = "a2V5LWZvci10ZXN0cw=="
    azure = {
        "fs.azure.account.key.acct.dfs.core.windows.net": key,
        "fs.azure.sas.fixed.token.acct.dfs.core.windows.net": "sv=2024&sig=abc",
        "fs.azure.account.oauth2.client.id": "cid",
        "fs.azure.account.oauth2.client.secret": "csecret",
        "fs.azure.account.oauth2.client.endpoint": "https://login.microsoftonline.com/tenant-1/oauth2/token",
        "fs.azure.account.auth.type": "OAuth",
        "storage.endpoint": "http://127.0.0.1:10000/acct",
        **bounds,
    }
    for url in ("abfss://container@acct.dfs.core.windows.net/p", "az://container/p"):
        config, client, retry = built(url, azure)
        assert config == {
            "container_name": "container",
            "account_name": "acct",
            "account_key": key,
            "sas_key": "sv=2024&sig=abc",
            "client_id": "cid",
            "client_secret": "csecret",
            "tenant_id": "tenant-1",
            "authority_host": "https://login.microsoftonline.com",
            "endpoint": "http://127.0.0.1:10000/acct",
        }, url
        assert client["read_timeout"] == "7s" and retry["max_retries"] == 4
