"""``kafkalog consume DIR TOPIC``: print a topic's records, like Kafka's ``kafka-console-consumer.sh``.

Reading goes through :class:`~kafkalog.readonly.log.ReadOnlyLog`: no lock, nothing written, never a torn
batch, so it works while another process (``kafkalog produce``, a LogManager) writes into the directory.

Where each partition starts: ``--offset N`` (clamped to the log start offset), ``--offset earliest`` or
``--from-beginning``, ``--offset latest`` (the default, as Kafka's console consumer: only new records, which
needs ``--follow``), or ``--timestamp MS`` (the first record with a timestamp at or after MS; the end if
none). Where it stops: the high watermark (``--isolation-level read_uncommitted``, the default) or the last
stable offset (``read_committed``: records of aborted transactions are skipped, using the ``.txnindex`` files
and :mod:`kafkalog.readonly.committed`, and nothing of a transaction still open is shown). Control records
(transaction markers) are never shown. ``--follow`` keeps polling for new records (``--poll-ms``) until
Ctrl-C, which exits 0; ``--max-messages`` stops after that many records. A followed partition whose
directory goes away (topic deleted) or is replaced (deleted and created again: a new directory or topic id in
``partition.metadata``) ends ``--follow`` with an error, exit 1: the new topic's offsets start again, and
waiting for the old ones would stall silently. Without ``--follow`` the same found at the end is exit 1 too
(what was printed may stop short). Partitions added to the topic while ``--follow`` runs (without
``--partition``) are picked up at the next poll and read from their first offset (every record of theirs is
new), as a Kafka consumer subscribed to the topic picks them up at its next metadata refresh.

Partitions are read in turn, a fetch (``--fetch-bytes``) at a time, so several partitions interleave. When
stderr is a terminal and stdout is not (``consume ... > file``), a transient progress bar on stderr counts the
offsets read out of those up to the end at the start (the high watermark, or the LSO; at most
``--max-messages``), moved once per fetch; never with ``--follow`` or ``--format json``, in a pipe or onto a
terminal.

Damaged data (a torn, overlong or zero-filled batch in a rolled segment, a bad frame, a CRC mismatch) is
printed up to the damage and then is an error: exit 2 (``EXIT_CORRUPT``) naming the partition, offset, file
and byte. ``--skip-damaged`` warns on stderr (the offsets lost), skips the rest of that segment, goes on with
the next one and exits 2 at the end. The last segment's partial tail is what a crash or a write in progress
leaves: the end of the data, not damage.

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
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import click
from rich.progress import Progress

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_CORRUPT,
    EXIT_FAULT,
    EXIT_NOINPUT,
    EXIT_OK,
    CliError,
    KafkalogCommand,
    error_console,
    isatty,
    parse_key_values,
    progress,
    require_dir,
)
from kafkalog.cli.dumplog import DECODERS, Decoder
from kafkalog.cli.remote import is_url, key_ring_option, open_remote, open_tiered, storage_option
from kafkalog.datadir import CLEANER_OFFSET_CHECKPOINT, read_topics
from kafkalog.errors import (
    CorruptRecordError,
    KafkaError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kafkalog.log.checkpoint import offset_checkpoint, read_partition_metadata, topic_id_to_string
from kafkalog.log.config import LogConfig
from kafkalog.readonly.committed import committed_records
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog
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
    skip_damaged: bool = False
    #: Whether offsets missing between segments are damage (a log never compacted) or normal (compacted).
    holes_are_damage: bool = False
    lost: list[tuple[int, int]] = field(default_factory=list)
    #: Damage skipped with ``skip_damaged``: (first offset lost, offset reading resumed at, what was wrong).
    damaged: list[tuple[int, int, str]] = field(default_factory=list)
    _skipped_to: int = field(default=0, init=False, repr=False)
    _identity: tuple[int, int] | None = field(default=None, init=False, repr=False)
    _topic_id: str | None = field(default=None, init=False, repr=False)
    #: For a partition in object storage: a new view when its objects changed (segments uploaded), else None.
    renew: Callable[[], ReadOnlyLog | None] | None = field(default=None, repr=False)

    def refresh(self) -> None:
        """Look again at the partition (``--follow``): new appends, new segments, new uploads to an archive."""
        renewed = None if self.renew is None else self.renew()
        if renewed is not None:
            self.log = renewed
        else:
            self.log.refresh()

    def __post_init__(self) -> None:
        if self.log.is_local:
            self._identity = _dir_identity(self.log.dir)
            self._topic_id = _topic_id(self.log.dir)

    def replaced(self) -> str | None:
        """Why the partition directory being read is no longer the one this reader started on (the topic was
        deleted, or deleted and created again: a new directory or a new topic id in ``partition.metadata``),
        or None when it still is (always, for a partition in object storage)."""
        if not self.log.is_local:
            return None
        where = f"partition {self.partition} ({self.log.dir})"
        identity = _dir_identity(self.log.dir)
        if identity is None:
            return f"{where} is gone: the topic was deleted (or the partition moved to another log dir)"
        topic_id = _topic_id(self.log.dir)
        if self._topic_id is not None and topic_id is not None and topic_id != self._topic_id:
            return (
                f"{where}: the topic was deleted and created again (topic id {self._topic_id}, now {topic_id}); "
                "its offsets start again, so run consume again to read the new topic"
            )
        if identity != self._identity:
            return (
                f"{where}: the directory was replaced (the topic was deleted and created again); its offsets "
                "start again, so run consume again to read the new topic"
            )
        if self._topic_id is None:
            self._topic_id = topic_id  # partition.metadata written after we started
        return None

    def bound(self) -> int:
        """The offset reads stop at (HW or LSO as of the last refresh)."""
        return self.log.last_stable_offset if self.committed else self.log.high_watermark

    def _skip(self, first: int, upper: int, error: CorruptRecordError) -> None:
        """Note damage skipped over (``skip_damaged``); the fetch moves the position past it."""
        if not self.damaged or self.damaged[-1][:2] != (first, upper):
            self.damaged.append((first, upper, str(error)))
            error_console().print(
                f"warning: partition {self.partition}: offsets {first}..{upper - 1} skipped, damaged data: {error}",
                markup=False,
            )
        self._skipped_to = max(self._skipped_to, upper)

    def _hole(self, first: int, upper: int) -> None:
        """Offsets missing between two segments of a log that is not compacted: damage."""
        error = CorruptRecordError(
            f"offsets {first}..{upper - 1} are missing between two segments (a segment missing or emptied in the "
            "middle of a log that is not compacted)"
        )
        if not self.skip_damaged:
            raise error
        self._skip(first, upper, error)

    def _unreadable_segment(self, upper: int) -> None:
        """The segment holding the position is listed (still, after a refresh) but cannot be opened: an
        archived segment whose manifest remains while its objects are gone. Damage, never the end of the
        data: raised, or with ``skip_damaged`` reported and skipped up to the next segment."""
        gone = getattr(self.log.source, "missing_objects", None)
        objects = [] if gone is None else list(gone(self.position, upper))
        error = CorruptRecordError(
            f"offsets {self.position}..{upper - 1} are missing: their segment is listed but cannot be read"
            + (f" ({', '.join(objects)} gone)" if objects else "")
        )
        if not self.skip_damaged:
            raise error
        self._skip(self.position, upper, error)
        self.position = max(self.position, upper)

    def _next_segment_base(self, offset: int) -> int:
        """Base offset of the segment after the one holding ``offset`` (the bound when it is the last)."""
        return next((s.base_offset for s in self.log.segments if s.base_offset > offset), self.bound())

    def fetch(self) -> Iterator[tuple[Record, TimestampType]]:
        """Records of one fetch from the current position (nothing when caught up).

        Damage (a rolled segment's torn or overlong batch, a bad frame, a CRC mismatch) raises
        :class:`~kafkalog.errors.CorruptRecordError` after the records before it, or with ``skip_damaged`` is
        reported on stderr and skipped: the rest of the damaged segment is not read.
        """
        end = self.bound()
        if self.position >= end:
            return
        start = self.log.log_start_offset
        if self.position < start:  # retention removed what we were about to read
            self.lost.append((self.position, start))
            self.position = start
        self._skipped_to = 0
        try:
            data = self.log.read(
                self.position,
                self.fetch_bytes,
                end_offset=end,
                on_damage=self._skip if self.skip_damaged else None,
                on_gap=self._hole if self.holes_are_damage else None,
            )
        except OffsetOutOfRangeError:
            self.log.refresh()
            if self.position < self.log.log_start_offset:
                self.lost.append((self.position, self.log.log_start_offset))
                self.position = self.log.log_start_offset
            elif self.position < min(end, self.log.log_end_offset):
                self._unreadable_segment(min(self._next_segment_base(self.position), end))
            return
        aborted = self.log.aborted_transactions(self.position, end) if self.committed else None
        current: list[RecordBatch] = []

        def batches() -> Iterator[RecordBatch]:
            for batch in data.batches():
                current[:] = [batch]
                yield batch

        records = committed_records(batches(), aborted, self.position, end)
        try:
            for record in records:
                yield record, current[0].timestamp_type
                self.position = record.offset + 1
        except CorruptRecordError as exc:  # a CRC mismatch or bad records (the frames were whole)
            if not self.skip_damaged:
                raise
            self._skip(self.position, min(self._next_segment_base(self.position), end), exc)
        # the data before a damaged segment's damage was all in this read: its lost offsets are passed too
        self.position = max(self.position, min(records.next_offset, end), self._skipped_to)


def _dir_identity(directory: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of a directory, None if it is not there."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _topic_id(directory: Path) -> str | None:
    """The topic id of a partition directory's ``partition.metadata`` (None if missing or unreadable)."""
    try:
        topic_id = read_partition_metadata(directory)
    except (KafkaError, OSError, UnicodeDecodeError, ValueError):
        return None
    return None if topic_id is None else topic_id_to_string(topic_id)


def _never_compacted(data_dir: Path, topic: str, partitions: list[int]) -> set[int]:
    """The partitions whose log has no reason for gaps between segments: the topic's ``cleanup.policy`` in
    ``kafkalog-topics.json`` has no ``compact``, and ``cleaner-offset-checkpoint`` does not list the partition
    (it was never cleaned). Empty when the topic's config is not known."""
    try:
        document = read_topics(data_dir)
        meta = None if document is None else document.topics.get(topic)
        if meta is None or LogConfig.from_props(meta.config).compact:
            return set()
    except (KafkaError, OSError, UnicodeDecodeError, ValueError):
        return set()
    try:
        entries = offset_checkpoint(data_dir / CLEANER_OFFSET_CHECKPOINT).read()
    except (KafkaError, OSError, UnicodeDecodeError, ValueError):
        return set()
    cleaned = {tp.partition for tp, _ in entries if tp.topic == topic}
    return set(partitions) - cleaned


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
@click.argument("location", metavar="DIR|URL")
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
@click.option(
    "--skip-damaged",
    is_flag=True,
    help="On damaged data, warn, skip the rest of that segment and go on (exit 2 at the end).",
)
@storage_option
@key_ring_option
def consume(
    location: str,
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
    skip_damaged: bool,
    storage_options: tuple[str, ...],
    key_ring: str | None,
) -> None:
    """Print the records of a topic, like kafka-console-consumer.sh.

    Takes no lock and writes nothing: safe while a producer writes to the
    same directory. Without --from-beginning/--offset/--timestamp it
    starts at the end (as Kafka's console consumer), so add --follow to
    wait for new records.

    Damaged data (a rolled segment's torn batch, a bad frame or CRC) stops
    the command with exit 2 after every record before it was printed;
    --skip-damaged warns, skips the rest of that segment, goes on and
    exits 2 at the end. The last segment's torn tail (a crash, a write in
    progress) is the end of the data, not damage.

    Written to a file from a terminal, it shows a progress bar on stderr.

    \b
    Properties (--property NAME=VALUE, comma-separated or repeated):
      print.timestamp, print.partition, print.offset, print.headers,
      print.key (false), print.value (true), key.separator (tab),
      line.separator (newline), headers.separator (,), null.literal (null)

    \b
    Examples:
      kafkalog consume data orders --from-beginning
      kafkalog consume s3://bucket/backup orders --from-beginning \\
          --storage-option fs.s3a.endpoint=http://127.0.0.1:8333
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
    if is_url(location):
        data_dir = open_remote(location, storage_options, key_ring=key_ring)
        never_compacted_in: Path | None = None
    else:
        path = require_dir(Path(location))
        data_dir = open_tiered(path, storage_options, key_ring) or ReadOnlyDataDir(
            path, recorded_archive=False
        )
        never_compacted_in = path
    try:
        available = data_dir.partitions(topic)
    except UnknownTopicOrPartitionError:
        raise CliError(f"topic {topic!r} has no partition in {location}", EXIT_NOINPUT) from None
    chosen = list(dict.fromkeys(partitions)) or available
    missing = [p for p in chosen if p not in available]
    if missing:
        raise CliError(
            f"partition {missing[0]} of topic {topic!r} does not exist in {location}", EXIT_NOINPUT
        )
    start = "earliest" if from_beginning else offset
    if getattr(data_dir.layout, "kind", "logdir") != "logdir":
        never_compacted = set(chosen)  # an archive: tiered storage holds no compacted topic
    elif never_compacted_in is None:
        never_compacted = set()
    else:
        never_compacted = _never_compacted(never_compacted_in, topic, chosen)

    def reader(p: int, first: str | None, first_timestamp: int | None) -> PartitionReader:
        rl = data_dir.log(topic, p)
        return PartitionReader(
            p,
            rl,
            _start_offset(rl, first, first_timestamp),
            isolation_level == "read_committed",
            fetch_bytes,
            skip_damaged=skip_damaged,
            holes_are_damage=p in never_compacted,
            renew=(lambda: data_dir.log(topic, p) if data_dir.refresh_partition(topic, p) else None)
            if data_dir.is_remote
            else None,
        )

    readers = [reader(p, start, timestamp) for p in chosen]

    def discover() -> list[PartitionReader]:
        """Partitions added to the topic since the start (``--follow`` without ``--partition``): all their
        records are new, so they are read from their first offset."""
        data_dir.refresh()  # an archive's listing of partitions is cached until asked again
        try:
            now = data_dir.partitions(topic)
        except UnknownTopicOrPartitionError:
            return []
        known = {r.partition for r in readers}
        found = []
        for p in now:
            if p not in known:
                try:
                    found.append(reader(p, "earliest", None))
                except UnknownTopicOrPartitionError:
                    continue
        return found

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
    # a transient bar on stderr (a terminal) while a topic is copied to a file or a pipe: offsets read of those
    # up to the high watermark (LSO) at the start; never with --follow (it has no end) or onto a terminal
    total = sum(max(0, r.bound() - r.position) for r in readers)
    if max_messages is not None:
        total = min(total, max_messages)
    try:
        with progress(
            f"consuming {topic}",
            total,
            enabled=not follow and fmt != "json" and not isatty(sys.stdout),
            in_bytes=False,
        ) as bar:
            tick = None if bar is None else _offsets_tick(bar, readers)
            _run(
                readers,
                formatter,
                out,
                max_messages,
                follow,
                poll_ms / 1000,
                None if partitions else discover,
                tick,
            )
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
    damaged = any(r.damaged for r in readers)
    click.get_current_context().exit(EXIT_CORRUPT if damaged else EXIT_OK)


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


def _offsets_tick(bar: Progress, readers: list[PartitionReader]) -> Callable[[], None]:
    """Moves ``bar`` to the number of offsets the readers have passed since now (called once per fetch)."""
    task = bar.task_ids[0]
    first = sum(r.position for r in readers)

    def tick() -> None:
        bar.update(task, completed=sum(r.position for r in readers) - first)

    return tick


def _run(
    readers: list[PartitionReader],
    formatter: Formatter,
    out: _Output,
    max_messages: int | None,
    follow: bool,
    poll_s: float,
    discover: Callable[[], list[PartitionReader]] | None = None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Reads the partitions in turn until they are caught up (``follow``: forever) or ``max_messages``;
    ``discover`` (``follow``) gives readers of partitions added meanwhile, appended to ``readers``; ``tick``
    is called after each fetch (a progress bar)."""
    while True:
        progressed = False
        for reader in readers:
            before = reader.position
            try:
                for record, ts_type in reader.fetch():
                    out.write(formatter.format(reader.partition, record, ts_type))
                    if max_messages is not None and out.count >= max_messages:
                        return
            except CorruptRecordError as exc:
                raise CliError(
                    f"partition {reader.partition}: damaged data at offset {reader.position} (the records before "
                    f"it were printed; --skip-damaged goes on past it): {exc}",
                    EXIT_CORRUPT,
                ) from None
            if tick is not None:
                tick()
            progressed = progressed or reader.position != before
        if progressed:
            continue
        if not follow:
            for reader in readers:  # deleted under us: what was printed may stop short of the end
                why = reader.replaced()
                if why is not None:
                    raise CliError(f"{why} while it was read", EXIT_FAULT)
            return
        out.flush()
        time.sleep(poll_s)
        for reader in readers:
            reader.refresh()
            why = reader.replaced()
            if why is not None:  # it would wait for offsets the new topic may never reach
                raise CliError(f"{why}; stopped following", EXIT_FAULT)
        if discover is not None:
            readers.extend(sorted(discover(), key=lambda r: r.partition))
