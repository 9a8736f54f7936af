"""Validation of appends: the shallow per-batch checks every append makes, and the leader's record checks
plus offset assignment (Kafka's ``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator``).

Shallow checks (every origin): CRC of each batch (:class:`~kafkalog.errors.CorruptRecordError`), a client's
v2 batch must have base offset 0, batch size <= ``max.message.bytes`` (leader only,
:class:`~kafkalog.errors.RecordTooLargeError`), offsets monotonic where required
(:class:`~kafkalog.errors.OffsetsOutOfOrderError`). A trailing partial batch is ignored, as Kafka does.

Leader checks (``validate_and_assign_offsets``): a v2 or compressed append is exactly one batch; a client
batch has a consistent offset range and count, no control flag, and a base sequence when it has a producer
id. Per record (vectorised over the batch with ``DefaultRecordBatch.record_index``, the record kernel): CreateTime
timestamps within ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``, no
client-set LogAppendTime on a LogAppendTime topic, a key on compacted topics. Problems are collected and
raised together as :class:`~kafkalog.errors.RecordValidationError` (an invalid timestamp wins over an
invalid record, as in Kafka).

Offsets: an uncompressed v2 batch keeps its bytes; its base offset, partition leader epoch and max
timestamp are rewritten in place (the CRC is recomputed only when the max timestamp or its type changes).
A batch whose codec differs from the topic's ``compression.type``, a legacy (v0/v1) batch, or a compressed
batch whose inner offsets are not ``0..n-1`` in v1 is re-encoded as a v2 batch with the target codec.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    OffsetsOutOfOrderError,
    RecordTooLargeError,
    RecordValidationError,
)
from kafkalog.log.config import LogConfig
from kafkalog.log.types import AppendOrigin, LogAppendInfo
from kafkalog.records import (
    Compression,
    DefaultRecordBatch,
    MemoryRecords,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
)
from kafkalog.records.batch import MAGIC_V2

__all__ = ["ValidationResult", "analyze_and_validate_records", "validate_and_assign_offsets"]

_UNKNOWN_OFFSET = -1


def analyze_and_validate_records(
    records: MemoryRecords,
    *,
    origin: AppendOrigin,
    config: LogConfig,
    topic_partition: str,
    log_start_offset: int,
    ignore_record_size: bool,
    require_offsets_monotonic: bool,
    leader_epoch: int,
) -> LogAppendInfo:
    """Shallow checks of every batch; returns the append's shape (offsets, sizes, codec)."""
    first_offset = _UNKNOWN_OFFSET
    last_offset = -1
    last_offset_of_first_batch = -1
    last_leader_epoch: int | None = None
    source_compression = Compression.NONE
    monotonic = True
    max_timestamp = -1
    shallow_offset_of_max = -1
    valid_bytes = 0
    shallow_count = 0
    for batch in records.batches():
        if origin is AppendOrigin.RAFT_LEADER and batch.partition_leader_epoch != leader_epoch:
            raise InvalidRecordError(
                f"append from raft leader did not set the batch epoch correctly, expected {leader_epoch} but the batch has "
                f"{batch.partition_leader_epoch}"
            )
        if batch.magic >= MAGIC_V2 and origin is AppendOrigin.CLIENT and batch.base_offset != 0:
            raise InvalidRecordError(
                f"the baseOffset of the record batch in the append to {topic_partition} should be 0, but it is "
                f"{batch.base_offset}"
            )
        if shallow_count == 0:
            if batch.magic >= MAGIC_V2:
                first_offset = batch.base_offset
            last_offset_of_first_batch = batch.last_offset
        if last_offset >= batch.last_offset:
            monotonic = False
        last_offset = batch.last_offset
        last_leader_epoch = batch.partition_leader_epoch
        size = batch.size_in_bytes
        if not ignore_record_size and size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"the record batch size in the append to {topic_partition} is {size} bytes which exceeds the maximum "
                f"configured value of {config.max_message_bytes}"
            )
        if not batch.is_valid():
            raise CorruptRecordError(
                f"record is corrupt (stored crc = {batch.checksum}) in topic partition {topic_partition}",
                position=batch.position,
            )
        if batch.max_timestamp > max_timestamp:
            max_timestamp = batch.max_timestamp
            shallow_offset_of_max = last_offset
        valid_bytes += size
        if batch.compression is not Compression.NONE:
            source_compression = batch.compression
        shallow_count += 1
    if require_offsets_monotonic and not monotonic:
        raise OffsetsOutOfOrderError(f"out of order offsets found in append to {topic_partition}")
    return LogAppendInfo(
        first_offset=first_offset,
        last_offset=last_offset,
        last_leader_epoch=last_leader_epoch
        if last_leader_epoch is not None and last_leader_epoch >= 0
        else None,
        max_timestamp=max_timestamp,
        shallow_offset_of_max_timestamp=shallow_offset_of_max,
        log_append_time=-1,
        log_start_offset=log_start_offset,
        source_compression=source_compression,
        target_compression=source_compression,
        valid_bytes=valid_bytes,
        last_offset_of_first_batch=last_offset_of_first_batch,
        shallow_count=shallow_count,
        offsets_monotonic=monotonic,
    )


