"""The append path of a :class:`~kafkalog.log.log.Log` (Kafka's ``UnifiedLog.append``).

Invariants owned here, in the order the steps run: records are validated (and, for a leader, given
offsets) before anything is touched, so a rejected append changes nothing; under the log's lock the
producer state is checked (a duplicate of one of a producer's last five batches returns the original
offsets without writing); leader epochs are assigned from the batches' partition leader epochs; the log
rolls when the append would not fit (the producer state is analysed again against the new segment, as Kafka
analyses it after the roll); the bytes are written; only then do the high watermark (when it follows
the log end offset), the producer state, the transaction index (aborted transactions with their last stable
offset), the first unstable offset and the flush policy (``flush.messages``) move.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, Final

import crc32c
import numpy as np

from kafkalog.errors import (
    KafkaStorageError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalog.log.producer_state import BatchMetadata, CompletedTxn, ProducerAppendInfo
from kafkalog.log.types import AppendOrigin, LogAppendInfo, plain_append_info
from kafkalog.log.validator import analyze_and_validate_records, validate_and_assign_offsets
from kafkalog.records import Compression, MemoryRecords, TimestampType
from kafkalog.records.batch import MAGIC_V2, DefaultRecordBatch
from kafkalog.records.kernels import record_stats_kernel as _record_stats
from kafkalog.records.memory_records import records_of_bytearray
from kafkalog.storage import LogOffsetMetadata

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = [
    "UNKNOWN_OFFSET",
    "analyze_producer_state",
    "append",
    "try_append_built",
    "try_append_fast",
]

UNKNOWN_OFFSET = -1

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
#: maxTimestamp, producerId, producerEpoch, baseSequence, recordCount: the 61-byte v2 batch header.
_V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")
_MAX_TIMESTAMP_AT: Final = 35
_ATTRIBUTES_AT: Final = 21
_PLE_AT: Final = 12
#: compression (bits 0-2), timestamp type (3), control (5), delete horizon (6); transactional (4) is allowed
_NOT_PLAIN: Final = 0x6F
_LOG_APPEND_TIME_BIT: Final = 0x08
_frombuffer: Final = np.frombuffer
_U8: Final = np.uint8


class _FastSettings:
    """What the fast path reads of a :class:`LogConfig`, computed once per config object."""

    __slots__ = (
        "_io_dir",
        "_io_message",
        "after_ms",
        "before_ms",
        "compact",
        "config",
        "eligible",
        "flush_messages",
        "log_append_time",
        "max_message_bytes",
        "max_segment_ms",
        "segment_bytes",
    )

    def __init__(self, config: Any) -> None:
        self.config = config
        target = config.target_compression
        self.eligible = target is None or target is Compression.NONE
        self.log_append_time = config.timestamp_type is TimestampType.LOG_APPEND_TIME
        self.before_ms = config.message_timestamp_before_max_ms
        self.after_ms = config.message_timestamp_after_max_ms
        self.compact = config.compact
        self.max_message_bytes = config.max_message_bytes
        self.segment_bytes = config.segment_bytes
        self.max_segment_ms = config.max_segment_ms
        self.flush_messages = config.flush_messages
        self._io_dir: Any = None
        self._io_message = ""

    def io_message(self, log: Log) -> str:
        """The I/O error message of an append to ``log`` (built again only when the directory changes)."""
        directory = log.local_log.dir
        if directory is not self._io_dir:
            self._io_dir = directory
            self._io_message = (
                f"error while appending records to {log.topic_partition} in dir {directory.parent}"
            )
        return self._io_message


def try_append_fast(log: Log, records: MemoryRecords, leader_epoch: int) -> LogAppendInfo | None:
    """Append a leader's single plain batch (see module doc), or return None (nothing done) for the general
    path."""
    buf = records.buffer
    size = len(buf)
    if size < 61:
        return None
    if buf.readonly:  # offsets are assigned in place, as the general path does on a copy
        records = MemoryRecords(bytearray(buf))
        buf = records.buffer
    header = _V2_HEADER.unpack_from(buf, 0)
    (base, length, _client_epoch, magic, crc, attrs, last_delta, base_ts, _max_ts, pid, _pe, seq, count) = (
        header
    )
    if magic != MAGIC_V2 or length + 12 != size or attrs & _NOT_PLAIN or base != 0 or (pid >= 0 and seq < 0):
        return None
    settings = log._fast_settings
    if settings is None or settings.config is not log.local_log.config:
        settings = _refresh_settings(log)
    if (
        not settings.eligible
        or count <= 0
        or count != last_delta + 1
        or size > settings.max_message_bytes
        or size > settings.segment_bytes
    ):
        return None
    # Every check of the fast path on the records (inline: this runs on every produced batch): CRC, record
    # format, null keys of a compacted topic, CreateTime bounds; any failure leaves it to the general path.
    if crc32c.crc32c(buf[_ATTRIBUTES_AT:]) != crc:
        return None
    # a read-only uint8 view, as ``as_uint8`` makes (the kernel is compiled for one array type), in a third of
    # its time: ``buf`` is always a writable byte view here
    array = _frombuffer(buf.toreadonly(), _U8)
    err, _pos, lo, hi, top, null_keys, _sequential = _record_stats(array, 61, size, count, base_ts)
    if err or (null_keys and settings.compact):
        return None
    now = log.time.milliseconds()
    if not settings.log_append_time and (lo < now - settings.before_ms or hi > now + settings.after_ms):
        return None
    return _locked_commit(log, records, header, settings, leader_epoch, now, int(top))


def try_append_built(
    log: Log, built: tuple[bytearray, int, int, int, int], leader_epoch: int, now: int
) -> LogAppendInfo | None:
    """Append a batch that :func:`kafkalog.records.simple.build_plain_batch` just built for
    :meth:`Log.append <kafkalog.log.log.Log.append>`, or return None (nothing done) for the general path.

    The bytes are kafkalog's own, so their CRC and record format are not checked again; the topic's checks
    (codec, sizes, keys of a compacted topic, timestamp bounds, against ``now``: the time the batch was built
    at) are, and anything they would reject goes to the general path, which raises Kafka's error."""
    buf, count, lo, hi, null_keys = built
    size = len(buf)
    settings = log._fast_settings
    if settings is None or settings.config is not log.local_log.config:
        settings = _refresh_settings(log)
    if (
        not settings.eligible
        or size > settings.max_message_bytes
        or size > settings.segment_bytes
        or (null_keys and settings.compact)
    ):
        return None
    if not settings.log_append_time and (lo < now - settings.before_ms or hi > now + settings.after_ms):
        return None
    # the header fields _commit reads: no producer, no client epoch, attributes 0, max timestamp ``hi``
    header = (0, size - 12, -1, MAGIC_V2, 0, 0, count - 1, lo, hi, -1, -1, -1, count)
    return _locked_commit(log, records_of_bytearray(buf), header, settings, leader_epoch, now, hi)


