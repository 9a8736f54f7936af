"""Golden bytes of the producer snapshot (``<offset>.snapshot``) and of ``leader-epoch-checkpoint``.

The snapshot layout is Kafka's ``PID_SNAPSHOT_MAP_SCHEMA`` (``core/.../ProducerStateManager.scala`` before
KAFKA-14480; ``storage/src/main/resources/message/ProducerSnapshot.json`` since, same bytes)::

    version INT16 (1) · crc UNSIGNED_INT32 · producer_entries ARRAY(INT32 count) of
      producer_id INT64 · epoch INT16 · last_sequence INT32 · last_offset INT64 · offset_delta INT32 ·
      timestamp INT64 · coordinator_epoch INT32 · current_txn_first_offset INT64

with the CRC-32C of bytes ``[6, end)`` (``PRODUCER_ENTRIES_OFFSET``) written at byte 2 (``CRC_OFFSET``).

Each expected file is built here by hand from that schema with ``struct`` and a CRC-32C written in this file
(checked against the standard check value), and also given as a hex constant that Kafka's own code produced:
``org.apache.kafka.common.protocol.types.Struct`` over that schema plus ``Crc32C.compute`` from kafka-clients
3.9.1, the exact steps of Kafka's ``writeSnapshot`` (generated once with a throw-away Java program; the
constants are not derived from kafkalog). kafkalog's writer must produce both byte for byte and read them back.

``leader-epoch-checkpoint`` is Kafka's ``CheckpointFile`` text: ``0\\n<count>\\n<epoch> <offset>\\n...``.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkalog.errors import CorruptSnapshotError
from kafkalog.log import Log
from kafkalog.log.checkpoint import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry, leader_epoch_checkpoint
from kafkalog.log.leader_epoch import LeaderEpochFileCache
from kafkalog.log.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
    write_snapshot,
)
from kafkalog.log.types import AppendOrigin
from kafkalog.records import ControlRecordType, EndTransactionMarker, MemoryRecords, SimpleRecord
from kafkalog.storage import LogOffsetMetadata
from kafkalog.time import MockTime

from .conftest import LogFactory
from .helpers import append_end_txn_marker, append_transactional, records

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1

# --- an independent CRC-32C (Castagnoli, reflected 0x82F63B78) ----------------------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # Kafka's Crc32C.compute gives the same (checked with the jar)


# --- the expected snapshot, by hand ------------------------------------------------------------------------------

Row = tuple[int, int, int, int, int, int, int, int]  # the eight fields, in schema order


def hand_built_snapshot(rows: list[Row]) -> bytes:
    """Kafka's ``writeSnapshot`` step by step: struct with crc 0, then the CRC of [6, end) at byte 2."""
    body = struct.pack(">i", len(rows))
    for pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first in rows:
        body += struct.pack(">q", pid)
        body += struct.pack(">h", epoch)
        body += struct.pack(">i", last_seq)
        body += struct.pack(">q", last_offset)
        body += struct.pack(">i", delta)
        body += struct.pack(">q", timestamp)
        body += struct.pack(">i", coordinator_epoch)
        body += struct.pack(">q", txn_first)
    return struct.pack(">h", 1) + struct.pack(">I", crc32c(body)) + body


def entry(row: Row) -> ProducerStateEntry:
    """The ProducerStateEntry whose snapshot row is ``row`` (``last_offset < 0``: no batch)."""
    pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first = row
    e = ProducerStateEntry(pid, epoch, coordinator_epoch, timestamp, None if txn_first < 0 else txn_first)
    if last_offset >= 0:
        e.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
    return e


def row_of(e: ProducerStateEntry) -> Row:
    return (
        e.producer_id,
        e.producer_epoch,
        e.last_seq,
        e.last_data_offset,
        e.last_offset_delta,
        e.last_timestamp,
        e.coordinator_epoch,
        -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
    )


# Produced by Kafka's code (see the module doc).
KAFKA_GOLDEN: dict[str, tuple[list[Row], str]] = {
    "empty": ([], "000148674bc700000000"),
    "kafka-read-write-test": (
        [(1, 2, 1, 2, 3, -1, 3, 100), (11, 12, -1, -1, 0, 123456, 13, -1)],
        "0001fedf4e500000000200000000000000010002000000010000000000000002"
        "00000003ffffffffffffffff000000030000000000000064000000000000000b"
        "000cffffffffffffffffffffffff00000000000000000001e2400000000dffff"
        "ffffffffffff",
    ),
    "extremes": (
        [
            (INT64_MAX, INT16_MAX, INT32_MAX, INT64_MAX - 1, INT32_MAX, INT64_MAX, INT32_MAX, INT64_MAX - 2),
            (0, 0, 0, 0, 0, 0, 0, -1),
        ],
        "00010b7e7d27000000027fffffffffffffff7fff7fffffff7ffffffffffffffe"
        "7fffffff7fffffffffffffff7fffffff7ffffffffffffffd0000000000000000"
        "000000000000000000000000000000000000000000000000000000000000ffff"
        "ffffffffffff",
    ),
}


