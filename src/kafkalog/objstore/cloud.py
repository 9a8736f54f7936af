""":class:`ObstoreStore`: the :class:`~kafkalog.objstore.store.ObjectStore` for S3, GCS and Azure, on obstore.

Invariant owned here: no obstore exception, traceback or credential leaves this module. Every failure of
obstore is translated once (:func:`translate_error`) into :class:`~kafkalog.errors.RemoteResourceNotFoundError`
(object, prefix or bucket absent) or :class:`~kafkalog.errors.RemoteStorageError` (credentials refused,
endpoint unreachable after the bounded retries, anything else), whose message names the store URL, the key
and the option that fixes it, with every credential value scrubbed, and which is raised ``from None``.
Every request is counted in :class:`~kafkalog.objstore.store.StoreStats`: a delimited listing counts one
LIST per 1,000 entries returned (S3's page size), a ``get_ranges`` the coalesced requests obstore makes
(ranges closer than :data:`COALESCE_BYTES` share one GET, at most 10 run at once) and the bytes they carry.

obstore is imported lazily (the ``kafkalog[cloud]`` extra); without it :func:`load_obstore` raises a
:class:`~kafkalog.errors.RemoteStorageError` telling the user what to install.
"""

from __future__ import annotations

import builtins
import importlib
import math
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from kafkalog.errors import InvalidConfigurationError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore.options import StoreConfig, resolve
from kafkalog.objstore.store import ListResult, ObjectMeta, StoreStats

#: Ranges of one object closer than this are read by one GET (obstore's default, 1 MiB).
COALESCE_BYTES = 1024 * 1024
#: Requests obstore's ``get_ranges`` runs at once (fixed in obstore / object_store).
GET_RANGES_CONCURRENCY = 10
#: Entries of one LIST page (S3, GCS and Azure all return at most 1,000 per request).
LIST_PAGE = 1000

INSTALL_HINT = "pip install 'kafkalog[cloud]'"

_CREDENTIAL_MARKERS = (
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "InvalidSecurity",
    "403 Forbidden",
    "401 Unauthorized",
)
_UNREACHABLE_MARKERS = (
    "error sending request",
    "Connection refused",
    "connection refused",
    "tcp connect error",
    "dns error",
    "timed out",
    "Timeout",
    "timeout",
    "connection closed",
    "Connection reset",
    "certificate",
)
_BUCKET_MARKERS = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist")


def load_obstore() -> ModuleType:
    """The ``obstore`` module, or a typed error naming the extra to install."""
    try:
        return importlib.import_module("obstore")
    except ImportError:
        raise RemoteStorageError(
            f"reading object storage (s3://, gs://, az://) needs the obstore package: {INSTALL_HINT}"
        ) from None


def _first_line(text: str) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= 400 else line[:400] + "..."


def translate_error(exc: BaseException, cfg: StoreConfig, op: str, key: str | None) -> RemoteStorageError:
    """A kafkalog error for obstore's ``exc`` during ``op`` on ``key`` (see the module docstring)."""
    text = cfg.scrub(str(exc)).split("Debug source:", 1)[0]  # obstore's debug dump repeats its own config
    what = f"{cfg.url}: {op}" + (f" {key!r}" if key is not None else "")
    endpoint = cfg.config.get("endpoint") or cfg.config.get("base_url") or "the default endpoint"
    if any(m in text for m in _BUCKET_MARKERS):
        return RemoteResourceNotFoundError(
            f"{what}: bucket {cfg.bucket!r} does not exist at {endpoint} "
            f"(check the URL's bucket and {cfg.endpoint_option})"
        )
    if isinstance(exc, FileNotFoundError):
        return RemoteResourceNotFoundError(f"{what}: no such object")
    if "416 Range Not Satisfiable" in text:
        return RemoteStorageError(f"{what}: the range starts past the object's end")
    name = type(exc).__name__
    if name in ("PermissionDeniedError", "UnauthenticatedError") or any(
        m in text for m in _CREDENTIAL_MARKERS
    ):
        return RemoteStorageError(
            f"{what}: the credentials were refused by {endpoint} ({_first_line(text)}); "
            f"check {cfg.credential_options}"
        )
    if any(m in text for m in _UNREACHABLE_MARKERS):
        retries = cfg.retry_config.get("max_retries", "?")
        return RemoteStorageError(
            f"{what}: endpoint {endpoint} unreachable after {retries} retries ({_first_line(text)}); "
            f"check {cfg.endpoint_option}, and storage.connection.establish.timeout / "
            f"storage.attempts.maximum for the bounds"
        )
    return RemoteStorageError(f"{what} failed: {_first_line(text)}")


