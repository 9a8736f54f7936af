"""``kafkalog recover DIR|PARTITION_DIR``: run Kafka's log recovery now and report what it changed.

Recovery is the loader's (:mod:`kafkalog.log.loader`): every segment is scanned as after a crash, a torn or
corrupt tail is truncated at the last valid batch and the segments after it deleted, indexes are rebuilt,
producer state is replayed, leftover ``.cleaned``/``.swap``/``.deleted`` files are resolved.

* A **data directory** is opened with :class:`~kafkalog.manager.LogManager` (which takes its ``.lock``: exit
  75 while a producer or broker holds it) after its ``.kafka_cleanshutdown`` marker is removed, so nothing is
  trusted as cleanly shut down; by default its ``recovery-point-offset-checkpoint`` is removed too, so every
  segment is scanned (``--from-recovery-point`` scans only what a broker restart would). Closing the manager
  writes fresh checkpoints and the clean-shutdown marker.
* A **partition directory** is opened with :meth:`Log.open <kafkalog.log.Log.open>` from offset 0 without the
  clean-shutdown marker, under its data directory's ``.lock`` when it is in one (with the topic's config and
  log start offset from there); a standalone partition directory gets its own marker back when closed.

Before and after, the directory's files are compared (:func:`~kafkalog.cli.state.diff_dirs`); the report
lists bytes truncated, segments deleted or created, indexes whose entries changed, files removed, and the log
end offset before and after. ``--dry-run`` runs ``verify`` instead (read-only, no lock): it lists the faults
that recovery would repair and exits 1 if there are any.

``--json``: ``{"type":"partition","partition","path","logEndOffsetBefore","logEndOffsetAfter","bytesTruncated",
"truncated":[{"baseOffset","sizeBefore","sizeAfter"}],"segmentsDeleted":[{"baseOffset","sizeBytes"}],
"segmentsCreated":[...],"indexesRebuilt":[...],"filesRemoved":[...],"error"}`` per partition, then
``{"type":"summary","partitions","changed","bytesTruncated","segmentsDeleted","indexesRebuilt","failed"}``.
Exit codes: 0 recovered (whether or not something had to be repaired), 1 a partition could not be loaded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from kafkalog.cli.common import (
    CONTEXT_SETTINGS,
    EXIT_CODES_HELP,
    EXIT_FAULT,
    EXIT_OK,
    KafkalogCommand,
    json_dumps,
    status,
    stdout_console,
)
from kafkalog.cli.paths import Target, resolve_target
from kafkalog.cli.state import DirChanges, diff_dirs, open_manager, partition_config, snapshot_dir
from kafkalog.cli.verifier import verify_target
from kafkalog.cli.verify import print_report_json as print_verify_json
from kafkalog.cli.verify import print_report_text as print_verify_text
from kafkalog.datadir import RECOVERY_POINT_CHECKPOINT, DirLock, read_topics
from kafkalog.errors import KafkaError
from kafkalog.log.checkpoint import CLEAN_SHUTDOWN_FILE, offset_checkpoint, topic_id_from_string
from kafkalog.log.loader import check_partition_dir
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.log.readonly import ReadOnlyLog

__all__ = ["RecoveryResult", "recover", "recover_target"]


@dataclass
class RecoveryResult:
    """What recovery did to one partition directory."""

    topic_partition: TopicPartition
    path: Path
    changes: DirChanges
    end_before: int | None
    end_after: int | None
    error: str | None = None

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
            "indexesRebuilt": c.indexes_rebuilt,
            "filesRemoved": c.files_removed,
            "error": self.error,
        }


def _end_offset(path: Path) -> int | None:
    try:
        return ReadOnlyLog.open(path).log_end_offset
    except (KafkaError, OSError):
        return None


def _recover_partition_dir(target: Target) -> list[RecoveryResult]:
    (tp, path), data_dir = target.partitions[0], target.data_dir
    lock = DirLock(data_dir).acquire() if data_dir is not None else None
    try:
        before, end_before = snapshot_dir(path), _end_offset(path)
        config = partition_config(data_dir, tp.topic)
        log_start, topic_id = 0, None
        if data_dir is not None:
            with contextlib.suppress(KafkaError, OSError):
                log_start = dict(offset_checkpoint(data_dir / "log-start-offset-checkpoint").read()).get(
                    tp, 0
                )
            doc = read_topics(data_dir)
            meta = None if doc is None else doc.topics.get(tp.topic)
            if meta is not None and meta.topic_id is not None:
                topic_id = topic_id_from_string(meta.topic_id)
        error, end_after = None, None
        try:
            check_partition_dir(path)  # a symlinked directory or file is refused before the marker goes
            (path / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
            with status(f"recovering {path} ..."):
                log = Log.open(
                    path,
                    config,
                    log_start_offset=log_start,
                    recovery_point=0,
                    last_shutdown_clean=False,
                    topic_id=topic_id,
                )
            end_after = log.log_end_offset
            log.owns_clean_shutdown_marker = data_dir is None
            log.close()
        except (KafkaError, OSError) as exc:
            error = str(exc) or type(exc).__name__
        return [RecoveryResult(tp, path, diff_dirs(before, snapshot_dir(path)), end_before, end_after, error)]
    finally:
        if lock is not None:
            lock.release()


def _recover_data_dir(target: Target, from_recovery_point: bool) -> list[RecoveryResult]:
    data_dir = target.path
    lock = DirLock(data_dir).acquire()  # fail (75) before touching anything if someone holds the dir
    try:
        befores = {tp: (path, snapshot_dir(path), _end_offset(path)) for tp, path in target.partitions}
        (data_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        if not from_recovery_point:
            (data_dir / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    finally:
        lock.release()
    with status(f"recovering {data_dir} ..."), open_manager(data_dir) as mgr:
        failures = {f.path.resolve(): f.error for f in mgr.load_failures}
        ends = {tp: log.log_end_offset for tp, log in mgr.all_logs().items()}
    results = []
    for tp, (path, before, end_before) in befores.items():
        err: BaseException | str | None = failures.get(path.resolve())
        if err is None and tp not in ends:
            err = "not loaded by the LogManager (see the warning above)"
        results.append(
            RecoveryResult(
                tp,
                path,
                diff_dirs(before, snapshot_dir(path)),
                end_before,
                ends.get(tp),
                None if err is None else (str(err) or type(err).__name__),
            )
        )
    return results


def recover_target(target: Target, *, from_recovery_point: bool = False) -> list[RecoveryResult]:
    """Recovers a resolved path (see the module doc) and returns what changed per partition."""
    if target.is_data_dir:
        return _recover_data_dir(target, from_recovery_point)
    return _recover_partition_dir(target)


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
    if c.indexes_rebuilt:
        lines.append(f"rebuilt {len(c.indexes_rebuilt)} index files: {', '.join(c.indexes_rebuilt)}")
    if c.files_removed:
        lines.append(f"removed {', '.join(c.files_removed)}")
    return lines


def _print_results(results: list[RecoveryResult], json_output: bool) -> None:
    if json_output:
        for r in results:
            click.echo(json_dumps(r.to_dict()))
        click.echo(
            json_dumps(
                {
                    "type": "summary",
                    "partitions": len(results),
                    "changed": sum(1 for r in results if r.changes.changed),
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
        if not r.changes.changed:
            console.print(f"{label}: [green]nothing to repair[/] ({ends})")
            continue
        console.print(f"{label}: [yellow]repaired[/] ({ends}, {r.changes.bytes_truncated} bytes truncated)")
        for line in _describe(r.changes):
            console.print(f"  {escape(line)}")
    changed = sum(1 for r in results if r.changes.changed)
    failed = sum(1 for r in results if r.error)
    console.print(
        f"Recovered {len(results) - failed} of {len(results)} partitions: {changed} repaired, "
        f"{sum(r.changes.bytes_truncated for r in results)} bytes truncated, "
        f"{sum(len(r.changes.deleted) for r in results)} segments deleted"
    )


@click.command("recover", cls=KafkalogCommand, context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP)
@click.argument("path", metavar="DIR|PARTITION_DIR", type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True, help="Only verify (read-only) and list what recovery would repair.")
@click.option(
    "--from-recovery-point",
    is_flag=True,
    help="Data directory: scan only past the checkpointed recovery point, as a broker restart does "
    "(default: every segment).",
)
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines.")
def recover(path: Path, dry_run: bool, from_recovery_point: bool, json_output: bool) -> None:
    """Run crash recovery on a data directory or one partition now.

    Scans the segments as a broker does after a crash: truncates a torn
    or corrupt tail at the last valid batch (deleting the segments after
    it), rebuilds the indexes, replays producer state and finishes
    interrupted deletes, cleanings and swaps. Then reports what changed:
    bytes truncated, segments deleted, indexes rebuilt, and the log end
    offset before and after. Needs the directory's lock: stop producers
    first (exit 75 while another process holds it).

    \b
    Examples:
      kafkalog recover data --dry-run
      kafkalog recover data
      kafkalog recover data/orders-0 --json
    """
    target = resolve_target(path)
    if dry_run:
        report = verify_target(target)
        if json_output:
            print_verify_json(report)
        else:
            print_verify_text(report, warnings=True)
            if report.faults:
                stdout_console().print('Dry run: "kafkalog recover" would repair the faults above.')
        click.get_current_context().exit(EXIT_FAULT if report.faults else EXIT_OK)
    results = recover_target(target, from_recovery_point=from_recovery_point)
    _print_results(results, json_output)
    click.get_current_context().exit(EXIT_FAULT if any(r.error for r in results) else EXIT_OK)
