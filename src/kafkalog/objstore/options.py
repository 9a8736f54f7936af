"""Storage options under Hadoop's names, resolved into one store's configuration (no I/O, no obstore import).

Invariant owned here: a URL plus the user's options (the keys Spark users already set for Hadoop's S3A, GCS
and ABFS connectors, each also accepted with a ``spark.hadoop.`` prefix) resolve to exactly one
:class:`StoreConfig` — the obstore store settings, HTTP client timeouts and a bounded retry policy — and the
values of every credential are known to it, so errors and ``repr`` s can be scrubbed of them. The
precedence, highest first:

1. a per-bucket key, ``fs.s3a.bucket.<bucket>.<key>`` (S3 only, as Hadoop), for the URL's bucket;
2. the key as given (``fs.s3a.endpoint``), then with the ``spark.hadoop.`` prefix;
3. obstore's own reading of the environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
   ``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_KEY``, ...) and, last, instance credentials.

Timeouts and retries (every scheme) are bounded by default so an unreachable endpoint fails in about 20 s:
``storage.*`` keys, with Hadoop's S3A names as aliases for S3 (see :data:`CLIENT_OPTION_KEYS`). A key under
``fs.`` that is not understood here is logged once per process (never silently ignored); keys outside ``fs.``
and ``storage.`` are the caller's (Spark's ``subscribe`` ...) and are not looked at.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kafkalog.errors import InvalidConfigurationError

_log = logging.getLogger("kafkalog.objstore")

SPARK_HADOOP_PREFIX = "spark.hadoop."
S3A_PREFIX = "fs.s3a."
S3A_BUCKET_PREFIX = "fs.s3a.bucket."

#: URL schemes and the store kind each maps to.
SCHEMES: dict[str, str] = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gs",
    "az": "az",
    "abfs": "az",
    "abfss": "az",
    "file": "file",
    "memory": "memory",
}

# --- defaults of the bounded client (every scheme) -----------------------------------------------------------

#: Retries after the first attempt (``storage.attempts.maximum`` / ``fs.s3a.attempts.maximum``).
DEFAULT_MAX_RETRIES = 3
#: TCP + TLS connect timeout (``storage.connection.establish.timeout``).
DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=5)
#: Longest wait for the next bytes of a response (``storage.connection.timeout``).
DEFAULT_READ_TIMEOUT = timedelta(seconds=10)
#: Longest one request may take, body included (``storage.connection.request.timeout``).
DEFAULT_REQUEST_TIMEOUT = timedelta(seconds=60)
#: First backoff between retries, doubled each time up to :data:`MAX_BACKOFF` (``storage.retry.interval``).
DEFAULT_RETRY_INTERVAL = timedelta(milliseconds=100)
MAX_BACKOFF = timedelta(seconds=5)
#: No retry starts later than this after the first attempt (``storage.retry.timeout``).
DEFAULT_RETRY_TIMEOUT = timedelta(seconds=20)

#: kafkalog's names for the client bounds (any scheme) -> the Hadoop S3A alias (S3 only).
CLIENT_OPTION_KEYS: dict[str, str] = {
    "storage.attempts.maximum": "fs.s3a.attempts.maximum",
    "storage.connection.establish.timeout": "fs.s3a.connection.establish.timeout",
    "storage.connection.timeout": "fs.s3a.connection.timeout",
    "storage.connection.request.timeout": "fs.s3a.connection.request.timeout",
    "storage.retry.interval": "fs.s3a.retry.interval",
    "storage.retry.timeout": "",
}

#: kafkalog's other storage keys: ``storage.endpoint`` (any scheme; S3's alias is ``fs.s3a.endpoint``) and
#: how a ranged file reads (:class:`kafkalog.objstore.ranged.RangedSettings`).
RANGED_OPTION_KEYS = (
    "storage.block.size",
    "storage.block.cache.count",
    "storage.readahead.blocks",
    "storage.whole.file.max.bytes",
)
OTHER_STORAGE_KEYS = frozenset({"storage.endpoint", *RANGED_OPTION_KEYS})

#: S3A keys (after ``fs.s3a.``) understood here.
S3A_KEYS = frozenset(
    {
        "endpoint",
        "access.key",
        "secret.key",
        "session.token",
        "endpoint.region",
        "path.style.access",
        "connection.ssl.enabled",
        "aws.credentials.provider",
        "attempts.maximum",
        "connection.establish.timeout",
        "connection.timeout",
        "connection.request.timeout",
        "retry.interval",
    }
)

#: Hadoop's GCS connector keys understood here -> obstore's GCS config key.
GCS_KEYS: dict[str, str] = {
    "fs.gs.auth.service.account.json.keyfile": "service_account",
    "fs.gs.storage.root.url": "base_url",
    "fs.gs.auth.type": "",
}

_AZURE_ACCOUNT_KEY = re.compile(r"^fs\.azure\.account\.key\.([^.]+)\.(?:dfs|blob)\.core\.windows\.net$")
_AZURE_SAS = re.compile(r"^fs\.azure\.sas\.fixed\.token(?:\.([^.]+)\.(?:dfs|blob)\.core\.windows\.net)?$")
_AZURE_OAUTH = re.compile(
    r"^fs\.azure\.account\.oauth2\.client\.(id|secret|endpoint)(?:\.([^.]+)\.(?:dfs|blob)\.core\.windows\.net)?$"
)
_AZURE_AUTH_TYPE = re.compile(
    r"^fs\.azure\.account\.auth\.type(?:\.([^.]+)\.(?:dfs|blob)\.core\.windows\.net)?$"
)

#: Keys whose values are credentials, whatever their scheme (Spark's redaction regex, plus account keys).
_SECRET_NAME = re.compile(r"(?i)secret|password|token|account\.key|sas|private")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(key: str, why: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    _log.warning("storage option %s %s", key, why)


def is_secret_key(key: str) -> bool:
    """Whether ``key``'s value is a credential (never logged, printed or put in an error)."""
    return bool(_SECRET_NAME.search(key))


