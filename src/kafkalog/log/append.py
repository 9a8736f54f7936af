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

from typing import TYPE_CHECKING, Any

from kafkalog.errors import RecordBatchTooLargeError, RecordTooLargeError, UnexpectedAppendOffsetError
from kafkalog.log.producer_state import BatchMetadata, CompletedTxn, ProducerAppendInfo
from kafkalog.log.types import AppendOrigin, LogAppendInfo
from kafkalog.log.validator import analyze_and_validate_records, validate_and_assign_offsets
from kafkalog.records import MemoryRecords
from kafkalog.records.batch import MAGIC_V2
from kafkalog.storage import LogOffsetMetadata

if TYPE_CHECKING:
    from kafkalog.log.log import Log

__all__ = ["UNKNOWN_OFFSET", "analyze_producer_state", "append"]

UNKNOWN_OFFSET = -1


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
            info.last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, valid
        )
        if log._hw_follows_leo:
            log._update_high_watermark_metadata(log.log_end_offset_metadata)
        else:
            log._update_high_watermark_with_log_end_offset()
        for pinfo in producer_infos.values():
            log.producer_state.update(pinfo)
        for txn in completed:
            lso = log.producer_state.last_stable_offset(txn)
            segment.update_txn_index(txn, lso)
            log.producer_state.complete_txn(txn)
        log.producer_state.update_map_end_offset(info.last_offset + 1)
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
