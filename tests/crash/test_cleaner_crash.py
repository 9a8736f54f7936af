"""Crashes at every step of a cleaning: writing the ``.cleaned`` segment, renaming it ``.swap``, renaming the
old segments ``.deleted``, stripping ``.swap``, the delayed deletes — in every group of a round.

Each run copies a template partition, cleans it under :func:`crash.faults.crash_after` (the first ``n`` file
operations under the partition directory happen, the process "dies" at the next one), then loads the
directory in a fresh process (``Log.open`` after an unclean shutdown, pending deletes lost). Whatever the
step, the reloaded log must hold every record of the fully cleaned log, only records that were written (same
offsets, keys and values), the latest value of every key, no offset twice, no empty segment, and — once its
own delayed deletes ran — no ``.cleaned`` / ``.swap`` / ``.deleted`` leftover; and cleaning it again must give
the log an uncrashed cleaning gives.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from crash.faults import crash_after, fast_tmp_dir, leftovers
from crash.verify import assert_valid_partition_dir
from kafkalog.cleaner.service import LogCleaner
from kafkalog.log import AppendOrigin, Log, LogConfig, MockScheduler
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.time import MockTime

ALL_OPS = ("rename", "unlink", "write", "truncate")
CONFIG = LogConfig(
    segment_bytes=900,
    index_interval_bytes=200,
    segment_index_bytes=4096,
    file_delete_delay_ms=1000,
    cleanup_policy=("compact",),
    message_timestamp_after_max_ms=2**63 - 1,
)
CLEANER = {"log.cleaner.dedupe.buffer.size": 1 << 16}
Record = tuple[int, bytes | None, bytes | None]


class Process:
    """One "process": its clock and scheduler (a crash loses both, with every pending task)."""

    def __init__(self) -> None:
        self.time = MockTime()
        self.scheduler = MockScheduler(self.time)

    def open(self, directory: Path, clean: bool) -> Log:
        log = Log.open(directory, CONFIG, scheduler=self.scheduler, time=self.time, last_shutdown_clean=clean)
        log.update_high_watermark(log.log_end_offset)
        return log

    def run_delayed_deletes(self) -> None:
        self.time.sleep(CONFIG.file_delete_delay_ms + 1)


def contents(log: Log) -> list[Record]:
    """``(offset, key, value)`` of every data record, read through the log's segments."""
    return [
        (r.offset, r.key, r.value)
        for s in log.segments
        for b in s.batches()
        if not b.is_control_batch
        for r in b.records()
    ]


def latest(records: list[Record]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for _, k, v in records:
        out[k] = v
    return out


def write(log: Log, process: Process, rng: random.Random, batches: int) -> None:
    """Keyed batches over 8 keys, some tombstones, an aborted and a committed transaction."""
    now = process.time.milliseconds()
    for i in range(batches):
        recs = [
            SimpleRecord(None if rng.random() < 0.1 else b"v%d-%d" % (i, j), b"k%d" % rng.randrange(8), now)
            for j in range(rng.randint(1, 4))
        ]
        log.append_as_leader(MemoryRecords.build(recs, now_ms=now), 0)
        if i in (batches // 3, 2 * batches // 3):
            pid = 10 + i
            txn = MemoryRecords.build(
                [SimpleRecord(b"txn-%d" % i, b"k%d" % rng.randrange(8), now)],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
                now_ms=now,
            )
            log.append_as_leader(txn, 0)
            control = ControlRecordType.ABORT if i == batches // 3 else ControlRecordType.COMMIT
            marker = MemoryRecords.end_transaction_marker(
                producer_id=pid, producer_epoch=0, control_type=control, coordinator_epoch=0, timestamp=now
            )
            log.append_as_leader(marker, 0, AppendOrigin.COORDINATOR)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    with fast_tmp_dir(tmp_path) as directory:
        yield directory


def template(base: Path, second_round: bool) -> dict[str, bytes]:
    """A closed log of several segments; with ``second_round`` it was cleaned once and then written to again
    (so the next cleaning merges small cleaned segments into groups)."""
    directory = base / f"template{int(second_round)}-0"
    process = Process()
    log = process.open(directory, clean=True)
    rng = random.Random(7)
    write(log, process, rng, 40)
    if second_round:
        LogCleaner(CLEANER, time=process.time).clean_log(log)
        process.run_delayed_deletes()
        write(log, process, rng, 25)
    log.close()
    (directory.parent / "cleaner-offset-checkpoint").unlink(missing_ok=True)
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def copy_of(files: dict[str, bytes], directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def cleaned_reference(files: dict[str, bytes], directory: Path) -> tuple[list[Record], list[Record]]:
    """The records before and after an uncrashed cleaning."""
    copy_of(files, directory)
    process = Process()
    log = process.open(directory, clean=True)
    before = contents(log)
    LogCleaner(CLEANER, time=process.time).clean_log(log)
    process.run_delayed_deletes()
    after = contents(log)
    log.close()
    return before, after


@pytest.mark.parametrize("second_round", [False, True], ids=["first-cleaning", "merging-cleaned-segments"])
def test_crash_at_every_step_of_a_cleaning(work_dir: Path, second_round: bool) -> None:
    files = template(work_dir, second_round)
    before, after = cleaned_reference(files, work_dir / "reference" / "ref-0")
    assert len(after) < len(before)
    before_by_offset = {o: (k, v) for o, k, v in before}
    outcomes: set[str] = set()

    def run(crash_at: int | None) -> tuple[int, bool]:
        directory = copy_of(files, work_dir / f"run{crash_at}" / "crash-0")
        process = Process()
        log = process.open(directory, clean=True)
        end = log.log_end_offset
        with crash_after(directory, crash_at, ALL_OPS) as ops:
            LogCleaner(CLEANER, time=process.time).clean_log(log)
            process.run_delayed_deletes()
        log.close_handlers()
        fresh = Process()
        reloaded = fresh.open(directory, clean=False)
        fresh.run_delayed_deletes()
        try:
            got = contents(reloaded)
            where = f"crash at step {crash_at}"
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets)), f"{where}: an offset twice"
            assert all(before_by_offset.get(o) == (k, v) for o, k, v in got), f"{where}: a record changed"
            assert set(after) <= set(got), f"{where}: a surviving record was lost"
            assert latest(got) == latest(before), f"{where}: a key's latest value changed"
            assert reloaded.log_end_offset == end
            assert all(s.size > 0 for s in reloaded.segments[:-1]), f"{where}: an empty segment"
            assert leftovers(directory) == [], f"{where}: {leftovers(directory)}"
            outcomes.add("cleaned" if got == after else "old" if got == before else "partly cleaned")
            LogCleaner(CLEANER, time=fresh.time).clean_log(reloaded)
            fresh.run_delayed_deletes()
            assert contents(reloaded) == after, f"{where}: cleaning again differs from an uncrashed cleaning"
        finally:
            reloaded.close()
        assert_valid_partition_dir(directory, exact_index_entries=False)
        return ops.count, ops.crashed

    total, crashed = run(None)
    assert not crashed and total > 0
    assert total < 2000, f"{total} steps: too many for a sweep"
    for n in range(total):
        _, crashed = run(n)
        assert crashed, f"no crash at step {n} of {total}"
    assert outcomes == {"old", "partly cleaned", "cleaned"}, outcomes
