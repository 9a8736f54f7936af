"""Appends: what the leader and follower paths accept, reject and rewrite, and that a rejected append changes
nothing (log end offset, files, sizes, producer state, leader epochs).

Ported from Kafka (same numbers):

* UnifiedLogTest: testMessageSizeCheck, testMessageSizeCheckInAppendAsFollower, testMessageSetSizeCheck,
  testCompactedTopicConstraints, testInvalidMemoryRecords (every InvalidMemoryRecordsProvider case),
  testAppendWithOutOfOrderOffsetsThrowsException, testAppendBelowExpectedOffsetThrowsException,
  testAppendEmptyLogBelowLogStartOffsetThrowsException, testAppendWithNoTimestamp,
  testAppendAsLeaderWithRaftLeader, testNonSequentialAppend, testDuplicateAppends, testOldProducerEpoch,
  testDuplicateAppendToFollower, testMultipleProducersWithDuplicatesInSingleAppend,
  testMultipleProducerIdsPerMemoryRecord, shouldApplyEpochToMessageOnAppendIfLeader,
  followerShouldSaveEpochInformationFromReplicatedMessagesToTheEpochCache,
  testLeaderEpochCacheClearedAfterDowngradeInAppendedMessages, testBuildTimeIndexWhenNotAssigningOffsets,
  testZombieCoordinatorFenced, testLoadEmptyLog, testAppendToOrReadFromLogInFailedLogDir (append half).
* LogValidatorTest: testRecordWithPastTimestampIsRejected, testRecordWithFutureTimestampIsRejected (24 h /
  1 h bounds, 5 minutes past them), LogAppendTime assignment, testDifferentCodecCausesRecompression,
  testDifferentLevelDoesNotCauseRecompression.
* BrokerCompressionTest: testBrokerSideCompression (every producer codec x every topic compression.type).
* LocalLogTest: testLogCloseIdempotent, testLogCloseFailureWhenInMemoryBufferClosed, testLogCloseHandlers,
  testLogCloseHandlersIdempotent, testLogCloseSuccess.

Skipped: testInvalidLeaderEpoch (Kafka 4.1's ``appendAsFollower(records, leaderEpoch)`` drops batches of a
newer epoch: raft-driven, not in this API); testRandomRecords (jqwik property over arbitrary bytes: covered
by the storage/record fuzz tests); transaction-verification and TV2 tests (testTransactionIsOngoingAndVerificationGuard*,
testEndTxnWithFencedProducerEpoch with TV2, testTV2MarkerWithBumpedEpochSucceeds, testReplicationWithTVUnknownAllowed,
testLeaderRejectsTVUnknownForTransactionMarker, testStaleProducerEpochReturnsRecoverableError*,
testEnablingVerificationWhenRequestIsAtLogLayer, testNonZeroSequenceOnFirstAppendNonZeroEpoch,
testEmptyTransactionStillClearsVerificationGuard, testNextTransactionVerificationGuardNotCleared,
testDisabledVerificationClearsVerificationGuard): verification guards are out of scope;
testLeaderEpochCacheCreatedAfterMessageFormatUpgrade (needs ``appendAsLeaderWithRecordVersion`` to write v1);
testAppendToTransactionIndexFailure (needs a directory swapped in for the txn index file).
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkalog.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetsOutOfOrderError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
    TransactionCoordinatorFencedError,
    UnexpectedAppendOffsetError,
)
from kafkalog.log import AppendOrigin, Log, LogConfig
from kafkalog.records import Compression, ControlRecordType, MemoryRecords, SimpleRecord, TimestampType
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import (
    append_end_txn_marker,
    append_transactional,
    check_log_invariants,
    concat,
    create_empty_logs,
    dir_state,
    fetched_records,
    legacy_records,
    read_log,
    records,
    singleton_records,
)

INT_MAX = 2**31 - 1
HOUR = 60 * 60 * 1000


def _state(log: Log) -> tuple[Any, ...]:
    """Everything a rejected append must leave alone."""
    return (
        log.log_end_offset_metadata,
        log.high_watermark,
        log.log_start_offset,
        [(s.base_offset, s.size) for s in log.segments],
        dir_state(log.dir),
        {
            pid: (e.producer_epoch, e.last_seq, e.last_data_offset)
            for pid, e in log.producer_state.active_producers().items()
        },
        [tuple(e) for e in log.leader_epoch_cache.epoch_entries],
        log.producer_state.map_end_offset,
    )


def assert_rejected(
    log: Log, error: type[Exception], append: Callable[[], object]
) -> pytest.ExceptionInfo[Any]:
    before = _state(log)
    with pytest.raises(error) as info:
        append()
    assert _state(log) == before, "a rejected append must change nothing"
    check_log_invariants(log)
    return info


def _you_bethe() -> MemoryRecords:
    return records([SimpleRecord(b"You"), SimpleRecord(b"bethe")])


def _second() -> MemoryRecords:
    return records(
        [
            SimpleRecord(b"change (I need more bytes)... blah blah blah."),
            SimpleRecord(b"More padding boo hoo"),
        ]
    )


# --- sizes ---------------------------------------------------------------------------------------------------
def test_message_size_check(make_log: LogFactory) -> None:
    """testMessageSizeCheck: a batch over max.message.bytes is a RecordTooLargeError."""
    log = make_log(LogConfig(max_message_bytes=_second().size_in_bytes - 1))
    log.append_as_leader(_you_bethe(), 0)
    assert_rejected(log, RecordTooLargeError, lambda: log.append_as_leader(_second(), 0))


def test_message_size_check_in_append_as_follower(make_log: LogFactory) -> None:
    """testMessageSizeCheckInAppendAsFollower: followers do not check max.message.bytes."""
    first = records([SimpleRecord(b"You"), SimpleRecord(b"bethe")], partition_leader_epoch=0)
    second = records(
        [
            SimpleRecord(b"change (I need more bytes)... blah blah blah."),
            SimpleRecord(b"More padding boo hoo"),
        ],
        base_offset=5,
        partition_leader_epoch=0,
    )
    log = make_log(LogConfig(max_message_bytes=second.size_in_bytes - 1))
    log.append_as_follower(first)
    log.append_as_follower(second)
    assert log.log_end_offset == 7


def test_recompressed_batch_over_max_message_bytes(make_log: LogFactory) -> None:
    """A batch that grows past max.message.bytes when re-compressed is rejected after validation."""
    values = [bytes(200) for _ in range(10)]
    gzip = records([SimpleRecord(v) for v in values], codec=Compression.GZIP)
    plain = records([SimpleRecord(v) for v in values])
    log = make_log(LogConfig(compression_type="uncompressed", max_message_bytes=gzip.size_in_bytes + 10))
    assert plain.size_in_bytes > gzip.size_in_bytes + 10
    assert_rejected(log, RecordTooLargeError, lambda: log.append_as_leader(gzip, 0))


def test_message_set_size_check(make_log: LogFactory) -> None:
    """testMessageSetSizeCheck: an append larger than segment.bytes is a RecordBatchTooLargeError."""
    message_set = _you_bethe()
    log = make_log(LogConfig(segment_bytes=message_set.size_in_bytes - 1))
    assert_rejected(log, RecordBatchTooLargeError, lambda: log.append_as_leader(message_set, 0))


# --- record validation ---------------------------------------------------------------------------------------
def test_compacted_topic_constraints(make_log: LogFactory) -> None:
    """testCompactedTopicConstraints: keyless records on a compacted topic, with the record's index."""
    keyed = SimpleRecord(b"this message has a key", b"and here it is")
    another = SimpleRecord(b"this message also has a key", b"another key")
    unkeyed = SimpleRecord(b"this message does not have a key")
    log = make_log(LogConfig(cleanup_policy="compact"))
    prefix = "Compacted topic cannot accept message without key"
    for batch, index in (
        (records([unkeyed, keyed]), 0),
        (records([unkeyed]), 0),
        (records([keyed, unkeyed], codec=Compression.GZIP), 1),
    ):
        error = assert_rejected(log, RecordValidationError, lambda b=batch: log.append_as_leader(b, 0)).value
        assert isinstance(error.invalid_exception, InvalidRecordError)
        assert len(error.record_errors) == 1
        assert error.record_errors[0][0] == index
        assert error.record_errors[0][1].startswith(prefix)
    log.append_as_leader(records([keyed]), 0)
    log.append_as_leader(records([keyed, another]), 0)
    log.append_as_leader(records([keyed], codec=Compression.GZIP), 0)
    assert log.log_end_offset == 4


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("direction", ["past", "future"])
def test_record_with_timestamp_out_of_bounds_is_rejected(
    make_log: LogFactory, mock_time: MockTime, codec: Compression, direction: str
) -> None:
    """testRecordWithPastTimestampIsRejected / testRecordWithFutureTimestampIsRejected (24 h before, 1 h after)."""
    before_max, after_max = 24 * HOUR, 1 * HOUR
    log = make_log(
        LogConfig(message_timestamp_before_max_ms=before_max, message_timestamp_after_max_ms=after_max)
    )
    now = mock_time.milliseconds()
    ts = now - before_max - 5 * 60 * 1000 if direction == "past" else now + after_max + 5 * 60 * 1000
    batch = records([SimpleRecord(v, None, ts) for v in (b"hello", b"there", b"beautiful")], codec=codec)
    error = assert_rejected(log, RecordValidationError, lambda: log.append_as_leader(batch, 0)).value
    assert isinstance(error.invalid_exception, InvalidTimestampError)
    assert len(error.record_errors) == 3
    # At the bounds exactly the records are accepted.
    edge = now - before_max if direction == "past" else now + after_max
    log.append_as_leader(records([SimpleRecord(b"ok", None, edge)], codec=codec), 0)
    assert log.log_end_offset == 1


