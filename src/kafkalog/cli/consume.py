"""``kafkalog consume DIR TOPIC``: print a topic's records, like Kafka's ``kafka-console-consumer.sh``.

Reading goes through :class:`~kafkalog.log.readonly.ReadOnlyLog`: no lock, nothing written, never a torn
batch, so it works while another process (``kafkalog produce``, a LogManager) writes into the directory.

Where each partition starts: ``--offset N`` (clamped to the log start offset), ``--offset earliest`` or
``--from-beginning``, ``--offset latest`` (the default, as Kafka's console consumer: only new records, which
needs ``--follow``), or ``--timestamp MS`` (the first record with a timestamp at or after MS; the end if
none). Where it stops: the high watermark (``--isolation-level read_uncommitted``, the default) or the last
stable offset (``read_committed``: records of aborted transactions are skipped, using the ``.txnindex`` files
and :mod:`kafkalog.log.committed`, and nothing of a transaction still open is shown). Control records
(transaction markers) are never shown. ``--follow`` keeps polling for new records (``--poll-ms``) until
Ctrl-C, which exits 0; ``--max-messages`` stops after that many records.

Partitions are read in turn, a fetch (``--fetch-bytes``) at a time, so several partitions interleave.

Text output is Kafka's ``DefaultMessageFormatter``: per record, ``[<timestampType>:<ts>\\t][Partition:<p>\\t]
[Offset:<o>\\t][<headers>\\t][<key>\\t]<value>`` as chosen by ``--property print.timestamp=true``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value`` (default true), with
``key.separator`` (tab), ``line.separator`` (newline), ``headers.separator`` (comma) and ``null.literal``
(``null``). Keys and values are rendered by ``--key-decoder``/``--value-decoder`` (utf8, bytes, hex, json).

``--format json``: one object per record: ``{"topic","partition","offset","timestamp","timestampType","key",
"value","headers"}``; key and value are strings through the decoders (the json decoder embeds the parsed
document), headers an object (a list of ``[key, value]`` pairs when a name repeats). ``kafkalog produce
--format json`` reads this back.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import click

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_NOINPUT,
    EXIT_OK,
    CliError,
    KafkalogCommand,
    error_console,
    parse_key_values,
    require_dir,
)
from kafkalog.cli.dumplog import DECODERS, Decoder
from kafkalog.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkalog.log.committed import committed_records
from kafkalog.log.readonly import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.records import Record, RecordBatch, TimestampType
from kafkalog.records.utf8 import decode_utf8_as_java

__all__ = ["Formatter", "PartitionReader", "consume"]

_PROPERTIES: Final = {
    "print.timestamp": "false",
    "print.partition": "false",
    "print.offset": "false",
    "print.headers": "false",
    "print.key": "false",
    "print.value": "true",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "null.literal": "null",
}


@dataclass
class Formatter:
    """Turns records into output lines (Kafka's ``DefaultMessageFormatter``, or JSON)."""

    topic: str
    properties: dict[str, str]
    key_decoder: Decoder
    value_decoder: Decoder
    json_output: bool
    json_values: bool = False
    json_keys: bool = False

    def _flag(self, name: str) -> bool:
        return self.properties[name].lower() == "true"

    def _bytes(self, data: bytes | None, decoder: Decoder) -> str:
        return self.properties["null.literal"] if data is None else decoder(data)

    def format(self, partition: int, record: Record, timestamp_type: TimestampType) -> str:
        """The output of one record, line separator included."""
        if self.json_output:
            return self._json(partition, record, timestamp_type) + "\n"
        sep = self.properties["key.separator"]
        parts: list[str] = []
        if self._flag("print.timestamp"):
            if timestamp_type is TimestampType.NO_TIMESTAMP_TYPE:
                parts.append("NO_TIMESTAMP")
            else:
                parts.append(f"{timestamp_type.kafka_name}:{record.timestamp}")
        if self._flag("print.partition"):
            parts.append(f"Partition:{partition}")
        if self._flag("print.offset"):
            parts.append(f"Offset:{record.offset}")
        if self._flag("print.headers"):
            if record.headers:
                parts.append(
                    self.properties["headers.separator"].join(
                        f"{h.key}:{self._bytes(h.value, DECODERS['utf8'])}" for h in record.headers
                    )
                )
            else:
                parts.append("NO_HEADERS")
        if self._flag("print.key"):
            parts.append(self._bytes(record.key, self.key_decoder))
        if self._flag("print.value"):
            parts.append(self._bytes(record.value, self.value_decoder))
        return sep.join(parts) + self.properties["line.separator"]

    def _value(self, data: bytes | None, decoder: Decoder, embed: bool) -> Any:
        if data is None:
            return None
        if embed:
            try:
                return json.loads(data)
            except (ValueError, UnicodeDecodeError):
                return decoder(data)
        return decoder(data)

    def _json(self, partition: int, record: Record, timestamp_type: TimestampType) -> str:
        names = [h.key for h in record.headers]
        values = [None if h.value is None else decode_utf8_as_java(h.value) for h in record.headers]
        headers: Any = (
            dict(zip(names, values))
            if len(set(names)) == len(names)
            else [list(p) for p in zip(names, values)]
        )
        obj = {
            "topic": self.topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "timestampType": timestamp_type.kafka_name,
            "key": self._value(record.key, self.key_decoder, self.json_keys),
            "value": self._value(record.value, self.value_decoder, self.json_values),
            "headers": headers,
        }
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass
class PartitionReader:
    """One partition's position and the reads that advance it."""

    partition: int
    log: ReadOnlyLog
    position: int
    committed: bool
    fetch_bytes: int
    lost: list[tuple[int, int]] = field(default_factory=list)

    def bound(self) -> int:
        """The offset reads stop at (HW or LSO as of the last refresh)."""
        return self.log.last_stable_offset if self.committed else self.log.high_watermark

    def fetch(self) -> Iterator[tuple[Record, TimestampType]]:
        """Records of one fetch from the current position (nothing when caught up)."""
        end = self.bound()
        if self.position >= end:
            return
        start = self.log.log_start_offset
        if self.position < start:  # retention removed what we were about to read
            self.lost.append((self.position, start))
            self.position = start
        try:
            data = self.log.read(self.position, self.fetch_bytes, end_offset=end)
        except OffsetOutOfRangeError:
            self.log.refresh()
            if self.position < self.log.log_start_offset:
                self.lost.append((self.position, self.log.log_start_offset))
                self.position = self.log.log_start_offset
            return
        aborted = self.log.aborted_transactions(self.position, end) if self.committed else None
        current: list[RecordBatch] = []

        def batches() -> Iterator[RecordBatch]:
            for batch in data.batches():
                current[:] = [batch]
                yield batch

        records = committed_records(batches(), aborted, self.position, end)
        for record in records:
            yield record, current[0].timestamp_type
            self.position = record.offset + 1
        self.position = max(self.position, min(records.next_offset, end))


def _start_offset(rl: ReadOnlyLog, offset: str | None, timestamp: int | None) -> int:
    if timestamp is not None:
        found = rl.offset_for_timestamp(timestamp)
        return rl.high_watermark if found is None else found
    if offset is None or offset == "latest":
        return rl.high_watermark  # Kafka's "latest" for a consumer; never inside a pending Spark sink job
    if offset == "earliest":
        return rl.log_start_offset
    return min(max(int(offset), rl.log_start_offset), rl.log_end_offset)


def _offset_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("earliest", "latest"):
        return value
    try:
        if int(value) >= 0:
            return str(int(value))
    except ValueError:
        pass
    raise click.BadParameter("expected a non-negative number, earliest or latest")


@click.command("consume", cls=KafkalogCommand, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.argument("topic")
@click.option(
    "--partition",
    "partitions",
    type=click.IntRange(min=0),
    multiple=True,
    help="Read only this partition (repeatable).",
)
@click.option(
    "--from-beginning", is_flag=True, help="Start at the earliest offset (same as --offset earliest)."
)
@click.option(
    "--offset",
    default=None,
    callback=_offset_value,
    metavar="N|earliest|latest",
    help="Where to start in each partition (default: latest).",
)
@click.option(
    "--timestamp",
    type=int,
    default=None,
    metavar="MS",
    help="Start at the first record with a timestamp >= MS (epoch ms).",
)
@click.option(
    "--max-messages", type=click.IntRange(min=1), default=None, metavar="N", help="Stop after N records."
)
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new records; Ctrl-C exits 0.")
@click.option(
    "--poll-ms",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="--follow: how often to look for new records.",
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_uncommitted", "read_committed"]),
    default="read_uncommitted",
    show_default=True,
    help="read_committed skips aborted transactions and stops before open ones.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="Formatter properties, e.g. print.key=true,print.timestamp=true (see below).",
)
@click.option(
    "--key-decoder",
    type=click.Choice(sorted(DECODERS)),
    default="utf8",
    show_default=True,
    help="How keys are shown.",
)
@click.option(
    "--value-decoder",
    type=click.Choice(sorted(DECODERS)),
    default="utf8",
    show_default=True,
    help="How values are shown.",
)
@click.option(
    "--fetch-bytes",
    type=click.IntRange(min=1),
    default=1 << 20,
    show_default=True,
    help="Bytes per read of a partition.",
)
def consume(
    path: Path,
    topic: str,
    partitions: tuple[int, ...],
    from_beginning: bool,
    offset: str | None,
    timestamp: int | None,
    max_messages: int | None,
    follow: bool,
    poll_ms: int,
    isolation_level: str,
    fmt: str,
    properties: tuple[str, ...],
    key_decoder: str,
    value_decoder: str,
    fetch_bytes: int,
) -> None:
    """Print the records of a topic, like kafka-console-consumer.sh.

    Takes no lock and writes nothing: safe while a producer writes to the
    same directory. Without --from-beginning/--offset/--timestamp it
    starts at the end (as Kafka's console consumer), so add --follow to
    wait for new records.

    \b
    Properties (--property NAME=VALUE, comma-separated or repeated):
      print.timestamp, print.partition, print.offset, print.headers,
      print.key (false), print.value (true), key.separator (tab),
      line.separator (newline), headers.separator (,), null.literal (null)

    \b
    Examples:
      kafkalog consume data orders --from-beginning
      kafkalog consume data orders --from-beginning \\
          --property print.key=true,print.offset=true
      kafkalog consume data orders --offset 100 --partition 0 --max-messages 10
      kafkalog consume data orders --follow --format json \\
          --isolation-level read_committed
    """
    if sum((from_beginning, offset is not None, timestamp is not None)) > 1:
        raise click.UsageError("give only one of --from-beginning, --offset, --timestamp")
    props = dict(_PROPERTIES)
    for name, value in parse_key_values(properties, "--property").items():
        if name not in props:
            raise click.UsageError(f"unknown --property {name!r} (known: {', '.join(sorted(props))})")
        props[name] = value.encode("utf-8").decode("unicode_escape") if "separator" in name else value
    require_dir(path)
    data_dir = ReadOnlyDataDir(path)
    try:
        available = data_dir.partitions(topic)
    except UnknownTopicOrPartitionError:
        raise CliError(f"topic {topic!r} has no partition in {path}", EXIT_NOINPUT) from None
    chosen = list(dict.fromkeys(partitions)) or available
    missing = [p for p in chosen if p not in available]
    if missing:
        raise CliError(f"partition {missing[0]} of topic {topic!r} does not exist in {path}", EXIT_NOINPUT)
    start = "earliest" if from_beginning else offset
    readers = []
    for p in chosen:
        rl = data_dir.log(topic, p)
        readers.append(
            PartitionReader(
                p, rl, _start_offset(rl, start, timestamp), isolation_level == "read_committed", fetch_bytes
            )
        )
    formatter = Formatter(
        topic,
        props,
        DECODERS[key_decoder],
        DECODERS[value_decoder],
        fmt == "json",
        json_values=value_decoder == "json",
        json_keys=key_decoder == "json",
    )
    out = _Output()
    try:
        _run(readers, formatter, out, max_messages, follow, poll_ms / 1000)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how --follow ends
    finally:
        out.flush()
    for r in readers:
        for lost_from, lost_to in r.lost:
            error_console().print(
                f"warning: partition {r.partition}: offsets {lost_from}..{lost_to - 1} were deleted by retention "
                "before they could be read",
                markup=False,
            )
    if out.count == 0 and not follow and start in (None, "latest") and timestamp is None:
        error_console().print(
            "note: started at the end of the topic (the default); use --from-beginning or --follow",
            markup=False,
        )
    click.get_current_context().exit(EXIT_OK)


class _Output:
    """Record lines to stdout as UTF-8 bytes (whatever the locale), counted."""

    def __init__(self) -> None:
        self.stream = getattr(sys.stdout, "buffer", None)
        self.count = 0

    def write(self, text: str) -> None:
        self.count += 1
        if self.stream is None:
            sys.stdout.write(text)
        else:
            self.stream.write(text.encode("utf-8", "surrogateescape"))

    def flush(self) -> None:
        (self.stream or sys.stdout).flush()


def _run(
    readers: list[PartitionReader],
    formatter: Formatter,
    out: _Output,
    max_messages: int | None,
    follow: bool,
    poll_s: float,
) -> None:
    """Reads the partitions in turn until they are caught up (``follow``: forever) or ``max_messages``."""
    while True:
        progressed = False
        for reader in readers:
            before = reader.position
            for record, ts_type in reader.fetch():
                out.write(formatter.format(reader.partition, record, ts_type))
                if max_messages is not None and out.count >= max_messages:
                    return
            progressed = progressed or reader.position != before
        if progressed:
            continue
        if not follow:
            return
        out.flush()
        time.sleep(poll_s)
        for reader in readers:
            reader.log.refresh()
