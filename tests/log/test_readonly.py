"""The read-only view of a data directory (``kafkalog.readonly.log``): offsets, reads, lookups and
transactions agree with ``Log``; it never writes; it never sees a torn batch while a writer appends; a
segment deleted under it is data loss, never a crash; index files are only hints; Kafka-written segments
read identically."""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kafkalog.errors import CorruptRecordError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from kafkalog.log import AppendOrigin, FetchIsolation, Log, LogConfig
from kafkalog.log.checkpoint import offset_checkpoint
from kafkalog.log.names import TopicPartition
from kafkalog.readonly.log import ReadOnlyDataDir, ReadOnlyLog
from kafkalog.records import Compression, ControlRecordType, Header, MemoryRecords, SimpleRecord
from kafkalog.records import _kernels as K
from kafkalog.records.columnar import iter_columnar

from .conftest import LogFactory
from .helpers import append_end_txn_marker, append_transactional, legacy_records, records

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def fill(log: Log, batches: int, per_batch: int = 4, ts: int = 1_000) -> None:
    for i in range(batches):
        log.append([SimpleRecord(b"value-%d-%d" % (i, j), b"k%d" % j, ts + i) for j in range(per_batch)])


def dir_state(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``directory`` with its size and modification time (to prove nothing was written)."""
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def decoded_offsets(rl: ReadOnlyLog, start: int, end: int) -> list[int]:
    """Offsets of the data records in ``[start, end)``, decoded (CRC-checked) from the view's chunks."""
    out: list[int] = []
    for chunk in rl.iter_batch_chunks(start, end):
        for batch in iter_columnar(chunk.data, start_offset=start, end_offset=end):
            out.extend(batch.column("offset").to_pylist())
    return out


# --- offsets and reads agree with Log -------------------------------------------------------------------------


def test_offsets_segments_and_reads_match_the_log(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 60)
    rl = ReadOnlyLog.open(log_dir)
    assert rl.topic_partition == TopicPartition("test_topic", 1)
    assert (rl.log_start_offset, rl.log_end_offset) == (log.log_start_offset, log.log_end_offset)
    assert rl.high_watermark == rl.log_end_offset  # no checkpoint, no manager metadata: HW follows LEO
    assert rl.last_stable_offset == rl.log_end_offset
    assert [s.base_offset for s in rl.segments] == [s.base_offset for s in log.segments]
    assert len(rl.segments) > 3
    for start in (0, 1, 37, 128, log.log_end_offset - 1):
        ours = rl.read(start, 300)
        theirs = MemoryRecords(bytes(log.read(start, 300).records.buffer))  # Kafka's ends in a cut batch
        assert ours.to_bytes() == b"".join(b.to_bytes() for b in theirs.batches())
    assert rl.read(rl.log_end_offset).size_in_bytes == 0
    assert decoded_offsets(rl, 0, rl.log_end_offset) == list(range(log.log_end_offset))
    assert decoded_offsets(rl, 50, 99) == list(range(50, 99))


def test_read_bounds(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 10)
    rl = ReadOnlyLog.open(log_dir)
    with pytest.raises(OffsetOutOfRangeError):
        rl.read(rl.log_end_offset + 1)
    one = rl.read(5, max_bytes=1)  # at least one batch
    assert [b.base_offset for b in one.batches()] == [4]
    bounded = rl.read(0, 1 << 20, end_offset=9)
    assert [b.base_offset for b in bounded.batches()] == [0, 4, 8]


def test_offset_for_timestamp_matches_log(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    stamps = [5_000, 1_000, 7_000, 7_000, 3_000, 9_000, 2_000, 11_000] * 6
    for i, ts in enumerate(stamps):
        log.append([SimpleRecord(b"v%d" % i, None, ts + j) for j in range(3)])
    log.roll()
    log.append([SimpleRecord(b"late", None, 20_000)])
    rl = ReadOnlyLog.open(log_dir)
    for target in (0, 1_000, 1_001, 5_002, 7_001, 9_000, 11_002, 11_003, 20_000, 20_001):
        expected = log.fetch_offset_by_timestamp(target)
        assert rl.offset_for_timestamp(target) == (None if expected is None else expected.offset), target
    assert rl.offset_for_timestamp(20_000, upper_offset=rl.log_end_offset - 1) is None


# --- never writes ---------------------------------------------------------------------------------------------


def test_never_writes(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 40)
    log.close()
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":-1}')
    before = dir_state(log_dir.parent)
    rl = ReadOnlyDataDir(log_dir.parent).log("test_topic", 1)
    assert rl.log_end_offset == 160
    rl.read(3)
    rl.offset_for_timestamp(1_010)
    rl.aborted_transactions(0, 160)
    assert rl.last_stable_offset == 160
    decoded_offsets(rl, 0, 160)
    rl.refresh()
    assert dir_state(log_dir.parent) == before


# --- metadata files -------------------------------------------------------------------------------------------


def test_log_start_and_high_watermark_from_checkpoints(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 20)
    tp = TopicPartition("test_topic", 1)
    offset_checkpoint(log_dir.parent / "log-start-offset-checkpoint").write([(tp, 10)])
    offset_checkpoint(log_dir.parent / "replication-offset-checkpoint").write([(tp, 50)])
    rl = ReadOnlyLog.open(log_dir)
    assert (rl.log_start_offset, rl.high_watermark, rl.log_end_offset) == (10, 50, 80)
    with pytest.raises(OffsetOutOfRangeError):
        rl.read(9)
    offset_checkpoint(log_dir.parent / "replication-offset-checkpoint").write([(tp, 500)])
    rl.refresh()
    assert rl.high_watermark == 80  # clamped to the log end
    (log_dir.parent / "kafkalog-topics.json").write_text(json.dumps({"version": 1, "hw_follows_leo": True}))
    offset_checkpoint(log_dir.parent / "replication-offset-checkpoint").write([(tp, 7)])
    rl.refresh()
    assert rl.high_watermark == 80
    assert ReadOnlyLog.open(log_dir, log_start_offset=0, high_watermark=33).high_watermark == 33


def test_data_dir_listing(tmp_path: Path) -> None:
    for name in [
        "a-0",
        "a-1",
        "b.c-3",
        "a-2.0123456789abcdef0123456789abcdef-delete",
        "a-7.abc-future",
        "junk",
    ]:
        (tmp_path / name).mkdir()
    (tmp_path / "z-0").write_text("a file, not a partition")
    dd = ReadOnlyDataDir(tmp_path)
    assert dd.topics() == ["a", "b.c"]
    assert dd.partitions("a") == [0, 1]
    with pytest.raises(UnknownTopicOrPartitionError):
        dd.partitions("nope")
    with pytest.raises(UnknownTopicOrPartitionError):
        dd.log("a", 5)
    empty = dd.log("a", 0)
    assert (empty.log_start_offset, empty.log_end_offset, empty.segments) == (0, 0, [])


# --- the tail: torn batches, zero-filled preallocation, stale index ------------------------------------------


def test_log_end_offset_stops_before_a_torn_or_corrupt_tail(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    fill(log, 5)
    log.close()
    active = sorted(log_dir.glob("*.log"))[-1]
    good = active.read_bytes()
    nxt = records([SimpleRecord(b"next", None, 5)], base_offset=20).to_bytes()
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 20
    with open(active, "ab") as f:
        f.write(nxt[: len(nxt) // 2])  # a batch still being written
    rl.refresh()
    assert rl.log_end_offset == 20
    corrupt = bytearray(nxt)
    corrupt[-1] ^= 0xFF  # complete length, wrong CRC: torn by a crash
    active.write_bytes(good + bytes(corrupt))
    rl.refresh()
    assert rl.log_end_offset == 20
    active.write_bytes(good + bytes(4096))  # preallocated, never written
    fresh = ReadOnlyLog.open(log_dir)
    assert fresh.log_end_offset == 20
    assert decoded_offsets(fresh, 0, 20) == list(range(20))
    active.write_bytes(good + nxt)
    rl.refresh()
    assert rl.log_end_offset == 21


def test_torn_batch_with_an_index_entry_ends_the_log_at_its_base_offset(
    make_log: LogFactory, log_dir: Path
) -> None:
    log = make_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=1))
    fill(log, 5)  # 4 records a batch; an index entry at every batch after the first
    log.close()
    active = sorted(log_dir.glob("*.log"))[-1]
    active.write_bytes(active.read_bytes()[:-10])  # the last batch (offsets 16..19), indexed, is torn
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 16  # not 19, the indexed batch's last offset
    assert decoded_offsets(rl, 0, rl.log_end_offset) == list(range(16))


def test_damage_in_a_rolled_segment_is_an_error_after_the_batches_before_it(
    make_log: LogFactory, log_dir: Path
) -> None:
    log = make_log(LogConfig(segment_bytes=400, index_interval_bytes=1 << 20))
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert len(bases) >= 3
    first = log_dir / f"{bases[0]:020d}.log"
    first.write_bytes(first.read_bytes()[:-10])  # the rolled segment's last batch is torn
    torn_base = bases[1] - 4
    rl = ReadOnlyLog.open(log_dir)
    seen: list[int] = []
    with pytest.raises(CorruptRecordError, match="rolled segment"):
        for chunk in rl.iter_batch_chunks(0, rl.log_end_offset):
            seen.extend(int(b) for b in chunk.table[K.F_BASE_OFFSET])
    assert seen == list(range(0, torn_base, 4))
    batches = list(rl.read(0, 1 << 20).batches())  # the batches before the damage
    assert [b.base_offset for b in batches] == list(range(0, torn_base, 4))
    with pytest.raises(CorruptRecordError):
        rl.read(torn_base)  # the damage is where this read starts
    damage: list[tuple[int, int]] = []
    offsets = []
    for chunk in rl.iter_batch_chunks(
        0, rl.log_end_offset, on_damage=lambda lo, hi, e: damage.append((lo, hi))
    ):
        offsets.extend(int(b) for b in chunk.table[K.F_BASE_OFFSET])
    assert damage == [(torn_base, bases[1])]
    assert offsets == [o for o in range(0, rl.log_end_offset, 4) if o != torn_base]


def test_index_entries_are_only_hints(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=64))
    fill(log, 50)
    log.close()
    index = next(log_dir.glob("*.index"))
    entries = index.read_bytes()
    assert len(entries) >= 8 * 10
    damaged = bytearray(entries)
    damaged[-8:] = (30).to_bytes(4, "big") + (12).to_bytes(4, "big")  # points into the middle of a batch
    index.write_bytes(bytes(damaged) + bytes(800))  # and a zero-filled preallocated tail
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 200
    assert decoded_offsets(rl, 190, 200) == list(range(190, 200))
    assert [b.base_offset for b in rl.read(197, 1).batches()] == [196]
    index.write_bytes(os.urandom(len(entries)))
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 200
    assert decoded_offsets(rl, 101, 107) == list(range(101, 107))
    index.unlink()
    (log_dir / index.name.replace(".index", ".timeindex")).unlink()
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 200
    assert rl.offset_for_timestamp(1_030) == 120


def test_reads_an_open_log_with_preallocated_indexes(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(LogConfig(segment_bytes=4096, index_interval_bytes=100, preallocate=True))
    fill(log, 30)
    active = sorted(log_dir.glob("*.log"))[-1]
    assert active.stat().st_size == 4096  # zero-filled while the writer is live
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == log.log_end_offset
    assert decoded_offsets(rl, 0, rl.log_end_offset) == list(range(log.log_end_offset))
    fill(log, 3, ts=5_000)
    rl.refresh()
    assert rl.log_end_offset == log.log_end_offset
    assert rl.offset_for_timestamp(5_000) == log.log_end_offset - 12


# --- a concurrent writer, retention under a reader -----------------------------------------------------------


@pytest.mark.parametrize("preallocate", [False, True])
def test_concurrent_writer_never_shows_a_torn_batch(tmp_path: Path, preallocate: bool) -> None:
    config = LogConfig(segment_bytes=16 << 10, index_interval_bytes=512, preallocate=preallocate)
    log = Log.open(tmp_path / "live-0", config)
    stop = threading.Event()
    refreshed = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            i = 0
            while not stop.is_set() and i < 1000:
                n = 1 + i % 7
                log.append([SimpleRecord(b"%d:%d" % (i, j) * (1 + j % 5), b"k", 1_000 + i) for j in range(n)])
                i += 1
                if i % 100 == 0:  # let the reader see the log grow (an append is far faster than a refresh)
                    refreshed.clear()
                    refreshed.wait(5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    rl = ReadOnlyLog.open(tmp_path / "live-0")
    seen = 0
    ends = []
    try:
        while writer.is_alive() or seen < log.log_end_offset:
            rl.refresh()
            leo = rl.log_end_offset
            ends.append(leo)
            refreshed.set()
            if leo > seen:
                assert decoded_offsets(rl, seen, leo) == list(range(seen, leo))
                seen = leo
    finally:
        stop.set()
        writer.join()
        log.close()
    assert not errors
    assert ends == sorted(ends) and len(set(ends)) > 3
    assert seen == log.log_end_offset


def test_retention_deletes_segments_under_the_reader(tmp_path: Path) -> None:
    log = Log.open(
        tmp_path / "ret-0",
        LogConfig(segment_bytes=1024, retention_bytes=5000, retention_ms=-1, file_delete_delay_ms=0),
    )
    fill(log, 60)
    log.update_high_watermark(log.log_end_offset)
    rl = ReadOnlyLog.open(tmp_path / "ret-0")
    assert rl.log_start_offset == 0
    chunks = rl.iter_batch_chunks(0, rl.log_end_offset, chunk_bytes=256)
    first = next(chunks)  # the first segment is open now: deleting it does not disturb this read
    assert first.table[K.F_BASE_OFFSET, 0] == 0
    assert log.delete_old_segments() > 0
    missing: list[tuple[int, int]] = []
    rest = rl.iter_batch_chunks(0, rl.log_end_offset, on_missing=lambda lo, hi: missing.append((lo, hi)))
    bases = [int(c.table[K.F_BASE_OFFSET, 0]) for c in rest]
    assert missing == [(0, log.log_start_offset)]
    assert bases[0] == log.log_start_offset
    held = []
    with pytest.raises(OffsetOutOfRangeError):  # it finishes the segment it holds, then reports the loss
        held.extend(int(b) for c in chunks for b in c.table[K.F_BASE_OFFSET])
    assert held and held[-1] < 28 <= log.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        list(rl.iter_batch_chunks(0, 8))
    rl.refresh()
    assert rl.log_start_offset == log.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        rl.read(0)
    log.close()


# --- transactions ---------------------------------------------------------------------------------------------


def test_last_stable_offset_and_aborted_transactions(
    make_log: LogFactory, log_dir: Path, mock_time: Any
) -> None:
    log = make_log(SMALL)
    fill(log, 2)
    committed = append_transactional(log, 7, 0, mock_time)
    aborted = append_transactional(log, 8, 0, mock_time)
    committed(3)
    aborted(2)
    fill(log, 1)
    aborted(2)
    append_end_txn_marker(log, 7, 0, ControlRecordType.COMMIT, mock_time.milliseconds())
    append_end_txn_marker(log, 8, 0, ControlRecordType.ABORT, mock_time.milliseconds())
    open_txn = append_transactional(log, 9, 0, mock_time)
    first_open = log.log_end_offset
    open_txn(2)
    fill(log, 1)
    log.update_high_watermark(log.log_end_offset)
    rl = ReadOnlyLog.open(log_dir)
    assert rl.last_stable_offset == first_open == log.last_stable_offset
    ours = rl.aborted_transactions(0, rl.log_end_offset)
    theirs = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in ours] == [
        (t.producer_id, t.first_offset, t.last_offset) for t in theirs
    ]
    assert [(t.producer_id, t.first_offset) for t in ours] == [(8, 11)]
    assert log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions is not None
    # The writer indexes an ABORT marker just after appending it: a reader in between still sees the abort.
    for txn_index in log_dir.glob("*.txnindex"):
        txn_index.write_bytes(b"")
    assert [
        (t.producer_id, t.first_offset) for t in ReadOnlyLog.open(log_dir).aborted_transactions(0, 100)
    ] == [(8, 11)]
    marker = MemoryRecords.end_transaction_marker(
        producer_id=9,
        producer_epoch=0,
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=0,
        timestamp=1,
    )
    log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)
    rl.refresh()
    assert rl.last_stable_offset == rl.log_end_offset


def test_last_stable_offset_from_a_snapshot(make_log: LogFactory, log_dir: Path, mock_time: Any) -> None:
    log = make_log(SMALL)
    fill(log, 3)
    open_txn = append_transactional(log, 5, 0, mock_time)
    open_txn(2)
    fill(log, 60)  # several rolls: snapshots hold the open transaction
    log.update_high_watermark(log.log_end_offset)
    assert len(list(log_dir.glob("*.snapshot"))) > 1
    rl = ReadOnlyLog.open(log_dir)
    assert rl.last_stable_offset == 12 == log.last_stable_offset


# --- Kafka-written segments -----------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kafka_spec() -> dict[str, Any]:
    """Batches for Kafka's own writer: every codec, headers, null keys/values, a transaction and its ABORT."""
    batches: list[dict[str, Any]] = []
    offset = 0
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        recs = []
        for j in range(5):
            rec: dict[str, Any] = {
                "timestamp": 1_700_000_000_000 + offset,
                "value": _b64(b"%s-%d" % (codec.encode(), j)),
            }
            rec["key"] = None if j == 0 else _b64(b"key-%d" % j)
            rec["headers"] = [{"key": "h", "value": _b64(b"x")}] if j % 2 else []
            recs.append(rec)
            offset += 1
        batches.append({"compression": codec, "baseOffset": offset - 5, "records": recs})
    txn = {"timestamp": 1_700_000_001_000, "key": None, "value": _b64(b"aborted")}
    batches.append(
        {
            "baseOffset": offset,
            "producerId": 42,
            "producerEpoch": 0,
            "baseSequence": 0,
            "isTransactional": True,
            "records": [txn],
        }
    )
    batches.append(
        {
            "baseOffset": offset + 1,
            "producerId": 42,
            "producerEpoch": 0,
            "control": {"type": "ABORT", "coordinatorEpoch": 1, "timestamp": 1_700_000_001_000},
        }
    )
    batches.append(
        {"baseOffset": offset + 2, "records": [{"timestamp": 1_700_000_002_000, "key": None, "value": None}]}
    )
    return {"batches": batches}


@pytest.mark.interop
def test_kafka_written_segment_reads_identically(kafka_java: Any, tmp_path: Path) -> None:
    directory = tmp_path / "kafka-0"
    directory.mkdir()
    segment = directory / "00000000000000000000.log"
    kafka_java.write(kafka_spec(), segment)
    lines, code = kafka_java.dump(segment, deep=True)
    assert code == 0
    expected = []
    control = False
    for line in lines:
        if line["type"] == "batch":
            control = line["isControlBatch"]
        elif line["type"] == "record" and not control:
            key = None if line["key"] is None else base64.b64decode(line["key"])
            value = None if line["value"] is None else base64.b64decode(line["value"])
            headers = [(h["key"], base64.b64decode(h["value"])) for h in line["headers"]] or None
            expected.append((line["offset"], line["timestamp"], key, value, headers))
    rl = ReadOnlyLog.open(directory)
    assert (rl.log_start_offset, rl.log_end_offset) == (0, 28)
    assert rl.last_stable_offset == 28
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in rl.aborted_transactions(0, 28)] == [
        (42, 25, 26)
    ]
    assert rl.offset_for_timestamp(1_700_000_000_013) == 13
    got = []
    for chunk in rl.iter_batch_chunks(0, 28):
        for batch in iter_columnar(chunk.data):
            for row in batch.to_pylist():
                headers = [(h["key"], h["value"]) for h in row["headers"]] if row["headers"] else None
                got.append((row["offset"], row["timestamp"], row["key"], row["value"], headers))
    assert got == expected
    assert [b.base_offset for b in rl.read(11, 1).batches()] == [10]


def test_compressed_and_legacy_free_scan_uses_codecs(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(SMALL)
    for codec in Compression:
        log.append([SimpleRecord(b"x" * 50, None, 1, (Header("a", None),))] * 3, compression=codec)
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 3 * len(Compression)
    assert decoded_offsets(rl, 0, rl.log_end_offset) == list(range(rl.log_end_offset))
    assert np.all(np.diff(decoded_offsets(rl, 2, 9)) == 1)


# --- a LogManager's data directories --------------------------------------------------------------------------


def test_reads_a_live_log_manager(tmp_path: Path) -> None:
    from kafkalog.manager import LogManager

    dirs = [tmp_path / "d1", tmp_path / "d2"]
    with LogManager.open(dirs, {"segment.bytes": 2048}, background=False) as mgr:
        mgr.create_topic("events", partitions=3)
        for p in range(3):
            for i in range(20 + p):
                mgr.append("events", p, MemoryRecords.build([SimpleRecord(b"e%d" % i, b"k", 1_000 + i)]))
        mgr.checkpoint()
        found = {}
        for d in dirs:
            dd = ReadOnlyDataDir(d)
            for topic in dd.topics():
                for p in dd.partitions(topic):
                    rl = dd.log(topic, p)
                    found[(topic, p)] = (rl.log_start_offset, rl.high_watermark, rl.log_end_offset)
        assert found == {("events", p): (0, 20 + p, 20 + p) for p in range(3)}  # HW follows the LEO
        log = mgr.get_log("events", 1)
        rl = ReadOnlyLog.open(log.dir)
        assert decoded_offsets(rl, 0, rl.log_end_offset) == list(range(21))
        mgr.append("events", 1, MemoryRecords.build([SimpleRecord(b"more")]))
        rl.refresh()
        assert rl.high_watermark == rl.log_end_offset == 22


def test_batches_larger_than_the_read_chunk(make_log: LogFactory, log_dir: Path) -> None:
    log = make_log(LogConfig(segment_bytes=1 << 20))
    for i in range(6):
        log.append([SimpleRecord(os.urandom(3000 + i), None, i) for _ in range(4)])
    rl = ReadOnlyLog.open(log_dir)
    assert rl.log_end_offset == 24
    bases = [int(c.table[K.F_BASE_OFFSET, 0]) for c in rl.iter_batch_chunks(3, 24, chunk_bytes=1000)]
    assert bases == [0, 4, 8, 12, 16, 20]
    assert decoded_offsets(rl, 3, 24) == list(range(3, 24))


def test_legacy_entries_are_read_up_converted(tmp_path: Path) -> None:
    directory = tmp_path / "old-0"
    directory.mkdir()
    data = b"".join(
        [
            legacy_records(0, [(b"k0", b"v0"), (None, b"v1")], base_offset=0).to_bytes(),
            legacy_records(
                1, [(b"k2", b"v2"), (b"k3", None)], base_offset=2, codec=1, timestamp=1_234
            ).to_bytes(),
            records([SimpleRecord(b"v4", b"k4", 5_000)], base_offset=4).to_bytes(),
        ]
    )
    (directory / "00000000000000000000.log").write_bytes(data)
    rl = ReadOnlyLog.open(directory)
    assert rl.log_end_offset == 5
    rows = []
    for chunk in rl.iter_batch_chunks(1, 5):
        for batch in iter_columnar(chunk.data, start_offset=1, end_offset=5):
            rows.extend((r["offset"], r["key"], r["value"], r["timestamp"]) for r in batch.to_pylist())
    assert rows == [
        (1, None, b"v1", -1),
        (2, b"k2", b"v2", 1_234),
        (3, b"k3", None, 1_234),
        (4, b"k4", b"v4", 5_000),
    ]
    assert decoded_offsets(rl, 0, 3) == [0, 1, 2]
    corrupt = bytearray(data)
    corrupt[23] ^= 0xFF  # the first entry's key: its CRC no longer matches
    (directory / "00000000000000000000.log").write_bytes(bytes(corrupt))
    with pytest.raises(CorruptRecordError):
        list(ReadOnlyLog.open(directory).iter_batch_chunks(0, 5))
