"""``kafkalog recover DIR|PARTITION_DIR``: repair a data directory or one partition, losing only the damage.

Two steps (the rule is :mod:`kafkalog.cli.repair`'s, documented in docs/operations.md §4.4):

1. **Plan**, read-only, under the directory's ``.lock`` (exit 75 while a producer or broker holds it):
   :func:`plan_target` walks every batch and lists the damaged byte ranges to remove, the segments truncated,
   rewritten, deleted or moved (base offset lowered so no hole is left between segments), and the small files
   rewritten. If any partition cannot be repaired (``error``), the
   run stops here and changes nothing (exit 1). ``--dry-run`` prints this plan (no lock) and exits 1 if there
   is anything to repair.
2. **Act**: :func:`~kafkalog.cli.repair.apply_plan` per partition, then the loader's recovery
   (:mod:`kafkalog.log.loader`) rebuilds indexes and producer state and resolves leftover files.

   * A **data directory** is opened with :class:`~kafkalog.manager.LogManager` after its
     ``.kafka_cleanshutdown`` marker is removed, so nothing is trusted as cleanly shut down; by default its
     ``recovery-point-offset-checkpoint`` is removed too, so every segment is scanned
     (``--from-recovery-point`` scans only what a broker restart would). Closing the manager writes fresh
     checkpoints and the clean-shutdown marker. If a partition still fails to load, the marker and the
     offset checkpoints are put back as they were.
   * A **partition directory** is opened with :meth:`Log.open <kafkalog.log.Log.open>` from offset 0 without
     the clean-shutdown marker, under its data directory's ``.lock`` when it is in one (with the topic's
     config and log start offset from there); a standalone partition directory gets its own marker back.

On a terminal (stderr) and without ``--json``, a transient progress bar counts the ``.log`` bytes the plan has
walked ("checking"), then another the ``.log`` bytes the load has recovered ("recovering": the loader's
``load_progress``, :mod:`kafkalog.log.loader`; segments it does not scan count once their partition is loaded).

Before and after, the directory's files are compared (:func:`~kafkalog.cli.state.diff_dirs`); the report
lists the plan, bytes truncated, segments deleted or created, indexes whose entries changed, files removed,
and the log end offset before and after.

``--json``: ``{"type":"partition","partition","path","logEndOffsetBefore","logEndOffsetAfter","bytesTruncated",
"truncated":[{"baseOffset","sizeBefore","sizeAfter"}],"segmentsDeleted":[{"baseOffset","sizeBytes"}],
"segmentsCreated":[...],"segmentsMoved":[{"baseOffset","newBaseOffset"}],"indexesRebuilt":[...],"filesRemoved":[...],
"plan":{...},"error"}`` per partition,
then ``{"type":"summary","partitions","changed","bytesTruncated","segmentsDeleted","indexesRebuilt","failed"}``;
with ``--dry-run`` one ``{"type":"plan","partition","path",...plan}`` per partition and a summary.
Exit codes: 0 recovered (whether or not something had to be repaired), 1 a partition could not be repaired
or loaded (or, with ``--dry-run``, there is something to repair).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from kafkalog._durable import atomic_write
from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_FAULT,
    EXIT_OK,
    KafkalogCommand,
    bytes_bar,
    json_dumps,
    progress,
    stdout_console,
)
from kafkalog.cli.paths import DATA_DIR_FILES, Target, resolve_target
from kafkalog.cli.repair import Mode, PartitionPlan, apply_plan, plan_partition
from kafkalog.cli.state import DirChanges, diff_dirs, open_manager, partition_config, snapshot_dir
from kafkalog.cli.verifier import data_dir_log_bytes, log_bytes
from kafkalog.datadir import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, DirLock, read_topics
from kafkalog.errors import KafkaError
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE, offset_checkpoint, topic_id_from_string
from kafkalog.log.config import LogConfig
from kafkalog.log.loader import LoadProgress
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.readonly.log import ReadOnlyLog

__all__ = ["RecoveryResult", "plan_target", "recover", "recover_target"]


@dataclass
class RecoveryResult:
    """What recovery did to one partition directory."""

    topic_partition: TopicPartition
    path: Path
    changes: DirChanges
    end_before: int | None
    end_after: int | None
    error: str | None = None
    plan: PartitionPlan | None = None

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` object."""
        c = self.changes
        return {
            "type": "partition",
            "partition": str(self.topic_partition),
            "path": str(self.path),
            "logEndOffsetBefore": self.end_before,
            "logEndOffsetAfter": self.end_after,
            "bytesTruncated": c.bytes_truncated,
            "truncated": [{"baseOffset": b, "sizeBefore": s0, "sizeAfter": s1} for b, s0, s1 in c.truncated],
            "segmentsDeleted": [{"baseOffset": b, "sizeBytes": s} for b, s in c.deleted],
            "segmentsCreated": c.created,
            "segmentsMoved": [{"baseOffset": a, "newBaseOffset": b} for a, b in c.moved],
            "indexesRebuilt": c.indexes_rebuilt,
            "filesRemoved": c.files_removed,
            "plan": None if self.plan is None else self.plan.to_dict(),
            "error": self.error,
        }


