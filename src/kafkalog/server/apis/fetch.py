"""Fetch (key 1): read each partition up to its bound, long-polling until ``min_bytes`` or ``max_wait_ms``.

Versions 4-18 (v13+ names topics by id). Per partition, in request order:

* the read starts at the batch holding ``fetch_offset`` and stops at the high watermark
  (``read_uncommitted``) or the last stable offset (``read_committed``), whole batches only;
* a partition named more than once is read once, at the place of its first entry with the parameters of its
  last (Kafka's ``LinkedHashMap`` of fetch data), so the response has one entry per distinct partition;
* byte limits are Kafka's: ``partition_max_bytes`` per partition and for the response the request's
  ``max_bytes`` capped by the broker's ``fetch.max.bytes`` (55 MiB), except that the first partition with
  data returns at least one whole batch (so a batch larger than the limits never stalls a consumer);
* ``read_committed`` responses carry the aborted transactions overlapping the returned range (from the
  ``.txnindex`` files) so the client can drop aborted records; ``read_uncommitted`` sends null;
* an offset past the log end offset or below the log start offset is OFFSET_OUT_OF_RANGE; a
  ``current_leader_epoch`` above the log's is UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH.

Long poll (Kafka's ``DelayedFetch``): while the response has fewer than ``min_bytes`` and no partition
failed, the fetch waits — registered on its partitions **before** each read after the first, so no append
is missed — until a change of one of them (append, DeleteRecords) or ``max_wait_ms``, then reads again.
A fetch answered by its first read registers nothing. Shutdown wakes it.

Fetch sessions (KIP-227) are not kept: the response's ``session_id`` is 0, which tells clients to send full
fetches; a request naming a session id is FETCH_SESSION_ID_NOT_FOUND, as a broker without session slots
answers. Reads above ``inline_io_max_bytes`` (the sum of the partition limits) run on the I/O threads while
other connections have requests waiting for the event loop (:meth:`~kafkalog.server.broker.Broker.offload`),
and so do reads of more than :data:`INLINE_MAX_PARTITIONS` partitions.

Tiered storage (KIP-405), as Kafka's ``ReplicaManager``: a partition whose fetch offset is below its local log
start offset but at or above its log start offset is read from the remote tier, never on the event loop nor
on an I/O thread. In request order, with the other partitions' reads, each such partition

* finds the remote fetch quota (``remote.log.manager.fetch.max.bytes.per.second``) exceeded: no read, and it
  is answered with no records and no error (KIP-956), the throttle time recorded in
  ``remote-fetch-throttle-time``; a fetch whose remote partitions were all skipped long-polls as any other
  (``max_wait_ms``, ``min_bytes``), so its consumer retries after the wait, not in a busy loop;
* or, with bytes left in the response, has its limit reserved from ``max_bytes`` (so the partitions after it
  no longer get one whole batch past their limits: Kafka's ``readFromLog``), and once the local partitions
  are read its read is submitted to the remote reader pool (``RemoteLogManager.async_read``:
  ``remote.log.reader.threads``, ``remote.log.reader.max.pending.tasks``); a full queue answers it at once
  with UNKNOWN_SERVER_ERROR (Kafka's mapping of the ``RejectedExecutionException``), never with a wait.

A fetch that submitted remote reads waits for them on the event loop (Kafka's ``DelayedRemoteFetch``) at most
``remote.fetch.max.wait.ms``, whatever the request's ``max_wait_ms`` (Kafka's KIP-1018: a small client wait
would otherwise never let a remote read finish), and is then answered at once (no ``min_bytes`` long poll
after it); a read not done by then (or when shutdown begins) is cancelled if it has not started, and its
partition answered with no records and no error, so the consumer asks again. ``log_start_offset`` in the
answer is the log's, over both tiers; only an offset below it (or past the log end) is OFFSET_OUT_OF_RANGE.
A remote read that fails is that partition's error (``RemoteStorageError``: UNKNOWN_SERVER_ERROR, as Kafka
answers a ``RemoteStorageException``), never the whole fetch's.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse

from kafkalog.errors import KafkaError, RejectedExecutionError
from kafkalog.log.log import Log
from kafkalog.log.names import TopicPartition
from kafkalog.log.types import FetchIsolation
from kafkalog.records import MemoryRecords
from kafkalog.server.broker import ZERO_UUID, Broker
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message
from kafkalog.storage.txn_index import AbortedTxn
from kafkalog.storage.types import FetchDataInfo

if TYPE_CHECKING:
    from kafkalog.tiering import RemoteLogManager

__all__ = [
    "INLINE_MAX_PARTITIONS",
    "FetchTarget",
    "RemoteRead",
    "handle_fetch",
    "leader_epoch_error",
    "read_partitions",
]

_log = logging.getLogger(__name__)

_TopicResponse = FetchResponse.FetchableTopicResponse
_PartitionData = FetchResponse.FetchableTopicResponse.PartitionData
_Aborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction
_MAX_WAIT_MS = 30_000
#: A fetch of more (distinct) partitions reads them on the I/O threads, whatever their byte limits: the
#: event loop keeps serving other connections meanwhile.
INLINE_MAX_PARTITIONS: Final = 1_000


@dataclass(frozen=True, slots=True)
class FetchTarget:
    """One partition of a fetch request, resolved to a topic name (None: unknown topic id)."""

    topic: str | None
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


def leader_epoch_error(requested: int, current: int) -> ErrorCode | None:
    """Kafka's leader-epoch fencing: None when ``requested`` is -1 (unknown) or current."""
    if requested < 0 or requested == current:
        return None
    return ErrorCode.UNKNOWN_LEADER_EPOCH if requested > current else ErrorCode.FENCED_LEADER_EPOCH


