"""Classic consumer groups: the group coordinator and Kafka's ``__consumer_offsets`` record formats.

Modules: :mod:`~kafkalog.server.groups.records` (the OffsetCommit / GroupMetadata key and value formats),
:mod:`~kafkalog.server.groups.group` (one group's state machine and members, no I/O),
:mod:`~kafkalog.server.groups.loader` (reading ``__consumer_offsets`` back at startup) and
:mod:`~kafkalog.server.groups.coordinator` (:class:`GroupCoordinator`: the protocol operations, timers,
storage in and loading from ``__consumer_offsets``). The API handlers are in
:mod:`kafkalog.server.apis.groups` and :mod:`kafkalog.server.apis.offsets`.
"""

from __future__ import annotations

from kafkalog.server.groups.coordinator import GroupCoordinator
from kafkalog.server.groups.group import Group, GroupState

__all__ = ["Group", "GroupCoordinator", "GroupState"]
