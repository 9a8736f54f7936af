"""``kafkalog recover`` loses only the damage (issue #19 items 11-12): one bad batch costs that batch, the dry
run's plan is what the real run does, damaged epoch checkpoints / partition.metadata / base offsets are
repaired, and a run that cannot repair a partition changes nothing."""

from __future__ import annotations

import os
import random
import shutil
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from kafkalog.errors import KafkaStorageError
from kafkalog.log.checkpoint import (
    leader_epoch_checkpoint,
    read_partition_metadata,
    write_partition_metadata,
)
from kafkalog.manager import LogManager

from .helpers import flip_byte, json_lines, run, tree_state

BATCH_RECORDS = 10


@pytest.fixture(scope="module")
def three_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 records in 30 batches of 10, 3 segments of 100 records (10 batches of 351 bytes each)."""
    root = tmp_path_factory.mktemp("repairs") / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 10 * 351 + 100})
        for _ in range(30):
            mgr.produce("t", [(b"k%d" % j, b"v" * 20) for j in range(BATCH_RECORDS)])
    logs = sorted((root / "t-0").glob("*.log"))
    assert [p.name[:20] for p in logs] == [f"{b:020d}" for b in (0, 100, 200)]
    return root


def copy_of(src: Path, tmp_path: Path) -> Path:
    target = tmp_path / src.name
    shutil.copytree(src, target)
    return target


def record_offsets(part: Path) -> list[int]:
    """Every record offset in the partition's ``.log`` files (CRC-checked)."""
    from kafkalog.storage.file_records import FileRecords

    out: list[int] = []
    for path in sorted(part.glob("*.log")):
        records = FileRecords.open(path, mutable=False, file_already_exists=True)
        for batch in records.batches():
            batch.ensure_valid()
            out.extend(r.offset for r in batch)
        records.close()
    return out


def plan_of(stdout: str) -> dict[str, object]:
    obj = next(
        o for o in json_lines(stdout) if o["type"] in ("plan", "partition") and o["partition"] == "t-0"
    )
    plan = obj if obj["type"] == "plan" else obj["plan"]
    assert isinstance(plan, dict)
    return {
        k: plan.get(k)
        for k in ("mode", "segments", "leaderEpochs", "files", "bytesRemoved", "notes", "error")
    }


def test_one_flipped_bit_in_the_oldest_segment_costs_one_batch(three_segments: Path, tmp_path: Path) -> None:
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    oldest = sorted(part.glob("*.log"))[0]
    data = bytearray(oldest.read_bytes())
    data[200] ^= 0x01  # one bit in the records of the first batch (offsets 0..9)
    oldest.write_bytes(bytes(data))
    before = tree_state(root)
    dry = run("recover", "--dry-run", "--json", root)
    assert dry.exit_code == 1
    assert tree_state(root) == before  # the dry run wrote nothing
    planned = plan_of(dry.stdout)
    segments = planned["segments"]
    assert isinstance(segments, list) and len(segments) == 1
    assert segments[0]["file"] == oldest.name and segments[0]["action"] == "rewrite"
    assert segments[0]["removed"] == [
        {
            "start": 0,
            "end": 351,
            "bytes": 351,
            "firstOffset": 0,
            "lastOffset": 9,
            "reason": segments[0]["removed"][0]["reason"],
        }
    ]
    assert segments[0]["sizeBefore"] - segments[0]["sizeAfter"] == 351

    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stderr
    assert plan_of(done.stdout) == planned  # the dry run's plan is exactly what the real run did
    obj = next(o for o in json_lines(done.stdout) if o.get("partition") == "t-0")
    assert obj["truncated"] == [{"baseOffset": 0, "sizeBefore": 3510, "sizeAfter": 3159}]
    assert obj["segmentsDeleted"] == []
    assert obj["logEndOffsetAfter"] == 300
    assert record_offsets(part) == list(range(10, 300))  # 290 of 300 records kept: only the damage is lost
    assert run("verify", root).exit_code == 0


