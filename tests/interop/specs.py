"""Shared builders for the interop tests: harness specs, hypothesis strategies and kafkalog's view of a file.

* A *spec* is the harness's ``write`` input (``{"batches": [batch, ...]}``, see ``java/KafkaInterop.java``);
  :func:`build_with_kafkalog` builds the same batch with kafkalog's own writer (``MemoryRecords.build``,
  ``MemoryRecordsBuilder`` or ``MemoryRecords.end_transaction_marker``) so both writers can be compared.
* :func:`kafkalog_dump` and :func:`kafkalog_validate` read bytes with ``kafkalog.records`` and describe them in
  exactly the JSON shape of the harness's ``dump --deep`` and ``validate`` commands, so that Kafka's view and
  ours of the same bytes compare with ``==``, every batch-header field and every record field included.
* The strategies generate bounded specs: v2 batches (every codec, idempotent/transactional, sequence wrap,
  LogAppendTime, explicit offsets with gaps, delete horizon, headers with null values and unicode keys, null
  and empty keys/values), COMMIT/ABORT markers, empty batches and legacy v0/v1 entries.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kafkalog.errors import KafkaError
from kafkalog.records import (
    Compression,
    ControlRecordType,
    Header,
    LegacyRecordBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    RecordDetail,
    SimpleRecord,
    TimestampType,
    iter_batches,
    read_batch_at,
)

from .kafka_java import EXIT_CORRUPT, EXIT_OK, EXIT_TRUNCATED, b64, unb64

TS = 1_700_000_000_000
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: Codecs of magic 0/1 wrappers (zstd needs magic 2).
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")

Spec = dict[str, Any]
Line = dict[str, Any]


# --------------------------------------------------------------------------------------------- kafkalog's view


def _batch_line(batch: RecordBatch, valid: bool) -> Line:
    """The harness's batch line for ``batch`` (raises like the harness's ``batchLine`` on unreadable fields)."""
    if batch.magic >= 2:
        record_count = batch.count
    elif valid:
        # Legacy entries have no count field: a compressed wrapper holds as many records as it decompresses to
        # (counted as the harness counts, iterating without reading keys and values).
        assert isinstance(batch, LegacyRecordBatch)
        record_count = batch.record_count()
    elif not batch.is_compressed:
        record_count = 1
    else:
        raise ValueError("corrupt compressed legacy wrapper")
    return {
        "type": "batch",
        "position": batch.position,
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "magic": batch.magic,
        "crc": batch.checksum,
        "isValid": valid,
        "compressionType": batch.compression.kafka_name,
        "timestampType": batch.timestamp_type.kafka_name,
        "baseTimestamp": batch.base_timestamp,
        "maxTimestamp": batch.max_timestamp,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "isTransactional": batch.is_transactional,
        "isControlBatch": batch.is_control_batch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "recordCount": record_count,
        "sizeInBytes": batch.size_in_bytes,
    }


def _record_line(batch: RecordBatch, detail: RecordDetail) -> Line:
    record = detail.record
    line: Line = {
        "type": "record",
        "offset": record.offset,
        "timestamp": record.timestamp,
        "sequence": detail.sequence,
        "sizeInBytes": detail.size_in_bytes,
        "key": b64(record.key),
        "value": b64(record.value),
        "headers": [{"key": h.key, "value": b64(h.value)} for h in record.headers],
    }
    if batch.is_control_batch:
        assert detail.control_type is not None
        line["controlType"] = detail.control_type.name
        if detail.control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            line["coordinatorEpoch"] = detail.coordinator_epoch
    return line


def _error(kind: str, position: int, exc: BaseException | str) -> Line:
    return {"type": "error", "error": kind, "position": position, "message": str(exc)}


#: What can go wrong while reading, in kafkalog's terms (see :func:`kafkalog_dump`).
OURS_FRAME = "frame"  # read_batch_at raised: impossible size or magic, or a legacy entry that does not parse
OURS_CRC = "crc"  # the batch was read but is_valid() is False
OURS_RECORDS = "records"  # the batch is valid but its fields or records do not decode


def kafkalog_dump(data: bytes, deep: bool = True) -> tuple[list[Line], int, str | None]:
    """kafkalog's reading of ``data`` in the shape of the harness's ``dump`` (``--deep`` when ``deep``).

    Follows the harness's algorithm (``KafkaInterop.dump``): batches are walked with ``read_batch_at``; a valid
    batch gets its batch line then its record lines; an invalid one its batch line (when its fields can be
    read) and a ``corrupt_batch`` error; any error stops the walk; leftover bytes are ``truncated``.
    Returns ``(lines, exit code, kind)`` where ``kind`` is ``None`` or one of ``OURS_FRAME``, ``OURS_CRC``,
    ``OURS_RECORDS`` (error lines carry the harness's names; ``kind`` says more precisely what kafkalog did).
    """
    buf = memoryview(data)
    lines: list[Line] = []
    accepted = records = valid_bytes = 0
    code = EXIT_OK
    kind: str | None = None
    while True:
        try:
            batch = read_batch_at(buf, valid_bytes, known_magic_only=False)  # a file's rule, as FileRecords
        except KafkaError as exc:
            lines.append(_error("corrupt_frame", valid_bytes, exc))
            code, kind = EXIT_CORRUPT, OURS_FRAME
            break
        if batch is None:
            break
        position = batch.position
        try:
            valid = batch.is_valid()
        except KafkaError as exc:
            lines.append(_error("corrupt_batch", position, exc))
            code, kind = EXIT_CORRUPT, OURS_CRC
            break
        try:
            line = _batch_line(batch, valid)
        except (KafkaError, ValueError) as exc:
            lines.append(_error("invalid_records" if valid else "corrupt_batch", position, exc))
            code, kind = EXIT_CORRUPT, OURS_RECORDS if valid else OURS_CRC
            break
        lines.append(line)
        if not valid:
            lines.append(_error("corrupt_batch", position, "crc mismatch"))
            code, kind = EXIT_CORRUPT, OURS_CRC
            break
        if deep:
            try:
                record_lines = [_record_line(batch, detail) for detail in batch.record_details()]
            except KafkaError as exc:
                lines.append(_error("invalid_records", position, exc))
                code, kind = EXIT_CORRUPT, OURS_RECORDS
                break
            lines.extend(record_lines)
            records += len(record_lines)
        else:
            records += line["recordCount"]
        accepted += 1
        valid_bytes = position + batch.size_in_bytes
    if code == EXIT_OK and valid_bytes < len(data):
        lines.append(_error("truncated", valid_bytes, f"{len(data) - valid_bytes} trailing bytes"))
        code = EXIT_TRUNCATED
    lines.append(
        {
            "type": "summary",
            "batches": accepted,
            "records": records,
            "validBytes": valid_bytes,
            "fileBytes": len(data),
        }
    )
    return lines, code, kind


def kafkalog_validate(data: bytes) -> Line:
    """kafkalog's ``ensure_valid()`` over every batch, in the shape of the harness's ``validate`` (no message).

    Like Kafka's recovery check, a partial trailing batch is not an error (``MemoryRecords.ensure_valid`` would
    reject it; that is the whole-buffer check, not the per-batch one Kafka's ``validate`` runs).
    """
    position = 0
    batches = 0
    try:
        for batch in iter_batches(memoryview(data), known_magic_only=False):  # a file's rule, as FileRecords
            position = batch.position
            batch.ensure_valid()
            batches += 1
            position = batch.position + batch.size_in_bytes
    except KafkaError:
        return {"valid": False, "position": position, "batches": batches}
    return {"valid": True, "batches": batches, "validBytes": position, "fileBytes": len(data)}


def without_messages(lines: list[Line]) -> list[Line]:
    """Error lines without their free-text message (the wording is Kafka's or ours, not part of the format)."""
    return [{k: v for k, v in line.items() if k != "message"} for line in lines]


# --------------------------------------------------------------------------------------------- kafkalog's writer


def kafkalog_can_build(spec: Spec) -> bool:
    """Whether kafkalog's writer supports the batch: magic 2 with records or a marker, no cleaner overrides."""
    return (
        spec.get("magic", 2) == 2
        and (bool(spec.get("records")) or "control" in spec)
        and not {"lastOffset", "maxTimestamp", "isControlBatch"} & spec.keys()
    )


def _headers(record: Spec) -> tuple[Header, ...]:
    return tuple(Header(h["key"], unb64(h["value"])) for h in record.get("headers", []))


def build_with_kafkalog(spec: Spec) -> bytes:
    """The batch of ``spec`` written by kafkalog (``MemoryRecords.build`` unless explicit offsets need the builder)."""
    if not kafkalog_can_build(spec):
        raise ValueError(f"kafkalog cannot write this batch: {spec}")
    base_offset = spec.get("baseOffset", 0)
    epoch = spec.get("partitionLeaderEpoch", -1)
    if "control" in spec:
        control = spec["control"]
        return MemoryRecords.end_transaction_marker(
            producer_id=spec["producerId"],
            producer_epoch=spec["producerEpoch"],
            control_type=control["type"],
            coordinator_epoch=control["coordinatorEpoch"],
            base_offset=base_offset,
            timestamp=control["timestamp"],
            partition_leader_epoch=epoch,
        ).to_bytes()
    compression = Compression.from_name(spec.get("compression", "none"))
    level = spec.get("compressionLevel")
    ts_type = TimestampType.from_name(spec.get("timestampType", "CreateTime"))
    producer = {
        "producer_id": spec.get("producerId", -1),
        "producer_epoch": spec.get("producerEpoch", -1),
        "base_sequence": spec.get("baseSequence", -1),
        "is_transactional": spec.get("isTransactional", False),
    }
    records = spec["records"]
    if not any("offset" in r for r in records):
        return MemoryRecords.build(
            [
                SimpleRecord(unb64(r.get("value")), unb64(r.get("key")), r.get("timestamp", -1), _headers(r))
                for r in records
            ],
            compression=compression,
            compression_level=level,
            base_offset=base_offset,
            timestamp_type=ts_type,
            log_append_time=spec.get("logAppendTime"),
            partition_leader_epoch=epoch,
            delete_horizon_ms=spec.get("deleteHorizonMs"),
            **producer,
        ).to_bytes()
    builder = MemoryRecordsBuilder(
        base_offset=base_offset,
        compression=compression,
        compression_level=level,
        timestamp_type=ts_type,
        log_append_time=spec.get("logAppendTime", -1),
        partition_leader_epoch=epoch,
        delete_horizon_ms=spec.get("deleteHorizonMs"),
        **producer,
    )
    for r in records:
        offset = r.get("offset", builder.next_sequential_offset())
        builder.append_with_offset(
            offset, r.get("timestamp", -1), unb64(r.get("key")), unb64(r.get("value")), _headers(r)
        )
    return builder.build().to_bytes()


def build_file_with_kafkalog(batches: list[Spec]) -> bytes:
    """The batches written one after the other, as ``FileRecords.append`` does."""
    return b"".join(build_with_kafkalog(spec) for spec in batches)


# --------------------------------------------------------------------------------------------- explicit specs


def rec(
    value: bytes | str | None,
    key: bytes | str | None = None,
    timestamp: int = TS,
    headers: list[tuple[str, bytes | str | None]] | None = None,
    offset: int | None = None,
) -> Spec:
    """One spec record (``str`` is UTF-8 encoded)."""
    record: Spec = {"timestamp": timestamp, "key": b64(key), "value": b64(value)}
    if headers is not None:
        record["headers"] = [{"key": k, "value": b64(v)} for k, v in headers]
    if offset is not None:
        record["offset"] = offset
    return record


def sample_records(headers: bool = True) -> list[Spec]:
    """Null/empty keys and values, timestamps going backwards and -1, headers with null values, unicode keys."""
    h = headers
    return [
        rec(b"kafkalog " * 60, "key-0", TS, [("trace", "abc"), ("null", None)] if h else None),
        rec(b"", None, TS - 5),  # empty value, null key, negative timestamp delta
        rec(None, b"", TS + 10),  # tombstone with an empty key
        rec(None, None, -1, [("ünïcode ✓ 😀", b""), ("", b"\x00\xff")] if h else None),
        rec(bytes(range(256)), bytes(range(255, -1, -1)), TS + 11, [("k", None)] * 3 if h else None),
    ]


def big_records() -> list[Spec]:
    """More than one LZ4 (64 KiB) and snappy (32 KiB) block of input, partly incompressible."""
    noise = bytes((i * 7919 + (i >> 8) * 104729) & 0xFF for i in range(40_000))
    return [rec(b"abc" * 30_000, "big", TS), rec(noise, None, TS + 1), rec(noise[::-1] * 2, "x", TS + 2)]


PRODUCER = {"producerId": 4_000_000_000, "producerEpoch": 7, "baseSequence": 100}


def explicit_cases() -> dict[str, list[Spec]]:
    """Named files (lists of batch specs), one per feature the issue's proof section lists."""
    cases: dict[str, list[Spec]] = {}
    for codec in CODECS:
        base = {"compression": codec, "baseOffset": 1000, "partitionLeaderEpoch": 5}
        cases[f"v2-{codec}"] = [{**base, "records": sample_records()}]
        cases[f"v2-{codec}-idempotent"] = [{**base, **PRODUCER, "records": sample_records()}]
        cases[f"v2-{codec}-transactional"] = [
            {**base, **PRODUCER, "isTransactional": True, "records": sample_records()}
        ]
        cases[f"v2-{codec}-sequence-wrap"] = [
            {**base, **PRODUCER, "baseSequence": INT32_MAX - 2, "records": sample_records()}
        ]
        cases[f"v2-{codec}-log-append-time"] = [
            {
                **base,
                "timestampType": "LogAppendTime",
                "logAppendTime": TS + 99_999,
                "records": sample_records(),
            }
        ]
        cases[f"v2-{codec}-offset-gaps"] = [
            {
                **base,
                **PRODUCER,
                "records": [
                    {**r, "offset": 1000 + delta}
                    for r, delta in zip(sample_records(), (2, 3, 17, 400, 70_000), strict=True)
                ],
            }
        ]
        cases[f"v2-{codec}-compacted-last-offset"] = [  # the cleaner keeps the original last offset
            {
                **base,
                **PRODUCER,
                "lastOffset": 1000 + 80_000,
                "records": [rec("a", "k1", offset=1003), rec(None, "k2", offset=1010)],
            }
        ]
        cases[f"v2-{codec}-delete-horizon"] = [
            {**base, "deleteHorizonMs": TS + 86_400_000, "records": sample_records()}
        ]
        cases[f"v2-{codec}-big"] = [{**base, "records": big_records()}]
    for control in ("COMMIT", "ABORT"):
        cases[f"{control.lower()}-marker"] = [
            {
                "baseOffset": 77,
                "partitionLeaderEpoch": 3,
                "producerId": 12,
                "producerEpoch": 1,
                "control": {"type": control, "coordinatorEpoch": 42, "timestamp": TS},
            }
        ]
    cases["markers-extreme-epochs"] = [
        {
            "baseOffset": 2**62,
            "producerId": INT64_MAX,
            "producerEpoch": 32767,
            "control": {"type": "ABORT", "coordinatorEpoch": INT32_MAX, "timestamp": 0},
        },
        {
            "producerId": 0,
            "producerEpoch": 0,
            "control": {"type": "COMMIT", "coordinatorEpoch": -1, "timestamp": -1},
        },
    ]
    cases["empty-batch"] = [
        {"baseOffset": 20, "lastOffset": 24, **PRODUCER, "maxTimestamp": TS, "records": []}
    ]
    cases["empty-control-batch"] = [
        {
            "baseOffset": 30,
            "partitionLeaderEpoch": 2,
            "producerId": 5,
            "producerEpoch": 0,
            "isTransactional": True,
            "isControlBatch": True,
            "timestampType": "LogAppendTime",
            "logAppendTime": TS,  # the harness insists; an empty header has no use for it
            "records": [],
        }
    ]
    for magic in (0, 1):
        for codec in LEGACY_CODECS:
            cases[f"v{magic}-{codec}"] = [
                {"magic": magic, "compression": codec, "baseOffset": 50, "records": sample_records(False)}
            ]
        cases[f"v{magic}-gzip-offset-gaps"] = [
            {
                "magic": magic,
                "compression": "gzip",
                "baseOffset": 50,
                "records": [rec("a", "k", offset=52), rec("b", "k", offset=60), rec(None, "j", offset=61)],
            }
        ]
    for codec in LEGACY_CODECS:
        cases[f"v1-{codec}-log-append-time"] = [
            {
                "magic": 1,
                "compression": codec,
                "timestampType": "LogAppendTime",
                "logAppendTime": TS + 5,
                "records": sample_records(False),
            }
        ]
    cases["mixed-file"] = [
        {"magic": 0, "records": [rec("v0", "k")]},
        {"magic": 1, "compression": "snappy", "baseOffset": 1, "records": sample_records(False)},
        {
            "compression": "zstd",
            "baseOffset": 6,
            **PRODUCER,
            "isTransactional": True,
            "records": sample_records(),
        },
        {
            "baseOffset": 11,
            "producerId": PRODUCER["producerId"],
            "producerEpoch": 7,
            "control": {"type": "COMMIT", "coordinatorEpoch": 1, "timestamp": TS},
        },
        {"baseOffset": 12, "lastOffset": 13, "records": []},
        {"baseOffset": 14, "deleteHorizonMs": TS, "records": [rec(None, "gone")]},
    ]
    return cases


# --------------------------------------------------------------------------------------------- strategies

timestamps = st.one_of(
    st.just(-1), st.integers(0, 2 * TS), st.integers(TS - 1000, TS + 1000), st.sampled_from([0, TS])
)
non_negative_timestamps = st.one_of(st.integers(0, 2 * TS), st.just(TS))
payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=48),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=8), st.integers(1, 300)),  # compressible
).map(b64)
header_keys = st.text(max_size=10)  # any code point but surrogates, incl. "" and astral characters
headers = st.lists(st.fixed_dictionaries({"key": header_keys, "value": payloads}), max_size=3)
v2_records = st.fixed_dictionaries(
    {"timestamp": timestamps, "key": payloads, "value": payloads}, optional={"headers": headers}
)
legacy_records = st.fixed_dictionaries(
    {"timestamp": non_negative_timestamps, "key": payloads, "value": payloads}
)
base_offsets = st.one_of(st.integers(0, 1000), st.integers(0, 2**62))
leader_epochs = st.one_of(st.just(-1), st.integers(0, INT32_MAX))
sequences = st.one_of(st.integers(0, INT32_MAX), st.integers(INT32_MAX - 10, INT32_MAX))


