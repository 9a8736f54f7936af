"""``kafkalog dump``: print what Kafka's files hold, like Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``).

The command dispatches on the file's name through :func:`dumper_for`: the small files of a log directory by
exact name (:data:`~kafkalog.cli.dumpmeta.CHECKPOINT_DUMPERS`: ``leader-epoch-checkpoint``, the offset
checkpoints, ``partition.metadata``, ``.kafka_cleanshutdown``), everything else by suffix through
:data:`DUMPERS` (a ``.deleted``, ``.cleaned`` or ``.swap`` suffix is looked through, so
``00000000000000000000.log.deleted`` dumps as a ``.log``). Batch files (``.log``, KRaft ``.checkpoint``) go to
:func:`dump_batch_file`, which renders the events of :class:`~kafkalog.cli.dumplog.LogDump` as Kafka's text
or as JSON Lines; index files to :mod:`kafkalog.cli.dumpindex`; snapshots and checkpoints to
:mod:`kafkalog.cli.dumpmeta` (each module documents its text and JSON formats). A dumper is a function
``(path, settings, output) -> exit code``.

Output: stdout carries only the dump (plain text or JSON, written as UTF-8 bytes, so it pipes cleanly);
errors and notes go to stderr through rich, and a progress bar appears on stderr for big files when stderr
is a terminal and stdout is not.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import click
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_BROKEN_PIPE,
    EXIT_NOINPUT,
    EXIT_USAGE,
    KafkalogCommand,
    silence_stdout,
)
from kafkalog.cli.dumpindex import dump_offset_index, dump_time_index, dump_txn_index
from kafkalog.cli.dumpio import DumpOutput, DumpSettings, FileDumper, OutputError
from kafkalog.cli.dumplog import (
    DECODERS,
    EXIT_CORRUPT,
    EXIT_OK,
    EXIT_TRUNCATED,
    EXIT_UNREADABLE,
    BatchEvent,
    ErrorEvent,
    LogDump,
    RecordEvent,
    SummaryEvent,
    json_line,
    log_dump_header,
    text_batch_line,
    text_record_line,
    virtual_file,
)
from kafkalog.cli.dumpmeta import checkpoint_dumper_for, dump_producer_snapshot
from kafkalog.cli.dumpremote import RemoteDumpOutput, staged
from kafkalog.cli.remote import is_url, key_ring_option, load_key_ring, parse_storage_options, storage_option
from kafkalog.errors import KafkaError, RemoteResourceNotFoundError
from kafkalog.storage.files import file_kind
from kafkalog.tiered import KeyRing

__all__ = [
    "DUMPERS",
    "EXIT_BROKEN_PIPE",
    "EXIT_CORRUPT",
    "EXIT_NOINPUT",
    "EXIT_OK",
    "EXIT_TRUNCATED",
    "EXIT_UNREADABLE",
    "EXIT_USAGE",
    "DumpOutput",
    "DumpSettings",
    "FileDumper",
    "OutputError",
    "dump",
    "dump_batch_file",
    "dumper_for",
    "file_suffix",
]

#: Suffixes Kafka appends to a whole file name while it deletes, cleans or swaps a segment.
TRANSIENT_SUFFIXES: Final = (".deleted", ".cleaned", ".swap")

_PROGRESS_STEP_BYTES: Final = 4 << 20

_ERROR_TITLES: Final = {
    "corrupt_frame": "corrupt batch framing",
    "corrupt_batch": "corrupt batch",
    "invalid_records": "invalid records",
    "truncated": "truncated tail",
}


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
        return EXIT_NOINPUT if isinstance(exc, (FileNotFoundError, PermissionError)) else EXIT_UNREADABLE
    with dump, _progress(dump, out, enabled=not settings.json) as tick:
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
def _progress(dump: LogDump, out: DumpOutput, *, enabled: bool) -> Iterator[Callable[[], None]]:
    """A ``tick`` to call per event; it moves a transient progress bar on stderr when one is wanted (never
    with ``--json``, whose readers are scripts)."""
    if not enabled or not out.wants_progress(dump.limit):
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


#: Dumper by file suffix (after looking through a transient suffix).
DUMPERS: Final[dict[str, FileDumper]] = {
    ".log": dump_batch_file,
    ".checkpoint": dump_batch_file,  # KRaft snapshots (__cluster_metadata) are record batches too
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".txnindex": dump_txn_index,
    ".snapshot": dump_producer_snapshot,
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
    return checkpoint_dumper_for(path) or DUMPERS.get(file_suffix(path))


def _dump_one(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    if virtual_file(path) is not None:  # a .log streamed from object storage (dump URL)
        return _dump_checked(path, settings, out)
    if path.is_dir():
        out.error(path, "is a directory (give the files to dump, e.g. DIR/*.log)")
        return EXIT_NOINPUT
    if not path.exists():
        out.error(path, "No such file or directory")
        return EXIT_NOINPUT
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):  # a FIFO would block the first read, a device has no file format
        out.error(path, f"is a {file_kind(mode)}, not a regular file")
        return EXIT_NOINPUT
    return _dump_checked(path, settings, out)


def _dump_checked(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dump a file known to be there (a regular file, or a virtual one)."""
    dumper = dumper_for(path)
    if dumper is None:
        known = ", ".join(sorted(DUMPERS))
        out.error(path, f"unknown file type (expected one of {known} or a checkpoint file)")
        return EXIT_USAGE
    try:
        return dumper(path, settings, out)
    except (BrokenPipeError, OutputError):
        raise
    except OSError as exc:
        out.error(path, _os_error_text(exc))
        return EXIT_NOINPUT if isinstance(exc, (FileNotFoundError, PermissionError)) else EXIT_UNREADABLE