def _refresh_settings(log: Log) -> _FastSettings:
    """The settings of the log's current config (callers check ``log._fast_settings`` inline first: a call
    less per append)."""
    settings = _FastSettings(log.local_log.config)
    log._fast_settings = settings
    return settings


def _locked_commit(
    log: Log,
    records: MemoryRecords,
    header: tuple[Any, ...],
    settings: _FastSettings,
    leader_epoch: int,
    now: int,
    top: int,
) -> LogAppendInfo:
    """:func:`_commit` under the log's lock; an ``OSError`` takes the log dir offline (``KafkaStorageError``)."""
    local = log.local_log
    with log.lock:
        if local.offline:
            raise local._offline_error()
        try:
            return _commit(log, records, header, settings, leader_epoch, now, top)
        except KafkaStorageError:
            raise
        except OSError as exc:
            raise local._io_failed(settings.io_message(log), exc) from exc


def _commit(
    log: Log,
    records: MemoryRecords,
    header: tuple[Any, ...],
    settings: _FastSettings,
    leader_epoch: int,
    now: int,
    top: int,
) -> LogAppendInfo:
    """The fast path's locked part, for a batch that passed every check: offsets, producer state, epochs,
    roll, write, offsets and flush policy."""
    buf = records.buffer
    size = len(buf)
    client_epoch, attrs, max_ts, pid, count = header[2], header[5], header[8], header[9], header[12]
    local = log.local_log
    if local.buffers_closed:
        local.check_if_closed()
    if log._pending_metadata_flush:
        log._maybe_flush_metadata_file()
    offset = local.log_end_offset
    last = offset + count - 1
    _I64.pack_into(buf, 0, offset)
    _I32.pack_into(buf, _PLE_AT, leader_epoch)
    log_append_time = settings.log_append_time
    if log_append_time:
        max_timestamp = now
        shallow_of_max = last
        _I16.pack_into(buf, _ATTRIBUTES_AT, attrs | _LOG_APPEND_TIME_BIT)
        _I64.pack_into(buf, _MAX_TIMESTAMP_AT, now)
        _U32.pack_into(buf, 17, crc32c.crc32c(buf[_ATTRIBUTES_AT:]))
    else:
        max_timestamp = top if top > -1 else -1
        shallow_of_max = last if top > -1 else -1
        if max_ts != top:
            _I64.pack_into(buf, _MAX_TIMESTAMP_AT, top)
            _U32.pack_into(buf, 17, crc32c.crc32c(buf[_ATTRIBUTES_AT:]))
    info = plain_append_info(
        offset,
        last,
        client_epoch if client_epoch >= 0 else None,
        max_timestamp,
        shallow_of_max,
        now if log_append_time else -1,
        log._log_start_offset,
        size,
        count,
    )
    batches: list[Any] = []
    producer_infos: dict[int, ProducerAppendInfo] = {}
    if pid >= 0:
        # An idempotent or transactional producer's batch: Kafka's producer-state checks, as the general
        # path runs them (a retried duplicate returns the original offsets, writes nothing).
        batches = [DefaultRecordBatch(buf, 0)]
        producer_infos, _completed, duplicate = analyze_producer_state(log, batches, AppendOrigin.CLIENT)
        if duplicate is not None:
            info.first_offset = duplicate.first_offset
            info.last_offset = duplicate.last_offset
            info.log_append_time = duplicate.timestamp
            info.duplicate = True
            return info
    if leader_epoch >= 0:
        latest = log.leader_epoch_cache.latest_entry
        if latest is None or latest.epoch != leader_epoch or latest.start_offset > offset:
            log.maybe_assign_epoch_start_offset(leader_epoch, offset)
    active = local.active_segment
    if active.should_roll_for(
        settings.max_segment_ms, settings.segment_bytes, max_timestamp, last, size, now
    ):
        active = log._maybe_roll(size, info)
        if batches:  # analysed again against the new segment, as the general path does
            producer_infos, _completed, _ = analyze_producer_state(log, batches, AppendOrigin.CLIENT)
    local.append(last, max_timestamp, shallow_of_max, records, active)
    producer_state = log.producer_state
    if producer_infos:
        for pinfo in producer_infos.values():
            producer_state.update(pinfo)
    if producer_state.has_unresolved_transactions:
        if log._hw_follows_leo:
            log._update_high_watermark_metadata(local.log_end_offset_metadata)
        else:
            log._update_high_watermark_with_log_end_offset()
        producer_state.update_map_end_offset(last + 1)
        log._maybe_increment_first_unstable_offset()
    else:
        # No open or unreplicated transaction: the first unstable offset stays None and moving the high
        # watermark (always forward here: it never passes the old log end offset) touches nothing else.
        if log._hw_follows_leo:
            log._high_watermark = local.log_end_offset_metadata
        producer_state.update_map_end_offset(last + 1)
        log._first_unstable_offset = None
    info.log_start_offset = log._log_start_offset
    if last + 1 - local.recovery_point >= settings.flush_messages:  # local.unflushed_messages
        log.flush()
    return info


