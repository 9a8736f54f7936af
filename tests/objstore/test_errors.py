"""How ObstoreStore names what went wrong, against a loopback HTTP server that answers what a test tells it:
a server error after exactly the bounded retries, a wrong region, refused credentials, a missing bucket —
each its own message naming the option to fix, with no secret and no obstore traceback."""

from __future__ import annotations

import base64
import http.server
import threading
import traceback
from collections.abc import Iterator

import pytest

from kafkalog.errors import RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.objstore import open_store

pytest.importorskip("obstore")

SECRET = "sEcReT-0123456789-abcdefghij"


class Canned(http.server.BaseHTTPRequestHandler):
    """Answers every request with the server's ``status`` and ``body``; counts requests."""

    server: CannedServer

    def _answer(self) -> None:
        with self.server.lock:
            self.server.requests += 1
        body = self.server.body.encode()
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


class CannedServer(http.server.ThreadingHTTPServer):
    status = 500
    body = ""
    requests = 0
    lock = threading.Lock()


@pytest.fixture
def canned() -> Iterator[CannedServer]:
    srv = CannedServer(("127.0.0.1", 0), Canned)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join()


def _store(srv: CannedServer, **extra: str) -> object:
    return open_store(
        "s3://bucket/prefix",
        {
            "fs.s3a.endpoint": f"http://127.0.0.1:{srv.server_address[1]}",
            "fs.s3a.access.key": "AKIDCANNED",
            "fs.s3a.secret.key": SECRET,
            "fs.s3a.retry.interval": "10ms",
            **extra,
        },
    )


def _error(srv: CannedServer, status: int, body: str = "", **extra: str) -> RemoteStorageError:
    srv.status, srv.body, srv.requests = status, body, 0
    store = _store(srv, **extra)
    with pytest.raises(RemoteStorageError) as info:
        store.list("t-0/")  # type: ignore[attr-defined]
    text = "".join(traceback.format_exception(info.value))
    assert SECRET not in text and "Debug source" not in text and info.value.__cause__ is None
    return info.value


def test_server_errors_are_retried_exactly_as_bounded_and_named(canned: CannedServer) -> None:
    err = _error(canned, 503, "<Error><Code>SlowDown</Code></Error>", **{"fs.s3a.attempts.maximum": "2"})
    assert canned.requests == 3  # the first attempt and 2 retries
    assert "server error (503) after 2 retries" in str(err)
    assert "unreachable" not in str(err)
    _error(canned, 500, **{"storage.attempts.maximum": "0"})
    assert canned.requests == 1


def test_wrong_region_names_the_region_option(canned: CannedServer) -> None:
    body = "<Error><Code>AuthorizationHeaderMalformed</Code><Message>expecting 'eu-west-1'</Message></Error>"
    err = _error(canned, 400, body)
    assert "fs.s3a.endpoint.region" in str(err) and "unreachable" not in str(err)
    assert canned.requests == 1  # a 4xx is not retried


def test_refused_credentials_and_absent_bucket(canned: CannedServer) -> None:
    err = _error(canned, 403, "<Error><Code>InvalidAccessKeyId</Code></Error>")
    assert "credentials were refused" in str(err) and "fs.s3a.secret.key" in str(err)
    err = _error(canned, 404, "<Error><Code>NoSuchBucket</Code></Error>")
    assert isinstance(err, RemoteResourceNotFoundError) and "bucket 'bucket' does not exist" in str(err)


def test_failed_requests_are_counted(canned: CannedServer) -> None:
    canned.status, canned.body = 403, "<Error><Code>AccessDenied</Code></Error>"
    store = _store(canned)
    for call in (lambda: store.list(""), lambda: store.list("", delimiter=False), lambda: store.get("k")):  # type: ignore[attr-defined]
        with pytest.raises(RemoteStorageError):
            call()
    stats = store.stats  # type: ignore[attr-defined]
    assert (stats.list_requests, stats.get_requests, stats.bytes_read) == (2, 1, 0)