@dataclass
class ValidationResult:
    """The leader's view of an append after validation and offset assignment."""

    log_append_time: int
    validated_records: MemoryRecords
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    message_size_maybe_changed: bool
    num_records: int
    next_offset: int


def _check_batch(batch: RecordBatch, origin: AppendOrigin, tp: str) -> None:
    if origin is AppendOrigin.CLIENT:
        if batch.magic >= MAGIC_V2:
            count_from_offsets = batch.last_offset - batch.base_offset + 1
            if count_from_offsets <= 0:
                raise InvalidRecordError(
                    f"batch has an invalid offset range: [{batch.base_offset}, {batch.last_offset}] in topic partition {tp}"
                )
            count = batch.count or 0
            if count <= 0:
                raise InvalidRecordError(
                    f"invalid reported count for record batch: {count} in topic partition {tp}"
                )
            if count_from_offsets != count:
                raise InvalidRecordError(
                    f"inconsistent batch offset range [{batch.base_offset}, {batch.last_offset}] and count of records "
                    f"{count} in topic partition {tp}"
                )
        if batch.is_control_batch:
            raise InvalidRecordError(
                f"clients are not allowed to write control records in topic partition {tp}"
            )
        if batch.producer_id >= 0 and batch.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence number {batch.base_sequence} in record batch with producerId {batch.producer_id} "
                f"in topic partition {tp}"
            )


def _record_errors(
    timestamps: np.ndarray,
    key_len: np.ndarray,
    offsets_for_msgs: np.ndarray,
    batch_ts_type: TimestampType,
    config: LogConfig,
    now: int,
    tp: str,
) -> tuple[list[tuple[int, str]], bool]:
    """Per-record problems as ``(record index, message)``, and whether any is a timestamp problem."""
    errors: list[tuple[int, str]] = []
    timestamp_problem = False
    topic_ts = config.timestamp_type
    if topic_ts is TimestampType.CREATE_TIME:
        lo = now - config.message_timestamp_before_max_ms
        hi = now + config.message_timestamp_after_max_ms
        bad = np.nonzero((timestamps != -1) & ((timestamps < lo) | (timestamps > hi)))[0]
        for i in bad.tolist():
            errors.append(
                (
                    i,
                    f"Timestamp {int(timestamps[i])} of message with offset {int(offsets_for_msgs[i])} is out "
                    f"of range. The timestamp should be within [{lo}, {hi}]",
                )
            )
        timestamp_problem = bool(len(bad))
    elif batch_ts_type is TimestampType.LOG_APPEND_TIME:
        for i in range(len(timestamps)):
            errors.append(
                (
                    i,
                    "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime.",
                )
            )
        timestamp_problem = bool(len(timestamps))
    if config.compact:
        for i in np.nonzero(key_len < 0)[0].tolist():
            errors.append((i, f"Compacted topic cannot accept message without key in topic partition {tp}."))
    return errors, timestamp_problem