@pytest.mark.parametrize("case", sorted(KAFKA_GOLDEN))
def test_hand_built_matches_kafka(case: str) -> None:
    rows, hex_bytes = KAFKA_GOLDEN[case]
    assert hand_built_snapshot(rows) == bytes.fromhex(hex_bytes)
    assert len(bytes.fromhex(hex_bytes)) == 10 + 46 * len(rows)


@pytest.mark.parametrize("case", sorted(KAFKA_GOLDEN))
def test_write_snapshot_is_byte_identical(case: str, tmp_path: Path) -> None:
    rows, hex_bytes = KAFKA_GOLDEN[case]
    path = tmp_path / "00000000000000000042.snapshot"
    write_snapshot(path, [entry(r) for r in rows])
    assert path.read_bytes() == bytes.fromhex(hex_bytes)


@pytest.mark.parametrize("case", sorted(KAFKA_GOLDEN))
def test_read_kafka_snapshot(case: str, tmp_path: Path) -> None:
    rows, hex_bytes = KAFKA_GOLDEN[case]
    path = tmp_path / "00000000000000000042.snapshot"
    path.write_bytes(bytes.fromhex(hex_bytes))
    loaded = read_snapshot(path)
    assert [row_of(e) for e in loaded] == rows
    for got, row in zip(loaded, rows, strict=True):
        assert (got.last_timestamp, got.is_empty) == (row[5], row[3] < 0)


def test_read_write_snapshot_round_trip_many(tmp_path: Path) -> None:
    rows: list[Row] = [
        (
            pid,
            pid % 7,
            pid * 3 - 1 if pid % 4 else -1,  # no batch: no sequence (-1), offset -1, delta 0
            pid * 100 if pid % 4 else -1,
            pid % 5 if pid % 4 else 0,
            1_700_000_000_000 + pid,
            pid % 3,
            pid * 10 if pid % 2 else -1,
        )
        for pid in range(1, 60)
    ]
    path = tmp_path / "00000000000000000100.snapshot"
    write_snapshot(path, [entry(r) for r in rows])
    assert path.read_bytes() == hand_built_snapshot(rows)
    assert [row_of(e) for e in read_snapshot(path)] == rows


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b[:5],  # shorter than the header
        lambda b: b"\x00\x00" + b[2:],  # version 0
        lambda b: b"\x00\x02" + b[2:],  # version 2
        lambda b: b[:2] + bytes([b[2] ^ 1]) + b[3:],  # stored CRC off by a bit
        lambda b: b[:-1] + bytes([b[-1] ^ 0x80]),  # body bit flip
        lambda b: b[:-3],  # last entry cut short
        lambda b: b + b"\x00" * 46,  # an entry more than the count says
    ],
    ids=["short", "version-0", "version-2", "crc", "body", "cut", "extra"],
)
def test_damaged_kafka_snapshot_is_corrupt(tmp_path: Path, mutate: object) -> None:
    _, hex_bytes = KAFKA_GOLDEN["kafka-read-write-test"]
    path = tmp_path / "00000000000000000003.snapshot"
    path.write_bytes(mutate(bytes.fromhex(hex_bytes)))  # type: ignore[operator]
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


def test_snapshot_count_consistent_with_recomputed_crc_but_wrong_length(tmp_path: Path) -> None:
    """A file whose CRC is valid but whose count does not match its length is still corrupt."""
    rows, _ = KAFKA_GOLDEN["kafka-read-write-test"]
    data = bytearray(hand_built_snapshot(rows))
    struct.pack_into(">i", data, 6, 3)
    struct.pack_into(">I", data, 2, crc32c(bytes(data[6:])))
    path = tmp_path / "00000000000000000003.snapshot"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


# --- what the producer state manager and the log write -----------------------------------------------------------