def test_damage_at_a_segment_tail_and_a_lowered_last_offset_delta(
    three_segments: Path, tmp_path: Path
) -> None:
    """A batch whose lastOffsetDelta (CRC recomputed) disagrees with its record count is damage, not a jump
    of the log end offset by 2**31; a torn tail is truncated; intact later segments stay."""
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    logs = sorted(part.glob("*.log"))
    data = bytearray(logs[2].read_bytes())
    at = 351 * 9  # the last batch of the log: offsets 290..299
    struct.pack_into(">i", data, at + 23, 2**31 - 1)  # lastOffsetDelta
    struct.pack_into(">I", data, at + 17, crc32c(bytes(data[at + 21 : at + 351])))
    logs[2].write_bytes(bytes(data))
    with logs[1].open("ab") as f:
        f.write(b"\x00" * 30)
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stderr
    assert plan_of(done.stdout) == planned
    obj = next(o for o in json_lines(done.stdout) if o.get("partition") == "t-0")
    assert obj["logEndOffsetAfter"] == 290  # not 290 + 2**31
    assert [s["action"] for s in planned["segments"]] == ["truncate", "truncate"]  # type: ignore[union-attr,index]
    assert record_offsets(part) == list(range(290))
    assert run("verify", root).exit_code == 0


@pytest.mark.parametrize("base", [-5, 3, 50], ids=["negative", "backwards-mid", "below-segment-base"])
def test_base_offsets_that_go_backwards_or_negative(three_segments: Path, tmp_path: Path, base: int) -> None:
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    middle = sorted(part.glob("*.log"))[1]
    data = bytearray(middle.read_bytes())
    at = 0 if base != 3 else 351  # the base offset is outside the CRC
    struct.pack_into(">q", data, at, base)
    middle.write_bytes(bytes(data))
    result = run("recover", "--json", root)
    assert result.exit_code == 0, result.stdout + result.stderr
    lost = set(range(100 + at // 351 * 10, 110 + at // 351 * 10))
    assert record_offsets(part) == [o for o in range(300) if o not in lost]
    assert run("verify", root).exit_code == 0


@pytest.mark.parametrize(
    "content",
    ["junk\n", "0\n999999999999\n0 0\n", "0\n3\n5 0\n3 100\n7 200\n", "0\n1\n-4 0\n"],
    ids=["junk", "huge-count", "non-monotonic", "negative"],
)
def test_damaged_leader_epoch_checkpoint_is_rebuilt(
    three_segments: Path, tmp_path: Path, content: str
) -> None:
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    good = leader_epoch_checkpoint(part).read()
    (part / "leader-epoch-checkpoint").write_text(content)
    assert run("verify", root).exit_code == 1
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    assert [f["file"] for f in planned["files"]] == ["leader-epoch-checkpoint"]  # type: ignore[union-attr,index]
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    assert leader_epoch_checkpoint(part).read() == good
    assert run("verify", root).exit_code == 0


def test_junk_partition_metadata_is_rewritten(three_segments: Path, tmp_path: Path) -> None:
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    topic_id = read_partition_metadata(part)
    assert topic_id is not None
    (part / "partition.metadata").write_bytes(b"\xff garbage")
    result = run("recover", root)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert read_partition_metadata(part) == topic_id
    assert run("verify", root).exit_code == 0


def test_a_run_that_cannot_repair_a_partition_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 1000})
        mgr.create_topic("u", 1, {"segment.bytes": 1000})
        for _ in range(20):
            mgr.produce("t", [(b"k", b"v" * 40)])
            mgr.produce("u", [(b"k", b"v" * 40)])
    flip_byte(sorted((root / "t-0").glob("*.log"))[0], 100)  # repairable
    write_partition_metadata(root / "u-0", uuid.uuid4())  # a topic id that kafkalog-topics.json contradicts
    assert (root / ".kafka_cleanshutdown").exists()
    before = tree_state(root)
    dry = run("recover", "--dry-run", root)
    assert dry.exit_code == 1 and "cannot be repaired" in dry.stdout
    result = run("recover", root)
    assert result.exit_code == 1
    assert "u-0: recovery failed" in result.stdout and "Nothing was changed" in result.stdout
    assert tree_state(root) == before  # not the marker, not the checkpoints, not the repairable partition


