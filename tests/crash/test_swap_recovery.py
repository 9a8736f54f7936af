"""Crashes at every step of the file protocols: swap (cleaner replace), split (KAFKA-6264) and delete.

Each protocol is run under :func:`crash.faults.crash_after`, which lets the first ``n`` file operations (renames,
unlinks, writes, truncations) under the partition directory happen and kills the "process" at the next one; ``n``
goes over every step, so every mix of ``.cleaned`` / ``.swap`` / ``.deleted`` files the protocol can leave is
produced. The directory is then loaded by a fresh process (new clock and scheduler: the dead one's pending
deletes died with it) and must hold exactly the log before the operation or exactly the log after it — never a
mix, never a hole, never a leftover once the delayed deletes have run — and pass the full verification.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from crash.faults import crash_after, fast_tmp_dir, initialize_log_dir_with_overflowed_segment, leftovers
from crash.verify import assert_valid_partition_dir
from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.log.local_log import open_segment, replace_segments
from kafkalog.records import MemoryRecords, SimpleRecord
from kafkalog.storage import LogSegment
from kafkalog.time import MockTime

INT_MAX = 2**31 - 1
ALL_OPS = ("rename", "unlink", "write", "truncate")
CONFIG = LogConfig(
    segment_bytes=1200, index_interval_bytes=200, segment_index_bytes=4096, file_delete_delay_ms=1000
)


@dataclass
class Process:
    """One "process": its clock and scheduler (a crash loses both, with every pending task)."""

    time: MockTime
    scheduler: MockScheduler

    @classmethod
    def start(cls) -> Process:
        time = MockTime()
        return cls(time, MockScheduler(time))

    def open(self, directory: Path, **kwargs: object) -> Log:
        return Log.open(directory, CONFIG, scheduler=self.scheduler, time=self.time, **kwargs)  # type: ignore[arg-type]

    def run_delayed_deletes(self) -> None:
        self.time.sleep(CONFIG.file_delete_delay_ms + 1)


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every record, read through the log's segments."""
    return [(r.offset, r.key, r.value) for s in log.segments for b in s.batches() for r in b.records()]


def write_log(directory: Path, process: Process, batches: int = 90, seed: int = 0) -> Log:
    rng = random.Random(seed)
    log = process.open(directory, last_shutdown_clean=False)
    for i in range(batches):
        n = rng.randint(1, 4)
        now = process.time.milliseconds()
        records = [SimpleRecord(b"v%d-%d" % (i, j), b"k%d" % rng.randrange(6), now + i) for j in range(n)]
        log.append_as_leader(MemoryRecords.build(records, now_ms=now), 0)
    log.flush()
    return log


@pytest.fixture
def work_dir(tmp_path: Path) -> Iterator[Path]:
    with fast_tmp_dir(tmp_path) as directory:
        yield directory