def test_no_credentials_anywhere_says_so(canned: CannedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")  # never the real metadata service
    canned.status, canned.requests = 200, 0
    store = open_store(
        "s3://bucket",
        {"fs.s3a.endpoint": f"http://127.0.0.1:{canned.server_address[1]}", "fs.s3a.attempts.maximum": "0"},
    )
    with pytest.raises(RemoteStorageError) as info:
        store.list("")
    message = str(info.value)
    assert "no credentials" in message and "fs.s3a.access.key" in message and "unreachable" not in message
    assert canned.requests == 0  # nothing was sent unsigned to the endpoint


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A loopback port whose accept queue is full and never drained: new connections hang in SYN, as with
    an endpoint behind a firewall that drops packets."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fill = []
    for _ in range(3):
        c = socket.socket()
        c.setblocking(False)
        try:
            c.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fill.append(c)
    yield port
    for c in fill:
        c.close()
    srv.close()


def test_connect_timeout_bounds_a_black_holed_endpoint(black_hole: int) -> None:
    import time

    store = open_store(
        "s3://bucket",
        {
            "fs.s3a.endpoint": f"http://127.0.0.1:{black_hole}",
            "fs.s3a.access.key": "AK",
            "fs.s3a.secret.key": SECRET,
            "fs.s3a.connection.establish.timeout": "300ms",
            "fs.s3a.attempts.maximum": "1",
            "fs.s3a.retry.interval": "10ms",
        },
    )
    started = time.monotonic()
    with pytest.raises(RemoteStorageError, match="unreachable") as info:
        store.head("k")
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 10  # two attempts of 300 ms each, not the OS's minutes of SYN retries
    assert "fs.s3a.endpoint" in str(info.value) and SECRET not in str(info.value)


# --- GCS and Azure: no emulator is installable here, so the canned loopback server stands in -------------------


def _cloud(srv: CannedServer, kind: str) -> object:
    """A ``gs://`` or ``az://`` store pointed at the canned server, signed with what each takes."""
    endpoint = f"http://127.0.0.1:{srv.server_address[1]}"
    if kind == "gs":
        options = {"fs.gs.storage.root.url": endpoint, "fs.gs.auth.type": "UNAUTHENTICATED"}
        return open_store(
            "gs://bucket/prefix",
            {**options, "storage.attempts.maximum": "1", "storage.retry.interval": "10ms"},
        )
    key = base64.b64encode(SECRET.encode()).decode()
    options = {
        "fs.azure.account.key.acct.dfs.core.windows.net": key,
        "storage.endpoint": f"{endpoint}/acct",
        "storage.attempts.maximum": "1",
        "storage.retry.interval": "10ms",
    }
    return open_store("abfss://container@acct.dfs.core.windows.net/prefix", options)


@pytest.mark.parametrize("kind", ["gs", "az"])
def test_gcs_and_azure_errors_are_translated_and_name_their_options(canned: CannedServer, kind: str) -> None:
    """The same translation as S3's for ``gs://`` and ``az://``: a missing object, refused credentials (naming
    that store's credential options), a server error after the bounded retries, a missing container, an
    unreachable endpoint (naming that store's endpoint option); never a secret or obstore's debug dump."""
    base64_secret = base64.b64encode(SECRET.encode()).decode()

    def error(status: int, body: str = "", call: str = "get") -> RemoteStorageError:
        canned.status, canned.body, canned.requests = status, body, 0
        store = _cloud(canned, kind)
        with pytest.raises(RemoteStorageError) as info:
            store.get("t-0/k") if call == "get" else store.list("t-0/")  # type: ignore[attr-defined]
        text = "".join(traceback.format_exception(info.value))
        assert SECRET not in text and base64_secret not in text and "Debug source" not in text
        assert info.value.__cause__ is None
        return info.value

    missing = error(404)
    assert isinstance(missing, RemoteResourceNotFoundError) and "no such object" in str(missing)
    refused = error(403, "<Error><Code>AuthenticationFailed</Code></Error>")
    credentials = "fs.gs.auth.service.account.json.keyfile" if kind == "gs" else "fs.azure.account.key"
    assert "credentials were refused" in str(refused) and credentials in str(refused), str(refused)
    server = error(503)
    assert "server error (503) after 1 retries" in str(server) and canned.requests == 2
    if kind == "az":
        absent = error(404, "<Error><Code>ContainerNotFound</Code></Error>", call="list")
        assert isinstance(absent, RemoteResourceNotFoundError) and "bucket 'container' does not exist" in str(
            absent
        )
    port = canned.server_address[1]
    canned.shutdown()
    canned.server_close()
    with pytest.raises(RemoteStorageError) as info:
        _cloud(canned, kind).get("t-0/k")  # type: ignore[attr-defined]
    endpoint_option = "fs.gs.storage.root.url" if kind == "gs" else "storage.endpoint"
    assert f"127.0.0.1:{port}" in str(info.value) and "unreachable" in str(info.value)
    assert endpoint_option in str(info.value)
