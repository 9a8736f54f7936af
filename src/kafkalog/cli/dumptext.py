"""Text rendering of ``kafkalog dump`` for record batches: Kafka's ``DumpLogSegments`` lines and the key/value
decoders (``--key-decoder``/``--value-decoder``: utf8, bytes, hex, json).

:func:`text_batch_line` and :func:`text_record_line` render the events of
:class:`~kafkalog.cli.dumplog.LogDump` as ``kafka-dump-log.sh`` prints them; :func:`log_dump_header` is the line
after ``Dumping <file>``. Re-exported by :mod:`kafkalog.cli.dumplog`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kafkalog.records.utf8 import decode_utf8_as_java

if TYPE_CHECKING:
    from kafkalog.cli.dumplog import BatchEvent, RecordEvent

__all__ = ["DECODERS", "Decoder", "log_dump_header", "text_batch_line", "text_record_line"]


# --------------------------------------------------------------------------------------------------- text


Decoder = Callable[[bytes], str]


def _escape_table() -> list[str]:
    table = [f"\\x{b:02x}" for b in range(256)]
    for b in range(0x20, 0x7F):
        table[b] = chr(b)
    table[ord("\\")] = "\\\\"
    table[ord("\t")], table[ord("\n")], table[ord("\r")] = "\\t", "\\n", "\\r"
    return table


_ESCAPES: Final = _escape_table()


def _decode_bytes(data: bytes) -> str:
    """Printable ASCII as is, every other byte as a Python-style escape (``\\x00``, ``\\n``, ``\\\\``)."""
    return "".join([_ESCAPES[b] for b in data])


def _decode_utf8(data: bytes) -> str:
    """UTF-8 text, invalid sequences as U+FFFD exactly where Kafka's ``StringDecoder`` (Java) puts them."""
    return decode_utf8_as_java(data)


def _decode_json(data: bytes) -> str:
    """The JSON document re-serialised on one line; escaped bytes when it is not valid JSON."""
    try:
        return json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return _decode_bytes(data)


#: Key/value renderings for text output, by the name the command line uses.
DECODERS: Final[dict[str, Decoder]] = {
    "utf8": _decode_utf8,
    "bytes": _decode_bytes,
    "hex": bytes.hex,
    "json": _decode_json,
}


def log_dump_header(path: Path) -> str | None:
    """The line Kafka prints after ``Dumping <file>``: ``Log starting offset: N`` for a segment named by its
    base offset, the snapshot id for a KRaft ``.checkpoint``; ``None`` when the name says nothing."""
    name = path.name
    stem = name.split(".", 1)[0]
    if name.endswith(".checkpoint"):
        if name == "bootstrap.checkpoint":
            return "KRaft bootstrap snapshot"
        end_offset, sep, epoch = stem.partition("-")
        if sep and end_offset.isdigit() and epoch.isdigit():
            return f"Snapshot end offset: {int(end_offset)}, epoch: {int(epoch)}"
        return None
    if stem.isdigit():
        return f"Log starting offset: {int(stem)}"
    return None


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def text_batch_line(batch: BatchEvent) -> str:
    """Kafka's batch line (``DumpLogSegments.printBatchLevel``), without the newline."""
    if batch.magic >= 2:
        horizon = (
            "OptionalLong.empty"
            if batch.delete_horizon_ms is None
            else f"OptionalLong[{batch.delete_horizon_ms}]"
        )
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {_java_bool(batch.is_transactional)} "
            f"isControl: {_java_bool(batch.is_control_batch)} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression_type} "
        f"crc: {batch.crc} isvalid: {_java_bool(batch.is_valid)}"
    )


def text_record_line(
    record: RecordEvent,
    batch: BatchEvent,
    *,
    print_data: bool = False,
    skip_metadata: bool = False,
    key_decoder: Decoder = _decode_utf8,
    value_decoder: Decoder = _decode_utf8,
) -> str:
    """Kafka's record line (``DumpLogSegments.dumpLog``), without the newline.

    ``| offset: .. <timestampType>: .. keySize: .. valueSize: ..``, then ``sequence`` and ``headerKeys``
    (v2), ``isValid``/``crc`` (legacy), the marker or control type (control batches), then ``key:`` and
    ``payload:`` with ``print_data`` (not for control records). ``skip_metadata`` leaves out all but the data.
    """
    parts: list[str] = []
    prefix = "| "
    if not skip_metadata:
        parts.append(
            f"{prefix}offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
            f"keySize: {-1 if record.key is None else len(record.key)} "
            f"valueSize: {-1 if record.value is None else len(record.value)}"
        )
        prefix = " "
        if batch.magic >= 2:
            keys = ",".join(h.key for h in record.headers)
            parts.append(f" sequence: {record.sequence} headerKeys: [{keys}]")
        elif record.legacy_crc is not None:
            parts.append(f" isValid: {_java_bool(bool(record.legacy_crc_valid))} crc: {record.legacy_crc}")
        if record.control_type is not None:
            if record.coordinator_epoch is not None:
                parts.append(
                    f" endTxnMarker: {record.control_type} coordinatorEpoch: {record.coordinator_epoch}"
                )
            else:
                parts.append(f" controlType: {record.control_type}({record.control_type_id})")
    if print_data and not batch.is_control_batch:
        if record.key is not None:
            parts.append(f"{prefix}key: {key_decoder(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {value_decoder(record.value)}")
    return "".join(parts)
