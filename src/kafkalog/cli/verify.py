"""``kafkalog verify DIR|PARTITION_DIR``: check every file against Kafka's invariants, read-only.

The checks are :mod:`kafkalog.cli.verifier`'s. The report goes to stdout: one line per partition (``ok`` or its
faults and warnings), then a summary line; ``--json`` writes one object per line instead:
``{"type":"fault"|"warning","partition","file","message"}``, ``{"type":"partition","partition","path",
"segments","batches","bytes","logEndOffset","faults","warnings"}`` per partition (``partition`` null for the
data directory's own files) and ``{"type":"summary","partitions","segments","batches","bytes","faults",
"warnings"}`` last. Exit 0 without faults (warnings allowed), 1 with any fault, 66 for a bad path.
"""

from __future__ import annotations

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
    progress,
    stdout_console,
)
from kafkalog.cli.paths import resolve_target
from kafkalog.cli.remote import (
    is_url,
    key_ring_option,
    open_remote,
    open_tiered,
    storage_option,
    verify_remote,
)
from kafkalog.cli.verifier import PartitionReport, VerifyReport, log_bytes, verify_target

__all__ = ["print_report_json", "print_report_text", "verify"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _label(part: PartitionReport) -> str:
    return "(data directory)" if part.topic_partition is None else str(part.topic_partition)


def print_report_text(report: VerifyReport, warnings: bool) -> None:
    console = stdout_console()
    for part in report.parts:
        label = escape(_label(part))
        if part.topic_partition is not None:
            detail = (
                f"{part.segments} segments, {part.batches} batches, {_size(part.bytes)}, "
                f"log end offset {part.log_end_offset if part.log_end_offset is not None else '-'}"
            )
        else:
            detail = "checkpoints and metadata"
        if not part.faults and not (warnings and part.warnings):
            suffix = f", {part.warnings} warnings" if part.warnings else ""
            console.print(f"{label}: [green]ok[/] ({detail}{suffix})")
            continue
        console.print(f"{label}: [red]{part.faults} faults[/], {part.warnings} warnings ({detail})")
        for finding in part.findings:
            if finding.level == "warning" and not warnings:
                continue
            tag = "[bold red]FAULT[/]  " if finding.level == "fault" else "[yellow]warning[/]"
            console.print(f"  {tag} {escape(finding.file)}: {escape(finding.message)}")
    parts = [p for p in report.parts if p.topic_partition is not None]
    total = sum(p.bytes for p in parts)
    verdict = "[green]OK[/]" if not report.faults else f"[bold red]{report.faults} faults[/]"
    console.print(
        f"Result: {verdict}, {report.warnings} warnings in {len(parts)} partitions "
        f"({sum(p.segments for p in parts)} segments, {sum(p.batches for p in parts)} batches, "
        f"{_size(total)} checked)"
    )


def print_report_json(report: VerifyReport) -> None:
    parts = [p for p in report.parts if p.topic_partition is not None]
    for part in report.parts:
        name = None if part.topic_partition is None else str(part.topic_partition)
        for finding in part.findings:
            click.echo(json_dumps(finding.to_dict(name)))
        click.echo(
            json_dumps(
                {
                    "type": "partition",
                    "partition": name,
                    "path": str(part.path),
                    "segments": part.segments,
                    "batches": part.batches,
                    "bytes": part.bytes,
                    "logEndOffset": part.log_end_offset,
                    "faults": part.faults,
                    "warnings": part.warnings,
                }
            )
        )
    click.echo(
        json_dumps(
            {
                "type": "summary",
                "partitions": len(parts),
                "segments": sum(p.segments for p in parts),
                "batches": sum(p.batches for p in parts),
                "bytes": sum(p.bytes for p in parts),
                "faults": report.faults,
                "warnings": report.warnings,
            }
        )
    )


@click.command(
    "verify",
    cls=KafkalogCommand,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
)
@click.argument("location", metavar="DIR|PARTITION_DIR|URL")
@click.option("--topic", default=None, metavar="TOPIC", help="Check only this topic's partitions.")
@click.option("--json", "json_output", is_flag=True, help="Write JSON Lines (faults, warnings, summaries).")
@click.option("-q", "--quiet", is_flag=True, help="Do not list warnings (they never fail the check).")
@storage_option
@key_ring_option
def verify(
    location: str,
    topic: str | None,
    json_output: bool,
    quiet: bool,
    storage_options: tuple[str, ...],
    key_ring: str | None,
) -> None:
    """Check a data directory or one partition directory for damage.

    Reads every file and checks it against Kafka's on-disk rules: the
    CRC of every batch, offsets increasing across batches and segments,
    every .index entry pointing at a batch that holds its offset, the
    .timeindex monotonic and matching the batches' timestamps, the
    .txnindex matching the transaction markers, producer snapshots and
    checkpoint files readable, and no segment missing or emptied in the
    middle of a log that is not compacted. Nothing is modified and no lock
    is taken, so it is safe next to a running producer (its preallocated
    files and segments deleted meanwhile are not faults). A progress bar
    shows on a terminal for big directories.

    Faults (exit 1) break an invariant; warnings are states Kafka repairs
    by itself on the next open (leftover .deleted/.cleaned/.swap files,
    an untrimmed index). "kafkalog recover" repairs faults.

    A URL (s3://bucket/prefix, gs://, az://) checks a copy of a data
    directory in object storage (--storage-option KEY=VALUE, Hadoop's
    names): every batch's framing and CRC, offsets increasing, segments
    missing or unreadable (faults), holes between segments and a torn last
    segment (warnings: a copy taken while a broker appended).

    \b
    Examples:
      kafkalog verify data
      kafkalog verify data/orders-0 --json
      kafkalog verify data --topic orders -q
      kafkalog verify s3://bucket/backup \\
          --storage-option fs.s3a.endpoint=http://127.0.0.1:8333
    """
    if is_url(location):
        report = verify_remote(open_remote(location, storage_options, topic=topic, key_ring=key_ring), topic)
        if json_output:
            print_report_json(report)
        else:
            print_report_text(report, warnings=not quiet)
        click.get_current_context().exit(EXIT_FAULT if report.faults else EXIT_OK)
    target = resolve_target(Path(location), topic=topic)
    tiered = open_tiered(target.data_dir if target.is_data_dir else None, storage_options, key_ring)
    with progress("verifying", log_bytes(target), enabled=not json_output) as bar:
        tick = None
        if bar is not None:
            task = bar.task_ids[0]

            def tick(n: int) -> None:
                bar.advance(task, n)

        report = verify_target(target, tick)
    if tiered is not None:  # each partition again as one history: its archived and local segments together
        for part in verify_remote(tiered, topic).parts:
            part.path = f"{part.path} (with its archive)"
            report.parts.append(part)
    if json_output:
        print_report_json(report)
    else:
        print_report_text(report, warnings=not quiet)
    click.get_current_context().exit(EXIT_FAULT if report.faults else EXIT_OK)