def test_a_load_failure_the_plan_cannot_foresee_puts_the_data_dir_files_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 1000})
        mgr.create_topic("u", 1)
        for _ in range(20):
            mgr.produce("t", [(b"k", b"v" * 40)])
            mgr.produce("u", [(b"k", b"v" * 40)])
    load_one = LogManager._load_one

    def failing(self: LogManager, d: Any, path: Path, tp: Any, offsets: Any) -> None:
        if path.name == "u-0":
            raise KafkaStorageError("injected: the disk under u-0 failed")
        load_one(self, d, path, tp, offsets)

    monkeypatch.setattr(LogManager, "_load_one", failing)
    files = {p.name: p.read_bytes() for p in root.iterdir() if p.is_file() and p.name != ".lock"}
    assert ".kafka_cleanshutdown" in files and "recovery-point-offset-checkpoint" in files
    result = run("recover", root)
    assert result.exit_code == 1 and "u-0: recovery failed" in result.stdout
    assert {p.name: p.read_bytes() for p in root.iterdir() if p.is_file() and p.name != ".lock"} == files


def test_a_damaged_swap_file_is_repaired_not_a_load_failure(three_segments: Path, tmp_path: Path) -> None:
    """An interrupted swap whose ``.swap`` has a torn tail (and one that is all junk) no longer fails the load."""
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    last = sorted(part.glob("*.log"))[2]
    (part / (last.name + ".swap")).write_bytes(last.read_bytes() + b"\x80" * 100)  # a copy with a junk tail
    (part / "00000000000000009000.log.swap").write_bytes(b"\x80" * 300)  # nothing valid
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    assert sorted((s["file"], s["action"]) for s in planned["segments"]) == [  # type: ignore[union-attr]
        ("00000000000000000200.log.swap", "truncate"),
        ("00000000000000009000.log.swap", "delete"),
    ]
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    assert not list(part.glob("*.swap"))
    assert record_offsets(part) == list(range(300))
    assert run("verify", root).exit_code == 0


@pytest.mark.parametrize("whole_dir", [True, False], ids=["data-dir", "partition-dir"])
def test_a_log_start_offset_past_the_log_end_does_not_delete_every_segment(
    three_segments: Path, tmp_path: Path, whole_dir: bool
) -> None:
    root = copy_of(three_segments, tmp_path)
    (root / "log-start-offset-checkpoint").write_text("0\n1\nt 0 10000\n")  # junk: past the log end (300)
    dry = run("recover", "--dry-run", "--json", *([root] if whole_dir else [root / "t-0"]))
    planned = plan_of(dry.stdout)
    assert [f["file"] for f in planned["files"]] == ["log-start-offset-checkpoint"]  # type: ignore[union-attr,index]
    done = run("recover", "--json", root if whole_dir else root / "t-0")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    assert record_offsets(root / "t-0") == list(range(300))  # not "Deleting all segments"
    assert run("verify", root).exit_code == 0


def test_a_leader_epoch_that_goes_back_is_set_to_the_later_batches_epoch(
    three_segments: Path, tmp_path: Path
) -> None:
    """The partition leader epoch is outside the CRC: one damaged header must not become an epoch the cache
    believes in from that offset on (recovery used to turn one verify fault into one per later batch)."""
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    middle = sorted(part.glob("*.log"))[1]
    data = bytearray(middle.read_bytes())
    struct.pack_into(">i", data, 3 * 351 + 12, 5)  # offsets 130..139 say epoch 5, every later batch 0
    middle.write_bytes(bytes(data))
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    assert planned["segments"] == []
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    assert middle.read_bytes() == (three_segments / "t-0" / middle.name).read_bytes()  # only that field, back
    assert leader_epoch_checkpoint(part).read() == leader_epoch_checkpoint(three_segments / "t-0").read()
    assert record_offsets(part) == list(range(300))
    assert run("verify", root).exit_code == 0


def test_a_junk_topics_file_stops_the_run_before_anything_changes(
    three_segments: Path, tmp_path: Path
) -> None:
    """The load cannot run without kafkalog-topics.json's configs; recover used to remove the marker and the
    recovery-point checkpoint first, then fail (and its dry run said there was nothing to do)."""
    root = copy_of(three_segments, tmp_path)
    flip_byte(sorted((root / "t-0").glob("*.log"))[0], 200)
    (root / "kafkalog-topics.json").write_text("junk{")
    before = tree_state(root)
    dry = run("recover", "--dry-run", root)
    assert dry.exit_code == 1 and "cannot be repaired" in dry.stdout
    result = run("recover", root)
    assert result.exit_code == 1 and "kafkalog-topics.json" in result.stdout
    assert tree_state(root) == before


