"""The record formats of ``__consumer_offsets``: Kafka's OffsetCommit and GroupMetadata keys and values.

Every record key starts with an int16 *key version* that says what the record is: 0 or 1 an offset commit
(``OffsetCommitKey``: group, topic, partition), 2 group metadata (``GroupMetadataKey``: group). Values start
with their own int16 version. kafkalog writes what Kafka 3.x writes with a current metadata version:

* offset commit key version **1**, value ``OffsetCommitValue`` version **3** (offset, leader epoch,
  metadata, commit timestamp), or version 1 when an expire timestamp is set (OffsetCommit v2-4 retention);
* group metadata key version **2**, value ``GroupMetadataValue`` version **3** (protocol type, generation,
  protocol, leader, current state timestamp, members with instance id, client id/host, timeouts,
  subscription and assignment bytes).

A tombstone (null value) deletes an offset or a group. Decoding accepts every version Kafka defines (values
v0-4, v4 flexible with compact fields and tagged sections); unknown key versions decode to None so a loader
skips records of newer coordinators (KIP-848 consumer groups, share groups) it does not serve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kafkalog.server.wire import Reader, RecordFormatError, Writer

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "GroupKey",
    "GroupMetadataValue",
    "MemberMetadataValue",
    "OffsetAndMetadata",
    "OffsetKey",
    "RecordFormatError",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "encode_group_metadata_key",
    "encode_group_metadata_value",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
]

OFFSET_COMMIT_KEY_VERSION: Final = 1
GROUP_METADATA_KEY_VERSION: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3
GROUP_METADATA_VALUE_VERSION: Final = 3


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """An offset commit record's key."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A group metadata record's key."""

    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (``OffsetCommitValue``)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """One member of a ``GroupMetadataValue``."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's stored state (``GroupMetadataValue``)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadataValue, ...] = field(default_factory=tuple)


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """``OffsetCommitKey`` with key version 1."""
    return Writer().int16(OFFSET_COMMIT_KEY_VERSION).string(group).string(topic).int32(partition).to_bytes()


def encode_group_metadata_key(group: str) -> bytes:
    """``GroupMetadataKey`` (key version 2)."""
    return Writer().int16(GROUP_METADATA_KEY_VERSION).string(group).to_bytes()


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """``OffsetCommitValue`` v3, or v1 when an expire timestamp is set (what Kafka writes)."""
    w = Writer()
    if value.expire_timestamp >= 0:
        w.int16(1).int64(value.offset).string(value.metadata).int64(value.commit_timestamp)
        return w.int64(value.expire_timestamp).to_bytes()
    w.int16(OFFSET_COMMIT_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return w.string(value.metadata).int64(value.commit_timestamp).to_bytes()


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    """``GroupMetadataValue`` v3."""
    w = Writer().int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type).int32(value.generation).string(value.protocol).string(value.leader)
    w.int64(value.current_state_timestamp).int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.int32(m.rebalance_timeout).int32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return w.to_bytes()


def decode_key(data: bytes | None) -> OffsetKey | GroupKey | None:
    """The key of a ``__consumer_offsets`` record, or None for a record type this coordinator does not know."""
    if data is None:
        raise RecordFormatError("__consumer_offsets record without a key")
    r = Reader(data)
    version = r.int16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.int32()
        if group is None or topic is None:
            raise RecordFormatError("null group or topic in an offset commit key")
        return OffsetKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise RecordFormatError("null group in a group metadata key")
        return GroupKey(group)
    return None


def decode_offset_commit_value(data: bytes) -> OffsetAndMetadata:
    """An ``OffsetCommitValue`` of any version (0-4)."""
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string(flexible) or ""
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else -1
    if flexible:
        r.tagged_fields()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    """A ``GroupMetadataValue`` of any version (0-4)."""
    r = Reader(data)
    version = r.int16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    flex = version >= 4
    protocol_type = r.string(flex) or ""
    generation = r.int32()
    protocol = r.string(flex)
    leader = r.string(flex)
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_length(flex), 0)):
        member_id = r.string(flex) or ""
        instance_id = r.string(flex) if version >= 3 else None
        client_id = r.string(flex) or ""
        client_host = r.string(flex) or ""
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_(flex) or b""
        assignment = r.bytes_(flex) or b""
        if flex:
            r.tagged_fields()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadataValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    if flex:
        r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))
