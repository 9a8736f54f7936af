"""``kafkalog retention DIR [TOPIC]``: apply retention now, or (``--dry-run``) list what it would delete and why.

The rules are the log's (:mod:`kafkalog.log.retention`, Kafka's ``deleteOldSegments``), applied oldest segment
first, each stopping at the first segment that must stay:

1. ``log_start_offset``: a segment whose successor starts at or below the log start offset (always, also on
   compacted topics);
2. ``retention_bytes`` (``cleanup.policy`` with ``delete``): the oldest segments go while the log stays at or
   above ``retention.bytes`` without them;
3. ``retention_ms`` (``delete`` policy): a segment whose largest record timestamp (the file's modification
   time without timestamps) is older than ``retention.ms``.

A segment whose offsets reach past the high watermark never goes, nor an empty last segment; when every
segment goes, the log first rolls a new empty active segment at its end. The dry run computes this plan
read-only (through :class:`~kafkalog.readonly.log.ReadOnlyLog`: no lock, safe next to a writer; the largest
timestamp is read from the time index's last entry plus the batch headers after it). The real run opens the
data directory with a :class:`~kafkalog.manager.LogManager` (exit 75 while another process holds it), calls
``delete_old_segments`` on each log and reports the segments that are gone, with the rule that removed each.
On a terminal (stderr) and without ``--json``, a transient bar counts the ``.log`` bytes that load is done
with (the loader's ``load_progress``), then a spinner runs while the segments go.

``--json``: ``{"type":"segment","partition","baseOffset","nextOffset","sizeBytes","largestTimestamp","rule",
"reason"}`` per deleted (or, dry run, deletable) segment, ``{"type":"partition","partition","segmentsBefore",
"segmentsDeleted","bytesDeleted","logStartOffsetBefore","logStartOffsetAfter","rolled"}`` per partition, then
``{"type":"summary","partitions","segmentsDeleted","bytesDeleted","dryRun"}``.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import click
from rich.markup import escape

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_OK,
    KafkalogCommand,
    bytes_bar,
    json_dumps,
    plural,
    status,
    stdout_console,
)
from kafkalog.cli.paths import resolve_target
from kafkalog.cli.segscan import iter_fixed_entries
from kafkalog.cli.state import (
    DirChanges,
    ImmediateScheduler,
    diff_dirs,
    open_manager,
    partition_config,
    snapshot_dir,
)
from kafkalog.cli.verifier import data_dir_log_bytes
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.readonly.log import ReadOnlyLog
from kafkalog.records.framing import (
    HEADER_SIZE_UP_TO_MAGIC,
    MAX_TIMESTAMP_OFFSET,
    RECORD_BATCH_OVERHEAD,
    frame_magic,
    is_v2_magic,
    next_frame,
)

__all__ = ["PlannedDeletion", "RetentionPlan", "plan_retention", "retention"]

_TIME_ENTRY: Final = struct.Struct(">qi")
_OFFSET_ENTRY: Final = struct.Struct(">ii")
_I64: Final = struct.Struct(">q")


@dataclass(frozen=True)
class PlannedDeletion:
    """A segment retention deletes: base offset, next segment's base (or the log end), size, timestamp, rule."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    rule: str
    reason: str


@dataclass
class RetentionPlan:
    """What retention does to one partition."""

    topic_partition: TopicPartition
    path: Path
    segments_before: int
    log_start_before: int
    log_start_after: int
    deletions: list[PlannedDeletion] = field(default_factory=list)
    rolled: bool = False

    def to_dicts(self) -> list[dict[str, object]]:
        """The ``--json`` objects: one per deletion, then the partition's."""
        out: list[dict[str, object]] = [
            {
                "type": "segment",
                "partition": str(self.topic_partition),
                "baseOffset": d.base_offset,
                "nextOffset": d.next_offset,
                "sizeBytes": d.size,
                "largestTimestamp": d.largest_timestamp,
                "rule": d.rule,
                "reason": d.reason,
            }
            for d in self.deletions
        ]
        out.append(
            {
                "type": "partition",
                "partition": str(self.topic_partition),
                "segmentsBefore": self.segments_before,
                "segmentsDeleted": len(self.deletions),
                "bytesDeleted": sum(d.size for d in self.deletions),
                "logStartOffsetBefore": self.log_start_before,
                "logStartOffsetAfter": self.log_start_after,
                "rolled": self.rolled,
            }
        )
        return out


def _index_floor_position(index: Path, base: int, offset: int) -> int:
    """Position of the greatest offset-index entry at or below ``offset`` (0 if none)."""
    position = 0
    if not index.exists():
        return 0
    for i, raw in iter_fixed_entries(index, 8):
        rel, pos = _OFFSET_ENTRY.unpack(raw)
        if (i > 0 and rel == 0) or base + rel > offset:
            break
        position = pos
    return position


