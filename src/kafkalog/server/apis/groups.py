"""Classic consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups,
DescribeGroups, DeleteGroups.

Versions: FindCoordinator 0-6 (v4+ batched ``coordinator_keys``; share-group keys, type 2, are
INVALID_REQUEST), JoinGroup 0-9 (v4+ MEMBER_ID_REQUIRED on a first join, v5+ static members), SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5 (v3+ batched members), ListGroups 0-5 (v4 states filter, v5 types filter),
DescribeGroups 0-6 (v6: GROUP_ID_NOT_FOUND for an unknown group; a group named more than once is described
once, as a description carries every member's metadata), DeleteGroups 0-2 (a group named more than once is
deleted and answered once, as Kafka's set of group ids). The semantics live in
:class:`~kafkalog.server.groups.coordinator.GroupCoordinator`; this module only decodes and encodes. This
node is the coordinator of every group and transactional id (FindCoordinator creates the internal topic
on first use, as Kafka does). ConsumerGroupHeartbeat (KIP-848) is not served, so clients use the classic
protocol.
"""

from __future__ import annotations

import asyncio

from kafka.protocol.api_key import ApiKey

from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode
from kafkalog.server.groups.coordinator import GroupCoordinator
from kafkalog.server.protocol import Message, message_classes

__all__ = [
    "handle_delete_groups",
    "handle_describe_groups",
    "handle_find_coordinator",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_sync_group",
]

FindCoordinatorResponse = message_classes()[ApiKey.FindCoordinator][1]
JoinGroupResponse = message_classes()[ApiKey.JoinGroup][1]
LeaveGroupResponse = message_classes()[ApiKey.LeaveGroup][1]
ListGroupsResponse = message_classes()[ApiKey.ListGroups][1]
DescribeGroupsResponse = message_classes()[ApiKey.DescribeGroups][1]
DeleteGroupsResponse = message_classes()[ApiKey.DeleteGroups][1]

_GROUP_KEY = 0
_TXN_KEY = 1
#: "not requested" (Kafka: Integer.MIN_VALUE); kafka-python encodes a None bitfield as that value.
_NO_AUTHORIZED_OPERATIONS = None


def _groups(ctx: RequestContext) -> GroupCoordinator | None:
    return ctx.broker.groups


def client_host(ctx: RequestContext) -> str:
    """The member's host as Kafka reports it (``/<address>``)."""
    return f"/{ctx.client_host}"


# --- FindCoordinator -----------------------------------------------------------------------------------------
async def _coordinator_error(ctx: RequestContext, key: str | None, key_type: int) -> ErrorCode:
    broker = ctx.broker
    if key_type == _GROUP_KEY:
        groups = broker.groups
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if groups is None else await groups.ensure_topic()
    if key_type == _TXN_KEY:
        if not key:
            return ErrorCode.INVALID_REQUEST
        txns = broker.transactions
        return ErrorCode.COORDINATOR_NOT_AVAILABLE if txns is None else await txns.ensure_topic()
    return ErrorCode.INVALID_REQUEST


@api(ApiKey.FindCoordinator)
async def handle_find_coordinator(ctx: RequestContext, request: Message) -> Message:
    """This node for every group and transactional id."""
    broker = ctx.broker
    key_type = int(request.key_type) if ctx.api_version >= 1 else _GROUP_KEY
    host, port, node = broker.advertised_host, broker.port, broker.node_id
    if ctx.api_version < 4:
        code = await _coordinator_error(ctx, request.key, key_type)
        ok = code is ErrorCode.NONE
        return ctx.response(
            throttle_time_ms=0,
            error_code=code,
            error_message=None if ok else code.name,
            node_id=node if ok else -1,
            host=host if ok else "",
            port=port if ok else -1,
        )
    coordinators = []
    for key in request.coordinator_keys or []:
        code = await _coordinator_error(ctx, key, key_type)
        ok = code is ErrorCode.NONE
        coordinators.append(
            FindCoordinatorResponse.Coordinator(
                key=key,
                node_id=node if ok else -1,
                host=host if ok else "",
                port=port if ok else -1,
                error_code=code,
                error_message=None if ok else code.name,
            )
        )
    return ctx.response(throttle_time_ms=0, coordinators=coordinators)


# --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ----------------------------------------------------------
def _join_error(ctx: RequestContext, code: ErrorCode, member_id: str) -> Message:
    return ctx.response(
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if ctx.api_version >= 7 else "",
        leader="",
        skip_assignment=False,
        member_id=member_id,
        members=[],
    )


@api(ApiKey.JoinGroup)
async def handle_join_group(ctx: RequestContext, request: Message) -> Message:
    """Join (or rejoin) a group; answered when the rebalance completes (or at once with an error)."""
    groups = _groups(ctx)
    member_id = request.member_id or ""
    if groups is None:
        return _join_error(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
    version = ctx.api_version
    protocols = [(str(p.name), bytes(p.metadata or b"")) for p in request.protocols or []]
    result = await groups.join_group(
        request.group_id,
        member_id,
        request.group_instance_id if version >= 5 else None,
        ctx.client_id or "",
        client_host(ctx),
        int(request.rebalance_timeout_ms) if version >= 1 else -1,
        int(request.session_timeout_ms),
        request.protocol_type or "",
        protocols,
        require_known_member_id=version >= 4,
    )
    if result.error is not ErrorCode.NONE:
        return _join_error(ctx, result.error, result.member_id)
    members = [
        JoinGroupResponse.JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=data)
        for mid, iid, data in result.members
    ]
    return ctx.response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader_id,
        skip_assignment=False,
        member_id=result.member_id,
        members=members,
    )


