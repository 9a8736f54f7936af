"""A hypothesis state machine driving a Log against a simple in-memory model.

Rules: leader appends (random sizes, keys, timestamps, codecs, re-compressed to a random topic
``compression.type``; too-large appends must change nothing),
follower appends with offset gaps (as after compaction), reads (random offsets, isolation levels, max
lengths, ``min_one_message``), rolls, flushes, retention (random ``retention.ms`` / ``retention.bytes`` /
log start offset, with ``MockTime`` advances), high-watermark updates, log-start-offset increments,
``truncate_to`` and a clean close + reopen. Lookups by timestamp are checked against the model as well.

The model is the list of records physically in the log (offset, key, value, timestamp, base offset of their
batch), the log start offset, the high watermark and the log end offset. Retention is predicted with an
independent implementation of Kafka's rules (``deletableSegments`` walk, the three breaches in Kafka's
order, never past the HW, never the empty last segment, roll first when everything goes).

Invariants after every step: ``log_start <= HW <= LEO`` (and equal to the model's), reading from the log start
offset returns exactly the model's visible records in order, segment base offsets ascending, every batch
found through its segment's index (``translate_offset``), every segment's max timestamp equals the model's.

The default run is bounded (``max_examples=50``, 40 steps) to stay well under a minute; the ``slow`` variant
runs many more examples and longer programs.
"""

from __future__ import annotations

import shutil
import tempfile
import time as _time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkalog.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from kafkalog.log import FetchIsolation, Log, LogConfig, MockScheduler
from kafkalog.records import Compression, SimpleRecord
from kafkalog.storage import TimestampAndOffset
from kafkalog.time import MockTime

from .helpers import check_log_invariants, dir_state, open_log, records

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int
    batch: int  # base offset of the batch holding it


@dataclass
class Seg:
    base: int
    size: int
    largest_timestamp: int