def _raise_record_errors(errors: list[tuple[int, str]], timestamp_problem: bool, tp: str) -> None:
    if not errors:
        return
    detail = "; ".join(f"record {i}: {m}" for i, m in errors[:5])
    inner: KafkaError
    if timestamp_problem:
        inner = InvalidTimestampError(
            f"one or more records have been rejected due to invalid timestamp in {tp}: {detail}"
        )
    else:
        inner = InvalidRecordError(f"one or more records have been rejected in {tp}: {detail}")
    raise RecordValidationError(inner, errors)


def validate_and_assign_offsets(
    records: MemoryRecords,
    *,
    offset: int,
    now: int,
    config: LogConfig,
    source_compression: Compression,
    origin: AppendOrigin,
    partition_leader_epoch: int,
    topic_partition: str,
) -> ValidationResult:
    """Leader validation and offset assignment from ``offset`` (see module doc)."""
    batches = list(records.batches())
    if not batches:
        raise InvalidRecordError(f"record batch with no batches in append to partition {topic_partition}")
    first = batches[0]
    # Compression.NONE is falsy (an IntEnum 0): compare with None, never ``or``.
    topic_codec = config.target_compression
    target = source_compression if topic_codec is None else topic_codec
    if first.is_control_batch:
        target = Compression.NONE  # markers are never compressed
    if (source_compression is not Compression.NONE or first.magic >= MAGIC_V2) and len(batches) > 1:
        raise InvalidRecordError(
            "compressed outer record has more than one batch"
            if source_compression is not Compression.NONE
            else f"expected exactly one batch in a v2 append to {topic_partition}, found {len(batches)}"
        )
    for batch in batches:
        if batch.magic != first.magic:
            raise InvalidRecordError(
                f"all batches in the append to {topic_partition} must have the same magic"
            )
        _check_batch(batch, origin, topic_partition)
    in_place = all(isinstance(b, DefaultRecordBatch) for b in batches) and target is source_compression
    if in_place and source_compression is Compression.NONE:
        return _assign_in_place(records, offset, now, config, partition_leader_epoch, topic_partition)
    return _rebuild(
        batches, offset, now, config, target, partition_leader_epoch, topic_partition, source_compression
    )


