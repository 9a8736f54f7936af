"""``kafkalog recover`` loses only the damage (issue #19 items 11-12): one bad batch costs that batch, the dry
run's plan is what the real run does, damaged epoch checkpoints / partition.metadata / base offsets are
repaired, and a run that cannot repair a partition changes nothing."""

from __future__ import annotations

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
    return {k: plan[k] for k in ("mode", "segments", "leaderEpochs", "files", "bytesRemoved", "error")}


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
