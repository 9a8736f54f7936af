"""InitProducerId (key 22): producer ids for idempotent producers.

Versions 0-6. A request without a transactional id gets a fresh producer id at epoch 0 — always, even when it
names its current id and epoch (v3+), as Kafka's coordinator treats idempotent producers. Ids come from
:class:`~kafkalog.server.producer_ids.ProducerIdManager`, so they are never reused in a data directory.

Transactional ids belong to the transaction coordinator (a later phase): until one is registered, such a
request is answered NOT_COORDINATOR, which is what a broker that is not the transaction coordinator says.
"""

from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from kafkalog.errors import KafkaError
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.protocol import Message

__all__ = ["handle_init_producer_id"]


@api(ApiKey.InitProducerId)
async def handle_init_producer_id(ctx: RequestContext, request: Message) -> Message:
    """A new producer id at epoch 0 for an idempotent producer."""
    if request.transactional_id is not None:
        return ctx.response(
            throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR, producer_id=-1, producer_epoch=-1
        )
    try:
        pid = await ctx.broker.run_blocking(ctx.broker.producer_ids.next_id)
    except KafkaError as exc:
        return ctx.response(
            throttle_time_ms=0, error_code=error_code_for(exc), producer_id=-1, producer_epoch=-1
        )
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
