"""What ``info``, ``verify`` and ``consume`` do with a URL (``s3://bucket/prefix``, ``gs://``, ``az://``, ...)
instead of a local directory: the data directory in object storage is opened with the
``--storage-option KEY=VALUE`` options (Hadoop's names, as in Spark: ``fs.s3a.endpoint``,
``fs.s3a.access.key``, ...; then the standard ``AWS_*`` environment), read through the same reader as a local
one (:class:`~kafkalog.readonly.log.ReadOnlyDataDir`), and reported in the same shapes.

``--key-ring FILE`` decrypts an encrypted Aiven archive: FILE holds the key ring in the format every reader
takes (Spark's ``keyRing``, the Python API's ``key_ring``): a JSON object ``{"<kekId>": "<PEM text, or the
path of a PEM file>"}`` (:func:`kafkalog.tiered.load_key_ring_file`).

Invariants owned here: a storage option's value never appears in output or an error (a malformed item is
named by its key only), nor does a private key (a key-ring error names the file and the key id); nothing is
written to the store; a URL whose prefix holds nothing exits 66 (``EX_NOINPUT``), like a missing directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import numpy as np

from kafkalog.cli.common import EXIT_NOINPUT, EXIT_USAGE, fail
from kafkalog.cli.verifier import PartitionReport, VerifyReport
from kafkalog.errors import CorruptRecordError, KafkaError, RemoteResourceNotFoundError, RemoteStorageError
from kafkalog.log.checkpoint import CheckpointError, leader_epoch_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.log.producer_state import ProducerStateEntry, parse_snapshot
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog, is_url, recorded_archive_url
from kafkalog.readonly.remote import PlannedArchive
from kafkalog.records import kernels as K
from kafkalog.tiered import ArchivePartitionSource, KeyRing, load_key_ring_file

__all__ = [
    "is_url",
    "key_ring_option",
    "load_key_ring",
    "open_remote",
    "open_tiered",
    "parse_storage_options",
    "refuse_for_local",
    "remote_partition_info",
    "storage_option",
    "verify_remote",
]

_F = TypeVar("_F", bound=Callable[..., Any])


def storage_option(f: _F) -> _F:
    """The ``--storage-option KEY=VALUE`` option (repeatable) of the commands that take a URL."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="For a URL (s3://, gs://, az://): an object-storage option under Hadoop's name, e.g. "
        "fs.s3a.endpoint=http://host:8333, fs.s3a.access.key=..., fs.s3a.path.style.access=true "
        "(repeatable; the AWS_* environment is used too).",
    )(f)


def key_ring_option(f: _F) -> _F:
    """The ``--key-ring FILE`` option of the commands that take a URL."""
    return click.option(
        "--key-ring",
        "key_ring",
        metavar="FILE",
        default=None,
        help='For an encrypted tiered-storage archive: a JSON file {"kekId": "PEM text or path to a PEM '
        "file\"} holding the RSA private keys (the format of Spark's keyRing option).",
    )(f)


def load_key_ring(path: str | None) -> KeyRing | None:
    """The key ring of ``--key-ring FILE`` (None without one); an unusable file exits 64 with an error naming
    the file and, for one key, its id, never a key."""
    if path is None:
        return None
    try:
        return load_key_ring_file(path)
    except RemoteStorageError as exc:
        fail(f"--key-ring: {exc}", EXIT_USAGE)


def refuse_for_local(storage_options: Sequence[str], key_ring: str | None) -> None:
    """A usage error when ``--storage-option`` or ``--key-ring`` is given with a local path that records no
    tiered-storage archive."""
    if storage_options:
        raise click.UsageError(
            "--storage-option is for a URL (s3://, gs://, az://) or a data dir with tiered storage, not a local path"
        )
    if key_ring is not None:
        raise click.UsageError(
            "--key-ring is for a URL of an encrypted archive or a data dir with tiered storage, not a local path"
        )


def parse_storage_options(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict; a malformed one is a usage error that never echoes a value."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.UsageError(
                f"--storage-option expects KEY=VALUE (got an item without '=' starting {key[:12]!r}...)"
                if not sep
                else "--storage-option expects KEY=VALUE (the key is empty)"
            )
        out[key] = value
    return out