def _dump_url(
    url: str, options: Mapping[str, str], settings: DumpSettings, out: DumpOutput, key_ring: KeyRing | None
) -> int:
    """Dump a file in object storage (:mod:`kafkalog.cli.dumpremote`): the local dumpers, the URL shown."""
    try:
        with staged(url, options, key_ring=key_ring) as (local, url_dir):
            return _dump_one(local, settings, RemoteDumpOutput(out, local.parent, url_dir))
    except (BrokenPipeError, OutputError):
        raise
    except FileNotFoundError as exc:
        out.stderr.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_NOINPUT
    except KafkaError as exc:  # a storage error (typed, naming the object and the option to check)
        out.stderr.print(f"[bold red]error:[/] {escape(str(exc))}")
        return EXIT_NOINPUT if isinstance(exc, RemoteResourceNotFoundError) else EXIT_UNREADABLE


# --------------------------------------------------------------------------------------------------- command

_DECODER_CHOICE = click.Choice(sorted(DECODERS), case_sensitive=False)

_EXIT_HELP = """\b
Exit codes (several files: the highest of them):
  0   every file read to its end (or to --max-bytes), no mismatch
  1   an I/O error while reading, or stdout could not be written
  2   corrupt data: a bad frame, a CRC mismatch, records that do
      not decode, an index entry that contradicts the log, a
      corrupt snapshot or checkpoint
  3   a truncated tail: trailing bytes that do not form a
      complete batch (or index entry)
  64  usage error: a bad option, a file type kafkalog cannot dump
  66  a file is missing or unreadable"""


@click.command(
    "dump",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=_EXIT_HELP,
    short_help="Print what log, index, snapshot and checkpoint files hold.",
)
@click.argument("files", metavar="FILE...", nargs=-1, required=True)
@storage_option
@key_ring_option
@click.option(
    "--deep-iteration",
    is_flag=True,
    help=".log: decode every record, not only the batch headers.",
)
@click.option(
    "--print-data-log",
    is_flag=True,
    help=".log: print each record's key and payload (implies --deep-iteration).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    metavar="N",
    default=None,
    help=".log: read only the first N bytes; a batch cut by the limit is not an error.",
)
@click.option(
    "--skip-record-metadata",
    is_flag=True,
    help=".log: leave out the offset, timestamp, sizes and headers of each record line.",
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
    help="Write JSON Lines: one object per line, a summary object last (per file).",
)
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="Index files: check the entries against the log without printing them.",
)
@click.option(
    "--index-sanity-check",
    is_flag=True,
    help="Index files: run only the check a broker runs at startup.",
)
@click.pass_context
def dump(
    ctx: click.Context,
    files: tuple[str, ...],
    storage_options: tuple[str, ...],
    key_ring: str | None,
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
    """Print what Kafka log files hold, like Kafka's kafka-dump-log.sh.

    \b
    FILE is any file of a Kafka log directory:
      .log           segment (or a KRaft .checkpoint snapshot)
      .index         offset index, checked against its .log
      .timeindex     time index, checked against its .log
      .txnindex      aborted-transaction index
      .snapshot      producer-state snapshot
      leader-epoch-checkpoint, recovery-point-offset-checkpoint,
      log-start-offset-checkpoint, replication-offset-checkpoint,
      cleaner-offset-checkpoint, partition.metadata
    A .deleted, .cleaned or .swap suffix is looked through.

    \b
    FILE may be a URL (s3://, gs://, az://, with --storage-option, and
    --key-ring for an encrypted archive) of a
    file in a copy of a log dir (PREFIX/TOPIC-N/FILE) or in a tiered-storage
    archive (Aiven: PREFIX/TOPIC-TOPICID/N/FILE; LocalTieredStorage:
    PREFIX/TOPIC-N-TOPICID/FILE, FILE named as in a partition directory:
    00000000000000000000.log, .index, .timeindex, ...); it is read through
    the object store and dumped as the local file would be.

    The text output is kafka-dump-log's: for a .log a line per batch and,
    with --deep-iteration, a "| offset: ..." line per record; for an
    .index "offset: 5 position: 4169"; for a .timeindex
    "timestamp: ... offset: ...". Index entries that contradict the log
    are reported on stderr as Kafka does ("Mismatches in :FILE").

    With --json every line is a JSON object with a "type" key (keys in a
    fixed order, documented in the kafkalog.cli.dump* modules); the last
    line of each file is its "summary".

    \b
    Examples:
      kafkalog dump data/orders-0/00000000000000000000.log --deep-iteration
      kafkalog dump seg.log --print-data-log --value-decoder json
      kafkalog dump data/orders-0/*.index --verify-index-only
      kafkalog dump data/orders-0/*.snapshot --json
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
        options = parse_storage_options(storage_options)
        if key_ring is not None and not any(is_url(f) for f in files):
            raise click.UsageError("--key-ring is for a URL of an encrypted archive, not a local path")
        ring = load_key_ring(key_ring) if any(is_url(f) for f in files) else None
        for file in files:
            if is_url(file):
                code = max(code, _dump_url(file, options, settings, out, ring))
            else:
                code = max(code, _dump_one(Path(file), settings, out))
            out.flush()
    except BrokenPipeError:
        silence_stdout()
        code = EXIT_BROKEN_PIPE
    except OutputError as exc:
        silence_stdout()
        out.stderr.print(f"[bold red]error:[/] cannot write the dump to stdout: {escape(str(exc))}")
        code = max(code, EXIT_UNREADABLE)
    ctx.exit(code)
