"""One classic consumer group in memory: its state machine, members, generation, protocol and offsets.

Owned here (pure state, no I/O and no timers; :mod:`kafkalog.server.groups.coordinator` drives it):

* :class:`GroupState` and the transitions Kafka's ``ClassicGroup`` allows (``Empty -> PreparingRebalance ->
  CompletingRebalance -> Stable``, back to ``PreparingRebalance`` from any live state, ``Dead`` from all);
  an illegal transition is a coordinator bug (:class:`IllegalGroupStateError`).
* :class:`Member`: a member's identity (member id, optional ``group.instance.id``), timeouts, protocols with
  their metadata, assignment, and the futures of a JoinGroup / SyncGroup waiting for the rebalance.
* :class:`Group`: members and pending members (v4+ joins that were given a member id but have not joined
  with it yet), static members (instance id -> member id), leader, generation, selected protocol (the one
  every member supports with the most first-preference votes, as Kafka's ``selectProtocol``), committed
  offsets and transactional offsets not yet committed or aborted (by producer id).
* The value types the coordinator and the API handlers exchange: :class:`CommitEntry` (one partition of an
  OffsetCommit / TxnOffsetCommit) and :class:`GroupSummary` (what DescribeGroups reports).
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from kafkalog.errors import KafkaError
from kafkalog.server.errors import ErrorCode
from kafkalog.server.groups.records import OffsetAndMetadata

__all__ = [
    "CommitEntry",
    "Group",
    "GroupState",
    "GroupSummary",
    "IllegalGroupStateError",
    "JoinResult",
    "Member",
    "SyncResult",
    "TopicPartitionKey",
]

TopicPartitionKey = tuple[str, int]


class IllegalGroupStateError(KafkaError):
    """A transition the group state machine does not allow (a coordinator bug, never client input)."""


class GroupState(enum.Enum):
    """Kafka's classic group states (``ClassicGroupState``), valued by the names DescribeGroups reports."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: Final[dict[GroupState, frozenset[GroupState]]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass
class JoinResult:
    """What a JoinGroup answers."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    #: (member id, group instance id, metadata) for the leader; empty for followers.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    """What a SyncGroup answers."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class Member:
    """A group member (see the module doc)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    #: Monotonic time (seconds) after which the member's session has expired.
    heartbeat_deadline: float = 0.0
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for ``protocol`` (empty if it does not support it)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def protocol_names(self) -> list[str]:
        """The member's protocols in preference order."""
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` (names and metadata, in order) are the member's current ones."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise IllegalGroupStateError(f"member {self.member_id} supports none of {sorted(candidates)}")

    @property
    def awaiting_join(self) -> bool:
        """Whether a JoinGroup of this member waits for the rebalance to complete."""
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        """Whether a SyncGroup of this member waits for the leader's assignment."""
        return self.sync_future is not None and not self.sync_future.done()


class Group:
    """A classic group (see the module doc)."""

    def __init__(self, group_id: str, now_ms: int = -1) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        #: member id -> monotonic deadline for the join with that id (JoinGroup v4+ MEMBER_ID_REQUIRED).
        self.pending_members: dict[str, float] = {}
        self.static_members: dict[str, str] = {}
        self.offsets: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        self.pending_txn_offsets: dict[int, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        #: PreparingRebalance: when the join phase ends (monotonic seconds); initial-delay bookkeeping.
        self.join_deadline: float | None = None
        self.initial_join = False
        self.initial_remaining_ms = 0
        self.new_member_added = False

    # --- state ----------------------------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        """Whether the group is in one of ``states``."""
        return self.state in states

    def transition(self, target: GroupState, now_ms: int = -1) -> None:
        """Move to ``target`` (:class:`IllegalGroupStateError` if the state machine does not allow it)."""
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupStateError(
                f"group {self.group_id}: cannot go from {self.state.value} to {target.value}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # --- members --------------------------------------------------------------------------------------------
    def is_empty(self) -> bool:
        """No member (pending members do not count)."""
        return not self.members

    def has_member(self, member_id: str) -> bool:
        """Whether ``member_id`` is a member."""
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        """Whether ``member_id`` leads the group."""
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        """Add a member (the first one becomes leader; its protocol type becomes the group's)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member; a new leader is chosen if it led."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        """The member id of a static member."""
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a static member's id is not the current one of its instance (FENCED_INSTANCE_ID)."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def all_members_joined(self) -> bool:
        """Every member has a JoinGroup waiting, and no pending member is still to come."""
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (how long a rebalance may wait)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ------------------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a member with ``protocol_type`` and protocol ``names`` can join (Kafka's check)."""
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-preference votes (ties: first seen)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupStateError(f"group {self.group_id} has no protocol all members support")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def has_pending_txn_offset(self, key: TopicPartitionKey) -> bool:
        """Whether a transaction has an offset for ``key`` that is neither committed nor aborted yet."""
        return any(key in offsets for offsets in self.pending_txn_offsets.values())


@dataclass(frozen=True, slots=True)
class CommitEntry:
    """One partition of an OffsetCommit / TxnOffsetCommit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass
class GroupSummary:
    """What DescribeGroups reports of a group."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    #: (member id, instance id, client id, client host, metadata, assignment)
    members: list[tuple[str, str | None, str, str, bytes, bytes]] = field(default_factory=list)