@pytest.mark.parametrize("batch", [3, 9], ids=["mid-segment", "last-of-segment"])
def test_a_base_offset_that_jumped_up_costs_its_own_batch_only(
    three_segments: Path, tmp_path: Path, batch: int
) -> None:
    """A high bit flipped in a base offset (outside the CRC): the batches after it look like they go backwards,
    but the damaged batch is the one above them (found by the fuzzing of this repair: 60 records lost and a
    verify fault left behind)."""
    root = copy_of(three_segments, tmp_path)
    part = root / "t-0"
    oldest = sorted(part.glob("*.log"))[0]
    data = bytearray(oldest.read_bytes())
    data[batch * 351 + 4] ^= 0x40  # base offset += 2**30
    oldest.write_bytes(bytes(data))
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    lost = set(range(batch * 10, batch * 10 + 10))
    assert record_offsets(part) == [o for o in range(300) if o not in lost]
    assert run("verify", root).exit_code == 0


def test_random_damage_costs_at_most_the_damaged_batches(three_segments: Path, tmp_path: Path) -> None:
    """Seeded fuzzing of the rule: 1-3 random bit flips or junk insertions; every run succeeds, its plan is what
    the dry run said, verify is clean afterwards, offsets still increase and each fault costs at most one batch."""
    for seed in range(60):
        rng = random.Random(seed)
        root = tmp_path / f"run{seed}"
        shutil.copytree(three_segments, root)
        logs = sorted((root / "t-0").glob("*.log"))
        faults = rng.randint(1, 3)
        for _ in range(faults):
            path = rng.choice(logs)
            data = bytearray(path.read_bytes())
            at = rng.randrange(len(data))
            if rng.random() < 0.8:
                data[at] ^= 1 << rng.randrange(8)
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 50)))
            path.write_bytes(bytes(data))
        planned = plan_of(run("recover", "--dry-run", "--json", root).stdout)
        done = run("recover", "--json", root)
        assert done.exit_code == 0, (seed, done.stdout)
        assert plan_of(done.stdout) == planned, seed
        assert run("verify", root).exit_code == 0, seed
        kept = record_offsets(root / "t-0")
        assert kept == sorted(set(kept)) and set(kept) <= set(range(300)), seed
        assert 300 - len(kept) <= BATCH_RECORDS * faults, seed
        shutil.rmtree(root)


# ------------------------------------------------------------------------ no hole between segments after recover


