"""Spark Connect: the ``kafkalog`` source and sink through an ``sc://`` client (``pip install 'kafkalog[connect]'``).

A Spark Connect server (the one that ships inside pyspark) runs in a child process on a free 127.0.0.1
port, with kafkalog importable by its Python workers, so ``format("kafkalog")`` is found by the
``pyspark_kafkalog`` auto-registration; this process is only a Connect client (predicates are SQL strings:
``pyspark.sql.functions`` would build classic columns in a process that also holds a classic session).
Slow: a second JVM starts.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkalog.manager import LogManager
from kafkalog.readonly.log import ReadOnlyDataDir

from .conftest import SRC_DIR

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SERVER = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", sys.argv[1])
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    print("ready", flush=True)  # the Connect plugin starts its gRPC server with the SparkContext
    sys.stdin.read()  # serve until the test closes stdin
    spark.stop()
    """
)


@pytest.fixture(scope="module")
def connect_url() -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a Connect server running in a child process."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime on PATH (Spark needs Java 17 or 21)")
    try:
        import grpc  # noqa: F401
        import pyspark.sql.connect.session  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"Spark Connect client dependencies missing ({exc}): pip install 'kafkalog[connect]'")
    env = dict(os.environ)
    env.pop("SPARK_REMOTE", None)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYTHONPATH"] = SRC_DIR + os.pathsep + env.get("PYTHONPATH", "")
    with socket.socket() as probe:  # a free port (the server binds it a moment later)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # blocks until the server listens (or exits: empty line)
        assert line.startswith("ready"), f"the Connect server did not start (exit code {server.poll()})"
        socket.create_connection(("127.0.0.1", port), timeout=60).close()
        yield f"sc://127.0.0.1:{port}"
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[Any]:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(connect_url).getOrCreate()
    yield session
    session.stop()


def test_read_and_write_through_spark_connect(remote: Any, tmp_path: Path) -> None:
    with LogManager.open(tmp_path, background=False) as mgr:
        mgr.create_topic("orders", 2)
        mgr.create_topic("copy", 1)
        for p in (0, 1):
            mgr.produce("orders", [(b"k%d" % i, b"v%d-%d" % (p, i)) for i in range(50)], partition=p)

    df = remote.read.format("kafkalog").option("subscribe", "orders").load(str(tmp_path))
    rows = df.select("partition", "offset", "value").orderBy("partition", "offset").collect()
    assert [(r.partition, r.offset, r.value) for r in rows] == [
        (p, i, b"v%d-%d" % (p, i)) for p in (0, 1) for i in range(50)
    ]

    df.where("partition = 1").select("key", "value").write.format("kafkalog").option("topic", "copy").mode(
        "append"
    ).save(str(tmp_path))
    log = ReadOnlyDataDir(tmp_path).log("copy", 0)
    copied = [r.value for b in log.read(0, 1 << 20).batches() for r in b]
    assert sorted(copied) == sorted(b"v1-%d" % i for i in range(50))

    remote.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    pushed = (
        remote.read.format("kafkalog")
        .options(subscribe="orders", filterPushdown="true")
        .load(str(tmp_path))
        .where("partition = 0 AND offset >= 45")
    )
    assert [r.offset for r in pushed.orderBy("offset").collect()] == [45, 46, 47, 48, 49]