@st.composite
def _explicit_offsets(draw: st.DrawFn, records: list[Spec], base_offset: int) -> list[Spec]:
    """Maybe give the records explicit offsets with gaps (``appendWithOffset``, as in a compacted batch)."""
    if not draw(st.booleans()):
        return records
    offset = base_offset + draw(st.integers(0, 3))
    out = []
    for record in records:
        out.append({**record, "offset": offset})
        offset += draw(st.one_of(st.integers(1, 3), st.integers(1, 100_000)))
    return out


@st.composite
def v2_batch_specs(draw: st.DrawFn, codecs: tuple[str, ...] = CODECS, max_records: int = 6) -> Spec:
    """A magic-2 batch with records that both Kafka and kafkalog can write."""
    spec: Spec = {
        "compression": draw(st.sampled_from(codecs)),
        "baseOffset": draw(base_offsets),
        "partitionLeaderEpoch": draw(leader_epochs),
    }
    producer = draw(st.sampled_from(["none", "idempotent", "transactional"]))
    if producer != "none":
        spec["producerId"] = draw(st.one_of(st.integers(0, 1000), st.integers(0, INT64_MAX)))
        spec["producerEpoch"] = draw(st.integers(0, 32767))
        spec["baseSequence"] = draw(sequences)
        spec["isTransactional"] = producer == "transactional"
    if draw(st.booleans()):
        spec["timestampType"] = "LogAppendTime"
        spec["logAppendTime"] = draw(non_negative_timestamps)
    if draw(st.integers(0, 3)) == 0:
        spec["deleteHorizonMs"] = draw(non_negative_timestamps)
    records = draw(st.lists(v2_records, min_size=1, max_size=max_records))
    spec["records"] = draw(_explicit_offsets(records, spec["baseOffset"]))
    return spec


