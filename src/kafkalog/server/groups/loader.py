"""Reading ``__consumer_offsets`` back at startup: offsets, group metadata and open transactional offsets.

:func:`load_groups` reads every batch of every partition (blocking; the coordinator runs it on an I/O
thread) and replays it as Kafka's ``GroupMetadataManager`` loads a partition: the last record of a key wins,
a null value (tombstone) deletes it, offsets written in a transaction (transactional batches) are held per
producer id until that producer's COMMIT marker publishes them or its ABORT marker drops them; those still
open at the end stay pending. A record that does not decode is logged and skipped (a newer coordinator's
record type is skipped silently). :func:`restore_groups` turns the result into :class:`Group` objects: a
group with members is Stable with its generation, protocol, leader and assignments (members that do not
come back expire after their session timeout), otherwise Empty.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kafkalog.records import ControlRecordType
from kafkalog.server.groups.group import Group, GroupState, Member, TopicPartitionKey
from kafkalog.server.groups.records import (
    GroupKey,
    GroupMetadataValue,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from kafkalog.server.internal_topics import InternalTopic
from kafkalog.server.wire import RecordFormatError

__all__ = ["LoadedGroup", "load_groups", "restore_groups"]

_log = logging.getLogger("kafkalog.server.groups")


@dataclass
class LoadedGroup:
    """A group's state as read back from ``__consumer_offsets``."""

    metadata: GroupMetadataValue | None = None
    offsets: dict[TopicPartitionKey, OffsetAndMetadata] = field(default_factory=dict)
    pending: dict[int, dict[TopicPartitionKey, OffsetAndMetadata]] = field(default_factory=dict)


def _apply(out: dict[str, LoadedGroup], key: OffsetKey, value: bytes | None) -> None:
    loaded = out.setdefault(key.group, LoadedGroup())
    if value is None:
        loaded.offsets.pop((key.topic, key.partition), None)
        return
    try:
        loaded.offsets[(key.topic, key.partition)] = decode_offset_commit_value(value)
    except RecordFormatError as exc:
        _log.warning("skipping an unreadable offset of group %s: %s", key.group, exc)


def _load_partition(topic: InternalTopic, partition: int, out: dict[str, LoadedGroup]) -> None:
    pending: dict[int, list[tuple[OffsetKey, bytes | None]]] = {}
    for batch in topic.batches(partition):
        pid = batch.producer_id
        if batch.is_control_batch:
            for record in batch:
                try:
                    kind = ControlRecordType.parse(record.key)
                except Exception:  # an unknown control type: nothing to do
                    continue
                entries = pending.pop(pid, [])
                if kind is ControlRecordType.COMMIT:
                    for okey, value in entries:
                        _apply(out, okey, value)
            continue
        for record in batch:
            try:
                key = decode_key(record.key)
                if isinstance(key, OffsetKey):
                    if batch.is_transactional:
                        pending.setdefault(pid, []).append((key, record.value))
                    else:
                        _apply(out, key, record.value)
                elif isinstance(key, GroupKey):
                    loaded = out.setdefault(key.group, LoadedGroup())
                    value = record.value
                    loaded.metadata = None if value is None else decode_group_metadata_value(value)
            except RecordFormatError as exc:
                _log.warning("skipping an unreadable %s-%d record: %s", topic.name, partition, exc)
    for pid, entries in pending.items():
        for okey, value in entries:
            if value is None:
                continue
            try:
                decoded = decode_offset_commit_value(value)
            except RecordFormatError as exc:
                _log.warning("skipping an unreadable offset of group %s: %s", okey.group, exc)
                continue
            loaded = out.setdefault(okey.group, LoadedGroup())
            loaded.pending.setdefault(pid, {})[(okey.topic, okey.partition)] = decoded


def load_groups(topic: InternalTopic) -> dict[str, LoadedGroup]:
    """Every group's state in ``topic`` (empty when the topic does not exist yet)."""
    out: dict[str, LoadedGroup] = {}
    if not topic.exists():
        return out
    for partition in range(topic.partitions):
        _load_partition(topic, partition, out)
    return out


def restore_groups(loaded: dict[str, LoadedGroup], now_ms: int) -> dict[str, Group]:
    """The in-memory groups for the loaded state (see the module doc)."""
    now = time.monotonic()
    groups: dict[str, Group] = {}
    for group_id, state in loaded.items():
        if state.metadata is None and not state.offsets and not state.pending:
            continue
        group = Group(group_id, now_ms)
        group.offsets = dict(state.offsets)
        group.pending_txn_offsets = {pid: dict(o) for pid, o in state.pending.items()}
        md = state.metadata
        if md is not None:
            group.generation_id = md.generation
            group.protocol_type = md.protocol_type or None
            if md.members and md.protocol:
                group.protocol_name = md.protocol
                for m in md.members:
                    member = Member(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.rebalance_timeout,
                        m.session_timeout,
                        md.protocol_type,
                        [(md.protocol, m.subscription)],
                        assignment=m.assignment,
                        heartbeat_deadline=now + m.session_timeout / 1000,
                    )
                    group.add(member)
                if md.leader in group.members:
                    group.leader_id = md.leader
                group.state = GroupState.STABLE
        groups[group_id] = group
    return groups
