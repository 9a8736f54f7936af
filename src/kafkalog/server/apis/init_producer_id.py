"""InitProducerId (key 22): producer ids for idempotent and transactional producers.

Versions 0-6. A request without a transactional id gets a fresh producer id at epoch 0 — always, even when it
names its current id and epoch (v3+), as Kafka's coordinator treats idempotent producers. Ids come from
:class:`~kafkalog.server.producer_ids.ProducerIdManager`, so they are never reused in a data directory.

A request with a transactional id goes to the transaction coordinator
(:class:`~kafkalog.server.txn.coordinator.TransactionCoordinator`): a new id gets epoch 0, a known one a
bumped epoch that fences older producers (aborting their ongoing transaction). An empty transactional id is
INVALID_REQUEST; PRODUCER_FENCED is reported as INVALID_PRODUCER_EPOCH below v4, which does not know it.
KIP-939's ``keep_prepared_txn`` (v6) is not supported (INVALID_REQUEST when set).
"""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafkalog.errors import KafkaError
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message

__all__ = ["handle_init_producer_id"]


def _answer(ctx: RequestContext, code: ErrorCode, pid: int = -1, epoch: int = -1) -> Message:
    return ctx.response(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)


@api(ApiKey.InitProducerId)
async def handle_init_producer_id(ctx: RequestContext, request: Message) -> Message:
    """A producer id and epoch: fresh for an idempotent producer, from the coordinator for a transactional one."""
    version = ctx.api_version
    txn_id = request.transactional_id
    if txn_id is not None:
        txns = ctx.broker.transactions
        if txns is None:
            return _answer(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if version >= 6 and (request.keep_prepared_txn or request.enable2_pc):
            return _answer(ctx, ErrorCode.INVALID_REQUEST)
        expected_pid = int(request.producer_id) if version >= 3 else -1
        expected_epoch = int(request.producer_epoch) if version >= 3 else -1
        code, pid, epoch = await txns.init_producer_id(
            txn_id, int(request.transaction_timeout_ms), expected_pid, expected_epoch
        )
        if code is ErrorCode.PRODUCER_FENCED and version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return _answer(ctx, code, pid, epoch)
    try:
        pid = await ctx.broker.run_blocking(ctx.broker.producer_ids.next_id)
    except KafkaError as exc:
        return _answer(ctx, error_code_for(exc))
    return _answer(ctx, ErrorCode.NONE, pid, 0)