def test_invalid_timestamp_takes_precedence(make_log: LogFactory, mock_time: MockTime) -> None:
    """A keyless record with a bad timestamp on a compacted topic: InvalidTimestampError wins (Kafka)."""
    log = make_log(LogConfig(cleanup_policy="compact", message_timestamp_after_max_ms=1000))
    batch = records([SimpleRecord(b"v", None, mock_time.milliseconds() + 5000), SimpleRecord(b"v", b"k")])
    error = assert_rejected(log, RecordValidationError, lambda: log.append_as_leader(batch, 0)).value
    assert isinstance(error.invalid_exception, InvalidTimestampError)
    assert len(error.record_errors) == 2


def test_append_with_no_timestamp(make_log: LogFactory) -> None:
    """testAppendWithNoTimestamp: NO_TIMESTAMP is never out of range."""
    log = make_log(LogConfig(message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0))
    log.append_as_leader(records([SimpleRecord(b"value", b"key", -1)]), 0)
    assert log.log_end_offset == 1


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_log_append_time_topic_assigns_append_time(
    make_log: LogFactory, mock_time: MockTime, codec: Compression
) -> None:
    """LogAppendTime topics stamp every record with the broker's time (LogValidator)."""
    log = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    now = mock_time.milliseconds()
    info = log.append_as_leader(
        records([SimpleRecord(b"a", None, 10), SimpleRecord(b"b", None, 20)], codec=codec), 0
    )
    assert info.log_append_time == now
    assert info.max_timestamp == now
    batch = next(iter(read_log(log, 0, 10_000).records.batches()))
    assert batch.is_valid()
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == now
    assert [r.timestamp for r in batch.records()] == [now, now]
    assert log.active_segment.max_timestamp_so_far == now


