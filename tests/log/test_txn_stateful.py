"""A hypothesis state machine: idempotent and transactional producers writing to a ``Log``, read back committed.

Producers 10 and 11 are idempotent, 20, 21 and 22 transactional; there are also plain (producer-less) appends.
Rules: appends (a transactional append opens a transaction if none is open), COMMIT / ABORT markers appended by
the coordinator (``append_as_leader(origin=COORDINATOR)``, empty transactions included, sometimes with a new
coordinator epoch), a coordinator fencing a producer (ABORT with the next producer epoch), retried batches of the
dedup window (must come back as duplicates with their original offsets), rejected appends (out of order sequence,
stale producer epoch, zombie coordinator: must change nothing), high-watermark moves (to any offset, batch
boundaries or not), rolls, a clean close + reopen, and two kinds of crash + reopen: the process dies (file handles
closed, no flush, no snapshot, no clean-shutdown marker) or the directory is copied while the log is open, then
recovered from the recovery point or from 0; and a power loss that tears the unflushed last batch (a plain one) of the
active segment, which recovery must cut off.

The model: every record with its batch's last offset and its transaction, every transaction's fate, the producers'
epochs / sequences / dedup windows, the aborted transactions the ``.txnindex`` files must hold (with the LSO at the
time of the marker), the high watermark. After every step the log must agree: log end offset, high watermark, first
unstable offset (open transactions, and completed ones whose marker is not below the high watermark), last stable
offset, producer state, every ``.txnindex`` entry, and a ``read_committed`` reader built on
:func:`kafkalog.readonly.committed.iter_committed` (random fetch sizes) sees exactly the committed records of the batches
below the LSO, in order, each once.

After a reopen the high watermark starts at the log start offset (it is not persisted); after a crash the test moves
it to the log end offset at once, as a leader does once its followers catch up: the completed transactions replayed
from the log are then replicated, as the model assumes (without it, which of them stay "unreplicated" depends on where
the last snapshot happened to be, which Kafka does not specify either).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkalog.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kafkalog.log import Log, LogConfig, MockScheduler
from kafkalog.readonly.committed import iter_committed
from kafkalog.records import ControlRecordType, MemoryRecords, SimpleRecord
from kafkalog.storage import AbortedTxn
from kafkalog.time import MockTime

from .helpers import append_end_txn_marker, check_log_invariants, records

IDEMPOTENT = (10, 11)
TRANSACTIONAL = (20, 21, 22)
NO_SEQUENCE = -1


@dataclass
class Txn:
    pid: int
    first_offset: int
    marker_offset: int | None = None
    committed: bool | None = None  # None while open
    replicated: bool = False  # marker below the high watermark (or the log was reopened since)


@dataclass(frozen=True)
class Sent:
    """A data batch a producer wrote (what a retry resends)."""

    epoch: int
    first_seq: int
    values: tuple[bytes, ...]
    transactional: bool
    first_offset: int

    @property
    def last_offset(self) -> int:
        return self.first_offset + len(self.values) - 1


@dataclass
class Producer:
    pid: int
    transactional: bool
    epoch: int = 0
    next_seq: int = 0
    coordinator_epoch: int = -1  # -1 until a marker was written
    known: bool = False  # the log has an entry for it
    window: list[Sent] = field(default_factory=list)  # the batches a retry must find (lower bound)
    txn: int | None = None  # index into the model's transactions


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes
    batch_last: int
    txn: int | None


def _tmp_root() -> Path:
    shm = Path("/dev/shm")
    base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="kafkalog-txn-stateful-", dir=base))


class TxnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = _tmp_root()
        self.generation = 0
        self.dir = self.tmp / "txn-0"
        self.time = MockTime(1_700_000_000_000)
        self.scheduler = MockScheduler(self.time)
        self.log: Log | None = None
        self.producers = {pid: Producer(pid, pid in TRANSACTIONAL) for pid in IDEMPOTENT + TRANSACTIONAL}
        self.recs: list[Rec] = []
        self.txns: list[Txn] = []
        self.aborted: list[AbortedTxn] = []
        self.leo = 0
        self.hw = 0
        self.counter = 0
        self.last_plain: tuple[int, int, int] | None = (
            None  # (first offset, count, bytes) if the last batch is plain
        )

    # --- setup ----------------------------------------------------------------------------------------------
    @initialize(
        segment_bytes=st.sampled_from([300, 800, 1 << 20]), index_interval_bytes=st.sampled_from([1, 4096])
    )
    def open(self, segment_bytes: int, index_interval_bytes: int) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=index_interval_bytes,
            segment_index_bytes=1 << 16,
            retention_ms=-1,
            retention_bytes=-1,
            file_delete_delay_ms=0,
        )
        self.log = self._open(0)

    def _open(self, recovery_point: int) -> Log:
        return Log.open(
            self.dir, self.config, recovery_point=recovery_point, scheduler=self.scheduler, time=self.time
        )

    def teardown(self) -> None:
        if self.log is not None and not self.log.closed:
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def L(self) -> Log:
        assert self.log is not None
        return self.log

    # --- helpers --------------------------------------------------------------------------------------------
    def _values(self, n: int) -> tuple[bytes, ...]:
        out = tuple(b"v%d" % (self.counter + i) for i in range(n))
        self.counter += n
        return out

    def _batch(
        self, p: Producer, epoch: int, first_seq: int, values: tuple[bytes, ...], txn: bool
    ) -> MemoryRecords:
        ts = self.time.milliseconds()
        return records(
            [SimpleRecord(v, None, ts) for v in values],
            producer_id=p.pid,
            producer_epoch=epoch,
            sequence=first_seq,
            transactional=txn,
        )

    def _open_txns(self, other_than: int | None = None) -> list[Txn]:
        return [t for t in self.txns if t.committed is None and t.pid != other_than]

    def _model_fuo(self) -> int | None:
        unstable = [t.first_offset for t in self.txns if t.committed is None or not t.replicated]
        return min(unstable) if unstable else None

    def _model_lso(self) -> int:
        fuo = self._model_fuo()
        return self.hw if fuo is None else min(fuo, self.hw)

    def _record_batch(self, values: tuple[bytes, ...], txn: int | None) -> None:
        last = self.leo + len(values) - 1
        for i, v in enumerate(values):
            self.recs.append(Rec(self.leo + i, v, last, txn))
        self.leo += len(values)

    def _remember(self, p: Producer, sent: Sent) -> None:
        p.window.append(sent)
        del p.window[:-5]
        p.next_seq = sent.first_seq + len(sent.values)
        p.known = True

    def _set_hw(self, hw: int) -> None:
        self.hw = self.L.update_high_watermark(hw)
        for t in self.txns:
            if t.marker_offset is not None and t.marker_offset < self.hw:
                t.replicated = True

    def _unchanged(self, leo: int) -> None:
        assert self.L.log_end_offset == leo == self.leo

    # --- appends --------------------------------------------------------------------------------------------
    @rule(n=st.integers(1, 3))
    def plain_append(self, n: int) -> None:
        values = self._values(n)
        ts = self.time.milliseconds()
        batch = records([SimpleRecord(v, None, ts) for v in values])
        info = self.L.append_as_leader(batch, 0)
        assert info.first_offset == self.leo
        self.last_plain = (self.leo, n, batch.size_in_bytes)
        self._record_batch(values, None)

    @rule(pid=st.sampled_from(IDEMPOTENT), n=st.integers(1, 3))
    def idempotent_append(self, pid: int, n: int) -> None:
        p = self.producers[pid]
        values = self._values(n)
        info = self.L.append_as_leader(self._batch(p, p.epoch, p.next_seq, values, False), 0)
        assert (info.first_offset, info.last_offset, info.duplicate) == (self.leo, self.leo + n - 1, False)
        self._remember(p, Sent(p.epoch, p.next_seq, values, False, self.leo))
        self.last_plain = None
        self._record_batch(values, None)

    @rule(pid=st.sampled_from(TRANSACTIONAL), n=st.integers(1, 3))
    def transactional_append(self, pid: int, n: int) -> None:
        p = self.producers[pid]
        if p.txn is None:
            self.txns.append(Txn(pid, self.leo))
            p.txn = len(self.txns) - 1
        values = self._values(n)
        info = self.L.append_as_leader(self._batch(p, p.epoch, p.next_seq, values, True), 0)
        assert (info.first_offset, info.last_offset, info.duplicate) == (self.leo, self.leo + n - 1, False)
        self._remember(p, Sent(p.epoch, p.next_seq, values, True, self.leo))
        self.last_plain = None
        self._record_batch(values, p.txn)

    def _end_txn(self, p: Producer, commit: bool, epoch: int, coordinator_epoch: int) -> None:
        marker = self.leo
        info = append_end_txn_marker(
            self.L,
            p.pid,
            epoch,
            ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
            self.time.milliseconds(),
            coordinator_epoch=coordinator_epoch,
        )
        assert (info.first_offset, info.last_offset) == (marker, marker)
        self.last_plain = None
        if p.txn is not None:
            txn = self.txns[p.txn]
            if not commit:
                others = self._open_txns(other_than=p.pid)
                lso = min(t.first_offset for t in others) if others else marker + 1
                self.aborted.append(AbortedTxn(p.pid, txn.first_offset, marker, lso))
            txn.marker_offset = marker
            txn.committed = commit
            p.txn = None
        self.leo += 1
        p.known = True
        p.coordinator_epoch = coordinator_epoch
        if epoch != p.epoch:  # a new producer epoch forgets the remembered batches
            p.epoch = epoch
            p.next_seq = 0
            p.window.clear()

    @rule(pid=st.sampled_from(TRANSACTIONAL), commit=st.booleans(), bump_coordinator=st.booleans())
    def end_transaction(self, pid: int, commit: bool, bump_coordinator: bool) -> None:
        p = self.producers[pid]
        self._end_txn(p, commit, p.epoch, max(p.coordinator_epoch, 0) + int(bump_coordinator))

    @rule(pid=st.sampled_from(TRANSACTIONAL))
    def fence_producer(self, pid: int) -> None:
        """The coordinator aborts with the next producer epoch (InitProducerId by a new instance)."""
        p = self.producers[pid]
        self._end_txn(p, False, p.epoch + 1, max(p.coordinator_epoch, 0))

    # --- retries and rejected appends -----------------------------------------------------------------------
    @precondition(lambda self: any(p.window for p in self.producers.values()))
    @rule(data=st.data())
    def retry_duplicate(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from([p for p in self.producers.values() if p.window]))
        sent = data.draw(st.sampled_from(p.window))
        leo = self.leo
        info = self.L.append_as_leader(
            self._batch(p, sent.epoch, sent.first_seq, sent.values, sent.transactional), 0
        )
        assert info.duplicate, (p.pid, sent)
        assert (info.first_offset, info.last_offset) == (sent.first_offset, sent.last_offset)
        self._unchanged(leo)

    @precondition(lambda self: any(p.known and p.next_seq > 0 for p in self.producers.values()))
    @rule(data=st.data(), gap=st.integers(1, 3))
    def out_of_order_append(self, data: st.DataObject, gap: int) -> None:
        p = data.draw(st.sampled_from([p for p in self.producers.values() if p.known and p.next_seq > 0]))
        leo = self.leo
        with pytest.raises(OutOfOrderSequenceError):
            self.L.append_as_leader(self._batch(p, p.epoch, p.next_seq + gap, (b"x",), p.transactional), 0)
        self._unchanged(leo)

    @precondition(lambda self: any(p.known and p.epoch > 0 for p in self.producers.values()))
    @rule(data=st.data())
    def stale_epoch_append(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from([p for p in self.producers.values() if p.known and p.epoch > 0]))
        leo = self.leo
        with pytest.raises(InvalidProducerEpochError):
            self.L.append_as_leader(self._batch(p, p.epoch - 1, 0, (b"x",), p.transactional), 0)
        self._unchanged(leo)

    @precondition(lambda self: any(p.coordinator_epoch > 0 for p in self.producers.values()))
    @rule(data=st.data())
    def zombie_coordinator(self, data: st.DataObject) -> None:
        p = data.draw(st.sampled_from([p for p in self.producers.values() if p.coordinator_epoch > 0]))
        leo = self.leo
        with pytest.raises(TransactionCoordinatorFencedError):
            append_end_txn_marker(
                self.L,
                p.pid,
                p.epoch,
                ControlRecordType.COMMIT,
                self.time.milliseconds(),
                coordinator_epoch=p.coordinator_epoch - 1,
            )
        self._unchanged(leo)

    # --- watermarks, rolls, reopen, crash ------------------------------------------------------------------
    @rule(data=st.data())
    def advance_high_watermark(self, data: st.DataObject) -> None:
        self._set_hw(data.draw(st.integers(self.hw, self.leo)))

    @rule()
    def roll(self) -> None:
        self.L.roll()

    @rule(ms=st.integers(1, 1000))
    def time_passes(self, ms: int) -> None:
        self.time.sleep(ms)

    def _after_reopen(self) -> None:
        for t in self.txns:
            if t.committed is not None:
                t.replicated = True
        for p in self.producers.values():
            del p.window[:-1]  # only the last batch survives a snapshot
        self.hw = self.L.high_watermark
        assert self.hw == 0

    @rule()
    def clean_reopen(self) -> None:
        self.L.close()
        self.log = self._open(0)
        assert self.L.had_clean_shutdown
        self._after_reopen()

    @rule(copy=st.booleans(), from_zero=st.booleans())
    def crash_reopen(self, copy: bool, from_zero: bool) -> None:
        recovery_point = 0 if from_zero else self.L.recovery_point
        if copy:
            # The directory as a crash at this instant leaves it: whatever the process wrote, nothing more.
            self.generation += 1
            crashed = self.tmp / f"txn-{self.generation}"
            shutil.copytree(self.dir, crashed)
            self.L.close_handlers()
            shutil.rmtree(self.dir)
            self.dir = crashed
        else:
            self.L.close_handlers()
        self.log = self._open(recovery_point)
        assert not self.L.had_clean_shutdown
        self._after_reopen()
        self._set_hw(self.leo)

    @precondition(
        lambda self: self.last_plain is not None and self.L.active_segment.base_offset <= self.last_plain[0]
    )
    @rule(data=st.data())
    def torn_tail_crash(self, data: st.DataObject) -> None:
        """Power loss: the unflushed last batch (a plain one, in the active segment) is cut short on disk."""
        assert self.last_plain is not None
        first, n, size = self.last_plain
        cut = data.draw(st.integers(1, size - 1))
        path = self.L.active_segment.log.path
        self.L.close_handlers()
        os.truncate(path, os.path.getsize(path) - cut)
        self.log = self._open(0)
        del self.recs[-n:]
        self.leo = first
        self.last_plain = None
        self._after_reopen()
        self._set_hw(self.leo)

    # --- invariants -----------------------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        if self.log is None:
            return
        check_log_invariants(self.L)
        assert self.L.log_end_offset == self.leo
        assert self.L.high_watermark == self.hw
        assert self.L.first_unstable_offset == self._model_fuo()
        assert self.L.last_stable_offset == self._model_lso()

    @invariant()
    def producer_state_agrees(self) -> None:
        if self.log is None:
            return
        for p in self.producers.values():
            entry = self.L.producer_state.last_entry(p.pid)
            if not p.known:
                assert entry is None
                continue
            assert entry is not None, p.pid
            assert entry.producer_epoch == p.epoch
            assert entry.coordinator_epoch == p.coordinator_epoch
            assert entry.last_seq == (p.next_seq - 1 if p.window else NO_SEQUENCE)
            open_first = None if p.txn is None else self.txns[p.txn].first_offset
            assert entry.current_txn_first_offset == open_first

    @invariant()
    def txn_index_agrees(self) -> None:
        if self.log is None:
            return
        assert [t for s in self.L.segments for t in s.txn_index.all_aborted_txns()] == self.aborted

    @invariant()
    def read_committed_agrees(self) -> None:
        if self.log is None:
            return
        lso = self._model_lso()
        expected = [
            (r.offset, r.value)
            for r in self.recs
            if r.batch_last < lso and (r.txn is None or self.txns[r.txn].committed)
        ]
        for fetch_bytes in (1, 250, 1 << 20):
            got = [(r.offset, r.value) for r in iter_committed(self.L, 0, max_fetch_bytes=fetch_bytes)]
            assert got == expected, fetch_bytes


def _settings(max_examples: int, steps: int) -> settings:
    return settings(
        max_examples=max_examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


TestTxnStateMachine = TxnMachine.TestCase
TestTxnStateMachine.settings = _settings(40, 30)


@pytest.mark.slow
def test_txn_state_machine_long() -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(TxnMachine, settings=_settings(300, 60))