record_lists = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(min_size=0, max_size=8)),
        st.binary(min_size=0, max_size=120),
        st.integers(min_value=-5000, max_value=5000),  # timestamp relative to "now"
    ),
    min_size=1,
    max_size=6,
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="kafkalog-stateful-"))
        self.dir = self.tmp / "stateful-0"
        self.time = MockTime(_time.time_ns() // 1_000_000)
        self.scheduler = MockScheduler(self.time)
        self.log: Log | None = None
        self.model: list[Rec] = []
        self.log_start = 0
        self.hw = 0
        self.leo = 0

    # --- setup ------------------------------------------------------------------------------------------
    @initialize(
        segment_bytes=st.sampled_from([250, 600, 1500]),
        index_interval_bytes=st.sampled_from([1, 150, 4096]),
        segment_index_bytes=st.sampled_from([64, 1000, 10 * 1024 * 1024]),
        file_delete_delay_ms=st.sampled_from([0, 1000, 60_000]),
        compression_type=st.sampled_from(["producer", "producer", "uncompressed", "gzip", "lz4", "zstd"]),
    )
    def open(
        self,
        segment_bytes: int,
        index_interval_bytes: int,
        segment_index_bytes: int,
        file_delete_delay_ms: int,
        compression_type: str,
    ) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            segment_index_bytes=segment_index_bytes,
            file_delete_delay_ms=file_delete_delay_ms,
            retention_ms=-1,
            retention_bytes=-1,
            compression_type=compression_type,
        )
        self.log = open_log(self.dir, self.config, time=self.time, scheduler=self.scheduler)

    def teardown(self) -> None:
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def L(self) -> Log:
        assert self.log is not None
        return self.log

    def visible(self) -> list[Rec]:
        return [r for r in self.model if r.offset >= self.log_start]

    # --- appends ----------------------------------------------------------------------------------------
    def _append(
        self, items: list[tuple[bytes | None, bytes, int]], codec: Compression, gap: int | None
    ) -> None:
        now = self.time.milliseconds()
        simple = [SimpleRecord(v, k, max(0, now + dt)) for k, v, dt in items]
        base = self.leo if gap is None else self.leo + gap
        batch = records(simple, codec=codec, base_offset=0 if gap is None else base, partition_leader_epoch=0)
        before = (self.L.log_end_offset_metadata, dir_state(self.dir))
        try:
            info = self.L.append_as_leader(batch, 0) if gap is None else self.L.append_as_follower(batch)
        except RecordBatchTooLargeError:
            # The limit applies to the batch as stored: a leader may have re-compressed it.
            kept = gap is not None or self.config.compression_type == "producer"
            assert not kept or batch.size_in_bytes > self.config.segment_bytes
            assert (self.L.log_end_offset_metadata, dir_state(self.dir)) == before
            return
        if gap is not None or self.config.compression_type == "producer":
            assert batch.size_in_bytes <= self.config.segment_bytes
        assert (info.first_offset, info.last_offset) == (base, base + len(items) - 1)
        for i, r in enumerate(simple):
            assert r.timestamp is not None
            self.model.append(Rec(base + i, r.key, r.value or b"", r.timestamp, base))
        self.leo = base + len(items)

    @rule(items=record_lists, codec=st.sampled_from(CODECS))
    def append_as_leader(self, items: list[tuple[bytes | None, bytes, int]], codec: Compression) -> None:
        self._append(items, codec, None)

    @rule(items=record_lists, codec=st.sampled_from(CODECS), gap=st.integers(0, 3))
    def append_as_follower(
        self, items: list[tuple[bytes | None, bytes, int]], codec: Compression, gap: int
    ) -> None:
        self._append(items, codec, gap)

    # --- reads ------------------------------------------------------------------------------------------
    @rule(
        data=st.data(),
        isolation=st.sampled_from(list(FetchIsolation)),
        max_length=st.sampled_from([0, 1, 50, 300, 1 << 20]),
        min_one_message=st.booleans(),
    )
    def read(
        self, data: st.DataObject, isolation: FetchIsolation, max_length: int, min_one_message: bool
    ) -> None:
        offset = data.draw(st.integers(self.log_start - 2, self.leo + 2), label="offset")
        if offset < self.log_start or offset > self.leo:
            with pytest.raises(OffsetOutOfRangeError):
                self.L.read(offset, max_length, isolation, min_one_message)
            return
        info = self.L.read(offset, max_length, isolation, min_one_message)
        upper = self.leo if isolation is FetchIsolation.LOG_END else self.hw  # no transactions: LSO == HW
        batches = list(info.records.batches())
        got = [r for b in batches for r in b.records()]
        limit = max(max_length, batches[0].size_in_bytes) if min_one_message and batches else max_length
        assert info.records.size_in_bytes <= limit
        assert all(r.offset < upper for r in got), (offset, upper, [r.offset for r in got])
        if got:
            by_offset = {r.offset: r for r in self.model}
            first_batch = by_offset[got[0].offset].batch
            expected = [r for r in self.model if r.offset >= first_batch][: len(got)]
            assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
                (r.offset, r.key, r.value, r.timestamp) for r in expected
            ]
            # Nothing at or after the requested offset was skipped before the first returned batch.
            assert not any(r.offset >= offset and r.batch < first_batch for r in self.model)
        wanted = [r for r in self.model if offset <= r.offset < upper]
        if wanted and isolation is FetchIsolation.LOG_END and min_one_message:
            assert any(r.offset >= offset for r in got), "a read below the LEO returns at least one batch"

    @rule(data=st.data())
    def fetch_offset_by_timestamp(self, data: st.DataObject) -> None:
        visible = self.visible()
        if visible and data.draw(st.booleans(), label="existing timestamp"):
            target = data.draw(st.sampled_from([r.timestamp for r in visible]), label="target")
        else:
            target = self.time.milliseconds() + data.draw(st.integers(-6000, 6000), label="delta")
        found = self.L.fetch_offset_by_timestamp(target)
        match = next((r for r in visible if r.timestamp >= target), None)
        if match is None:
            assert found is None
        else:
            assert found is not None and (found.timestamp, found.offset) == (match.timestamp, match.offset)
        assert self.L.fetch_offset_by_timestamp(-1) == TimestampAndOffset(-1, self.leo, self.L.latest_epoch)
        earliest = self.L.fetch_offset_by_timestamp(-2)
        assert earliest is not None and earliest.offset == self.log_start
        # -3: the first record holding the largest timestamp of any segment (below the log start too, as Kafka)
        max_ts = self.L.fetch_offset_by_timestamp(-3)
        if self.model:
            best = max(r.timestamp for r in self.model)
            first_best = next(r for r in self.model if r.timestamp == best)
            assert max_ts is not None and (max_ts.timestamp, max_ts.offset) == (best, first_best.offset)

    # --- roll / flush / watermarks ----------------------------------------------------------------------
    @rule()
    def roll(self) -> None:
        self.L.roll()
        assert self.L.active_segment.base_offset == self.leo

    @rule()
    def flush(self) -> None:
        self.L.flush()
        assert self.L.recovery_point == self.leo

    @rule(data=st.data())
    def update_high_watermark(self, data: st.DataObject) -> None:
        hw = data.draw(st.integers(-1, self.leo + 3), label="hw")
        assert self.L.update_high_watermark(hw) == min(max(hw, self.log_start), self.leo)
        self.hw = min(max(hw, self.log_start), self.leo)

    @precondition(lambda self: self.log is not None and self.hw > self.log_start)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.log_start, self.hw), label="new log start")
        assert self.L.maybe_increment_log_start_offset(target) == (target > self.log_start)
        self.log_start = max(self.log_start, target)

    # --- retention --------------------------------------------------------------------------------------
    def _segments(self) -> list[Seg]:
        out = []
        for s in self.L.segments:
            nxt = self.L.local_log.segments.higher_segment(s.base_offset)
            end = nxt.base_offset if nxt is not None else self.leo + 1
            mine = [r.timestamp for r in self.model if s.base_offset <= r.offset < end]
            out.append(Seg(s.base_offset, s.size, max(mine) if mine else s.largest_timestamp()))
        return out

    def _expected_retention(self, now: int) -> tuple[int, list[int], int]:
        segs = self._segments()
        log_start = self.log_start
        cfg = self.L.config
        deleted = 0

        def walk(pred) -> list[Seg]:  # type: ignore[no-untyped-def]
            out = []
            for i, s in enumerate(segs):
                nxt = segs[i + 1] if i + 1 < len(segs) else None
                upper = nxt.base if nxt is not None else self.leo
                if self.hw >= upper and not (nxt is None and s.size == 0) and pred(s, nxt):
                    out.append(s)
                else:
                    break
            return out

        def remove(gone: list[Seg]) -> None:
            nonlocal segs, log_start, deleted
            if not gone:
                return
            if len(gone) == len(segs):
                segs = [*segs, Seg(self.leo, 0, -1)]
            segs = segs[len(gone) :]
            log_start = max(log_start, segs[0].base)
            deleted += len(gone)

        remove(walk(lambda s, n: n is not None and n.base <= log_start))
        if cfg.delete:
            if cfg.retention_bytes >= 0 and sum(s.size for s in segs) >= cfg.retention_bytes:
                diff = sum(s.size for s in segs) - cfg.retention_bytes

                def by_size(s: Seg, _n: Seg | None) -> bool:
                    nonlocal diff
                    if diff - s.size >= 0:
                        diff -= s.size
                        return True
                    return False

                remove(walk(by_size))
            if cfg.retention_ms >= 0:
                remove(walk(lambda s, _n: now - s.largest_timestamp > cfg.retention_ms))
        return deleted, [s.base for s in segs], log_start

    @rule(
        retention_ms=st.sampled_from([-1, 0, 1000, 4000, 20_000]),
        retention_bytes=st.sampled_from([-1, 0, 300, 1000, 3000]),
        advance_ms=st.sampled_from([0, 1, 999, 3000, 10_000]),
    )
    def retention(self, retention_ms: int, retention_bytes: int, advance_ms: int) -> None:
        self.L.update_config({"retention.ms": retention_ms, "retention.bytes": retention_bytes})
        self.time.sleep(advance_ms)
        deleted, bases, log_start = self._expected_retention(self.time.milliseconds())
        assert self.L.delete_old_segments() == deleted
        assert [s.base_offset for s in self.L.segments] == bases
        assert self.L.log_start_offset == log_start
        assert self.L.log_start_offset <= self.hw
        self.log_start = log_start
        self.model = [r for r in self.model if r.offset >= bases[0]]

    # --- truncation -------------------------------------------------------------------------------------
    def _truncation_targets(self) -> list[int]:
        """Where a follower truncates: batch boundaries (the end of a batch), below the first segment, or at
        or past the LEO. Truncating into a batch or into a gap before a batch leaves the LEO beyond the data,
        in Kafka as here (covered by test_truncate_straddling_batch_is_dropped_whole)."""
        first_base = self.L.segments[0].base_offset
        ends = {max(r.offset for r in self.model if r.batch == b) + 1 for b in {r.batch for r in self.model}}
        return sorted({*range(first_base + 1), *ends, self.leo, self.leo + 1})

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self._truncation_targets()), label="truncate to")
        first_base = self.L.segments[0].base_offset
        truncated = self.L.truncate_to(target)
        assert truncated == (target < self.leo)
        if target >= self.leo:
            return
        if target < first_base:
            self.model = []
            self.log_start = target
        else:
            self.model = [
                r for r in self.model if max(x.offset for x in self.model if x.batch == r.batch) < target
            ]
            self.log_start = min(self.log_start, target)
        self.leo = target
        self.hw = min(self.hw, self.leo)

    # --- close and reopen -------------------------------------------------------------------------------
    @rule()
    def reopen(self) -> None:
        recovery_point, log_start = self.L.recovery_point, self.L.log_start_offset
        bases = [s.base_offset for s in self.L.segments]
        self.L.close()
        self.log = open_log(
            self.dir,
            self.config.updated(self.L.config.to_props(only_overrides=True)),
            time=self.time,
            scheduler=self.scheduler,
            log_start_offset=log_start,
            recovery_point=recovery_point,
            last_shutdown_clean=True,
        )
        assert [s.base_offset for s in self.L.segments] == bases
        assert self.L.log_end_offset == self.leo
        self.hw = self.log_start  # the HW is not persisted by the log

    # --- invariants -------------------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        assert (self.L.log_start_offset, self.L.high_watermark, self.L.log_end_offset) == (
            self.log_start,
            self.hw,
            self.leo,
        )
        assert self.L.last_stable_offset == self.hw
        check_log_invariants(self.L)

    @invariant()
    def read_everything(self) -> None:
        if self.log is None:
            return
        got = []
        offset = self.log_start
        while offset < self.leo:
            info = self.L.read(offset, 1 << 20)
            batches = list(info.records.batches())
            if not batches:
                break
            got.extend(r for b in batches for r in b.records() if r.offset >= offset)
            offset = batches[-1].last_offset + 1
        assert [(r.offset, r.key, r.value, r.timestamp) for r in got] == [
            (r.offset, r.key, r.value, r.timestamp) for r in self.visible()
        ]

    @invariant()
    def segment_timestamps(self) -> None:
        if self.log is None:
            return
        for seg, model_seg in zip(self.L.segments, self._segments()):
            if seg.size:
                assert seg.max_timestamp_so_far == model_seg.largest_timestamp, seg


def _settings(max_examples: int, steps: int) -> settings:
    return settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


TestLogStateMachine = LogMachine.TestCase
TestLogStateMachine.settings = _settings(50, 40)


@pytest.mark.slow
def test_log_state_machine_long() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(LogMachine, settings=_settings(400, 80))