def open_remote(
    url: str, items: Sequence[str], *, topic: str | None = None, key_ring: str | None = None
) -> ReadOnlyDataDir:
    """The data directory at ``url``, checked to exist (exit 66 if nothing is stored under it); ``key_ring``:
    the ``--key-ring`` file."""
    options = parse_storage_options(items)
    ring = load_key_ring(key_ring)
    try:
        data_dir = ReadOnlyDataDir(url, options, key_ring=ring)
        names = data_dir.partition_names()
    except RemoteResourceNotFoundError as exc:
        fail(str(exc), EXIT_NOINPUT)
    if topic is not None and not any(tp.topic == topic for tp in names):
        fail(f"topic {topic!r} has no partition in {url}", EXIT_NOINPUT)
    return data_dir


def open_tiered(
    path: Path | None, items: Sequence[str], key_ring: str | None = None
) -> ReadOnlyDataDir | None:
    """The local data dir ``path`` read with the tiered-storage archive it records
    (``kafkalog-tiered-storage.json``), the ``--storage-option`` items and the ``--key-ring`` file; None when it
    records none (then either option is a usage error: they are for a URL or a tiered data dir)."""
    url = None if path is None else recorded_archive_url(path)
    if url is None or path is None:
        refuse_for_local(items, key_ring)
        return None
    return ReadOnlyDataDir(path, parse_storage_options(items), key_ring=load_key_ring(key_ring))


def _selected(data_dir: ReadOnlyDataDir, topic: str | None) -> list[tuple[TopicPartition, str]]:
    return sorted(
        ((tp, name) for tp, name in data_dir.partition_names().items() if topic is None or tp.topic == topic),
        key=lambda item: (item[0].topic, item[0].partition),
    )


# --- info --------------------------------------------------------------------------------------------------


def remote_partition_info(data_dir: ReadOnlyDataDir, tp: TopicPartition, name: str, result: Any) -> None:
    """Fill ``result`` (a :class:`~kafkalog.cli.info.PartitionInfo`) from object storage (errors in ``error``)."""
    problems: list[str] = []
    rl: ReadOnlyLog | None = None
    files: dict[str, int] = {}
    try:
        rl = data_dir.log(tp.topic, tp.partition, check=False)
        files = dict(rl.source.list_files())
        result.log_start_offset = rl.log_start_offset
        result.log_end_offset = rl.log_end_offset
        result.high_watermark = rl.high_watermark
        result.last_stable_offset = rl.last_stable_offset
        for seg in rl.segments:
            stem = f"{seg.base_offset:020d}"
            present = [s.lstrip(".") for s in (".index", ".timeindex", ".txnindex") if f"{stem}{s}" in files]
            result.segments.append((seg.base_offset, seg.size_bytes, present))
    except (KafkaError, OSError) as exc:
        problems.append(f"log: {exc}")
    if rl is None:
        result.error = "; ".join(problems)
        return
    end = result.log_end_offset
    snapshots = sorted(
        int(n[: -len(".snapshot")])
        for n in files
        if n.endswith(".snapshot") and n[: -len(".snapshot")].isdigit()
    )
    for offset in reversed(snapshots):
        if end is not None and offset > end:
            continue
        snapshot = f"{offset:020d}.snapshot"
        try:
            entries: list[ProducerStateEntry] = parse_snapshot(rl.source.read(snapshot), f"{name}/{snapshot}")
            result.producers = entries
            result.snapshot_offset = offset
            break
        except (KafkaError, OSError) as exc:
            problems.append(f"snapshot {offset}: {exc}")
    if "leader-epoch-checkpoint" in files:
        try:
            data = rl.source.read("leader-epoch-checkpoint")
            checkpoint = leader_epoch_checkpoint(Path(name))
            result.epochs = [(e.epoch, e.start_offset) for e in checkpoint.parse(data)]
        except (CheckpointError, OSError) as exc:
            problems.append(f"leader-epoch-checkpoint: {exc}")
    result.error = "; ".join(problems) or None


# --- verify ------------------------------------------------------------------------------------------------