def coalesced(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_BYTES) -> list[tuple[int, int]]:
    """The requests that reading ``ranges`` takes when ranges closer than ``gap`` share one (sorted)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start - merged[-1][1] <= gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _meta(key: str, raw: Mapping[str, Any]) -> ObjectMeta:
    modified = raw.get("last_modified")
    ms = int(modified.timestamp() * 1000) if modified is not None else None
    return ObjectMeta(key, int(raw["size"]), ms)


class ObstoreStore:
    """An :class:`~kafkalog.objstore.store.ObjectStore` over one obstore store (S3, GCS, Azure, or obstore's
    memory / local stores in tests). Thread-safe; picklable when made by :func:`open_cloud_store` (it is
    opened again from its URL and options, never pickled with a live client)."""

    def __init__(
        self,
        inner: Any,
        cfg: StoreConfig,
        *,
        options: Mapping[str, str] | None = None,
        url: str | None = None,
    ) -> None:
        self._ob = load_obstore()
        self._inner = inner
        self._cfg = cfg
        self._url = url or cfg.url
        self._options = dict(options) if options is not None else None
        self._stats = StoreStats()

    def __repr__(self) -> str:
        return f"ObstoreStore({self._url!r})"

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, str]]]:
        if self._options is None:
            raise TypeError(f"{self!r} was not opened from a URL and cannot be pickled")
        return (open_cloud_store, (self._url, self._options))

    @property
    def url(self) -> str:
        return self._url

    @property
    def stats(self) -> StoreStats:
        return self._stats

    @property
    def config(self) -> StoreConfig:
        """The resolved configuration (its ``repr`` hides credentials)."""
        return self._cfg

    def _fail(self, exc: BaseException, op: str, key: str | None) -> RemoteStorageError:
        return translate_error(exc, self._cfg, op, key)

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        base = prefix.rstrip("/") or None
        if delimiter:
            try:
                raw = self._ob.list_with_delimiter(self._inner, base)
            except Exception as exc:
                raise self._fail(exc, "LIST", prefix) from None
            prefixes = sorted(p.rstrip("/") + "/" for p in raw["common_prefixes"])
            objects = sorted((_meta(o["path"], o) for o in raw["objects"]), key=lambda m: m.key)
            pages = max(1, math.ceil((len(prefixes) + len(objects)) / LIST_PAGE))
            for _ in range(pages):
                self._stats.count_list()
            return ListResult(prefixes, objects)
        found: list[ObjectMeta] = []
        try:
            stream = self._ob.list(self._inner, base, chunk_size=LIST_PAGE)
            pages = 0
            for chunk in stream:
                pages += 1
                found.extend(_meta(o["path"], o) for o in chunk)
        except Exception as exc:
            raise self._fail(exc, "LIST", prefix) from None
        for _ in range(max(1, pages)):
            self._stats.count_list()
        found.sort(key=lambda m: m.key)
        return ListResult([], found)

    def head(self, key: str) -> ObjectMeta:
        self._stats.count_head()
        try:
            raw = self._ob.head(self._inner, key)
        except Exception as exc:
            raise self._fail(exc, "HEAD", key) from None
        return _meta(key, raw)

    def get(self, key: str) -> bytes:
        try:
            data = bytes(self._ob.get(self._inner, key).bytes())
        except Exception as exc:
            self._stats.count_get(0)
            raise self._fail(exc, "GET", key) from None
        self._stats.count_get(len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if not 0 <= start <= end:
            raise RemoteStorageError(f"{self._url}: GET {key!r}: invalid range [{start}, {end})")
        if start == end:
            return b""
        try:
            data = bytes(self._ob.get_range(self._inner, key, start=start, end=end))
        except Exception as exc:
            self._stats.count_get(0)
            raise self._fail(exc, f"GET [{start}, {end}) of", key) from None
        self._stats.count_get(len(data))
        if len(data) != end - start:
            raise RemoteStorageError(
                f"{self._url}: GET [{start}, {end}) of {key!r} returned {len(data)} bytes: "
                f"the object is shorter than the range"
            )
        return data

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        for start, end in ranges:
            if not 0 <= start <= end:
                raise RemoteStorageError(f"{self._url}: GET {key!r}: invalid range [{start}, {end})")
        wanted = [(s, e) for s, e in ranges if e > s]
        if not wanted:
            return [b"" for _ in ranges]
        try:
            got = self._ob.get_ranges(
                self._inner,
                key,
                starts=[s for s, _ in wanted],
                ends=[e for _, e in wanted],
                coalesce=COALESCE_BYTES,
            )
        except Exception as exc:
            self._stats.count_get(0)
            raise self._fail(exc, "GET ranges of", key) from None
        requests = coalesced(wanted)
        self._stats.count_get(sum(e - s for s, e in requests), len(requests))
        it = iter(got)
        out: list[bytes] = []
        for start, end in ranges:
            if end == start:
                out.append(b"")
                continue
            data = bytes(next(it))
            if len(data) != end - start:
                raise RemoteStorageError(
                    f"{self._url}: GET [{start}, {end}) of {key!r} returned {len(data)} bytes: "
                    f"the object is shorter than the range"
                )
            out.append(data)
        return out

    def put(self, key: str, data: bytes) -> None:
        try:
            self._ob.put(self._inner, key, bytes(data))
        except Exception as exc:
            raise self._fail(exc, "PUT", key) from None

    def delete(self, key: str) -> None:
        try:
            self._ob.delete(self._inner, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._fail(exc, "DELETE", key) from None


def open_cloud_store(url: str, options: Mapping[str, str] | None = None) -> ObstoreStore:
    """An :class:`ObstoreStore` for an ``s3://`` / ``s3a://`` / ``gs://`` / ``az://`` / ``abfss://`` URL."""
    cfg = resolve(url, options)
    if cfg.kind not in ("s3", "gs", "az"):
        raise InvalidConfigurationError(f"{cfg.url}: not an object-storage URL (s3://, gs://, az://)")
    ob = load_obstore()
    store_url = url if cfg.kind != "s3" else "s3://" + url.split("://", 1)[1]
    try:
        inner = ob.store.from_url(
            store_url,
            config=dict(cfg.config),
            client_options=dict(cfg.client_options),
            retry_config=dict(cfg.retry_config),
        )
    except Exception as exc:
        raise InvalidConfigurationError(
            f"{cfg.url}: cannot configure the store ({_first_line(cfg.scrub(str(exc)))}); "
            f"check {cfg.credential_options} and {cfg.endpoint_option}"
        ) from None
    return ObstoreStore(inner, cfg, options=dict(options or {}), url=cfg.url)
