"""What every ``kafkalog`` subcommand shares: exit codes, one-line errors, the click command class, output.

Exit codes (the contract scripts rely on; ``kafkalog --help`` prints them):

====  =====================================================================================================
 0    success
 1    faults found (``verify``), or an operation failed (an I/O error, an append rejected by the log)
 2    ``dump``, ``consume``: corrupt data (a bad frame, a CRC mismatch, an index entry that contradicts the log)
 3    ``dump``: a truncated tail (trailing bytes that do not form a complete batch or entry)
 64   usage error (unknown option, bad value, a file type a command cannot take) — ``EX_USAGE``
 66   no such file or directory, or not readable — ``EX_NOINPUT``
 75   the log directory is locked by another process (a running producer, a broker) — ``EX_TEMPFAIL``
 130  interrupted (Ctrl-C) where that is not the normal way to stop (``consume --follow`` exits 0)
 141  stdout was closed early (``kafkalog dump x.log | head``), as a shell reports SIGPIPE
====  =====================================================================================================

:class:`KafkalogCommand` turns click's usage errors into exit 64, a :class:`CliError` into its one-line message
and code, :class:`~kafkalog.errors.LogDirLockedError` into 75, other :class:`~kafkalog.errors.KafkaError` and
``OSError`` into a one-line message and exit 1 (no traceback), a missing optional dependency into a one-line
message naming the extra that installs it (:data:`OPTIONAL_EXTRAS`) and exit 1, a closed stdout into 141. Commands print data on
stdout and messages on stderr (through rich, so colours appear only on a terminal).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from kafkalog.errors import KafkaError, LogDirLockedError

__all__ = [
    "CONTEXT_SETTINGS",
    "EXIT_BROKEN_PIPE",
    "EXIT_CODES_HELP",
    "EXIT_CORRUPT",
    "EXIT_FAULT",
    "EXIT_INTERRUPTED",
    "EXIT_LOCKED",
    "EXIT_NOINPUT",
    "EXIT_OK",
    "EXIT_TRUNCATED",
    "EXIT_USAGE",
    "OPTIONAL_EXTRAS",
    "CliError",
    "KafkalogCommand",
    "KafkalogGroup",
    "bytes_bar",
    "error_console",
    "fail",
    "isatty",
    "json_dumps",
    "os_error_text",
    "parse_key_values",
    "plural",
    "progress",
    "require_dir",
    "setup_logging",
    "silence_stdout",
    "status",
    "stdout_console",
]

EXIT_OK: Final = 0
EXIT_FAULT: Final = 1
EXIT_CORRUPT: Final = 2
EXIT_TRUNCATED: Final = 3
EXIT_USAGE: Final = 64
EXIT_NOINPUT: Final = 66
EXIT_LOCKED: Final = 75
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141

#: The exit-code table of ``--help`` texts (a click ``\b`` block keeps its layout).
EXIT_CODES_HELP: Final = """\b
Exit codes:
  0    success
  1    faults found (verify), or the operation failed
  2    dump, consume: corrupt data (bad frame, CRC, index/log mismatch)
  3    dump: truncated tail (bytes that do not form a whole batch/entry)
  64   usage error (bad option or value, unsupported file type)
  66   no such file or directory (or not readable)
  75   log directory locked by another process (try again later)"""

#: Top-level module of an optional dependency -> the kafkalog extra that installs it (pyproject.toml).
OPTIONAL_EXTRAS: Final = {
    "kafka": "server",
    "prometheus_client": "metrics",
    "pyspark": "spark",
    "pyarrow": "arrow",
}

CONTEXT_SETTINGS: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"], "max_content_width": 80}


class CliError(Exception):
    """An error the command reports in one line (``error: <message>``) before exiting with ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAULT) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def plural(n: int, one: str, many: str) -> str:
    """``1 record`` / ``2 records``: a count with its noun in the right number."""
    return f"{n} {one if n == 1 else many}"


