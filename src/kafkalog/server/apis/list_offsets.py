"""ListOffsets (key 2): an offset per partition for a timestamp or one of the special timestamps.

Versions 1-11. Kafka's rules (``Partition.fetchOffsetForTimestamp``), with the bound of the request's isolation
level (high watermark for ``read_uncommitted``, last stable offset for ``read_committed``):

* ``-1`` LATEST: the bound itself (timestamp -1);
* ``-2`` EARLIEST: the log start offset, over both tiers (KIP-405); ``-4`` EARLIEST_LOCAL: the local log
  start offset (the same without tiered storage); neither is bounded;
* ``-5`` LATEST_TIERED: the highest offset copied to the remote tier (-1 when none, or without tiering);
  ``-6`` EARLIEST_PENDING_UPLOAD: the first offset not yet copied (-1 without tiering);
* ``-3`` MAX_TIMESTAMP and a timestamp ``>= 0``: the log's lookup over both tiers (first offset whose
  timestamp is at or after the target; the record with the largest timestamp), kept only if it is below the
  bound, else offset -1 / timestamp -1 (Kafka's "not found").

The special timestamps are the Log's (``Log.fetch_offset_by_timestamp``, Kafka's ``UnifiedLog``); this handler
adds the bound. A lookup that may read the remote tier (``-3`` or a timestamp, of a log with remote segments)
runs as Kafka's ``asyncOffsetRead``: on the remote reader pool (``RemoteLogManager.async_offset_read``; a full
queue is that partition's UNKNOWN_SERVER_ERROR at once), awaited on the event loop at most
``remote.list.offsets.request.timeout.ms`` (Kafka's ``DelayedRemoteListOffsets``: a lookup not done by then is
REQUEST_TIMED_OUT, retriable); never on the event loop nor an I/O thread.

The answer carries the leader epoch of the found batch (-1 when unknown). Unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION; a ``current_leader_epoch`` that does not match is fenced as in Fetch. A partition
named more than once is INVALID_REQUEST in every one of its entries, and not looked up (Kafka's
``duplicatePartitions``). A request of more than :data:`MANY_PARTITIONS` partitions is answered on the I/O
threads (200,000 partitions held the event loop 1.9 s).
"""

from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsResponse

from kafkalog.errors import KafkaError, RejectedExecutionError
from kafkalog.log.log import Log
from kafkalog.server.apis.fetch import leader_epoch_error
from kafkalog.server.broker import Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message

__all__ = [
    "EARLIEST",
    "EARLIEST_LOCAL",
    "EARLIEST_PENDING_UPLOAD",
    "LATEST",
    "LATEST_TIERED",
    "MAX_TIMESTAMP",
    "handle_list_offsets",
    "lookup",
]

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

_TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
_PartitionResponse = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
#: Above this many partition entries a ListOffsets is answered on the I/O threads.
MANY_PARTITIONS: Final = 1000


def lookup(log: Log, timestamp: int, read_committed: bool) -> tuple[int, int, int]:
    """``(timestamp, offset, leader_epoch)`` for a ListOffsets target timestamp (see the module doc)."""
    bound = log.last_stable_offset if read_committed else log.high_watermark
    if timestamp == LATEST:
        epoch = log.latest_epoch
        return -1, bound, -1 if epoch is None else epoch
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    epoch = -1 if found.leader_epoch is None else found.leader_epoch
    if timestamp not in (EARLIEST, EARLIEST_LOCAL) and found.offset >= bound:
        return -1, -1, -1
    return found.timestamp, found.offset, epoch


def _may_read_remote(log: Log, timestamp: int) -> bool:
    """Whether the lookup of ``timestamp`` may read ``log``'s remote tier (a timestamp search, remote data)."""
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        return False
    return log.remote_log_enabled and log.highest_offset_in_remote_storage >= 0


#: A lookup left for the remote reader pool: its partition's answer list, position, and the lookup.
_RemoteLookup = tuple[list[Message], int, Callable[[], tuple[int, int, int]]]