def _end_offset(path: Path) -> int | None:
    try:
        return ReadOnlyLog.open(path).log_end_offset
    except (KafkaError, OSError):
        return None


def _log_start_offsets(data_dir: Path | None) -> dict[TopicPartition, int]:
    if data_dir is None:
        return {}
    try:
        return dict(offset_checkpoint(data_dir / LOG_START_OFFSET_CHECKPOINT).read())
    except (KafkaError, OSError):
        return {}


def plan_target(
    target: Target, *, mode: Mode = "keep", on_bytes: Callable[[int], None] | None = None
) -> list[PartitionPlan]:
    """The repair plan of every partition of ``target`` (read-only; :mod:`kafkalog.cli.repair`); ``on_bytes``
    gets the size of each ``.log`` file walked."""
    starts = _log_start_offsets(target.data_dir)
    topics_error = None
    try:
        doc = read_topics(target.data_dir) if target.data_dir is not None else None
    except (KafkaError, OSError) as exc:
        doc = None
        topics_error = (
            f"{exc}: fix or move kafkalog-topics.json by hand (it holds the topics' configs and ids, which "
            "recover does not guess; the load would fail)"
        )
    plans = []
    for tp, path in target.partitions:
        # Exact record counts only for a topic known not to be compacted: a compacted batch holds fewer records
        # than offsets, and a topic without an entry (a Kafka data dir) may well be compacted.
        meta = None if doc is None else doc.topics.get(tp.topic)
        exact = meta is not None and not LogConfig.from_props(meta.config).compact
        plans.append(
            plan_partition(
                tp,
                path,
                data_dir=target.data_dir,
                exact_counts=exact,
                log_start_offset=starts.get(tp, 0),
                mode=mode,
                on_bytes=on_bytes,
            )
        )
    if topics_error is not None:
        for plan in plans:
            plan.segments, plan.epoch_fixes, plan.files, plan.error = [], [], [], topics_error
    return plans


def _checked_plans(target: Target, mode: Mode, show_progress: bool) -> list[PartitionPlan]:
    """:func:`plan_target` with a transient bar on stderr (bytes of ``.log`` walked; only on a terminal and
    with ``show_progress``), closed before the load's bar starts."""
    with progress("checking", log_bytes(target), enabled=show_progress) as bar:
        if bar is None:
            return plan_target(target, mode=mode)
        task = bar.task_ids[0]
        return plan_target(target, mode=mode, on_bytes=lambda n: bar.advance(task, n))


def _load_bar(target: Target, show_progress: bool) -> AbstractContextManager[LoadProgress | None]:
    """The ``load_progress`` for the load step: it advances a transient bar on stderr over the ``.log`` bytes
    there are now (after the plan was applied; for a data directory, all the partition directories the
    manager loads); None (nothing drawn) off a terminal or without ``show_progress``."""
    if not show_progress:
        return nullcontext(None)
    total = data_dir_log_bytes(target.path) if target.is_data_dir else log_bytes(target)
    return bytes_bar("recovering", total)


