"""``get_ranges`` on obstore: nearby ranges coalesce into one GET and far ones run concurrently, at most
10 at once (obstore's fixed bound) — measured at a loopback server that holds each request open a while."""

from __future__ import annotations

import http.server
import re
import threading
import time
from collections.abc import Iterator

import pytest

from kafkalog.objstore import open_store
from kafkalog.objstore.cloud import GET_RANGES_CONCURRENCY

pytest.importorskip("obstore")

SIZE = 64 * 1024 * 1024
MIB = 1024 * 1024


def _byte(i: int) -> int:
    return (i * 7 + i // 251) & 0xFF


def _content(start: int, end: int) -> bytes:
    return bytes(_byte(i) for i in range(start, end))


class RangeServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    lock = threading.Lock()
    active = 0
    peak = 0
    requests: list[tuple[int, int]]
    hold_s = 0.15


class Handler(http.server.BaseHTTPRequestHandler):
    server: RangeServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        assert m is not None, self.headers
        start, last = int(m.group(1)), int(m.group(2))
        with self.server.lock:
            self.server.active += 1
            self.server.peak = max(self.server.peak, self.server.active)
            self.server.requests.append((start, last + 1))
        time.sleep(self.server.hold_s)  # the request in flight: others pile up beside it
        body = _content(start, last + 1)
        with self.server.lock:
            self.server.active -= 1
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{last}/{SIZE}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[RangeServer]:
    srv = RangeServer(("127.0.0.1", 0), Handler)
    srv.requests = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join()


def test_far_ranges_run_concurrently_but_at_most_ten_at_once(server: RangeServer) -> None:
    store = open_store(
        "s3://bucket",
        {
            "fs.s3a.endpoint": f"http://127.0.0.1:{server.server_address[1]}",
            "fs.s3a.access.key": "AK",
            "fs.s3a.secret.key": "SK-0123456789",
        },
    )
    ranges = [(i * 2 * MIB, i * 2 * MIB + 100) for i in range(30)]  # 2 MiB apart: never coalesced
    ranges += [(5, 50), (60, 99)]  # within 1 MiB of the first: share its GET
    started = time.monotonic()
    out = store.get_ranges("k", ranges)
    elapsed = time.monotonic() - started
    assert out == [_content(s, e) for s, e in ranges]
    assert len(server.requests) == 30 == store.stats.get_requests
    assert store.stats.bytes_read == sum(e - s for s, e in server.requests)
    assert 2 <= server.peak <= GET_RANGES_CONCURRENCY == 10
    assert elapsed < 30 * server.hold_s  # concurrent: far less than one request after another
