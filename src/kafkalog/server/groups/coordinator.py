"""The classic group coordinator: joins, syncs, heartbeats, leaves, offset commits and fetches, on one node.

This node coordinates every group (FindCoordinator answers node 0). One :class:`GroupCoordinator` per
running server, attached to the :class:`~kafkalog.server.broker.Broker` at startup; its methods run on the
event loop and return plain results that the handlers of :mod:`kafkalog.server.apis.groups` and
:mod:`kafkalog.server.apis.offsets` encode.

Semantics follow Kafka's classic protocol (``GroupCoordinator`` / ``ClassicGroup``):

* JoinGroup: v4+ joins without a member id get MEMBER_ID_REQUIRED and a fresh id (a *pending* member until
  it joins with it); a new member or changed protocols move the group to PreparingRebalance; the join phase
  ends when every member has rejoined, or at the longest rebalance timeout (members that did not rejoin are
  removed); the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` (extended while
  new members arrive, bounded by the rebalance timeout). Completion bumps the generation, selects the
  protocol, and answers every waiting JoinGroup (the leader gets the members and their metadata).
* SyncGroup: the leader's assignment is stored (a GroupMetadata record) and handed to every member; the
  group becomes Stable.
* Static members (``group.instance.id``): a join with a known instance id and no member id replaces the old
  member (whose requests then get FENCED_INSTANCE_ID) and keeps its assignment; a static member does not
  leave on close, its session expires.
* Sessions: a member that neither heartbeats nor waits on a join/sync for ``session.timeout.ms`` is removed
  (a background task ticks every ``coordinator.tick.ms``), which rebalances the group.
* Offsets are stored in ``__consumer_offsets`` (partition ``hash(group) % n``) in Kafka's record formats
  and cached here; transactional offsets (TxnOffsetCommit) stay pending until the transaction coordinator
  writes the COMMIT or ABORT marker to the group's partition (:meth:`complete_transaction`). A commit of
  more than :data:`MANY_OFFSETS` partitions builds its records and batch on an I/O thread, then checks the
  group again and appends on the event loop (appends, and the cache, keep the loop's order); one whose
  records cannot fit a batch of ``__consumer_offsets`` is INVALID_COMMIT_OFFSET_SIZE before they are built.
  A large OffsetFetch reads its rows from a copy of the group's offsets on an I/O thread.
* At startup every partition of ``__consumer_offsets`` is read back (:mod:`~kafkalog.server.groups.loader`);
  until that is done, group requests get COORDINATOR_LOAD_IN_PROGRESS.

Not done: offset retention/expiry (``offsets.retention.minutes``), ``group.max.size``, KIP-848 groups.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from kafkalog.errors import KafkaError, RecordBatchTooLargeError, RecordTooLargeError
from kafkalog.log.names import TopicPartition
from kafkalog.records import MemoryRecords, MemoryRecordsBuilder
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.groups.group import (
    CommitEntry,
    Group,
    GroupState,
    GroupSummary,
    JoinResult,
    Member,
    SyncResult,
    TopicPartitionKey,
)
from kafkalog.server.groups.loader import LoadedGroup, load_groups, restore_groups
from kafkalog.server.groups.records import (
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetAndMetadata,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kafkalog.server.internal_topics import CONSUMER_OFFSETS, InternalTopic

if TYPE_CHECKING:
    from kafkalog.server.broker import Broker

__all__ = ["CommitEntry", "GroupCoordinator", "GroupSummary"]

_log = logging.getLogger("kafkalog.server.groups")
#: The largest expire timestamp an offset commit record can hold (a signed int64).
_INT64_MAX = 2**63 - 1


#: Above this many partitions an offset commit's records and batch are built, and an offset fetch's rows
#: read, on the I/O threads (the event loop keeps serving other connections meanwhile).
MANY_OFFSETS: Final = 1000
#: The fewest bytes one offset commit record takes in a batch besides its group id: record framing (7), key
#: (version, group, topic, partition: 10 with an empty topic), value (v3 with empty metadata: 24).
_MIN_COMMIT_RECORD_BYTES: Final = 41
_BATCH_OVERHEAD: Final = 61


def _now_ms() -> int:
    return int(time.time() * 1000)


def _build_batch(
    records: Iterable[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
) -> MemoryRecords | None:
    """One batch of ``records`` (None when there are none), transactional when ``producer_id`` >= 0."""
    transactional = producer_id >= 0
    builder = MemoryRecordsBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0 if transactional else -1,
        is_transactional=transactional,
    )
    now = _now_ms()
    for key, value in records:
        builder.append(now, key, value)
    return builder.build() if builder.num_records else None


def _store_error(exc: KafkaError) -> ErrorCode:
    """Kafka's mapping of a failed coordinator append to the code an OffsetCommit client sees."""
    if isinstance(exc, (RecordTooLargeError, RecordBatchTooLargeError)):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    code = error_code_for(exc)
    if code in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