def test_take_snapshot_writes_the_state_in_kafka_layout(tmp_path: Path) -> None:
    time = MockTime(1_700_000_000_000)
    psm = ProducerStateManager("t-0", tmp_path, 900_000, 86_400_000, time)
    # Producer 7: a transaction open at offset 10 (two batches); producer 9: idempotent, then a COMMIT
    # marker from coordinator epoch 4 with nothing open.
    info = psm.prepare_update(7, AppendOrigin.CLIENT)
    info.append_data_batch(3, 0, 4, 1_700_000_000_005, LogOffsetMetadata(10), 14, True)
    info.append_data_batch(3, 5, 6, 1_700_000_000_009, LogOffsetMetadata(17), 18, True)
    psm.update(info)
    info = psm.prepare_update(9, AppendOrigin.CLIENT)
    info.append_data_batch(0, 0, 2, 1_700_000_000_001, LogOffsetMetadata(15), 16, False)
    psm.update(info)
    info = psm.prepare_update(9, AppendOrigin.COORDINATOR)
    assert (
        info.append_end_txn_marker(
            EndTransactionMarker(ControlRecordType.COMMIT, 4), 0, 19, 1_700_000_000_020
        )
        is None
    )
    psm.update(info)
    psm.update_map_end_offset(20)
    path = psm.take_snapshot()
    assert path == tmp_path / "00000000000000000020.snapshot"
    expected = hand_built_snapshot(
        [
            (7, 3, 6, 18, 1, 1_700_000_000_009, -1, 10),
            (9, 0, 2, 16, 1, 1_700_000_000_020, 4, -1),
        ]
    )
    assert path.read_bytes() == expected


def _idempotent(pid: int, epoch: int, seq: int, count: int, ts: int) -> MemoryRecords:
    return records(
        [SimpleRecord(b"x%d" % i, None, ts) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        sequence=seq,
    )


def test_log_close_writes_snapshot_at_log_end_offset(
    make_log: LogFactory, log_dir: Path, mock_time: MockTime
) -> None:
    log = make_log({"segment.bytes": 1 << 20})
    append = append_transactional(log, 5, 2, mock_time)
    append(3)  # offsets 0..2, transaction open at 0
    ts = mock_time.milliseconds()
    append_end_txn_marker(log, 5, 2, ControlRecordType.ABORT, ts, coordinator_epoch=6)  # offset 3
    log.append_as_leader(_idempotent(11, 1, 0, 2, ts + 1), 0)  # offsets 4..5
    leo = log.log_end_offset
    assert leo == 6
    log.close()
    path = log_dir / f"{leo:020d}.snapshot"
    rows = [row_of(e) for e in read_snapshot(path)]
    assert sorted(rows) == [
        (5, 2, 2, 2, 2, ts, 6, -1),  # the marker keeps the last batch (seq 0..2 at 0..2), takes its timestamp
        (11, 1, 1, 5, 1, ts + 1, -1, -1),
    ]
    assert path.read_bytes() == hand_built_snapshot(rows)


def test_kafka_snapshot_loads_into_a_log(make_log: LogFactory, log_dir: Path) -> None:
    """A Kafka-written snapshot at the log end offset is what a cleanly shut down log loads from."""
    log = make_log()
    log.append_as_leader(_idempotent(11, 12, 0, 3, 123456), 0)
    log.close()
    for p in log_dir.glob("*.snapshot"):
        p.unlink()
    # Kafka's bytes for producer 11: epoch 12, last sequence 2 at offset 2 (delta 2), coordinator epoch 13.
    rows: list[Row] = [(11, 12, 2, 2, 2, 123456, 13, -1)]
    (log_dir / f"{3:020d}.snapshot").write_bytes(hand_built_snapshot(rows))
    reopened = Log.open(log_dir, last_shutdown_clean=True, time=MockTime(123456 + 1000))
    try:
        state = reopened.producer_state.last_entry(11)
        assert state is not None
        assert row_of(state) == rows[0]
    finally:
        reopened.close()


# --- leader-epoch-checkpoint ---------------------------------------------------------------------------------------


def test_leader_epoch_checkpoint_bytes(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.for_directory(tmp_path)
    cache.assign(0, 1)
    cache.assign(1, 2)
    cache.assign(2, 3)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n3\n0 1\n1 2\n2 3\n"
    cache.truncate_from_end(2)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n1\n0 1\n"
    cache.clear_and_flush()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n0\n"


def test_read_hand_built_leader_epoch_checkpoint(tmp_path: Path) -> None:
    # LeaderEpochCheckpointFile's own example: "0\n2\n0 1\n1 2\n"; large values too.
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(b"0\n3\n0 1\n1 2\n2147483647 9223372036854775807\n")
    assert leader_epoch_checkpoint(tmp_path).read() == [
        EpochEntry(0, 1),
        EpochEntry(1, 2),
        EpochEntry(INT32_MAX, INT64_MAX),
    ]


def test_log_writes_leader_epoch_checkpoint(make_log: LogFactory, log_dir: Path) -> None:
    from .helpers import singleton_records

    log = make_log()
    log.append_as_leader(singleton_records(b"a"), 5)
    log.append_as_leader(singleton_records(b"b"), 5)
    log.append_as_leader(singleton_records(b"c"), 8)
    assert (log_dir / LEADER_EPOCH_CHECKPOINT_FILE).read_bytes() == b"0\n2\n5 0\n8 2\n"
