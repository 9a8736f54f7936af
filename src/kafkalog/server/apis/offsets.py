"""OffsetCommit (key 8) and OffsetFetch (key 9): a group's committed offsets in ``__consumer_offsets``.

Versions: OffsetCommit 2-9 (v2-4 retention time, v6+ leader epoch, v7+ group instance id), OffsetFetch 1-9
(v2+ null topics = every committed partition and a top-level error, v5+ leader epoch, v7+ ``require_stable``
answered UNSTABLE_OFFSET_COMMIT for partitions with an open transactional commit, v8+ several groups per
request). Version 10 of both (topic ids, KIP-848) is not advertised. The group coordinator
(:class:`~kafkalog.server.groups.coordinator.GroupCoordinator`) validates and stores; a partition without a
committed offset answers offset -1, as Kafka does.

Work per request: a partition named more than once is one entry (as Kafka's request map collapses it: a
commit keeps the last offset given, in the place of the first), answered once. A request of more than
:data:`~kafkalog.server.groups.coordinator.MANY_OFFSETS` partitions has its partition list read, its
records built (the coordinator) and its response built on the I/O threads, so the event loop keeps serving
other clients; a commit whose records could not fit one ``__consumer_offsets`` batch is
INVALID_COMMIT_OFFSET_SIZE before they are built (the answer its append would get).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitResponse, OffsetFetchResponse

from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode
from kafkalog.server.groups.coordinator import MANY_OFFSETS, CommitEntry
from kafkalog.server.groups.group import TopicPartitionKey
from kafkalog.server.groups.records import OffsetAndMetadata
from kafkalog.server.protocol import Message

__all__ = ["commit_entries", "handle_offset_commit", "handle_offset_fetch", "off_loop", "partition_count"]

T = TypeVar("T")

_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition
_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition
_FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
_FetchGroupTopic = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
_FetchGroupPartition = (
    OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
)


def partition_count(topics: list[Message] | None, field: str = "partitions") -> int:
    """How many partition entries ``topics`` (a request's topic array) holds in its ``field`` arrays."""
    return sum(len(getattr(t, field) or ()) for t in topics or ())


async def off_loop(ctx: RequestContext, count: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, on an I/O thread when ``count`` partitions are more than ``MANY_OFFSETS``."""
    if count > MANY_OFFSETS:
        return await ctx.broker.run_blocking(fn, *args)
    return fn(*args)


def commit_entries(topics: list[Message] | None, epochs: bool) -> list[CommitEntry]:
    """A commit request's entries, one per distinct partition (the last given, in the first's place)."""
    entries: dict[TopicPartitionKey, CommitEntry] = {}
    for topic in topics or []:
        name = str(topic.name)
        for p in topic.partitions or []:
            partition = int(p.partition_index)
            entries[(name, partition)] = CommitEntry(
                name,
                partition,
                int(p.committed_offset),
                int(p.committed_leader_epoch) if epochs else -1,
                p.committed_metadata,
            )
    return list(entries.values())


def _commit_topics(codes: dict[TopicPartitionKey, ErrorCode]) -> list[Message]:
    by_topic: dict[str, list[Message]] = defaultdict(list)
    for (topic, partition), code in codes.items():
        by_topic[topic].append(_CommitPartition(partition_index=partition, error_code=code))
    return [_CommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()]


@api(ApiKey.OffsetCommit, max_version=9)
async def handle_offset_commit(ctx: RequestContext, request: Message) -> Message:
    """Store each partition's offset for the group (or report why not)."""
    version = ctx.api_version
    count = partition_count(request.topics)
    entries = await off_loop(ctx, count, commit_entries, request.topics, version >= 6)
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
    topics = await off_loop(ctx, len(codes), _commit_topics, codes)
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
    """The distinct partitions an OffsetFetch names (None: every committed one)."""
    if topics is None:
        return None
    return list(dict.fromkeys((str(t.name), int(p)) for t in topics for p in t.partition_indexes or []))


_Rows = list[tuple[TopicPartitionKey, OffsetAndMetadata | None, ErrorCode]]


def _topics_of(rows: _Rows, partition: Any, topic: Any, code: ErrorCode | None = None) -> list[Message]:
    """OffsetFetch rows grouped by topic, as ``topic`` messages of ``partition`` messages (the v1-7 and v8+
    schemas differ only in their classes); ``code`` (v0-1 with a group error) replaces every partition's."""
    by_topic: dict[str, list[Message]] = defaultdict(list)
    for (name, index), value, err in rows:
        by_topic[name].append(
            partition(
                partition_index=index,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=err if code is None else code,
            )
        )
    return [topic(name=n, partitions=p) for n, p in by_topic.items()]


def _group_topics(rows: _Rows) -> list[Message]:
    return _topics_of(rows, _FetchGroupPartition, _FetchGroupTopic)


def _fetch_topics(rows: _Rows, code: ErrorCode | None) -> list[Message]:
    """v1-7 topics; ``code`` (v0-1 with a group error) replaces every partition's."""
    return _topics_of(rows, _FetchPartition, _FetchTopic, code)


@api(ApiKey.OffsetFetch, min_version=1, max_version=9)
async def handle_offset_fetch(ctx: RequestContext, request: Message) -> Message:
    """Each requested (or, for null topics, every) partition's committed offset."""
    version = ctx.api_version
    require_stable = bool(request.require_stable) if version >= 7 else False
    if version >= 8:
        out_groups = []
        for group in request.groups or []:
            count = partition_count(group.topics, "partition_indexes")
            wanted = await off_loop(ctx, count, _wanted, group.topics)
            code, rows = await _fetch(ctx, group.group_id, wanted, require_stable)
            topics = await off_loop(ctx, len(rows), _group_topics, rows)
            out_groups.append(_FetchGroup(group_id=group.group_id, topics=topics, error_code=code))
        return ctx.response(throttle_time_ms=0, groups=out_groups)
    count = partition_count(request.topics, "partition_indexes")
    wanted = await off_loop(ctx, count, _wanted, request.topics) if (version >= 2 or request.topics) else []
    code, rows = await _fetch(ctx, request.group_id, wanted, require_stable)
    replace = code if version < 2 and code is not ErrorCode.NONE else None
    topics = await off_loop(ctx, len(rows), _fetch_topics, rows, replace)
    return ctx.response(throttle_time_ms=0, topics=topics, error_code=code)
