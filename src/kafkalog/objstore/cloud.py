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
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Final

from kafkalog.errors import (
    InvalidConfigurationError,
    KafkaError,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from kafkalog.objstore.keys import check_key, check_prefix
from kafkalog.objstore.options import StoreConfig, resolve
from kafkalog.objstore.store import PUT_CONCURRENCY, PUT_PART_SIZE, ListResult, ObjectMeta, StoreStats

#: Ranges of one object closer than this are read by one GET (obstore's default, 1 MiB).
COALESCE_BYTES = 1024 * 1024
#: Requests obstore's ``get_ranges`` runs at once (fixed in obstore / object_store).
GET_RANGES_CONCURRENCY = 10
#: Entries of one LIST page (S3, GCS and Azure all return at most 1,000 per request).
LIST_PAGE = 1000

INSTALL_HINT = "pip install 'kafkalog[cloud]'"

_CREDENTIAL_CODES = (
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthenticationFailed",
    "AuthorizationFailure",
    "InvalidSecurity",
)
_REGION_MARKERS = (
    "AuthorizationHeaderMalformed",
    "PermanentRedirect",
    "redirect",
    "IllegalLocationConstraint",
)
_UNREACHABLE_MARKERS = (
    "error sending request",
    "onnection refused",
    "tcp connect error",
    "dns error",
    "timed out",
    "operation timed out",
    "connection closed",
    "onnection reset",
    "certificate",
)
#: A credential provider's own requests (instance metadata of EC2 / ECS, GCE, Azure MSI): failing there
#: means no credential was found, whatever the data endpoint would have said.
_METADATA_MARKERS = (
    "/latest/api/token",
    "/latest/meta-data",
    "169.254.169.254",
    "169.254.170.2",
    "metadata.google.internal",
    "computeMetadata",
    "/metadata/identity/oauth2/token",
    "sts.amazonaws.com",
    "AssumeRoleWithWebIdentity",
)
_BUCKET_MARKERS = ("NoSuchBucket", "ContainerNotFound", "The specified bucket does not exist")
_STATUS = re.compile(r"status code: (\d{3})")
#: obstore's summary of its retries ("after 2 retries, max_retries: 2, retry_timeout: 20s"): not a cause.
_RETRY_SUMMARY = re.compile(r"(?:, )?after \d+ retries, max_retries: \d+, retry_timeout: \S+")


_runtime_pid = 0  # the process whose requests started obstore's runtime (its threads do not survive fork)
_runtime_lock = threading.Lock()


def _check_fork(url: str) -> None:
    """Refuse a request in a process forked after this one's parent made obstore requests: obstore's
    runtime threads do not exist in the child, so the request would wait for them forever (a store opened
    in the parent but first used in the child is fine)."""
    global _runtime_pid
    pid = os.getpid()
    if _runtime_pid == pid:
        return
    with _runtime_lock:
        if _runtime_pid in (0, pid):
            _runtime_pid = pid
            return
    raise RemoteStorageError(
        f"{url}: this process was forked from one that had already made object-storage requests, and "
        f"obstore's runtime does not survive fork: start such processes with the 'spawn' or 'forkserver' "
        f"method, or make the first request only in the children"
    )


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
    """A kafkalog error for obstore's ``exc`` during ``op`` on ``key`` (see the module docstring).

    Classified by the HTTP status obstore reports, else by the transport error: 404 with a bucket code ->
    bucket absent; a failed instance-metadata request -> no credentials; ``FileNotFoundError`` or 404 ->
    object absent; 416 -> past the end; 401/403 or a credential error code -> credentials refused; a
    wrong-region answer -> the region option; 5xx -> a server error after the retries; no status and a
    connection, DNS, TLS or timeout error -> unreachable."""
    text = cfg.scrub(str(exc)).split("Debug source:", 1)[0]  # obstore's debug dump repeats its own config
    text = _RETRY_SUMMARY.sub("", text)
    what = f"{cfg.url}: {op}" + (f" {key!r}" if key is not None else "")
    endpoint = cfg.config.get("endpoint") or cfg.config.get("base_url") or "the default endpoint"
    found = _STATUS.search(text)
    status = int(found.group(1)) if found else None
    retries = cfg.retry_config.get("max_retries", "?")
    detail = _first_line(text)
    if any(m in text for m in _BUCKET_MARKERS):
        return RemoteResourceNotFoundError(
            f"{what}: bucket {cfg.bucket!r} does not exist at {endpoint} "
            f"(check the URL's bucket and {cfg.endpoint_option})"
        )
    if any(m in text for m in _METADATA_MARKERS):
        return RemoteStorageError(
            f"{what}: no credentials: none in the storage options or the environment, and the instance "
            f"credential service did not provide any ({detail}); set {cfg.credential_options}"
        )
    if isinstance(exc, FileNotFoundError) or status == 404:
        return RemoteResourceNotFoundError(f"{what}: no such object")
    if status == 416:
        return RemoteStorageError(f"{what}: the range starts past the object's end")
    name = type(exc).__name__
    if (
        name in ("PermissionDeniedError", "UnauthenticatedError")
        or status in (401, 403)
        or any(c in text for c in _CREDENTIAL_CODES)
    ):
        return RemoteStorageError(
            f"{what}: the credentials were refused by {endpoint} ({detail}); check {cfg.credential_options}"
        )
    if any(m in text for m in _REGION_MARKERS):
        hint = "fs.s3a.endpoint.region (or AWS_REGION) and " if cfg.kind == "s3" else ""
        return RemoteStorageError(
            f"{what}: {endpoint} answers for another region ({detail}); check {hint}{cfg.endpoint_option}"
        )
    if status is not None and status >= 500:
        return RemoteStorageError(
            f"{what}: {endpoint} answered with a server error ({status}) after {retries} retries ({detail}); "
            f"retry later, or raise storage.attempts.maximum / storage.retry.timeout"
        )
    if status is None and any(m in text for m in _UNREACHABLE_MARKERS):
        return RemoteStorageError(
            f"{what}: endpoint {endpoint} unreachable after {retries} retries ({detail}); "
            f"check {cfg.endpoint_option}, and storage.connection.establish.timeout / "
            f"storage.connection.timeout / storage.attempts.maximum for the bounds"
        )
    return RemoteStorageError(f"{what} failed: {detail}")


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
        return (reopened_cloud_store, (self._url, self._options))

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

    def _runtime(self) -> ModuleType:
        """obstore, after checking this process may use it (see :func:`_check_fork`)."""
        _check_fork(self._url)
        return self._ob

    def _fail(self, exc: BaseException, op: str, key: str | None) -> RemoteStorageError:
        return translate_error(exc, self._cfg, op, key)

    def list(self, prefix: str = "", *, delimiter: bool = True) -> ListResult:
        base = check_prefix(self._url, prefix).rstrip("/") or None
        if delimiter:
            try:
                raw = self._runtime().list_with_delimiter(self._inner, base)
            except Exception as exc:
                self._stats.count_list()  # a refused LIST was still a request
                raise self._fail(exc, "LIST", prefix) from None
            prefixes = sorted(p.rstrip("/") + "/" for p in raw["common_prefixes"])
            objects = sorted((_meta(o["path"], o) for o in raw["objects"]), key=lambda m: m.key)
            pages = max(1, math.ceil((len(prefixes) + len(objects)) / LIST_PAGE))
            for _ in range(pages):
                self._stats.count_list()
            return ListResult(prefixes, objects)
        found: list[ObjectMeta] = []
        try:
            stream = self._runtime().list(self._inner, base, chunk_size=LIST_PAGE)
            pages = 0
            for chunk in stream:
                pages += 1
                found.extend(_meta(o["path"], o) for o in chunk)
        except Exception as exc:
            for _ in range(pages + 1):
                self._stats.count_list()
            raise self._fail(exc, "LIST", prefix) from None
        for _ in range(max(1, pages)):
            self._stats.count_list()
        found.sort(key=lambda m: m.key)
        return ListResult([], found)

    def head(self, key: str) -> ObjectMeta:
        check_key(self._url, key)
        self._stats.count_head()
        try:
            raw = self._runtime().head(self._inner, key)
        except Exception as exc:
            raise self._fail(exc, "HEAD", key) from None
        return _meta(key, raw)

    def get(self, key: str) -> bytes:
        check_key(self._url, key)
        try:
            data = bytes(self._runtime().get(self._inner, key).bytes())
        except Exception as exc:
            self._stats.count_get(0)
            raise self._fail(exc, "GET", key) from None
        self._stats.count_get(len(data))
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return bytes(self.get_range_view(key, start, end))

    def get_range_view(self, key: str, start: int, end: int) -> memoryview:
        """:meth:`get_range` as a read-only view of obstore's buffer (no copy)."""
        check_key(self._url, key)
        if not 0 <= start <= end:
            raise RemoteStorageError(f"{self._url}: GET {key!r}: invalid range [{start}, {end})")
        if start == end:
            return memoryview(b"")
        try:
            data = memoryview(self._runtime().get_range(self._inner, key, start=start, end=end))
        except Exception as exc:
            self._stats.count_get(0)
            raise self._fail(exc, f"GET [{start}, {end}) of", key) from None
        self._stats.count_get(data.nbytes)
        if data.nbytes != end - start:
            raise RemoteStorageError(
                f"{self._url}: GET [{start}, {end}) of {key!r} returned {data.nbytes} bytes: "
                f"the object is shorter than the range"
            )
        return data

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        return [bytes(v) for v in self.get_range_views(key, ranges)]

    def get_range_views(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[memoryview]:
        """:meth:`get_ranges` as read-only views of obstore's buffers (no copy)."""
        check_key(self._url, key)
        for start, end in ranges:
            if not 0 <= start <= end:
                raise RemoteStorageError(f"{self._url}: GET {key!r}: invalid range [{start}, {end})")
        wanted = [(s, e) for s, e in ranges if e > s]
        if not wanted:
            return [memoryview(b"") for _ in ranges]
        try:
            got = self._runtime().get_ranges(
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
        out: list[memoryview] = []
        for start, end in ranges:
            if end == start:
                out.append(memoryview(b""))
                continue
            data = memoryview(next(it))
            if data.nbytes != end - start:
                raise RemoteStorageError(
                    f"{self._url}: GET [{start}, {end}) of {key!r} returned {data.nbytes} bytes: "
                    f"the object is shorter than the range"
                )
            out.append(data)
        return out

    def put(self, key: str, data: bytes) -> None:
        check_key(self._url, key)
        try:
            self._runtime().put(self._inner, key, bytes(data))
        except Exception as exc:
            raise self._fail(exc, "PUT", key) from None

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        check_key(self._url, key)
        # obstore's multipart put: parts of PUT_PART_SIZE, PUT_CONCURRENCY in flight; aborted when ``chunks`` or a
        # part fails before the last parts (not when those or the abort fail: operations §13, Multipart uploads)
        try:
            self._runtime().put(
                self._inner,
                key,
                _parts(chunks, PUT_PART_SIZE),
                chunk_size=PUT_PART_SIZE,
                max_concurrency=PUT_CONCURRENCY,
            )
        except KafkaError:
            raise  # the chunks' producer failed (e.g. reading the local file): not the store
        except Exception as exc:
            raise self._fail(exc, "PUT", key) from None

    def delete(self, key: str) -> None:
        check_key(self._url, key)
        try:
            self._runtime().delete(self._inner, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            raise self._fail(exc, "DELETE", key) from None


def _parts(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """``chunks`` regrouped into items of at least ``size`` bytes (the last may be shorter): obstore then holds
    a few part-sized buffers, not many small ones each pinned until its part is sent (which fragments the
    heap: a 256 MiB zstd-compressed copy grew the RSS by 147 MiB without this, 50 with it)."""
    pending: list[bytes] = []
    pending_bytes = 0
    for chunk in chunks:
        pending.append(chunk)
        pending_bytes += len(chunk)
        if pending_bytes >= size:
            yield pending[0] if len(pending) == 1 else b"".join(pending)
            pending.clear()
            pending_bytes = 0
    if pending:
        yield b"".join(pending)


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


#: Stores :func:`reopened_cloud_store` keeps per process (unpickled tasks share their clients' connections).
_REOPENED_STORES: Final = 8
_reopened: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], ObstoreStore] = OrderedDict()
_reopened_lock = threading.Lock()


def reopened_cloud_store(url: str, options: Mapping[str, str]) -> ObstoreStore:
    """What an unpickled :class:`ObstoreStore` becomes: the store for ``url`` and ``options`` opened once per
    process (the last few kept), so the tasks a Spark worker unpickles reuse one client and its connections."""
    key = (url, tuple(sorted(options.items())))
    with _reopened_lock:
        store = _reopened.get(key)
        if store is not None:
            _reopened.move_to_end(key)
            return store
    store = open_cloud_store(url, options)
    with _reopened_lock:
        store = _reopened.setdefault(key, store)
        while len(_reopened) > _REOPENED_STORES:
            _reopened.popitem(last=False)
    return store
