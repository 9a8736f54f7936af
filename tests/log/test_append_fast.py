"""The leader's fast append path (``kafkalog.log.append.try_append_fast``) against the general path.

The fast path takes one plain uncompressed v2 batch per append and must be indistinguishable from the
general path: the same bytes on disk, the same ``LogAppendInfo``, the same offsets, watermarks, epochs and
rolls, and for anything it does not accept, the general path's exact error with nothing changed. Each test
runs the same appends into two logs on one clock: ``fast`` through ``append_as_leader`` and ``general``
through ``Log._append`` (the path every other shape takes), then compares them.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
)
from kafkalog.log import AppendOrigin, Log, LogAppendInfo, LogConfig, MockScheduler
from kafkalog.log import append as append_path
from kafkalog.records import Compression, MemoryRecords, MemoryRecordsBuilder, SimpleRecord
from kafkalog.time import MockTime

from .helpers import open_log

NOW = 1_700_000_000_000


def _general(log: Log, records: MemoryRecords, leader_epoch: int = 0) -> LogAppendInfo:
    return log._append(
        records,
        AppendOrigin.CLIENT,
        validate_and_assign=True,
        leader_epoch=leader_epoch,
        ignore_record_size=False,
    )


def _batch(
    recs: list[tuple[bytes | None, bytes | None, int]],
    *,
    producer_id: int = -1,
    producer_epoch: int = 0,
    base_sequence: int = 0,
    transactional: bool = False,
    compression: Compression = Compression.NONE,
    max_ts_override: int | None = None,
    headers: bool = False,
) -> bytes:
    builder = MemoryRecordsBuilder(
        base_offset=0,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch if producer_id >= 0 else -1,
        base_sequence=base_sequence if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    for key, value, ts in recs:
        builder.append(ts, key, value, [("h", b"v")] if headers else [])
    data = bytearray(builder.build().to_bytes())
    if max_ts_override is not None:  # a client that wrote a stale max timestamp (the CRC is made good again)
        import crc32c

        struct.pack_into(">q", data, 35, max_ts_override)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


class Pair:
    """Two logs on one clock: appends go to both, one by each path."""

    def __init__(
        self, root: Path, config: dict[str, Any] | None = None, hw_follows_leo: bool = False
    ) -> None:
        self.time = MockTime(NOW)
        self.scheduler = MockScheduler(self.time)
        cfg = LogConfig.from_props(config or {})
        # one partition name in two directories, so error messages compare equal
        self.fast = open_log(root / "fast" / "t-0", cfg, time=self.time, scheduler=self.scheduler)
        self.general = open_log(root / "general" / "t-0", cfg, time=self.time, scheduler=self.scheduler)
        self.fast.hw_follows_leo = hw_follows_leo
        self.general.hw_follows_leo = hw_follows_leo

    def append(self, data: bytes, leader_epoch: int = 0, *, expect_fast: bool = True) -> LogAppendInfo:
        seen: list[LogAppendInfo | None] = []
        real = append_path.try_append_fast

        def spy(log: Log, records: MemoryRecords, epoch: int) -> LogAppendInfo | None:
            result = real(log, records, epoch)
            seen.append(result)
            return result

        append_path.try_append_fast = spy  # type: ignore[assignment]
        try:
            a = self.fast.append_as_leader(MemoryRecords(bytearray(data)), leader_epoch)
        finally:
            append_path.try_append_fast = real  # type: ignore[assignment]
        assert seen, "append_as_leader did not try the fast path"
        assert (seen[0] is not None) is expect_fast
        b = _general(self.general, MemoryRecords(bytearray(data)), leader_epoch)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        self.check_same()
        return a

    def check_same(self) -> None:
        f, g = self.fast, self.general
        assert f.log_end_offset == g.log_end_offset
        assert f.high_watermark == g.high_watermark
        assert f.last_stable_offset == g.last_stable_offset
        assert f.first_unstable_offset == g.first_unstable_offset
        assert f.leader_epoch_cache.epoch_entries == g.leader_epoch_cache.epoch_entries
        assert [s.base_offset for s in f.segments] == [s.base_offset for s in g.segments]
        for sf, sg in zip(f.segments, g.segments, strict=True):
            assert sf.log.read(0, sf.size) == sg.log.read(0, sg.size)
            assert sf.offset_index.entries == sg.offset_index.entries
            assert sf.time_index.entries == sg.time_index.entries
            assert sf.max_timestamp_so_far == sg.max_timestamp_so_far

    def close(self) -> None:
        self.fast.close()
        self.general.close()


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    made: list[Pair] = []

    def factory(config: dict[str, Any] | None = None, hw_follows_leo: bool = False) -> Pair:
        p = Pair(tmp_path / f"p{len(made)}", config, hw_follows_leo)
        made.append(p)
        return p

    yield factory
    for p in made:
        p.close()


def test_create_time_batches_match_the_general_path(pair: Any) -> None:
    p = pair()
    for i in range(20):
        recs = [(b"k%d" % j, b"v" * (j + i), NOW - 100 + j) for j in range(i + 1)]
        info = p.append(_batch(recs, headers=i % 2 == 0), leader_epoch=3)
        assert info.num_messages == i + 1
        assert info.max_timestamp == NOW - 100 + i


def test_log_append_time_topic_rewrites_the_batch_like_the_general_path(pair: Any) -> None:
    p = pair({"message.timestamp.type": "LogAppendTime"})
    for _ in range(3):
        info = p.append(_batch([(None, b"a", NOW - 5), (None, b"b", NOW - 4)]))
        assert info.log_append_time == p.time.milliseconds()
        assert info.max_timestamp == p.time.milliseconds()
        p.time.sleep(7)


@pytest.mark.parametrize(
    "timestamps",
    [[-1, -1], [-1, NOW], [NOW, -1, NOW - 3], [0, 0]],
    ids=["no-timestamps", "mixed-none", "mixed", "zero"],
)
def test_odd_timestamps_match(pair: Any, timestamps: list[int]) -> None:
    p = pair()
    p.append(_batch([(b"k", b"v", ts) for ts in timestamps]))


def test_a_stale_max_timestamp_from_the_client_is_corrected_as_the_general_path_does(pair: Any) -> None:
    p = pair()
    p.append(_batch([(b"k", b"v", NOW - 10), (b"k", b"v", NOW - 3)], max_ts_override=NOW - 9_999))


def test_leader_epochs_and_rolls_match(pair: Any) -> None:
    p = pair({"segment.bytes": 1024, "index.interval.bytes": 100})
    for i in range(60):
        p.append(_batch([(b"k", b"x" * 40, NOW)] * (1 + i % 4)), leader_epoch=i // 20 - 1)
    assert p.fast.num_log_segments > 3


def test_time_based_roll_matches(pair: Any) -> None:
    p = pair({"segment.ms": 1000})
    for i in range(5):
        p.append(_batch([(b"k", b"v", NOW + i * 600)]))
        p.time.sleep(600)
    assert p.fast.num_log_segments > 1


def test_hw_following_leo_matches(pair: Any) -> None:
    p = pair(hw_follows_leo=True)
    for _ in range(3):
        p.append(_batch([(b"k", b"v", NOW)] * 3))
    assert p.fast.high_watermark == 9


def test_compacted_topic_with_keys_takes_the_fast_path(pair: Any) -> None:
    p = pair({"cleanup.policy": "compact"})
    p.append(_batch([(b"a", b"1", NOW), (b"b", b"2", NOW)]))


def test_read_only_input_is_copied_not_mutated(tmp_path: Path) -> None:
    clock = MockTime(NOW)
    log = open_log(tmp_path / "t-0", LogConfig(), time=clock, scheduler=MockScheduler(clock))
    data = _batch([(b"k", b"v", NOW)])
    log.append_as_leader(MemoryRecords(data))
    info = log.append_as_leader(MemoryRecords(data))
    assert info.first_offset == 1
    assert struct.unpack_from(">q", data, 0)[0] == 0  # the caller's bytes are untouched
    log.close()


def test_flush_messages_policy_applies(pair: Any) -> None:
    p = pair({"flush.messages": 2})
    p.append(_batch([(b"k", b"v", NOW)]))
    assert p.fast.recovery_point == 0
    p.append(_batch([(b"k", b"v", NOW)]))
    assert p.fast.recovery_point == 2 == p.general.recovery_point


# --- shapes the fast path leaves to the general path ------------------------------------------------------


def test_idempotent_producer_batches_and_retries_match(pair: Any) -> None:
    p = pair()
    seq = 0
    for n in (1, 3, 2):
        p.append(_batch([(b"k", b"v", NOW)] * n, producer_id=7, base_sequence=seq))
        seq += n
    retry = p.append(_batch([(b"k", b"v", NOW)] * 2, producer_id=7, base_sequence=4))
    assert retry.duplicate and (retry.first_offset, retry.last_offset) == (4, 5)
    assert p.fast.log_end_offset == 6
    assert p.fast.producer_state.last_entry(7) is not None
    assert p.fast.producer_state.last_entry(7).last_seq == p.general.producer_state.last_entry(7).last_seq
    gap = _batch([(b"k", b"v", NOW)], producer_id=7, base_sequence=9)
    with pytest.raises(KafkaError) as fast_error:
        p.fast.append_as_leader(MemoryRecords(bytearray(gap)))
    with pytest.raises(KafkaError) as general_error:
        _general(p.general, MemoryRecords(bytearray(gap)))
    assert (type(fast_error.value), str(fast_error.value)) == (
        type(general_error.value),
        str(general_error.value),
    )
    p.check_same()


def test_transactional_batches_match_through_commit_and_abort(pair: Any) -> None:
    from kafkalog.records import ControlRecordType

    from .helpers import append_end_txn_marker

    p = pair({"segment.bytes": 1024}, hw_follows_leo=True)
    seq = {11: 0, 12: 0}
    for round_ in range(6):
        for pid in (11, 12):
            p.append(
                _batch(
                    [(b"k", b"t" * 30, NOW)] * 2, producer_id=pid, base_sequence=seq[pid], transactional=True
                )
            )
            seq[pid] += 2
        assert p.fast.first_unstable_offset is not None
        p.append(_batch([(b"k", b"plain", NOW)]))
        for pid in (11, 12):
            control = ControlRecordType.COMMIT if (round_ + pid) % 2 else ControlRecordType.ABORT
            for log in (p.fast, p.general):
                append_end_txn_marker(log, pid, 0, control, NOW)
            p.check_same()
        assert p.fast.first_unstable_offset is None
    assert p.fast.num_log_segments > 2
    assert p.fast.collect_aborted_transactions(
        0, p.fast.log_end_offset
    ) == p.general.collect_aborted_transactions(0, p.general.log_end_offset)


def test_other_shapes_go_to_the_general_path(pair: Any) -> None:
    p = pair()
    no_sequence = bytearray(_batch([(b"k", b"v", NOW)], producer_id=7))
    struct.pack_into(
        ">i", no_sequence, 53, -1
    )  # a producer id without a base sequence: the general path's error
    import crc32c

    struct.pack_into(">I", no_sequence, 17, crc32c.crc32c(bytes(no_sequence[21:])))
    with pytest.raises(InvalidRecordError, match="invalid sequence number"):
        p.fast.append_as_leader(MemoryRecords(no_sequence))
    p.append(_batch([(b"k", b"v", NOW)] * 3, compression=Compression.GZIP), expect_fast=False)
    two = _batch([(b"k", b"v", NOW)]) + _batch([(b"k", b"w", NOW)])
    with pytest.raises(InvalidRecordError):
        p.fast.append_as_leader(MemoryRecords(bytearray(two)))
    q = pair({"compression.type": "lz4"})
    q.append(_batch([(b"k", b"v", NOW)] * 3), expect_fast=False)


def _rejections() -> list[tuple[str, dict[str, Any], bytes, type[KafkaError]]]:
    good = _batch([(b"k", b"v", NOW)] * 3)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    based = bytearray(good)
    struct.pack_into(">q", based, 0, 5)
    bad_count = bytearray(good)
    struct.pack_into(">i", bad_count, 57, 4)
    import crc32c

    struct.pack_into(">I", bad_count, 17, crc32c.crc32c(bytes(bad_count[21:])))
    big = _batch([(b"k", b"v" * 2000, NOW)])
    return [
        ("corrupt-crc", {}, bytes(corrupt), CorruptRecordError),
        ("base-offset", {}, bytes(based), InvalidRecordError),
        ("count-mismatch", {}, bytes(bad_count), InvalidRecordError),
        ("too-large", {"max.message.bytes": 1000}, big, RecordTooLargeError),
        ("segment-too-small", {"segment.bytes": 1000}, big, RecordBatchTooLargeError),
        (
            "null-key-compacted",
            {"cleanup.policy": "compact"},
            _batch([(None, b"v", NOW)]),
            RecordValidationError,
        ),
        (
            "future-timestamp",
            {"message.timestamp.after.max.ms": 1000},
            _batch([(b"k", b"v", NOW + 5000)]),
            RecordValidationError,
        ),
        (
            "past-timestamp",
            {"message.timestamp.before.max.ms": 1000},
            _batch([(b"k", b"v", NOW - 5000)]),
            RecordValidationError,
        ),
    ]


@pytest.mark.parametrize(
    ("config", "data", "error"), [r[1:] for r in _rejections()], ids=[r[0] for r in _rejections()]
)
def test_rejections_raise_the_general_paths_error_and_change_nothing(
    pair: Any, config: dict[str, Any], data: bytes, error: type[KafkaError]
) -> None:
    p = pair(config)
    p.append(_batch([(b"k", b"v", NOW)]))
    with pytest.raises(error) as fast_error:
        p.fast.append_as_leader(MemoryRecords(bytearray(data)))
    with pytest.raises(error) as general_error:
        _general(p.general, MemoryRecords(bytearray(data)))
    assert str(fast_error.value) == str(general_error.value)
    p.check_same()
    assert p.fast.log_end_offset == 1


# --- random batches ---------------------------------------------------------------------------------------

_record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=8)),
    st.one_of(st.none(), st.binary(max_size=64)),
    st.one_of(st.just(-1), st.integers(NOW - 10_000, NOW + 10_000), st.integers(0, 2**42)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.lists(_record, min_size=1, max_size=12), min_size=1, max_size=6),
    ts_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    compact=st.booleans(),
    epoch=st.integers(-1, 3),
)
def test_random_batches_match_or_fail_alike(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[tuple[bytes | None, bytes | None, int]]],
    ts_type: str,
    compact: bool,
    epoch: int,
) -> None:
    config = {
        "message.timestamp.type": ts_type,
        "cleanup.policy": "compact" if compact else "delete",
        "message.timestamp.before.max.ms": 5000,
        "message.timestamp.after.max.ms": 5000,
        "segment.bytes": 2048,
    }
    p = Pair(tmp_path_factory.mktemp("rand"), config)
    try:
        for recs in batches:
            data = _batch(recs)
            try:
                expected = _general(p.general, MemoryRecords(bytearray(data)), epoch)
            except KafkaError as exc:
                with pytest.raises(type(exc)) as raised:
                    p.fast.append_as_leader(MemoryRecords(bytearray(data)), epoch)
                assert str(raised.value) == str(exc)
            else:
                got = p.fast.append_as_leader(MemoryRecords(bytearray(data)), epoch)
                assert dataclasses.asdict(got) == dataclasses.asdict(expected)
            p.check_same()
    finally:
        p.close()


# --- Log.append of a few records: built in Python, appended without a second check ----------------------


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"message.timestamp.type": "LogAppendTime"},
        {"cleanup.policy": "compact"},
        {"compression.type": "lz4"},
        {"segment.bytes": 400, "index.interval.bytes": 50},
        {"message.timestamp.before.max.ms": 1000, "max.message.bytes": 300},
    ],
    ids=["create-time", "log-append-time", "compact", "lz4-topic", "rolls", "limits"],
)
def test_log_append_of_a_few_records_matches_the_general_path(pair: Any, config: dict[str, Any]) -> None:
    p = pair(config)
    codec = p.fast.config.target_compression or Compression.NONE
    shapes: list[list[Any]] = [
        [b"v" * 100],
        [(b"k", b"v")],
        [SimpleRecord(b"x" * 50, b"key", NOW - 5)],
        [b"a", b"b", b"c"],
        [SimpleRecord(b"old", b"k", NOW - 5000)],
        [(b"k", b"y" * 400)],
        [(b"k%d" % i, b"z") for i in range(20)],  # past the Python builder's limit
    ]
    for items in shapes * 3:
        built = MemoryRecords.build(items, compression=codec, now_ms=p.time.milliseconds())
        try:
            expected = _general(p.general, MemoryRecords(bytearray(built.buffer)))
        except KafkaError as exc:
            with pytest.raises(type(exc)) as raised:
                p.fast.append(items)
            assert str(raised.value) == str(exc)
        else:
            got = p.fast.append(items)
            assert dataclasses.asdict(got) == dataclasses.asdict(expected)
        p.check_same()
        p.time.sleep(3)
