"""Progress on stderr for long commands (issue #23 item 9): a transient bar when stderr is a terminal (a pty
here) and the data goes to a file or pipe; in pipes nothing changes, byte for byte."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
from io import BytesIO, StringIO
from pathlib import Path
from typing import cast

import pytest
from rich.console import Console

from kafkalog.cli.dump import dump_batch_file
from kafkalog.cli.dumpio import DumpOutput, DumpSettings
from kafkalog.cli.layout import write_example
from kafkalog.log import Log, LogConfig
from kafkalog.records import SimpleRecord

from .helpers import ENV, kafkalog_command

#: A terminal wide enough for the bar's columns; rich reads these from the environment.
TTY_ENV = {**ENV, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}


#: A bar counting bytes drawn for ``%s`` (on one line: not a spinner followed by another command's bar).
LOAD_BAR = rb"%s[^\r\n]*?[0-9.]+/[0-9.]+ (bytes|KiB)"


def run_with_tty_stderr(args: list[str | Path], stdout_path: Path) -> tuple[int, bytes]:
    """``kafkalog ARGS`` with stdout to ``stdout_path`` and stderr on a pseudo-terminal: (exit code, stderr)."""
    master, slave = pty.openpty()
    try:
        with stdout_path.open("wb") as out:
            proc = subprocess.Popen(
                [*kafkalog_command(), *(str(a) for a in args)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=slave,
                env=TTY_ENV,
            )
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        return proc.wait(timeout=120), b"".join(chunks)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def run_piped(args: list[str | Path]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*kafkalog_command(), *(str(a) for a in args)],
        capture_output=True,
        env=TTY_ENV,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "data"
    write_example(path)
    return path


def test_consume_to_a_file_shows_a_bar_on_a_terminal_and_nothing_in_a_pipe(
    data: Path, tmp_path: Path
) -> None:
    args: list[str | Path] = [
        "consume",
        data,
        "orders",
        "--from-beginning",
        "--property",
        "print.offset=true",
    ]
    piped = run_piped(args)
    assert piped.returncode == 0
    assert piped.stderr == b""  # a pipe: no bar, no control codes
    code, stderr = run_with_tty_stderr(args, tmp_path / "out.txt")
    assert code == 0
    assert b"consuming orders" in stderr  # the bar's description, drawn at least once
    assert b"\x1b[" in stderr  # and erased (transient) with terminal control sequences
    assert (tmp_path / "out.txt").read_bytes() == piped.stdout  # the data is the same with or without the bar
    assert len(piped.stdout.splitlines()) == 63  # 64 offsets of data, less the aborted transaction's marker
    # no bar for --format json (read by scripts), nor with --follow (it has no end to show progress towards)
    code, stderr = run_with_tty_stderr([*args, "--format", "json"], tmp_path / "json.txt")
    assert code == 0 and b"consuming" not in stderr
    code, stderr = run_with_tty_stderr([*args, "--max-messages", "3", "--follow"], tmp_path / "follow.txt")
    assert code == 0 and b"consuming" not in stderr
    assert (tmp_path / "follow.txt").read_bytes().splitlines() == piped.stdout.splitlines()[:3]


@pytest.mark.parametrize(
    ("dry_run", "partition_dir"),
    [(True, False), (False, False), (False, True)],
    ids=["dry-run", "recover", "recover-partition-dir"],
)
def test_recover_shows_the_bytes_it_checks_on_a_terminal(
    data: Path, tmp_path: Path, dry_run: bool, partition_dir: bool
) -> None:
    """A bar for the plan's walk ("checking"), then, unless --dry-run, one for the load ("recovering"): both
    count .log bytes (the load's from the loader's load_progress, not a spinner)."""
    work = tmp_path / "data"
    args: list[str | Path] = [
        "recover",
        work / "orders-0" if partition_dir else work,
        *(["--dry-run"] if dry_run else []),
    ]
    shutil.copytree(data, work)
    piped = run_piped(args)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == b""
    shutil.rmtree(work)
    shutil.copytree(data, work)  # the same directory again, at the same path: the same report
    code, stderr = run_with_tty_stderr(args, tmp_path / "out.txt")
    assert code == 0
    assert re.search(rb"checking.*/[0-9.]+ (bytes|KiB)", stderr)
    loading = re.search(LOAD_BAR % b"recovering", stderr)
    assert (loading is None) == dry_run, stderr
    assert (tmp_path / "out.txt").read_bytes() == piped.stdout


@pytest.mark.parametrize("partition_dir", [False, True], ids=["data-dir", "partition-dir"])
def test_compact_shows_the_bytes_compacted_on_a_terminal(
    data: Path, tmp_path: Path, partition_dir: bool
) -> None:
    # a partition directory on its own (no data directory around it) is compacted without a LogManager; the
    # cleaner writes its cleaner-offset-checkpoint next to it, so each run gets a fresh parent too
    root = tmp_path / "root"
    source, work = (data / "orders-0", root / "orders-0") if partition_dir else (data, root)
    args: list[str | Path] = ["compact", work, "--force", "--roll"]
    shutil.copytree(source, work)
    piped = run_piped(args)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == b"" and b"compacted" in piped.stdout
    shutil.rmtree(root)
    shutil.copytree(source, work)
    code, stderr = run_with_tty_stderr(args, tmp_path / "out.txt")
    assert code == 0
    assert re.search(rb"compacting.*/[0-9.]+ (bytes|KiB)", stderr)  # a bar counting bytes, not a spinner
    assert (tmp_path / "out.txt").read_bytes() == piped.stdout


def test_dump_json_never_draws_a_bar(tmp_path: Path) -> None:
    """A big segment dumped from a terminal to a file draws a bar in text mode, and none with --json."""

    class Forced(DumpOutput):
        def wants_progress(self, size: int) -> bool:
            return True  # a big file, stderr a terminal, stdout a file

    with Log.open(tmp_path / "t-0", LogConfig.from_props({"segment.bytes": 1 << 30})) as log:
        for _ in range(3):
            log.append([SimpleRecord(b"x" * 1000) for _ in range(100)])
    path = tmp_path / "t-0" / "00000000000000000000.log"
    drawn = {}
    for json_output in (False, True):
        stderr = Console(file=StringIO(), force_terminal=True)
        assert dump_batch_file(path, DumpSettings(json=json_output), Forced(BytesIO(), stderr)) == 0
        drawn[json_output] = cast(StringIO, stderr.file).getvalue()
    assert path.name in drawn[False]
    assert drawn[True] == ""


@pytest.mark.parametrize(
    "command",
    [["recover"], ["compact", "--force"], ["retention"]],
    ids=["recover", "compact", "retention"],
)
def test_json_output_draws_nothing_on_a_terminal(data: Path, tmp_path: Path, command: list[str]) -> None:
    """With --json the output is for a script: no bar and no spinner, even from a terminal."""
    work = tmp_path / "data"
    shutil.copytree(data, work)
    code, stderr = run_with_tty_stderr([command[0], work, *command[1:], "--json"], tmp_path / "out.jsonl")
    assert code == 0
    assert stderr == b""
    assert (tmp_path / "out.jsonl").read_bytes().splitlines()[-1].startswith(b'{"type":"summary"')


@pytest.mark.parametrize("command", [["compact", "--force"], ["retention"]], ids=["compact", "retention"])
def test_loading_a_data_dir_that_needs_recovery_shows_a_bar(
    data: Path, tmp_path: Path, command: list[str]
) -> None:
    """``compact`` and ``retention`` open the data directory with a LogManager first; without its clean-shutdown
    marker every segment is recovered, and the bar counts those bytes (it was a spinner)."""
    work = tmp_path / "data"
    args: list[str | Path] = [command[0], work, *command[1:]]
    shutil.copytree(data, work)
    (work / ".kafka_cleanshutdown").unlink()
    piped = run_piped(args)
    assert piped.returncode == 0, piped.stderr
    assert b"loading" not in piped.stderr
    shutil.rmtree(work)
    shutil.copytree(data, work)
    (work / ".kafka_cleanshutdown").unlink()
    code, stderr = run_with_tty_stderr(args, tmp_path / "out.txt")
    assert code == 0
    assert re.search(LOAD_BAR % b"loading", stderr), stderr
    assert (tmp_path / "out.txt").read_bytes() == piped.stdout