def _offset_rows(
    offsets: dict[TopicPartitionKey, OffsetAndMetadata],
    pending: set[TopicPartitionKey],
    partitions: list[TopicPartitionKey] | None,
) -> list[tuple[TopicPartitionKey, OffsetAndMetadata | None, ErrorCode]]:
    """OffsetFetch rows: each of ``partitions`` once (every committed one when None), UNSTABLE_OFFSET_COMMIT
    for one in ``pending``."""
    keys = sorted(offsets) if partitions is None else dict.fromkeys(partitions)
    return [
        (key, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        if key in pending
        else (key, offsets.get(key), ErrorCode.NONE)
        for key in keys
    ]


def _validate_txn_commit(group: Group, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
    """Whether a TxnOffsetCommit may write to ``group`` (its member, when given, and generation)."""
    if group.state is GroupState.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.is_fenced(member_id, instance_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id and member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation >= 0 and generation != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


class GroupCoordinator:
    """Classic consumer groups and their offsets (see the module doc)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.topic = InternalTopic(broker.manager, CONSUMER_OFFSETS, self.config.offsets_topic_num_partitions)
        self.groups: dict[str, Group] = {}
        self.loading = True
        #: Set once ``__consumer_offsets`` is loaded (the transaction coordinator waits for it before it
        #: completes transactions found half-done, whose markers publish transactional offsets).
        self.loaded = asyncio.Event()
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self._topic_ready = False

    # --- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start loading ``__consumer_offsets`` and then the session/rebalance timer (on the loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kafkalog-group-coordinator")

    async def _run(self) -> None:
        try:
            loaded = await self.broker.run_blocking(self.load_all)
            self._restore(loaded)
        except Exception:  # a broken internal topic must not take the server down
            _log.exception("loading %s failed; groups start empty", CONSUMER_OFFSETS)
        self.loading = False
        self.loaded.set()
        tick = self.config.coordinator_tick_ms / 1000
        while not self._closed:
            await asyncio.sleep(tick)
            try:
                self.tick()
            except Exception:
                _log.exception("group coordinator tick failed")

    async def close(self) -> None:
        """Stop the timer and answer every waiting join/sync with NOT_COORDINATOR."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for group in self.groups.values():
            for member in group.members.values():
                self._finish_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                self._finish_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__consumer_offsets`` if needed (FindCoordinator does, as Kafka's does)."""
        if self._topic_ready:
            return ErrorCode.NONE
        try:
            await self.broker.run_blocking(self.topic.ensure)
        except KafkaError as exc:
            _log.warning("cannot create %s: %s", CONSUMER_OFFSETS, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        self._topic_ready = True
        return ErrorCode.NONE

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id``."""
        return self.topic.partition_for(group_id)

    async def _check(self, group_id: str | None) -> ErrorCode:
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return await self.ensure_topic()

    # --- persistence ---------------------------------------------------------------------------------------
    def _append(
        self,
        group_id: str,
        records: Iterable[tuple[bytes, bytes | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> None:
        batch = _build_batch(records, producer_id, producer_epoch)
        if batch is not None:
            self._append_batch(group_id, batch)

    def _append_batch(self, group_id: str, batch: MemoryRecords) -> None:
        partition = self.partition_for(group_id)
        self.topic.append(partition, batch)
        self.broker.notify(TopicPartition(CONSUMER_OFFSETS, partition))

    def _group_value(self, group: Group, assignments: dict[str, bytes] | None = None) -> bytes:
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                (assignments or {}).get(m.member_id, m.assignment),
            )
            for m in group.members.values()
        )
        value = GroupMetadataValue(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.state_timestamp_ms,
            members,
        )
        return encode_group_metadata_value(value)

    def _store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        try:
            self._append(
                group.group_id,
                [(encode_group_metadata_key(group.group_id), self._group_value(group, assignments))],
            )
        except KafkaError as exc:
            _log.warning("cannot store group %s: %s", group.group_id, exc)
            return _store_error(exc)
        return ErrorCode.NONE

    # --- loading --------------------------------------------------------------------------------------------
    def load_all(self) -> dict[str, LoadedGroup]:
        """Read every partition of ``__consumer_offsets`` (blocking; runs on an I/O thread)."""
        return load_groups(self.topic)

    def _restore(self, loaded: dict[str, LoadedGroup]) -> None:
        self.groups.update(restore_groups(loaded, _now_ms()))
        if self.groups:
            _log.info("loaded %d groups from %s", len(self.groups), CONSUMER_OFFSETS)

    # --- join -----------------------------------------------------------------------------------------------
    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        """JoinGroup (see the module doc); waits for the rebalance when the member has to."""
        code = await self._check(group_id)
        if code is not ErrorCode.NONE:
            return JoinResult(code, member_id)
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = Group(group_id, _now_ms())
        if group.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        spec = Member(
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        if not member_id:
            outcome = self._join_unknown(group, spec, require_known_member_id)
        else:
            outcome = self._join_known(group, spec)
        if isinstance(outcome, JoinResult):
            return outcome
        return await outcome

    def _join_unknown(
        self, group: Group, spec: Member, require_known_member_id: bool
    ) -> JoinResult | asyncio.Future[JoinResult]:
        spec.member_id = f"{spec.client_id}-{uuid.uuid4()}"
        old_id = group.static_member_id(spec.group_instance_id)
        if old_id is not None:
            return self._replace_static_member(group, old_id, spec)
        if spec.group_instance_id is None and require_known_member_id:
            group.pending_members[spec.member_id] = time.monotonic() + spec.session_timeout_ms / 1000
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, spec.member_id)
        return self._add_member_and_rebalance(group, spec)

    def _join_known(self, group: Group, spec: Member) -> JoinResult | asyncio.Future[JoinResult]:
        if spec.member_id in group.pending_members:
            return self._add_member_and_rebalance(group, spec)
        if group.is_fenced(spec.member_id, spec.group_instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, spec.member_id)
        member = group.members.get(spec.member_id)
        if member is None or group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, spec.member_id)
        member.heartbeat_deadline = time.monotonic() + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, spec)
        if group.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(spec.protocols):
                return self._join_result(group, member)
            return self._update_member_and_rebalance(group, member, spec)
        # Stable
        if group.is_leader(member.member_id) or not member.matches(spec.protocols):
            return self._update_member_and_rebalance(group, member, spec)
        return self._join_result(group, member)

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if group.is_leader(member.member_id):
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )

    def _add_member_and_rebalance(self, group: Group, spec: Member) -> asyncio.Future[JoinResult]:
        spec.is_new = True
        spec.heartbeat_deadline = time.monotonic() + spec.session_timeout_ms / 1000
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        spec.join_future = future
        group.add(spec)
        if group.state is GroupState.PREPARING_REBALANCE and group.initial_join:
            group.new_member_added = True
        self._maybe_prepare_rebalance(group)
        self._maybe_complete_join(group)
        return future

    def _update_member_and_rebalance(
        self, group: Group, member: Member, spec: Member
    ) -> asyncio.Future[JoinResult]:
        member.protocols = spec.protocols
        member.rebalance_timeout_ms = spec.rebalance_timeout_ms
        member.session_timeout_ms = spec.session_timeout_ms
        self._finish_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_future = future
        self._maybe_prepare_rebalance(group)
        self._maybe_complete_join(group)
        return future

    def _replace_static_member(
        self, group: Group, old_id: str, spec: Member
    ) -> JoinResult | asyncio.Future[JoinResult]:
        old = group.members[old_id]
        self._finish_join(old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._finish_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        was_leader = group.is_leader(old_id)
        same = old.matches(spec.protocols)
        group.remove(old_id)
        spec.assignment = old.assignment
        spec.heartbeat_deadline = time.monotonic() + spec.session_timeout_ms / 1000
        group.add(spec)
        if was_leader:
            group.leader_id = spec.member_id
        if group.state is GroupState.STABLE and same and not was_leader:
            self._store_group(group)
            return self._join_result(group, spec)
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        spec.join_future = future
        self._maybe_prepare_rebalance(group)
        self._maybe_complete_join(group)
        return future

    # --- rebalance ------------------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                member.assignment = b""
                self._finish_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        initial = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, _now_ms())
        now = time.monotonic()
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            group.initial_join = True
            group.new_member_added = False
            group.initial_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay / 1000
        else:
            group.initial_join = False
            group.join_deadline = now + group.max_rebalance_timeout_ms() / 1000

    def _maybe_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_join
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for member in list(group.members.values()):
            if not member.awaiting_join:
                self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.join_deadline = None
        group.initial_join = False
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        group.generation_id += 1
        if group.is_empty():
            group.protocol_name = None
            group.transition(GroupState.EMPTY, _now_ms())
            self._store_group(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, _now_ms())
        now = time.monotonic()
        for member in group.members.values():
            self._finish_join(member, self._join_result(group, member))
            member.join_future = None
            member.is_new = False
            member.heartbeat_deadline = now + member.session_timeout_ms / 1000

    def _remove_member(self, group: Group, member: Member, code: ErrorCode) -> None:
        group.remove(member.member_id)
        self._finish_join(member, JoinResult(code, member.member_id))
        self._finish_sync(member, SyncResult(code))

    def _members_removed(self, group: Group) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    @staticmethod
    def _finish_join(member: Member, result: JoinResult) -> None:
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(result)

    @staticmethod
    def _finish_sync(member: Member, result: SyncResult) -> None:
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(result)

    def tick(self) -> None:
        """Expire sessions and pending members; end join phases that are due."""
        now = time.monotonic()
        for group in list(self.groups.values()):
            expired_pending = [mid for mid, deadline in group.pending_members.items() if now > deadline]
            for mid in expired_pending:
                del group.pending_members[mid]
            expired = [
                m
                for m in group.members.values()
                if not m.awaiting_join and not m.awaiting_sync and now > m.heartbeat_deadline
            ]
            for member in expired:
                _log.info("group %s: member %s session expired", group.group_id, member.member_id)
                self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
            if expired:
                self._members_removed(group)
            elif expired_pending:
                self._maybe_complete_join(group)
            deadline = group.join_deadline
            if group.state is GroupState.PREPARING_REBALANCE and deadline is not None and now >= deadline:
                if group.initial_join and group.new_member_added and group.initial_remaining_ms > 0:
                    delay = min(self.config.group_initial_rebalance_delay_ms, group.initial_remaining_ms)
                    group.initial_remaining_ms -= delay
                    group.new_member_added = False
                    group.join_deadline = now + delay / 1000
                else:
                    self._complete_join(group)

    # --- sync, heartbeat, leave -------------------------------------------------------------------------------
    def _validate_member(
        self, group: Group | None, member_id: str, instance_id: str | None, generation: int
    ) -> tuple[ErrorCode, Member | None]:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, None
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION, member
        return ErrorCode.NONE, member

    async def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        """SyncGroup: the leader's assignment for everyone; followers wait for it."""
        code = await self._check(group_id)
        if code is not ErrorCode.NONE:
            return SyncResult(code)
        group = self.groups.get(group_id)
        code, member = self._validate_member(group, member_id, instance_id, generation)
        if code is not ErrorCode.NONE or member is None or group is None:
            return SyncResult(code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member.heartbeat_deadline = time.monotonic() + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        self._finish_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            stored = self._store_group(group, full)
            if stored is not ErrorCode.NONE:
                for m in group.members.values():
                    self._finish_sync(m, SyncResult(stored))
                self._prepare_rebalance(group)
            else:
                for mid, m in group.members.items():
                    m.assignment = full[mid]
                    self._finish_sync(
                        m, SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type, group.protocol_name)
                    )
                group.transition(GroupState.STABLE, _now_ms())
        return await future

    async def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        """Heartbeat: keeps the session; REBALANCE_IN_PROGRESS tells the member to rejoin."""
        code = await self._check(group_id)
        if code is not ErrorCode.NONE:
            return code
        group = self.groups.get(group_id)
        code, member = self._validate_member(group, member_id, instance_id, generation)
        if code is not ErrorCode.NONE or member is None or group is None:
            return code
        member.heartbeat_deadline = time.monotonic() + member.session_timeout_ms / 1000
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup of (member id, instance id) pairs: the group error and one error per member."""
        code = await self._check(group_id)
        group = self.groups.get(group_id)
        if code is ErrorCode.NONE and group is None:
            code = ErrorCode.UNKNOWN_MEMBER_ID
        elif code is ErrorCode.NONE and group is not None and group.state is GroupState.DEAD:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if code is not ErrorCode.NONE or group is None:
            return code, [code for _ in leaving]
        results = []
        removed = False
        for member_id, instance_id in leaving:
            if instance_id is not None:
                current = group.static_member_id(instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                results.append(ErrorCode.NONE)
                self._maybe_complete_join(group)
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
            removed = True
            results.append(ErrorCode.NONE)
        if removed:
            self._members_removed(group)
        return ErrorCode.NONE, results

    # --- offsets --------------------------------------------------------------------------------------------
    def _validate_commit(
        self, group: Group, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE  # a commit without group management (assign(), admin tools)
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.heartbeat_deadline = time.monotonic() + member.session_timeout_ms / 1000
        return ErrorCode.NONE

    def _offset_values(
        self, entries: list[CommitEntry], expire_ms: int
    ) -> tuple[dict[TopicPartitionKey, ErrorCode], dict[TopicPartitionKey, OffsetAndMetadata]]:
        now = _now_ms()
        codes: dict[TopicPartitionKey, ErrorCode] = {}
        values: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for e in entries:
            key = (e.topic, e.partition)
            metadata = e.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            # OffsetCommit v2-4 retention: saturates at the int64 the record stores (Java's sum would wrap)
            expire = min(now + expire_ms, _INT64_MAX) if expire_ms >= 0 else -1
            values[key] = OffsetAndMetadata(e.offset, e.leader_epoch, metadata, now, expire)
            codes[key] = ErrorCode.NONE
        return codes, values

    def _commit_batch(
        self,
        group_id: str,
        entries: list[CommitEntry],
        expire_ms: int,
        max_batch_bytes: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[
        dict[TopicPartitionKey, ErrorCode], dict[TopicPartitionKey, OffsetAndMetadata], MemoryRecords | None
    ]:
        """An offset commit's codes, values and batch (no group state read: it may run on an I/O thread). A
        commit whose batch could not fit ``max_batch_bytes`` is INVALID_COMMIT_OFFSET_SIZE (what its append
        would answer, Kafka's answer) before any record is built."""
        codes, values = self._offset_values(entries, expire_ms)
        least = _BATCH_OVERHEAD + len(values) * (_MIN_COMMIT_RECORD_BYTES + len(group_id.encode("utf-8")))
        if values and least > max_batch_bytes:
            return (
                {k: (ErrorCode.INVALID_COMMIT_OFFSET_SIZE if k in values else c) for k, c in codes.items()},
                {},
                None,
            )
        records = [
            (encode_offset_commit_key(group_id, t, p), encode_offset_commit_value(v))
            for (t, p), v in values.items()
        ]
        return codes, values, _build_batch(records, producer_id, producer_epoch)

    async def _prepare_commit(
        self,
        group_id: str,
        entries: list[CommitEntry],
        expire_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[
        dict[TopicPartitionKey, ErrorCode], dict[TopicPartitionKey, OffsetAndMetadata], MemoryRecords | None
    ]:
        """:meth:`_commit_batch`, on an I/O thread for more than :data:`MANY_OFFSETS` entries."""
        config = self.broker.manager.topic_config(CONSUMER_OFFSETS)
        limit = min(config.max_message_bytes, config.segment_bytes)
        args = (group_id, entries, expire_ms, limit, producer_id, producer_epoch)
        if len(entries) > MANY_OFFSETS:
            return await self.broker.run_blocking(self._commit_batch, *args)
        return self._commit_batch(*args)

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        entries: list[CommitEntry],
        retention_ms: int = -1,
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """OffsetCommit: each partition's error code."""
        code = await self._check(group_id)
        group = self.groups.get(group_id)
        if code is ErrorCode.NONE and group is None:
            if generation >= 0:
                code = ErrorCode.ILLEGAL_GENERATION
            else:
                group = self.groups[group_id] = Group(group_id, _now_ms())
        if code is ErrorCode.NONE and group is not None:
            code = self._validate_commit(group, generation, member_id, instance_id)
        if code is not ErrorCode.NONE or group is None:
            return {(e.topic, e.partition): code for e in entries}
        codes, values, batch = await self._prepare_commit(group_id, entries, retention_ms)
        if self.groups.get(group_id) is not group:  # changed while the batch was built
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = self._validate_commit(group, generation, member_id, instance_id)
        if code is not ErrorCode.NONE:
            return {(e.topic, e.partition): code for e in entries}
        try:
            if batch is not None:
                self._append_batch(group_id, batch)
        except KafkaError as exc:
            failed = _store_error(exc)
            return {k: (failed if k in values else c) for k, c in codes.items()}
        group.offsets.update(values)
        return codes

    async def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartitionKey] | None, require_stable: bool
    ) -> tuple[ErrorCode, list[tuple[TopicPartitionKey, OffsetAndMetadata | None, ErrorCode]]]:
        """OffsetFetch of one group: the group error and (partition, committed offset or None, error)."""
        code = await self._check(group_id)
        if code is not ErrorCode.NONE:
            return code, [(k, None, code) for k in partitions or ()]
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        pending: set[TopicPartitionKey] = set()
        if require_stable and group is not None:
            pending = {k for txn in group.pending_txn_offsets.values() for k in txn}
        if len(offsets) > MANY_OFFSETS or (partitions is not None and len(partitions) > MANY_OFFSETS):
            # read from copies on an I/O thread: the loop may change the group meanwhile
            rows = await self.broker.run_blocking(_offset_rows, dict(offsets), pending, partitions)
        else:
            rows = _offset_rows(offsets, pending, partitions)
        return ErrorCode.NONE, rows

    async def txn_offset_commit(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation: int,
        member_id: str,
        instance_id: str | None,
        entries: list[CommitEntry],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """TxnOffsetCommit: offsets written in the producer's transaction, visible once it commits."""
        code = await self._check(group_id)
        if code is ErrorCode.NONE and (producer_id < 0 or producer_epoch < 0):
            code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        group = self.groups.get(group_id)
        if code is ErrorCode.NONE and group is None:
            group = self.groups[group_id] = Group(group_id, _now_ms())
        if code is ErrorCode.NONE and group is not None:
            code = _validate_txn_commit(group, generation, member_id, instance_id)
        if code is not ErrorCode.NONE or group is None:
            return {(e.topic, e.partition): code for e in entries}
        codes, values, batch = await self._prepare_commit(group_id, entries, -1, producer_id, producer_epoch)
        if self.groups.get(group_id) is not group:  # changed while the batch was built
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = _validate_txn_commit(group, generation, member_id, instance_id)
        if code is not ErrorCode.NONE:
            return {(e.topic, e.partition): code for e in entries}
        try:
            if batch is not None:
                self._append_batch(group_id, batch)
        except KafkaError as exc:
            failed = error_code_for(exc)
            if failed is ErrorCode.KAFKA_STORAGE_ERROR:
                failed = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return {k: (failed if k in values else c) for k, c in codes.items()}
        group.pending_txn_offsets.setdefault(producer_id, {}).update(values)
        return codes

    def complete_transaction(self, producer_id: int, partition: int, committed: bool) -> None:
        """The transaction coordinator wrote a marker of ``producer_id`` to ``partition``: its offsets there
        become committed offsets, or are dropped."""
        for group in self.groups.values():
            if producer_id in group.pending_txn_offsets and self.partition_for(group.group_id) == partition:
                offsets = group.pending_txn_offsets.pop(producer_id)
                if committed:
                    group.offsets.update(offsets)

    # --- admin ----------------------------------------------------------------------------------------------
    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary | None]:
        """DescribeGroups of one group (None: no such group)."""
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, None
        stable = group.state is GroupState.STABLE
        members = [
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        summary = GroupSummary(
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )
        return ErrorCode.NONE, summary

    def list_groups(self) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """ListGroups: (group id, protocol type, state) of every live group."""
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, [
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD
        ]

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group: only an empty group; its offsets and metadata get tombstones."""
        code = await self._check(group_id)
        if code is not ErrorCode.NONE:
            return code
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.state is not GroupState.EMPTY or group.pending_members:
            return ErrorCode.NON_EMPTY_GROUP
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group_id, t, p), None) for (t, p) in group.offsets
        ]
        records.append((encode_group_metadata_key(group_id), None))
        try:
            self._append(group_id, records)
        except KafkaError as exc:
            return _store_error(exc)
        group.transition(GroupState.DEAD, _now_ms())
        del self.groups[group_id]
        return ErrorCode.NONE