@pytest.fixture(scope="module")
def four_segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 records in 40 batches of 10, 4 segments of 100 records (10 batches of 351 bytes each)."""
    root = tmp_path_factory.mktemp("holes") / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 10 * 351 + 100})
        for _ in range(40):
            mgr.produce("t", [(b"k%d" % j, b"v" * 20) for j in range(BATCH_RECORDS)])
    assert [int(p.name[:20]) for p in sorted((root / "t-0").glob("*.log"))] == [0, 100, 200, 300]
    return root


def damage_batches(log: Path, batches: range) -> None:
    """A flipped bit in the records of each of ``batches`` (CRC mismatches)."""
    data = bytearray(log.read_bytes())
    for b in batches:
        data[b * 351 + 200] ^= 0x01
    log.write_bytes(bytes(data))


def read_back(root: Path) -> list[int]:
    """The record offsets ``consume`` delivers (exit 0 required), after checking that ``LogManager.open`` and
    ``ReadOnlyLog`` deliver the same ones."""
    from kafkalog.readonly.log import ReadOnlyLog
    from kafkalog.records import MemoryRecords

    with LogManager.open(root, background=False) as mgr:
        log = mgr.get_log("t", 0)
        assert log is not None
        by_manager: list[int] = []
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            records = log.read(offset).records
            assert isinstance(records, MemoryRecords)
            batches = list(records.batches())
            assert batches, offset
            by_manager.extend(r.offset for b in batches for r in b)
            offset = batches[-1].last_offset + 1
    ro = ReadOnlyLog.open(root / "t-0")
    gaps: list[tuple[int, int]] = []
    by_reader = [
        int(o)
        for chunk in ro.iter_batch_chunks(0, ro.log_end_offset, on_gap=lambda lo, hi: gaps.append((lo, hi)))
        for o in MemoryRecords(chunk.data).batches()
        for o in (r.offset for r in o)
    ]
    assert gaps == []  # no hole between segments
    consumed = run("consume", root, "t", "--from-beginning", "--property", "print.offset=true")
    assert consumed.exit_code == 0, consumed.stderr
    offsets = [int(line.split("\t", 1)[0].removeprefix("Offset:")) for line in consumed.stdout.splitlines()]
    assert by_manager == by_reader == offsets
    return offsets


def segment_steps(planned: dict[str, object]) -> list[tuple[object, ...]]:
    segments = planned["segments"]
    assert isinstance(segments, list)
    return [(s["file"], s["action"], s.get("newFile")) for s in segments]


def name(base: int) -> str:
    return f"{base:020d}.log"


@pytest.mark.parametrize(
    ("damaged", "steps", "lost"),
    [
        (  # the last batch of a middle segment: truncated; the next segment starts where it now ends
            {100: range(9, 10)},
            [(name(100), "truncate", None), (name(200), "move", name(190))],
            range(190, 200),
        ),
        (  # a whole middle segment: deleted; the next one takes its base offset
            {100: range(10)},
            [(name(100), "delete", None), (name(200), "move", name(100))],
            range(100, 200),
        ),
        (  # two adjacent middle segments: both deleted, one move
            {100: range(10), 200: range(10)},
            [(name(100), "delete", None), (name(200), "delete", None), (name(300), "move", name(100))],
            range(100, 300),
        ),
        (  # the tail of one and all of the next
            {100: range(5, 10), 200: range(10)},
            [(name(100), "truncate", None), (name(200), "delete", None), (name(300), "move", name(150))],
            range(150, 300),
        ),
    ],
    ids=["last-batch-of-middle", "whole-middle", "two-adjacent-middle", "tail-and-next"],
)
def test_recover_leaves_no_hole_between_segments(
    four_segments: Path,
    tmp_path: Path,
    damaged: dict[int, range],
    steps: list[tuple[object, ...]],
    lost: range,
) -> None:
    """verify and consume take a hole between the segments of a log that is not compacted for a segment lost
    in the middle: recover moves the next kept segment's base offset down, so the lost offsets are a gap
    inside a segment (as compaction leaves) and every kept record is delivered."""
    root = copy_of(four_segments, tmp_path)
    part = root / "t-0"
    for base, batches in damaged.items():
        damage_batches(part / name(base), batches)
    dry = run("recover", "--dry-run", "--json", root)
    assert dry.exit_code == 1
    planned = plan_of(dry.stdout)
    assert segment_steps(planned) == steps
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned  # the dry run lists the move exactly as the real run does it
    obj = next(o for o in json_lines(done.stdout) if o.get("partition") == "t-0")
    old_file, _, new_file = steps[-1]
    assert obj["segmentsMoved"] == [
        {"baseOffset": int(str(old_file)[:20]), "newBaseOffset": int(str(new_file)[:20])}
    ]
    assert obj["bytesTruncated"] == planned["bytesRemoved"]  # a move is no loss
    assert obj["segmentsCreated"] == []
    kept = [o for o in range(400) if o not in lost]
    assert record_offsets(part) == kept
    moved = steps[-1][2]
    assert isinstance(moved, str) and (part / moved).exists()
    assert not (part / str(steps[-1][0])).exists()
    assert run("verify", root).exit_code == 0
    assert read_back(root) == kept
    assert run("recover", "--dry-run", root).exit_code == 0  # nothing left to repair


def test_truncate_after_damage_moves_nothing(four_segments: Path, tmp_path: Path) -> None:
    root = copy_of(four_segments, tmp_path)
    damage_batches(root / "t-0" / name(100), range(9, 10))
    done = run("recover", "--json", "--truncate-after-damage", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert segment_steps(plan_of(done.stdout)) == [
        (name(100), "truncate", None),
        (name(200), "delete", None),
        (name(300), "delete", None),
    ]
    assert read_back(root) == list(range(190))
    assert run("verify", root).exit_code == 0


def test_a_move_past_the_int32_relative_offsets_is_left_and_said(four_segments: Path, tmp_path: Path) -> None:
    """The last segment's offsets start at 2**31 + 300: moving it down to the end of the segment before it
    would put its relative offsets past int32, so it stays where it is and the plan says why."""
    root = copy_of(four_segments, tmp_path)
    part = root / "t-0"
    far = 2**31 + 300
    data = bytearray((part / name(300)).read_bytes())
    for b in range(10):  # the base offset is outside the CRC
        struct.pack_into(">q", data, b * 351, far + 10 * b)
    (part / name(far)).write_bytes(bytes(data))
    for suffix in (".log", ".index", ".timeindex"):
        (part / name(300)).with_suffix(suffix).unlink()
    damage_batches(part / name(200), range(10))  # deleted: a hole the plan makes, in front of the far segment
    dry = run("recover", "--dry-run", "--json", root)
    planned = plan_of(dry.stdout)
    assert segment_steps(planned) == [(name(200), "delete", None)]
    notes = planned["notes"]
    assert isinstance(notes, list) and len(notes) == 1 and "int32" in notes[0] and name(far) in notes[0]
    assert "int32" in run("recover", "--dry-run", root).stdout  # said in the text output too
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    assert record_offsets(part) == [*range(200), *range(far, far + 100)]
    assert (part / name(far)).exists()
    verified = run("verify", root)  # the hole stays, reported as before
    assert verified.exit_code == 1 and f"offsets 200..{far - 1} are missing" in verified.stdout


def test_a_hole_already_there_is_closed_where_it_is_damage(tmp_path: Path) -> None:
    """A segment deleted by hand and one emptied, in a topic known not to be compacted: verify faults and
    consume stops there; recover moves the next segments down (and deletes the empty one), so readers go on.
    The same holes in a compacted topic are what the cleaner leaves: nothing is done there."""
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 1000})
        mgr.create_topic("c", 1, {"segment.bytes": 1000, "cleanup.policy": "compact"})
        for i in range(100):
            mgr.produce("t", [(b"k%d" % i, b"v" * 50)])
            mgr.produce("c", [(b"k%d" % i, b"v" * 50)])
    lost: set[int] = set()
    bases_t: list[int] = []
    for topic in "tc":
        logs = sorted((root / f"{topic}-0").glob("*.log"))
        bases = [int(p.name[:20]) for p in logs]
        assert len(logs) > 6
        for suffix in (".log", ".index", ".timeindex"):
            logs[2].with_suffix(suffix).unlink()  # a segment gone
        logs[4].write_bytes(b"")  # a segment emptied
        if topic == "t":
            bases_t = bases
            lost = {*range(bases[2], bases[3]), *range(bases[4], bases[5])}
    assert run("verify", root).exit_code == 1
    planned = json_lines(run("recover", "--dry-run", "--json", root).stdout)
    plans = {o["partition"]: o for o in planned if o["type"] == "plan"}
    assert plans["c-0"]["segments"] == []
    steps = [(s["action"], s["baseOffset"], s.get("newBaseOffset")) for s in plans["t-0"]["segments"]]
    b = bases_t
    assert steps == [("move", b[3], b[2]), ("delete", b[4], None), ("move", b[5], b[4])]
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert run("verify", root).exit_code == 0
    assert read_back(root) == [o for o in range(100) if o not in lost]


@pytest.mark.parametrize("crash_at", ["none", "log-rename", "txnindex-rename"])
def test_a_move_is_crash_safe_and_keeps_the_transaction_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: str
) -> None:
    """The moved segment holds an aborted transaction: its ``.txnindex`` moves with it. A crash before the
    ``.log`` rename leaves the hole for a later recover to close; a crash between the ``.log`` and the
    ``.txnindex`` renames leaves a directory the load reads as is (orphan deleted, index rebuilt)."""
    import kafkalog.cli.repair as repair
    from kafkalog.log import AppendOrigin
    from kafkalog.log.names import TopicPartition
    from kafkalog.records import MemoryRecords, SimpleRecord

    from .helpers import txn_index_entries

    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 1, {"segment.bytes": 10 * 351 + 100})
        for _ in range(15):
            mgr.produce("t", [(b"k%d" % j, b"v" * 20) for j in range(BATCH_RECORDS)])
        log = mgr.get_log("t", 0)
        tx = [SimpleRecord(b"tx", b"k", 1_700_000_000_000)]
        built = MemoryRecords.build(
            tx, producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True, now_ms=1
        )
        log.append_as_leader(built)
        marker = MemoryRecords.end_transaction_marker(
            producer_id=7, producer_epoch=0, control_type="ABORT", coordinator_epoch=0, timestamp=1
        )
        log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
        for _ in range(5):
            mgr.produce("t", [(b"k%d" % j, b"v" * 20) for j in range(BATCH_RECORDS)])
    part = root / "t-0"
    assert [int(p.name[:20]) for p in sorted(part.glob("*.log"))][:2] == [0, 100]
    txn_before = txn_index_entries(part / "00000000000000000100.txnindex")
    assert len(txn_before) == 1
    kept = [o for o in record_offsets(part) if o >= 100 or o < 90]
    damage_batches(part / name(0), range(9, 10))
    if crash_at != "none":
        real_rename = os.rename

        def crashing(src: Any, dst: Any) -> None:
            if str(dst).endswith(".log" if crash_at == "log-rename" else ".txnindex"):
                raise OSError("injected crash")
            real_rename(src, dst)

        monkeypatch.setattr(repair.os, "rename", crashing)
        plan = repair.plan_partition(
            TopicPartition("t", 0), part, data_dir=root, exact_counts=True, log_start_offset=0
        )
        assert [(s.action, s.new_base_offset) for s in plan.segments] == [("truncate", None), ("move", 90)]
        with pytest.raises(OSError, match="injected"):
            repair.apply_plan(plan)
        monkeypatch.undo()
        with LogManager.open(root, background=False) as mgr:  # a broker start after the crash
            assert not mgr.load_failures
    if crash_at != "txnindex-rename":
        done = run("recover", "--json", root)
        assert done.exit_code == 0, done.stdout + done.stderr
        assert segment_steps(plan_of(done.stdout))[-1] == (name(100), "move", name(90))
    assert record_offsets(part) == kept
    assert not (part / "00000000000000000100.txnindex").exists()
    assert txn_index_entries(part / "00000000000000000090.txnindex") == txn_before
    assert run("verify", root).exit_code == 0
    assert run("recover", "--dry-run", root).exit_code == 0


def test_no_move_while_an_interrupted_swap_is_pending(four_segments: Path, tmp_path: Path) -> None:
    """The load decides which segments a ``.swap`` replaces, so the plan moves nothing while one is there and
    says so; the run's load completes the swap, and the next run closes the hole."""
    root = copy_of(four_segments, tmp_path)
    part = root / "t-0"
    last = part / name(300)
    (part / (last.name + ".swap")).write_bytes(last.read_bytes())  # an interrupted swap of the last segment
    damage_batches(part / name(100), range(10))
    planned = plan_of(run("recover", "--dry-run", "--json", root).stdout)
    assert segment_steps(planned) == [(name(100), "delete", None)]
    notes = planned["notes"]
    assert isinstance(notes, list) and len(notes) == 1 and "swap" in notes[0]
    assert run("recover", root).exit_code == 0
    assert not list(part.glob("*.swap"))
    again = run("recover", "--json", root)
    assert again.exit_code == 0, again.stdout + again.stderr
    assert segment_steps(plan_of(again.stdout)) == [(name(200), "move", name(100))]
    assert run("verify", root).exit_code == 0
    assert read_back(root) == [o for o in range(400) if not 100 <= o < 200]