def _untouched(plans: list[PartitionPlan]) -> list[RecoveryResult]:
    """Results of a run stopped by the plan: every partition as it was, the failed ones with their error."""
    failed = [str(p.topic_partition) for p in plans if p.error is not None]
    out = []
    for p in plans:
        error = p.error or f"not repaired: nothing is changed while {', '.join(failed)} cannot be repaired"
        out.append(RecoveryResult(p.topic_partition, p.path, DirChanges(), None, None, error, p))
    return out


def _recover_partition_dir(target: Target, mode: Mode, show_progress: bool) -> list[RecoveryResult]:
    (tp, path), data_dir = target.partitions[0], target.data_dir
    lock = DirLock(data_dir).acquire() if data_dir is not None else None
    try:
        (plan,) = _checked_plans(target, mode, show_progress)
        if plan.error is not None:
            return _untouched([plan])
        before, end_before = snapshot_dir(path), _end_offset(path)
        config = partition_config(data_dir, tp.topic)
        topic_id = None
        if data_dir is not None:
            doc = read_topics(data_dir)
            meta = None if doc is None else doc.topics.get(tp.topic)
            if meta is not None and meta.topic_id is not None:
                topic_id = topic_id_from_string(meta.topic_id)
        marker = path / CLEAN_SHUTDOWN_FILE
        saved_marker = marker.read_bytes() if marker.exists() else None
        error, end_after = None, None
        try:
            apply_plan(plan)
            log_start = _log_start_offsets(data_dir).get(tp, 0)  # after the plan (which may drop the entry)
            marker.unlink(missing_ok=True)
            with _load_bar(target, show_progress) as on_bytes:
                log = Log.open(
                    path,
                    config,
                    log_start_offset=log_start,
                    recovery_point=0,
                    last_shutdown_clean=False,
                    topic_id=topic_id,
                    load_progress=on_bytes,
                )
            end_after = log.log_end_offset
            log.owns_clean_shutdown_marker = data_dir is None
            log.close()
        except (KafkaError, OSError) as exc:
            error = str(exc) or type(exc).__name__
            if saved_marker is not None and not marker.exists():
                atomic_write(marker, saved_marker)
        changes = diff_dirs(before, snapshot_dir(path), plan.moves)
        return [RecoveryResult(tp, path, changes, end_before, end_after, error, plan)]
    finally:
        if lock is not None:
            lock.release()


#: The data directory's files a failed run puts back as they were.
_DIR_STATE_FILES = (CLEAN_SHUTDOWN_FILE, *(n for n in DATA_DIR_FILES if n.endswith("-checkpoint")))