def fail(message: str, code: int = EXIT_FAULT) -> NoReturn:
    """Raise :class:`CliError`."""
    raise CliError(message, code)


def os_error_text(exc: OSError) -> str:
    """``strerror`` of an ``OSError`` with the file name when there is one (``No such file or directory: x``)."""
    text = exc.strerror or str(exc)
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {text}"
    return text


def _os_error_code(exc: OSError) -> int:
    if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.EISDIR, errno.EPERM):
        return EXIT_NOINPUT
    return EXIT_FAULT


def error_console() -> Console:
    """A rich console on stderr (no syntax highlighting; colours only on a terminal)."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def stdout_console() -> Console:
    """A rich console on stdout: plain text when stdout is not a terminal, and then neither long lines nor
    tables are wrapped to 80 columns (a pipe has no width)."""
    width = None if _isatty(sys.stdout) else 4096
    return Console(highlight=False, soft_wrap=True, width=width)


def print_error(message: str, console: Console | None = None) -> None:
    """``error: <message>`` on stderr."""
    (console or error_console()).print(f"[bold red]error:[/] {escape(message)}")


def silence_stdout() -> None:
    """Points stdout at /dev/null so that the interpreter's final flush does not fail again (closed pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class _UsageError(click.UsageError):
    """A usage error exiting 64 (``EX_USAGE``) instead of click's 2 (which means corrupt data for ``dump``)."""

    exit_code = EXIT_USAGE


class _StderrHandler(logging.Handler):
    """Log records as ``kafkalog: <level>: <message>`` lines on the *current* ``sys.stderr``, followed by the
    record's traceback (``exc_info``, as ``logger.exception`` attaches) and stack (``stack_info``) if any."""

    _formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"kafkalog: {record.levelname.lower()}: {record.getMessage()}\n"
            if record.exc_info:
                text += self._formatter.formatException(record.exc_info) + "\n"
            if record.stack_info:
                text += self._formatter.formatStack(record.stack_info) + "\n"
            sys.stderr.write(text)
        except (OSError, ValueError):
            pass


def setup_logging(level: str) -> None:
    """Sends the ``kafkalog`` loggers' records at ``level`` and above to stderr (idempotent)."""
    logger = logging.getLogger("kafkalog")
    handler = next((h for h in logger.handlers if isinstance(h, _StderrHandler)), None)
    if handler is None:
        handler = _StderrHandler()
        logger.addHandler(handler)
        logger.propagate = False
    logger.setLevel(level.upper())


def _usage_exit_code(exc: click.UsageError) -> click.UsageError:
    return _UsageError(exc.format_message(), exc.ctx)


class KafkalogCommand(click.Command):
    """A subcommand: usage errors exit 64; known failures print one line and exit with their code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Click's parsing, with usage errors exiting 64 (``EX_USAGE``)."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _usage_exit_code(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Runs the command; maps exceptions to one-line errors and exit codes (see the module doc)."""
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage_exit_code(exc) from None
        except (click.exceptions.Exit, click.Abort, click.ClickException):
            raise
        except CliError as exc:
            print_error(exc.message)
            ctx.exit(exc.code)
        except LogDirLockedError as exc:
            print_error(f"{exc} (another kafkalog process or a broker is using it; try again later)")
            ctx.exit(EXIT_LOCKED)
        except BrokenPipeError:
            silence_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except KeyboardInterrupt:
            print_error("interrupted")
            ctx.exit(EXIT_INTERRUPTED)
        except KafkaError as exc:
            print_error(str(exc) or type(exc).__name__)
            ctx.exit(EXIT_FAULT)
        except ModuleNotFoundError as exc:
            extra = OPTIONAL_EXTRAS.get((exc.name or "").split(".")[0])
            if extra is None:
                raise
            print_error(
                f"kafkalog {ctx.info_name} needs the {extra!r} extra: pip install 'kafkalog[{extra}]' "
                f"(No module named {exc.name!r})"
            )
            ctx.exit(EXIT_FAULT)
        except OSError as exc:
            print_error(os_error_text(exc))
            ctx.exit(_os_error_code(exc))


