"""``kafkalog serve``: starts on a free port, serves, and shuts down cleanly on SIGTERM and SIGINT."""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kafka.protocol.metadata import ApiVersionsRequest

from kafkalog.cli.common import setup_logging
from kafkalog.cli.main import cli
from kafkalog.errors import KafkaStorageError
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


def test_serve_reports_a_log_dir_that_went_offline(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #19 item 6: after its directory went offline, ``serve`` still printed "closed cleanly" and
    exited 0; it now says which dir was not closed cleanly and exits 1."""
    import kafkalog.server.server as server_module

    with LogManager.open(data_dir, background=False) as manager:
        manager.create_topic("orders", 1)

    async def serve_then_fail(manager: LogManager, *args: Any) -> None:
        segment = manager.get_log("orders", 0).local_log.segments.active_segment

        def disk_full(*args: Any, **kwargs: Any) -> Any:
            raise OSError(28, "No space left on device")

        segment.log.append = disk_full  # type: ignore[method-assign]
        with pytest.raises(KafkaStorageError):
            manager.produce("orders", [(None, b"x")])
        assert manager.offline_dirs == [data_dir]

    monkeypatch.setattr(server_module, "_serve_until_signal", serve_then_fail)
    result = CliRunner().invoke(cli, ["--log-level", "info", "serve", str(data_dir)])
    assert result.exit_code == 1, result.output
    assert "stopped; " + str(data_dir) + " closed cleanly" not in result.stderr
    assert f"log dir(s) {data_dir} not closed cleanly" in result.stderr
    assert not (data_dir / ".kafka_cleanshutdown").exists()


def test_serve_clean_stop_says_so(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafkalog.server.server as server_module

    async def serve_nothing(manager: LogManager, *args: Any) -> None:
        return None

    monkeypatch.setattr(server_module, "_serve_until_signal", serve_nothing)
    result = CliRunner().invoke(cli, ["--log-level", "info", "serve", str(data_dir)])
    assert result.exit_code == 0, result.output
    assert f"stopped; {data_dir} closed cleanly" in result.stderr
    assert (data_dir / ".kafka_cleanshutdown").exists()


def test_serve_log_lines_carry_tracebacks(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/server.md promises a handler bug is logged with its traceback; the CLI's stderr handler dropped
    ``exc_info``."""
    logger = logging.getLogger("kafkalog")
    saved = (list(logger.handlers), logger.propagate, logger.level)
    try:
        setup_logging("warning")
        try:
            raise ZeroDivisionError("handler bug")
        except ZeroDivisionError:
            logging.getLogger("kafkalog.server").exception("error while handling %s", "Produce v9")
        err = capsys.readouterr().err
    finally:
        logger.handlers[:], logger.propagate = saved[0], saved[1]
        logger.setLevel(saved[2])
    assert err.startswith(
        "kafkalog: error: error while handling Produce v9\nTraceback (most recent call last):"
    )
    assert "ZeroDivisionError: handler bug" in err
