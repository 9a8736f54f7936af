"""``kafkalog dump`` of index, transaction index, snapshot and checkpoint files written by :class:`Log`.

Every expectation is computed from the raw bytes of the file (parsed here with ``struct``), so the dump is
compared with what the file holds; the text lines follow ``DumpLogSegments.scala``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalog.log import Log, LogConfig
from kafkalog.log.producer_state import read_snapshot
from kafkalog.records import SimpleRecord

from .helpers import (
    TS,
    json_lines,
    offset_index_entries,
    run,
    run_process,
    time_index_entries,
    txn_index_entries,
    write_partition,
)


@pytest.fixture(scope="module")
def part(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed partition directory with several segments, an idempotent producer and two transactions."""
    path = tmp_path_factory.mktemp("dump") / "orders-0"
    written = write_partition(path)
    assert len(written.bases) >= 4
    return path


def name(base: int, suffix: str) -> str:
    return f"{base:020d}{suffix}"


def bases(part: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in part.glob("*.log"))


# --------------------------------------------------------------------------------------------------- .index


def test_offset_index_text_is_the_file(part: Path) -> None:
    for base in bases(part):
        path = part / name(base, ".index")
        entries = offset_index_entries(path)
        result = run("dump", path)
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == f"Dumping {path}"
        if not entries:
            assert lines[1:] == [f"{path} is empty."]
        else:
            assert lines[1:] == [f"offset: {base + rel} position: {pos}" for rel, pos in entries]
        assert result.stderr == ""


def test_offset_index_json(part: Path) -> None:
    base = bases(part)[0]
    path = part / name(base, ".index")
    entries = offset_index_entries(path)
    assert entries, "the first segment has index entries"
    result = run("dump", "--json", path)
    assert result.exit_code == 0
    objs = json_lines(result.stdout)
    assert objs[:-1] == [{"type": "entry", "offset": base + rel, "position": pos} for rel, pos in entries]
    assert objs[-1] == {
        "type": "summary",
        "fileType": "offset_index",
        "baseOffset": base,
        "entries": len(entries),
        "unusedSlots": 0,
        "mismatches": 0,
        "fileBytes": path.stat().st_size,
    }
    assert list(objs[-1]) == [
        "type",
        "fileType",
        "baseOffset",
        "entries",
        "unusedSlots",
        "mismatches",
        "fileBytes",
    ]


def test_offset_index_mismatches_are_reported_as_kafka_does(part: Path, tmp_path: Path) -> None:
    base = bases(part)[0]
    copy = tmp_path / "orders-0"
    copy.mkdir()
    for suffix in (".log", ".index"):
        (copy / name(base, suffix)).write_bytes((part / name(base, suffix)).read_bytes())
    path = copy / name(base, ".index")
    data = bytearray(path.read_bytes())
    rel0, pos0 = struct.unpack_from(">ii", data, 0)
    struct.pack_into(">ii", data, 0, rel0 + 1, pos0)  # wrong offset for a real batch start
    rel1, pos1 = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, rel1, pos1 + 3)  # not a batch start
    path.write_bytes(bytes(data))
    result = run("dump", path)
    assert result.exit_code == 2
    assert f"offset: {base + rel0 + 1} position: {pos0}" in result.stdout
    err = result.stderr.splitlines()
    assert err[0] == f"Mismatches in :{path.absolute()}"
    assert err[1] == f"  Index offset: {base + rel0 + 1}, log offset: {base + rel0}"
    assert err[2].startswith(
        f"  Index offset: {base + rel1}, log offset: -1 (no batch starts at position {pos1 + 3}"
    )
    objs = json_lines(run("dump", "--json", "--verify-index-only", path).stdout)
    mismatches = [o for o in objs if o["type"] == "mismatch"]
    assert [o["kind"] for o in mismatches] == ["offset_mismatch", "no_batch_at_position"]
    assert mismatches[0] == {
        "type": "mismatch",
        "kind": "offset_mismatch",
        "entry": 0,
        "offset": base + rel0 + 1,
        "position": pos0,
        "logOffset": base + rel0,
        "message": mismatches[0]["message"],
    }
    assert not [o for o in objs if o["type"] == "entry"]  # --verify-index-only prints no entries
    assert objs[-1]["mismatches"] == 2


