"""``kafkalog compact DIR|PARTITION_DIR [TOPIC]``: run the log cleaner now on compacted partitions.

Each partition whose ``cleanup.policy`` has ``compact`` (all given partitions with ``--force``) is cleaned
as Kafka's log cleaner does (:class:`~kafkalog.cleaner.service.LogCleaner`): the latest record of every
key is kept, older ones go, tombstones and transaction markers go once their delete horizon
(``delete.retention.ms``) has passed, records of aborted transactions go. Round after round up to the first
uncleanable offset, whatever ``min.cleanable.dirty.ratio`` says: the active segment, anything past the high
watermark / last stable offset and segments younger than ``min.compaction.lag.ms`` stay as they are
(``--roll`` first starts a new active segment so the whole log is cleanable). Where the next cleaning starts
is written to the data directory's ``cleaner-offset-checkpoint``. A data directory is opened with a
:class:`~kafkalog.manager.LogManager` (exit 75 while another process holds it); a partition directory outside
one is opened on its own, its high watermark at its log end.

On a terminal (stderr) and without ``--json``, a transient progress bar counts the bytes of the partitions
compacted so far (first, for a data directory, one counting the ``.log`` bytes its load is done with: the
loader's ``load_progress``, so a directory that needs recovery shows how far it is).

``--json``: ``{"type":"partition","partition","rounds","firstDirtyOffset","endOffset","bytesBefore",
"bytesAfter","segmentsBefore","segmentsAfter","messagesRead","messagesWritten"}`` per partition, then
``{"type":"summary","partitions","bytesBefore","bytesAfter"}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from kafkalog.cleaner.service import CleanResult, LogCleaner
from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_OK,
    KafkalogCommand,
    bytes_bar,
    error_console,
    json_dumps,
    plural,
    progress,
    stdout_console,
)
from kafkalog.cli.paths import resolve_target
from kafkalog.cli.state import ImmediateScheduler, open_manager, partition_config
from kafkalog.cli.verifier import data_dir_log_bytes, log_bytes
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition

__all__ = ["CompactResult", "compact"]


@dataclass(frozen=True)
class CompactResult:
    """What compacting one partition did."""

    topic_partition: TopicPartition
    rounds: list[CleanResult]
    bytes_before: int
    bytes_after: int
    segments_before: int
    segments_after: int

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        return {
            "type": "partition",
            "partition": str(self.topic_partition),
            "rounds": len(self.rounds),
            "firstDirtyOffset": self.rounds[0].first_dirty_offset if self.rounds else None,
            "endOffset": self.rounds[-1].end_offset if self.rounds else None,
            "bytesBefore": self.bytes_before,
            "bytesAfter": self.bytes_after,
            "segmentsBefore": self.segments_before,
            "segmentsAfter": self.segments_after,
            "messagesRead": sum(r.stats.messages_read for r in self.rounds),
            "messagesWritten": sum(r.stats.messages_written for r in self.rounds),
        }


def _compact_log(cleaner: LogCleaner, log: Log, roll: bool) -> CompactResult:
    size, segments = log.size, log.num_log_segments
    if roll and log.active_segment.size > 0:
        log.roll()
        log.update_high_watermark(log.log_end_offset)
    rounds = cleaner.clean_log(log)
    log.delete_old_segments()  # segments below the log start offset (KAFKA-7400)
    return CompactResult(log.topic_partition, rounds, size, log.size, segments, log.num_log_segments)


@click.command(
    "compact",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
    short_help="Run the log cleaner now on compacted partitions.",
)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.argument("topic", required=False)
@click.option("--roll", is_flag=True, help="Roll the active segment first, so every record is cleanable.")
@click.option("--force", is_flag=True, help="Also clean partitions whose cleanup.policy has no 'compact'.")
@click.option(
    "--dedupe-buffer-size",
    type=click.IntRange(min=1024),
    default=128 * 1024 * 1024,
    show_default=True,
    help="Memory of the key -> offset map (log.cleaner.dedupe.buffer.size); a log with more keys is "
    "cleaned in several rounds.",
)
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines.")
def compact(
    path: Path, topic: str | None, roll: bool, force: bool, dedupe_buffer_size: int, json_output: bool
) -> None:
    """Compact now: keep the latest record of every key.

    A broker's log cleaner does this in the background when a partition
    is dirty enough; kafkalog's LogManager too while it runs. The active
    segment is never cleaned (use --roll), nor records past the high
    watermark or the last stable offset.

    \b
    Examples:
      kafkalog topics data --alter users --config cleanup.policy=compact
      kafkalog compact data users --roll
      kafkalog compact data/users-0 --json
    """
    target = resolve_target(path, topic=topic)
    cleaner = LogCleaner({"log.cleaner.dedupe.buffer.size": dedupe_buffer_size})
    results: list[CompactResult] = []
    skipped: dict[str, str] = {}  # topic -> its cleanup.policy, for topics that are not compacted
    if target.data_dir is None:
        with _bytes_bar(log_bytes(target), not json_output) as advance:
            for tp, part in target.partitions:
                config = partition_config(None, tp.topic)
                if force and not config.compact:
                    config = config.replace(cleanup_policy=(*config.cleanup_policy, "compact"))
                if not config.compact:
                    skipped[tp.topic] = ",".join(config.cleanup_policy)
                    continue
                with Log.open(part, config, scheduler=ImmediateScheduler()) as log:
                    log.update_high_watermark(log.log_end_offset)
                    results.append(_compact_log(cleaner, log, roll))
                advance(results[-1].bytes_before)
    else:
        wanted = {tp for tp, _ in target.partitions}
        with ExitStack() as stack:
            total = 0 if json_output else data_dir_log_bytes(target.data_dir)
            with bytes_bar("loading", total, enabled=not json_output) as on_bytes:
                mgr = stack.enter_context(open_manager(target.data_dir, load_progress=on_bytes))
            logs = sorted((tp, log) for tp, log in mgr.all_logs().items() if tp in wanted)
            with _bytes_bar(sum(log.size for _, log in logs), not json_output) as advance:
                for tp, log in logs:
                    if force and not log.config.compact:
                        log.update_config(
                            {"cleanup.policy": ",".join((*log.config.cleanup_policy, "compact"))}
                        )
                    if log.config.compact:
                        results.append(_compact_log(cleaner, log, roll))
                        advance(results[-1].bytes_before)
                    else:
                        skipped[tp.topic] = ",".join(log.config.cleanup_policy)
    _print(results, json_output)
    _explain_skipped(skipped, named=topic is not None or target.data_dir is None)
    click.get_current_context().exit(EXIT_OK)


@contextmanager
def _bytes_bar(total: int, enabled: bool) -> Iterator[Callable[[int], None]]:
    """An ``advance(bytes)`` that moves a transient "compacting" bar on stderr (only on a terminal and when
    ``enabled``; otherwise it does nothing)."""
    with progress("compacting", total, enabled=enabled) as bar:
        if bar is None:
            yield lambda n: None
            return
        task = bar.task_ids[0]
        yield lambda n: bar.advance(task, n)


def _explain_skipped(skipped: dict[str, str], *, named: bool) -> None:
    """Say on stderr why topics were not compacted: each one when it was named, else how many."""
    if not skipped:
        return
    if named:
        for name, policy in sorted(skipped.items()):
            error_console().print(
                f"topic {name} not compacted: its cleanup.policy is {policy} (compact it once with --force, "
                f"or set cleanup.policy=compact: kafkalog topics DIR --alter {name} --config "
                "cleanup.policy=compact)",
                markup=False,
            )
        return
    error_console().print(
        f"{plural(len(skipped), 'topic', 'topics')} not compacted: cleanup.policy has no 'compact' "
        "(name a topic to see its policy; --force compacts it once)",
        markup=False,
    )


def _print(results: list[CompactResult], json_output: bool) -> None:
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    if json_output:
        for r in results:
            click.echo(json_dumps(r.to_dict()))
        click.echo(
            json_dumps(
                {"type": "summary", "partitions": len(results), "bytesBefore": before, "bytesAfter": after}
            )
        )
        return
    console = stdout_console()
    for r in results:
        label = escape(str(r.topic_partition))
        if not r.rounds:
            console.print(f"{label}: nothing cleanable")
            continue
        console.print(
            f"{label}: {plural(len(r.rounds), 'round', 'rounds')}, offsets {r.rounds[0].first_dirty_offset}..{r.rounds[-1].end_offset - 1}, "
            f"{r.bytes_before} -> {r.bytes_after} bytes, {r.segments_before} -> {r.segments_after} segments"
        )
    console.print(f"{plural(len(results), 'partition', 'partitions')} compacted: {before} -> {after} bytes.")
