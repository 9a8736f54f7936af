"""Helpers shared by the cleaner tests: Kafka's ``LogCleanerTest`` fixtures (``makeCleaner``, ``record``,
``keysInLog``, ``offsetsInLog``, ``appendIdempotentAsLeader`` ...) in Python. No tests here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from kafkalog.cleaner.cleaner import Cleaner, LogToClean, Throttler
from kafkalog.cleaner.offset_map import SkimpyOffsetMap
from kafkalog.log import AppendOrigin, Log, LogAppendInfo, LogConfig
from kafkalog.log.names import TopicPartition
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

from .helpers import records

NO_TIMESTAMP = -1
INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
TOMBSTONE_RETENTION_MS = 86_400_000
LARGE_TIMESTAMP = LONG_MAX - TOMBSTONE_RETENTION_MS - 1
#: ``LogCleanerTest.logConfig``: 1 KiB segments and indexes, compacted.
BASE_CONFIG = LogConfig(segment_bytes=1024, segment_index_bytes=1024, cleanup_policy=("compact",))
#: FakeOffsetMap(Int.MaxValue) stand-in: more slots than any of these tests has keys.
BIG = 1 << 16


class FakeOffsetMap(SkimpyOffsetMap):
    """Kafka's test ``FakeOffsetMap``: :meth:`clear` forgets the keys but not the latest offset, so a round
    with nothing dirty still recopies ``[0, previous latest + 1)`` (several ported tests rely on it)."""

    def clear(self) -> None:
        latest = self.latest_offset
        super().clear()
        self.update_latest_offset(latest)


def config(**kwargs: object) -> LogConfig:
    """``LogConfig.fromProps(logConfig.originals, logProps)``."""
    return BASE_CONFIG.replace(**kwargs)


def make_cleaner(
    capacity: int,
    check_done: Callable[[TopicPartition], None] | None = None,
    max_message_size: int = 64 * 1024,
    time: MockTime | None = None,
) -> Cleaner:
    """``makeCleaner``: a map of ``capacity`` slots with load factor 0.75, I/O buffers of ``max_message_size``."""
    kwargs: dict[str, object] = {}
    if check_done is not None:
        kwargs["check_done"] = check_done
    return Cleaner(
        0,
        FakeOffsetMap(slots=min(capacity, BIG)),
        io_buffer_size=max_message_size,
        max_io_buffer_size=max_message_size,
        dup_buffer_load_factor=0.75,
        throttler=Throttler(float("inf")),
        time=time or MockTime(),
        **kwargs,  # type: ignore[arg-type]
    )


def fake_map(keys: Iterable[int | str], offset: int = LONG_MAX) -> SkimpyOffsetMap:
    """``FakeOffsetMap(Int.MaxValue)`` with every key mapped to ``offset``."""
    m = FakeOffsetMap(slots=BIG)
    for k in keys:
        m.put(key(k), offset)
    return m


def key(k: int | str) -> bytes:
    """``key(id)``: the decimal string."""
    return str(k).encode()


def record(
    k: int,
    v: int | bytes | None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> MemoryRecords:
    """``record(key, value, ...)``: one record, no timestamp; an int value is its decimal string."""
    value = str(v).encode() if isinstance(v, int) else v
    return records(
        [SimpleRecord(value, key(k))],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        sequence=sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def unkeyed_record(value: int) -> MemoryRecords:
    """``unkeyedRecord``."""
    return records([SimpleRecord(str(value).encode())])


def tombstone_record(k: int) -> MemoryRecords:
    """``tombstoneRecord``."""
    return records([SimpleRecord(None, key(k))])


def message_with_offset(k: bytes | int, v: bytes | int, offset: int) -> MemoryRecords:
    """``messageWithOffset``: one record at ``offset`` (appended as a follower)."""
    kb = key(k) if isinstance(k, int) else k
    vb = str(v).encode() if isinstance(v, int) else v
    return records([SimpleRecord(vb, kb)], base_offset=offset, partition_leader_epoch=0)


def append_idempotent(
    log: Log,
    producer_id: int,
    producer_epoch: int,
    time: MockTime,
    *,
    transactional: bool = False,
    leader_epoch: int = 0,
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> Callable[[Sequence[int]], LogAppendInfo]:
    """``appendIdempotentAsLeader`` / ``appendTransactionalAsLeader``: a closure appending one batch of keys."""
    sequence = 0

    def append(keys: Sequence[int]) -> LogAppendInfo:
        nonlocal sequence
        batch = records(
            [SimpleRecord(key(k), key(k), time.milliseconds()) for k in keys],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            sequence=sequence,
            transactional=transactional,
        )
        sequence += len(keys)
        return log.append_as_leader(batch, leader_epoch, origin)

    return append


def marker(
    log: Log,
    producer_id: int,
    producer_epoch: int,
    control: ControlRecordType,
    time: MockTime,
    leader_epoch: int = 0,
) -> LogAppendInfo:
    """``commitMarker`` / ``abortMarker`` appended as the coordinator."""
    batch = MemoryRecords.end_transaction_marker(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        control_type=control,
        coordinator_epoch=0,
        timestamp=time.milliseconds(),
    )
    return log.append_as_leader(batch, leader_epoch, AppendOrigin.COORDINATOR)


def keys_in_log(log: Log) -> list[int]:
    """``LogTestUtils.keysInLog``: keys of the non-control records with a key and a value."""
    return [
        int(r.key)
        for s in log.segments
        for b in s.batches()
        if not (b.magic >= 2 and b.is_control_batch)
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def offsets_in_log(log: Log) -> list[int]:
    """``offsetsInLog``: offsets of the records (control ones included) with a key and a value."""
    return [
        r.offset
        for s in log.segments
        for b in s.batches()
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def last_offsets_per_batch(log: Log) -> list[int]:
    """``lastOffsetsPerBatchInLog``."""
    return [b.last_offset for s in log.segments for b in s.batches()]


def batch_base_offsets(log: Log) -> list[int]:
    """``batchBaseOffsetsInLog``."""
    return [b.base_offset for s in log.segments for b in s.batches()]


def last_sequences(log: Log) -> dict[int, int]:
    """``lastSequencesInLog``: producer id -> last sequence of its data batches."""
    return {
        b.producer_id: b.last_sequence
        for s in log.segments
        for b in s.batches()
        if not b.is_control_batch and b.producer_id >= 0
    }


def unkeyed_count(log: Log) -> int:
    """``unkeyedMessageCountInLog``."""
    return sum(
        1
        for s in log.segments
        for b in s.batches()
        for r in b.records()
        if r.value is not None and r.key is None
    )


def ltc(log: Log, first_dirty: int, uncleanable: int | None = None, need_now: bool = False) -> LogToClean:
    """``LogToClean(tp, log, firstDirty, uncleanable = active segment base, needCompactionNow)``."""
    return LogToClean(
        log, first_dirty, log.active_segment.base_offset if uncleanable is None else uncleanable, need_now
    )


def two_pass_clean(cleaner: Cleaner, cleanable: LogToClean, current_time: int) -> int:
    """``runTwoPassClean``: set the delete horizon, then clean past it."""
    cleaner.do_clean(cleanable, current_time)
    return cleaner.do_clean(cleanable, current_time + TOMBSTONE_RETENTION_MS + 1)[0]
