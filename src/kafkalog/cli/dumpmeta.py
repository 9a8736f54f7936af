"""``kafkalog dump`` of producer snapshots (``.snapshot``) and the small text files of a log directory.

Producer snapshot, text as Kafka's ``DumpLogSegments.dumpProducerIdSnapshot`` (one line per producer, in file
order; the batch part only when the snapshot kept the producer's last batch)::

    producerId: 7 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1700000000000 firstSequence: 0 lastSequence: 2 lastOffset: 2 offsetDelta: 2 timestamp: 1700000000000

A corrupt snapshot (version, CRC, length) prints the reader's message on stderr and exits 2.

Checkpoint files, recognised by name (also with a ``.tmp`` suffix, as left by an interrupted atomic write):
``leader-epoch-checkpoint`` (``epoch: 3 startOffset: 120``), ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``
(``topic: orders partition: 0 offset: 42``), ``partition.metadata`` (``version: 0 topicId: <base64 uuid>``) and
``.kafka_cleanshutdown`` (``version: 0 brokerEpoch: -1``). Kafka's tool does not read these files; the format
mirrors its other lines. A malformed file (bad version line, count that does not match, bad entry) exits 2.

``--json`` (keys in this order; the summary is the last line of each file):

* snapshot: ``{"type":"producer","producerId","producerEpoch","coordinatorEpoch","currentTxnFirstOffset",
  "lastTimestamp","firstSequence","lastSequence","lastOffset","offsetDelta","timestamp"}`` (null for no open
  transaction / no batch); ``{"type":"summary","fileType":"producer_snapshot","offset","version","crc","producers",
  "fileBytes"}``.
* checkpoints: ``{"type":"epoch","epoch","startOffset"}``, ``{"type":"offset","topic","partition","offset"}``,
  ``{"type":"partitionMetadata","version","topicId"}``, ``{"type":"cleanShutdown","version","brokerEpoch"}``;
  ``{"type":"summary","fileType","version","entries","fileBytes"}`` with ``fileType`` one of
  ``leader_epoch_checkpoint``, ``offset_checkpoint``, ``partition_metadata``, ``clean_shutdown``.
* a damaged file: ``{"type":"error","error":"corrupt_snapshot"|"corrupt_checkpoint","position":0,"message"}``.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Final

from kafkalog.cli.common import EXIT_CORRUPT, EXIT_OK, json_dumps
from kafkalog.cli.dumpio import DumpOutput, DumpSettings, FileDumper
from kafkalog.errors import CorruptSnapshotError
from kafkalog.log.checkpoint import (
    CheckpointError,
    CheckpointFile,
    EpochEntry,
    offset_checkpoint,
    topic_id_from_string,
)
from kafkalog.log.names import TopicPartition
from kafkalog.log.producer_state import ProducerStateEntry, read_snapshot

__all__ = ["CHECKPOINT_DUMPERS", "checkpoint_dumper_for", "dump_producer_snapshot"]

_SNAP_HEADER: Final = struct.Struct(">hIi")


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _producer_line(entry: ProducerStateEntry) -> str:
    text = (
        f"producerId: {entry.producer_id} producerEpoch: {entry.producer_epoch} "
        f"coordinatorEpoch: {entry.coordinator_epoch} "
        f"currentTxnFirstOffset: {_optional_long(entry.current_txn_first_offset)} "
        f"lastTimestamp: {entry.last_timestamp} "
    )
    if entry.batches:
        meta = entry.batches[0]
        text += (
            f"firstSequence: {meta.first_seq} lastSequence: {meta.last_seq} lastOffset: {meta.last_offset} "
            f"offsetDelta: {meta.offset_delta} timestamp: {meta.timestamp}"
        )
    return text


def _producer_object(entry: ProducerStateEntry) -> dict[str, object]:
    meta = entry.batches[0] if entry.batches else None
    return {
        "type": "producer",
        "producerId": entry.producer_id,
        "producerEpoch": entry.producer_epoch,
        "coordinatorEpoch": entry.coordinator_epoch,
        "currentTxnFirstOffset": entry.current_txn_first_offset,
        "lastTimestamp": entry.last_timestamp,
        "firstSequence": None if meta is None else meta.first_seq,
        "lastSequence": None if meta is None else meta.last_seq,
        "lastOffset": None if meta is None else meta.last_offset,
        "offsetDelta": None if meta is None else meta.offset_delta,
        "timestamp": None if meta is None else meta.timestamp,
    }


def _error(path: Path, kind: str, message: str, settings: DumpSettings, out: DumpOutput) -> None:
    if settings.json:
        out.line(json_dumps({"type": "error", "error": kind, "position": 0, "message": message}))
    out.error(path, message)


def dump_producer_snapshot(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
    """Dumps a producer-state snapshot (see the module doc)."""
    raw = path.read_bytes()
    head = path.name.split(".", 1)[0]
    version: int | None = None
    crc: int | None = None
    if len(raw) >= _SNAP_HEADER.size:
        version, crc, _ = _SNAP_HEADER.unpack_from(raw)
    if not settings.json:
        out.line(f"Dumping {path}")
    code = EXIT_OK
    entries: list[ProducerStateEntry] = []
    try:
        entries = read_snapshot(path)
    except CorruptSnapshotError as exc:
        _error(path, "corrupt_snapshot", str(exc), settings, out)
        code = EXIT_CORRUPT
    for entry in entries:
        out.line(json_dumps(_producer_object(entry)) if settings.json else _producer_line(entry))
    if settings.json:
        out.line(
            json_dumps(
                {
                    "type": "summary",
                    "fileType": "producer_snapshot",
                    "offset": int(head) if head.isdigit() else None,
                    "version": version,
                    "crc": crc,
                    "producers": len(entries),
                    "fileBytes": len(raw),
                }
            )
        )
    return code


# --------------------------------------------------------------------------------------------------- checkpoints

_Parsed = tuple[int | None, list[tuple[str, dict[str, object]]]]
"""A checkpoint's version and its entries as ``(text line, JSON object)``."""