def test_a_leader_epoch_fix_in_a_segment_rewritten_and_moved(four_segments: Path, tmp_path: Path) -> None:
    """The epoch fix names the segment by its file after the move and its batches by their positions after
    the rewrite."""
    root = copy_of(four_segments, tmp_path)
    part = root / "t-0"
    damage_batches(part / name(100), range(9, 10))  # 200 moves to 190
    middle = part / name(200)
    data = bytearray(middle.read_bytes())
    struct.pack_into(">i", data, 5 * 351 + 12, 5)  # offsets 250..259 say epoch 5, every later batch 0
    middle.write_bytes(bytes(data))
    damage_batches(middle, range(1))  # and 200's first batch is damaged: a rewrite
    planned = plan_of(run("recover", "--dry-run", "--json", root).stdout)
    assert segment_steps(planned)[-2:] == [(name(200), "rewrite", None), (name(200), "move", name(190))]
    epochs = planned["leaderEpochs"]
    assert isinstance(epochs, list) and [(e["file"], e["firstOffset"]) for e in epochs] == [(name(190), 250)]
    done = run("recover", "--json", root)
    assert done.exit_code == 0, done.stdout + done.stderr
    assert plan_of(done.stdout) == planned
    moved = (part / name(190)).read_bytes()
    assert len(moved) == 9 * 351 and struct.unpack_from(">i", moved, 4 * 351 + 12) == (0,)
    assert moved == (four_segments / "t-0" / name(200)).read_bytes()[351:]  # only that field, back
    assert run("verify", root).exit_code == 0
    assert read_back(root) == [o for o in range(400) if not 190 <= o < 210]
