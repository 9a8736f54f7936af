"""``kafkalog serve``: starts on a free port, serves, and shuts down cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafka.protocol.metadata import ApiVersionsRequest

from kafkalog.cli.main import cli
from kafkalog.manager import LogManager
from kafkalog.records import MemoryRecords, SimpleRecord

from .helpers import RawClient
from .test_produce_fetch import fetch, offsets, produce


def _start(data_dir: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkalog.cli", "serve", str(data_dir), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"no listening line: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, int(match.group(1))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_until_signal_then_clean_shutdown(data_dir: Path, sig: signal.Signals) -> None:
    with LogManager.open(data_dir, background=False) as manager:
        manager.create_topic("orders", 1)
    proc, port = _start(data_dir, "--set", "num.io.threads=2", "--config", "retention.ms=86400000")
    try:
        with RawClient(port) as client:
            assert client.call(ApiVersionsRequest[0](), 0).error_code == 0
            result = produce(client, "orders", MemoryRecords.build([SimpleRecord(b"hi")]).to_bytes())
            assert result.error_code == 0  # type: ignore[attr-defined]
            assert offsets(fetch(client, "orders", 0).records) == [0]  # type: ignore[attr-defined]
    finally:
        proc.send_signal(sig)
        code = proc.wait(30)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert (data_dir / ".kafka_cleanshutdown").exists()
    with LogManager.open(data_dir, background=False) as manager:
        assert manager.get_log("orders", 0).log_end_offset == 1


def test_serve_refuses_a_locked_directory(data_dir: Path) -> None:
    with LogManager.open(data_dir, background=False):
        result = CliRunner().invoke(cli, ["serve", str(data_dir), "--listen", "127.0.0.1:0"])
    assert result.exit_code == 75


def test_serve_usage_errors(data_dir: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["serve", str(data_dir), "--listen", "127.0.0.1:notaport"]).exit_code == 64
    assert runner.invoke(cli, ["serve", str(data_dir), "--set", "nonsense"]).exit_code == 64
    assert "serve" in runner.invoke(cli, ["--help"]).output