def _epoch_from_line(line: str) -> EpochEntry:
    parts = line.split()
    if len(parts) != 2:
        raise ValueError(line)
    return EpochEntry(int(parts[0]), int(parts[1]))


def _version_of(path: Path) -> int | None:
    first = path.read_text("utf-8").split("\n", 1)[0].strip()
    return int(first) if first.lstrip("-").isdigit() else None


def _parse_epochs(path: Path) -> _Parsed:
    entries = CheckpointFile(path, 0, lambda e: f"{e.epoch} {e.start_offset}", _epoch_from_line).read()
    return _version_of(path), [
        (
            f"epoch: {e.epoch} startOffset: {e.start_offset}",
            {"type": "epoch", "epoch": e.epoch, "startOffset": e.start_offset},
        )
        for e in entries
    ]


def _parse_offsets(path: Path) -> _Parsed:
    entries: list[tuple[TopicPartition, int]] = offset_checkpoint(path).read()
    return _version_of(path), [
        (
            f"topic: {tp.topic} partition: {tp.partition} offset: {offset}",
            {"type": "offset", "topic": tp.topic, "partition": tp.partition, "offset": offset},
        )
        for tp, offset in entries
    ]


def _parse_partition_metadata(path: Path) -> _Parsed:
    fields: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        parts = re.split(r":\s+", line, maxsplit=1)
        if len(parts) != 2:
            raise CheckpointError(f"malformed line in partition metadata file {path}: {line!r}")
        fields[parts[0]] = parts[1]
    try:
        version = int(fields["version"])
        topic_id = fields["topic_id"]
        topic_id_from_string(topic_id)
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"malformed partition metadata file {path}: {exc}") from None
    obj: dict[str, object] = {"type": "partitionMetadata", "version": version, "topicId": topic_id}
    return version, [(f"version: {version} topicId: {topic_id}", obj)]


def _parse_clean_shutdown(path: Path) -> _Parsed:
    text = path.read_text("utf-8")
    if not text.strip():  # Kafka before 3.6 wrote an empty marker
        return None, []
    try:
        data = json.loads(text)
        version, epoch = int(data["version"]), int(data.get("brokerEpoch", -1))
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"malformed clean shutdown file {path}: {exc}") from None
    obj: dict[str, object] = {"type": "cleanShutdown", "version": version, "brokerEpoch": epoch}
    return version, [(f"version: {version} brokerEpoch: {epoch}", obj)]


def _checkpoint_dumper(file_type: str, parse: Callable[[Path], _Parsed]) -> FileDumper:
    def dumper(path: Path, settings: DumpSettings, out: DumpOutput) -> int:
        size = path.stat().st_size
        if not settings.json:
            out.line(f"Dumping {path}")
        code = EXIT_OK
        version: int | None = None
        entries: list[tuple[str, dict[str, object]]] = []
        try:
            version, entries = parse(path)
        except (CheckpointError, UnicodeDecodeError) as exc:
            _error(path, "corrupt_checkpoint", str(exc), settings, out)
            code = EXIT_CORRUPT
        for text, obj in entries:
            out.line(json_dumps(obj) if settings.json else text)
        if settings.json:
            out.line(
                json_dumps(
                    {
                        "type": "summary",
                        "fileType": file_type,
                        "version": version,
                        "entries": len(entries),
                        "fileBytes": size,
                    }
                )
            )
        return code

    dumper.__doc__ = f"Dumps a {file_type.replace('_', ' ')} file."
    return dumper


_OFFSETS: Final = _checkpoint_dumper("offset_checkpoint", _parse_offsets)

#: Dumpers of the small files, by exact file name.
CHECKPOINT_DUMPERS: Final[dict[str, FileDumper]] = {
    "leader-epoch-checkpoint": _checkpoint_dumper("leader_epoch_checkpoint", _parse_epochs),
    "recovery-point-offset-checkpoint": _OFFSETS,
    "log-start-offset-checkpoint": _OFFSETS,
    "replication-offset-checkpoint": _OFFSETS,
    "cleaner-offset-checkpoint": _OFFSETS,
    "partition.metadata": _checkpoint_dumper("partition_metadata", _parse_partition_metadata),
    ".kafka_cleanshutdown": _checkpoint_dumper("clean_shutdown", _parse_clean_shutdown),
}


def checkpoint_dumper_for(path: Path) -> FileDumper | None:
    """The dumper for a checkpoint file name (``.tmp`` looked through), or ``None``."""
    name = path.name
    if name.endswith(".tmp") and len(name) > 4:
        name = name[:-4]
    return CHECKPOINT_DUMPERS.get(name)