def test_client_log_append_time_batch_rejected_on_log_append_time_topic(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """A producer must not set LogAppendTime (LogValidator.validateTimestamp)."""
    log = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    batch = records([SimpleRecord(b"a")], timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5)
    error = assert_rejected(log, RecordValidationError, lambda: log.append_as_leader(batch, 0)).value
    assert isinstance(error.invalid_exception, InvalidTimestampError)


@pytest.mark.parametrize("producer_codec", list(Compression))
@pytest.mark.parametrize("topic_codec", ["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
def test_broker_side_compression(make_log: LogFactory, producer_codec: Compression, topic_codec: str) -> None:
    """BrokerCompressionTest.testBrokerSideCompression: the stored codec is the topic's, unless ``producer``."""
    log = make_log(LogConfig(compression_type=topic_codec))
    log.append_as_leader(records([SimpleRecord(b"hello"), SimpleRecord(b"there")], codec=producer_codec), 0)
    batch = next(iter(log.read(0, 4096).records.batches()))
    expected = producer_codec if topic_codec == "producer" else Compression.from_name(topic_codec)
    assert batch.compression is expected
    assert batch.is_valid()
    assert [(r.offset, r.value) for r in batch.records()] == [(0, b"hello"), (1, b"there")]


def test_different_codec_causes_recompression(make_log: LogFactory) -> None:
    """testDifferentCodecCausesRecompression: gzip from the producer, lz4 on the topic."""
    values = [b"some" * 256, b"data" * 256]
    log = make_log(LogConfig(compression_type="lz4"))
    info = log.append_as_leader(records([SimpleRecord(v) for v in values], codec=Compression.GZIP), 0)
    assert info.source_compression is Compression.GZIP and info.target_compression is Compression.LZ4
    batch = next(iter(log.read(0, 100_000).records.batches()))
    assert batch.compression is Compression.LZ4
    assert [r.value for r in batch.records()] == values


def test_different_level_does_not_cause_recompression(make_log: LogFactory) -> None:
    """testDifferentLevelDoesNotCauseRecompression: gzip level 9 from the producer on a gzip level-1 topic."""
    values = [b"some" * 256, b"data" * 256]
    max_level = MemoryRecords.build(
        [SimpleRecord(v, None, -1) for v in values], compression="gzip", compression_level=9
    )
    min_level = MemoryRecords.build(
        [SimpleRecord(v, None, -1) for v in values], compression="gzip", compression_level=1
    )
    assert max_level != min_level
    log = make_log(LogConfig(compression_type="gzip", compression_gzip_level=1))
    log.append_as_leader(max_level, 0)
    stored = next(iter(log.read(0, 100_000).records.batches()))
    assert stored.to_bytes()[21:] == max_level.to_bytes()[21:]  # the producer's payload, untouched


# --- framing, CRC and offsets --------------------------------------------------------------------------------
def _corrupt_crc(batch: MemoryRecords) -> MemoryRecords:
    data = bytearray(batch.to_bytes())
    data[-1] ^= 0xFF
    return MemoryRecords(bytes(data))


@pytest.mark.parametrize("leader", [True, False])
def test_corrupt_record_rejected(make_log: LogFactory, leader: bool) -> None:
    """A CRC mismatch is a CorruptRecordError for leaders and followers alike."""
    log = make_log()
    log.append_as_leader(singleton_records(b"first"), 0)
    bad = _corrupt_crc(records([SimpleRecord(b"x"), SimpleRecord(b"y")], base_offset=0 if leader else 1))
    append = (lambda: log.append_as_leader(bad, 0)) if leader else (lambda: log.append_as_follower(bad))
    assert_rejected(log, CorruptRecordError, append)


def test_client_batch_with_non_zero_base_offset_is_invalid(make_log: LogFactory) -> None:
    """A client's v2 batch must have base offset 0 (UnifiedLog.analyzeAndValidateRecords)."""
    log = make_log()
    batch = records([SimpleRecord(b"x")], base_offset=5)
    assert_rejected(log, InvalidRecordError, lambda: log.append_as_leader(batch, 0))


def test_leader_append_of_two_v2_batches_is_invalid(make_log: LogFactory) -> None:
    """A produce request carries exactly one v2 batch (LogValidator)."""
    log = make_log()
    two = concat(records([SimpleRecord(b"a")]), records([SimpleRecord(b"b")]))
    assert_rejected(log, InvalidRecordError, lambda: log.append_as_leader(two, 0))


def _raw(base_offset: int, size_field: int, tail: bytes, limit: int) -> MemoryRecords:
    buf = bytearray(256)
    buf[0:8] = base_offset.to_bytes(8, "big")
    buf[8:12] = size_field.to_bytes(4, "big", signed=True)
    buf[12 : 12 + len(tail)] = tail
    return MemoryRecords(bytes(buf[:limit]))


INVALID_MEMORY_RECORDS = {
    # name: (records, expected error or None = silently nothing appended)
    "not_enough_bytes": (MemoryRecords(bytes(11)), None),
    "records_size_too_small": (_raw(1234, 14 - 1, b"", 256), CorruptRecordError),
    "not_enough_bytes_to_magic": (_raw(1234, 256 - 12, b"", 17 - 1), None),
    "negative_magic": (_raw(1234, 256 - 12, (4321).to_bytes(4, "big") + b"\xff", 256), CorruptRecordError),
    "large_magic": (_raw(1234, 256 - 12, (4321).to_bytes(4, "big") + b"\x03", 256), CorruptRecordError),
    "less_bytes_than_record_size": (
        _raw(1234, 256 - 12, (4321).to_bytes(4, "big") + b"\x02", 256 - 12 - 1),
        None,
    ),
}


@pytest.mark.parametrize("name", list(INVALID_MEMORY_RECORDS))
def test_invalid_memory_records(make_log: LogFactory, name: str) -> None:
    """testInvalidMemoryRecords (InvalidMemoryRecordsProvider): the LEO never moves."""
    log = make_log()
    batch, error = INVALID_MEMORY_RECORDS[name]
    if error is None:
        before = _state(log)
        info = log.append_as_follower(batch)
        assert info.valid_bytes == 0
        assert _state(log) == before
    else:
        assert_rejected(log, error, lambda: log.append_as_follower(batch))
    assert log.log_end_offset == 0


def test_append_with_out_of_order_offsets(make_log: LogFactory, mock_time: MockTime) -> None:
    """testAppendWithOutOfOrderOffsetsThrowsException: follower batches 0, 1, 3, 2, 4."""
    log = make_log()
    batches = [
        records(
            [SimpleRecord(b"value", b"key")],
            base_offset=offset,
            producer_id=1,
            producer_epoch=0,
            sequence=0,
            partition_leader_epoch=0,
            timestamp_type=TimestampType.LOG_APPEND_TIME,
            log_append_time=mock_time.milliseconds(),
        )
        for offset in (0, 1, 3, 2, 4)
    ]
    assert_rejected(log, OffsetsOutOfOrderError, lambda: log.append_as_follower(concat(*batches)))


LEGACY_GZIP = 1


@pytest.mark.parametrize(
    ("magic", "codec"),
    [
        (0, Compression.NONE),
        (0, Compression.GZIP),
        (1, Compression.NONE),
        (1, Compression.GZIP),
        (2, Compression.NONE),
        (2, Compression.LZ4),
    ],
)
def test_append_below_expected_offset(make_log: LogFactory, magic: int, codec: Compression) -> None:
    """testAppendBelowExpectedOffsetThrowsException: a follower batch at offset 0 after two records."""
    log = make_log()
    for i in range(2):
        log.append_as_leader(records([SimpleRecord(str(i).encode())]), 0)
    if magic == 2:
        invalid = records([SimpleRecord(b"1")], codec=codec)
    else:
        invalid = legacy_records(magic, [(None, b"1")], codec=LEGACY_GZIP if codec is Compression.GZIP else 0)
    assert_rejected(log, UnexpectedAppendOffsetError, lambda: log.append_as_follower(invalid))


@pytest.mark.parametrize(
    ("magic", "codec"),
    [
        (0, Compression.NONE),
        (0, Compression.GZIP),
        (1, Compression.NONE),
        (1, Compression.GZIP),
        (2, Compression.NONE),
        (2, Compression.LZ4),
    ],
)
def test_append_empty_log_below_log_start_offset(
    make_log: LogFactory, log_dir: Path, magic: int, codec: Compression
) -> None:
    """testAppendEmptyLogBelowLogStartOffsetThrowsException: the error carries first 4 and last 6."""
    create_empty_logs(log_dir, 7)
    log = make_log()
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    kvs = [(b"k1", b"v1"), (b"k2", b"v2"), (b"k3", b"v3")]
    if magic == 2:
        batch = records([SimpleRecord(v, k) for k, v in kvs], base_offset=4, codec=codec)
    else:
        batch = legacy_records(
            magic, kvs, base_offset=4, codec=LEGACY_GZIP if codec is Compression.GZIP else 0
        )
    error = assert_rejected(log, UnexpectedAppendOffsetError, lambda: log.append_as_follower(batch)).value
    assert (error.first_offset, error.last_offset) == (4, 6)


def test_load_empty_log(make_log: LogFactory, log_dir: Path, mock_time: MockTime) -> None:
    """testLoadEmptyLog: an empty segment file on disk loads and takes appends."""
    create_empty_logs(log_dir, 0)
    log = make_log()
    log.append_as_leader(singleton_records(b"test", timestamp=mock_time.milliseconds()), 0)
    assert log.log_end_offset == 1


def test_build_time_index_when_not_assigning_offsets(make_log: LogFactory, mock_time: MockTime) -> None:
    """testBuildTimeIndexWhenNotAssigningOffsets: 100 follower batches, 99 time-index entries."""
    log = make_log(LogConfig(segment_bytes=10000, index_interval_bytes=1))
    now = mock_time.milliseconds()
    for i in range(100):
        log.append_as_follower(
            records(
                [SimpleRecord(str(i).encode(), None, now + i)], base_offset=100 + i, partition_leader_epoch=0
            )
        )
    assert sum(s.time_index.entries for s in log.segments) == 99
    assert log.active_segment.time_index.last_entry().timestamp == now + 99


def test_append_as_leader_with_raft_leader(make_log: LogFactory, mock_time: MockTime) -> None:
    """testAppendAsLeaderWithRaftLeader: the raft leader assigns offsets itself; they must follow the LEO."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024))
    now = mock_time.milliseconds()

    def batch(offset: int) -> MemoryRecords:
        return records(
            [SimpleRecord(b"value", k, now) for k in (b"a", b"b", b"c")],
            base_offset=offset,
            partition_leader_epoch=0,
        )

    log.append_as_leader(batch(0), 0, AppendOrigin.RAFT_LEADER)
    assert (log.log_start_offset, log.log_end_offset) == (0, 3)
    assert_rejected(
        log, UnexpectedAppendOffsetError, lambda: log.append_as_leader(batch(1), 0, AppendOrigin.RAFT_LEADER)
    )
    log.append_as_leader(batch(3), 0, AppendOrigin.RAFT_LEADER)
    assert log.log_end_offset == 6
    bad_epoch = records([SimpleRecord(b"x")], base_offset=6, partition_leader_epoch=3)
    assert_rejected(
        log, InvalidRecordError, lambda: log.append_as_leader(bad_epoch, 0, AppendOrigin.RAFT_LEADER)
    )


# --- producer state on the append path -----------------------------------------------------------------------
def _idempotent(value: bytes, pid: int, epoch: int, seq: int, *more: bytes, now: int = 0) -> MemoryRecords:
    return records(
        [SimpleRecord(v, b"key", now) for v in (value, *more)],
        producer_id=pid,
        producer_epoch=epoch,
        sequence=seq,
    )


def test_non_sequential_append(make_log: LogFactory, mock_time: MockTime) -> None:
    """testNonSequentialAppend: a sequence gap is an OutOfOrderSequenceError."""
    log = make_log()
    log.append_as_leader(_idempotent(b"value", 1, 0, 0, now=mock_time.milliseconds()), 0)
    nxt = _idempotent(b"value", 1, 0, 2, now=mock_time.milliseconds())
    assert_rejected(log, OutOfOrderSequenceError, lambda: log.append_as_leader(nxt, 0))


def test_duplicate_appends(make_log: LogFactory, mock_time: MockTime) -> None:
    """testDuplicateAppends: the last 5 batches are de-duplicated; older ones are out of sequence."""
    log = make_log()
    now = mock_time.milliseconds()
    seq = 0
    for _ in range(6):
        log.append_as_leader(_idempotent(b"value", 1, 0, seq, now=now), 0)
        seq += 1

    def multi() -> MemoryRecords:
        return records(
            [SimpleRecord(b"value-%d" % seq, b"key-%d" % seq, now)] * 3,
            producer_id=1,
            producer_epoch=0,
            sequence=seq,
        )

    multi_info = log.append_as_leader(multi(), 0)
    assert multi_info.last_offset - multi_info.first_offset + 1 == 3
    leo = log.log_end_offset
    dup = log.append_as_leader(multi(), 0)
    assert (dup.first_offset, dup.last_offset) == (multi_info.first_offset, multi_info.last_offset)
    assert log.log_end_offset == leo
    seq += 3
    partial = records(
        [SimpleRecord(b"value-%d" % seq, b"key-%d" % seq, now)] * 2,
        producer_id=1,
        producer_epoch=0,
        sequence=seq - 2,
    )
    assert_rejected(log, OutOfOrderSequenceError, lambda: log.append_as_leader(partial, 0))
    # A duplicate of the batch 4th from the tail is fine (the last 5 are kept).
    log.append_as_leader(_idempotent(b"value", 1, 0, 2, now=now), 0)
    assert log.log_end_offset == leo
    older = _idempotent(b"value-1", 1, 0, 1, now=now)
    assert_rejected(log, OutOfOrderSequenceError, lambda: log.append_as_leader(older, 0))
    orig = log.append_as_leader(_idempotent(b"value", 1, 0, seq, now=now), 0)
    again = log.append_as_leader(_idempotent(b"value", 1, 0, seq, now=now), 0)
    assert (orig.first_offset, orig.last_offset) == (again.first_offset, again.last_offset)


def test_old_producer_epoch(make_log: LogFactory, mock_time: MockTime) -> None:
    """testOldProducerEpoch."""
    log = make_log()
    log.append_as_leader(_idempotent(b"value", 1, 1, 0, now=mock_time.milliseconds()), 0)
    old = _idempotent(b"value", 1, 0, 0, now=mock_time.milliseconds())
    assert_rejected(log, InvalidProducerEpochError, lambda: log.append_as_leader(old, 0))


def test_duplicate_append_to_follower(make_log: LogFactory) -> None:
    """testDuplicateAppendToFollower: followers do not de-duplicate."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    for offset in (0, 2):
        log.append_as_follower(
            records(
                [SimpleRecord(b"a"), SimpleRecord(b"b")],
                base_offset=offset,
                producer_id=1,
                producer_epoch=0,
                sequence=0,
                partition_leader_epoch=0,
            )
        )
    assert log.log_end_offset == 4


def _lat_batch(offset: int, pid: int, seq: int, now: int, leader_epoch: int = -1) -> MemoryRecords:
    return records(
        [SimpleRecord(b"value", b"key")],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        sequence=seq,
        partition_leader_epoch=leader_epoch,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=now,
    )


def test_multiple_producers_with_duplicates_in_single_append(
    make_log: LogFactory, mock_time: MockTime
) -> None:
    """testMultipleProducersWithDuplicatesInSingleAppend: a follower accepts them."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    now = mock_time.milliseconds()
    buffer = concat(
        *(
            _lat_batch(o, pid, seq, now, 0)
            for o, (pid, seq) in enumerate([(1, 0), (2, 0), (1, 1), (2, 1), (1, 1)])
        )
    )
    log.append_as_follower(buffer)
    assert log.log_end_offset == 5


def test_multiple_producer_ids_per_memory_record(make_log: LogFactory, mock_time: MockTime) -> None:
    """testMultipleProducerIdsPerMemoryRecord: batches keep their producer ids, offsets and sequences."""
    log = make_log()
    now = mock_time.milliseconds()
    buffer = concat(*(_lat_batch(o, o + 1, 0, now, 0) for o in range(4)))
    log.append_as_follower(buffer)
    log.flush()
    fetched = list(read_log(log, 0, INT_MAX).records.batches())
    original = list(buffer.batches())
    assert len(fetched) == len(original) == 4
    for got, want in zip(fetched, original):
        assert (got.producer_id, got.base_offset, got.base_sequence) == (
            want.producer_id,
            want.base_offset,
            want.base_sequence,
        )


def test_zombie_coordinator_fenced(make_log: LogFactory, mock_time: MockTime) -> None:
    """testZombieCoordinatorFenced: a marker from an older coordinator epoch is fenced."""
    log = make_log(LogConfig(segment_bytes=1024 * 1024 * 5))
    append = append_transactional(log, 1, 0, mock_time)
    append(10)
    append_end_txn_marker(log, 1, 0, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1)
    append(5)
    append_end_txn_marker(log, 1, 0, ControlRecordType.COMMIT, mock_time.milliseconds(), coordinator_epoch=2)
    assert_rejected(
        log,
        TransactionCoordinatorFencedError,
        lambda: append_end_txn_marker(
            log, 1, 0, ControlRecordType.ABORT, mock_time.milliseconds(), coordinator_epoch=1
        ),
    )


# --- leader epochs -------------------------------------------------------------------------------------------
def test_should_apply_epoch_to_message_on_append_if_leader(make_log: LogFactory) -> None:
    """shouldApplyEpochToMessageOnAppendIfLeader."""
    log = make_log()
    log.maybe_assign_epoch_start_offset(72, 50)
    for i in range(50):
        log.append_as_leader(records([SimpleRecord(str(i).encode())]), 72)
    for i in range(50):
        assert next(iter(read_log(log, i, 1).records.batches())).partition_leader_epoch == 72


def test_follower_saves_epochs_from_replicated_messages(make_log: LogFactory) -> None:
    """followerShouldSaveEpochInformationFromReplicatedMessagesToTheEpochCache."""
    log = make_log()
    for i in range(50):
        log.append_as_follower(
            records([SimpleRecord(str(i).encode())], base_offset=i, partition_leader_epoch=42)
        )
    assert log.latest_epoch == 42


def test_leader_epoch_cache_cleared_after_downgrade_in_appended_messages(make_log: LogFactory) -> None:
    """testLeaderEpochCacheClearedAfterDowngradeInAppendedMessages: a v1 batch clears the epoch cache."""
    log = make_log(LogConfig(segment_bytes=1000, index_interval_bytes=1, max_message_bytes=64 * 1024))
    log.append_as_leader(records([SimpleRecord(b"foo")]), 5)
    assert log.leader_epoch_cache.latest_epoch == 5
    log.append_as_follower(legacy_records(1, [(None, b"foo")], base_offset=1))
    assert log.leader_epoch_cache.latest_epoch is None


# --- closed logs (LocalLogTest) ------------------------------------------------------------------------------
def test_local_log_close_idempotent(make_log: LogFactory) -> None:
    """testLogCloseIdempotent / testLogCloseSuccess: close twice is fine; appends afterwards fail."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"ABC", b"abc"), SimpleRecord(b"DE", b"de")]), 0)
    log.local_log.close()
    log.local_log.close()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(records([SimpleRecord(b"x")]), 0)


def test_local_log_close_handlers(make_log: LogFactory) -> None:
    """testLogCloseHandlers, testLogCloseHandlersIdempotent, testLogCloseFailureWhenInMemoryBufferClosed."""
    log = make_log()
    log.append_as_leader(records([SimpleRecord(b"ABC", b"abc"), SimpleRecord(b"DE", b"de")]), 0)
    log.local_log.close_handlers()
    log.local_log.close_handlers()
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(records([SimpleRecord(b"x")]), 0)
    with pytest.raises(KafkaStorageError):
        log.local_log.close()


def test_append_to_failed_log_dir(make_log: LogFactory) -> None:
    """testAppendToOrReadFromLogInFailedLogDir (append half): an I/O error takes the directory offline."""
    log = make_log()
    log.append_as_leader(singleton_records(None), 0)
    log.local_log.offline = True
    assert_rejected(log, KafkaStorageError, lambda: log.append_as_leader(singleton_records(None), 0))


def test_leader_offsets_and_bytes(make_log: LogFactory, mock_time: MockTime) -> None:
    """An uncompressed leader append keeps the producer's bytes except base offset, epoch and CRC."""
    log = make_log()
    log.append_as_leader(singleton_records(b"first"), 0)
    now = int(_time.time() * 1000)
    batch = records([SimpleRecord(b"v", b"k", now)])
    info = log.append_as_leader(batch, 7)
    assert (info.first_offset, info.last_offset, info.num_messages) == (1, 1, 1)
    stored = next(iter(read_log(log, 1, 10_000).records.batches()))
    assert (stored.base_offset, stored.partition_leader_epoch) == (1, 7)
    assert stored.is_valid()
    assert stored.to_bytes()[21:] == batch.to_bytes()[21:]  # attributes onward: identical
    assert [r.value for r in fetched_records(read_log(log, 0, 10_000))] == [b"first", b"v"]


def test_transaction_started_by_a_rolling_append_points_into_the_new_segment(make_log: LogFactory) -> None:
    # Kafka rolls before analysing producer state, so the first unstable offset's metadata is
    # (offset 2, segment 2, position 0), not the end of the previous segment.
    log = make_log(config=LogConfig(segment_bytes=200))
    log.append([(None, b"x" * 60)])
    log.append([(None, b"y" * 60)])
    txn = MemoryRecords.build(
        [SimpleRecord(b"z" * 60)], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    log.append_as_leader(txn, 0)
    assert log.num_log_segments == 3
    fuo = log.watermarks.first_unstable_offset_metadata
    assert fuo is not None
    assert (fuo.message_offset, fuo.segment_base_offset, fuo.relative_position_in_segment) == (2, 2, 0)


def test_an_append_rejected_by_producer_state_does_not_roll(make_log: LogFactory) -> None:
    log = make_log(config=LogConfig(segment_bytes=200))
    log.append_as_leader(
        MemoryRecords.build([SimpleRecord(b"a" * 60)], producer_id=7, producer_epoch=0, base_sequence=0), 0
    )
    log.append([(None, b"y" * 60)])
    segments = log.num_log_segments
    gap = MemoryRecords.build([SimpleRecord(b"b" * 60)], producer_id=7, producer_epoch=0, base_sequence=5)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(gap, 0)
    assert log.num_log_segments == segments and log.log_end_offset == 2
