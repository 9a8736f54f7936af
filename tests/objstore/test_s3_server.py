"""ObstoreStore against a real S3 server (SeaweedFS, ``tests/s3_server.py``): list / head / get / ranges and
their counts, options precedence (per-bucket > global > environment), ``s3a://``, path-style access, and
the typed errors of a wrong secret, an absent bucket, a closed port and a server that never answers —
none of which shows a secret or an obstore traceback."""

from __future__ import annotations

import logging
import socket
import threading
import time
import traceback
from collections.abc import Iterator

import pytest

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore import open_store
from objstore.forks import in_forked_child
from s3_server import S3Server

pytest.importorskip("obstore")

LOG = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> str:
    name = s3_server.make_bucket("data")
    store = s3_server.open(f"s3://{name}")
    store.put("logs/t-0/00000000000000000000.log", LOG)
    store.put("logs/t-0/00000000000000000000.index", b"\0" * 80)
    store.put("logs/t-1/00000000000000000000.log", b"one")
    return name


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


def _assert_clean(exc: BaseException, *secrets: str) -> None:
    text = _all_text(exc)
    for secret in secrets:
        assert secret not in text
    assert exc.__cause__ is None and exc.__suppress_context__  # raised from None: no obstore traceback
    assert "obstore" not in text and "Debug source" not in text


def test_list_head_get_ranges_and_stats(s3_server: S3Server, bucket: str) -> None:
    store = s3_server.open(f"s3://{bucket}/logs")
    assert store.list("").prefixes == ["t-0/", "t-1/"]
    objects = store.list("t-0/").objects
    assert [(m.key, m.size) for m in objects] == [
        ("t-0/00000000000000000000.index", 80),
        ("t-0/00000000000000000000.log", len(LOG)),
    ]
    assert objects[0].last_modified_ms is not None
    assert [m.key for m in store.list("", delimiter=False).objects][-1] == "t-1/00000000000000000000.log"
    assert store.list("absent/") == ([], [])
    key = "t-0/00000000000000000000.log"
    assert store.head(key).size == len(LOG)
    assert store.get(key) == LOG
    assert store.get_range(key, 1000, 5000) == LOG[1000:5000]
    store.stats.reset()
    ranges = [(0, 100), (4096, 8192), (len(LOG) - 10, len(LOG))]
    assert store.get_ranges(key, ranges) == [LOG[s:e] for s, e in ranges]
    assert store.stats.get_requests == 1  # all within 1 MiB of each other: one coalesced GET
    assert store.stats.bytes_read == len(LOG)
    with pytest.raises(RemoteStorageError, match="shorter than the range"):
        store.get_range(key, len(LOG) - 10, len(LOG) + 10)
    with pytest.raises(RemoteStorageError, match="past the object's end"):
        store.get_range(key, len(LOG) + 10, len(LOG) + 20)
    with pytest.raises(RemoteResourceNotFoundError, match=r"absent\.log"):
        store.get("t-0/absent.log")


def test_s3a_scheme_and_spark_prefixed_options(s3_server: S3Server, bucket: str) -> None:
    options = {"spark.hadoop." + k: v for k, v in s3_server.options().items()}
    store = open_store(f"s3a://{bucket}/logs/t-1", options)
    assert store.url == f"s3a://{bucket}/logs/t-1"
    assert store.get("00000000000000000000.log") == b"one"


def test_path_style_access_with_an_endpoint_without_scheme(s3_server: S3Server, bucket: str) -> None:
    host = s3_server.endpoint.removeprefix("http://")
    store = s3_server.open(
        f"s3://{bucket}", **{"fs.s3a.endpoint": host, "fs.s3a.connection.ssl.enabled": "false"}
    )
    assert store.get("logs/t-1/00000000000000000000.log") == b"one"