@st.composite
def marker_specs(draw: st.DrawFn) -> Spec:
    """A COMMIT or ABORT end-transaction marker."""
    return {
        "baseOffset": draw(base_offsets),
        "partitionLeaderEpoch": draw(leader_epochs),
        "producerId": draw(st.integers(0, INT64_MAX)),
        "producerEpoch": draw(st.integers(0, 32767)),
        "control": {
            "type": draw(st.sampled_from(["COMMIT", "ABORT"])),
            "coordinatorEpoch": draw(st.integers(-(2**31), INT32_MAX)),
            "timestamp": draw(st.one_of(st.just(-1), non_negative_timestamps)),
        },
    }


@st.composite
def empty_batch_specs(draw: st.DrawFn) -> Spec:
    """A bare v2 header with recordsCount 0 (what the cleaner leaves to keep producer state); Kafka only."""
    base = draw(base_offsets)
    spec: Spec = {
        "baseOffset": base,
        "lastOffset": base + draw(st.integers(0, INT32_MAX)),
        "partitionLeaderEpoch": draw(leader_epochs),
        "timestampType": draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        "maxTimestamp": draw(timestamps),
        "isControlBatch": draw(st.booleans()),
        "records": [],
    }
    if spec["timestampType"] == "LogAppendTime":
        spec["logAppendTime"] = TS  # the harness insists; an empty header has no use for it
    if draw(st.booleans()):
        spec.update(producerId=draw(st.integers(0, INT64_MAX)), producerEpoch=draw(st.integers(0, 32767)))
        spec.update(baseSequence=draw(sequences), isTransactional=draw(st.booleans()))
    return spec


@st.composite
def legacy_batch_specs(draw: st.DrawFn) -> Spec:
    """Magic 0/1 entries: uncompressed (one entry per record) or a compressed wrapper; Kafka only."""
    magic = draw(st.sampled_from([0, 1]))
    spec: Spec = {
        "magic": magic,
        "compression": draw(st.sampled_from(LEGACY_CODECS)),
        "baseOffset": draw(st.one_of(st.integers(0, 1000), st.integers(0, 2**62))),
    }
    if magic == 1 and draw(st.booleans()):
        spec["timestampType"] = "LogAppendTime"
        spec["logAppendTime"] = draw(non_negative_timestamps)
    records = draw(st.lists(legacy_records, min_size=1, max_size=5))
    spec["records"] = draw(_explicit_offsets(records, spec["baseOffset"]))
    return spec


#: Any batch kafkalog can also write (for the write direction and byte identity); 2 in 3 have records.
kafkalog_batch_specs = st.one_of(v2_batch_specs(), v2_batch_specs(), marker_specs())
#: Any batch Kafka can write, in the proportions of a varied log.
any_batch_specs = st.one_of(v2_batch_specs(), marker_specs(), empty_batch_specs(), legacy_batch_specs())
