"""``kafkalog dump``: print what a segment file holds, like Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``).

The command dispatches on the file's suffix through :data:`DUMPERS` (a ``.deleted``, ``.cleaned`` or
``.swap`` suffix is looked through, so ``00000000000000000000.log.deleted`` dumps as a ``.log``). Batch
files (``.log``, KRaft ``.checkpoint``) go to :func:`dump_batch_file`, which renders the events of
:class:`~kafkalog.cli.dumplog.LogDump` as Kafka's text or as JSON Lines. Index, transaction-index and
producer-snapshot files have a placeholder that exits with :data:`EXIT_UNSUPPORTED` until their readers
land: adding one is a function ``(path, settings, output) -> exit code`` in :data:`DUMPERS`.

Output: stdout carries only the dump (plain text or JSON, written as UTF-8 bytes, so it pipes cleanly);
errors and notes go to stderr through rich, and a progress bar appears on stderr for big files when stderr
is a terminal and stdout is not.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, TextIO, cast

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from kafkalog.cli.dumplog import (
    DECODERS,
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_TRUNCATED,
    EXIT_UNREADABLE,
    EXIT_UNSUPPORTED,
    BatchEvent,
    Decoder,
    ErrorEvent,
    LogDump,
    RecordEvent,
    SummaryEvent,
    json_line,
    log_dump_header,
    text_batch_line,
    text_record_line,
)

__all__ = [
    "DUMPERS",
    "EXIT_BROKEN_PIPE",
    "EXIT_CORRUPT",
    "EXIT_OK",
    "EXIT_TRUNCATED",
    "EXIT_UNREADABLE",
    "EXIT_UNSUPPORTED",
    "DumpOutput",
    "DumpSettings",
    "FileDumper",
    "OutputError",
    "dump",
    "dump_batch_file",
    "dumper_for",
    "file_suffix",
]

#: Exit code when stdout is closed early (``kafkalog dump x.log | head``): 128 + SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE: Final = 141

#: Suffixes Kafka appends to a whole file name while it deletes, cleans or swaps a segment.
TRANSIENT_SUFFIXES: Final = (".deleted", ".cleaned", ".swap")

#: Show a progress bar for files at least this big (when stderr is a terminal and stdout is not).
PROGRESS_MIN_BYTES: Final = 64 << 20
_PROGRESS_STEP_BYTES: Final = 4 << 20

_ERROR_TITLES: Final = {
    "corrupt_frame": "corrupt batch framing",
    "corrupt_batch": "corrupt batch",
    "invalid_records": "invalid records",
    "truncated": "truncated tail",
}


@dataclass(frozen=True, slots=True)
class DumpSettings:
    """The command-line options, resolved (``--print-data-log`` and the decoders imply ``deep``)."""

    deep: bool = False
    print_data: bool = False
    max_bytes: int | None = None
    skip_record_metadata: bool = False
    key_decoder: Decoder = DECODERS["utf8"]
    value_decoder: Decoder = DECODERS["utf8"]
    json: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False


class OutputError(Exception):
    """Writing the dump to stdout failed (other than a closed pipe); ``cause`` is the ``OSError``."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.cause = cause


class DumpOutput:
    """Where a dump writes: UTF-8 lines to stdout (as bytes, whatever the locale) and messages to stderr.

    ``stdout`` defaults to ``sys.stdout.buffer`` (``sys.stdout`` itself if it has no binary layer).
    """

    def __init__(self, stdout: BinaryIO | TextIO | None = None, stderr: Console | None = None) -> None:
        if stdout is None:
            stdout = getattr(sys.stdout, "buffer", None) or sys.stdout
        self.stdout = stdout
        self._binary = not isinstance(stdout, io.TextIOBase) and not hasattr(stdout, "encoding")
        self.stderr = stderr if stderr is not None else Console(stderr=True, highlight=False, soft_wrap=True)

    def line(self, text: str) -> None:
        """One line of the dump; raises :class:`OutputError` (or ``BrokenPipeError``) if stdout fails."""
        data = text + "\n"
        try:
            if not self._binary:
                cast(TextIO, self.stdout).write(data)
                return
            try:
                raw = data.encode("utf-8", "surrogateescape")  # file names keep their original bytes
            except UnicodeEncodeError:
                raw = data.encode("utf-8", "replace")
            cast(BinaryIO, self.stdout).write(raw)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc) from exc

    def flush(self) -> None:
        """Flushes stdout (before stderr messages, so both streams read in order on a terminal)."""
        try:
            self.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc) from exc

    def error(self, path: Path, message: str) -> None:
        """An error about ``path`` on stderr."""
        self.flush()
        self.stderr.print(f"[bold red]error:[/] {escape(str(path))}: {escape(message)}")

    def note(self, text: str) -> None:
        """A plain note on stderr."""
        self.flush()
        self.stderr.print(escape(text))

    def wants_progress(self, size: int) -> bool:
        """Whether a progress bar helps: a big file, stderr on a terminal, stdout redirected."""
        return size >= PROGRESS_MIN_BYTES and _isatty(sys.stderr) and not _isatty(sys.stdout)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


