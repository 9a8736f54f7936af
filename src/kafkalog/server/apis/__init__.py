"""The built-in API handlers, one module per API or family; importing a module registers its handlers.

Phase 1: ApiVersions, Metadata, Produce, Fetch, ListOffsets, CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs, IncrementalAlterConfigs, DeleteRecords and InitProducerId. Phase 2: consumer groups
(:mod:`.groups`: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups,
DeleteGroups; :mod:`.offsets`: OffsetCommit, OffsetFetch) and transactions (:mod:`.transactions`:
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit; transactional InitProducerId). A new family is
a new module here that registers its handlers with :func:`kafkalog.server.dispatch.api`, plus its name in
:data:`MODULES`.
"""

from __future__ import annotations

import importlib
from typing import Final

from kafkalog.server.dispatch import REGISTRY, Registry

__all__ = ["MODULES", "registry"]

#: Handler modules of this package, imported (and so registered) by :func:`registry`.
MODULES: Final = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "topics",
    "configs",
    "delete_records",
    "init_producer_id",
    "groups",
    "offsets",
    "transactions",
)


def registry() -> Registry:
    """:data:`~kafkalog.server.dispatch.REGISTRY` with every module of :data:`MODULES` imported."""
    for name in MODULES:
        importlib.import_module(f"{__name__}.{name}")
    return REGISTRY