def append(
    log: Log,
    records: MemoryRecords,
    origin: AppendOrigin,
    *,
    validate_and_assign: bool,
    leader_epoch: int,
    ignore_record_size: bool,
) -> LogAppendInfo:
    tp = str(log.topic_partition)
    info = analyze_and_validate_records(
        records,
        origin=origin,
        config=log.config,
        topic_partition=tp,
        log_start_offset=log.log_start_offset,
        ignore_record_size=ignore_record_size,
        require_offsets_monotonic=not validate_and_assign,
        leader_epoch=leader_epoch,
    )
    if info.valid_bytes <= 0:
        return info
    valid = records if info.valid_bytes == records.size_in_bytes else records.slice(0, info.valid_bytes)
    with log.lock, log.local_log.io(f"error while appending records to {tp} in dir {log.dir.parent}"):
        log.local_log.check_if_closed()
        log._maybe_flush_metadata_file()
        if validate_and_assign:
            offset = log.local_log.log_end_offset
            info.first_offset = offset
            now = log.time.milliseconds()
            result = validate_and_assign_offsets(
                valid,
                offset=offset,
                now=now,
                config=log.config,
                source_compression=info.source_compression,
                origin=origin,
                partition_leader_epoch=leader_epoch,
                topic_partition=tp,
            )
            valid = result.validated_records
            info.max_timestamp = result.max_timestamp
            info.shallow_offset_of_max_timestamp = result.shallow_offset_of_max_timestamp
            info.last_offset = result.next_offset - 1
            info.num_messages = result.num_records
            topic_codec = log.config.target_compression
            info.target_compression = info.source_compression if topic_codec is None else topic_codec
            if log.config.timestamp_type.kafka_name == "LogAppendTime":
                info.log_append_time = result.log_append_time
            if not ignore_record_size and result.message_size_maybe_changed:
                for batch in valid.batches():
                    if batch.size_in_bytes > log.config.max_message_bytes:
                        raise RecordTooLargeError(
                            f"message batch size is {batch.size_in_bytes} bytes in append to partition {tp} which "
                            f"exceeds the maximum configured size of {log.config.max_message_bytes}"
                        )
        else:
            first = (
                info.first_offset if info.first_offset != UNKNOWN_OFFSET else info.last_offset_of_first_batch
            )
            if first < log.local_log.log_end_offset:
                first_batch = next(iter(valid.batches()))
                raise UnexpectedAppendOffsetError(
                    f"unexpected offset in append to {tp}. First offset {first} is less than the next offset "
                    f"{log.local_log.log_end_offset}. Log start offset = {log.log_start_offset}",
                    first_batch.base_offset,
                    info.last_offset,
                )
        batches = list(valid.batches())
        if not validate_and_assign:
            info.num_messages = sum(b.count or 0 for b in batches)
        if valid.size_in_bytes > log.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"message batch size is {valid.size_in_bytes} bytes in append to partition {tp}, which exceeds the "
                f"maximum configured segment size of {log.config.segment_bytes}"
            )
        producer_infos, completed, duplicate = analyze_producer_state(log, batches, origin)
        if duplicate is not None:
            info.first_offset = duplicate.first_offset
            info.last_offset = duplicate.last_offset
            info.log_append_time = duplicate.timestamp
            info.log_start_offset = log.log_start_offset
            info.duplicate = True
            return info
        for batch in batches:
            if batch.magic >= MAGIC_V2:
                if batch.partition_leader_epoch >= 0:
                    log.maybe_assign_epoch_start_offset(batch.partition_leader_epoch, batch.base_offset)
            elif not log.leader_epoch_cache.is_empty:
                log.logger.warning(
                    "Clearing leader epoch cache after unexpected append with message format v%d",
                    batch.magic,
                )
                log.leader_epoch_cache.clear_and_flush()
        before_roll = log.local_log.active_segment
        segment = log._maybe_roll(valid.size_in_bytes, info)
        if segment is not before_roll:
            # Checked before the roll so that a rejected append changes nothing; analysed again after it so a
            # transaction's first offset metadata points into the segment the batches go to (Kafka rolls first).
            producer_infos, completed, _ = analyze_producer_state(log, batches, origin)
        log.local_log.append(
            info.last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, valid, segment
        )
        if not log._hw_follows_leo:
            log._update_high_watermark_with_log_end_offset()
        for pinfo in producer_infos.values():
            log.producer_state.update(pinfo)
        for txn in completed:
            lso = log.producer_state.last_stable_offset(txn)
            segment.update_txn_index(txn, lso)
            log.producer_state.complete_txn(txn)
        log.producer_state.update_map_end_offset(info.last_offset + 1)
        if log._hw_follows_leo:
            # After the producer state moved: a transaction this append completed is then below the high
            # watermark at once, so the last stable offset passes its marker now, not at the next append.
            log._update_high_watermark_metadata(log.log_end_offset_metadata)
        log._maybe_increment_first_unstable_offset()
        info.log_start_offset = log.log_start_offset
        if log.local_log.unflushed_messages >= log.config.flush_messages:
            log.flush()
        return info


def analyze_producer_state(
    log: Log, batches: list[Any], origin: AppendOrigin
) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
    infos: dict[int, ProducerAppendInfo] = {}
    completed: list[CompletedTxn] = []
    active = log.local_log.active_segment
    position = active.size
    for batch in batches:
        if batch.producer_id >= 0:
            if origin is AppendOrigin.CLIENT:
                entry = log.producer_state.last_entry(batch.producer_id)
                if entry is not None:
                    dup = entry.find_duplicate_batch(batch)
                    if dup is not None:
                        return infos, completed, dup
            first_meta = None
            if batch.is_transactional:
                first_meta = LogOffsetMetadata(batch.base_offset, active.base_offset, position)
            pinfo = infos.get(batch.producer_id)
            if pinfo is None:
                pinfo = log.producer_state.prepare_update(batch.producer_id, origin)
                infos[batch.producer_id] = pinfo
            txn = pinfo.append(batch, first_meta)
            if txn is not None:
                completed.append(txn)
        position += batch.size_in_bytes
    return infos, completed, None