def redact(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with every credential's value replaced by ``***`` (for logs and reprs)."""
    return {k: ("***" if is_secret_key(k) else v) for k, v in options.items()}


@dataclass(frozen=True)
class StoreConfig:
    """One store's resolved configuration.

    ``config`` holds obstore's store keys (``endpoint``, ``access_key_id``, ...), ``client_options`` and
    ``retry_config`` obstore's ``ClientConfig`` / ``RetryConfig``. ``secrets`` are the credential values to
    scrub from any text shown to a user; ``endpoint_option`` / ``credential_options`` name the options an
    error tells the user to check. The ``repr`` shows neither a secret nor a credential's value.
    """

    kind: str
    url: str
    bucket: str
    prefix: str
    config: dict[str, Any] = field(default_factory=dict)
    client_options: dict[str, Any] = field(default_factory=dict)
    retry_config: dict[str, Any] = field(default_factory=dict)
    secrets: frozenset[str] = frozenset()
    endpoint_option: str = ""
    credential_options: str = ""

    def __repr__(self) -> str:
        shown = {
            k: ("***" if is_secret_key(k) or k.endswith(("_key", "_key_id")) else v)
            for k, v in self.config.items()
        }
        return f"StoreConfig({self.kind}, {self.url!r}, config={shown}, client={self.client_options})"

    def scrub(self, text: str) -> str:
        """``text`` with every credential value of this configuration replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
        return text


# --- parsing helpers ---------------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(key: str, value: str) -> timedelta:
    """A Hadoop time value: a bare number is milliseconds (``60000``), else a number with a unit (``30s``)."""
    m = _DURATION.match(value)
    if not m:
        raise InvalidConfigurationError(
            f"storage option {key}: {value!r} is not a duration (milliseconds, or a number with ms/s/m/h)"
        )
    unit = (m.group(2) or "ms").lower()
    seconds = float(m.group(1)) * _UNIT_SECONDS[unit]
    if seconds <= 0:
        raise InvalidConfigurationError(f"storage option {key}: {value!r} must be positive")
    return timedelta(seconds=seconds)


def parse_bool(key: str, value: str) -> bool:
    """``true`` / ``false`` (any case), as Hadoop's ``Configuration.getBoolean``."""
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise InvalidConfigurationError(f"storage option {key}: {value!r} is not true or false")


def parse_int(key: str, value: str, *, minimum: int = 0) -> int:
    """A whole number ``>= minimum``."""
    try:
        n = int(value.strip())
    except ValueError:
        raise InvalidConfigurationError(f"storage option {key}: {value!r} is not a whole number") from None
    if n < minimum:
        raise InvalidConfigurationError(f"storage option {key}: {n} is below {minimum}")
    return n


def strip_spark_prefix(options: Mapping[str, str]) -> dict[str, str]:
    """Options with keys lower-cased (Spark hands a Python data source its options with lower-cased keys,
    and every key read here is lower case) and ``spark.hadoop.`` removed; a key given both ways keeps its
    unprefixed value."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    out: dict[str, str] = {}
    for k, v in lowered.items():
        if k.startswith(SPARK_HADOOP_PREFIX):
            out.setdefault(k[len(SPARK_HADOOP_PREFIX) :], str(v))
    for k, v in lowered.items():
        if not k.startswith(SPARK_HADOOP_PREFIX):
            out[k] = str(v)
    return out


def split_url(url: str) -> tuple[str, str, str, str]:
    """``(kind, scheme, bucket, prefix)`` of a store URL; a plain path is kind ``file`` with an empty bucket."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "" or (len(scheme) == 1 and url[1:2] == ":"):  # a path (or a Windows drive letter)
        return "file", "", "", url
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise InvalidConfigurationError(
            f"unsupported storage URL scheme {scheme!r} in {safe_url(url)!r}: "
            f"use one of {', '.join(s + '://' for s in SCHEMES)} or a local path"
        )
    if "@" in parts.netloc and ":" in parts.netloc.rsplit("@", 1)[0]:
        raise InvalidConfigurationError(
            f"storage URL {safe_url(url)!r}: credentials in the URL are not accepted (they would show in "
            f"logs and Spark plans); pass them as storage options (fs.s3a.access.key / fs.s3a.secret.key, ...)"
        )
    if kind == "file":
        return kind, scheme, "", parts.path
    if kind == "memory":
        return kind, scheme, "", (parts.netloc + parts.path).strip("/")
    bucket = parts.netloc.rsplit("@", 1)[-1] if kind != "az" else parts.netloc
    if not bucket:
        raise InvalidConfigurationError(f"storage URL {safe_url(url)!r} names no bucket")
    return kind, scheme, bucket, parts.path.strip("/")


def _checked_endpoint(key: str, endpoint: str) -> str:
    """``endpoint`` unless it carries credentials (``https://user:secret@host``): those would show in every
    error naming the endpoint, so they are refused, as in a storage URL (the message never repeats them)."""
    if "@" in urlsplit(endpoint).netloc:
        raise InvalidConfigurationError(
            f"storage option {key}: {safe_url(endpoint)!r} (credentials removed) carries credentials in its "
            "host part; they are not accepted there (they would show in errors): give them as the "
            "credential options (fs.s3a.access.key / fs.s3a.secret.key, ...) instead"
        )
    return endpoint


def safe_url(url: str) -> str:
    """``url`` without a password in its authority (``s3://key:secret@b`` -> ``s3://b``); for messages."""
    parts = urlsplit(url)
    if parts.scheme and "@" in parts.netloc and ":" in parts.netloc.split("@", 1)[0]:
        return url.replace(parts.netloc, parts.netloc.rsplit("@", 1)[1], 1)
    return url


def public_url(url: str) -> str:
    """``url`` without user-info, a query or a fragment (where credentials hide: an Azure SAS token is a
    query string); for reprs, logs and the data dir's record of its archive. An Azure ``container@account``
    authority is kept (the container is no secret, and names the archive); a path is returned as is."""
    parts = urlsplit(url)
    if not parts.scheme or (len(parts.scheme) == 1 and url[1:2] == ":"):
        return url
    netloc = parts.netloc
    if "@" in netloc and (SCHEMES.get(parts.scheme.lower()) != "az" or ":" in netloc.rsplit("@", 1)[0]):
        netloc = netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# --- resolution --------------------------------------------------------------------------------------------


def resolve(url: str, options: Mapping[str, str] | None = None) -> StoreConfig:
    """The :class:`StoreConfig` for ``url`` under ``options`` (see the module docstring for precedence).

    Raises :class:`~kafkalog.errors.InvalidConfigurationError` for an unsupported scheme or a malformed
    value (the message names the key; a credential's value is never repeated).
    """
    opts = strip_spark_prefix(options or {})
    secrets = [v for k, v in opts.items() if is_secret_key(k) and v]
    try:
        return _resolve(url, opts)
    except InvalidConfigurationError as exc:  # a credential pasted under the wrong key is not echoed
        text = str(exc)
        if not any(s in text for s in secrets):
            raise
        for s in sorted(secrets, key=len, reverse=True):
            text = text.replace(s, "***")
        raise InvalidConfigurationError(text) from None


def _resolve(url: str, opts: dict[str, str]) -> StoreConfig:
    kind, scheme, bucket, prefix = split_url(url)
    name = safe_url(url)
    if kind in ("file", "memory"):
        for k in opts:
            if k.startswith("fs."):
                _warn_once(k, f"has no effect on {kind} stores (ignored)")
        return StoreConfig(kind, name, bucket, prefix)
    client, retry = _client_bounds(kind, opts)
    if kind == "s3":
        return _resolve_s3(name, bucket, prefix, opts, client, retry)
    if kind == "gs":
        return _resolve_gcs(name, bucket, prefix, opts, client, retry)
    return _resolve_azure(name, scheme, bucket, prefix, opts, client, retry)


def _client_bounds(kind: str, opts: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    def pick(native: str) -> tuple[str, str] | None:
        alias = CLIENT_OPTION_KEYS[native]
        if native in opts:
            return native, opts[native]
        if kind == "s3" and alias and alias in opts:
            return alias, opts[alias]
        return None

    for k in opts:
        if k.startswith("storage.") and k not in CLIENT_OPTION_KEYS and k not in OTHER_STORAGE_KEYS:
            _warn_once(k, "is not a kafkalog storage option (ignored)")
    retries = DEFAULT_MAX_RETRIES
    if (got := pick("storage.attempts.maximum")) is not None:
        retries = parse_int(got[0], got[1], minimum=0)
    timeouts: dict[str, timedelta] = {
        "connect_timeout": DEFAULT_CONNECT_TIMEOUT,
        "read_timeout": DEFAULT_READ_TIMEOUT,
        "timeout": DEFAULT_REQUEST_TIMEOUT,
    }
    for native, target in (
        ("storage.connection.establish.timeout", "connect_timeout"),
        ("storage.connection.timeout", "read_timeout"),
        ("storage.connection.request.timeout", "timeout"),
    ):
        if (got := pick(native)) is not None:
            timeouts[target] = parse_duration(*got)
    interval = DEFAULT_RETRY_INTERVAL
    if (got := pick("storage.retry.interval")) is not None:
        interval = parse_duration(*got)
    retry_timeout = DEFAULT_RETRY_TIMEOUT
    if (got := pick("storage.retry.timeout")) is not None:
        retry_timeout = parse_duration(*got)
    client: dict[str, Any] = dict(timeouts)
    retry: dict[str, Any] = {
        "max_retries": retries,
        "retry_timeout": retry_timeout,
        "backoff": {"init_backoff": interval, "max_backoff": max(MAX_BACKOFF, interval), "base": 2},
    }
    return client, retry


def _resolve_s3(
    url: str, bucket: str, prefix: str, opts: Mapping[str, str], client: dict[str, Any], retry: dict[str, Any]
) -> StoreConfig:
    s3: dict[str, str] = {}
    bucket_prefix = f"{S3A_BUCKET_PREFIX}{bucket.lower()}."
    for k, v in opts.items():
        if k.startswith(S3A_BUCKET_PREFIX):
            continue
        if k.startswith(S3A_PREFIX):
            s3[k[len(S3A_PREFIX) :]] = v
    for k, v in opts.items():  # the URL's bucket overrides the global keys (other buckets' keys are theirs)
        if k.startswith(bucket_prefix):
            s3[k[len(bucket_prefix) :]] = v
    for k in opts:
        if k.startswith("fs.") and not k.startswith(S3A_PREFIX) and not _known_other(k):
            _warn_once(k, "is not understood by kafkalog's S3 store (ignored)")
    for k in s3:
        if k not in S3A_KEYS:
            _warn_once(S3A_PREFIX + k, "is not used by kafkalog (ignored)")

    config: dict[str, Any] = {}
    secrets: set[str] = set()
    if "access.key" in s3:
        config["access_key_id"] = s3["access.key"]
    if "secret.key" in s3:
        config["secret_access_key"] = s3["secret.key"]
        secrets.add(s3["secret.key"])
    if "session.token" in s3:
        config["session_token"] = s3["session.token"]
        secrets.add(s3["session.token"])
    if "endpoint.region" in s3:
        config["region"] = s3["endpoint.region"]
    provider = s3.get("aws.credentials.provider", "")
    if "AnonymousAWSCredentialsProvider" in provider:
        config["skip_signature"] = True
    elif provider and not all(
        p.strip().rsplit(".", 1)[-1]
        in (
            "SimpleAWSCredentialsProvider",
            "TemporaryAWSCredentialsProvider",
            "EnvironmentVariableCredentialsProvider",
            "IAMInstanceCredentialsProvider",
            "InstanceProfileCredentialsProvider",
            "DefaultAWSCredentialsProviderChain",
            "DefaultCredentialsProvider",
        )
        for p in provider.split(",")
        if p.strip()
    ):
        _warn_once(
            "fs.s3a.aws.credentials.provider",
            "names a provider kafkalog cannot run: keys, session token, environment and instance credentials are used",
        )
    ssl = (
        parse_bool("fs.s3a.connection.ssl.enabled", s3["connection.ssl.enabled"])
        if "connection.ssl.enabled" in s3
        else True
    )
    path_style = (
        parse_bool("fs.s3a.path.style.access", s3["path.style.access"]) if "path.style.access" in s3 else None
    )
    endpoint = s3.get("endpoint", opts.get("storage.endpoint", "")).strip()
    if endpoint:
        if "://" not in endpoint:
            endpoint = ("https://" if ssl else "http://") + endpoint
        endpoint = endpoint.rstrip("/")
        parts = urlsplit(_checked_endpoint("fs.s3a.endpoint", endpoint))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidConfigurationError(
                f"storage option fs.s3a.endpoint: {safe_url(endpoint)!r} is not an http(s) endpoint"
            )
        if parts.scheme == "http":
            client["allow_http"] = True
        if path_style is False:  # virtual-hosted: the bucket is part of the host name, as S3A builds it
            endpoint = f"{parts.scheme}://{bucket}.{parts.netloc}{parts.path}"
        config["endpoint"] = endpoint
    elif _env_allows_http("AWS_", ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")):
        client["allow_http"] = True  # obstore reads the endpoint from the environment; passing client
        # options would otherwise drop the environment's AWS_ALLOW_HTTP
    if path_style is not None:
        config["virtual_hosted_style_request"] = not path_style
    return StoreConfig(
        "s3",
        url,
        bucket,
        prefix,
        config,
        client,
        retry,
        frozenset(secrets),
        endpoint_option="fs.s3a.endpoint (or AWS_ENDPOINT_URL)",
        credential_options=(
            "fs.s3a.access.key / fs.s3a.secret.key / fs.s3a.session.token "
            "(or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN)"
        ),
    )


def _env_allows_http(prefix: str, endpoint_vars: tuple[str, ...]) -> bool:
    """Whether the environment asks obstore for plain HTTP (``<PREFIX>ALLOW_HTTP``, or an ``http://``
    endpoint variable)."""
    if os.environ.get(prefix + "ALLOW_HTTP", "").strip().lower() == "true":
        return True
    return any(os.environ.get(v, "").startswith("http://") for v in endpoint_vars)


def _known_other(key: str) -> bool:
    return (
        key in GCS_KEYS
        or bool(_AZURE_ACCOUNT_KEY.match(key) or _AZURE_SAS.match(key) or _AZURE_OAUTH.match(key))
        or bool(_AZURE_AUTH_TYPE.match(key))
    )


def _resolve_gcs(
    url: str, bucket: str, prefix: str, opts: Mapping[str, str], client: dict[str, Any], retry: dict[str, Any]
) -> StoreConfig:
    config: dict[str, Any] = {}
    for k, v in opts.items():
        if not k.startswith("fs."):
            continue
        if k not in GCS_KEYS:
            if not (k.startswith(("fs.s3a.", "fs.azure.")) and (k.startswith("fs.s3a.") or _known_other(k))):
                _warn_once(k, "is not understood by kafkalog's GCS store (ignored)")
            continue
        target = GCS_KEYS[k]
        if target:
            config[target] = v
        elif v.strip().upper() == "UNAUTHENTICATED":
            config["skip_signature"] = True
    if "storage.endpoint" in opts:
        config["base_url"] = opts["storage.endpoint"]
    if "base_url" in config:
        _checked_endpoint("fs.gs.storage.root.url / storage.endpoint", str(config["base_url"]))
    if str(config.get("base_url", "")).startswith("http://") or _env_allows_http("GOOGLE_", ()):
        client["allow_http"] = True
    return StoreConfig(
        "gs",
        url,
        bucket,
        prefix,
        config,
        client,
        retry,
        frozenset(),
        endpoint_option="fs.gs.storage.root.url",
        credential_options="fs.gs.auth.service.account.json.keyfile (or GOOGLE_SERVICE_ACCOUNT / GOOGLE_APPLICATION_CREDENTIALS)",
    )


def _resolve_azure(
    url: str,
    scheme: str,
    netloc: str,
    prefix: str,
    opts: Mapping[str, str],
    client: dict[str, Any],
    retry: dict[str, Any],
) -> StoreConfig:
    container, _, host = netloc.partition("@")
    account = host.split(".", 1)[0] if host else ""
    # (kind, account or None for the account-less form) -> value; kind: key, sas, id, secret, endpoint
    found: dict[tuple[str, str | None], str] = {}
    secrets: set[str] = set()
    for k, v in opts.items():
        if not k.startswith("fs."):
            continue
        if m := _AZURE_ACCOUNT_KEY.match(k):
            found["key", m.group(1)] = v
            secrets.add(v)
        elif m := _AZURE_SAS.match(k):
            found["sas", m.group(1)] = v
            secrets.add(v)
        elif m := _AZURE_OAUTH.match(k):
            found[m.group(1), m.group(2)] = v
            if m.group(1) == "secret":
                secrets.add(v)
        elif _AZURE_AUTH_TYPE.match(k):
            continue
        elif not (k.startswith("fs.s3a.") or k in GCS_KEYS):
            _warn_once(k, "is not understood by kafkalog's Azure store (ignored)")
    if not account:  # az://container/path: the one account the account-specific keys name
        named = {acct for (_, acct) in found if acct is not None}
        if len(named) == 1:
            account = named.pop()

    def pick(kind: str) -> str | None:  # the account's own key, else the account-less one
        return found.get((kind, account), found.get((kind, None))) if account else found.get((kind, None))

    config: dict[str, Any] = {}
    if account:
        config["account_name"] = account
    if account and (key := found.get(("key", account))) is not None:
        config["account_key"] = key
    if (sas := pick("sas")) is not None:
        config["sas_key"] = sas
    if (cid := pick("id")) is not None:
        config["client_id"] = cid
    if (csecret := pick("secret")) is not None:
        config["client_secret"] = csecret
    if (endpoint := pick("endpoint")) is not None:
        # https://login.microsoftonline.com/<tenant>/oauth2/token -> tenant and authority host
        parts = urlsplit(endpoint)
        tenant = parts.path.strip("/").split("/", 1)[0]
        if tenant:
            config["tenant_id"] = tenant
        if parts.scheme and parts.netloc:
            config["authority_host"] = f"{parts.scheme}://{parts.netloc}"
    if "storage.endpoint" in opts:
        config["endpoint"] = _checked_endpoint("storage.endpoint", opts["storage.endpoint"])
    if str(config.get("endpoint", "")).startswith("http://") or _env_allows_http(
        "AZURE_", ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")
    ):
        client["allow_http"] = True
    return StoreConfig(
        "az",
        url,
        container if host else netloc,
        prefix,
        config,
        client,
        retry,
        frozenset(secrets),
        endpoint_option="storage.endpoint (or AZURE_STORAGE_ENDPOINT)",
        credential_options=(
            "fs.azure.account.key.<account>.dfs.core.windows.net, fs.azure.sas.fixed.token, "
            "fs.azure.account.oauth2.client.id/secret/endpoint (or AZURE_STORAGE_ACCOUNT_KEY ...)"
        ),
    )
