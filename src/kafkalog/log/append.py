"""The append path of a :class:`~kafkalog.log.log.Log` (Kafka's ``UnifiedLog.append``), through its public
names only.

Invariants owned here, in the order the steps run: records are validated (and, for a leader, given
offsets) before anything is touched, so a rejected append changes nothing; under the log's lock the
producer state is checked (a duplicate of one of a producer's last five batches returns the original
offsets without writing); leader epochs are assigned from the batches' partition leader epochs; the log
rolls when the append would not fit (``Log.maybe_roll``, asked once; the producer state is analysed again
against the new segment, as Kafka analyses it after the roll); the bytes are written; only then do the
producer state, the transaction index (aborted transactions with their last stable offset), the high
watermark (when it follows the log end offset) and the first unstable offset
(:meth:`Watermarks.after_append <kafkalog.log.watermarks.Watermarks.after_append>`) and the flush policy
(``flush.messages``) move.

Every path ends in one locked commit (:func:`_locked_commit`): the general path (:func:`append`) and the
two fast paths for a single plain batch (:func:`try_append_fast` for a produced batch,
:func:`try_append_built` for one :meth:`Log.append <kafkalog.log.log.Log.append>` just built). A fast path
only checks, on the records and against the log's :class:`~kafkalog.log.config.AppendSettings`, what the
general path's validation would; whatever it is not sure of it declines (returns None, nothing done) and
the general path decides.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import crc32c
import numpy as np

from kafkalog.errors import (
    KafkaStorageError,
    NotRegularFileError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from kafkalog.log.producer_state import BatchMetadata, CompletedTxn, ProducerAppendInfo
from kafkalog.log.types import AppendOrigin, LogAppendInfo, plain_append_info
from kafkalog.log.validator import analyze_and_validate_records, validate_and_assign_offsets
from kafkalog.records import MemoryRecords
from kafkalog.records.batch import MAGIC_V2, DefaultRecordBatch
from kafkalog.records.framing import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
)
from kafkalog.records.kernels import record_stats_kernel as _record_stats
from kafkalog.records.memory_records import records_of_bytearray
from kafkalog.storage import LogOffsetMetadata, LogSegment
from kafkalog.storage.types import UNKNOWN_OFFSET

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = [
    "UNKNOWN_OFFSET",
    "analyze_producer_state",
    "append",
    "try_append_built",
    "try_append_fast",
]

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp,
#: maxTimestamp, producerId, producerEpoch, baseSequence, recordCount: the 61-byte v2 batch header.
_V2_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")


#: compression (bits 0-2), timestamp type (3), control (5), delete horizon (6); transactional (4) is allowed
_NOT_PLAIN: Final = 0x6F
_LOG_APPEND_TIME_BIT: Final = 0x08
_frombuffer: Final = np.frombuffer
#: an enum member looked up once (``AppendOrigin.CLIENT`` costs a descriptor call on every use)
_CLIENT: Final = AppendOrigin.CLIENT
_NO_BATCHES: Final[tuple[Any, ...]] = ()
_U8: Final = np.uint8


def try_append_fast(log: Log, records: MemoryRecords, leader_epoch: int) -> LogAppendInfo | None:
    """Append a leader's single plain batch (see module doc), or return None (nothing done) for the general
    path."""
    buf = records.buffer
    size = len(buf)
    if size < RECORD_BATCH_OVERHEAD:
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
    settings = log.local_log.append_settings
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
    if crc32c.crc32c(buf[ATTRIBUTES_OFFSET:]) != crc:
        return None
    # a read-only uint8 view, as ``as_uint8`` makes (the kernel is compiled for one array type), in a third of
    # its time: ``buf`` is always a writable byte view here
    array = _frombuffer(buf.toreadonly(), _U8)
    err, _pos, lo, hi, top, null_keys, _sequential = _record_stats(
        array, RECORD_BATCH_OVERHEAD, size, count, base_ts
    )
    if err or (null_keys and settings.compact):
        return None
    now = log.time.milliseconds()
    if not settings.log_append_time and (lo < now - settings.before_ms or hi > now + settings.after_ms):
        return None
    return _locked_commit(log, records, _CLIENT, leader_epoch, header, int(top), now, None)


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
    settings = log.local_log.append_settings
    if (
        not settings.eligible
        or size > settings.max_message_bytes
        or size > settings.segment_bytes
        or (null_keys and settings.compact)
    ):
        return None
    if not settings.log_append_time and (lo < now - settings.before_ms or hi > now + settings.after_ms):
        return None
    # the header fields _assign_plain reads: no producer, no client epoch, attributes 0, max timestamp ``hi``
    header = (0, size - 12, -1, MAGIC_V2, 0, 0, count - 1, lo, hi, -1, -1, -1, count)
    return _locked_commit(log, records_of_bytearray(buf), _CLIENT, leader_epoch, header, hi, now, None)


def append(
    log: Log,
    records: MemoryRecords,
    origin: AppendOrigin,
    *,
    validate_and_assign: bool,
    leader_epoch: int,
    ignore_record_size: bool,
) -> LogAppendInfo:
    """The general path: validate ``records`` (Kafka's ``analyzeAndValidateRecords``), then commit them under
    the lock, assigning offsets from the log end offset when ``validate_and_assign`` (a leader) or checking
    that the batches' own offsets do not go back (a follower)."""
    info = analyze_and_validate_records(
        records,
        origin=origin,
        config=log.config,
        topic_partition=str(log.topic_partition),
        log_start_offset=log.log_start_offset,
        ignore_record_size=ignore_record_size,
        require_offsets_monotonic=not validate_and_assign,
        leader_epoch=leader_epoch,
    )
    if info.valid_bytes <= 0:
        return info
    valid = records if info.valid_bytes == records.size_in_bytes else records.slice(0, info.valid_bytes)
    general = _General(info, validate_and_assign, ignore_record_size)
    return _locked_commit(log, valid, origin, leader_epoch, (), 0, 0, general)


class _General:
    """What the general path hands the locked commit: the validation's answer and how to assign offsets."""

    __slots__ = ("ignore_record_size", "info", "validate_and_assign")

    def __init__(self, info: LogAppendInfo, validate_and_assign: bool, ignore_record_size: bool) -> None:
        self.info = info
        self.validate_and_assign = validate_and_assign
        self.ignore_record_size = ignore_record_size


def _locked_commit(
    log: Log,
    records: MemoryRecords,
    origin: AppendOrigin,
    leader_epoch: int,
    header: tuple[Any, ...],
    top: int,
    now: int,
    general: _General | None,
) -> LogAppendInfo:
    """The one locked commit of every append path, in the order of the module doc: offsets assigned, then
    producer-state checks, leader epochs, roll (asked once), write, producer state and transaction index,
    watermarks, flush policy.

    A fast path passes its plain batch's ``header`` (offsets are assigned in place), ``top`` (its largest
    record timestamp) and ``now`` (the time its checks ran at); the general path passes ``general``. An
    ``OSError`` takes the log dir offline (``KafkaStorageError``), as ``LocalLog.io`` does (inline here: a
    context manager per append costs more). One function, not several: this runs on every append."""
    local = log.local_log
    with log.lock:
        if local.offline:
            raise local.offline_error()
        try:
            if local.buffers_closed:
                local.check_if_closed()
            if log.metadata_flush_pending:
                log.maybe_flush_metadata_file()
            batches: Sequence[Any]
            epoch: int | None
            roll_now: int | None
            if general is None:
                info = _assign_plain(log, records, header, leader_epoch, now, top)
                size = header[1] + 12
                # An idempotent or transactional producer's batch gets Kafka's producer-state checks, as the
                # general path runs them (a retried duplicate returns the original offsets, writes nothing).
                batches = [DefaultRecordBatch(records.buffer, 0)] if header[9] >= 0 else _NO_BATCHES
                epoch = leader_epoch  # the one batch's leader epoch
                roll_now = now
            else:
                info = general.info
                records, batches = _assign_general(log, records, info, origin, leader_epoch, general)
                size = records.size_in_bytes
                epoch = None  # each batch's own
                roll_now = None  # the clock, now
            producer_state = log.producer_state
            producer_infos: dict[int, ProducerAppendInfo] = {}
            completed: list[CompletedTxn] = []
            if batches:
                producer_infos, completed, duplicate = analyze_producer_state(log, batches, origin)
                if duplicate is not None:
                    info.first_offset = duplicate.first_offset
                    info.last_offset = duplicate.last_offset
                    info.log_append_time = duplicate.timestamp
                    info.log_start_offset = log.log_start_offset
                    info.duplicate = True
                    return info
            if epoch is not None:
                if epoch >= 0:
                    latest = log.leader_epoch_cache.latest_entry
                    offset = info.first_offset
                    if latest is None or latest.epoch != epoch or latest.start_offset > offset:
                        log.maybe_assign_epoch_start_offset(epoch, offset)
            else:
                for batch in batches:
                    if batch.magic >= MAGIC_V2:
                        if batch.partition_leader_epoch >= 0:
                            log.maybe_assign_epoch_start_offset(
                                batch.partition_leader_epoch, batch.base_offset
                            )
                    elif not log.leader_epoch_cache.is_empty:
                        log.logger.warning(
                            "Clearing leader epoch cache after unexpected append with message format v%d",
                            batch.magic,
                        )
                        log.leader_epoch_cache.clear_and_flush()
            segment: LogSegment
            if batches:
                before_roll = local.active_segment
                segment = log.maybe_roll(size, info, roll_now)
                if segment is not before_roll:
                    # Checked before the roll so that a rejected append changes nothing; analysed again after it so
                    # a transaction's first offset metadata points into the segment the batches go to (Kafka rolls
                    # first).
                    producer_infos, completed, _ = analyze_producer_state(log, batches, origin)
            else:
                segment = log.maybe_roll(size, info, roll_now)
            last = info.last_offset
            log_end = local.append(
                last, info.max_timestamp, info.shallow_offset_of_max_timestamp, records, segment
            )
            if producer_infos:
                for pinfo in producer_infos.values():
                    producer_state.update(pinfo)
                for txn in completed:
                    lso = producer_state.last_stable_offset(txn)
                    segment.update_txn_index(txn, lso)
                    producer_state.complete_txn(txn)
            producer_state.update_map_end_offset(last + 1)
            # After the producer state moved: a transaction this append completed is then below the high
            # watermark at once, so the last stable offset passes its marker now, not at the next append.
            info.log_start_offset = log.watermarks.after_append(log_end)
            unflushed = last + 1 - local.recovery_point  # local.unflushed_messages, inline
            if unflushed >= local.append_settings.flush_messages:
                log.flush()
            return info
        except NotRegularFileError as exc:  # a file swapped for a link or FIFO under a live log: an I/O error
            raise local.io_failed(_io_message(log), exc) from exc
        except KafkaStorageError:
            raise
        except OSError as exc:
            raise local.io_failed(_io_message(log), exc) from exc


def _io_message(log: Log) -> str:
    return f"error while appending records to {log.topic_partition} in dir {log.dir.parent}"


def _assign_plain(
    log: Log, records: MemoryRecords, header: tuple[Any, ...], leader_epoch: int, now: int, top: int
) -> LogAppendInfo:
    """A fast path's batch, which passed every check: offsets from the log end offset, the leader epoch and
    (for LogAppendTime, or a max timestamp the producer got wrong) the timestamp and CRC, in place; returns
    its :class:`LogAppendInfo`."""
    buf = records.buffer
    size = len(buf)
    client_epoch, attrs, max_ts, count = header[2], header[5], header[8], header[12]
    local = log.local_log
    offset = local.log_end_offset
    last = offset + count - 1
    _I64.pack_into(buf, 0, offset)
    _I32.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
    log_append_time = local.append_settings.log_append_time
    if log_append_time:
        max_timestamp = now
        shallow_of_max = last
        _I16.pack_into(buf, ATTRIBUTES_OFFSET, attrs | _LOG_APPEND_TIME_BIT)
        _I64.pack_into(buf, MAX_TIMESTAMP_OFFSET, now)
        _U32.pack_into(buf, CRC_OFFSET, crc32c.crc32c(buf[ATTRIBUTES_OFFSET:]))
    else:
        max_timestamp = top if top > -1 else -1
        shallow_of_max = last if top > -1 else -1
        if max_ts != top:
            _I64.pack_into(buf, MAX_TIMESTAMP_OFFSET, top)
            _U32.pack_into(buf, CRC_OFFSET, crc32c.crc32c(buf[ATTRIBUTES_OFFSET:]))
    return plain_append_info(
        offset,
        last,
        client_epoch if client_epoch >= 0 else None,
        max_timestamp,
        shallow_of_max,
        now if log_append_time else -1,
        -1,  # the log start offset: _locked_commit sets it on every answer
        size,
        count,
    )


def _assign_general(
    log: Log,
    valid: MemoryRecords,
    info: LogAppendInfo,
    origin: AppendOrigin,
    leader_epoch: int,
    plan: _General,
) -> tuple[MemoryRecords, list[Any]]:
    """The general path's part under the lock: a leader's offsets (Kafka's ``validateMessagesAndAssignOffsets``,
    which may convert or recompress) or a follower's offset check, then the size limits; returns the records
    to write and their batches."""
    tp = str(log.topic_partition)
    config = log.config
    if plan.validate_and_assign:
        offset = log.log_end_offset
        info.first_offset = offset
        now = log.time.milliseconds()
        result = validate_and_assign_offsets(
            valid,
            offset=offset,
            now=now,
            config=config,
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
        topic_codec = config.target_compression
        info.target_compression = info.source_compression if topic_codec is None else topic_codec
        if config.timestamp_type.kafka_name == "LogAppendTime":
            info.log_append_time = result.log_append_time
        if not plan.ignore_record_size and result.message_size_maybe_changed:
            for batch in valid.batches():
                if batch.size_in_bytes > config.max_message_bytes:
                    raise RecordTooLargeError(
                        f"message batch size is {batch.size_in_bytes} bytes in append to partition {tp} which "
                        f"exceeds the maximum configured size of {config.max_message_bytes}"
                    )
    else:
        first = info.first_offset if info.first_offset != UNKNOWN_OFFSET else info.last_offset_of_first_batch
        if first < log.log_end_offset:
            first_batch = next(iter(valid.batches()))
            raise UnexpectedAppendOffsetError(
                f"unexpected offset in append to {tp}. First offset {first} is less than the next offset "
                f"{log.log_end_offset}. Log start offset = {log.log_start_offset}",
                first_batch.base_offset,
                info.last_offset,
            )
    batches = list(valid.batches())
    if not plan.validate_and_assign:
        info.num_messages = sum(b.count or 0 for b in batches)
    if valid.size_in_bytes > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"message batch size is {valid.size_in_bytes} bytes in append to partition {tp}, which exceeds the "
            f"maximum configured segment size of {config.segment_bytes}"
        )
    return valid, batches


def analyze_producer_state(
    log: Log, batches: Sequence[Any], origin: AppendOrigin
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
