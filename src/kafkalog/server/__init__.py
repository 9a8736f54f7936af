"""``kafkalog serve``: a Kafka wire-protocol server over a :class:`~kafkalog.manager.LogManager`.

Unmodified Kafka clients (Java ``kafka-clients``, librdkafka / confluent-kafka, kafka-python) produce to and
fetch from a kafkalog data directory as from a one-node Kafka cluster: node 0 leads every partition, asyncio
serves the connections, and the data directory stays byte-compatible with Kafka's.

Embedding (tests, applications)::

    from kafkalog.server import KafkaServer

    with KafkaServer("data", port=0) as server:         # LogManager + asyncio loop on a background thread
        producer = KafkaProducer(bootstrap_servers=server.bootstrap)   # "127.0.0.1:<port>"

From the command line: ``kafkalog serve DIR --listen 127.0.0.1:9092`` (SIGTERM/SIGINT shut down gracefully:
in-flight requests finish, then the LogManager flushes and writes its checkpoints and clean-shutdown marker).

Modules (each docstring states what it owns): :mod:`~kafkalog.server.protocol` (wire glue over kafka-python's
compiled Kafka JSON schemas: no schema is written here), :mod:`~kafkalog.server.connection` (framing, one
request at a time per connection, what closes a connection), :mod:`~kafkalog.server.dispatch` (the API
registry), :mod:`~kafkalog.server.context` (:class:`RequestContext`), :mod:`~kafkalog.server.broker` (state
shared by handlers), :mod:`~kafkalog.server.errors` (the exception -> Kafka error code table),
:mod:`~kafkalog.server.notify` (fetch long-poll wake-ups), :mod:`~kafkalog.server.producer_ids`,
:mod:`~kafkalog.server.config` (:class:`ServerConfig`), :mod:`~kafkalog.server.memory_pool`
(``queued.max.request.bytes``), :mod:`~kafkalog.server.server` (lifecycle, accepting, connection limits),
:mod:`kafkalog.server.apis` (one module per API family), and the coordinators: :mod:`kafkalog.server.groups`
(classic consumer groups, ``__consumer_offsets``; ``loader`` reads it back at startup), :mod:`kafkalog.server.txn` (transactions,
``__transaction_state``), with :mod:`~kafkalog.server.internal_topics` (names, ``hash % n`` partitioning,
coordinator appends) and :mod:`~kafkalog.server.wire` (primitives of the internal topics' record formats).

The handler contract (how to add an API, e.g. consumer groups or transactions)
-------------------------------------------------------------------------------

1. Write a module in :mod:`kafkalog.server.apis` and add its name to ``apis.MODULES``. In it, register one
   coroutine per API key::

       from kafka.protocol.api_key import ApiKey
       from kafkalog.server.dispatch import api

       @api(ApiKey.Heartbeat)                      # optional: min_version=..., max_version=...
       async def handle_heartbeat(ctx: RequestContext, request: Message) -> Message:
           return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE)

   The version range defaults to the one of Kafka's JSON schema for the key (as shipped by kafka-python) and
   may only be narrowed. ApiVersions advertises exactly the registered keys and ranges; a request at a
   version outside them closes the connection (ApiVersions itself gets error 35 in its v0 layout).
2. ``request`` is the kafka-python message decoded at ``ctx.api_version`` (fields in snake_case, nested
   structs as objects; fields absent at that version read as their schema default). Build the response with
   ``ctx.response(**fields)`` (the API's response class at the request's version; unset fields take schema
   defaults) and nested structs with kafka-python's classes (``FooResponse.Bar.Baz(...)``). Return None to
   send no response (only Produce with ``acks=0`` does); call ``ctx.close_connection()`` to close after it.
3. Report failures as Kafka error codes **in the response** (per partition or per resource, as the API
   defines): map a :mod:`kafkalog.errors` exception with :func:`~kafkalog.server.errors.error_code_for`
   (the one table) and extend that table rather than mapping locally. An exception that escapes a handler
   is treated as a server bug: it is logged with its traceback and the connection is closed (the server and
   every other connection keep going); it must never leave a log half-changed (the Log API guarantees that
   a refused append changes nothing).
4. Handlers run on the event loop. Cheap calls (small appends, reads, metadata) run inline; anything that
   fsyncs goes through ``await ctx.broker.run_blocking(fn, *args)``, and so does a large append or read when
   ``ctx.broker.offload(nbytes)`` says the thread hop pays (other connections wait for the loop). Views of
   the request frame in the decoded request (Produce records) may be changed in place only when
   ``ctx.owns_frame``. A handler that
   changes a partition (append, log start offset) calls ``ctx.broker.notify(TopicPartition(...))`` so that
   long-polling fetches re-read it. Requests of one connection are handled one at a time, in order.
5. Shared state lives on :class:`~kafkalog.server.broker.Broker` (``ctx.broker``): ``manager``, ``config``,
   ``node_id``, ``get_log``, ``topic_for_id``, ``leader_epoch``, ``producer_ids``. A coordinator (groups,
   transactions) keeps its own state in its module or on an object it attaches at startup, and stores
   durable state in Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``) through the
   LogManager, so the data directory stays Kafka's.

Phase 1 serves ApiVersions 0-4, Metadata 0-13, Produce 3-13, Fetch 4-18, ListOffsets 1-11, CreateTopics 2-7,
DeleteTopics 1-6, CreatePartitions 0-3, DescribeConfigs 1-4, IncrementalAlterConfigs 0-1, DeleteRecords 0-2
and InitProducerId 0-6. Phase 2 adds consumer groups (FindCoordinator 0-6, JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 2-9, OffsetFetch 1-9, ListGroups 0-5, DescribeGroups 0-6,
DeleteGroups 0-2) and transactions (transactional InitProducerId, AddPartitionsToTxn 0-3, AddOffsetsToTxn
0-4, EndTxn 0-4, TxnOffsetCommit 0-4); see ``docs/server.md``. The coordinators are attached to the
:class:`~kafkalog.server.broker.Broker` at startup (``broker.groups``, ``broker.transactions``).
"""

from __future__ import annotations

from kafkalog.server.config import ServerConfig
from kafkalog.server.context import RequestContext
from kafkalog.server.dispatch import REGISTRY, ApiSpec, Registry, api
from kafkalog.server.errors import ErrorCode, error_code_for
from kafkalog.server.server import AsyncKafkaServer, KafkaServer, default_registry, serve

__all__ = [
    "REGISTRY",
    "ApiSpec",
    "AsyncKafkaServer",
    "ErrorCode",
    "KafkaServer",
    "Registry",
    "RequestContext",
    "ServerConfig",
    "api",
    "default_registry",
    "error_code_for",
    "serve",
]