@api(ApiKey.ListOffsets)
async def handle_list_offsets(ctx: RequestContext, request: Message) -> Message:
    """The offset of each requested partition for its timestamp."""
    committed = ctx.api_version >= 2 and int(request.isolation_level) == 1
    many = sum(len(t.partitions) for t in request.topics) > MANY_PARTITIONS
    rlm = ctx.broker.remote_log_manager
    remote: list[_RemoteLookup] | None = [] if rlm is not None else None
    if many:
        topics = await ctx.broker.run_blocking(_answer, ctx.broker, request, committed, remote)
    else:
        topics = _answer(ctx.broker, request, committed, remote)
    if rlm is not None and remote:
        submitted: list[tuple[list[Message], int, Future[tuple[int, int, int]]]] = []
        for partitions, i, task in remote:
            try:
                submitted.append((partitions, i, rlm.async_offset_read(task)))
            except RejectedExecutionError as exc:
                partitions[i] = _error(int(partitions[i].partition_index), error_code_for(exc))
        if submitted:
            waits = [asyncio.wrap_future(future) for _, _, future in submitted]
            await ctx.broker.wait_remote(waits, rlm.config.remote_list_offsets_request_timeout_ms / 1000)
            if not ctx.broker.closing and not all(wait.done() for wait in waits):
                rlm.delayed_remote_list_offsets_expires.mark()
            for (partitions, i, future), wait in zip(submitted, waits, strict=True):
                index = int(partitions[i].partition_index)
                if not wait.done() or future.cancelled():  # DelayedRemoteListOffsets expired (or closing)
                    wait.cancel()
                    partitions[i] = _error(index, ErrorCode.REQUEST_TIMED_OUT)
                elif (error := future.exception()) is not None:
                    partitions[i] = _error(index, error_code_for(error))
                else:
                    ts, offset, epoch = future.result()
                    partitions[i] = _PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.NONE,
                        timestamp=ts,
                        offset=offset,
                        leader_epoch=epoch,
                    )
    return ctx.response(throttle_time_ms=0, topics=topics)


def _error(index: int, code: ErrorCode) -> Message:
    return _PartitionResponse(
        partition_index=index, error_code=code, timestamp=-1, offset=-1, leader_epoch=-1
    )


def _answer(
    broker: Broker, request: Message, committed: bool, remote: list[_RemoteLookup] | None = None
) -> list[Message]:
    """Each topic's answer (thread-safe: more than :data:`MANY_PARTITIONS` are answered on an I/O thread).

    With ``remote`` (a list), a lookup that may read the remote tier is not run: its entry is a placeholder and
    the lookup is appended to ``remote``."""
    named = collections.Counter(
        (topic.name, int(p.partition_index)) for topic in request.topics for p in topic.partitions
    )
    topics = []
    for topic in request.topics:
        partitions: list[Message] = []
        for p in topic.partitions:
            index = int(p.partition_index)
            try:
                if named[(topic.name, index)] > 1:
                    raise _Refused(ErrorCode.INVALID_REQUEST)  # Kafka: every entry of a repeated partition
                log = broker.get_log(topic.name, index)
                fenced = leader_epoch_error(int(p.current_leader_epoch), broker.leader_epoch(log))
                if fenced is not None:
                    raise _Refused(fenced)
                timestamp = int(p.timestamp)
                if remote is not None and _may_read_remote(log, timestamp):
                    remote.append(
                        (partitions, len(partitions), functools.partial(lookup, log, timestamp, committed))
                    )
                    partitions.append(_error(index, ErrorCode.REQUEST_TIMED_OUT))
                    continue
                ts, offset, epoch = lookup(log, timestamp, committed)
                partitions.append(
                    _PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.NONE,
                        timestamp=ts,
                        offset=offset,
                        leader_epoch=epoch,
                    )
                )
            except (KafkaError, _Refused) as exc:
                code = exc.code if isinstance(exc, _Refused) else error_code_for(exc)
                partitions.append(_error(index, code))
        topics.append(_TopicResponse(name=topic.name, partitions=partitions))
    return topics


class _Refused(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code