def verify_remote(data_dir: ReadOnlyDataDir, topic: str | None) -> VerifyReport:
    """Check every partition at a URL (or of a local data dir with its archive, as one history): every batch's CRC and framing, offsets increasing, no segment missing
    or emptied between the log start and end (a hole is a warning: a compacted log has them), a torn last
    segment reported as a warning (the copy was taken while a broker appended; recovery would cut it). An
    archive also reports orphans, overlapping re-uploads and segments outside the leader-epoch lineage
    (warnings), offsets in no segment and manifests that disagree with their data (faults)."""
    report = VerifyReport()
    for tp, name in _selected(data_dir, topic):
        part = PartitionReport(name, tp)
        report.parts.append(part)
        try:
            _verify_partition(data_dir.log(tp.topic, tp.partition, check=False), part)
        except (KafkaError, OSError) as exc:
            part.fault("", f"unreadable: {exc}")
        part.finish()
    return report


def _verify_partition(rl: ReadOnlyLog, part: PartitionReport) -> None:
    segments = rl.segments
    part.segments = len(segments)
    part.log_end_offset = rl.log_end_offset
    start, end = rl.log_start_offset, rl.log_end_offset
    file_of = {s.base_offset: s.path.name for s in segments}

    def damaged(lo: int, hi: int, error: CorruptRecordError) -> None:
        part.fault("", f"offsets [{lo}, {hi}) are damaged: {error}")

    def gap(lo: int, hi: int) -> None:
        part.warn("", f"offsets [{lo}, {hi}) are in no segment (normal only in a compacted log)")

    def missing(lo: int, hi: int) -> None:
        part.fault("", f"offsets [{lo}, {hi}) are missing: their segment was listed but cannot be read")

    last_offset = -1
    last_in: dict[int, int] = {}
    for chunk in rl.iter_batch_chunks(start, end, on_damage=damaged, on_gap=gap, on_missing=missing):
        table = chunk.table
        n = table.shape[1]
        bad, _ = K.verify_crcs(chunk.data, table, n)
        file = file_of.get(chunk.segment_base_offset, "")
        if bad >= 0:
            part.fault(
                file,
                f"CRC mismatch in the batch at byte {chunk.file_position + int(table[K.F_POS, bad])} "
                f"(base offset {int(table[K.F_BASE_OFFSET, bad])})",
            )
        bases = table[K.F_BASE_OFFSET]
        if n and (int(bases[0]) <= last_offset or bool(np.any(np.diff(bases) <= 0))):
            part.fault(file, "batch offsets do not increase")
        if n:
            last_offset = int(bases[-1] + table[K.F_LAST_OFFSET_DELTA, -1])
            last_in[chunk.segment_base_offset] = last_offset
        part.batches += n
        part.bytes += int(table[K.F_SIZE].sum())
    if isinstance(rl.source, PlannedArchive):
        _verify_archive(rl.source.archive, last_in, part)
        return
    if segments:
        last = segments[-1]
        tail = rl.tail_position
        if tail is not None and tail[0] == last.base_offset and tail[1] < last.size_bytes:
            part.warn(
                last.path.name,
                f"the last segment's data ends at byte {tail[1]} of {last.size_bytes}: a torn tail (a copy taken "
                "while a broker appended); readers stop there, as Kafka's recovery would",
            )


def _verify_archive(source: ArchivePartitionSource, last_in: dict[int, int], part: PartitionReport) -> None:
    """What only an archive can get wrong: orphans, overlaps and segments left out by the lineage rule
    (warnings: the reader resolves them as Kafka does), offsets in no segment and a manifest that disagrees
    with its data (faults)."""
    selection = source.selection
    for key in source.orphans:
        part.warn(
            key, "orphan object: its segment has no manifest or lacks a file (an upload that failed); skipped"
        )
    for seg, why in selection.skipped:
        part.warn(seg.name, f"segment {seg.base_offset}-{seg.end_offset} ({seg.segment_id}) not read: {why}")
    for lo, hi in selection.overlaps:
        part.warn(
            "",
            f"offsets {lo}-{hi} are in two archived segments (a re-upload); read from one chosen by lineage",
        )
    for lo, hi in selection.gaps:
        part.fault("", f"offsets {lo}-{hi} are in no archived segment")
    for seg in source.lost:
        part.fault(
            seg.name,
            f"offsets {seg.base_offset}-{seg.end_offset} are lost: {seg.name} remains but "
            f"{', '.join(seg.missing)} {'is' if len(seg.missing) == 1 else 'are'} gone",
        )
    for seg in selection.chosen:
        seen = last_in.get(seg.base_offset)
        if seen is not None and seen != seg.end_offset:
            part.fault(
                seg.name,
                f"the manifest says the segment ends at offset {seg.end_offset}, its data at {seen}",
            )
