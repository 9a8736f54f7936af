"""``kafkalog info DIR|PARTITION_DIR``: what a data directory holds, per partition, read-only.

Per partition: segments and their sizes, log start offset, log end offset (after the last complete, valid
batch), high watermark, last stable offset (through :class:`~kafkalog.readonly.log.ReadOnlyLog`, so it works
next to a running writer and takes no lock), the producers of the newest producer snapshot at or below the log
end, and the leader epochs of ``leader-epoch-checkpoint``. Topics come from ``kafkalog-topics.json`` (partition
count, config overrides, topic id) when the directory has one.

``--json``: ``{"type":"topic","topic","partitions","config","topicId"}`` per topic of ``kafkalog-topics.json``,
``{"type":"partition","topic","partition","path","sizeBytes","logStartOffset","logEndOffset","highWatermark",
"lastStableOffset","segments":[{"baseOffset","sizeBytes","indexes":[...]}],"producerSnapshotOffset",
"producers":[{"producerId","producerEpoch","coordinatorEpoch","lastSequence","lastOffset","lastTimestamp",
"currentTxnFirstOffset"}],"leaderEpochs":[{"epoch","startOffset"}],"error"}`` per partition (``error`` is null
unless the partition could not be read), ``{"type":"sparkSink","pendingJournals":[job ids],"failedJournals":[job
ids],"stagingDirs","stagingBytes"}`` when the Spark sink has written to the directory, and
``{"type":"summary","topics","partitions","segments","sizeBytes"}``. The high watermark stops at a pending Spark
sink job (readers see it when it completes), so ``logEndOffset > highWatermark`` shows one.

``--tree``: every file of the directory as a text tree with its size and what it holds (:mod:`kafkalog.cli.layout`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_FAULT,
    EXIT_OK,
    KafkalogCommand,
    json_dumps,
    require_dir,
    stdout_console,
)
from kafkalog.cli.layout import render_tree
from kafkalog.cli.paths import resolve_target
from kafkalog.cli.remote import (
    is_url,
    key_ring_option,
    open_remote,
    open_tiered,
    remote_partition_info,
    storage_option,
)
from kafkalog.datadir import SinkDirState, read_sink_dir_state, read_topics
from kafkalog.errors import CorruptSnapshotError, KafkaError
from kafkalog.log.checkpoint import CheckpointError, leader_epoch_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.log.producer_state import ProducerStateEntry, read_snapshot
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog

__all__ = ["PartitionInfo", "info", "partition_info"]

_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


@dataclass
class PartitionInfo:
    """What ``info`` shows of one partition."""

    topic_partition: TopicPartition
    path: Path | str  # a directory, or the URL of a partition in object storage
    segments: list[tuple[int, int, list[str]]] = field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    snapshot_offset: int | None = None
    producers: list[ProducerStateEntry] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None

    @property
    def size(self) -> int:
        """Bytes in all ``.log`` files."""
        return sum(size for _, size, _ in self.segments)

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "type": "partition",
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "path": str(self.path),
            "sizeBytes": self.size,
            "logStartOffset": self.log_start_offset,
            "logEndOffset": self.log_end_offset,
            "highWatermark": self.high_watermark,
            "lastStableOffset": self.last_stable_offset,
            "segments": [{"baseOffset": b, "sizeBytes": s, "indexes": idx} for b, s, idx in self.segments],
            "producerSnapshotOffset": self.snapshot_offset,
            "producers": [_producer_dict(p) for p in self.producers],
            "leaderEpochs": [{"epoch": e, "startOffset": o} for e, o in self.epochs],
            "error": self.error,
        }


def _producer_dict(p: ProducerStateEntry) -> dict[str, object]:
    last = p.batches[-1] if p.batches else None
    return {
        "producerId": p.producer_id,
        "producerEpoch": p.producer_epoch,
        "coordinatorEpoch": p.coordinator_epoch,
        "lastSequence": None if last is None else last.last_seq,
        "lastOffset": None if last is None else last.last_offset,
        "lastTimestamp": p.last_timestamp,
        "currentTxnFirstOffset": p.current_txn_first_offset,
    }


def partition_info(tp: TopicPartition, path: Path) -> PartitionInfo:
    """Reads one partition directory without writing anything (errors land in ``error``)."""
    result = PartitionInfo(tp, path)
    problems: list[str] = []
    try:
        rl = ReadOnlyLog.open(path)
        segments = rl.segments
        result.log_start_offset = rl.log_start_offset
        result.log_end_offset = rl.log_end_offset
        result.high_watermark = rl.high_watermark
        result.last_stable_offset = rl.last_stable_offset
        for seg in segments:
            stem = f"{seg.base_offset:020d}"
            present = [s.lstrip(".") for s in _INDEX_SUFFIXES if (path / f"{stem}{s}").exists()]
            result.segments.append((seg.base_offset, seg.size_bytes, present))
    except (KafkaError, OSError) as exc:
        problems.append(f"log: {exc}")
    end = result.log_end_offset
    snapshots = sorted(
        int(p.name[: -len(".snapshot")])
        for p in path.glob("*.snapshot")
        if p.name[: -len(".snapshot")].isdigit()
    )
    for offset in reversed(snapshots):
        if end is not None and offset > end:
            continue
        try:
            result.producers = read_snapshot(path / f"{offset:020d}.snapshot")
            result.snapshot_offset = offset
            break
        except (CorruptSnapshotError, OSError) as exc:
            problems.append(f"snapshot {offset}: {exc}")
    try:
        result.epochs = [(e.epoch, e.start_offset) for e in leader_epoch_checkpoint(path).read()]
    except (CheckpointError, OSError, UnicodeDecodeError) as exc:
        problems.append(f"leader-epoch-checkpoint: {exc}")
    result.error = "; ".join(problems) or None
    return result


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _summary_table(parts: list[PartitionInfo]) -> Table:
    table = Table(title="Partitions", title_justify="left")
    for column in (
        "partition",
        "segments",
        "size",
        "log start",
        "log end",
        "HW",
        "LSO",
        "producers",
        "epoch",
    ):
        table.add_column(column, justify="left" if column == "partition" else "right")
    for p in parts:
        table.add_row(
            escape(str(p.topic_partition)),
            str(len(p.segments)),
            _size(p.size),
            _opt(p.log_start_offset),
            _opt(p.log_end_offset),
            _opt(p.high_watermark),
            _opt(p.last_stable_offset),
            str(len(p.producers)),
            str(p.epochs[-1][0]) if p.epochs else "-",
        )
    return table


def _details(p: PartitionInfo) -> list[Table]:
    out: list[Table] = []
    segs = Table(title=f"{escape(str(p.topic_partition))}: segments", title_justify="left")
    for column in ("base offset", "size", "indexes"):
        segs.add_column(column, justify="right" if column != "indexes" else "left")
    for base, size, indexes in p.segments:
        segs.add_row(str(base), _size(size), ", ".join(indexes) or "-")
    out.append(segs)
    if p.producers:
        title = f"{escape(str(p.topic_partition))}: producers (snapshot at offset {p.snapshot_offset})"
        prods = Table(title=title, title_justify="left")
        for column in ("producer id", "epoch", "last seq", "last offset", "last timestamp", "open txn from"):
            prods.add_column(column, justify="right")
        for e in p.producers:
            d = _producer_dict(e)
            prods.add_row(
                str(e.producer_id),
                str(e.producer_epoch),
                _opt(d["lastSequence"]),  # type: ignore[arg-type]
                _opt(d["lastOffset"]),  # type: ignore[arg-type]
                str(e.last_timestamp),
                _opt(e.current_txn_first_offset),
            )
        out.append(prods)
    if p.epochs:
        epochs = Table(title=f"{escape(str(p.topic_partition))}: leader epochs", title_justify="left")
        epochs.add_column("epoch", justify="right")
        epochs.add_column("start offset", justify="right")
        for epoch, start in p.epochs:
            epochs.add_row(str(epoch), str(start))
        out.append(epochs)
    return out


@click.command("info", cls=KafkalogCommand, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP)
@click.argument("location", metavar="DIR|PARTITION_DIR|URL")
@click.option("--topic", default=None, metavar="TOPIC", help="Show only this topic.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Also list each partition's segments, producers and leader epochs."
)
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines instead of tables.")
@click.option("--tree", is_flag=True, help="Draw the directory's files as a tree, each with what it holds.")
@storage_option
@key_ring_option
def info(
    location: str,
    topic: str | None,
    verbose: bool,
    json_output: bool,
    tree: bool,
    storage_options: tuple[str, ...],
    key_ring: str | None,
) -> None:
    """Show what a data directory (or one partition directory) holds.

    For every partition: segments and sizes, log start offset, log end
    offset, high watermark (HW), last stable offset (LSO, where
    read_committed consumers stop), the producers recorded in the newest
    producer snapshot, and the leader epochs. The high watermark stops at
    a Spark sink job still being committed (readers see the job when it
    completes); the Spark sink's pending and failed journals and its
    staging are listed at the end. Read-only and lock-free: safe while
    another process writes. Exits 1 if a partition could not be read.

    --tree draws every file of the directory instead, with its size and
    what it holds (a segment's offsets and batches, index entries, a
    snapshot's producers, checkpoint entries).

    A URL (s3://bucket/prefix, gs://, az://) reads a copy of a data
    directory in object storage, with --storage-option KEY=VALUE
    (Hadoop's names: fs.s3a.endpoint, fs.s3a.access.key, ...).

    \b
    Examples:
      kafkalog info data
      kafkalog info data --tree
      kafkalog info data --topic orders -v
      kafkalog info data/orders-0 --json
      kafkalog info s3://bucket/backup \\
          --storage-option fs.s3a.endpoint=http://127.0.0.1:8333
    """
    if is_url(location):
        if tree:
            raise click.UsageError("--tree draws a local directory; give it a path, not a URL")
        data_dir = open_remote(location, storage_options, topic=topic, key_ring=key_ring)
        parts = []
        for tp, name in sorted(data_dir.partition_names().items()):
            if topic is None or tp.topic == topic:
                part = PartitionInfo(tp, name)
                remote_partition_info(data_dir, tp, name, part)
                parts.append(part)
        _print_info(location, parts, {}, None, verbose, json_output, is_data_dir=True)
        return
    path = Path(location)
    if tree:
        if json_output or topic is not None or verbose:
            raise click.UsageError("--tree draws the whole directory: give it without --json, --topic or -v")
        for line in render_tree(require_dir(path)):
            click.echo(line)
        click.get_current_context().exit(EXIT_OK)
    target = resolve_target(path, topic=topic)
    parts = [partition_info(tp, p) for tp, p in target.partitions]
    tiered = open_tiered(target.data_dir if target.is_data_dir else None, storage_options, key_ring)
    if tiered is not None:
        parts = _with_archive(tiered, parts, topic)
    topics: dict[str, Any] = {}
    if target.data_dir is not None:
        try:
            doc = read_topics(target.data_dir)
        except KafkaError:
            doc = None
        if doc is not None:
            topics = {n: m for n, m in doc.topics.items() if topic is None or n == topic}
    sink = read_sink_dir_state(target.data_dir) if target.data_dir is not None else None
    _print_info(str(path), parts, topics, sink, verbose, json_output, is_data_dir=target.is_data_dir)


def _with_archive(
    data_dir: ReadOnlyDataDir, parts: list[PartitionInfo], topic: str | None
) -> list[PartitionInfo]:
    """The partitions of a data dir with tiered storage as one history each: the archived segments older than
    the first local one listed first, and the log start offset over both tiers (a partition only in the
    archive is added)."""
    by_tp = {p.topic_partition: p for p in parts}
    for tp, name in sorted(data_dir.partition_names().items()):
        if topic is not None and tp.topic != topic:
            continue
        part = by_tp.get(tp)
        if part is None:
            part = by_tp[tp] = PartitionInfo(tp, name)
            remote_partition_info(data_dir, tp, name, part)
            continue
        try:
            rl = data_dir.log(tp.topic, tp.partition, check=False)
            local = {base for base, _, _ in part.segments}
            first_local = min(local) if local else None
            archived = [
                (s.base_offset, s.size_bytes, ["index", "timeindex"])
                for s in rl.segments
                if first_local is None or s.base_offset < first_local
            ]
            part.segments = archived + part.segments
            part.log_start_offset = rl.log_start_offset
        except (KafkaError, OSError) as exc:
            part.error = f"{part.error}; archive: {exc}" if part.error else f"archive: {exc}"
    return [by_tp[tp] for tp in sorted(by_tp, key=lambda t: (t.topic, t.partition))]


def _print_info(
    path: str,
    parts: list[PartitionInfo],
    topics: dict[str, Any],
    sink: SinkDirState | None,
    verbose: bool,
    json_output: bool,
    *,
    is_data_dir: bool,
) -> None:
    failed = any(p.error for p in parts)
    if json_output:
        for name, meta in sorted(topics.items()):
            click.echo(
                json_dumps(
                    {
                        "type": "topic",
                        "topic": name,
                        "partitions": meta.partitions,
                        "config": meta.config,
                        "topicId": meta.topic_id,
                    }
                )
            )
        for p in parts:
            click.echo(json_dumps(p.to_dict()))
        if sink is not None:
            click.echo(json_dumps({"type": "sparkSink", **sink.to_dict()}))
        click.echo(
            json_dumps(
                {
                    "type": "summary",
                    "topics": len({p.topic_partition.topic for p in parts}),
                    "partitions": len(parts),
                    "segments": sum(len(p.segments) for p in parts),
                    "sizeBytes": sum(p.size for p in parts),
                }
            )
        )
        click.get_current_context().exit(EXIT_FAULT if failed else EXIT_OK)
    console = stdout_console()
    if topics:
        table = Table(title="Topics", title_justify="left")
        for column in ("topic", "partitions", "config overrides", "topic id"):
            table.add_column(column)
        for name, meta in sorted(topics.items()):
            config = ", ".join(f"{k}={v}" for k, v in sorted(meta.config.items())) or "-"
            table.add_row(escape(name), str(meta.partitions), escape(config), meta.topic_id or "-")
        console.print(table)
    if not parts:
        console.print(f"no partitions in {escape(str(path))}")
    else:
        console.print(_summary_table(parts))
    if verbose or not is_data_dir:
        for p in parts:
            for table in _details(p):
                console.print(table)
    if sink is not None:
        console.print(
            f"Spark sink: {len(sink.pending_journals)} pending journal(s), {sink.staging_dirs} staging "
            f"director{'y' if sink.staging_dirs == 1 else 'ies'} ({_size(sink.staging_bytes)})"
        )
        for job in sink.pending_journals:
            console.print(
                f"  pending (readers stop at its base offsets until a writer completes it): {escape(job)}"
            )
        for job in sink.failed_journals:
            console.print(
                f"[red]  failed journal (incomplete job, docs/operations.md §6.1): "
                f".kafkalog-spark/journal/failed/{escape(job)}.json[/]"
            )
    for p in parts:
        if p.error:
            console.print(f"[red]{escape(str(p.topic_partition))}: {escape(p.error)}[/]")
    click.get_current_context().exit(EXIT_FAULT if failed else EXIT_OK)