@dataclass(slots=True)
class RemoteRead:
    """A partition of a fetch that the remote tier answers: where its answer goes and what to read."""

    #: position of the partition's answer in the response
    index: int
    target: FetchTarget
    log: Log
    #: its byte limit (reserved from the response's ``max_bytes``) and whether one whole batch may exceed it
    limit: int
    min_one_message: bool
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


def _failed(index: int, code: ErrorCode) -> Message:
    return _PartitionData(
        partition_index=index,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


def _in_remote_tier(log: Log, fetch_offset: int) -> bool:
    """Whether ``fetch_offset`` is held by the remote tier only (Kafka's ``handleOffsetOutOfRangeError`` test)."""
    return log.remote_log_enabled and log.log_start_offset <= fetch_offset < log.local_log_start_offset


def read_partitions(
    broker: Broker,
    targets: list[FetchTarget],
    isolation: FetchIsolation,
    max_bytes: int,
    remote: list[RemoteRead] | None = None,
) -> tuple[list[Message], int, bool]:
    """Read every target: (partition responses in order, record bytes, whether any partition failed).

    With ``remote`` (a list) and tiering, a target whose offset only the remote tier holds is not read: it gets
    an empty answer and, unless the remote fetch quota is exceeded (the throttle time is recorded) or no bytes
    are left for it, a :class:`RemoteRead` appended to ``remote``, its limit reserved from ``max_bytes`` as
    Kafka's ``readFromLog`` does (the partitions after it no longer get ``min_one_message``)."""
    out: list[Message] = []
    total = 0
    reserved = 0
    failed = False
    committed = isolation is FetchIsolation.TXN_COMMITTED
    rlm = broker.remote_log_manager
    for t in targets:
        if t.topic is None:
            out.append(_failed(t.partition, ErrorCode.UNKNOWN_TOPIC_ID))
            failed = True
            continue
        try:
            log = broker.get_log(t.topic, t.partition)
            fenced = leader_epoch_error(t.current_leader_epoch, broker.leader_epoch(log))
            if fenced is not None:
                out.append(_failed(t.partition, fenced))
                failed = True
                continue
            limit = max(0, min(t.max_bytes, max_bytes - total - reserved))
            hw, lso, start = log.high_watermark, log.last_stable_offset, log.log_start_offset
            # Kafka's minOneMessage: nothing read, nor reserved for a remote read, before this partition
            first = total == 0 and reserved == 0
            if rlm is not None and remote is not None and _in_remote_tier(log, t.fetch_offset):
                out.append(_answer(t.partition, hw, lso, start, b"", [] if committed else None))
                throttle_ms = rlm.get_fetch_throttle_time_ms()
                if throttle_ms > 0:  # KIP-956: no remote read in this fetch, no error, nothing reserved
                    rlm.fetch_throttle_time_sensor.record(throttle_ms)
                elif limit > 0:
                    remote.append(RemoteRead(len(out) - 1, t, log, limit, first, hw, lso, start))
                    reserved += limit
                continue
            info = log.read(t.fetch_offset, limit, isolation, min_one_message=first)
            mem = (
                info.records if isinstance(info.records, MemoryRecords) else info.records.to_memory_records()
            )
            records = mem.buffer
            aborted = info.aborted_transactions
        except KafkaError as exc:
            out.append(_failed(t.partition, error_code_for(exc)))
            failed = True
            continue
        total += len(records)
        out.append(_answer(t.partition, hw, lso, start, records, (aborted or []) if committed else None))
    return out, total, failed


def _answer(
    partition: int,
    hw: int,
    lso: int,
    start: int,
    records: bytes | memoryview,
    aborted: list[AbortedTxn] | None,
) -> Message:
    return _PartitionData(
        partition_index=partition,
        error_code=ErrorCode.NONE,
        high_watermark=hw,
        last_stable_offset=lso,
        log_start_offset=start,
        aborted_transactions=(
            None
            if aborted is None
            else [_Aborted(producer_id=a.producer_id, first_offset=a.first_offset) for a in aborted]
        ),
        preferred_read_replica=-1,
        records=records,
    )


async def _read_remote(
    broker: Broker,
    rlm: RemoteLogManager,
    reads: list[RemoteRead],
    parts: list[Message],
    isolation: FetchIsolation,
) -> tuple[bool, int, bool]:
    """Read the remote partitions of a fetch on the reader pool and put their answers in ``parts`` (module
    doc): (whether a read was submitted, record bytes, whether a partition failed)."""
    committed = isolation is FetchIsolation.TXN_COMMITTED
    submitted: list[tuple[RemoteRead, Future[FetchDataInfo]]] = []
    failed = False
    for r in reads:
        try:
            future = rlm.async_read(r.log, r.target.fetch_offset, r.limit, isolation, r.min_one_message)
        except RejectedExecutionError as exc:
            _log.warning(
                "Unable to fetch data from remote storage for %s-%d: %s",
                r.target.topic,
                r.target.partition,
                exc,
            )
            parts[r.index] = _failed(r.target.partition, error_code_for(exc))
            failed = True
            continue
        submitted.append((r, future))
    if not submitted:
        return False, 0, failed
    waits = [asyncio.wrap_future(future) for _, future in submitted]
    await broker.wait_remote(waits, rlm.config.remote_fetch_max_wait_ms / 1000)
    total = 0
    if not broker.closing and not all(wait.done() for wait in waits):
        rlm.delayed_remote_fetch_expires.mark()  # Kafka's DelayedRemoteFetchMetrics ExpiresPerSec
    for (r, future), wait in zip(submitted, waits, strict=True):
        if not wait.done():  # expired (or shutdown): cancel a read not yet started, answer it empty
            wait.cancel()
            continue
        if future.cancelled():  # the pool shut down (the manager closes) before the read started
            continue
        error = future.exception()
        if error is not None:
            if not isinstance(error, KafkaError):
                _log.error(
                    "Error reading the remote data of %s-%d",
                    r.target.topic,
                    r.target.partition,
                    exc_info=error,
                )
            parts[r.index] = _failed(r.target.partition, error_code_for(error))
            failed = True
            continue
        info = future.result()
        mem = info.records if isinstance(info.records, MemoryRecords) else info.records.to_memory_records()
        records = mem.buffer
        total += len(records)
        aborted = (info.aborted_transactions or []) if committed else None
        parts[r.index] = _answer(
            r.target.partition, r.high_watermark, r.last_stable_offset, r.log_start_offset, records, aborted
        )
    return True, total, failed


def _targets(ctx: RequestContext, request: Message) -> list[FetchTarget]:
    """The request's partitions, each once: a partition named again replaces the earlier entry's parameters
    and keeps its position (Kafka's ``FetchRequest.fetchData``, a ``LinkedHashMap``), so repeating one
    partition 500k times costs one read, not 500k."""
    by_id = ctx.api_version >= 13
    out: dict[tuple[uuid.UUID | str | None, int], FetchTarget] = {}
    for topic in request.topics:
        topic_id: uuid.UUID = (topic.topic_id or ZERO_UUID) if by_id else ZERO_UUID
        name = ctx.broker.topic_for_id(topic_id) if by_id else topic.topic
        key_topic = topic_id if by_id else name
        for p in topic.partitions:
            target = FetchTarget(
                name,
                topic_id,
                int(p.partition),
                int(p.fetch_offset),
                int(p.partition_max_bytes),
                int(p.current_leader_epoch) if ctx.api_version >= 9 else -1,
            )
            out[(key_topic, target.partition)] = target
    return list(out.values())


def _group(ctx: RequestContext, targets: list[FetchTarget], partitions: list[Message]) -> list[Message]:
    """Topic responses: consecutive partitions of one topic together (as Kafka's ``FetchResponse.of``)."""
    by_id = ctx.api_version >= 13
    out: list[Message] = []
    previous: uuid.UUID | str | None = None
    parts: list[Message] = []
    for target, part in zip(targets, partitions, strict=True):
        key = target.topic_id if by_id else target.topic
        if not out or key != previous:
            parts = []
            if by_id:
                out.append(_TopicResponse(topic_id=target.topic_id, partitions=parts))
            else:
                out.append(_TopicResponse(topic=target.topic, partitions=parts))
            previous = key
        parts.append(part)
    return out


@api(ApiKey.Fetch)
async def handle_fetch(ctx: RequestContext, request: Message) -> Message:
    """Read the requested partitions, waiting for ``min_bytes`` at most ``max_wait_ms`` (module doc)."""
    broker = ctx.broker
    if int(request.session_id) != 0 or int(request.session_epoch) not in (0, -1):
        return ctx.response(
            throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
    isolation = (
        FetchIsolation.TXN_COMMITTED if int(request.isolation_level) == 1 else FetchIsolation.HIGH_WATERMARK
    )
    max_bytes = max(0, min(int(request.max_bytes), broker.config.fetch_max_bytes))
    min_bytes = int(request.min_bytes)
    entries = sum(len(topic.partitions) for topic in request.topics)
    if entries > INLINE_MAX_PARTITIONS:  # the loop serves other connections while this runs
        targets = await broker.run_blocking(_targets, ctx, request)
    else:
        targets = _targets(ctx, request)
    wait_s = min(max(0, int(request.max_wait_ms)), _MAX_WAIT_MS) / 1000
    deadline = time.monotonic() + wait_s
    limits = sum(t.max_bytes for t in targets)
    many = len(targets) > INLINE_MAX_PARTITIONS
    rlm = broker.remote_log_manager
    # Kafka's shape: read first; only a fetch that must wait registers on its partitions (DelayedFetch), and
    # reads again once registered, so no append between the two reads is missed. Remote partitions are read
    # on the remote reader pool (module doc).
    tps: list[TopicPartition] = []
    while True:
        with broker.waiters.watch(tps) as changed:
            remote: list[RemoteRead] | None = [] if rlm is not None else None
            if many or broker.offload(limits):
                parts, total, failed = await broker.run_blocking(
                    read_partitions, broker, targets, isolation, max_bytes, remote
                )
            else:
                parts, total, failed = read_partitions(broker, targets, isolation, max_bytes, remote)
            if rlm is not None and remote:
                submitted, remote_total, remote_failed = await _read_remote(
                    broker, rlm, remote, parts, isolation
                )
                total += remote_total
                failed = failed or remote_failed
                if submitted:  # DelayedRemoteFetch: answered once its remote reads are done or expired
                    break
            remaining = deadline - time.monotonic()
            if total >= min_bytes or failed or remaining <= 0 or broker.closing or not targets:
                break
            if not tps:
                tps = [TopicPartition(t.topic, t.partition) for t in targets if t.topic is not None]
                continue
            await broker.waiters.wait(changed, remaining)
    response = ctx.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=_group(ctx, targets, parts)
    )
    if many:  # 500k small objects take a while to free: on an I/O thread, not the loop
        await broker.run_blocking(targets.clear)
    return response