def test_verify_index_only_prints_nothing_for_a_good_index(part: Path) -> None:
    path = part / name(bases(part)[0], ".index")
    result = run("dump", "--verify-index-only", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {path}"]


def test_index_without_its_log(tmp_path: Path, part: Path) -> None:
    path = tmp_path / name(0, ".index")
    path.write_bytes((part / name(0, ".index")).read_bytes())
    result = run("dump", path)
    assert result.exit_code == 0
    assert "not checked against the log" in result.stderr
    assert len(result.stdout.splitlines()) == 1 + len(offset_index_entries(path))
    verify = run("dump", "--verify-index-only", path)
    assert verify.exit_code == 66
    assert "nothing to verify the index against" in verify.stderr


def test_active_segment_index_stops_at_the_preallocated_tail(tmp_path: Path) -> None:
    """An open log's active index is preallocated (zero-filled): the dump stops at the first unused slot."""
    written = write_partition(tmp_path / "live-0", close=False, segment_bytes=1 << 20, transactions=False)
    path = written.path / name(0, ".index")
    slots = offset_index_entries(path)
    used = [e for i, e in enumerate(slots) if i == 0 or e[0] != 0]
    assert len(slots) > len(used) > 0  # preallocated
    objs = json_lines(run("dump", "--json", path).stdout)
    assert [(o["offset"], o["position"]) for o in objs if o["type"] == "entry"] == used
    assert objs[-1]["unusedSlots"] == len(slots) - len(used)
    assert objs[-1]["mismatches"] == 0


def test_index_sanity_check(part: Path, tmp_path: Path) -> None:
    path = part / name(bases(part)[0], ".index")
    result = run("dump", "--index-sanity-check", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {path}", f"{path} passed sanity check."]
    bad = tmp_path / name(100, ".index")
    bad.write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", -3, 100))  # last offset below the base
    result = run("dump", "--index-sanity-check", bad)
    assert result.exit_code == 2
    assert (
        "has non-zero size but the last offset is 97 which is less than the base offset 100" in result.stderr
    )
    odd = tmp_path / name(200, ".index")
    odd.write_bytes(struct.pack(">ii", 5, 0) + b"\x00\x01\x02")
    result = run("dump", "--json", "--index-sanity-check", odd)
    assert result.exit_code == 2
    check = json_lines(result.stdout)[0]
    assert check["type"] == "sanityCheck" and check["passed"] is False
    assert "neither positive nor a multiple of 8" in check["message"]


def test_partial_index_entry_is_a_truncated_tail(part: Path, tmp_path: Path) -> None:
    copy = tmp_path / "orders-0"
    copy.mkdir()
    base = bases(part)[0]
    (copy / name(base, ".log")).write_bytes((part / name(base, ".log")).read_bytes())
    path = copy / name(base, ".index")
    path.write_bytes((part / name(base, ".index")).read_bytes() + b"\x00\x00\x01")
    result = run("dump", "--json", path)
    assert result.exit_code == 3
    objs = json_lines(result.stdout)
    assert objs[-2]["type"] == "error" and objs[-2]["error"] == "truncated"
    assert objs[-1]["type"] == "summary"


# --------------------------------------------------------------------------------------------------- .timeindex


def test_time_index_is_the_file(part: Path) -> None:
    for base in bases(part):
        path = part / name(base, ".timeindex")
        entries = time_index_entries(path)
        result = run("dump", path)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines() == [f"Dumping {path}"] + [
            f"timestamp: {ts} offset: {base + rel}" for ts, rel in entries
        ]
        objs = json_lines(run("dump", "--json", path).stdout)
        assert objs[:-1] == [{"type": "entry", "timestamp": ts, "offset": base + rel} for ts, rel in entries]
        assert objs[-1]["fileType"] == "time_index" and objs[-1]["entries"] == len(entries)


def test_time_index_errors_as_kafka_reports_them(part: Path, tmp_path: Path) -> None:
    base = bases(part)[0]
    copy = tmp_path / "orders-0"
    copy.mkdir()
    for suffix in (".log", ".index", ".timeindex"):
        (copy / name(base, suffix)).write_bytes((part / name(base, suffix)).read_bytes())
    path = copy / name(base, ".timeindex")
    entries = time_index_entries(path)
    assert len(entries) >= 3
    data = bytearray(path.read_bytes())
    (ts0, _rel0), (ts1, rel1), (ts2, rel2) = entries[:3]
    struct.pack_into(">qi", data, 12, ts0 - 5, rel1)  # out of order and not the batch's timestamp
    struct.pack_into(">qi", data, 24, ts2, rel2 - 1)  # not the last offset of a batch
    path.write_bytes(bytes(data))
    result = run("dump", path)
    assert result.exit_code == 2
    err = result.stderr
    assert (
        f"Found timestamp mismatch in :{path.absolute()}\n  Index timestamp: {ts0 - 5}, log timestamp: {ts1}"
        in err
    )
    assert (
        f"Found out of order timestamp in :{path.absolute()}\n"
        f"  Index timestamp: {ts0 - 5}, Previously indexed timestamp: {ts0}"
    ) in err
    assert "The following indexed offsets are not found in the log." in err
    assert f"Indexed offset: {base + rel2 - 1}, found log offset: {base + rel2}" in err
    kinds = [o["kind"] for o in json_lines(run("dump", "--json", path).stdout) if o["type"] == "mismatch"]
    assert sorted(kinds) == ["offset_not_found", "out_of_order", "timestamp_mismatch"]


def test_time_index_sanity_check_of_an_untrimmed_index(tmp_path: Path) -> None:
    """Kafka's check fails on a preallocated time index (its last slot reads timestamp 0: KAFKA-10207)."""
    written = write_partition(tmp_path / "live-0", close=False, segment_bytes=1 << 20, transactions=False)
    path = written.path / name(0, ".timeindex")
    result = run("dump", "--index-sanity-check", path)
    assert result.exit_code == 2
    assert (
        "has non-zero size but the last timestamp is 0 which is less than the first timestamp"
        in result.stderr
    )
    normal = run("dump", path)  # the dump itself stops at the unused slots
    assert normal.exit_code == 0
    assert all(line.startswith("timestamp: ") for line in normal.stdout.splitlines()[1:])


# --------------------------------------------------------------------------------------------------- .txnindex


def test_txn_index_is_the_file(part: Path) -> None:
    found = sorted(part.glob("*.txnindex"))
    assert found, "the aborted transaction left a .txnindex"
    for path in found:
        entries = txn_index_entries(path)
        result = run("dump", path)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines() == [f"Dumping {path}"] + [
            f"version: {v} producerId: {pid} firstOffset: {f} lastOffset: {last} lastStableOffset: {lso}"
            for v, pid, f, last, lso in entries
        ]
        objs = json_lines(run("dump", "--json", path).stdout)
        assert objs[:-1] == [
            {
                "type": "abortedTxn",
                "version": v,
                "producerId": pid,
                "firstOffset": f,
                "lastOffset": last,
                "lastStableOffset": lso,
            }
            for v, pid, f, last, lso in entries
        ]
        assert objs[-1]["mismatches"] == 0


def test_txn_index_entry_without_its_abort_marker(part: Path, tmp_path: Path) -> None:
    path = sorted(part.glob("*.txnindex"))[0]
    copy = tmp_path / "orders-0"
    copy.mkdir()
    stem = path.name[:20]
    (copy / f"{stem}.log").write_bytes((part / f"{stem}.log").read_bytes())
    v, pid, first, last, lso = txn_index_entries(path)[0]
    target = copy / path.name
    target.write_bytes(struct.pack(">hqqqq", v, pid, first, last - 1, lso) + b"\x00" * 5)
    result = run("dump", "--json", target)
    assert result.exit_code == 3  # the partial entry (truncated) is the highest code
    objs = json_lines(result.stdout)
    assert [o["kind"] for o in objs if o["type"] == "mismatch"] == ["marker_not_found"]
    assert [o["error"] for o in objs if o["type"] == "error"] == ["truncated"]
    text = run("dump", target)
    assert f"Mismatches in :{target.absolute()}" in text.stderr


# --------------------------------------------------------------------------------------------------- .snapshot


def test_snapshot_is_the_file(part: Path) -> None:
    snapshots = sorted(part.glob("*.snapshot"))
    newest = snapshots[-1]
    entries = read_snapshot(newest)
    assert {e.producer_id for e in entries} >= {50}
    raw = newest.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", raw)
    result = run("dump", newest)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == f"Dumping {newest}"
    for i, line in enumerate(lines[1:]):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = struct.unpack_from(
            ">qhiqiqiq", raw, 10 + 46 * i
        )
        first_seq = last_seq - delta
        current = "OptionalLong.empty" if txn_first < 0 else f"OptionalLong[{txn_first}]"
        assert line == (
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} currentTxnFirstOffset: {current} "
            f"lastTimestamp: {ts} firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_offset} "
            f"offsetDelta: {delta} timestamp: {ts}"
        )
    objs = json_lines(run("dump", "--json", newest).stdout)
    assert objs[-1] == {
        "type": "summary",
        "fileType": "producer_snapshot",
        "offset": int(newest.name[:20]),
        "version": version,
        "crc": crc,
        "producers": count,
        "fileBytes": len(raw),
    }
    assert list(objs[0]) == [
        "type", "producerId", "producerEpoch", "coordinatorEpoch", "currentTxnFirstOffset", "lastTimestamp",
        "firstSequence", "lastSequence", "lastOffset", "offsetDelta", "timestamp",
    ]  # fmt: skip


def test_snapshot_of_an_open_transaction_and_a_corrupt_one(tmp_path: Path) -> None:
    from kafkalog.records import MemoryRecords

    path = tmp_path / "t-0"
    log = Log.open(path, LogConfig())
    log.append_as_leader(
        MemoryRecords.build(
            [SimpleRecord(b"open", None, TS)], producer_id=9, producer_epoch=2, base_sequence=0,
            is_transactional=True, now_ms=TS,
        )
    )  # fmt: skip
    log.close()
    snap = sorted(path.glob("*.snapshot"))[-1]
    line = run("dump", snap).stdout.splitlines()[1]
    assert "producerId: 9 producerEpoch: 2 " in line and "currentTxnFirstOffset: OptionalLong[0]" in line
    assert json_lines(run("dump", "--json", snap).stdout)[0]["currentTxnFirstOffset"] == 0
    data = bytearray(snap.read_bytes())
    data[-1] ^= 1
    snap.write_bytes(bytes(data))
    result = run("dump", "--json", snap)
    assert result.exit_code == 2
    objs = json_lines(result.stdout)
    assert objs[0]["type"] == "error" and objs[0]["error"] == "corrupt_snapshot"
    assert "CRC" in objs[0]["message"]
    assert objs[-1]["producers"] == 0
    data = bytearray(snap.read_bytes())
    struct.pack_into(">I", data, 2, crc32c(bytes(data[6:])))
    snap.write_bytes(bytes(data))
    assert run("dump", snap).exit_code == 0


def test_empty_snapshot(part: Path) -> None:
    empty = [p for p in part.glob("*.snapshot") if p.stat().st_size == 10]
    if not empty:
        pytest.skip("no empty snapshot in this directory")
    result = run("dump", empty[0])
    assert result.exit_code == 0 and result.stdout.splitlines() == [f"Dumping {empty[0]}"]


# --------------------------------------------------------------------------------------------------- checkpoints


def test_leader_epoch_checkpoint(part: Path) -> None:
    path = part / "leader-epoch-checkpoint"
    lines = path.read_text().splitlines()
    entries = [tuple(map(int, line.split())) for line in lines[2:]]
    result = run("dump", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {path}"] + [
        f"epoch: {e} startOffset: {o}" for e, o in entries
    ]
    objs = json_lines(run("dump", "--json", path).stdout)
    assert objs == [{"type": "epoch", "epoch": e, "startOffset": o} for e, o in entries] + [
        {
            "type": "summary",
            "fileType": "leader_epoch_checkpoint",
            "version": 0,
            "entries": len(entries),
            "fileBytes": path.stat().st_size,
        }
    ]


@pytest.mark.parametrize(
    "file",
    [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        "cleaner-offset-checkpoint",
    ],
)
def test_offset_checkpoints(tmp_path: Path, file: str) -> None:
    path = tmp_path / file
    path.write_text("0\n2\norders 0 42\nmy.topic-x 11 7\n")
    result = run("dump", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [
        "topic: orders partition: 0 offset: 42",
        "topic: my.topic-x partition: 11 offset: 7",
    ]
    objs = json_lines(run("dump", "--json", path).stdout)
    assert objs[0] == {"type": "offset", "topic": "orders", "partition": 0, "offset": 42}
    assert objs[-1]["fileType"] == "offset_checkpoint" and objs[-1]["entries"] == 2


@pytest.mark.parametrize(
    "content",
    ["1\n0\n", "0\n3\norders 0 42\n", "0\n1\norders zero 42\n", "zero\n"],
    ids=["version", "count", "entry", "header"],
)
def test_malformed_checkpoint(tmp_path: Path, content: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(content)
    result = run("dump", "--json", path)
    assert result.exit_code == 2
    objs = json_lines(result.stdout)
    assert objs[0]["type"] == "error" and objs[0]["error"] == "corrupt_checkpoint"
    assert "Traceback" not in result.stderr


def test_partition_metadata_and_clean_shutdown(part: Path, tmp_path: Path) -> None:
    meta = tmp_path / "partition.metadata"
    meta.write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    result = run("dump", meta)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1] == "version: 0 topicId: AAAAAAAAAAAAAAAAAAAAAQ"
    marker = part / ".kafka_cleanshutdown"
    assert marker.exists()
    objs = json_lines(run("dump", "--json", marker).stdout)
    assert objs[0] == {
        "type": "cleanShutdown",
        "version": 0,
        "brokerEpoch": json.loads(marker.read_text())["brokerEpoch"],
    }
    meta.write_text("version: 0\ntopic_id: nope")
    assert run("dump", meta).exit_code == 2


def test_checkpoint_tmp_file_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint.tmp"
    path.write_text("0\n1\n4 100\n")
    assert run("dump", path).stdout.splitlines()[1] == "epoch: 4 startOffset: 100"


# --------------------------------------------------------------------------------------------------- all together


def test_every_file_of_a_partition_in_one_call(part: Path) -> None:
    files = sorted(p for p in part.iterdir() if p.is_file())
    result = run("dump", "--json", *files)
    assert result.exit_code == 0, result.stderr
    summaries = [o for o in json_lines(result.stdout) if o["type"] == "summary"]
    assert len(summaries) == len(files)


def test_subprocess_dump_of_index_files(part: Path) -> None:
    base = bases(part)[0]
    proc = run_process("dump", part / name(base, ".index"), part / name(base, ".timeindex"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode().splitlines()
    assert out.count(f"Dumping {part / name(base, '.index')}") == 1
    assert any(line.startswith("timestamp: ") for line in out)
