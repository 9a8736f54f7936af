"""``kafkalog verify``: clean directories pass, injected faults fail with exit 1, and nothing is ever written."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.manager import LogManager

from .helpers import (
    flip_byte,
    json_lines,
    offset_index_entries,
    run,
    run_process,
    time_index_entries,
    tree_state,
    write_partition,
)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory written by a LogManager (two topics) plus a partition written by Log directly."""
    root = tmp_path_factory.mktemp("verify") / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("orders", 3, {"segment.bytes": 2000, "index.interval.bytes": 200})
        mgr.create_topic("small", 1)
        for i in range(300):
            mgr.produce("orders", [(b"k%d" % i, b"v" * 40)])
        mgr.produce("small", [(None, b"x")])
    write_partition(root / "txn-0")
    return root


def copy_of(clean: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(clean, target)
    return target


def faults(result_stdout: str) -> list[dict[str, object]]:
    return [o for o in json_lines(result_stdout) if o["type"] == "fault"]


def test_clean_directory_passes(clean: Path) -> None:
    result = run("verify", clean)
    assert result.exit_code == 0, result.stdout
    assert "Result: OK" in result.stdout
    assert "orders-0: ok" in result.stdout and "txn-0: ok" in result.stdout
    objs = json_lines(run("verify", "--json", clean).stdout)
    summary = objs[-1]
    assert summary["type"] == "summary" and summary["faults"] == 0 and summary["warnings"] == 0
    assert summary["partitions"] == 5
    assert list(summary) == ["type", "partitions", "segments", "batches", "bytes", "faults", "warnings"]
    parts = {o["partition"]: o for o in objs if o["type"] == "partition"}
    assert parts["orders-0"]["segments"] > 1 and parts[None]["path"] == str(clean)


def test_one_partition_directory(clean: Path) -> None:
    result = run("verify", clean / "txn-0")
    assert result.exit_code == 0
    assert "(data directory)" not in result.stdout  # only the partition


def test_verify_is_read_only(clean: Path) -> None:
    before = tree_state(clean)
    run("verify", clean)
    run("verify", "--json", clean / "orders-1")
    assert tree_state(clean) == before


def test_open_log_with_preallocated_indexes_passes(tmp_path: Path) -> None:
    """A log still open (a live writer): the active segment's indexes are preallocated, not trimmed."""
    written = write_partition(tmp_path / "live-0", close=False)
    assert (written.path / f"{written.bases[-1]:020d}.index").stat().st_size == 10 << 20
    result = run("verify", written.path)
    assert result.exit_code == 0, result.stdout


def test_flipped_byte_in_a_log(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    log = root / "orders-1" / "00000000000000000000.log"
    flip_byte(log, 200)
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    found = faults(result.stdout)
    assert any(f["file"] == log.name and "corrupt batch" in str(f["message"]) for f in found)
    assert all(f["partition"] == "orders-1" for f in found)
    text = run("verify", root)
    assert text.exit_code == 1 and "FAULT" in text.stdout and "orders-0: ok" in text.stdout


def test_corrupt_offset_index(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    path = root / "orders-0" / "00000000000000000000.index"
    entries = offset_index_entries(path)
    assert len(entries) >= 2
    data = bytearray(path.read_bytes())
    rel, pos = entries[1]
    struct.pack_into(">ii", data, 8, rel, pos + 7)  # inside a batch
    path.write_bytes(bytes(data))
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    messages = [str(f["message"]) for f in faults(result.stdout) if f["file"] == path.name]
    assert any("does not point at the start of a batch" in m for m in messages), messages


def test_index_entry_past_the_offsets_of_its_batch(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    path = root / "orders-0" / "00000000000000000000.index"
    data = bytearray(path.read_bytes())
    _rel, pos = offset_index_entries(path)[0]
    struct.pack_into(">ii", data, 0, 0, pos)  # offset 0 points at a later batch
    path.write_bytes(bytes(data))
    result = run("verify", "--json", root / "orders-0")
    assert result.exit_code == 1
    assert any("after the indexed offset" in str(f["message"]) for f in faults(result.stdout))


def test_broken_time_index_monotonicity(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    path = root / "txn-0" / "00000000000000000000.timeindex"
    entries = time_index_entries(path)
    assert len(entries) >= 2
    data = bytearray(path.read_bytes())
    struct.pack_into(">qi", data, 12, entries[0][0] - 1, entries[1][1])
    path.write_bytes(bytes(data))
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    messages = [str(f["message"]) for f in faults(result.stdout)]
    assert any("not monotonic" in m for m in messages), messages


def test_time_index_timestamp_that_no_batch_has(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    path = root / "txn-0" / "00000000000000000000.timeindex"
    ts, rel = time_index_entries(path)[-1]
    data = bytearray(path.read_bytes())
    struct.pack_into(">qi", data, len(data) - 12, ts + 1000, rel)
    path.write_bytes(bytes(data))
    result = run("verify", "--json", root / "txn-0")
    assert result.exit_code == 1
    assert any("max timestamp" in str(f["message"]) for f in faults(result.stdout))


def test_truncated_tail_and_missing_index(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    part = root / "orders-2"
    log = sorted(part.glob("*.log"))[-1]
    with log.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00partial")
    (part / "00000000000000000000.timeindex").unlink()
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    messages = [str(f["message"]) for f in faults(result.stdout)]
    assert any("truncated tail" in m for m in messages)
    assert any("missing for a segment" in m for m in messages)


def test_txn_index_must_match_the_markers(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    txn = sorted((root / "txn-0").glob("*.txnindex"))
    assert txn
    txn[0].write_bytes(b"")  # the aborted transaction is no longer indexed
    result = run("verify", "--json", root / "txn-0")
    assert result.exit_code == 1
    assert any("read_committed consumers would see" in str(f["message"]) for f in faults(result.stdout))


def test_bad_snapshot_checkpoint_and_metadata(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    snap = sorted((root / "txn-0").glob("*.snapshot"))[-1]
    flip_byte(snap, snap.stat().st_size - 1)
    (root / "txn-0" / "leader-epoch-checkpoint").write_text("0\n5\n0 0\n")
    (root / "recovery-point-offset-checkpoint").write_text("zero\n")
    (root / "orders-0" / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    by_file = {str(f["file"]) for f in faults(result.stdout)}
    assert {
        snap.name,
        "leader-epoch-checkpoint",
        "recovery-point-offset-checkpoint",
        "partition.metadata",
    } <= by_file


def test_log_start_offset_past_the_log_end(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    (root / "log-start-offset-checkpoint").write_text("0\n1\nsmall 0 99\n")
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    assert any("deletes every segment" in str(f["message"]) for f in faults(result.stdout))


def test_warnings_do_not_fail(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    (root / "orders-0" / "00000000000000099999.index").write_bytes(b"")
    (root / "orders-0" / "00000000000000000000.log.deleted").write_bytes(b"")
    result = run("verify", root)
    assert result.exit_code == 0
    assert "warning" in result.stdout and "orphan" in result.stdout
    quiet = run("verify", "-q", root)
    assert quiet.exit_code == 0 and "orphan" not in quiet.stdout


def test_many_faults_are_capped_per_file(tmp_path: Path) -> None:
    written = write_partition(tmp_path / "many-0", batches=60, segment_bytes=1 << 20, index_interval=1)
    path = written.path / "00000000000000000000.index"
    entries = offset_index_entries(path)
    assert len(entries) > 40
    data = bytearray(path.read_bytes())
    for i, (rel, pos) in enumerate(entries):
        struct.pack_into(">ii", data, 8 * i, rel, pos + 1)
    path.write_bytes(bytes(data))
    objs = json_lines(run("verify", "--json", written.path).stdout)
    part = next(o for o in objs if o["type"] == "partition")
    listed = [o for o in objs if o["type"] == "fault" and o["file"] == path.name]
    assert len(listed) == 21 and part["faults"] >= len(entries)
    assert "more faults in this file" in str(listed[-1]["message"])


def test_bad_paths(tmp_path: Path) -> None:
    result = run("verify", tmp_path / "nope")
    assert result.exit_code == 66
    assert "no such directory" in result.stderr and "Traceback" not in result.stderr
    (tmp_path / "file").write_text("x")
    assert run("verify", tmp_path / "file").exit_code == 66
    assert run("verify").exit_code == 64


def test_verify_subprocess(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    assert run_process("verify", root).returncode == 0
    flip_byte(root / "small-0" / "00000000000000000000.log", 30)
    proc = run_process("verify", root)
    assert proc.returncode == 1
    assert b"FAULT" in proc.stdout and b"Traceback" not in proc.stderr


def test_progress_bar_counts_every_log_byte(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar advances by the bytes of every .log; with a (pretend) terminal the report is unchanged."""
    from kafkalog.cli import common
    from kafkalog.cli.paths import resolve_target
    from kafkalog.cli.verifier import log_bytes, verify_target

    target = resolve_target(clean)
    ticks: list[int] = []
    verify_target(target, ticks.append)
    assert sum(ticks) == log_bytes(target) == sum(p.stat().st_size for p in clean.rglob("*.log"))
    plain = run("verify", clean).stdout
    monkeypatch.setattr(common, "_isatty", lambda stream: True)
    with_bar = run("verify", clean)
    assert with_bar.exit_code == 0 and with_bar.stdout == plain


def _random_log(path: Path, seed: int) -> None:
    import random

    from kafkalog.log import AppendOrigin, Log, LogConfig
    from kafkalog.records import Compression, MemoryRecords, SimpleRecord

    rnd = random.Random(seed)
    props = {"segment.bytes": rnd.choice([1200, 5000]), "index.interval.bytes": rnd.choice([1, 100, 4096])}
    log = Log.open(path, LogConfig.from_props(props))
    open_txns: set[int] = set()
    sequences: dict[int, int] = {}
    for _ in range(rnd.randint(20, 100)):
        r, codec = rnd.random(), rnd.choice(list(Compression))
        if r < 0.6:
            recs = [SimpleRecord(b"v" * rnd.randint(0, 150), None, 1_700_000_000_000 + rnd.randint(-50, 50))]
            log.append(recs * rnd.randint(1, 4), compression=codec)
        elif r < 0.85:
            pid, n = rnd.randint(1, 4), rnd.randint(1, 3)
            batch = MemoryRecords.build(
                [SimpleRecord(b"t")] * n,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=sequences.get(pid, 0),
                is_transactional=True,
                compression=codec,
            )
            log.append_as_leader(batch)
            sequences[pid] = sequences.get(pid, 0) + n
            open_txns.add(pid)
        elif open_txns:
            pid = rnd.choice(sorted(open_txns))
            open_txns.discard(pid)
            marker = MemoryRecords.end_transaction_marker(
                producer_id=pid,
                producer_epoch=0,
                control_type=rnd.choice(["COMMIT", "ABORT"]),
                coordinator_epoch=0,
            )
            log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
    log.close()


@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_the_crash_suites_checker(tmp_path: Path, seed: int) -> None:
    """On random logs (codecs, transactions, rolls) and random bit flips, ``verify`` finds a fault exactly when
    the independent checker of tests/crash finds a problem."""
    import random

    from crash.verify import verify_partition_dir as crash_verify
    from kafkalog.cli.verifier import verify_partition_dir

    src = tmp_path / "src-0"
    _random_log(src, seed)
    assert crash_verify(src).ok and not verify_partition_dir(src).findings
    rnd = random.Random(seed)
    for k in range(6):
        dst = tmp_path / f"copy{k}-0"
        shutil.copytree(src, dst)
        files = [p for p in sorted(dst.iterdir()) if p.suffix != ".json" and p.is_file() and p.stat().st_size]
        victim = rnd.choice([p for p in files if p.name != ".kafka_cleanshutdown"])
        data = bytearray(victim.read_bytes())
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        victim.write_bytes(bytes(data))
        theirs, mine = crash_verify(dst), verify_partition_dir(dst)
        assert bool(theirs.problems) == bool(mine.faults), (victim.name, theirs.problems, mine.findings)


def test_live_directory_with_no_index_entry_yet_passes(tmp_path: Path) -> None:
    """A live LogManager whose active segments hold less than index.interval.bytes: every index is preallocated
    and all zero, slot 0 included, which is no entry (it was read as one: a fault per partition). With
    ``preallocate`` the active .log has a zero-filled tail too (it was a corrupt batch)."""
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("t", 4)
        mgr.create_topic("p", 1, {"preallocate": True, "segment.bytes": 1 << 20})
        for i in range(20):
            mgr.produce("t", [(b"k%d" % i, b"v%d" % i)])
            mgr.produce("p", [(b"k%d" % i, b"v%d" % i)])
        index = root / "t-0" / "00000000000000000000.timeindex"
        assert index.stat().st_size > 12 and not any(index.read_bytes())
        assert (root / "p-0" / "00000000000000000000.log").stat().st_size == 1 << 20
        result = run("verify", "--json", root)
        assert result.exit_code == 0, faults(result.stdout)
    assert run("verify", root).exit_code == 0


def test_zero_filled_tail_of_a_rolled_segment_is_a_fault(clean: Path, tmp_path: Path) -> None:
    root = copy_of(clean, tmp_path)
    log = sorted((root / "orders-0").glob("*.log"))[0]
    log.write_bytes(log.read_bytes() + bytes(4096))
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    assert any(f["file"] == log.name for f in faults(result.stdout))


def _drop_middle_segments(partition: Path) -> list[int]:
    segments = sorted(partition.glob("*.log"))
    assert len(segments) > 6
    for suffix in (".log", ".index", ".timeindex"):
        segments[2].with_suffix(suffix).unlink()  # a segment gone
    segments[4].write_bytes(b"")  # a segment emptied
    segments[4].with_suffix(".index").write_bytes(b"")
    segments[4].with_suffix(".timeindex").write_bytes(b"")
    return [int(s.stem) for s in segments]


def test_a_missing_or_emptied_segment_is_a_hole(tmp_path: Path) -> None:
    root = tmp_path / "data"
    with LogManager.open(root, background=False) as mgr:
        mgr.create_topic("d", 1, {"segment.bytes": 1000})
        mgr.create_topic("c", 1, {"segment.bytes": 1000, "cleanup.policy": "compact"})
        for i in range(100):
            mgr.produce("d", [(b"k%d" % i, b"v" * 50)])
            mgr.produce("c", [(b"k%d" % i, b"v" * 50)])
    bases = _drop_middle_segments(root / "d-0")
    _drop_middle_segments(root / "c-0")
    result = run("verify", "--json", root)
    assert result.exit_code == 1
    found = {(f["partition"], f["file"]): str(f["message"]) for f in faults(result.stdout)}
    assert set(found) == {("d-0", f"{bases[3]:020d}.log"), ("d-0", f"{bases[5]:020d}.log")}
    assert found[("d-0", f"{bases[3]:020d}.log")].startswith(
        f"offsets {bases[2]}..{bases[3] - 1} are missing"
    )
    assert "is empty" in found[("d-0", f"{bases[5]:020d}.log")]


def test_a_hole_in_a_topic_of_unknown_config_is_a_warning(tmp_path: Path) -> None:
    written = write_partition(tmp_path / "p-0", batches=100, segment_bytes=800, transactions=False)
    _drop_middle_segments(written.path)
    result = run("verify", "--json", written.path)
    assert result.exit_code == 0
    warnings = [o for o in json_lines(result.stdout) if o["type"] == "warning"]
    assert sum("are missing" in str(w["message"]) for w in warnings) == 2


def test_a_segment_deleted_during_the_check_is_not_a_failure(
    clean: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention or the cleaner of a live writer removes a segment between the listing and its walk: verify
    stopped with exit 66 (no such file) on a healthy directory."""
    import kafkalog.cli.verifier as verifier

    root = copy_of(clean, tmp_path)
    victim = sorted((root / "orders-0").glob("*.log"))[0]
    real = verifier.LogDump

    def deleting(path: Path, *args: object, **kwargs: object) -> object:
        if path == victim:
            for suffix in (".log", ".index", ".timeindex"):
                victim.with_suffix(suffix).unlink()
        return real(path, *args, **kwargs)

    monkeypatch.setattr(verifier, "LogDump", deleting)
    result = run("verify", "--json", root)
    assert result.exit_code == 0, result.stdout
    warned = [o for o in json_lines(result.stdout) if o["type"] == "warning"]
    assert [(w["partition"], w["file"]) for w in warned] == [("orders-0", victim.name)]
