"""OffsetCommit (key 8) and OffsetFetch (key 9): a group's committed offsets in ``__consumer_offsets``.

Versions: OffsetCommit 2-9 (v2-4 retention time, v6+ leader epoch, v7+ group instance id), OffsetFetch 1-9
(v2+ null topics = every committed partition and a top-level error, v5+ leader epoch, v7+ ``require_stable``
answered UNSTABLE_OFFSET_COMMIT for partitions with an open transactional commit, v8+ several groups per
request). Version 10 of both (topic ids, KIP-848) is not advertised. The group coordinator
(:class:`~kafkalog.server.groups.coordinator.GroupCoordinator`) validates and stores; a partition without a
committed offset answers offset -1, as Kafka does.
"""

from __future__ import annotations

from collections import defaultdict

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse

from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode
from kafkalog.server.groups.coordinator import CommitEntry
from kafkalog.server.groups.group import TopicPartitionKey
from kafkalog.server.groups.records import OffsetAndMetadata
from kafkalog.server.protocol import Message

__all__ = ["handle_offset_commit", "handle_offset_fetch"]

_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition
_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition
_FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
_FetchGroupTopic = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
_FetchGroupPartition = (
    OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
)


@api(ApiKey.OffsetCommit, max_version=9)
async def handle_offset_commit(ctx: RequestContext, request: Message) -> Message:
    """Store each partition's offset for the group (or report why not)."""
    version = ctx.api_version
    entries = [
        CommitEntry(
            str(topic.name),
            int(p.partition_index),
            int(p.committed_offset),
            int(p.committed_leader_epoch) if version >= 6 else -1,
            p.committed_metadata,
        )
        for topic in request.topics or []
        for p in topic.partitions or []
    ]
    groups = ctx.broker.groups
    if groups is None:
        codes = {(e.topic, e.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE for e in entries}
    else:
        retention = int(request.retention_time_ms) if 2 <= version <= 4 else -1
        codes = await groups.commit_offsets(
            request.group_id,
            int(request.generation_id_or_member_epoch),
            request.member_id or "",
            request.group_instance_id if version >= 7 else None,
            entries,
            retention,
        )
    by_topic: dict[str, list[Message]] = defaultdict(list)
    for e in entries:
        by_topic[e.topic].append(
            _CommitPartition(partition_index=e.partition, error_code=codes[(e.topic, e.partition)])
        )
    topics = [_CommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
    return ctx.response(throttle_time_ms=0, topics=topics)


async def _fetch(
    ctx: RequestContext, group_id: str, wanted: list[TopicPartitionKey] | None, require_stable: bool
) -> tuple[ErrorCode, list[tuple[TopicPartitionKey, OffsetAndMetadata | None, ErrorCode]]]:
    groups = ctx.broker.groups
    if groups is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return code, [(k, None, code) for k in wanted or ()]
    return await groups.fetch_offsets(group_id, wanted, require_stable)


def _wanted(topics: list[Message] | None) -> list[TopicPartitionKey] | None:
    if topics is None:
        return None
    return [(str(t.name), int(p)) for t in topics for p in t.partition_indexes or []]


@api(ApiKey.OffsetFetch, min_version=1, max_version=9)
async def handle_offset_fetch(ctx: RequestContext, request: Message) -> Message:
    """Each requested (or, for null topics, every) partition's committed offset."""
    version = ctx.api_version
    require_stable = bool(request.require_stable) if version >= 7 else False
    if version >= 8:
        out_groups = []
        for group in request.groups or []:
            code, rows = await _fetch(ctx, group.group_id, _wanted(group.topics), require_stable)
            by_topic: dict[str, list[Message]] = defaultdict(list)
            for (topic, partition), value, err in rows:
                by_topic[topic].append(
                    _FetchGroupPartition(
                        partition_index=partition,
                        committed_offset=-1 if value is None else value.offset,
                        committed_leader_epoch=-1 if value is None else value.leader_epoch,
                        metadata="" if value is None else value.metadata,
                        error_code=err,
                    )
                )
            out_groups.append(
                _FetchGroup(
                    group_id=group.group_id,
                    topics=[_FetchGroupTopic(name=n, partitions=p) for n, p in by_topic.items()],
                    error_code=code,
                )
            )
        return ctx.response(throttle_time_ms=0, groups=out_groups)
    wanted = _wanted(request.topics) if (version >= 2 or request.topics) else []
    code, rows = await _fetch(ctx, request.group_id, wanted, require_stable)
    topics: dict[str, list[Message]] = defaultdict(list)
    for (topic, partition), value, err in rows:
        if version < 2 and code is not ErrorCode.NONE:
            err = code
        topics[topic].append(
            _FetchPartition(
                partition_index=partition,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=err,
            )
        )
    return ctx.response(
        throttle_time_ms=0,
        topics=[_FetchTopic(name=n, partitions=p) for n, p in topics.items()],
        error_code=code,
    )