def _record_arrays(batch: RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(timestamps as Kafka reads them, key lengths (-1 null), offset deltas) of every record of a batch.

    v2 batches go through the record kernel (no ``Record`` objects); legacy entries are decoded.
    """
    if isinstance(batch, DefaultRecordBatch):
        indexed = batch.record_index()
        if indexed is None:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        idx = indexed[1]
        return idx.timestamps, idx.key_len, idx.offsets - batch.base_offset
    recs = list(batch.records())
    return (
        np.array([r.timestamp for r in recs], dtype=np.int64),
        np.array([-1 if r.key is None else len(r.key) for r in recs], dtype=np.int64),
        np.array([r.offset - batch.base_offset for r in recs], dtype=np.int64),
    )


def _assign_in_place(
    records: MemoryRecords,
    offset: int,
    now: int,
    config: LogConfig,
    ple: int,
    tp: str,
) -> ValidationResult:
    if records.buffer.readonly:
        records = MemoryRecords(bytearray(records.buffer))
    batches = [b for b in records.batches() if isinstance(b, DefaultRecordBatch)]
    max_timestamp = -1
    shallow_offset_of_max = -1
    counter = offset
    total = 0
    topic_ts = config.timestamp_type
    for batch in batches:
        timestamps, key_len, _deltas = _record_arrays(batch)
        n = len(timestamps)
        msg_offsets = np.arange(counter, counter + n, dtype=np.int64)
        errors, ts_problem = _record_errors(
            timestamps, key_len, msg_offsets, batch.timestamp_type, config, now, tp
        )
        _raise_record_errors(errors, ts_problem, tp)
        batch_max = int(timestamps.max()) if n else -1
        counter += n
        total += n
        batch.set_last_offset(counter - 1)
        batch.set_partition_leader_epoch(ple)
        if topic_ts is TimestampType.LOG_APPEND_TIME:
            batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, now)
        else:
            batch.set_max_timestamp(topic_ts, batch_max)
        if batch_max > max_timestamp:
            max_timestamp = batch_max
            shallow_offset_of_max = counter - 1
    if topic_ts is TimestampType.LOG_APPEND_TIME:
        max_timestamp = now
        shallow_offset_of_max = counter - 1
    return ValidationResult(
        now if topic_ts is TimestampType.LOG_APPEND_TIME else -1,
        records,
        max_timestamp,
        shallow_offset_of_max,
        False,
        total,
        counter,
    )


def _rebuild(
    batches: list[RecordBatch],
    offset: int,
    now: int,
    config: LogConfig,
    target: Compression,
    ple: int,
    tp: str,
    source: Compression,
) -> ValidationResult:
    first = batches[0]
    topic_ts = config.timestamp_type
    in_place_compressed = isinstance(first, DefaultRecordBatch) and target is source
    arrays = [_record_arrays(b) for b in batches]
    timestamps = np.concatenate([a[0] for a in arrays])
    key_len = np.concatenate([a[1] for a in arrays])
    n = len(timestamps)
    msg_offsets = np.arange(offset, offset + n, dtype=np.int64)
    errors, ts_problem = _record_errors(
        timestamps, key_len, msg_offsets, first.timestamp_type, config, now, tp
    )
    sequential = np.array_equal(arrays[0][2], np.arange(n, dtype=np.int64))
    if isinstance(first, DefaultRecordBatch) and first.is_compressed and not sequential:
        raise InvalidRecordError(
            f"inner record offsets of the compressed batch in the append to {tp} are not sequential"
        )
    _raise_record_errors(errors, ts_problem, tp)
    max_ts = int(timestamps.max()) if n else -1
    if in_place_compressed:
        data = bytearray(first.to_bytes())
        out = MemoryRecords(data)
        (batch,) = list(out.batches())
        assert isinstance(batch, DefaultRecordBatch)
        batch.set_last_offset(offset + n - 1)
        batch.set_partition_leader_epoch(ple)
        if topic_ts is TimestampType.LOG_APPEND_TIME:
            batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, now)
        else:
            batch.set_max_timestamp(topic_ts, max_ts)
        return ValidationResult(
            now if topic_ts is TimestampType.LOG_APPEND_TIME else -1,
            out,
            now if topic_ts is TimestampType.LOG_APPEND_TIME else max_ts,
            offset + n - 1,
            False,
            n,
            offset + n,
        )
    builder = MemoryRecordsBuilder(
        base_offset=offset,
        compression=target,
        compression_level=config.compression_level(target),
        timestamp_type=topic_ts,
        log_append_time=now,
        producer_id=first.producer_id,
        producer_epoch=first.producer_epoch,
        base_sequence=first.base_sequence,
        is_transactional=first.is_transactional,
        partition_leader_epoch=ple,
    )
    # Re-encoding (another codec, or a legacy batch) is the only path that needs Record objects.
    recs = [r for b in batches for r in b.records()]
    for i, r in enumerate(recs):
        builder.append_with_offset(offset + i, r.timestamp, r.key, r.value, r.headers)
    out = builder.build()
    max_timestamp = now if topic_ts is TimestampType.LOG_APPEND_TIME else max_ts
    return ValidationResult(
        now if topic_ts is TimestampType.LOG_APPEND_TIME else -1,
        out,
        max_timestamp,
        offset + n - 1,
        True,
        n,
        offset + n,
    )
