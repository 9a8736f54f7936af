"""How many partitions a :class:`~kafkalog.manager.LogManager` may create: the checks made before any is.

Invariant owned here: a request for new partitions is refused with
:class:`~kafkalog.errors.PolicyViolationError` (Kafka's POLICY_VIOLATION) **before anything is created** when

* it asks for more than ``max.partitions.per.request`` partitions at once (one ``create_topic`` /
  ``add_partitions`` call, one CreateTopics or CreatePartitions request): Kafka's KRaft controller likewise
  refuses an "excessively large batch operation" with POLICY_VIOLATION;
* the manager would then hold more than ``max.partitions`` partitions in all, internal topics included
  (the limit KIP-578 proposed; Kafka releases have none, and the error code KIP-578 proposed,
  RESOURCE_LIMIT_REACHED, is not in the protocol, so the closest code clients know is used);
* the new partitions would need more file descriptors than the process may still open: each new partition
  keeps :data:`DESCRIPTORS_PER_PARTITION` open (its active segment's ``.log``, ``.index`` and
  ``.timeindex``), counted against the soft ``RLIMIT_NOFILE`` minus the descriptors in use minus
  :data:`DESCRIPTOR_RESERVE` (kept for connections, checkpoint writes and segment rolls). Without the check a
  topic is half created when ``open`` fails with EMFILE.

The checks read nothing from disk and change nothing; the manager runs them under its lock.
"""

from __future__ import annotations

import os
import resource
from typing import Final

from kafkalog.errors import PolicyViolationError
from kafkalog.log.config import ManagerConfig

__all__ = [
    "DESCRIPTORS_PER_PARTITION",
    "DESCRIPTOR_RESERVE",
    "check_new_partitions",
    "descriptors_available",
]

#: Descriptors a newly created partition keeps open: its active segment's ``.log``, ``.index``, ``.timeindex``.
DESCRIPTORS_PER_PARTITION: Final = 3
#: Descriptors left free for sockets, checkpoint writes and segment rolls when new partitions are counted.
DESCRIPTOR_RESERVE: Final = 64


def _descriptors_in_use() -> int:
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            return max(len(os.listdir(listing)) - 1, 0)  # the listing's own descriptor
        except OSError:
            continue
    return 0


def descriptors_available() -> int | None:
    """Descriptors this process may still open, less :data:`DESCRIPTOR_RESERVE` (None: no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return soft - _descriptors_in_use() - DESCRIPTOR_RESERVE


def check_new_partitions(
    config: ManagerConfig, new: int, current_total: int, request_total: int | None = None
) -> None:
    """Refuse ``new`` partitions (see the module doc) given the ``current_total`` the manager holds;
    ``request_total`` is what the whole request creates with them, when earlier parts of it already did
    (a Metadata request auto-creating several topics), else ``new``."""
    in_request = new if request_total is None else request_total
    if in_request > config.max_partitions_per_request:
        raise PolicyViolationError(
            f"Unable to create {in_request} partitions in one request: max.partitions.per.request is "
            f"{config.max_partitions_per_request}."
        )
    if current_total + new > config.max_partitions:
        raise PolicyViolationError(
            f"Unable to create {new} partitions: this node holds {current_total} partitions and "
            f"max.partitions is {config.max_partitions}."
        )
    available = descriptors_available()
    needed = new * DESCRIPTORS_PER_PARTITION
    if available is not None and needed > available:
        raise PolicyViolationError(
            f"Unable to create {new} partitions: they need {needed} file descriptors "
            f"({DESCRIPTORS_PER_PARTITION} each) but only {max(available, 0)} are free under the "
            f"process's RLIMIT_NOFILE (ulimit -n) after a reserve of {DESCRIPTOR_RESERVE}."
        )