FileDumper = Callable[[Path, DumpSettings, DumpOutput], int]
"""Dumps one file and returns its exit code."""


# --------------------------------------------------------------------------------------------------- .log files


def dump_batch_file(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dumps a file of record batches (a ``.log`` segment or a KRaft ``.checkpoint``)."""
    try:
        dump = LogDump(
            path,
            deep=settings.deep,
            max_bytes=settings.max_bytes,
            legacy_record_checksums=settings.deep and not settings.json and not settings.skip_record_metadata,
        )
    except OSError as exc:
        out.error(path, _os_error_text(exc))
        return EXIT_UNREADABLE
    with dump, _progress(dump, out) as tick:
        try:
            if settings.json:
                return _render_json(dump, out, tick)
            return _render_text(dump, settings, out, tick)
        except BrokenPipeError:
            raise  # stdout went away: the command stops (see dump())
        except OSError as exc:  # an I/O error in the middle of the file
            out.error(path, f"read failed at byte {dump.position}: {_os_error_text(exc)}")
            return EXIT_UNREADABLE


def _render_json(dump: LogDump, out: DumpOutput, tick: Callable[[], None]) -> int:
    code = EXIT_OK
    for event in dump.events():
        out.line(json_line(event))
        if isinstance(event, ErrorEvent):
            _report(dump.path, event, out)
        elif isinstance(event, SummaryEvent):
            code = event.exit_code
        tick()
    return code


def _render_text(dump: LogDump, settings: DumpSettings, out: DumpOutput, tick: Callable[[], None]) -> int:
    path = dump.path
    out.line(f"Dumping {path}")
    header = log_dump_header(path)
    if header is not None:
        out.line(header)
    code = EXIT_OK
    batch: BatchEvent | None = None
    last_offset: int | None = None
    gaps: list[tuple[int, int]] = []
    for event in dump.events():
        if isinstance(event, RecordEvent):
            assert batch is not None
            if last_offset is not None and event.offset != last_offset + 1:
                gaps.append((last_offset, event.offset))
            last_offset = event.offset
            out.line(
                text_record_line(
                    event,
                    batch,
                    print_data=settings.print_data,
                    skip_metadata=settings.skip_record_metadata,
                    key_decoder=settings.key_decoder,
                    value_decoder=settings.value_decoder,
                )
            )
        elif isinstance(event, BatchEvent):
            batch = event
            out.line(text_batch_line(event))
        elif isinstance(event, ErrorEvent):
            if event.kind == "truncated":  # Kafka's own line for a partial tail
                out.line(f"Found {dump.file_bytes - event.position} invalid bytes at the end of {path.name}")
            _report(path, event, out)
        else:
            code = event.exit_code
        tick()
    if gaps:
        out.note(f"Non-consecutive offsets in {path.absolute()}")
        for first, second in gaps:
            out.note(f"  {first} is followed by {second}")
    return code


def _report(path: Path, event: ErrorEvent, out: DumpOutput) -> None:
    out.error(path, f"{_ERROR_TITLES[event.kind]} at byte {event.position}: {event.message}")


@contextmanager
def _progress(dump: LogDump, out: DumpOutput) -> Iterator[Callable[[], None]]:
    """A ``tick`` to call per event; it moves a transient progress bar on stderr when one is wanted."""
    if not out.wants_progress(dump.limit):
        yield _no_tick
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=out.stderr, transient=True) as progress:
        task = progress.add_task(escape(dump.path.name), total=dump.limit)
        shown = 0

        def tick() -> None:
            nonlocal shown
            if dump.position - shown >= _PROGRESS_STEP_BYTES:
                shown = dump.position
                progress.update(task, completed=shown)

        yield tick


def _no_tick() -> None:
    return None


def _os_error_text(exc: OSError) -> str:
    return exc.strerror or str(exc)


# --------------------------------------------------------------------------------------------------- dispatch


def _not_yet(what: str) -> FileDumper:
    def dumper(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
        out.error(path, f"dumping {what} is not supported yet")
        return EXIT_UNSUPPORTED

    dumper.__doc__ = f"Placeholder for {what}: exits with EXIT_UNSUPPORTED."
    return dumper


#: Dumper by file suffix. Index files, the transaction index and producer snapshots come later.
DUMPERS: Final[dict[str, FileDumper]] = {
    ".log": dump_batch_file,
    ".checkpoint": dump_batch_file,  # KRaft snapshots (__cluster_metadata) are record batches too
    ".index": _not_yet("offset index files (.index)"),
    ".timeindex": _not_yet("time index files (.timeindex)"),
    ".txnindex": _not_yet("transaction index files (.txnindex)"),
    ".snapshot": _not_yet("producer state snapshots (.snapshot)"),
}


def file_suffix(path: Path) -> str:
    """The suffix that names the file's type, looking through ``.deleted``/``.cleaned``/``.swap``."""
    name = path.name
    for transient in TRANSIENT_SUFFIXES:
        if name.endswith(transient) and len(name) > len(transient):
            name = name[: -len(transient)]
            break
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else ""


def dumper_for(path: Path) -> FileDumper | None:
    """The dumper for ``path``'s type, or ``None`` for a type kafkalog does not know."""
    return DUMPERS.get(file_suffix(path))


def _dump_one(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    if path.is_dir():
        out.error(path, "is a directory (give the segment files to dump)")
        return EXIT_UNREADABLE
    if not path.exists():
        out.error(path, "No such file or directory")
        return EXIT_UNREADABLE
    dumper = dumper_for(path)
    if dumper is None:
        known = ", ".join(sorted(DUMPERS))
        out.error(path, f"unknown file type (expected one of {known})")
        return EXIT_UNSUPPORTED
    return dumper(path, settings, out)


# --------------------------------------------------------------------------------------------------- command


class _UsageError(click.UsageError):
    """A usage error that exits with 1: click's usual 2 means corrupt data for this command."""

    exit_code = EXIT_UNREADABLE


class _DumpCommand(click.Command):
    """The ``dump`` command; its command-line errors exit with 1 (see :class:`_UsageError`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _UsageError(exc.format_message(), exc.ctx) from exc


_DECODER_CHOICE = click.Choice(sorted(DECODERS), case_sensitive=False)


@click.command("dump", cls=_DumpCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("files", metavar="FILE...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Decode every record, not only the batch headers.",
)
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Print each record's key and payload (implies --deep-iteration).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    metavar="N",
    default=None,
    help="Read only the first N bytes of each file; a batch cut by the limit is not an error.",
)
@click.option(
    "--skip-record-metadata",
    is_flag=True,
    help="Leave out the offset, timestamp, sizes and headers of each record line.",
)
@click.option(
    "--key-decoder",
    type=_DECODER_CHOICE,
    default=None,
    help="How to print keys: utf8 (default), bytes (escaped), hex, json. Implies --print-data-log.",
)
@click.option(
    "--value-decoder",
    type=_DECODER_CHOICE,
    default=None,
    help="How to print payloads, as --key-decoder. Implies --print-data-log.",
)
@click.option(
    "--json",
    "json_output",
    is_flag=True,
    help="Write JSON Lines (batch, record, error and summary objects; keys and values in base64).",
)
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="Index files: check the entries against the log without printing them (not supported yet).",
)
@click.option(
    "--index-sanity-check",
    is_flag=True,
    help="Index files: run the broker's startup sanity check only (not supported yet).",
)
@click.pass_context
def dump(
    ctx: click.Context,
    files: tuple[Path, ...],
    deep_iteration: bool,
    print_data_log: bool,
    max_bytes: int | None,
    skip_record_metadata: bool,
    key_decoder: str | None,
    value_decoder: str | None,
    json_output: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
) -> None:
    """Print what Kafka segment files hold, like Kafka's kafka-dump-log.sh.

    FILE is a .log segment or a KRaft .checkpoint snapshot, also with a .deleted, .cleaned or .swap
    suffix. Index (.index, .timeindex), transaction index (.txnindex) and producer snapshot (.snapshot)
    files are not supported yet (exit 64).

    The text output is kafka-dump-log's: a line per batch and, with --deep-iteration, a "| offset: ..."
    line per record. With --json, every line is a JSON object: a "batch" per batch, a "record" per record
    (with --deep-iteration), an "error" if the file is damaged (the dump stops there) and a "summary" last.

    \b
    Exit codes (several files: the highest of them):
      0   every file read to its end, or to --max-bytes
      1   a file is missing or unreadable, or the command line is wrong
      2   corrupt data: a bad frame, a CRC mismatch, or records that do not decode
      3   a truncated tail: trailing bytes that do not form a complete batch
      64  a file type that kafkalog cannot dump (yet)
    """
    print_data = print_data_log or key_decoder is not None or value_decoder is not None
    settings = DumpSettings(
        deep=deep_iteration or print_data,
        print_data=print_data,
        max_bytes=max_bytes,
        skip_record_metadata=skip_record_metadata,
        key_decoder=DECODERS[(key_decoder or "utf8").lower()],
        value_decoder=DECODERS[(value_decoder or "utf8").lower()],
        json=json_output,
        verify_index_only=verify_index_only,
        index_sanity_check=index_sanity_check,
    )
    out = DumpOutput()
    code = EXIT_OK
    try:
        for path in files:
            code = max(code, _dump_one(path, settings, out))
            out.flush()
    except BrokenPipeError:
        _silence_stdout()
        code = EXIT_BROKEN_PIPE
    except OutputError as exc:
        _silence_stdout()
        out.stderr.print(f"[bold red]error:[/] cannot write the dump to stdout: {escape(str(exc))}")
        code = max(code, EXIT_UNREADABLE)
    ctx.exit(code)


def _silence_stdout() -> None:
    """Points stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