class KafkalogGroup(click.Group):
    """The ``kafkalog`` group: an unknown subcommand or a bad global option exits 64 too."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Click's parsing, with usage errors exiting 64."""
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _usage_exit_code(exc) from None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """Click's lookup, with "No such command" exiting 64."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            raise _usage_exit_code(exc) from None


def require_dir(path: Path, what: str = "directory") -> Path:
    """``path`` if it is a directory; else a :class:`CliError` with exit 66 (``EX_NOINPUT``)."""
    if not path.exists():
        fail(f"{path}: no such {what}", EXIT_NOINPUT)
    if not path.is_dir():
        fail(f"{path}: not a directory", EXIT_NOINPUT)
    if not os.access(path, os.R_OK | os.X_OK):
        fail(f"{path}: permission denied", EXIT_NOINPUT)
    return path


def parse_key_values(items: Sequence[str], what: str = "--config") -> dict[str, str]:
    """``["a=1", "b.c=x,y"]`` (each item may also hold several comma-free pairs separated by commas only when
    every part has an ``=``) as a dict; a malformed item is a usage error (exit 64)."""
    out: dict[str, str] = {}
    for item in items:
        parts = item.split(",")
        pieces = parts if len(parts) > 1 and all("=" in p for p in parts) else [item]
        for piece in pieces:
            key, sep, value = piece.partition("=")
            key = key.strip()
            if not sep or not key:
                raise click.UsageError(f"{what} expects key=value, not {piece!r}")
            out[key] = value.strip()
    return out


_JSON: Final = json.JSONEncoder(separators=(",", ":"))


def json_dumps(obj: object) -> str:
    """One compact JSON line (ASCII only, keys in insertion order)."""
    return _JSON.encode(obj)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


def isatty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (False when it has no ``isatty`` or it fails): progress shows on stderr
    only when it is one, and commands that write data show it only when stdout is not (a file, a pipe)."""
    return _isatty(stream)


@contextmanager
def progress(
    description: str, total: int | None, *, enabled: bool = True, in_bytes: bool = True
) -> Iterator[Progress | None]:
    """A transient rich progress bar on stderr with one task (``bar.task_ids[0]``), only when stderr is a
    terminal (``None`` otherwise: nothing is written, so pipes see no change); ``in_bytes`` shows the counts as
    sizes. Rich redraws it at most 10 times a second, whatever the rate of updates."""
    if not enabled or not _isatty(sys.stderr):
        yield None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True) if in_bytes else MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # redirect_stdout=False: data written to stdout meanwhile must stay on stdout (rich would print it above the
    # bar, on stderr)
    with Progress(*columns, console=error_console(), transient=True, redirect_stdout=False) as bar:
        bar.add_task(escape(description), total=total)
        yield bar


@contextmanager
def bytes_bar(
    description: str, total: int, *, enabled: bool = True
) -> Iterator[Callable[[int], None] | None]:
    """:func:`progress` as an ``advance(bytes)`` callable (a loader's ``load_progress``), or None when nothing
    is drawn (not a terminal, or not ``enabled``), so callers pass None on and pay nothing per call."""
    with progress(description, total, enabled=enabled) as bar:
        if bar is None:
            yield None
            return
        task = bar.task_ids[0]
        yield lambda n: bar.advance(task, n)


@contextmanager
def status(text: str, *, enabled: bool = True) -> Iterator[None]:
    """A transient spinner with ``text`` on stderr while the block runs (only when stderr is a terminal and
    ``enabled``: commands pass ``not --json``), for work whose size is not known in advance (recovery,
    retention)."""
    if not enabled or not _isatty(sys.stderr):
        yield
        return
    with error_console().status(escape(text)):
        yield