@api(ApiKey.SyncGroup)
async def handle_sync_group(ctx: RequestContext, request: Message) -> Message:
    """The leader's assignment in, each member's assignment out."""
    groups = _groups(ctx)
    version = ctx.api_version
    if groups is None:
        return ctx.response(
            throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, assignment=b""
        )
    assignments = {str(a.member_id): bytes(a.assignment or b"") for a in request.assignments or []}
    result = await groups.sync_group(
        request.group_id,
        int(request.generation_id),
        request.member_id or "",
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        assignments,
    )
    ok = result.error is ErrorCode.NONE
    return ctx.response(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type if ok else None,
        protocol_name=result.protocol_name if ok else None,
        assignment=result.assignment if ok else b"",
    )


@api(ApiKey.Heartbeat)
async def handle_heartbeat(ctx: RequestContext, request: Message) -> Message:
    """Keep a member's session alive."""
    groups = _groups(ctx)
    if groups is None:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    code = await groups.heartbeat(
        request.group_id,
        int(request.generation_id),
        request.member_id or "",
        request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return ctx.response(throttle_time_ms=0, error_code=code)


@api(ApiKey.LeaveGroup)
async def handle_leave_group(ctx: RequestContext, request: Message) -> Message:
    """Members leave (v3+: a batch, by member id or group instance id)."""
    groups = _groups(ctx)
    version = ctx.api_version
    if version >= 3:
        leaving = [(m.member_id or "", m.group_instance_id) for m in request.members or []]
    else:
        leaving = [(request.member_id or "", None)]
    if groups is None:
        code, results = (
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(leaving),
        )
    else:
        code, results = await groups.leave_group(request.group_id, leaving)
    if version < 3:
        return ctx.response(throttle_time_ms=0, error_code=code if code is not ErrorCode.NONE else results[0])
    members = [
        LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=err)
        for (mid, iid), err in zip(leaving, results, strict=True)
    ]
    return ctx.response(
        throttle_time_ms=0, error_code=code, members=members if code is ErrorCode.NONE else []
    )


# --- ListGroups / DescribeGroups / DeleteGroups ---------------------------------------------------------------
@api(ApiKey.ListGroups)
async def handle_list_groups(ctx: RequestContext, request: Message) -> Message:
    """Every group, filtered by state (v4+) and type (v5+: only ``classic`` groups exist here)."""
    groups = _groups(ctx)
    if groups is None:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, groups=[])
    code, listed = groups.list_groups()
    version = ctx.api_version
    states = {s.lower() for s in (request.states_filter or [])} if version >= 4 else set()
    types = {t.lower() for t in (request.types_filter or [])} if version >= 5 else set()
    out = []
    for group_id, protocol_type, state in listed:
        if states and state.lower() not in states:
            continue
        if types and "classic" not in types:
            continue
        out.append(
            ListGroupsResponse.ListedGroup(
                group_id=group_id, protocol_type=protocol_type, group_state=state, group_type="classic"
            )
        )
    return ctx.response(throttle_time_ms=0, error_code=code, groups=out)


@api(ApiKey.DescribeGroups)
async def handle_describe_groups(ctx: RequestContext, request: Message) -> Message:
    """State, protocol and members of each requested group."""
    groups = _groups(ctx)
    version = ctx.api_version
    described = []
    _Group = DescribeGroupsResponse.DescribedGroup
    # a group named twice is described once: a description carries every member's metadata and assignment
    for group_id in dict.fromkeys(request.groups or []):
        if groups is None:
            code, summary = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        else:
            code, summary = groups.describe_group(group_id)
        if summary is None:
            if code is ErrorCode.NONE and version >= 6:
                code = ErrorCode.GROUP_ID_NOT_FOUND
            described.append(
                _Group(
                    error_code=code,
                    error_message=None if code is ErrorCode.NONE else code.name,
                    group_id=group_id,
                    group_state="Dead",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                    authorized_operations=_NO_AUTHORIZED_OPERATIONS,
                )
            )
            continue
        members = [
            _Group.DescribedGroupMember(
                member_id=mid,
                group_instance_id=iid,
                client_id=cid,
                client_host=host,
                member_metadata=metadata,
                member_assignment=assignment,
            )
            for mid, iid, cid, host, metadata, assignment in summary.members
        ]
        described.append(
            _Group(
                error_code=ErrorCode.NONE,
                error_message=None,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=members,
                authorized_operations=_NO_AUTHORIZED_OPERATIONS,
            )
        )
    return ctx.response(throttle_time_ms=0, groups=described)


@api(ApiKey.DeleteGroups)
async def handle_delete_groups(ctx: RequestContext, request: Message) -> Message:
    """Delete empty groups (their offsets and metadata get tombstones in ``__consumer_offsets``)."""
    groups = _groups(ctx)
    results = []
    # Kafka deletes the request's groups as a set; the loop lets other connections in every 1000 groups
    for i, group_id in enumerate(dict.fromkeys(request.groups_names or [])):
        if i % 1000 == 999:
            await asyncio.sleep(0)
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if groups is None else await groups.delete_group(group_id)
        results.append(DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=code))
    return ctx.response(throttle_time_ms=0, results=results)
