"""Tiered storage for kafkalog's own logs (KIP-405): Kafka's ``RemoteStorageManager``, the topic-based remote
log metadata manager and the ``RemoteLogManager``.

* :mod:`~kafkalog.tiering.config`: :class:`RemoteLogManagerConfig` (Kafka's ``remote.log.*`` names and the
  Aiven plugin's ``rsm.config.*``);
* :mod:`~kafkalog.tiering.rsm`: :class:`RemoteStorageManager`, :class:`LogSegmentData`, :class:`IndexType`
  and :class:`AivenRemoteStorageManager` (the Aiven plugin's layout over an ObjectStore, which
  :mod:`kafkalog.tiered` reads);
* :mod:`~kafkalog.tiering.rlmm`: :class:`TopicBasedRemoteLogMetadataManager` (``__remote_log_metadata`` kept as
  ordinary Logs of the data directory);
* :mod:`~kafkalog.tiering.index_cache`: :class:`RemoteIndexCache` (fetched remote indexes, bounded in bytes);
* :mod:`~kafkalog.tiering.rlm`: :class:`RemoteLogManager` (copy, expiration, cleanup, reads) and
  :class:`RemoteTierReader` (the :class:`~kafkalog.log.tiers.RemoteLogReader` a Log falls through to).

Layering: beside ``cleaner`` and ``readonly``; imports ``tiered``, ``remote``, ``log``, ``storage``,
``objstore``, ``records``; the manager imports it. It runs no threads.
"""

from kafkalog.tiering.config import RemoteLogManagerConfig, RsmConfig
from kafkalog.tiering.index_cache import RemoteIndexCache, RemoteIndexEntry
from kafkalog.tiering.rlm import METRIC_NAMES, RemoteLogManager, RemoteTierReader, topic_id_partition
from kafkalog.tiering.rlmm import TopicBasedRemoteLogMetadataManager
from kafkalog.tiering.rsm import AivenRemoteStorageManager, IndexType, LogSegmentData, RemoteStorageManager

__all__ = [
    "METRIC_NAMES",
    "AivenRemoteStorageManager",
    "IndexType",
    "LogSegmentData",
    "RemoteIndexCache",
    "RemoteIndexEntry",
    "RemoteLogManager",
    "RemoteLogManagerConfig",
    "RemoteStorageManager",
    "RemoteTierReader",
    "RsmConfig",
    "TopicBasedRemoteLogMetadataManager",
    "topic_id_partition",
]