def template_log(base: Path) -> dict[str, bytes]:
    """The files of a closed, flushed log of several segments (written once, copied for every step)."""
    directory = base / "template-0"
    process = Process.start()
    log = write_log(directory, process)
    log.close()
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def copy_of(files: dict[str, bytes], directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def sweep(run: Callable[[int | None], tuple[int, bool]], limit: int = 400) -> int:
    """Run ``run(crash_at)`` for ``crash_at`` = None (to count) then every step; returns the step count."""
    total, crashed = run(None)
    assert not crashed and total > 0
    assert total < limit, f"{total} steps: too many for a sweep"
    for n in range(total):
        _, crashed = run(n)
        assert crashed, f"no crash at step {n} of {total}"
    return total


# --- split of an overflowed legacy segment (the loader's own) ----------------------------------------------------


def test_crash_at_every_step_of_the_loaders_split(work_dir: Path) -> None:
    """The loader splits a segment whose offsets overflow its base; a crash at any step of the split (or of the
    delayed delete of the old segment) is finished or undone by the next load."""
    template = work_dir / "template-0"
    initialize_log_dir_with_overflowed_segment(template)
    process = Process.start()
    reference = process.open(template, recovery_point=2**63 - 1, last_shutdown_clean=True)
    expected = contents(reference)
    reference.close_handlers()
    template_files = {p.name: p.read_bytes() for p in template.iterdir()}

    def run(crash_at: int | None) -> tuple[int, bool]:
        directory = copy_of(template_files, work_dir / f"split{crash_at}-0")
        process = Process.start()
        with crash_after(directory, crash_at, ALL_OPS) as ops:
            log = process.open(directory, last_shutdown_clean=False)
            process.run_delayed_deletes()
            log.close()
        after = Process.start()
        log = after.open(directory, last_shutdown_clean=False)
        after.run_delayed_deletes()
        try:
            assert contents(log) == expected, f"crash at step {crash_at}: records differ"
            for segment in log.segments:
                for batch in segment.batches():
                    assert segment.can_convert_to_relative_offset(batch.last_offset), "still overflowing"
            assert leftovers(directory) == []
        finally:
            log.close()
        assert_valid_partition_dir(directory, exact_index_entries=False)
        return ops.count, ops.crashed

    steps = sweep(run)
    assert steps > 10


# --- replace (the cleaner's swap) -------------------------------------------------------------------------------


def _cleaned_copy(log: Log, old: list[LogSegment], keep: Callable[[int], bool]) -> LogSegment:
    """A ``.cleaned`` segment at the first old base holding the old segments' batches that ``keep`` their base
    offset (the last batch is always kept, as Kafka's cleaner does since KAFKA-17076)."""
    cleaned = open_segment(log.dir, old[0].base_offset, CONFIG, log.time, file_suffix=".cleaned")
    batches = [b for s in old for b in s.batches()]
    for batch in batches:
        if keep(batch.base_offset) or batch is batches[-1]:
            records = MemoryRecords(batch.to_bytes())
            cleaned.append(batch.last_offset, batch.max_timestamp, batch.last_offset, records)
    cleaned.on_become_inactive_segment()
    cleaned.flush()
    return cleaned


@pytest.mark.parametrize(
    "replaced", [(1, 2), (0,), (2, 3, 4)], ids=lambda r: "segments-" + "-".join(map(str, r))
)
def test_crash_at_every_step_of_a_replace(work_dir: Path, replaced: tuple[int, ...]) -> None:
    """``local_log.replace_segments`` (the cleaner's swap: ``.cleaned`` -> ``.swap`` -> delete old -> strip ``.swap``)
    crashed at every step: the reloaded log holds the old segments' records or the cleaned ones, never a mix."""
    template = template_log(work_dir)
    outcomes: set[str] = set()

    def run(crash_at: int | None) -> tuple[int, bool]:
        directory = copy_of(template, work_dir / f"swap{crash_at}-0")
        process = Process.start()
        log = process.open(directory, last_shutdown_clean=True)
        assert log.num_log_segments > max(replaced) + 1
        before = contents(log)
        old = [log.segments[i] for i in replaced]
        lo, hi = old[0].base_offset, log.segments[max(replaced) + 1].base_offset
        cleaned = _cleaned_copy(log, old, keep=lambda offset: offset % 3 != 0)
        after_records = [r for r in before if not lo <= r[0] < hi] + [
            (r.offset, r.key, r.value) for b in cleaned.batches() for r in b.records()
        ]
        after_records.sort()
        end = log.log_end_offset
        with crash_after(directory, crash_at, ALL_OPS) as ops:
            with log.lock:
                replace_segments(
                    log.local_log.segments, [cleaned], old, log.dir, log.local_log.scheduler, log.config
                )
            process.run_delayed_deletes()
        log.close_handlers()
        cleaned.close_handlers()
        fresh = Process.start()
        reloaded = fresh.open(directory, recovery_point=end, last_shutdown_clean=False)
        fresh.run_delayed_deletes()
        try:
            got = contents(reloaded)
            assert got in (before, after_records), (
                f"crash at step {crash_at}: neither the old nor the new log"
            )
            outcomes.add("old" if got == before else "new")
            if crash_at is None:
                assert got == after_records
            assert leftovers(directory) == []
            assert reloaded.log_end_offset == end
        finally:
            reloaded.close()
        assert_valid_partition_dir(directory)
        return ops.count, ops.crashed

    steps = sweep(run)
    assert outcomes == {"old", "new"}, f"{steps} steps gave only {outcomes}"


# --- delete ------------------------------------------------------------------------------------------------------


def test_crash_at_every_step_of_retention(work_dir: Path) -> None:
    """Deleting the oldest segments (log start offset moved, then ``.deleted`` renames, then the delayed unlinks):
    the reloaded log is a suffix of the old one, contiguous, and starts at a segment boundary."""
    template = template_log(work_dir)
    starts: set[int] = set()

    def run(crash_at: int | None) -> tuple[int, bool]:
        directory = copy_of(template, work_dir / f"ret{crash_at}-0")
        process = Process.start()
        log = process.open(directory, last_shutdown_clean=True)
        before = contents(log)
        bases = [s.base_offset for s in log.segments]
        new_start = bases[4]
        log.update_high_watermark(log.log_end_offset)
        end = log.log_end_offset
        with crash_after(directory, crash_at, ALL_OPS) as ops:
            log.maybe_increment_log_start_offset(new_start)
            log.delete_old_segments()
            process.run_delayed_deletes()
        log.close_handlers()
        fresh = Process.start()
        # The log start offset checkpoint may or may not have been written before the crash.
        checkpoint = new_start if crash_at is not None and crash_at % 2 else 0
        reloaded = fresh.open(
            directory, log_start_offset=checkpoint, recovery_point=end, last_shutdown_clean=False
        )
        fresh.run_delayed_deletes()
        try:
            got = contents(reloaded)
            first = reloaded.segments[0].base_offset
            assert first in bases[:5], f"crash at step {crash_at}: the log starts at {first}"
            starts.add(first)
            assert got == [r for r in before if r[0] >= first], f"crash at step {crash_at}: not a suffix"
            assert reloaded.log_start_offset == max(first, checkpoint)
            assert leftovers(directory) == []
            if crash_at is None:
                assert first == new_start
        finally:
            reloaded.close()
        assert_valid_partition_dir(directory)
        return ops.count, ops.crashed

    sweep(run)
    assert len(starts) == 5, f"the crashes left logs starting at {sorted(starts)} only"


def test_crash_at_every_step_of_truncation(work_dir: Path) -> None:
    """``truncate_to`` below several segments: at every step the reloaded log must be a prefix of the old one
    (holding at least everything below the truncation offset)."""
    template = template_log(work_dir)

    def run(crash_at: int | None) -> tuple[int, bool]:
        directory = copy_of(template, work_dir / f"trunc{crash_at}-0")
        process = Process.start()
        log = process.open(directory, last_shutdown_clean=True)
        before = contents(log)
        target = log.segments[2].base_offset
        with crash_after(directory, crash_at, ALL_OPS) as ops:
            log.truncate_to(target)
            process.run_delayed_deletes()
        log.close_handlers()
        fresh = Process.start()
        reloaded = fresh.open(directory, recovery_point=target, last_shutdown_clean=False)
        fresh.run_delayed_deletes()
        try:
            got = contents(reloaded)
            assert got == before[: len(got)], f"crash at step {crash_at}: not a prefix of the old log"
            assert reloaded.log_end_offset >= target
            assert leftovers(directory) == []
        finally:
            reloaded.close()
        assert_valid_partition_dir(directory)
        return ops.count, ops.crashed

    sweep(run)


# --- hand-made leftovers ------------------------------------------------------------------------------------------


def test_stray_transient_files_alone(tmp_path: Path) -> None:
    """``.deleted`` and ``.cleaned`` files with no swap in progress are removed; the log is untouched."""
    process = Process.start()
    directory = tmp_path / "stray-0"
    log = write_log(directory, process)
    before = contents(log)
    end = log.log_end_offset
    log.close()
    for name in (
        "00000000000000099999.log.deleted",
        "00000000000000099999.index.deleted",
        "00000000000000000005.log.cleaned",
        "00000000000000000005.timeindex.cleaned",
        "00000000000000000007.snapshot.deleted",
    ):
        (directory / name).write_bytes(b"junk")
    reloaded = Process.start().open(directory, recovery_point=end, last_shutdown_clean=False)
    assert contents(reloaded) == before
    assert leftovers(directory) == []
    reloaded.close()
    assert_valid_partition_dir(directory)


def test_swap_at_or_above_a_cleaned_file_is_an_incomplete_split(tmp_path: Path) -> None:
    """KAFKA-6264: a ``.swap`` at or above the smallest ``.cleaned`` offset belongs to a split that had not
    finished renaming its ``.cleaned`` files: it is deleted with them, and the original segment kept."""
    process = Process.start()
    directory = tmp_path / "incomplete-0"
    log = write_log(directory, process)
    before = contents(log)
    end = log.log_end_offset
    victim = log.segments[2]
    log.close()
    base = victim.base_offset
    data = victim.log.path.read_bytes()
    (directory / f"{base:020d}.log.cleaned").write_bytes(data)
    (directory / f"{base + 1:020d}.log.swap").write_bytes(data[:0])
    reloaded = Process.start().open(directory, recovery_point=end, last_shutdown_clean=False)
    assert contents(reloaded) == before
    assert leftovers(directory) == []
    reloaded.close()
    assert_valid_partition_dir(directory)