def largest_timestamp(log: Path, base: int) -> int:
    """The segment's largest record timestamp (-1 if none): the time index's last entry, then the batch
    headers after the batch it names (the time index lags the data of an active segment)."""
    best, offset = -1, -1
    tindex = log.with_suffix(".timeindex")
    if tindex.exists():
        for i, raw in iter_fixed_entries(tindex, 12):
            ts, rel = _TIME_ENTRY.unpack(raw)
            if i > 0 and rel == 0:
                break
            best, offset = ts, base + rel
    position = _index_floor_position(log.with_suffix(".index"), base, offset) if offset >= 0 else 0
    with open(log, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while position + HEADER_SIZE_UP_TO_MAGIC < size:
            f.seek(position)
            head = f.read(RECORD_BATCH_OVERHEAD)
            frame = next_frame(head, 0, size - position) if len(head) > HEADER_SIZE_UP_TO_MAGIC else None
            if type(frame) is not int:
                break
            magic = frame_magic(head, 0)
            if is_v2_magic(magic) and len(head) >= MAX_TIMESTAMP_OFFSET + 8:
                best = max(best, _I64.unpack_from(head, MAX_TIMESTAMP_OFFSET)[0])
            elif magic != 0 and len(head) >= 26:  # legacy: any magic but 0 has v1's timestamp
                best = max(best, _I64.unpack_from(head, 18)[0])
            position += frame
    return best


def _fmt_ms(ms: int) -> str:
    seconds = ms / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def plan_retention(tp: TopicPartition, path: Path, config: LogConfig, now_ms: int) -> RetentionPlan:
    """The deletions retention would make now (read-only; see the module doc)."""
    rl = ReadOnlyLog.open(path)
    segs = rl.segments
    start, hw, leo = rl.log_start_offset, rl.high_watermark, rl.log_end_offset
    plan = RetentionPlan(tp, path, len(segs), start, start)
    remaining = list(segs)
    stamps: dict[int, int] = {}

    def stamp(i: int) -> int:
        seg = remaining[i]
        if seg.base_offset not in stamps:
            ts = largest_timestamp(seg.path, seg.base_offset)
            stamps[seg.base_offset] = ts if ts >= 0 else int(os.stat(seg.path).st_mtime * 1000)
        return stamps[seg.base_offset]

    def take(rule: str, allows: Callable[[int, int], str | None]) -> None:
        nonlocal remaining
        chosen = 0
        for i, seg in enumerate(remaining):
            upper = remaining[i + 1].base_offset if i + 1 < len(remaining) else leo
            last_and_empty = i + 1 == len(remaining) and seg.size_bytes == 0
            reason = allows(i, upper) if hw >= upper and not last_and_empty else None
            if reason is None:
                break
            plan.deletions.append(
                PlannedDeletion(seg.base_offset, upper, seg.size_bytes, stamp(i), rule, reason)
            )
            chosen += 1
        if chosen and chosen == len(remaining):
            plan.rolled = remaining[-1].base_offset != leo
            if not plan.rolled:  # the empty active segment at the log end stays
                plan.deletions.pop()
                chosen -= 1
        remaining = remaining[chosen:]

    def by_start(i: int, upper: int) -> str | None:
        nxt = remaining[i + 1].base_offset if i + 1 < len(remaining) else None
        if nxt is not None and nxt <= start:
            return f"the next segment starts at {nxt}, at or below the log start offset {start}"
        return None

    take("log_start_offset", by_start)
    if config.delete and config.retention_bytes >= 0:
        diff = sum(s.size_bytes for s in remaining) - config.retention_bytes

        def by_size(i: int, upper: int) -> str | None:
            nonlocal diff
            size = remaining[i].size_bytes
            if diff >= 0 and diff - size >= 0:
                diff -= size
                return f"the log stays at or above retention.bytes={config.retention_bytes} without it"
            return None

        take("retention_bytes", by_size)
    if config.delete and config.retention_ms >= 0:

        def by_time(i: int, upper: int) -> str | None:
            age = now_ms - stamp(i)
            if age > config.retention_ms:
                return f"largest timestamp is {_fmt_ms(age)} old, retention.ms={config.retention_ms}"
            return None

        take("retention_ms", by_time)
    kept = [s for s in segs if s.base_offset not in {d.base_offset for d in plan.deletions}]
    first_kept = kept[0].base_offset if kept else leo
    plan.log_start_after = max(start, first_kept)
    return plan


def _print(plans: list[RetentionPlan], dry_run: bool, json_output: bool) -> None:
    deleted = sum(len(p.deletions) for p in plans)
    size = sum(d.size for p in plans for d in p.deletions)
    if json_output:
        for p in plans:
            for obj in p.to_dicts():
                click.echo(json_dumps(obj))
        click.echo(
            json_dumps(
                {
                    "type": "summary",
                    "partitions": len(plans),
                    "segmentsDeleted": deleted,
                    "bytesDeleted": size,
                    "dryRun": dry_run,
                }
            )
        )
        return
    console = stdout_console()
    verb = "would be deleted" if dry_run else "deleted"
    for p in plans:
        label = escape(str(p.topic_partition))
        if not p.deletions:
            console.print(f"{label}: nothing to delete ({plural(p.segments_before, 'segment', 'segments')})")
            continue
        console.print(
            f"{label}: {len(p.deletions)} of {plural(p.segments_before, 'segment', 'segments')} {verb}, log start offset "
            f"{p.log_start_before} -> {p.log_start_after}"
            + (" (a new empty segment is rolled at the log end)" if p.rolled else "")
        )
        for d in p.deletions:
            console.print(
                f"  {d.base_offset:020d}.log  {d.size} bytes  offsets {d.base_offset}..{d.next_offset - 1}  "
                f"{escape(f'[{d.rule}]')} {escape(d.reason)}"
            )
    console.print(
        f"{'Dry run: ' if dry_run else ''}{plural(deleted, 'segment', 'segments')} ({size} bytes) {verb}."
    )


@click.command(
    "retention",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
    short_help="Apply retention now (or --dry-run: list what it would delete).",
)
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
@click.argument("topic", required=False)
@click.option(
    "--dry-run", is_flag=True, help="Only list which segments would be deleted and why (read-only)."
)
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines.")
def retention(path: Path, topic: str | None, dry_run: bool, json_output: bool) -> None:
    """Apply retention now: delete the segments that retention.ms,
    retention.bytes or the log start offset make obsolete.

    A broker does this every 5 minutes; kafkalog's LogManager too while it
    runs. Segments holding offsets past the high watermark are never
    deleted. With --dry-run nothing changes and no lock is taken; without
    it the data directory's lock is needed (exit 75 while a producer runs).

    \b
    Examples:
      kafkalog retention data --dry-run
      kafkalog retention data orders
      kafkalog topics data --alter orders --config retention.ms=3600000
      kafkalog retention data orders
    """
    target = resolve_target(path, topic=topic)
    now = int(time.time() * 1000)
    plans = [
        plan_retention(tp, p, partition_config(target.data_dir, tp.topic), now) for tp, p in target.partitions
    ]
    if dry_run:
        _print(plans, True, json_output)
        click.get_current_context().exit(EXIT_OK)
    if target.data_dir is None:
        done = [_apply_standalone(plans[0])]
    else:
        done = _apply_managed(target.data_dir, plans, spinner=not json_output)
    _print(done, False, json_output)
    click.get_current_context().exit(EXIT_OK)


def _result(plan: RetentionPlan, changes: DirChanges, start_before: int, start_after: int) -> RetentionPlan:
    """What was deleted (from the directory's before/after), with the rule the plan gave each segment."""
    reasons = {d.base_offset: d for d in plan.deletions}
    result = RetentionPlan(plan.topic_partition, plan.path, plan.segments_before, start_before, start_after)
    result.rolled = bool(changes.created)
    for base, size in changes.deleted:
        planned = reasons.get(base)
        result.deletions.append(
            PlannedDeletion(
                base,
                planned.next_offset if planned else base,
                size,
                planned.largest_timestamp if planned else -1,
                planned.rule if planned else "retention",
                planned.reason if planned else "deleted by the log's retention",
            )
        )
    return result


def _apply_managed(data_dir: Path, plans: list[RetentionPlan], *, spinner: bool) -> list[RetentionPlan]:
    """Retention through a :class:`LogManager`; with ``spinner`` (on a terminal), a bar of the ``.log`` bytes
    its load is done with (the loader's ``load_progress``), then a spinner while the segments go."""
    done: list[RetentionPlan] = []
    with ExitStack() as stack:
        with bytes_bar(
            "loading", data_dir_log_bytes(data_dir) if spinner else 0, enabled=spinner
        ) as on_bytes:
            mgr = stack.enter_context(open_manager(data_dir, load_progress=on_bytes))
        stack.enter_context(status(f"applying retention in {data_dir} ...", enabled=spinner))
        logs = mgr.all_logs()
        for plan in plans:
            log = logs.get(plan.topic_partition)
            if log is None:
                continue
            before, start_before = snapshot_dir(plan.path), log.log_start_offset
            log.delete_old_segments()
            done.append(
                _result(plan, diff_dirs(before, snapshot_dir(plan.path)), start_before, log.log_start_offset)
            )
    return done


def _apply_standalone(plan: RetentionPlan) -> RetentionPlan:
    """A partition directory outside a data directory: its own log, high watermark at its end."""
    before = snapshot_dir(plan.path)
    with Log.open(plan.path, scheduler=ImmediateScheduler()) as log:
        start_before = log.log_start_offset
        log.update_high_watermark(log.log_end_offset)
        log.delete_old_segments()
        start_after = log.log_start_offset
    return _result(plan, diff_dirs(before, snapshot_dir(plan.path)), start_before, start_after)