def test_environment_is_used_below_options(
    s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_REGION", s3_server.region)
    # nothing in options: the environment serves
    assert open_store(f"s3://{bucket}").get("logs/t-1/00000000000000000000.log") == b"one"
    # an option overrides the environment: a wrong secret in options is refused though the env is right
    with pytest.raises(RemoteStorageError, match="credentials were refused"):
        open_store(f"s3://{bucket}", {"fs.s3a.secret.key": "wrong-secret-in-options"}).list("")
    # and the other way: wrong environment, right options
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-in-env")
    assert s3_server.open(f"s3://{bucket}").list("logs/").prefixes == ["logs/t-0/", "logs/t-1/"]


def test_per_bucket_options_override_global(s3_server: S3Server, bucket: str) -> None:
    wrong_global = s3_server.options(**{"fs.s3a.secret.key": "global-wrong-secret"})
    right_for_bucket = {**wrong_global, f"fs.s3a.bucket.{bucket}.secret.key": s3_server.secret_key}
    assert open_store(f"s3://{bucket}", right_for_bucket).list("").prefixes == ["logs/"]
    wrong_for_bucket = {**s3_server.options(), f"fs.s3a.bucket.{bucket}.secret.key": "bucket-wrong-secret"}
    with pytest.raises(RemoteStorageError, match="credentials were refused"):
        open_store(f"s3://{bucket}", wrong_for_bucket).list("")
    other_bucket_only = {
        **s3_server.options(),
        "fs.s3a.bucket.someone-else.secret.key": "bucket-wrong-secret",
    }
    assert open_store(f"s3://{bucket}", other_bucket_only).list("").prefixes == ["logs/"]


def test_wrong_secret_is_a_typed_error_without_the_secret(
    s3_server: S3Server, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ngSecretValue-" + "x" * 20
    store = s3_server.open(
        f"s3://{bucket}", **{"fs.s3a.secret.key": wrong, "fs.s3a.session.token": "TOKEN-abc123"}
    )
    for call in (
        lambda: store.list(""),
        lambda: store.head("logs/t-1/00000000000000000000.log"),
        lambda: store.get("logs/t-1/00000000000000000000.log"),
        lambda: store.get_range("logs/t-1/00000000000000000000.log", 0, 1),
        lambda: store.get_ranges("logs/t-1/00000000000000000000.log", [(0, 1), (2, 3)]),
    ):
        with pytest.raises(RemoteStorageError) as info:
            call()
        assert not isinstance(info.value, RemoteResourceNotFoundError)
        assert "fs.s3a.secret.key" in str(info.value) and bucket in str(info.value)
        _assert_clean(info.value, wrong, s3_server.secret_key, "TOKEN-abc123")
    assert wrong not in repr(store)
    assert wrong not in caplog.text and s3_server.secret_key not in caplog.text


def test_absent_bucket_is_not_found_naming_bucket_and_endpoint(s3_server: S3Server) -> None:
    store = s3_server.open("s3://no-such-bucket-kafkalog/prefix")
    with pytest.raises(RemoteResourceNotFoundError) as info:
        store.list("t-0/")
    message = str(info.value)
    assert "no-such-bucket-kafkalog" in message and "fs.s3a.endpoint" in message
    _assert_clean(info.value, s3_server.secret_key)


def test_closed_port_fails_fast_naming_the_endpoint_option(s3_server: S3Server) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    secret = s3_server.secret_key
    for extra, bound in (({"fs.s3a.attempts.maximum": "1"}, 5.0), ({}, 10.0)):  # short, then the defaults
        store = s3_server.open("s3://b", **{"fs.s3a.endpoint": f"http://127.0.0.1:{port}", **extra})
        started = time.monotonic()
        with pytest.raises(RemoteStorageError) as info:
            store.list("")
        assert time.monotonic() - started < bound
        message = str(info.value)
        assert f"127.0.0.1:{port}" in message and "unreachable" in message and "fs.s3a.endpoint" in message
        _assert_clean(info.value, secret)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung endpoint)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def test_silent_endpoint_times_out_within_the_bounds(s3_server: S3Server, silent_server: int) -> None:
    store = s3_server.open(
        "s3://b",
        **{
            "fs.s3a.endpoint": f"http://127.0.0.1:{silent_server}",
            "fs.s3a.connection.timeout": "500ms",
            "fs.s3a.attempts.maximum": "1",
        },
    )
    started = time.monotonic()
    with pytest.raises(RemoteStorageError) as info:
        store.head("k")
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 10
    assert "unreachable" in str(info.value) and "fs.s3a.endpoint" in str(info.value)
    _assert_clean(info.value, s3_server.secret_key)


def test_a_forked_child_gets_a_typed_error_instead_of_hanging(s3_server: S3Server, bucket: str) -> None:
    store = s3_server.open(f"s3://{bucket}")
    assert store.get("logs/t-1/00000000000000000000.log") == b"one"  # this process's runtime is running

    def child() -> bool:
        try:
            store.get("logs/t-1/00000000000000000000.log")
        except RemoteStorageError as exc:
            return "forked" in str(exc)
        return False

    assert in_forked_child(child, timeout=20) == 0  # -1 would be the old hang


def test_put_stream_is_a_multipart_upload_that_appears_whole_or_not_at_all(
    s3_server: S3Server, bucket: str
) -> None:
    from kafkalog.objstore.store import PUT_PART_SIZE

    store = s3_server.open(f"s3://{bucket}/streams")
    chunks = [bytes([i]) * (3 * 1024 * 1024 + 17) for i in range(7)]  # about 2.6 parts: three uploaded parts
    assert sum(map(len, chunks)) > 2 * PUT_PART_SIZE
    store.put_stream("big", iter(chunks))
    assert store.head("big").size == sum(map(len, chunks))
    assert store.get("big") == b"".join(chunks)

    def failing() -> Iterator[bytes]:
        yield from chunks[:4]  # more than a part has gone up when the source fails
        raise RemoteStorageError("cannot read the segment to copy it")

    with pytest.raises(RemoteStorageError, match="cannot read the segment"):
        store.put_stream("torn", failing())
    with pytest.raises(RemoteResourceNotFoundError):
        store.head("torn")
