"""RemoteLogSegmentState transitions and RemoteLogMetadataCache (Kafka's RemoteLogSegmentStateTest,
RemoteLogMetadataCacheTest and RemoteLogLeaderEpochState semantics), plus hypothesis runs over record sequences."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalog.errors import InvalidRecordError, RemoteResourceNotFoundError
from kafkalog.remote import (
    RemoteLogMetadataCache,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    TopicIdPartition,
    Uuid,
    deserialize,
    serialize,
)

S = RemoteLogSegmentState
TP = TopicIdPartition(Uuid(5, 6), "foo", 0)

VALID = {
    (None, S.COPY_SEGMENT_STARTED),
    (S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED),
    (S.COPY_SEGMENT_STARTED, S.DELETE_SEGMENT_STARTED),
    (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED),
    (S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED),
} | {(s, s) for s in S}


def test_segment_state_transitions_are_kafkas() -> None:
    for src in (None, *S):
        for target in S:
            assert S.is_valid_transition(src, target) == ((src, target) in VALID), (src, target)
    assert [s.value for s in S] == [0, 1, 2, 3]


def test_partition_delete_state_transitions_are_kafkas() -> None:
    P = RemotePartitionDeleteState
    valid = {(None, P.DELETE_PARTITION_MARKED), (P.DELETE_PARTITION_MARKED, P.DELETE_PARTITION_STARTED)}
    valid |= {(P.DELETE_PARTITION_STARTED, P.DELETE_PARTITION_FINISHED)} | {(p, p) for p in P}
    for src in (None, *P):
        for target in P:
            assert P.is_valid_transition(src, target) == ((src, target) in valid), (src, target)


def _segment(n: int, start: int, end: int, epochs: tuple[tuple[int, int], ...]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TP, Uuid(0, 100 + n)), start, end, end, 0, 0, 1, epochs
    )


def _update(
    segment: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(segment.remote_log_segment_id, 1, None, state, 1)


def test_copy_finished_serves_lookups_and_started_does_not() -> None:
    cache = RemoteLogMetadataCache()
    seg = _segment(0, 0, 99, ((0, 0), (1, 50)))
    cache.add_copy_in_progress_segment(seg)
    assert cache.remote_log_segment_metadata(0, 10) is None
    assert cache.highest_offset_for_epoch(0) is None
    assert [m.remote_log_segment_id for m in cache.list_remote_log_segments(0)] == [seg.remote_log_segment_id]
    cache.update_remote_log_segment_metadata(_update(seg, S.COPY_SEGMENT_FINISHED))
    found = cache.remote_log_segment_metadata(0, 49)
    assert found is not None and found.state is S.COPY_SEGMENT_FINISHED and found.broker_id == 1
    assert cache.remote_log_segment_metadata(0, 50) is None  # epoch 0 ends at 49 in this segment
    assert cache.remote_log_segment_metadata(1, 99) == found
    assert cache.remote_log_segment_metadata(1, 100) is None
    assert (cache.highest_offset_for_epoch(0), cache.highest_offset_for_epoch(1)) == (49, 99)
    cache.update_remote_log_segment_metadata(_update(seg, S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(1, 60) is None
    assert [m.state for m in cache.list_remote_log_segments()] == [S.DELETE_SEGMENT_STARTED]
    assert cache.highest_offset_for_epoch(1) == 99  # Kafka never lowers it
    cache.update_remote_log_segment_metadata(_update(seg, S.DELETE_SEGMENT_FINISHED))
    assert list(cache.list_remote_log_segments()) == [] and list(cache.list_remote_log_segments(1)) == []


def test_duplicate_segment_of_a_new_leader_supersedes() -> None:
    """Kafka's case-1: L0 uploaded S0 0-100, L1 uploaded S1 0-200 for the same epoch: S0 is unreferenced."""
    cache = RemoteLogMetadataCache()
    s0, s1 = _segment(0, 0, 100, ((0, 0),)), _segment(1, 0, 200, ((0, 0),))
    for seg in (s0, s1):
        cache.add_copy_in_progress_segment(seg)
        cache.update_remote_log_segment_metadata(_update(seg, S.COPY_SEGMENT_FINISHED))
    hit = cache.remote_log_segment_metadata(0, 50)
    assert hit is not None and hit.remote_log_segment_id == s1.remote_log_segment_id
    assert [m.end_offset for m in cache.list_remote_log_segments(0)] == [200, 100]
    assert cache.highest_offset_for_epoch(0) == 200


def test_overlapping_segments_of_a_new_leader() -> None:
    """Kafka's case-2: S0 10-90 then S1 5-100: offset 95 (and 50) come from S1."""
    cache = RemoteLogMetadataCache()
    s0, s1 = _segment(0, 10, 90, ((0, 10),)), _segment(1, 5, 100, ((0, 5),))
    for seg in (s0, s1):
        cache.add_copy_in_progress_segment(seg)
        cache.update_remote_log_segment_metadata(_update(seg, S.COPY_SEGMENT_FINISHED))
    for offset in (50, 95):
        hit = cache.remote_log_segment_metadata(0, offset)
        assert hit is not None and hit.remote_log_segment_id == s1.remote_log_segment_id


