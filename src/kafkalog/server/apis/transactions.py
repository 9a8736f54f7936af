"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit.

Versions: AddPartitionsToTxn 0-3 (the client forms; v4+ is broker-to-broker verification), AddOffsetsToTxn
0-4, EndTxn 0-4 and TxnOffsetCommit 0-4 (v5 of EndTxn/TxnOffsetCommit are transactions V2, KIP-890 part 2,
not advertised). A fenced producer gets PRODUCER_FENCED from the versions that know it (v2+ of the first
three, TxnOffsetCommit v3+ through the log's epoch check), INVALID_PRODUCER_EPOCH before. The transactional
InitProducerId is in :mod:`kafkalog.server.apis.init_producer_id`; the semantics live in
:class:`~kafkalog.server.txn.coordinator.TransactionCoordinator` and, for TxnOffsetCommit, in the group
coordinator.
"""

from __future__ import annotations

from collections import defaultdict

from kafka.protocol.api_key import ApiKey

from kafkalog.server.apis.offsets import commit_entries, off_loop, partition_count
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode
from kafkalog.server.internal_topics import CONSUMER_OFFSETS
from kafkalog.server.protocol import Message, message_classes

__all__ = [
    "handle_add_offsets_to_txn",
    "handle_add_partitions_to_txn",
    "handle_end_txn",
    "handle_txn_offset_commit",
]

_AddPartitionsResponse = message_classes()[ApiKey.AddPartitionsToTxn][1]
_TopicResult = _AddPartitionsResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _AddPartitionsResponse.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
_TxnCommitResponse = message_classes()[ApiKey.TxnOffsetCommit][1]
_CommitTopic = _TxnCommitResponse.TxnOffsetCommitResponseTopic
_CommitPartition = _TxnCommitResponse.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition


def _fenced(ctx: RequestContext, since: int) -> ErrorCode:
    return ErrorCode.PRODUCER_FENCED if ctx.api_version >= since else ErrorCode.INVALID_PRODUCER_EPOCH


@api(ApiKey.AddPartitionsToTxn, max_version=3)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Message) -> Message:
    """Add partitions to the producer's transaction (each distinct partition once)."""
    topics = request.v3_and_below_topics
    partitions = await off_loop(ctx, partition_count(topics), _txn_partitions, topics)
    txns = ctx.broker.transactions
    if txns is None:
        codes = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        codes = await txns.add_partitions(
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            partitions,
            _fenced(ctx, 2),
        )
    results = await off_loop(ctx, len(codes), _add_results, codes)
    return ctx.response(throttle_time_ms=0, results_by_topic_v3_and_below=results)


def _txn_partitions(topics: list[Message] | None) -> list[tuple[str, int]]:
    """The distinct partitions of AddPartitionsToTxn's topics."""
    return list(dict.fromkeys((str(t.name), int(p)) for t in topics or [] for p in t.partitions or []))


def _add_results(codes: dict[tuple[str, int], ErrorCode]) -> list[Message]:
    by_topic: dict[str, list[Message]] = defaultdict(list)
    for (topic, partition), code in codes.items():
        by_topic[topic].append(_PartitionResult(partition_index=partition, partition_error_code=code))
    return [_TopicResult(name=name, results_by_partition=parts) for name, parts in by_topic.items()]


@api(ApiKey.AddOffsetsToTxn, max_version=4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Message) -> Message:
    """Add the group's ``__consumer_offsets`` partition to the producer's transaction."""
    txns, groups = ctx.broker.transactions, ctx.broker.groups
    if txns is None or groups is None:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not request.group_id:
        return ctx.response(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    code = await groups.ensure_topic()
    if code is ErrorCode.NONE:
        partition = (CONSUMER_OFFSETS, groups.partition_for(request.group_id))
        codes = await txns.add_partitions(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            [partition],
            _fenced(ctx, 2),
        )
        code = codes[partition]
    return ctx.response(throttle_time_ms=0, error_code=code)


@api(ApiKey.EndTxn, max_version=4)
async def handle_end_txn(ctx: RequestContext, request: Message) -> Message:
    """Commit or abort the producer's transaction (markers on every partition)."""
    txns = ctx.broker.transactions
    if txns is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code = await txns.end_txn(
            request.transactional_id,
            int(request.producer_id),
            int(request.producer_epoch),
            bool(request.committed),
            _fenced(ctx, 2),
        )
    return ctx.response(throttle_time_ms=0, error_code=code)


@api(ApiKey.TxnOffsetCommit, max_version=4)
async def handle_txn_offset_commit(ctx: RequestContext, request: Message) -> Message:
    """Offsets committed inside the producer's transaction (visible to OffsetFetch once it commits)."""
    version = ctx.api_version
    count = partition_count(request.topics)
    entries = await off_loop(ctx, count, commit_entries, request.topics, version >= 2)
    groups = ctx.broker.groups
    if groups is None:
        codes = {(e.topic, e.partition): ErrorCode.COORDINATOR_NOT_AVAILABLE for e in entries}
    else:
        codes = await groups.txn_offset_commit(
            request.group_id,
            int(request.producer_id),
            int(request.producer_epoch),
            int(request.generation_id) if version >= 3 else -1,
            (request.member_id or "") if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            entries,
        )
    topics = await off_loop(ctx, len(codes), _txn_commit_topics, codes, _fenced(ctx, 3))
    return ctx.response(throttle_time_ms=0, topics=topics)


def _txn_commit_topics(codes: dict[tuple[str, int], ErrorCode], fenced: ErrorCode) -> list[Message]:
    """TxnOffsetCommit's topics (a fenced producer's code as its version names it)."""
    by_topic: dict[str, list[Message]] = defaultdict(list)
    for (topic, partition), code in codes.items():
        if code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED):
            code = fenced
        by_topic[topic].append(_CommitPartition(partition_index=partition, error_code=code))
    return [_CommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
