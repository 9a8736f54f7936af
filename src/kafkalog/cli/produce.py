"""``kafkalog produce DIR TOPIC [FILE...]``: append records to a topic, like Kafka's ``kafka-console-producer.sh``.

Input (stdin, or the FILE arguments in order; ``-`` is stdin):

* ``--format lines`` (default): each line is a record value (the newline and a trailing ``\\r`` removed; an
  empty line is an empty value). ``--parse-key`` (Kafka's ``parse.key=true``) splits each line at the first
  ``--key-separator`` (Kafka's ``key.separator``, a tab by default) into key and value; a line without the
  separator fails (exit 1) unless ``--ignore-error`` skips it.
* ``--format json``: each line is an object ``{"key": .., "value": .., "headers": {..}, "partition": ..,
  "timestamp": ..}``, every field optional: key and value are strings (UTF-8), null, or any other JSON value
  (written as compact JSON text); headers an object of string values (or null) or a list of ``[key, value]``
  pairs; partition and timestamp (epoch ms) integers. Blank lines are skipped. This is the shape
  ``kafkalog consume --format json`` writes, so the two commands round-trip.
* ``--format file``: each FILE (or all of stdin) is one record value.

Placement: ``--partition`` for every record, else the record's ``partition`` (JSON), else Kafka's default
partitioner: murmur2 of the key (:mod:`kafkalog.partitioner`), a sticky round robin for null keys.

Batching: records are grouped per partition into one batch each until ``--batch-size`` records are pending
(or a partition's pending values reach ``--batch-bytes``), or until no new input arrived for ``--linger-ms``
(so an interactive session appends each line promptly); each batch is compressed with ``--compression`` (the
topic's ``compression.type`` by default).

Durability, in the sense of Kafka's ``acks``: ``--acks all`` fsyncs the log after every batch (the batch is
on disk before the next line is read); ``--acks 1`` (default, also ``0``) leaves writing to the operating
system: the data survives the process but not a power loss until it is flushed (closing the log at the end
flushes it).

The topic must exist unless ``--create`` is given (``--partitions N``, default 1). The data directory's lock
is held while producing: other writers get exit 75, readers (``consume``, ``info``, ``verify``) work. A
summary goes to stderr; ``--print-offsets`` writes ``partition: P baseOffset: B lastOffset: L count: N`` per
appended batch to stdout.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, cast

import click

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_NOINPUT,
    EXIT_USAGE,
    CliError,
    KafkalogCommand,
    error_console,
    parse_key_values,
    plural,
)
from kafkalog.cli.state import open_manager
from kafkalog.errors import InvalidPartitionsError, InvalidTopicError
from kafkalog.manager import LogManager
from kafkalog.records import Compression, Header, SimpleRecord

__all__ = ["ProduceError", "parse_json_record", "produce"]

_EOF: Final = object()
_CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")


class ProduceError(Exception):
    """A line of input that cannot become a record."""


@dataclass
class _Pending:
    """Records waiting to be appended, per partition."""

    records: dict[int, list[SimpleRecord]] = field(default_factory=dict)
    count: int = 0
    bytes: dict[int, int] = field(default_factory=dict)

    def add(self, partition: int, record: SimpleRecord) -> int:
        self.records.setdefault(partition, []).append(record)
        self.count += 1
        size = len(record.value or b"") + len(record.key or b"")
        self.bytes[partition] = self.bytes.get(partition, 0) + size
        return self.bytes[partition]


def _to_bytes(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_json_record(line: bytes) -> tuple[SimpleRecord, int | None]:
    """A ``--format json`` line as a record and its partition (``None``: use the partitioner)."""
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProduceError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ProduceError("expected a JSON object with key, value, headers, partition, timestamp")
    headers: list[Header] = []
    raw_headers = obj.get("headers") or {}
    items = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
    try:
        for name, value in items:
            if not isinstance(name, str):
                raise ProduceError(f"header names are strings, not {name!r}")
            headers.append(Header(name, _to_bytes(value)))
    except (TypeError, ValueError):
        raise ProduceError("headers must be an object or a list of [key, value] pairs") from None
    partition, timestamp = obj.get("partition"), obj.get("timestamp")
    for name, number in (("partition", partition), ("timestamp", timestamp)):
        if number is not None and (not isinstance(number, int) or isinstance(number, bool) or number < 0):
            raise ProduceError(f"{name} must be a non-negative integer, not {number!r}")
    record = SimpleRecord(_to_bytes(obj.get("value")), _to_bytes(obj.get("key")), timestamp, tuple(headers))
    return record, partition


def _reader(streams: list[tuple[str, IO[bytes]]], out: queue.Queue[object]) -> None:
    """Puts ``(source, line number, line)`` items, then ``_EOF`` (or the exception that stopped it)."""
    try:
        for name, stream in streams:
            for n, raw in enumerate(stream, 1):
                line = raw[:-1] if raw.endswith(b"\n") else raw
                if line.endswith(b"\r"):
                    line = line[:-1]
                out.put((name, n, line))
        out.put(_EOF)
    except BaseException as exc:  # surfaced in the main thread
        out.put(exc)


def _open_inputs(files: tuple[str, ...]) -> list[tuple[str, IO[bytes]]]:
    streams: list[tuple[str, IO[bytes]]] = []
    for name in files or ("-",):
        if name == "-":
            streams.append(("<stdin>", cast(IO[bytes], getattr(sys.stdin, "buffer", sys.stdin))))
            continue
        try:
            streams.append((name, open(name, "rb")))  # noqa: SIM115 - closed when the process ends
        except OSError as exc:
            raise CliError(f"{name}: {exc.strerror or exc}", EXIT_NOINPUT) from None
    return streams


@dataclass
class _Producer:
    """Appends pending records as batches and counts what was written."""

    mgr: LogManager
    topic: str
    compression: str | None
    flush: bool
    print_offsets: bool
    partitions: int
    records: int = 0
    batches: int = 0
    per_partition: dict[int, int] = field(default_factory=dict)

    def send(self, pending: _Pending) -> None:
        for partition in sorted(pending.records):
            recs = pending.records[partition]
            log = self.mgr.get_log(self.topic, partition)
            info = log.append(recs, compression=self.compression)
            if self.flush:
                log.flush()
            self.records += len(recs)
            self.batches += 1
            self.per_partition[partition] = self.per_partition.get(partition, 0) + len(recs)
            if self.print_offsets:
                click.echo(
                    f"partition: {partition} baseOffset: {info.first_offset} lastOffset: {info.last_offset} "
                    f"count: {len(recs)}"
                )
        pending.records.clear()
        pending.bytes.clear()
        pending.count = 0

    def place(self, key: bytes | None, partition: int | None) -> int:
        if partition is None:
            return self.mgr.partition_for_key(self.topic, key)
        if partition >= self.partitions:
            raise ProduceError(
                f"partition {partition} does not exist (topic {self.topic!r} has {self.partitions})"
            )
        return partition


@dataclass(frozen=True)
class _LineFormat:
    """How a line becomes a record."""

    fmt: str
    key: bytes | None
    parse_key: bool
    separator: bytes
    ignore_error: bool

    def record(self, source: str, n: int, line: bytes) -> tuple[SimpleRecord, int | None] | None:
        """The record of one line (``None``: skip it)."""
        try:
            if self.fmt == "json":
                return parse_json_record(line) if line.strip() else None
            if self.parse_key:
                k, sep, v = line.partition(self.separator)
                if not sep:
                    raise ProduceError(f"no key separator ({_separator_text(self.separator)}) found")
                return SimpleRecord(v, k), None
            return SimpleRecord(line, self.key), None
        except ProduceError as exc:
            self.bad_line(source, n, exc)
            return None

    def bad_line(self, source: str, n: int, exc: ProduceError) -> None:
        """Skips the line with a warning (``--ignore-error``) or stops with exit 1."""
        if not self.ignore_error:
            raise CliError(f"{source} line {n}: {exc}") from None
        error_console().print(f"warning: {source} line {n}: {exc} (skipped)", markup=False)


@click.command(
    "produce",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
    short_help="Append records from stdin or files (kafka-console-producer).",
)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.argument("topic")
@click.argument("files", nargs=-1, metavar="[FILE...]")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["lines", "json", "file"]),
    default="lines",
    show_default=True,
    help="lines: a record per line; json: a JSON object per line; file: a record per FILE.",
)
@click.option("--key", default=None, help="Key of every record (lines and file formats).")
@click.option("--parse-key", is_flag=True, help="Split each line into key and value at --key-separator.")
@click.option("--key-separator", default="\t", show_default="tab", help="Separator of --parse-key.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="kafka-console-producer properties: parse.key, key.separator, ignore.error.",
)
@click.option("--ignore-error", is_flag=True, help="Skip bad lines (with a warning) instead of stopping.")
@click.option(
    "--partition", type=click.IntRange(min=0), default=None, help="Write every record to this partition."
)
@click.option(
    "--compression",
    type=click.Choice(_CODECS, case_sensitive=False),
    default=None,
    help="Batch codec (default: the topic's compression.type).",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=1000, show_default=True, help="Records per batch."
)
@click.option(
    "--batch-bytes",
    type=click.IntRange(min=1),
    default=512 << 10,
    show_default=True,
    help="Close a partition's batch when its keys and values reach this many bytes.",
)
@click.option(
    "--linger-ms",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Append what is pending after this long without new input.",
)
@click.option(
    "--acks",
    type=click.Choice(["all", "-1", "1", "0"]),
    default="1",
    show_default=True,
    help="all: fsync after every batch; 1 or 0: leave it to the OS (flushed at exit).",
)
@click.option("--create", is_flag=True, help="Create the topic if it does not exist.")
@click.option(
    "--partitions", type=click.IntRange(min=1), default=None, help="--create: partition count (default 1)."
)
@click.option("--print-offsets", is_flag=True, help="Print the offsets of every appended batch on stdout.")
def produce(
    path: Path,
    topic: str,
    files: tuple[str, ...],
    fmt: str,
    key: str | None,
    parse_key: bool,
    key_separator: str,
    properties: tuple[str, ...],
    ignore_error: bool,
    partition: int | None,
    compression: str | None,
    batch_size: int,
    batch_bytes: int,
    linger_ms: int,
    acks: str,
    create: bool,
    partitions: int | None,
    print_offsets: bool,
) -> None:
    """Append records to a topic from stdin or files, like
    kafka-console-producer.sh.

    Each input line becomes a record (see --format). Records without a
    partition are placed by Kafka's default partitioner (murmur2 of the
    key), so a Kafka client would find them where it expects them.

    \b
    Examples:
      echo hello | kafkalog produce data orders --create --partitions 3
      printf 'k1\\tv1\\nk2\\tv2\\n' | kafkalog produce data orders --parse-key
      kafkalog produce data orders --format json events.jsonl --acks all
      kafkalog produce data images --format file --key cat cat.png
    """
    props = parse_key_values(properties, "--property")
    for name, value in props.items():
        if name == "parse.key":
            parse_key = value.lower() == "true"
        elif name == "key.separator":
            key_separator = value
        elif name == "ignore.error":
            ignore_error = value.lower() == "true"
        else:
            raise click.UsageError(
                f"unknown --property {name!r} (known: parse.key, key.separator, ignore.error)"
            )
    if partitions is not None and not create:
        raise click.UsageError("--partitions goes with --create")
    if parse_key and not key_separator:
        raise click.UsageError("--key-separator must not be empty")
    if fmt != "lines" and parse_key:
        raise click.UsageError("--parse-key applies to --format lines")
    streams = _open_inputs(files)
    codec = None if compression is None else Compression.from_name(compression).kafka_name
    with open_manager(path) as mgr:
        try:
            if topic not in mgr.topics():
                if not create:
                    raise CliError(f"topic {topic!r} does not exist in {path} (add --create to create it)")
                mgr.create_topic(topic, partitions or 1)
            count = mgr.num_partitions(topic)
        except (InvalidTopicError, InvalidPartitionsError) as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        if partition is not None and partition >= count:
            raise CliError(f"partition {partition} does not exist (topic {topic!r} has {count})", EXIT_USAGE)
        producer = _Producer(mgr, topic, codec, acks in ("all", "-1"), print_offsets, count)
        fixed_key = None if key is None else key.encode("utf-8")
        interrupted = False
        try:
            if fmt == "file":
                for _, stream in streams:
                    pending = _Pending()
                    whole = SimpleRecord(stream.read(), fixed_key)
                    pending.add(producer.place(fixed_key, partition), whole)
                    producer.send(pending)
            else:
                form = _LineFormat(fmt, fixed_key, parse_key, key_separator.encode(), ignore_error)
                _produce_lines(producer, streams, form, partition, batch_size, batch_bytes, linger_ms)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            _summary(producer, interrupted)


def _produce_lines(
    producer: _Producer,
    streams: list[tuple[str, IO[bytes]]],
    form: _LineFormat,
    partition: int | None,
    batch_size: int,
    batch_bytes: int,
    linger_ms: int,
) -> None:
    """Reads lines in a thread; appends a batch when it is full or input paused for ``linger_ms``."""
    q: queue.Queue[object] = queue.Queue(maxsize=max(batch_size * 2, 1024))
    threading.Thread(target=_reader, args=(streams, q), name="kafkalog-produce-input", daemon=True).start()
    pending = _Pending()
    deadline: float | None = None
    try:
        while True:
            try:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                item = q.get(timeout=wait)
            except queue.Empty:  # the input paused: append what is pending
                producer.send(pending)
                deadline = None
                continue
            if item is _EOF:
                break
            if isinstance(item, BaseException):
                raise item
            source, n, line = cast(tuple[str, int, bytes], item)
            parsed = form.record(source, n, line)
            if parsed is None:
                continue
            record, record_partition = parsed
            try:
                target = producer.place(record.key, partition if partition is not None else record_partition)
            except ProduceError as exc:
                form.bad_line(source, n, exc)
                continue
            size = pending.add(target, record)
            if deadline is None:
                deadline = time.monotonic() + linger_ms / 1000
            if pending.count >= batch_size or size >= batch_bytes:
                producer.send(pending)
                deadline = None
    finally:
        if pending.count:
            producer.send(pending)


def _separator_text(separator: bytes) -> str:
    """``--key-separator`` as a person reads it: ``tab`` or the quoted text, never a bytes repr."""
    if separator == b"\t":
        return "a tab, set another with --key-separator"
    return repr(separator.decode("utf-8", "replace"))


def _summary(producer: _Producer, interrupted: bool = False) -> None:
    parts = ", ".join(f"{p}: {n}" for p, n in sorted(producer.per_partition.items()))
    what = "interrupted after producing" if interrupted else "produced"
    error_console().print(
        f"{what} {plural(producer.records, 'record', 'records')} in {plural(producer.batches, 'batch', 'batches')} to {producer.topic}"
        + (f" (records per partition: {parts})" if parts else ""),
        markup=False,
    )