def test_invalid_transitions_are_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    cache = RemoteLogMetadataCache()
    seg = _segment(0, 0, 9, ((0, 0),))
    cache.add_copy_in_progress_segment(seg)
    with caplog.at_level(logging.ERROR, logger="kafkalog.remote.cache"):
        cache.update_remote_log_segment_metadata(_update(seg, S.DELETE_SEGMENT_FINISHED))
    assert "can not be transitioned to target state: DELETE_SEGMENT_FINISHED" in caplog.text
    assert [m.state for m in cache.list_remote_log_segments()] == [S.COPY_SEGMENT_STARTED]
    cache.update_remote_log_segment_metadata(_update(seg, S.COPY_SEGMENT_FINISHED))
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="kafkalog.remote.cache"):
        cache.add_copy_in_progress_segment(seg)  # FINISHED -> STARTED
    assert "Dropping the event" in caplog.text
    assert cache.remote_log_segment_metadata(0, 5) is not None


def test_misuse_raises_kafkas_errors() -> None:
    cache = RemoteLogMetadataCache()
    seg = _segment(0, 0, 9, ((0, 0),))
    with pytest.raises(InvalidRecordError, match="should have state as COPY_SEGMENT_STARTED"):
        cache.add_copy_in_progress_segment(
            _segment(0, 0, 9, ((0, 0),)).create_with_updates(_update(seg, S.COPY_SEGMENT_FINISHED))
        )
    cache.add_copy_in_progress_segment(seg)
    with pytest.raises(InvalidRecordError, match="with state COPY_SEGMENT_STARTED can not be updated"):
        cache.update_remote_log_segment_metadata(_update(seg, S.COPY_SEGMENT_STARTED))
    other = _segment(1, 10, 19, ((0, 10),))
    cache.update_remote_log_segment_metadata(
        _update(other, S.COPY_SEGMENT_FINISHED)
    )  # dropped: not initialized
    assert len(list(cache.list_remote_log_segments())) == 1
    cache.mark_initialized()
    assert cache.is_initialized()
    with pytest.raises(RemoteResourceNotFoundError, match="No remote log segment metadata found"):
        cache.update_remote_log_segment_metadata(_update(other, S.COPY_SEGMENT_FINISHED))


# --- hypothesis: random record sequences over disjoint segments ---------------------------------------------

N_SEGMENTS = 6


def _disjoint(n: int) -> RemoteLogSegmentMetadata:
    """Segment n covers offsets 10n .. 10n+9; epoch n // 2, and a second epoch from 10n+5 for odd n."""
    epochs = ((n // 2, 10 * n),) + (((n // 2 + 10, 10 * n + 5),) if n % 2 else ())
    return _segment(n, 10 * n, 10 * n + 9, epochs)


_events = st.lists(st.tuples(st.integers(0, N_SEGMENTS - 1), st.sampled_from(S)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_events, st.booleans())
def test_replay_matches_the_state_machine(
    events: list[tuple[int, RemoteLogSegmentState]], via_bytes: bool
) -> None:
    """Whatever the order, the cache agrees with a model applying only Kafka's valid transitions: the listed
    segments and their states, every lookup (found iff COPY_SEGMENT_FINISHED), and the epochs' highest offsets."""
    cache = RemoteLogMetadataCache()
    states: dict[int, RemoteLogSegmentState] = {}
    highest: dict[int, int] = {}
    for n, target in events:
        seg = _disjoint(n)
        record: RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate
        record = seg if target is S.COPY_SEGMENT_STARTED else _update(seg, target)
        if via_bytes:
            decoded = deserialize(serialize(record))
            assert isinstance(decoded, (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate))
            record = decoded
        src = states.get(n)
        if src is None and target is not S.COPY_SEGMENT_STARTED:
            cache.replay(record)  # not initialized: an update of an unknown segment is dropped
            continue
        cache.replay(record)
        if not S.is_valid_transition(src, target):
            continue
        if target is S.DELETE_SEGMENT_FINISHED:
            del states[n]
        else:
            states[n] = target
        if target is S.COPY_SEGMENT_FINISHED:
            for i, (epoch, _) in enumerate(seg.segment_leader_epochs):
                nxt = (
                    seg.segment_leader_epochs[i + 1][1] - 1
                    if i + 1 < len(seg.segment_leader_epochs)
                    else seg.end_offset
                )
                highest[epoch] = max(highest.get(epoch, nxt), nxt)

    listed = {
        m.remote_log_segment_id.id.least_significant_bits - 100: m.state
        for m in cache.list_remote_log_segments()
    }
    assert listed == states
    for n in range(N_SEGMENTS):
        seg = _disjoint(n)
        for epoch, first in seg.segment_leader_epochs:
            hit = cache.remote_log_segment_metadata(epoch, first)
            if states.get(n) is S.COPY_SEGMENT_FINISHED:
                assert hit is not None and hit.remote_log_segment_id == seg.remote_log_segment_id
            else:
                assert hit is None or hit.remote_log_segment_id != seg.remote_log_segment_id
            assert cache.highest_offset_for_epoch(epoch) == highest.get(epoch)
        by_epoch = {
            m.remote_log_segment_id
            for e, _ in seg.segment_leader_epochs
            for m in cache.list_remote_log_segments(e)
        }
        assert (seg.remote_log_segment_id in by_epoch) == (n in states)