def _recover_data_dir(
    target: Target, from_recovery_point: bool, mode: Mode, show_progress: bool
) -> list[RecoveryResult]:
    data_dir = target.path
    lock = DirLock(data_dir).acquire()  # fail (75) before touching anything if someone holds the dir
    try:
        plans = _checked_plans(target, mode, show_progress)
        if any(p.error is not None for p in plans):
            return _untouched(plans)
        saved = {n: (data_dir / n).read_bytes() for n in _DIR_STATE_FILES if (data_dir / n).is_file()}
        befores = {tp: (path, snapshot_dir(path), _end_offset(path)) for tp, path in target.partitions}
        for plan in plans:
            apply_plan(plan)
        (data_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        if not from_recovery_point:
            (data_dir / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    finally:
        lock.release()
    try:
        with (
            _load_bar(target, show_progress) as on_bytes,
            open_manager(data_dir, load_progress=on_bytes) as mgr,
        ):
            failures = {f.path.resolve(): f.error for f in mgr.load_failures}
            ends = {tp: log.log_end_offset for tp, log in mgr.all_logs().items()}
    except BaseException:
        _restore(data_dir, saved)
        raise
    by_tp = {p.topic_partition: p for p in plans}
    results = []
    for tp, (path, before, end_before) in befores.items():
        err: BaseException | str | None = failures.get(path.resolve())
        if err is None and tp not in ends:
            err = "not loaded by the LogManager (see the warning above)"
        results.append(
            RecoveryResult(
                tp,
                path,
                diff_dirs(before, snapshot_dir(path), by_tp[tp].moves if tp in by_tp else None),
                end_before,
                ends.get(tp),
                None if err is None else (str(err) or type(err).__name__),
                by_tp.get(tp),
            )
        )
    if any(r.error for r in results):
        _restore(data_dir, saved)
    return results


def _restore(data_dir: Path, saved: dict[str, bytes]) -> None:
    """Puts the marker and the offset checkpoints back as they were before a run that failed."""
    lock = DirLock(data_dir).acquire()
    try:
        for name in _DIR_STATE_FILES:
            path = data_dir / name
            if name in saved:
                atomic_write(path, saved[name])
            else:
                path.unlink(missing_ok=True)
    finally:
        lock.release()


def recover_target(
    target: Target, *, from_recovery_point: bool = False, mode: Mode = "keep", show_progress: bool = False
) -> list[RecoveryResult]:
    """Recovers a resolved path (see the module doc) and returns what changed per partition; ``show_progress``
    draws a bar on stderr (when it is a terminal) while the plan walks the segments, then another while the
    directory loads (``.log`` bytes recovered)."""
    if target.is_data_dir:
        return _recover_data_dir(target, from_recovery_point, mode, show_progress)
    return _recover_partition_dir(target, mode, show_progress)


def _describe(c: DirChanges) -> list[str]:
    lines = []
    for base, size_before, size_after in c.truncated:
        lines.append(
            f"truncated {base:020d}.log from {size_before} to {size_after} bytes ({size_before - size_after} removed)"
        )
    for base, size in c.deleted:
        lines.append(f"deleted segment {base:020d}.log ({size} bytes)")
    for base in c.created:
        lines.append(f"created segment {base:020d}.log")
    for base, new_base in c.moved:
        lines.append(f"moved segment {base:020d}.log to {new_base:020d}.log")
    if c.indexes_rebuilt:
        lines.append(f"rebuilt {len(c.indexes_rebuilt)} index files: {', '.join(c.indexes_rebuilt)}")
    if c.files_removed:
        lines.append(f"removed {', '.join(c.files_removed)}")
    return lines


def _changed(r: RecoveryResult) -> bool:
    return r.changes.changed or (r.plan is not None and not r.plan.empty and r.error is None)


def _print_results(results: list[RecoveryResult], json_output: bool) -> None:
    if json_output:
        for r in results:
            click.echo(json_dumps(r.to_dict()))
        click.echo(
            json_dumps(
                {
                    "type": "summary",
                    "partitions": len(results),
                    "changed": sum(1 for r in results if _changed(r)),
                    "bytesTruncated": sum(r.changes.bytes_truncated for r in results),
                    "segmentsDeleted": sum(len(r.changes.deleted) for r in results),
                    "indexesRebuilt": sum(len(r.changes.indexes_rebuilt) for r in results),
                    "failed": sum(1 for r in results if r.error),
                }
            )
        )
        return
    console = stdout_console()
    for r in results:
        label = escape(str(r.topic_partition))
        if r.error:
            console.print(f"{label}: [bold red]recovery failed[/]: {escape(r.error)}")
            continue
        ends = f"log end offset {r.end_before if r.end_before is not None else '-'} -> {r.end_after}"
        if not _changed(r):
            console.print(f"{label}: [green]nothing to repair[/] ({ends})")
            continue
        console.print(f"{label}: [yellow]repaired[/] ({ends}, {r.changes.bytes_truncated} bytes truncated)")
        for line in [*(r.plan.describe() if r.plan is not None else []), *_describe(r.changes)]:
            console.print(f"  {escape(line)}")
    changed = sum(1 for r in results if _changed(r))
    failed = sum(1 for r in results if r.error)
    console.print(
        f"Recovered {len(results) - failed} of {len(results)} partitions: {changed} repaired, "
        f"{sum(r.changes.bytes_truncated for r in results)} bytes truncated, "
        f"{sum(len(r.changes.deleted) for r in results)} segments deleted"
    )
    if failed and any(r.plan is not None and r.plan.error for r in results):
        console.print("Nothing was changed: a partition cannot be repaired (see above).")


def _print_plans(plans: list[PartitionPlan], json_output: bool) -> None:
    if json_output:
        for p in plans:
            click.echo(
                json_dumps(
                    {"type": "plan", "partition": str(p.topic_partition), "path": str(p.path), **p.to_dict()}
                )
            )
        click.echo(
            json_dumps(
                {
                    "type": "summary",
                    "partitions": len(plans),
                    "toRepair": sum(1 for p in plans if not p.empty),
                    "bytesRemoved": sum(p.bytes_removed for p in plans),
                    "segmentsDeleted": sum(1 for p in plans for s in p.segments if s.action == "delete"),
                    "failed": sum(1 for p in plans if p.error),
                }
            )
        )
        return
    console = stdout_console()
    for p in plans:
        label = escape(str(p.topic_partition))
        if p.error:
            console.print(f"{label}: [bold red]cannot be repaired[/]: {escape(p.error)}")
        elif p.empty:
            console.print(f"{label}: [green]no damage[/] (indexes and producer state are rebuilt)")
        else:
            console.print(f"{label}: [yellow]would repair[/] ({p.bytes_removed} bytes removed):")
            for line in p.describe():
                console.print(f"  {escape(line)}")
    if any(p.error for p in plans):
        console.print('Dry run: "kafkalog recover" would change nothing (a partition cannot be repaired).')
    elif any(not p.empty for p in plans):
        console.print('Dry run: "kafkalog recover" would do exactly the above (and rebuild every index).')


@click.command("recover", cls=KafkalogCommand, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP)
@click.argument("path", metavar="DIR|PARTITION_DIR", type=click.Path(path_type=Path))
@click.option(
    "--dry-run",
    is_flag=True,
    help="Only print the plan: every byte range, segment and file the run would change.",
)
@click.option(
    "--from-recovery-point",
    is_flag=True,
    help="Data directory: the load after the repair scans only past the checkpointed recovery point, as a "
    "broker restart does (default: every segment).",
)
@click.option(
    "--truncate-after-damage",
    is_flag=True,
    help="Kafka's rule for unflushed data: truncate at the first damaged batch and delete every later segment "
    "(default: remove only the damaged bytes and keep everything else).",
)
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines.")
def recover(
    path: Path, dry_run: bool, from_recovery_point: bool, truncate_after_damage: bool, json_output: bool
) -> None:
    """Repair a data directory or one partition: lose only the damage.

    Plans first (read-only): walks every batch with the checks of crash
    recovery; each damaged byte range is removed and everything around it
    kept (a segment is truncated, or rewritten without the damage; the
    next segment's base offset is moved down where a hole would be left
    between segments); unparseable leader-epoch-checkpoint and
    partition.metadata files are rebuilt. If any partition cannot be
    repaired, nothing changes (exit 1). Then does exactly the plan, loads the directory as after a crash
    (indexes rebuilt, producer state replayed, leftovers resolved) and
    reports what changed. --dry-run prints the plan only. Needs the
    directory's lock: stop producers first (exit 75 otherwise). On a
    terminal, a progress bar follows the walk and another the load.

    \b
    Examples:
      kafkalog recover data --dry-run
      kafkalog recover data
      kafkalog recover data/orders-0 --json
    """
    target = resolve_target(path)
    mode: Mode = "truncate" if truncate_after_damage else "keep"
    if dry_run:
        plans = _checked_plans(target, mode, not json_output)
        _print_plans(plans, json_output)
        todo = any(p.error or not p.empty for p in plans)
        click.get_current_context().exit(EXIT_FAULT if todo else EXIT_OK)
    results = recover_target(
        target, from_recovery_point=from_recovery_point, mode=mode, show_progress=not json_output
    )
    _print_results(results, json_output)
    click.get_current_context().exit(EXIT_FAULT if any(r.error for r in results) else EXIT_OK)
